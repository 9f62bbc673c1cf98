//! Turn-path benchmarks with an instant fake provider (the OpenAI-compatible fake of the tests,
//! on loopback): end of user input to the first reply audio byte over WebSocket and gRPC,
//! interrupt to the last audio byte of the old turn, and many WebSocket sessions taking turns.
//!
//! Also the offline engine's voice: end of user input to the first and the last reply audio
//! byte of a long one-sentence answer read out of the knowledge and spoken by espeak-ng.
//!
//! `cargo bench --bench turns`. The server runs in this process (like the integration tests),
//! so the RSS figure includes the load generator; `BENCH_SESSIONS_SECS` shortens the soak.
//! `BENCH_ONLY=local` runs only the offline voice figures; `BENCH_ESPEAK_EMULATED=1` runs
//! espeak-ng under `qemu-x86_64-static` (software emulation, like the simulated board).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use docent::proto::voice_llm_input::Input;
use docent::proto::voice_llm_service_client::VoiceLlmServiceClient;
use docent::proto::{VoiceLlmConfig, VoiceLlmInput};
use docent_test_support::bench as support;
use fake_openai::{Chat, FakeOpenAi, Speech};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use support::Kiosk;
use tokio_tungstenite::tungstenite::Message;

const TURNS: usize = 1_000;
const LOCAL_TURNS: usize = 20;
/// The offline engine's answer to "How much do tickets cost?": one long sentence.
const LONG_ANSWER: &str = "Tickets cost 12 euros for adults, 8 euros for students and 6 euros \
for seniors, and children under twelve enter free of charge on every day of the week.";
const INTERRUPTS: usize = 50;
const SESSIONS: usize = 200;

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

fn main() {
    let _emulated = std::env::var_os("BENCH_ESPEAK_EMULATED").map(|_| emulate_espeak());
    support::block_on(run());
}

async fn run() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let fake = FakeOpenAi::start().await;
    fake.set_chat(Chat::reply("The museum closes at six. Tickets cost twelve euros.").deltas(4));
    fake.set_speech(Speech::millis(300));
    let dir = tempfile::tempdir().expect("temp dir");
    let kiosk = start_server(dir.path(), &fake.base_url()).await;
    let addr = kiosk.ready.addr;

    if docent::engine::providers::find_program("espeak-ng").is_some() {
        let (first, last) = local_voice(addr).await;
        let how = if std::env::var_os("BENCH_ESPEAK_EMULATED").is_some() {
            "espeak-ng emulated"
        } else {
            "espeak-ng native"
        };
        report(
            &format!(
                "Offline voice ({how}): text_input to first audio byte, {}-character sentence",
                LONG_ANSWER.len()
            ),
            &first,
            None,
        );
        report(
            &format!("Offline voice ({how}): text_input to last audio byte"),
            &last,
            None,
        );
    } else {
        println!("espeak-ng is not installed: no offline voice figures");
    }
    if std::env::var("BENCH_ONLY").is_ok_and(|o| o == "local") {
        return;
    }

    let character = openai_character(addr).await;

    let ws = ws_latency(addr, &character).await;
    report("WebSocket: text_input to first audio byte", &ws, Some(20.0));
    let grpc = grpc_latency(addr, &character).await;
    report("gRPC: text input to first audio output", &grpc, Some(20.0));

    fake.set_speech(Speech::millis(4_000));
    let cut = interrupt_latency(addr, &character).await;
    report(
        "WebSocket: interrupt to last audio byte of the old turn",
        &cut,
        Some(30.0),
    );

    fake.set_speech(Speech::millis(300));
    let secs = std::env::var("BENCH_SESSIONS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    soak(addr, &character, secs).await;
}

