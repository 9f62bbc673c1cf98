//! The display player on an in-memory screen: clips encoded here (openh264's encoder, muxed into
//! MP4) are stored through the engine like uploads, and the screen must show their colours in
//! order, at the clip's frame rate, switch clips on state changes, and fall back from a missing
//! variant to the idle clip, from no clip to the image, and from no image to a name card.

use std::sync::Arc;
use std::time::{Duration, Instant};

use docent::config::{AccessConfig, Config};
use docent::device::KioskState;
use docent::device::display::text::{bbox, drawn_line};
use docent::device::display::{self, MemoryScreen};
use docent::engine::Engine;
use docent::engine::characters::{CharacterInput, image_base};
use docent::engine::live::Status;
use docent_test_support::testclip;
use tokio::sync::watch;

use crate::support::{Process, docent};

const W: u32 = 160;
const H: u32 = 120;

const RED: (u8, u8, u8) = (255, 0, 0);
const GREEN: (u8, u8, u8) = (0, 255, 0);
const BLUE: (u8, u8, u8) = (0, 0, 255);
const YELLOW: (u8, u8, u8) = (255, 255, 0);
const CYAN: (u8, u8, u8) = (0, 255, 255);
const MAGENTA: (u8, u8, u8) = (255, 0, 255);
const PALETTE: [(u8, u8, u8); 6] = [RED, GREEN, BLUE, YELLOW, CYAN, MAGENTA];

type Rgb = (u8, u8, u8);

/// The listen address the players are given: a fixed one is its own admin URL.
const LISTEN: &str = "127.0.0.1:8080";
const ADMIN_URL: &str = "https://127.0.0.1:8080/";
/// A certificate fingerprint for the setup screens, and its short form as they show it.
const FINGERPRINT: &str = "3F:A1:09:7C:D2:44:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:10:20:30:40:0B:9E:61:C8:27:F5";
const SHORT_FINGERPRINT: &str = "3F:A1:09:7C:D2:44 ... 0B:9E:61:C8:27:F5";
/// The colour of the fingerprint on the setup screens (the only text in it).
const FINGERPRINT_TEXT: u32 = 0x9AD1FF;

fn console() -> display::Console {
    display::Console {
        listen: LISTEN.parse().unwrap(),
        fingerprint: FINGERPRINT.into(),
    }
}

fn engine(dir: &std::path::Path, password: bool) -> Arc<Engine> {
    let config = Config {
        data_dir: dir.to_path_buf(),
        access: AccessConfig {
            admin_password: password.then(|| "display-test".into()),
            ..AccessConfig::default()
        },
        ..Config::default()
    };
    Engine::open(config).expect("engine")
}

fn character(engine: &Engine, name: &str) -> String {
    engine
        .create_character(CharacterInput {
            name: name.into(),
            ..Default::default()
        })
        .expect("character")
        .id
}

fn png(w: u32, h: u32, c: (u8, u8, u8)) -> Vec<u8> {
    let mut out = Vec::new();
    let mut enc = png::Encoder::new(&mut out, w, h);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut wr = enc.write_header().unwrap();
    let data: Vec<u8> = (0..w * h).flat_map(|_| [c.0, c.1, c.2]).collect();
    wr.write_image_data(&data).unwrap();
    wr.finish().unwrap();
    out
}

/// Adds an image and returns its clip base name.
fn image(engine: &Engine, id: &str, c: (u8, u8, u8)) -> String {
    let img = engine
        .add_image(
            &docent::engine::CharacterId::parse(id).unwrap(),
            "face.png",
            &png(40, 30, c),
        )
        .expect("image");
    image_base(&img.filename).to_string()
}

fn clip(engine: &Engine, id: &str, base: &str, variant: &str, colours: &[(u8, u8, u8)], ms: u32) {
    let mp4 = testclip::solid_clip(64, 48, ms, colours).expect("encode");
    engine
        .put_clip(id, base, variant, "clip.mp4", &mp4)
        .expect("store clip");
}

