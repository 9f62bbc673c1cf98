//! The gRPC `VoiceLLMService` on the main listener (HTTP/2 without TLS): Converse is one more
//! watcher and input of an engine session, CheckVoice asks a provider, Interrupt cancels a
//! session's turn. The decisions are in docs/api.md, "Realtime".

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use futures_util::{Stream, StreamExt};
use tokio::sync::{broadcast, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status, Streaming};

use super::streams::{Buffer, Streams};
use crate::engine::access::{Owner, Use};
use crate::engine::error::Error;
use crate::engine::live::{AudioWanted, Event, LiveSession, Overrides};
use crate::engine::providers::CHECK_TIMEOUT;
use crate::engine::sessions::NewSession;
use crate::engine::turn::TurnInput;
use crate::engine::{Engine, SessionId, new_id, pcm};
use crate::proto::voice_llm_input::Input;
use crate::proto::voice_llm_service_server::{VoiceLlmService, VoiceLlmServiceServer};
use crate::proto::{
    AudioChunk, CheckVoiceRequest, CheckVoiceResponse, InterruptRequest, InterruptResponse,
    VoiceLlmConfig, VoiceLlmInput, VoiceLlmOutput,
};

/// Outputs queued for one stream before it counts as too slow.
const OUT_QUEUE: usize = 256;
/// Longest utterance buffered (bytes of client PCM, ~60 s at 48 kHz stereo).
const UTTERANCE_MAX_BYTES: usize = 48_000 * 2 * 2 * 60;
/// Level above which a block counts as speech for voice activity detection.
const SPEECH_RMS: f64 = 500.0;

/// Largest message of a unary call (`CheckVoice`, `Interrupt`: a few short fields).
const UNARY_MESSAGE_MAX: usize = 16 * 1024;
/// Largest message of a `Converse` stream (an audio chunk; a config with its bounded
/// `dialog_context`).
const STREAM_MESSAGE_MAX: usize = 1 << 20;

/// Mounts the service under its gRPC path prefix: `Converse` and the unary calls each with
/// their own message bound, and every call authenticated from its headers before any of its
/// body is read (tonic would otherwise decode a whole message before a handler looks at the
/// caller).
pub fn routes<S: Clone + Send + Sync + 'static>(
    engine: Arc<Engine>,
    streams: Arc<Streams>,
) -> axum::Router<S> {
    use tonic::server::NamedService;
    let service = |limit: usize| {
        VoiceLlmServiceServer::new(Voice {
            engine: engine.clone(),
            streams: streams.clone(),
        })
        .max_decoding_message_size(limit)
    };
    let name = VoiceLlmServiceServer::<Voice>::NAME;
    axum::Router::new()
        .route_service(&format!("/{name}/Converse"), service(STREAM_MESSAGE_MAX))
        .route_service(&format!("/{name}/{{*method}}"), service(UNARY_MESSAGE_MAX))
        .layer(axum::middleware::from_fn_with_state(
            engine.clone(),
            authenticate,
        ))
}

/// Turns a call's credentials into its caller (a request extension the handlers read), or
/// answers `UNAUTHENTICATED` without reading the body.
async fn authenticate(
    axum::extract::State(engine): axum::extract::State<Arc<Engine>>,
    mut req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let peer = req
        .extensions()
        .get::<super::listen::Transport>()
        .map(|t| t.peer);
    match super::auth::caller(&engine, req.headers(), peer, None) {
        Ok(owner) => {
            let opener = super::auth::Opener::new(req.headers(), peer, None, owner.clone());
            req.extensions_mut().insert(owner);
            req.extensions_mut().insert(Arc::new(opener));
            next.run(req).await
        }
        Err(e) => {
            let status = if e.status == axum::http::StatusCode::UNAUTHORIZED {
                Status::unauthenticated(e.message)
            } else {
                Status::internal("internal error")
            };
            status.into_http::<axum::body::Body>()
        }
    }
}

