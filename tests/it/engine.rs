//! The conversation engine end to end through its doors (POST /message, WebSocket, gRPC) against
//! a scripted OpenAI-compatible fake (`support/fake_openai.rs`), plus the offline engine.
//!
//! Every wait is bounded and panics with what was seen so far.

use std::time::Duration;

use crate::support::{Process, Server};
use docent::config::Config;
use docent::proto::voice_llm_input::Input;
use docent::proto::voice_llm_service_client::VoiceLlmServiceClient;
use docent::proto::{
    AudioChunk, CheckVoiceRequest, InterruptRequest, VoiceLlmConfig, VoiceLlmDialogContextItem,
    VoiceLlmInput, VoiceLlmOutput,
};
use fake_openai::{Chat, Failure, FakeOpenAi, Speech, Transcription};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use tonic::transport::Channel;

const WAIT: Duration = Duration::from_secs(10);
const LLM_KEY: &str = "sk-test-llm-0123456789";
const ASR_KEY: &str = "sk-test-asr-0123456789";
const TTS_KEY: &str = "sk-test-tts-0123456789";
const WELCOME: &str = "Welcome aboard! Ask me about the harbour museum.";
const KNOWLEDGE: &str = "The museum closes at 6 pm on weekdays. On weekends it stays open until 8 pm.\n\n\
Tickets cost 12 euros for adults. Children under twelve enter free.\n\n\
The lighthouse lens in the main hall was made in Paris in 1872.\n\n\
The cafe on the first floor serves soup and sandwiches.\n";

// ---------------------------------------------------------------------------------------------
// Set-up

/// A kiosk whose providers all point at a fake, speaking as a character that uses them.
struct Rig {
    s: Server,
    fake: FakeOpenAi,
    /// The character every session of the rig speaks as (also the kiosk's character).
    cid: String,
}

async fn rig() -> Rig {
    rig_with(|_| {}).await
}

async fn rig_with(tweak: impl FnOnce(&mut Config)) -> Rig {
    let fake = FakeOpenAi::start().await;
    let s = Server::start_with(tweak).await;
    let c = s
        .post_json(
            "/api/v1/characters",
            json!({
                "name": "Ada",
                "description": "A guide to the harbour museum.",
                "personality": "Curious and cheerful; loves lighthouses.",
                "speaking_style": "Short sentences, like a sea captain.",
                "welcome_message": WELCOME,
                "system_prompt": "Never reveal the secret word PAPAYA.",
                "voice_provider": "openai",
                "voice_type": "alloy",
                "components": {"llm": "openai", "asr": "openai", "tts": "openai"},
            }),
            201,
        )
        .await;
    let cid = c["id"].as_str().unwrap().to_string();
    point_at(&s, &fake.base_url(), &cid).await;
    Rig { s, fake, cid }
}

/// Settings: every stage on `openai` at `base`, the kiosk speaking as `cid`.
async fn point_at(s: &Server, base: &str, cid: &str) {
    s.put_json(
        "/api/v1/settings",
        json!({
            "llm": {"provider": "openai", "base_url": base, "api_key": LLM_KEY, "model": "fake-chat"},
            "asr": {"provider": "openai", "base_url": base, "api_key": ASR_KEY, "model": "fake-whisper", "language": "en"},
            "tts": {"provider": "openai", "base_url": base, "api_key": TTS_KEY, "model": "fake-tts", "voice": "alloy"},
            "kiosk": {"character_id": cid},
        }),
        200,
    )
    .await;
}

async fn set_llm_url(s: &Server, base: &str) {
    s.put_json("/api/v1/settings", json!({"llm": {"base_url": base}}), 200)
        .await;
}

/// A rig, a session of its character and a WebSocket attached to that session.
async fn rig_on_socket() -> (Rig, String, Ws) {
    let rig = rig().await;
    let sid = rig.s.session(&rig.cid).await;
    let ws = Ws::connect(&rig.s, &sid).await;
    (rig, sid, ws)
}

/// The bytes of speech among `frames` (the binary frames).
fn audio_bytes(frames: &[Frame]) -> usize {
    frames
        .iter()
        .map(|f| if let Frame::Binary(n) = f { *n } else { 0 })
        .sum()
}

/// Opens a session with `cid`, asks for its speech and asks `question` in text: the socket.
async fn ask_aloud(s: &Server, cid: &str, question: &str) -> (String, Ws) {
    let sid = s.session(cid).await;
    let mut ws = Ws::connect(s, &sid).await;
    ws.send(json!({"type": "audio_output", "enabled": true}))
        .await;
    ws.send(json!({"type": "text_input", "text": question}))
        .await;
    (sid, ws)
}

