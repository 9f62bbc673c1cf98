//! Updates by RAUC bundles: a good and a bad update (installed, rolled back), and refused bundles.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;

use docent_test_support::appliance::{
    admin_reboot, boot_status, bundle, firmware_health, marked_good, on_slot, own_password,
    runtime, visit, wait_health,
};
use docent_test_support::board::{self, Board, Disk};
use docent_test_support::rauc;

/// Updates with rollback, as a museum does them from the console (docent's routes, RAUC on the
/// board, board/rauc, board/systemd): the board runs 0.1.0 on slot A; RAUC answers only root
/// and docent on D-Bus; bundles signed by another key or made for another board are refused
/// at upload, before a byte reaches the other slot; 0.2.0 is uploaded, installed into slot B,
/// rebooted into, marked good, and answers a visitor with the data made on 0.1.0; 0.3.0, whose
/// docent refuses its configuration, is installed into slot A, never serves, and the update
/// gate's deadline rolls it back: the board is on 0.2.0 again and health says why. Prints the
/// times (upload to serving on the new slot, the failed start to serving on the old one).
#[test]
#[ignore = "boots the simulated board: run by ./x appliance"]
fn updates_install_roll_back_and_refuse_foreign_bundles() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let (v2, v3) = (bundle("0.2.0"), bundle("0.3.0"));
    let foreign = foreign_bundles(dir.path());
    let disk = Disk::flash(dir.path());
    let mut b = Board::boot(&disk, dir.path());
    rt.block_on(wait_health(&b, Duration::from_secs(180)));
    let admin = own_password(&mut b, &rt);
    let cid = rt.block_on(admin.character_with_clips_and_knowledge());
    on_slot(&mut b, "A", "0.1.0");
    rauc_answers_only_root_and_docent(&mut b);

    // --- Bundles the board must refuse: nothing reaches slot B, the boot state stays ---
    let untouched = "md5sum < /dev/disk/by-partlabel/rootB; fw_printenv BOOT_ORDER";
    let before = b.sh_within(untouched, Duration::from_secs(300));
    for (what, bundle, says) in foreign {
        let (verdict, _) = rt.block_on(admin.upload(&bundle));
        let reason = verdict["reason"].as_str().unwrap_or_default().to_string();
        assert!(
            verdict["accepted"] == false && reason.contains(says),
            "{what} is refused ({says}): {verdict}"
        );
        rt.block_on(
            admin.expect(
                admin
                    .request(reqwest::Method::POST, "/api/v1/system/update/install")
                    .json(&json!({ "force": true })),
                409,
            ),
        );
        println!("update: {what} refused at upload: {reason}");
    }
    assert_eq!(
        b.sh_within(untouched, Duration::from_secs(300)),
        before,
        "nothing was written to slot B and the boot state is unchanged"
    );

    // --- The good update: 0.2.0 into slot B ---
    let (verdict, uploaded) = rt.block_on(admin.upload(&v2));
    assert_eq!(verdict["accepted"], true, "{verdict}");
    assert_eq!(
        (&verdict["version"], &verdict["current_version"]),
        (&json!("0.2.0"), &json!("0.1.0"))
    );
    let installed = rt.block_on(admin.install());
    assert_eq!(
        b.sh("fw_printenv -n BOOT_ORDER"),
        "B A",
        "slot B boots next"
    );
    let rebooted = Instant::now();
    admin_reboot(&mut b, &rt, &admin);
    let serving = rt.block_on(wait_health(&b, Duration::from_secs(180)));
    println!(
        "update 0.1.0 -> 0.2.0 ({} MiB bundle): upload and check {:.0} s, install {:.0} s, \
         reboot to serving {:.0} s; upload to serving on slot B {:.0} s",
        std::fs::metadata(&v2).unwrap().len() >> 20,
        uploaded.as_secs_f64(),
        installed.as_secs_f64(),
        (serving - rebooted).as_secs_f64(),
        (uploaded + installed + (serving - rebooted)).as_secs_f64()
    );
    on_slot(&mut b, "B", "0.2.0");
    marked_good(&mut b, "B");
    let firmware = rt.block_on(firmware_health(&admin.clone().on(&b), |f| {
        !f["update"].is_null()
    }));
    assert_eq!(
        (&firmware["version"], &firmware["update"]),
        (&json!("0.2.0"), &json!("updated from 0.1.0 to 0.2.0")),
        "{firmware}"
    );
    let admin = admin.on(&b);
    rt.block_on(admin.get(&format!("/api/v1/characters/{cid}")));
    visit(&mut b, &rt, &admin, dir.path());

    // --- The bad update: 0.3.0 into slot A; its docent never starts; the gate rolls back ---
    let (verdict, _) = rt.block_on(admin.upload(&v3));
    assert_eq!(verdict["accepted"], true, "{verdict}");
    rt.block_on(admin.install());
    assert_eq!(
        b.sh("fw_printenv -n BOOT_ORDER"),
        "A B",
        "slot A boots next"
    );
    let mark = b.mark();
    rt.block_on(admin.expect(
        admin.request(reqwest::Method::POST, "/api/v1/system/reboot"),
        202,
    ));
    let on_a = b.wait_for("docent boot: slot A", mark, Duration::from_secs(120));
    let gate = b.wait_for(
        "update gate: 0.2.0 -> 0.3.0 on slot A",
        on_a,
        Duration::from_secs(300),
    );
    let failed = Instant::now();
    let rolling = b.wait_for(
        "update gate: rolling back 0.3.0",
        gate,
        Duration::from_secs(300),
    );
    let decided = failed.elapsed();
    let back = b.wait_for("docent boot: slot B", rolling, Duration::from_secs(120));
    b.wait_ready(back);
    let serving = rt.block_on(wait_health(&b, Duration::from_secs(180)));
    on_slot(&mut b, "B", "0.2.0");
    assert_eq!(boot_status(&mut b, "A"), "bad", "slot A is marked bad");
    let firmware = rt.block_on(firmware_health(&admin.clone().on(&b), |f| {
        !f["update"].is_null()
    }));
    println!(
        "update 0.2.0 -> 0.3.0 (docent refuses its configuration): the gate rolled back {:.0} s \
         after it started; serving on 0.2.0 again {:.0} s after that; health: {firmware}",
        decided.as_secs_f64(),
        (serving - failed - decided).as_secs_f64()
    );
    let said = firmware["update"].as_str().unwrap_or_default();
    assert!(
        said.starts_with("0.3.0 failed its start check (docent failed to start")
            && said.contains("teleported")
            && said.ends_with("and was rolled back; running 0.2.0"),
        "health says why, in docent's own words: {firmware}"
    );
    assert_eq!(firmware["version"], "0.2.0");
    rt.block_on(admin.on(&b).get(&format!("/api/v1/characters/{cid}")));
}

