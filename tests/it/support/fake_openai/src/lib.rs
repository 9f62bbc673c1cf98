//! A scriptable OpenAI-compatible server for integration tests: a real axum server on
//! 127.0.0.1:0 speaking the real wire formats of `POST /v1/chat/completions` (streamed as
//! server-sent events), `POST /v1/audio/transcriptions` (multipart) and `POST /v1/audio/speech`.
//!
//! Each endpoint follows a script (reply text, delays, failures) that a test may change at any
//! time; chat scripts can also be queued for the next requests only. Every request is recorded
//! (headers and body) so tests can check what the kiosk sent.
//!
//! A crate of its own (a dev-dependency of docent), so that the integration tests and the
//! benchmarks share it and each uses only the part it needs.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Multipart, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// How an endpoint fails instead of answering.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// This HTTP status with an OpenAI error body `{"error": {"message": ..}}`.
    Status(u16, String),
    /// Not the protocol: non-JSON `data:` lines for chat, a non-JSON or odd-length body for the
    /// others.
    Garbage,
    /// Accepts the request and never answers.
    Hang,
}

/// The script of `/v1/chat/completions`.
#[derive(Debug, Clone)]
pub struct Chat {
    /// The whole reply.
    pub reply: String,
    /// Number of content deltas the reply is cut into (at least 1).
    pub deltas: usize,
    /// Wait before the response headers.
    pub first_byte_delay: Duration,
    /// Wait before each delta after the first.
    pub chunk_delay: Duration,
    /// Fail instead of answering.
    pub failure: Option<Failure>,
    /// Stop streaming (without ending the response) after this many deltas.
    pub stall_after: Option<usize>,
    /// Cut the connection after this many deltas: the chunked body never ends, the socket is
    /// closed under the client.
    pub cut_after: Option<usize>,
    /// Send a `data:` line that is not a completion chunk after this many deltas, then go on
    /// as if nothing happened.
    pub garbage_after: Option<usize>,
}

impl Chat {
    pub fn reply(text: &str) -> Chat {
        Chat {
            reply: text.to_string(),
            deltas: 4,
            first_byte_delay: Duration::ZERO,
            chunk_delay: Duration::ZERO,
            failure: None,
            stall_after: None,
            cut_after: None,
            garbage_after: None,
        }
    }

    pub fn failing(failure: Failure) -> Chat {
        Chat {
            failure: Some(failure),
            ..Chat::reply("")
        }
    }

    pub fn deltas(mut self, n: usize) -> Chat {
        self.deltas = n.max(1);
        self
    }

    pub fn first_byte_delay(mut self, d: Duration) -> Chat {
        self.first_byte_delay = d;
        self
    }

    pub fn chunk_delay(mut self, d: Duration) -> Chat {
        self.chunk_delay = d;
        self
    }

    pub fn stall_after(mut self, n: usize) -> Chat {
        self.stall_after = Some(n);
        self
    }

    pub fn cut_after(mut self, n: usize) -> Chat {
        self.cut_after = Some(n);
        self
    }

    pub fn garbage_after(mut self, n: usize) -> Chat {
        self.garbage_after = Some(n);
        self
    }

    /// The deltas the reply is streamed as: `deltas` pieces of about equal length (cut on
    /// character boundaries, like tokens, not on words).
    pub fn pieces(&self) -> Vec<String> {
        let chars: Vec<char> = self.reply.chars().collect();
        if chars.is_empty() {
            return Vec::new();
        }
        let n = self.deltas.clamp(1, chars.len());
        (0..n)
            .map(|i| {
                chars[i * chars.len() / n..(i + 1) * chars.len() / n]
                    .iter()
                    .collect()
            })
            .collect()
    }
}

/// The script of `/v1/audio/transcriptions`.
#[derive(Debug, Clone)]
pub struct Transcription {
    pub text: String,
    /// The language heard, as OpenAI's `verbose_json` names it ("spanish"); sent only when the
    /// request asks for `verbose_json`, as OpenAI does.
    pub language: Option<String>,
    pub delay: Duration,
    pub failure: Option<Failure>,
}

impl Transcription {
    pub fn text(text: &str) -> Transcription {
        Transcription {
            text: text.to_string(),
            language: None,
            delay: Duration::ZERO,
            failure: None,
        }
    }
}

/// The script of `/v1/audio/speech`.
#[derive(Debug, Clone)]
pub struct Speech {
    /// Samples of 24 kHz mono audio per request (a 440 Hz tone).
    pub samples: usize,
    /// Answer a WAV at this rate instead of raw PCM.
    pub wav_rate: Option<u32>,
    pub delay: Duration,
    /// Voices refused with 400 and an OpenAI error body.
    pub rejected_voices: Vec<String>,
    pub failure: Option<Failure>,
}

