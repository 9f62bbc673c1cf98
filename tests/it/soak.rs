//! The soak in short (the bench `benches/soak` runs it for minutes): 200 WebSocket chat clients
//! for 20 s against `docent` as a process of its own, with no error, bounded memory growth,
//! then the WebSocket and connection caps reached while the kiosk's own visitor is answered.

use std::time::Duration;

// The bench's own driver; the test does not start the binary itself or print the cap figures.
use crate::support::Process;
use crate::support::soak as driver;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_chat_clients_then_the_caps_with_the_kiosk_answering() {
    let running = Process::new().config(driver::CONFIG).start().await;
    let pid = running.child.id().expect("pid");
    let load = driver::Load {
        clients: 200,
        duration: Duration::from_secs(20),
        sample_every: Duration::from_secs(2),
        bucket: Duration::from_secs(5),
        think: Duration::from_secs(1),
    };
    let report = driver::chat_load(running.addr, pid, &load).await;
    report.print(load.bucket);
    assert!(report.errors.is_empty(), "errors: {:?}", report.errors);
    assert!(report.turns >= 400, "only {} turns", report.turns);
    let growth = report.growth();
    assert!(growth <= 10.0, "resident memory grew {growth:.1} %");
    let caps = driver::caps(running.addr, driver::MAX_WEBSOCKETS + 20, 250).await;
    println!("{caps:?}");
    assert!(caps.websockets_refused >= 20, "{caps:?}");
    assert!(caps.connections_refused > 0, "{caps:?}");
    let took = caps.kiosk_turn.expect("the kiosk answers its visitor");
    assert!(took < Duration::from_secs(20), "{took:?}");
}
