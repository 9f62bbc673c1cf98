//! The watchdog through the real binary and a real notification socket. docent is started as
//! systemd starts a `Type=notify` unit: `NOTIFY_SOCKET` names a datagram socket the test bound,
//! `WATCHDOG_USEC` is 2 s. It must say `READY=1` and keep pinging `WATCHDOG=1`; when the test hook
//! stalls the engine or the kiosk loop, the pings must stop and the process exit with code 70;
//! started again as the unit's restart policy does (board/systemd/docent.service), it must serve
//! within 10 s.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::net::UnixDatagram;
use tokio::sync::mpsc;

use crate::support::{Process, Running};

/// `WATCHDOG_USEC` given to docent: its stall limit, and twice its ping interval.
const PERIOD: Duration = Duration::from_secs(2);
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Scheduling slack on a busy machine, on top of the watchdog's own bounds.
const SLACK: Duration = Duration::from_millis(1500);
/// Exit code of a stalled docent (`docent::watchdog::EXIT_STALLED`).
const EXIT_STALLED: i32 = docent::watchdog::EXIT_STALLED as i32;

/// Where docent's notifications go, and how it finds it.
struct NotifySocket {
    /// `NOTIFY_SOCKET` as systemd would set it.
    env: String,
    messages: mpsc::UnboundedReceiver<(Instant, String)>,
}

impl NotifySocket {
    /// A socket at a path in `dir`, or at an abstract name.
    fn bind(dir: &Path, abstract_name: bool) -> NotifySocket {
        let (socket, env) = if abstract_name {
            use std::os::linux::net::SocketAddrExt;
            let name = format!("docent-watchdog-test-{}", uuid::Uuid::new_v4());
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(&name).unwrap();
            let socket = std::os::unix::net::UnixDatagram::bind_addr(&addr).unwrap();
            socket.set_nonblocking(true).unwrap();
            (UnixDatagram::from_std(socket).unwrap(), format!("@{name}"))
        } else {
            let path = dir.join("notify");
            let env = path.to_str().unwrap().to_string();
            (UnixDatagram::bind(&path).unwrap(), env)
        };
        let (tx, messages) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            while let Ok(n) = socket.recv(&mut buf).await {
                let text = String::from_utf8_lossy(&buf[..n]).into_owned();
                if tx.send((Instant::now(), text)).is_err() {
                    return;
                }
            }
        });
        NotifySocket { env, messages }
    }

    /// Waits for a message with the line `line`; returns when it came and the whole message.
    async fn expect(&mut self, line: &str, within: Duration, kiosk: &Kiosk) -> (Instant, String) {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            match tokio::time::timeout_at(deadline, self.messages.recv()).await {
                Ok(Some((at, m))) if m.lines().any(|l| l == line) => return (at, m),
                Ok(Some(_)) => {}
                _ => panic!("no {line} within {within:?}; stderr:\n{}", kiosk.stderr()),
            }
        }
    }

    /// Every message received so far.
    fn drain(&mut self) -> Vec<(Instant, String)> {
        std::iter::from_fn(|| self.messages.try_recv().ok()).collect()
    }

    /// Every message until one starting with `prefix` (or `within` passes): datagrams the
    /// process sent just before it exited may still be on their way to the reader task.
    async fn drain_until(&mut self, prefix: &str, within: Duration) -> Vec<(Instant, String)> {
        let deadline = tokio::time::Instant::now() + within;
        let mut got = Vec::new();
        while let Ok(Some(m)) = tokio::time::timeout_at(deadline, self.messages.recv()).await {
            let done = m.1.starts_with(prefix);
            got.push(m);
            if done {
                break;
            }
        }
        got
    }
}

/// A running `docent serve`.
struct Kiosk {
    process: Running,
    http: reqwest::Client,
}

