//! The providers a turn runs on, chosen per character and in the settings, and changed at run
//! time: `local` (the offline engine), `openai` (any OpenAI-compatible server), `wyoming` (a
//! Wyoming speech server: recognition and speech), and the omni providers `openai_realtime` and
//! `remote`, which answer with their own speech. `dispatch`
//! hands each stage (recognition, reply, speech, or a whole omni exchange) to the chosen one;
//! this module also answers which providers are present and reachable (components, health,
//! settings test, voice test).

mod dispatch;
mod health;
pub mod local;
pub mod openai;
mod provider;
pub mod realtime;
pub mod remote;
pub mod speech;
pub mod wyoming;

pub use dispatch::{Heard, Prompt, Speech};
use health::reachable;
pub use health::{
    CHECK_TIMEOUT, Check, ComponentOption, Components, LastCall, LastCalls, Reachability,
    StageHealth,
};
pub use provider::{Choice, Foreign, Provider, Stage};

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::error::Error;

/// One message of the conversation sent to a language model.
#[derive(Debug, Clone)]
pub struct ChatMessage {
    pub role: &'static str,
    pub content: String,
}

/// What a reply is generated from.
#[derive(Debug, Clone)]
pub struct ChatRequest {
    pub messages: Vec<ChatMessage>,
    pub temperature: f32,
    pub max_tokens: u32,
}

/// How long a streamed reply may keep a turn waiting: a provider that hangs or stops
/// mid-stream ends the turn with its apology after at most one of these.
#[derive(Debug, Clone, Copy)]
pub struct StreamBounds {
    /// Until the response's headers and first bytes.
    pub first_byte: Duration,
    /// Between two chunks of the response.
    pub between_chunks: Duration,
}

/// Where and how a provider is reached over the network (see `Settings::endpoint`).
pub struct Endpoint<'a> {
    /// A base URL, or `host:port` for the remote voice service.
    pub address: &'a str,
    pub api_key: &'a str,
    pub model: &'a str,
}

/// What an omni provider is asked.
#[derive(Debug, Clone)]
pub enum OmniInput {
    Text(String),
    /// Mono 16 kHz speech.
    Audio(Vec<i16>),
}

/// The conversation an omni provider continues.
#[derive(Debug, Clone, Default)]
pub struct OmniContext {
    pub instructions: String,
    pub voice: String,
    pub bot_name: String,
    pub temperature: f32,
    /// Earlier messages, oldest first, as (role, text).
    pub history: Vec<(String, String)>,
}

/// What an omni provider streams back.
#[derive(Debug, Clone, PartialEq)]
pub enum OmniEvent {
    /// What it understood the user said.
    UserText(String),
    /// A piece of the reply's text.
    Delta(String),
    /// A piece of the reply's speech, mono 24 kHz.
    Audio(Vec<i16>),
}

/// Why a provider call failed.
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderError {
    /// Not installed, not configured, or not reachable.
    Unavailable(String),
    /// It answered with an error.
    Failed(String),
    /// It did not answer in time.
    Timeout(String),
    /// It answered something that is not what the protocol says.
    Garbage(String),
}

impl std::fmt::Display for ProviderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (ProviderError::Unavailable(m)
        | ProviderError::Failed(m)
        | ProviderError::Timeout(m)
        | ProviderError::Garbage(m)) = self;
        f.write_str(m)
    }
}

/// What the offline engine derives from a character's knowledge (the recogniser's model, the
/// answer's topics), per character, with the knowledge epoch it was built at: built once per
/// change of knowledge, not per turn.
pub struct EpochCache<T>(Mutex<HashMap<String, (u64, Arc<T>)>>);

impl<T> Default for EpochCache<T> {
    fn default() -> Self {
        EpochCache(Mutex::default())
    }
}

impl<T> EpochCache<T> {
    /// The value for `character_id` built at `epoch`, built now if there is none. One build
    /// at a time: a caller asking during a build waits for it instead of starting another.
    fn get_or_build<E>(
        &self,
        character_id: &str,
        epoch: u64,
        build: impl FnOnce() -> Result<T, E>,
    ) -> Result<Arc<T>, E> {
        let mut built = self.0.lock().expect("epoch cache lock");
        if let Some((at, value)) = built.get(character_id)
            && *at == epoch
        {
            return Ok(value.clone());
        }
        let value = Arc::new(build()?);
        built.insert(character_id.to_string(), (epoch, value.clone()));
        Ok(value)
    }
}

/// Why a provider named in the settings or by a character cannot run here.
pub const NOT_ON_THIS_KIOSK: &str = "is not available on this kiosk";

/// Finds an executable on `PATH`.
pub fn find_program(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    })
}

/// The offline speech synthesiser (espeak-ng, run as a separate process).
pub fn local_tts_available() -> bool {
    find_program("espeak-ng").is_some()
}

pub(in crate::engine) fn provider_error(e: ProviderError) -> Error {
    match e {
        ProviderError::Unavailable(m) => Error::Unavailable(m),
        ProviderError::Timeout(m) => Error::Timeout(m),
        ProviderError::Failed(m) | ProviderError::Garbage(m) => Error::ProviderFailed(m),
    }
}
