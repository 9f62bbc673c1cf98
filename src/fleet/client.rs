//! The polling loop: asks the server what to do at the interval it sets, reports what this kiosk
//! runs, downloads and hands over deployments, and reports their result only once it is known.
//!
//! A firmware deployment's success is the new slot marked good by the health gate after the
//! reboot (`Firmware::outcome`), not the install: until then the action stays `proceeding`, and
//! a rollback is reported as a failure with its reason. A content bundle's success is the
//! restart that applied it.
//!
//! An install (and a content bundle's restart) waits for the museum to close by its opening
//! hours, and the reboot after an install as well: downloaded and checked, the action stays
//! `proceeding` ("waiting for the museum to close") and each later poll looks again. The
//! server's `update: forced` installs at once; its maintenance window is obeyed besides.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::ddi::{
    AssignedVersion, ConfigData, ControllerBase, Ddi, DeploymentBase, Execution, Feedback,
    Finished, Handling, Polled, Window,
};
use super::{
    ActionStatus, Escaped, Firmware, Fleet, FleetSettings, Kind, OutcomeKind, Pending, State,
    unix_now,
};
use crate::engine::Engine;
use crate::engine::error::{Error, Result};

/// The software module type of a firmware bundle (hawkBit's default `os`).
pub const FIRMWARE_PART: &str = "os";
/// The software module type of a content bundle.
pub const CONTENT_PART: &str = "docent-content";
/// The stage, and the feedback's words, of a deployment held back by the opening hours.
const WAITING: &str = "waiting for the museum to close";

/// Starts the loop; it ends when `stop` is cancelled.
pub fn spawn(
    engine: Arc<Engine>,
    fleet: Arc<Fleet>,
    firmware: Arc<dyn Firmware>,
    default_id: String,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut client = Client {
            engine,
            fleet,
            firmware,
            default_id,
            etag: None,
            base: ControllerBase::default(),
            announced: None,
            waiting: None,
            interval: 0,
        };
        client.run(stop).await;
    })
}

struct Client {
    engine: Arc<Engine>,
    /// The state the console shows.
    fleet: Arc<Fleet>,
    firmware: Arc<dyn Firmware>,
    default_id: String,
    /// The ETag of the last root resource read, and that resource.
    etag: Option<String>,
    base: ControllerBase,
    /// The action whose `proceeding` was sent (once per action and run).
    announced: Option<String>,
    /// The action whose wait for the museum to close was reported (once per action and run).
    waiting: Option<String>,
    /// The server's polling interval in force (seconds), kept when a later step fails.
    interval: u64,
}

