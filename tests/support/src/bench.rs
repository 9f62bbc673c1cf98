//! What the benchmarks share: their runtime, the process's CPU time, the release binary as a
//! child process, a kiosk in this process, and a JSON GET. Each bench target (and the
//! understanding rig, [`crate::understanding`]) uses the part it needs.

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;

use docent::config::Config;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::oneshot;

/// Runs `f` to completion on a 2-thread runtime: the board has two cores.
pub fn block_on<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(f)
}

/// CPU time (user + system) this process has used so far, from getrusage: finer than the clock
/// ticks of [`cpu_time`], for short windows.
pub fn own_cpu_time() -> std::time::Duration {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid rusage to fill.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| std::time::Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// Connections one address may hold on a bench's server (the loads use up to 64).
const PER_PEER: usize = 256;

/// A running `docent serve` child process (the binary cargo built for the bench), killed when
/// dropped.
pub struct Docent {
    child: Child,
    pub addr: SocketAddr,
}

impl Docent {
    /// Spawns the binary on `data_dir`, with an administrator password when one is given, and
    /// waits for its "listening" line. A bench's load comes from one address with more
    /// connections than the per-peer cap allows, so the cap is raised: the benches measure
    /// serving, not the listener's bounds (`--bench listener` does).
    pub async fn start(data_dir: &Path, password: Option<&str>) -> Docent {
        Docent::start_under(data_dir, password, &[]).await
    }

    /// As [`Docent::start`], the binary run by `wrapper` (a command and its arguments, such as
    /// valgrind's) when one is given.
    pub async fn start_under(
        data_dir: &Path,
        password: Option<&str>,
        wrapper: &[String],
    ) -> Docent {
        std::fs::create_dir_all(data_dir).expect("data directory");
        let config = data_dir.join("bench.toml");
        std::fs::write(&config, format!("connections.max_per_peer = {PER_PEER}\n"))
            .expect("bench configuration");
        // Another build of docent (an earlier commit's, to compare) when one is named.
        let binary = std::env::var_os("DOCENT_BENCH_BINARY")
            .unwrap_or_else(|| crate::docent_binary().into());
        let mut command = wrapped(wrapper, binary);
        if let Some(p) = password {
            command.env("ADMIN_PASSWORD", p);
        } else {
            command.env_remove("ADMIN_PASSWORD");
        }
        let mut child = command
            .arg("serve")
            .arg("--data-dir")
            .arg(data_dir)
            .args(["--listen", "127.0.0.1:0"])
            .arg("--config")
            .arg(&config)
            .env("DOCENT_LOG", "error")
            .env_remove("DOCENT_CONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn docent");
        let stdout = child.stdout.take().expect("stdout");
        let line = BufReader::new(stdout)
            .lines()
            .next_line()
            .await
            .expect("read stdout")
            .expect("docent exited before listening");
        let addr = line
            .strip_prefix("docent listening on http://")
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        Docent { child, addr }
    }

    pub fn pid(&self) -> u32 {
        self.child.id().expect("running")
    }

    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub async fn stop(mut self) {
        self.child.kill().await.expect("stop docent");
    }
}

/// A kiosk running in this process on 127.0.0.1 (its engine and devices at hand in `ready`);
/// it shuts down when stopped or dropped.
pub struct Kiosk {
    pub ready: docent::Ready,
    stop: oneshot::Sender<()>,
    server: tokio::task::JoinHandle<anyhow::Result<docent::Stopped>>,
}

impl Kiosk {
    /// Starts a kiosk on `data_dir` after `tweak` adjusts its configuration.
    pub async fn start(data_dir: &Path, tweak: impl FnOnce(&mut Config)) -> Kiosk {
        let mut config = Config {
            data_dir: data_dir.to_path_buf(),
            listen: "127.0.0.1:0".parse().expect("address"),
            ..Config::default()
        };
        tweak(&mut config);
        let (ready_tx, ready_rx) = oneshot::channel();
        let (stop, stop_rx) = oneshot::channel::<()>();
        let server = tokio::spawn(docent::run(
            docent::Run::new(config)
                .on_ready(move |r| {
                    let _ = ready_tx.send(r);
                })
                .shutdown(async move {
                    let _ = stop_rx.await;
                }),
        ));
        let ready = ready_rx.await.expect("kiosk started");
        Kiosk {
            ready,
            stop,
            server,
        }
    }

    pub fn site(&self) -> String {
        format!("http://{}", self.ready.addr)
    }

    pub async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.server.await;
    }
}

/// Spawns `worker` on each of `conns` with a deadline `secs` from now and waits for all; the
/// latencies they return, sorted, and the wall time.
pub async fn drive<C, W, F>(
    conns: Vec<C>,
    secs: u64,
    worker: W,
) -> (Vec<std::time::Duration>, std::time::Duration)
where
    W: Fn(C, std::time::Instant) -> F,
    F: Future<Output = Vec<std::time::Duration>> + Send + 'static,
{
    let start = std::time::Instant::now();
    let deadline = start + std::time::Duration::from_secs(secs);
    let workers: Vec<_> = conns
        .into_iter()
        .map(|conn| tokio::spawn(worker(conn, deadline)))
        .collect();
    let mut latencies = Vec::new();
    for w in workers {
        latencies.extend(w.await.expect("load worker"));
    }
    let elapsed = start.elapsed();
    latencies.sort_unstable();
    (latencies, elapsed)
}

/// CPU time (user + system, all threads) used so far by process `pid` (a number or "self").
/// /proc counts it in clock ticks, USER_HZ = 100 on Linux.
pub fn cpu_time(pid: &str) -> std::time::Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("proc stat");
    // Fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .expect("stat")
        .1
        .split_whitespace()
        .collect();
    let ticks: u64 =
        fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
    std::time::Duration::from_millis(ticks * 10)
}

/// GET `url` and its JSON body, whatever the status.
pub async fn get_json(http: &reqwest::Client, url: &str) -> serde_json::Value {
    http.get(url)
        .send()
        .await
        .expect("GET")
        .json()
        .await
        .expect("a JSON body")
}

/// A command running `program`, under `wrapper` (a profiler and its arguments) when one is given.
pub fn wrapped(wrapper: &[String], program: impl AsRef<std::ffi::OsStr>) -> Command {
    match wrapper.split_first() {
        Some((tool, args)) => {
            let mut command = Command::new(tool);
            command.args(args).arg(program);
            command
        }
        None => Command::new(program),
    }
}
