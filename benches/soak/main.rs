//! The soak, run by `cargo bench --bench soak`: 200 WebSocket chat clients (offline engine) for
//! `DOCENT_SOAK_SECS` seconds (default 600) against the release `docent` binary as a process of
//! its own; prints its resident memory every 10 s, turn latency p50/p95 per minute and the
//! errors, then the caps reached under load with the kiosk's own visitor still answered.

use std::time::Duration;

use docent_test_support::soak as driver;

fn main() {
    let secs: u64 = std::env::var("DOCENT_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(600);
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("docent.toml");
    std::fs::write(&config, driver::CONFIG).expect("config");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_docent"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .arg("--config")
        .arg(&config)
        .env("DOCENT_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("docent starts");
    let addr = driver::listening(child.stdout.take().expect("stdout"));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let load = driver::Load {
        clients: 200,
        duration: Duration::from_secs(secs),
        sample_every: Duration::from_secs(10),
        bucket: Duration::from_secs(60.min(secs)),
        think: Duration::from_secs(1),
    };
    println!("soak: {} clients for {secs} s", load.clients);
    let report = runtime.block_on(driver::chat_load(addr, child.id(), &load));
    report.print(load.bucket);
    let caps = runtime.block_on(driver::caps(addr, 240, 250));
    println!(
        "caps: websockets refused {} (cap {}), connections refused {} (cap {}), kiosk turn {:?}",
        caps.websockets_refused,
        driver::MAX_WEBSOCKETS,
        caps.connections_refused,
        driver::MAX_CONNECTIONS,
        caps.kiosk_turn
    );
    let _ = child.kill();
    let _ = child.wait();
}
