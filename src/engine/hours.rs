//! Opening hours: a weekly schedule and closed days, in the kiosk's local time, and whether the
//! kiosk is open at a given moment (and until when, or when it opens again).
//!
//! Local time is what the C library's `localtime_r` gives: the `TZ` environment variable, else
//! `/etc/localtime` (see docs/opening-hours.md). The clock is a trait so that the device layer
//! can be driven by a simulated one in tests.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::Engine;
use super::error::{Result, bad};

/// Minutes in a day; a day's closing time may be `24:00`.
const DAY: u16 = 24 * 60;
/// Closed days kept at most.
const CLOSED_DAYS_MAX: usize = 400;
/// How far ahead the next opening is looked for.
const LOOK_AHEAD_DAYS: i64 = 400;

/// The opening hours in the settings (`hours` section).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Hours {
    /// Whether the schedule applies; off, the kiosk is always open.
    pub enabled: bool,
    /// Seven days, Monday first: the opening and closing time, or `null` (closed all day).
    pub week: Vec<Option<Span>>,
    /// Days closed whatever the week says, `YYYY-MM-DD`.
    pub closed_days: Vec<String>,
    /// What a press does while the kiosk is closed.
    pub when_closed: WhenClosed,
}

/// One day's opening, `HH:MM` each (the close may be `24:00`), the close after the open.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Span {
    pub open: String,
    pub close: String,
}

/// What the button does while the kiosk is closed.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum WhenClosed {
    /// A short spoken line: closed, and when to come back.
    #[default]
    Say,
    /// Nothing at all.
    Nothing,
}

impl Default for Hours {
    fn default() -> Self {
        let day = || {
            Some(Span {
                open: "09:00".into(),
                close: "17:00".into(),
            })
        };
        Hours {
            enabled: false,
            week: vec![day(), day(), day(), day(), day(), day(), day()],
            closed_days: Vec::new(),
            when_closed: WhenClosed::Say,
        }
    }
}

/// A moment in the kiosk's local time: the day (days since 1970-01-01) and the minute of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct LocalTime {
    pub day: i64,
    pub minute: u16,
}

impl LocalTime {
    /// `year-month-day hour:minute`.
    pub fn new(year: i32, month: u8, day: u8, hour: u8, minute: u8) -> LocalTime {
        LocalTime {
            day: days_from_civil(year, month, day),
            minute: hour as u16 * 60 + minute as u16,
        }
    }

    /// The local time now, as the C library knows it (`TZ`, else `/etc/localtime`).
    pub fn now() -> LocalTime {
        // SAFETY: `time` and `localtime_r` write only into the values given; `tm` is plain data.
        unsafe {
            let t = libc::time(std::ptr::null_mut());
            let mut tm: libc::tm = std::mem::zeroed();
            if libc::localtime_r(&t, &mut tm).is_null() {
                return LocalTime {
                    day: t.div_euclid(86_400),
                    minute: (t.rem_euclid(86_400) / 60) as u16,
                };
            }
            LocalTime::new(
                tm.tm_year + 1900,
                (tm.tm_mon + 1) as u8,
                tm.tm_mday as u8,
                tm.tm_hour as u8,
                tm.tm_min as u8,
            )
        }
    }

    /// Monday 0 ... Sunday 6.
    pub fn weekday(&self) -> usize {
        (self.day + 3).rem_euclid(7) as usize
    }
}

impl std::fmt::Display for LocalTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (y, m, d) = civil_from_days(self.day);
        write!(
            f,
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}",
            self.minute / 60,
            self.minute % 60
        )
    }
}

impl Serialize for LocalTime {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Where the kiosk's idea of "now" comes from: the system's local time, or a test's.
pub trait Clock: Send + Sync {
    fn now(&self) -> LocalTime;
}

/// The system's local time.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> LocalTime {
        LocalTime::now()
    }
}

