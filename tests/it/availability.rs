//! Availability within opening hours at a simulated clock: a real kiosk (simulated devices)
//! whose providers are a fake OpenAI-compatible server on a real socket, which the test stops
//! (the provider is down) and starts again on the same address, while it steps the kiosk's
//! clock through a museum day; then the console shows the percentage in headless Chromium.

use std::sync::Arc;
use std::time::{Duration, Instant};

use docent::engine::hours::LocalTime;
use fake_openai::FakeOpenAi;
use serde_json::{Value, json};

use crate::console_staff::window;
use crate::support::browser::Browser;
use crate::support::clock::SimClock;
use crate::support::{Server, sign_in};

const PASSWORD: &str = "availability-password";

/// Wednesday 25 November 2026 at `hour:minute`.
fn at(hour: u8, minute: u8) -> LocalTime {
    LocalTime::new(2026, 11, 25, hour, minute)
}

/// A kiosk at `clock` on `dir`, its client the signed-in administrator.
async fn kiosk(dir: tempfile::TempDir, clock: &Arc<SimClock>) -> Server {
    let mut s = Server::start_at(dir, clock.clone(), |c| {
        c.access.admin_password = Some(PASSWORD.into());
        c.devices = docent::config::DeviceMode::Sim;
    })
    .await;
    let cookie = sign_in(&s, PASSWORD).await;
    s.as_admin(&cookie);
    s
}

/// Every provider at `fake`, open every day 10:00-18:00.
async fn configure(s: &Server, fake: &FakeOpenAi) {
    let base = fake.base_url();
    let day = json!({"open": "10:00", "close": "18:00"});
    s.put_json(
        "/api/v1/settings",
        json!({
            "llm": {"provider": "openai", "base_url": base, "api_key": "k", "model": "fake"},
            "asr": {"provider": "openai", "base_url": base, "api_key": "k", "model": "fake-whisper"},
            "tts": {"provider": "openai", "base_url": base, "api_key": "k", "model": "fake-tts", "voice": "alloy"},
            "hours": {"enabled": true, "week": [day, day, day, day, day, day, day]},
        }),
        200,
    )
    .await;
}

