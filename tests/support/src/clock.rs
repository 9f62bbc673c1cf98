//! A simulated clock for the kiosk's local time (`docent::Run::clock`, `Engine::use_clock`):
//! a test sets the hour of a simulated day instead of waiting for it.

use std::sync::Mutex;

use docent::engine::hours::{Clock, LocalTime};

/// Shows the time the test set last.
pub struct SimClock(Mutex<LocalTime>);

impl SimClock {
    pub fn at(time: LocalTime) -> SimClock {
        SimClock(Mutex::new(time))
    }

    pub fn set(&self, time: LocalTime) {
        *self.0.lock().unwrap() = time;
    }
}

impl Clock for SimClock {
    fn now(&self) -> LocalTime {
        *self.0.lock().unwrap()
    }
}
