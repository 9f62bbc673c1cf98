//! Opening hours in the kiosk loop and on the simulated display, at a simulated clock: the real
//! devices layer (`devices = "sim"`: alsa-lib's file plugins, the in-memory button and screen)
//! started with a clock the test sets.

use std::sync::Arc;
use std::time::{Duration, Instant};

use docent::config::{AccessConfig, Config, DeviceMode};
use docent::device::display::player::{CLOSED_BG, CLOSED_TEXT, reopens_text};
use docent::device::display::text::drawn_line;
use docent::device::display::{Console, MemoryScreen};
use docent::device::{Devices, SimAudio};
use docent::engine::Engine;
use docent::engine::hours::LocalTime;

use crate::support::clock::SimClock;
use docent::engine::live::Status;
use serde_json::json;

fn speaker_len(d: &Devices) -> u64 {
    let path = &d.sim_audio.as_ref().expect("simulated audio").speaker;
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// Polls until `done` holds for the kiosk state; returns every status seen on the way.
async fn until(
    d: &Devices,
    what: &str,
    done: impl Fn(&docent::device::KioskState) -> bool,
) -> Vec<Status> {
    let start = Instant::now();
    let mut seen = Vec::new();
    loop {
        let s = d.state.borrow().clone();
        if seen.last() != Some(&s.status) {
            seen.push(s.status);
        }
        if done(&s) {
            return seen;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{what}: not within 20 s ({seen:?}, {s:?})"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits for a frame of `screen` for which `want` holds.
fn frame_where(screen: &MemoryScreen, what: &str, want: impl Fn(&[u32]) -> bool) {
    let end = Instant::now() + Duration::from_secs(10);
    let mut seen = 0;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        let f = screen
            .wait_for_frame(seen, left.max(Duration::from_millis(1)))
            .unwrap_or_else(|| panic!("no frame showing {what} within 10 s"));
        seen = f.count;
        if want(&f.pixels) {
            return;
        }
    }
}

async fn tap(d: &Devices) {
    d.press(true).unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    d.press(false).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_the_hours_the_kiosk_says_it_is_closed_and_opens_on_time() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(Config {
        data_dir: dir.path().to_path_buf(),
        devices: DeviceMode::Sim,
        access: AccessConfig {
            admin_password: Some("hours-test".into()),
            ..AccessConfig::default()
        },
        ..Config::default()
    })
    .unwrap();
    let day = json!({"open": "09:00", "close": "17:00"});
    engine
        .update_settings(&json!({"hours": {
            "enabled": true,
            "week": [day, day, day, day, day, null, null],
            "when_closed": "say",
        }}))
        .unwrap();
    // Wednesday 25 November 2026, 20:00: closed until Thursday 09:00.
    let clock = Arc::new(SimClock::at(LocalTime::new(2026, 11, 25, 20, 0)));
    engine.use_clock(clock.clone());
    let console = Console {
        listen: "127.0.0.1:8080".parse().unwrap(),
        fingerprint: "AB:CD".into(),
    };
    let d = Devices::start(&engine, console).await;
    until(&d, "closed", |s| !s.opening.open).await;
    assert_eq!(d.state.borrow().opening.when, "tomorrow at 09:00");

    // The screen says so.
    let screen = d.sim_screen.clone().expect("simulated screen");
    let size = (screen.width, screen.height);
    let line = reopens_text("tomorrow at 09:00");
    assert_eq!(line, "Open again tomorrow at 09:00.");
    frame_where(&screen, "the closed screen", |px| {
        px[0] == CLOSED_BG && drawn_line(px, size, &line, CLOSED_TEXT).is_some()
    });

    // A press: the closed line is spoken (processing, speaking, idle), and no visit opens.
    let before = speaker_len(&d);
    tap(&d).await;
    let seen = until(&d, "the closed line said", |s| {
        s.status == Status::Idle && speaker_len(&d) > before
    })
    .await;
    assert!(seen.contains(&Status::Speaking), "{seen:?}");
    assert!(!seen.contains(&Status::Listening), "{seen:?}");
    let spoken = speaker_len(&d) - before;
    assert!(
        spoken > SimAudio::SPEAKER_RATE as u64,
        "about two seconds of speech: {spoken} bytes"
    );
    assert_eq!(engine.session_count().unwrap(), 0, "no visit while closed");
    assert!(d.state.borrow().session_id.is_empty());

    // "Nothing": a press does nothing at all.
    engine
        .update_settings(&json!({"hours": {"when_closed": "nothing"}}))
        .unwrap();
    let before = speaker_len(&d);
    tap(&d).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(d.state.borrow().status, Status::Idle);
    assert_eq!(speaker_len(&d), before, "nothing said");

    // Thursday 09:00: open, the screen no longer says closed, and a press is heard.
    clock.set(LocalTime::new(2026, 11, 26, 9, 0));
    until(&d, "open", |s| s.opening.open).await;
    assert_eq!(d.state.borrow().opening.when, "today at 17:00");
    frame_where(&screen, "the kiosk open again", |px| px[0] != CLOSED_BG);
    d.press(true).unwrap();
    until(&d, "listening", |s| {
        s.status == Status::Listening && !s.session_id.is_empty()
    })
    .await;
    d.press(false).unwrap();
    d.stop().await;
    tokio::task::spawn_blocking(move || engine.knowledge.stop())
        .await
        .unwrap();
}