impl Kiosk {
    /// Starts the binary on `data_dir` with `config` (TOML) and `NOTIFY_SOCKET` if given, and
    /// waits for its "listening" line.
    async fn start(data_dir: &Path, config: &str, notify: Option<&NotifySocket>) -> Kiosk {
        let mut process = Process::new()
            .data_dir(data_dir)
            .config(config)
            .args(["--devices", "sim"]);
        if let Some(n) = notify {
            process = process
                .env("NOTIFY_SOCKET", &n.env)
                .env("WATCHDOG_USEC", PERIOD.as_micros().to_string());
        }
        let process = process.start().await;
        // reqwest is built without a default TLS provider.
        let _ = rustls::crypto::ring::default_provider().install_default();
        Kiosk {
            process,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(5))
                .build()
                .unwrap(),
        }
    }

    fn stderr(&self) -> String {
        self.process.stderr()
    }

    async fn stall(&self, which: &str) -> u16 {
        self.http
            .post(format!(
                "{}/api/v1/internal/debug/stall",
                self.process.base()
            ))
            .json(&json!({ "loop": which }))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }

    async fn health(&self) -> u16 {
        self.http
            .get(format!("{}/api/v1/health", self.process.base()))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }
}

/// The restart policy of the unit the board installs: `Restart=` and `RestartSec=`.
fn restart_policy() -> (String, Duration) {
    let unit = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("board/systemd/docent.service"),
    )
    .expect("the board's unit");
    let value = |key: &str| {
        unit.lines()
            .find_map(|l| l.trim().strip_prefix(key)?.strip_prefix('='))
            .map(|v| v.trim().to_string())
    };
    let restart = value("Restart").expect("Restart= in the unit");
    // systemd's default unit is seconds; the unit writes a plain number or "<n>s".
    let secs: f64 = value("RestartSec")
        .unwrap_or_else(|| "0.1".into())
        .trim_end_matches('s')
        .parse()
        .expect("RestartSec in seconds");
    (restart, Duration::from_secs_f64(secs))
}

const HOOKS: &str = "test.hooks = true\n";

