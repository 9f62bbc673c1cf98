//! The kiosk announces itself on the LAN with mDNS/DNS-SD: the host `docent-XXXX.local` and an
//! `_https._tcp` service on the listening port (the console), so that an administrator can type
//! a name instead of finding an address. A kiosk that listens on loopback only announces nothing:
//! no one else could reach it.

use std::net::SocketAddr;
use std::path::Path;

use mdns_sd::{ServiceDaemon, ServiceInfo};

use crate::config::Config;

/// The DNS-SD service type of the console.
pub const SERVICE_TYPE: &str = "_https._tcp.local.";

/// Holds the announcement; dropping it says goodbye on the LAN.
pub struct Announcement {
    daemon: ServiceDaemon,
}

impl Drop for Announcement {
    fn drop(&mut self) {
        let _ = self.daemon.shutdown();
    }
}

/// The kiosk's host name without `.local`: the configured one, else `docent-` and the first four
/// hex digits of the board's id (`/etc/machine-id`, else an id kept in the data directory).
pub fn host_name(config: &Config) -> String {
    let configured = config.mdns.name.as_str();
    if !configured.is_empty() {
        return configured.to_string();
    }
    format!("docent-{}", &board_id(&config.data_dir)[..4])
}

/// The board's id as lowercase hex: `/etc/machine-id`, or a random id created once in the data
/// directory (an image built without a machine id, a development machine's data directory).
fn board_id(data_dir: &Path) -> String {
    let hex = |s: &str| {
        let s = s.trim().to_ascii_lowercase();
        (s.len() >= 4 && s.bytes().all(|b| b.is_ascii_hexdigit())).then_some(s)
    };
    if let Some(id) = std::fs::read_to_string("/etc/machine-id")
        .ok()
        .and_then(|s| hex(&s))
    {
        return id;
    }
    let path = data_dir.join("board-id");
    if let Some(id) = std::fs::read_to_string(&path).ok().and_then(|s| hex(&s)) {
        return id;
    }
    let id = uuid::Uuid::new_v4().simple().to_string();
    // Not kept (read-only data directory): the name then changes at each start, nothing worse.
    let _ = std::fs::write(&path, &id);
    id
}

/// Announces the kiosk on `addr` unless mDNS is off or `addr` is a loopback address. A failure
/// is logged, never fatal: the kiosk serves without a name.
pub fn announce(config: &Config, addr: SocketAddr) -> Option<Announcement> {
    if !config.mdns.enabled || addr.ip().is_loopback() {
        return None;
    }
    let host = host_name(config);
    match register(&host, addr) {
        Ok(daemon) => {
            tracing::info!(host = %format!("{host}.local"), port = addr.port(), "announced on the LAN (mDNS)");
            Some(Announcement { daemon })
        }
        Err(e) => {
            tracing::warn!("cannot announce the kiosk on the LAN (mDNS): {e}");
            None
        }
    }
}

fn register(host: &str, addr: SocketAddr) -> Result<ServiceDaemon, mdns_sd::Error> {
    let daemon = ServiceDaemon::new()?;
    let properties = [("path", "/console/")];
    let info = if addr.ip().is_unspecified() {
        // Every address of every interface, kept up to date as they change.
        ServiceInfo::new(
            SERVICE_TYPE,
            host,
            &format!("{host}.local."),
            "",
            addr.port(),
            &properties[..],
        )?
        .enable_addr_auto()
    } else {
        ServiceInfo::new(
            SERVICE_TYPE,
            host,
            &format!("{host}.local."),
            addr.ip(),
            addr.port(),
            &properties[..],
        )?
    };
    daemon.register(info)?;
    Ok(daemon)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_name_comes_from_the_board_and_a_configured_one_wins() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config {
            data_dir: dir.path().to_path_buf(),
            ..Config::default()
        };
        let name = host_name(&config);
        assert!(name.starts_with("docent-") && name.len() == 11, "{name}");
        assert_eq!(host_name(&config), name, "the same name at every start");
        config.mdns.name = "Hall-B".to_string().try_into().unwrap();
        assert_eq!(host_name(&config), "hall-b");
    }

    #[test]
    fn loopback_and_disabled_kiosks_announce_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config {
            data_dir: dir.path().to_path_buf(),
            ..Config::default()
        };
        assert!(announce(&config, "127.0.0.1:8080".parse().unwrap()).is_none());
        config.mdns.enabled = false;
        assert!(announce(&config, "0.0.0.0:8080".parse().unwrap()).is_none());
    }
}
