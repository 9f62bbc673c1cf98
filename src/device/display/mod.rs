//! Idle clips and text drawn straight to the display, no browser.
//!
//! # Use
//! The device layer calls [`start`] once with the kiosk state channel:
//!
//! ```text
//! let started = display::start(&engine, &config.display, config.devices, console, state_rx);
//! ```
//!
//! The setup screens tell the administrator where the console is ([`Console`]): the player
//! works out the admin URL from the listen address ([`admin_url`]) each time it makes its plan
//! again, so a board that gets its address from DHCP after `docent` started shows it within
//! about a second; and they show the HTTPS certificate's fingerprint in short form
//! ([`short_fingerprint`]), to check the browser's warning against.
//!
//! It picks a screen (below), starts the player thread on it and returns the in-memory screen
//! when the display is simulated (for `Devices::sim_screen`, the snapshot route and tests) and
//! the display's [`Health`]. A missing or failing display
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
//! `screen` (the [`Screen`] trait and [`MemoryScreen`]), `fb` (fbdev), `drm` (DRM/KMS), `scale`
//! (letterboxing, colour conversion), `still` (PNG/JPEG), `text` (the outline font, lines by
//! width), `captions` (the caption panel), `player` (the thread that decides what to show).
//! Clips are demuxed and decoded by `engine::media::clip`, which the upload's flash check uses
//! too.

pub mod captions;
pub mod drm;
pub mod fb;
pub mod player;
pub mod questions;
pub mod scale;
pub mod screen;
pub mod still;
pub mod text;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;

use tokio::sync::watch;

pub use screen::{MemoryScreen, Screen, SeenFrame};

use super::{Health, KioskState};
use crate::config::{DeviceMode, DisplayBackend, DisplayConfig};
use crate::engine::Engine;

/// Size of the simulated screen when `display.device` does not give one.
pub const SIM_SIZE: (u32, u32) = (800, 480);

/// Where the administrator reaches the console, as the setup screens show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Console {
    /// The address the kiosk serves on (the admin URL is worked out from it).
    pub listen: SocketAddr,
    /// SHA-256 of the HTTPS certificate, `AB:CD:…` (32 bytes), as the listener serves it.
    pub fingerprint: String,
}

/// The fingerprint as the screen shows it: its first and last six bytes, `AB:CD:EF:01:23:45 ...
/// 67:89:AB:CD:EF:01` (96 bits: a certificate made to match both ends takes about 2^96 tries),
/// short enough for one line of large text on an 800-pixel screen. Browsers show the whole
/// fingerprint; its two ends are what a person compares.
pub fn short_fingerprint(fingerprint: &str) -> String {
    let bytes: Vec<&str> = fingerprint.split(':').collect();
    if bytes.len() <= 12 {
        return fingerprint.to_string();
    }
    format!(
        "{} ... {}",
        bytes[..6].join(":"),
        bytes[bytes.len() - 6..].join(":")
    )
}

/// What [`start`] started.
pub struct Started {
    /// The in-memory screen, when the display is simulated.
    pub sim_screen: Option<Arc<MemoryScreen>>,
    pub health: Health,
    /// The player's thread: it ends when the kiosk state's sender is gone, and is joined then,
    /// because while it draws it holds the engine (and so the store).
    pub thread: Option<std::thread::JoinHandle<()>>,
}

/// Opens the configured screen and starts the player on it.
pub fn start(
    engine: &Arc<Engine>,
    config: &DisplayConfig,
    mode: DeviceMode,
    console: Console,
    state: watch::Receiver<KioskState>,
) -> Started {
    let Opened {
        screen,
        sim_screen,
        health,
    } = open_screen(config, mode);
    let Some(screen) = screen else {
        return Started {
            sim_screen: None,
            health,
            thread: None,
        };
    };
    match play(engine, screen, console, state) {
        Ok(thread) => Started {
            sim_screen,
            health,
            thread: Some(thread),
        },
        Err(e) => Started {
            sim_screen: None,
            health: Health::Problem(format!("display thread: {e}")),
            thread: None,
        },
    }
}

