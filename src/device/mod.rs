//! The board itself as a client of the engine: microphone and speaker (ALSA), the push-to-talk
//! button and its LED (GPIO through `embedded-hal`), the display (DRM/KMS or fbdev), and the
//! kiosk loop that ties them to one engine session for the visitor standing in front of it.
//!
//! Every device has a simulated stand-in (`--devices sim`, chosen automatically when the real one
//! is missing), so the whole loop runs on a laptop and in CI: ALSA's `file`/`null` plugins, an
//! in-memory button, an in-memory framebuffer.

pub mod audio;
pub mod display;
pub mod kiosk;
pub mod ptt;

use std::sync::{Arc, Mutex};

use serde::Serialize;

use crate::engine::live::Status;

/// Which devices to use.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, serde::Deserialize, Default,
)]
#[serde(rename_all = "lowercase")]
pub enum DeviceMode {
    /// Real devices where present, simulated ones for the rest.
    #[default]
    Auto,
    /// Simulated devices only.
    Sim,
    /// Real devices only; a missing one is reported in health and the kiosk goes on without it.
    Real,
    /// No devices at all (a pure server).
    None,
}

/// What the kiosk shows and does right now; the display follows it.
#[derive(Debug, Clone, PartialEq)]
pub struct KioskState {
    pub status: Status,
    /// The character the kiosk speaks as ("" when there is none).
    pub character_id: String,
}

/// How each device is doing, for the health route: `"ok"`, `"sim"`, `"absent"` or a problem.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct DeviceHealth {
    pub audio: String,
    pub ptt: String,
    pub display: String,
}

/// Shared, updatable device health.
#[derive(Default)]
pub struct HealthBoard(Mutex<DeviceHealth>);

impl HealthBoard {
    pub fn get(&self) -> DeviceHealth {
        self.0.lock().expect("health lock").clone()
    }

    pub fn set(&self, f: impl FnOnce(&mut DeviceHealth)) {
        f(&mut self.0.lock().expect("health lock"));
    }
}

/// Handles the rest of the program keeps on the running devices.
pub struct Devices {
    pub health: Arc<HealthBoard>,
    /// The simulated button, when the button is simulated (pressed by tests and the internal
    /// route).
    pub sim_button: Option<Arc<ptt::SimPin>>,
    /// The simulated LED, when the LED is simulated.
    pub sim_led: Option<Arc<ptt::SimPin>>,
    /// The in-memory framebuffer, when the display is simulated.
    pub sim_screen: Option<Arc<display::MemoryScreen>>,
}
