//! Physical presence for the first-boot password.
//!
//! In first boot the display shows the console's address and the certificate's fingerprint to
//! anyone, but the password only to someone standing at the kiosk who holds the push-to-talk
//! button for [`HOLD`] (5 s): a passer-by who just looks at the screen never sees it. It is then
//! shown for at most [`SHOW_FOR`] (10 minutes) and hidden again until the next such hold (or
//! for good at the first administrator login).
//!
//! A shorter press is an ordinary visitor turn; a hold that reaches 5 s in first boot is the
//! gesture, and the utterance it began is dropped (the kiosk goes back to idle, where the setup
//! screen shows). The kiosk loop feeds the button's edges here and wakes at [`Presence::next`];
//! time is passed in, never read inside, so the tests are exact.

use std::time::{Duration, Instant};

/// How long the button must be held to show the password.
pub const HOLD: Duration = Duration::from_secs(5);
/// How long the password stays on the screen after the hold.
pub const SHOW_FOR: Duration = Duration::from_secs(10 * 60);

/// What changed at a [`Presence::tick`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// The hold reached [`HOLD`]: show the password (from now until `now + SHOW_FOR`).
    Shown,
    /// [`SHOW_FOR`] is over: hide it.
    Hidden,
}

/// The hold in progress and the time the password is shown until.
#[derive(Debug, Default)]
pub struct Presence {
    /// The button went down at this time (first boot only) and is still down.
    held_since: Option<Instant>,
    shown_until: Option<Instant>,
}

impl Presence {
    /// The button went down.
    pub fn press(&mut self, now: Instant) {
        self.held_since = Some(now);
    }

    /// The button came up (a hold that had not reached [`HOLD`] shows nothing).
    pub fn release(&mut self) {
        self.held_since = None;
    }

    /// First boot is over (or never was): nothing is held and nothing shown.
    pub fn end(&mut self) {
        *self = Presence::default();
    }

    /// Whether the password is shown at `now`.
    pub fn shown(&self, now: Instant) -> bool {
        self.shown_until.is_some_and(|until| now < until)
    }

    /// Applies what is due at `now`: a hold that reached [`HOLD`] shows the password (a hold
    /// counts once: keeping the button down longer does not show it again later), the end of
    /// [`SHOW_FOR`] hides it.
    pub fn tick(&mut self, now: Instant) -> Option<Change> {
        if let Some(since) = self.held_since
            && now.saturating_duration_since(since) >= HOLD
        {
            self.held_since = None;
            self.shown_until = Some(now + SHOW_FOR);
            return Some(Change::Shown);
        }
        match self.shown_until {
            Some(until) if now >= until => {
                self.shown_until = None;
                Some(Change::Hidden)
            }
            _ => None,
        }
    }

    /// When [`Presence::tick`] has something to do next, if anything.
    pub fn next(&self) -> Option<Instant> {
        let hold = self.held_since.map(|since| since + HOLD);
        match (hold, self.shown_until) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t0: Instant, ms: u64) -> Instant {
        t0 + Duration::from_millis(ms)
    }

    #[test]
    fn a_hold_under_five_seconds_shows_nothing() {
        let t0 = Instant::now();
        let mut p = Presence::default();
        assert_eq!(p.next(), None);
        p.press(t0);
        assert_eq!(p.next(), Some(at(t0, 5000)));
        assert_eq!(p.tick(at(t0, 4999)), None);
        p.release();
        assert_eq!(p.next(), None);
        assert_eq!(p.tick(at(t0, 6000)), None);
        assert!(!p.shown(at(t0, 6000)));
        // Several short presses do not add up.
        for i in 0..10 {
            p.press(at(t0, 7000 + i * 1000));
            assert_eq!(p.tick(at(t0, 7000 + i * 1000 + 900)), None);
            p.release();
        }
        assert!(!p.shown(at(t0, 20_000)));
    }

    #[test]
    fn five_seconds_show_it_for_ten_minutes_then_it_hides() {
        let t0 = Instant::now();
        let mut p = Presence::default();
        p.press(t0);
        assert!(!p.shown(at(t0, 4999)));
        assert_eq!(p.tick(at(t0, 5000)), Some(Change::Shown));
        assert!(p.shown(at(t0, 5000)));
        // Holding on does not show it again (nor extend it); the release changes nothing.
        assert_eq!(p.tick(at(t0, 20_000)), None);
        p.release();
        assert_eq!(p.next(), Some(at(t0, 605_000)));
        assert!(p.shown(at(t0, 604_999)));
        assert!(!p.shown(at(t0, 605_000)), "at most ten minutes");
        assert_eq!(p.tick(at(t0, 604_999)), None);
        assert_eq!(p.tick(at(t0, 605_000)), Some(Change::Hidden));
        assert_eq!(p.next(), None);
        assert_eq!(p.tick(at(t0, 700_000)), None);
        // Hidden until the next five-second hold.
        p.press(at(t0, 800_000));
        assert_eq!(p.tick(at(t0, 802_000)), None);
        assert!(!p.shown(at(t0, 802_000)));
        assert_eq!(p.tick(at(t0, 805_000)), Some(Change::Shown));
        assert!(p.shown(at(t0, 805_001)));
    }

    #[test]
    fn a_new_hold_while_shown_starts_ten_minutes_anew() {
        let t0 = Instant::now();
        let mut p = Presence::default();
        p.press(t0);
        assert_eq!(p.tick(at(t0, 5000)), Some(Change::Shown));
        p.release();
        p.press(at(t0, 300_000));
        assert_eq!(p.next(), Some(at(t0, 305_000)));
        assert_eq!(p.tick(at(t0, 305_000)), Some(Change::Shown));
        p.release();
        assert!(p.shown(at(t0, 904_999)));
        assert_eq!(p.tick(at(t0, 905_000)), Some(Change::Hidden));
    }

    #[test]
    fn the_end_of_first_boot_forgets_everything() {
        let t0 = Instant::now();
        let mut p = Presence::default();
        p.press(t0);
        assert_eq!(p.tick(at(t0, 5000)), Some(Change::Shown));
        p.press(at(t0, 6000));
        p.end();
        assert!(!p.shown(at(t0, 6001)));
        assert_eq!(p.next(), None);
        assert_eq!(p.tick(at(t0, 20_000)), None);
    }
}
