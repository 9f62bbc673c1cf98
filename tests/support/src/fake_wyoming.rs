//! The fake Wyoming speech server (`fake_wyoming.py`, on the `wyoming` package's own server
//! classes) as a child process on 127.0.0.1. Its Python environment is made once per machine:
//! a venv under `${XDG_CACHE_HOME:-~/.cache}/docent-wyoming/` with the pinned package from PyPI
//! (python3 and python3-venv come with `./x test`'s Debian packages); later runs are offline.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;

/// The protocol's reference implementation, pinned: it is what the fake is built on.
const WYOMING: &str = "wyoming==1.10.2";

/// The venv's Python, made when missing or pinned to another version.
fn python() -> PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            let cache = std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache"));
            let dir = cache.join("docent-wyoming");
            let venv = dir.join("venv");
            let ready = |v: &PathBuf| {
                std::fs::read_to_string(v.join(".docent-pin")).is_ok_and(|p| p == WYOMING)
                    && v.join("bin/python").exists()
            };
            if !ready(&venv) {
                // Built aside and renamed into place, so that a venv in use is always whole.
                let tmp = dir.join(format!("venv.{}", std::process::id()));
                let _ = std::fs::remove_dir_all(&tmp);
                std::fs::create_dir_all(&dir).unwrap();
                run(Command::new("python3").arg("-m").arg("venv").arg(&tmp));
                run(Command::new(tmp.join("bin/python")).args([
                    "-m",
                    "pip",
                    "install",
                    "-q",
                    "--disable-pip-version-check",
                    "--no-input",
                    WYOMING,
                ]));
                std::fs::write(tmp.join(".docent-pin"), WYOMING).unwrap();
                if !ready(&venv) {
                    let _ = std::fs::remove_dir_all(&venv);
                    let _ = std::fs::rename(&tmp, &venv);
                }
                let _ = std::fs::remove_dir_all(&tmp);
                assert!(ready(&venv), "no venv with {WYOMING} at {}", venv.display());
            }
            venv.join("bin/python")
        })
        .clone()
}

fn run(command: &mut Command) {
    let out = command.output().expect("python3 runs");
    assert!(
        out.status.success(),
        "{command:?} failed (Debian: apt-get install python3-venv): {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// How the fake answers (see the script).
#[derive(Debug, Clone, Copy)]
pub enum Mode {
    Normal,
    Garbage,
    LongHeader,
    HugePayload,
    Hang,
}

impl Mode {
    fn arg(self) -> &'static str {
        match self {
            Mode::Normal => "normal",
            Mode::Garbage => "garbage",
            Mode::LongHeader => "long-header",
            Mode::HugePayload => "huge-payload",
            Mode::Hang => "hang",
        }
    }
}

pub struct FakeWyoming {
    /// `tcp://127.0.0.1:<port>`
    pub url: String,
    log: Arc<Mutex<Vec<Value>>>,
    _child: Child,
}

/// The fake's sample rate and tone (see the script).
pub const RATE: u32 = 22_050;
pub const TONE: i16 = 1_000;

impl FakeWyoming {
    pub async fn start(mode: Mode) -> FakeWyoming {
        let python = tokio::task::spawn_blocking(python).await.unwrap();
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/fake_wyoming.py");
        let mut child = tokio::process::Command::new(python)
            .arg(script)
            .args(["--mode", mode.arg()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the fake Wyoming server starts");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("the fake Wyoming server listens in time")
            .unwrap()
            .expect("a first line");
        let port: u16 = first
            .strip_prefix("PORT ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("not a port line: {first:?}"));
        let log = Arc::new(Mutex::new(Vec::new()));
        let sink = log.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Ok(v) = serde_json::from_str(&line) {
                    sink.lock().unwrap().push(v);
                }
            }
        });
        FakeWyoming {
            url: format!("tcp://127.0.0.1:{port}"),
            log,
            _child: child,
        }
    }

    /// The requests it answered, in order.
    pub fn log(&self) -> Vec<Value> {
        self.log.lock().unwrap().clone()
    }
}