/// The palette entry nearest to a pixel, if it is near one at all.
fn classify(p: u32) -> Option<(u8, u8, u8)> {
    let (r, g, b) = (
        (p >> 16) as i32 & 0xFF,
        (p >> 8) as i32 & 0xFF,
        p as i32 & 0xFF,
    );
    PALETTE.iter().copied().find(|&(pr, pg, pb)| {
        (r - pr as i32).abs() <= 40 && (g - pg as i32).abs() <= 40 && (b - pb as i32).abs() <= 40
    })
}

fn centre(frame: &display::SeenFrame) -> u32 {
    frame.pixels[((H / 2) * W + W / 2) as usize]
}

struct Rig {
    screen: Arc<MemoryScreen>,
    tx: watch::Sender<KioskState>,
    seen: u64,
}

impl Rig {
    fn start(engine: &Arc<Engine>, id: &str, status: Status) -> Rig {
        let screen = Arc::new(MemoryScreen::new(W, H));
        let (tx, rx) = watch::channel(KioskState {
            status,
            character_id: id.into(),
            session_id: String::new(),
            password_shown: false,
            ..KioskState::idle()
        });
        display::play(engine, Box::new(screen.clone()), console(), rx).expect("player");
        Rig {
            screen,
            tx,
            seen: 0,
        }
    }

    fn set(&self, id: &str, status: Status) {
        self.tx.send_replace(KioskState {
            status,
            character_id: id.into(),
            session_id: String::new(),
            password_shown: false,
            ..KioskState::idle()
        });
    }

    fn next(&mut self) -> display::SeenFrame {
        let f = self
            .screen
            .wait_for_frame(self.seen, Duration::from_secs(5))
            .expect("a frame within 5 s");
        self.seen = f.count;
        f
    }

    /// Waits (at most 5 s) until the centre shows one of `colours`; returns that frame.
    fn until(&mut self, colours: &[(u8, u8, u8)]) -> display::SeenFrame {
        let end = Instant::now() + Duration::from_secs(5);
        loop {
            let f = self.next();
            if classify(centre(&f)).is_some_and(|c| colours.contains(&c)) {
                return f;
            }
            assert!(
                Instant::now() < end,
                "never showed {colours:?}; last {:06x}",
                centre(&f)
            );
        }
    }

    /// Writes the screen to `$DISPLAY_TEST_SNAPSHOTS/NAME.png` when that variable is set (to look
    /// at what the tests see).
    fn save(&self, name: &str) {
        if let Some(dir) = std::env::var_os("DISPLAY_TEST_SNAPSHOTS") {
            let path = std::path::Path::new(&dir).join(format!("{name}.png"));
            std::fs::write(path, self.screen.to_png()).unwrap();
        }
    }

    /// Frames for `d`: (when, centre colour).
    fn record(&mut self, d: Duration) -> Vec<(Instant, Option<Rgb>)> {
        let end = Instant::now() + d;
        let mut out = Vec::new();
        while Instant::now() < end {
            let f = self.next();
            out.push((f.at, classify(centre(&f))));
        }
        out
    }
}

