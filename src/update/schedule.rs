//! Updates that wait for the museum to close (docs/updates.md, "When"): an install or a reboot
//! in the middle of a visit cuts a visitor short, so an administrator may ask for one "when the
//! museum closes", and the fleet client waits the same way (`museum_open`).
//!
//! What is asked is kept in `update/schedule.json`, so that a restart keeps it (and the bundle
//! it installs); a task reads the kiosk's opening hours (`Engine::opening`'s parts) every few
//! seconds and at every settings change, and carries it out once the museum is closed.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::{Operation, Updates, Verdict};
use crate::engine::Engine;
use crate::engine::hours::Opening;

/// The file that keeps what is scheduled, in `update/`.
pub(super) const SCHEDULE: &str = "schedule.json";
/// How often the task looks at the clock: an install starts within this of the closing time.
const LOOK_EVERY: Duration = Duration::from_secs(3);

/// When an administrator's install or reboot happens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum When {
    /// At once, whoever is in front of the kiosk: the administrator's own decision.
    #[default]
    Now,
    /// Once the museum is closed by its opening hours; at once when it is closed now or keeps
    /// no hours (always open: there is no closing to wait for).
    Closed,
}

/// The opening hours' answer while the museum is open by them; `None` when it is closed, or
/// when no schedule applies (an always-open kiosk has no closed period to wait for).
pub fn museum_open(engine: &Engine) -> Option<Opening> {
    let hours = engine.settings().hours.clone();
    if !hours.enabled {
        return None;
    }
    let opening = hours.at(engine.local_now());
    opening.open.then_some(opening)
}

/// Something scheduled, as the System page shows it.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Scheduled {
    /// When the museum closes, in words ("today at 18:00"); empty when it is closed now (it
    /// happens within seconds, or once the visit under way ends).
    pub when: String,
}

/// What is scheduled, as kept in `update/schedule.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(super) struct Plan {
    /// The uploaded bundle's install.
    pub install: Option<PlannedInstall>,
    /// A reboot (after the install, when both are planned).
    pub reboot: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct PlannedInstall {
    /// The administrator's "install this older version anyway".
    pub force: bool,
    /// RAUC's verdict on the bundle, kept so that a restart can install it.
    pub verdict: Verdict,
}

/// Starts the task that carries out what is scheduled; it ends when `stop` is cancelled.
pub fn spawn(
    engine: Arc<Engine>,
    updates: Arc<Updates>,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut bell = engine.watch_settings();
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = bell.changed() => {}
                _ = tokio::time::sleep(LOOK_EVERY) => {}
            }
            updates.carry_out(&engine).await;
        }
    })
}

impl Updates {
    /// The install and the reboot scheduled, with when the museum closes (`closing`; none:
    /// closed now).
    pub(super) fn scheduled(
        &self,
        closing: Option<&str>,
    ) -> (Option<Scheduled>, Option<Scheduled>) {
        let plan = self.plan();
        let when = closing.unwrap_or_default().to_string();
        let at = |yes: bool| yes.then(|| Scheduled { when: when.clone() });
        (at(plan.install.is_some()), at(plan.reboot))
    }

    /// Installs the checked bundle once the museum is closed. Refused as an install now would
    /// be: nothing accepted uploaded, or an install under way.
    pub fn schedule_install(&self, force: bool) -> crate::engine::Result<()> {
        let _busy = self.begin()?;
        let verdict = self.installable(force)?;
        self.change_plan(|p| p.install = Some(PlannedInstall { force, verdict }))
    }

    /// Forgets a scheduled install; the bundle stays, to be installed or scheduled again.
    pub fn cancel_install(&self) -> crate::engine::Result<()> {
        self.change_plan(|p| p.install = None)
    }

    /// Reboots once the museum is closed and no visit is under way.
    pub fn schedule_reboot(&self) -> crate::engine::Result<()> {
        self.change_plan(|p| p.reboot = true)
    }

    pub fn cancel_reboot(&self) -> crate::engine::Result<()> {
        self.change_plan(|p| p.reboot = false)
    }

    pub(super) fn plan(&self) -> Plan {
        self.plan.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn change_plan(&self, change: impl FnOnce(&mut Plan)) -> crate::engine::Result<()> {
        let mut plan = self.plan.lock().unwrap_or_else(|e| e.into_inner());
        change(&mut plan);
        super::write_json(&self.dir.join(SCHEDULE), &*plan)?;
        Ok(())
    }

    /// One look at the clock: what is scheduled is done once the museum is closed, the install
    /// first, the reboot once it has ended and no visit is under way.
    async fn carry_out(self: &Arc<Self>, engine: &Arc<Engine>) {
        let plan = self.plan();
        if (plan.install.is_none() && !plan.reboot) || museum_open(engine).is_some() {
            return;
        }
        if let Some(install) = plan.install {
            // Forgotten first: an install that fails is reported, not tried at every look.
            if let Err(e) = self.change_plan(|p| p.install = None) {
                tracing::warn!("the scheduled install could not be cleared: {e}");
                return;
            }
            {
                // The planned bundle, whatever was checked since (the fleet's, say).
                let mut state = self.lock();
                state.checked = Some(install.verdict.clone());
                state.checked_path = Some(self.bundle_path());
            }
            tracing::info!(version = %install.verdict.version, "the museum is closed: installing the scheduled update");
            if let Err(e) = self.install(install.force).await {
                tracing::warn!("the scheduled install did not start: {e}");
                let mut state = self.lock();
                state.operation = Operation::Failed;
                state.error = Some(format!("the scheduled install did not start: {e}"));
            }
            return;
        }
        if self.lock().operation == Operation::Installing {
            return;
        }
        let counting = engine.clone();
        match tokio::task::spawn_blocking(move || counting.session_count()).await {
            Ok(Ok(0)) => {}
            Ok(Ok(_)) => return,
            Ok(Err(e)) => {
                tracing::warn!("the scheduled reboot waits: {e}");
                return;
            }
            Err(e) => {
                tracing::warn!("the scheduled reboot waits: {e}");
                return;
            }
        }
        // Forgotten before it is asked for: the next boot, still in a closed period, must not
        // reboot again.
        if let Err(e) = self.change_plan(|p| p.reboot = false) {
            tracing::warn!("the scheduled reboot could not be cleared: {e}");
            return;
        }
        tracing::info!("the museum is closed: the scheduled reboot");
        if let Err(e) = self.request_reboot() {
            tracing::warn!("the scheduled reboot failed: {e}");
            let mut state = self.lock();
            state.error = Some(format!("the scheduled reboot failed: {e}"));
        }
    }
}
