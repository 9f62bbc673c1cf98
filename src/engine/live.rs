//! Live sessions: the in-memory side of a session while anyone talks to it.
//!
//! Each live session has one broadcast channel of `Event`s that every watcher (WebSocket, gRPC
//! stream, the kiosk's speaker) subscribes to, and the number of its current turn. Starting a
//! turn or interrupting bumps the number and cancels the running turn; a turn may publish only
//! while its number is current, checked under the same lock, so nothing of an old turn can
//! follow an interrupt.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use serde::Serialize;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::error::{Result, bad};
use super::language::Language;
use super::tasks::TaskView;
use super::{CharacterId, Engine, SessionId};
use crate::store::records::TaskEvent;

/// Events a watcher may fall behind by before it is cut off (it then reloads history).
const EVENT_BUFFER: usize = 512;

/// What a session's turn is doing, as clients see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    #[default]
    Idle,
    Listening,
    Processing,
    Speaking,
}

/// Error kinds a turn reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    LlmFailed,
    AsrFailed,
    TtsFailed,
    ProviderUnavailable,
    BadRequest,
    /// The socket only watches this session (an administrator on the kiosk's visitor session).
    Forbidden,
    /// The caller's message budget is used up for now.
    RateLimited,
}

/// Everything that happens in a session, in the order it happened.
#[derive(Debug, Clone)]
pub enum Event {
    Status {
        status: Status,
        turn_seq: u64,
    },
    /// Speech recognised from the user's audio; `question_id` tags the utterance.
    UserSpeech {
        text: String,
        turn_seq: u64,
    },
    Transcript {
        speaker: &'static str,
        text: String,
        is_final: bool,
        turn_seq: u64,
    },
    /// Speech the kiosk starts itself.
    AssistantMessage {
        text: String,
        turn_seq: u64,
    },
    /// A sentence of the reply whose speech starts at sample `at` of the turn's audio (24 kHz,
    /// from `AudioStart`): what a screen shows, in step with the speaker, as captions.
    Caption {
        text: String,
        at: u64,
        turn_seq: u64,
    },
    AudioStart {
        turn_seq: u64,
    },
    /// Mono 24 kHz `pcm_s16le`.
    Audio {
        pcm: Bytes,
        turn_seq: u64,
    },
    AudioEnd {
        turn_seq: u64,
    },
    Task {
        event: Box<TaskEvent>,
        task: Box<TaskView>,
    },
    Error {
        message: String,
        code: ErrorCode,
        turn_seq: u64,
    },
    /// The session was deleted: watchers disconnect.
    Closed,
}

struct Turn {
    seq: u64,
    cancel: CancellationToken,
}

/// Per-conversation overrides sent by a gRPC client's config.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub system_prompt: Option<String>,
    /// Checked for the provider that spoke when it was set (`Engine::session_voice`); unused
    /// should another provider speak since.
    pub voice: Option<crate::engine::voice::Voice>,
    pub temperature: Option<f32>,
    pub bot_name: Option<String>,
    pub speaking_style: Option<String>,
    pub welcome_message: Option<String>,
    pub provider: Option<String>,
}

pub struct LiveSession {
    pub id: SessionId,
    pub character_id: CharacterId,
    events: broadcast::Sender<Event>,
    turn: Mutex<Turn>,
    audio_listeners: AtomicUsize,
    greeted: AtomicBool,
    overrides: Mutex<Overrides>,
    /// The visit's language once chosen on the screen or heard (`None`: the museum's default).
    language: Mutex<Option<Language>>,
    /// The questions asked in the visit (as `statistics` compares them), for the metrics'
    /// count of questions asked again; at most `ASKED_KEPT`.
    asked: Mutex<std::collections::HashSet<String>>,
    /// A staff test (`Engine::is_staff` when it went live): the metrics leave it out.
    pub(in crate::engine) staff: bool,
}

/// Questions a live session remembers for the count of questions asked again.
const ASKED_KEPT: usize = 256;