#[test]
fn clips_play_in_order_at_their_frame_rate_and_switch_on_state_changes() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path(), true);
    let id = character(&engine, "Ada");
    let base = image(&engine, &id, MAGENTA);
    // 200 ms a colour: at 100 ms these colours would flash more than 3 times a second, which
    // the upload refuses (docs/clips-flash.md).
    clip(&engine, &id, &base, "idle", &[RED, GREEN, BLUE], 200);
    clip(&engine, &id, &base, "speaking", &[YELLOW, CYAN], 200);
    let mut rig = Rig::start(&engine, &id, Status::Idle);

    // Idle: red, green, blue, red, ... each for 200 ms.
    rig.until(&[RED]);
    let frames = rig.record(Duration::from_millis(1600));
    let colours: Vec<_> = frames.iter().map(|f| f.1.expect("a clip colour")).collect();
    let order = [RED, GREEN, BLUE];
    let start = order.iter().position(|c| *c == colours[0]).unwrap();
    for (i, c) in colours.iter().enumerate() {
        assert_eq!(*c, order[(start + i) % 3], "frame {i} of {colours:?}");
    }
    let span = frames.last().unwrap().0 - frames[0].0;
    let per_frame = span.as_secs_f64() / (frames.len() - 1) as f64;
    println!(
        "idle clip: {} frames, {:.1} ms/frame",
        frames.len(),
        per_frame * 1000.0
    );
    assert!(
        (0.180..=0.220).contains(&per_frame),
        "frame period {per_frame:.4} s, want 0.200 s ±10 %"
    );

    // Speaking: the speaking clip, within a frame or so of the change.
    let asked = Instant::now();
    rig.set(&id, Status::Speaking);
    let f = rig.until(&[YELLOW, CYAN]);
    let switch = f.at.duration_since(asked);
    println!(
        "switch to the speaking clip: {:.1} ms",
        switch.as_secs_f64() * 1000.0
    );
    assert!(
        switch < Duration::from_millis(200),
        "switch took {switch:?}"
    );
    let colours: Vec<_> = rig
        .record(Duration::from_millis(500))
        .iter()
        .map(|f| f.1)
        .collect();
    assert!(
        colours.iter().all(|c| matches!(c, Some(YELLOW | CYAN))),
        "{colours:?}"
    );
    rig.save("speaking");

    // Listening has no clip of its own: the idle clip. Processing shows idle too.
    for status in [Status::Listening, Status::Processing, Status::Idle] {
        rig.set(&id, status);
        rig.until(&[RED, GREEN, BLUE]);
        let colours: Vec<_> = rig
            .record(Duration::from_millis(300))
            .iter()
            .map(|f| f.1)
            .collect();
        assert!(
            colours
                .iter()
                .all(|c| matches!(c, Some(RED | GREEN | BLUE))),
            "{status:?}: {colours:?}"
        );
    }
}

#[test]
fn fallbacks_variantless_clip_then_image_then_name_card() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path(), true);

    // Only a variant-less clip: shown for every status.
    let plain = character(&engine, "Plain");
    let base = image(&engine, &plain, MAGENTA);
    clip(&engine, &plain, &base, "", &[CYAN], 40);
    let mut rig = Rig::start(&engine, &plain, Status::Speaking);
    rig.until(&[CYAN]);

    // No clip: the active image.
    let pictured = character(&engine, "Pictured");
    image(&engine, &pictured, GREEN);
    rig.set(&pictured, Status::Idle);
    let f = rig.until(&[GREEN]);
    assert_eq!(
        classify(f.pixels[(10 * W + 10) as usize]),
        Some(GREEN),
        "image fills the screen"
    );
    rig.save("image");

    // No image: a card with the name on a plain background.
    let named = character(&engine, "Grace Hopper");
    rig.set(&named, Status::Idle);
    let end = Instant::now() + Duration::from_secs(5);
    let card = loop {
        let f = rig.next();
        if classify(centre(&f)) != Some(GREEN) {
            break f;
        }
        assert!(Instant::now() < end, "the card never came");
    };
    rig.save("card");
    let background = card.pixels[0];
    let text = card.pixels.iter().filter(|&&p| p != background).count();
    assert!(text > 200, "only {text} pixels differ from the background");
    let mut distinct: Vec<u32> = card.pixels.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert!(distinct.len() >= 2);

    // A clip that cannot be decoded is skipped for the image.
    let broken = character(&engine, "Broken");
    let base = image(&engine, &broken, BLUE);
    let mut mp4 = testclip::solid_clip(64, 48, 40, &[RED]).unwrap();
    let mdat = mp4.windows(4).position(|w| w == b"mdat").unwrap();
    let end = mp4.windows(4).position(|w| w == b"moov").unwrap() - 4;
    mp4[mdat + 4..end].fill(0);
    engine
        .put_clip(&broken, &base, "idle", "bad.mp4", &mp4)
        .unwrap();
    rig.set(&broken, Status::Idle);
    rig.until(&[BLUE]);

    // The PNG snapshot is a readable picture of the screen.
    let png_bytes = rig.screen.to_png();
    let dec = png::Decoder::new(std::io::Cursor::new(png_bytes));
    let info = dec.read_info().unwrap().info().clone();
    assert_eq!((info.width, info.height), (W, H));
}