/// Runs the player on `screen` (its own thread); see [`player`]. `console` is what the setup
/// screens show.
pub fn play(
    engine: &Arc<Engine>,
    screen: Box<dyn Screen>,
    console: Console,
    state: watch::Receiver<KioskState>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    player::spawn(engine, screen, console, state)
}

/// A screen to draw on (none when absent or failing), the same screen again when it is the
/// in-memory one, and the display's health.
struct Opened {
    screen: Option<Box<dyn Screen>>,
    sim_screen: Option<Arc<MemoryScreen>>,
    health: Health,
}

impl Opened {
    fn real(screen: Box<dyn Screen>) -> Opened {
        Opened {
            screen: Some(screen),
            sim_screen: None,
            health: Health::Ok,
        }
    }

    fn none(health: Health) -> Opened {
        Opened {
            screen: None,
            sim_screen: None,
            health,
        }
    }
}

fn sim_screen(config: &DisplayConfig) -> Opened {
    let (w, h) = parse_size(&config.device).unwrap_or(SIM_SIZE);
    let screen = Arc::new(MemoryScreen::new(w, h));
    tracing::info!("display: simulated {w}x{h}");
    Opened {
        screen: Some(Box::new(screen.clone())),
        sim_screen: Some(screen),
        health: Health::Sim,
    }
}

fn open_screen(config: &DisplayConfig, mode: DeviceMode) -> Opened {
    if mode == DeviceMode::None {
        return Opened::none(Health::Absent);
    }
    if config.backend == DisplayBackend::Sim || mode.simulates(|| true) {
        return sim_screen(config);
    }
    let device = config.device.trim();
    let explicit = |path: &str, kind: &str| -> Opened {
        let opened = match kind {
            "drm" => open_drm(Path::new(path)),
            _ => open_fb(Path::new(path)),
        };
        match opened {
            Ok(s) => Opened::real(s),
            Err(e) => {
                tracing::warn!("display: {kind} {path}: {e}");
                Opened::none(Health::Problem(format!("{kind} {path}: {e}")))
            }
        }
    };
    match config.backend {
        DisplayBackend::None => Opened::none(Health::Absent),
        DisplayBackend::Sim => sim_screen(config),
        DisplayBackend::Drm => {
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
        DisplayBackend::Fbdev => explicit(
            if device.is_empty() {
                "/dev/fb0"
            } else {
                device
            },
            "fbdev",
        ),
        DisplayBackend::Auto => {
            // A named node first, then every card, then the first framebuffer.
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
                    Ok(s) => return Opened::real(s),
                    Err(e) => tried.push(format!("drm {}: {e}", p.display())),
                }
            }
            for p in fb_paths.iter().filter(|p| p.exists()) {
                match open_fb(p) {
                    Ok(s) => return Opened::real(s),
                    Err(e) => tried.push(format!("fbdev {}: {e}", p.display())),
                }
            }
            if !tried.is_empty() {
                tracing::info!("display: no usable display ({})", tried.join("; "));
            }
            if mode.simulates(|| false) {
                sim_screen(config)
            } else {
                Opened::none(Health::Absent)
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

/// What the setup screens show as the address of the kiosk's administration.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AdminUrl {
    /// The address a person types on another device, e.g. `https://192.168.1.5:8080/` (the login needs HTTPS).
    Url(String),
    /// The kiosk listens on every address but has no IPv4 address yet (the network is not up, or
    /// DHCP has not answered): there is nothing to type yet, only the port is known.
    NoNetwork { port: u16 },
}

impl AdminUrl {
    /// The line drawn on the screen.
    pub fn text(&self) -> String {
        match self {
            AdminUrl::Url(url) => url.clone(),
            AdminUrl::NoNetwork { port } => format!("Waiting for the network... (port {port})"),
        }
    }
}

impl std::fmt::Display for AdminUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text())
    }
}

/// One address of a network interface, as `getifaddrs` lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InterfaceAddr {
    /// `IFF_UP`: the interface is configured up.
    pub up: bool,
    /// `IFF_RUNNING`: it has a carrier (a cable plugged in, an associated access point).
    pub running: bool,
    /// `IFF_LOOPBACK`.
    pub loopback: bool,
    pub addr: IpAddr,
}

