//! Idle clips and text drawn straight to the display, no browser.
//!
//! # Use
//! The device layer calls [`start`] once with the kiosk state channel:
//!
//! ```ignore
//! let (sim_screen, health) = display::start(&engine, &config.display, config.devices,
//!                                           display::admin_url(addr), state_rx);
//! ```
//!
//! It picks a screen (below), starts the player thread on it and returns the in-memory screen
//! when the display is simulated (for `Devices::sim_screen`, the snapshot route and tests) and
//! the health string: `"ok"`, `"sim"`, `"absent"` or a problem. A missing or failing display
//! never stops the kiosk: the player simply has nowhere to draw. The player thread ends when the
//! state sender is dropped or the engine is gone. Tests can run a player on their own screen
//! with [`play`].
//!
//! # Screens (`display.backend`, `display.device`)
//! - `auto`: the first DRM card (`/dev/dri/cardN`) with a connected output whose modeset works,
//!   else `/dev/fb0`, else the simulated screen (device mode `auto`) or none (`real`).
//! - `drm` / `fbdev`: that one only (`device` names the node; empty: the first found).
//! - `sim`: an in-memory XRGB8888 framebuffer, `device` = `WIDTHxHEIGHT` (default 800x480).
//!   Device mode `sim` always uses it.
//! - `none`: no display.
//!
//! # Modules
//! `screen` (the [`Screen`] trait and [`MemoryScreen`]), `fb` (fbdev), `drm` (DRM/KMS), `clip`
//! (MP4 demuxing and H.264 decoding), `scale` (letterboxing, colour conversion), `still`
//! (PNG/JPEG), `text` (embedded bitmap font), `player` (the thread that decides what to show),
//! `testclip` (encoding test clips; tests and benchmarks only).

pub mod clip;
pub mod drm;
pub mod fb;
pub mod player;
pub mod scale;
pub mod screen;
pub mod still;
#[doc(hidden)]
pub mod testclip;
pub mod text;

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;

use tokio::sync::watch;

pub use screen::{MemoryScreen, Screen, SeenFrame};

use super::{DeviceMode, KioskState};
use crate::config::DisplayConfig;
use crate::engine::Engine;

/// Size of the simulated screen when `display.device` does not give one.
pub const SIM_SIZE: (u32, u32) = (800, 480);

/// Opens the configured screen and starts the player on it. Returns the in-memory screen when
/// the display is simulated, and the display's health (`"ok"`, `"sim"`, `"absent"` or a
/// problem).
pub fn start(
    engine: &Arc<Engine>,
    config: &DisplayConfig,
    mode: DeviceMode,
    admin_url: String,
    state: watch::Receiver<KioskState>,
) -> (Option<Arc<MemoryScreen>>, String) {
    let (screen, sim, health) = open_screen(config, mode);
    let Some(screen) = screen else {
        return (None, health);
    };
    match play(engine, screen, admin_url, state) {
        Ok(_) => (sim, health),
        Err(e) => (None, format!("display thread: {e}")),
    }
}

/// Runs the player on `screen` (its own thread); see [`player`].
pub fn play(
    engine: &Arc<Engine>,
    screen: Box<dyn Screen>,
    admin_url: String,
    state: watch::Receiver<KioskState>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    player::spawn(engine, screen, admin_url, state)
}

type Opened = (Option<Box<dyn Screen>>, Option<Arc<MemoryScreen>>, String);

fn sim_screen(config: &DisplayConfig) -> Opened {
    let (w, h) = parse_size(&config.device).unwrap_or(SIM_SIZE);
    let screen = Arc::new(MemoryScreen::new(w, h));
    tracing::info!("display: simulated {w}x{h}");
    (Some(Box::new(screen.clone())), Some(screen), "sim".into())
}

fn open_screen(config: &DisplayConfig, mode: DeviceMode) -> Opened {
    if mode == DeviceMode::None {
        return (None, None, "absent".into());
    }
    if mode == DeviceMode::Sim || config.backend == "sim" {
        return sim_screen(config);
    }
    let device = config.device.trim();
    let explicit = |path: &str, kind: &str| -> Opened {
        let opened = match kind {
            "drm" => open_drm(Path::new(path)),
            _ => open_fb(Path::new(path)),
        };
        match opened {
            Ok(s) => (Some(s), None, "ok".into()),
            Err(e) => {
                tracing::warn!("display: {kind} {path}: {e}");
                (None, None, format!("{kind} {path}: {e}"))
            }
        }
    };
    match config.backend.as_str() {
        "none" => (None, None, "absent".into()),
        "drm" => {
            let path = if device.is_empty() {
                drm::cards()
                    .first()
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|| "/dev/dri/card0".into())
            } else {
                device.to_string()
            };
            explicit(&path, "drm")
        }
        "fbdev" => explicit(
            if device.is_empty() {
                "/dev/fb0"
            } else {
                device
            },
            "fbdev",
        ),
        _ => {
            // auto: a named node first, then every card, then the first framebuffer.
            let mut tried = Vec::new();
            let mut drm_paths = drm::cards();
            let mut fb_paths = vec![std::path::PathBuf::from("/dev/fb0")];
            if device.starts_with("/dev/dri/") {
                drm_paths = vec![device.into()];
            } else if device.starts_with("/dev/fb") {
                drm_paths.clear();
                fb_paths = vec![device.into()];
            }
            for p in &drm_paths {
                match open_drm(p) {
                    Ok(s) => return (Some(s), None, "ok".into()),
                    Err(e) => tried.push(format!("drm {}: {e}", p.display())),
                }
            }
            for p in fb_paths.iter().filter(|p| p.exists()) {
                match open_fb(p) {
                    Ok(s) => return (Some(s), None, "ok".into()),
                    Err(e) => tried.push(format!("fbdev {}: {e}", p.display())),
                }
            }
            if !tried.is_empty() {
                tracing::info!("display: no usable display ({})", tried.join("; "));
            }
            if mode == DeviceMode::Auto {
                sim_screen(config)
            } else {
                (None, None, "absent".into())
            }
        }
    }
}