#[test]
fn setup_mode_shows_the_admin_address_while_idle() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path(), false);
    let id = character(&engine, "Ada");
    image(&engine, &id, GREEN);
    let mut rig = Rig::start(&engine, &id, Status::Idle);
    let f = rig.next();
    assert_ne!(
        classify(centre(&f)),
        Some(GREEN),
        "setup screen, not the character"
    );
    let white = f.pixels.iter().filter(|&&p| p == 0xFFFFFF).count();
    assert!(white > 50, "the address is drawn ({white} white pixels)");
    // A visitor talking sees the character.
    rig.set(&id, Status::Listening);
    rig.until(&[GREEN]);
}

#[test]
fn the_setup_screen_shows_the_admin_url_of_the_listen_address() {
    const SW: u32 = 800;
    const SH: u32 = 480;
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path(), false);
    let screen = Arc::new(MemoryScreen::new(SW, SH));
    let (_tx, rx) = watch::channel(KioskState {
        status: Status::Idle,
        character_id: String::new(),
        session_id: String::new(),
        password_shown: false,
        ..KioskState::idle()
    });
    display::play(&engine, Box::new(screen.clone()), console(), rx).expect("player");
    let mut seen = 0;
    let f = frame_where(&screen, &mut seen, "a frame", |_| true);
    assert_eq!(f.pixels[0], SETUP_BG, "the setup screen");
    // The address is the only white text: exactly the URL, on one line.
    drawn_line(&f.pixels, (SW, SH), ADMIN_URL, 0xFFFFFF)
        .expect("the admin URL is drawn, whole, on one line");
    // The certificate's fingerprint, in short form, on one line of its own colour.
    drawn_line(&f.pixels, (SW, SH), SHORT_FINGERPRINT, FINGERPRINT_TEXT)
        .expect("the fingerprint is drawn, whole, on one line");
}

/// The first-boot password, as `board/firstboot.sh` makes them: 16 of `[A-Za-z0-9]`.
const FIRST_BOOT_PASSWORD: &str = "Qx7RmT2vLp9KwZ3a";
const SETUP_BG: u32 = 0x102A43;
/// The colour of the password on the first-boot screen (the only text in it).
const PASSWORD_TEXT: u32 = 0xFFFFFF;

/// An engine whose password comes from a first-boot password file, as on the board.
fn first_boot_engine(dir: &std::path::Path) -> Arc<Engine> {
    let file = dir.join("admin-password");
    std::fs::write(&file, format!("{FIRST_BOOT_PASSWORD}\n")).unwrap();
    let config = Config {
        data_dir: dir.join("data"),
        access: AccessConfig {
            admin_password_file: Some(file),
            ..AccessConfig::default()
        },
        ..Config::default()
    };
    Engine::open(config).expect("engine")
}

/// Waits (at most 5 s) for a frame after `*seen` that passes `ok`.
fn frame_where(
    screen: &MemoryScreen,
    seen: &mut u64,
    what: &str,
    ok: impl Fn(&display::SeenFrame) -> bool,
) -> display::SeenFrame {
    let within = Duration::from_secs(5);
    let end = Instant::now() + within;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        let f = screen
            .wait_for_frame(*seen, left.max(Duration::from_millis(1)))
            .unwrap_or_else(|| panic!("no frame showing {what} within {within:?}"));
        *seen = f.count;
        if ok(&f) {
            return f;
        }
    }
}