impl Speech {
    /// `ms` milliseconds of speech per request.
    pub fn millis(ms: usize) -> Speech {
        Speech {
            samples: 24 * ms,
            wav_rate: None,
            delay: Duration::ZERO,
            rejected_voices: Vec::new(),
            failure: None,
        }
    }
}

/// One chat request as received.
#[derive(Debug, Clone)]
pub struct ChatCall {
    pub authorization: Option<String>,
    pub body: Value,
    pub at: Instant,
}

impl ChatCall {
    /// `(role, content)` of every message sent.
    pub fn messages(&self) -> Vec<(String, String)> {
        self.body["messages"]
            .as_array()
            .map(|all| {
                all.iter()
                    .map(|m| {
                        (
                            m["role"].as_str().unwrap_or("").to_string(),
                            m["content"].as_str().unwrap_or("").to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The system message ("" when there is none).
    pub fn system(&self) -> String {
        self.messages()
            .into_iter()
            .find(|(r, _)| r == "system")
            .map(|(_, c)| c)
            .unwrap_or_default()
    }

    /// The messages after the system message.
    pub fn conversation(&self) -> Vec<(String, String)> {
        self.messages()
            .into_iter()
            .filter(|(r, _)| r != "system")
            .collect()
    }
}

/// One transcription request as received.
#[derive(Debug, Clone)]
pub struct TranscriptionCall {
    pub authorization: Option<String>,
    pub content_type: Option<String>,
    /// The `file` part.
    pub file: Vec<u8>,
    pub file_name: Option<String>,
    pub file_type: Option<String>,
    /// Text parts by name (`model`, `language`, ...).
    pub fields: Vec<(String, String)>,
}

impl TranscriptionCall {
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One speech request as received.
#[derive(Debug, Clone)]
pub struct SpeechCall {
    pub authorization: Option<String>,
    pub body: Value,
    pub at: Instant,
}

#[derive(Default)]
struct Recorded {
    chats: Vec<ChatCall>,
    transcriptions: Vec<TranscriptionCall>,
    speeches: Vec<SpeechCall>,
}

struct Scripts {
    chat: Chat,
    chat_queue: VecDeque<Chat>,
    transcription: Transcription,
    speech: Speech,
}

struct Shared {
    scripts: Mutex<Scripts>,
    recorded: Mutex<Recorded>,
    /// Chat streams the client abandoned before their end.
    chats_aborted: AtomicUsize,
    /// Chat streams sent to their `[DONE]`.
    chats_completed: AtomicUsize,
    /// Requests (any endpoint) whose handler was dropped before it answered.
    requests_abandoned: AtomicUsize,
}

/// The running fake. Dropping it stops the server.
pub struct FakeOpenAi {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeOpenAi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeOpenAi {
    /// Starts a fake answering "Hello from the fake model." in 4 deltas, transcribing every
    /// utterance as "When does the museum close?" and speaking 200 ms of tone per request.
    pub async fn start() -> FakeOpenAi {
        FakeOpenAi::start_on("127.0.0.1:0".parse().expect("an address")).await
    }

    /// Starts the fake on `addr`: again where a stopped one answered, a provider back up.
    pub async fn start_on(addr: SocketAddr) -> FakeOpenAi {
        let shared = Arc::new(Shared {
            scripts: Mutex::new(Scripts {
                chat: Chat::reply("Hello from the fake model."),
                chat_queue: VecDeque::new(),
                transcription: Transcription::text("When does the museum close?"),
                speech: Speech::millis(200),
            }),
            recorded: Mutex::default(),
            chats_aborted: AtomicUsize::new(0),
            chats_completed: AtomicUsize::new(0),
            requests_abandoned: AtomicUsize::new(0),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .route("/v1/audio/transcriptions", post(transcription))
            .route("/v1/audio/speech", post(speech))
            .layer(DefaultBodyLimit::disable())
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .expect("fake binds");
        let addr = listener.local_addr().expect("fake address");
        let task = tokio::spawn(async move {
            use axum::serve::ListenerExt;
            let listener = listener.tap_io(|tcp| {
                let _ = tcp.set_nodelay(true);
            });
            let _ = axum::serve(listener, app).await;
        });
        FakeOpenAi { addr, shared, task }
    }

    /// The `base_url` to configure: `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The chat script for every request (after the queued ones).
    pub fn set_chat(&self, chat: Chat) {
        self.shared.scripts.lock().unwrap().chat = chat;
    }

    /// A chat script for the next request only (queued scripts are used in order).
    pub fn push_chat(&self, chat: Chat) {
        self.shared
            .scripts
            .lock()
            .unwrap()
            .chat_queue
            .push_back(chat);
    }

    pub fn set_transcription(&self, t: Transcription) {
        self.shared.scripts.lock().unwrap().transcription = t;
    }

    pub fn set_speech(&self, s: Speech) {
        self.shared.scripts.lock().unwrap().speech = s;
    }

    pub fn chats(&self) -> Vec<ChatCall> {
        self.shared.recorded.lock().unwrap().chats.clone()
    }

    pub fn transcriptions(&self) -> Vec<TranscriptionCall> {
        self.shared.recorded.lock().unwrap().transcriptions.clone()
    }

    pub fn speeches(&self) -> Vec<SpeechCall> {
        self.shared.recorded.lock().unwrap().speeches.clone()
    }

    pub fn chats_aborted(&self) -> usize {
        self.shared.chats_aborted.load(Ordering::SeqCst)
    }

    pub fn chats_completed(&self) -> usize {
        self.shared.chats_completed.load(Ordering::SeqCst)
    }

    pub fn requests_abandoned(&self) -> usize {
        self.shared.requests_abandoned.load(Ordering::SeqCst)
    }

    /// Waits until at least `n` chat requests were received; returns them all.
    pub async fn wait_chats(&self, n: usize, within: Duration) -> Vec<ChatCall> {
        let deadline = Instant::now() + within;
        loop {
            let chats = self.chats();
            if chats.len() >= n {
                return chats;
            }
            assert!(
                Instant::now() < deadline,
                "the fake received {} chat requests, expected {n} within {within:?}",
                chats.len()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits until `cond` holds of the fake (polling), panicking with `what` after `within`.
    pub async fn wait_until(
        &self,
        within: Duration,
        what: &str,
        cond: impl Fn(&FakeOpenAi) -> bool,
    ) {
        let deadline = Instant::now() + within;
        while !cond(self) {
            assert!(Instant::now() < deadline, "{what} (waited {within:?})");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// A `base_url` on 127.0.0.1 where nothing listens.
pub async fn closed_base_url() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}/v1")
}

/// Counts a handler dropped before it answered (the client went away).
struct Abandon<'a>(&'a AtomicUsize, bool);

impl Drop for Abandon<'_> {
    fn drop(&mut self) {
        if !self.1 {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

fn authorization(headers: &HeaderMap) -> Option<String> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

fn openai_error(status: u16, message: &str) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = json!({"error": {
        "message": message,
        "type": if status.is_server_error() { "server_error" } else { "invalid_request_error" },
        "param": null,
        "code": null,
    }});
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// Applies a failure that answers at once; `Hang` never returns.
async fn fail_now(failure: &Failure, garbage: &'static str) -> Response {
    match failure {
        Failure::Status(status, message) => openai_error(*status, message),
        Failure::Garbage => (StatusCode::OK, garbage).into_response(),
        Failure::Hang => std::future::pending().await,
    }
}

fn chunk(model: &str, delta: Value, finish: Option<&str>) -> Bytes {
    let v = json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    });
    Bytes::from(format!("data: {v}\n\n"))
}

async fn chat(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let mut guard = Abandon(&shared.requests_abandoned, false);
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    shared.recorded.lock().unwrap().chats.push(ChatCall {
        authorization: authorization(&headers),
        body: body.clone(),
        at: Instant::now(),
    });
    let script = {
        let mut s = shared.scripts.lock().unwrap();
        s.chat_queue.pop_front().unwrap_or_else(|| s.chat.clone())
    };
    tokio::time::sleep(script.first_byte_delay).await;
    let model = body["model"].as_str().unwrap_or("fake").to_string();
    if let Some(failure) = &script.failure {
        if *failure == Failure::Garbage && body["stream"] == true {
            guard.1 = true;
            let lines = "data: this is not json\n\ndata: {\"choices\": [\n\n";
            return (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "text/event-stream")],
                lines,
            )
                .into_response();
        }
        let r = fail_now(failure, "<html>not json</html>").await;
        guard.1 = true;
        return r;
    }
    guard.1 = true;
    if body["stream"] != true {
        let v = json!({
            "id": "chatcmpl-fake", "object": "chat.completion", "created": 1_700_000_000,
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": script.reply},
                         "finish_reason": "stop"}],
        });
        return axum::Json(v).into_response();
    }
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(1);
    let shared2 = shared.clone();
    tokio::spawn(async move {
        let aborted = || {
            shared2.chats_aborted.fetch_add(1, Ordering::SeqCst);
        };
        let first = chunk(&model, json!({"role": "assistant", "content": ""}), None);
        if tx.send(Ok(first)).await.is_err() {
            return aborted();
        }
        for (i, piece) in script.pieces().into_iter().enumerate() {
            if script.stall_after == Some(i) {
                tx.closed().await;
                return aborted();
            }
            if script.cut_after == Some(i) {
                // An error from the body makes the server drop the connection mid-body.
                let cut = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
                let _ = tx.send(Err(cut)).await;
                return aborted();
            }
            if script.garbage_after == Some(i) {
                let line = Bytes::from("data: {\"choices\": [{\"delta\": oops\n\n");
                if tx.send(Ok(line)).await.is_err() {
                    return aborted();
                }
            }
            if i > 0 && !script.chunk_delay.is_zero() {
                tokio::select! {
                    _ = tokio::time::sleep(script.chunk_delay) => {}
                    _ = tx.closed() => return aborted(),
                }
            }
            if tx
                .send(Ok(chunk(&model, json!({"content": piece}), None)))
                .await
                .is_err()
            {
                return aborted();
            }
        }
        if script
            .stall_after
            .is_some_and(|n| n >= script.pieces().len())
        {
            tx.closed().await;
            return aborted();
        }
        let end = chunk(&model, json!({}), Some("stop"));
        if tx.send(Ok(end)).await.is_err()
            || tx.send(Ok(Bytes::from("data: [DONE]\n\n"))).await.is_err()
        {
            return aborted();
        }
        shared2.chats_completed.fetch_add(1, Ordering::SeqCst);
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        ))
        .unwrap()
}

async fn transcription(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    mut form: Multipart,
) -> Response {
    let mut guard = Abandon(&shared.requests_abandoned, false);
    let mut call = TranscriptionCall {
        authorization: authorization(&headers),
        content_type: headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
        file: Vec::new(),
        file_name: None,
        file_type: None,
        fields: Vec::new(),
    };
    loop {
        match form.next_field().await {
            Ok(Some(field)) => {
                let name = field.name().unwrap_or("").to_string();
                if name == "file" {
                    call.file_name = field.file_name().map(str::to_string);
                    call.file_type = field.content_type().map(str::to_string);
                    call.file = field.bytes().await.map(|b| b.to_vec()).unwrap_or_default();
                } else {
                    let text = field.text().await.unwrap_or_default();
                    call.fields.push((name, text));
                }
            }
            Ok(None) => break,
            Err(e) => {
                guard.1 = true;
                return openai_error(400, &format!("bad multipart body: {e}"));
            }
        }
    }
    let has_model = call.field("model").is_some();
    let has_file = !call.file.is_empty();
    let verbose = call.field("response_format") == Some("verbose_json");
    shared.recorded.lock().unwrap().transcriptions.push(call);
    let script = shared.scripts.lock().unwrap().transcription.clone();
    tokio::time::sleep(script.delay).await;
    let r = if let Some(failure) = &script.failure {
        fail_now(failure, "not a transcription").await
    } else if !has_file || !has_model {
        openai_error(400, "file and model are required")
    } else if verbose {
        let language = script.language.as_deref().unwrap_or("english");
        axum::Json(json!({"task": "transcribe", "language": language, "duration": 1.0, "text": script.text, "segments": []})).into_response()
    } else {
        axum::Json(json!({"text": script.text})).into_response()
    };
    guard.1 = true;
    r
}

/// `samples` of a 440 Hz tone at `rate`.
pub fn tone(samples: usize, rate: u32) -> Vec<i16> {
    (0..samples)
        .map(|i| {
            let t = i as f64 / rate as f64;
            ((t * 440.0 * std::f64::consts::TAU).sin() * 8_000.0) as i16
        })
        .collect()
}

async fn speech(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let mut guard = Abandon(&shared.requests_abandoned, false);
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    shared.recorded.lock().unwrap().speeches.push(SpeechCall {
        authorization: authorization(&headers),
        body: body.clone(),
        at: Instant::now(),
    });
    let script = shared.scripts.lock().unwrap().speech.clone();
    tokio::time::sleep(script.delay).await;
    let voice = body["voice"].as_str().unwrap_or("");
    let r = if let Some(failure) = &script.failure {
        fail_now(failure, "odd").await
    } else if body["input"].as_str().unwrap_or("").is_empty() {
        openai_error(400, "input is required")
    } else if script.rejected_voices.iter().any(|v| v == voice) {
        openai_error(
            400,
            &format!("Voice '{voice}' is not supported by this model."),
        )
    } else if let Some(rate) = script.wav_rate {
        let samples = tone(script.samples * rate as usize / 24_000, rate);
        (
            [(header::CONTENT_TYPE, "audio/wav")],
            docent::engine::pcm::wav_bytes(&samples, rate),
        )
            .into_response()
    } else {
        match body["response_format"].as_str().unwrap_or("mp3") {
            "pcm" => (
                [(header::CONTENT_TYPE, "application/octet-stream")],
                docent::engine::pcm::samples_to_le(&tone(script.samples, 24_000)),
            )
                .into_response(),
            "wav" => (
                [(header::CONTENT_TYPE, "audio/wav")],
                docent::engine::pcm::wav_bytes(&tone(script.samples, 24_000), 24_000),
            )
                .into_response(),
            other => openai_error(400, &format!("the fake cannot encode {other}")),
        }
    };
    guard.1 = true;
    r
}
