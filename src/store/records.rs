//! The records kept in the tables of `tables`, as they are serialised.
//!
//! New fields must carry `#[serde(default)]` so that records written by older builds still load.

use serde::{Deserialize, Serialize};

use super::BlobRef;

/// Which provider runs each stage of a turn for a character ("" = the settings' default).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(default)]
#[schema(as = StageProviders)]
pub struct Components {
    pub llm: String,
    pub asr: String,
    pub tts: String,
}

/// A persona the kiosk can speak as.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Character {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub use_face_crop: bool,
    pub mode: String,
    #[serde(default)]
    pub voice_provider: String,
    #[serde(default)]
    pub voice_type: String,
    #[serde(default)]
    pub components: Components,
    #[serde(default)]
    pub speaking_style: String,
    #[serde(default)]
    pub personality: String,
    #[serde(default)]
    pub welcome_message: String,
    #[serde(default)]
    pub system_prompt: String,
    #[serde(default)]
    pub tags: Vec<String>,
    pub image_mode: String,
    /// File name of the active image, or "".
    #[serde(default)]
    pub active_image: String,
    /// Number of the next `img_NNN` name; never reused, so names are never recycled.
    #[serde(default)]
    pub next_image: u32,
    /// FAQ questions staff put on the kiosk's screen, in the order shown, for visitors who ask
    /// by touch or buttons (see `engine::knowledge::screen`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub on_screen: Vec<ScreenQuestion>,
    /// The voice that speaks each language other than the default (language tag -> voice of
    /// the speaking provider); `voice_type` speaks the rest.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub voices: std::collections::BTreeMap<String, String>,
    /// Curators' recorded answers to FAQ questions (see `engine::knowledge::recordings`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recordings: Vec<Recording>,
    pub created_at: String,
    pub updated_at: String,
}

/// A curator's recorded answer to an FAQ question, played instead of synthesis.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Recording {
    pub id: String,
    /// The FAQ question it answers, as the knowledge writes it.
    pub question: String,
    /// The language of the question's file.
    pub language: String,
    /// The speech: mono 24 kHz 16-bit little-endian, at the synthesised speech's loudness.
    pub blob: BlobRef,
    pub samples: u64,
    /// The gain it was given on upload (dB).
    pub gain_db: f64,
    pub orig_name: String,
    pub added_at: String,
}

/// A question on the kiosk's screen: chosen there, it is asked as if the visitor had said it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct ScreenQuestion {
    /// Stable while the question stays on the screen (a reorder keeps it), so a choice made on
    /// a screen drawn before a change still names the question it showed.
    pub id: String,
    pub text: String,
    /// The language of the knowledge the question comes from ("": the museum's default).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub language: String,
}

/// An avatar image of a character.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Image {
    pub filename: String,
    pub orig_name: String,
    pub added_at: String,
    pub blob: BlobRef,
}

/// An idle video clip of one image of a character.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Clip {
    pub imgbase: String,
    /// A state (`idle`, `listening`, `speaking`), a resolution (`800x480`) or "".
    pub variant: String,
    pub filename: String,
    pub added_at: String,
    pub blob: BlobRef,
}

/// A conversation session.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Session {
    pub id: String,
    pub character_id: String,
    pub mode: String,
    pub state: String,
    pub turn_seq: u64,
    pub created_at: String,
    pub last_active_at: String,
    /// Who opened it (records from before owners existed belong to the administrator).
    #[serde(default)]
    pub owner: Owner,
    /// The visit's language once chosen or heard ("": the museum's default).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub language: String,
}

/// Who opened a conversation session; the engine's access rules (`engine::access`) decide what
/// other callers may do with it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "id")]
pub enum Owner {
    /// The kiosk's own visitor sessions (the device layer).
    Kiosk,
    /// An administrator session (or setup mode on loopback).
    #[default]
    Admin,
    /// A caller on the kiosk itself, without credentials.
    Loopback,
    /// A caller without credentials let in by `access.open_conversation_api` (sessions stored before
    /// such callers each became their own owner, see `Anonymous`).
    Open,
    /// A caller without credentials let in by `access.open_conversation_api`, by its address: callers
    /// without credentials do not see or steer each other's sessions.
    Anonymous(String),
    /// The holder of a client key (its id).
    Client(String),
}