#[test]
fn first_boot_shows_the_password_only_when_the_kiosk_says_so_until_the_first_login() {
    use docent::engine::auth::Login;
    const SW: u32 = 800;
    const SH: u32 = 480;
    let mid = |f: &display::SeenFrame| classify(f.pixels[((SH / 2) * SW + SW / 2) as usize]);
    let setup = |f: &display::SeenFrame| f.pixels[0] == SETUP_BG;

    let dir = tempfile::tempdir().unwrap();
    let engine = first_boot_engine(dir.path());
    assert_eq!(
        engine.first_boot_password().as_deref(),
        Some(FIRST_BOOT_PASSWORD)
    );
    let id = character(&engine, "Ada");
    image(&engine, &id, GREEN);
    let screen = Arc::new(MemoryScreen::new(SW, SH));
    let (tx, rx) = watch::channel(KioskState {
        status: Status::Idle,
        character_id: id.clone(),
        session_id: String::new(),
        password_shown: false,
        ..KioskState::idle()
    });
    let player = display::play(&engine, Box::new(screen.clone()), console(), rx).expect("player");
    let mut seen = 0;

    let state = |status: Status, password_shown: bool| KioskState {
        status,
        character_id: id.clone(),
        session_id: String::new(),
        password_shown,
        ..KioskState::idle()
    };

    // Idle in first boot: the setup screen with the address and the fingerprint, but no
    // password until someone holds the button.
    let f = frame_where(&screen, &mut seen, "a frame", |_| true);
    assert!(setup(&f), "the setup screen, not the character");
    assert_ne!(mid(&f), Some(GREEN));
    assert!(
        bbox(&f.pixels, SW, PASSWORD_TEXT).is_none(),
        "no password before the hold"
    );
    drawn_line(&f.pixels, (SW, SH), SHORT_FINGERPRINT, FINGERPRINT_TEXT)
        .expect("the fingerprint is drawn, whole, on one line");

    // The kiosk says the button was held: the password in large type, exactly as the text
    // module draws it, the fingerprint still there.
    tx.send_replace(state(Status::Idle, true));
    let f = frame_where(&screen, &mut seen, "the password", |f| {
        bbox(&f.pixels, SW, PASSWORD_TEXT).is_some()
    });
    if let Some(dir) = std::env::var_os("DISPLAY_TEST_SNAPSHOTS") {
        std::fs::write(
            std::path::Path::new(&dir).join("first-boot.png"),
            screen.to_png(),
        )
        .unwrap();
    }
    assert!(setup(&f));
    let size = drawn_line(&f.pixels, (SW, SH), FIRST_BOOT_PASSWORD, PASSWORD_TEXT)
        .expect("the password is drawn, whole, on one line");
    assert!(size >= 32, "the password set at {size} pixels");
    assert!(f.pixels.contains(&FINGERPRINT_TEXT));

    // A visitor talking sees the character; idle again, the password again.
    tx.send_replace(state(Status::Listening, true));
    frame_where(&screen, &mut seen, "the image", |f| mid(f) == Some(GREEN));
    tx.send_replace(state(Status::Idle, true));
    frame_where(&screen, &mut seen, "setup with the password", |f| {
        setup(f) && f.pixels.contains(&PASSWORD_TEXT)
    });
    // Its time is over: hidden again, the setup screen stays.
    tx.send_replace(state(Status::Idle, false));
    frame_where(&screen, &mut seen, "setup without the password", |f| {
        setup(f) && !f.pixels.contains(&PASSWORD_TEXT)
    });
    tx.send_replace(state(Status::Idle, true));
    frame_where(&screen, &mut seen, "the password", |f| {
        f.pixels.contains(&PASSWORD_TEXT)
    });

    // A wrong password does not end first boot.
    assert_eq!(
        engine.login("192.0.2.7", "Qx7RmT2vLp9KwZ3b").unwrap(),
        Login::WrongPassword
    );
    assert!(engine.first_boot_password().is_some());
    std::thread::sleep(Duration::from_millis(1500));
    let f = frame_where(&screen, &mut seen, "a frame", |_| true);
    assert!(setup(&f), "still the setup screen after a wrong password");

    // The first login: the idle image within about a second (the plan is made once a second).
    let Login::Success(_) = engine.login("192.0.2.7", FIRST_BOOT_PASSWORD).unwrap() else {
        panic!("login failed");
    };
    let asked = Instant::now();
    assert_eq!(engine.first_boot_password(), None);
    let f = frame_where(&screen, &mut seen, "the image", |f| mid(f) == Some(GREEN));
    let took = f.at.duration_since(asked);
    assert!(took < Duration::from_millis(2500), "took {took:?}");
    assert!(!setup(&f) && bbox(&f.pixels, SW, PASSWORD_TEXT).is_none());

    // After a restart on the same data directory: never the password again.
    drop(tx);
    player.join().unwrap();
    engine.knowledge.stop();
    drop(engine);
    let engine = first_boot_engine(dir.path());
    assert!(engine.has_admin_password());
    assert_eq!(engine.first_boot_password(), None);
    let screen = Arc::new(MemoryScreen::new(SW, SH));
    // Even a state that says the button was held: first boot is over.
    let (_tx, rx) = watch::channel(KioskState {
        status: Status::Idle,
        character_id: id,
        session_id: String::new(),
        password_shown: true,
        ..KioskState::idle()
    });
    display::play(&engine, Box::new(screen.clone()), console(), rx).expect("player");
    let mut seen = 0;
    let f = frame_where(&screen, &mut seen, "a frame", |_| true);
    assert_eq!(
        mid(&f),
        Some(GREEN),
        "the idle image from the first frame on"
    );
}

