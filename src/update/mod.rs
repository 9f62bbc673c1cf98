//! Firmware updates with rollback (docs/updates.md). An administrator uploads a RAUC bundle; RAUC
//! checks its signature and manifest before anything is written, then installs it into the slot
//! that is not running. After the reboot the start check decides: the new slot is marked good,
//! or bad, and the board goes back to the old one. What happened is kept in the data directory
//! (`update/outcome.json`), because the version that reports it may be the old one. An install
//! or a reboot may wait for the museum to close (`schedule`).

mod rauc;
pub mod schedule;

use std::cmp::Ordering;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::StreamExt;
use serde::{Deserialize, Serialize};

use crate::config::UpdateConfig;
use crate::engine::{Error, Result};
use rauc::InstallerProxy;
pub use schedule::{Scheduled, When, museum_open};

/// The uploaded bundle, in `update/` under the data directory.
const BUNDLE: &str = "bundle.raucb";
/// Written after a successful install, before the reboot: which slot should come up, with what.
const PENDING: &str = "pending.json";
/// The last update's outcome, for health and the console.
const OUTCOME: &str = "outcome.json";
/// Longest RAUC reason kept (its messages are short; this bounds what a bundle can make it say).
const REASON_MAX: usize = 400;

/// What RAUC found in an uploaded bundle, before anything was written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Verdict {
    /// The board the bundle is for (empty when RAUC could not read it).
    pub compatible: String,
    pub version: String,
    /// The running firmware's version.
    pub current_version: Option<String>,
    /// Whether it may be installed as it is.
    pub accepted: bool,
    /// Why not (a bad signature, another board, an older version).
    pub reason: Option<String>,
    /// Refused only because it is not newer than what runs (the same version or an older one,
    /// at or above the running firmware's minimum version): `force` installs it anyway.
    pub older: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Operation {
    Idle,
    Installing,
    /// Installed into the other slot: a reboot starts it.
    Installed,
    Failed,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Progress {
    pub percent: u8,
    pub message: String,
}

/// The update state shown on the System page.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[schema(as = UpdateStatus)]
pub struct Status {
    /// Whether this kiosk can update itself (RAUC answers on the system bus).
    pub available: bool,
    pub operation: Operation,
    pub progress: Progress,
    pub error: Option<String>,
    /// The verdict on the bundle uploaded last, while it waits to be installed.
    pub checked: Option<Verdict>,
    pub booted_slot: Option<String>,
    pub firmware_version: Option<String>,
    pub outcome: Option<Outcome>,
    /// The uploaded bundle's install, waiting for the museum to close.
    pub scheduled_install: Option<Scheduled>,
    /// A reboot waiting for the museum to close.
    pub scheduled_reboot: Option<Scheduled>,
    /// While the museum is open by its opening hours: when it closes, in words ("today at
    /// 18:00"); the System page then offers waiting for it first.
    pub closing: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Pending {
    /// The boot name of the slot the update went to.
    pub slot: String,
    pub from: String,
    pub to: String,
    /// Unix seconds.
    pub installed_at: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeKind {
    Updated,
    RolledBack,
}

/// How the last update ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Outcome {
    pub result: OutcomeKind,
    pub from: String,
    pub to: String,
    #[serde(default)]
    pub reason: Option<String>,
    /// Unix seconds.
    pub at: u64,
    /// When the update was installed (Unix seconds, by the clock before the reboot: a board
    /// without a real-time clock may start the next boot earlier). It names the install.
    #[serde(default)]
    pub installed_at: u64,
}

impl Outcome {
    /// One sentence for staff.
    pub fn sentence(&self) -> String {
        match self.result {
            OutcomeKind::Updated => format!("updated from {} to {}", self.from, self.to),
            OutcomeKind::RolledBack => format!(
                "{} failed its start check ({}) and was rolled back; running {}",
                self.to,
                self.reason.as_deref().unwrap_or("no reason given"),
                self.from
            ),
        }
    }
}

/// What the start check leads to on this boot.
#[derive(Debug, PartialEq)]
enum Decision {
    /// An ordinary boot that passed: the slot keeps its attempts.
    MarkGood,
    /// The first boot of an update that passed.
    Updated,
    /// The first boot of an update that failed: mark it bad and reboot into the old slot.
    Failed(String),
    /// The update's slot never came up: the boot loader went back here by itself.
    FellBack,
    Nothing,
}

fn decide(
    pending: Option<&Pending>,
    booted: &str,
    boot_time: u64,
    check: &std::result::Result<(), String>,
) -> Decision {
    match (pending, check) {
        (Some(p), Ok(())) if p.slot == booted => Decision::Updated,
        (Some(p), Err(reason)) if p.slot == booted => Decision::Failed(reason.clone()),
        // Installed before this boot, yet another slot runs.
        (Some(p), _) if p.installed_at < boot_time => Decision::FellBack,
        // Installed during this boot: the reboot is still to come.
        (Some(_), _) => Decision::Nothing,
        (None, Ok(())) => Decision::MarkGood,
        // A slot that ran before is not given up for a failure outside an update.
        (None, Err(_)) => Decision::Nothing,
    }
}

/// Orders versions by their dot-separated parts, numerically where both parts are numbers.
fn compare_versions(a: &str, b: &str) -> Ordering {
    let parts =
        |v: &str| -> Vec<String> { v.split(['.', '-', '+', '~']).map(str::to_owned).collect() };
    let (a, b) = (parts(a), parts(b));
    for (x, y) in a.iter().zip(&b) {
        let order = match (x.parse::<u64>(), y.parse::<u64>()) {
            (Ok(x), Ok(y)) => x.cmp(&y),
            _ => x.cmp(y),
        };
        if order != Ordering::Equal {
            return order;
        }
    }
    a.len().cmp(&b.len())
}

/// A field of an os-release file written by a docent image (`ID=docent…`): a developer's
/// machine has an os-release too, whose fields are not firmware's. `VERSION_ID` is the
/// firmware's version; `DOCENT_MIN_VERSION` its minimum version, below which nothing is
/// installed, forced or not (docs/updates.md: a release that fixed a security fault names
/// itself, and the root file system it lives in is signed and read-only).
fn os_release_field(text: &str, name: &str) -> Option<String> {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix('='))
            .map(|v| v.trim().trim_matches('"').to_string())
            .filter(|v| !v.is_empty())
    };
    field("ID").filter(|id| id.starts_with("docent"))?;
    field(name)
}