/// Waits until the sampler's last sample is at `time` and says what `want` says (`open`,
/// `serving`, or neither); returns the availability then.
async fn sampled(s: &Server, time: LocalTime, want: Value) -> Value {
    let start = Instant::now();
    loop {
        let v = s.get_json("/api/v1/system/availability", 200).await;
        let last = &v["last_sample"];
        let says = |(k, w): (&String, &Value)| &last[k.as_str()] == w;
        if last["at"] == time.to_string() && want.as_object().unwrap().iter().all(says) {
            return v;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no sample at {time} with {want} within 60 s: {v}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_day_with_the_provider_down_half_an_hour_is_93_75_percent_available() {
    let fake = FakeOpenAi::start().await;
    let addr = fake.addr;
    let clock = Arc::new(SimClock::at(at(9, 0)));
    let s = kiosk(tempfile::tempdir().unwrap(), &clock).await;
    configure(&s, &fake).await;

    // 09:00, closed; 10:00, open and serving.
    sampled(&s, at(9, 0), json!({"open": false, "serving": true})).await;
    clock.set(at(10, 0));
    let v = sampled(&s, at(10, 0), json!({"open": true, "serving": true})).await;
    assert_eq!(v["open_secs"], 0, "09:00-10:00 was closed: {v}");
    clock.set(at(12, 0));
    let v = sampled(&s, at(12, 0), json!({"serving": true})).await;
    assert_eq!(
        (v["open_secs"].as_u64(), v["serving_secs"].as_u64()),
        (Some(7200), Some(7200)),
        "{v}"
    );

    // 12:00: the provider's server stops; the sampler sees it, as the health route does.
    drop(fake);
    sampled(&s, at(12, 0), json!({"serving": false})).await;
    let health = s.get_json("/api/v1/health", 200).await;
    assert_eq!(health["status"], "degraded", "{health}");

    // 12:30: it answers again on the same address.
    clock.set(at(12, 30));
    let fake = FakeOpenAi::start_on(addr).await;
    let v = sampled(&s, at(12, 30), json!({"serving": true})).await;
    assert_eq!(
        (v["open_secs"].as_u64(), v["serving_secs"].as_u64()),
        (Some(9000), Some(7200)),
        "{v}"
    );

    // 18:00 closes; 19:00.
    clock.set(at(18, 0));
    sampled(&s, at(18, 0), json!({"serving": true})).await;
    clock.set(at(19, 0));
    let v = sampled(&s, at(19, 0), json!({"open": false, "serving": true})).await;
    assert_eq!(
        v["days"],
        json!([{"date": "2026-11-25", "open_secs": 28_800, "serving_secs": 27_000}]),
        "{v}"
    );
    assert_eq!(v["open_secs"], 28_800, "{v}");
    assert_eq!(v["serving_secs"], 27_000, "{v}");
    assert_eq!(v["percent"], 93.75, "{v}");
    // The route takes a period, and refuses one it does not keep.
    let one = s.get_json("/api/v1/system/availability?days=1", 200).await;
    assert_eq!(one["percent"], 93.75, "{one}");
    // The metrics carry it.
    let scrape = s
        .get("/metrics")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        "docent_availability_ratio 0.9375",
        "docent_availability_open_seconds 28800",
        "docent_availability_serving_seconds 27000",
    ] {
        assert!(scrape.lines().any(|l| l == line), "{line} in:\n{scrape}");
    }
    s.get_json("/api/v1/system/availability?days=0", 400).await;
    s.get_json("/api/v1/system/availability?days=401", 400)
        .await;

    // The dashboard and the statistics page say it.
    let mut b = Browser::launch().await;
    window(&mut b, 1280).await;
    b.goto(&format!("{}/console/login", s.base)).await;
    b.type_into("password", PASSWORD).await;
    b.press_enter().await;
    // The sign-in's password hash takes a while on a busy machine.
    let loaded = "document.readyState === 'complete' ? location.pathname : ''";
    b.wait_within(loaded, json!("/console/"), Duration::from_secs(60))
        .await;
    b.goto(&s.url("/console/")).await;
    let text = "Available 93.8 % of opening hours, last 30 days.";
    b.wait_for(
        "document.getElementById('availability').textContent",
        json!(text),
    )
    .await;
    b.goto(&s.url("/console/statistics")).await;
    b.wait_for(
        "document.getElementById('availability').textContent",
        json!(text),
    )
    .await;
    b.wait_for(
        "document.getElementById('avail-days').innerText.replace(/\\s+/g, ' ').trim()",
        json!("2026-11-25 93.8 % of 8.0 h open"),
    )
    .await;
    drop(fake);
}

/// The time the kiosk was off counts as open and not serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_time_the_kiosk_was_off_in_opening_hours_is_not_available() {
    let fake = FakeOpenAi::start().await;
    let clock = Arc::new(SimClock::at(at(10, 0)));
    let s = kiosk(tempfile::tempdir().unwrap(), &clock).await;
    configure(&s, &fake).await;
    sampled(&s, at(10, 0), json!({"open": true, "serving": true})).await;
    clock.set(at(11, 0));
    let v = sampled(&s, at(11, 0), json!({"serving": true})).await;
    assert_eq!(
        (v["open_secs"].as_u64(), v["serving_secs"].as_u64()),
        (Some(3600), Some(3600)),
        "{v}"
    );

    // Off from 11:00 to 11:30.
    let dir = s.stop().await;
    clock.set(at(11, 30));
    let s = kiosk(dir, &clock).await;
    let v = sampled(&s, at(11, 30), json!({})).await;
    assert_eq!(
        (v["open_secs"].as_u64(), v["serving_secs"].as_u64()),
        (Some(5400), Some(3600)),
        "{v}"
    );
    assert_eq!(v["percent"], 66.67, "{v}");
}
