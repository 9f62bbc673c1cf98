//! The push-to-talk button and its LED.

use std::sync::atomic::{AtomicBool, Ordering};

/// An in-memory GPIO line: the simulated button (set by tests and the internal route) or LED.
#[derive(Debug, Default)]
pub struct SimPin(AtomicBool);

impl SimPin {
    pub fn set(&self, high: bool) {
        self.0.store(high, Ordering::SeqCst);
    }

    pub fn get(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}