struct Voice {
    engine: Arc<Engine>,
    streams: Arc<Streams>,
}

impl Voice {
    /// The caller of a gRPC request, as `authenticate` found it.
    fn caller<T>(&self, request: &Request<T>) -> Result<Owner, Status> {
        request.extensions().get::<Owner>().cloned().ok_or_else(|| {
            Status::unauthenticated("a client key, an admin session or loopback is required")
        })
    }
}

/// An output and the turn it belongs to (None: no turn, e.g. a task event).
type Tagged = (Option<u64>, VoiceLlmOutput);
type OutStream = Pin<Box<dyn Stream<Item = Result<VoiceLlmOutput, Status>> + Send>>;

fn status_of(e: Error) -> Status {
    match e {
        Error::BadRequest(m) => Status::invalid_argument(m),
        Error::NotFound(m) => Status::not_found(m),
        Error::Forbidden(m) => Status::permission_denied(m),
        Error::TooMany(m) => Status::resource_exhausted(m),
        Error::Conflict(m) => Status::already_exists(m),
        Error::Unavailable(m) => Status::unavailable(m),
        Error::Timeout(m) => Status::deadline_exceeded(m),
        Error::InsufficientStorage(m) => Status::resource_exhausted(m),
        // A provider's answer or our own failure: for the log, never for the client.
        other => {
            tracing::warn!("gRPC call failed: {other}");
            Status::internal("internal error")
        }
    }
}

/// What a voice check tells a client when it fails: our own refusal (an unknown provider, a
/// voice the kiosk does not list) as it is; a provider's answer never (it is logged).
fn voice_check_error(e: Error) -> String {
    match e {
        Error::BadRequest(m) => m,
        Error::Unavailable(m) => {
            tracing::info!("voice check: {m}");
            "the provider is unavailable".into()
        }
        other => {
            tracing::info!("voice check: {other}");
            "the provider does not accept this voice".into()
        }
    }
}

#[tonic::async_trait]
impl VoiceLlmService for Voice {
    type ConverseStream = OutStream;

    async fn converse(
        &self,
        request: Request<Streaming<VoiceLlmInput>>,
    ) -> Result<Response<OutStream>, Status> {
        let caller = self.caller(&request)?;
        let place = self
            .streams
            .grpc(&caller)
            .ok_or_else(|| Status::resource_exhausted("too many gRPC streams; try again later"))?;
        let opener = request
            .extensions()
            .get::<Arc<super::auth::Opener>>()
            .cloned()
            .ok_or_else(|| Status::internal("internal error"))?;
        let inputs = request.into_inner();
        let (tx, rx) = mpsc::channel::<Result<Tagged, Status>>(OUT_QUEUE);
        let live_slot: Arc<OnceLock<Arc<LiveSession>>> = Arc::default();
        let conversation = Conversation {
            engine: self.engine.clone(),
            caller,
            streams: self.streams.clone(),
            live: live_slot.clone(),
            ids: Arc::default(),
            out: tx.clone(),
            pending: None,
            utterance: None,
            question: None,
            closing: CancellationToken::new(),
            revoked: CancellationToken::new(),
            last_turn: Arc::default(),
        };
        let closing = conversation.closing.clone();
        // The stream ends with the credential that opened it.
        let (engine, revoked, done) = (
            self.engine.clone(),
            conversation.revoked.clone(),
            closing.clone(),
        );
        tokio::spawn(async move {
            tokio::select! {
                () = opener.ended(&engine) => revoked.cancel(),
                () = done.cancelled() => {}
            }
        });
        tokio::spawn(async move {
            let result = conversation.run(inputs).await;
            closing.cancel();
            if let Err(status) = result {
                let _ = tx.send(Err(status)).await;
            }
        });
        // Outputs of a turn that is no longer current are dropped as late as possible, so
        // nothing of an interrupted turn follows the interrupt's answer. The place is given
        // back when the response stream is dropped.
        let stream = ReceiverStream::new(rx).filter_map(move |item| {
            let _place = &place;
            let current = live_slot.get().map(|l| l.turn_seq());
            let keep = match &item {
                Ok((Some(seq), _)) => current.is_none_or(|c| c == *seq),
                _ => true,
            };
            std::future::ready(keep.then(|| item.map(|(_, out)| out)))
        });
        Ok(Response::new(Box::pin(stream)))
    }

