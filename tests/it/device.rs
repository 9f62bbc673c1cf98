//! The kiosk's own loop through the real code paths: a server with simulated devices
//! (`devices = "sim"`: alsa-lib's file/null plugins behind the real `alsa` calls, the in-memory
//! button and LED), driven only from outside, as a person or a test rig would: the mic file, the
//! internal button route, the speaker file, the device and health routes, a WebSocket watcher.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::{Server, launch_param};
use docent::config::Config;
use docent::config::DeviceMode;
use docent::device::SimAudio;
use docent::engine::pcm;
use futures_util::StreamExt;
use serde_json::{Value, json};

/// Bytes per second of the simulated speaker (24 kHz mono S16_LE).
const SPEAKER_BPS: u64 = SimAudio::SPEAKER_RATE as u64 * 2;

pub(crate) async fn sim_server(tweak: impl FnOnce(&mut Config)) -> Server {
    Server::start_with(|c| {
        c.devices = DeviceMode::Sim;
        tweak(c);
    })
    .await
}

async fn device(s: &Server) -> Value {
    s.get_json("/api/v1/internal/device", 200).await
}

pub(crate) async fn press(s: &Server, pressed: bool) {
    let v = s
        .post_json(
            "/api/v1/internal/device/ptt",
            json!({ "pressed": pressed }),
            200,
        )
        .await;
    assert_eq!(v["pressed"], pressed);
}

