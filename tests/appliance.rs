//! The appliance test: the simulated board (board/sim) boots the image (U-Boot, the A/B boot
//! script, systemd with the board's units, udev rules and tmpfiles, a read-only root), and the
//! test plays the two people who meet a kiosk. The administrator reads the first-boot password
//! from the data partition (it is never printed), logs in over the network, sets a password of
//! their own and sets up a character with a knowledge file and clips; the visitor presses the
//! button (the GPIO simulator line), asks a question into the loopback microphone and hears the
//! answer on the loopback speaker, while the test watches the screen (QEMU's screendump) and
//! the conversation (a WebSocket watcher). The sound card is
//! unplugged while the kiosk speaks and while the button is held, and plugged back; the power
//! is cut during a burst of admin writes; a stalled loop is left to the unit's watchdog and
//! restart policy. A second test proves the boot counting: a slot that cannot boot is left, both
//! counters spent start over, and power cuts during boots do not brick the board.
//!
//! The Raspberry Pi 4 image of `./x image` boots on QEMU's emulated Pi 4 (`appliance/rpi4.rs`):
//! to docent serving with its data partition grown, and, with a root that never comes, reset by
//! its watchdog into the other slot.
//!
//! Ignored by `cargo test`: it needs the board image. `./x appliance` (part of `./x test`)
//! builds it and runs these tests; `./x appliance-long` the slower ones (`long_`), among them a
//! fleet update from the fleet tests' fake hawkBit server.

mod board;
#[path = "appliance/rpi4.rs"]
mod rpi4;

use std::net::SocketAddrV4;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use board::{Board, Disk, HostService, Screen};
use docent::device::display::questions;
use docent_test_support::testclip;
use docent::engine::audio;
// The fleet tests' fake hawkBit server (tests/it/fleet.rs), here on the host for the board.
use docent_test_support::fake_hawkbit::{self, CONTROLLER, FakeHawkbit, TENANT, counting_proxy};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::runtime::Runtime;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const KNOWLEDGE: &str = "The museum closes at 6 pm on weekdays. On weekends it stays open until 8 pm.\n\n\
Tickets cost 12 euros for adults, 8 euros for students and 6 euros for seniors, and children \
under twelve enter free of charge on every day of the week.\n\n\
The lighthouse lens in the main hall was made in Paris in 1872.\n";
/// PocketSphinx (with its grammar of the character's words) hears espeak-ng's "tickets" and
/// "cost" reliably; its "museum" much less so.
const QUESTION: &str = "How much do tickets cost?";
/// The setup screen's background (src/device/display/player.rs).
const SETUP_BACKGROUND: (u8, u8, u8) = (16, 42, 67);
const IDLE_COLOUR: (u8, u8, u8) = (0, 0, 255);
const SPEAKING_COLOUR: (u8, u8, u8) = (0, 255, 0);
/// The avatar image, shown only when no clip can be.
const IMAGE_COLOUR: (u8, u8, u8) = (255, 0, 0);
/// Speaker recording: rate and length (covers the question, processing and the answer).
const TAP_RATE: u32 = 24_000;
const TAP_SECONDS: u32 = 45;

#[test]
#[ignore = "boots the simulated board: run by ./x appliance"]
fn board_serves_a_visitor_survives_unplugs_and_a_power_cut_and_restarts_a_stuck_kiosk() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let disk = Disk::flash(dir.path());
    let (mut b, admin, password) = first_boot(&rt, &disk, dir.path());
    the_image_is_what_it_claims(&mut b);
    assert!(
        rt.block_on(devices_ok(&b, Duration::from_secs(20))),
        "the board's audio, button and display work"
    );
    let cid = set_up_the_kiosk(&b, &rt, &admin, dir.path());
    visit(&mut b, &rt, &admin, dir.path());
    unplug_and_plug_back(&mut b, &rt);

    // --- Power cut during a burst of admin writes ---
    let writer = rt.spawn(admin.clone().write_until_failure());
    std::thread::sleep(Duration::from_secs(4));
    b.power_cut();
    let acknowledged = rt
        .block_on(async { tokio::time::timeout(Duration::from_secs(30), writer).await })
        .expect("the writers give up once the board is off")
        .unwrap();
    let mut b = Board::boot(&disk, dir.path());
    rt.block_on(wait_health(&b, Duration::from_secs(180)));
    // The cookie from before the cut still names a stored admin session.
    let admin = admin.on(&b);
    let found = rt.block_on(admin.count_characters(&acknowledged));
    println!(
        "power cut: {} writes acknowledged, {found} found after the reboot",
        acknowledged.len()
    );
    assert!(
        !acknowledged.is_empty(),
        "writes were acknowledged before the cut"
    );
    assert_eq!(
        found,
        acknowledged.len(),
        "every acknowledged write survives"
    );
    assert!(
        !b.transcript().contains("administrator password written"),
        "the first boot is not repeated"
    );
    rt.block_on(async {
        let fresh = Admin::login(&b, &password).await;
        fresh.get(&format!("/api/v1/characters/{cid}")).await
    });
    wait_screen(&b, dir.path(), "no setup screen after a reboot", |s| {
        s.fraction(|p| near(p, IDLE_COLOUR)) > 0.5
    });

    // --- A stuck loop: the watchdog gives up, the unit's restart policy brings docent back ---
    for stuck in ["device", "engine"] {
        stall_and_recover(&mut b, &rt, stuck);
    }
}

/// Issue 31, limited hearing: the board's assistive speaker (`assistive_playback_device`,
/// snd-aloop's third cable) plays what the speaker plays, at its own volume. The test sound is
/// recorded from both cables' capture sides at once; with `kiosk.volume` 100 and
/// `kiosk.assistive_volume` 50 (a gain of 0.25) the assistive recording is a quarter of the
/// speaker's.
#[test]
#[ignore = "boots the simulated board: run by ./x appliance"]
fn the_assistive_speaker_plays_along_at_its_own_volume() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let disk = Disk::flash(dir.path());
    let (mut b, admin, _) = first_boot(&rt, &disk, dir.path());
    assert!(
        rt.block_on(devices_ok(&b, Duration::from_secs(20))),
        "the board's audio (both speakers), button and display work"
    );
    rt.block_on(
        admin.expect(
            admin
                .request(reqwest::Method::PUT, "/api/v1/settings")
                .json(&json!({"kiosk": {"volume": 100, "assistive_volume": 50}})),
            200,
        ),
    );
    // The devices follow the settings within a second.
    std::thread::sleep(Duration::from_secs(2));
    for (tap, wav) in [("speaker_tap", "speaker"), ("assistive_tap", "assistive")] {
        b.sh(&format!(
            "sh -c '(docent audio record /run/www/{wav}.wav --device {tap} --rate {TAP_RATE} \
             --seconds 8; echo recorder done) > /run/record-{wav}.log 2>&1 &'"
        ));
    }
    std::thread::sleep(Duration::from_secs(2));
    rt.block_on(
        admin.expect(
            admin
                .request(reqwest::Method::POST, "/api/v1/kiosk/test-sound")
                .json(&json!({"volume": 100})),
            200,
        ),
    );
    let mut levels = Vec::new();
    for wav in ["speaker", "assistive"] {
        b.sh_within(
            &format!("until grep -q 'recorder done' /run/record-{wav}.log; do sleep 0.5; done"),
            Duration::from_secs(60),
        );
        let bytes = rt.block_on(fetch(&format!("http://{}/{wav}.wav", b.www)));
        let tap = audio::parse_wav(&bytes).expect("the recording is a WAV file");
        // The chime: the samples above the loopback's noise, from the first to the last.
        let loud = |s: &&i16| s.unsigned_abs() > 300;
        let first = tap.samples.iter().position(|s| loud(&s));
        let last = tap.samples.iter().rposition(|s| loud(&s));
        let (Some(first), Some(last)) = (first, last) else {
            panic!("the {wav} played nothing: {}", b.sh(DOCENT_LOG));
        };
        let level = audio::rms(&tap.samples[first..=last]);
        let secs = (last - first) as f64 / f64::from(TAP_RATE);
        println!("{wav}: the chime for {secs:.2} s, rms {level:.0}");
        assert!(
            (0.4..1.0).contains(&secs),
            "{wav}: the 0.6 s chime lasts {secs:.2} s"
        );
        levels.push(level);
    }
    let ratio = levels[1] / levels[0];
    println!("assistive/speaker RMS ratio on the board: {ratio:.3} (0.25 asked)");
    assert!((ratio - 0.25).abs() < 0.03, "{ratio}");
}

/// The question staff put on the touch screen (an FAQ entry of the character's knowledge), and
/// its answer: long (about 25 s spoken), so a touch cuts it well before its end.
const ON_SCREEN: &str = "What is the lighthouse lens?";
const ON_SCREEN_FAQ: &str = "Q: What is the lighthouse lens?\nA: It is a first order Fresnel \
lens, made in Paris in 1872 for the lighthouse at the harbour mouth. Its glass prisms bend the \
light of a single lamp into a beam that sailors could see twenty miles out at sea. It turned \
once every thirty seconds on a bath of mercury, and the keepers wound its clockwork by hand \
every four hours through the night. It came to the museum in 1988.\nQ: Who kept the \
lighthouse?\nA: Three keepers lived in the tower, and the last of them left in 1961.\n";
/// The second question of the FAQ, which the buttons' visitor walks to and chooses.
const SECOND: &str = "Who kept the lighthouse?";
/// The speaker's recording of the touch test: the touch, the answer's start and the cut.
const TOUCH_TAP_SECONDS: u32 = 60;

/// Issue 31, asking without speaking on the board: the simulated board's touch screen (QEMU's
/// virtio tablet, the kernel's evdev node under its udev name, touched through QMP) reaches
/// docent as a real device. Staff have put an FAQ question on the screen; a touch opens the
/// question screen, a touch on its row asks it, the answer is heard on the loopback speaker
/// and stored as asked by touch; a touch while it answers cuts the answer (the speaker falls
/// silent) and opens the question screen again. Prints the touch-to-first-reply-audio time.
#[test]
#[ignore = "boots the simulated board: run by ./x appliance"]
fn a_visitor_asks_by_touch_and_a_touch_cuts_the_answer() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let disk = Disk::flash(dir.path());
    let (mut b, admin, _) = first_boot(&rt, &disk, dir.path());
    raucs_state_stays_put(&mut b);
    let cid = set_up_the_kiosk(&b, &rt, &admin, dir.path());
    rt.block_on(admin.questions_on_the_screen(&cid, &[ON_SCREEN]));
    let node = b.sh("readlink -f /dev/input/touchscreen");
    let event = node.strip_prefix("/dev/input/").unwrap_or_default();
    assert!(
        event.starts_with("event"),
        "the touch screen's udev name: {node}"
    );
    assert_eq!(
        b.sh(&format!("cat /sys/class/input/{event}/device/name")),
        "QEMU Virtio Tablet",
        "/dev/input/touchscreen is the virtio tablet"
    );
    let health = rt.block_on(async {
        let url = format!("http://{}/api/v1/health", b.docent);
        let reply = health_client().get(url).send().await.unwrap();
        reply.json::<Value>().await.unwrap()
    });
    assert_eq!(
        health["device"]["choice"], "ok",
        "docent reads the board's touch screen: {health}"
    );
    wait_device(&mut b, "the idle screen offers to choose", |d| {
        d["can_choose"] == true
    });

    record_speaker(&mut b, TOUCH_TAP_SECONDS);
    b.touch(0.5, 0.5);
    wait_device(&mut b, "a touch opens the question screen", |d| {
        d["questions"]["rows"] == json!([ON_SCREEN])
    });
    let (ahead, within) = board_clock(&mut b);
    let touched = b.touch(0.5, questions::row_centre(0));
    let touched_at = host_clock(touched) + ahead;
    let speaking = |d: &Value| d["status"] == "speaking";
    let d = wait_device(&mut b, "the question asked by touch is answered", speaking);
    assert_eq!(d["captions"]["heard"], ON_SCREEN, "{d}");
    // It speaks a while; then a touch cuts it.
    std::thread::sleep(Duration::from_secs(3));
    assert!(speaking(&device_state(&mut b)), "still answering");
    let cut = b.touch(0.5, 0.5);
    let cut_at = host_clock(cut) + ahead;
    wait_device(
        &mut b,
        "the touch cuts the answer and opens the question screen",
        |d| d["status"] != "speaking" && !d["questions"].is_null(),
    );

    let (first_sound, last_sound) = speaker_sound(&mut b, &rt, TOUCH_TAP_SECONDS);
    let touch_to_sound = first_sound - touched_at;
    println!(
        "touch on a question -> first reply sample on the loopback speaker (aarch64, offline \
         engine, TCG): {:.0} ms (clocks within {:.0} ms); the answer played {:.1} s and fell \
         silent {:.0} ms after the cutting touch",
        touch_to_sound * 1000.0,
        within * 1000.0,
        last_sound - first_sound,
        (last_sound - cut_at) * 1000.0
    );
    assert!(
        touch_to_sound > 0.0,
        "the answer starts after the touch ({touch_to_sound:.3} s)"
    );
    assert!(
        cut_at - first_sound > 1.0,
        "the answer was heard before the cut ({:.1} s)",
        cut_at - first_sound
    );
    // About 25 s of speech, cut some 3 s in: silent within 1.5 s of the touch.
    assert!(
        last_sound < cut_at + 1.5,
        "the touch cut the answer: sound until {:.2} s after it",
        last_sound - cut_at
    );
    let history =
        rt.block_on(admin.get(&format!("/api/v1/characters/{cid}/conversations/messages")));
    let asked = history["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .cloned()
        .unwrap_or_else(|| panic!("the question in the history: {history}"));
    assert_eq!(asked["content"], ON_SCREEN, "{asked}");
    assert_eq!(asked["touch"], true, "stored as asked by touch: {asked}");
}

