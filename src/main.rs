//! The `docent` command: serves the kiosk (the default), and small tools around it.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand};
use docent::config::Config;

#[derive(Parser)]
#[command(
    name = "docent",
    version,
    about = "Firmware of a talking-character kiosk"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the conversation server, the site administration API and the kiosk (default).
    Serve(ServeArgs),
    /// Forget the administrator password chosen in the console (run while the kiosk is stopped):
    /// the next start takes the configured password again.
    ResetPassword(ServeArgs),
    /// Save the running kiosk's simulated screen as a PNG file.
    Snapshot(SnapshotArgs),
    /// Check a sound card: play a file to an ALSA device, or record one to a WAV file.
    #[command(subcommand)]
    Audio(AudioCommand),
}

#[derive(Subcommand)]
enum AudioCommand {
    /// Play raw S16_LE mono samples (or a 16-bit mono WAV file) to DEVICE.
    Play {
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// ALSA PCM name
        #[arg(long, default_value = "default")]
        device: String,
        /// Sample rate of FILE in Hz
        #[arg(long, default_value_t = 16000)]
        rate: u32,
    },
    /// Record DEVICE into a mono 16-bit WAV file.
    Record {
        #[arg(value_name = "OUT.wav")]
        file: PathBuf,
        /// ALSA PCM name
        #[arg(long, default_value = "default")]
        device: String,
        /// Sample rate in Hz
        #[arg(long, default_value_t = 24000)]
        rate: u32,
        /// How long to record
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
    },
}

#[derive(clap::Args)]
struct SnapshotArgs {
    /// PNG file to write
    #[arg(value_name = "OUT.png")]
    out: PathBuf,
    /// Address of the running kiosk [default: 127.0.0.1:8080]
    #[arg(long, env = "DOCENT_LISTEN", value_name = "HOST:PORT")]
    listen: Option<SocketAddr>,
    /// Internal token (needed only when the kiosk is not on this machine)
    #[arg(
        long,
        env = "DOCENT_INTERNAL_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    token: Option<String>,
}

#[derive(clap::Args, Clone, Default)]
struct ServeArgs {
    /// Persistent data directory [default: ./data]
    #[arg(long, env = "DOCENT_DATA_DIR", value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Address of the HTTP/WebSocket/gRPC listener [default: 127.0.0.1:8080]
    #[arg(long, env = "DOCENT_LISTEN", value_name = "HOST:PORT")]
    listen: Option<SocketAddr>,
    /// TOML configuration file (unknown keys are an error)
    #[arg(long, env = "DOCENT_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// Administrator password (prefer the environment variable over the flag)
    #[arg(
        long,
        env = "ADMIN_PASSWORD",
        hide_env_values = true,
        value_name = "PASSWORD"
    )]
    admin_password: Option<String>,
    /// Devices: real where present and simulated for the rest (auto), simulated only (sim),
    /// real only (real), or none [default: auto]
    #[arg(long, env = "DOCENT_DEVICES", value_name = "MODE")]
    devices: Option<docent::config::DeviceMode>,
}

impl ServeArgs {
    /// The config file (if any) with the flags and environment on top.
    fn config(self) -> Result<Config, docent::config::ConfigError> {
        let mut config = match &self.config {
            Some(path) => Config::load(path)?,
            None => Config::default(),
        };
        if let Some(d) = self.data_dir {
            config.data_dir = d;
        }
        if let Some(l) = self.listen {
            config.listen = l;
        }
        if let Some(d) = self.devices {
            config.devices = d;
        }
        if let Some(p) = self.admin_password.filter(|p| !p.is_empty()) {
            config.access.admin_password = Some(p);
        }
        Ok(config)
    }
}

