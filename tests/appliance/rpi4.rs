//! The Raspberry Pi 4 image of `./x image`, as a museum flashes it, booted on QEMU's emulated
//! Pi 4 (`raspi4b`) through its own U-Boot, boot script, kernel and initramfs, and driven
//! through the technician's console on the serial line (the emulated Pi has no network).
//!
//! QEMU's Pi 4 is not a Pi 4 in four ways, and `adjust_for_qemu` makes up for each on the test's
//! copy of the card and of the device tree, never in the image. What it cannot show (the GPU
//! firmware and config.txt, HDMI, the SD card's regulators switching, USB, Ethernet, Wi-Fi, a
//! sound card) is listed in board/raspberrypi4-64/README.md.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use docent_test_support::board::{self, Board, Disk, Machine};

/// The card: larger than the image (1.4 GiB), as every card is; QEMU wants a power of two.
const CARD_BYTES: u64 = 2 << 30;
/// The device tree the image's boot partition carries (board/sim/rootfs.sh, `RPI4_DTB`).
const DTB: &str = "bcm2711-rpi-4-b.dtb";
/// The nodes of the SD card's controller and of the watchdog in that device tree.
const ROOT_NODE: &str = "/emmc2bus/mmc@7e340000";
const RESET_NODE: &str = "/soc/watchdog@7e100000";
/// How long an emulated boot may take: U-Boot reads the 32 MiB kernel at about 0.5 MiB/s
/// through QEMU's SD host, then the kernel and systemd run on 4 emulated cores.
const BOOT_WITHIN: Duration = Duration::from_secs(600);