/// One message of the conversation history.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct Message {
    pub session_id: String,
    pub role: String,
    pub content: String,
    pub timestamp: String,
    pub turn_seq: u64,
    /// An assistant's reply that the knowledge did not answer (no passage, or none the
    /// offline engine could answer from): its question is one to add to the knowledge.
    /// Absent (false) in records written before it existed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unmatched: bool,
    /// Said in an administrator's session (the console's Try it): a staff test, kept apart from
    /// visitors' visits. Absent (false) in records written before it existed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub staff: bool,
    /// A visitor's question chosen on the screen (touch or buttons), not said or typed.
    /// Absent (false) in records written before it existed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub touch: bool,
    /// The visit's language when it was said ("": the museum's default, or written before
    /// languages existed).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub language: String,
}

/// Declares a struct with the fields of a task that the API shows (then the struct's own), for
/// the record here and the engine's view of it, so the two cannot drift apart.
macro_rules! task_fields {
    ($(#[$meta:meta])* pub struct $name:ident { $($own:tt)* }) => {
        $(#[$meta])*
        pub struct $name {
            pub id: String,
            pub session_id: String,
            pub character_id: String,
            pub kind: String,
            pub title: String,
            pub user_request: String,
            pub status: String,
            pub progress: u8,
            pub result_summary: String,
            pub created_at: String,
            pub updated_at: String,
            pub finished_at: Option<String>,
            $($own)*
        }
    };
}
pub(crate) use task_fields;

task_fields! {
    /// An agent task of a session.
    #[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
    pub struct Task {
        /// Seq of the last event; the next event gets `last_seq + 1`.
        #[serde(default)]
        pub last_seq: u64,
    }
}

/// One event of a task.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct TaskEvent {
    pub task_id: String,
    pub seq: u64,
    pub event_type: String,
    pub status: String,
    pub message: String,
    pub progress: u8,
    pub payload: serde_json::Value,
    pub created_at: String,
}

/// Declares a struct with the fields of an artifact that the API shows (then the struct's own),
/// for the record here and the engine's view of it.
macro_rules! artifact_fields {
    ($(#[$meta:meta])* pub struct $name:ident { $($own:tt)* }) => {
        $(#[$meta])*
        pub struct $name {
            pub id: String,
            pub task_id: String,
            #[serde(rename = "type")]
            pub kind: String,
            pub title: String,
            pub mime_type: String,
            pub metadata: serde_json::Value,
            pub created_at: String,
            $($own)*
        }
    };
}
pub(crate) use artifact_fields;

artifact_fields! {
    /// A document a task produced.
    #[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
    pub struct Artifact {
        #[serde(skip_serializing_if = "Option::is_none", default)]
        pub blob: Option<BlobRef>,
    }
}

/// Declares a struct with the fields of a knowledge source that the API shows (then the
/// struct's own), for the record here and the engine's view of it.
macro_rules! source_fields {
    ($(#[$meta:meta])* pub struct $name:ident { $($own:tt)* }) => {
        $(#[$meta])*
        pub struct $name {
            pub id: String,
            pub title: String,
            pub filename: String,
            pub mime_type: String,
            pub relative_path: String,
            pub size: u64,
            pub indexable: bool,
            pub status: String,
            pub chunk_count: u32,
            pub error: String,
            pub created_at: String,
            pub updated_at: String,
            pub indexed_at: Option<String>,
            /// The language the file is written in ("": the museum's default).
            #[serde(default)]
            pub language: String,
            $($own)*
        }
    };
}
pub(crate) use source_fields;

source_fields! {
    /// An uploaded knowledge file of a character.
    #[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
    pub struct Source {
        pub character_id: String,
        /// Sum of the token counts of the chunks (for BM25's average length).
        #[serde(default)]
        pub token_count: u64,
        /// Bumped by every (re)index request; only the run holding the latest value may commit.
        #[serde(default)]
        pub generation: u64,
        pub blob: BlobRef,
    }
}

/// A logged-in administrator session.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AdminSession {
    pub created_at: String,
    /// Unix seconds after which the session is void.
    pub expires_at: u64,
}

/// A conversation client key: only the SHA-256 of the key is kept.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ClientKey {
    pub id: String,
    pub name: String,
    /// SHA-256 of the key, hex.
    pub hash: String,
    pub created_at: String,
    #[serde(default)]
    pub last_used_at: Option<String>,
    /// What the key opens; keys stored before scopes existed are conversation keys.
    #[serde(default)]
    pub scope: KeyScope,
}

/// What a client key opens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum KeyScope {
    /// The conversation API (sessions, tasks, WebSocket, gRPC).
    #[default]
    Conversation,
    /// `GET /metrics` only (a Prometheus server's read-only key).
    Metrics,
}

/// Failed logins of one client address inside the current window.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LoginFailures {
    pub count: u32,
    /// Unix seconds when the window started (the first failure).
    pub window_start: u64,
}