fn main() -> std::process::ExitCode {
    docent::logs::init();
    let cli = Cli::parse();
    let args = match cli.command {
        Some(Command::Serve(args)) => args,
        Some(Command::ResetPassword(args)) => return reset_password(args),
        Some(Command::Snapshot(args)) => return snapshot(args),
        Some(Command::Audio(command)) => return audio(command),
        None => cli.serve,
    };
    let config = match args.config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("docent: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    // systemd's READY/WATCHDOG/STOPPING notifications and the stall limit (docs/watchdog.md).
    let watchdog = std::sync::Arc::new(docent::watchdog::Watchdog::from_env(config.watchdog_secs));
    let stopping = watchdog.clone();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        // Blocking work (fsync'd writes, the store's reads) waits for a thread rather than
        // growing the process past the unit's TasksMax.
        .max_blocking_threads(64)
        .build()
        .expect("tokio runtime");
    let run = docent::Run::new(config)
        .on_ready(move |ready| {
            println!("docent listening on http://{}", ready.addr);
            watchdog.ready(&format!("serving on http://{}", ready.addr), ready.loops);
        })
        .shutdown(async move {
            shutdown_signal().await;
            stopping.stopping();
        });
    match runtime.block_on(docent::run(run)) {
        Ok(docent::Stopped::Shutdown) => std::process::ExitCode::SUCCESS,
        Ok(docent::Stopped::Restart) => {
            runtime.shutdown_timeout(std::time::Duration::from_secs(5));
            restart()
        }
        Err(e) => {
            eprintln!("docent: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Exit status that asks systemd (`Restart=always`) to start the kiosk again.
const EXIT_RESTART: u8 = 75;

/// Starts the kiosk again after an administrator asked for it: under systemd (it set
/// `$NOTIFY_SOCKET` or `$INVOCATION_ID`) by exiting with [`EXIT_RESTART`] so the unit restarts
/// it; otherwise (`./x run`, a terminal) by running this program again in this process, with the
/// same arguments and environment.
fn restart() -> std::process::ExitCode {
    let supervised = ["NOTIFY_SOCKET", "INVOCATION_ID"]
        .iter()
        .any(|v| std::env::var_os(v).is_some());
    if supervised {
        eprintln!("docent: restarting (exit {EXIT_RESTART} for systemd)");
        return std::process::ExitCode::from(EXIT_RESTART);
    }
    eprintln!("docent: restarting");
    let mut args = std::env::args_os();
    let err = match std::env::current_exe() {
        Ok(exe) => {
            use std::os::unix::process::CommandExt;
            let program = args.next().unwrap_or_else(|| exe.clone().into());
            std::process::Command::new(exe)
                .arg0(program)
                .args(args)
                .exec()
        }
        Err(e) => e,
    };
    eprintln!("docent: could not start again ({err}); the kiosk has stopped");
    std::process::ExitCode::from(EXIT_RESTART)
}

/// `docent reset-password`.
fn reset_password(args: ServeArgs) -> std::process::ExitCode {
    let config = match args.config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("docent: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    match docent::engine::auth::reset_password(&config) {
        Ok(()) => {
            println!(
                "the password chosen in the console is forgotten: the next start takes the configured password"
            );
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("docent reset-password: {e} (stop the kiosk first: systemctl stop docent)");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("signal handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// `docent audio play|record`.
fn audio(command: AudioCommand) -> std::process::ExitCode {
    use docent::device::audio_check;
    let done = match command {
        AudioCommand::Play { file, device, rate } => audio_check::play(&file, &device, rate),
        AudioCommand::Record {
            file,
            device,
            rate,
            seconds,
        } => audio_check::record(&file, &device, rate, seconds),
    };
    match done {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("docent audio: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// `docent snapshot OUT.png`: fetches the simulated screen from the running kiosk's internal
/// route and writes it.
fn snapshot(args: SnapshotArgs) -> std::process::ExitCode {
    let mut addr = args
        .listen
        .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 8080)));
    if addr.ip().is_unspecified() {
        addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    let url = format!("http://{addr}/api/v1/internal/device/snapshot");
    let fetched = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(async {
            let _ = rustls::crypto::ring::default_provider().install_default();
            let client = reqwest::Client::builder()
                .timeout(std::time::Duration::from_secs(10))
                .build()?;
            let mut request = client.get(&url);
            if let Some(t) = args.token.as_deref().filter(|t| !t.is_empty()) {
                request = request.bearer_auth(t);
            }
            let response = request.send().await?;
            let status = response.status();
            let body = response.bytes().await?;
            anyhow::Ok((status, body))
        });
    match fetched {
        Ok((status, png)) if status.is_success() => match std::fs::write(&args.out, &png) {
            Ok(()) => {
                println!("{} ({} bytes)", args.out.display(), png.len());
                std::process::ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("docent: {}: {e}", args.out.display());
                std::process::ExitCode::FAILURE
            }
        },
        Ok((status, body)) => {
            eprintln!(
                "docent: {url}: {status}: {}",
                String::from_utf8_lossy(&body).trim()
            );
            std::process::ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("docent: {url}: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