fn open_drm(path: &Path) -> std::io::Result<Box<dyn Screen>> {
    let s = drm::DrmScreen::open(path)?;
    tracing::info!("display: {}", s.describe());
    Ok(Box::new(s))
}

fn open_fb(path: &Path) -> std::io::Result<Box<dyn Screen>> {
    let s = fb::FbScreen::open(path)?;
    tracing::info!("display: {}", s.describe());
    Ok(Box::new(s))
}

/// `WIDTHxHEIGHT` (each 1..=8192).
pub fn parse_size(s: &str) -> Option<(u32, u32)> {
    let (w, h) = s.trim().split_once(['x', 'X'])?;
    let (w, h) = (w.parse().ok()?, h.parse().ok()?);
    ((1..=8192).contains(&w) && (1..=8192).contains(&h)).then_some((w, h))
}

/// The address a person types to reach the kiosk's administration from another device: the
/// listen address, or when that is a wildcard, the first non-loopback IPv4 address of the board.
pub fn admin_url(listen: SocketAddr) -> String {
    let ip = if listen.ip().is_unspecified() {
        local_ipv4().unwrap_or(listen.ip())
    } else {
        listen.ip()
    };
    match ip {
        IpAddr::V6(v6) => format!("http://[{v6}]:{}/", listen.port()),
        IpAddr::V4(v4) => format!("http://{v4}:{}/", listen.port()),
    }
}

/// The first IPv4 address of an interface that is up and not loopback.
fn local_ipv4() -> Option<IpAddr> {
    let mut ifs: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills a list freed below with freeifaddrs; entries are read only while
    // it is alive.
    unsafe {
        if libc::getifaddrs(&mut ifs) != 0 {
            return None;
        }
        let mut found = None;
        let mut cur = ifs;
        while !cur.is_null() {
            let ifa = &*cur;
            let up = ifa.ifa_flags & libc::IFF_UP as u32 != 0;
            let lo = ifa.ifa_flags & libc::IFF_LOOPBACK as u32 != 0;
            if up
                && !lo
                && !ifa.ifa_addr.is_null()
                && (*ifa.ifa_addr).sa_family as i32 == libc::AF_INET
            {
                let sin = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                found = Some(IpAddr::from(
                    u32::from_be(sin.sin_addr.s_addr).to_be_bytes(),
                ));
                break;
            }
            cur = ifa.ifa_next;
        }
        libc::freeifaddrs(ifs);
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("800x480"), Some((800, 480)));
        assert_eq!(parse_size(" 1280X720 "), Some((1280, 720)));
        assert_eq!(parse_size("0x10"), None);
        assert_eq!(parse_size("/dev/fb0"), None);
    }

    #[test]
    fn sim_and_none_backends() {
        let cfg = DisplayConfig {
            backend: "sim".into(),
            device: "320x200".into(),
        };
        let (screen, sim, health) = open_screen(&cfg, DeviceMode::Auto);
        assert!(screen.is_some());
        assert_eq!(health, "sim");
        assert_eq!(sim.map(|s| (s.width, s.height)), Some((320, 200)));
        let none = DisplayConfig {
            backend: "none".into(),
            device: String::new(),
        };
        assert_eq!(open_screen(&none, DeviceMode::Auto).2, "absent");
        assert_eq!(open_screen(&cfg, DeviceMode::None).2, "absent");
        // A missing explicit framebuffer is a problem, not a panic.
        let fb = DisplayConfig {
            backend: "fbdev".into(),
            device: "/nonexistent/fb7".into(),
        };
        let (s, _, h) = open_screen(&fb, DeviceMode::Real);
        assert!(s.is_none());
        assert!(h.starts_with("fbdev /nonexistent/fb7"), "{h}");
    }

    #[test]
    fn admin_url_names_a_reachable_address() {
        assert_eq!(
            admin_url("192.168.1.5:8080".parse().unwrap()),
            "http://192.168.1.5:8080/"
        );
        let any = admin_url("0.0.0.0:80".parse().unwrap());
        assert!(any.starts_with("http://") && any.ends_with(":80/"), "{any}");
    }
}
