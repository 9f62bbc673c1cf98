//! What `GET /metrics` costs, run by `cargo bench --bench metrics` (`./x bench`):
//! - a scrape's CPU time in the server: the release binary as a child process (setup mode, so
//!   loopback reads the metrics), its registries populated by text turns, then `SCRAPES` scrapes
//!   over one keep-alive connection on a real socket; the child's CPU time (from /proc, in clock
//!   ticks) divided by the scrapes, HTTP handling included (budget: 1 ms);
//! - a turn's share: the instruments a spoken turn touches (a visit, a question, an answer, a
//!   recognition with its confidence, the first audio, three provider calls), `ROUNDS` times on
//!   this thread's CPU clock, against a text turn's CPU time in an engine of this process
//!   (offline engine, no audio).

use std::sync::Arc;
use std::time::{Duration, Instant};

use docent::config::Config;
use docent::engine::access::Owner;
use docent::engine::live::Event;
use docent::engine::metrics::{Metrics, Outcome, Via};
use docent::engine::providers::Stage;
use docent::engine::sessions::NewSession;
use docent::engine::{Engine, SessionId};
use docent_test_support::bench as support;
use serde_json::json;

const SCRAPES: usize = 2_000;
const ROUNDS: u32 = 100_000;
const TURNS: usize = 50;
/// A scrape's CPU budget.
const SCRAPE_BUDGET: Duration = Duration::from_millis(1);

fn main() {
    support::block_on(run());
}

async fn run() {
    let instruments = turn_instruments();
    let turn = text_turn().await;
    println!(
        "a turn's instruments: {} ns of CPU; a text turn: {:.2} ms of CPU; share {:.4} %",
        instruments.as_nanos(),
        millis(turn),
        100.0 * instruments.as_secs_f64() / turn.as_secs_f64()
    );
    let (scrape, bytes) = scrape().await;
    println!(
        "a scrape: {:.1} µs of the server's CPU ({bytes} bytes, {SCRAPES} scrapes; budget {} µs)",
        micros(scrape),
        SCRAPE_BUDGET.as_micros()
    );
    assert!(
        scrape <= SCRAPE_BUDGET,
        "a scrape costs at most 1 ms of CPU"
    );
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// This thread's CPU time so far.
fn thread_cpu() -> Duration {
    let mut t: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// The CPU time of the instruments one spoken turn touches.
fn turn_instruments() -> Duration {
    let m = Metrics::default();
    let sure: Vec<(String, f64)> = ["can", "i", "bring", "my", "dog"]
        .iter()
        .map(|w| (w.to_string(), 0.8))
        .collect();
    let took = Duration::from_millis(420);
    let start = thread_cpu();
    for _ in 0..ROUNDS {
        m.visit();
        m.question(Via::Voice, false);
        m.recognised(took, &sure);
        m.first_audio(took);
        for stage in Stage::ALL {
            m.provider_call(stage, true);
        }
        m.answer(Outcome::Answered);
    }
    (thread_cpu() - start) / ROUNDS
}

/// A text turn's CPU time (the whole process) in an engine of this process: the offline
/// engine answers, nobody listens to audio.
async fn text_turn() -> Duration {
    let dir = tempfile::tempdir().expect("temp dir");
    let engine: Arc<Engine> = Engine::open(Config {
        data_dir: dir.path().to_path_buf(),
        ..Config::default()
    })
    .expect("engine");
    let visit = engine
        .create_session(
            NewSession {
                mode: None,
                character_id: None,
            },
            Owner::Kiosk,
        )
        .expect("a visit");
    let sid = SessionId::parse(&visit.session_id).expect("id");
    let live = engine.live(&sid).expect("live");
    let mut events = live.subscribe();
    let said = |engine: &Arc<Engine>, i: usize| {
        let question = format!("What is on show in room {i}?");
        engine
            .post_message(&sid, &question, &Owner::Kiosk)
            .expect("posted")
    };
    // One turn first: the offline engine's models are made on first use.
    let mut turns = Vec::with_capacity(TURNS + 1);
    turns.push(said(&engine, 0));
    let mut timed = None;
    loop {
        match events.recv().await {
            Ok(Event::Transcript {
                speaker: "assistant",
                is_final: true,
                turn_seq,
                ..
            }) if Some(&turn_seq) == turns.last() => {
                if turns.len() == 1 {
                    timed = Some(support::own_cpu_time());
                }
                if turns.len() > TURNS {
                    break;
                }
                turns.push(said(&engine, turns.len()));
            }
            Ok(_) => {}
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
            Err(e) => panic!("the visit's events ended: {e}"),
        }
    }
    (support::own_cpu_time() - timed.expect("the first turn")) / TURNS as u32
}

/// A scrape's CPU time in the release binary, and its size.
async fn scrape() -> (Duration, usize) {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = support::Docent::start(dir.path(), None).await;
    let base = server.base();
    let http = reqwest::Client::new();
    // Populate: sessions, questions and answers, requests of several classes.
    for i in 0..5 {
        let created = support::get_json(&http, &format!("{base}/api/v1/health")).await;
        assert!(created.is_object());
        let session: serde_json::Value = http
            .post(format!("{base}/api/v1/sessions"))
            .json(&json!({}))
            .send()
            .await
            .expect("a session")
            .json()
            .await
            .expect("its id");
        let id = session["session_id"].as_str().expect("session_id");
        let res = http
            .post(format!("{base}/api/v1/sessions/{id}/message"))
            .json(&json!({ "text": format!("What is in room {i}?") }))
            .send()
            .await
            .expect("a message");
        assert!(res.status().is_success(), "{}", res.status());
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let url = format!("{base}/metrics");
    let first = http.get(&url).send().await.expect("a scrape");
    assert_eq!(first.status(), 200);
    let bytes = first.text().await.expect("text").len();
    let pid = server.pid().to_string();
    let started = Instant::now();
    let before = support::cpu_time(&pid);
    for _ in 0..SCRAPES {
        let body = http
            .get(&url)
            .send()
            .await
            .expect("a scrape")
            .bytes()
            .await
            .expect("its body");
        assert!(body.len() > 1000);
    }
    let cpu = support::cpu_time(&pid) - before;
    println!(
        "{SCRAPES} scrapes in {:.2} s of wall time; the server used {:.2} s of CPU",
        started.elapsed().as_secs_f64(),
        cpu.as_secs_f64()
    );
    server.stop().await;
    (cpu / SCRAPES as u32, bytes)
}
