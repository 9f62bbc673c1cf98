//! The fleet: a museum's kiosks take firmware and content from an Eclipse hawkBit server, which
//! they poll over its Direct Device Integration API (DDI; docs/fleet.md).
//!
//! `ddi` is the wire format and the HTTP calls, `client` the polling loop and what it does with
//! an action, `content` the signed content bundles. Installing firmware is not done here: the
//! loop hands a downloaded bundle to a [`Firmware`] (the kiosk's update service, RAUC on a
//! board), the same path as an upload in the console. What the loop must remember across a
//! reboot (the action waiting for the new slot to prove itself, the content version) is kept in
//! `fleet/state.json` in the data directory.

pub mod client;
pub mod content;
pub mod ddi;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::error::{Result, bad};

/// The `fleet` section of the settings: where the server is and who this kiosk is to it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct FleetSettings {
    /// Off by default: a kiosk polls nothing until an administrator sets a server.
    pub enabled: bool,
    /// `https://hawkbit.example:8443` (the DDI paths are added to it).
    pub server_url: String,
    /// A plain `http://` server_url is refused unless this says so: the target token (and
    /// every bundle) then crosses the network in clear. Cleared when the address changes.
    pub allow_insecure_http: bool,
    pub tenant: String,
    /// The target's controller id on the server; empty: the kiosk's mDNS host name.
    pub controller_id: String,
    /// The target's security token (`Authorization: TargetToken ...`); a secret, never shown.
    pub target_token: String,
    /// The fleet's Ed25519 public key (base64 of its 32 bytes): content bundles must be signed
    /// by its private key.
    pub content_public_key: String,
    /// The distribution set name reported for an update installed from the console.
    pub distribution: String,
    /// Polling paused by an administrator (kept across restarts).
    pub paused: bool,
}

impl Default for FleetSettings {
    fn default() -> Self {
        FleetSettings {
            enabled: false,
            server_url: String::new(),
            allow_insecure_http: false,
            tenant: "DEFAULT".into(),
            controller_id: String::new(),
            target_token: String::new(),
            content_public_key: String::new(),
            distribution: "docent".into(),
            paused: false,
        }
    }
}

impl FleetSettings {
    /// The tenant and controller id become path segments of every request: only plain names.
    pub(super) fn validate(&self) -> Result<()> {
        let name = |s: &str| {
            s.len() <= 64
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
                && !s.starts_with('.')
        };
        if self.tenant.is_empty() || !name(&self.tenant) {
            return Err(bad(
                "fleet.tenant must be 1 to 64 letters, digits, '-', '_' or '.'",
            ));
        }
        if !name(&self.controller_id) {
            return Err(bad(
                "fleet.controller_id must be at most 64 letters, digits, '-', '_' or '.'",
            ));
        }
        if self.distribution.is_empty() || self.distribution.len() > 64 {
            return Err(bad("fleet.distribution must be 1 to 64 characters"));
        }
        if !self.content_public_key.is_empty() && content::public_key(self).is_err() {
            return Err(bad(
                "fleet.content_public_key must be the base64 of an Ed25519 public key (32 bytes)",
            ));
        }
        // Credentials go in the token, never in the address (which the console shows).
        if self.server_url.contains('@') {
            return Err(bad(
                "fleet.server_url must not hold a user name or password",
            ));
        }
        if self.enabled && self.server_url.is_empty() {
            return Err(bad("fleet.server_url is needed to turn the fleet on"));
        }
        self.check_transport()
    }

    /// A plain-HTTP server only when the administrator accepted what it costs. Checked when
    /// the settings are saved and again before a request (settings saved by an older version).
    pub(crate) fn check_transport(&self) -> Result<()> {
        let plain = self
            .server_url
            .get(..7)
            .is_some_and(|s| s.eq_ignore_ascii_case("http://"));
        if plain && !self.allow_insecure_http {
            return Err(bad(
                "fleet.server_url is plain http://: the target token and every bundle would cross \
                 the network in clear, for anyone on it to read the token and pose as this kiosk; \
                 use https://, or set fleet.allow_insecure_http = true to accept that",
            ));
        }
        Ok(())
    }
}

pub use super::update::{Outcome, OutcomeKind, Progress, Verdict};

/// What runs now: the image's version (`VERSION_ID`), the booted slot and the board's RAUC
/// `compatible`. `None` where unknown (a developer's machine).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Running {
    pub version: Option<String>,
    pub slot: Option<String>,
    pub compatible: Option<String>,
}

