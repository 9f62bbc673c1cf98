//! Docent: the firmware of a talking-character kiosk, as one library behind the `docent` binary.
//!
//! Layers, outermost first: `api` (HTTP, WebSocket and gRPC front doors) calls `engine`
//! (conversation rules, providers, knowledge), which keeps its state in `store` (redb and blob
//! files). `config` is read once at start. See ARCHITECTURE.md for the map.

pub mod api;
pub mod config;
pub mod device;
pub mod engine;
pub mod fleet;
pub mod logs;
pub mod proto;
pub mod store;
pub mod update;
pub mod watchdog;

use std::pin::Pin;
use std::sync::Arc;

use api::AppState;
use config::Config;
use engine::Engine;

/// Why the server stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// `shutdown` completed.
    Shutdown,
    /// An administrator asked for a restart (or a restore needs one): the caller starts the
    /// kiosk again (`docent` exits for systemd, or runs itself again; see docs/system.md).
    Restart,
}

/// A started kiosk, as `run` hands it to `on_ready` (tests and benchmarks reach the devices here).
pub struct Ready {
    pub addr: std::net::SocketAddr,
    pub engine: Arc<Engine>,
    pub devices: Arc<device::Devices>,
    /// The loops the watchdog watches: the engine, and the kiosk loop when there are devices.
    pub loops: Vec<watchdog::Watched>,
    /// SHA-256 fingerprint of the HTTPS certificate (`AB:CD:…`), for a visitor to compare.
    pub tls_fingerprint: String,
}

/// What `run` serves: the configuration, and what the caller hooks into the start and the stop.
/// `Run::new(config)` has the defaults; the other methods change one each.
pub struct Run {
    config: Config,
    firmware: Option<Arc<dyn fleet::Firmware>>,
    clock: Option<Arc<dyn engine::hours::Clock>>,
    on_ready: Box<dyn FnOnce(Ready) + Send>,
    shutdown: Pin<Box<dyn Future<Output = ()> + Send>>,
}

impl Run {
    /// The kiosk's own update service (RAUC), nothing told when it is ready, and no stop but a
    /// restart.
    pub fn new(config: Config) -> Run {
        Run {
            config,
            firmware: None,
            clock: None,
            on_ready: Box::new(|_| {}),
            shutdown: Box::pin(std::future::pending()),
        }
    }

    /// Called once the kiosk serves, with the bound address (the port may have been 0), the
    /// engine and the devices.
    pub fn on_ready(mut self, on_ready: impl FnOnce(Ready) + Send + 'static) -> Run {
        self.on_ready = Box::new(on_ready);
        self
    }

    /// The kiosk stops when this completes.
    pub fn shutdown(mut self, shutdown: impl Future<Output = ()> + Send + 'static) -> Run {
        self.shutdown = Box::pin(shutdown);
        self
    }

    /// Where the kiosk's local time comes from, instead of the system's: a test's simulated day
    /// (opening hours, availability, updates that wait for the museum to close).
    pub fn clock(mut self, clock: Arc<dyn engine::hours::Clock>) -> Run {
        self.clock = Some(clock);
        self
    }

    /// The update service the fleet client hands firmware bundles to, instead of the kiosk's
    /// own (tests stand in for RAUC here).
    pub fn firmware(mut self, firmware: Arc<dyn fleet::Firmware>) -> Run {
        self.firmware = Some(firmware);
        self
    }
}