/// The address a person types to reach the kiosk's administration from another device: the
/// listen address, or when that is a wildcard, an IPv4 address of the board (see
/// [`choose_ipv4`]; the interfaces are listed with `getifaddrs` at each call, which is cheap).
/// While the board has none, [`AdminUrl::NoNetwork`].
pub fn admin_url(listen: SocketAddr) -> AdminUrl {
    if listen.ip().is_unspecified() {
        admin_url_among(listen, &interface_addrs())
    } else {
        admin_url_among(listen, &[])
    }
}

/// [`admin_url`] with the board's interface addresses given.
pub fn admin_url_among(listen: SocketAddr, interfaces: &[InterfaceAddr]) -> AdminUrl {
    let ip = if listen.ip().is_unspecified() {
        match choose_ipv4(interfaces) {
            Some(v4) => IpAddr::V4(v4),
            None => {
                return AdminUrl::NoNetwork {
                    port: listen.port(),
                };
            }
        }
    } else {
        listen.ip()
    };
    AdminUrl::Url(match ip {
        IpAddr::V6(v6) => format!("https://[{v6}]:{}/", listen.port()),
        IpAddr::V4(v4) => format!("https://{v4}:{}/", listen.port()),
    })
}

/// The IPv4 address to show among the board's interface addresses: of an interface that is up
/// and not loopback, preferring one with a carrier, then one that is not link-local
/// (169.254.0.0/16, what a board gives itself when DHCP does not answer); among equals, the
/// first listed. None when there is no such address.
pub fn choose_ipv4(interfaces: &[InterfaceAddr]) -> Option<Ipv4Addr> {
    interfaces
        .iter()
        .filter(|i| i.up && !i.loopback)
        .filter_map(|i| match i.addr {
            IpAddr::V4(v4) if !v4.is_unspecified() && !v4.is_loopback() => Some((i, v4)),
            _ => None,
        })
        .min_by_key(|(i, v4)| (!i.running, v4.is_link_local()))
        .map(|(_, v4)| v4)
}

