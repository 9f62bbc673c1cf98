//! The soak's load: `clients` WebSocket chat clients, each with its own session, typing a question,
//! waiting for the final of the answer and thinking a moment, for `duration`; the server's
//! resident memory sampled every `sample_every`; then the caps: WebSockets and connections
//! beyond the configured ones while the kiosk's own visitor (the simulated button) still gets
//! its answer. Shared by `benches/soak` (minutes, figures printed) and its short test.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

pub const MAX_WEBSOCKETS: usize = 220;
pub const MAX_CONNECTIONS: usize = 400;

/// The server's configuration: room for every client, caps just above them, no per-caller
/// message budget (every client is the same loopback caller), the simulated board.
pub const CONFIG: &str = r#"
devices = "sim"
sessions.max = 400
sessions.max_per_client = 400
connections.max_websockets = 220
sessions.max_streams_per_client = 220
connections.max = 400
connections.max_per_peer = 400
sessions.message_burst = 1000000
sessions.message_refill_ms = 1
storage.data_reserve_bytes = 0
"#;

/// The address `docent serve` prints on its first line; the rest of its output is drained.
pub fn listening(out: impl std::io::Read + Send + 'static) -> SocketAddr {
    use std::io::BufRead;
    let mut reader = std::io::BufReader::new(out);
    let mut line = String::new();
    reader.read_line(&mut line).expect("first line");
    std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
    line.trim()
        .rsplit("http://")
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
}

/// A plain-HTTP client (its TLS provider installed, as reqwest is built without one).
fn client_http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .pool_max_idle_per_host(16)
        .build()
        .expect("client")
}

pub struct Load {
    pub clients: usize,
    pub duration: Duration,
    pub sample_every: Duration,
    /// Latency figures are grouped in buckets of this length.
    pub bucket: Duration,
    pub think: Duration,
}

#[derive(Debug, Default)]
pub struct Report {
    /// `(seconds since start, VmRSS in KiB)`.
    pub memory: Vec<(u64, u64)>,
    /// Turn latencies per bucket.
    pub buckets: Vec<Vec<Duration>>,
    pub turns: usize,
    pub errors: Vec<String>,
}

impl Report {
    /// Growth of resident memory under load, in %: from the first sample after a quarter of the
    /// run (warm-up: sessions opening, caches filling) to the last sample under load (the very
    /// last one is taken after the clients left).
    pub fn growth(&self) -> f64 {
        let under_load = &self.memory[..self.memory.len().saturating_sub(1)];
        let end = under_load.last().map_or(0, |m| m.0);
        let base = under_load
            .iter()
            .find(|m| m.0 * 4 >= end)
            .map_or(1, |m| m.1.max(1));
        let last = under_load.last().map_or(base, |m| m.1);
        (last as f64 - base as f64) * 100.0 / base as f64
    }

    pub fn print(&self, bucket: Duration) {
        println!("resident memory (VmRSS):");
        for (t, kib) in &self.memory {
            println!("  {t:>5} s  {:>7.1} MiB", *kib as f64 / 1024.0);
        }
        println!("  growth under load after warm-up: {:+.1} %", self.growth());
        println!("turn latency per {} s:", bucket.as_secs());
        for (i, b) in self.buckets.iter().enumerate() {
            let mut b = b.clone();
            b.sort();
            println!(
                "  {:>4}  turns {:>6}  p50 {:>7}  p95 {:>7}",
                i,
                b.len(),
                ms(percentile(&b, 0.50)),
                ms(percentile(&b, 0.95))
            );
        }
        println!("turns {}  errors {}", self.turns, self.errors.len());
        for e in self.errors.iter().take(10) {
            println!("  error: {e}");
        }
    }
}

pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