/// The kiosk's update service as the fleet client uses it. The methods block (run them on the
/// blocking pool); `progress` may be called while `install` runs.
pub trait Firmware: Send + Sync + 'static {
    /// What runs now.
    fn running(&self) -> Running;
    /// Inspects a bundle: signature, `compatible`, version; nothing is written.
    fn check(&self, bundle: &Path) -> Result<Verdict>;
    /// Installs an accepted bundle into the other slot and returns when it is written
    /// (`update/pending.json` then names the new slot), as a console install does.
    fn install(&self, bundle: &Path) -> Result<()>;
    fn progress(&self) -> Progress;
    /// Asks the board to reboot.
    fn reboot(&self) -> Result<()>;
    /// The last update's outcome, once the health gate has written it.
    fn outcome(&self) -> Option<Outcome>;
}

/// The kiosk's own update service (RAUC) as the fleet client's `Firmware`: the same checks and
/// install as a console upload.
pub struct Rauc {
    updates: std::sync::Arc<super::update::Updates>,
    runtime: tokio::runtime::Handle,
}

impl Rauc {
    /// Made inside the runtime whose blocking pool calls it.
    pub fn new(updates: std::sync::Arc<super::update::Updates>) -> Rauc {
        Rauc {
            updates,
            runtime: tokio::runtime::Handle::current(),
        }
    }
}

impl Firmware for Rauc {
    fn running(&self) -> Running {
        let (slot, compatible) = self.runtime.block_on(self.updates.slot_and_board());
        Running {
            version: self.updates.firmware_version().map(str::to_owned),
            slot,
            compatible,
        }
    }
    fn check(&self, bundle: &Path) -> Result<Verdict> {
        self.runtime.block_on(async {
            let _busy = self.updates.begin()?;
            self.updates.check(bundle).await
        })
    }
    fn install(&self, bundle: &Path) -> Result<()> {
        self.runtime.block_on(self.updates.install_and_wait(bundle))
    }
    fn progress(&self) -> Progress {
        self.updates.progress()
    }
    fn reboot(&self) -> Result<()> {
        self.updates.request_reboot()
    }
    fn outcome(&self) -> Option<Outcome> {
        self.updates.outcome()
    }
}

/// What an action is about: the software module type of its chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A RAUC bundle (module type `os`).
    Firmware,
    /// A signed content bundle (module type `docent-content`).
    Content,
}

/// An action the kiosk works on, as the console shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ActionStatus {
    pub id: String,
    pub kind: Kind,
    pub version: String,
    /// What is being done: downloading, checking, installing, waiting, rebooting.
    pub stage: String,
    pub percent: u8,
}

/// One message sent to the server, as the console shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Report {
    /// Unix seconds.
    pub at: u64,
    /// `feedback 8: closed/success`, `configData`, `installedBase 0.2.0`.
    pub what: String,
    pub details: String,
}

/// The fleet client's state for the console.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Status {
    pub enabled: bool,
    pub paused: bool,
    pub server: String,
    pub tenant: String,
    pub controller_id: String,
    /// Unix seconds of the last answered poll.
    pub last_poll: Option<u64>,
    /// The polling interval in force, in seconds.
    pub interval_secs: u64,
    pub last_error: Option<String>,
    pub action: Option<ActionStatus>,
    pub content_version: Option<String>,
    /// The last messages sent, newest last.
    pub reported: Vec<Report>,
}

/// Reports kept for the console.
const REPORTS: usize = 20;

/// The fleet client's shared state: its status, and a bell that wakes the loop (pause, resume,
/// new settings).
#[derive(Default)]
pub struct Fleet {
    status: Mutex<Status>,
    pub(crate) wake: tokio::sync::Notify,
}

impl Fleet {
    pub fn status(&self) -> Status {
        self.status.lock().expect("fleet status").clone()
    }

    pub(crate) fn update(&self, f: impl FnOnce(&mut Status)) {
        f(&mut self.status.lock().expect("fleet status"));
    }

    pub(crate) fn reported(&self, what: String, details: String) {
        self.update(|s| {
            if s.reported.len() == REPORTS {
                s.reported.remove(0);
            }
            s.reported.push(Report {
                at: unix_now(),
                what,
                details,
            });
        });
    }
}

impl super::Engine {
    /// Pauses or resumes polling (kept in the settings, so across restarts).
    pub fn set_fleet_paused(&self, paused: bool) -> Result<FleetSettings> {
        let next = self.update_settings(&serde_json::json!({"fleet": {"paused": paused}}))?;
        self.fleet.wake.notify_one();
        Ok(next.fleet.clone())
    }
}