/// Opens the data directory and serves the kiosk on the configured address until `shutdown`
/// completes or a restart is asked for.
pub async fn run(options: Run) -> anyhow::Result<Stopped> {
    let Run {
        config,
        firmware,
        clock,
        on_ready,
        shutdown,
    } = options;
    let listen = config.listen;
    let engine = tokio::task::spawn_blocking(move || Engine::open(config)).await??;
    if let Some(clock) = clock {
        engine.use_clock(clock);
    }
    if !engine.has_admin_password() {
        tracing::warn!(
            "no administrator password is configured: admin routes are open (setup mode)"
        );
    }
    if engine.config.access.open_conversation_api {
        tracing::warn!(
            "access.open_conversation_api is on: anyone on the network may open sessions and talk to the kiosk without a client key"
        );
    }
    let tls_config = engine.config.clone();
    let tls = Arc::new(
        tokio::task::spawn_blocking(move || api::tls::load_or_create(&tls_config)).await??,
    );
    tracing::info!(fingerprint = %tls.fingerprint(), "HTTPS certificate");
    let listener = tokio::net::TcpListener::bind(listen).await?;
    let addr = listener.local_addr()?;
    tracing::info!(%addr, "serving");
    // Said goodbye on the LAN when `run` returns.
    let _announcement = api::mdns::announce(&engine.config, addr);
    // The sweeps end with the server: a sweep under way holds the engine (and its store) on
    // the blocking pool, and a restart within the process must find the store let go.
    let sweeps_stop = tokio_util::sync::CancellationToken::new();
    let sweeps = [
        spawn_sweeper(&engine, sweeps_stop.clone()),
        spawn_retention(&engine, sweeps_stop.clone()),
    ];
    // The fleet's controller id defaults to the kiosk's host name on the LAN.
    let fleet_stop = tokio_util::sync::CancellationToken::new();
    let updates = Arc::new(update::Updates::open(
        &engine.config.update,
        &engine.config.data_dir,
    )?);
    // Installs and reboots that wait for the museum to close.
    let schedule = update::schedule::spawn(engine.clone(), updates.clone(), fleet_stop.clone());
    let firmware = firmware.unwrap_or_else(|| Arc::new(fleet::Rauc::new(updates.clone())));
    let fleet_state = Arc::new(fleet::Fleet::default());
    let fleet = fleet::client::spawn(
        engine.clone(),
        fleet_state.clone(),
        firmware,
        api::mdns::host_name(&engine.config),
        fleet_stop.clone(),
    );
    let probe_stop = tokio_util::sync::CancellationToken::new();
    let (engine_beat, probe) = watchdog::spawn_engine_probe(engine.clone(), probe_stop.clone());
    // The device layer learns the certificate's fingerprint here (it names no front door).
    let console = device::display::Console {
        listen: addr,
        fingerprint: tls.fingerprint(),
    };
    let devices = device::Devices::start(&engine, console).await;
    let mut loops = vec![watchdog::Watched {
        name: "engine",
        heartbeat: engine_beat,
    }];
    if let Some(heartbeat) = devices.heartbeat.clone() {
        loops.push(watchdog::Watched {
            name: "device",
            heartbeat,
        });
    }
    // Availability counts the devices' health with the providers' (docs/operations.md).
    let device_health = devices.health.clone();
    let sampler = engine::availability::spawn_sampler(
        &engine,
        move || device_health.get().serving(),
        sweeps_stop.clone(),
    );
    tokio::spawn(start_check(updates.clone(), addr, loops.clone()));
    on_ready(Ready {
        addr,
        engine: engine.clone(),
        devices: devices.clone(),
        loops,
        tls_fingerprint: tls.fingerprint(),
    });
    let restart = engine.restart_token();
    let restarting = restart.clone();
    let indexer = engine.clone();
    let shutdown = async move {
        tokio::select! {
            _ = shutdown => {}
            _ = restarting.cancelled() => {}
        }
        // Interrupted indexing resumes at the next start; it must not finish during the stop.
        indexer.knowledge.abandon();
    };
    let served = api::serve(
        listener,
        AppState::new(engine.clone(), devices.clone(), updates, fleet_state),
        tls,
        shutdown,
    )
    .await;
    // The kiosk loop, the engine probe and the indexer let go of the store before `run` returns,
    // so that the data directory can be opened again at once (a restart within the same process).
    devices.stop().await;
    fleet_stop.cancel();
    sweeps_stop.cancel();
    for sweep in sweeps {
        let _ = sweep.await;
    }
    let _ = sampler.await;
    let _ = fleet.await;
    let _ = schedule.await;
    probe_stop.cancel();
    let _ = probe.await;
    tokio::task::spawn_blocking(move || engine.knowledge.stop()).await?;
    served?;
    Ok(if restart.is_cancelled() {
        Stopped::Restart
    } else {
        Stopped::Shutdown
    })
}