    async fn check_voice(
        &self,
        request: Request<CheckVoiceRequest>,
    ) -> Result<Response<CheckVoiceResponse>, Status> {
        let caller = self.caller(&request)?;
        self.engine.spend_message(&caller).map_err(status_of)?;
        let config = request.into_inner().config.unwrap_or_default();
        let settings = self.engine.settings();
        let provider = if config.provider.is_empty() {
            settings.tts.provider.clone()
        } else {
            config.provider
        };
        let voice = if config.voice.is_empty() {
            settings.tts.voice.clone()
        } else {
            config.voice
        };
        let checked =
            tokio::time::timeout(CHECK_TIMEOUT, self.engine.test_voice(&provider, &voice))
                .await
                .map_err(|_| Status::deadline_exceeded("the provider did not answer in time"))?;
        Ok(Response::new(match checked {
            Ok(()) => CheckVoiceResponse {
                ok: true,
                provider_error: String::new(),
            },
            Err(Error::Timeout(m)) => return Err(Status::deadline_exceeded(m)),
            Err(e) => CheckVoiceResponse {
                ok: false,
                provider_error: voice_check_error(e),
            },
        }))
    }

    async fn interrupt(
        &self,
        request: Request<InterruptRequest>,
    ) -> Result<Response<InterruptResponse>, Status> {
        let caller = self.caller(&request)?;
        let id = request.into_inner().session_id;
        let engine = self.engine.clone();
        let live = tokio::task::spawn_blocking(move || {
            SessionId::parse(&id).and_then(|id| engine.live_for(&id, &caller, Use::Steer))
        })
        .await
        .map_err(|_| Status::internal("internal error"))?;
        let success = match live {
            Ok(live) => {
                self.engine.interrupt(&live);
                true
            }
            Err(e @ Error::Forbidden(_)) => return Err(status_of(e)),
            Err(_) => false,
        };
        Ok(Response::new(InterruptResponse { success }))
    }
}

/// Question and reply ids of the turns of one stream.
type Ids = Arc<Mutex<HashMap<u64, (String, String)>>>;

struct Utterance {
    rate: u32,
    channels: u16,
    bytes: Buffer,
    heard_speech: bool,
    silence_ms: u64,
}

/// One Converse stream.
struct Conversation {
    engine: Arc<Engine>,
    /// Who opened the stream: the owner of a session it creates.
    caller: Owner,
    streams: Arc<Streams>,
    live: Arc<OnceLock<Arc<LiveSession>>>,
    ids: Ids,
    out: mpsc::Sender<Result<Tagged, Status>>,
    /// The last config seen before the session was joined.
    pending: Option<VoiceLlmConfig>,
    utterance: Option<Utterance>,
    /// Question id announced by the barge-in of the utterance in progress.
    question: Option<String>,
    /// Cancelled when the client has closed its side: the outputs end with the turn in
    /// progress.
    closing: CancellationToken,
    /// Cancelled when the credential that opened the stream has ended: the stream ends.
    revoked: CancellationToken,
    /// The last turn this stream started (0: none).
    last_turn: Arc<AtomicU64>,
}

