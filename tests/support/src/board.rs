//! The simulated board under QEMU, driven as a test rig drives a real one: power (start and
//! kill QEMU), the disk (the card: its partitions can be written between boots), the serial
//! console (a root shell: the button's simulator line, playing into the loopback microphone,
//! recording the loopback speaker, systemctl, fw_printenv), the display (QEMU's screendump) and
//! the network (ports forwarded from 127.0.0.1; the board reaches only the host services a test
//! names, such as a fleet server).
//!
//! The board is QEMU's aarch64 virt machine with Debian's U-Boot as its firmware, booting the
//! disk image `board/sim/mkdisk.sh` makes in `$DOCENT_SIM_HOME/img/arm64` (default
//! `~/.cache/docent-sim`); `./x appliance` builds it and runs these tests.

use std::io::{BufRead, Read, Write};
use std::net::{SocketAddr, SocketAddrV4, TcpListener};
use std::os::unix::fs::FileExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a boot may take under emulation (U-Boot, the kernel, systemd, on a busy machine).
const BOOT_WITHIN: Duration = Duration::from_secs(300);

/// The cache of board/sim (`$DOCENT_SIM_HOME`, default `~/.cache/docent-sim`).
pub fn sim_home() -> PathBuf {
    std::env::var_os("DOCENT_SIM_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/docent-sim")
        })
}

/// The board's images: the disk, U-Boot and the partition table.
pub fn images() -> PathBuf {
    images_of("arm64")
}

/// The images `board/sim/mkdisk.sh` made for `board` (`arm64`: the simulated board; `raspberrypi4-64`:
/// the Raspberry Pi 4 image of `./x image`).
pub fn images_of(board: &str) -> PathBuf {
    let dir = sim_home().join("img").join(board);
    assert!(
        dir.join("disk.img").is_file(),
        "no {board} board image in {}: run ./x appliance (board/sim/mkdisk.sh)",
        dir.display()
    );
    dir
}

/// Which machine QEMU is.
pub enum Machine {
    /// QEMU's aarch64 virt machine with Debian's U-Boot as its firmware: the simulated board,
    /// with its test rig (the console shell, httpd, gpio-sim) and a network.
    Virt,
    /// QEMU's Raspberry Pi 4 B (`raspi4b`, 2 GiB, 4 cores) running the U-Boot of the image's
    /// own boot partition as its kernel, handed `dtb` (the device tree QEMU can run); the card
    /// on its SD controller, the console on its first UART. It has no network: the test works
    /// through the technician's console, as a technician would.
    Pi4 { uboot: PathBuf, dtb: PathBuf },
}

impl Machine {
    /// What the console prints when its shell is ready for commands.
    fn ready(&self) -> &'static str {
        match self {
            Machine::Virt => "BOARD-READY",
            Machine::Pi4 { .. } => "root shell on the serial console",
        }
    }
}

/// The board's disk (the card): a copy of the image, in the layout of board/layout.
pub struct Disk {
    pub path: PathBuf,
    /// Name, first byte and length of each partition.
    partitions: Vec<(String, u64, u64)>,
}

impl Disk {
    /// A freshly flashed card in `dir`.
    pub fn flash(dir: &Path) -> Disk {
        Disk::flash_from(&images(), dir)
    }

