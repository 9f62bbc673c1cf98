//! The kiosk announces itself on the LAN (mDNS/DNS-SD), tested on a network the test makes and
//! never on the host's: two network namespaces joined by a veth pair, the kiosk in one, a
//! DNS-SD browser (the `mdns-sd` crate, on a thread moved into the other namespace) in the other.

use std::net::{IpAddr, Ipv4Addr};
use std::process::Command;
use std::time::{Duration, Instant};

use mdns_sd::{ServiceDaemon, ServiceEvent};

use crate::support::docent_under;

const KIOSK: Ipv4Addr = Ipv4Addr::new(10, 213, 0, 1);
const VISITOR: Ipv4Addr = Ipv4Addr::new(10, 213, 0, 2);
const PORT: u16 = 8443;

/// Two namespaces and the veth pair between them, removed when dropped.
struct Lan {
    kiosk: String,
    visitor: String,
}

impl Lan {
    /// `None` when this machine does not let the test make namespaces (not root).
    fn make() -> Option<Lan> {
        let id = std::process::id() % 100_000;
        let lan = Lan {
            kiosk: format!("docent-k{id}"),
            visitor: format!("docent-v{id}"),
        };
        if !ip(&["netns", "add", &lan.kiosk]) {
            return None;
        }
        assert!(ip(&["netns", "add", &lan.visitor]), "a second namespace");
        let (a, b) = (format!("dk{id}"), format!("dv{id}"));
        for args in [
            vec!["link", "add", &a, "type", "veth", "peer", "name", &b],
            vec!["link", "set", &a, "netns", &lan.kiosk],
            vec!["link", "set", &b, "netns", &lan.visitor],
        ] {
            assert!(ip(&args), "ip {args:?}");
        }
        for (ns, dev, addr) in [(&lan.kiosk, &a, KIOSK), (&lan.visitor, &b, VISITOR)] {
            let cidr = format!("{addr}/24");
            for args in [
                vec!["-n", ns, "addr", "add", &cidr, "dev", dev],
                vec!["-n", ns, "link", "set", "lo", "up"],
                vec!["-n", ns, "link", "set", dev, "up"],
                vec!["-n", ns, "route", "add", "224.0.0.0/4", "dev", dev],
            ] {
                assert!(ip(&args), "ip {args:?}");
            }
        }
        Some(lan)
    }
}

impl Drop for Lan {
    fn drop(&mut self) {
        // Deleting a namespace deletes its end of the veth pair, and so the pair.
        ip(&["netns", "delete", &self.kiosk]);
        ip(&["netns", "delete", &self.visitor]);
    }
}

fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// What a browser in namespace `ns` resolves for the service type within `wait`.
fn browse(ns: &str, wait: Duration) -> Option<(String, String, u16, Vec<IpAddr>)> {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        use std::os::fd::AsRawFd;
        let file = std::fs::File::open(&path).expect("the namespace's file");
        // This thread (and the daemon's thread it starts) now lives on the test's LAN only.
        let joined = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(joined, 0, "setns: {}", std::io::Error::last_os_error());
        let daemon = ServiceDaemon::new().expect("an mDNS daemon");
        let events = daemon.browse(docent::api::mdns::SERVICE_TYPE).unwrap();
        let deadline = Instant::now() + wait;
        let mut found = None;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match events.recv_timeout(left) {
                Ok(ServiceEvent::ServiceResolved(s)) => {
                    let addresses = s.get_addresses().iter().map(|a| a.to_ip_addr()).collect();
                    found = Some((s.fullname.clone(), s.host.clone(), s.port, addresses));
                    break;
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
        let _ = daemon.shutdown();
        found
    })
    .join()
    .expect("the browser thread")
}

#[tokio::test]
async fn the_kiosk_is_found_by_name_on_its_lan() {
    let Some(lan) = Lan::make() else {
        eprintln!("skipped: this user may not create network namespaces (run the tests as root)");
        return;
    };
    let data = tempfile::tempdir().unwrap();
    let mut kiosk = docent_under(&["ip", "netns", "exec", &lan.kiosk])
        .args(["serve", "--devices", "none", "--listen"])
        .arg(format!("0.0.0.0:{PORT}"))
        .arg("--data-dir")
        .arg(data.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("docent in the kiosk's namespace");

    let found = tokio::task::spawn_blocking({
        let ns = lan.visitor.clone();
        move || browse(&ns, Duration::from_secs(30))
    })
    .await
    .unwrap();
    let _ = kiosk.start_kill();
    let output = kiosk.wait_with_output().await.unwrap();
    let (fullname, host, port, addresses) = found.unwrap_or_else(|| {
        panic!(
            "no _https._tcp service seen on the LAN; docent said:\n{}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    let name = host.trim_end_matches(".local.");
    assert!(
        name.starts_with("docent-") && name.len() == "docent-".len() + 4,
        "host {host}"
    );
    assert_eq!(
        fullname,
        format!("{name}.{}", docent::api::mdns::SERVICE_TYPE)
    );
    assert_eq!(port, PORT);
    assert!(
        addresses.contains(&IpAddr::V4(KIOSK)),
        "the kiosk's address on that LAN: {addresses:?}"
    );
    drop(lan);
}
