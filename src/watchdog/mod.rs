//! Liveness. The engine (a probe task making a real round trip through it) and the kiosk loop
//! each beat a `Heartbeat`; a watchdog on its own OS thread pings systemd (`WATCHDOG=1`) while
//! every heartbeat is fresh. When one is older than the stall limit it stops pinging, logs which
//! loop stalled and for how long, and exits the process with `EXIT_STALLED`, so that the unit's
//! restart policy brings the kiosk back. See docs/watchdog.md.

pub mod notify;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::engine::Engine;
use notify::Notifier;

/// Exit code of a process whose loop stalled (`EX_SOFTWARE` of sysexits.h).
pub const EXIT_STALLED: u8 = 70;

/// How often the watched loops beat: a quarter of the smallest stall limit worth having (2 s),
/// so a busy machine does not pass for a stalled loop.
pub const BEAT: Duration = Duration::from_millis(500);

/// How often the watchdog thread looks at the heartbeats (at most).
const CHECK: Duration = Duration::from_millis(250);

/// When a loop last made progress.
pub struct Heartbeat {
    origin: Instant,
    /// Milliseconds from `origin` to the last beat.
    last: AtomicU64,
}

impl Default for Heartbeat {
    /// A heartbeat that has just beaten.
    fn default() -> Heartbeat {
        Heartbeat {
            origin: Instant::now(),
            last: AtomicU64::new(0),
        }
    }
}

impl Heartbeat {
    pub fn beat(&self) {
        self.last
            .store(self.origin.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    /// Time since the last beat.
    pub fn age(&self) -> Duration {
        self.origin
            .elapsed()
            .saturating_sub(Duration::from_millis(self.last.load(Ordering::Relaxed)))
    }
}

/// A loop the watchdog watches.
#[derive(Clone)]
pub struct Watched {
    /// `engine` or `device`, as the log names it.
    pub name: &'static str,
    pub heartbeat: Arc<Heartbeat>,
}

/// The stalest loop whose heartbeat is older than `limit`, with its age.
pub fn stalled(loops: &[Watched], limit: Duration) -> Option<(&'static str, Duration)> {
    loops
        .iter()
        .map(|l| (l.name, l.heartbeat.age()))
        .filter(|(_, age)| *age > limit)
        .max_by_key(|(_, age)| *age)
}

/// Every `BEAT`, makes one round trip through the engine on the blocking pool and then beats:
/// a deadlocked engine, a starved blocking pool or a blocked runtime all stop the beats. Ends at
/// `stop`, after the round trip in flight (so the engine is let go when the task is awaited).
pub fn spawn_engine_probe(
    engine: Arc<Engine>,
    stop: CancellationToken,
) -> (Arc<Heartbeat>, tokio::task::JoinHandle<()>) {
    let heartbeat = Arc::new(Heartbeat::default());
    let beat = heartbeat.clone();
    let task = tokio::spawn(async move {
        let mut tick = tokio::time::interval(BEAT);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            let e = engine.clone();
            match tokio::task::spawn_blocking(move || e.probe()).await {
                // A store that cannot be read is reported, but the engine did answer.
                Ok(Err(e)) => tracing::warn!("engine probe: {e}"),
                Ok(Ok(())) => {}
                // It panicked (a poisoned lock): no beat, so the watchdog restarts the kiosk.
                Err(_) => continue,
            }
            beat.beat();
        }
    });
    (heartbeat, task)
}

/// The process's watchdog: systemd notifications and stall detection.
pub struct Watchdog {
    notifier: Option<Arc<Notifier>>,
    /// `WATCHDOG_USEC`, when systemd watches this process.
    period: Option<Duration>,
    /// Stall limit: the systemd period, else `watchdog_secs`; `None` never exits.
    limit: Option<Duration>,
    stopping: Arc<AtomicBool>,
}

impl Watchdog {
    /// From the environment systemd sets (`NOTIFY_SOCKET`, `WATCHDOG_USEC`, `WATCHDOG_PID`) and
    /// the `watchdog_secs` configuration key (0: no self-exit without systemd's watchdog).
    pub fn from_env(watchdog_secs: u64) -> Watchdog {
        let notifier = Notifier::from_env().map(Arc::new);
        let var = |name| std::env::var(name).ok();
        let period = notifier.as_ref().and_then(|_| {
            notify::watchdog_period(
                var("WATCHDOG_USEC").as_deref(),
                var("WATCHDOG_PID").as_deref(),
                std::process::id(),
            )
        });
        let limit = period.or((watchdog_secs > 0).then(|| Duration::from_secs(watchdog_secs)));
        Watchdog {
            notifier,
            period,
            limit,
            stopping: Arc::default(),
        }
    }

