//! First boot over the real server: a password from `admin_password_file` (as the board's
//! first-boot step writes it) is what the display shows, with the admin address, until the first
//! successful `POST /api/auth`; a wrong password does not end that, a restart does not forget
//! that it ended, a password from `admin_password` is never first boot, and the clear text
//! reaches no API answer and no log line.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use docent::config::Config;
use docent::config::DeviceMode;
use docent::device::Devices;
use docent::device::display::MemoryScreen;
use docent::engine::Engine;
use serde_json::json;
use tokio::sync::oneshot;

use crate::support::Process;

/// As `board/firstboot.sh` makes them: 16 of `[A-Za-z0-9]`.
const FIRST_BOOT_PASSWORD: &str = "Fb3kQz9TmW2xLr7N";
/// The background of the setup screens.
const SETUP_BG: u32 = 0x102A43;

/// A running kiosk with simulated devices, its engine and its screen at hand.
struct Kiosk {
    base: String,
    http: reqwest::Client,
    engine: Arc<Engine>,
    devices: Arc<Devices>,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Kiosk {
    async fn start(dir: &Path, tweak: impl FnOnce(&mut Config)) -> Kiosk {
        let mut config = Config {
            data_dir: dir.join("data"),
            listen: "127.0.0.1:0".parse().unwrap(),
            devices: DeviceMode::Sim,
            ..Config::default()
        };
        tweak(&mut config);
        let (ready_tx, ready_rx) = oneshot::channel();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            docent::run_with(
                config,
                move |ready| {
                    let _ = ready_tx.send(ready);
                },
                async move {
                    let _ = stopped.await;
                },
            )
            .await
            .expect("server runs");
        });
        let ready = ready_rx.await.expect("server started");
        Kiosk {
            base: format!("http://{}", ready.addr),
            http: reqwest::Client::new(),
            engine: ready.engine,
            devices: ready.devices,
            stop,
            task,
        }
    }

    /// Stops the server and lets go of the data directory.
    async fn stop(self) {
        let Kiosk {
            engine,
            devices,
            stop,
            task,
            ..
        } = self;
        drop((engine, devices));
        let _ = stop.send(());
        task.await.unwrap();
    }

    fn screen(&self) -> Arc<MemoryScreen> {
        self.devices.sim_screen.clone().expect("a simulated screen")
    }

    async fn login(&self, password: &str) -> u16 {
        self.http
            .post(format!("{}/api/auth", self.base))
            .header("Edge-Connecting-IP", "192.0.2.44")
            .json(&json!({ "password": password }))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }

    async fn get_text(&self, path: &str) -> String {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "GET {path}: {}", r.status());
        r.text().await.unwrap()
    }

    /// Waits (at most `within`) for a presented frame whose top-left pixel is (or is not)
    /// the setup background; returns how long that took.
    async fn until_setup(&self, shown: bool, within: Duration) -> Duration {
        let screen = self.screen();
        let start = Instant::now();
        tokio::task::spawn_blocking(move || {
            let mut seen = 0;
            loop {
                let left = within.saturating_sub(start.elapsed());
                let Some(f) = screen.wait_for_frame(seen, left.max(Duration::from_millis(1)))
                else {
                    panic!("the setup screen shown = {shown} never came within {within:?}");
                };
                seen = f.count;
                if (f.pixels[0] == SETUP_BG) == shown {
                    return start.elapsed();
                }
            }
        })
        .await
        .unwrap()
    }
}

