//! The board profiles under `board/` are what the images install as `/etc/docent/docent.toml`:
//! each must load (unknown keys are errors), and only the simulated boards may open test hooks.
//! The kiosk's systemd unit runs docent as its own user with no capabilities (so every board
//! listens on a port from 1024 up), and its sandbox keeps `systemd-analyze security` at "OK".

use std::path::Path;

use docent::config::Bias;
use docent::config::Config;
use docent::config::DeviceMode;

fn profile(board: &str) -> Config {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("board")
        .join(board)
        .join("docent.toml");
    Config::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn every_board_profile_loads() {
    let boards: Vec<String> =
        std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("board"))
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.path().join("docent.toml").is_file())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
    assert!(
        boards.len() >= 2,
        "raspberrypi4-64 and the simulated board: {boards:?}"
    );
    for board in &boards {
        let c = profile(board);
        assert_eq!(
            c.data_dir,
            Path::new("/data"),
            "{board}: the data partition"
        );
        assert_eq!(
            c.access.admin_password_file.as_deref(),
            Some(Path::new("/data/admin-password")),
            "{board}: the first-boot password"
        );
        assert_eq!(c.devices, DeviceMode::Real, "{board}: real devices only");
    }
}

#[test]
fn only_simulated_boards_open_test_hooks() {
    assert!(
        !profile("raspberrypi4-64").test.hooks,
        "never on a real board"
    );
    let c = profile("qemuarm64");
    assert!(
        c.test.hooks,
        "the simulated board: the appliance test stalls a loop"
    );
    assert_eq!(
        (c.ptt.line, c.ptt.active_low, c.ptt.bias()),
        (0, true, Bias::PullUp),
        "the simulated board's gpio-sim button: active low like the Pi's, with docent's pull-up \
         (gpio-sim's lines start pulled down, which would read as a press)"
    );
}

/// The simulated board's previous / next / choose buttons are gpio-sim lines 2, 3, 4 of the
/// push-to-talk button's bank (board/sim/guest/gpio-sim), none the button's or the LED's, wired
/// and pulled up as the button is.
#[test]
fn the_simulated_boards_choice_buttons_are_the_banks_free_lines() {
    let c = profile("qemuarm64");
    let b = &c.choice_buttons;
    assert_eq!(b.chip, c.ptt.chip, "the button's bank");
    assert_eq!((b.previous, b.next, b.choose), (Some(2), Some(3), Some(4)));
    assert_eq!((b.active_low, b.bias()), (true, Bias::PullUp));
}

fn unit_path() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("board/systemd/docent.service")
}

/// The values of `key=` in the unit (every line that sets it, in order).
fn unit_values(key: &str) -> Vec<String> {
    let unit = std::fs::read_to_string(unit_path()).unwrap();
    let prefix = format!("{key}=");
    unit.lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .map(|v| v.trim().to_string())
        .collect()
}

#[test]
fn docent_runs_as_its_own_user_with_no_capabilities_on_an_unprivileged_port() {
    assert_eq!(unit_values("User"), ["docent"]);
    assert_eq!(unit_values("Group"), ["docent"]);
    assert_eq!(
        unit_values("SupplementaryGroups"),
        ["audio video input gpio"]
    );
    assert_eq!(
        unit_values("CapabilityBoundingSet"),
        [""],
        "no capabilities"
    );
    assert_eq!(unit_values("AmbientCapabilities"), [""]);
    // The data partition, and where docent asks the board for a reboot (docent-reboot.path).
    assert_eq!(unit_values("ReadWritePaths"), ["/data /run/docent"]);
    // Memory and tasks are bounded, whatever a client makes docent hold.
    assert_eq!(unit_values("MemoryMax"), ["400M"]);
    assert_eq!(unit_values("TasksMax"), ["256"]);
    // Binding below 1024 would need CAP_NET_BIND_SERVICE, which the unit does not give.
    for board in ["raspberrypi4-64", "qemuarm64"] {
        let port = profile(board).listen.port();
        assert!(port >= 1024, "{board}: port {port} needs a capability");
    }
}

/// `systemd-analyze security --offline=true --threshold=20` on the unit: it fails above an
/// exposure of 2.0 ("OK" is 2.0 or less), so the sandbox cannot quietly regress.
#[test]
fn the_unit_sandbox_scores_ok_in_systemd_analyze_security() {
    let analyze = std::process::Command::new("systemd-analyze")
        .args(["security", "--offline=true", "--threshold=20", "--no-pager"])
        .arg(unit_path())
        .output();
    let out = match analyze {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!(
                "SKIPPED: systemd-analyze is not installed (Debian: apt-get install systemd; \
                 ./x setup installs it)"
            );
            return;
        }
        Err(e) => panic!("systemd-analyze: {e}"),
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let score: f64 = text
        .lines()
        .find_map(|l| {
            l.split("Overall exposure level for docent.service: ")
                .nth(1)
        })
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no overall exposure in:\n{text}"));
    println!("systemd-analyze security: exposure {score}");
    assert!(
        out.status.success(),
        "exposure {score} is above the threshold 2.0:\n{text}"
    );
    assert!(score <= 2.0, "exposure {score}:\n{text}");
}