async fn start_server(dir: &std::path::Path, base_url: &str) -> Kiosk {
    // Every client is the same loopback caller: its share is all of it.
    let kiosk = Kiosk::start(dir, |c| {
        c.sessions.max = SESSIONS + 10;
        c.sessions.max_per_client = SESSIONS + 10;
        c.sessions.max_streams_per_client = SESSIONS + 10;
    })
    .await;
    let addr = kiosk.ready.addr;
    let http = reqwest::Client::new();
    let settings = json!({
        "llm": {"provider": "openai", "base_url": base_url, "model": "fake"},
        "tts": {"provider": "openai", "base_url": base_url, "model": "fake", "voice": "alloy"},
    });
    let res = http
        .put(format!("http://{addr}/api/v1/settings"))
        .json(&settings)
        .send()
        .await
        .expect("settings");
    assert!(res.status().is_success(), "settings: {}", res.status());
    kiosk
}

/// A character that speaks through the fake provider.
async fn openai_character(addr: SocketAddr) -> String {
    let body = json!({"name": "Bench", "voice_provider": "openai", "voice_type": "alloy",
                      "components": {"llm": "openai", "asr": "openai", "tts": "openai"}});
    let res = reqwest::Client::new()
        .post(format!("http://{addr}/api/v1/characters"))
        .json(&body)
        .send()
        .await
        .expect("character");
    let v: Value = res.json().await.expect("character JSON");
    v["id"].as_str().expect("id").to_string()
}