/// The simulated board's choice buttons: gpio-sim lines of the push-to-talk button's bank
/// (board/sim/guest/gpio-sim, `[choice_buttons]` of board/qemu-aarch64/docent.toml).
const NEXT_LINE: u32 = 3;
const CHOOSE_LINE: u32 = 4;
/// The speaker's recording of the buttons' test: the press on "choose" and the short answer.
const BUTTONS_TAP_SECONDS: u32 = 30;

/// Issue 31, asking without speaking on the board with the three buttons: previous, next and
/// choose are gpio-sim lines 2, 3, 4, requested by docent with its pull-up as the push-to-talk
/// line is (untouched, they read released). Staff have put two questions on the screen; "next"
/// opens the question screen on the first, "next" again points at the second, "choose" asks it;
/// the answer is heard on the loopback speaker and stored as chosen on the screen. Prints the
/// time from the press on "choose" to the first reply sample.
#[test]
#[ignore = "boots the simulated board: run by ./x appliance"]
fn a_visitor_walks_the_questions_with_next_and_asks_with_choose() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let disk = Disk::flash(dir.path());
    let (mut b, admin, _) = first_boot(&rt, &disk, dir.path());
    let cid = set_up_the_kiosk(&b, &rt, &admin, dir.path());
    rt.block_on(admin.questions_on_the_screen(&cid, &[ON_SCREEN, SECOND]));
    for line in 2..=4 {
        assert_eq!(
            b.sh(&format!("button get {line}")),
            "1",
            "line {line} released: held high by docent's pull-up (gpio-sim starts it low)"
        );
    }
    let health = rt.block_on(async {
        let url = format!("http://{}/api/v1/health", b.docent);
        let reply = health_client().get(url).send().await.unwrap();
        reply.json::<Value>().await.unwrap()
    });
    assert_eq!(
        health["device"]["choice"], "ok",
        "docent reads the board's touch screen and buttons: {health}"
    );
    wait_device(&mut b, "the idle screen offers to choose", |d| {
        d["can_choose"] == true
    });

    press_button(&mut b, NEXT_LINE);
    wait_device(&mut b, "\"next\" opens the question screen", |d| {
        d["questions"]["rows"] == json!([ON_SCREEN, SECOND]) && d["questions"]["selected"] == 0
    });
    press_button(&mut b, NEXT_LINE);
    wait_device(&mut b, "\"next\" points at the second question", |d| {
        d["questions"]["selected"] == 1
    });
    record_speaker(&mut b, BUTTONS_TAP_SECONDS);
    let chosen_at = press_button(&mut b, CHOOSE_LINE);
    let d = wait_device(&mut b, "\"choose\" asks the second question", |d| {
        d["status"] == "speaking"
    });
    assert_eq!(d["captions"]["heard"], SECOND, "{d}");

    let (first_sound, _) = speaker_sound(&mut b, &rt, BUTTONS_TAP_SECONDS);
    let press_to_sound = first_sound - chosen_at;
    println!(
        "press on \"choose\" -> first reply sample on the loopback speaker (aarch64, offline \
         engine, TCG): {:.0} ms",
        press_to_sound * 1000.0
    );
    assert!(
        press_to_sound > 0.0,
        "the answer starts after the press ({press_to_sound:.3} s)"
    );
    let history =
        rt.block_on(admin.get(&format!("/api/v1/characters/{cid}/conversations/messages")));
    let asked = history["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .cloned()
        .unwrap_or_else(|| panic!("the question in the history: {history}"));
    assert_eq!(asked["content"], SECOND, "{asked}");
    assert_eq!(
        asked["touch"], true,
        "stored as chosen on the screen: {asked}"
    );
}

/// Presses the simulated button on gpio-sim `line` for 150 ms (far past the 20 ms debounce);
/// returns the board's clock (unix seconds) at the press.
fn press_button(b: &mut Board, line: u32) -> f64 {
    let said = b.sh(&format!(
        // busybox's date has no sub-second format; adjtimex shows the clock in microseconds.
        "button press {line} && adjtimex | grep time.tv_ && sleep 0.15 && button release {line}"
    ));
    value_after::<f64>(&said, "time.tv_sec:")
        .zip(value_after::<f64>(&said, "time.tv_usec:"))
        .map(|(s, us)| s + us / 1e6)
        .unwrap_or_else(|| panic!("button {line} pressed: {said}"))
}

/// The kiosk's state as the internal device route on the board shows it.
fn device_state(b: &mut Board) -> Value {
    let d = b.sh("wget -qO- http://127.0.0.1:8080/api/v1/internal/device");
    serde_json::from_str(&d).unwrap_or_else(|_| panic!("the device route: {d}"))
}