impl Engine {
    /// Reads the kiosk's local time from `clock` from now on: a test's simulated day.
    pub fn use_clock(&self, clock: Arc<dyn Clock>) {
        *self.clock.write().unwrap_or_else(|e| e.into_inner()) = clock;
    }

    /// The kiosk's local time now, at its clock.
    pub fn local_now(&self) -> LocalTime {
        self.clock.read().unwrap_or_else(|e| e.into_inner()).now()
    }

    /// Whether the kiosk is open now, by the opening hours in the settings, and until when.
    pub fn opening(&self) -> Opening {
        self.settings().hours.at(self.local_now())
    }
}

/// Whether the kiosk is open, and until when (open) or when it opens again (closed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Opening {
    pub open: bool,
    /// When this changes: the closing time, or the next opening (none: no schedule applies, or
    /// no opening within a year).
    pub until: Option<LocalTime>,
    /// `until` as people say it, from the moment it was worked out: "today at 17:00",
    /// "tomorrow at 09:00", "on Tuesday at 09:00", "on 24 December at 09:00"; "" without one.
    pub when: String,
}

impl Opening {
    /// Always open (no schedule).
    pub fn always() -> Opening {
        Opening {
            open: true,
            until: None,
            when: String::new(),
        }
    }

    /// What the kiosk says to a press while closed.
    pub fn closed_line(&self) -> String {
        if self.when.is_empty() {
            "Sorry, we're closed now.".into()
        } else {
            format!("Sorry, we're closed now. Please come back {}.", self.when)
        }
    }
}

const WEEKDAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];
const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// `then` as people say it when it is `now`.
fn say_when(now: LocalTime, then: LocalTime) -> String {
    let at = format!("at {:02}:{:02}", then.minute / 60, then.minute % 60);
    match then.day - now.day {
        0 => format!("today {at}"),
        1 => format!("tomorrow {at}"),
        2..=6 => format!("on {} {at}", WEEKDAYS[then.weekday()]),
        _ => {
            let (_, m, d) = civil_from_days(then.day);
            format!("on {d} {} {at}", MONTHS[m as usize - 1])
        }
    }
}

/// `HH:MM` as minutes of the day (`24:00` allowed).
fn minutes(s: &str) -> Option<u16> {
    let (h, m) = s.split_once(':')?;
    if h.len() != 2 || m.len() != 2 {
        return None;
    }
    let (h, m): (u16, u16) = (h.parse().ok()?, m.parse().ok()?);
    let total = h * 60 + m;
    (m < 60 && total <= DAY).then_some(total)
}

/// `YYYY-MM-DD` as days since 1970-01-01.
fn date(s: &str) -> Option<i64> {
    let mut parts = s.split('-');
    let (y, m, d) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || y.len() != 4 || m.len() != 2 || d.len() != 2 {
        return None;
    }
    let (y, m, d): (i32, u8, u8) = (y.parse().ok()?, m.parse().ok()?, d.parse().ok()?);
    let days = days_from_civil(y, m, d);
    // A day that does not exist (31 April) comes back as another date.
    (civil_from_days(days) == (y, m, d)).then_some(days)
}

impl Hours {
    pub fn validate(&self) -> Result<()> {
        if self.week.len() != 7 {
            return Err(bad("hours.week must list seven days, Monday first"));
        }
        for (i, span) in self.week.iter().enumerate() {
            let Some(span) = span else { continue };
            let (open, close) = (minutes(&span.open), minutes(&span.close));
            let day = WEEKDAYS[i];
            match (open, close) {
                (Some(o), Some(c)) if o < c => {}
                (Some(_), Some(_)) => {
                    return Err(bad(format!("hours.week: {day} must close after it opens")));
                }
                _ => {
                    return Err(bad(format!(
                        "hours.week: {day}'s times must be HH:MM, such as 09:30 or 24:00"
                    )));
                }
            }
        }
        if self.closed_days.len() > CLOSED_DAYS_MAX {
            return Err(bad(format!(
                "hours.closed_days may list at most {CLOSED_DAYS_MAX} days"
            )));
        }
        if let Some(d) = self.closed_days.iter().find(|d| date(d).is_none()) {
            return Err(bad(format!(
                "hours.closed_days: {d:?} is not a date such as 2026-12-25"
            )));
        }
        Ok(())
    }