/// Puts an `espeak-ng` that runs the real one under user-mode emulation first on `PATH`; the
/// directory lives as long as the returned guard. Before any thread starts.
fn emulate_espeak() -> tempfile::TempDir {
    let real = docent::engine::providers::find_program("espeak-ng").expect("espeak-ng");
    let qemu = docent::engine::providers::find_program("qemu-x86_64-static")
        .expect("qemu-x86_64-static (qemu-user-static) for BENCH_ESPEAK_EMULATED");
    let dir = tempfile::tempdir().expect("temp dir");
    let wrapper = dir.path().join("espeak-ng");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexec '{}' '{}' \"$@\"\n",
            qemu.display(),
            real.display()
        ),
    )
    .expect("wrapper");
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("wrapper mode");
    let path = std::env::join_paths(std::iter::once(dir.path().to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .expect("PATH");
    // SAFETY: called first thing in `main`, before the runtime or any other thread exists.
    unsafe { std::env::set_var("PATH", path) };
    dir
}

/// A character on the offline engine that knows `LONG_ANSWER`; `LOCAL_TURNS` questions whose
/// answer is that sentence, each timed to its first and its last audio frame.
async fn local_voice(addr: SocketAddr) -> (Vec<Duration>, Vec<Duration>) {
    let http = reqwest::Client::new();
    let body = json!({"name": "Offline", "voice_provider": "local", "voice_type": "en-us",
                      "components": {"llm": "local", "asr": "local", "tts": "local"}});
    let v: Value = http
        .post(format!("http://{addr}/api/v1/characters"))
        .json(&body)
        .send()
        .await
        .expect("character")
        .json()
        .await
        .expect("character JSON");
    let character = v["id"].as_str().expect("id").to_string();
    let form = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(LONG_ANSWER.as_bytes().to_vec()).file_name("tickets.txt"),
    );
    let res = http
        .post(format!(
            "http://{addr}/api/v1/characters/{character}/knowledge/files"
        ))
        .multipart(form)
        .send()
        .await
        .expect("knowledge upload");
    assert_eq!(res.status().as_u16(), 201, "knowledge upload");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let all: Value = http
            .get(format!(
                "http://{addr}/api/v1/characters/{character}/knowledge"
            ))
            .send()
            .await
            .expect("knowledge")
            .json()
            .await
            .expect("knowledge JSON");
        if all["sources"][0]["status"] == "ready" {
            break;
        }
        assert!(Instant::now() < deadline, "knowledge indexed: {all}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let id = session(addr, &character).await;
    let mut ws = socket(addr, &id).await;
    let (mut first, mut last) = (Vec::new(), Vec::new());
    for _ in 0..LOCAL_TURNS {
        ws.send(Message::text(
            json!({"type": "text_input", "text": "How much do tickets cost?"}).to_string(),
        ))
        .await
        .expect("send");
        let sent = Instant::now();
        let mut audio = None;
        loop {
            let msg = tokio::time::timeout(Duration::from_secs(30), ws.next())
                .await
                .expect("reply in time")
                .expect("socket open")
                .expect("frame");
            match msg {
                Message::Binary(_) => {
                    let at = sent.elapsed();
                    audio = Some((audio.map_or(at, |(f, _)| f), at));
                }
                Message::Text(t) => {
                    let v: Value = serde_json::from_str(&t).expect("JSON");
                    assert_ne!(v["type"], "error", "{v}");
                    if v["type"] == "transcript"
                        && v["speaker"] == "assistant"
                        && v["is_final"] == true
                    {
                        assert_eq!(v["text"], LONG_ANSWER);
                        break;
                    }
                }
                _ => {}
            }
        }
        let (f, l) = audio.expect("audio before the final");
        first.push(f);
        last.push(l);
    }
    (first, last)
}

async fn session(addr: SocketAddr, character: &str) -> String {
    let res = reqwest::Client::new()
        .post(format!("http://{addr}/api/v1/sessions"))
        .json(&json!({"character_id": character}))
        .send()
        .await
        .expect("session");
    let v: Value = res.json().await.expect("session JSON");
    v["session_id"].as_str().expect("session id").to_string()
}

async fn socket(addr: SocketAddr, session: &str) -> Socket {
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/ws/chat/{session}"))
        .await
        .expect("ws");
    ws.send(Message::text(
        json!({"type": "audio_output", "enabled": true}).to_string(),
    ))
    .await
    .expect("send");
    ws
}

/// Sends a text turn and waits for its end; returns the time to the first audio frame.
async fn ws_turn(ws: &mut Socket, text: &str) -> Result<Duration, String> {
    ws.send(Message::text(
        json!({"type": "text_input", "text": text}).to_string(),
    ))
    .await
    .map_err(|e| e.to_string())?;
    let sent = Instant::now();
    let mut first_audio = None;
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .map_err(|_| "no reply within 10 s".to_string())?
            .ok_or("socket closed")?
            .map_err(|e| e.to_string())?;
        match msg {
            Message::Binary(_) if first_audio.is_none() => first_audio = Some(sent.elapsed()),
            Message::Text(t) => {
                let v: Value = serde_json::from_str(&t).map_err(|e| e.to_string())?;
                if v["type"] == "error" {
                    return Err(format!("error event: {v}"));
                }
                if v["type"] == "transcript" && v["speaker"] == "assistant" && v["is_final"] == true
                {
                    return first_audio.ok_or_else(|| "final without audio".to_string());
                }
            }
            _ => {}
        }
    }
}

async fn ws_latency(addr: SocketAddr, character: &str) -> Vec<Duration> {
    let id = session(addr, character).await;
    let mut ws = socket(addr, &id).await;
    let mut out = Vec::with_capacity(TURNS);
    for i in 0..TURNS {
        out.push(
            ws_turn(&mut ws, &format!("question {i}"))
                .await
                .expect("turn"),
        );
    }
    out
}