fn os_release_version(text: &str) -> Option<String> {
    os_release_field(text, "VERSION_ID")
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// When this boot began (Unix seconds), from the kernel's `btime`.
fn boot_time() -> u64 {
    std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("btime "))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// RAUC's refusal of a bundle in staff's words. RAUC 1.8 says only "rauc info error" (the detail
/// goes to its log); the usual causes are named then.
fn refusal(rauc: &str) -> String {
    if rauc.trim() == "rauc info error" {
        "RAUC refused it: its signature does not check against this kiosk's keyring, or the file \
         is not a RAUC bundle"
            .into()
    } else {
        format!("RAUC refused it: {rauc}")
    }
}

fn bounded(mut reason: String) -> String {
    if reason.len() > REASON_MAX {
        let mut end = REASON_MAX;
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        reason.truncate(end);
        reason.push('…');
    }
    reason
}

fn unavailable(e: &zbus::Error) -> Error {
    Error::Unavailable(format!(
        "updates need RAUC on the system bus (the kiosk's image has it): {}",
        bounded(rauc::message(e))
    ))
}

struct State {
    operation: Operation,
    progress: Progress,
    error: Option<String>,
    checked: Option<Verdict>,
    checked_path: Option<PathBuf>,
}

/// The update service of the process.
pub struct Updates {
    config: UpdateConfig,
    dir: PathBuf,
    firmware: Option<String>,
    /// The running firmware's minimum version (`DOCENT_MIN_VERSION`): no force goes below it.
    floor: Option<String>,
    state: std::sync::Mutex<State>,
    /// Held while a bundle is received, checked or installed: one at a time.
    busy: tokio::sync::Mutex<()>,
    /// `update/outcome.json`, read at start (the update gate writes it before docent runs) and
    /// kept as this process writes it: health reads it at every poll.
    outcome: std::sync::Mutex<Option<Outcome>>,
    /// What waits for the museum to close (`update/schedule.json`).
    plan: std::sync::Mutex<schedule::Plan>,
}

impl Updates {
    pub fn open(config: &UpdateConfig, data_dir: &Path) -> Result<Updates> {
        let dir = data_dir.join("update");
        std::fs::create_dir_all(&dir)?;
        // A bundle left by a crash is not installed behind anyone's back; one whose install
        // waits for the museum to close is kept, with RAUC's verdict on it.
        let mut plan: schedule::Plan = read_json(&dir.join(schedule::SCHEDULE)).unwrap_or_default();
        if !dir.join(BUNDLE).exists() {
            plan.install = None;
        }
        if plan.install.is_none() {
            let _ = std::fs::remove_file(dir.join(BUNDLE));
        }
        let checked = plan.install.as_ref().map(|p| p.verdict.clone());
        let checked_path = checked.as_ref().map(|_| dir.join(BUNDLE));
        let outcome = read_json(&dir.join(OUTCOME));
        let release = std::fs::read_to_string(&config.os_release).unwrap_or_default();
        let firmware = os_release_version(&release);
        let floor = os_release_field(&release, "DOCENT_MIN_VERSION");
        Ok(Updates {
            config: config.clone(),
            dir,
            firmware,
            floor,
            state: std::sync::Mutex::new(State {
                operation: Operation::Idle,
                progress: Progress {
                    percent: 0,
                    message: String::new(),
                },
                error: None,
                checked,
                checked_path,
            }),
            busy: tokio::sync::Mutex::new(()),
            outcome: std::sync::Mutex::new(outcome),
            plan: std::sync::Mutex::new(plan),
        })
    }

    pub fn max_bundle_bytes(&self) -> u64 {
        self.config.max_bundle_bytes
    }

    /// Where an upload is written before it is checked.
    pub fn bundle_path(&self) -> PathBuf {
        self.dir.join(BUNDLE)
    }

    pub fn firmware_version(&self) -> Option<&str> {
        self.firmware.as_deref()
    }

    /// One upload, check or install at a time.
    pub fn begin(&self) -> Result<tokio::sync::MutexGuard<'_, ()>> {
        if !self.config.enabled {
            return Err(Error::Unavailable(
                "updates are turned off in this kiosk's configuration ([update] enabled)".into(),
            ));
        }
        if self.lock().operation == Operation::Installing {
            return Err(Error::Conflict("an update is being installed".into()));
        }
        self.busy
            .try_lock()
            .map_err(|_| Error::Conflict("another update is being uploaded or checked".into()))
    }

    /// Whether RAUC answers, before an upload is received for nothing.
    pub async fn available(&self) -> Result<()> {
        let rauc = self.rauc().await?;
        rauc.compatible().await.map_err(|e| unavailable(&e))?;
        Ok(())
    }

    async fn rauc(&self) -> Result<InstallerProxy<'static>> {
        let bus = zbus::Connection::system()
            .await
            .map_err(|e| unavailable(&e))?;
        InstallerProxy::new(&bus).await.map_err(|e| unavailable(&e))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// RAUC's verdict on a bundle (an upload, or the fleet's download); the next `install`
    /// installs it. Nothing is written to a slot.
    pub async fn check(&self, path: &Path) -> Result<Verdict> {
        let rauc = self.rauc().await?;
        let system = rauc.compatible().await.map_err(|e| unavailable(&e))?;
        let info = rauc.info(&path.to_string_lossy()).await;
        let current = self.firmware.clone();
        let verdict = match info {
            Err(e) => Verdict {
                compatible: String::new(),
                version: String::new(),
                current_version: current,
                accepted: false,
                reason: Some(bounded(refusal(&rauc::message(&e)))),
                older: false,
            },
            Ok((compatible, version)) => {
                let order = current.as_deref().map(|c| compare_versions(&version, c));
                let below = self
                    .floor
                    .as_deref()
                    .filter(|f| compare_versions(&version, f) == Ordering::Less);
                let reason = if compatible != system {
                    Some(format!(
                        "this update is for {compatible}; this kiosk is {system}"
                    ))
                } else if let Some(floor) = below {
                    Some(format!(
                        "{version} is below this firmware's minimum version {floor} (what came \
                         before it has known security faults): it is never installed, even \
                         with force"
                    ))
                } else if order == Some(Ordering::Equal) {
                    Some(format!(
                        "{version} already runs; install it again anyway with force"
                    ))
                } else if order == Some(Ordering::Less) {
                    Some(format!(
                        "{version} is older than the running {}; install it anyway with force",
                        current.as_deref().unwrap_or("")
                    ))
                } else {
                    None
                };
                Verdict {
                    accepted: reason.is_none(),
                    older: compatible == system
                        && below.is_none()
                        && order.is_some_and(|o| o != Ordering::Greater),
                    compatible: bounded(compatible),
                    version: bounded(version),
                    current_version: current,
                    reason: reason.map(bounded),
                }
            }
        };
        if !verdict.accepted && !verdict.older && path == self.bundle_path() {
            let _ = std::fs::remove_file(path);
        }
        let mut state = self.lock();
        state.checked = Some(verdict.clone());
        state.checked_path = Some(path.to_path_buf());
        state.error = None;
        if state.operation != Operation::Installed {
            state.operation = Operation::Idle;
        }
        Ok(verdict)
    }

    /// Starts installing the checked bundle; `status` follows its progress.
    pub async fn install(self: &std::sync::Arc<Self>, force: bool) -> Result<()> {
        let guard = self.begin()?;
        let rauc = self.rauc().await?;
        let verdict = self.installable(force)?;
        let mut completed = rauc
            .receive_completed()
            .await
            .map_err(|e| unavailable(&e))?;
        let bundle = self
            .lock()
            .checked_path
            .clone()
            .ok_or_else(|| Error::Conflict("upload a bundle first".into()))?;
        rauc.install_bundle(&bundle.to_string_lossy(), Default::default())
            .await
            .map_err(|e| Error::Conflict(bounded(rauc::message(&e))))?;
        {
            let mut state = self.lock();
            state.operation = Operation::Installing;
            state.progress = Progress {
                percent: 0,
                message: "starting".into(),
            };
            state.error = None;
        }
        drop(guard);
        let me = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(300));
            let code = loop {
                tokio::select! {
                    signal = completed.next() => {
                        break signal.and_then(|s| s.args().ok().map(|a| a.result)).unwrap_or(-1);
                    }
                    _ = tick.tick() => {
                        if let Ok((percent, message, _)) = rauc.progress().await {
                            let percent = percent.clamp(0, 100) as u8;
                            me.lock().progress = Progress { percent, message };
                        }
                    }
                }
            };
            let _ = std::fs::remove_file(&bundle);
            let outcome = if code == 0 {
                me.installed(&rauc, &verdict).await
            } else {
                let error = rauc.last_error().await.unwrap_or_default();
                Err(format!("RAUC could not install it: {}", bounded(error)))
            };
            let mut state = me.lock();
            state.checked = None;
            state.checked_path = None;
            match outcome {
                Ok(slot) => {
                    tracing::info!(version = %verdict.version, %slot, "update installed; a reboot starts it");
                    state.operation = Operation::Installed;
                    state.progress = Progress {
                        percent: 100,
                        message: format!(
                            "{} is installed in slot {slot}: reboot to start it",
                            verdict.version
                        ),
                    };
                }
                Err(e) => {
                    tracing::warn!("update failed: {e}");
                    state.operation = Operation::Failed;
                    state.error = Some(e);
                }
            }
        });
        Ok(())
    }

    /// The verdict on the bundle checked last, if it may be installed (`force`: even an older
    /// one).
    fn installable(&self, force: bool) -> Result<Verdict> {
        let verdict = self
            .lock()
            .checked
            .clone()
            .ok_or_else(|| Error::Conflict("upload a bundle first".into()))?;
        if !(verdict.accepted || (force && verdict.older)) {
            return Err(Error::Conflict(format!(
                "the uploaded bundle was refused: {}",
                verdict.reason.as_deref().unwrap_or("")
            )));
        }
        Ok(verdict)
    }

    /// Checks and installs `bundle` to its end (the fleet client's path; the console takes the
    /// same steps one request each).
    pub async fn install_and_wait(self: &std::sync::Arc<Self>, bundle: &Path) -> Result<()> {
        let verdict = {
            let _busy = self.begin()?;
            self.check(bundle).await?
        };
        if !verdict.accepted {
            return Err(Error::Conflict(verdict.reason.unwrap_or_default()));
        }
        self.install(false).await?;
        loop {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let state = self.lock();
            match state.operation {
                Operation::Installing => {}
                Operation::Installed => return Ok(()),
                Operation::Failed | Operation::Idle => {
                    return Err(Error::Conflict(state.error.clone().unwrap_or_default()));
                }
            }
        }
    }

    pub fn progress(&self) -> Progress {
        self.lock().progress.clone()
    }

    /// The booted slot and the board's compatible, as RAUC says them.
    pub async fn slot_and_board(&self) -> (Option<String>, Option<String>) {
        match self.rauc().await {
            Ok(r) => (r.boot_slot().await.ok(), r.compatible().await.ok()),
            Err(_) => (None, None),
        }
    }

    /// Records which slot should come up with what, once RAUC has written it.
    async fn installed(
        &self,
        rauc: &InstallerProxy<'_>,
        verdict: &Verdict,
    ) -> std::result::Result<String, String> {
        let primary = rauc.get_primary().await.map_err(|e| rauc::message(&e))?;
        let slot = rauc::bootname(rauc, &primary)
            .await
            .map_err(|e| rauc::message(&e))?
            .unwrap_or(primary);
        let pending = Pending {
            slot: slot.clone(),
            from: self.firmware.clone().unwrap_or_else(|| "unknown".into()),
            to: verdict.version.clone(),
            installed_at: now(),
        };
        write_json(&self.dir.join(PENDING), &pending).map_err(|e| e.to_string())?;
        Ok(slot)
    }

    /// Asks the board to reboot (a root unit watches the request file).
    pub fn request_reboot(&self) -> Result<()> {
        let path = &self.config.reboot_request;
        std::fs::write(path, b"").map_err(|e| {
            Error::Unavailable(format!(
                "this machine has no reboot path ({}: {e})",
                path.display()
            ))
        })?;
        tracing::info!("reboot requested");
        Ok(())
    }

    pub fn outcome(&self) -> Option<Outcome> {
        self.outcome
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The state for the System page; `engine` says when the museum closes.
    pub async fn status(&self, engine: &crate::engine::Engine) -> Status {
        let booted = match self.rauc().await {
            Ok(r) => r.boot_slot().await.ok(),
            Err(_) => None,
        };
        let closing = museum_open(engine).map(|o| o.when);
        let (scheduled_install, scheduled_reboot) = self.scheduled(closing.as_deref());
        let state = self.lock();
        Status {
            available: booted.is_some(),
            operation: state.operation,
            progress: state.progress.clone(),
            error: state.error.clone(),
            checked: state.checked.clone(),
            booted_slot: booted,
            firmware_version: self.firmware.clone(),
            outcome: self.outcome(),
            scheduled_install,
            scheduled_reboot,
            closing,
        }
    }

    /// The start check's consequences on this boot: `check` says whether docent serves with its
    /// loops alive. Returns whether a reboot was asked for (the update failed its check).
    pub async fn settle(&self, check: std::result::Result<(), String>) -> Result<bool> {
        let Ok(rauc) = self.rauc().await else {
            return Ok(false);
        };
        let Ok(booted) = rauc.boot_slot().await else {
            return Ok(false);
        };
        let pending: Option<Pending> = read_json(&self.dir.join(PENDING));
        let decision = decide(pending.as_ref(), &booted, boot_time(), &check);
        let mark = |state: &'static str| {
            let rauc = rauc.clone();
            async move {
                rauc.mark(state, "booted").await.map_err(|e| {
                    Error::Internal(format!(
                        "RAUC could not mark the slot {state}: {}",
                        rauc::message(&e)
                    ))
                })
            }
        };
        let outcome = |result, reason: Option<String>| {
            let p = pending.as_ref().expect("decided on a pending update");
            Outcome {
                result,
                from: p.from.clone(),
                to: p.to.clone(),
                reason,
                at: now(),
                installed_at: p.installed_at,
            }
        };
        match decision {
            Decision::Nothing => {
                if let Err(reason) = &check {
                    tracing::warn!("start check failed outside an update: {reason}");
                }
                Ok(false)
            }
            Decision::MarkGood => {
                mark("good").await?;
                tracing::info!(slot = %booted, "slot marked good");
                Ok(false)
            }
            Decision::Updated => {
                mark("good").await?;
                let o = outcome(OutcomeKind::Updated, None);
                self.finish(&o)?;
                tracing::info!(slot = %booted, "{}", o.sentence());
                Ok(false)
            }
            Decision::FellBack => {
                let slot = &pending.as_ref().expect("pending").slot;
                let o = outcome(
                    OutcomeKind::RolledBack,
                    Some(format!("slot {slot} did not come up")),
                );
                self.finish(&o)?;
                tracing::warn!("{}", o.sentence());
                if check.is_ok() {
                    mark("good").await?;
                }
                Ok(false)
            }
            Decision::Failed(reason) => {
                // Written by the new version, read by the old one after the reboot.
                let o = outcome(OutcomeKind::RolledBack, Some(bounded(reason)));
                self.finish(&o)?;
                tracing::error!("{}", o.sentence());
                mark("bad").await?;
                self.request_reboot()?;
                Ok(true)
            }
        }
    }

    fn finish(&self, outcome: &Outcome) -> Result<()> {
        write_json(&self.dir.join(OUTCOME), outcome)?;
        *self.outcome.lock().unwrap_or_else(|e| e.into_inner()) = Some(outcome.clone());
        let _ = std::fs::remove_file(self.dir.join(PENDING));
        Ok(())
    }
}

