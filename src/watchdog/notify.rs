//! sd_notify(3) in a few lines: one datagram per message to `$NOTIFY_SOCKET`, a socket path or
//! `@name` for an abstract socket. No crate: the protocol is `KEY=VALUE` lines in a datagram.

use std::ffi::OsStr;
use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

/// A connection to the service manager's notification socket.
pub struct Notifier {
    socket: UnixDatagram,
    addr: SocketAddr,
}

impl Notifier {
    /// The notifier of `$NOTIFY_SOCKET`; `None` when it is unset or unusable (a warning says
    /// why), so docent run by hand sends nothing.
    pub fn from_env() -> Option<Notifier> {
        let addr = std::env::var_os("NOTIFY_SOCKET")?;
        match Notifier::new(&addr) {
            Ok(n) => Some(n),
            Err(e) => {
                tracing::warn!("NOTIFY_SOCKET={}: {e}", addr.to_string_lossy());
                None
            }
        }
    }

    /// A notifier sending to `addr` (as `$NOTIFY_SOCKET` spells it).
    pub fn new(addr: &OsStr) -> io::Result<Notifier> {
        let addr = parse_addr(addr)?;
        let socket = UnixDatagram::unbound()?;
        // A service manager that stopped reading must not hang the watchdog thread.
        socket.set_write_timeout(Some(Duration::from_secs(1)))?;
        Ok(Notifier { socket, addr })
    }

    /// Sends one message (`READY=1`, `WATCHDOG=1`, ... several lines at once are allowed).
    pub fn send(&self, message: &str) -> io::Result<()> {
        self.socket
            .send_to_addr(message.as_bytes(), &self.addr)
            .map(drop)
    }
}

/// The socket address of a `$NOTIFY_SOCKET` value: an absolute path, or `@name` for the abstract
/// name `name` (what systemd passes when the path would be too long).
pub fn parse_addr(value: &OsStr) -> io::Result<SocketAddr> {
    let bytes = value.as_bytes();
    match bytes.first() {
        Some(b'/') => SocketAddr::from_pathname(value),
        Some(b'@') => SocketAddr::from_abstract_name(&bytes[1..]),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a socket path or an @abstract name (vsock is not supported)",
        )),
    }
}

/// The watchdog period systemd asks of this process: `WATCHDOG_USEC`, unless `WATCHDOG_PID`
/// names another process (the variables were inherited) or the value is not a positive number.
pub fn watchdog_period(usec: Option<&str>, pid: Option<&str>, our_pid: u32) -> Option<Duration> {
    if pid.is_some_and(|p| p.trim().parse::<u32>().ok() != Some(our_pid)) {
        return None;
    }
    let usec: u64 = usec?.trim().parse().ok()?;
    (usec > 0).then(|| Duration::from_micros(usec))
}

/// `STATUS=` text on one line (a newline would start another assignment).
pub fn status(text: &str) -> String {
    let line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    format!("STATUS={line}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_paths_or_abstract_names() {
        let path = parse_addr(OsStr::new("/run/systemd/notify")).unwrap();
        assert_eq!(
            path.as_pathname(),
            Some(std::path::Path::new("/run/systemd/notify"))
        );
        let abs = parse_addr(OsStr::new("@/org/freedesktop/systemd1/notify/1")).unwrap();
        assert_eq!(
            abs.as_abstract_name(),
            Some(&b"/org/freedesktop/systemd1/notify/1"[..])
        );
        for bad in ["", "relative/path", "vsock:2:1234"] {
            assert!(parse_addr(OsStr::new(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn watchdog_period_is_ours_only() {
        let two = Some(Duration::from_secs(2));
        assert_eq!(watchdog_period(Some("2000000"), None, 7), two);
        assert_eq!(watchdog_period(Some("2000000"), Some("7"), 7), two);
        assert_eq!(watchdog_period(Some("2000000"), Some("8"), 7), None);
        assert_eq!(watchdog_period(Some("2000000"), Some("x"), 7), None);
        assert_eq!(watchdog_period(Some("0"), None, 7), None);
        assert_eq!(watchdog_period(Some("soon"), None, 7), None);
        assert_eq!(watchdog_period(None, Some("7"), 7), None);
    }

    #[test]
    fn status_stays_on_one_line() {
        assert_eq!(status("serving\non :8080"), "STATUS=serving on :8080");
    }

    /// A datagram reaches a socket bound at a path and at an abstract name.
    #[test]
    fn messages_reach_the_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let server = UnixDatagram::bind(&path).unwrap();
        Notifier::new(path.as_os_str())
            .unwrap()
            .send("READY=1\nSTATUS=up")
            .unwrap();
        let mut buf = [0u8; 64];
        let n = server.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1\nSTATUS=up");

        let name = format!("docent-notify-test-{}", std::process::id());
        let server =
            UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap())
                .unwrap();
        Notifier::new(OsStr::new(&format!("@{name}")))
            .unwrap()
            .send("WATCHDOG=1")
            .unwrap();
        let n = server.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"WATCHDOG=1");
    }
}