impl LiveSession {
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }

    /// Starts a new turn: the running one is cancelled and can publish nothing more.
    pub fn next_turn(&self) -> (u64, CancellationToken) {
        let mut turn = self.turn.lock().expect("turn lock");
        turn.cancel.cancel();
        turn.seq += 1;
        turn.cancel = CancellationToken::new();
        (turn.seq, turn.cancel.clone())
    }

    /// Whether the visit asked `question` before (then it is counted as asked again).
    pub(in crate::engine) fn asked_before(&self, question: String) -> bool {
        let mut asked = self.asked.lock().unwrap_or_else(|e| e.into_inner());
        if asked.contains(&question) {
            return true;
        }
        if asked.len() < ASKED_KEPT {
            asked.insert(question);
        }
        false
    }

    pub fn turn_seq(&self) -> u64 {
        self.turn.lock().expect("turn lock").seq
    }

    /// Publishes an event of turn `seq` if that turn is still the current one.
    pub fn publish(&self, seq: u64, event: Event) -> bool {
        let turn = self.turn.lock().expect("turn lock");
        if turn.seq != seq {
            return false;
        }
        let _ = self.events.send(event);
        true
    }

    /// Publishes the status of turn `seq`.
    pub fn set_status(&self, seq: u64, status: Status) -> bool {
        self.publish(
            seq,
            Event::Status {
                status,
                turn_seq: seq,
            },
        )
    }

    /// Publishes what the user was heard saying in turn `seq`.
    pub fn user_said(&self, seq: u64, text: &str) {
        self.publish(
            seq,
            Event::UserSpeech {
                text: text.to_string(),
                turn_seq: seq,
            },
        );
        self.publish(
            seq,
            Event::Transcript {
                speaker: "user",
                text: text.to_string(),
                is_final: true,
                turn_seq: seq,
            },
        );
    }

    /// Publishes an event that belongs to no turn (task events, closing).
    pub fn publish_any(&self, event: Event) {
        let _ = self.events.send(event);
    }

    /// Registers a watcher that wants reply audio for as long as the guard lives.
    pub fn want_audio(self: &Arc<Self>) -> AudioWanted {
        self.audio_listeners.fetch_add(1, Ordering::SeqCst);
        AudioWanted(self.clone())
    }

    pub fn audio_wanted(&self) -> bool {
        self.audio_listeners.load(Ordering::SeqCst) > 0
    }

    /// True the first time only: the welcome message is spoken once per session.
    pub fn first_greeting(&self) -> bool {
        !self.greeted.swap(true, Ordering::SeqCst)
    }

    pub fn overrides(&self) -> Overrides {
        self.overrides.lock().expect("overrides lock").clone()
    }

    pub fn set_overrides(&self, o: Overrides) {
        *self.overrides.lock().expect("overrides lock") = o;
    }

    /// The visit's language, if chosen or heard yet.
    pub fn language(&self) -> Option<Language> {
        self.language.lock().expect("language lock").clone()
    }

    fn close(&self) {
        self.turn.lock().expect("turn lock").cancel.cancel();
        let _ = self.events.send(Event::Closed);
    }
}

/// Keeps reply audio synthesised while held.
pub struct AudioWanted(Arc<LiveSession>);

impl Drop for AudioWanted {
    fn drop(&mut self) {
        self.0.audio_listeners.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The live sessions of the process.
#[derive(Default)]
pub struct Registry(Mutex<HashMap<String, Arc<LiveSession>>>);

impl Engine {
    /// The live side of a stored session, created on first use.
    pub fn live(&self, session_id: &SessionId) -> Result<Arc<LiveSession>> {
        if let Some(live) = self
            .live
            .0
            .lock()
            .expect("registry lock")
            .get(session_id.as_str())
        {
            return Ok(live.clone());
        }
        let stored = self.session(session_id)?;
        let mut map = self.live.0.lock().expect("registry lock");
        let live = map.entry(session_id.to_string()).or_insert_with(|| {
            Arc::new(LiveSession {
                id: session_id.clone(),
                character_id: CharacterId::of_record(&stored.character_id),
                events: broadcast::channel(EVENT_BUFFER).0,
                turn: Mutex::new(Turn {
                    seq: stored.turn_seq,
                    cancel: CancellationToken::new(),
                }),
                audio_listeners: AtomicUsize::new(0),
                greeted: AtomicBool::new(false),
                overrides: Mutex::new(Overrides::default()),
                language: Mutex::new(Language::parse(&stored.language)),
                asked: Mutex::default(),
                staff: self.is_staff(&stored),
            })
        });
        Ok(live.clone())
    }

    /// Sets the visit's language (one of the museum's): what the recogniser listens for, the
    /// knowledge answers from, the voice and the kiosk's lines, until the visit ends. Stored
    /// with the session. Blocking (a store write).
    pub fn set_visit_language(&self, live: &LiveSession, language: &Language) -> Result<()> {
        if !self.settings().languages().contains(language) {
            return Err(bad(format!(
                "{language} is not one of the museum's languages"
            )));
        }
        *live.language.lock().expect("language lock") = Some(language.clone());
        self.store_session_language(&live.id, language)
    }

    /// The live session if one exists (no store access).
    pub fn live_if_active(&self, session_id: &str) -> Option<Arc<LiveSession>> {
        self.live
            .0
            .lock()
            .expect("registry lock")
            .get(session_id)
            .cloned()
    }

    /// One round trip through the engine for the watchdog: the registry lock every live session
    /// goes through, the settings and a store read. A deadlocked engine never returns.
    pub fn probe(&self) -> Result<()> {
        drop(self.live.0.lock().expect("registry lock"));
        self.settings();
        self.store.schema_version()?;
        Ok(())
    }

    /// Test hook (`test.hooks`): takes the registry lock and never lets it go, as a deadlock
    /// would; every later use of a live session, and the watchdog's probe, blocks on it.
    pub fn stall_for_test(&self) {
        tracing::warn!("test hook: the engine's session registry is locked for good");
        std::mem::forget(self.live.0.lock().expect("registry lock"));
    }

    /// Ends the live side of a session: its turn stops and its watchers are told to go.
    pub(super) fn close_live(&self, session_id: &str) {
        if let Some(live) = self
            .live
            .0
            .lock()
            .expect("registry lock")
            .remove(session_id)
        {
            live.close();
        }
    }
}