impl Conversation {
    async fn run(mut self, mut inputs: Streaming<VoiceLlmInput>) -> Result<(), Status> {
        loop {
            let message = tokio::select! {
                m = inputs.message() => m?,
                () = self.revoked.cancelled() => {
                    return Err(Status::unauthenticated(
                        "the credential that opened this stream has ended",
                    ));
                }
            };
            let Some(input) = message else { break };
            match input.input {
                Some(Input::Config(c)) => match self.live.get() {
                    None => self.pending = Some(c),
                    Some(live) => {
                        let merged = merge(&self.engine, live, live.overrides(), c).await?;
                        live.set_overrides(merged);
                    }
                },
                Some(Input::Text(text)) => {
                    let live = self.join().await?;
                    if text.trim().is_empty() {
                        continue;
                    }
                    self.start(
                        &live,
                        TurnInput::Text {
                            text,
                            stored: false,
                        },
                        new_id(),
                    )?;
                }
                Some(Input::Audio(chunk)) => {
                    let live = self.join().await?;
                    self.audio(&live, chunk).await?;
                }
                Some(Input::Image(_)) => {
                    // None of the kiosk's providers takes images yet; the latest frame would
                    // be handed to one that does.
                    self.join().await?;
                }
                None => {}
            }
        }
        Ok(())
    }

    /// The session of this stream, joined or created on the first input that needs it.
    async fn join(&mut self) -> Result<Arc<LiveSession>, Status> {
        if let Some(live) = self.live.get() {
            return Ok(live.clone());
        }
        let config = self.pending.take().unwrap_or_default();
        // A voice nobody could have is refused before a session is made for it (it is checked
        // for the session's provider once the session is known, see `merge`).
        crate::engine::voice::check_stored(&config.voice).map_err(status_of)?;
        let engine = self.engine.clone();
        let caller = self.caller.clone();
        let wanted = config.clone();
        let live = tokio::task::spawn_blocking(move || -> Result<Arc<LiveSession>, Error> {
            let id = wanted.session_id.trim().to_string();
            // A named session is joined only by a caller who may steer it; its history is
            // never seeded.
            if !id.is_empty() {
                match SessionId::parse(&id).and_then(|id| engine.live_for(&id, &caller, Use::Steer))
                {
                    Err(Error::NotFound(_)) => {}
                    joined => return joined,
                }
            }
            let req = NewSession {
                mode: None,
                character_id: Some(wanted.character_id.clone()).filter(|c| !c.is_empty()),
            };
            let context: Vec<(String, String)> = wanted
                .dialog_context
                .iter()
                .map(|i| (i.role.clone(), i.text.clone()))
                .collect();
            let id = Some(id).filter(|i| !i.is_empty());
            let created = engine.create_seeded_session(id, req, caller, &context)?;
            engine.live(&SessionId::of_record(&created.session_id))
        })
        .await
        .map_err(|_| Status::internal("internal error"))?
        .map_err(status_of)?;
        live.set_overrides(merge(&self.engine, &live, Overrides::default(), config).await?);
        let _ = self.live.set(live.clone());
        tokio::spawn(forward(
            live.want_audio(),
            live.clone(),
            live.subscribe(),
            self.ids.clone(),
            self.out.clone(),
            self.closing.clone(),
            self.last_turn.clone(),
        ));
        Ok(live)
    }

    fn start(
        &mut self,
        live: &Arc<LiveSession>,
        input: TurnInput,
        question: String,
    ) -> Result<(), Status> {
        self.engine.spend_message(&self.caller).map_err(status_of)?;
        let (seq, cancel) = live.next_turn();
        self.last_turn.store(seq, Ordering::SeqCst);
        self.ids
            .lock()
            .expect("ids lock")
            .insert(seq, (question, new_id()));
        self.engine.spawn_turn(live.clone(), seq, cancel, input);
        Ok(())
    }