/// Every ALSA configuration the project ships, loaded by alsa-lib as a board loads its
/// `/etc/asound.conf` (after alsa.conf): alsa-lib refuses a file it cannot parse as a whole, and
/// the kiosk would then have no sound. The devices the board's docent.toml names must be among
/// the PCMs it defines.
#[test]
fn every_alsa_configuration_loads_and_names_the_profiles_devices() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let shipped = [
        ("board/raspberrypi4-64/asound.conf", Some("raspberrypi4-64")),
        ("board/qemuarm64/asound.conf", Some("qemuarm64")),
        ("board/sim/asoundrc", None),
    ];
    let home = tempfile::tempdir().unwrap();
    for (file, board) in shipped {
        let path = root.join(file);
        assert!(path.is_file(), "{file}");
        let out = std::process::Command::new("aplay")
            .arg("-L")
            .env("HOME", home.path())
            .env(
                "ALSA_CONFIG_PATH",
                format!("/usr/share/alsa/alsa.conf:{}", path.display()),
            )
            .output()
            .expect("aplay (alsa-utils)");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && !stderr.contains("ALSA lib"),
            "{file}: alsa-lib refuses it: {stderr}"
        );
        let listed = String::from_utf8_lossy(&out.stdout);
        let pcms: Vec<&str> = listed.lines().filter(|l| !l.starts_with(' ')).collect();
        if let Some(board) = board {
            let audio = profile(board).audio;
            let devices = [audio.capture_device, audio.playback_device]
                .into_iter()
                .chain(audio.assistive_playback_device);
            for device in devices {
                assert!(
                    pcms.contains(&device.as_str()),
                    "{file}: {board}'s docent.toml plays or records '{}', which it does not \
                     define: {pcms:?}",
                    device.as_str()
                );
            }
        }
    }
}

/// The values of `key=` in any systemd unit under `board/systemd` (every line that sets it).
fn values_in(unit: &str, key: &str) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("board/systemd")
        .join(unit);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{unit}: {e}"));
    let prefix = format!("{key}=");
    text.lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .flat_map(|v| v.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .collect()
}

/// Issue 34: RAUC's state sits in /data, which docent owns, so docent could rename it aside
/// and put its own in its place. `data-rauc.mount` binds it onto itself at boot (a mount point
/// cannot be renamed: EBUSY): the unit must be valid to systemd (`systemd-analyze verify`, no
/// warning either), bind the very directory every RAUC configuration names, come after
/// tmpfiles has made it root's and before anything that uses it, and be enabled by both
/// images. The appliance test renames it as docent on the board.
#[test]
fn raucs_state_is_a_mount_point_before_rauc_and_docent_start() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let unit = "data-rauc.mount";
    assert_eq!(values_in(unit, "What"), ["/data/rauc"]);
    assert_eq!(values_in(unit, "Where"), ["/data/rauc"]);
    assert_eq!(values_in(unit, "Options"), ["bind"]);
    let after = values_in(unit, "After");
    assert!(
        after.iter().any(|u| u == "systemd-tmpfiles-setup.service"),
        "after tmpfiles makes /data/rauc root's: {after:?}"
    );
    let before = values_in(unit, "Before");
    for user in [
        "rauc.service",
        "docent.service",
        "docent-firstboot.service",
        "docent-update-gate.service",
    ] {
        assert!(
            before.iter().any(|u| u == user),
            "before {user}: {before:?}"
        );
    }
    for conf in [
        "board/qemuarm64/rauc-system.conf",
        "board/raspberrypi4-64/rauc-system.conf",
    ] {
        let text = std::fs::read_to_string(root.join(conf)).unwrap();
        assert!(
            text.lines().any(|l| l == "data-directory=/data/rauc"),
            "{conf}: RAUC's state is where the mount is"
        );
    }
    // Enabled on the simulated board's image and installed and enabled by the Yocto recipe.
    let rootfs = std::fs::read_to_string(root.join("board/sim/rootfs.sh")).unwrap();
    let enabled = rootfs
        .split("systemctl --root=\"$F\" enable")
        .nth(1)
        .and_then(|rest| rest.split(">/dev/null").next())
        .unwrap_or_default();
    assert!(enabled.contains(unit), "board/sim/rootfs.sh enables {unit}");
    let recipe = std::fs::read_to_string(
        root.join("yocto/meta-docent/recipes-kiosk/docent/docent_0.1.0.bb"),
    )
    .unwrap();
    let services = recipe
        .split("SYSTEMD_SERVICE:${PN} = \"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_default();
    assert!(
        services.split_whitespace().any(|s| s == unit),
        "the recipe enables {unit}: {services}"
    );

    let verify = std::process::Command::new("systemd-analyze")
        .args(["verify", "--no-pager"])
        .arg(root.join("board/systemd").join(unit))
        .current_dir(std::env::temp_dir())
        .output();
    let out = match verify {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("SKIPPED: systemd-analyze is not installed (./x setup installs it)");
            return;
        }
        Err(e) => panic!("systemd-analyze: {e}"),
    };
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "systemd-analyze verify {unit}:\n{said}"
    );
}

