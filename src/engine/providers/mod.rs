//! The providers a turn runs on, chosen per character and in the settings, and changed at run
//! time: `local` (the offline engine), `openai` (any OpenAI-compatible server), `wyoming` (a
//! Wyoming speech server: recognition and speech), and the omni providers `openai_realtime` and
//! `remote`, which answer with their own speech. `dispatch`
//! hands each stage (recognition, reply, speech, or a whole omni exchange) to the chosen one;
//! this module also answers which providers are present and reachable (components, health,
//! settings test, voice test).

pub mod answer;
mod dispatch;
pub mod lm;
pub mod local;
pub mod openai;
mod provider;
pub mod realtime;
pub mod remote;
pub mod speech;
pub mod wyoming;

pub use dispatch::{Heard, Prompt, Speech};
pub use provider::{Choice, Foreign, Provider, Stage};

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::Engine;
use super::audio;
use super::error::{Error, Result, bad};
use super::language::Language;
use super::settings::{Service, Settings};
use super::voice::Voice;

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

/// The least fit (see `local::Closed`) at which the closed pass's question is believed when
/// the open pass's words answer nothing. Measured on the understanding benchmark (see
/// docs/understanding.md).
pub const CLOSED_FIT: f64 = 0.5;

/// How alike (see `local::Model::sounding_like`) a dictionary word must sound to a word heard
/// to count as what may have been said.
pub const SOUNDS_ALIKE: f64 = 0.6;

/// How the offline recogniser's two hearings of one question were weighed (`offline_weigh`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Weighing {
    /// The knowledge answers the open pass's words.
    pub open_answers: bool,
    /// The knowledge answers the closed pass's question.
    pub closed_answers: bool,
    /// The closed pass's fit per frame of its words (`local::Closed::fit` counts the silence).
    pub speech_fit: f64,
    /// How far the open pass's words point at the closed question's topic.
    pub support: Option<answer::Support>,
    /// As `support`, with words that sound like those heard (`SOUNDS_ALIKE`).
    pub sound_support: Option<answer::Support>,
    /// The closed pass's question is what was heard.
    pub believed: bool,
}

/// Words heard, as text.
fn words_of(heard: &[(String, f64)]) -> String {
    heard
        .iter()
        .map(|(w, _)| w.as_str())
        .collect::<Vec<_>>()
        .join(" ")
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

/// The clarifying questions the offline engine asked ("Do you mean the opening hours, or the
/// tickets?"), per live session, awaiting the visitor's next turn. Bounded: one per session in
/// use, taken by that session's next turn, and forgotten after `CLARIFY_TTL`.
#[derive(Default)]
pub struct Clarifying(Mutex<HashMap<String, Asked>>);

/// How long a clarifying question waits for its reply (a visitor who walked away).
const CLARIFY_TTL: Duration = Duration::from_secs(120);

/// A clarifying question asked.
struct Asked {
    character_id: String,
    epoch: u64,
    /// The topics offered: two, the likelier first, or one to confirm.
    labels: (String, Option<String>),
    /// The question that was not clear.
    question: String,
    at: Instant,
}

/// The last answer to "do the configured providers answer?", for the settings it was measured
/// with. One check runs at a time; the others wait for its answer instead of probing again.
#[derive(Default)]
pub struct Reachability(tokio::sync::Mutex<Option<Measured>>);

/// When the checks were measured, with which settings, and what they found.
type Measured = (Instant, Arc<Settings>, Arc<[Check]>);

/// How the last real call to a provider went (a turn's recognition, reply or speech, a voice
/// sample), and since when it has gone that way: a provider whose configuration is fine but
/// whose server refuses is not healthy, and staff want to know since when.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LastCall {
    pub ok: bool,
    /// When the last call ended (RFC 3339).
    pub at: String,
    /// When the calls started going this way (the first failure after a success, or the
    /// reverse).
    pub since: String,
    /// Why the last call failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The last call of each provider for each stage.
#[derive(Default)]
pub struct LastCalls(Mutex<HashMap<(Stage, Provider), LastCall>>);

impl LastCalls {
    fn record<T>(
        &self,
        stage: Stage,
        provider: Provider,
        result: &std::result::Result<T, ProviderError>,
    ) {
        let now = crate::store::now();
        let error = result.as_ref().err().map(ToString::to_string);
        let mut calls = self.0.lock().expect("last calls lock");
        let since = match calls.get(&(stage, provider)) {
            Some(last) if last.ok == error.is_none() => last.since.clone(),
            _ => now.clone(),
        };
        calls.insert(
            (stage, provider),
            LastCall {
                ok: error.is_none(),
                at: now,
                since,
                error,
            },
        );
    }

    fn get(&self, stage: Stage, provider: Provider) -> Option<LastCall> {
        self.0
            .lock()
            .expect("last calls lock")
            .get(&(stage, provider))
            .cloned()
    }
}

/// The health of the provider of one stage: what is configured, whether it is usable, why not,
/// and its last real call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageHealth {
    pub stage: &'static str,
    pub provider: &'static str,
    pub ok: bool,
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_call: Option<LastCall>,
}

