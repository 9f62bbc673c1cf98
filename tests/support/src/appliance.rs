//! What the appliance test's scenarios (`tests/appliance`) share: the administrator over the
//! network ([`Admin`]), the kiosk set up with a character, its clips and knowledge, the board's
//! health, its screen and the conversation watched, and the updates' bundles and slots.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use docent::engine::pcm;
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::runtime::Runtime;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::board::{Board, Screen};
use crate::fake_hawkbit::FakeHawkbit;
use crate::testclip;

pub const KNOWLEDGE: &str = "The museum closes at 6 pm on weekdays. On weekends it stays open until 8 pm.\n\n\
Tickets cost 12 euros for adults, 8 euros for students and 6 euros for seniors, and children \
under twelve enter free of charge on every day of the week.\n\n\
The lighthouse lens in the main hall was made in Paris in 1872.\n";

/// PocketSphinx (with its grammar of the character's words) hears espeak-ng's "tickets" and
/// "cost" reliably; its "museum" much less so.
pub const QUESTION: &str = "How much do tickets cost?";

pub const IDLE_COLOUR: (u8, u8, u8) = (0, 0, 255);

pub const SPEAKING_COLOUR: (u8, u8, u8) = (0, 255, 0);

/// The avatar image, shown only when no clip can be.
pub const IMAGE_COLOUR: (u8, u8, u8) = (255, 0, 0);

/// Speaker recording: rate and length (covers the question, processing and the answer).
pub const TAP_RATE: u32 = 24_000;

pub const TAP_SECONDS: u32 = 45;

pub const ON_SCREEN_FAQ: &str = "Q: What is the lighthouse lens?\nA: It is a first order Fresnel \
lens, made in Paris in 1872 for the lighthouse at the harbour mouth. Its glass prisms bend the \
light of a single lamp into a beam that sailors could see twenty miles out at sea. It turned \
once every thirty seconds on a bath of mercury, and the keepers wound its clockwork by hand \
every four hours through the night. It came to the museum in 1988.\nQ: Who kept the \
lighthouse?\nA: Three keepers lived in the tower, and the last of them left in 1961.\n";