/// The simulated board's touch screen (QEMU's virtio tablet) is read by the name its udev rule
/// gives it, with the modules it needs loaded: the profile, the rule and the image agree.
#[test]
fn the_simulated_boards_touch_screen_is_the_name_its_udev_rule_gives() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |file: &str| std::fs::read_to_string(root.join(file)).unwrap();
    let rule = read("board/sim/guest/board-touch.rules");
    let link = rule
        .lines()
        .find(|l| !l.starts_with('#') && l.contains("QEMU Virtio Tablet"))
        .and_then(|l| l.split("SYMLINK+=\"").nth(1))
        .and_then(|rest| rest.split('"').next())
        .expect("a rule naming the virtio tablet");
    assert_eq!(
        profile("qemuarm64").touch.device,
        format!("/dev/{link}"),
        "the profile's [touch] device"
    );
    assert!(read("board/sim/rootfs.sh").contains("\"$GUEST/board-touch.rules\""));
    let modules = read("board/sim/guest/modules-load.conf");
    for module in ["virtio_input", "evdev"] {
        assert!(
            modules.lines().any(|l| l == module),
            "{module} is loaded at boot"
        );
    }
}

/// Files under `dir` (recursively), as paths relative to the project.
fn files_under(root: &Path, dir: &str) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![root.join(dir)];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path);
            } else {
                out.push(path.strip_prefix(root).unwrap().to_path_buf());
            }
        }
    }
    out.sort();
    out
}

/// The lines of a text that can repeat another file's: trimmed, blank lines left out.
fn meaningful_lines(text: &str) -> Vec<&str> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect()
}

/// How many consecutive lines two files may share. Six, like the `duplicates` tool: a copied
/// unit, script or configuration is longer; shorter runs are everyday words (`fi`, `done`).
const SHARED_RUN: usize = 6;

/// Where `copy` repeats `source`: the whole of it (a short file such as `bootargs`, equal once
/// trimmed), or `SHARED_RUN` consecutive non-blank lines with some substance (at least 40
/// letters and digits among them: six lines of `}` or `fi` are no copy). Returns the 1-based
/// number of the first shared non-blank line of each, in `copy` and in `source`.
fn repeats(copy: &str, source: &str) -> Option<(usize, usize)> {
    let (c, s) = (meaningful_lines(copy), meaningful_lines(source));
    if !s.is_empty() && c == s {
        return Some((1, 1));
    }
    if c.len() < SHARED_RUN || s.len() < SHARED_RUN {
        return None;
    }
    let substance = |w: &[&str]| {
        w.iter()
            .flat_map(|l| l.chars())
            .filter(char::is_ascii_alphanumeric)
            .count()
            >= 40
    };
    let mut seen = std::collections::HashMap::new();
    for (i, w) in s.windows(SHARED_RUN).enumerate() {
        if substance(w) {
            seen.entry(w).or_insert(i);
        }
    }
    c.windows(SHARED_RUN)
        .enumerate()
        .find_map(|(i, w)| seen.get(w).map(|&j| (i + 1, j + 1)))
}

/// Every pair of a file under `yocto/` and one under `board/` where the first repeats the second.
fn yocto_repeats_of_board(root: &Path) -> Vec<String> {
    let read = |p: &Path| {
        std::fs::read(root.join(p))
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
    };
    let board: Vec<_> = files_under(root, "board")
        .into_iter()
        .filter_map(|p| read(&p).map(|t| (p, t)))
        .collect();
    let mut found = Vec::new();
    for copy in files_under(root, "yocto") {
        let Some(text) = read(&copy) else { continue };
        for (source, source_text) in &board {
            if let Some((at, from)) = repeats(&text, source_text) {
                found.push(format!(
                    "{}:{at} repeats {}:{from}",
                    copy.display(),
                    source.display()
                ));
            }
        }
    }
    found
}