pub fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// Resident memory of `pid` in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Runs the chat load against `addr` (a docent whose process is `pid`).
pub async fn chat_load(addr: SocketAddr, pid: u32, load: &Load) -> Report {
    let http = client_http();
    let start = Instant::now();
    let end = start + load.duration;
    let buckets = (load.duration.as_secs_f64() / load.bucket.as_secs_f64()).ceil() as usize;
    let report = Arc::new(Mutex::new(Report {
        buckets: vec![Vec::new(); buckets.max(1)],
        ..Report::default()
    }));
    let sampler = {
        let report = report.clone();
        let every = load.sample_every;
        tokio::spawn(async move {
            loop {
                let t = start.elapsed().as_secs();
                report.lock().unwrap().memory.push((t, rss_kib(pid)));
                if Instant::now() + every > end + every / 2 {
                    break;
                }
                tokio::time::sleep(every).await;
            }
        })
    };
    let mut tasks = Vec::new();
    for i in 0..load.clients {
        let http = http.clone();
        let report = report.clone();
        let (bucket, think) = (load.bucket, load.think);
        tasks.push(tokio::spawn(async move {
            if let Err(e) = client(i, addr, &http, start, end, bucket, think, &report).await {
                report
                    .lock()
                    .unwrap()
                    .errors
                    .push(format!("client {i}: {e}"));
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let _ = sampler.await;
    report
        .lock()
        .unwrap()
        .memory
        .push((start.elapsed().as_secs(), rss_kib(pid)));
    Arc::try_unwrap(report).unwrap().into_inner().unwrap()
}

#[allow(clippy::too_many_arguments)]
async fn client(
    i: usize,
    addr: SocketAddr,
    http: &reqwest::Client,
    start: Instant,
    end: Instant,
    bucket: Duration,
    think: Duration,
    report: &Mutex<Report>,
) -> Result<(), String> {
    let res = http
        .post(format!("http://{addr}/api/v1/sessions"))
        .json(&json!({}))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    if res.status().as_u16() != 201 {
        return Err(format!("session: {}", res.status()));
    }
    let v: Value = res.json().await.map_err(|e| e.to_string())?;
    let sid = v["session_id"].as_str().unwrap_or_default().to_string();
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/ws/chat/{sid}"))
        .await
        .map_err(|e| format!("WebSocket: {e}"))?;
    // Spread the first questions over a second.
    tokio::time::sleep(Duration::from_millis((i as u64 * 7) % 1000)).await;
    let mut n = 0;
    while Instant::now() < end {
        n += 1;
        let asked = Instant::now();
        let q = json!({"type": "text_input", "text": format!("When does the museum open? ({n})")});
        ws.send(Message::text(q.to_string()))
            .await
            .map_err(|e| format!("send: {e}"))?;
        loop {
            let frame = tokio::time::timeout(Duration::from_secs(30), ws.next())
                .await
                .map_err(|_| "no answer within 30 s".to_string())?
                .ok_or("the WebSocket closed")?
                .map_err(|e| format!("receive: {e}"))?;
            let Message::Text(t) = frame else { continue };
            let v: Value = serde_json::from_str(&t).map_err(|e| e.to_string())?;
            if v["type"] == "error" {
                return Err(format!("error event: {v}"));
            }
            if v["type"] == "transcript" && v["speaker"] == "assistant" && v["is_final"] == true {
                break;
            }
        }
        let took = asked.elapsed();
        {
            let mut r = report.lock().unwrap();
            let b = ((asked - start).as_secs_f64() / bucket.as_secs_f64()) as usize;
            let last = r.buckets.len() - 1;
            r.buckets[b.min(last)].push(took);
            r.turns += 1;
        }
        tokio::time::sleep(think).await;
    }
    let _ = ws.close(None).await;
    let _ = http
        .delete(format!("http://{addr}/api/v1/sessions/{sid}"))
        .send()
        .await;
    Ok(())
}

/// What the caps did under load.
#[derive(Debug)]
pub struct Caps {
    /// WebSocket upgrades refused with 503 beyond the cap.
    pub websockets_refused: usize,
    /// Connections closed unanswered beyond the connection cap.
    pub connections_refused: usize,
    /// Time of the kiosk's own visitor turn (button pressed, released, answered, idle again).
    pub kiosk_turn: Result<Duration, String>,
}

/// Holds `websockets` WebSocket chats and `connections` bare connections (both beyond the
/// server's caps), then has the kiosk's visitor press the simulated button.
pub async fn caps(addr: SocketAddr, websockets: usize, connections: usize) -> Caps {
    let http = client_http();
    let mut held_ws = Vec::new();
    let mut websockets_refused = 0;
    for _ in 0..websockets {
        let res = http
            .post(format!("http://{addr}/api/v1/sessions"))
            .json(&json!({}))
            .send()
            .await;
        let sid = match res {
            Ok(r) if r.status().as_u16() == 201 => {
                r.json::<Value>().await.unwrap_or_default()["session_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            }
            // The session cap is reached first: a WebSocket to a made-up session still counts.
            _ => "00000000-0000-4000-8000-000000000000".to_string(),
        };
        match tokio_tungstenite::connect_async(format!("ws://{addr}/ws/chat/{sid}")).await {
            Ok((ws, _)) => held_ws.push(ws),
            Err(tokio_tungstenite::tungstenite::Error::Http(r)) if r.status() == 503 => {
                websockets_refused += 1
            }
            Err(_) => {}
        }
    }
    let mut held = Vec::new();
    for _ in 0..connections {
        if let Ok(c) = tokio::net::TcpStream::connect(addr).await {
            held.push(c);
        }
    }
    // A connection beyond the cap is closed as soon as it is accepted.
    let mut connections_refused = 0;
    for c in held.iter_mut() {
        let mut b = [0u8; 1];
        if let Ok(Ok(0)) = tokio::time::timeout(
            Duration::from_millis(20),
            tokio::io::AsyncReadExt::read(c, &mut b),
        )
        .await
        {
            connections_refused += 1;
        }
    }
    // The kiosk's visitor, over the internal route (a connection of its own is still accepted
    // once the flood's connections are closed: the board's button does not need one at all).
    drop(held);
    let kiosk_turn = kiosk_turn(addr, &http).await;
    drop(held_ws);
    Caps {
        websockets_refused,
        connections_refused,
        kiosk_turn,
    }
}

async fn kiosk_turn(addr: SocketAddr, http: &reqwest::Client) -> Result<Duration, String> {
    let press = |pressed: bool| {
        http.post(format!("http://{addr}/api/v1/internal/device/ptt"))
            .json(&json!({ "pressed": pressed }))
            .send()
    };
    let started = Instant::now();
    let r = press(true).await.map_err(|e| e.to_string())?;
    if !r.status().is_success() {
        return Err(format!("press: {}", r.status()));
    }
    tokio::time::sleep(Duration::from_millis(900)).await;
    press(false).await.map_err(|e| e.to_string())?;
    let mut seen = Vec::new();
    while started.elapsed() < Duration::from_secs(30) {
        let v: Value = http
            .get(format!("http://{addr}/api/v1/internal/device"))
            .send()
            .await
            .map_err(|e| e.to_string())?
            .json()
            .await
            .map_err(|e| e.to_string())?;
        let status = v["status"].as_str().unwrap_or_default().to_string();
        if seen.last() != Some(&status) {
            seen.push(status.clone());
        }
        if status == "idle" && seen.iter().any(|s| s == "speaking") {
            return Ok(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(format!("the kiosk did not answer: states {seen:?}"))
}