#[test]
fn player_stops_when_the_state_sender_goes() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path(), true);
    let id = character(&engine, "Ada");
    let screen = Arc::new(MemoryScreen::new(W, H));
    let (tx, rx) = watch::channel(KioskState {
        status: Status::Idle,
        character_id: id,
        session_id: String::new(),
        password_shown: false,
        ..KioskState::idle()
    });
    let thread = display::play(&engine, Box::new(screen.clone()), console(), rx).unwrap();
    screen
        .wait_for_frame(0, Duration::from_secs(5))
        .expect("first frame");
    drop(tx);
    let end = Instant::now() + Duration::from_secs(5);
    while !thread.is_finished() {
        assert!(Instant::now() < end, "player still running");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `docent snapshot OUT.png` against a running `docent` (devices chosen automatically: no
/// display here, so the simulated one): the file is the setup screen, as a PNG.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_command_writes_the_simulated_screen() {
    let dir = tempfile::tempdir().unwrap();
    let server = Process::new().start().await;
    let addr = server.addr.to_string();
    let out = dir.path().join("screen.png");
    let mut result = None;
    let mut last = String::new();
    // The player draws its first frame just after the listener is up.
    for _ in 0..50 {
        let run = docent()
            .args(["snapshot", "--listen", &addr])
            .arg(&out)
            .output()
            .await
            .unwrap();
        last = String::from_utf8_lossy(&run.stderr).into_owned();
        if run.status.success() {
            let bytes = std::fs::read(&out).unwrap();
            let mut reader = png::Decoder::new(std::io::Cursor::new(bytes))
                .read_info()
                .unwrap();
            let mut buf = vec![0; reader.output_buffer_size().unwrap()];
            let info = reader.next_frame(&mut buf).unwrap();
            if buf.iter().any(|&b| b != 0) {
                result = Some((info.width, info.height, buf[..3].to_vec()));
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let log = server.kill_for_output().await;
    let (w, h, corner) = result.unwrap_or_else(|| {
        panic!("no snapshot with a picture from {addr}; last error: {last}\nserver log:\n{log}")
    });
    assert_eq!((w, h), (800, 480));
    // The setup screen's background (no administrator password).
    assert_eq!(corner, vec![0x10, 0x2A, 0x43]);
}