/// How long a reachability answer stands before the health route measures again.
const REACHABILITY_FRESH: Duration = Duration::from_secs(15);

/// Every provider check gives up after this long.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(3);

/// One selectable provider of a stage, as the components route lists it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ComponentOption {
    #[schema(value_type = String)]
    pub id: Choice,
    pub name: &'static str,
    pub model: String,
    pub default: bool,
    pub available: bool,
    /// False for a provider of the original front end that this kiosk does not have.
    pub on_this_kiosk: bool,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Components {
    pub llm: Vec<ComponentOption>,
    pub asr: Vec<ComponentOption>,
    pub tts: Vec<ComponentOption>,
}

/// Why a provider named in the settings or by a character cannot run here.
pub const NOT_ON_THIS_KIOSK: &str = "is not available on this kiosk";

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Check {
    pub name: String,
    pub ok: bool,
    pub latency_ms: u64,
    /// What an answering server says it is (a Wyoming server's programs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What one check of the settings test looks at.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Target {
    /// The offline engine's part of a stage: installed?
    Local(Stage),
    /// A service's address: can it be connected to?
    Address(Service),
    /// A Wyoming server serving a stage: does it say it offers it?
    Wyoming(Stage),
    /// A provider this kiosk does not have: the check fails.
    Foreign(Foreign),
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

impl Engine {
    /// The offline recogniser's model for a character: its knowledge, its own texts and the
    /// site document; rebuilt when knowledge changes. Blocking (seconds on a small board): call
    /// it on the blocking pool. One build at a time: a turn asking while the model is being
    /// built (see `Engine::listen`) waits for that build instead of starting another.
    pub fn recogniser_model(&self, character_id: &str) -> Result<Arc<local::Model>, ProviderError> {
        let epoch = self.knowledge_epoch();
        self.recogniser_models
            .get_or_build(character_id, epoch, || {
                let fail =
                    |e: Error| ProviderError::Failed(format!("cannot read the knowledge: {e}"));
                let mut texts = self.knowledge_texts(character_id).map_err(fail)?;
                let site = self.site_document().map_err(fail)?;
                texts.push(String::from_utf8_lossy(&site).into_owned());
                local::model(&self.config.data_dir.join("asr"), &texts)
            })
    }

    /// The offline engine's answer to `question` from the character's knowledge (to "who are
    /// you" from its name and description), or `None` when nothing there answers it clearly.
    /// `sure`: how sure the recogniser was of each word (empty for typed text). Reads the
    /// store on a change of knowledge: call it on the blocking pool.
    pub fn offline_answer(
        &self,
        character_id: &str,
        question: &str,
        sure: &[(String, f64)],
    ) -> Option<String> {
        if answer::asks_who(question) {
            let c = self.character_record(character_id).ok()?;
            return Some(answer::introduction(&c.name, &c.description));
        }
        self.offline_topics(character_id)
            .ok()?
            .answer(question, sure)
    }

    /// What the offline recogniser heard, from its two passes over the same speech (`open`
    /// with the language model, `closed` with the grammar of the knowledge's questions, see
    /// `local::Closed`): the open pass, unless the closed pass's question is believed (see
    /// `offline_weigh`). Reads the store on a change of knowledge: call it on the blocking pool.
    pub fn offline_heard(
        &self,
        character_id: &str,
        open: Vec<(String, f64)>,
        closed: Option<local::Closed>,
    ) -> Heard {
        let weighed = self.offline_weigh(character_id, &open, closed.as_ref());
        tracing::debug!(?open, ?closed, ?weighed, "offline recogniser's two passes");
        match closed {
            Some(closed) if weighed.believed => Heard {
                text: closed.words.join(" "),
                sure: Vec::new(),
                language: None,
            },
            _ => Heard {
                text: words_of(&open),
                sure: open,
                language: None,
            },
        }
    }

    /// How the two passes over one question weigh (see `Weighing`): the closed pass's
    /// question is believed only when the open pass's words answer nothing, the question
    /// answers, it fits the speech (`CLOSED_FIT`), and, when the open pass's words would ask
    /// about one topic ("Do you mean toilets?"), it is about that topic: the open pass heard a
    /// word of it, and the grammar's nearest sentence fitting loosely is no reason to answer
    /// about something else ("where are the coin" for "where are the toilets").
    pub fn offline_weigh(
        &self,
        character_id: &str,
        open: &[(String, f64)],
        closed: Option<&local::Closed>,
    ) -> Weighing {
        let open_text = words_of(open);
        let open_answers = self
            .offline_answer(character_id, &open_text, open)
            .is_some();
        let mut w = Weighing {
            open_answers,
            ..Weighing::default()
        };
        let Some(closed) = closed else {
            return w;
        };
        let said = closed.words.join(" ");
        w.closed_answers = self.offline_answer(character_id, &said, &[]).is_some();
        w.speech_fit = closed.fit * closed.frames as f64 / closed.speech_frames.max(1) as f64;
        let model = self.recogniser_model(character_id).ok();
        let mut another_topic = false;
        if let Ok(topics) = self.offline_topics(character_id) {
            w.support = topics.support(&said, &open_text, open);
            if let Some(model) = model {
                let like = model.sounding_like(open, SOUNDS_ALIKE);
                w.sound_support = topics.support(&said, &words_of(&like), &like);
            }
            if let answer::Understood::Confirm(label) = topics.understand(&open_text, open) {
                another_topic = !topics.is_about(&said, &label);
            }
        }
        w.believed =
            !open_answers && w.closed_answers && closed.fit >= CLOSED_FIT && !another_topic;
        w
    }

    /// The answer's topics of a character's knowledge in the museum's default language, built
    /// once per change of knowledge.
    fn offline_topics(&self, character_id: &str) -> Result<Arc<answer::Topics>> {
        self.offline_topics_in(character_id, &self.settings().default_language())
    }

    /// The answer's topics of the knowledge in `language` (all of it when none is in
    /// `language`: a museum with one language, or a translation not written yet).
    fn offline_topics_in(
        &self,
        character_id: &str,
        language: &Language,
    ) -> Result<Arc<answer::Topics>> {
        let settings = self.settings();
        // The museum's languages decide which file is in which (`knowledge::source_language`).
        let key = format!(
            "{character_id} {language} {:?}",
            settings
                .languages()
                .iter()
                .map(Language::tag)
                .collect::<Vec<_>>()
        );
        self.answer_topics
            .get_or_build(&key, self.knowledge_epoch(), || {
                let all = self.knowledge_by_language(character_id)?;
                let mut sources: Vec<Vec<String>> = all
                    .iter()
                    .filter(|(l, _)| l.same_as(language))
                    .map(|(_, p)| p.clone())
                    .collect();
                if sources.is_empty() {
                    sources = all.into_iter().map(|(_, p)| p).collect();
                }
                Ok(answer::Topics::new(&sources))
            })
    }

    /// The offline engine's reply in `language`: from the knowledge in that language, with no
    /// clarifying question (the engine asks those in English only, see `offline_reply`). The
    /// default language's reply is `offline_reply`'s.
    pub fn offline_reply_in(
        &self,
        session_id: Option<&str>,
        character_id: &str,
        (question, sure): (&str, &[(String, f64)]),
        language: &Language,
    ) -> Option<String> {
        let default = self.settings().default_language();
        if language.same_as(&default) && default.same_as(&Language::english()) {
            return match session_id {
                Some(session) => self.offline_reply(session, character_id, question, sure),
                None => self.offline_answer(character_id, question, sure),
            };
        }
        self.offline_topics_in(character_id, language)
            .ok()?
            .answer(question, sure)
    }

    /// The offline engine's reply in a live session: as `offline_answer`, but when two topics
    /// are too close to choose between, it asks which one is meant ("Do you mean ...?"), and
    /// when one unsure word alone chose a topic, whether that one is meant ("Do you mean
    /// toilets?"); the session's next question answers that ("yes", "no", or a topic's word):
    /// the topic chosen answers the question first asked. Never two clarifying questions in a
    /// row: a reply that chooses none is taken as a new question, answered or not. Call it on
    /// the blocking pool.
    pub fn offline_reply(
        &self,
        session_id: &str,
        character_id: &str,
        question: &str,
        sure: &[(String, f64)],
    ) -> Option<String> {
        let epoch = self.knowledge_epoch();
        let asked = {
            let mut pending = self.clarifying.0.lock().expect("clarifying lock");
            pending.retain(|_, a| a.at.elapsed() < CLARIFY_TTL);
            pending.remove(session_id)
        }
        .filter(|a| a.character_id == character_id && a.epoch == epoch);
        if answer::asks_who(question) {
            return self.offline_answer(character_id, question, sure);
        }
        let topics = self.offline_topics(character_id).ok()?;
        if let Some(asked) = asked {
            let (a, b) = (asked.labels.0.as_str(), asked.labels.1.as_deref());
            return match answer::choose(question, (a, b)) {
                Some(label) => topics.answer_about(label, &asked.question),
                None => topics.answer(question, sure),
            };
        }
        let (text, labels) = match topics.understand(question, sure) {
            answer::Understood::Answer(a) => return Some(a),
            answer::Understood::Nothing => return None,
            answer::Understood::Either(a, b) => (answer::either_question(&a, &b), (a, Some(b))),
            answer::Understood::Confirm(a) => (answer::confirm_question(&a), (a, None)),
        };
        self.clarifying.0.lock().expect("clarifying lock").insert(
            session_id.to_string(),
            Asked {
                character_id: character_id.to_string(),
                epoch,
                labels,
                question: question.to_string(),
                at: Instant::now(),
            },
        );
        Some(text)
    }

    /// The providers of each stage, with availability measured now.
    pub fn components(&self) -> Components {
        let s = self.settings();
        let options = |stage: Stage| -> Vec<ComponentOption> {
            Provider::ALL
                .into_iter()
                .filter(|p| p.serves(stage))
                .map(|p| {
                    let (model, available) = match p.service(stage) {
                        None => (local_model(stage), local_check(stage).is_ok()),
                        Some(service) => (s.model(service), s.endpoint(service).is_ok()),
                    };
                    ComponentOption {
                        id: Choice::Kiosk(p),
                        name: p.name(stage),
                        model: model.to_string(),
                        default: s.provider(stage) == Choice::Kiosk(p),
                        available,
                        on_this_kiosk: true,
                    }
                })
                .chain(
                    Foreign::ALL
                        .into_iter()
                        .filter(|f| f.serves(stage))
                        .map(|f| ComponentOption {
                            id: Choice::Foreign(f),
                            name: f.name(),
                            model: String::new(),
                            default: s.provider(stage) == Choice::Foreign(f),
                            available: false,
                            on_this_kiosk: false,
                        }),
                )
                .collect()
        };
        Components {
            llm: options(Stage::Llm),
            asr: options(Stage::Asr),
            tts: options(Stage::Tts),
        }
    }

    /// The configured provider of each stage and what is wrong with it: not installed, not
    /// configured, its reachability probe failed (`probes`, from [`Engine::reachability`]), or
    /// its last real call failed (a provider that answers again is healthy again).
    pub fn provider_health(&self, probes: &[Check]) -> Vec<StageHealth> {
        let s = self.settings();
        Stage::ALL
            .into_iter()
            .map(|stage| {
                let provider = s.provider(stage);
                let last_call = match provider {
                    Choice::Kiosk(p) => self.last_calls.get(stage, p),
                    Choice::Foreign(_) => None,
                };
                let problem = match provider {
                    Choice::Foreign(f) => Some(format!("{} {NOT_ON_THIS_KIOSK}", f.id())),
                    Choice::Kiosk(p) => match p.service(stage) {
                        None => recent_local_check(stage).err(),
                        Some(service) => s.endpoint(service).err().map(|e| e.to_string()),
                    },
                }
                .or_else(|| {
                    probes
                        .iter()
                        .find(|c| {
                            !c.ok && c.name.split_once(':') == Some((stage.name(), provider.id()))
                        })
                        .map(|c| c.error.clone().unwrap_or_else(|| "unreachable".into()))
                })
                .or_else(|| {
                    last_call.as_ref().filter(|c| !c.ok).map(|c| {
                        format!("its last call failed: {}", c.error.as_deref().unwrap_or(""))
                    })
                });
                StageHealth {
                    stage: stage.name(),
                    provider: provider.id(),
                    ok: problem.is_none(),
                    error: problem.map(|p| format!("{}: {p}", stage.name())),
                    last_call,
                }
            })
            .collect()
    }

    /// Whether every configured provider answers ([`Engine::reachability`]).
    pub async fn inference_connected(&self) -> bool {
        self.reachability().await.iter().all(|c| c.ok)
    }

    /// The checks of every configured provider ([`Engine::test_providers`]), measured at most
    /// every `REACHABILITY_FRESH` and again when the settings change, so that a health poll
    /// does not become a stream of connections to the providers.
    pub async fn reachability(&self) -> Arc<[Check]> {
        let mut last = self.reachability.0.lock().await;
        let settings = self.settings();
        if let Some((at, measured_with, checks)) = &*last
            && at.elapsed() < REACHABILITY_FRESH
            && Arc::ptr_eq(measured_with, &settings)
        {
            return checks.clone();
        }
        let checks: Arc<[Check]> = self.checks_of(settings.clone()).await.into();
        *last = Some((Instant::now(), settings, checks.clone()));
        checks
    }

    /// Checks the providers of the settings in force with `patch` applied, without saving
    /// anything: the console's "test" of what is typed in its form.
    pub async fn test_settings(&self, patch: &serde_json::Value) -> Result<Vec<Check>> {
        let s = if patch.is_null() {
            self.settings()
        } else {
            Arc::new(self.settings().merged(patch)?)
        };
        Ok(self.checks_of(s).await)
    }

    /// Records how a real call to `provider` for `stage` went, for the health route.
    pub(in crate::engine) fn record_call<T>(
        &self,
        stage: Stage,
        provider: Provider,
        result: &std::result::Result<T, ProviderError>,
    ) {
        self.last_calls.record(stage, provider, result);
    }

    /// Checks every configured provider, each within `CHECK_TIMEOUT`; all checks run at once.
    pub async fn test_providers(&self) -> Vec<Check> {
        self.checks_of(self.settings()).await
    }

    /// Checks the providers that `s` configures.
    async fn checks_of(&self, s: Arc<Settings>) -> Vec<Check> {
        // Each check: the offline engine's part of a stage, or a service's address.
        let mut targets: Vec<(String, Target)> = Stage::ALL
            .into_iter()
            .map(|stage| {
                let provider = s.provider(stage);
                let name = format!("{}:{}", stage.name(), provider.id());
                let target = match provider {
                    Choice::Foreign(f) => Target::Foreign(f),
                    Choice::Kiosk(p) => match p.service(stage) {
                        None => Target::Local(stage),
                        Some(_) if p == Provider::Wyoming => Target::Wyoming(stage),
                        Some(service) => Target::Address(service),
                    },
                };
                (name, target)
            })
            .collect();
        if !s.remote_voice.grpc_addr.is_empty()
            && !targets
                .iter()
                .any(|t| t.1 == Target::Address(Service::RemoteVoice))
        {
            targets.push(("remote_voice".into(), Target::Address(Service::RemoteVoice)));
        }
        let checks = targets.into_iter().map(|(name, target)| {
            let s = s.clone();
            async move {
                let started = Instant::now();
                let result = match target {
                    Target::Foreign(f) => Err(format!("{} {NOT_ON_THIS_KIOSK}", f.id())),
                    Target::Local(stage) => local_check(stage).map(|()| None),
                    Target::Address(service) => match s.endpoint(service) {
                        Ok(ep) => probe(ep.address).await.map(|()| None),
                        Err(e) => Err(e.to_string()),
                    },
                    Target::Wyoming(stage) => wyoming_check(&s, stage).await.map(Some),
                };
                let latency_ms = started.elapsed().as_millis() as u64;
                let (detail, error) = match result {
                    Ok(detail) => (detail, None),
                    Err(e) => (None, Some(e)),
                };
                Check {
                    name,
                    ok: error.is_none(),
                    latency_ms,
                    detail,
                    error,
                }
            }
        });
        futures_util::future::join_all(checks).await
    }

    /// Checks that a provider accepts a voice: for the offline engine that the voice exists,
    /// for a remote provider that it can be reached.
    pub async fn test_voice(&self, provider: &str, voice: &str) -> Result<()> {
        let provider = match Choice::parse(provider) {
            Some(Choice::Kiosk(p)) => p,
            Some(Choice::Foreign(f)) => {
                return Err(Error::Unavailable(format!(
                    "{} {NOT_ON_THIS_KIOSK}",
                    f.id()
                )));
            }
            None => {
                return Err(bad(format!(
                    "voice_provider must be one of {}",
                    Provider::ids()
                )));
            }
        };
        if provider == Provider::Local && !local_tts_available() {
            return Err(Error::Unavailable("espeak-ng is not installed".into()));
        }
        // Checked before anything runs: a voice the kiosk does not list goes nowhere.
        let voice = Voice::parse(provider, voice)?;
        let voice = voice.name();
        let s = self.settings();
        match provider {
            Provider::Local if voice.is_empty() => Err(bad(
                "voice_type must be an espeak-ng voice name such as en-us",
            )),
            // Listed: espeak-ng has it (see `voice::offline_voices`).
            Provider::Local => Ok(()),
            Provider::Openai => {
                // A minimal request: the provider must accept the voice, not only be reachable.
                let ep = s.endpoint(Service::Tts).map_err(provider_error)?;
                openai::speak(&self.http, &ep, "Hello.", voice, CHECK_TIMEOUT)
                    .await
                    .map(|_| ())
                    .map_err(provider_error)
            }
            Provider::OpenaiRealtime => reachable(&s, Service::Realtime).await,
            Provider::Remote => reachable(&s, Service::RemoteVoice).await,
            Provider::Wyoming => {
                let ep = s.endpoint(Service::Tts).map_err(provider_error)?;
                let info = wyoming::describe(ep.address, CHECK_TIMEOUT)
                    .await
                    .map_err(provider_error)?;
                if info.tts.is_empty() {
                    Err(Error::ProviderFailed(
                        "the Wyoming server offers no speech synthesis".into(),
                    ))
                } else if !voice.is_empty() && !info.voices.iter().any(|v| v == voice) {
                    Err(Error::ProviderFailed(format!(
                        "the Wyoming server has no voice {voice:?}"
                    )))
                } else {
                    Ok(())
                }
            }
        }
    }
}

/// Asks the Wyoming server of `stage` what it offers (`describe`), within `CHECK_TIMEOUT`; its
/// programs for that stage as a short status line.
async fn wyoming_check(s: &Settings, stage: Stage) -> std::result::Result<String, String> {
    let service = Provider::Wyoming
        .service(stage)
        .expect("a stage Wyoming serves");
    let ep = s.endpoint(service).map_err(|e| e.to_string())?;
    let info = wyoming::describe(ep.address, CHECK_TIMEOUT)
        .await
        .map_err(|e| e.to_string())?;
    let (programs, what) = match stage {
        Stage::Asr => (&info.asr, "speech recognition"),
        Stage::Tts | Stage::Llm => (&info.tts, "speech synthesis"),
    };
    if programs.is_empty() {
        return Err(format!("the Wyoming server offers no {what}"));
    }
    Ok(format!("Wyoming {what}: {}", programs.join(", ")))
}

/// What a voice sample says.
const SAMPLE_TEXT: &str = "Hello! This is how I sound. Ask me anything about the exhibition.";

/// Longest voice sample kept (mono 24 kHz samples, 20 s).
const SAMPLE_MAX: usize = 20 * audio::OUTPUT_RATE as usize;

/// Collects a voice sample's speech, up to `SAMPLE_MAX` samples.
#[derive(Default)]
struct Sample(Vec<i16>);

impl Speech for Sample {
    fn begin(&mut self, _: &str) {}
    fn push(&mut self, samples: &[i16]) -> bool {
        let room = SAMPLE_MAX - self.0.len();
        self.0
            .extend_from_slice(&samples[..samples.len().min(room)]);
        self.0.len() < SAMPLE_MAX
    }
    fn flush(&mut self) {}
}

impl Engine {
    /// A short sentence spoken by `provider` (the settings' speech provider when "") in `voice`
    /// (the settings' voice when ""), as a WAV file, so an administrator can hear a voice before
    /// choosing it. The omni providers speak only in a conversation.
    pub async fn voice_sample(&self, provider: &str, voice: &str) -> Result<Vec<u8>> {
        let s = self.settings();
        let choice = if provider.is_empty() {
            s.provider(Stage::Tts)
        } else {
            Choice::parse(provider)
                .ok_or_else(|| bad(format!("voice_provider must be one of {}", Provider::ids())))?
        };
        let provider = match choice {
            Choice::Kiosk(p) => p,
            Choice::Foreign(f) => {
                return Err(Error::Unavailable(format!(
                    "{} {NOT_ON_THIS_KIOSK}",
                    f.id()
                )));
            }
        };
        if !provider.serves(Stage::Tts) {
            return Err(bad(format!(
                "{provider} speaks only in a conversation: try the character on the Try it page"
            )));
        }
        let voice = Voice::parse(
            provider,
            if voice.is_empty() {
                s.tts.voice.as_str()
            } else {
                voice
            },
        )?;
        let timeout = Duration::from_millis(self.config.providers.timeout_ms);
        let mut sample = Sample::default();
        self.speak(provider, SAMPLE_TEXT, &voice, timeout, &mut sample)
            .await
            .map_err(provider_error)?;
        if sample.0.is_empty() {
            return Err(Error::ProviderFailed(format!(
                "{provider} produced no speech"
            )));
        }
        Ok(audio::wav_bytes(&sample.0, audio::OUTPUT_RATE))
    }

    /// `text` spoken by the settings' speech provider in its voice (the offline engine when
    /// that one speaks only in a conversation), mono at `audio::OUTPUT_RATE`: what the kiosk
    /// says outside a conversation, such as that it is closed.
    pub async fn speak_line(&self, text: &str) -> Result<Vec<i16>> {
        let s = self.settings();
        let provider = match s.provider(Stage::Tts) {
            Choice::Kiosk(p) if p.serves(Stage::Tts) => p,
            _ => Provider::Local,
        };
        let timeout = Duration::from_millis(self.config.providers.timeout_ms);
        let mut line = Sample::default();
        // A stored voice that is not this provider's (or no longer listed): its default speaks.
        let voice =
            Voice::parse(provider, &s.tts.voice).unwrap_or_else(|_| Voice::default_of(provider));
        self.speak(provider, text, &voice, timeout, &mut line)
            .await
            .map_err(provider_error)?;
        Ok(line.0)
    }
}

/// Checks that `service` can be connected to.
async fn reachable(s: &Settings, service: Service) -> Result<()> {
    let ep = s.endpoint(service).map_err(provider_error)?;
    probe(ep.address).await.map_err(|e| {
        if e.contains("within") {
            Error::Timeout(e)
        } else {
            Error::Unavailable(e)
        }
    })
}

pub(in crate::engine) fn provider_error(e: ProviderError) -> Error {
    match e {
        ProviderError::Unavailable(m) => Error::Unavailable(m),
        ProviderError::Timeout(m) => Error::Timeout(m),
        ProviderError::Failed(m) | ProviderError::Garbage(m) => Error::ProviderFailed(m),
    }
}

/// The model the offline engine uses for `stage`, as the components list shows it.
fn local_model(stage: Stage) -> &'static str {
    match stage {
        Stage::Llm => "bm25-extractive",
        Stage::Asr => "en-us",
        Stage::Tts => "espeak-ng",
    }
}