impl Client {
    async fn run(&mut self, stop: CancellationToken) {
        let limits = self.engine.config.fleet.clone();
        // hawkBit's default until the server says.
        self.interval = 300;
        let mut server = None;
        // Rung whenever the settings change: turned on or off, paused, another server.
        let mut bell = self.engine.watch_settings();
        loop {
            if stop.is_cancelled() {
                return;
            }
            let settings = bell.borrow_and_update().fleet.clone();
            let id = controller_id(&settings, &self.default_id);
            let state = State::load(&self.engine.config.data_dir);
            self.fleet.update(|s| {
                s.enabled = settings.enabled;
                s.paused = settings.paused;
                s.server = settings.server_url.clone();
                s.tenant = settings.tenant.clone();
                s.controller_id = id.clone();
                s.content_version = state.content_version.clone();
            });
            let wait = if !settings.enabled || settings.paused || settings.server_url.is_empty() {
                None
            } else {
                // Another server, target or token: a new client (one connection kept across
                // polls), and the last answer says nothing of this one.
                let this = server_key(&settings, &self.default_id);
                if server.as_ref().map(|(key, _)| key) != Some(&this) {
                    self.etag = None;
                    let timeout = Duration::from_secs(limits.request_timeout_secs.max(1));
                    server = match Ddi::new(&settings, &id, timeout) {
                        Ok(ddi) => Some((this.clone(), Arc::new(ddi))),
                        Err(e) => {
                            tracing::warn!("fleet: {}", Escaped(&e));
                            None
                        }
                    };
                }
                let ddi = server.as_ref().map(|(_, ddi)| ddi.clone());
                // A pause, another server, target or token, or the end: the request in flight
                // ends at once (`Ddi::bounded`) and the cycle with it; what was done is kept
                // (a download goes on from where it stopped).
                let interrupt = CancellationToken::new();
                if let Some(ddi) = &ddi {
                    ddi.set_interrupt(interrupt.clone());
                }
                let mut inner_bell = bell.clone();
                let default_id = self.default_id.clone();
                let woken = std::sync::atomic::AtomicBool::new(false);
                let watch = async {
                    loop {
                        tokio::select! {
                            _ = stop.cancelled() => break,
                            _ = inner_bell.changed() => {}
                        }
                        woken.store(true, std::sync::atomic::Ordering::Relaxed);
                        let now = inner_bell.borrow_and_update().fleet.clone();
                        if !now.enabled
                            || now.paused
                            || now.server_url.is_empty()
                            || server_key(&now, &default_id) != this
                        {
                            break;
                        }
                    }
                    interrupt.cancel();
                    std::future::pending::<()>().await;
                };
                let cycle = async {
                    let ddi = ddi.ok_or_else(|| Error::Internal("no HTTP client".into()))?;
                    self.cycle(&ddi, &settings, &stop).await
                };
                let done = tokio::select! {
                    done = cycle => done,
                    _ = watch => unreachable!("the watch never ends"),
                };
                match done {
                    Ok(()) => self.fleet.update(|s| s.last_error = None),
                    Err(e) => {
                        tracing::warn!("fleet: {}", Escaped(&e));
                        self.fleet.update(|s| s.last_error = Some(e.to_string()));
                    }
                }
                // Woken while working: the settings are read again at once.
                if woken.load(std::sync::atomic::Ordering::Relaxed) {
                    continue;
                }
                let interval = self
                    .interval
                    .clamp(limits.min_poll_secs, limits.max_poll_secs);
                self.fleet.update(|s| s.interval_secs = interval);
                Some(Duration::from_secs(interval))
            };
            let sleep = async {
                match wait {
                    Some(d) => tokio::time::sleep(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = bell.changed() => {}
                _ = sleep => {}
            }
        }
    }

    /// One poll and what it asks for.
    async fn cycle(
        &mut self,
        ddi: &Ddi,
        settings: &FleetSettings,
        stop: &CancellationToken,
    ) -> Result<()> {
        if self.engine.restart_token().is_cancelled() {
            return Ok(());
        }
        self.report_finished(ddi, settings).await?;
        let changed = match ddi.poll(self.etag.as_deref()).await? {
            Polled::Unchanged => false,
            Polled::Changed(base, etag) => {
                self.base = base;
                self.etag = etag;
                true
            }
        };
        self.fleet.update(|s| s.last_poll = Some(unix_now()));
        self.interval = self
            .base
            .config
            .as_ref()
            .and_then(|c| c.polling.as_ref())
            .and_then(|p| p.sleep.as_deref())
            .and_then(super::ddi::parse_sleep)
            .unwrap_or(300);
        let links = self.base.links.clone();
        if changed
            && links.config_data.is_some()
            && let Err(e) = self.send_config_data(ddi).await
        {
            // Asked again at the next poll, which must not be a 304.
            self.etag = None;
            return Err(e);
        }
        if let Some(cancel) = links.cancel_action {
            self.cancel(ddi, &cancel.href).await?;
        } else if let Some(deployment) = links.deployment_base {
            let base = ddi.deployment(&deployment.href).await?;
            self.deploy(ddi, base, stop).await?;
        }
        Ok(())
    }

    /// Remembers the action whose outcome the next start reports, and drops its download. `at`
    /// is when its install began or when it was staged (see `Pending::at`).
    fn pending(&self, id: &str, kind: Kind, version: &str, at: u64) -> Result<()> {
        let dir = &self.engine.config.data_dir;
        let state = State {
            pending: Some(Pending {
                id: id.into(),
                kind,
                version: version.into(),
                at,
            }),
            ..State::load(dir)
        };
        state.save(dir)?;
        discard_download(dir);
        Ok(())
    }

    /// Reports an action whose result is now known (after the restart), or an update the
    /// console installed.
    async fn report_finished(&mut self, ddi: &Ddi, settings: &FleetSettings) -> Result<()> {
        let dir = self.engine.config.data_dir.clone();
        let mut state = State::load(&dir);
        let firmware = self.firmware.clone();
        let outcome = tokio::task::spawn_blocking(move || firmware.outcome())
            .await
            .map_err(|e| Error::Internal(e.to_string()))?;
        match state.pending.clone() {
            Some(p) if p.kind == Kind::Firmware => {
                let Some(o) = outcome.filter(|o| o.installed_at >= p.at) else {
                    return Ok(());
                };
                let feedback = match o.result {
                    OutcomeKind::Updated if o.to == p.version => Feedback::new(
                        Execution::Closed,
                        Finished::Success,
                        format!("running {}; its slot was marked good", o.to),
                    ),
                    OutcomeKind::Updated => Feedback::new(
                        Execution::Closed,
                        Finished::Failure,
                        format!("running {}, not {}", o.to, p.version),
                    ),
                    OutcomeKind::RolledBack => Feedback::new(
                        Execution::Closed,
                        Finished::Failure,
                        format!(
                            "{} was rolled back: {}; running {}",
                            o.to,
                            o.reason.as_deref().unwrap_or("no reason given"),
                            o.from
                        ),
                    ),
                };
                self.feedback(ddi, &p.id, feedback).await?;
                state.pending = None;
                state.outcome_seen = o.installed_at;
                state.save(&dir)?;
                self.fleet.update(|s| s.action = None);
            }
            Some(p) => {
                // Applied at the start of this run: the staged restore is gone.
                if self.engine.restore_staged() {
                    return Ok(());
                }
                // In force now, whether or not the server hears it at once.
                state.content_version = Some(p.version.clone());
                state.save(&dir)?;
                self.fleet
                    .update(|s| s.content_version = Some(p.version.clone()));
                self.feedback(
                    ddi,
                    &p.id,
                    Feedback::new(
                        Execution::Closed,
                        Finished::Success,
                        format!("content {} applied", p.version),
                    ),
                )
                .await?;
                state.pending = None;
                state.save(&dir)?;
                self.fleet.update(|s| s.action = None);
            }
            None => {
                if let Some(o) = outcome.filter(|o| o.installed_at > state.outcome_seen) {
                    if o.result == OutcomeKind::Updated {
                        let version = AssignedVersion {
                            name: settings.distribution.clone(),
                            version: o.to.clone(),
                        };
                        ddi.installed_base(&version).await?;
                        self.fleet.reported(
                            "installedBase".into(),
                            format!("{} {}", version.name, version.version),
                        );
                        tracing::info!(
                            "fleet: reported {} installed from the console",
                            Escaped(&o.to)
                        );
                    }
                    state.outcome_seen = o.installed_at;
                    state.save(&dir)?;
                }
            }
        }
        Ok(())
    }

    async fn send_config_data(&mut self, ddi: &Ddi) -> Result<()> {
        let firmware = self.firmware.clone();
        let running = tokio::task::spawn_blocking(move || firmware.running())
            .await
            .map_err(|e| Error::Internal(e.to_string()))?;
        let engine = self.engine.clone();
        let characters = tokio::task::spawn_blocking(move || engine.character_count())
            .await
            .map_err(|e| Error::Internal(e.to_string()))??;
        let state = State::load(&self.engine.config.data_dir);
        let unknown = || "unknown".to_string();
        let data = BTreeMap::from([
            (
                "firmware_version".into(),
                running.version.unwrap_or_else(unknown),
            ),
            ("booted_slot".into(), running.slot.unwrap_or_else(unknown)),
            (
                "compatible".into(),
                running.compatible.unwrap_or_else(unknown),
            ),
            (
                "content_version".into(),
                state.content_version.unwrap_or_else(|| "none".into()),
            ),
            ("characters".into(), characters.to_string()),
            ("docent_version".into(), env!("CARGO_PKG_VERSION").into()),
        ]);
        let details = data
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ");
        ddi.config_data(&ConfigData {
            mode: "merge",
            data,
        })
        .await?;
        self.fleet.reported("configData".into(), details);
        Ok(())
    }

    /// Confirms a cancellation, unless the action is already installed.
    async fn cancel(&mut self, ddi: &Ddi, href: &str) -> Result<()> {
        let cancel = ddi.cancel_action(href).await?;
        super::ddi::check_action_id(&cancel.id)?;
        let stop = cancel.cancel_action.stop_id;
        let dir = self.engine.config.data_dir.clone();
        let installed = State::load(&dir).pending.is_some_and(|p| p.id == stop);
        let feedback = if installed {
            Feedback::new(
                Execution::Rejected,
                Finished::None,
                "already installed; the result follows the restart",
            )
        } else {
            discard_download(&dir);
            self.fleet.update(|s| s.action = None);
            tracing::info!("fleet: action {} cancelled by the server", Escaped(&stop));
            Feedback::new(
                Execution::Canceled,
                Finished::Success,
                "cancelled before the install",
            )
        };
        let summary = feedback.summary();
        ddi.cancel_feedback(&cancel.id, &feedback).await?;
        self.fleet.reported(
            format!("cancelAction {}: {summary}", cancel.id),
            feedback.status.details.join("; "),
        );
        Ok(())
    }

    /// Tells the server the action goes on, with what it is doing now.
    async fn proceeding(&mut self, ddi: &Ddi, id: &str, doing: String) -> Result<()> {
        self.feedback(
            ddi,
            id,
            Feedback::new(Execution::Proceeding, Finished::None, doing),
        )
        .await
    }

    async fn feedback(&mut self, ddi: &Ddi, id: &str, feedback: Feedback) -> Result<()> {
        let summary = feedback.summary();
        ddi.deployment_feedback(id, &feedback).await?;
        let details = feedback.status.details.join("; ");
        if feedback.status.execution == Execution::Closed {
            tracing::info!(
                "fleet: action {} {summary}: {}",
                Escaped(id),
                Escaped(&details)
            );
        }
        self.fleet
            .reported(format!("feedback {id}: {summary}"), details);
        Ok(())
    }

    /// Ends the action with a failure.
    async fn fail(&mut self, ddi: &Ddi, id: &str, why: String) -> Result<()> {
        discard_download(&self.engine.config.data_dir);
        self.fleet.update(|s| s.action = None);
        self.feedback(
            ddi,
            id,
            Feedback::new(Execution::Closed, Finished::Failure, why),
        )
        .await
    }

    fn stage(&self, id: &str, kind: Kind, version: &str, stage: &str, percent: u8) {
        let action = ActionStatus {
            id: id.into(),
            kind,
            version: version.into(),
            stage: stage.into(),
            percent,
        };
        self.fleet.update(|s| s.action = Some(action));
    }

    async fn deploy(
        &mut self,
        ddi: &Ddi,
        base: DeploymentBase,
        stop: &CancellationToken,
    ) -> Result<()> {
        let id = base.id.clone();
        super::ddi::check_action_id(&id)?;
        let dir = self.engine.config.data_dir.clone();
        if State::load(&dir).pending.is_some_and(|p| p.id == id) {
            return Ok(()); // installed; its result follows the restart
        }
        let d = base.deployment;
        if d.download == Some(Handling::Skip) {
            return Ok(());
        }
        let (chunk, kind) = match d.chunks.as_slice() {
            [c] if c.part == FIRMWARE_PART => (c, Kind::Firmware),
            [c] if c.part == CONTENT_PART => (c, Kind::Content),
            [c] => {
                let why = format!(
                    "unknown software module type {:?}: this kiosk takes {FIRMWARE_PART} and {CONTENT_PART}",
                    c.part
                );
                return self.fail(ddi, &id, why).await;
            }
            _ => {
                let why = "a deployment must carry one software module (firmware or content)";
                return self.fail(ddi, &id, why.into()).await;
            }
        };
        let [artifact] = chunk.artifacts.as_slice() else {
            let why = "the software module must hold exactly one artifact";
            return self.fail(ddi, &id, why.into()).await;
        };
        let (Some(href), Some(want)) = (artifact.href(), artifact.hashes.sha256.clone()) else {
            let why = "the artifact has no download link or no sha256";
            return self.fail(ddi, &id, why.into()).await;
        };
        let version = chunk.version.clone();
        if self.announced.as_deref() != Some(id.as_str()) {
            let text = format!("downloading {} {}", chunk.name, version);
            self.feedback(
                ddi,
                &id,
                Feedback::new(Execution::Proceeding, Finished::None, text),
            )
            .await?;
            self.announced = Some(id.clone());
        }
        let max = self.engine.config.fleet.max_artifact_bytes;
        if artifact.size.is_some_and(|s| s > max) {
            let why = format!("the artifact is larger than this kiosk takes ({max} bytes)");
            return self.fail(ddi, &id, why).await;
        }
        let file = prepare_download(&dir, &id, &want)?;
        let have = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
        let remaining = artifact.size.unwrap_or(max).saturating_sub(have);
        if !self.engine.has_room_for(remaining)? {
            let why = format!("not enough space on the data partition for {remaining} more bytes");
            return self.fail(ddi, &id, why).await;
        }
        let size = artifact.size;
        self.stage(&id, kind, &version, "downloading", 0);
        let fleet = &self.fleet;
        // Downloaded at an earlier poll (waiting for the window or the update).
        let complete = size.is_some_and(|s| s == have && s > 0);
        // The announced size is advice: free space is looked at again as the bytes arrive.
        let mut room = self.engine.headroom();
        let space = |len| {
            room.before_write(len)
                .map_err(|e| Error::no_room(e, "the rest of the artifact"))
        };
        let got = if complete {
            Ok(have)
        } else {
            ddi.download(href, &file, max, remaining, space, |n| {
                let percent = size.map_or(0, |s| (n * 100 / s.max(1)).min(100) as u8);
                fleet.update(|s| {
                    if let Some(a) = s.action.as_mut() {
                        a.percent = percent;
                    }
                });
            })
            .await
        };
        match got {
            Ok(_) => {}
            // Abandoned: the partial file goes with the action (`fail`).
            Err(Error::TooLarge(why) | Error::InsufficientStorage(why)) => {
                return self.fail(ddi, &id, why).await;
            }
            // Cut, stalled, out of time or interrupted: the next poll resumes where it stopped.
            Err(e) => return Err(e),
        }
        // Checked once: a deployment waiting for its window comes back at every poll.
        let checked = file.with_extension("checked");
        if !(complete && checked.exists()) {
            let path = file.clone();
            let sha = tokio::task::spawn_blocking(move || super::ddi::sha256_file(&path))
                .await
                .map_err(|e| Error::Internal(e.to_string()))??;
            if !sha.eq_ignore_ascii_case(&want) {
                let why = format!("sha256 mismatch: expected {want}, got {sha}");
                return self.fail(ddi, &id, why).await;
            }
            std::fs::write(&checked, b"")?;
        }
        if d.update == Some(Handling::Skip) {
            self.stage(&id, kind, &version, "downloaded", 100);
            return self
                .feedback(
                    ddi,
                    &id,
                    Feedback::new(Execution::Downloaded, Finished::None, "downloaded"),
                )
                .await;
        }
        if d.maintenance_window == Some(Window::Unavailable) {
            self.stage(
                &id,
                kind,
                &version,
                "waiting for the maintenance window",
                100,
            );
            return Ok(());
        }
        // Not while visitors are there, unless the operator forced it: hawkBit's maintenance
        // window is one for a whole fleet, the opening hours are this museum's.
        if d.update != Some(Handling::Forced)
            && let Some(open) = crate::update::museum_open(&self.engine)
        {
            self.stage(&id, kind, &version, WAITING, 100);
            if self.waiting.as_deref() != Some(id.as_str()) {
                self.proceeding(ddi, &id, format!("{WAITING} ({})", open.when))
                    .await?;
                self.waiting = Some(id.clone());
            }
            return Ok(());
        }
        // The last moment a cancellation can stop it: ask once more.
        if let Polled::Changed(base, _) = ddi.poll(None).await?
            && let Some(cancel) = base.links.cancel_action
        {
            return self.cancel(ddi, &cancel.href).await;
        }
        match kind {
            Kind::Firmware => self.install(ddi, &id, &file, d.update, stop).await,
            Kind::Content => self.apply_content(ddi, &id, &file).await,
        }
    }

    async fn install(
        &mut self,
        ddi: &Ddi,
        id: &str,
        file: &Path,
        update: Option<Handling>,
        stop: &CancellationToken,
    ) -> Result<()> {
        let firmware = self.firmware.clone();
        let path = file.to_path_buf();
        let verdict = tokio::task::spawn_blocking(move || firmware.check(&path))
            .await
            .map_err(|e| Error::Internal(e.to_string()))?;
        let verdict = match verdict {
            Ok(v) if v.accepted => v,
            Ok(v) => {
                let why = format!(
                    "the bundle was refused: {}",
                    v.reason.as_deref().unwrap_or("no reason given")
                );
                return self.fail(ddi, id, why).await;
            }
            Err(e) => {
                return self
                    .fail(ddi, id, format!("the bundle was refused: {e}"))
                    .await;
            }
        };
        let version = verdict.version.clone();
        self.stage(id, Kind::Firmware, &version, "installing", 0);
        self.proceeding(ddi, id, format!("installing {version}"))
            .await?;
        // Taken before the install: the update service stamps the install at its end
        // (`installed_at`), which the outcome after the reboot carries; a time taken once the
        // install has returned may already be the next second, and the outcome never match.
        let started = unix_now();
        let firmware = self.firmware.clone();
        let path = file.to_path_buf();
        let mut install = tokio::task::spawn_blocking(move || firmware.install(&path));
        let mut reported = 0u8;
        let installed = loop {
            tokio::select! {
                done = &mut install => break done.map_err(|e| Error::Internal(e.to_string()))?,
                _ = tokio::time::sleep(Duration::from_secs(1)) => {
                    let firmware = self.firmware.clone();
                    let p = tokio::task::spawn_blocking(move || firmware.progress())
                        .await
                        .map_err(|e| Error::Internal(e.to_string()))?;
                    self.stage(id, Kind::Firmware, &version, "installing", p.percent);
                    if p.percent >= reported.saturating_add(10) {
                        reported = p.percent;
                        let f = Feedback::new(Execution::Proceeding, Finished::None, p.message)
                            .with_progress(p.percent);
                        // Progress is a courtesy: a lost message does not stop the install.
                        if let Err(e) = ddi.deployment_feedback(id, &f).await {
                            tracing::debug!("fleet: progress not reported: {}", Escaped(&e));
                        }
                    }
                }
            }
        };
        if let Err(e) = installed {
            return self.fail(ddi, id, format!("the install failed: {e}")).await;
        }
        self.pending(id, Kind::Firmware, &version, started)?;
        self.stage(
            id,
            Kind::Firmware,
            &version,
            "installed; waiting to reboot",
            100,
        );
        // A courtesy as well: the install is done and the reboot must follow, even when this
        // message is lost or interrupted (the result follows the reboot in any case).
        if let Err(e) = self
            .proceeding(
                ddi,
                id,
                format!("{version} installed; the result follows the reboot and the start check"),
            )
            .await
        {
            tracing::warn!("fleet: not reported as installed: {}", Escaped(&e));
        }
        // `attempt`: not in the middle of a visit, nor while the museum is open (it may have
        // opened during the install).
        if update != Some(Handling::Forced) {
            loop {
                let engine = self.engine.clone();
                let busy = tokio::task::spawn_blocking(move || engine.session_count())
                    .await
                    .map_err(|e| Error::Internal(e.to_string()))??;
                let open = crate::update::museum_open(&self.engine);
                if busy == 0 && open.is_none() {
                    break;
                }
                if open.is_some() {
                    let stage = format!("installed; {WAITING}");
                    self.stage(id, Kind::Firmware, &version, &stage, 100);
                }
                tokio::select! {
                    _ = stop.cancelled() => return Ok(()),
                    _ = tokio::time::sleep(Duration::from_secs(2)) => {}
                }
            }
        }
        self.stage(id, Kind::Firmware, &version, "rebooting", 100);
        tracing::info!("fleet: {} installed; rebooting", Escaped(&version));
        let firmware = self.firmware.clone();
        tokio::task::spawn_blocking(move || firmware.reboot())
            .await
            .map_err(|e| Error::Internal(e.to_string()))?
    }

    async fn apply_content(&mut self, ddi: &Ddi, id: &str, file: &Path) -> Result<()> {
        let key = self.engine.settings().fleet.content_public_key.clone();
        let engine = self.engine.clone();
        let path = file.to_path_buf();
        let applied = tokio::task::spawn_blocking(move || {
            // The fleet never forces: a replayed older bundle is a failure.
            engine.apply_content(&path, &key, crate::engine::content::Replay::Refuse)
        })
        .await
        .map_err(|e| Error::Internal(e.to_string()))?;
        let version = match applied {
            Ok(v) => v,
            Err(e) => return self.fail(ddi, id, format!("content refused: {e}")).await,
        };
        self.pending(id, Kind::Content, &version, unix_now())?;
        self.stage(id, Kind::Content, &version, "restarting", 100);
        // Staged: the restart must follow even when this message is lost or interrupted.
        if let Err(e) = self
            .feedback(
                ddi,
                id,
                Feedback::new(
                    Execution::Proceeding,
                    Finished::None,
                    format!("content {version} checked and staged; restarting"),
                ),
            )
            .await
        {
            tracing::warn!("fleet: not reported as staged: {}", Escaped(&e));
        }
        tracing::info!("fleet: content {} staged; restarting", Escaped(&version));
        self.engine.request_restart();
        Ok(())
    }
}

/// The target's controller id: the setting, or the kiosk's own name.
fn controller_id(settings: &FleetSettings, default_id: &str) -> String {
    match settings.controller_id.as_str() {
        "" => default_id.to_string(),
        id => id.to_string(),
    }
}

/// Who this kiosk is to which server: another value needs another client.
fn server_key(settings: &FleetSettings, default_id: &str) -> (String, String, String, String) {
    (
        settings.server_url.clone(),
        settings.tenant.clone(),
        controller_id(settings, default_id),
        settings.target_token.clone(),
    )
}

fn download_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("fleet").join("download")
}

/// The file the artifact of action `id` is downloaded to: kept from an earlier attempt only
/// if it was for the same action and hash (so a resume continues the same bytes).
fn prepare_download(data_dir: &Path, id: &str, sha256: &str) -> Result<PathBuf> {
    let dir = download_dir(data_dir);
    std::fs::create_dir_all(&dir)?;
    let tag = format!("{id} {sha256}");
    let tag_file = dir.join("artifact.for");
    if std::fs::read_to_string(&tag_file).ok().as_deref() != Some(tag.as_str()) {
        let _ = std::fs::remove_file(dir.join("artifact"));
        let _ = std::fs::remove_file(dir.join("artifact.checked"));
        std::fs::write(&tag_file, &tag)?;
    }
    Ok(dir.join("artifact"))
}

fn discard_download(data_dir: &Path) {
    let _ = std::fs::remove_dir_all(download_dir(data_dir));
}