/// How long after the start the start check looks: every loop has beaten by then.
const START_CHECK_AFTER: std::time::Duration = std::time::Duration::from_secs(5);

/// The start check (docs/updates.md): docent answers on its own listener and its loops beat. It
/// decides whether the slot this board booted is good; after an update that fails it, the board
/// goes back to the slot it came from.
async fn start_check(
    updates: Arc<update::Updates>,
    addr: std::net::SocketAddr,
    loops: Vec<watchdog::Watched>,
) {
    tokio::time::sleep(START_CHECK_AFTER).await;
    let check = match serves(addr).await {
        Ok(()) => match watchdog::stalled(&loops, START_CHECK_AFTER) {
            Some((name, age)) => Err(format!(
                "the {name} loop has not run for {}s",
                age.as_secs()
            )),
            None => Ok(()),
        },
        Err(e) => Err(e),
    };
    match updates.settle(check).await {
        Ok(true) => {
            tracing::error!("the update failed its start check: rebooting into the previous slot")
        }
        Ok(false) => {}
        Err(e) => tracing::warn!("start check: {e}"),
    }
}

/// Whether the listener answers a health request: one HTTP/1.1 GET over loopback, written
/// here because an HTTP client would first load the system's root certificates (some 20M
/// instructions at every start) for a request that uses no TLS.
async fn serves(mut addr: std::net::SocketAddr) -> Result<(), String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    if addr.ip().is_unspecified() {
        addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    let ask = async {
        let mut conn = tokio::net::TcpStream::connect(addr).await?;
        let request =
            format!("GET /api/v1/health HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        conn.write_all(request.as_bytes()).await?;
        // "HTTP/1.1 200 "
        let mut status_line = [0u8; 13];
        conn.read_exact(&mut status_line).await?;
        Ok::<_, std::io::Error>(status_line)
    };
    match tokio::time::timeout(std::time::Duration::from_secs(10), ask).await {
        Ok(Ok(line)) if line.starts_with(b"HTTP/1.1 2") => Ok(()),
        Ok(Ok(line)) => Err(format!(
            "its API answered {}",
            String::from_utf8_lossy(&line).trim_end()
        )),
        Ok(Err(e)) => Err(format!("its API did not answer: {e}")),
        Err(_) => Err("its API did not answer within 10 s".into()),
    }
}

/// Every hour, and when woken (a visit ended, a test moved the clock), removes the transcripts
/// the retention no longer keeps (docs/privacy.md): on time even when nobody writes.
fn spawn_retention(
    engine: &Arc<Engine>,
    stop: tokio_util::sync::CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let weak = Arc::downgrade(engine);
    let wake = engine.retention.wake.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(engine::privacy::SWEEP_EVERY);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                () = wake.notified() => {}
                () = stop.cancelled() => return,
            }
            let Some(engine) = weak.upgrade() else { return };
            // Awaited to its end, even when the server stops meanwhile.
            let swept = tokio::task::spawn_blocking(move || engine.sweep_transcripts());
            if let Ok(Err(e)) = swept.await {
                tracing::warn!("retention sweep failed: {e}");
            }
        }
    })
}

/// Once a minute closes idle sessions (so abandoned clients do not hold places forever) and
/// drops expired logins.
fn spawn_sweeper(
    engine: &Arc<Engine>,
    stop: tokio_util::sync::CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let weak = Arc::downgrade(engine);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(60));
        tick.tick().await;
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                () = stop.cancelled() => return,
            }
            let Some(engine) = weak.upgrade() else { return };
            let swept = tokio::task::spawn_blocking(move || {
                engine.expire_sessions()?;
                engine.expire_logins()
            });
            if let Ok(Err(e)) = swept.await {
                tracing::warn!("session sweep failed: {e}");
            }
        }
    })
}