    /// A card in `dir` flashed with the image in `img` (a folder of `images_of`).
    pub fn flash_from(img: &Path, dir: &Path) -> Disk {
        let path = dir.join("disk.img");
        let ok = Command::new("cp")
            .arg("--sparse=always")
            .arg(img.join("disk.img"))
            .arg(&path)
            .status()
            .expect("cp runs")
            .success();
        assert!(ok, "the disk image is copied");
        let table = std::fs::read_to_string(img.join("partitions")).expect("partitions");
        let partitions = table
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                Some((
                    f.first()?.to_string(),
                    f.get(1)?.parse::<u64>().ok()? * 512,
                    f.get(2)?.parse::<u64>().ok()? * 512,
                ))
            })
            .collect();
        Disk { path, partitions }
    }

    /// First byte and length of partition `name`.
    pub fn partition(&self, name: &str) -> (u64, u64) {
        self.partitions
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|&(_, at, len)| (at, len))
            .unwrap_or_else(|| panic!("no partition {name}: {:?}", self.partitions))
    }

    /// The card is `bytes` long: larger than the image, as a real card is (the board is off).
    pub fn grow_to(&self, bytes: u64) {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&self.path)
            .unwrap();
        assert!(f.metadata().unwrap().len() <= bytes, "a card only grows");
        f.set_len(bytes).unwrap();
    }

    /// Copies `file` out of the FAT partition `name` into `to` (mtools; the board is off).
    pub fn copy_out(&self, name: &str, file: &str, to: &Path) {
        let (at, _) = self.partition(name);
        let ok = Command::new("mcopy")
            .arg("-n")
            .arg("-i")
            .arg(format!("{}@@{at}", self.path.display()))
            .arg(format!("::{file}"))
            .arg(to)
            .status()
            .expect("mcopy runs")
            .success();
        assert!(ok, "{file} copied out of {name}");
    }

    /// Zeroes partition `name` (the board is off).
    pub fn zero(&self, name: &str) {
        let (at, len) = self.partition(name);
        let ok = Command::new("fallocate")
            .args([
                "--punch-hole",
                "--offset",
                &at.to_string(),
                "--length",
                &len.to_string(),
            ])
            .arg(&self.path)
            .status()
            .expect("fallocate runs")
            .success();
        assert!(ok, "partition {name} zeroed");
    }

    /// Puts a fresh ext4 file system with the contents of `tree` into partition `name` (the
    /// board is off).
    pub fn format(&self, name: &str, tree: &Path) {
        let (at, len) = self.partition(name);
        let ok = Command::new("mke2fs")
            .args(["-q", "-F", "-t", "ext4", "-d"])
            .arg(tree)
            .arg("-E")
            .arg(format!("offset={at}"))
            .arg(&self.path)
            .arg(format!("{}k", len / 1024))
            .status()
            .expect("mke2fs runs")
            .success();
        assert!(ok, "a file system in {name}");
    }

    /// Writes `bytes` at `offset` into partition `name` (the board is off).
    pub fn write(&self, name: &str, offset: u64, bytes: &[u8]) {
        let (at, len) = self.partition(name);
        assert!(offset + bytes.len() as u64 <= len, "inside {name}");
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&self.path)
            .unwrap();
        f.write_all_at(bytes, at + offset).unwrap();
        f.sync_all().unwrap();
    }
}

/// A TCP service on the host that the board may reach, although it reaches nothing else: the
/// board connects to `guest`, an address of QEMU's user network (10.0.2.2, the host's own, is
/// closed by `restrict=on`), and QEMU starts `socat` for each connection, which connects to
/// 127.0.0.1:`host`.
pub struct HostService {
    pub guest: SocketAddrV4,
    pub host: u16,
}

/// A running simulated board.
pub struct Board {
    qemu: Child,
    /// What the console prints when its shell is ready.
    ready: &'static str,
    console: ChildStdin,
    transcript: Arc<Mutex<Vec<u8>>>,
    /// Where the next shell command's output starts.
    read_pos: usize,
    commands: u32,
    monitor: PathBuf,
    /// QEMU's machine protocol (QMP): what the human monitor cannot do, such as input events.
    qmp: PathBuf,
    /// docent's listener (guest port 8080), forwarded.
    pub docent: SocketAddr,
    /// The guest's httpd (port 80, serving /run/www), forwarded.
    pub www: SocketAddr,
    pub powered_on: Instant,
}

impl Board {
    /// Powers the board on with `disk` and waits for its console shell (systemd started it;
    /// docent comes up beside it); `dir` holds the monitor socket and screendumps.
    pub fn boot(disk: &Disk, dir: &Path) -> Board {
        Board::boot_reaching(disk, dir, &[])
    }

    /// As `boot`, with `services` of the host within the board's reach.
    pub fn boot_reaching(disk: &Disk, dir: &Path, services: &[HostService]) -> Board {
        let mut board = Board::power_on_reaching(disk, dir, services);
        board.wait_ready(0);
        board
    }

    /// Powers the board on and returns at once (U-Boot starts).
    pub fn power_on(disk: &Disk, dir: &Path) -> Board {
        Board::power_on_reaching(disk, dir, &[])
    }

    /// Powers `machine` on with `disk` and waits for its console shell.
    pub fn boot_machine(machine: &Machine, disk: &Disk, dir: &Path) -> Board {
        let mut board = Board::power_on_machine(machine, disk, dir);
        board.wait_ready(0);
        board
    }