#[test]
#[ignore = "boots the emulated Raspberry Pi 4: run by ./x appliance"]
fn rpi4_image_boots_on_an_emulated_pi_4_to_docent_serving_with_its_data_grown() {
    let dir = tempfile::tempdir().unwrap();
    let (disk, machine) = card(dir.path());
    initramfs_holds_what_the_device_tree_needs(&disk, dir.path());
    let mut b = Board::boot_machine(&machine, &disk, dir.path());
    let console_at = b.powered_on.elapsed();
    b.sh("export SYSTEMD_PAGER= PAGER=cat");

    // The image's own console: the getty systemd starts on the kernel's console, a root shell.
    let getty = b.sh("systemctl is-active serial-getty@ttyAMA0.service");
    assert!(
        getty.lines().any(|l| l.trim() == "active"),
        "the technician's console is the image's serial getty: {getty}"
    );
    // The root came from the card, through the initramfs's modules.
    assert!(
        b.sh("grep ' / ' /proc/mounts")
            .contains("/dev/mmcblk0p3 / ext4 ro"),
        "slot A's root, read-only, from the SD card"
    );
    let loaded = b.sh("cat /proc/modules");
    for module in ["sdhci_iproc", "gpio_regulator", "fixed", "bcm2835_wdt"] {
        assert!(
            loaded.lines().any(|l| l.starts_with(&format!("{module} "))),
            "{module} is loaded: {loaded}"
        );
    }

    // docent serves, and the slot is marked good.
    let served = wait_served(&mut b);
    until_active(&mut b, "docent-boot-ok.service", 180);
    let left = b.sh("fw_printenv BOOT_A_LEFT");
    assert!(
        left.contains("BOOT_A_LEFT=3"),
        "slot A is marked good: {left}"
    );
    let health = b.sh("busybox wget -qO- http://127.0.0.1:8080/api/v1/health");
    assert!(
        health.contains(r#""ptt":"ok""#),
        "the button line (GPIO17, pull-up asked) works: {health}"
    );

    // The data partition took the rest of the card (beside docent's start), and the table is
    // whole.
    until_active(&mut b, "docent-grow-data.service", 120);
    let data_kib: u64 = b
        .sh("df -k /data | tail -n 1")
        .split_whitespace()
        .nth(1)
        .and_then(|k| k.parse().ok())
        .expect("df");
    let card_mib = CARD_BYTES >> 20;
    // From the partition's start to the card's end, less ext4's own (its journal, inode tables
    // and reserved blocks: about 7 %; the image's 256 MiB partition showed 230 MiB).
    let room_kib = (CARD_BYTES - disk.partition("data").0) >> 10;
    assert!(
        data_kib > room_kib * 9 / 10,
        "/data grew from 256 MiB to the end of the {card_mib} MiB card ({room_kib} KiB): \
         {data_kib} KiB"
    );
    let verify = b.sh("sfdisk --verify /dev/mmcblk0");
    assert!(
        verify.contains("No errors detected") && verify.contains("0 free sectors"),
        "the backup GPT at the end of the card, nothing left unused: {verify}"
    );
    let grown = b.sh("systemctl show -p Result docent-grow-data.service");
    assert!(
        grown.lines().any(|l| l.trim() == "Result=success"),
        "{grown}: {}",
        b.sh("journalctl -b -u docent-grow-data -o cat")
    );

    // The Wi-Fi chip's firmware is on the root.
    assert!(
        b.sh("ls /usr/lib/firmware/brcm/")
            .contains("brcmfmac43455-sdio.raspberrypi,4-model-b.txt"),
        "the CYW43455's firmware"
    );
    // Nothing the first boot printed is an error: the first-boot script's pipe, the initramfs's
    // wait for the card.
    let console = b.transcript();
    for noise in ["Broken pipe", "grep: /sys/class/block", "insmod"] {
        assert!(
            !console.contains(noise),
            "the console says {noise:?}:\n{console}"
        );
    }
    println!(
        "emulated Pi 4: console {:.0} s, docent serving {:.0} s after power on; {}; /data {} MiB \
         on a {card_mib} MiB card",
        console_at.as_secs_f64(),
        served.as_secs_f64(),
        b.sh("systemd-analyze time | head -n 1"),
        data_kib / 1024
    );
}

#[test]
#[ignore = "boots the emulated Raspberry Pi 4: run by ./x appliance"]
fn rpi4_a_root_that_never_comes_resets_the_board_by_its_watchdog_and_slot_b_serves() {
    let dir = tempfile::tempdir().unwrap();
    let (disk, machine) = card(dir.path());
    // Slot A's kernel boots, its initramfs finds no init on the root and gives up: the kernel
    // panics. One attempt left for A, so the first reset already goes to B (the counting itself
    // is the simulated board's test).
    let tree = dir.path().join("no-init");
    std::fs::create_dir_all(tree.join("boot")).unwrap();
    for f in ["Image", "initrd.img"] {
        std::fs::copy(pi4_images().join(f), tree.join("boot").join(f)).unwrap();
    }
    disk.format("rootA", &tree);
    write_boot_state(&disk, dir.path(), 1);
    let mut b = Board::power_on_machine(&machine, &disk, dir.path());
    let gave_up = b.wait_for("initramfs: no /sbin/init on rootA", 0, BOOT_WITHIN);
    let gave_up_at = b.powered_on.elapsed();
    // Nobody touches the board: the watchdog's restart handler resets it after panic=5.
    let reset = b.wait_for("docent boot: slot B", gave_up, BOOT_WITHIN);
    let reset_at = b.powered_on.elapsed();
    let between = &b.transcript()[gave_up..reset];
    assert!(
        !between.contains("Reboot failed") && !between.contains("System halted"),
        "the board reset itself: {between}"
    );
    b.wait_ready(reset);
    b.sh("export SYSTEMD_PAGER= PAGER=cat");
    assert!(b.sh("cat /proc/cmdline").contains("docent.slot=B"));
    let served = wait_served(&mut b);
    until_active(&mut b, "docent-boot-ok.service", 180);
    let state = b.sh("fw_printenv BOOT_A_LEFT BOOT_B_LEFT");
    assert!(
        state.contains("BOOT_A_LEFT=0") && state.contains("BOOT_B_LEFT=3"),
        "A spent, B marked good: {state}"
    );
    println!(
        "emulated Pi 4: slot A's initramfs gave up {:.0} s after power on, the watchdog reset the \
         board into slot B {:.0} s after power on, docent served on B at {:.0} s",
        gave_up_at.as_secs_f64(),
        reset_at.as_secs_f64(),
        served.as_secs_f64()
    );
}

fn pi4_images() -> PathBuf {
    board::images_of("raspberrypi4-64")
}

/// A card flashed with the Pi 4 image, made ready for QEMU, and the machine to boot it in.
fn card(dir: &Path) -> (Disk, Machine) {
    let disk = Disk::flash_from(&pi4_images(), dir);
    let machine = adjust_for_qemu(&disk, dir);
    (disk, machine)
}

/// What QEMU's `raspi4b` needs that a Pi 4 does not, on the test's copies only:
/// 1. The card is a power of two in size (2 GiB): QEMU refuses another. A real card is larger
///    than the image too, which is what the growth of the data partition is for.
/// 2. The HDMI blocks (0x7ef00000 on: their clock, interrupt controller, HDMI and DDC nodes)
///    are disabled in the device tree: QEMU has none, and the kernel takes an external abort
///    at the HDMI interrupt controller.
/// 3. The card sits on the SDHCI at mmc@7e300000, where QEMU attaches it; on a Pi 4 that one
///    carries the Wi-Fi chip and the card is on emmc2 (mmc@7e340000). The Wi-Fi node and its
///    power sequence (a GPIO of the firmware's expander, which QEMU cannot drive) go. emmc2
///    stays, with its regulators: they fail to probe under QEMU (the expander's GPIOs again),
///    which is why QEMU cannot show that a card on emmc2 appears.
/// 4. The console is the PL011 (serial0, ttyAMA0), not the mini UART (ttyS1): QEMU's mini UART
///    locks Linux up with its interrupt when it is opened. U-Boot's stdout-path is serial0, the
///    kernel's last console= is ttyAMA0 (the boot state's `docent_bootargs`, written here as
///    the image writes it), and the Bluetooth child of the PL011 goes, so that ttyAMA0 is a
///    terminal, not the Bluetooth chip's serial bus.
fn adjust_for_qemu(disk: &Disk, dir: &Path) -> Machine {
    disk.grow_to(CARD_BYTES);
    let uboot = dir.join("u-boot.bin");
    let dtb = dir.join(DTB);
    disk.copy_out("boot", "u-boot.bin", &uboot);
    disk.copy_out("boot", DTB, &dtb);
    let fdtput = |args: &[&str]| {
        let ok = Command::new("fdtput")
            .arg(&dtb)
            .args(args)
            .status()
            .expect("fdtput (device-tree-compiler)")
            .success();
        assert!(ok, "fdtput {args:?}");
    };
    let soc = Command::new("fdtget")
        .arg("-l")
        .arg(&dtb)
        .arg("/soc")
        .output()
        .expect("fdtget");
    let hdmi_blocks: Vec<String> = String::from_utf8_lossy(&soc.stdout)
        .lines()
        .filter(|n| n.contains("@7ef0"))
        .map(|n| format!("/soc/{n}"))
        .collect();
    assert!(hdmi_blocks.len() >= 4, "HDMI blocks: {hdmi_blocks:?}");
    for node in &hdmi_blocks {
        fdtput(&["-t", "s", node, "status", "disabled"]);
    }
    fdtput(&["-d", "/soc/mmc@7e300000", "mmc-pwrseq"]);
    fdtput(&["-r", "/soc/mmc@7e300000/wifi@1"]);
    fdtput(&["-t", "s", "/chosen", "stdout-path", "serial0:115200n8"]);
    fdtput(&["-r", "/soc/serial@7e201000/bluetooth"]);
    write_boot_state(disk, dir, 3);
    Machine::Pi4 { uboot, dtb }
}

/// The boot state of a fresh image (board/layout/bootstate.env) with `a_left` attempts for
/// slot A and the Pi 4's kernel arguments (board/raspberrypi4-64/bootargs) with the console moved to the
/// PL011 (`adjust_for_qemu`, 4).
fn write_boot_state(disk: &Disk, dir: &Path, a_left: u32) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let env = std::fs::read_to_string(root.join("board/layout/bootstate.env")).unwrap();
    let bootargs = std::fs::read_to_string(root.join("board/raspberrypi4-64/bootargs")).unwrap();
    assert!(bootargs.contains("console=ttyS1,115200"), "{bootargs}");
    let mut text: String = env
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("BOOT_A_LEFT="))
        .map(|l| format!("{l}\n"))
        .collect();
    text += &format!("BOOT_A_LEFT={a_left}\n");
    text += &format!(
        "docent_bootargs={}\n",
        bootargs
            .trim()
            .replace("console=ttyS1,115200", "console=ttyAMA0,115200")
    );
    let (txt, img) = (dir.join("bootstate.txt"), dir.join("bootstate.img"));
    std::fs::write(&txt, text).unwrap();
    let ok = Command::new("mkenvimage")
        .args(["-s", "0x4000", "-o"])
        .arg(&img)
        .arg(&txt)
        .status()
        .expect("mkenvimage (u-boot-tools)")
        .success();
    assert!(ok, "mkenvimage");
    disk.write("bootstate", 0, &std::fs::read(&img).unwrap());
}