/// Whether the offline engine's part for `stage` is installed.
/// How long health may repeat what [`local_check`] found: it searches `PATH` and stats the
/// model files (some twenty system calls), and a health poll must not cost that each time. What
/// is installed changes with the system's packages, not from one poll to the next.
const LOCAL_CHECK_FRESH: Duration = Duration::from_secs(10);

/// [`local_check`], measured at most every [`LOCAL_CHECK_FRESH`].
fn recent_local_check(stage: Stage) -> std::result::Result<(), String> {
    type Found = (Instant, [std::result::Result<(), String>; 3]);
    static LAST: std::sync::Mutex<Option<Found>> = std::sync::Mutex::new(None);
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    let fresh = last
        .as_ref()
        .filter(|(at, _)| at.elapsed() < LOCAL_CHECK_FRESH);
    let found = match fresh {
        Some((_, found)) => found,
        None => &last.insert((Instant::now(), Stage::ALL.map(local_check))).1,
    };
    found[Stage::ALL
        .iter()
        .position(|s| *s == stage)
        .expect("a stage")]
    .clone()
}

fn local_check(stage: Stage) -> std::result::Result<(), String> {
    match stage {
        Stage::Asr if !local::recogniser_available() => {
            Err("the offline speech model is not installed".into())
        }
        Stage::Tts if !local_tts_available() => Err("espeak-ng is not installed".into()),
        Stage::Llm | Stage::Asr | Stage::Tts => Ok(()),
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