    /// The opening and closing minute of `day`, or none when it is closed all day.
    fn on(&self, day: i64, closed: &[i64]) -> Option<(u16, u16)> {
        if closed.contains(&day) {
            return None;
        }
        let weekday = (day + 3).rem_euclid(7) as usize;
        let span = self.week.get(weekday)?.as_ref()?;
        Some((minutes(&span.open)?, minutes(&span.close)?))
    }

    /// The minutes of `day` the kiosk is open, `open..close`, or none when closed all day;
    /// all of it without a schedule. Availability counts a day's opening by this.
    pub fn open_minutes(&self, day: i64) -> Option<(u16, u16)> {
        if !self.enabled {
            return Some((0, DAY));
        }
        let closed: Vec<i64> = self.closed_days.iter().filter_map(|d| date(d)).collect();
        self.on(day, &closed)
    }

    /// Whether the kiosk is open at `now`, and until when.
    pub fn at(&self, now: LocalTime) -> Opening {
        if !self.enabled {
            return Opening::always();
        }
        let closed: Vec<i64> = self.closed_days.iter().filter_map(|d| date(d)).collect();
        let make = |open: bool, until: Option<LocalTime>| Opening {
            open,
            until,
            when: until.map(|t| say_when(now, t)).unwrap_or_default(),
        };
        if let Some((o, c)) = self.on(now.day, &closed) {
            if (o..c).contains(&now.minute) {
                // Open until the close, or past midnight when the next day opens at 00:00.
                let mut until = LocalTime {
                    day: now.day,
                    minute: c,
                };
                if c == DAY {
                    until = match self.on(now.day + 1, &closed) {
                        Some((0, c2)) => LocalTime {
                            day: now.day + 1,
                            minute: c2,
                        },
                        _ => LocalTime {
                            day: now.day + 1,
                            minute: 0,
                        },
                    };
                }
                return make(true, Some(until));
            }
            if now.minute < o {
                return make(
                    false,
                    Some(LocalTime {
                        day: now.day,
                        minute: o,
                    }),
                );
            }
        }
        let next = (1..=LOOK_AHEAD_DAYS).find_map(|d| {
            self.on(now.day + d, &closed).map(|(o, _)| LocalTime {
                day: now.day + d,
                minute: o,
            })
        });
        make(false, next)
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i32, m: u8, d: u8) -> i64 {
    let (m, d) = (m as i64, d as i64);
    let y = if m <= 2 { y as i64 - 1 } else { y as i64 };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i32, u8, u8) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let y = (yoe + era * 400 + i64::from(m <= 2)) as i32;
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(open: &str, close: &str) -> Option<Span> {
        Some(Span {
            open: open.into(),
            close: close.into(),
        })
    }

    /// Monday to Friday 09:00-17:00, Saturday 10:00-24:00, Sunday closed; 2026-12-25 closed.
    fn museum() -> Hours {
        let day = || span("09:00", "17:00");
        Hours {
            enabled: true,
            week: vec![
                day(),
                day(),
                day(),
                day(),
                day(),
                span("10:00", "24:00"),
                None,
            ],
            closed_days: vec!["2026-12-25".into()],
            when_closed: WhenClosed::Say,
        }
    }