fn password_file(dir: &Path) -> std::path::PathBuf {
    let file = dir.join("admin-password");
    std::fs::write(&file, format!("{FIRST_BOOT_PASSWORD}\n")).unwrap();
    file
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_boot_password_is_shown_until_the_first_login_and_never_again() {
    let dir = tempfile::tempdir().unwrap();
    let file = password_file(dir.path());
    let with_file = |c: &mut Config| c.admin_password_file = Some(file.clone());

    let k = Kiosk::start(dir.path(), with_file).await;
    assert!(k.engine.has_admin_password());
    assert_eq!(
        k.engine.first_boot_password().as_deref(),
        Some(FIRST_BOOT_PASSWORD)
    );
    k.until_setup(true, Duration::from_secs(5)).await;
    // Open answers never carry it.
    for path in [
        "/api/v1/health",
        "/api/auth",
        "/api/data",
        "/api/v1/characters",
    ] {
        let body = k.get_text(path).await;
        assert!(
            !body.contains(FIRST_BOOT_PASSWORD),
            "{path} shows the password: {body}"
        );
    }
    let health: serde_json::Value =
        serde_json::from_str(&k.get_text("/api/v1/health").await).expect("health is JSON");
    assert_eq!(health["admin_auth"], "password");

    // A restart before any login: still first boot.
    k.stop().await;
    let k = Kiosk::start(dir.path(), with_file).await;
    assert_eq!(
        k.engine.first_boot_password().as_deref(),
        Some(FIRST_BOOT_PASSWORD)
    );

    // A wrong password (and an empty one) does not end first boot.
    assert_eq!(k.login("Fb3kQz9TmW2xLr7M").await, 401);
    assert_eq!(k.login("").await, 400);
    assert_eq!(
        k.engine.first_boot_password().as_deref(),
        Some(FIRST_BOOT_PASSWORD)
    );
    k.until_setup(true, Duration::from_secs(5)).await;

    // The first login ends it: gone from the engine at once, from the screen within about a
    // second (the default character's card instead).
    assert_eq!(k.login(FIRST_BOOT_PASSWORD).await, 200);
    assert_eq!(k.engine.first_boot_password(), None);
    let took = k.until_setup(false, Duration::from_secs(5)).await;
    assert!(took < Duration::from_millis(2500), "took {took:?}");
    assert_eq!(k.login(FIRST_BOOT_PASSWORD).await, 200, "later logins too");
    assert_eq!(k.engine.first_boot_password(), None);

    // After a restart on the same data directory (the file is still there): over for good.
    k.stop().await;
    let k = Kiosk::start(dir.path(), with_file).await;
    assert!(k.engine.has_admin_password());
    assert_eq!(k.engine.first_boot_password(), None);
    let f = tokio::task::spawn_blocking({
        let screen = k.screen();
        move || screen.wait_for_frame(0, Duration::from_secs(5))
    })
    .await
    .unwrap()
    .expect("a frame");
    assert_ne!(f.pixels[0], SETUP_BG, "no setup screen after the restart");
    assert_eq!(k.login(FIRST_BOOT_PASSWORD).await, 200);
    k.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_password_is_not_first_boot() {
    // `admin_password` (which `ADMIN_PASSWORD` and `--admin-password` also set), alone or over
    // the file.
    let dir = tempfile::tempdir().unwrap();
    let file = password_file(dir.path());
    let k = Kiosk::start(dir.path(), |c| {
        c.admin_password = Some("configured-password".into());
        c.admin_password_file = Some(file.clone());
    })
    .await;
    assert!(k.engine.has_admin_password());
    assert_eq!(k.engine.first_boot_password(), None);
    k.until_setup(false, Duration::from_secs(5)).await;
    assert_eq!(
        k.login(FIRST_BOOT_PASSWORD).await,
        401,
        "the file is ignored"
    );
    k.stop().await;

    let dir = tempfile::tempdir().unwrap();
    let k = Kiosk::start(dir.path(), |c| {
        c.admin_password = Some("configured-password".into());
    })
    .await;
    assert_eq!(k.engine.first_boot_password(), None);
    k.stop().await;

    // No password at all: setup mode (its own screen), not first boot.
    let dir = tempfile::tempdir().unwrap();
    let k = Kiosk::start(dir.path(), |_| {}).await;
    assert!(!k.engine.has_admin_password());
    assert_eq!(k.engine.first_boot_password(), None);
    k.until_setup(true, Duration::from_secs(5)).await;
    k.stop().await;

    // A login recorded under a configured password ends first boot for a later password file
    // too: it is about whether the administrator has ever logged in.
    let dir = tempfile::tempdir().unwrap();
    let file = password_file(dir.path());
    let k = Kiosk::start(dir.path(), |c| {
        c.admin_password = Some(FIRST_BOOT_PASSWORD.into());
    })
    .await;
    assert_eq!(k.login(FIRST_BOOT_PASSWORD).await, 200);
    k.stop().await;
    let k = Kiosk::start(dir.path(), |c| c.admin_password_file = Some(file.clone())).await;
    assert_eq!(k.engine.first_boot_password(), None);
    k.stop().await;
}

/// The real binary at trace level, with the password from the file: neither the password nor a
/// wrong one appears in any log line, while the end of first boot is logged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_boot_password_stays_out_of_the_log() {
    const WRONG: &str = "Fb3kQz9TmW2xLr7X";
    let dir = tempfile::tempdir().unwrap();
    let file = password_file(dir.path());
    let docent = Process::new()
        .args(["--devices", "sim"])
        .config(&format!(
            "admin_password_file = {:?}\n",
            file.to_str().unwrap()
        ))
        .env("DOCENT_LOG", "trace")
        .start()
        .await;
    let http = reqwest::Client::new();
    let login = |password: &str| {
        http.post(format!("{}/api/auth", docent.base()))
            .json(&json!({ "password": password }))
            .send()
    };
    assert_eq!(login(WRONG).await.unwrap().status(), 401);
    assert_eq!(login(FIRST_BOOT_PASSWORD).await.unwrap().status(), 200);
    // The display has drawn the first-boot screen and then the card by now.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let log = docent.kill_for_output().await;
    assert!(
        log.contains("first administrator login"),
        "the end of first boot is logged:\n{log}"
    );
    for (what, secret) in [("password", FIRST_BOOT_PASSWORD), ("wrong password", WRONG)] {
        let middle = &secret[3..secret.len() - 3];
        for line in log.lines() {
            assert!(
                !line.contains(middle),
                "the {what} appears in the log: {line}"
            );
        }
    }
}