    /// Powers `machine` on and returns at once.
    pub fn power_on_machine(machine: &Machine, disk: &Disk, dir: &Path) -> Board {
        let Machine::Pi4 { uboot, dtb } = machine else {
            return Board::power_on_reaching(disk, dir, &[]);
        };
        let mut cmd = Command::new("qemu-system-aarch64");
        cmd.args(["-machine", "raspi4b", "-accel", "tcg,thread=multi"])
            .args(["-nodefaults", "-no-user-config", "-display", "none"])
            .arg("-kernel")
            .arg(uboot)
            .arg("-dtb")
            .arg(dtb)
            .arg("-drive")
            .arg(format!("file={},format=raw,if=sd", disk.path.display()))
            // The console on the first UART (serial0, the PL011); nothing on the mini UART.
            .args(["-serial", "stdio", "-serial", "null"]);
        Board::start(cmd, machine.ready(), dir, None, None)
    }

    fn power_on_reaching(disk: &Disk, dir: &Path, services: &[HostService]) -> Board {
        let img = images();
        let docent = free_port();
        let www = free_port();
        // restrict=on: the board reaches nothing outside; only the forwarded ports reach it,
        // and it reaches only the named services (socat's own messages go to a log file: its
        // standard error is the connection).
        let mut net = format!(
            "user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:{www}-:80,\
             hostfwd=tcp:127.0.0.1:{docent}-:8080"
        );
        for s in services {
            net += &format!(
                ",guestfwd=tcp:{}-cmd:socat -lf {} STDIO TCP:127.0.0.1:{}",
                s.guest,
                dir.join("guestfwd.log").display(),
                s.host
            );
        }
        let mut cmd = Command::new("qemu-system-aarch64");
        // acpi=off: the PL061 GPIO is there (gpiochip0), as the board profile expects.
        cmd.args(["-machine", "virt,acpi=off", "-cpu", "cortex-a72"])
            .args(["-accel", "tcg,thread=multi"])
            .args(["-nodefaults", "-no-user-config", "-display", "none"])
            .args(["-m", "768", "-smp", "2"])
            .arg("-bios")
            .arg(img.join("u-boot.bin"))
            .arg("-drive")
            .arg(format!("file={},format=raw,if=virtio", disk.path.display()))
            .args(["-device", "virtio-gpu-pci"])
            .args(["-device", "virtio-net-pci,netdev=n0,romfile="])
            // The touch screen: an absolute pointer (evdev ABS_X/ABS_Y and BTN_LEFT, 0..32767),
            // touched through QMP (`touch`).
            .args(["-device", "virtio-tablet-pci"])
            .args(["-netdev", &net, "-serial", "stdio"]);
        Board::start(cmd, Machine::Virt.ready(), dir, Some(docent), Some(www))
    }

    /// Starts QEMU (`cmd`, without its monitor) with the console on its standard streams.
    fn start(
        mut cmd: Command,
        ready: &'static str,
        dir: &Path,
        docent: Option<u16>,
        www: Option<u16>,
    ) -> Board {
        let monitor = dir.join("mon.sock");
        let _ = std::fs::remove_file(&monitor);
        let qmp = dir.join("qmp.sock");
        let _ = std::fs::remove_file(&qmp);
        cmd.arg("-monitor")
            .arg(format!("unix:{},server=on,wait=off", monitor.display()))
            .arg("-qmp")
            .arg(format!("unix:{},server=on,wait=off", qmp.display()))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let powered_on = Instant::now();
        let mut qemu = cmd
            .spawn()
            .expect("qemu-system-aarch64 runs (./x appliance installs it)");
        let mut out = qemu.stdout.take().expect("serial out");
        let transcript = Arc::new(Mutex::new(Vec::new()));
        let sink = transcript.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = out.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        let console = qemu.stdin.take().expect("serial in");
        let forwarded = |port: Option<u16>| SocketAddr::from(([127, 0, 0, 1], port.unwrap_or(0)));
        Board {
            qemu,
            ready,
            console,
            transcript,
            read_pos: 0,
            commands: 0,
            monitor,
            qmp,
            docent: forwarded(docent),
            www: forwarded(www),
            powered_on,
        }
    }

    /// Waits for the console shell's `BOARD-READY` (the Pi 4's: its banner) after byte `since`
    /// and quiets the shell: no echo, no prompt; every command ends with a marker the echo of
    /// the command itself cannot produce.
    pub fn wait_ready(&mut self, since: usize) {
        let ready = self.wait_for(self.ready, since, BOOT_WITHIN);
        let prompt = self.wait_for("# ", ready, Duration::from_secs(60));
        self.read_pos = prompt;
        self.send("stty -echo; PS1=''; PS2=''");
        std::thread::sleep(Duration::from_millis(500));
        self.sh("true");
    }