/// RAUC's D-Bus service answers the user docent and refuses another user (board/rauc/
/// docent-rauc.conf).
fn rauc_answers_only_root_and_docent(b: &mut Board) {
    let call = |user: &str| {
        format!(
            "su -s /bin/sh {user} -c 'id -gn; busctl --timeout=30 call de.pengutronix.rauc / \
             de.pengutronix.rauc.Installer GetPrimary' 2>&1"
        )
    };
    let docent = b.sh_within(&call("docent"), Duration::from_secs(120));
    assert_eq!(docent, "docent\ns \"rootfs.0\"", "docent may call RAUC");
    let nobody = b.sh_within(&call("nobody"), Duration::from_secs(120));
    assert!(
        nobody.contains("Access denied"),
        "another user may not: {nobody}"
    );
}

/// Bundles this board must refuse, made here with the host's rauc around a small image:
/// one signed by another CA (another museum's key), one for another board (docent-rpi4) signed
/// under the board's own CA. Each with what RAUC's refusal says.
fn foreign_bundles(dir: &Path) -> Vec<(&'static str, std::path::PathBuf, &'static str)> {
    let run = |cmd: &mut Command| {
        let out = cmd.output().expect("the host tool runs (./x installs it)");
        assert!(
            out.status.success(),
            "{cmd:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let other = dir.join("other-ca");
    std::fs::create_dir_all(&other).unwrap();
    run(Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args([
            "-nodes",
            "-days",
            "30",
            "-subj",
            "/O=another museum/CN=another museum",
        ])
        .arg("-keyout")
        .arg(other.join("key.pem"))
        .arg("-out")
        .arg(other.join("cert.pem")));
    let ca = board::sim_home().join("rauc-ca");
    let mut made = Vec::new();
    for (what, compatible, key, cert, says) in [
        (
            "a bundle signed by another key",
            "docent-qemu-aarch64",
            other.join("key.pem"),
            other.join("cert.pem"),
            "RAUC refused it",
        ),
        (
            "a bundle for another board",
            "docent-rpi4",
            ca.join("signing.key.pem"),
            ca.join("signing.cert.pem"),
            "this update is for docent-rpi4; this kiosk is docent-qemu-aarch64",
        ),
    ] {
        let content = dir.join(format!("content-{compatible}-{}", made.len()));
        std::fs::create_dir_all(&content).unwrap();
        // 1 MiB that does not compress (RAUC wants a payload above one block).
        std::fs::write(content.join("rootfs.ext4"), rauc::noise(1 << 20)).unwrap();
        std::fs::write(
            content.join("manifest.raucm"),
            format!(
                "[update]\ncompatible={compatible}\nversion=9.9.9\n\n[bundle]\nformat=verity\n\n\
                 [image.rootfs]\nfilename=rootfs.ext4\n"
            ),
        )
        .unwrap();
        let out = dir.join(format!("foreign-{}.raucb", made.len()));
        run(Command::new("rauc")
            .arg("bundle")
            .arg(format!("--cert={}", cert.display()))
            .arg(format!("--key={}", key.display()))
            .arg(&content)
            .arg(&out));
        made.push((what, out, says));
    }
    made
}
