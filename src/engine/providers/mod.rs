//! The providers a turn runs on, chosen per character and in the settings, and changed at run
//! time: `local` (the offline engine), `openai` (any OpenAI-compatible server). This module
//! dispatches each stage (recognition, reply, speech) to the chosen one under a timeout, and
//! answers which providers are present and reachable (components, settings test, voice test).

pub mod local;
pub mod openai;
pub mod realtime;
pub mod remote;

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::error::{Error, Result, bad};
use super::settings::Settings;
use super::{Engine, PROVIDERS};

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

/// Providers that take the user's input and answer with speech themselves (`remote`,
/// `openai_realtime`), replacing recognition, reply and synthesis in one.
pub fn is_omni(provider: &str) -> bool {
    matches!(provider, "remote" | "openai_realtime")
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

/// Recogniser grammars per character, with the knowledge epoch they were built at.
#[derive(Default)]
pub struct GrammarCache(Mutex<HashMap<String, (u64, Arc<local::Grammar>)>>);

/// Every provider check gives up after this long.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(3);

/// One selectable provider of a stage, as the components route lists it.
#[derive(Debug, Serialize)]
pub struct ComponentOption {
    pub id: &'static str,
    pub name: &'static str,
    pub model: String,
    pub default: bool,
    pub available: bool,
}

#[derive(Debug, Serialize)]
pub struct Components {
    pub llm: Vec<ComponentOption>,
    pub asr: Vec<ComponentOption>,
    pub tts: Vec<ComponentOption>,
}

#[derive(Debug, Serialize)]
pub struct Check {
    pub name: String,
    pub ok: bool,
    pub latency_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

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

/// Host and port of a provider URL or `host:port` address, for a reachability probe.
fn endpoint(url: &str) -> Option<(String, u16)> {
    let with_scheme = if url.contains("://") {
        url.to_string()
    } else {
        format!("http://{url}")
    };
    let uri: axum::http::Uri = with_scheme.parse().ok()?;
    let secure = matches!(uri.scheme_str(), Some("https" | "wss"));
    let auth = uri.authority()?;
    Some((
        auth.host().to_string(),
        auth.port_u16().unwrap_or(if secure { 443 } else { 80 }),
    ))
}

/// Connects to the provider's host within `CHECK_TIMEOUT`.
async fn probe(url: &str) -> std::result::Result<(), String> {
    let (host, port) = endpoint(url).ok_or_else(|| "not a valid address".to_string())?;
    match tokio::time::timeout(
        CHECK_TIMEOUT,
        tokio::net::TcpStream::connect((host.as_str(), port)),
    )
    .await
    {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(format!("cannot connect to {host}:{port}: {e}")),
        Err(_) => Err(format!(
            "no answer from {host}:{port} within {}s",
            CHECK_TIMEOUT.as_secs()
        )),
    }
}

/// The address a remote provider of a stage is reached at ("" when none is configured).
fn address<'a>(s: &'a Settings, stage: &str, provider: &str) -> &'a str {
    match (stage, provider) {
        ("llm", "openai") => &s.llm.base_url,
        ("asr", "openai") => &s.asr.base_url,
        ("tts", "openai") => &s.tts.base_url,
        (_, "openai_realtime") => &s.realtime.base_url,
        (_, "remote") => &s.remote_voice.grpc_addr,
        _ => "",
    }
}

impl Engine {
    /// The offline recogniser's grammar for a character: the words of its knowledge, its own
    /// texts and the site document; rebuilt when knowledge changes.
    pub fn grammar_for(&self, character_id: &str) -> Result<Arc<local::Grammar>, ProviderError> {
        let epoch = self.knowledge_epoch();
        if let Some((at, g)) = self
            .grammars
            .0
            .lock()
            .expect("grammar lock")
            .get(character_id)
            && *at == epoch
        {
            return Ok(g.clone());
        }
        let fail = |e: Error| ProviderError::Failed(format!("cannot read the knowledge: {e}"));
        let mut words = BTreeSet::new();
        for text in self.knowledge_texts(character_id).map_err(fail)? {
            local::vocabulary_of(&text, &mut words);
        }
        let site = self.site_document().map_err(fail)?;
        local::vocabulary_of(&String::from_utf8_lossy(&site), &mut words);
        let grammar = Arc::new(local::grammar(&self.config.data_dir.join("asr"), &words)?);
        self.grammars
            .0
            .lock()
            .expect("grammar lock")
            .insert(character_id.to_string(), (epoch, grammar.clone()));
        Ok(grammar)
    }