/// The visitor's part: a spoken question with the button held, the answer heard on the
/// speaker, seen on the screen and in the conversation. Prints the release-to-sound time.
pub fn visit(b: &mut Board, rt: &Runtime, admin: &Admin, dir: &Path) {
    let question = spoken_question();
    put_file(b, "/tmp/question.raw", &pcm::samples_to_le(&question));
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
pub fn record_speaker(b: &mut Board, seconds: u32) {
    b.sh(&format!(
        "sh -c '(docent audio record /run/www/speaker.wav --device speaker_tap --rate {TAP_RATE} \
         --seconds {seconds}; echo recorder done) > /run/record.log 2>&1 &'"
    ));
}

/// With the button held: plays /tmp/question.raw into the loopback microphone, then releases
/// the button. Returns the board's clock (unix seconds) at the release.
pub fn say_the_question(b: &mut Board) -> f64 {
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
pub fn reply_heard(b: &mut Board, rt: &Runtime, released_at: f64, seconds: u32) -> f64 {
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
pub fn speaker_sound(b: &mut Board, rt: &Runtime, seconds: u32) -> (f64, f64) {
    b.sh_within(
        "until grep -q 'recorder done' /run/record.log; do sleep 0.5; done",
        Duration::from_secs(u64::from(seconds) + 30),
    );
    let record_log = b.sh("cat /run/record.log");
    let record_start: f64 = value_after(&record_log, "first frame at unix ")
        .unwrap_or_else(|| panic!("the recorder ran: {record_log}"));
    let wav = rt.block_on(fetch(&format!("http://{}/speaker.wav", b.www)));
    let tap = pcm::parse_wav(&wav).expect("the recording is a WAV file");
    let loud = |s: &&i16| s.unsigned_abs() > 1000;
    let first = tap
        .samples
        .iter()
        .position(|s| loud(&s))
        .expect("the speaker played something");
    let last = tap.samples.iter().rposition(|s| loud(&s)).unwrap_or(first);
    let voiced = tap.samples.iter().filter(loud).count();
    let level = pcm::rms(&tap.samples[first..]);
    assert!(
        voiced as f64 / f64::from(TAP_RATE) > 0.3 && level > 300.0,
        "the reply is audible: {voiced} loud samples, rms {level:.0}"
    );
    let at = |i: usize| record_start + i as f64 / f64::from(TAP_RATE);
    (at(first), at(last))
}

/// docent's log on the board (the journal), for failure messages.
pub const DOCENT_LOG: &str = "journalctl -u docent.service -n 60 --no-pager -o cat";

/// Waits until `ready` gives something (every 200 ms, at most `within`).
pub fn wait_some<T>(what: &str, within: Duration, mut ready: impl FnMut() -> Option<T>) -> T {
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
pub fn installed(fake: &FakeHawkbit, id: &str) -> Instant {
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
pub fn closed(fake: &FakeHawkbit, id: &str, status: &str) -> (Instant, String) {
    let (at, got, details) = wait_some("the result", Duration::from_secs(180), || {
        fake.feedback_timed(id)
            .into_iter()
            .find(|(_, s, _)| s.starts_with("closed/"))
    });
    assert_eq!(got, status, "action {id}: {details}");
    (at, details)
}

pub fn unix(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// The host's clock (Unix seconds) at `t`.
pub fn host_clock(t: Instant) -> f64 {
    unix(SystemTime::now()) - t.elapsed().as_secs_f64()
}

/// How far the board's clock is ahead of the host's (seconds), and within how much: the board
/// reads its clock through the console between two readings of the host's; the closest of
/// three.
pub fn board_clock(b: &mut Board) -> (f64, f64) {
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
pub fn admin_reboot(b: &mut Board, rt: &Runtime, admin: &Admin) {
    let mark = b.mark();
    rt.block_on(admin.expect(
        admin.request(reqwest::Method::POST, "/api/v1/system/reboot"),
        202,
    ));
    b.wait_ready(mark);
}

/// Health's `firmware` as the administrator sees it (the LAN is not told it), once it passes
/// `ok` (docent settles an update shortly after it serves).
pub async fn firmware_health(admin: &Admin, ok: impl Fn(&Value) -> bool) -> Value {
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
pub fn bundle(version: &str) -> std::path::PathBuf {
    let path = crate::repo().join(format!("target/bundle/docent-qemu-aarch64-{version}.raucb"));
    assert!(path.is_file(), "no {}: run ./x appliance", path.display());
    path
}

/// The board booted `slot` with firmware `version` (VERSION_ID), as RAUC sees it too.
pub fn on_slot(b: &mut Board, slot: &str, version: &str) {
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
pub fn boot_status(b: &mut Board, bootname: &str) -> String {
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
pub fn marked_good(b: &mut Board, slot: &str) {
    b.sh_within(
        "until systemctl is-active -q docent-boot-ok.service; do sleep 1; done",
        Duration::from_secs(120),
    );
    assert_eq!(b.sh(&format!("fw_printenv -n BOOT_{slot}_LEFT")), "3");
    assert_eq!(boot_status(b, slot), "good", "RAUC sees slot {slot} good");
}

/// Logs in with the first-boot password (read from the data partition through the console)
/// and sets the administrator's own, as the server requires before anything else.
pub fn own_password(b: &mut Board, rt: &Runtime) -> Admin {
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

pub fn runtime() -> Runtime {
    let _ = rustls::crypto::ring::default_provider().install_default();
    Runtime::new().unwrap()
}

/// A client for the health polls: each try gives up after 5 s (a board under emulation may be
/// slow to answer, never silent for longer).
pub fn health_client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

/// Waits until docent answers health over the forwarded port; returns when it did.
pub async fn wait_health(b: &Board, within: Duration) -> Instant {
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

/// The word after `key` in `text` (as a string, or parsed by the caller through `FromStr`).
pub fn value_after<T: std::str::FromStr>(text: &str, key: &str) -> Option<T> {
    let rest = &text[text.find(key)? + key.len()..];
    rest.split_whitespace().next()?.parse().ok()
}

pub fn near(p: (u8, u8, u8), want: (u8, u8, u8)) -> bool {
    let d = |a: u8, b: u8| a.abs_diff(b) <= 40;
    d(p.0, want.0) && d(p.1, want.1) && d(p.2, want.2)
}

pub fn wait_screen(b: &Board, dir: &Path, what: &str, ok: impl Fn(&Screen) -> bool) {
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
pub fn spoken_question() -> Vec<i16> {
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
    let wav = pcm::parse_wav(&std::fs::read(&path).unwrap()).unwrap();
    pcm::resample(&wav.samples, wav.rate, 16_000)
}

/// Copies `bytes` to `path` on the board through the console (base64 in a here-document).
pub fn put_file(b: &mut Board, path: &str, bytes: &[u8]) {
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

pub async fn fetch(url: &str) -> Vec<u8> {
    let r = reqwest::get(url).await.unwrap();
    assert!(r.status().is_success(), "{url}: {}", r.status());
    r.bytes().await.unwrap().to_vec()
}

pub type Frames = Arc<Mutex<Vec<Value>>>;

/// A WebSocket watcher of `session` (the kiosk's: the administrator may watch it): every JSON
/// frame it receives, in order.
pub async fn watch(b: &Board, admin: &Admin, session: &str) -> Frames {
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
pub fn seen(frames: &Frames, within: Duration, ok: impl Fn(&Value) -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < within {
        if frames.lock().unwrap().iter().any(&ok) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

pub fn wait_frame(frames: &Frames, what: &str, within: Duration, ok: impl Fn(&Value) -> bool) {
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
pub fn conversation(frames: &[Value]) -> (String, String) {
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
pub struct Admin {
    pub base: String,
    pub cookie: String,
    pub http: reqwest::Client,
}

impl Admin {
    pub async fn login(b: &Board, password: &str) -> Admin {
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
    pub fn on(self, b: &Board) -> Admin {
        Admin {
            base: format!("https://{}", b.docent),
            ..self
        }
    }

    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.base))
            .header("cookie", &self.cookie)
            .header("origin", &self.base)
    }

    pub async fn expect(&self, r: reqwest::RequestBuilder, status: u16) -> Value {
        let r = r.send().await.unwrap();
        let got = r.status().as_u16();
        let body = r.text().await.unwrap();
        assert_eq!(got, status, "{body}");
        serde_json::from_str(&body).unwrap_or(Value::Null)
    }

    pub async fn get(&self, path: &str) -> Value {
        self.expect(self.request(reqwest::Method::GET, path), 200)
            .await
    }

    /// Uploads the bundle at `path` (the System page's upload); returns RAUC's verdict and how
    /// long the upload and check took.
    pub async fn upload(&self, path: &Path) -> (Value, Duration) {
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
    pub async fn install(&self) -> Duration {
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
    pub async fn character_with_clips_and_knowledge(&self) -> String {
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
        self.upload_knowledge(&cid, "museum.txt", KNOWLEDGE).await;
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

    /// Uploads `text` as the knowledge file `name` of character `cid`.
    pub async fn upload_knowledge(&self, cid: &str, name: &str, text: &str) {
        let form = reqwest::multipart::Form::new().part(
            "file",
            reqwest::multipart::Part::bytes(text.as_bytes().to_vec()).file_name(name.to_string()),
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
    }

    /// Puts `questions` (of `ON_SCREEN_FAQ`) on character `cid`'s question screen, in this
    /// order: the FAQ file indexed, then the questions marked for the screen (docs/touch.md).
    pub async fn questions_on_the_screen(&self, cid: &str, questions: &[&str]) {
        self.upload_knowledge(cid, "faq.txt", ON_SCREEN_FAQ).await;
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
    pub async fn kiosk_session(&self) -> String {
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
    pub async fn write_until_failure(self) -> Vec<String> {
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
    pub async fn count_characters(&self, ids: &[String]) -> usize {
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

pub fn png_of(colour: (u8, u8, u8)) -> Vec<u8> {
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