/// Every module the device tree says lies between the kernel and the root (the SD card's
/// controller, its regulators, the watchdog that resets the board), as the kernel resolves
/// them (board/sim/dt-modules.py on the image's own device tree and Debian's modules), is in
/// slot A's initramfs.
fn initramfs_holds_what_the_device_tree_needs(disk: &Disk, dir: &Path) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let kernel = board::sim_home().join("kernel/arm64");
    let kver = std::fs::read_to_string(pi4_images().join("KVER")).unwrap();
    let dtb = dir.join("original.dtb");
    disk.copy_out("boot", DTB, &dtb);
    let out = Command::new("python3")
        .arg(root.join("board/sim/dt-modules.py"))
        .arg(&dtb)
        .arg(&kernel)
        .arg(kver.trim())
        .args([ROOT_NODE, RESET_NODE])
        .output()
        .expect("python3");
    assert!(out.status.success(), "{out:?}");
    let needed: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect();
    for module in ["sdhci_iproc", "gpio_regulator", "fixed", "bcm2835_wdt"] {
        assert!(
            needed.iter().any(|m| m == module),
            "the device tree's walk finds {module}: {needed:?}"
        );
    }
    let listing = Command::new("sh")
        .arg("-c")
        .arg("zcat \"$0\" | cpio -t --quiet")
        .arg(pi4_images().join("initrd.img"))
        .output()
        .expect("zcat, cpio");
    let files = String::from_utf8_lossy(&listing.stdout);
    let modules: Vec<String> = files
        .lines()
        .filter_map(|f| f.rsplit('/').next()?.strip_suffix(".ko"))
        .map(|m| m.replace('-', "_"))
        .collect();
    for module in &needed {
        assert!(
            modules.contains(module),
            "the initramfs lacks {module}, which the device tree needs before the root: \
             {modules:?}"
        );
    }
}

/// Waits until docent answers its health route on the board; returns when, from power on.
fn wait_served(b: &mut Board) -> Duration {
    b.sh_within(
        "until busybox wget -qO /dev/null http://127.0.0.1:8080/api/v1/health; do sleep 1; done",
        Duration::from_secs(300),
    );
    b.powered_on.elapsed()
}

/// Waits until `unit` is active (a oneshot: has run through) on the board.
fn until_active(b: &mut Board, unit: &str, within_secs: u64) {
    b.sh_within(
        &format!("until systemctl is-active -q {unit}; do sleep 1; done"),
        Duration::from_secs(within_secs),
    );
}