/// Polls the kiosk until its status is `want`; returns the device view then.
pub(crate) async fn wait_status(s: &Server, want: &str, within: Duration) -> Value {
    let start = Instant::now();
    loop {
        let d = device(s).await;
        if d["status"] == want {
            return d;
        }
        assert!(
            start.elapsed() < within,
            "kiosk not {want} after {within:?}: {d}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Polls until the simulated LED is `lit` (the button thread sets it just after a state change).
async fn wait_led(s: &Server, lit: bool) {
    let start = Instant::now();
    loop {
        let d = device(s).await;
        if d["led"] == lit {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_millis(500),
            "LED not {lit} in a moment: {d}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Polls until idle, recording every status seen (in order, without repeats) and the LED
/// level in each.
async fn follow_until_idle(s: &Server, within: Duration) -> Vec<(String, bool)> {
    let start = Instant::now();
    let mut seen: Vec<(String, bool)> = Vec::new();
    loop {
        let d = device(s).await;
        let status = d["status"].as_str().unwrap().to_string();
        let led = d["led"].as_bool().unwrap();
        if seen.last().is_none_or(|(st, l)| *st != status || *l != led) {
            seen.push((status.clone(), led));
        }
        if status == "idle" {
            return seen;
        }
        assert!(
            start.elapsed() < within,
            "not idle after {within:?}: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(15)).await;
    }
}

/// A spoken question as the simulated microphone takes it (16 kHz mono S16_LE); returns the
/// bytes and their duration.
pub(crate) fn spoken(text: &str) -> (Vec<u8>, Duration) {
    let wav = tempfile::NamedTempFile::new().unwrap();
    let ok = std::process::Command::new("espeak-ng")
        .arg("-w")
        .arg(wav.path())
        .arg(text)
        .status()
        .expect("espeak-ng runs (./x installs it)");
    assert!(ok.success());
    let w = pcm::parse_wav(&std::fs::read(wav.path()).unwrap()).unwrap();
    let pcm = pcm::resample(
        &pcm::downmix(&w.samples, w.channels),
        w.rate,
        SimAudio::MIC_RATE,
    );
    let secs = pcm.len() as f64 / SimAudio::MIC_RATE as f64;
    (pcm::samples_to_le(&pcm), Duration::from_secs_f64(secs))
}

/// Asks the same question again (held `spoken_for`); once `played` has grown half a second past
/// `full`, the reply playing, a press: the kiosk listens at once.
async fn press_while_the_reply_plays(s: &Server, spoken_for: Duration, played: &Path, full: u64) {
    press(s, true).await;
    wait_status(s, "listening", Duration::from_secs(2)).await;
    tokio::time::sleep(spoken_for + Duration::from_millis(200)).await;
    press(s, false).await;
    wait_status(s, "speaking", Duration::from_secs(30)).await;
    let start = Instant::now();
    while len(played) < full + SPEAKER_BPS / 2 {
        assert!(start.elapsed() < Duration::from_secs(5), "the reply plays");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    press(s, true).await;
    wait_status(s, "listening", Duration::from_secs(1)).await;
}

fn len(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

fn sim_paths(d: &Value) -> (PathBuf, PathBuf) {
    let a = &d["sim_audio"];
    (
        PathBuf::from(a["mic"].as_str().unwrap()),
        PathBuf::from(a["speaker"].as_str().unwrap()),
    )
}

/// The statuses of `seen`, without the LED and without repeats.
fn statuses(seen: &[(String, bool)]) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for (s, _) in seen {
        if out.last() != Some(&s.as_str()) {
            out.push(s);
        }
    }
    out
}

#[tokio::test]
async fn an_in_person_turn_is_heard_and_a_press_cuts_the_reply() {
    let s = sim_server(|_| {}).await;
    let d = device(&s).await;
    assert_eq!(d["mode"], "sim");
    assert_eq!(
        d["health"],
        json!({"audio": "sim", "ptt": "sim", "display": "sim", "choice": "sim"})
    );
    assert_eq!(
        s.get_json("/api/v1/health", 200).await["device"],
        d["health"]
    );
    assert_eq!(
        (d["status"].as_str(), d["led"].as_bool()),
        (Some("idle"), Some(false))
    );
    let (mic, speaker) = sim_paths(&d);
    let (question, spoken_for) = spoken("What time does the museum open today?");
    std::fs::write(&mic, &question).unwrap();

    // Turn 1: press, ask, release; the reply plays to its end.
    press(&s, true).await;
    wait_status(&s, "listening", Duration::from_secs(2)).await;
    wait_led(&s, true).await;
    tokio::time::sleep(spoken_for + Duration::from_millis(200)).await;
    press(&s, false).await;
    // Listening with the LED on was seen before the release; a loaded machine may answer the
    // first poll after it already processing.
    let mut seen = vec![("listening".to_string(), true)];
    for step in follow_until_idle(&s, Duration::from_secs(40)).await {
        if seen.last() != Some(&step) {
            seen.push(step);
        }
    }
    assert_eq!(
        statuses(&seen),
        ["listening", "processing", "speaking", "idle"],
        "{seen:?}"
    );
    // The LED follows each state within a moment (it is set by the button thread): the last
    // level seen in each state is that state's.
    for (i, (status, led)) in seen.iter().enumerate() {
        let last_in_state = seen.get(i + 1).is_none_or(|(next, _)| next != status);
        if !last_in_state {
            continue;
        }
        match status.as_str() {
            "listening" => assert!(led, "LED on while listening: {seen:?}"),
            "speaking" | "idle" => assert!(!led, "LED off while {status}: {seen:?}"),
            _ => {}
        }
    }
    let full = len(&speaker);
    assert!(
        full > SPEAKER_BPS,
        "the reply plays for more than a second: {full} bytes"
    );
    let reply = pcm::samples_from_le(&std::fs::read(&speaker).unwrap());
    assert!(pcm::rms(&reply) > 300.0, "the speaker file holds speech");

    // The visitor's session is an ordinary one: listed, its history stored.
    let sessions = s.get_json("/api/v1/sessions", 200).await;
    let session = sessions["sessions"]
        .as_array()
        .or(sessions.as_array())
        .and_then(|a| a.first())
        .cloned()
        .unwrap_or_else(|| panic!("the kiosk's session is listed: {sessions}"));
    let session_id = session["id"].as_str().unwrap().to_string();
    let character = session["character_id"].as_str().unwrap().to_string();
    let history = s.history(&character).await;
    let roles: Vec<&str> = history["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["session_id"] == session_id.as_str())
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant"], "{history}");

    // A WebSocket watcher of that session sees what the kiosk does next.
    let (mut ws, _) =
        tokio_tungstenite::connect_async(format!("ws://{}/ws/chat/{session_id}", s.addr))
            .await
            .unwrap();
    // The server subscribes the socket to the session before its hello: wait for it, or a busy
    // machine may start the turn before the watcher listens.
    let hello = tokio::time::timeout(Duration::from_secs(10), ws.next())
        .await
        .expect("the hello arrives")
        .unwrap()
        .unwrap();
    let hello: Value = serde_json::from_str(hello.to_text().unwrap()).unwrap();
    assert_eq!(hello["type"], "session", "{hello}");

    // Turn 2: the same question; a press while the reply plays stops it at once.
    press_while_the_reply_plays(&s, spoken_for, &speaker, full).await;
    wait_led(&s, true).await;
    // Released within 300 ms: a tap, which starts no turn.
    press(&s, false).await;
    let seen = follow_until_idle(&s, Duration::from_secs(2)).await;
    assert_eq!(statuses(&seen), ["listening", "idle"], "{seen:?}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let cut = len(&speaker);
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(
        len(&speaker),
        cut,
        "playback stopped: the file stops growing"
    );
    let second = cut - full;
    assert!(
        second < full / 2,
        "the cut reply ({second} bytes) is shorter than the full one ({full} bytes)"
    );
    assert_eq!(
        device(&s).await["status"],
        "idle",
        "the tap started nothing"
    );

    let mut status_frames = Vec::new();
    while let Ok(Some(Ok(msg))) = tokio::time::timeout(Duration::from_millis(200), ws.next()).await
    {
        if let Ok(v) = serde_json::from_str::<Value>(msg.to_text().unwrap_or(""))
            && v["type"] == "avatar_status"
        {
            status_frames.push(v["status"].as_str().unwrap_or("").to_string());
        }
    }
    for want in ["listening", "processing", "speaking"] {
        assert!(
            status_frames.iter().any(|s| s == want),
            "the watcher saw {status_frames:?}"
        );
    }
}

// Two workers, as the kiosk has: the test's polling must not wait behind the server's tasks to
// see when speaking began, or the measured speaking time comes out short.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn utterance_and_speaking_timeouts_fire_and_a_held_button_is_ignored() {
    let s = sim_server(|c| {
        c.kiosk.max_utterance_ms = 600;
        c.kiosk.max_speaking_ms = 1_000;
    })
    .await;
    let (_, speaker) = sim_paths(&device(&s).await);
    // The mic file is empty: silence, which the kiosk answers that it did not catch.
    press(&s, true).await;
    wait_status(&s, "listening", Duration::from_secs(2)).await;
    let held = Instant::now();
    // Watched closely: the reply may follow the utterance's end within tens of milliseconds.
    let d = loop {
        let d = device(&s).await;
        if d["status"] != "listening" {
            break d;
        }
        assert!(
            held.elapsed() < Duration::from_secs(2),
            "still listening: {d}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert!(
        held.elapsed() >= Duration::from_millis(550),
        "the utterance ended at max_utterance_ms, not at {:?}",
        held.elapsed()
    );
    assert_eq!(d["button"], true, "still held when the utterance ended");
    wait_status(&s, "speaking", Duration::from_secs(30)).await;
    let speaking = Instant::now();
    wait_status(&s, "idle", Duration::from_secs(5)).await;
    let spoke = speaking.elapsed();
    assert!(
        spoke >= Duration::from_millis(800) && spoke < Duration::from_millis(2_500),
        "speaking ended by max_speaking_ms, after {spoke:?}"
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    let played = len(&speaker);
    assert!(
        played < SPEAKER_BPS * 2,
        "playback stopped at the timeout ({played} bytes)"
    );
    // Released at last, long after the utterance ended: nothing happens.
    assert!(held.elapsed() > Duration::from_secs(1));
    press(&s, false).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let d = device(&s).await;
    assert_eq!(
        (d["status"].as_str(), d["led"].as_bool()),
        (Some("idle"), Some(false))
    );
    assert_eq!(len(&speaker), played);
}

#[tokio::test]
async fn the_recognisers_model_is_made_while_the_visitor_still_speaks() {
    let s = sim_server(|_| {}).await;
    let models = s.dir.path().join("asr");
    let built = || {
        std::fs::read_dir(&models).is_ok_and(|d| {
            d.flatten()
                .any(|e| e.path().extension().is_some_and(|x| x == "lm"))
        })
    };
    assert!(!built(), "no model before anyone speaks");
    press(&s, true).await;
    wait_status(&s, "listening", Duration::from_secs(2)).await;
    let start = Instant::now();
    while !built() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the offline recogniser's model is built while the button is held"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(device(&s).await["status"], "listening", "still listening");
    press(&s, false).await;
    follow_until_idle(&s, Duration::from_secs(40)).await;
}

#[tokio::test]
async fn the_processing_timeout_fires_when_a_provider_hangs() {
    // A speech recogniser that accepts connections and never answers.
    let hang = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = hang.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((conn, _)) = hang.accept().await {
            held.push(conn);
        }
    });
    let s = sim_server(|c| c.kiosk.max_processing_ms = 800).await;
    s.put_json(
        "/api/v1/settings",
        json!({"asr": {"provider": "openai", "base_url": format!("http://{addr}/v1")}}),
        200,
    )
    .await;
    press(&s, true).await;
    wait_status(&s, "listening", Duration::from_secs(2)).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    press(&s, false).await;
    wait_status(&s, "processing", Duration::from_secs(2)).await;
    let processing = Instant::now();
    let seen = follow_until_idle(&s, Duration::from_secs(5)).await;
    let took = processing.elapsed();
    assert_eq!(statuses(&seen), ["processing", "idle"], "{seen:?}");
    assert!(
        took >= Duration::from_millis(600) && took < Duration::from_millis(2_500),
        "processing ended by max_processing_ms, after {took:?}"
    );
}

#[tokio::test]
async fn the_button_route_needs_a_simulated_button() {
    let none = Server::start_with(|c| c.devices = DeviceMode::None).await;
    let v = none
        .post_json("/api/v1/internal/device/ptt", json!({"pressed": true}), 503)
        .await;
    crate::support::assert_error(&v);
    assert_eq!(
        none.get_json("/api/v1/health", 200).await["device"],
        json!({"audio": "absent", "ptt": "absent", "display": "absent", "choice": "absent"})
    );
    none.post_json(
        "/api/v1/internal/device/ptt",
        json!({"pressed": "yes"}),
        400,
    )
    .await;

    // Real devices only, on a machine that has none: each is reported, the server runs on.
    let real = Server::start_with(|c| {
        c.devices = DeviceMode::Real;
        c.ptt.chip = "/dev/no-such-gpiochip".into();
        c.audio.playback_device = "hw:77".to_string().try_into().unwrap();
        c.audio.capture_device = "hw:77".to_string().try_into().unwrap();
    })
    .await;
    let v = real
        .post_json("/api/v1/internal/device/ptt", json!({"pressed": true}), 409)
        .await;
    crate::support::assert_error(&v);
    // The audio threads open their devices after the start: their failure comes a moment later,
    // the microphone's too, though nobody has pressed the button.
    let start = Instant::now();
    let health = loop {
        let health = real.get_json("/api/v1/health", 200).await["device"].clone();
        let audio = health["audio"].as_str().unwrap();
        if (audio.contains("playback") && audio.contains("capture"))
            || start.elapsed() > Duration::from_secs(10)
        {
            break health;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        health["ptt"].as_str().unwrap().starts_with("absent"),
        "{health}"
    );
    let audio = health["audio"].as_str().unwrap();
    assert!(
        audio.contains("playback") && audio.contains("capture"),
        "{health}"
    );
}

#[tokio::test]
async fn launch_config_shows_the_device_settings_and_applies_the_volume_at_once() {
    const LAUNCH: &str = "/api/v1/config/launch";
    let s = Server::start_with(|c| {
        c.devices = DeviceMode::None;
        c.audio.period_frames = 400;
    })
    .await;
    let launch = s.get_json(LAUNCH, 200).await;
    let volume = launch_param(&launch, "audio.volume");
    assert_eq!(
        (&volume["value"], &volume["requires_restart"]),
        (&json!(80), &json!(false))
    );
    let period = launch_param(&launch, "audio.period_frames");
    assert_eq!(
        (&period["value"], &period["requires_restart"]),
        (&json!(400), &json!(true))
    );
    for path in [
        "audio.capture_device",
        "ptt.chip",
        "ptt.key",
        "display.backend",
    ] {
        assert_eq!(
            launch_param(&launch, path)["requires_restart"],
            true,
            "{path}"
        );
    }

    // The volume alone: in force at once, no restart.
    let put = |params: Value, status: u16| {
        let s = &s;
        async move {
            s.put_json(LAUNCH, json!({ "params": params }), status)
                .await
        }
    };
    assert_eq!(
        put(json!([{"path": "audio.volume", "value": 35}]), 200).await,
        json!({"status": "saved", "requires_restart": false})
    );
    let settings = s.get_json("/api/v1/settings", 200).await;
    assert_eq!(settings["kiosk"]["volume"], 35);
    let launch = s.get_json(LAUNCH, 200).await;
    let volume = launch_param(&launch, "audio.volume");
    assert_eq!(volume["value"], 35);
    assert!(volume.get("pending").is_none(), "{volume}");

    // Checked whole: a bad volume or a bad neighbour changes nothing.
    crate::support::assert_error(&put(json!([{"path": "audio.volume", "value": 101}]), 400).await);
    crate::support::assert_error(
        &put(
            json!([{"path": "audio.volume", "value": 10}, {"path": "audio.buffer_frames", "value": "big"}]),
            400,
        )
        .await,
    );
    assert_eq!(
        s.get_json("/api/v1/settings", 200).await["kiosk"]["volume"],
        35
    );

    // With a restart parameter, the answer says so; the volume still applies at once.
    assert_eq!(
        put(
            json!([{"path": "audio.period_frames", "value": 1024}, {"path": "audio.volume", "value": 60}]),
            200
        )
        .await,
        json!({"status": "saved", "requires_restart": true})
    );
    let launch = s.get_json(LAUNCH, 200).await;
    assert_eq!(launch_param(&launch, "audio.volume")["value"], 60);
    let period = launch_param(&launch, "audio.period_frames");
    assert_eq!(
        (&period["value"], &period["pending"]),
        (&json!(400), &json!(1024))
    );
}

/// The visitor's session belongs to the kiosk: an administrator (loopback in setup mode) may
/// watch it, but its input is refused and the kiosk goes on speaking. (Before conversation
/// access, any watcher's `interrupt` silenced the kiosk.)
#[tokio::test]
async fn a_watcher_of_the_kiosk_session_cannot_steer_it() {
    let s = sim_server(|_| {}).await;
    // Silence in the mic: the kiosk says it did not catch that.
    press(&s, true).await;
    wait_status(&s, "listening", Duration::from_secs(2)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    press(&s, false).await;
    let sessions = s.get_json("/api/v1/sessions", 200).await;
    let id = sessions[0]["id"].as_str().unwrap().to_string();
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{}/ws/chat/{id}", s.addr))
        .await
        .unwrap();
    wait_status(&s, "speaking", Duration::from_secs(30)).await;
    use futures_util::SinkExt;
    ws.send(tokio_tungstenite::tungstenite::Message::text(
        json!({"type": "interrupt"}).to_string(),
    ))
    .await
    .unwrap();
    let refused = loop {
        let frame = tokio::time::timeout(Duration::from_secs(5), ws.next())
            .await
            .expect("an answer to the interrupt")
            .unwrap()
            .unwrap();
        let v: Value = serde_json::from_str(frame.to_text().unwrap_or("")).unwrap_or_default();
        if v["type"] == "error" {
            break v;
        }
    };
    assert_eq!(refused["code"], "forbidden", "{refused}");
    assert_eq!(device(&s).await["status"], "speaking", "the kiosk goes on");
}

/// Configures the assistive speaker (simulated: `DATA_DIR/sim/assistive.raw`).
fn with_assistive(c: &mut Config) {
    c.audio.assistive_playback_device = Some("default".to_string().try_into().unwrap());
}

fn assistive_path(d: &Value) -> PathBuf {
    PathBuf::from(
        d["sim_audio"]["assistive"]
            .as_str()
            .expect("an assistive file"),
    )
}

fn samples(path: &Path) -> Vec<i16> {
    pcm::samples_from_le(&std::fs::read(path).unwrap_or_default())
}

/// Polls until `path` holds `want` bytes (the assistive speaker's end is not reported: it plays
/// along, at the wall clock's pace like the speaker).
async fn wait_len(path: &Path, want: u64, within: Duration) {
    let start = Instant::now();
    while len(path) != want {
        assert!(
            start.elapsed() < within,
            "{}: {} bytes, not {want}",
            path.display(),
            len(path)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Issue 31, limited hearing: the assistive speaker plays what the speaker plays (the test
/// sound, a reply) sample for sample, at `kiosk.assistive_volume` (a gain of volume² on the
/// samples, as the speaker's volume without a mixer), and a press silences both at once.
#[tokio::test]
async fn the_assistive_speaker_plays_every_reply_at_its_own_volume_and_a_press_stops_both() {
    let s = sim_server(with_assistive).await;
    let d = device(&s).await;
    assert_eq!(d["health"]["audio"], "sim");
    let (mic, speaker) = sim_paths(&d);
    let assistive = assistive_path(&d);
    let v = s
        .put_json(
            "/api/v1/settings",
            json!({"kiosk": {"assistive_volume": 40}}),
            200,
        )
        .await;
    assert_eq!(v["settings"]["kiosk"]["assistive_volume"], 40);
    assert_eq!(v["settings"]["kiosk"]["volume"], 80);
    // The devices follow the settings within a second.
    tokio::time::sleep(Duration::from_millis(1_500)).await;

    // The test sound at 100 %: the speaker has the chime as it is, the assistive speaker the
    // same chime at 40 % (a gain of 0.16).
    s.post_json("/api/v1/kiosk/test-sound", json!({"volume": 100}), 200)
        .await;
    wait_status(&s, "speaking", Duration::from_secs(2)).await;
    follow_until_idle(&s, Duration::from_secs(5)).await;
    let chime = len(&speaker);
    assert_eq!(chime, SPEAKER_BPS * 6 / 10, "0.6 s of chime");
    wait_len(&assistive, chime, Duration::from_secs(2)).await;
    let (loud, quiet) = (samples(&speaker), samples(&assistive));
    let expected: Vec<i16> = loud.iter().map(|&v| (v as f32 * 0.16) as i16).collect();
    assert_eq!(quiet, expected, "the same samples at the assistive volume");
    let ratio = pcm::rms(&quiet) / pcm::rms(&loud);
    println!("test sound: assistive/speaker RMS ratio {ratio:.4} (0.16 asked)");
    assert!((ratio - 0.16).abs() < 0.005, "{ratio}");

    // A visitor's reply, played to its end: the speaker at 80 % (0.64), the assistive speaker
    // at 40 % (0.16), a quarter of the speaker's amplitude.
    let (question, spoken_for) = spoken("What time does the museum open today?");
    std::fs::write(&mic, &question).unwrap();
    press(&s, true).await;
    wait_status(&s, "listening", Duration::from_secs(2)).await;
    tokio::time::sleep(spoken_for + Duration::from_millis(200)).await;
    press(&s, false).await;
    follow_until_idle(&s, Duration::from_secs(40)).await;
    let full = len(&speaker);
    assert!(
        full > chime + SPEAKER_BPS,
        "a reply of over a second played"
    );
    wait_len(&assistive, full, Duration::from_secs(2)).await;
    let loud = &samples(&speaker)[chime as usize / 2..];
    let quiet = &samples(&assistive)[chime as usize / 2..];
    let ratio = pcm::rms(quiet) / pcm::rms(loud);
    println!("reply: assistive/speaker RMS ratio {ratio:.4} (0.25 asked)");
    assert!((ratio - 0.25).abs() < 0.01, "{ratio}");

    // The next reply, cut by a press: both speakers stop at once.
    press_while_the_reply_plays(&s, spoken_for, &assistive, full).await;
    press(&s, false).await;
    follow_until_idle(&s, Duration::from_secs(2)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let cut = (len(&speaker), len(&assistive));
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(
        (len(&speaker), len(&assistive)),
        cut,
        "both stopped: neither file grows"
    );
    let (a, b) = (cut.0 - full, cut.1 - full);
    println!("cut reply: speaker {a} bytes, assistive speaker {b} bytes");
    assert!(a < full / 2 && b < full / 2, "{cut:?} of {full}");
    // Cut at the same moment: within a tenth of a second of each other.
    assert!(a.abs_diff(b) <= SPEAKER_BPS / 10, "{a} and {b} bytes");
}