    #[test]
    fn dates_and_weekdays() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(
            civil_from_days(days_from_civil(2026, 11, 25)),
            (2026, 11, 25)
        );
        assert_eq!(civil_from_days(days_from_civil(2000, 2, 29)), (2000, 2, 29));
        // 2026-11-25 is a Wednesday.
        assert_eq!(LocalTime::new(2026, 11, 25, 12, 0).weekday(), 2);
        assert_eq!(
            LocalTime::new(2026, 11, 25, 9, 5).to_string(),
            "2026-11-25T09:05"
        );
        assert_eq!(date("2026-04-31"), None);
        assert_eq!(date("2026-4-30"), None);
        assert!(LocalTime::now().minute < DAY);
    }

    #[test]
    fn open_closed_and_when_it_changes() {
        let h = museum();
        // Wednesday 12:00: open until 17:00.
        let o = h.at(LocalTime::new(2026, 11, 25, 12, 0));
        assert!(o.open);
        assert_eq!(o.when, "today at 17:00");
        // Wednesday 08:59: opens at 09:00.
        let o = h.at(LocalTime::new(2026, 11, 25, 8, 59));
        assert_eq!((o.open, o.when.as_str()), (false, "today at 09:00"));
        // Wednesday 17:00 sharp: closed until Thursday.
        let o = h.at(LocalTime::new(2026, 11, 25, 17, 0));
        assert_eq!((o.open, o.when.as_str()), (false, "tomorrow at 09:00"));
        assert_eq!(
            o.closed_line(),
            "Sorry, we're closed now. Please come back tomorrow at 09:00."
        );
        // Saturday night open until midnight; Sunday closed: Monday 09:00 next.
        let o = h.at(LocalTime::new(2026, 11, 28, 23, 30));
        assert!(o.open);
        assert_eq!(o.until.unwrap().to_string(), "2026-11-29T00:00");
        let o = h.at(LocalTime::new(2026, 11, 29, 12, 0));
        assert_eq!((o.open, o.when.as_str()), (false, "tomorrow at 09:00"));
        // Christmas (a Friday) closed; Saturday opens at 10:00.
        let o = h.at(LocalTime::new(2026, 12, 25, 12, 0));
        assert_eq!((o.open, o.when.as_str()), (false, "tomorrow at 10:00"));
        let o = h.at(LocalTime::new(2026, 12, 24, 18, 0));
        assert_eq!(o.when, "on Saturday at 10:00");
        // Off: always open.
        let off = Hours {
            enabled: false,
            ..museum()
        };
        assert_eq!(
            off.at(LocalTime::new(2026, 11, 29, 3, 0)),
            Opening::always()
        );
        // Never open: closed with no next opening.
        let never = Hours {
            week: vec![None; 7],
            ..museum()
        };
        let o = never.at(LocalTime::new(2026, 11, 25, 12, 0));
        assert_eq!((o.open, o.until), (false, None));
        assert_eq!(o.closed_line(), "Sorry, we're closed now.");
    }

    #[test]
    fn a_far_opening_is_said_with_its_date() {
        let mut h = museum();
        h.closed_days = (0..20)
            .map(|i| {
                let (y, m, d) = civil_from_days(days_from_civil(2026, 12, 1) + i);
                format!("{y:04}-{m:02}-{d:02}")
            })
            .collect();
        let o = h.at(LocalTime::new(2026, 12, 1, 8, 0));
        assert_eq!(o.when, "on 21 December at 09:00");
    }

    #[test]
    fn validation() {
        assert!(museum().validate().is_ok());
        assert!(Hours::default().validate().is_ok());
        let bad = [
            Hours {
                week: vec![None; 6],
                ..museum()
            },
            Hours {
                week: vec![span("17:00", "09:00"); 7],
                ..museum()
            },
            Hours {
                week: vec![span("9:00", "17:00"); 7],
                ..museum()
            },
            Hours {
                week: vec![span("09:00", "24:01"); 7],
                ..museum()
            },
            Hours {
                closed_days: vec!["25/12/2026".into()],
                ..museum()
            },
        ];
        for h in bad {
            assert!(h.validate().is_err(), "{h:?}");
        }
    }
}
