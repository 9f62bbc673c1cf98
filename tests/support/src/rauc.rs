//! A real RAUC (Debian's `rauc service`) on a D-Bus bus of its own: two slots that are files, and
//! a boot loader backend that keeps its state in files. Enough for docent to have bundles checked,
//! installs started and slots marked; installing a verity bundle also needs the kernel's
//! device-mapper, which this machine may lack (RAUC then reports the failure). The simulated
//! board (`tests/appliance/updates.rs`) installs for real.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The board this rig's RAUC says it is.
pub const COMPATIBLE: &str = "docent-test";

pub struct RaucRig {
    pub dir: tempfile::TempDir,
    /// `DBUS_SYSTEM_BUS_ADDRESS` for a client of this RAUC.
    pub address: String,
    bus: Child,
    service: Child,
}

/// Who signed a bundle.
#[derive(Clone, Copy)]
pub enum Signer {
    /// The CA in the rig's keyring.
    Kiosk,
    /// A key the kiosk does not know.
    Stranger,
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn self_signed(dir: &Path, name: &str) {
    run(Command::new("openssl").current_dir(dir).args([
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "30",
        "-subj",
        &format!("/CN={name}"),
        "-keyout",
        &format!("{name}.key"),
        "-out",
        &format!("{name}.pem"),
    ]));
}

impl RaucRig {
    pub fn start() -> RaucRig {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        self_signed(d, "kiosk");
        self_signed(d, "stranger");
        for slot in ["A", "B"] {
            std::fs::write(d.join(format!("slot{slot}.img")), vec![0u8; 4 << 20]).unwrap();
        }
        std::fs::create_dir(d.join("data")).unwrap();
        std::fs::create_dir(d.join("boot")).unwrap();
        let backend = d.join("bootloader.sh");
        std::fs::write(
            &backend,
            format!(
                "#!/bin/sh\nS={}\ncase \"$1\" in\n  get-primary) cat $S/primary 2>/dev/null || echo A ;;\n  \
                 set-primary) echo \"$2\" > $S/primary ;;\n  get-state) cat $S/state-$2 2>/dev/null || echo good ;;\n  \
                 set-state) echo \"$3\" > $S/state-$2 ;;\nesac\n",
                d.join("boot").display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(
            &backend,
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        std::fs::write(
            d.join("system.conf"),
            format!(
                "[system]\ncompatible={COMPATIBLE}\nbootloader=custom\ndata-directory={data}\n\
                 bundle-formats=-plain\n\n[handlers]\nbootloader-custom-backend={backend}\n\n\
                 [keyring]\npath={d}/kiosk.pem\n\n\
                 [slot.rootfs.0]\ndevice={d}/slotA.img\ntype=ext4\nbootname=A\n\n\
                 [slot.rootfs.1]\ndevice={d}/slotB.img\ntype=ext4\nbootname=B\n",
                data = d.join("data").display(),
                backend = backend.display(),
                d = d.display()
            ),
        )
        .unwrap();
        let socket = d.join("bus");
        std::fs::write(
            d.join("bus.conf"),
            format!(
                "<!DOCTYPE busconfig PUBLIC \"-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN\" \
                 \"http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd\">\n<busconfig>\
                 <type>system</type><listen>unix:path={}</listen><auth>EXTERNAL</auth>\
                 <policy context=\"default\"><allow send_destination=\"*\" eavesdrop=\"true\"/>\
                 <allow eavesdrop=\"true\"/><allow own=\"*\"/><allow user=\"*\"/></policy></busconfig>\n",
                socket.display()
            ),
        )
        .unwrap();
        let bus = Command::new("dbus-daemon")
            .arg(format!("--config-file={}", d.join("bus.conf").display()))
            .arg("--nofork")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("dbus-daemon (./x setup installs it)");
        let address = format!("unix:path={}", socket.display());
        let start = Instant::now();
        while !socket.exists() {
            assert!(start.elapsed() < Duration::from_secs(5), "the bus listens");
            std::thread::sleep(Duration::from_millis(20));
        }
        let service = Command::new("rauc")
            .arg(format!("--conf={}", d.join("system.conf").display()))
            .args(["service", "--override-boot-slot=A"])
            .env("DBUS_SYSTEM_BUS_ADDRESS", &address)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(d.join("rauc.log")).unwrap())
            .spawn()
            .expect("rauc (./x setup installs it)");
        let rig = RaucRig {
            dir,
            address,
            bus,
            service,
        };
        let start = Instant::now();
        loop {
            let status = Command::new("rauc")
                .arg("status")
                .env("DBUS_SYSTEM_BUS_ADDRESS", &rig.address)
                .output()
                .unwrap();
            if status.status.success() {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "RAUC answers on its bus: {}",
                rig.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        rig
    }

    /// A verity bundle of a small ext4 root for `compatible` at `version`.
    pub fn bundle(&self, name: &str, compatible: &str, version: &str, signer: Signer) -> PathBuf {
        let d = self.dir.path();
        let content = d.join(format!("{name}.d"));
        std::fs::create_dir(&content).unwrap();
        run(Command::new("mkfs.ext4")
            .args(["-q", "-F"])
            .arg(content.join("root.ext4"))
            .arg("2M"));
        // Something that does not compress away (a bundle's squashfs must exceed one block).
        std::fs::write(content.join("noise"), noise(65_536)).unwrap();
        std::fs::write(
            content.join("manifest.raucm"),
            format!(
                "[update]\ncompatible={compatible}\nversion={version}\n\n[bundle]\nformat=verity\n\n\
                 [image.rootfs]\nfilename=root.ext4\n"
            ),
        )
        .unwrap();
        let key = match signer {
            Signer::Kiosk => "kiosk",
            Signer::Stranger => "stranger",
        };
        let out = d.join(format!("{name}.raucb"));
        run(Command::new("rauc")
            .arg(format!("--cert={}", d.join(format!("{key}.pem")).display()))
            .arg(format!("--key={}", d.join(format!("{key}.key")).display()))
            .arg("bundle")
            .arg(&content)
            .arg(&out));
        out
    }

    /// The boot loader's state of a slot (`good`, `bad`), as RAUC last set it; `None` if never.
    pub fn slot_state(&self, bootname: &str) -> Option<String> {
        std::fs::read_to_string(self.dir.path().join(format!("boot/state-{bootname}")))
            .ok()
            .map(|s| s.trim().to_string())
    }

    pub fn slot_image(&self, bootname: &str) -> Vec<u8> {
        std::fs::read(self.dir.path().join(format!("slot{bootname}.img"))).unwrap()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("rauc.log")).unwrap_or_default()
    }
}

impl Drop for RaucRig {
    fn drop(&mut self) {
        let _ = self.service.kill();
        let _ = self.service.wait();
        let _ = self.bus.kill();
        let _ = self.bus.wait();
    }
}

/// `len` bytes that do not compress (xorshift), the same every time: a bundle's payload.
pub fn noise(len: usize) -> Vec<u8> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
