//! The fleet: a museum's kiosks take firmware and content from an Eclipse hawkBit server, which
//! they poll over its Direct Device Integration API (DDI; docs/fleet.md).
//!
//! A client of the engine, like the device layer: the engine keeps its settings (`fleet` in the
//! settings document) and the content bundles (`engine::content`) and knows nothing of it.
//! `ddi` is the wire format and the HTTP calls, `client` the polling loop and what it does with
//! an action. Installing firmware is not done here: the
//! loop hands a downloaded bundle to a [`Firmware`] (the kiosk's update service, RAUC on a
//! board), the same path as an upload in the console. What the loop must remember across a
//! reboot (the action waiting for the new slot to prove itself, the content version) is kept in
//! `fleet/state.json` in the data directory.

pub mod client;
pub mod ddi;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::engine::error::Result;
pub use crate::engine::settings::FleetSettings;
pub(crate) use crate::logs::Escaped;
pub use crate::update::{Outcome, OutcomeKind, Progress, Verdict};

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
    updates: std::sync::Arc<crate::update::Updates>,
    runtime: tokio::runtime::Handle,
}

impl Rauc {
    /// Made inside the runtime whose blocking pool calls it.
    pub fn new(updates: std::sync::Arc<crate::update::Updates>) -> Rauc {
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

/// The fleet client's state that the console shows (the loop follows the settings through the
/// engine: `Engine::watch_settings`).
#[derive(Default)]
pub struct Fleet {
    status: Mutex<Status>,
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

pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
