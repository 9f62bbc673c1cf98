//! Kiosk loop latencies, run by `cargo bench --bench device`.
//!
//! A kiosk with simulated devices (the real `alsa` calls over alsa-lib's file/null plugins, the
//! in-memory button) runs in this process, with an instant provider: the tests' OpenAI-compatible
//! fake (`fake-openai`) answering at once (recognition, the reply streamed as server-sent events,
//! 3 s of speech), over loopback with TCP_NODELAY (without it, Nagle's algorithm meeting delayed
//! ACKs adds 40 ms to a streamed reply, which is the test server's doing, not the kiosk's). The bench
//! holds the simulated button like a visitor and measures, over `ROUNDS` rounds:
//!
//! - release -> the first reply sample written to ALSA (`writei` returned): the button thread's
//!   debounce, the kiosk loop, recognition, reply and speech from the provider, the playback
//!   thread;
//! - press during speech -> playback stopped (`snd_pcm_drop` returned).
//!
//! Each round: hold 400 ms (longer than a tap), release, wait for the reply to play, 100 ms into
//! it press again (the barge-in is the next round's press).
//!
//! - a recorded answer chosen on the screen -> its first sample written to ALSA: the touch on
//!   the question's row, the kiosk loop, the turn finding the curator's recording (10 s) and
//!   reading its first piece from the blob store, the playback thread. Each round cuts the
//!   answer with a touch (which opens the question screen again) and chooses it again.

use std::time::{Duration, Instant};

use docent::config::DeviceMode;
use docent::device::audio::AudioEvent;
use docent::device::choice::Choose;
use docent::device::display::questions;
use docent::engine::live::Status;
use docent_test_support::bench as support;
use docent_test_support::send_ok;
use fake_openai::{Chat, FakeOpenAi, Speech, Transcription};
use serde_json::json;
use support::{Kiosk, get_json};
use tokio::sync::broadcast;

const ROUNDS: usize = 40;
const HOLD: Duration = Duration::from_millis(400);
const INTO_REPLY: Duration = Duration::from_millis(100);
const TARGET_RELEASE_MS: f64 = 20.0;
const TARGET_STOP_MS: f64 = 30.0;
const TARGET_RECORDED_MS: f64 = 150.0;

fn main() {
    support::block_on(run());
}

async fn run() {
    let provider = instant_provider().await;
    let base = provider.base_url();

    let dir = tempfile::tempdir().expect("temp dir");
    let kiosk = Kiosk::start(dir.path(), |c| c.devices = DeviceMode::Sim).await;
    let ready = &kiosk.ready;
    let engine = ready.engine.clone();
    tokio::task::spawn_blocking(move || {
        engine.update_settings(&json!({
            "llm": {"provider": "openai", "base_url": base},
            "asr": {"provider": "openai", "base_url": base},
            "tts": {"provider": "openai", "base_url": base},
        }))
    })
    .await
    .unwrap()
    .expect("settings");
    // The default character speaks with the offline voice; this one speaks through the provider.
    let http = reqwest::Client::new();
    let site = kiosk.site();
    let characters = get_json(&http, &format!("{site}/api/v1/characters")).await;
    let mut character = characters[0].clone();
    let id = character["id"].as_str().expect("a character").to_string();
    character["voice_provider"] = json!("openai");
    character["voice_type"] = json!("alloy");
    send_ok(
        http.put(format!("{site}/api/v1/characters/{id}"))
            .json(&character),
        "character updated",
    )
    .await;

    let devices = ready.devices.clone();
    let button = devices.sim_button.clone().expect("simulated button");
    let audio = devices.audio.clone().expect("audio");
    let mut events = audio.subscribe();
    let mut state = devices.state.clone();

    let mut release = Vec::new();
    let mut stop = Vec::new();
    button.set(true);
    for round in 0..=ROUNDS {
        state
            .wait_for(|s| s.status == Status::Listening)
            .await
            .expect("listening");
        tokio::time::sleep(HOLD).await;
        drain(&mut events);
        let released = Instant::now();
        button.set(false);
        let playing = next(&mut events, |e| match e {
            AudioEvent::Playing { at, .. } => Some(at),
            _ => None,
        })
        .await;
        tokio::time::sleep(INTO_REPLY).await;
        drain(&mut events);
        let pressed = Instant::now();
        button.set(true);
        let stopped = next(&mut events, |e| match e {
            AudioEvent::Stopped { at, .. } => Some(at),
            _ => None,
        })
        .await;
        // The first round warms up connections and caches.
        if round > 0 {
            release.push(ms(playing - released));
            stop.push(ms(stopped - pressed));
        }
    }
    button.set(false);

    let (r50, r95, rmax) = stats(&mut release);
    let (s50, s95, smax) = stats(&mut stop);
    println!("\nkiosk loop, simulated devices, instant provider, {ROUNDS} rounds");
    println!(
        "{:58}  {:>7}  {:>7}  {:>7}  target",
        "figure (ms)", "p50", "p95", "max"
    );
    println!("{}", "-".repeat(104));
    row(
        "button release -> first reply sample written to ALSA",
        (r50, r95, rmax),
        TARGET_RELEASE_MS,
    );
    row(
        "press during speech -> playback stopped",
        (s50, s95, smax),
        TARGET_STOP_MS,
    );
    let mut recorded = recorded_answer(&http, &site, &id, &devices, &mut events).await;
    row(
        "recorded answer chosen -> first sample written to ALSA",
        stats(&mut recorded),
        TARGET_RECORDED_MS,
    );
    kiosk.stop().await;
}

