//! The fleet client's cost, run by `cargo bench --bench fleet` (about 45 s and a 100 MB
//! download): the figures of docs/fleet.md. A docent in this process (tests/it's fleet kiosk)
//! polls the fake hawkBit server of the tests through a forwarder that counts the bytes.
//!
//! Printed: bytes and CPU per unchanged poll (the process also runs the fake server, so the CPU
//! is an upper bound; the same process paused for 20 s is the idle baseline taken off), then the
//! time from the offer of a 100 MB artifact to its `downloaded` feedback over loopback.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use docent_test_support::bench as support;
use docent_test_support::fake_hawkbit::{FakeHawkbit, counting_proxy};
use docent_test_support::fleet_kiosk::{Kiosk, TestFirmware, bundle, token, wait_until};
use serde_json::json;
use support::own_cpu_time;

const WINDOW: Duration = Duration::from_secs(20);

fn main() {
    support::block_on(measure());
}

async fn measure() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeHawkbit::start(&token("measure"), "00:00:01").await;
    let (proxy, bytes) = counting_proxy(fake.addr).await;
    let kiosk = Kiosk::start(dir.path(), TestFirmware::new(dir.path(), "0.1.0", "A")).await;
    kiosk
        .join_fleet(&fake, json!({"server_url": format!("http://{proxy}")}))
        .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // The same process paused, for the baseline of everything else it runs.
    kiosk.put_settings(json!({"fleet": {"paused": true}})).await;
    let idle0 = own_cpu_time();
    tokio::time::sleep(WINDOW).await;
    let idle = own_cpu_time() - idle0;
    kiosk
        .put_settings(json!({"fleet": {"paused": false}}))
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (polls0, bytes0, cpu0) = (
        fake.with(|s| s.seen.len()),
        bytes.load(Ordering::Relaxed),
        own_cpu_time(),
    );
    tokio::time::sleep(WINDOW).await;
    let polls = fake.with(|s| s.seen.len()) - polls0;
    let cpu = (own_cpu_time() - cpu0).as_secs_f64() - idle.as_secs_f64();
    let wire = bytes.load(Ordering::Relaxed) - bytes0;
    println!(
        "FIGURE polls={polls} cpu_ms_per_poll={:.2} (idle baseline {:.0} ms per 20 s taken off) bytes_per_poll={}",
        cpu * 1000.0 / polls as f64,
        idle.as_secs_f64() * 1000.0,
        wire / polls.max(1) as u64
    );

    let artifact = bundle("0.2.0", 100 << 20);
    fake.offer(
        "30",
        "os",
        "0.2.0",
        "big.raucb",
        artifact,
        json!({"update": "skip"}),
    );
    let started = Instant::now();
    wait_until("the download", 600, || {
        fake.feedback_of("30")
            .iter()
            .any(|(s, _)| s.starts_with("downloaded/"))
    })
    .await;
    println!(
        "FIGURE download_100mb_s={:.2} (download, fsync and sha256, at most 1 s of it waiting for the poll)",
        started.elapsed().as_secs_f64()
    );
    kiosk.stop().await;
}
