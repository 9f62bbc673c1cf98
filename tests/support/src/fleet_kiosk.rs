//! The fleet kiosk of `tests/it/fleet.rs` and of `benches/fleet.rs`: a docent in this process
//! that starts again when it asks for a restart, with a test `Firmware` (the update service) that
//! records its calls and writes the files of the update contract. Whoever includes this module
//! also includes `support/fake_hawkbit.rs` as its sibling `fake_hawkbit`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use docent::fleet::{Firmware, Outcome, Progress, Running, Verdict};
use serde_json::{Value, json};
use sha2::Digest as _;
use tokio::sync::watch;

use crate::clock::SimClock;
use crate::fake_hawkbit::{CONTROLLER, FakeHawkbit, TENANT};

/// The update service of these tests.
pub struct TestFirmware {
    data_dir: PathBuf,
    version: String,
    slot: String,
    calls: Mutex<Vec<String>>,
}

impl TestFirmware {
    pub fn new(data_dir: &Path, version: &str, slot: &str) -> Arc<TestFirmware> {
        Arc::new(TestFirmware {
            data_dir: data_dir.into(),
            version: version.into(),
            slot: slot.into(),
            calls: Mutex::new(Vec::new()),
        })
    }

    pub fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
}

impl Firmware for TestFirmware {
    fn running(&self) -> Running {
        Running {
            version: Some(self.version.clone()),
            slot: Some(self.slot.clone()),
            compatible: Some("docent-test".into()),
        }
    }

    fn check(&self, bundle: &Path) -> docent::engine::Result<Verdict> {
        let bytes = std::fs::read(bundle).unwrap();
        self.calls
            .lock()
            .unwrap()
            .push(format!("check {}", hex(&sha2::Sha256::digest(&bytes))));
        let version = bytes
            .strip_prefix(b"BUNDLE ")
            .and_then(|rest| rest.split(|b| *b == b'\n').next())
            .map(|v| String::from_utf8_lossy(v).into_owned());
        Ok(Verdict {
            compatible: "docent-test".into(),
            accepted: version.is_some(),
            reason: version.is_none().then(|| "signature not trusted".into()),
            version: version.unwrap_or_default(),
            current_version: Some(self.version.clone()),
            older: false,
        })
    }

    fn install(&self, _: &Path) -> docent::engine::Result<()> {
        self.calls.lock().unwrap().push("install".into());
        std::thread::sleep(Duration::from_millis(1500));
        let update = self.data_dir.join("update");
        std::fs::create_dir_all(&update).unwrap();
        let pending =
            json!({"slot": "B", "from": self.version, "to": "0.2.0", "installed_at": now()});
        std::fs::write(update.join("pending.json"), pending.to_string()).unwrap();
        // The install is stamped at its end, as RAUC's completion is; docent's update service
        // notices it later (it looks every 300 ms): here always in a later second.
        std::thread::sleep(Duration::from_millis(1100));
        Ok(())
    }

    fn progress(&self) -> Progress {
        Progress {
            percent: 60,
            message: "Copying image to rootfs.1".into(),
        }
    }

    fn reboot(&self) -> docent::engine::Result<()> {
        self.calls.lock().unwrap().push("reboot".into());
        Ok(())
    }

    fn outcome(&self) -> Option<Outcome> {
        let text = std::fs::read(self.data_dir.join("update/outcome.json")).ok()?;
        serde_json::from_slice(&text).ok()
    }
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A docent in this process that starts again when it asks for a restart, until stopped.
pub struct Kiosk {
    addr: watch::Receiver<Option<SocketAddr>>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    pub http: reqwest::Client,
}

impl Kiosk {
    pub async fn start(dir: &Path, firmware: Arc<TestFirmware>) -> Kiosk {
        Kiosk::start_with(dir, firmware, None).await
    }

    /// Started with the kiosk's local time read from `clock` (`docent::Run::clock`), in every
    /// run after a restart as well.
    pub async fn start_at(dir: &Path, firmware: Arc<TestFirmware>, clock: Arc<SimClock>) -> Kiosk {
        Kiosk::start_with(dir, firmware, Some(clock)).await
    }

    async fn start_with(
        dir: &Path,
        firmware: Arc<TestFirmware>,
        clock: Option<Arc<SimClock>>,
    ) -> Kiosk {
        // The ring of recent lines that `assert_secret_kept` reads.
        docent::logs::init();
        let (addr_tx, mut addr) = watch::channel(None);
        let (stop, stop_rx) = watch::channel(false);
        let dir = dir.to_path_buf();
        let task = tokio::spawn(async move {
            loop {
                let config = docent::config::Config {
                    data_dir: dir.clone(),
                    listen: "127.0.0.1:0".parse().unwrap(),
                    devices: docent::config::DeviceMode::None,
                    fleet: docent::config::FleetConfig {
                        min_poll_secs: 1,
                        request_timeout_secs: 3,
                        ..Default::default()
                    },
                    ..Default::default()
                };
                let addr_tx = addr_tx.clone();
                let mut stop_rx = stop_rx.clone();
                let mut run = docent::Run::new(config).firmware(firmware.clone());
                if let Some(clock) = &clock {
                    run = run.clock(clock.clone());
                }
                let stopped = docent::run(
                    run.on_ready(move |ready| {
                        let _ = addr_tx.send(Some(ready.addr));
                    })
                    .shutdown(async move {
                        let _ = stop_rx.wait_for(|s| *s).await;
                    }),
                )
                .await
                .expect("docent runs");
                if stopped == docent::Stopped::Shutdown {
                    return;
                }
            }
        });
        addr.wait_for(Option::is_some).await.unwrap();
        Kiosk {
            addr,
            stop,
            task,
            http: reqwest::Client::new(),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr.borrow().unwrap())
    }

    pub async fn get(&self, path: &str) -> Value {
        let res = self.http.get(self.url(path)).send().await.unwrap();
        assert_eq!(res.status(), 200, "{path}");
        res.json().await.unwrap()
    }

    pub async fn put_settings(&self, patch: Value) {
        let res = self
            .http
            .put(self.url("/api/v1/settings"))
            .json(&patch)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    }

    pub async fn join_fleet(&self, fake: &FakeHawkbit, extra: Value) {
        let mut fleet = json!({
            "enabled": true,
            "server_url": fake.url(),
            // The fake server speaks plain HTTP.
            "allow_insecure_http": true,
            "tenant": TENANT,
            "controller_id": CONTROLLER,
            "target_token": fake.token,
        });
        if let (Some(f), Value::Object(extra)) = (fleet.as_object_mut(), extra) {
            f.extend(extra);
        }
        self.put_settings(json!({ "fleet": fleet })).await;
    }

    pub async fn stop(self) {
        let _ = self.stop.send(true);
        self.task.await.unwrap();
    }
}

pub async fn wait_until(what: &str, secs: u64, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A firmware bundle as the test update service reads it.
pub fn bundle(version: &str, size: usize) -> Vec<u8> {
    let mut b = format!("BUNDLE {version}\n").into_bytes();
    b.extend((0..size).map(|i| (i * 7 % 251) as u8));
    b
}

pub fn token(name: &str) -> String {
    format!("tt-{name}-{}", uuid::Uuid::new_v4().simple())
}