/// `(role, content)` of a session's stored messages, oldest first.
async fn history(s: &Server, cid: &str, sid: &str) -> Vec<(String, String)> {
    let v = s
        .get_json(
            &format!("/api/v1/characters/{cid}/conversations/messages?limit=200"),
            200,
        )
        .await;
    v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["session_id"] == sid)
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_string(),
                m["content"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Polls the history until it has `n` messages.
async fn wait_history(s: &Server, cid: &str, sid: &str, n: usize) -> Vec<(String, String)> {
    let deadline = Instant::now() + WAIT;
    loop {
        let h = history(s, cid, sid).await;
        if h.len() >= n {
            return h;
        }
        assert!(
            Instant::now() < deadline,
            "history of {sid} has {} messages, expected {n}: {h:?}",
            h.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn pair(role: &str, content: &str) -> (String, String) {
    (role.to_string(), content.to_string())
}

/// `samples` of a 300 Hz tone at `rate`, `channels` interleaved, as `pcm_s16le` bytes.
fn speech_pcm(rate: u32, channels: usize, ms: usize) -> Vec<u8> {
    let n = rate as usize * ms / 1000;
    let mut out = Vec::with_capacity(n * channels * 2);
    for i in 0..n {
        let t = i as f64 / rate as f64;
        let s = ((t * 300.0 * std::f64::consts::TAU).sin() * 6_000.0) as i16;
        for _ in 0..channels {
            out.extend_from_slice(&s.to_le_bytes());
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// WebSocket client

type WsStream = WebSocketStream<MaybeTlsStream<TcpStream>>;

#[derive(Debug, Clone)]
enum Frame {
    Json(Value),
    Binary(usize),
    Close(Option<u16>),
    /// The connection ended without a close frame (or failed).
    Ended(String),
}

impl Frame {
    fn json(&self) -> Option<&Value> {
        match self {
            Frame::Json(v) => Some(v),
            _ => None,
        }
    }

    fn is(&self, kind: &str) -> bool {
        self.json().is_some_and(|v| v["type"] == kind)
    }

    fn turn(&self) -> Option<u64> {
        self.json().and_then(|v| v["turn_seq"].as_u64())
    }

    fn short(&self) -> String {
        match self {
            Frame::Json(v) => {
                let t = v.to_string();
                if t.len() > 160 {
                    format!("{}…", &t[..160])
                } else {
                    t
                }
            }
            Frame::Binary(n) => format!("<binary {n}>"),
            Frame::Close(c) => format!("<close {c:?}>"),
            Frame::Ended(e) => format!("<ended {e}>"),
        }
    }
}

fn is_final_assistant(f: &Frame) -> bool {
    f.json().is_some_and(|v| {
        v["type"] == "transcript" && v["speaker"] == "assistant" && v["is_final"] == true
    })
}

fn is_delta(f: &Frame) -> bool {
    f.json().is_some_and(|v| {
        v["type"] == "transcript" && v["speaker"] == "assistant" && v["is_final"] == false
    })
}

fn is_status(f: &Frame, status: &str) -> bool {
    f.json()
        .is_some_and(|v| v["type"] == "avatar_status" && v["status"] == status)
}

fn summary(frames: &[Frame]) -> String {
    frames
        .iter()
        .map(Frame::short)
        .collect::<Vec<_>>()
        .join("\n  ")
}

struct Ws {
    ws: WsStream,
    /// The `session` frame.
    hello: Value,
}

impl Ws {
    async fn connect(s: &Server, sid: &str) -> Ws {
        let url = format!("ws://{}/ws/chat/{sid}", s.addr);
        let (ws, _) = tokio::time::timeout(WAIT, tokio_tungstenite::connect_async(&url))
            .await
            .expect("WebSocket handshake in time")
            .expect("WebSocket handshake");
        Ws::hello(ws).await
    }

    async fn hello(ws: WsStream) -> Ws {
        let mut me = Ws {
            ws,
            hello: Value::Null,
        };
        let first = me.next(Instant::now() + WAIT, "the session frame").await;
        let hello = first
            .json()
            .cloned()
            .unwrap_or_else(|| panic!("first frame is not JSON: {}", first.short()));
        assert_eq!(hello["type"], "session", "first frame: {hello}");
        me.hello = hello;
        me
    }

    fn turn_seq(&self) -> u64 {
        self.hello["turn_seq"]
            .as_u64()
            .expect("turn_seq in session frame")
    }

    async fn send(&mut self, v: Value) {
        self.send_raw(Message::text(v.to_string())).await;
    }

    async fn send_raw(&mut self, m: Message) {
        tokio::time::timeout(WAIT, self.ws.send(m))
            .await
            .expect("WebSocket send in time")
            .expect("WebSocket send");
    }

    /// The next frame (pings skipped); panics at `deadline`.
    async fn next(&mut self, deadline: Instant, what: &str) -> Frame {
        match self.try_next(deadline).await {
            Some(f) => f,
            None => panic!("no WebSocket frame in time while waiting for {what}"),
        }
    }

    /// The next frame, or None at `deadline`.
    async fn try_next(&mut self, deadline: Instant) -> Option<Frame> {
        loop {
            let msg = tokio::time::timeout_at(deadline, self.ws.next())
                .await
                .ok()?;
            return Some(match msg {
                None => Frame::Ended("stream ended".into()),
                Some(Err(e)) => Frame::Ended(e.to_string()),
                Some(Ok(Message::Text(t))) => Frame::Json(
                    serde_json::from_str(&t).unwrap_or_else(|e| panic!("not JSON ({e}): {t}")),
                ),
                Some(Ok(Message::Binary(b))) => Frame::Binary(b.len()),
                Some(Ok(Message::Close(c))) => Frame::Close(c.map(|c| u16::from(c.code))),
                Some(Ok(_)) => continue,
            });
        }
    }

    /// Frames up to and including the first that satisfies `stop`.
    async fn until(&mut self, what: &str, stop: impl Fn(&Frame) -> bool) -> Vec<Frame> {
        self.until_within(WAIT, what, stop).await
    }

    async fn until_within(
        &mut self,
        within: Duration,
        what: &str,
        stop: impl Fn(&Frame) -> bool,
    ) -> Vec<Frame> {
        let deadline = Instant::now() + within;
        let mut seen = Vec::new();
        loop {
            let Some(f) = self.try_next(deadline).await else {
                panic!(
                    "no {what} within {within:?}; frames seen:\n  {}",
                    summary(&seen)
                );
            };
            let done = stop(&f);
            let ended = matches!(f, Frame::Close(_) | Frame::Ended(_));
            seen.push(f);
            if done {
                return seen;
            }
            assert!(
                !ended,
                "socket closed while waiting for {what}; frames seen:\n  {}",
                summary(&seen)
            );
        }
    }

    /// Everything that arrives within `d`.
    async fn quiet(&mut self, d: Duration) -> Vec<Frame> {
        let deadline = Instant::now() + d;
        let mut seen = Vec::new();
        while let Some(f) = self.try_next(deadline).await {
            let ended = matches!(f, Frame::Close(_) | Frame::Ended(_));
            seen.push(f);
            if ended {
                break;
            }
        }
        seen
    }

    /// A whole text turn: frames until the assistant's final transcript and the idle after it.
    async fn turn(&mut self, what: &str) -> Vec<Frame> {
        let mut frames = self.until(what, is_final_assistant).await;
        frames.extend(
            self.until(&format!("idle after {what}"), |f| is_status(f, "idle"))
                .await,
        );
        frames
    }
}

fn assistant_text(frames: &[Frame]) -> (String, String) {
    let deltas: String = frames
        .iter()
        .filter(|f| is_delta(f))
        .map(|f| f.json().unwrap()["text"].as_str().unwrap().to_string())
        .collect();
    let whole = frames
        .iter()
        .find(|f| is_final_assistant(f))
        .map(|f| f.json().unwrap()["text"].as_str().unwrap().to_string())
        .unwrap_or_default();
    (deltas, whole)
}

// ---------------------------------------------------------------------------------------------
// gRPC client

type Client = VoiceLlmServiceClient<Channel>;

async fn grpc(s: &Server) -> Client {
    tokio::time::timeout(
        WAIT,
        VoiceLlmServiceClient::connect(format!("http://{}", s.addr)),
    )
    .await
    .expect("gRPC connect in time")
    .expect("gRPC connect")
}

struct Conv {
    tx: mpsc::Sender<VoiceLlmInput>,
    out: tonic::Streaming<VoiceLlmOutput>,
}

fn config_input(c: VoiceLlmConfig) -> VoiceLlmInput {
    VoiceLlmInput {
        input: Some(Input::Config(c)),
    }
}

fn config_for(session_id: &str) -> VoiceLlmConfig {
    VoiceLlmConfig {
        session_id: session_id.to_string(),
        ..Default::default()
    }
}

async fn converse(client: &mut Client, config: Option<VoiceLlmConfig>) -> Conv {
    let (tx, rx) = mpsc::channel(256);
    if let Some(c) = config {
        tx.send(config_input(c)).await.unwrap();
    }
    let out = tokio::time::timeout(
        WAIT,
        client.converse(tokio_stream::wrappers::ReceiverStream::new(rx)),
    )
    .await
    .expect("Converse answers in time")
    .expect("Converse starts")
    .into_inner();
    Conv { tx, out }
}

fn chunk(data: Vec<u8>, rate: i32, channels: i32, is_final: bool) -> AudioChunk {
    AudioChunk {
        data,
        sample_rate: rate,
        channels,
        format: "pcm_s16le".into(),
        is_final,
        timestamp_ms: 0,
    }
}

/// `pcm` cut into 100 ms chunks, the last one marked final.
fn utterance(pcm: &[u8], rate: i32, channels: i32) -> Vec<AudioChunk> {
    let per = (rate as usize * channels as usize * 2) / 10;
    let pieces: Vec<&[u8]> = pcm.chunks(per).collect();
    let n = pieces.len();
    pieces
        .into_iter()
        .enumerate()
        .map(|(i, p)| chunk(p.to_vec(), rate, channels, i + 1 == n))
        .collect()
}

fn describe(o: &VoiceLlmOutput) -> String {
    let mut parts = Vec::new();
    if o.barge_in {
        parts.push("barge_in".to_string());
    }
    if !o.user_transcript.is_empty() {
        parts.push(format!("user={:?}", o.user_transcript));
    }
    if !o.transcript.is_empty() {
        parts.push(format!("text={:?}", o.transcript));
    }
    if let Some(a) = &o.audio {
        parts.push(format!(
            "audio({} bytes, {} Hz, final {})",
            a.data.len(),
            a.sample_rate,
            a.is_final
        ));
    }
    if o.is_final {
        parts.push("FINAL".into());
    }
    if !o.task_event_json.is_empty() {
        parts.push("task".into());
    }
    format!(
        "[q {} r {}] {}",
        &o.question_id.get(..8).unwrap_or(""),
        &o.reply_id.get(..8).unwrap_or(""),
        parts.join(" ")
    )
}

fn describe_all(outs: &[VoiceLlmOutput]) -> String {
    outs.iter().map(describe).collect::<Vec<_>>().join("\n  ")
}

impl Conv {
    /// Closes the client's side of the stream.
    fn close(&mut self) {
        self.tx = mpsc::channel(1).0;
    }

    async fn text(&self, t: &str) {
        self.tx
            .send(VoiceLlmInput {
                input: Some(Input::Text(t.to_string())),
            })
            .await
            .expect("stream open");
    }

    async fn audio(&self, chunks: Vec<AudioChunk>) {
        for c in chunks {
            self.tx
                .send(VoiceLlmInput {
                    input: Some(Input::Audio(c)),
                })
                .await
                .expect("stream open");
        }
    }

    /// The next output; `Err` for a status, `Ok(None)` at the stream's end, None at `deadline`.
    async fn try_next(
        &mut self,
        deadline: Instant,
    ) -> Option<Result<Option<VoiceLlmOutput>, tonic::Status>> {
        tokio::time::timeout_at(deadline, self.out.message())
            .await
            .ok()
    }

    /// Outputs up to and including the first that satisfies `stop`.
    async fn until(
        &mut self,
        what: &str,
        stop: impl Fn(&VoiceLlmOutput) -> bool,
    ) -> Vec<VoiceLlmOutput> {
        let deadline = Instant::now() + WAIT;
        let mut seen = Vec::new();
        loop {
            match self.try_next(deadline).await {
                None => panic!(
                    "no {what} within {WAIT:?}; outputs seen:\n  {}",
                    describe_all(&seen)
                ),
                Some(Err(status)) => panic!(
                    "stream failed while waiting for {what}: {status:?}; outputs seen:\n  {}",
                    describe_all(&seen)
                ),
                Some(Ok(None)) => panic!(
                    "stream ended while waiting for {what}; outputs seen:\n  {}",
                    describe_all(&seen)
                ),
                Some(Ok(Some(o))) => {
                    let done = stop(&o);
                    seen.push(o);
                    if done {
                        return seen;
                    }
                }
            }
        }
    }

    async fn until_final(&mut self, what: &str) -> Vec<VoiceLlmOutput> {
        self.until(what, |o| o.is_final).await
    }

    /// Everything that arrives within `d` (panics on a status or the end).
    async fn quiet(&mut self, d: Duration) -> Vec<VoiceLlmOutput> {
        let deadline = Instant::now() + d;
        let mut seen = Vec::new();
        while let Some(item) = self.try_next(deadline).await {
            match item {
                Ok(Some(o)) => seen.push(o),
                other => panic!(
                    "stream ended ({other:?}); outputs seen:\n  {}",
                    describe_all(&seen)
                ),
            }
        }
        seen
    }

    /// Reads until nothing arrives for `gap`.
    async fn drain(&mut self, gap: Duration) -> Vec<VoiceLlmOutput> {
        let mut all = Vec::new();
        loop {
            let got = self.quiet(gap).await;
            if got.is_empty() {
                return all;
            }
            all.extend(got);
        }
    }

    /// The stream's end: the status it ended with, within `within`.
    async fn end_status(&mut self, within: Duration) -> tonic::Status {
        let deadline = Instant::now() + within;
        let mut seen = Vec::new();
        loop {
            match self.try_next(deadline).await {
                None => panic!(
                    "stream still open after {within:?}; outputs seen:\n  {}",
                    describe_all(&seen)
                ),
                Some(Ok(Some(o))) => seen.push(o),
                Some(Ok(None)) => panic!("stream ended without a status"),
                Some(Err(status)) => return status,
            }
        }
    }
}

/// Checks one reply as gRPC outputs: deltas then a final with the whole text; audio 24 kHz mono
/// tagged with the turn's ids, then an empty final audio chunk. Returns (question, reply) ids.
fn check_grpc_reply(outs: &[VoiceLlmOutput], reply: &str, with_audio: bool) -> (String, String) {
    let fin = outs.last().unwrap();
    assert!(fin.is_final, "{}", describe_all(outs));
    assert_eq!(fin.transcript, reply, "{}", describe_all(outs));
    let (q, r) = (fin.question_id.clone(), fin.reply_id.clone());
    assert!(!q.is_empty() && !r.is_empty(), "{}", describe(fin));
    let deltas: String = outs
        .iter()
        .filter(|o| !o.is_final && !o.transcript.is_empty())
        .map(|o| {
            assert_eq!((&o.question_id, &o.reply_id), (&q, &r), "{}", describe(o));
            o.transcript.as_str()
        })
        .collect();
    assert_eq!(deltas, reply, "deltas add up to the reply");
    let audio: Vec<&AudioChunk> = outs
        .iter()
        .filter(|o| !o.is_final)
        .filter_map(|o| o.audio.as_ref().map(|a| (o, a)))
        .map(|(o, a)| {
            assert_eq!((&o.question_id, &o.reply_id), (&q, &r), "{}", describe(o));
            assert_eq!(
                (a.sample_rate, a.channels, a.format.as_str(), a.is_final),
                (24_000, 1, "pcm_s16le", false)
            );
            assert!(!a.data.is_empty() && a.data.len() % 2 == 0);
            a
        })
        .collect();
    if with_audio {
        assert!(!audio.is_empty(), "audio was sent: {}", describe_all(outs));
        let last = fin.audio.as_ref().expect("an empty final audio chunk");
        assert!(last.is_final && last.data.is_empty(), "{}", describe(fin));
        assert_eq!(last.sample_rate, 24_000);
    } else {
        assert!(audio.is_empty());
    }
    (q, r)
}

// ---------------------------------------------------------------------------------------------
// POST /message

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_turn_sends_persona_knowledge_and_history_to_the_model() {
    let Rig { s, fake, cid } = rig().await;
    s.knowledge_ready(&cid, "museum.txt", KNOWLEDGE).await;
    let sid = s.session(&cid).await;

    fake.set_chat(Chat::reply("We close at 6 pm on weekdays.").deltas(3));
    let q1 = "When does the museum close?";
    let v = s
        .post_json(
            &format!("/api/v1/sessions/{sid}/message"),
            json!({"text": q1}),
            202,
        )
        .await;
    assert_eq!(v["status"], "queued", "{v}");
    let seq1 = v["turn_seq"].as_u64().expect("turn_seq");
    let h = wait_history(&s, &cid, &sid, 2).await;
    assert_eq!(
        h,
        [
            pair("user", q1),
            pair("assistant", "We close at 6 pm on weekdays.")
        ]
    );

    let chats = fake.wait_chats(1, WAIT).await;
    let c = &chats[0];
    assert_eq!(
        c.authorization.as_deref(),
        Some(&*format!("Bearer {LLM_KEY}"))
    );
    assert_eq!(c.body["model"], "fake-chat");
    assert_eq!(c.body["stream"], true);
    let system = c.system();
    for persona in [
        "Ada",
        "loves lighthouses",
        "like a sea captain",
        "PAPAYA",
        "Welcome aboard",
    ] {
        assert!(
            system.contains(persona),
            "{persona:?} in the prompt: {system}"
        );
    }
    assert!(
        system.contains("The museum closes at 6 pm on weekdays"),
        "knowledge passage in the prompt: {system}"
    );
    assert_eq!(
        c.conversation(),
        [pair("user", q1)],
        "question once, no history yet"
    );

    fake.set_chat(Chat::reply("Adults pay 12 euros.").deltas(2));
    let q2 = "How much are the tickets?";
    let v = s
        .post_json(
            &format!("/api/v1/sessions/{sid}/message"),
            json!({"text": q2}),
            202,
        )
        .await;
    assert!(v["turn_seq"].as_u64().unwrap() > seq1, "{v}");
    let h = wait_history(&s, &cid, &sid, 4).await;
    assert_eq!(
        h[2..],
        [pair("user", q2), pair("assistant", "Adults pay 12 euros.")]
    );
    let chats = fake.wait_chats(2, WAIT).await;
    assert_eq!(
        chats[1].conversation(),
        [
            pair("user", q1),
            pair("assistant", "We close at 6 pm on weekdays."),
            pair("user", q2)
        ],
        "the second turn carries the first"
    );
    assert!(
        chats[1].system().contains("Tickets cost 12 euros"),
        "{}",
        chats[1].system()
    );

    // Blank text is refused and starts nothing.
    let res = s
        .post(&format!("/api/v1/sessions/{sid}/message"))
        .json(&json!({"text": "   "}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 400);
}

// ---------------------------------------------------------------------------------------------
// WebSocket

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ws_text_turn_streams_status_deltas_and_final() {
    let (Rig { s, fake, cid }, sid, mut ws) = rig_on_socket().await;
    assert_eq!(ws.hello["session_id"], sid.as_str());
    assert_eq!(ws.hello["character_id"], cid.as_str());
    let before = ws.turn_seq();

    let reply = "Hello there, sailor. The museum is open today.";
    fake.set_chat(Chat::reply(reply).deltas(5));
    ws.send(json!({"type": "text_input", "text": "Hi!"})).await;
    let frames = ws.turn("the reply").await;
    let texts: Vec<&Frame> = frames.iter().filter(|f| f.json().is_some()).collect();
    assert!(is_status(texts[0], "processing"), "{}", summary(&frames));
    let seq = texts[0].turn().unwrap();
    assert!(seq > before, "a new turn number");
    assert!(
        frames.iter().all(|f| f.turn() == Some(seq)),
        "every event carries the turn: {}",
        summary(&frames)
    );
    let (deltas, whole) = assistant_text(&frames);
    assert_eq!(whole, reply);
    assert_eq!(deltas, reply, "deltas add up to the reply");
    assert!(frames.iter().filter(|f| is_delta(f)).count() >= 2);
    let final_at = frames.iter().position(is_final_assistant).unwrap();
    assert!(
        frames[..final_at].iter().filter(|f| is_delta(f)).count() >= 2,
        "deltas come before the final"
    );
    assert!(is_status(frames.last().unwrap(), "idle"));
    assert!(
        !frames
            .iter()
            .any(|f| matches!(f, Frame::Binary(_)) || f.is("audio_start")),
        "no audio for a socket that did not ask: {}",
        summary(&frames)
    );
    assert!(
        fake.speeches().is_empty(),
        "no speech synthesised when nobody listens"
    );
    let h = wait_history(&s, &cid, &sid, 2).await;
    assert_eq!(h, [pair("user", "Hi!"), pair("assistant", reply)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ws_audio_starts_while_the_reply_still_streams() {
    let (Rig { s: _s, fake, .. }, _, mut ws) = rig_on_socket().await;
    let reply = "The harbour museum opens at nine every morning. \
                 The lighthouse lens came from Paris in 1872. \
                 Tickets cost twelve euros at the door.";
    fake.set_chat(
        Chat::reply(reply)
            .deltas(9)
            .chunk_delay(Duration::from_millis(200)),
    );
    fake.set_speech(Speech::millis(300));
    ws.send(json!({"type": "audio_output", "enabled": true}))
        .await;
    ws.send(json!({"type": "text_input", "text": "Tell me about the museum."}))
        .await;
    let frames = ws.turn("the spoken reply").await;

    let (deltas, whole) = assistant_text(&frames);
    assert_eq!((deltas.as_str(), whole.as_str()), (reply, reply));
    let start = frames
        .iter()
        .position(|f| f.is("audio_start"))
        .unwrap_or_else(|| panic!("audio_start: {}", summary(&frames)));
    let end = frames
        .iter()
        .position(|f| f.is("audio_end"))
        .unwrap_or_else(|| panic!("audio_end: {}", summary(&frames)));
    for at in [start, end] {
        let v = frames[at].json().unwrap();
        assert_eq!(
            (&v["sample_rate"], &v["channels"], &v["format"]),
            (&json!(24000), &json!(1), &json!("pcm_s16le")),
            "{v}"
        );
        assert!(v["turn_seq"].is_u64());
    }
    let binary: Vec<usize> = frames
        .iter()
        .enumerate()
        .filter(|(_, f)| matches!(f, Frame::Binary(_)))
        .map(|(i, _)| i)
        .collect();
    assert!(!binary.is_empty(), "{}", summary(&frames));
    assert!(
        binary.iter().all(|&i| start < i && i < end),
        "binary frames between audio_start and audio_end"
    );
    let bytes = audio_bytes(&frames);
    assert_eq!(
        bytes,
        3 * 300 * 24 * 2,
        "three sentences of 300 ms at 24 kHz"
    );
    let last_delta = frames.iter().rposition(is_delta).unwrap();
    assert!(
        binary[0] < last_delta,
        "the first audio (frame {}) comes before the last text delta (frame {last_delta}):\n  {}",
        binary[0],
        summary(&frames)
    );
    assert!(
        frames.iter().any(|f| is_status(f, "speaking")),
        "{}",
        summary(&frames)
    );
    assert!(end < frames.len() - 1 && is_status(frames.last().unwrap(), "idle"));

    let speeches = fake.speeches();
    assert_eq!(speeches.len(), 3, "one speech request per sentence");
    assert_eq!(
        speeches[0].authorization.as_deref(),
        Some(&*format!("Bearer {TTS_KEY}"))
    );
    assert_eq!(
        speeches[0].body["input"],
        "The harbour museum opens at nine every morning."
    );
    for sp in &speeches {
        assert_eq!(sp.body["voice"], "alloy");
        assert_eq!(sp.body["model"], "fake-tts");
        assert_eq!(sp.body["response_format"], "pcm");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ws_speech_answered_as_wav_is_resampled_to_24k() {
    let (Rig { s: _s, fake, .. }, _, mut ws) = rig_on_socket().await;
    fake.set_chat(Chat::reply("A short answer for you."));
    fake.set_speech(Speech {
        wav_rate: Some(16_000),
        ..Speech::millis(500)
    });
    ws.send(json!({"type": "audio_output", "enabled": true}))
        .await;
    ws.send(json!({"type": "text_input", "text": "Hi"})).await;
    let frames = ws.turn("the reply").await;
    let bytes = audio_bytes(&frames);
    assert_eq!(
        bytes,
        500 * 24 * 2,
        "500 ms at 24 kHz: {}",
        summary(&frames)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ws_every_socket_of_a_session_gets_every_event() {
    let Rig { s, fake, cid } = rig().await;
    let sid = s.session(&cid).await;
    let mut a = Ws::connect(&s, &sid).await;
    let mut b = Ws::connect(&s, &sid).await;
    let mut c = Ws::connect(&s, &sid).await;
    a.send(json!({"type": "audio_output", "enabled": true}))
        .await;
    fake.set_chat(Chat::reply("Both of you hear this. And this too.").deltas(4));
    b.send(json!({"type": "text_input", "text": "Hello everyone"}))
        .await;
    let fa = a.turn("the reply on socket a").await;
    let fb = b.turn("the reply on socket b").await;
    let fc = c.turn("the reply on socket c").await;
    let events = |frames: &[Frame]| -> Vec<Value> {
        frames
            .iter()
            .filter_map(Frame::json)
            .filter(|v| v["type"] != "audio_start" && v["type"] != "audio_end")
            .cloned()
            .collect()
    };
    assert_eq!(
        events(&fa),
        events(&fb),
        "sockets a and b saw the same events"
    );
    assert_eq!(
        events(&fb),
        events(&fc),
        "sockets b and c saw the same events"
    );
    assert!(
        fa.iter().any(|f| matches!(f, Frame::Binary(_))),
        "a asked for audio"
    );
    assert!(!fb.iter().any(|f| matches!(f, Frame::Binary(_))));

    // A turn started over REST reaches every socket too.
    fake.set_chat(Chat::reply("From the web form."));
    s.post_json(
        &format!("/api/v1/sessions/{sid}/message"),
        json!({"text": "typed in a form"}),
        202,
    )
    .await;
    for ws in [&mut a, &mut b, &mut c] {
        let frames = ws.turn("the REST turn").await;
        assert_eq!(assistant_text(&frames).1, "From the web form.");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ws_bad_messages_get_bad_request_and_the_socket_stays_open() {
    let (_rig, _, mut ws) = rig_on_socket().await;
    let is_error = |f: &Frame| f.is("error");
    for bad in [
        Message::text("{not json"),
        Message::text("[]"),
        Message::text(json!({"type": "dance"}).to_string()),
        Message::text(json!({"text": "no type"}).to_string()),
        Message::text(json!({"type": "text_input", "text": "   "}).to_string()),
        Message::text(json!({"type": "audio_end"}).to_string()),
        Message::text(json!({"type": "audio_start", "format": "opus"}).to_string()),
        Message::text(json!({"type": "audio_start", "sample_rate": 4000}).to_string()),
        Message::binary(vec![0u8; 320]),
    ] {
        let shown = format!("{bad:?}");
        ws.send_raw(bad).await;
        let frames = ws.until(&format!("an error for {shown}"), is_error).await;
        let err = frames.last().unwrap().json().unwrap();
        assert_eq!(err["code"], "bad_request", "{shown}: {err}");
        assert!(!err["message"].as_str().unwrap_or("").is_empty(), "{err}");
    }
    // Still open and working.
    ws.send(json!({"type": "text_input", "text": "still there?"}))
        .await;
    let frames = ws.turn("a reply after the errors").await;
    assert_eq!(assistant_text(&frames).1, "Hello from the fake model.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ws_frames_over_one_mib_close_the_socket_with_1009() {
    // Exactly at the bound: accepted (and answered as invalid JSON).
    let (Rig { s, fake: _f, .. }, sid, mut ws) = rig_on_socket().await;
    ws.send_raw(Message::text("x".repeat(1 << 20))).await;
    let frames = ws
        .until("the error for 1 MiB of junk", |f| f.is("error"))
        .await;
    assert_eq!(
        frames.last().unwrap().json().unwrap()["code"],
        "bad_request"
    );
    // One byte over: closed with 1009.
    for (what, msg) in [
        ("text", Message::text("x".repeat((1 << 20) + 1))),
        ("binary", Message::binary(vec![0u8; (1 << 20) + 1])),
    ] {
        let mut ws = Ws::connect(&s, &sid).await;
        if what == "binary" {
            ws.send(json!({"type": "audio_start"})).await;
        }
        ws.send_raw(msg).await;
        let frames = ws
            .until(&format!("the close after a large {what} frame"), |f| {
                matches!(f, Frame::Close(_) | Frame::Ended(_))
            })
            .await;
        assert!(
            matches!(frames.last(), Some(Frame::Close(Some(1009)))),
            "{what}: {}",
            summary(&frames)
        );
    }
    // Far over the bound the server stops reading mid-frame: the socket must not stay open
    // (the client may see 1009 or, as the rest of its frame is unread, a reset).
    let mut ws = Ws::connect(&s, &sid).await;
    let sent = ws.ws.send(Message::text("x".repeat(4 << 20))).await;
    let end = match sent {
        Err(e) => format!("send failed: {e}"),
        Ok(()) => ws
            .until("the close after a 4 MiB frame", |f| {
                matches!(f, Frame::Close(_) | Frame::Ended(_))
            })
            .await
            .last()
            .unwrap()
            .short(),
    };
    if !end.contains("1009") {
        eprintln!("note: a 4 MiB frame ended the socket with {end} (1009 wanted)");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ws_interrupt_cancels_the_turn_and_nothing_of_it_follows() {
    let (Rig { s, fake, cid }, sid, mut ws) = rig_on_socket().await;
    let reply = "Once upon a time there was a lighthouse keeper who counted every ship that \
                 passed, every night, for forty years, and wrote them all in a book.";
    fake.set_chat(
        Chat::reply(reply)
            .deltas(12)
            .chunk_delay(Duration::from_millis(150)),
    );
    ws.send(json!({"type": "text_input", "text": "Tell me a long story."}))
        .await;
    let frames = ws.until("the first delta", is_delta).await;
    let old = frames.last().unwrap().turn().unwrap();
    ws.send(json!({"type": "interrupt"})).await;
    let frames = ws
        .until("idle after the interrupt", |f| {
            is_status(f, "idle") && f.turn() != Some(old)
        })
        .await;
    let idle = frames.last().unwrap().turn().unwrap();
    assert!(idle > old, "the interrupt takes a new turn number");
    assert!(
        frames.iter().all(|f| f.turn().is_none_or(|t| t <= idle)),
        "{}",
        summary(&frames)
    );
    let after = ws.quiet(Duration::from_millis(800)).await;
    assert!(
        after.iter().all(|f| f.turn() != Some(old)),
        "nothing of the interrupted turn after the interrupt:\n  {}",
        summary(&after)
    );
    assert!(
        !frames.iter().chain(&after).any(is_final_assistant),
        "no final for the interrupted turn"
    );
    fake.wait_until(WAIT, "the model request was aborted", |f| {
        f.chats_aborted() == 1
    })
    .await;
    assert_eq!(fake.chats_completed(), 0);
    // What was said before the cut is stored.
    let h = wait_history(&s, &cid, &sid, 2).await;
    assert_eq!(h[0], pair("user", "Tell me a long story."));
    assert_eq!(h[1].0, "assistant");
    assert!(
        !h[1].1.is_empty() && reply.starts_with(&h[1].1) && h[1].1.len() < reply.len(),
        "partial reply stored: {:?}",
        h[1].1
    );
    // The session goes on.
    fake.set_chat(Chat::reply("Short one."));
    ws.send(json!({"type": "text_input", "text": "A short one then."}))
        .await;
    let frames = ws.turn("the next turn").await;
    assert_eq!(assistant_text(&frames).1, "Short one.");
    assert!(frames.iter().all(|f| f.turn().is_none_or(|t| t > idle)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ws_speech_input_is_transcribed_then_answered() {
    let (Rig { s, fake, cid }, sid, mut ws) = rig_on_socket().await;
    fake.set_transcription(Transcription::text("What time does the museum close?"));
    fake.set_chat(Chat::reply("At 6 pm on weekdays."));

    for (rate, channels) in [(16_000u32, 1usize), (48_000, 2)] {
        ws.send(json!({"type": "audio_start", "sample_rate": rate, "channels": channels, "format": "pcm_s16le"}))
            .await;
        ws.until("listening", |f| is_status(f, "listening")).await;
        let pcm = speech_pcm(rate, channels, 600);
        for piece in pcm.chunks(pcm.len() / 4 + 1) {
            ws.send_raw(Message::binary(piece.to_vec())).await;
        }
        ws.send(json!({"type": "audio_end"})).await;
        let frames = ws.turn("the answer to speech").await;
        let user = frames
            .iter()
            .position(|f| {
                f.json()
                    .is_some_and(|v| v["type"] == "transcript" && v["speaker"] == "user")
            })
            .unwrap_or_else(|| panic!("user transcript: {}", summary(&frames)));
        let u = frames[user].json().unwrap();
        assert_eq!(u["text"], "What time does the museum close?");
        assert_eq!(u["is_final"], true);
        let first_delta = frames.iter().position(is_delta).unwrap();
        assert!(user < first_delta, "{}", summary(&frames));
        assert_eq!(assistant_text(&frames).1, "At 6 pm on weekdays.");
    }

    let calls = fake.transcriptions();
    assert_eq!(calls.len(), 2);
    for call in &calls {
        assert_eq!(
            call.authorization.as_deref(),
            Some(&*format!("Bearer {ASR_KEY}"))
        );
        assert!(
            call.content_type
                .as_deref()
                .is_some_and(|t| t.starts_with("multipart/form-data")),
            "{:?}",
            call.content_type
        );
        assert_eq!(call.field("model"), Some("fake-whisper"));
        assert_eq!(call.field("language"), Some("en"));
        assert!(
            call.file_name
                .as_deref()
                .is_some_and(|n| n.ends_with(".wav"))
        );
        let wav = docent::engine::pcm::parse_wav(&call.file).expect("a valid WAV");
        assert_eq!((wav.rate, wav.channels), (16_000, 1));
        let n = wav.samples.len() as i64;
        assert!((n - 9_600).abs() <= 16, "600 ms at 16 kHz, got {n} samples");
        assert!(
            docent::engine::pcm::rms(&wav.samples) > 1_000.0,
            "not silence"
        );
    }
    let chats = fake.wait_chats(2, WAIT).await;
    assert_eq!(
        chats[0].conversation(),
        [pair("user", "What time does the museum close?")]
    );
    let h = wait_history(&s, &cid, &sid, 4).await;
    assert_eq!(h[0], pair("user", "What time does the museum close?"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ws_client_media_ready_greets_once_per_session() {
    let (Rig { s, fake, cid }, sid, mut ws) = rig_on_socket().await;
    ws.send(json!({"type": "audio_output", "enabled": true}))
        .await;
    ws.send(json!({"type": "client_media_ready"})).await;
    let frames = ws
        .until("idle after the greeting", |f| is_status(f, "idle"))
        .await;
    let msg = frames
        .iter()
        .find(|f| f.is("assistant_message"))
        .unwrap_or_else(|| panic!("assistant_message: {}", summary(&frames)));
    assert_eq!(msg.json().unwrap()["text"], WELCOME);
    assert_eq!(assistant_text(&frames).1, WELCOME);
    assert!(
        frames.iter().any(|f| matches!(f, Frame::Binary(_))),
        "spoken"
    );
    assert!(fake.chats().is_empty(), "a greeting needs no model");
    ws.send(json!({"type": "client_media_ready"})).await;
    let mut other = Ws::connect(&s, &sid).await;
    other.send(json!({"type": "client_media_ready"})).await;
    let again = ws.quiet(Duration::from_millis(600)).await;
    assert!(again.is_empty(), "greeted once: {}", summary(&again));
    let h = wait_history(&s, &cid, &sid, 1).await;
    assert_eq!(h, [pair("assistant", WELCOME)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ws_deleting_the_session_closes_its_sockets() {
    let Rig {
        s,
        fake: _fake,
        cid,
    } = rig().await;
    let sid = s.session(&cid).await;
    let mut a = Ws::connect(&s, &sid).await;
    let mut b = Ws::connect(&s, &sid).await;
    let res = s
        .delete(&format!("/api/v1/sessions/{sid}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 204);
    for ws in [&mut a, &mut b] {
        let frames = ws
            .until_within(Duration::from_secs(3), "the socket to close", |f| {
                matches!(f, Frame::Close(_) | Frame::Ended(_))
            })
            .await;
        assert!(
            matches!(frames.last(), Some(Frame::Close(Some(1001 | 1000)))),
            "{}",
            summary(&frames)
        );
    }
    expect_ws_404(&s, &sid).await;
}

async fn expect_ws_404(s: &Server, sid: &str) {
    let url = format!("ws://{}/ws/chat/{sid}", s.addr);
    match tokio_tungstenite::connect_async(&url).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(res)) => {
            assert_eq!(res.status().as_u16(), 404, "{sid}")
        }
        Err(e) => panic!("{sid}: expected a 404 answer, got {e}"),
        Ok(_) => panic!("{sid}: upgraded to a session that does not exist"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ws_unknown_session_is_404_before_the_upgrade() {
    let s = Server::start().await;
    expect_ws_404(&s, &uuid::Uuid::new_v4().to_string()).await;
    expect_ws_404(&s, "not-a-session").await;
}

/// A client that never reads while a long spoken reply streams is cut off with 1013 (and gets
/// its close frame once it reads again). Its receive buffer is made tiny so the server's queue
/// fills regardless of the machine's TCP buffer sizes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ws_a_socket_that_cannot_keep_up_is_closed_with_1013() {
    const SENTENCES: usize = 30;
    let Rig { s, fake, cid } = rig().await;
    let sid = s.session(&cid).await;
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let stream = socket.connect(s.addr).await.unwrap();
    let (ws, _) = tokio_tungstenite::client_async(
        format!("ws://{}/ws/chat/{sid}", s.addr),
        MaybeTlsStream::Plain(stream),
    )
    .await
    .unwrap();
    let mut ws = Ws::hello(ws).await;
    // 30 sentences of 8 s: 11.5 MB of PCM, more than the server's socket buffer (at most
    // 4 MiB by default on Linux) and its queue of 256 frames can hold.
    let reply: String = (1..=SENTENCES)
        .map(|i| format!("This is sentence number {i} of a very long answer. "))
        .collect();
    fake.set_chat(Chat::reply(reply.trim()).deltas(2 * SENTENCES));
    fake.set_speech(Speech::millis(8_000));
    ws.send(json!({"type": "audio_output", "enabled": true}))
        .await;
    ws.send(json!({"type": "text_input", "text": "Talk for a long time."}))
        .await;
    // Not reading while the reply is produced.
    fake.wait_until(WAIT, "all sentences synthesised", |f| {
        f.speeches().len() >= SENTENCES
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let frames = ws
        .until("the close of a slow socket", |f| {
            matches!(f, Frame::Close(_) | Frame::Ended(_))
        })
        .await;
    let binary = frames
        .iter()
        .filter(|f| matches!(f, Frame::Binary(_)))
        .count();
    assert!(
        matches!(frames.last(), Some(Frame::Close(Some(1013)))),
        "closed with 1013 after {binary} audio frames; last frames:\n  {}",
        summary(&frames[frames.len().saturating_sub(5)..])
    );
    assert!(
        binary < SENTENCES * 80,
        "it did not get all the audio ({binary} frames)"
    );
    // The turn itself finished and is in the history for the client to reload.
    let h = wait_history(&s, &cid, &sid, 2).await;
    assert_eq!(h[1], pair("assistant", reply.trim()));
}

// ---------------------------------------------------------------------------------------------
// gRPC Converse

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_two_text_turns_on_one_stream() {
    let Rig { s, fake, cid } = rig().await;
    let mut client = grpc(&s).await;
    let mut conv = converse(&mut client, Some(VoiceLlmConfig::default())).await;
    fake.push_chat(Chat::reply("We open at nine. We close at six.").deltas(4));
    fake.push_chat(Chat::reply("Twelve euros for adults.").deltas(3));
    conv.text("When are you open?").await;
    let first = conv.until_final("the first reply").await;
    let (q1, r1) = check_grpc_reply(&first, "We open at nine. We close at six.", true);
    // A later config changes voice and temperature for the next turn.
    let speeches_before = fake.speeches().len();
    conv.tx
        .send(config_input(VoiceLlmConfig {
            voice: "echo".into(),
            temperature: 0.25,
            ..Default::default()
        }))
        .await
        .unwrap();
    conv.text("And the price?").await;
    let second = conv.until_final("the second reply").await;
    let speeches = fake.speeches();
    assert!(speeches.len() > speeches_before);
    assert!(
        speeches[..speeches_before]
            .iter()
            .all(|sp| sp.body["voice"] == "alloy")
    );
    assert!(
        speeches[speeches_before..]
            .iter()
            .all(|sp| sp.body["voice"] == "echo"),
        "the new voice is used"
    );
    let (q2, r2) = check_grpc_reply(&second, "Twelve euros for adults.", true);
    assert_ne!(q1, q2, "question ids differ per turn");
    assert_ne!(r1, r2, "reply ids differ per turn");
    let chats = fake.wait_chats(2, WAIT).await;
    assert_eq!(
        chats[1].conversation(),
        [
            pair("user", "When are you open?"),
            pair("assistant", "We open at nine. We close at six."),
            pair("user", "And the price?"),
        ]
    );
    let temperature = |i: usize| chats[i].body["temperature"].as_f64().unwrap();
    assert!(
        (temperature(0) - 0.7).abs() < 1e-3,
        "the settings' temperature"
    );
    assert!(
        (temperature(1) - 0.25).abs() < 1e-3,
        "the config's temperature"
    );
    // No session in the config: the kiosk's character (set in the settings) answered.
    assert!(chats[0].system().contains("Ada"));
    let sessions = s.get_json("/api/v1/sessions", 200).await;
    assert_eq!(sessions[0]["character_id"], cid.as_str());
    drop(conv.tx);
    let end = tokio::time::timeout(WAIT, conv.out.message())
        .await
        .expect("the stream ends when the client closes its side");
    assert!(matches!(end, Ok(None)), "{end:?}");
}

/// A client may send its inputs and close its side at once: it still gets the reply, then the
/// end of the stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_stream_ends_after_the_reply_when_the_client_closes_its_side() {
    let Rig { s, fake, cid: _cid } = rig().await;
    fake.set_chat(
        Chat::reply("Goodbye, and thanks for visiting.")
            .deltas(4)
            .chunk_delay(Duration::from_millis(50)),
    );
    let mut client = grpc(&s).await;
    let mut conv = converse(&mut client, None).await;
    conv.text("Bye!").await;
    conv.close();
    let outs = conv.until_final("the reply after the client closed").await;
    check_grpc_reply(&outs, "Goodbye, and thanks for visiting.", true);
    let end = tokio::time::timeout(WAIT, conv.out.message())
        .await
        .expect("the stream ends after the reply");
    assert!(matches!(end, Ok(None)), "{end:?}");
    // Closing without any input ends it at once.
    let conv = converse(&mut client, Some(VoiceLlmConfig::default())).await;
    let Conv { tx, mut out } = conv;
    drop(tx);
    let end = tokio::time::timeout(WAIT, out.message())
        .await
        .expect("the stream ends");
    assert!(matches!(end, Ok(None)), "{end:?}");
}

/// Each next question is sent the moment the previous final arrives (which cancels whatever
/// of the previous turn is still running): every message is stored exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_back_to_back_store_every_message_once() {
    let Rig { s, fake, cid } = rig().await;
    let sid = uuid::Uuid::new_v4().to_string();
    let mut client = grpc(&s).await;
    let mut conv = converse(&mut client, Some(config_for(&sid))).await;
    let mut want = Vec::new();
    for i in 0..6 {
        let reply = format!("Answer number {i}. That is all.");
        fake.push_chat(Chat::reply(&reply).deltas(3));
        let q = format!("Question {i}?");
        conv.text(&q).await;
        let outs = conv.until_final(&format!("reply {i}")).await;
        assert_eq!(outs.last().unwrap().transcript, reply);
        want.push(pair("user", &q));
        want.push(pair("assistant", &reply));
    }
    // The history is complete once the last final is out.
    assert_eq!(history(&s, &cid, &sid).await, want);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(history(&s, &cid, &sid).await, want, "nothing stored twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_audio_turn_barges_in_transcribes_and_answers() {
    let Rig { s, fake, cid: _cid } = rig().await;
    fake.set_transcription(Transcription::text("Where is the lighthouse lens?"));
    let reply = "It is in the main hall. It came from Paris.";
    fake.set_chat(Chat::reply(reply).deltas(5));
    let mut client = grpc(&s).await;
    let sid = uuid::Uuid::new_v4().to_string();
    let mut conv = converse(&mut client, Some(config_for(&sid))).await;
    conv.audio(utterance(&speech_pcm(16_000, 1, 800), 16_000, 1))
        .await;
    let outs = conv.until_final("the answer to speech").await;
    let barge = &outs[0];
    assert!(
        barge.barge_in && !barge.question_id.is_empty(),
        "first a barge-in with a question id:\n  {}",
        describe_all(&outs)
    );
    let q = barge.question_id.clone();
    let user = outs
        .iter()
        .position(|o| !o.user_transcript.is_empty())
        .unwrap_or_else(|| panic!("user transcript:\n  {}", describe_all(&outs)));
    assert_eq!(outs[user].user_transcript, "Where is the lighthouse lens?");
    assert_eq!(outs[user].question_id, q);
    let first_reply = outs
        .iter()
        .position(|o| !o.transcript.is_empty() || o.audio.is_some())
        .unwrap();
    assert!(user < first_reply, "{}", describe_all(&outs));
    let (fq, _) = check_grpc_reply(&outs[user + 1..], reply, true);
    assert_eq!(fq, q, "the reply is tagged with the barge-in's question id");

    let t = &fake.transcriptions()[0];
    let wav = docent::engine::pcm::parse_wav(&t.file).expect("a valid WAV");
    assert_eq!((wav.rate, wav.channels), (16_000, 1));
    assert!((wav.samples.len() as i64 - 12_800).abs() <= 16);
    assert_eq!(
        fake.wait_chats(1, WAIT).await[0].conversation(),
        [pair("user", "Where is the lighthouse lens?")]
    );
}

/// With voice activity detection on, an utterance ends after the configured silence, without
/// a final chunk; images are accepted and ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_voice_activity_detection_ends_an_utterance_after_silence() {
    let Rig { s, fake, cid: _cid } = rig_with(|c| c.sessions.vad_silence_ms = 300).await;
    fake.set_transcription(Transcription::text("Is the cafe open?"));
    fake.set_chat(Chat::reply("Yes, it is open until five."));
    let mut client = grpc(&s).await;
    let mut conv = converse(&mut client, None).await;
    conv.tx
        .send(VoiceLlmInput {
            input: Some(Input::Image(docent::proto::ImageFrame {
                data: crate::support::PNG.to_vec(),
                mime_type: "image/png".into(),
                width: 1,
                height: 1,
                ..Default::default()
            })),
        })
        .await
        .unwrap();
    let mut chunks = utterance(&speech_pcm(48_000, 2, 500), 48_000, 2);
    chunks.extend(utterance(&vec![0u8; 48_000 * 2 * 2 * 4 / 10], 48_000, 2));
    for c in &mut chunks {
        c.is_final = false;
    }
    conv.audio(chunks).await;
    let outs = conv.until_final("the answer after silence").await;
    assert!(outs[0].barge_in, "{}", describe_all(&outs));
    assert!(
        outs.iter()
            .any(|o| o.user_transcript == "Is the cafe open?"),
        "{}",
        describe_all(&outs)
    );
    assert_eq!(
        outs.last().unwrap().transcript,
        "Yes, it is open until five."
    );
    let wav = docent::engine::pcm::parse_wav(&fake.transcriptions()[0].file).unwrap();
    assert_eq!((wav.rate, wav.channels), (16_000, 1));
    let ms = wav.samples.len() * 1000 / 16_000;
    assert!(
        (750..=950).contains(&ms),
        "speech and silence up to the cut: {ms} ms"
    );
    // More silence starts nothing; the next speech is the next utterance.
    let silence = |ms: usize| {
        let mut c = utterance(&vec![0u8; 48 * 4 * ms], 48_000, 2);
        c.iter_mut().for_each(|c| c.is_final = false);
        c
    };
    conv.audio(silence(1_000)).await;
    let idle = conv.quiet(Duration::from_millis(300)).await;
    assert!(idle.is_empty(), "silence: {}", describe_all(&idle));
    let mut next = utterance(&speech_pcm(48_000, 2, 400), 48_000, 2);
    next.iter_mut().for_each(|c| c.is_final = false);
    next.extend(silence(400));
    conv.audio(next).await;
    let outs = conv.until_final("the second answer").await;
    assert!(outs[0].barge_in, "{}", describe_all(&outs));
    assert_eq!(fake.transcriptions().len(), 2);
}

/// The test reads everything already sent before it interrupts: a sentence's audio is sent as
/// fast as it is synthesised, so outputs already on the wire (HTTP/2 windows are 2 MiB) when
/// the interrupt arrives still reach the client after the Interrupt answer; the server cannot
/// recall them. What it must guarantee is that nothing produced later follows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_interrupt_stops_the_reply_and_the_stream_goes_on() {
    let Rig { s, fake, cid: _cid } = rig().await;
    // The first sentence is spoken; the second one is still being synthesised when the
    // interrupt arrives.
    fake.push_chat(
        Chat::reply(
            "The first sentence is spoken right away. The second sentence takes a while. \
             The third one never comes.",
        )
        .deltas(10)
        .chunk_delay(Duration::from_millis(150)),
    );
    fake.set_speech(Speech {
        delay: Duration::from_millis(400),
        ..Speech::millis(300)
    });
    let mut client = grpc(&s).await;
    let sid = uuid::Uuid::new_v4().to_string();
    let mut conv = converse(&mut client, Some(config_for(&sid))).await;
    conv.text("Talk to me.").await;
    let outs = conv
        .until("the first audio", |o| {
            o.audio.as_ref().is_some_and(|a| !a.data.is_empty())
        })
        .await;
    let old_q = outs.last().unwrap().question_id.clone();
    conv.drain(Duration::from_millis(50)).await;
    let answer = tokio::time::timeout(
        WAIT,
        client.interrupt(InterruptRequest {
            session_id: sid.clone(),
        }),
    )
    .await
    .expect("Interrupt answers in time")
    .expect("Interrupt")
    .into_inner();
    assert!(answer.success);
    let after = conv.quiet(Duration::from_millis(1_200)).await;
    assert!(
        after.iter().all(|o| o.question_id != old_q),
        "nothing of the interrupted turn after the Interrupt answer:\n  {}",
        describe_all(&after)
    );
    fake.wait_until(WAIT, "the model request was aborted", |f| {
        f.chats_aborted() == 1
    })
    .await;
    fake.set_speech(Speech::millis(200));
    conv.text("Still there?").await;
    let outs = conv.until_final("the next reply").await;
    let (q, _) = check_grpc_reply(&outs, "Hello from the fake model.", true);
    assert_ne!(q, old_q);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_speech_during_a_reply_barges_in() {
    let Rig { s, fake, cid } = rig().await;
    let slow = "Let me tell you everything about the harbour, from the very beginning, \
                slowly and in great detail, because there is a lot to say.";
    fake.push_chat(
        Chat::reply(slow)
            .deltas(20)
            .chunk_delay(Duration::from_millis(100)),
    );
    fake.push_chat(Chat::reply("Sure, tickets are twelve euros."));
    fake.set_transcription(Transcription::text("Stop, how much are tickets?"));
    let mut client = grpc(&s).await;
    let sid = uuid::Uuid::new_v4().to_string();
    let mut conv = converse(&mut client, Some(config_for(&sid))).await;
    conv.text("Tell me about the harbour.").await;
    let outs = conv
        .until("the first delta", |o| !o.transcript.is_empty())
        .await;
    let old_q = outs.last().unwrap().question_id.clone();
    conv.audio(utterance(&speech_pcm(16_000, 1, 500), 16_000, 1))
        .await;
    let outs = conv.until("the barge-in", |o| o.barge_in).await;
    let new_q = outs.last().unwrap().question_id.clone();
    assert_ne!(new_q, old_q);
    let rest = conv.until_final("the answer to the barge-in").await;
    assert!(
        rest.iter().all(|o| o.question_id != old_q),
        "nothing of the old turn after the barge-in:\n  {}",
        describe_all(&rest)
    );
    assert!(
        rest.iter()
            .any(|o| o.user_transcript == "Stop, how much are tickets?")
    );
    let (q, _) = check_grpc_reply(
        &rest[rest
            .iter()
            .position(|o| !o.user_transcript.is_empty())
            .unwrap()
            + 1..],
        "Sure, tickets are twelve euros.",
        true,
    );
    assert_eq!(q, new_q);
    fake.wait_until(WAIT, "the old model request was aborted", |f| {
        f.chats_aborted() == 1
    })
    .await;
    // Nothing of the old reply was spoken yet (its first sentence never ended), so only the
    // question of the old turn is stored.
    let h = wait_history(&s, &cid, &sid, 3).await;
    assert_eq!(
        h,
        [
            pair("user", "Tell me about the harbour."),
            pair("user", "Stop, how much are tickets?"),
            pair("assistant", "Sure, tickets are twelve euros.")
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_bad_audio_formats_end_the_stream_with_invalid_argument() {
    let Rig {
        s,
        fake: _fake,
        cid: _cid,
    } = rig().await;
    let mut client = grpc(&s).await;
    let pcm = speech_pcm(16_000, 1, 100);
    let mut opus = chunk(pcm.clone(), 16_000, 1, true);
    opus.format = "opus".into();
    for (what, bad) in [
        ("opus", opus),
        ("4000 Hz", chunk(pcm.clone(), 4_000, 1, true)),
        ("96000 Hz", chunk(pcm.clone(), 96_000, 1, true)),
        ("3 channels", chunk(pcm.clone(), 16_000, 3, true)),
        ("0 channels", chunk(pcm.clone(), 16_000, 0, true)),
    ] {
        let mut conv = converse(&mut client, None).await;
        conv.audio(vec![bad]).await;
        let status = conv.end_status(Duration::from_secs(5)).await;
        assert_eq!(
            status.code(),
            tonic::Code::InvalidArgument,
            "{what}: {status:?}"
        );
        let end = tokio::time::timeout(WAIT, conv.out.message())
            .await
            .unwrap();
        assert!(matches!(end, Ok(None)), "{what}: the stream ended: {end:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_interrupt_answers_per_session_and_touches_no_other() {
    let Rig { s, fake, cid } = rig().await;
    let mut client = grpc(&s).await;
    for unknown in [
        uuid::Uuid::new_v4().to_string(),
        "nope".into(),
        String::new(),
    ] {
        let r = client
            .interrupt(InterruptRequest {
                session_id: unknown.clone(),
            })
            .await
            .unwrap()
            .into_inner();
        assert!(!r.success, "{unknown:?} is no session");
    }
    let idle = s.session(&cid).await;
    let r = client
        .interrupt(InterruptRequest { session_id: idle })
        .await
        .unwrap()
        .into_inner();
    assert!(
        r.success,
        "an existing session, even with nothing to cancel"
    );

    let reply = "Two streams talk at once. Only one of them is cut short.";
    fake.set_chat(
        Chat::reply(reply)
            .deltas(8)
            .chunk_delay(Duration::from_millis(80)),
    );
    let (a, b) = (
        uuid::Uuid::new_v4().to_string(),
        uuid::Uuid::new_v4().to_string(),
    );
    let mut ca = converse(&mut client, Some(config_for(&a))).await;
    let mut cb = converse(&mut client, Some(config_for(&b))).await;
    ca.text("Talk, A.").await;
    cb.text("Talk, B.").await;
    ca.until("a's first delta", |o| !o.transcript.is_empty())
        .await;
    cb.until("b's first delta", |o| !o.transcript.is_empty())
        .await;
    let r = client
        .interrupt(InterruptRequest {
            session_id: a.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(r.success);
    let outs = cb.until_final("b's whole reply").await;
    assert_eq!(outs.last().unwrap().transcript, reply);
    let rest_a = ca.quiet(Duration::from_millis(300)).await;
    assert!(
        rest_a.iter().all(|o| !o.is_final),
        "a was interrupted:\n  {}",
        describe_all(&rest_a)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_config_joins_an_existing_session_and_continues_its_history() {
    let Rig { s, fake, cid } = rig().await;
    let sid = s.session(&cid).await;
    fake.push_chat(Chat::reply("The lens is from Paris."));
    s.post_json(
        &format!("/api/v1/sessions/{sid}/message"),
        json!({"text": "Where is the lens from?"}),
        202,
    )
    .await;
    wait_history(&s, &cid, &sid, 2).await;
    let sessions_before = s.get_json("/api/v1/sessions", 200).await;

    let mut client = grpc(&s).await;
    let mut conv = converse(&mut client, Some(config_for(&sid))).await;
    fake.push_chat(Chat::reply("It was made in 1872."));
    conv.text("When was it made?").await;
    let outs = conv.until_final("the reply in the joined session").await;
    check_grpc_reply(&outs, "It was made in 1872.", true);
    let chats = fake.wait_chats(2, WAIT).await;
    assert_eq!(
        chats[1].conversation(),
        [
            pair("user", "Where is the lens from?"),
            pair("assistant", "The lens is from Paris."),
            pair("user", "When was it made?"),
        ]
    );
    let h = wait_history(&s, &cid, &sid, 4).await;
    assert_eq!(
        h[2..],
        [
            pair("user", "When was it made?"),
            pair("assistant", "It was made in 1872.")
        ]
    );
    let sessions_after = s.get_json("/api/v1/sessions", 200).await;
    assert_eq!(sessions_before, sessions_after, "no new session");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_config_with_a_new_id_creates_the_session_seeded_with_dialog_context() {
    let Rig { s, fake, cid } = rig().await;
    let sid = uuid::Uuid::new_v4().to_string();
    let mut client = grpc(&s).await;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let config = VoiceLlmConfig {
        session_id: sid.clone(),
        character_id: cid.clone(),
        bot_name: "Captain Ada".into(),
        dialog_context: vec![
            VoiceLlmDialogContextItem {
                role: "user".into(),
                text: "I love old ships.".into(),
                timestamp: now_ms - 60_000,
            },
            VoiceLlmDialogContextItem {
                role: "assistant".into(),
                text: "Then you will like our harbour hall.".into(),
                timestamp: now_ms - 50_000,
            },
        ],
        ..Default::default()
    };
    let mut conv = converse(&mut client, Some(config)).await;
    fake.set_chat(Chat::reply("There is a model of a clipper too."));
    conv.text("What else is there?").await;
    let outs = conv.until_final("the reply").await;
    check_grpc_reply(&outs, "There is a model of a clipper too.", true);

    let sessions = s.get_json("/api/v1/sessions", 200).await;
    let listed = sessions
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["id"] == sid.as_str())
        .unwrap_or_else(|| panic!("session {sid} listed: {sessions}"));
    assert_eq!(listed["character_id"], cid.as_str());
    let h = wait_history(&s, &cid, &sid, 4).await;
    assert_eq!(
        h,
        [
            pair("user", "I love old ships."),
            pair("assistant", "Then you will like our harbour hall."),
            pair("user", "What else is there?"),
            pair("assistant", "There is a model of a clipper too."),
        ]
    );
    let chat = &fake.wait_chats(1, WAIT).await[0];
    assert_eq!(chat.conversation(), h[..3]);
    assert!(chat.system().contains("Captain Ada"), "bot_name override");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_check_voice() {
    let Rig { s, fake, cid: _cid } = rig().await;
    let mut client = grpc(&s).await;
    let check = |provider: &str, voice: &str| CheckVoiceRequest {
        config: Some(VoiceLlmConfig {
            provider: provider.into(),
            voice: voice.into(),
            ..Default::default()
        }),
    };
    if docent::engine::providers::local_tts_available() {
        let r = client
            .check_voice(check("local", "en-us"))
            .await
            .unwrap()
            .into_inner();
        assert!(r.ok, "espeak-ng has en-us: {r:?}");
        assert!(r.provider_error.is_empty());
    } else {
        eprintln!("note: espeak-ng is not installed; the local voice check is skipped");
    }
    let r = client
        .check_voice(check("local", "xx-no-such-voice"))
        .await
        .unwrap()
        .into_inner();
    assert!(!r.ok && !r.provider_error.is_empty(), "{r:?}");
    let r = client
        .check_voice(check("acme-voices", "en-us"))
        .await
        .unwrap()
        .into_inner();
    assert!(!r.ok && !r.provider_error.is_empty(), "{r:?}");

    // A remote provider: a minimal request must succeed.
    fake.set_speech(Speech {
        rejected_voices: vec!["nosuchvoice".into()],
        ..Speech::millis(100)
    });
    let r = client
        .check_voice(check("openai", "alloy"))
        .await
        .unwrap()
        .into_inner();
    assert!(r.ok, "{r:?}");
    let r = client
        .check_voice(check("openai", "nosuchvoice"))
        .await
        .unwrap()
        .into_inner();
    assert!(
        !r.ok && !r.provider_error.contains("not supported"),
        "the provider's answer is logged, not passed on to a conversation client: {r:?}"
    );
    assert_eq!(r.provider_error, "the provider does not accept this voice");
    let v = s
        .post_json(
            "/api/v1/characters/test-voice",
            json!({"voice_provider": "openai", "voice_type": "nosuchvoice"}),
            502,
        )
        .await;
    assert!(
        v["error"].as_str().unwrap().contains("not supported"),
        "{v}"
    );
    s.post_json(
        "/api/v1/characters/test-voice",
        json!({"voice_provider": "openai", "voice_type": "alloy"}),
        200,
    )
    .await;
    let asked = fake.speeches();
    assert!(asked.iter().all(|sp| sp.authorization.as_deref()
        == Some(&*format!("Bearer {TTS_KEY}"))
        && sp.body["model"] == "fake-tts"));

    // A provider that does not answer: DEADLINE_EXCEEDED within the check's bound.
    fake.set_speech(Speech {
        failure: Some(Failure::Hang),
        ..Speech::millis(100)
    });
    let started = Instant::now();
    let r = tokio::time::timeout(WAIT, client.check_voice(check("openai", "alloy")))
        .await
        .expect("CheckVoice is bounded");
    let status = r.expect_err("a hanging provider is no answer");
    assert_eq!(status.code(), tonic::Code::DeadlineExceeded, "{status:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

// ---------------------------------------------------------------------------------------------
// Provider failures

const APOLOGY_HINT: &str = "sorry";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_failures_apologise_and_the_session_goes_on() {
    // The stream's own bounds govern the reply (the general bound would take 10 s).
    let Rig { s, fake, cid } = rig_with(|c| {
        c.providers.timeout_ms = 10_000;
        c.providers.first_byte_timeout_ms = Some(500);
        c.providers.chunk_timeout_ms = Some(500);
    })
    .await;
    let sid = s.session(&cid).await;
    let mut ws = Ws::connect(&s, &sid).await;
    ws.send(json!({"type": "audio_output", "enabled": true}))
        .await;
    fake.set_chat(Chat::reply("Yes, I am here."));
    let closed = fake_openai::closed_base_url().await;
    let (down, failed) = ("provider_unavailable", "llm_failed");
    let saying = || Chat::reply("I was saying something when");
    let status = |code, message: &str| Some(Chat::failing(Failure::Status(code, message.into())));
    let cases: Vec<(&str, Option<Chat>, &str)> = vec![
        ("the model is down", None, down),
        (
            "the model hangs",
            Some(Chat::failing(Failure::Hang)),
            failed,
        ),
        (
            "the model stalls mid-reply",
            Some(saying().stall_after(2)),
            failed,
        ),
        (
            "the model answers 500",
            status(500, "the model crashed"),
            failed,
        ),
        ("the model answers 503", status(503, "overloaded"), down),
        (
            "the model answers garbage",
            Some(Chat::failing(Failure::Garbage)),
            failed,
        ),
        (
            "the model sends headers, then nothing",
            Some(Chat::reply("Never said.").stall_after(0)),
            failed,
        ),
        (
            "the model's connection is cut mid-reply",
            Some(saying().cut_after(2)),
            failed,
        ),
        (
            "the model sends garbage mid-reply",
            Some(saying().garbage_after(2)),
            failed,
        ),
        ("the host accepts and never answers", None, failed),
    ];
    // A host whose kernel accepts connections that nobody ever reads or answers.
    let mute = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mute_url = format!("http://{}/v1", mute.local_addr().unwrap());
    let held = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let keep = held.clone();
    let mute_task = tokio::spawn(async move {
        while let Ok((sock, _)) = mute.accept().await {
            keep.lock().unwrap().push(sock);
        }
    });
    for (what, script, code) in cases {
        let mute_host = what.starts_with("the host");
        let aborted_before = fake.chats_aborted();
        match &script {
            None if mute_host => set_llm_url(&s, &mute_url).await,
            None => set_llm_url(&s, &closed).await,
            Some(chat) => fake.set_chat(chat.clone()),
        }
        let started = Instant::now();
        ws.send(json!({"type": "text_input", "text": "Are you there?"}))
            .await;
        let frames = ws.turn(what).await;
        let took = started.elapsed();
        let err = frames
            .iter()
            .find(|f| f.is("error"))
            .unwrap_or_else(|| panic!("{what}: an error event: {}", summary(&frames)));
        let err = err.json().unwrap();
        assert_eq!(err["code"], code, "{what}: {err}");
        assert!(!err["message"].as_str().unwrap_or("").is_empty());
        if let Some(Chat {
            failure: Some(Failure::Status(_, m)),
            ..
        }) = &script
        {
            assert!(
                !err["message"].as_str().unwrap().contains(m.as_str()),
                "{what}: the provider's message is logged, never passed on: {err}"
            );
        }
        let apology = frames
            .iter()
            .find(|f| f.is("assistant_message"))
            .unwrap_or_else(|| panic!("{what}: an apology: {}", summary(&frames)));
        let text = apology.json().unwrap()["text"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(text.to_lowercase().contains(APOLOGY_HINT), "{what}: {text}");
        assert_eq!(
            assistant_text(&frames).1,
            text,
            "{what}: the final is the apology"
        );
        assert!(
            frames.iter().any(|f| matches!(f, Frame::Binary(_))),
            "{what}: the apology is spoken: {}",
            summary(&frames)
        );
        assert!(
            took < Duration::from_millis(2_500),
            "{what}: answered within about the timeout, took {took:?}"
        );
        // Nothing is left behind: a stream the kiosk gave up on is dropped (the fake sees its
        // client go away), and the turn is over (the next one starts at once).
        if script
            .as_ref()
            .is_some_and(|c| c.stall_after.is_some() || c.cut_after.is_some())
        {
            fake.wait_until(WAIT, &format!("{what}: the stream is dropped"), |f| {
                f.chats_aborted() > aborted_before
            })
            .await;
        }
        // The next turn works.
        match &script {
            None => set_llm_url(&s, &fake.base_url()).await,
            Some(_) => fake.set_chat(Chat::reply("Yes, I am here.")),
        }
        ws.send(json!({"type": "text_input", "text": "Now?"})).await;
        let frames = ws.turn(&format!("the turn after {what}")).await;
        assert_eq!(assistant_text(&frames).1, "Yes, I am here.", "{what}");
        assert!(!frames.iter().any(|f| f.is("error")), "{what}");
    }
    mute_task.abort();
    assert!(
        !held.lock().unwrap().is_empty(),
        "the mute host was reached"
    );

    // Speech recognition and synthesis failures are reported with their own codes.
    fake.set_transcription(Transcription {
        failure: Some(Failure::Status(500, "whisper fell over".into())),
        ..Transcription::text("")
    });
    ws.send(json!({"type": "audio_start"})).await;
    ws.send_raw(Message::binary(speech_pcm(16_000, 1, 300)))
        .await;
    ws.send(json!({"type": "audio_end"})).await;
    let frames = ws.turn("a failed transcription").await;
    let err = frames.iter().find(|f| f.is("error")).unwrap();
    assert_eq!(
        err.json().unwrap()["code"],
        "asr_failed",
        "{}",
        summary(&frames)
    );

    fake.set_speech(Speech {
        failure: Some(Failure::Status(500, "tts fell over".into())),
        ..Speech::millis(100)
    });
    ws.send(json!({"type": "text_input", "text": "Say something."}))
        .await;
    let frames = ws
        .until("a tts error", |f| f.is("error") || is_status(f, "idle"))
        .await;
    let err = frames.last().unwrap();
    assert!(err.is("error"), "{}", summary(&frames));
    assert_eq!(err.json().unwrap()["code"], "tts_failed");
    ws.until("idle after the tts error", |f| is_status(f, "idle"))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_failure_on_grpc_ends_the_turn_with_a_final_apology() {
    let Rig { s, fake, cid: _cid } = rig_with(|c| c.providers.timeout_ms = 500).await;
    let mut client = grpc(&s).await;
    let mut conv = converse(&mut client, None).await;
    fake.push_chat(Chat::failing(Failure::Status(500, "boom".into())));
    conv.text("Hello?").await;
    let outs = conv.until_final("the apology").await;
    let fin = outs.last().unwrap();
    assert!(
        fin.transcript.to_lowercase().contains(APOLOGY_HINT),
        "{}",
        describe_all(&outs)
    );
    // The apology is spoken before the final, which closes the audio with an empty chunk.
    let spoken = outs
        .iter()
        .filter(|o| !o.is_final && o.audio.as_ref().is_some_and(|a| !a.data.is_empty()))
        .inspect(|o| assert_eq!(o.question_id, fin.question_id, "{}", describe(o)))
        .count();
    assert!(
        spoken > 0,
        "the apology is spoken:\n  {}",
        describe_all(&outs)
    );
    assert!(
        fin.audio
            .as_ref()
            .is_some_and(|a| a.is_final && a.data.is_empty()),
        "{}",
        describe(fin)
    );
    conv.text("Hello again?").await;
    let outs = conv.until_final("the next reply").await;
    check_grpc_reply(&outs, "Hello from the fake model.", true);
}

/// A long sentence is synthesised in clauses by a provider that answers whole, the first one
/// short, so that it sounds sooner; the text clients see is the sentence as it is, the speech
/// provider gets it as it is said (numbers as words).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ws_a_long_sentence_is_synthesised_clause_by_clause() {
    let (Rig { s: _s, fake, .. }, _, mut ws) = rig_on_socket().await;
    let reply = format!("{LONG_ANSWER} See you soon.");
    fake.set_chat(Chat::reply(&reply).deltas(12));
    fake.set_speech(Speech::millis(300));
    ws.send(json!({"type": "audio_output", "enabled": true}))
        .await;
    ws.send(json!({"type": "text_input", "text": "How much are tickets?"}))
        .await;
    let frames = ws.turn("the spoken reply").await;
    let (deltas, whole) = assistant_text(&frames);
    assert_eq!((deltas.as_str(), whole.as_str()), (&*reply, &*reply));
    let inputs: Vec<String> = fake
        .speeches()
        .iter()
        .map(|sp| sp.body["input"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        inputs,
        [
            "Tickets cost twelve euros for adults,",
            "eight euros for students and six euros for seniors, and children under twelve enter \
             free of charge on every day of the week.",
            "See you soon."
        ]
    );
    let bytes = audio_bytes(&frames);
    assert_eq!(bytes, 3 * 300 * 24 * 2, "three pieces of 300 ms");
    assert_eq!(frames.iter().filter(|f| f.is("audio_start")).count(), 1);
    assert_eq!(frames.iter().filter(|f| f.is("audio_end")).count(), 1);
}

// ---------------------------------------------------------------------------------------------
// The offline engine

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offline_engine_answers_spoken_questions_from_knowledge() {
    use docent::engine::providers::find_program;
    if find_program("espeak-ng").is_none() || find_program("pocketsphinx_continuous").is_none() {
        eprintln!(
            "note: espeak-ng or pocketsphinx_continuous is missing; the offline engine test is skipped"
        );
        return;
    }
    let s = Server::start().await;
    let cid = s.default_character().await;
    s.knowledge_ready(&cid, "museum.txt", KNOWLEDGE).await;

    let dir = tempfile::tempdir().unwrap();
    let wav_path = dir.path().join("q.wav");
    let status = tokio::process::Command::new("espeak-ng")
        .args(["-v", "en-us", "-w"])
        .arg(&wav_path)
        .arg("When does the museum close?")
        .status()
        .await
        .unwrap();
    assert!(status.success());
    let wav = docent::engine::pcm::parse_wav(&std::fs::read(&wav_path).unwrap()).unwrap();
    assert_eq!(wav.channels, 1);
    let pcm = docent::engine::pcm::samples_to_le(&wav.samples);

    let mut client = grpc(&s).await;
    let mut conv = converse(&mut client, None).await;
    conv.audio(utterance(&pcm, wav.rate as i32, 1)).await;
    let outs = conv.until_final("the offline answer").await;
    let heard = outs
        .iter()
        .find(|o| !o.user_transcript.is_empty())
        .map(|o| o.user_transcript.to_lowercase())
        .unwrap_or_else(|| panic!("a user transcript:\n  {}", describe_all(&outs)));
    assert!(
        heard.contains("museum") || heard.contains("close"),
        "recognised {heard:?}"
    );
    let answer = &outs.last().unwrap().transcript;
    assert!(
        answer.contains("6 pm"),
        "answered {answer:?} (heard {heard:?})"
    );
    let audio: usize = outs
        .iter()
        .filter(|o| !o.is_final)
        .filter_map(|o| o.audio.as_ref())
        .map(|a| {
            assert_eq!((a.sample_rate, a.channels), (24_000, 1));
            a.data.len()
        })
        .sum();
    assert!(
        audio > 24_000,
        "about a second of speech or more, got {audio} bytes"
    );
}

/// One long sentence, as the offline engine reads out a knowledge passage.
const LONG_ANSWER: &str = "Tickets cost 12 euros for adults, 8 euros for students and 6 euros \
for seniors, and children under twelve enter free of charge on every day of the week.";

/// A server in a process of its own whose espeak-ng is slow, as on a slow board: a wrapper that
/// writes the start of the real espeak-ng's speech at once and the rest after `pause`, noting
/// its pid in `pids`. Its default character knows `LONG_ANSWER`. None without espeak-ng.
async fn slow_espeak_server(pause: Duration) -> Option<(Server, String, tempfile::TempDir)> {
    let Some(real) = docent::engine::providers::find_program("espeak-ng") else {
        eprintln!("note: espeak-ng is missing; the offline speech test is skipped");
        return None;
    };
    let bin = tempfile::tempdir().unwrap();
    let script = format!(
        "#!/bin/sh\n\
         echo $$ >> '{dir}/pids'\n\
         out=\"$(mktemp)\"\n\
         '{real}' \"$@\" > \"$out\" || exit $?\n\
         head -c 60000 \"$out\"\n\
         sleep {pause}\n\
         tail -c +60001 \"$out\"\n\
         rm -f \"$out\"\n",
        dir = bin.path().display(),
        real = real.display(),
        pause = pause.as_secs_f64(),
    );
    let wrapper = bin.path().join("espeak-ng");
    std::fs::write(&wrapper, script).unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let path = std::env::join_paths(std::iter::once(bin.path().to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    let s = Server::spawn(Process::new().args(["--devices", "none"]).env("PATH", path)).await;
    let cid = s.default_character().await;
    s.knowledge_ready(&cid, "tickets.txt", LONG_ANSWER).await;
    Some((s, cid, bin))
}

/// Whether process `pid` has ended (gone, or a zombie not reaped yet) within `within`.
async fn process_ends(pid: &str, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => return true,
            Ok(stat) if stat.rsplit(')').next().unwrap().trim().starts_with('Z') => return true,
            Ok(_) if Instant::now() > deadline => return false,
            Ok(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// A long answer of the offline engine is heard while espeak-ng still synthesises it: its
/// speech is passed on as espeak-ng writes it, not once the whole sentence is done, and none of
/// it is lost on the way; the text clients see is the sentence as it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offline_engine_speaks_a_long_answer_while_synthesising_it() {
    let pause = Duration::from_secs(1);
    let Some((s, cid, _bin)) = slow_espeak_server(pause).await else {
        return;
    };
    // What espeak-ng says for the sentence, at the rate replies are sent.
    let out = tokio::process::Command::new("espeak-ng")
        .args(["--stdout", "-v", "en-us", "--", LONG_ANSWER])
        .output()
        .await
        .unwrap();
    let wav = docent::engine::pcm::parse_wav(&out.stdout).unwrap();
    let expected = docent::engine::pcm::resample(&wav.samples, wav.rate, 24_000);

    let (sid, mut ws) = ask_aloud(&s, &cid, "How much do tickets cost?").await;
    let sent = Instant::now();
    let mut frames = Vec::new();
    let mut arrivals = Vec::new();
    while !frames.last().is_some_and(is_final_assistant) {
        let f = ws.next(sent + WAIT, "the spoken long answer").await;
        if let Frame::Binary(n) = f {
            arrivals.push((sent.elapsed(), n));
        }
        frames.push(f);
    }
    let (deltas, text) = assistant_text(&frames);
    assert_eq!((deltas.trim(), text.as_str()), (LONG_ANSWER, LONG_ANSWER));
    let bytes: usize = arrivals.iter().map(|a| a.1).sum();
    assert_eq!(bytes, expected.len() * 2, "all of the speech, once");
    assert!(arrivals.len() > 10, "{} audio chunks", arrivals.len());
    let (first, last) = (arrivals[0].0, arrivals.last().unwrap().0);
    eprintln!(
        "first audio {first:?}, last {last:?} after the question ({} chunks; espeak-ng slowed by {pause:?})",
        arrivals.len()
    );
    assert!(
        last - first > pause * 7 / 10,
        "the first audio ({first:?}) comes before espeak-ng has finished (the last at {last:?})"
    );
    let h = wait_history(&s, &cid, &sid, 2).await;
    assert_eq!(h[1], pair("assistant", LONG_ANSWER));
}

/// An interrupt while the offline engine speaks stops espeak-ng at once, and nothing more of
/// the turn follows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offline_engine_interrupt_stops_the_speech_synthesis() {
    let Some((s, cid, bin)) = slow_espeak_server(Duration::from_secs(5)).await else {
        return;
    };
    let (_, mut ws) = ask_aloud(&s, &cid, "How much do tickets cost?").await;
    let frames = ws
        .until("the first audio", |f| matches!(f, Frame::Binary(_)))
        .await;
    let old = frames.iter().rev().find_map(Frame::turn).unwrap();
    ws.send(json!({"type": "interrupt"})).await;
    let interrupted = Instant::now();
    let pids = std::fs::read_to_string(bin.path().join("pids")).unwrap();
    let pid = pids.lines().last().unwrap().trim().to_string();
    assert!(
        process_ends(&pid, Duration::from_secs(2)).await,
        "espeak-ng (pid {pid}) still runs {:?} after the interrupt",
        interrupted.elapsed()
    );
    ws.until("idle after the interrupt", |f| {
        is_status(f, "idle") && f.turn().is_some_and(|t| t > old)
    })
    .await;
    let after = ws.quiet(Duration::from_millis(1_500)).await;
    assert!(
        after
            .iter()
            .all(|f| !matches!(f, Frame::Binary(_)) && f.turn().is_none_or(|t| t > old)),
        "nothing of the interrupted turn after the interrupt:\n  {}",
        summary(&after)
    );
    assert!(!after.iter().any(is_final_assistant));
}