    /// The providers of each stage, with availability measured now.
    pub fn components(&self) -> Components {
        let s = self.settings();
        let option = |stage: &str,
                      id: &'static str,
                      name: &'static str,
                      model: &str,
                      default: &str,
                      available: bool| {
            ComponentOption {
                id,
                name,
                model: model.to_string(),
                default: default == id,
                available: available && (id == "local" || !address(&s, stage, id).is_empty()),
            }
        };
        Components {
            llm: vec![
                option(
                    "llm",
                    "local",
                    "Offline knowledge answers",
                    "bm25-extractive",
                    &s.llm.provider,
                    true,
                ),
                option(
                    "llm",
                    "openai",
                    "OpenAI-compatible chat",
                    &s.llm.model,
                    &s.llm.provider,
                    true,
                ),
                option(
                    "llm",
                    "openai_realtime",
                    "OpenAI Realtime",
                    &s.realtime.model,
                    &s.llm.provider,
                    true,
                ),
                option(
                    "llm",
                    "remote",
                    "Remote VoiceLLMService",
                    "",
                    &s.llm.provider,
                    true,
                ),
            ],
            asr: vec![
                option(
                    "asr",
                    "local",
                    "Offline recogniser (PocketSphinx)",
                    "en-us",
                    &s.asr.provider,
                    local::recogniser_available(),
                ),
                option(
                    "asr",
                    "openai",
                    "OpenAI-compatible transcription",
                    &s.asr.model,
                    &s.asr.provider,
                    true,
                ),
            ],
            tts: vec![
                option(
                    "tts",
                    "local",
                    "Offline speech (espeak-ng)",
                    "espeak-ng",
                    &s.tts.provider,
                    local_tts_available(),
                ),
                option(
                    "tts",
                    "openai",
                    "OpenAI-compatible speech",
                    &s.tts.model,
                    &s.tts.provider,
                    true,
                ),
            ],
        }
    }

    /// The configured provider of each stage and what is wrong with it, judged without network
    /// traffic (installed, configured), for the health route.
    pub fn provider_health(&self) -> Vec<(&'static str, String, Option<String>)> {
        let s = self.settings();
        [
            ("llm", &s.llm.provider),
            ("asr", &s.asr.provider),
            ("tts", &s.tts.provider),
        ]
        .into_iter()
        .map(|(stage, provider)| {
            let problem = if provider == "local" {
                local_check(&format!("{stage}:local")).err()
            } else if address(&s, stage, provider).is_empty() {
                Some(format!("{stage}: {provider} has no address configured"))
            } else {
                None
            };
            (stage, provider.clone(), problem)
        })
        .collect()
    }

    /// Checks every configured provider, each within `CHECK_TIMEOUT`; all checks run at once.
    pub async fn test_providers(&self) -> Vec<Check> {
        let s = self.settings();
        let mut targets: Vec<(String, String)> = Vec::new();
        for (stage, provider) in [
            ("llm", &s.llm.provider),
            ("asr", &s.asr.provider),
            ("tts", &s.tts.provider),
        ] {
            targets.push((
                format!("{stage}:{provider}"),
                address(&s, stage, provider).to_string(),
            ));
        }
        if !s.remote_voice.grpc_addr.is_empty() && !targets.iter().any(|t| t.0.ends_with(":remote"))
        {
            targets.push(("remote_voice".into(), s.remote_voice.grpc_addr.clone()));
        }
        let checks = targets.into_iter().map(|(name, addr)| async move {
            let started = Instant::now();
            let result = if name.ends_with(":local") {
                local_check(&name)
            } else if addr.is_empty() {
                Err("no address configured".to_string())
            } else {
                probe(&addr).await
            };
            Check {
                name,
                ok: result.is_ok(),
                latency_ms: started.elapsed().as_millis() as u64,
                error: result.err(),
            }
        });
        futures_util::future::join_all(checks).await
    }