/// The question on the screen and its recorded answer (a 10 s tone as WAV); then `ROUNDS`
/// times: the row touched -> the recording's first sample written; a touch cuts it.
async fn recorded_answer(
    http: &reqwest::Client,
    site: &str,
    id: &str,
    devices: &docent::device::Devices,
    events: &mut broadcast::Receiver<AudioEvent>,
) -> Vec<f64> {
    let question = "When does the museum open?";
    let faq = format!("Q: {question}\nA: The museum opens at nine.\n");
    let form = reqwest::multipart::Form::new().part(
        "files",
        reqwest::multipart::Part::bytes(faq.into_bytes()).file_name("faq.txt"),
    );
    send_ok(
        http.post(format!("{site}/api/v1/characters/{id}/knowledge/files"))
            .multipart(form),
        "knowledge",
    )
    .await;
    let screen = format!("{site}/api/v1/characters/{id}/screen-questions");
    // Put on the screen once indexed.
    for _ in 0..200 {
        let res = http
            .put(&screen)
            .json(&json!({ "questions": [question] }))
            .send()
            .await
            .unwrap();
        if res.status().is_success() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let tone: Vec<i16> = (0..240_000)
        .map(|i| ((i as f64 / 24_000.0 * 330.0 * std::f64::consts::TAU).sin() * 6_000.0) as i16)
        .collect();
    let form = reqwest::multipart::Form::new()
        .text("question", question)
        .part(
            "file",
            reqwest::multipart::Part::bytes(docent::engine::pcm::wav_bytes(&tone, 24_000))
                .file_name("answer.wav"),
        );
    let res = http
        .post(format!("{site}/api/v1/characters/{id}/recordings"))
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201, "recording uploaded");

    let touch = |y: f32| devices.choose(Choose::Touch { x: 0.5, y }).expect("touch");
    let mut state = devices.state.clone();
    let mut out = Vec::new();
    for round in 0..=ROUNDS {
        // A touch opens the question screen (and cuts the answer playing); the kiosk reads
        // the screen's questions once a second, and a touch while it listens does nothing.
        let opened = Instant::now();
        loop {
            touch(0.5);
            let shown = tokio::time::timeout(
                Duration::from_millis(500),
                state.wait_for(|s| s.questions.as_ref().is_some_and(|p| p.rows.len() == 1)),
            )
            .await;
            if shown.is_ok() {
                break;
            }
            assert!(
                opened.elapsed() < Duration::from_secs(20),
                "the question screen"
            );
        }
        drain(events);
        let chosen = Instant::now();
        touch(questions::row_centre(0));
        let playing = next(events, |e| match e {
            AudioEvent::Playing { at, .. } => Some(at),
            _ => None,
        })
        .await;
        if round > 0 {
            out.push(ms(playing - chosen));
        }
        tokio::time::sleep(INTO_REPLY).await;
    }
    // Cut the last one.
    touch(0.5);
    out
}

/// The tests' OpenAI-compatible fake, answering every request at once: recognition, the reply
/// streamed in one delta, 3 s of speech.
async fn instant_provider() -> FakeOpenAi {
    let fake = FakeOpenAi::start().await;
    fake.set_transcription(Transcription::text("When does the museum open?"));
    fake.set_chat(Chat::reply("The museum opens at nine.").deltas(1));
    fake.set_speech(Speech::millis(3_000));
    fake
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn drain(rx: &mut broadcast::Receiver<AudioEvent>) {
    while rx.try_recv().is_ok() {}
}

async fn next(
    rx: &mut broadcast::Receiver<AudioEvent>,
    pick: impl Fn(AudioEvent) -> Option<Instant>,
) -> Instant {
    let wait = async {
        loop {
            match rx.recv().await {
                Ok(e) => {
                    if let Some(at) = pick(e) {
                        return at;
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(e) => panic!("audio events: {e}"),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .expect("the speaker reports within 10 s")
}

/// p50, p95 and max.
fn stats(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.95), v[v.len() - 1])
}

fn row(figure: &str, (p50, p95, max): (f64, f64, f64), target: f64) {
    let verdict = if p95 <= target { "met" } else { "MISSED" };
    println!("{figure:58}  {p50:7.2}  {p95:7.2}  {max:7.2}  p95 <= {target} ms ({verdict})");
}