async fn grpc_latency(addr: SocketAddr, character: &str) -> Vec<Duration> {
    let mut client = VoiceLlmServiceClient::connect(format!("http://{addr}"))
        .await
        .expect("grpc");
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let config = VoiceLlmConfig {
        character_id: character.to_string(),
        ..Default::default()
    };
    tx.send(VoiceLlmInput {
        input: Some(Input::Config(config)),
    })
    .await
    .expect("config");
    let mut outputs = client
        .converse(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .expect("converse")
        .into_inner();
    let mut out = Vec::with_capacity(TURNS);
    for i in 0..TURNS {
        tx.send(VoiceLlmInput {
            input: Some(Input::Text(format!("question {i}"))),
        })
        .await
        .expect("text");
        let sent = Instant::now();
        let mut first = None;
        loop {
            let o = tokio::time::timeout(Duration::from_secs(10), outputs.next())
                .await
                .expect("output in time")
                .expect("stream open")
                .expect("output");
            if first.is_none() && o.audio.as_ref().is_some_and(|a| !a.data.is_empty()) {
                first = Some(sent.elapsed());
            }
            if o.is_final {
                break;
            }
        }
        out.push(first.expect("audio before the final"));
    }
    out
}

/// Starts a long reply, interrupts it after its first audio frame and measures how long old
/// audio keeps arriving (the last old frame, seen within a 500 ms quiet window).
async fn interrupt_latency(addr: SocketAddr, character: &str) -> Vec<Duration> {
    let id = session(addr, character).await;
    let mut ws = socket(addr, &id).await;
    let mut out = Vec::with_capacity(INTERRUPTS);
    for i in 0..INTERRUPTS {
        ws.send(Message::text(
            json!({"type": "text_input", "text": format!("long {i}")}).to_string(),
        ))
        .await
        .expect("send");
        loop {
            if let Some(Ok(Message::Binary(_))) = ws.next().await {
                break;
            }
        }
        ws.send(Message::text(json!({"type": "interrupt"}).to_string()))
            .await
            .expect("interrupt");
        let cut = Instant::now();
        let mut last_audio = Duration::ZERO;
        while let Ok(Some(Ok(msg))) =
            tokio::time::timeout(Duration::from_millis(500), ws.next()).await
        {
            if matches!(msg, Message::Binary(_)) {
                last_audio = cut.elapsed();
            }
        }
        out.push(last_audio);
    }
    out
}

/// `SESSIONS` sockets taking text turns for `secs`.
async fn soak(addr: SocketAddr, character: &str, secs: u64) {
    let turns = Arc::new(AtomicUsize::new(0));
    let errors = Arc::new(AtomicUsize::new(0));
    let mut sockets = Vec::with_capacity(SESSIONS);
    for _ in 0..SESSIONS {
        let id = session(addr, character).await;
        sockets.push(socket(addr, &id).await);
    }
    let started = Instant::now();
    let deadline = started + Duration::from_secs(secs);
    let mut tasks = Vec::new();
    for (n, mut ws) in sockets.into_iter().enumerate() {
        let (turns, errors) = (turns.clone(), errors.clone());
        tasks.push(tokio::spawn(async move {
            let mut i = 0;
            while Instant::now() < deadline {
                match ws_turn(&mut ws, &format!("session {n} question {i}")).await {
                    Ok(_) => turns.fetch_add(1, Ordering::Relaxed),
                    Err(e) => {
                        eprintln!("session {n}: {e}");
                        errors.fetch_add(1, Ordering::Relaxed)
                    }
                };
                i += 1;
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let n = turns.load(Ordering::Relaxed);
    println!(
        "{SESSIONS} WebSocket sessions for {secs} s: {n} turns, {:.1} turns/s, {} errors (target 0), RSS {:.1} MB (server and load generator)",
        n as f64 / elapsed,
        errors.load(Ordering::Relaxed),
        rss_mb()
    );
}

fn rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .map(str::to_string)
        })
        .and_then(|l| {
            l.split_whitespace()
                .nth(1)
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn report(name: &str, samples: &[Duration], target_p95_ms: Option<f64>) {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let pick = |p: f64| {
        sorted[((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize - 1].as_secs_f64() * 1e3
    };
    let target = target_p95_ms.map_or(String::new(), |t| {
        format!(
            " (target p95 <= {t} ms: {})",
            if pick(95.0) <= t { "met" } else { "MISSED" }
        )
    });
    println!(
        "{name}: p50 {:.2} ms, p95 {:.2} ms, max {:.2} ms over {}{target}",
        pick(50.0),
        pick(95.0),
        pick(100.0),
        sorted.len()
    );
}
