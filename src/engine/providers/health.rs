//! The providers' health: what each stage's provider is, whether it is installed, configured and
//! reachable (a TCP probe, measured at most every few seconds), and how its last real call went;
//! what the components route lists and the health route reports.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::{
    Choice, Foreign, NOT_ON_THIS_KIOSK, Provider, ProviderError, Stage, local, local_tts_available,
    provider_error, wyoming,
};
use crate::engine::Engine;
use crate::engine::error::{Error, Result};
use crate::engine::settings::{Service, Settings};

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
        self.metrics.provider_call(stage, result.is_ok());
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

/// Checks that `service` can be connected to.
pub(super) async fn reachable(s: &Settings, service: Service) -> Result<()> {
    let ep = s.endpoint(service).map_err(provider_error)?;
    probe(ep.address).await.map_err(|e| {
        if e.contains("within") {
            Error::Timeout(e)
        } else {
            Error::Unavailable(e)
        }
    })
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