/// The IPv4 addresses of the board's interfaces (empty when `getifaddrs` fails).
fn interface_addrs() -> Vec<InterfaceAddr> {
    let mut ifs: *mut libc::ifaddrs = std::ptr::null_mut();
    let mut found = Vec::new();
    // SAFETY: getifaddrs fills a list freed below with freeifaddrs; entries are read only while
    // it is alive.
    unsafe {
        if libc::getifaddrs(&mut ifs) != 0 {
            return found;
        }
        let mut cur = ifs;
        while !cur.is_null() {
            let ifa = &*cur;
            if !ifa.ifa_addr.is_null() && (*ifa.ifa_addr).sa_family as i32 == libc::AF_INET {
                let sin = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                let flag = |f: libc::c_int| ifa.ifa_flags & f as u32 != 0;
                found.push(InterfaceAddr {
                    up: flag(libc::IFF_UP),
                    running: flag(libc::IFF_RUNNING),
                    loopback: flag(libc::IFF_LOOPBACK),
                    addr: IpAddr::V4(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr))),
                });
            }
            cur = ifa.ifa_next;
        }
        libc::freeifaddrs(ifs);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fingerprint_is_shown_by_its_ends() {
        let full: Vec<String> = (0u8..32).map(|b| format!("{:02X}", b * 7)).collect();
        let full = full.join(":");
        assert_eq!(
            short_fingerprint(&full),
            "00:07:0E:15:1C:23 ... B6:BD:C4:CB:D2:D9"
        );
        assert_eq!(short_fingerprint("AB:CD"), "AB:CD");
    }

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
            backend: DisplayBackend::Sim,
            device: "320x200".into(),
            ..DisplayConfig::default()
        };
        let opened = open_screen(&cfg, DeviceMode::Auto);
        assert!(opened.screen.is_some());
        assert_eq!(opened.health, Health::Sim);
        assert_eq!(
            opened.sim_screen.map(|s| (s.width, s.height)),
            Some((320, 200))
        );
        let none = DisplayConfig {
            backend: DisplayBackend::None,
            device: String::new(),
            ..DisplayConfig::default()
        };
        assert_eq!(open_screen(&none, DeviceMode::Auto).health, Health::Absent);
        assert_eq!(open_screen(&cfg, DeviceMode::None).health, Health::Absent);
        // A missing explicit framebuffer is a problem, not a panic.
        let fb = DisplayConfig {
            backend: DisplayBackend::Fbdev,
            device: "/nonexistent/fb7".into(),
            ..DisplayConfig::default()
        };
        let opened = open_screen(&fb, DeviceMode::Real);
        assert!(opened.screen.is_none());
        let h = opened.health.to_string();
        assert!(h.starts_with("fbdev /nonexistent/fb7"), "{h}");
    }

    fn addr(up: bool, running: bool, loopback: bool, ip: &str) -> InterfaceAddr {
        InterfaceAddr {
            up,
            running,
            loopback,
            addr: ip.parse().unwrap(),
        }
    }

    #[test]
    fn admin_url_names_a_reachable_address() {
        // A fixed listen address is the address, whatever the interfaces.
        assert_eq!(
            admin_url("192.168.1.5:8080".parse().unwrap()),
            AdminUrl::Url("https://192.168.1.5:8080/".into())
        );
        assert_eq!(
            admin_url("[fd00::5]:80".parse().unwrap()).text(),
            "https://[fd00::5]:80/"
        );
        let lo = addr(true, true, true, "127.0.0.1");
        let eth = addr(true, true, false, "192.168.1.20");
        let wildcard: SocketAddr = "0.0.0.0:8080".parse().unwrap();
        assert_eq!(
            admin_url_among(wildcard, &[lo, eth]),
            AdminUrl::Url("https://192.168.1.20:8080/".into())
        );
        assert_eq!(
            admin_url_among("[::]:8080".parse().unwrap(), &[lo, eth]).text(),
            "https://192.168.1.20:8080/"
        );
        // No network yet: no 0.0.0.0 on the screen, words and the port instead.
        let waiting = admin_url_among(wildcard, &[lo]);
        assert_eq!(waiting, AdminUrl::NoNetwork { port: 8080 });
        assert_eq!(waiting.text(), "Waiting for the network... (port 8080)");
        assert_eq!(
            admin_url_among(wildcard, &[]),
            AdminUrl::NoNetwork { port: 8080 }
        );
        // The real interfaces: some answer, never the wildcard.
        let any = admin_url("0.0.0.0:80".parse().unwrap()).text();
        assert!(!any.contains("0.0.0.0"), "{any}");
    }

    #[test]
    fn the_shown_ipv4_is_up_not_loopback_preferably_running_and_not_link_local() {
        let pick = |ifs: &[InterfaceAddr]| choose_ipv4(ifs).map(|a| a.to_string());
        let lo = addr(true, true, true, "127.0.0.1");
        let down = addr(false, false, false, "10.0.0.9");
        let v6 = addr(true, true, false, "fe80::1");
        let eth = addr(true, true, false, "192.168.1.20");
        let wlan = addr(true, true, false, "192.168.4.7");
        // Nothing usable: loopback, an interface that is down, IPv6 only, a zero address.
        assert_eq!(pick(&[]), None);
        assert_eq!(
            pick(&[lo, down, v6, addr(true, true, false, "0.0.0.0")]),
            None
        );
        // The first usable one, in the listed order.
        assert_eq!(
            pick(&[lo, down, v6, eth, wlan]).as_deref(),
            Some("192.168.1.20")
        );
        assert_eq!(pick(&[wlan, eth]).as_deref(), Some("192.168.4.7"));
        // A cable pulled out keeps its address for a while: one with a carrier first.
        let unplugged = addr(true, false, false, "192.168.1.20");
        assert_eq!(pick(&[unplugged, wlan]).as_deref(), Some("192.168.4.7"));
        assert_eq!(pick(&[unplugged]).as_deref(), Some("192.168.1.20"));
        // A link-local address only when there is nothing better.
        let autoip = addr(true, true, false, "169.254.3.4");
        assert_eq!(pick(&[autoip, wlan]).as_deref(), Some("192.168.4.7"));
        assert_eq!(pick(&[lo, autoip]).as_deref(), Some("169.254.3.4"));
    }
}
