//! The board profiles under `board/` are what the images install as `/etc/docent/docent.toml`:
//! each must load (unknown keys are errors), and only the simulated boards may open test hooks.

use std::path::Path;

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
        boards.len() >= 3,
        "rpi4 and the two simulated boards: {boards:?}"
    );
    for board in &boards {
        let c = profile(board);
        assert_eq!(
            c.data_dir,
            Path::new("/data"),
            "{board}: the data partition"
        );
        assert_eq!(
            c.admin_password_file.as_deref(),
            Some(Path::new("/data/admin-password")),
            "{board}: the first-boot password"
        );
        assert_eq!(c.devices, DeviceMode::Real, "{board}: real devices only");
    }
}

#[test]
fn only_simulated_boards_open_test_hooks() {
    assert!(!profile("rpi4").test_hooks, "never on a real board");
    for sim in ["qemu-x86_64", "qemu-aarch64"] {
        let c = profile(sim);
        assert!(c.test_hooks, "{sim}: the appliance test stalls a loop");
        assert_eq!(
            (c.ptt.line, c.ptt.active_low),
            (0, false),
            "{sim}: the gpio-sim button"
        );
    }
}
