//! Availability within opening hours (docs/operations.md, "Availability"): per local day, the
//! seconds the kiosk was open by the opening hours and the seconds it was fully serving while
//! open, so that a technician can say how available each kiosk was while the museum was open.
//!
//! A sampler counts the time from one sample to the next by what the earlier one saw, minute by
//! minute of the kiosk's clock (`Engine::local_now`), so a simulated clock may jump hours between
//! two samples and still be counted exactly. The engine does not know the devices: the sampler
//! is handed a function that says whether they serve.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redb::ReadableTable;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::Engine;
use super::error::{Result, bad};
use super::hours::{Hours, LocalTime};
use crate::store;
use crate::store::tables::{AVAILABILITY, META};

/// How often the sampler looks (real time).
pub const SAMPLE_EVERY: Duration = Duration::from_secs(5);
/// Days kept; also the longest period asked for.
pub const KEEP_DAYS: u16 = 400;
/// The `META` key of the local minute counted up to, so that the next start counts the time the
/// kiosk was off.
const SAMPLED: &str = "availability_sampled";
const MINUTES_PER_DAY: u16 = 24 * 60;

/// One day's counts as stored (`AVAILABILITY`).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
struct Counted {
    open_secs: u64,
    serving_secs: u64,
}

/// One local day of the kiosk.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct DayAvailability {
    /// The kiosk's local day, `YYYY-MM-DD`.
    pub date: String,
    /// Seconds open by the opening hours (the whole day without a schedule).
    pub open_secs: u64,
    /// Of those, seconds fully serving: devices and configured providers healthy.
    pub serving_secs: u64,
}

/// What one sample saw.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct Sample {
    /// The kiosk's local time, `YYYY-MM-DDTHH:MM`.
    #[schema(value_type = String)]
    pub at: LocalTime,
    /// Open by the opening hours.
    pub open: bool,
    /// The devices and the configured providers were healthy.
    pub serving: bool,
}

/// How available the kiosk was over the last days.
#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
pub struct Availability {
    /// The days of the period the kiosk has counts for, oldest first.
    pub days: Vec<DayAvailability>,
    pub open_secs: u64,
    pub serving_secs: u64,
    /// `serving_secs` in percent of `open_secs`, to 0.01; none when the kiosk was never open.
    pub percent: Option<f64>,
    /// The last sample since the start (none before the first): a test waits for one.
    pub last_sample: Option<Sample>,
}

/// The last sample of this run; none until the first, which counts from the store's minute.
#[derive(Default)]
pub struct Sampler(Mutex<Option<Sample>>);

/// Minutes since 1970-01-01 00:00 local.
fn minute_of(t: LocalTime) -> i64 {
    t.day * i64::from(MINUTES_PER_DAY) + i64::from(t.minute)
}

fn date_of(day: i64) -> String {
    LocalTime { day, minute: 0 }.to_string()[..10].to_string()
}

/// The open and serving seconds of each local day in the minutes `from..to`: a minute counts
/// as open when `hours` have the kiosk open, and as serving when also `serving`. Days without an
/// open minute are left out; at most the last `KEEP_DAYS` days are counted.
fn count(hours: &Hours, from: LocalTime, to: LocalTime, serving: bool) -> Vec<(i64, Counted)> {
    let from = from.max(LocalTime {
        day: to.day - i64::from(KEEP_DAYS) + 1,
        minute: 0,
    });
    if minute_of(to) <= minute_of(from) {
        return Vec::new();
    }
    (from.day..=to.day)
        .filter_map(|day| {
            let lo = if day == from.day { from.minute } else { 0 };
            let hi = if day == to.day {
                to.minute
            } else {
                MINUTES_PER_DAY
            };
            let (open, close) = hours.open_minutes(day)?;
            let minutes = u64::from(hi.min(close).saturating_sub(lo.max(open)));
            (minutes > 0).then(|| {
                let open_secs = minutes * 60;
                let serving_secs = if serving { open_secs } else { 0 };
                (
                    day,
                    Counted {
                        open_secs,
                        serving_secs,
                    },
                )
            })
        })
        .collect()
}