    async fn audio(&mut self, live: &Arc<LiveSession>, chunk: AudioChunk) -> Result<(), Status> {
        let format_ok = chunk.format.is_empty() || chunk.format == "pcm_s16le";
        if !format_ok
            || !(8_000..=48_000).contains(&chunk.sample_rate)
            || !(1..=2).contains(&chunk.channels)
        {
            return Err(Status::invalid_argument(
                "audio must be pcm_s16le, 8000 to 48000 Hz, 1 or 2 channels",
            ));
        }
        if self.utterance.is_none()
            && self.engine.config.sessions.vad_silence_ms > 0
            && pcm::rms(&pcm::samples_from_le(&chunk.data)) <= SPEECH_RMS
        {
            // With voice activity detection, silence between utterances starts none (it
            // would barge in on the reply to the last one).
            return Ok(());
        }
        if self.utterance.is_none() {
            // User speech starts: any reply in progress stops.
            let question = new_id();
            self.engine.listen(live);
            let barge = VoiceLlmOutput {
                barge_in: true,
                question_id: question.clone(),
                ..Default::default()
            };
            self.question = Some(question);
            // Tagged with no turn: the utterance's turn starts at its end, which may come
            // before this output is sent, and must not make it look stale.
            let _ = self.out.send(Ok((None, barge))).await;
            self.utterance = Some(Utterance {
                rate: chunk.sample_rate as u32,
                channels: chunk.channels as u16,
                bytes: self.streams.buffer(),
                heard_speech: false,
                silence_ms: 0,
            });
        }
        let u = self.utterance.as_mut().expect("set above");
        if u.bytes.len() + chunk.data.len() > UTTERANCE_MAX_BYTES {
            return Err(Status::invalid_argument("utterance longer than 60 seconds"));
        }
        u.bytes.extend(&chunk.data).map_err(|_| {
            Status::resource_exhausted("server busy: too much audio buffered; try again later")
        })?;
        let vad = self.engine.config.sessions.vad_silence_ms;
        let mut ended = chunk.is_final;
        if vad > 0 {
            let samples = pcm::samples_from_le(&chunk.data);
            let ms = samples.len() as u64 * 1000 / (u.rate as u64 * u.channels as u64).max(1);
            if pcm::rms(&samples) > SPEECH_RMS {
                u.heard_speech = true;
                u.silence_ms = 0;
            } else {
                u.silence_ms += ms;
            }
            ended |= u.heard_speech && u.silence_ms >= vad;
        }
        if ended {
            let u = self.utterance.take().expect("set above");
            let pcm = pcm::to_recogniser(u.bytes.bytes(), u.rate, u.channels);
            let question = self.question.take().unwrap_or_else(new_id);
            self.start(live, TurnInput::Audio(pcm), question)?;
        }
        Ok(())
    }
}

/// Applies a config's non-empty fields over the current overrides; a voice must be one of the
/// provider that speaks the session's turns (`INVALID_ARGUMENT` otherwise, nothing applied).
async fn merge(
    engine: &Arc<Engine>,
    live: &Arc<LiveSession>,
    mut o: Overrides,
    c: VoiceLlmConfig,
) -> Result<Overrides, Status> {
    let set = |v: &str| Some(v.to_string()).filter(|s| !s.is_empty());
    o.system_prompt = set(&c.system_prompt).or(o.system_prompt);
    o.bot_name = set(&c.bot_name).or(o.bot_name);
    o.speaking_style = set(&c.speaking_style).or(o.speaking_style);
    o.welcome_message = set(&c.welcome_message).or(o.welcome_message);
    o.provider = set(&c.provider).or(o.provider);
    if c.temperature > 0.0 {
        o.temperature = Some(c.temperature);
    }
    if !c.voice.is_empty() {
        let (engine, live) = (engine.clone(), live.clone());
        o = tokio::task::spawn_blocking(move || {
            o.voice = Some(engine.session_voice(&live, &o, &c.voice)?);
            Ok(o)
        })
        .await
        .map_err(|_| Status::internal("internal error"))?
        .map_err(status_of)?;
    }
    Ok(o)
}