/// What the loop keeps across restarts, in `fleet/state.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct State {
    /// An action installed or applied, whose result is known only after the restart.
    pub pending: Option<Pending>,
    pub content_version: Option<String>,
    /// `at` of the last outcome reported (by feedback or installedBase).
    pub outcome_seen: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Pending {
    pub id: String,
    pub kind: Kind,
    pub version: String,
    /// Unix seconds when its install began (the outcome of that install names a time no
    /// earlier: `Outcome::installed_at`), or when it was staged.
    pub at: u64,
}

impl State {
    fn path(data_dir: &Path) -> PathBuf {
        data_dir.join("fleet").join("state.json")
    }

    pub fn load(data_dir: &Path) -> State {
        std::fs::read(Self::path(data_dir))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    /// Written to a temporary file, fsynced and renamed over the old one.
    pub fn save(&self, data_dir: &Path) -> Result<()> {
        let path = Self::path(data_dir);
        let dir = path.parent().expect("state has a parent");
        std::fs::create_dir_all(dir)?;
        let tmp = dir.join("state.json.tmp");
        {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&serde_json::to_vec_pretty(self).expect("state serialises"))?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, &path)?;
        std::fs::File::open(dir)?.sync_all()?;
        Ok(())
    }
}

/// A value from outside (the server's text, an error quoting it) as it may appear in a log
/// line: control characters and line separators escaped (`\n`, `\u{1b}`), so that no server
/// can start a line of its own in the journal or the console's log view. Every value a fleet
/// log line formats goes through it.
pub(crate) struct Escaped<T>(pub T);

impl<T: std::fmt::Display> std::fmt::Display for Escaped<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use std::fmt::Write as _;
        for c in self.0.to_string().chars() {
            if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') {
                write!(f, "{}", c.escape_default())?;
            } else {
                f.write_char(c)?;
            }
        }
        Ok(())
    }
}

pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::engine::settings::Settings;

    #[test]
    fn escaped_text_stays_on_its_line() {
        let forged = "x\n2026-01-01T00:00:00Z  INFO docent: slot marked good\r\u{1b}[2K\u{2028}é";
        let shown = super::Escaped(forged).to_string();
        assert_eq!(
            shown,
            "x\\n2026-01-01T00:00:00Z  INFO docent: slot marked good\\r\\u{1b}[2K\\u{2028}é"
        );
        assert!(!shown.chars().any(char::is_control));
    }

    #[test]
    fn fleet_settings_are_checked_and_the_token_follows_only_its_server() {
        let s = Settings::default();
        for bad in [
            json!({"fleet": {"tenant": ""}}),
            json!({"fleet": {"tenant": "a/b"}}),
            json!({"fleet": {"controller_id": "../x"}}),
            json!({"fleet": {"controller_id": "a?b"}}),
            json!({"fleet": {"server_url": "ftp://x"}}),
            json!({"fleet": {"server_url": "https://user:pw@fleet.example"}}),
            json!({"fleet": {"enabled": true}}),
            json!({"fleet": {"content_public_key": "c2hvcnQ="}}),
            json!({"fleet": {"server_url": "http://fleet.example"}}),
            json!({"fleet": {"server_url": "HTTP://fleet.example"}}),
        ] {
            assert!(s.merged(&bad).is_err(), "{bad}");
        }
        let on = s
            .merged(
                &json!({"fleet": {"enabled": true, "server_url": "https://fleet.example:8443",
                "controller_id": "hall-b.1", "target_token": "0123456789abcdef0123"}}),
            )
            .unwrap();
        assert_eq!(on.fleet.target_token, "0123456789abcdef0123");
        let shown = on.masked();
        assert_eq!(shown["fleet"]["target_token_set"], true);
        assert!(!shown.to_string().contains("0123456789abcdef"));
        let moved = on
            .merged(&json!({"fleet": {"server_url": "https://elsewhere.example"}}))
            .unwrap();
        assert_eq!(
            moved.fleet.target_token, "",
            "the token never follows a new address"
        );
        let plain = s
            .merged(&json!({"fleet": {"server_url": "http://10.0.0.5:8080",
                "allow_insecure_http": true}}))
            .unwrap();
        assert!(plain.fleet.allow_insecure_http);
        assert!(
            plain
                .merged(&json!({"fleet": {"server_url": "http://10.0.0.6:8080"}}))
                .is_err(),
            "the allowance never follows a new address"
        );
        let secure = plain
            .merged(&json!({"fleet": {"server_url": "https://fleet.example"}}))
            .unwrap();
        assert!(!secure.fleet.allow_insecure_http);
    }
}