impl Engine {
    /// Counts the time since the last sample by what that sample saw, and keeps this one
    /// (`serving`: the devices and the configured providers are healthy now, as the sampler
    /// found). The first sample after a start counts the time since the last counted minute as
    /// not serving wherever it was open: a kiosk that was off was not available.
    pub fn sample_availability(&self, serving: bool) -> Result<Sample> {
        let now = self.local_now();
        let settings = self.settings();
        let hours = &settings.hours;
        let open = hours
            .open_minutes(now.day)
            .is_some_and(|(open, close)| (open..close).contains(&now.minute));
        let sample = Sample {
            at: now,
            open,
            serving,
        };
        let mut last = self.sampler.0.lock().unwrap_or_else(|e| e.into_inner());
        let (from, was_serving) = match *last {
            Some(prev) => (Some(prev.at), prev.serving),
            None => (self.sampled_up_to()?, false),
        };
        if from != Some(now) {
            let counted = from.map_or_else(Vec::new, |f| count(hours, f, now, was_serving));
            let tx = self.store.write()?;
            {
                let mut table = tx.open_table(AVAILABILITY)?;
                for (day, c) in counted {
                    let date = date_of(day);
                    let mut day = match table.get(date.as_str())? {
                        Some(v) => store::from_json::<Counted>(v.value())?,
                        None => Counted::default(),
                    };
                    day.open_secs += c.open_secs;
                    day.serving_secs += c.serving_secs;
                    table.insert(date.as_str(), store::to_json(&day).as_slice())?;
                }
                let oldest = date_of(now.day - i64::from(KEEP_DAYS) + 1);
                table.retain_in(..oldest.as_str(), |_, _| false)?;
                let minute = u64::try_from(minute_of(now)).unwrap_or(0);
                tx.open_table(META)?
                    .insert(SAMPLED, minute.to_be_bytes().as_slice())?;
            }
            tx.commit()?;
        }
        *last = Some(sample);
        Ok(sample)
    }

    /// The local minute the store's counts reach, if it has any.
    fn sampled_up_to(&self) -> Result<Option<LocalTime>> {
        let tx = self.store.read()?;
        let meta = tx.open_table(META)?;
        let Some(v) = meta.get(SAMPLED)? else {
            return Ok(None);
        };
        let Ok(bytes) = <[u8; 8]>::try_from(v.value()) else {
            return Ok(None);
        };
        let minute = i64::try_from(u64::from_be_bytes(bytes)).unwrap_or(0);
        let per_day = i64::from(MINUTES_PER_DAY);
        Ok(Some(LocalTime {
            day: minute.div_euclid(per_day),
            minute: minute.rem_euclid(per_day) as u16,
        }))
    }

    /// How available the kiosk was over the last `days` local days, today included (1 to
    /// `KEEP_DAYS`): per day and together. The console shows the last 30 days'; the metrics read
    /// it too.
    pub fn availability(&self, days: u16) -> Result<Availability> {
        if !(1..=KEEP_DAYS).contains(&days) {
            return Err(bad(format!("days must be 1 to {KEEP_DAYS}")));
        }
        let today = self.local_now().day;
        let (first, last) = (date_of(today - i64::from(days) + 1), date_of(today));
        // Held while the counts are read: a sample keeps it until its counts are committed, so
        // the last sample given has its counts in what is read.
        let last_sample = self.sampler.0.lock().unwrap_or_else(|e| e.into_inner());
        let tx = self.store.read()?;
        let table = tx.open_table(AVAILABILITY)?;
        let mut out = Vec::new();
        for item in table.range(first.as_str()..=last.as_str())? {
            let (k, v) = item?;
            let c: Counted = store::from_json(v.value())?;
            out.push(DayAvailability {
                date: k.value().to_string(),
                open_secs: c.open_secs,
                serving_secs: c.serving_secs,
            });
        }
        let open_secs: u64 = out.iter().map(|d| d.open_secs).sum();
        let serving_secs: u64 = out.iter().map(|d| d.serving_secs).sum();
        let percent = (open_secs > 0)
            .then(|| (serving_secs as f64 * 10_000.0 / open_secs as f64).round() / 100.0);
        Ok(Availability {
            days: out,
            open_secs,
            serving_secs,
            percent,
            last_sample: *last_sample,
        })
    }
}