    /// Checks that a provider accepts a voice: for the offline engine that the voice exists,
    /// for a remote provider that it can be reached.
    pub async fn test_voice(&self, provider: &str, voice: &str) -> Result<()> {
        if !PROVIDERS.contains(&provider) {
            return Err(bad(format!(
                "voice_provider must be one of {}",
                PROVIDERS.join(", ")
            )));
        }
        if provider == "local" {
            return check_espeak_voice(voice).await;
        }
        let s = self.settings();
        let addr = address(&s, "tts", provider);
        if addr.is_empty() {
            return Err(Error::Unavailable(format!(
                "{provider} has no address configured"
            )));
        }
        if provider == "openai" {
            // A minimal request: the provider must accept the voice, not only be reachable.
            let ep = openai::Endpoint {
                base_url: addr,
                api_key: &s.tts.api_key,
                model: &s.tts.model,
            };
            return openai::speak(&self.http, &ep, "Hello.", voice, CHECK_TIMEOUT)
                .await
                .map(|_| ())
                .map_err(|e| match e {
                    ProviderError::Unavailable(m) => Error::Unavailable(m),
                    ProviderError::Timeout(m) => Error::Timeout(m),
                    ProviderError::Failed(m) | ProviderError::Garbage(m) => {
                        Error::ProviderFailed(m)
                    }
                });
        }
        probe(addr).await.map_err(|e| {
            if e.contains("within") {
                Error::Timeout(e)
            } else {
                Error::Unavailable(e)
            }
        })
    }
}

fn local_check(name: &str) -> std::result::Result<(), String> {
    match name {
        "asr:local" if !local::recogniser_available() => {
            Err("the offline speech model is not installed".into())
        }
        "tts:local" if !local_tts_available() => Err("espeak-ng is not installed".into()),
        _ => Ok(()),
    }
}

/// Asks espeak-ng whether it has `voice`, within `CHECK_TIMEOUT`.
async fn check_espeak_voice(voice: &str) -> Result<()> {
    if voice.is_empty()
        || voice.len() > 64
        || !voice
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_+/".contains(c))
    {
        return Err(bad(
            "voice_type must be an espeak-ng voice name such as en-us",
        ));
    }
    let program = find_program("espeak-ng")
        .ok_or_else(|| Error::Unavailable("espeak-ng is not installed".into()))?;
    let out = tokio::time::timeout(
        CHECK_TIMEOUT,
        tokio::process::Command::new(program)
            .arg("--voices")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .map_err(|_| Error::Timeout("espeak-ng did not answer in time".into()))?
    .map_err(|e| Error::Unavailable(format!("cannot run espeak-ng: {e}")))?;
    let listing = String::from_utf8_lossy(&out.stdout);
    let known = listing.lines().skip(1).any(|line| {
        let cols: Vec<&str> = line.split_whitespace().collect();
        // Columns: Pty Language Age/Gender VoiceName File Other...
        cols.get(1) == Some(&voice)
            || cols.get(3) == Some(&voice)
            || cols
                .get(4)
                .is_some_and(|f| f.rsplit('/').next() == Some(voice))
    });
    if known {
        Ok(())
    } else {
        Err(Error::ProviderFailed(format!(
            "espeak-ng has no voice {voice:?}"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::endpoint;

    #[test]
    fn endpoints_of_urls_and_addresses() {
        assert_eq!(
            endpoint("http://10.0.0.2:11434/v1"),
            Some(("10.0.0.2".into(), 11434))
        );
        assert_eq!(
            endpoint("https://api.openai.com/v1"),
            Some(("api.openai.com".into(), 443))
        );
        assert_eq!(endpoint("kiosk2:50051"), Some(("kiosk2".into(), 50051)));
        assert_eq!(endpoint("wss://x/realtime"), Some(("x".into(), 443)));
    }
}