    /// Reboots the board from its shell (systemd stops, U-Boot runs the boot script again).
    pub fn reboot(&mut self) {
        let mark = self.mark();
        self.send("systemctl reboot");
        self.wait_ready(mark);
    }

    fn send(&mut self, line: &str) {
        self.console
            .write_all(format!("{line}\n").as_bytes())
            .and_then(|()| self.console.flush())
            .expect("serial console");
    }

    /// The serial console so far, as text.
    pub fn transcript(&self) -> String {
        String::from_utf8_lossy(&self.transcript.lock().unwrap()).into_owned()
    }

    /// Where the console's output ends now (for `wait_for` of later output).
    pub fn mark(&self) -> usize {
        self.transcript.lock().unwrap().len()
    }

    /// Waits for `token` on the console after byte `since`; returns the offset just past it.
    pub fn wait_for(&mut self, token: &str, since: usize, within: Duration) -> usize {
        let start = Instant::now();
        loop {
            {
                let t = self.transcript.lock().unwrap();
                if let Some(i) = find(&t[since.min(t.len())..], token.as_bytes()) {
                    return since + i + token.len();
                }
            }
            if let Ok(Some(status)) = self.qemu.try_wait() {
                panic!("QEMU exited ({status}); console:\n{}", self.tail());
            }
            assert!(
                start.elapsed() < within,
                "no {token:?} on the console within {within:?}; console:\n{}",
                self.tail()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The end of the console, for failure messages.
    pub fn tail(&self) -> String {
        let t = self.transcript.lock().unwrap();
        strip_ansi(&String::from_utf8_lossy(&t[t.len().saturating_sub(3000)..]))
    }

    /// Runs `command` in the board's root shell; returns its output (without the lines the
    /// kernel or systemd wrote to the console meanwhile).
    pub fn sh(&mut self, command: &str) -> String {
        self.sh_within(command, Duration::from_secs(60))
    }

    pub fn sh_within(&mut self, command: &str, within: Duration) -> String {
        self.commands += 1;
        let n = self.commands;
        self.send(command);
        // `$((0))` keeps the marker out of the shell's echo, should echo come back.
        self.send(&format!("echo __done{n}$((0))__"));
        let end = self.wait_for(&format!("__done{n}0__"), self.read_pos, within);
        let raw = {
            let t = self.transcript.lock().unwrap();
            t[self.read_pos..end].to_vec()
        };
        self.read_pos = end;
        let text = strip_ansi(&String::from_utf8_lossy(&raw));
        let body = text.rsplit_once("__done").map_or(&*text, |(b, _)| b);
        body.replace('\r', "")
            .lines()
            .filter(|l| !console_message(l))
            .collect::<Vec<_>>()
            .join("\n")
            .trim()
            .to_string()
    }

    /// One command on QEMU's human monitor; returns its reply.
    pub fn monitor(&self, command: &str) -> String {
        let mut s = UnixStream::connect(&self.monitor).expect("QEMU monitor socket");
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let read_prompt = |s: &mut UnixStream| {
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            while !got.ends_with(b"(qemu) ") {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
            String::from_utf8_lossy(&got).into_owned()
        };
        read_prompt(&mut s);
        s.write_all(format!("{command}\n").as_bytes()).unwrap();
        read_prompt(&mut s)
    }

    /// One QMP command (a JSON object) after the greeting and `qmp_capabilities`; returns
    /// its reply (`{"return": ...}` or `{"error": ...}`), skipping the events QEMU sends.
    pub fn qmp(&self, command: &str) -> String {
        let s = UnixStream::connect(&self.qmp).expect("QEMU's QMP socket");
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut lines = std::io::BufReader::new(s.try_clone().unwrap()).lines();
        let mut next_reply = || loop {
            let line = lines.next().expect("QMP answers").expect("QMP reads");
            if !line.contains("\"event\"") {
                return line;
            }
        };
        let greeting = next_reply();
        assert!(greeting.contains("QMP"), "QMP's greeting: {greeting}");
        let mut w = &s;
        w.write_all(b"{\"execute\": \"qmp_capabilities\"}\n")
            .unwrap();
        let ok = next_reply();
        assert!(ok.contains("\"return\""), "qmp_capabilities: {ok}");
        w.write_all(format!("{command}\n").as_bytes()).unwrap();
        next_reply()
    }

    /// A finger on the touch screen (the virtio tablet) at `x`, `y` (0..1 of the picture from
    /// its left and top) for 100 ms. Returns when it came down (the host's clock).
    pub fn touch(&self, x: f32, y: f32) -> Instant {
        let abs = |axis: &str, f: f32| {
            let value = (f.clamp(0.0, 1.0) * 32767.0).round() as u32;
            format!(r#"{{"type": "abs", "data": {{"axis": "{axis}", "value": {value}}}}}"#)
        };
        let button = |down: bool| {
            format!(r#"{{"type": "btn", "data": {{"button": "left", "down": {down}}}}}"#)
        };
        let send = |events: Vec<String>| {
            let reply = self.qmp(&format!(
                r#"{{"execute": "input-send-event", "arguments": {{"events": [{}]}}}}"#,
                events.join(", ")
            ));
            assert!(reply.contains("\"return\""), "input-send-event: {reply}");
        };
        let down = Instant::now();
        send(vec![abs("x", x), abs("y", y), button(true)]);
        std::thread::sleep(Duration::from_millis(100));
        send(vec![button(false)]);
        down
    }

    /// What the display shows now.
    pub fn screendump(&self, path: &Path) -> Screen {
        let _ = std::fs::remove_file(path);
        self.monitor(&format!("screendump {}", path.display()));
        let start = Instant::now();
        loop {
            if let Ok(bytes) = std::fs::read(path)
                && let Some(screen) = Screen::from_ppm(&bytes)
            {
                return screen;
            }
            assert!(start.elapsed() < Duration::from_secs(10), "no screendump");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Cuts the power: QEMU is killed, whatever the guest had not written to its disk is lost.
    pub fn power_cut(mut self) {
        let _ = self.qemu.kill();
        let _ = self.qemu.wait();
    }
}

impl Drop for Board {
    fn drop(&mut self) {
        let _ = self.qemu.kill();
        let _ = self.qemu.wait();
    }
}

/// A line the kernel or a unit with `StandardOutput=journal+console` (the update gate) wrote to
/// the console, `[   23.650668] update-gate.sh[174]: ...`: it may come between a command's lines.
fn console_message(line: &str) -> bool {
    line.strip_prefix('[')
        .and_then(|rest| rest.split_once("] "))
        .is_some_and(|(stamp, _)| {
            let stamp = stamp.trim_start();
            !stamp.is_empty() && stamp.chars().all(|c| c.is_ascii_digit() || c == '.')
        })
}

/// A screendump (QEMU writes binary PPM).
pub struct Screen {
    pub width: usize,
    pub height: usize,
    rgb: Vec<u8>,
}

impl Screen {
    fn from_ppm(bytes: &[u8]) -> Option<Screen> {
        let mut fields = Vec::new();
        let mut at = 0;
        while fields.len() < 4 {
            while bytes.get(at)?.is_ascii_whitespace() {
                at += 1;
            }
            let start = at;
            while !bytes.get(at)?.is_ascii_whitespace() {
                at += 1;
            }
            fields.push(std::str::from_utf8(&bytes[start..at]).ok()?);
        }
        let (width, height): (usize, usize) = (fields[1].parse().ok()?, fields[2].parse().ok()?);
        let rgb = bytes.get(at + 1..)?.to_vec();
        (fields[0] == "P6" && rgb.len() == width * height * 3).then_some(Screen {
            width,
            height,
            rgb,
        })
    }

    pub fn pixel(&self, x: usize, y: usize) -> (u8, u8, u8) {
        let i = 3 * (y * self.width + x);
        (self.rgb[i], self.rgb[i + 1], self.rgb[i + 2])
    }

    /// The share of a grid of sample points whose colour passes `matches`.
    pub fn fraction(&self, matches: impl Fn((u8, u8, u8)) -> bool) -> f64 {
        self.fraction_above(1.0, matches)
    }

    /// The share of the pixels in the top `part` of the screen (0..1 of its height) that match:
    /// the picture above the caption panel, which covers at most the bottom 45 %.
    pub fn fraction_above(&self, part: f64, matches: impl Fn((u8, u8, u8)) -> bool) -> f64 {
        let rows = ((self.height as f64 * part) as usize).min(self.height);
        let (mut hits, mut all) = (0, 0);
        for y in (0..rows).step_by(16) {
            for x in (0..self.width).step_by(16) {
                all += 1;
                hits += usize::from(matches(self.pixel(x, y)));
            }
        }
        hits as f64 / all.max(1) as f64
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The console's text without terminal escapes (busybox's shell asks for the cursor position).
fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}