/// Turns the session's events into this stream's outputs.
///
/// Reply audio is synthesised for as long as this runs (`_audio`), even after the client has
/// closed its side.
async fn forward(
    _audio: AudioWanted,
    live: Arc<LiveSession>,
    mut events: broadcast::Receiver<Event>,
    ids: Ids,
    out: mpsc::Sender<Result<Tagged, Status>>,
    closing: CancellationToken,
    last_turn: Arc<AtomicU64>,
) {
    let mut audio_sent: HashMap<u64, bool> = HashMap::new();
    // The latest turn seen to end (its `idle`).
    let mut ended = 0;
    loop {
        // Once the client has closed its side, the outputs end with the turn it started last
        // (finished, or replaced by a newer turn).
        if closing.is_cancelled() {
            let last = last_turn.load(Ordering::SeqCst);
            if ended >= last || live.turn_seq() != last {
                return;
            }
        }
        let received = tokio::select! {
            r = events.recv() => r,
            _ = closing.cancelled(), if !closing.is_cancelled() => continue,
        };
        let event = match received {
            Ok(e) => e,
            Err(broadcast::error::RecvError::Lagged(_)) => {
                let _ = out
                    .send(Err(Status::resource_exhausted(
                        "stream too slow; reload the history",
                    )))
                    .await;
                return;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        };
        if let Event::Status {
            status: crate::engine::live::Status::Idle,
            turn_seq,
        } = &event
        {
            ended = ended.max(*turn_seq);
        }
        let label = |seq: u64| {
            ids.lock()
                .expect("ids lock")
                .entry(seq)
                .or_insert_with(|| (new_id(), new_id()))
                .clone()
        };
        let item = match event {
            Event::Closed => return,
            Event::UserSpeech { text, turn_seq } => {
                let (q, _) = label(turn_seq);
                Some((
                    Some(turn_seq),
                    VoiceLlmOutput {
                        user_transcript: text,
                        question_id: q,
                        ..Default::default()
                    },
                ))
            }
            Event::Transcript {
                speaker: "assistant",
                text,
                is_final,
                turn_seq,
            } => {
                let (q, r) = label(turn_seq);
                let audio =
                    (is_final && audio_sent.remove(&turn_seq).unwrap_or(false)).then(|| {
                        AudioChunk {
                            sample_rate: pcm::OUTPUT_RATE as i32,
                            channels: 1,
                            format: "pcm_s16le".into(),
                            is_final: true,
                            ..Default::default()
                        }
                    });
                Some((
                    Some(turn_seq),
                    VoiceLlmOutput {
                        transcript: text,
                        is_final,
                        question_id: q,
                        reply_id: r,
                        audio,
                        ..Default::default()
                    },
                ))
            }
            Event::AudioStart { turn_seq } => {
                audio_sent.insert(turn_seq, true);
                None
            }
            Event::Audio { pcm, turn_seq } => {
                let (q, r) = label(turn_seq);
                let chunk = AudioChunk {
                    data: pcm.to_vec(),
                    sample_rate: pcm::OUTPUT_RATE as i32,
                    channels: 1,
                    format: "pcm_s16le".into(),
                    is_final: false,
                    timestamp_ms: now_ms(),
                };
                Some((
                    Some(turn_seq),
                    VoiceLlmOutput {
                        audio: Some(chunk),
                        question_id: q,
                        reply_id: r,
                        ..Default::default()
                    },
                ))
            }
            Event::Task { event, task } => {
                let json = serde_json::json!({
                    "task_id": event.task_id, "session_id": task.session_id, "seq": event.seq,
                    "event_type": event.event_type, "status": event.status, "message": event.message,
                    "progress": event.progress, "payload": event.payload, "created_at": event.created_at,
                    "task": task,
                });
                Some((
                    None,
                    VoiceLlmOutput {
                        task_event_json: json.to_string(),
                        ..Default::default()
                    },
                ))
            }
            _ => None,
        };
        if let Some(item) = item
            && out.send(Ok(item)).await.is_err()
        {
            return;
        }
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