/// Polls the device route until `ok` holds (120 s at most: a turn under emulation); returns
/// the state then.
fn wait_device(b: &mut Board, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    loop {
        let d = device_state(b);
        if ok(&d) {
            return d;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "{what}: {d}\ndocent's log:\n{}",
            b.sh(DOCENT_LOG)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The booted board is the image it claims to be: systemd is PID 1 with nothing failed, the
/// root is read-only and the data partition is /data, docent runs under its unit's sandbox
/// (`systemd-analyze security` on the board gives the exposure of the offline check), and
/// U-Boot booted slot A. Prints systemd's boot figures.
fn the_image_is_what_it_claims(b: &mut Board) {
    assert_eq!(b.sh("cat /proc/1/comm"), "systemd", "systemd is PID 1");
    b.sh_within(
        "until systemctl is-active -q docent-boot-ok.service; do sleep 1; done",
        Duration::from_secs(120),
    );
    let state = b.sh("systemctl is-system-running; systemctl --failed --plain --no-legend");
    assert_eq!(state, "running", "every unit started");
    let mounts = b.sh("grep -E ' (/|/data) ' /proc/mounts");
    let mode = |at: &str| {
        mounts
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(at))
            .and_then(|l| l.split_whitespace().nth(3))
            .and_then(|o| o.split(',').next())
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(mode("/"), "ro", "the root is read-only: {mounts}");
    assert_eq!(mode("/data"), "rw", "/data is the data partition: {mounts}");
    assert_eq!(
        b.sh("readlink -f /dev/disk/by-partlabel/data"),
        b.sh("grep ' /data ' /proc/mounts | cut -d' ' -f1"),
        "/data is the partition named data"
    );
    raucs_state_stays_put(b);
    assert!(b.sh("cat /proc/cmdline").contains("docent.slot=A"));
    assert_eq!(
        b.sh("fw_printenv -n BOOT_A_LEFT"),
        "3",
        "slot A is marked good"
    );
    let on_board = b.sh_within(
        "systemd-analyze security docent.service",
        Duration::from_secs(120),
    );
    let exposure = |text: &str| -> f64 {
        value_after(text, "Overall exposure level for docent.service:")
            .unwrap_or_else(|| panic!("an exposure level: {text}"))
    };
    let offline = Command::new("systemd-analyze")
        .args(["security", "--offline=true", "--no-pager"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("board/systemd/docent.service"))
        .output()
        .expect("systemd-analyze runs (./x installs systemd)");
    let offline = String::from_utf8_lossy(&offline.stdout);
    println!(
        "systemd-analyze security docent.service on the board: {} (offline check: {})",
        exposure(&on_board),
        exposure(&offline)
    );
    assert_eq!(
        exposure(&on_board),
        exposure(&offline),
        "the unit's sandbox is in force as the offline check scores it"
    );
    println!(
        "systemd on the board (aarch64, TCG): {}\n{}",
        b.sh("systemd-analyze time"),
        b.sh("systemd-analyze blame > /tmp/blame; head -n 12 /tmp/blame")
    );
}

/// Issue 34: RAUC's state (`/data/rauc`, root's) sits in `/data`, which docent owns. It is a
/// mount point (board/systemd/data-rauc.mount), so docent cannot rename it aside, neither on
/// the board nor in its own mount namespace (the unit's `PrivateMounts=`). Without the mount the
/// same rename succeeds: the test takes it away for a moment (as root) to show it is what holds.
fn raucs_state_stays_put(b: &mut Board) {
    // util-linux's setpriv and nsenter by their paths: a bare name is busybox's applet.
    let as_docent = "/usr/bin/setpriv --reuid=docent --regid=docent --init-groups --";
    let rename = format!("{as_docent} mv /data/rauc /data/rauc-aside 2>&1; echo \"exit $?\"");
    assert_eq!(
        b.sh("findmnt -n -o TARGET /data/rauc"),
        "/data/rauc",
        "RAUC's state is a mount point: {}",
        b.sh("systemctl status --no-pager data-rauc.mount 2>&1 | tail -n 5")
    );
    let pid = serve_pid(b);
    for (who, prefix) in [
        ("the board", String::new()),
        (
            "docent's namespace",
            format!("/usr/bin/nsenter -t {pid} -m "),
        ),
    ] {
        let moved = b.sh(&format!("{prefix}{rename}"));
        assert!(
            moved.ends_with("exit 1") && moved.contains("resource busy"),
            "docent cannot rename RAUC's state aside in {who}: {moved}"
        );
    }
    assert_eq!(
        b.sh("stat -c '%U %a' /data/rauc; ls -d /data/rauc-aside 2>/dev/null"),
        "root 700"
    );
    // The mount is what holds: without it docent's rename goes through (undone at once).
    b.sh("umount /data/rauc");
    let moved = b.sh(&rename);
    b.sh("mv /data/rauc-aside /data/rauc; systemctl start data-rauc.mount");
    assert_eq!(
        moved, "exit 0",
        "without the mount, docent renames RAUC's state aside"
    );
    assert_eq!(
        b.sh("findmnt -n -o TARGET /data/rauc"),
        "/data/rauc",
        "mounted again"
    );
    println!("RAUC's state: a mount point docent cannot rename (EBUSY); without it, it can");
}

/// Boots a board for the first time: the password on the setup screen, until the
/// administrator's first login and password change. Returns the board, the admin session and
/// the administrator's own password.
fn first_boot(rt: &Runtime, disk: &Disk, dir: &Path) -> (Board, Admin, String) {
    // --- First boot: the password on the screen, until the first login ---
    let mut b = Board::boot(disk, dir);
    let ready = rt.block_on(wait_health(&b, Duration::from_secs(180)));
    let boot_to_ready = ready - b.powered_on;
    println!(
        "power on to docent serving (aarch64, U-Boot + systemd, TCG): {:.1} s",
        boot_to_ready.as_secs_f64()
    );
    let password = first_boot_password(&mut b);
    let setup = |s: &Screen| s.fraction(|p| p == SETUP_BACKGROUND);
    // Health answers as soon as docent listens; the display's first frame follows shortly.
    // The password is the only pure white on it: absent until the button is held for 5 s.
    let password_drawn = |s: &Screen| s.fraction(|p| p == (255, 255, 255)) > 0.0;
    wait_screen(&b, dir, "the first-boot setup screen shows", |s| {
        setup(s) > 0.5 && !password_drawn(s)
    });
    // Nobody has touched the button. gpio-sim's line starts pulled down, which the active-low
    // button reads as pressed: only docent's request for the pull-up (the profile's bias) holds
    // it released. Were it not, the kiosk would see a press from the start and, 5 s on, show
    // the password to whoever stands in front.
    let health = rt.block_on(async {
        let url = format!("http://{}/api/v1/health", b.docent);
        let reply = health_client().get(url).send().await.unwrap();
        reply.json::<Value>().await.unwrap()
    });
    assert_eq!(
        health["device"]["ptt"], "ok",
        "the button's line is requested: {health}"
    );
    assert_eq!(
        b.sh("button get"),
        "1",
        "the untouched button's line reads high: docent asked for the pull-up"
    );
    // Longer than the 5 s hold, counted from when docent began to serve (its button was
    // already sampled then).
    std::thread::sleep(Duration::from_secs(7).saturating_sub(ready.elapsed()));
    assert_eq!(
        b.sh("journalctl -u docent.service -o cat --no-pager | grep -c 'the button was held 5 s'"),
        "0",
        "the untouched button was never held: {}",
        b.sh(DOCENT_LOG)
    );
    let s = b.screendump(&dir.join("screen.ppm"));
    assert!(
        setup(&s) > 0.5 && !password_drawn(&s),
        "no password on the setup screen while nobody touches the button"
    );
    b.sh("button press; sleep 2; button release");
    std::thread::sleep(Duration::from_secs(2));
    wait_screen(&b, dir, "no password after a 2 s press", |s| {
        setup(s) > 0.5 && !password_drawn(s)
    });
    b.sh("button press; sleep 6; button release");
    wait_screen(&b, dir, "the password after a 5 s hold", |s| {
        setup(s) > 0.5 && password_drawn(s)
    });
    // docent runs as its own user (the unit's User=), in the groups of its devices.
    let status = b.sh(
        "for p in $(pidof docent); do grep -q serve /proc/$p/cmdline && grep -E '^(Uid|Gid|Groups):' /proc/$p/status; done; id docent",
    );
    let uid: u32 = value_after(&status, "Uid:").unwrap_or_else(|| panic!("docent's uid: {status}"));
    assert_ne!(uid, 0, "docent does not run as root:\n{status}");
    let groups: Vec<&str> = status
        .lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .unwrap_or_else(|| panic!("docent's groups: {status}"))
        .split_whitespace()
        .collect();
    for group in ["audio", "video", "input", "gpio"] {
        // `id docent` names each group as `GID(NAME)`.
        let gid = status
            .split([',', '=', ' '])
            .find_map(|g| g.strip_suffix(&format!("({group})")))
            .unwrap_or_else(|| panic!("no group {group}:\n{status}"));
        assert!(groups.contains(&gid), "docent runs in {group}:\n{status}");
    }
    println!("docent on the board: uid {uid}, not root");
    let admin = rt.block_on(Admin::login(&b, &password));
    // The first-boot password opens nothing but its own change: the administrator sets theirs
    // (this session is kept; every other credential made before it would end).
    let first = password;
    let password = "the museum's own password".to_string();
    rt.block_on(
        admin.expect(
            admin
                .request(reqwest::Method::PUT, "/api/auth/password")
                .json(&json!({ "current": first, "new": password })),
            200,
        ),
    );
    wait_screen(
        &b,
        dir,
        "the setup screen goes after the first login",
        |s| setup(s) < 0.1,
    );

    (b, admin, password)
}

/// The administrator's part: a character with clips and knowledge, shown idle. Returns its id.
fn set_up_the_kiosk(b: &Board, rt: &Runtime, admin: &Admin, dir: &Path) -> String {
    let cid = rt.block_on(admin.character_with_clips_and_knowledge());
    wait_screen(b, dir, "the idle clip plays", |s| {
        s.fraction(|p| near(p, IDLE_COLOUR)) > 0.5
    });

    cid
}

/// The visitor's part: a spoken question with the button held, the answer heard on the
/// speaker, seen on the screen and in the conversation. Prints the release-to-sound time.
fn visit(b: &mut Board, rt: &Runtime, admin: &Admin, dir: &Path) {
    let question = spoken_question();
    put_file(b, "/tmp/question.raw", &audio::samples_to_le(&question));
    record_speaker(b, TAP_SECONDS);
    b.sh("button press");
    let session = rt.block_on(admin.kiosk_session());
    let frames = rt.block_on(watch(b, admin, &session));
    let released_at = say_the_question(b);
    let speaks = |f: &Value| f["type"] == "avatar_status" && f["status"] == "speaking";
    if !seen(&frames, Duration::from_secs(120), speaks) {
        eprintln!("docent's log:\n{}", b.sh(DOCENT_LOG));
    }
    wait_frame(&frames, "the kiosk speaks", Duration::from_secs(1), speaks);
    // The speaking clip, while the reply plays (the engine's "speaking" comes as synthesis
    // starts; the kiosk speaks from the first sample played to the last).
    // (The reply is long enough to leave a debug build under emulation time to switch.)
    let mut green = 0.0f64;
    let mut centre = (0, 0, 0);
    let looking = Instant::now();
    while green < 0.5 && looking.elapsed() < Duration::from_secs(15) {
        let s = b.screendump(&dir.join("speaking.ppm"));
        green = green.max(s.fraction_above(0.55, |p| near(p, SPEAKING_COLOUR)));
        centre = s.pixel(s.width / 2, s.height / 2);
    }
    wait_frame(&frames, "the reply ends", Duration::from_secs(120), |f| {
        f["type"] == "transcript" && f["speaker"] == "assistant" && f["is_final"] == true
    });
    if green < 0.5 {
        eprintln!("docent's log:\n{}", b.sh(DOCENT_LOG));
    }
    // Above the captions: the answer stays written below the clip for a while.
    wait_screen(b, dir, "the idle clip plays again", |s| {
        s.fraction_above(0.55, |p| near(p, IDLE_COLOUR)) > 0.5
    });
    assert!(
        green > 0.5,
        "the speaking clip shows while the kiosk speaks ({:.0} % green; centre {centre:?})",
        100.0 * green
    );
    let (heard, answer) = conversation(&frames.lock().unwrap());
    assert!(
        heard.contains("ticket") || heard.contains("cost"),
        "the kiosk heard the question: {heard:?}"
    );
    assert!(
        answer.contains("12 euros"),
        "the answer comes from the knowledge file: {answer:?}"
    );

    // The loopback speaker: audible speech, and how long after the release it began.
    let release_to_sound = reply_heard(b, rt, released_at, TAP_SECONDS);
    println!(
        "button release -> first reply sample on the loopback speaker (aarch64, offline engine, \
         TCG): {:.0} ms; heard {heard:?}, answered {answer:?}",
        release_to_sound * 1000.0
    );
    drop(frames);
    // docent's memory on the board after a turn (the server, not the audio tools).
    let rss = b.sh(
        "for p in $(pidof docent); do grep -q serve /proc/$p/cmdline && grep VmRSS /proc/$p/status; done",
    );
    let rss_kb: u64 = value_after(&rss, "VmRSS:").unwrap_or_else(|| panic!("docent's RSS: {rss}"));
    println!(
        "docent resident memory on the board after the turn: {:.1} MB",
        rss_kb as f64 / 1024.0
    );
}

/// Starts recording the loopback speaker for `seconds` into /run/www/speaker.wav (fetched
/// through the board's httpd). Started by a shell that exits at once, so the recorder is not a
/// job of the console's shell (busybox ash leaves when a background job of its ends while it
/// waits at the prompt); it writes `recorder done` at its end, which `reply_heard` waits for.
fn record_speaker(b: &mut Board, seconds: u32) {
    b.sh(&format!(
        "sh -c '(docent audio record /run/www/speaker.wav --device speaker_tap --rate {TAP_RATE} \
         --seconds {seconds}; echo recorder done) > /run/record.log 2>&1 &'"
    ));
}

/// With the button held: plays /tmp/question.raw into the loopback microphone, then releases
/// the button. Returns the board's clock (unix seconds) at the release.
fn say_the_question(b: &mut Board) -> f64 {
    let said = b.sh_within(
        // busybox's date has no sub-second format; adjtimex shows the clock in microseconds.
        "docent audio play /tmp/question.raw --device mic_feed --rate 16000 && button release \
         && adjtimex | grep time.tv_",
        Duration::from_secs(60),
    );
    value_after::<f64>(&said, "time.tv_sec:")
        .zip(value_after::<f64>(&said, "time.tv_usec:"))
        .map(|(s, us)| s + us / 1e6)
        .unwrap_or_else(|| panic!("the question played and the button was released: {said}"))
}

/// Waits for the recorder of `record_speaker` to end; asserts that it heard an audible reply
/// after the release at `released_at` (board clock). Returns the release-to-sound time (s).
fn reply_heard(b: &mut Board, rt: &Runtime, released_at: f64, seconds: u32) -> f64 {
    let (first_sound, _) = speaker_sound(b, rt, seconds);
    let release_to_sound = first_sound - released_at;
    assert!(
        release_to_sound > 0.0,
        "the reply starts after the release ({release_to_sound:.3} s)"
    );
    release_to_sound
}

/// Waits for the recorder of `record_speaker` to end and asserts it heard audible speech;
/// returns the board's clock (unix seconds) at its first and its last loud sample.
fn speaker_sound(b: &mut Board, rt: &Runtime, seconds: u32) -> (f64, f64) {
    b.sh_within(
        "until grep -q 'recorder done' /run/record.log; do sleep 0.5; done",
        Duration::from_secs(u64::from(seconds) + 30),
    );
    let record_log = b.sh("cat /run/record.log");
    let record_start: f64 = value_after(&record_log, "first frame at unix ")
        .unwrap_or_else(|| panic!("the recorder ran: {record_log}"));
    let wav = rt.block_on(fetch(&format!("http://{}/speaker.wav", b.www)));
    let tap = audio::parse_wav(&wav).expect("the recording is a WAV file");
    let loud = |s: &&i16| s.unsigned_abs() > 1000;
    let first = tap
        .samples
        .iter()
        .position(|s| loud(&s))
        .expect("the speaker played something");
    let last = tap.samples.iter().rposition(|s| loud(&s)).unwrap_or(first);
    let voiced = tap.samples.iter().filter(loud).count();
    let level = audio::rms(&tap.samples[first..]);
    assert!(
        voiced as f64 / f64::from(TAP_RATE) > 0.3 && level > 300.0,
        "the reply is audible: {voiced} loud samples, rms {level:.0}"
    );
    let at = |i: usize| record_start + i as f64 / f64::from(TAP_RATE);
    (at(first), at(last))
}

/// docent's log on the board (the journal), for failure messages.
const DOCENT_LOG: &str = "journalctl -u docent.service -n 60 --no-pager -o cat";

/// Where snd-aloop's platform device is bound (`bind` / `unbind`).
const ALOOP_DRIVER: &str = "/sys/bus/platform/drivers/snd_aloop";

/// The sound card goes away and comes back, twice: while the kiosk speaks, and while a visitor
/// holds the button (the microphone open, the speaker idle). Unbinding snd-aloop's platform
/// device disconnects the card as unplugging a USB card does (open PCMs fail, the kernel's
/// removal waits until every open file of the card is closed); binding it again brings a new card
/// of the same name. docent must report it in health, close the card, go back to idle, and use
/// the card again once it is back, all without a restart; the next visitor is heard.
fn unplug_and_plug_back(b: &mut Board, rt: &Runtime) {
    let pid = serve_pid(b);
    let restarts_before = restarts(b);
    let device = b.sh(&format!("ls {ALOOP_DRIVER} | grep snd_aloop"));
    assert!(
        device.starts_with("snd_aloop.") && !device.contains('\n'),
        "snd-aloop's platform device: {device:?}"
    );

    // --- While the kiosk speaks: the same question, whose answer takes seconds to say ---
    b.sh("button press");
    say_the_question(b);
    b.sh_within(
        "until wget -qO- http://127.0.0.1:8080/api/v1/internal/device | grep -q '\"status\":\"speaking\"'; \
         do sleep 0.2; done",
        Duration::from_secs(120),
    );
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(kiosk_status(b), "speaking", "the kiosk is still speaking");
    let (unplugged, report, health, released) = unplug(b, rt, &device, |a| a != "ok");
    wait_status(
        b,
        "idle",
        Duration::from_secs(10),
        "the kiosk goes idle without its speaker",
    );
    let idle = Instant::now() - unplugged;
    let recover = plug(b, rt, &device);
    println!(
        "card unplugged mid-reply: reported in health after {:.2} s ({health:?}), the \
         card released (unbind returned) after {:.2} s, the kiosk idle after {:.2} s; card back: \
         audio ok after {:.2} s",
        report.as_secs_f64(),
        released.as_secs_f64(),
        idle.as_secs_f64(),
        recover.as_secs_f64()
    );

    // --- While the button is held: the microphone reads, the speaker waits ---
    b.sh("button press");
    wait_status(b, "listening", Duration::from_secs(10), "the press listens");
    std::thread::sleep(Duration::from_secs(1));
    let (_, report, health, released) = unplug(b, rt, &device, |a| a.contains("capture: "));
    b.sh("button release");
    wait_status(
        b,
        "idle",
        Duration::from_secs(60),
        "the kiosk goes idle after the release",
    );
    let recover = plug(b, rt, &device);
    println!(
        "card unplugged with the button held: reported in health after {:.2} s \
         ({health:?}), the card released after {:.2} s; card back: audio ok after {:.2} s \
         (without a press)",
        report.as_secs_f64(),
        released.as_secs_f64(),
        recover.as_secs_f64()
    );

    // --- The next visitor is heard ---
    let seconds = 30;
    record_speaker(b, seconds);
    b.sh("button press");
    let released_at = say_the_question(b);
    let release_to_sound = reply_heard(b, rt, released_at, seconds);
    println!(
        "after the card came back: button release -> first reply sample {:.0} ms",
        release_to_sound * 1000.0
    );
    assert_eq!(serve_pid(b), pid, "docent was not restarted");
    assert_eq!(restarts(b), restarts_before, "docent did not exit");
}

/// Unbinds the card `device` in the background (the write returns only once every open file of
/// the card is closed). Returns when it began, how long until health's audio passed `reported`
/// and what it said, and how long until the removal completed (at most 15 s, else the test
/// fails).
fn unplug(
    b: &mut Board,
    rt: &Runtime,
    device: &str,
    reported: impl Fn(&str) -> bool,
) -> (Instant, Duration, String, Duration) {
    let unplugged = Instant::now();
    b.sh(&format!(
        "sh -c '(echo {device} > {ALOOP_DRIVER}/unbind; echo unbind status $?) > /run/unbind.log \
         2>&1 &'"
    ));
    let (at, health) = rt.block_on(audio_health(b, Duration::from_secs(5), reported));
    loop {
        let log = b.sh("cat /run/unbind.log");
        if log.contains("unbind status") {
            assert!(log.contains("unbind status 0"), "the unbind: {log}");
            return (unplugged, at - unplugged, health, unplugged.elapsed());
        }
        assert!(
            unplugged.elapsed() < Duration::from_secs(15),
            "the card's removal still waits for its open files after 15 s (docent keeps the dead \
             card open); open files of the card:\n{}\ndocent's log:\n{}",
            b.sh("ls -l /proc/[0-9]*/fd 2>/dev/null | grep /dev/snd"),
            b.sh(DOCENT_LOG)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Binds the card `device` again; returns how long until health's audio is `ok` (at most 10 s).
fn plug(b: &mut Board, rt: &Runtime, device: &str) -> Duration {
    let plugged = Instant::now();
    b.sh(&format!("echo {device} > {ALOOP_DRIVER}/bind"));
    let (back, _) = rt.block_on(audio_health(b, Duration::from_secs(10), |a| a == "ok"));
    back - plugged
}

/// The kiosk loop's state (`idle`, `listening`, ...), from the internal route on the board.
fn kiosk_status(b: &mut Board) -> String {
    let d = b.sh("wget -qO- http://127.0.0.1:8080/api/v1/internal/device");
    let v: Value = serde_json::from_str(&d).unwrap_or_else(|_| panic!("the device route: {d}"));
    v["status"].as_str().unwrap_or_default().to_string()
}

fn wait_status(b: &mut Board, status: &str, within: Duration, what: &str) {
    let start = Instant::now();
    while kiosk_status(b) != status {
        assert!(
            start.elapsed() < within,
            "{what}: not {status} within {within:?}; docent's log:\n{}",
            b.sh(DOCENT_LOG)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The pid of `docent serve` on the board (the audio tools are docent too).
fn serve_pid(b: &mut Board) -> u32 {
    let pid = b.sh("for p in $(pidof docent); do grep -q serve /proc/$p/cmdline && echo $p; done");
    pid.trim()
        .parse()
        .unwrap_or_else(|_| panic!("one docent serve: {pid:?}"))
}

/// How many times systemd has started docent again (the unit's Restart=).
fn restarts(b: &mut Board) -> u32 {
    let n = b.sh("systemctl show -p NRestarts --value docent.service");
    n.parse()
        .unwrap_or_else(|_| panic!("docent.service's NRestarts: {n:?}"))
}

/// Stalls one of docent's loops through the test hook; docent must exit non-zero (or be killed
/// by systemd's watchdog) and, restarted by systemd under the unit's policy (Restart=always,
/// RestartSec=1), serve again (devices included) within 10 s.
fn stall_and_recover(b: &mut Board, rt: &Runtime, stuck: &str) {
    let before = restarts(b);
    let journal_mark = b.sh("journalctl -u docent.service -o cat | wc -l");
    let stalled = Instant::now();
    let reply = b.sh(&format!(
        "wget -qO- --header 'Content-Type: application/json' --post-data '{{\"loop\":\"{stuck}\"}}' \
         http://127.0.0.1:8080/api/v1/internal/debug/stall"
    ));
    assert!(
        reply.contains("stalled"),
        "the stall hook answered: {reply}"
    );
    b.sh_within(
        &format!(
            "until [ \"$(systemctl show -p NRestarts --value docent.service)\" -gt {before} ]; do \
             sleep 0.2; done"
        ),
        Duration::from_secs(60),
    );
    let restarted = Instant::now();
    // How the main process ended, as systemd logged it.
    let journal = b.sh(&format!(
        "journalctl -u docent.service -o cat | tail -n +{} | grep 'Main process exited'",
        journal_mark.trim().parse::<u32>().unwrap_or(0) + 1
    ));
    assert!(
        journal.contains("Main process exited") && !journal.contains("status=0/SUCCESS"),
        "docent ends with a failure when the {stuck} loop stalls: {journal:?}"
    );
    let serving = rt.block_on(wait_health(b, Duration::from_secs(60)));
    let back = serving - restarted;
    println!(
        "stuck {stuck} loop: systemd restarted docent {:.1} s after the stall ({}), serving again \
         {:.1} s after the restart",
        (restarted - stalled).as_secs_f64(),
        journal.trim(),
        back.as_secs_f64()
    );
    assert!(
        back < Duration::from_secs(10),
        "serving again within 10 s of the restart ({back:?})"
    );
    let devices_ok = rt.block_on(devices_ok(b, Duration::from_secs(10)));
    assert!(devices_ok, "after the restart the devices work again");
}

/// Boot counting (board/boot/boot.cmd): a slot whose root is zeroed is left after its three
/// attempts and the other slot boots; a boot state whose checksum fails counts as the
/// defaults; with both counters spent, both start over and the board boots; power cuts at
/// three moments of a boot (in U-Boot after it counted the attempt, in the kernel, in
/// userspace before the slot is marked good) cost attempts, never the board; a slot whose
/// kernel panics (a root without init) is left after its three attempts too.
#[test]
#[ignore = "boots the simulated board: run by ./x appliance"]
fn boot_counting_leaves_a_broken_slot_and_never_bricks_the_board() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let disk = Disk::flash(dir.path());
    disk.zero("rootA");
    // A write of the boot state cut short: its checksum fails.
    disk.write("bootstate", 64, &[0xa5; 64]);
    let started = Instant::now();
    let mut b = Board::boot(&disk, dir.path());
    let console = b.transcript();
    assert!(
        console.contains("no valid boot state: the defaults"),
        "{}",
        b.tail()
    );
    assert_eq!(
        console.matches("slot A did not boot").count(),
        3,
        "slot A is tried three times: {console}"
    );
    booted_and_good(&mut b, &rt, "B");
    assert_eq!(b.sh("fw_printenv -n BOOT_A_LEFT"), "0");
    println!(
        "boot counting: rootA zeroed, torn boot state: slot B serves {:.0} s after power on \
         (3 attempts of A first)",
        started.elapsed().as_secs_f64()
    );

    // --- Both counters spent: both start over; A still fails, B boots ---
    b.sh("fw_setenv BOOT_B_LEFT 0");
    let mark = b.mark();
    let rebooted = Instant::now();
    b.reboot();
    let console = b.transcript()[mark..].to_string();
    assert!(
        console.contains("no slot has attempts left: both get 3 again"),
        "{console}"
    );
    assert_eq!(
        console.matches("slot A did not boot").count(),
        3,
        "{console}"
    );
    booted_and_good(&mut b, &rt, "B");
    println!(
        "boot counting: both counters spent -> reset -> slot B serves {:.0} s after the reboot",
        rebooted.elapsed().as_secs_f64()
    );

    // --- Power cuts while B boots: each costs B an attempt; then both start over ---
    b.power_cut();
    for (moment, token, after) in [
        ("in U-Boot, the attempt counted", "docent boot: slot B", 0),
        ("in the kernel", "Starting kernel", 2),
        (
            "in userspace, before the slot is marked good",
            "BOARD-READY",
            0,
        ),
    ] {
        let mut b = Board::power_on(&disk, dir.path());
        b.wait_for(token, 0, Duration::from_secs(300));
        std::thread::sleep(Duration::from_secs(after));
        b.power_cut();
        println!("boot counting: power cut {moment}");
    }
    // --- ... and slot A now has a kernel that panics: its root has no init ---
    let tree = dir.path().join("no-init");
    std::fs::create_dir_all(tree.join("boot")).unwrap();
    for f in ["Image", "initrd.img"] {
        std::fs::copy(board::images().join(f), tree.join("boot").join(f)).unwrap();
    }
    disk.format("rootA", &tree);
    let mut b = Board::boot(&disk, dir.path());
    let console = b.transcript();
    assert!(
        console.contains("no slot has attempts left: both get 3 again"),
        "three cut boots spent B's attempts: {console}"
    );
    assert_eq!(
        console.matches("initramfs: no /sbin/init on rootA").count(),
        3,
        "slot A's kernel boots and panics three times: {console}"
    );
    booted_and_good(&mut b, &rt, "B");
    println!(
        "boot counting: after three power cuts during B's boots and three panics of A, slot B \
         serves {:.0} s after power on",
        b.powered_on.elapsed().as_secs_f64()
    );
}

/// The board booted `slot`, docent serves, and the slot was marked good (3 attempts again).
fn booted_and_good(b: &mut Board, rt: &Runtime, slot: &str) {
    assert!(
        b.sh("cat /proc/cmdline")
            .contains(&format!("docent.slot={slot}")),
        "slot {slot} booted"
    );
    rt.block_on(wait_health(b, Duration::from_secs(180)));
    b.sh_within(
        "until systemctl is-active -q docent-boot-ok.service; do sleep 1; done",
        Duration::from_secs(120),
    );
    assert_eq!(
        b.sh(&format!("fw_printenv -n BOOT_{slot}_LEFT")),
        "3",
        "slot {slot} is marked good"
    );
}

/// Updates with rollback, as a museum does them from the console (docent's routes, RAUC on the
/// board, board/rauc, board/systemd): the board runs 0.1.0 on slot A; RAUC answers only root
/// and docent on D-Bus; bundles signed by another key or made for another board are refused
/// at upload, before a byte reaches the other slot; 0.2.0 is uploaded, installed into slot B,
/// rebooted into, marked good, and answers a visitor with the data made on 0.1.0; 0.3.0, whose
/// docent refuses its configuration, is installed into slot A, never serves, and the update
/// gate's deadline rolls it back: the board is on 0.2.0 again and health says why. Prints the
/// times (upload to serving on the new slot, the failed start to serving on the old one).
#[test]
#[ignore = "boots the simulated board: run by ./x appliance"]
fn updates_install_roll_back_and_refuse_foreign_bundles() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let (v2, v3) = (bundle("0.2.0"), bundle("0.3.0"));
    let foreign = foreign_bundles(dir.path());
    let disk = Disk::flash(dir.path());
    let mut b = Board::boot(&disk, dir.path());
    rt.block_on(wait_health(&b, Duration::from_secs(180)));
    let admin = own_password(&mut b, &rt);
    let cid = rt.block_on(admin.character_with_clips_and_knowledge());
    on_slot(&mut b, "A", "0.1.0");
    rauc_answers_only_root_and_docent(&mut b);

    // --- Bundles the board must refuse: nothing reaches slot B, the boot state stays ---
    let untouched = "md5sum < /dev/disk/by-partlabel/rootB; fw_printenv BOOT_ORDER";
    let before = b.sh_within(untouched, Duration::from_secs(300));
    for (what, bundle, says) in foreign {
        let (verdict, _) = rt.block_on(admin.upload(&bundle));
        let reason = verdict["reason"].as_str().unwrap_or_default().to_string();
        assert!(
            verdict["accepted"] == false && reason.contains(says),
            "{what} is refused ({says}): {verdict}"
        );
        rt.block_on(
            admin.expect(
                admin
                    .request(reqwest::Method::POST, "/api/v1/system/update/install")
                    .json(&json!({ "force": true })),
                409,
            ),
        );
        println!("update: {what} refused at upload: {reason}");
    }
    assert_eq!(
        b.sh_within(untouched, Duration::from_secs(300)),
        before,
        "nothing was written to slot B and the boot state is unchanged"
    );

    // --- The good update: 0.2.0 into slot B ---
    let (verdict, uploaded) = rt.block_on(admin.upload(&v2));
    assert_eq!(verdict["accepted"], true, "{verdict}");
    assert_eq!(
        (&verdict["version"], &verdict["current_version"]),
        (&json!("0.2.0"), &json!("0.1.0"))
    );
    let installed = rt.block_on(admin.install());
    assert_eq!(
        b.sh("fw_printenv -n BOOT_ORDER"),
        "B A",
        "slot B boots next"
    );
    let rebooted = Instant::now();
    admin_reboot(&mut b, &rt, &admin);
    let serving = rt.block_on(wait_health(&b, Duration::from_secs(180)));
    println!(
        "update 0.1.0 -> 0.2.0 ({} MiB bundle): upload and check {:.0} s, install {:.0} s, \
         reboot to serving {:.0} s; upload to serving on slot B {:.0} s",
        std::fs::metadata(&v2).unwrap().len() >> 20,
        uploaded.as_secs_f64(),
        installed.as_secs_f64(),
        (serving - rebooted).as_secs_f64(),
        (uploaded + installed + (serving - rebooted)).as_secs_f64()
    );
    on_slot(&mut b, "B", "0.2.0");
    marked_good(&mut b, "B");
    let firmware = rt.block_on(firmware_health(&admin.clone().on(&b), |f| {
        !f["update"].is_null()
    }));
    assert_eq!(
        (&firmware["version"], &firmware["update"]),
        (&json!("0.2.0"), &json!("updated from 0.1.0 to 0.2.0")),
        "{firmware}"
    );
    let admin = admin.on(&b);
    rt.block_on(admin.get(&format!("/api/v1/characters/{cid}")));
    visit(&mut b, &rt, &admin, dir.path());

    // --- The bad update: 0.3.0 into slot A; its docent never starts; the gate rolls back ---
    let (verdict, _) = rt.block_on(admin.upload(&v3));
    assert_eq!(verdict["accepted"], true, "{verdict}");
    rt.block_on(admin.install());
    assert_eq!(
        b.sh("fw_printenv -n BOOT_ORDER"),
        "A B",
        "slot A boots next"
    );
    let mark = b.mark();
    rt.block_on(admin.expect(
        admin.request(reqwest::Method::POST, "/api/v1/system/reboot"),
        202,
    ));
    let on_a = b.wait_for("docent boot: slot A", mark, Duration::from_secs(120));
    let gate = b.wait_for(
        "update gate: 0.2.0 -> 0.3.0 on slot A",
        on_a,
        Duration::from_secs(300),
    );
    let failed = Instant::now();
    let rolling = b.wait_for(
        "update gate: rolling back 0.3.0",
        gate,
        Duration::from_secs(300),
    );
    let decided = failed.elapsed();
    let back = b.wait_for("docent boot: slot B", rolling, Duration::from_secs(120));
    b.wait_ready(back);
    let serving = rt.block_on(wait_health(&b, Duration::from_secs(180)));
    on_slot(&mut b, "B", "0.2.0");
    assert_eq!(boot_status(&mut b, "A"), "bad", "slot A is marked bad");
    let firmware = rt.block_on(firmware_health(&admin.clone().on(&b), |f| {
        !f["update"].is_null()
    }));
    println!(
        "update 0.2.0 -> 0.3.0 (docent refuses its configuration): the gate rolled back {:.0} s \
         after it started; serving on 0.2.0 again {:.0} s after that; health: {firmware}",
        decided.as_secs_f64(),
        (serving - failed - decided).as_secs_f64()
    );
    let said = firmware["update"].as_str().unwrap_or_default();
    assert!(
        said.starts_with("0.3.0 failed its start check (docent failed to start")
            && said.contains("teleported")
            && said.ends_with("and was rolled back; running 0.2.0"),
        "health says why, in docent's own words: {firmware}"
    );
    assert_eq!(firmware["version"], "0.2.0");
    rt.block_on(admin.on(&b).get(&format!("/api/v1/characters/{cid}")));
}

/// A power cut (QEMU killed) while RAUC writes slot B: the board boots slot A as before, and a
/// new upload and install of the same bundle then succeed and boot.
#[test]
#[ignore = "boots the simulated board: run by ./x appliance-long"]
fn long_a_power_cut_during_an_install_leaves_the_old_slot() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let v2 = bundle("0.2.0");
    let disk = Disk::flash(dir.path());
    let mut b = Board::boot(&disk, dir.path());
    rt.block_on(wait_health(&b, Duration::from_secs(180)));
    let admin = own_password(&mut b, &rt);
    let (verdict, _) = rt.block_on(admin.upload(&v2));
    assert_eq!(verdict["accepted"], true, "{verdict}");
    rt.block_on(admin.expect(
        admin.request(reqwest::Method::POST, "/api/v1/system/update/install"),
        202,
    ));
    let start = Instant::now();
    let progress = loop {
        let s = rt.block_on(admin.get("/api/v1/system/update"));
        // RAUC's last step writes the image into the slot; cut while it does.
        if s["progress"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("Copying image"))
        {
            std::thread::sleep(Duration::from_secs(2));
            break s["progress"].clone();
        }
        assert!(
            start.elapsed() < Duration::from_secs(300) && s["operation"] == "installing",
            "the install runs: {s}"
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    b.power_cut();
    println!("power cut during the install at {progress}");
    let mut b = Board::boot(&disk, dir.path());
    rt.block_on(wait_health(&b, Duration::from_secs(180)));
    on_slot(&mut b, "A", "0.1.0");
    // RAUC takes the slot it writes out of the boot order first: a half-written slot B is
    // never tried.
    assert_eq!(b.sh("fw_printenv -n BOOT_ORDER"), "A", "only slot A boots");
    let admin = admin.on(&b);
    let (verdict, _) = rt.block_on(admin.upload(&v2));
    assert_eq!(verdict["accepted"], true, "{verdict}");
    let installed = rt.block_on(admin.install());
    println!(
        "after the power cut: a new install took {:.0} s",
        installed.as_secs_f64()
    );
    admin_reboot(&mut b, &rt, &admin);
    rt.block_on(wait_health(&b, Duration::from_secs(180)));
    on_slot(&mut b, "B", "0.2.0");
    marked_good(&mut b, "B");
}

/// An update that migrates the data (0.2.0 knows schema 2: `test_schema_version`, a test rig
/// setting), then the board goes back to 0.1.0 on slot A: docent there opens the copy of the
/// data kept before the migration, says so, and serves the data as it was.
#[test]
#[ignore = "boots the simulated board: run by ./x appliance-long"]
fn long_after_a_migration_and_a_fallback_the_old_version_opens_its_copy() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let v2 = bundle("0.2.0-schema2");
    let disk = Disk::flash(dir.path());
    let mut b = Board::boot(&disk, dir.path());
    rt.block_on(wait_health(&b, Duration::from_secs(180)));
    let admin = own_password(&mut b, &rt);
    let create = |admin: &Admin, name: &str| {
        rt.block_on(
            admin.expect(
                admin
                    .request(reqwest::Method::POST, "/api/v1/characters")
                    .json(&json!({ "name": name })),
                201,
            ),
        )
    };
    let names = |admin: &Admin| {
        let all = rt.block_on(admin.get("/api/v1/characters"));
        let mut names: Vec<String> = all
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_string())
            .collect();
        names.sort();
        names
    };
    create(&admin, "Made on 0.1.0");
    let before = names(&admin);

    let (verdict, _) = rt.block_on(admin.upload(&v2));
    assert_eq!(verdict["accepted"], true, "{verdict}");
    rt.block_on(admin.install());
    admin_reboot(&mut b, &rt, &admin);
    rt.block_on(wait_health(&b, Duration::from_secs(180)));
    on_slot(&mut b, "B", "0.2.0-schema2");
    assert_eq!(
        b.sh("ls /data/docent-schema-1.redb"),
        "/data/docent-schema-1.redb",
        "the copy kept before the migration"
    );
    let admin = admin.on(&b);
    create(&admin, "Made on 0.2.0");

    // Back to slot A (as after a rollback): 0.1.0 finds schema 2.
    b.sh("rauc status mark-active other");
    admin_reboot(&mut b, &rt, &admin);
    rt.block_on(wait_health(&b, Duration::from_secs(180)));
    on_slot(&mut b, "A", "0.1.0");
    let firmware = rt.block_on(firmware_health(&admin.clone().on(&b), |f| {
        !f["data"].is_null()
    }));
    let said = firmware["data"].as_str().unwrap_or_default();
    assert!(
        said.contains("schema 2") && said.contains("copy"),
        "health says it opened the copy: {firmware}"
    );
    println!("after the fallback, health says: {said}");
    let admin = admin.on(&b);
    assert_eq!(
        names(&admin),
        before,
        "the data as it was before the migration"
    );
}

/// Where the board reaches the fleet server: an address of QEMU's user network that leads to
/// the fake hawkBit server on the host (board::HostService).
const FLEET_SERVER: &str = "10.0.2.100:80";

/// A museum's fleet (docs/fleet.md): the fleet tests' fake hawkBit server runs on the host behind
/// a byte-counting forwarder, and the board reaches it (and nothing else). The administrator joins
/// the kiosk to the fleet in its settings; the server offers 0.2.0: the board downloads it,
/// installs it into slot B and reboots, the start check marks slot B good, and only then does the
/// server hear `closed/success` (its arrival, on the host's clock, against the mark in docent's
/// log, on the board's; the offset between the clocks measured). Then the server offers 0.3.0,
/// whose docent refuses its configuration: the update gate rolls it back, and the server hears
/// `closed/failure` with the reason from 0.2.0 on slot B. The token is in no log on the board.
/// Prints the cost of a poll and the times from each offer to its result.
#[test]
#[ignore = "boots the simulated board: run by ./x appliance-long"]
fn long_a_fleet_update_succeeds_after_the_mark_good_and_a_bad_one_fails_after_the_rollback() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let (v2, v3) = (bundle("0.2.0"), bundle("0.3.0"));
    let token = format!("tt-board-{}", uuid::Uuid::new_v4().simple());
    let fake = rt.block_on(FakeHawkbit::start(&token, "00:00:10"));
    let (forwarder, wire) = rt.block_on(counting_proxy(fake.addr));
    let server = HostService {
        guest: FLEET_SERVER.parse::<SocketAddrV4>().unwrap(),
        host: forwarder.port(),
    };
    let disk = Disk::flash(dir.path());
    let mut b = Board::boot_reaching(&disk, dir.path(), &[server]);
    rt.block_on(wait_health(&b, Duration::from_secs(180)));
    let admin = own_password(&mut b, &rt);
    on_slot(&mut b, "A", "0.1.0");

    // --- The administrator joins the kiosk to the fleet ---
    fake.with(|s| s.config_data_requested = true);
    let fleet = json!({
        "enabled": true,
        "server_url": format!("http://{FLEET_SERVER}"),
        // The fake server speaks plain HTTP.
        "allow_insecure_http": true,
        "tenant": TENANT,
        "controller_id": CONTROLLER,
        "target_token": token,
    });
    rt.block_on(
        admin.expect(
            admin
                .request(reqwest::Method::PUT, "/api/v1/settings")
                .json(&json!({ "fleet": fleet })),
            200,
        ),
    );
    let config = wait_some("the kiosk's attributes", Duration::from_secs(120), || {
        fake.with(|s| s.config_data.first().cloned())
    });
    assert_eq!(
        [
            &config["data"]["firmware_version"],
            &config["data"]["booted_slot"],
            &config["data"]["compatible"]
        ],
        [&json!("0.1.0"), &json!("A"), &json!("docent-qemu-aarch64")],
        "{config}"
    );

    // --- What a poll costs while nothing is offered: one request, answered 304 ---
    let polls = |s: &fake_hawkbit::Script| -> Vec<Instant> {
        s.seen
            .iter()
            .filter(|r| r.method == "GET" && r.path.ends_with(CONTROLLER))
            .map(|r| r.at)
            .collect()
    };
    // The attributes changed the root resource: the next poll is answered in full, the one
    // after it unchanged (304).
    let sent = fake.with(|s| s.seen.len());
    wait_some("an unchanged poll", Duration::from_secs(60), || {
        fake.with(|s| {
            let with_etag = s.seen[sent..].iter().filter(|r| r.if_none_match.is_some());
            (with_etag.count() >= 2).then_some(())
        })
    });
    // Sampled between polls (the next is 10 s away).
    std::thread::sleep(Duration::from_secs(1));
    let (seen0, polls0, bytes0) = fake.with(|s| (s.seen.len(), polls(s).len(), wire_bytes(&wire)));
    std::thread::sleep(Duration::from_secs(45));
    let (window, times) = fake.with(|s| (s.seen[seen0..].to_vec(), polls(s)[polls0..].to_vec()));
    let bytes = wire_bytes(&wire) - bytes0;
    assert!(
        times.len() >= 3
            && window.len() == times.len()
            && window.iter().all(|r| r.if_none_match.is_some()),
        "only polls, each with its ETag, while nothing is offered: {window:?}"
    );
    let gaps: Vec<f64> = times
        .windows(2)
        .map(|w| (w[1] - w[0]).as_secs_f64())
        .collect();
    assert!(
        gaps.iter().all(|g| *g > 9.5),
        "polled at the server's interval (10 s): {gaps:?}"
    );
    println!(
        "fleet poll on the board: {} polls in 45 s, one request each (304), {} bytes each on the \
         wire (request and answer); {:.1} s apart",
        times.len(),
        bytes / times.len() as u64,
        gaps.iter().sum::<f64>() / gaps.len().max(1) as f64
    );

    // --- 0.2.0 from the fleet: installed into slot B, rebooted into, marked good ---
    let artifact = std::fs::read(&v2).unwrap();
    let size = artifact.len();
    let mark = b.mark();
    let offered = Instant::now();
    fake.offer(
        "8",
        "os",
        "0.2.0",
        "docent-0.2.0.raucb",
        artifact,
        json!({}),
    );
    let done = installed(&fake, "8");
    assert_eq!(fake.closed("8"), None, "an install is no success");
    let on_b = b.wait_for("docent boot: slot B", mark, Duration::from_secs(300));
    let rebooted = Instant::now();
    b.wait_ready(on_b);
    rt.block_on(wait_health(&b, Duration::from_secs(180)));
    let (succeeded, details) = closed(&fake, "8", "closed/success");
    assert!(details.contains("marked good"), "{details}");
    b.wait_for(
        "update gate: docent took the update",
        on_b,
        Duration::from_secs(60),
    );
    on_slot(&mut b, "B", "0.2.0");
    marked_good(&mut b, "B");
    // docent logs the outcome once RAUC has marked the slot good (src/engine/update).
    let line = b.sh(
        "journalctl -b -u docent.service -o cat --no-pager | grep -m1 'updated from 0.1.0 to 0.2.0'",
    );
    let marked = line
        .split_whitespace()
        .next()
        .and_then(|t| humantime::parse_rfc3339(t).ok())
        .map(unix)
        .unwrap_or_else(|| panic!("docent logged the update with its time: {line:?}"));
    let (offset, within) = board_clock(&mut b);
    let heard = host_clock(succeeded) + offset;
    assert!(
        heard > marked - within,
        "the server heard the success {:.3} s before slot B was marked good (clocks compared \
         within {within:.3} s)",
        marked - heard
    );
    let polled = fake.with(|s| {
        polls(s)
            .into_iter()
            .filter(|t| (rebooted..succeeded).contains(t))
            .count()
    });
    let feedback = fake.feedback_timed("8");
    let seen = fake.with(|s| s.seen.clone());
    let downloads = seen
        .iter()
        .filter(|r| r.path.ends_with("/docent-0.2.0.raucb"))
        .count();
    let fetched = seen
        .iter()
        .find(|r| r.at > offered && r.path.ends_with("/docent-0.2.0.raucb"))
        .expect("the download")
        .at;
    // The kiosk asks once more for a cancellation once the bundle is downloaded and checked.
    let last_look = seen
        .iter()
        .find(|r| r.at > fetched && r.path.ends_with(CONTROLLER) && r.if_none_match.is_none())
        .expect("a last look for a cancellation before the install")
        .at;
    let at = |what: &str| {
        feedback
            .iter()
            .find(|(_, _, d)| d.contains(what))
            .map(|(t, _, _)| *t)
            .unwrap_or_else(|| panic!("feedback {what:?} in {feedback:?}"))
    };
    let installing = at("installing 0.2.0");
    let secs = |from: Instant, to: Instant| (to - from).as_secs_f64();
    println!(
        "fleet update 0.1.0 -> 0.2.0 ({} MiB bundle): offer to download {:.0} s (the next poll); \
         download, fsync and SHA-256 {:.0} s ({:.1} MB/s, {downloads} request(s)); RAUC's check \
         {:.0} s; install {:.0} s; installed to success heard {:.0} s (reboot, start check, \
         {polled} poll(s) after the reboot before it); success heard {:.1} s after the mark \
         (clocks within {:.0} ms); offer to success {:.0} s; feedback: {:?}",
        size >> 20,
        secs(offered, fetched),
        secs(fetched, last_look),
        size as f64 / 1e6 / secs(fetched, last_look),
        secs(last_look, installing),
        secs(installing, done),
        secs(done, succeeded),
        heard - marked,
        within * 1000.0,
        secs(offered, succeeded),
        feedback
            .iter()
            .map(|(_, s, _)| s.as_str())
            .collect::<Vec<_>>()
    );

    // --- 0.3.0 from the fleet: its docent refuses its configuration; the gate rolls it back ---
    let artifact = std::fs::read(&v3).unwrap();
    let mark = b.mark();
    let offered = Instant::now();
    fake.offer(
        "9",
        "os",
        "0.3.0",
        "docent-0.3.0.raucb",
        artifact,
        json!({}),
    );
    installed(&fake, "9");
    let on_a = b.wait_for("docent boot: slot A", mark, Duration::from_secs(300));
    let rolling = b.wait_for(
        "update gate: rolling back 0.3.0",
        on_a,
        Duration::from_secs(300),
    );
    assert_eq!(
        fake.closed("9"),
        None,
        "nothing reported before the rollback"
    );
    let back = b.wait_for("docent boot: slot B", rolling, Duration::from_secs(120));
    let back_at = Instant::now();
    b.wait_ready(back);
    rt.block_on(wait_health(&b, Duration::from_secs(180)));
    let (failed, details) = closed(&fake, "9", "closed/failure");
    assert!(
        details.contains("0.3.0 was rolled back: docent failed to start")
            && details.contains("teleported")
            && details.contains("running 0.2.0"),
        "the failure says why, in docent's own words: {details}"
    );
    assert!(
        failed > back_at,
        "reported once the board was back on slot B"
    );
    on_slot(&mut b, "B", "0.2.0");
    assert_eq!(boot_status(&mut b, "A"), "bad", "slot A is marked bad");
    println!(
        "fleet update 0.2.0 -> 0.3.0 (refused configuration): offer to failure heard {:.0} s, \
         {:.0} s after the board was back on slot B: {details}",
        secs(offered, failed),
        secs(back_at, failed)
    );

    // Every request carried the token, which no log line on the board holds; the fleet's own
    // updates are not reported again as installed from the console.
    assert!(fake.with(|s| s.seen.iter().all(|r| r.status == 200)));
    assert_eq!(
        b.sh(&format!(
            "journalctl -o cat --no-pager | grep -c -F '{token}'"
        )),
        "0",
        "the target token is in no log line on the board"
    );
    assert!(fake.with(|s| s.installed_base.is_empty()));
}

/// Waits until `ready` gives something (every 200 ms, at most `within`).
fn wait_some<T>(what: &str, within: Duration, mut ready: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(t) = ready() {
            return t;
        }
        assert!(start.elapsed() < within, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// When the fake server heard that action `id` was installed (the reboot follows); fails at
/// once on a closed action.
fn installed(fake: &FakeHawkbit, id: &str) -> Instant {
    wait_some("the install", Duration::from_secs(900), || {
        let feedback = fake.feedback_timed(id);
        if let Some((_, status, details)) =
            feedback.iter().find(|(_, s, _)| s.starts_with("closed/"))
        {
            panic!("action {id} ended before its install: {status} {details}");
        }
        feedback
            .iter()
            .find(|(_, _, d)| d.contains("installed; the result follows"))
            .map(|(t, _, _)| *t)
    })
}

/// When the fake server heard action `id` closed, which must be as `status`; and its details.
fn closed(fake: &FakeHawkbit, id: &str, status: &str) -> (Instant, String) {
    let (at, got, details) = wait_some("the result", Duration::from_secs(180), || {
        fake.feedback_timed(id)
            .into_iter()
            .find(|(_, s, _)| s.starts_with("closed/"))
    });
    assert_eq!(got, status, "action {id}: {details}");
    (at, details)
}

fn wire_bytes(count: &std::sync::atomic::AtomicU64) -> u64 {
    count.load(std::sync::atomic::Ordering::Relaxed)
}

fn unix(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// The host's clock (Unix seconds) at `t`.
fn host_clock(t: Instant) -> f64 {
    unix(SystemTime::now()) - t.elapsed().as_secs_f64()
}

/// How far the board's clock is ahead of the host's (seconds), and within how much: the board
/// reads its clock through the console between two readings of the host's; the closest of
/// three.
fn board_clock(b: &mut Board) -> (f64, f64) {
    (0..3)
        .map(|_| {
            let before = unix(SystemTime::now());
            // busybox's date has no sub-second format; adjtimex shows the clock in microseconds.
            let said = b.sh("adjtimex | grep time.tv_");
            let after = unix(SystemTime::now());
            let board = value_after::<f64>(&said, "time.tv_sec:")
                .zip(value_after::<f64>(&said, "time.tv_usec:"))
                .map(|(s, us)| s + us / 1e6)
                .unwrap_or_else(|| panic!("the board's clock: {said}"));
            (board - (before + after) / 2.0, (after - before) / 2.0)
        })
        .min_by(|x, y| x.1.total_cmp(&y.1))
        .unwrap()
}

/// Reboots the board through docent's route; returns once its console shell is back.
fn admin_reboot(b: &mut Board, rt: &Runtime, admin: &Admin) {
    let mark = b.mark();
    rt.block_on(admin.expect(
        admin.request(reqwest::Method::POST, "/api/v1/system/reboot"),
        202,
    ));
    b.wait_ready(mark);
}

/// Health's `firmware` as the administrator sees it (the LAN is not told it), once it passes
/// `ok` (docent settles an update shortly after it serves).
async fn firmware_health(admin: &Admin, ok: impl Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    loop {
        let health = admin.get("/api/v1/health").await;
        if ok(&health["firmware"]) {
            return health["firmware"].clone();
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "health's firmware: {health}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// `target/bundle/docent-qemu-aarch64-VERSION.raucb`, made by ./x appliance.
fn bundle(version: &str) -> std::path::PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("target/bundle/docent-qemu-aarch64-{version}.raucb"));
    assert!(path.is_file(), "no {}: run ./x appliance", path.display());
    path
}

/// The board booted `slot` with firmware `version` (VERSION_ID), as RAUC sees it too.
fn on_slot(b: &mut Board, slot: &str, version: &str) {
    let seen = b.sh("grep -o 'rauc.slot=[AB]' /proc/cmdline; . /etc/os-release; echo $VERSION_ID");
    assert_eq!(
        seen,
        format!("rauc.slot={slot}\n{version}"),
        "slot and version"
    );
    let status = b.sh("rauc status --output-format=shell");
    let booted = match slot {
        "A" => "RAUC_SYSTEM_BOOTED_BOOTNAME='A'",
        _ => "RAUC_SYSTEM_BOOTED_BOOTNAME='B'",
    };
    assert!(
        status.contains(booted),
        "RAUC sees slot {slot} booted: {status}"
    );
}

/// RAUC's boot status of the slot `bootname` (`good`, `bad`).
fn boot_status(b: &mut Board, bootname: &str) -> String {
    let status = b.sh("rauc status --output-format=shell");
    let value = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|v| v.trim_matches(['=', '\'']).to_string())
    };
    (1..=2)
        .find(|i| value(&format!("RAUC_SLOT_BOOTNAME_{i}")).as_deref() == Some(bootname))
        .and_then(|i| value(&format!("RAUC_SLOT_BOOT_STATUS_{i}")))
        .unwrap_or_else(|| panic!("slot {bootname} in RAUC's status: {status}"))
}

/// Once docent serves, the booted slot is marked good (3 attempts again).
fn marked_good(b: &mut Board, slot: &str) {
    b.sh_within(
        "until systemctl is-active -q docent-boot-ok.service; do sleep 1; done",
        Duration::from_secs(120),
    );
    assert_eq!(b.sh(&format!("fw_printenv -n BOOT_{slot}_LEFT")), "3");
    assert_eq!(boot_status(b, slot), "good", "RAUC sees slot {slot} good");
}

/// RAUC's D-Bus service answers the user docent and refuses another user (board/rauc/
/// docent-rauc.conf).
fn rauc_answers_only_root_and_docent(b: &mut Board) {
    let call = |user: &str| {
        format!(
            "su -s /bin/sh {user} -c 'id -gn; busctl --timeout=30 call de.pengutronix.rauc / \
             de.pengutronix.rauc.Installer GetPrimary' 2>&1"
        )
    };
    let docent = b.sh_within(&call("docent"), Duration::from_secs(120));
    assert_eq!(docent, "docent\ns \"rootfs.0\"", "docent may call RAUC");
    let nobody = b.sh_within(&call("nobody"), Duration::from_secs(120));
    assert!(
        nobody.contains("Access denied"),
        "another user may not: {nobody}"
    );
}

/// Bundles this board must refuse, made here with the host's rauc around a small image:
/// one signed by another CA (another museum's key), one for another board (docent-rpi4) signed
/// under the board's own CA. Each with what RAUC's refusal says.
fn foreign_bundles(dir: &Path) -> Vec<(&'static str, std::path::PathBuf, &'static str)> {
    let run = |cmd: &mut Command| {
        let out = cmd.output().expect("the host tool runs (./x installs it)");
        assert!(
            out.status.success(),
            "{cmd:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let other = dir.join("other-ca");
    std::fs::create_dir_all(&other).unwrap();
    run(Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args([
            "-nodes",
            "-days",
            "30",
            "-subj",
            "/O=another museum/CN=another museum",
        ])
        .arg("-keyout")
        .arg(other.join("key.pem"))
        .arg("-out")
        .arg(other.join("cert.pem")));
    let ca = board::sim_home().join("rauc-ca");
    let mut made = Vec::new();
    for (what, compatible, key, cert, says) in [
        (
            "a bundle signed by another key",
            "docent-qemu-aarch64",
            other.join("key.pem"),
            other.join("cert.pem"),
            "RAUC refused it",
        ),
        (
            "a bundle for another board",
            "docent-rpi4",
            ca.join("signing.key.pem"),
            ca.join("signing.cert.pem"),
            "this update is for docent-rpi4; this kiosk is docent-qemu-aarch64",
        ),
    ] {
        let content = dir.join(format!("content-{compatible}-{}", made.len()));
        std::fs::create_dir_all(&content).unwrap();
        // 1 MiB that does not compress (RAUC wants a payload above one block).
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        let noise: Vec<u8> = (0..1 << 20)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        std::fs::write(content.join("rootfs.ext4"), noise).unwrap();
        std::fs::write(
            content.join("manifest.raucm"),
            format!(
                "[update]\ncompatible={compatible}\nversion=9.9.9\n\n[bundle]\nformat=verity\n\n\
                 [image.rootfs]\nfilename=rootfs.ext4\n"
            ),
        )
        .unwrap();
        let out = dir.join(format!("foreign-{}.raucb", made.len()));
        run(Command::new("rauc")
            .arg("bundle")
            .arg(format!("--cert={}", cert.display()))
            .arg(format!("--key={}", key.display()))
            .arg(&content)
            .arg(&out));
        made.push((what, out, says));
    }
    made
}

/// Logs in with the first-boot password (read from the data partition through the console)
/// and sets the administrator's own, as the server requires before anything else.
fn own_password(b: &mut Board, rt: &Runtime) -> Admin {
    let first = b.sh("cat /data/admin-password");
    let admin = rt.block_on(Admin::login(b, &first));
    rt.block_on(
        admin.expect(
            admin
                .request(reqwest::Method::PUT, "/api/auth/password")
                .json(&json!({ "current": first, "new": "the museum's own password" })),
            200,
        ),
    );
    admin
}

fn runtime() -> Runtime {
    let _ = rustls::crypto::ring::default_provider().install_default();
    Runtime::new().unwrap()
}

/// A client for the health polls: each try gives up after 5 s (a board under emulation may be
/// slow to answer, never silent for longer).
fn health_client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

/// Waits until docent answers health over the forwarded port; returns when it did.
async fn wait_health(b: &Board, within: Duration) -> Instant {
    let url = format!("http://{}/api/v1/health", b.docent);
    let client = health_client();
    let start = Instant::now();
    loop {
        if let Ok(r) = client.get(&url).send().await
            && r.status().is_success()
        {
            return Instant::now();
        }
        assert!(
            start.elapsed() < within,
            "no health answer within {within:?}; console:\n{}",
            b.tail()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until health's audio passes `ok`; returns when, and what health said.
async fn audio_health(b: &Board, within: Duration, ok: impl Fn(&str) -> bool) -> (Instant, String) {
    let client = health_client();
    let start = Instant::now();
    loop {
        let health: Value = client
            .get(format!("http://{}/api/v1/health", b.docent))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let audio = health["device"]["audio"].as_str().unwrap_or_default();
        if ok(audio) {
            return (Instant::now(), audio.to_string());
        }
        assert!(
            start.elapsed() < within,
            "health's audio within {within:?}: {health}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until health reports every device `ok`.
async fn devices_ok(b: &Board, within: Duration) -> bool {
    let start = Instant::now();
    loop {
        let health: Value = reqwest::get(format!("http://{}/api/v1/health", b.docent))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if ["audio", "ptt", "display"]
            .iter()
            .all(|d| health["device"][*d] == "ok")
        {
            return true;
        }
        if start.elapsed() > within {
            eprintln!("health: {health}");
            return false;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The password the first-boot step wrote, read from the data partition through the serial
/// console's root shell (a technician's access); the console transcript up to then, the
/// board's boot messages, must not show it (the console may be the public screen).
fn first_boot_password(b: &mut Board) -> String {
    let console = b.transcript();
    assert!(
        console.contains("administrator password written to /data/admin-password"),
        "the first boot says where the password is: {console}"
    );
    let password = b.sh("cat /data/admin-password");
    assert_eq!(password.len(), 16, "{password:?}");
    assert!(
        !console.contains(&password),
        "the first boot never prints the password on the console"
    );
    password
}

/// The word after `key` in `text` (as a string, or parsed by the caller through `FromStr`).
fn value_after<T: std::str::FromStr>(text: &str, key: &str) -> Option<T> {
    let rest = &text[text.find(key)? + key.len()..];
    rest.split_whitespace().next()?.parse().ok()
}

fn near(p: (u8, u8, u8), want: (u8, u8, u8)) -> bool {
    let d = |a: u8, b: u8| a.abs_diff(b) <= 40;
    d(p.0, want.0) && d(p.1, want.1) && d(p.2, want.2)
}

fn wait_screen(b: &Board, dir: &Path, what: &str, ok: impl Fn(&Screen) -> bool) {
    let start = Instant::now();
    loop {
        let s = b.screendump(&dir.join("screen.ppm"));
        if ok(&s) {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{what}: the screen shows {:?} at its centre",
            s.pixel(s.width / 2, s.height / 2)
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The question as espeak-ng says it, at the microphone's 16 kHz.
fn spoken_question() -> Vec<i16> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("q.wav");
    let ok = std::process::Command::new("espeak-ng")
        .args(["-v", "en-us", "-w"])
        .arg(&path)
        .arg(QUESTION)
        .status()
        .expect("espeak-ng runs (./x installs it)")
        .success();
    assert!(ok);
    let wav = audio::parse_wav(&std::fs::read(&path).unwrap()).unwrap();
    audio::resample(&wav.samples, wav.rate, 16_000)
}

/// Copies `bytes` to `path` on the board through the console (base64 in a here-document).
fn put_file(b: &mut Board, path: &str, bytes: &[u8]) {
    use base64::Engine;
    let text = base64::engine::general_purpose::STANDARD.encode(bytes);
    let lines: Vec<&str> = text
        .as_bytes()
        .chunks(76)
        .map(|l| std::str::from_utf8(l).unwrap())
        .collect();
    b.sh(&format!(
        "base64 -d > {path} <<'EOF'\n{}\nEOF",
        lines.join("\n")
    ));
    let size = b.sh(&format!("wc -c < {path}"));
    assert_eq!(size.trim(), bytes.len().to_string(), "{path} arrived whole");
}

async fn fetch(url: &str) -> Vec<u8> {
    let r = reqwest::get(url).await.unwrap();
    assert!(r.status().is_success(), "{url}: {}", r.status());
    r.bytes().await.unwrap().to_vec()
}

type Frames = Arc<Mutex<Vec<Value>>>;

/// A WebSocket watcher of `session` (the kiosk's: the administrator may watch it): every JSON
/// frame it receives, in order.
async fn watch(b: &Board, admin: &Admin, session: &str) -> Frames {
    let mut request = format!("ws://{}/ws/chat/{session}", b.docent)
        .into_client_request()
        .unwrap();
    request
        .headers_mut()
        .insert("cookie", admin.cookie.parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    let frames = Frames::default();
    let sink = frames.clone();
    tokio::spawn(async move {
        while let Some(Ok(msg)) = ws.next().await {
            if let Ok(v) = serde_json::from_str::<Value>(msg.to_text().unwrap_or("")) {
                sink.lock().unwrap().push(v);
            }
        }
    });
    frames
}

/// Whether a frame passes `ok` within `within`.
fn seen(frames: &Frames, within: Duration, ok: impl Fn(&Value) -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < within {
        if frames.lock().unwrap().iter().any(&ok) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

fn wait_frame(frames: &Frames, what: &str, within: Duration, ok: impl Fn(&Value) -> bool) {
    let start = Instant::now();
    loop {
        if frames.lock().unwrap().iter().any(&ok) {
            return;
        }
        assert!(
            start.elapsed() < within,
            "{what}: not within {within:?}; the watcher saw {:?}",
            frames.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What the watcher saw the visitor say and the kiosk answer (final transcripts).
fn conversation(frames: &[Value]) -> (String, String) {
    let last_final = |speaker: &str| {
        frames
            .iter()
            .filter(|f| f["type"] == "transcript" && f["speaker"] == speaker)
            .filter(|f| f["is_final"] == true)
            .filter_map(|f| f["text"].as_str())
            .next_back()
            .unwrap_or_default()
            .to_string()
    };
    (last_final("user").to_lowercase(), last_final("assistant"))
}

/// The administrator's side: an admin session over the forwarded port.
#[derive(Clone)]
struct Admin {
    base: String,
    cookie: String,
    http: reqwest::Client,
}

impl Admin {
    async fn login(b: &Board, password: &str) -> Admin {
        // The administrator signs in over HTTPS, as the kiosk requires from the network (the
        // board's self-signed certificate: this test stands for the person who checked its
        // fingerprint).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .tls_danger_accept_invalid_certs(true)
            .build()
            .unwrap();
        let base = format!("https://{}", b.docent);
        let r = http
            .post(format!("{base}/api/auth"))
            .json(&json!({ "password": password }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "login with the first-boot password");
        let cookie = r
            .headers()
            .get("set-cookie")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .expect("a session cookie")
            .to_string();
        Admin { base, cookie, http }
    }

    /// The same administrator session on a board booted again (new forwarded ports).
    fn on(self, b: &Board) -> Admin {
        Admin {
            base: format!("https://{}", b.docent),
            ..self
        }
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.base))
            .header("cookie", &self.cookie)
            .header("origin", &self.base)
    }

    async fn expect(&self, r: reqwest::RequestBuilder, status: u16) -> Value {
        let r = r.send().await.unwrap();
        let got = r.status().as_u16();
        let body = r.text().await.unwrap();
        assert_eq!(got, status, "{body}");
        serde_json::from_str(&body).unwrap_or(Value::Null)
    }

    async fn get(&self, path: &str) -> Value {
        self.expect(self.request(reqwest::Method::GET, path), 200)
            .await
    }

    /// Uploads the bundle at `path` (the System page's upload); returns RAUC's verdict and how
    /// long the upload and check took.
    async fn upload(&self, path: &Path) -> (Value, Duration) {
        let bytes = std::fs::read(path).unwrap();
        let started = Instant::now();
        let verdict = self
            .expect(
                self.request(reqwest::Method::POST, "/api/v1/system/update")
                    .timeout(Duration::from_secs(900))
                    .header("content-type", "application/octet-stream")
                    .body(bytes),
                200,
            )
            .await;
        (verdict, started.elapsed())
    }

    /// Installs the bundle uploaded last and waits until it is installed; returns how long.
    async fn install(&self) -> Duration {
        let started = Instant::now();
        self.expect(
            self.request(reqwest::Method::POST, "/api/v1/system/update/install"),
            202,
        )
        .await;
        loop {
            let s = self.get("/api/v1/system/update").await;
            match s["operation"].as_str() {
                Some("installed") => return started.elapsed(),
                Some("installing") | Some("idle") => {}
                _ => panic!("the install fails: {s}"),
            }
            assert!(
                started.elapsed() < Duration::from_secs(600),
                "installed within 10 minutes: {s}"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// A character with an avatar (red), an idle (blue) and a speaking (green) clip and the museum
    /// knowledge file, made the kiosk's character. Returns its id.
    async fn character_with_clips_and_knowledge(&self) -> String {
        let created = self
            .expect(
                self.request(reqwest::Method::POST, "/api/v1/characters")
                    .json(&json!({ "name": "Harbour guide", "welcome_message": "" })),
                201,
            )
            .await;
        let cid = created["id"].as_str().unwrap().to_string();
        let form = reqwest::multipart::Form::new().part(
            "avatar",
            reqwest::multipart::Part::bytes(png_of(IMAGE_COLOUR))
                .file_name("guide.png")
                .mime_str("image/png")
                .unwrap(),
        );
        let avatar = self
            .expect(
                self.request(
                    reqwest::Method::POST,
                    &format!("/api/v1/characters/{cid}/avatar"),
                )
                .multipart(form),
                200,
            )
            .await;
        let image = avatar["filename"].as_str().expect("the image's name");
        let base = image.split('.').next().unwrap().to_string();
        for (variant, colour) in [("idle", IDLE_COLOUR), ("speaking", SPEAKING_COLOUR)] {
            let clip = testclip::solid_clip(320, 240, 100, &[colour; 10]).unwrap();
            self.expect(
                self.request(
                    reqwest::Method::PUT,
                    &format!("/api/v1/characters/{cid}/idle-videos/{base}/{variant}/{variant}.mp4"),
                )
                .body(clip),
                201,
            )
            .await;
        }
        let form = reqwest::multipart::Form::new().part(
            "file",
            reqwest::multipart::Part::bytes(KNOWLEDGE.as_bytes().to_vec()).file_name("museum.txt"),
        );
        self.expect(
            self.request(
                reqwest::Method::POST,
                &format!("/api/v1/characters/{cid}/knowledge/files"),
            )
            .multipart(form),
            201,
        )
        .await;
        let start = Instant::now();
        loop {
            let k = self
                .get(&format!("/api/v1/characters/{cid}/knowledge"))
                .await;
            if k["sources"][0]["status"] == "ready" {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(60), "indexed: {k}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        self.expect(
            self.request(reqwest::Method::PUT, "/api/v1/settings")
                .json(&json!({ "kiosk": { "character_id": cid } })),
            200,
        )
        .await;
        cid
    }

    /// Puts `questions` (of `ON_SCREEN_FAQ`) on character `cid`'s question screen, in this
    /// order: the FAQ file indexed, then the questions marked for the screen (docs/touch.md).
    async fn questions_on_the_screen(&self, cid: &str, questions: &[&str]) {
        let form = reqwest::multipart::Form::new().part(
            "file",
            reqwest::multipart::Part::bytes(ON_SCREEN_FAQ.as_bytes().to_vec()).file_name("faq.txt"),
        );
        self.expect(
            self.request(
                reqwest::Method::POST,
                &format!("/api/v1/characters/{cid}/knowledge/files"),
            )
            .multipart(form),
            201,
        )
        .await;
        let start = Instant::now();
        loop {
            let k = self
                .get(&format!("/api/v1/characters/{cid}/knowledge"))
                .await;
            let sources = k["sources"].as_array().cloned().unwrap_or_default();
            if sources.len() == 2 && sources.iter().all(|s| s["status"] == "ready") {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(60), "indexed: {k}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let screen = self
            .expect(
                self.request(
                    reqwest::Method::PUT,
                    &format!("/api/v1/characters/{cid}/screen-questions"),
                )
                .json(&json!({ "questions": questions })),
                200,
            )
            .await;
        let texts: Vec<&str> = screen["on_screen"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|q| q["text"].as_str())
            .collect();
        assert_eq!(texts, questions, "{screen}");
    }

    /// The kiosk's session, opened by the first press.
    async fn kiosk_session(&self) -> String {
        let start = Instant::now();
        loop {
            let list = self.get("/api/v1/sessions").await;
            let first = list["sessions"]
                .as_array()
                .or(list.as_array())
                .and_then(|a| a.first())
                .and_then(|s| s["id"].as_str())
                .map(str::to_string);
            if let Some(id) = first {
                return id;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "the press opens a session"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Creates characters from four writers until the board stops answering; returns the ids
    /// whose creation was acknowledged (201).
    async fn write_until_failure(self) -> Vec<String> {
        let acked = Arc::new(Mutex::new(Vec::new()));
        let writers = (0..4).map(|w| {
            let admin = self.clone();
            let acked = acked.clone();
            tokio::spawn(async move {
                for n in 0.. {
                    let sent = admin
                        .request(reqwest::Method::POST, "/api/v1/characters")
                        .timeout(Duration::from_secs(10))
                        .json(&json!({ "name": format!("power cut {w}-{n}") }))
                        .send()
                        .await;
                    let Ok(r) = sent else { break };
                    if r.status() != 201 {
                        break;
                    }
                    let Ok(v) = r.json::<Value>().await else {
                        break;
                    };
                    acked
                        .lock()
                        .unwrap()
                        .push(v["id"].as_str().unwrap().to_string());
                }
            })
        });
        for w in writers.collect::<Vec<_>>() {
            let _ = w.await;
        }
        Arc::try_unwrap(acked).unwrap().into_inner().unwrap()
    }

    /// How many of `ids` exist (after a reboot the old cookie still names a stored session).
    async fn count_characters(&self, ids: &[String]) -> usize {
        let mut found = 0;
        for id in ids {
            let r = self
                .request(reqwest::Method::GET, &format!("/api/v1/characters/{id}"))
                .send()
                .await
                .unwrap();
            found += usize::from(r.status() == 200);
        }
        found
    }
}

fn png_of(colour: (u8, u8, u8)) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut e = png::Encoder::new(&mut out, 64, 64);
        e.set_color(png::ColorType::Rgb);
        e.set_depth(png::BitDepth::Eight);
        let mut w = e.write_header().unwrap();
        let px: Vec<u8> = (0..64 * 64)
            .flat_map(|_| [colour.0, colour.1, colour.2])
            .collect();
        w.write_image_data(&px).unwrap();
    }
    out
}