/// Read leniently: a byte that is not UTF-8 (the gate's shell writes the outcome on a rollback)
/// is replaced rather than losing the whole file, and with it the rollback's report.
fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Option<T> {
    let bytes = std::fs::read(path).ok()?;
    serde_json::from_str(&String::from_utf8_lossy(&bytes)).ok()
}

/// Written to a temporary file, synced and renamed: a power cut leaves the old file or the new.
fn write_json(path: &Path, value: &impl Serialize) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut file = std::fs::File::create(&tmp)?;
    std::io::Write::write_all(&mut file, &serde_json::to_vec(value)?)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(slot: &str, installed_at: u64) -> Pending {
        Pending {
            slot: slot.into(),
            from: "0.1.0".into(),
            to: "0.2.0".into(),
            installed_at,
        }
    }

    #[test]
    fn the_start_check_decides_per_boot() {
        let ok = Ok(());
        let bad = Err("the kiosk loop stopped".to_string());
        let p = pending("B", 100);
        assert_eq!(decide(None, "A", 200, &ok), Decision::MarkGood);
        assert_eq!(decide(None, "A", 200, &bad), Decision::Nothing);
        assert_eq!(decide(Some(&p), "B", 200, &ok), Decision::Updated);
        assert_eq!(
            decide(Some(&p), "B", 200, &bad),
            Decision::Failed("the kiosk loop stopped".into())
        );
        assert_eq!(decide(Some(&p), "A", 200, &ok), Decision::FellBack);
        assert_eq!(decide(Some(&p), "A", 200, &bad), Decision::FellBack);
        // Installed after this boot began: docent restarted before the reboot.
        assert_eq!(decide(Some(&p), "A", 50, &ok), Decision::Nothing);
    }

    #[test]
    fn versions_order_by_number() {
        assert_eq!(compare_versions("0.10.0", "0.9.1"), Ordering::Greater);
        assert_eq!(compare_versions("0.2.0", "0.2.0"), Ordering::Equal);
        assert_eq!(compare_versions("0.1.9", "0.2"), Ordering::Less);
        assert_eq!(compare_versions("2026.11", "2026.2"), Ordering::Greater);
    }

    #[test]
    fn os_release_gives_the_version() {
        let text = "NAME=\"docent\"\nVERSION_ID=\"0.2.0\"\nID=docent\n";
        assert_eq!(os_release_version(text).as_deref(), Some("0.2.0"));
        assert_eq!(
            os_release_version("ID=docent-os\nVERSION_ID=1.2\n").as_deref(),
            Some("1.2")
        );
        assert_eq!(
            os_release_version("ID=debian\nVERSION_ID=\"12\"\n"),
            None,
            "not firmware"
        );
        assert_eq!(os_release_version("ID=docent\n"), None);
        let floor = "ID=docent\nVERSION_ID=0.3.0\nDOCENT_MIN_VERSION=\"0.2.0\"\n";
        assert_eq!(
            os_release_field(floor, "DOCENT_MIN_VERSION").as_deref(),
            Some("0.2.0")
        );
        assert_eq!(os_release_field(text, "DOCENT_MIN_VERSION"), None);
    }

    /// The gate's shell cut docent's last words at 300 bytes, once through a character: a
    /// rollback whose outcome holds a bad byte is still reported (the byte replaced).
    #[test]
    fn an_outcome_with_a_bad_byte_is_still_read() {
        let data = tempfile::tempdir().unwrap();
        std::fs::create_dir(data.path().join("update")).unwrap();
        std::fs::write(
            data.path().join("update").join(OUTCOME),
            b"{\"result\":\"rolled_back\",\"from\":\"0.1.0\",\"to\":\"0.2.0\",\
              \"reason\":\"docent failed to start 5 times: caf\xc3\",\"at\":1,\"installed_at\":2}\n",
        )
        .unwrap();
        let updates = Updates::open(&UpdateConfig::default(), data.path()).unwrap();
        let outcome = updates.outcome().expect("the rollback is reported");
        assert_eq!(outcome.result, OutcomeKind::RolledBack);
        assert_eq!(
            outcome.reason.as_deref(),
            Some("docent failed to start 5 times: caf\u{fffd}")
        );
    }

    /// A bundle whose install waits for the closing survives a restart with its verdict; one
    /// left by a crash does not, nor a schedule whose bundle is gone.
    #[test]
    fn a_scheduled_install_keeps_its_bundle_across_a_restart() {
        let data = tempfile::tempdir().unwrap();
        let dir = data.path().join("update");
        std::fs::create_dir(&dir).unwrap();
        let verdict = Verdict {
            compatible: "docent-test".into(),
            version: "0.2.0".into(),
            current_version: Some("0.1.0".into()),
            accepted: true,
            reason: None,
            older: false,
        };
        let plan = schedule::Plan {
            install: Some(schedule::PlannedInstall {
                force: false,
                verdict: verdict.clone(),
            }),
            reboot: true,
        };
        write_json(&dir.join(schedule::SCHEDULE), &plan).unwrap();
        std::fs::write(dir.join(BUNDLE), b"bundle").unwrap();
        let updates = Updates::open(&UpdateConfig::default(), data.path()).unwrap();
        assert!(dir.join(BUNDLE).exists(), "the scheduled bundle is kept");
        assert_eq!(updates.lock().checked, Some(verdict));
        assert_eq!(updates.plan(), plan);
        let (install, reboot) = updates.scheduled(Some("today at 18:00"));
        let at = Some(schedule::Scheduled {
            when: "today at 18:00".into(),
        });
        assert_eq!((install, reboot), (at.clone(), at));

        // Cancelled: the next start treats the bundle as one left by a crash.
        updates.cancel_install().unwrap();
        drop(updates);
        let updates = Updates::open(&UpdateConfig::default(), data.path()).unwrap();
        assert!(!dir.join(BUNDLE).exists());
        assert_eq!(updates.lock().checked, None);
        assert!(updates.plan().reboot, "the reboot is still asked for");

        // Scheduled, but its bundle gone: nothing to install.
        write_json(&dir.join(schedule::SCHEDULE), &plan).unwrap();
        let updates = Updates::open(&UpdateConfig::default(), data.path()).unwrap();
        assert_eq!(updates.plan().install, None);
        assert_eq!(updates.lock().checked, None);
    }

    #[test]
    fn outcomes_read_as_sentences() {
        let o = Outcome {
            result: OutcomeKind::RolledBack,
            from: "0.2.0".into(),
            to: "0.3.0".into(),
            reason: Some("docent did not start".into()),
            at: 0,
            installed_at: 0,
        };
        assert_eq!(
            o.sentence(),
            "0.3.0 failed its start check (docent did not start) and was rolled back; running 0.2.0"
        );
        let o = Outcome {
            result: OutcomeKind::Updated,
            reason: None,
            ..o
        };
        assert_eq!(o.sentence(), "updated from 0.2.0 to 0.3.0");
    }
}
