//! First boot over the real server: a password from `access.admin_password_file` (as the board's
//! first-boot step writes it) is what the display shows, with the admin address, until the first
//! successful `POST /api/auth`; a wrong password does not end that, a restart does not forget
//! that it ended, a password from `access.admin_password` is never first boot, and the clear text
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

use crate::support::{Process, Started, body_of, start_kiosk};

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
        let Started { ready, stop, task } = start_kiosk(config).await;
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

/// The real binary on simulated devices, its password read from `file` (first boot).
/// The last reply's captions linger half a second (not 20 s): the setup screen waits for them,
/// and a visitor's press here starts a turn whose reply would hold it back.
fn in_first_boot(file: &Path) -> Process {
    Process::new().args(["--devices", "sim"]).config(&format!(
        "access.admin_password_file = {:?}\n[kiosk]\ncaption_linger_ms = 500\n",
        file.to_str().unwrap()
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_boot_password_is_shown_until_the_first_login_and_never_again() {
    let dir = tempfile::tempdir().unwrap();
    let file = password_file(dir.path());
    let with_file = |c: &mut Config| c.access.admin_password_file = Some(file.clone());

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
    // `access.admin_password` (which `ADMIN_PASSWORD` and `--admin-password` also set), alone or over
    // the file.
    let dir = tempfile::tempdir().unwrap();
    let file = password_file(dir.path());
    let k = Kiosk::start(dir.path(), |c| {
        c.access.admin_password = Some("configured-password".into());
        c.access.admin_password_file = Some(file.clone());
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
        c.access.admin_password = Some("configured-password".into());
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
        c.access.admin_password = Some(FIRST_BOOT_PASSWORD.into());
    })
    .await;
    assert_eq!(k.login(FIRST_BOOT_PASSWORD).await, 200);
    k.stop().await;
    let k = Kiosk::start(dir.path(), |c| {
        c.access.admin_password_file = Some(file.clone())
    })
    .await;
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
    let docent = in_first_boot(&file)
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

/// Colours of the setup screens: the password and the certificate's fingerprint (each the only
/// text in its colour).
const PASSWORD_TEXT: u32 = 0xFFFFFF;
const FINGERPRINT_TEXT: u32 = 0x9AD1FF;

/// The simulated screen, through the internal snapshot route: (width, height, XRGB pixels).
/// Writes the kiosk's screen as `name` into `$DISPLAY_TEST_SNAPSHOTS`, when that is set (to
/// look at what a test saw).
async fn keep_snapshot(http: &reqwest::Client, base: &str, name: &str) {
    if let Some(out) = std::env::var_os("DISPLAY_TEST_SNAPSHOTS") {
        let png = body_of(http.get(format!("{base}/api/v1/internal/device/snapshot"))).await;
        std::fs::write(Path::new(&out).join(name), png).unwrap();
    }
}

async fn snapshot(http: &reqwest::Client, base: &str) -> (u32, u32, Vec<u32>) {
    let r = http
        .get(format!("{base}/api/v1/internal/device/snapshot"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let bytes = r.bytes().await.unwrap();
    let mut reader = png::Decoder::new(std::io::Cursor::new(bytes.to_vec()))
        .read_info()
        .unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!(info.color_type, png::ColorType::Rgb);
    let px = buf[..info.buffer_size()]
        .chunks(3)
        .map(|c| (c[0] as u32) << 16 | (c[1] as u32) << 8 | c[2] as u32)
        .collect();
    (info.width, info.height, px)
}

async fn press(http: &reqwest::Client, base: &str, pressed: bool) {
    let r = http
        .post(format!("{base}/api/v1/internal/device/ptt"))
        .json(&json!({ "pressed": pressed }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

/// The SHA-256 fingerprint of the certificate the listener serves over TLS, in the short form
/// the screen shows (first and last six bytes).
async fn served_fingerprint(port: u16) -> String {
    use sha2::{Digest, Sha256};
    let _ = rustls::crypto::ring::default_provider().install_default();
    let https = reqwest::Client::builder()
        .tls_danger_accept_invalid_certs(true)
        .tls_info(true)
        .build()
        .unwrap();
    let r = https
        .get(format!("https://127.0.0.1:{port}/api/v1/health"))
        .send()
        .await
        .unwrap();
    let der = r
        .extensions()
        .get::<reqwest::tls::TlsInfo>()
        .and_then(|t| t.peer_certificate())
        .expect("the served certificate")
        .to_vec();
    let hex: Vec<String> = Sha256::digest(&der)
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect();
    format!("{} ... {}", hex[..6].join(":"), hex[26..].join(":"))
}

/// Physical presence, through the real binary, its simulated button (the internal ptt route)
/// and its simulated screen (the snapshot route): in first boot the setup screen shows the
/// HTTPS address and the fingerprint of the certificate the listener really serves, but the
/// password only once the button has been held for 5 s; a short press (a visitor's turn) and
/// a hold of 3 s show nothing; the password stays after the release, until the first login.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_password_is_shown_only_after_the_button_is_held_five_seconds() {
    use docent::device::display::text::{bbox, drawn_line};
    let dir = tempfile::tempdir().unwrap();
    let file = password_file(dir.path());
    let docent = in_first_boot(&file).start().await;
    let base = docent.base();
    let http = reqwest::Client::new();
    let fingerprint = served_fingerprint(docent.addr.port()).await;

    // The setup screen: the address and the fingerprint, no password.
    let setup_screen = || async {
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            let shot = snapshot(&http, &base).await;
            if shot.2[0] == SETUP_BG {
                return shot;
            }
            assert!(Instant::now() < end, "no setup screen within 10 s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let (w, h, px) = setup_screen().await;
    keep_snapshot(&http, &base, "first-boot-hidden.png").await;
    drawn_line(&px, (w, h), &fingerprint, FINGERPRINT_TEXT)
        .expect("the served certificate's fingerprint is on the screen, on one line");
    assert!(bbox(&px, w, PASSWORD_TEXT).is_none(), "no password at rest");

    // A visitor's short press, and a hold of 3 s: never the password.
    press(&http, &base, true).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    press(&http, &base, false).await;
    press(&http, &base, true).await;
    let held = Instant::now();
    while held.elapsed() < Duration::from_secs(3) {
        let (_, _, px) = snapshot(&http, &base).await;
        assert!(!px.contains(&PASSWORD_TEXT) || px[0] != SETUP_BG);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    press(&http, &base, false).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (_, _, px) = setup_screen().await;
    assert!(
        bbox(&px, w, PASSWORD_TEXT).is_none(),
        "no password after a 3 s hold"
    );

    // Held for 5 s: the password, whole, within a second of the fifth; not before.
    press(&http, &base, true).await;
    let held = Instant::now();
    let shown = loop {
        let (_, _, px) = snapshot(&http, &base).await;
        if px[0] == SETUP_BG && px.contains(&PASSWORD_TEXT) {
            break held.elapsed();
        }
        assert!(
            held.elapsed() < Duration::from_secs(8),
            "no password within 8 s of holding"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(shown >= Duration::from_secs(5), "shown after {shown:?}");
    press(&http, &base, false).await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let (_, _, px) = snapshot(&http, &base).await;
    let size = drawn_line(&px, (w, h), FIRST_BOOT_PASSWORD, PASSWORD_TEXT)
        .expect("the password, whole, on one line, after the release too");
    assert!(size >= 32, "the password set at {size} pixels");
    drawn_line(&px, (w, h), &fingerprint, FINGERPRINT_TEXT).expect("the fingerprint still");
    keep_snapshot(&http, &base, "first-boot-shown.png").await;

    // The first login ends first boot: the password goes from the screen.
    let r = http
        .post(format!("{base}/api/auth"))
        .json(&json!({ "password": FIRST_BOOT_PASSWORD }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let end = Instant::now() + Duration::from_secs(5);
    loop {
        let (_, _, px) = snapshot(&http, &base).await;
        if !px.contains(&PASSWORD_TEXT) && px[0] != SETUP_BG {
            break;
        }
        assert!(Instant::now() < end, "the password is still shown");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
