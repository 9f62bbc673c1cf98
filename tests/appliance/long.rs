//! The slower update scenarios (`./x appliance-long`): a power cut during an install, and an
//! update across a schema migration then a fallback.

use std::time::{Duration, Instant};

use serde_json::json;

use docent_test_support::appliance::{
    Admin, admin_reboot, bundle, firmware_health, marked_good, on_slot, own_password, runtime,
    wait_health,
};
use docent_test_support::board::{Board, Disk};
use docent_test_support::sorted_names;

/// A power cut (QEMU killed) while RAUC writes slot B: the board boots slot A as before, and a
/// new upload and install of the same bundle then succeed and boot.
#[test]
#[ignore = "boots the simulated board: run by ./x appliance-long"]
fn long_a_power_cut_during_an_install_leaves_the_old_slot() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let v2 = bundle("0.2.0");
    let disk = Disk::flash(dir.path());
    let mut b = Board::boot(&disk, dir.path());
    rt.block_on(wait_health(&b, Duration::from_secs(180)));
    let admin = own_password(&mut b, &rt);
    let (verdict, _) = rt.block_on(admin.upload(&v2));
    assert_eq!(verdict["accepted"], true, "{verdict}");
    rt.block_on(admin.expect(
        admin.request(reqwest::Method::POST, "/api/v1/system/update/install"),
        202,
    ));
    let start = Instant::now();
    let progress = loop {
        let s = rt.block_on(admin.get("/api/v1/system/update"));
        // RAUC's last step writes the image into the slot; cut while it does.
        if s["progress"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("Copying image"))
        {
            std::thread::sleep(Duration::from_secs(2));
            break s["progress"].clone();
        }
        assert!(
            start.elapsed() < Duration::from_secs(300) && s["operation"] == "installing",
            "the install runs: {s}"
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    b.power_cut();
    println!("power cut during the install at {progress}");
    let mut b = Board::boot(&disk, dir.path());
    rt.block_on(wait_health(&b, Duration::from_secs(180)));
    on_slot(&mut b, "A", "0.1.0");
    // RAUC takes the slot it writes out of the boot order first: a half-written slot B is
    // never tried.
    assert_eq!(b.sh("fw_printenv -n BOOT_ORDER"), "A", "only slot A boots");
    let admin = admin.on(&b);
    let (verdict, _) = rt.block_on(admin.upload(&v2));
    assert_eq!(verdict["accepted"], true, "{verdict}");
    let installed = rt.block_on(admin.install());
    println!(
        "after the power cut: a new install took {:.0} s",
        installed.as_secs_f64()
    );
    admin_reboot(&mut b, &rt, &admin);
    rt.block_on(wait_health(&b, Duration::from_secs(180)));
    on_slot(&mut b, "B", "0.2.0");
    marked_good(&mut b, "B");
}

/// An update that migrates the data (0.2.0 knows schema 2: `test.schema_version`, a test rig
/// setting), then the board goes back to 0.1.0 on slot A: docent there opens the copy of the
/// data kept before the migration, says so, and serves the data as it was.
#[test]
#[ignore = "boots the simulated board: run by ./x appliance-long"]
fn long_after_a_migration_and_a_fallback_the_old_version_opens_its_copy() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let v2 = bundle("0.2.0-schema2");
    let disk = Disk::flash(dir.path());
    let mut b = Board::boot(&disk, dir.path());
    rt.block_on(wait_health(&b, Duration::from_secs(180)));
    let admin = own_password(&mut b, &rt);
    let create = |admin: &Admin, name: &str| {
        rt.block_on(
            admin.expect(
                admin
                    .request(reqwest::Method::POST, "/api/v1/characters")
                    .json(&json!({ "name": name })),
                201,
            ),
        )
    };
    let names = |admin: &Admin| {
        let all = rt.block_on(admin.get("/api/v1/characters"));
        sorted_names(&all)
    };
    create(&admin, "Made on 0.1.0");
    let before = names(&admin);

    let (verdict, _) = rt.block_on(admin.upload(&v2));
    assert_eq!(verdict["accepted"], true, "{verdict}");
    rt.block_on(admin.install());
    admin_reboot(&mut b, &rt, &admin);
    rt.block_on(wait_health(&b, Duration::from_secs(180)));
    on_slot(&mut b, "B", "0.2.0-schema2");
    assert_eq!(
        b.sh("ls /data/docent-schema-1.redb"),
        "/data/docent-schema-1.redb",
        "the copy kept before the migration"
    );
    let admin = admin.on(&b);
    create(&admin, "Made on 0.2.0");

    // Back to slot A (as after a rollback): 0.1.0 finds schema 2.
    b.sh("rauc status mark-active other");
    admin_reboot(&mut b, &rt, &admin);
    rt.block_on(wait_health(&b, Duration::from_secs(180)));
    on_slot(&mut b, "A", "0.1.0");
    let firmware = rt.block_on(firmware_health(&admin.clone().on(&b), |f| {
        !f["data"].is_null()
    }));
    let said = firmware["data"].as_str().unwrap_or_default();
    assert!(
        said.contains("schema 2") && said.contains("copy"),
        "health says it opened the copy: {firmware}"
    );
    println!("after the fallback, health says: {said}");
    let admin = admin.on(&b);
    assert_eq!(
        names(&admin),
        before,
        "the data as it was before the migration"
    );
}