    /// Tells systemd the kiosk is serving (`READY=1` with `status`) and starts watching `loops`
    /// on a thread of its own, so that a blocked async runtime cannot silence the watchdog too.
    pub fn ready(&self, status: &str, loops: Vec<Watched>) {
        self.notify(&format!("READY=1\n{}", notify::status(status)));
        if self.period.is_none() && self.limit.is_none() {
            return;
        }
        let names: Vec<_> = loops.iter().map(|l| l.name).collect();
        tracing::info!(
            loops = ?names,
            limit = ?self.limit,
            systemd_period = ?self.period,
            "watchdog started"
        );
        let watcher = Watcher {
            notifier: self.notifier.clone(),
            ping_every: self.period.map(|p| p / 2),
            limit: self.limit,
            stopping: self.stopping.clone(),
            loops,
        };
        if let Err(e) = std::thread::Builder::new()
            .name("watchdog".into())
            .spawn(move || watcher.run())
        {
            tracing::error!("cannot start the watchdog thread: {e}");
        }
    }

    /// Graceful shutdown: `STOPPING=1`, and the loops may stop beating from now on.
    pub fn stopping(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.notify("STOPPING=1");
    }

    fn notify(&self, message: &str) {
        if let Some(n) = &self.notifier
            && let Err(e) = n.send(message)
        {
            tracing::warn!("sd_notify {message:?}: {e}");
        }
    }
}

/// The watchdog thread's state.
struct Watcher {
    notifier: Option<Arc<Notifier>>,
    ping_every: Option<Duration>,
    limit: Option<Duration>,
    stopping: Arc<AtomicBool>,
    loops: Vec<Watched>,
}

impl Watcher {
    fn run(self) {
        let tick = self.ping_every.map_or(CHECK, |p| p.min(CHECK));
        let mut last_ping: Option<Instant> = None;
        loop {
            std::thread::sleep(tick);
            if self.stopping.load(Ordering::SeqCst) {
                return;
            }
            if let Some(limit) = self.limit
                && let Some((name, age)) = stalled(&self.loops, limit)
            {
                tracing::error!(
                    "the {name} loop stalled: no progress for {age:.1?} (limit {limit:?}); \
                     no more watchdog pings, exiting with code {EXIT_STALLED}"
                );
                if let Some(n) = &self.notifier {
                    let _ = n.send(&notify::status(&format!(
                        "{name} loop stalled for {age:.1?}"
                    )));
                }
                std::process::exit(EXIT_STALLED.into());
            }
            if let (Some(every), Some(n)) = (self.ping_every, &self.notifier)
                && last_ping.is_none_or(|t| t.elapsed() >= every)
            {
                if let Err(e) = n.send("WATCHDOG=1") {
                    tracing::warn!("sd_notify WATCHDOG=1: {e}");
                }
                last_ping = Some(Instant::now());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watched(name: &'static str, age: Duration) -> Watched {
        let heartbeat = Heartbeat {
            origin: Instant::now() - age,
            last: AtomicU64::new(0),
        };
        Watched {
            name,
            heartbeat: Arc::new(heartbeat),
        }
    }

    #[test]
    fn a_beat_makes_the_heartbeat_fresh() {
        let loops = [watched("engine", Duration::from_secs(5))];
        assert!(loops[0].heartbeat.age() >= Duration::from_secs(5));
        loops[0].heartbeat.beat();
        assert!(loops[0].heartbeat.age() < Duration::from_secs(1));
    }

    #[test]
    fn the_stalest_loop_past_the_limit_is_named() {
        let limit = Duration::from_secs(2);
        let fresh = watched("engine", Duration::ZERO);
        let old = watched("device", Duration::from_secs(3));
        let older = watched("engine", Duration::from_secs(4));
        assert!(stalled(std::slice::from_ref(&fresh), limit).is_none());
        let (name, age) = stalled(&[fresh.clone(), old.clone()], limit).unwrap();
        assert_eq!(name, "device");
        assert!(age >= Duration::from_secs(3));
        assert_eq!(stalled(&[old, older, fresh], limit).unwrap().0, "engine");
    }
}