/// Samples every `SAMPLE_EVERY` until `stop`: whether the configured providers are healthy (as
/// the health route finds them) and `devices_serve` says the devices are, then
/// [`Engine::sample_availability`] on the blocking pool, awaited to its end.
pub fn spawn_sampler(
    engine: &Arc<Engine>,
    devices_serve: impl Fn() -> bool + Send + 'static,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let weak = Arc::downgrade(engine);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(SAMPLE_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut failing = false;
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                () = stop.cancelled() => return,
            }
            let Some(engine) = weak.upgrade() else { return };
            // Health first, then the clock (read in the sample): a state seen is never dated
            // before it was seen.
            let probes = tokio::select! {
                p = engine.reachability() => p,
                () = stop.cancelled() => return,
            };
            let serving = devices_serve() && engine.provider_health(&probes).iter().all(|h| h.ok);
            let sampled = tokio::task::spawn_blocking(move || engine.sample_availability(serving));
            // Said once when the samples start failing (a full disk would say it every 5 s),
            // and once when they work again; the time between is counted then.
            match sampled.await {
                Ok(Err(e)) if !failing => {
                    tracing::warn!("availability samples fail: {e}");
                    failing = true;
                }
                Ok(Ok(_)) if failing => {
                    tracing::info!("availability samples work again");
                    failing = false;
                }
                _ => {}
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::hours::{Span, WhenClosed};

    /// Every day 10:00-18:00, Saturdays 20:00-24:00, 2026-11-26 (a Thursday) closed.
    fn hours() -> Hours {
        let day = || {
            Some(Span {
                open: "10:00".into(),
                close: "18:00".into(),
            })
        };
        let mut week = vec![day(); 7];
        week[5] = Some(Span {
            open: "20:00".into(),
            close: "24:00".into(),
        });
        Hours {
            enabled: true,
            week,
            closed_days: vec!["2026-11-26".into()],
            when_closed: WhenClosed::Say,
        }
    }

    fn at(d: u8, h: u8, m: u8) -> LocalTime {
        LocalTime::new(2026, 11, d, h, m)
    }

    fn counted(open_secs: u64, serving_secs: u64) -> Counted {
        Counted {
            open_secs,
            serving_secs,
        }
    }

    #[test]
    fn a_day_is_counted_by_its_opening_hours() {
        let h = hours();
        // Wednesday 25: 09:00 -> 12:00 serving, 12:00 -> 12:30 not, 12:30 -> 19:00 serving.
        let day = at(25, 0, 0).day;
        assert_eq!(
            count(&h, at(25, 9, 0), at(25, 12, 0), true),
            [(day, counted(7200, 7200))]
        );
        assert_eq!(
            count(&h, at(25, 12, 0), at(25, 12, 30), false),
            [(day, counted(1800, 0))]
        );
        assert_eq!(
            count(&h, at(25, 12, 30), at(25, 19, 0), true),
            [(day, counted(19_800, 19_800))]
        );
        // Closed minutes count nothing; a clock that went back counts nothing.
        assert!(count(&h, at(25, 18, 0), at(25, 23, 59), true).is_empty());
        assert!(count(&h, at(25, 12, 0), at(25, 11, 0), true).is_empty());
        // No schedule: the whole day is open.
        let always = Hours::default();
        assert_eq!(
            count(&always, at(25, 0, 0), at(26, 0, 0), false),
            [(day, counted(86_400, 0))]
        );
    }

    #[test]
    fn counting_crosses_midnight_and_skips_a_closed_day() {
        let h = hours();
        // Saturday 28 19:00 -> Monday 30 11:00: Saturday's 20:00-24:00, all of Sunday's
        // 10:00-18:00, Monday's first hour.
        let got = count(&h, at(28, 19, 0), at(30, 11, 0), true);
        assert_eq!(
            got,
            [
                (at(28, 0, 0).day, counted(4 * 3600, 4 * 3600)),
                (at(29, 0, 0).day, counted(8 * 3600, 8 * 3600)),
                (at(30, 0, 0).day, counted(3600, 3600)),
            ]
        );
        // Wednesday 25 17:00 -> Friday 27 10:30 while off: Thursday is a closed day.
        let got = count(&h, at(25, 17, 0), at(27, 10, 30), false);
        assert_eq!(
            got,
            [
                (at(25, 0, 0).day, counted(3600, 0)),
                (at(27, 0, 0).day, counted(1800, 0)),
            ]
        );
        // A kiosk off for years counts its last KEEP_DAYS days only.
        let always = Hours::default();
        let got = count(
            &always,
            at(1, 0, 0),
            LocalTime::new(2030, 1, 1, 0, 0),
            false,
        );
        assert_eq!(got.len(), usize::from(KEEP_DAYS) - 1);
        assert_eq!(date_of(got[0].0), "2028-11-28");
    }
}