/// A stalled `which` loop: pings stop within the limit, the process exits with code 70 and says
/// which loop stalled; restarted after `RestartSec`, the kiosk serves again within 10 s.
async fn stall_then_restart(which: &str) {
    let dir = tempfile::tempdir().unwrap();
    let mut notify = NotifySocket::bind(dir.path(), false);
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let mut kiosk = Kiosk::start(&data, HOOKS, Some(&notify)).await;
    notify.expect("READY=1", START_TIMEOUT, &kiosk).await;
    notify.expect("WATCHDOG=1", PERIOD, &kiosk).await;

    assert_eq!(kiosk.stall(which).await, 202);
    let stalled_at = Instant::now();
    let status = kiosk.process.exited(PERIOD + SLACK * 2).await;
    let exited_at = Instant::now();
    assert_eq!(status.code(), Some(EXIT_STALLED), "{}", kiosk.stderr());
    let messages = notify
        .drain_until(&format!("STATUS={which} loop stalled"), SLACK)
        .await;
    let pings: Vec<_> = messages
        .iter()
        .filter(|(_, m)| m == "WATCHDOG=1")
        .map(|(at, _)| at.duration_since(stalled_at))
        .collect();
    // Pings go on only while the last beat is younger than the limit.
    assert!(
        pings.iter().all(|d| *d < PERIOD + SLACK),
        "pings long after the stall: {pings:?}"
    );
    let stderr = kiosk.stderr();
    assert!(
        stderr.contains(&format!("the {which} loop stalled")),
        "{stderr}"
    );
    assert!(
        messages
            .iter()
            .any(|(_, m)| m.starts_with(&format!("STATUS={which} loop stalled"))),
        "{messages:?}"
    );
    eprintln!(
        "{which} stalled: exit {:?} after {:.2?} ({} pings after the stall, the last at {:.2?})",
        status.code(),
        exited_at - stalled_at,
        pings.len(),
        pings.last()
    );

    // What systemd does with the unit's policy: a start again after RestartSec.
    let (restart, restart_sec) = restart_policy();
    assert!(
        ["always", "on-failure", "on-abnormal"].contains(&restart.as_str()),
        "Restart={restart} does not restart a kiosk that exited with {EXIT_STALLED}"
    );
    tokio::time::sleep(restart_sec).await;
    let kiosk = Kiosk::start(&data, HOOKS, Some(&notify)).await;
    notify.expect("READY=1", START_TIMEOUT, &kiosk).await;
    assert_eq!(kiosk.health().await, 200);
    let serving = exited_at.elapsed();
    eprintln!(
        "{which}: serving again {serving:.2?} after the exit (RestartSec {restart_sec:?}), \
         {:.2?} after the stall",
        stalled_at.elapsed()
    );
    assert!(serving < Duration::from_secs(10), "{serving:?}");
    notify.expect("WATCHDOG=1", PERIOD, &kiosk).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_engine_stops_the_pings_and_exits() {
    stall_then_restart("engine").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_kiosk_loop_stops_the_pings_and_exits() {
    stall_then_restart("device").await;
}

/// Without a stall the pings keep coming (an abstract socket this time), the hook route does not
/// exist, and SIGTERM says STOPPING=1 and exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pings_keep_coming_while_the_loops_run() {
    let dir = tempfile::tempdir().unwrap();
    let mut notify = NotifySocket::bind(dir.path(), true);
    let mut kiosk = Kiosk::start(dir.path(), "", Some(&notify)).await;
    let (ready_at, ready) = notify.expect("READY=1", START_TIMEOUT, &kiosk).await;
    assert!(ready.contains("STATUS=serving on http://"), "{ready:?}");
    assert_eq!(kiosk.stall("engine").await, 404);

    let watched = Duration::from_secs(6);
    tokio::time::sleep(watched).await;
    assert!(
        kiosk.process.child.try_wait().unwrap().is_none(),
        "docent exited"
    );
    assert_eq!(kiosk.health().await, 200);
    let mut last = ready_at;
    let mut gaps = Vec::new();
    for (at, m) in notify.drain() {
        if m == "WATCHDOG=1" {
            gaps.push(at - last);
            last = at;
        }
    }
    eprintln!("{} pings in {watched:?}, gaps {gaps:.2?}", gaps.len());
    // One every PERIOD / 2; systemd would act on a gap of PERIOD.
    assert!(gaps.len() >= 5, "{gaps:?}");
    assert!(gaps.iter().all(|g| *g < PERIOD), "{gaps:?}");

    let pid = kiosk.process.child.id().unwrap() as i32;
    // SAFETY: kill(2) on our own child, which has not been reaped yet.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    notify.expect("STOPPING=1", START_TIMEOUT, &kiosk).await;
    let status = kiosk.process.exited(START_TIMEOUT).await;
    assert!(status.success(), "{status:?}; stderr:\n{}", kiosk.stderr());
}

/// Outside systemd nothing is sent, and the stall limit is `watchdog_secs`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_systemd_the_stall_limit_is_watchdog_secs() {
    let dir = tempfile::tempdir().unwrap();
    let mut kiosk = Kiosk::start(dir.path(), "test.hooks = true\nwatchdog_secs = 2\n", None).await;
    assert_eq!(kiosk.stall("device").await, 202);
    let stalled_at = Instant::now();
    let status = kiosk
        .process
        .exited(Duration::from_secs(2) + SLACK * 2)
        .await;
    eprintln!(
        "without systemd: exit {:?} {:.2?} after the stall",
        status.code(),
        stalled_at.elapsed()
    );
    assert_eq!(status.code(), Some(EXIT_STALLED), "{}", kiosk.stderr());
    assert!(kiosk.stderr().contains("the device loop stalled"));
}