/// The MACHINEs the layer supports: `docent-boot`'s `COMPATIBLE_MACHINE` (the boards whose boot
/// it knows; docent-bundle and docent-image say the same), `^(a|b)$`.
fn layer_machines(root: &Path) -> Vec<String> {
    let recipe = root.join("yocto/meta-docent/recipes-bsp/docent-boot/docent-boot_1.0.bb");
    let text = std::fs::read_to_string(&recipe).unwrap();
    let value = text
        .lines()
        .find_map(|l| l.strip_prefix("COMPATIBLE_MACHINE = \""))
        .and_then(|rest| rest.strip_suffix('"'))
        .unwrap_or_else(|| panic!("{}: no COMPATIBLE_MACHINE", recipe.display()));
    value
        .trim_start_matches("^(")
        .trim_end_matches(")$")
        .split('|')
        .map(str::to_string)
        .collect()
}

/// The folders of `board/` that are a machine's: they hold what differs by board (a profile, the
/// kernel arguments, RAUC's system.conf), which the recipes find as `board/${MACHINE}/...`.
fn machine_folders(root: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(root.join("board"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            ["docent.toml", "bootargs", "rauc-system.conf"]
                .iter()
                .any(|f| e.path().join(f).is_file())
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    out.sort();
    out
}

/// A machine folder that is not a MACHINE of the layer, and a MACHINE with no folder.
fn machine_folder_problems(folders: &[String], machines: &[String]) -> Vec<String> {
    let mut problems: Vec<String> = folders
        .iter()
        .filter(|f| !machines.contains(f))
        .map(|f| format!("board/{f} is not named by a MACHINE the layer supports ({machines:?})"))
        .collect();
    problems.extend(
        machines
            .iter()
            .filter(|m| !folders.contains(m))
            .map(|m| format!("MACHINE {m} has no folder board/{m}")),
    );
    problems
}

/// Issue 33: board files exist once. The Yocto layer installs them from the project's tree
/// (yocto/meta-docent/README.md, "Board files from the project's tree"), so no file under
/// `yocto/` repeats one under `board/`, whole or in six consecutive lines; and `board/`'s machine
/// folders are named by the MACHINE they are for, each MACHINE of the layer has one, so a recipe
/// finds a board's file as `board/${MACHINE}/...` with no name map.
#[test]
fn board_files_exist_once_and_machine_folders_are_the_layers_machines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let machines = layer_machines(root);
    assert!(machines.len() >= 2, "the Pi and QEMU: {machines:?}");
    let mut problems: Vec<String> = yocto_repeats_of_board(root)
        .into_iter()
        .map(|c| format!("{c} (install it from the project's tree instead)"))
        .collect();
    problems.extend(machine_folder_problems(&machine_folders(root), &machines));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The rule finds what it is for: a unit copied whole, six lines of a script inside another
/// file, a one-line file repeated, a folder by another name than its MACHINE, a MACHINE with no
/// folder; and not six lines of shell keywords.
#[test]
fn a_planted_copy_of_a_board_file_and_a_misnamed_machine_folder_are_found() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let unit = std::fs::read_to_string(root.join("board/systemd/docent.service")).unwrap();
    assert_eq!(repeats(&unit, &unit), Some((1, 1)));
    let script = std::fs::read_to_string(root.join("board/grow-data.sh")).unwrap();
    let six: Vec<&str> = script
        .lines()
        .filter(|l| l.trim().len() > 10)
        .take(6)
        .collect();
    let planted = format!("# a recipe\ndo_install() {{\n{}\n}}\n", six.join("\n"));
    assert!(repeats(&planted, &script).is_some(), "{planted}");
    let five = format!("do_install() {{\n{}\n}}\n", six[..5].join("\n"));
    assert_eq!(repeats(&five, &script), None, "five lines are not a copy");
    assert_eq!(
        repeats("console=ttyAMA0 quiet\n", "console=ttyAMA0 quiet\n\n"),
        Some((1, 1))
    );
    let keywords = "fi\ndone\n}\nfi\ndone\n}\nfi\n";
    assert_eq!(repeats(keywords, keywords.trim_end_matches("fi\n")), None);

    let machines = ["qemuarm64".to_string(), "raspberrypi4-64".to_string()];
    let old = ["qemu-aarch64".to_string(), "rpi4".to_string()];
    let problems = machine_folder_problems(&old, &machines);
    assert_eq!(problems.len(), 4, "{problems:?}");
    assert!(problems[0].contains("board/qemu-aarch64 is not named by a MACHINE"));
    assert!(problems[3].contains("MACHINE raspberrypi4-64 has no folder"));
    assert!(machine_folder_problems(&machines, &machines).is_empty());
}
