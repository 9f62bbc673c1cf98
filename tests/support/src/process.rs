//! The built `docent` binary as a process of its own, always in the same hermetic environment:
//! `Process::new().args(..).config(..).env(..).start()` waits for its listening line and gives a
//! [`Running`] handle (address, its output, kill and wait).

use std::ffi::{OsStr, OsString};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// How long the binary may take to print its listening line (a busy machine, a trace log).
const START_TIMEOUT: Duration = Duration::from_secs(60);
const LISTENING: &str = "docent listening on http://";

/// `docent` with none of the test's own environment that would change what it does: the
/// variables of its flags (`DOCENT_*`), the administrator password, systemd's notification
/// socket and watchdog. It logs at `info` unless `DOCENT_LOG` is set again.
pub fn docent() -> Command {
    docent_under(&[])
}

/// `docent` started by `wrapper` (e.g. `ip netns exec NAME`), in the same environment.
pub fn docent_under(wrapper: &[&str]) -> Command {
    let binary = crate::docent_binary();
    let mut command = match wrapper {
        [] => Command::new(binary),
        [program, args @ ..] => {
            let mut c = Command::new(program);
            c.args(args).arg(&binary);
            c
        }
    };
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(|n| n.starts_with("DOCENT_")) {
            command.env_remove(name);
        }
    }
    for name in [
        "ADMIN_PASSWORD",
        "NOTIFY_SOCKET",
        "WATCHDOG_USEC",
        "WATCHDOG_PID",
    ] {
        command.env_remove(name);
    }
    command
        .env("DOCENT_LOG", "info")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

/// What to start: `docent serve --listen 127.0.0.1:0` and more.
#[derive(Default)]
pub struct Process {
    args: Vec<OsString>,
    envs: Vec<(OsString, OsString)>,
    config: Option<String>,
    data_dir: Option<PathBuf>,
    listen: Option<SocketAddr>,
}

impl Process {
    pub fn new() -> Process {
        Process::default()
    }

    /// More arguments of `docent serve` (`--devices sim`, ...).
    pub fn args<S: AsRef<OsStr>>(mut self, args: impl IntoIterator<Item = S>) -> Process {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// A configuration file with this TOML (`--config`).
    pub fn config(mut self, toml: &str) -> Process {
        self.config = Some(toml.to_string());
        self
    }

    /// An environment variable, on top of the hermetic environment.
    pub fn env(mut self, name: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Process {
        self.envs
            .push((name.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// The data directory (default: `data` in a fresh temporary directory).
    pub fn data_dir(mut self, dir: &Path) -> Process {
        self.data_dir = Some(dir.to_path_buf());
        self
    }

    /// A fixed address instead of a free port: a restart that runs the program again comes back
    /// on it, where a browser's page looks for it.
    pub fn listen(mut self, addr: SocketAddr) -> Process {
        self.listen = Some(addr);
        self
    }

    /// Starts the binary and waits for its listening line.
    pub async fn start(self) -> Running {
        let root = tempfile::tempdir().unwrap();
        let data_dir = self.data_dir.unwrap_or_else(|| root.path().join("data"));
        let listen = self
            .listen
            .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)));
        let mut command = docent();
        command
            .args(["serve", "--listen"])
            .arg(listen.to_string())
            .arg("--data-dir")
            .arg(&data_dir)
            .args(&self.args);
        if let Some(toml) = &self.config {
            let file = root.path().join("docent.toml");
            std::fs::write(&file, toml).unwrap();
            command.arg("--config").arg(file);
        }
        let mut child = command
            .envs(self.envs)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn docent");
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let (first_tx, first_rx) = oneshot::channel();
        let readers = vec![
            collect_lines(child.stdout.take().unwrap(), stdout.clone(), Some(first_tx)),
            collect_lines(child.stderr.take().unwrap(), stderr.clone(), None),
        ];
        let mut running = Running {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            child,
            _root: root,
            stdout,
            stderr,
            readers,
            starts: 1,
        };
        let line = match tokio::time::timeout(START_TIMEOUT, first_rx).await {
            Ok(Ok(line)) => line,
            other => {
                // Its last words, if it has ended.
                let _ = tokio::time::timeout(Duration::from_secs(1), running.child.wait()).await;
                panic!(
                    "docent did not start ({other:?}); stderr:\n{}",
                    running.stderr()
                )
            }
        };
        running.addr = line
            .strip_prefix(LISTENING)
            .and_then(|a| a.trim().parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        running
    }
}

/// A running `docent serve`, killed when dropped.
pub struct Running {
    pub addr: SocketAddr,
    pub child: Child,
    /// Holds the configuration file and the default data directory.
    _root: tempfile::TempDir,
    stdout: Arc<Mutex<Vec<String>>>,
    stderr: Arc<Mutex<Vec<String>>>,
    readers: Vec<JoinHandle<()>>,
    /// Listening lines seen so far: one per start of the program.
    starts: usize,
}

impl Running {
    /// `http://ADDR`.
    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Its log so far (stderr), one line a line.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().join("\n")
    }

    /// The lines of its log so far that report an error.
    pub fn errors(&self) -> Vec<String> {
        let log = self.stderr.lock().unwrap();
        log.iter()
            .filter(|l| l.contains("ERROR") || l.contains("panicked"))
            .cloned()
            .collect()
    }

    /// Waits for the program to print its listening line once more than seen so far (it ran
    /// itself again) and returns the new address.
    pub async fn listening_again(&mut self, within: Duration) -> SocketAddr {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let again = {
                let out = self.stdout.lock().unwrap();
                out.iter()
                    .filter_map(|l| l.strip_prefix(LISTENING))
                    .nth(self.starts)
                    .and_then(|a| a.trim().parse().ok())
            };
            if let Some(addr) = again {
                self.starts += 1;
                self.addr = addr;
                return addr;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "docent did not start again; stderr:\n{}",
                self.stderr()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGKILL, then reap.
    pub async fn kill(&mut self) {
        self.child.kill().await.expect("kill docent");
    }

    /// Waits for the process to end by itself within `within`.
    pub async fn exited(&mut self, within: Duration) -> ExitStatus {
        match tokio::time::timeout(within, self.child.wait()).await {
            Ok(status) => status.unwrap(),
            Err(_) => panic!(
                "docent still runs after {within:?}; stderr:\n{}",
                self.stderr()
            ),
        }
    }

    /// SIGKILL, then everything it wrote (stdout, then stderr) once both are closed.
    pub async fn kill_for_output(mut self) -> String {
        self.kill().await;
        for reader in std::mem::take(&mut self.readers) {
            tokio::time::timeout(Duration::from_secs(10), reader)
                .await
                .expect("output closed")
                .unwrap();
        }
        let stdout = self.stdout.lock().unwrap().join("\n");
        format!("{stdout}\n{}", self.stderr())
    }
}

/// Reads `from` line by line into `into` until it closes, so the child never blocks on a full
/// pipe; the first line also goes to `first`.
fn collect_lines(
    from: impl AsyncRead + Unpin + Send + 'static,
    into: Arc<Mutex<Vec<String>>>,
    mut first: Option<oneshot::Sender<String>>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut lines = BufReader::new(from).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(first) = first.take() {
                let _ = first.send(line.clone());
            }
            into.lock().unwrap().push(line);
        }
    })
}
