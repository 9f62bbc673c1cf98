//! The fleet client against a fake hawkBit server over real sockets (support/fake_hawkbit.rs):
//! deployments reported as a success only once the new slot was marked good, a bad hash, a
//! cancel, a download cut midway and resumed, a rollback reported as a failure, the polling
//! interval, configData and installedBase, content bundles applied and refused, and no secret
//! in any log. The update service is a test `Firmware` that records its calls and writes the
//! files of the update contract (`update/pending.json`, support/fleet_kiosk.rs; the test writes
//! `update/outcome.json` as the health gate would after the reboot, then starts docent again).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use ring::signature::KeyPair as _;
use serde_json::{Value, json};
use sha2::Digest as _;

use docent::engine::hours::LocalTime;

use crate::support::clock::SimClock;
use crate::support::disk::{Tmpfs, fill, watch_free_space};
use crate::support::fake_hawkbit::{CONTROLLER, FakeHawkbit, TENANT};
use crate::support::fleet_kiosk::{Kiosk, TestFirmware, bundle, hex, now, token, wait_until};

/// `installed_at` of the update recorded before the reboot, which the health gate's outcome
/// carries (src/engine/update, board/rauc/update-gate.sh).
fn installed_at(data_dir: &Path) -> u64 {
    let pending = std::fs::read(data_dir.join("update/pending.json")).unwrap();
    serde_json::from_slice::<Value>(&pending).unwrap()["installed_at"]
        .as_u64()
        .unwrap()
}

/// Nothing that docent logged, showed or stored in clear outside its settings holds `secret`.
/// Pauses or resumes the fleet client as the console does.
async fn pause(kiosk: &Kiosk, paused: bool) {
    let res = kiosk
        .http
        .post(kiosk.url("/api/v1/fleet/pause"))
        .json(&json!({ "paused": paused }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
}

async fn assert_secret_kept(kiosk: &Kiosk, secret: &str) {
    for line in docent::logs::recent(docent::logs::LINES) {
        assert!(
            !line.contains(secret),
            "a log line holds the secret: {line}"
        );
    }
    for path in ["/api/v1/fleet", "/api/v1/settings", "/api/v1/system/logs"] {
        let res = kiosk.http.get(kiosk.url(path)).send().await.unwrap();
        let text = res.text().await.unwrap();
        assert!(!text.contains(secret), "{path} shows the secret");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deployment_is_a_success_only_once_the_new_slot_was_marked_good() {
    let dir = tempfile::tempdir().unwrap();
    let secret = token("success");
    let fake = FakeHawkbit::start(&secret, "00:00:01").await;
    let artifact = bundle("0.2.0", 300_000);
    let sha = hex(&sha2::Sha256::digest(&artifact));
    fake.with(|s| s.config_data_requested = true);
    fake.offer_os("8", "0.2.0", artifact);
    let firmware = TestFirmware::new(dir.path(), "0.1.0", "A");
    let kiosk = Kiosk::start(dir.path(), firmware.clone()).await;
    kiosk.join_fleet(&fake, json!({})).await;

    wait_until("the reboot", 30, || {
        firmware.calls().contains(&"reboot".into())
    })
    .await;
    assert_eq!(
        firmware.calls(),
        vec![format!("check {sha}"), "install".into(), "reboot".into()],
        "the downloaded bundle is checked, installed, then the kiosk reboots"
    );
    let before = fake.feedback_of("8");
    assert!(
        before.iter().all(|(s, _)| s.starts_with("proceeding/")),
        "nothing but proceeding before the reboot: {before:?}"
    );
    let progress: Vec<Value> = fake.with(|s| {
        s.feedback
            .iter()
            .map(|(_, f, _)| f["status"]["result"]["progress"].clone())
            .filter(|p| !p.is_null())
            .collect()
    });
    assert_eq!(
        progress,
        vec![json!({"cnt": 60, "of": 100})],
        "the install's progress"
    );
    assert!(
        before.iter().any(|(_, d)| d.contains("installed")),
        "{before:?}"
    );
    // configData: what the kiosk runs.
    let config = fake.with(|s| s.config_data.clone());
    assert_eq!(config.len(), 1, "{config:?}");
    assert_eq!(config[0]["mode"], "merge");
    assert_eq!(config[0]["data"]["firmware_version"], "0.1.0");
    assert_eq!(config[0]["data"]["booted_slot"], "A");
    assert_eq!(config[0]["data"]["compatible"], "docent-test");
    assert_eq!(config[0]["data"]["content_version"], "none");
    assert_eq!(config[0]["data"]["characters"], "1");
    // Every request carried the token; the token is shown nowhere.
    let auth = format!("TargetToken {secret}");
    let seen = fake.with(|s| s.seen.clone());
    assert!(
        seen.iter()
            .all(|r| r.status == 200 && r.authorization.as_deref() == Some(auth.as_str()))
    );
    let calls: Vec<String> = seen
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    for call in [
        "GET /DEFAULT/controller/v1/kiosk-1",
        "PUT /DEFAULT/controller/v1/kiosk-1/configData",
        "GET /DEFAULT/controller/v1/kiosk-1/deploymentBase/8",
        "POST /DEFAULT/controller/v1/kiosk-1/deploymentBase/8/feedback",
        "GET /DEFAULT/controller/v1/kiosk-1/softwaremodules/7/artifacts/docent-0.2.0.raucb",
    ] {
        assert!(calls.contains(&call.to_string()), "{call} in {calls:?}");
    }
    let status = kiosk.get("/api/v1/fleet").await;
    assert_eq!(status["controller_id"], CONTROLLER);
    assert_eq!(status["action"]["id"], "8");
    assert!(
        status["reported"].as_array().unwrap().len() >= 3,
        "{status}"
    );
    let settings = kiosk.get("/api/v1/settings").await;
    assert_eq!(settings["fleet"]["target_token_set"], true);
    assert_secret_kept(&kiosk, &secret).await;
    kiosk.stop().await;
    // Still nothing reported closed: the install alone is no success.
    assert_eq!(fake.closed("8"), None);

    // The reboot: the new slot passed its start check, the health gate wrote the outcome.
    let update = dir.path().join("update");
    let installed = installed_at(dir.path());
    std::fs::remove_file(update.join("pending.json")).unwrap();
    let outcome = json!({"result": "updated", "from": "0.1.0", "to": "0.2.0", "reason": null, "at": now(), "installed_at": installed});
    std::fs::write(update.join("outcome.json"), outcome.to_string()).unwrap();
    let firmware = TestFirmware::new(dir.path(), "0.2.0", "B");
    let kiosk = Kiosk::start(dir.path(), firmware.clone()).await;
    wait_until("the success", 20, || fake.closed("8").is_some()).await;
    let (status, details) = fake.closed("8").unwrap();
    assert_eq!(status, "closed/success", "{details}");
    assert!(details.contains("marked good"), "{details}");
    assert!(firmware.calls().is_empty(), "nothing installed again");
    // The success was this action's, not an update installed from the console.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(fake.with(|s| s.installed_base.is_empty()));
    assert_secret_kept(&kiosk, &secret).await;
    kiosk.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rollback_is_reported_as_a_failure_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let secret = token("rollback");
    let fake = FakeHawkbit::start(&secret, "00:00:01").await;
    fake.offer(
        "11",
        "os",
        "0.3.0",
        "b.raucb",
        bundle("0.3.0", 1000),
        json!({"update": "attempt"}),
    );
    let firmware = TestFirmware::new(dir.path(), "0.2.0", "A");
    let kiosk = Kiosk::start(dir.path(), firmware.clone()).await;
    // A visitor is talking: `attempt` waits for the end of the conversation to reboot.
    let res = kiosk
        .http
        .post(kiosk.url("/api/v1/sessions"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let session = res.json::<Value>().await.unwrap()["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    kiosk.join_fleet(&fake, json!({})).await;
    wait_until("the install", 30, || {
        firmware.calls().contains(&"install".into())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(
        !firmware.calls().contains(&"reboot".into()),
        "not during a visit"
    );
    let res = kiosk
        .http
        .delete(kiosk.url(&format!("/api/v1/sessions/{session}")))
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success());
    wait_until("the reboot", 30, || {
        firmware.calls().contains(&"reboot".into())
    })
    .await;
    // Too late to cancel: the bundle is installed, its result follows the reboot.
    fake.with(|s| {
        s.cancel = Some(("13".into(), "11".into()));
        s.generation += 1;
    });
    wait_until("the cancel's answer", 20, || {
        fake.with(|s| !s.cancel_feedback.is_empty())
    })
    .await;
    let (id, answer) = fake.with(|s| s.cancel_feedback[0].clone());
    assert_eq!(id, "13");
    assert_eq!(answer["status"]["execution"], "rejected");
    kiosk.stop().await;
    let outcome = json!({"result": "rolled_back", "from": "0.2.0", "to": "0.3.0", "reason": "the store did not open", "at": now(), "installed_at": installed_at(dir.path())});
    std::fs::write(dir.path().join("update/outcome.json"), outcome.to_string()).unwrap();
    let kiosk = Kiosk::start(dir.path(), TestFirmware::new(dir.path(), "0.2.0", "A")).await;
    wait_until("the failure", 20, || fake.closed("11").is_some()).await;
    let (status, details) = fake.closed("11").unwrap();
    assert_eq!(status, "closed/failure");
    assert!(
        details.contains("rolled back") && details.contains("the store did not open"),
        "{details}"
    );
    assert_secret_kept(&kiosk, &secret).await;
    kiosk.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_hash_is_a_failure_and_nothing_is_installed() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeHawkbit::start(&token("hash"), "00:00:01").await;
    fake.offer(
        "3",
        "os",
        "0.2.0",
        "b.raucb",
        bundle("0.2.0", 5000),
        json!({}),
    );
    fake.announce_wrong_sha256();
    let firmware = TestFirmware::new(dir.path(), "0.1.0", "A");
    let kiosk = Kiosk::start(dir.path(), firmware.clone()).await;
    kiosk.join_fleet(&fake, json!({})).await;
    wait_until("the failure", 20, || fake.closed("3").is_some()).await;
    let (status, details) = fake.closed("3").unwrap();
    assert_eq!(status, "closed/failure");
    assert!(details.contains("sha256 mismatch"), "{details}");
    assert!(firmware.calls().is_empty(), "{:?}", firmware.calls());
    assert!(!dir.path().join("fleet/download/artifact").exists());
    kiosk.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_bundle_is_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeHawkbit::start(&token("refused"), "00:00:01").await;
    fake.offer(
        "4",
        "os",
        "0.2.0",
        "b.raucb",
        b"not a bundle".to_vec(),
        json!({}),
    );
    let firmware = TestFirmware::new(dir.path(), "0.1.0", "A");
    let kiosk = Kiosk::start(dir.path(), firmware.clone()).await;
    kiosk.join_fleet(&fake, json!({})).await;
    wait_until("the failure", 20, || fake.closed("4").is_some()).await;
    let (status, details) = fake.closed("4").unwrap();
    assert_eq!(status, "closed/failure");
    assert!(details.contains("signature not trusted"), "{details}");
    assert_eq!(firmware.calls().len(), 1, "checked, never installed");
    kiosk.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancel_before_the_install_stops_the_deployment() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeHawkbit::start(&token("cancel"), "00:00:01").await;
    // Outside the maintenance window: downloaded, then it waits.
    fake.offer(
        "5",
        "os",
        "0.2.0",
        "b.raucb",
        bundle("0.2.0", 5000),
        json!({"maintenanceWindow": "unavailable"}),
    );
    let firmware = TestFirmware::new(dir.path(), "0.1.0", "A");
    let kiosk = Kiosk::start(dir.path(), firmware.clone()).await;
    kiosk.join_fleet(&fake, json!({})).await;
    let artifact = dir.path().join("fleet/download/artifact");
    wait_until("the download", 20, || artifact.exists()).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let status = kiosk.get("/api/v1/fleet").await;
    assert_eq!(
        status["action"]["stage"], "waiting for the maintenance window",
        "{status}"
    );
    fake.with(|s| {
        s.cancel = Some(("6".into(), "5".into()));
        s.generation += 1;
    });
    wait_until("the cancel feedback", 20, || {
        fake.with(|s| !s.cancel_feedback.is_empty())
    })
    .await;
    let (id, body) = fake.with(|s| s.cancel_feedback[0].clone());
    assert_eq!(id, "6");
    assert_eq!(body["status"]["execution"], "canceled");
    assert_eq!(body["status"]["result"]["finished"], "success");
    assert!(
        firmware.calls().is_empty(),
        "never installed: {:?}",
        firmware.calls()
    );
    assert!(!artifact.exists(), "the download is discarded");
    assert_eq!(kiosk.get("/api/v1/fleet").await["action"], Value::Null);
    kiosk.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_download_cut_by_a_server_that_goes_away_resumes_with_range() {
    let dir = tempfile::tempdir().unwrap();
    let mut fake = FakeHawkbit::start(&token("resume"), "00:00:01").await;
    let artifact = bundle("0.2.0", 3 << 20);
    let sha = hex(&sha2::Sha256::digest(&artifact));
    let len = artifact.len();
    fake.offer("9", "os", "0.2.0", "b.raucb", artifact, json!({}));
    fake.with(|s| s.stall_after = Some(1 << 20));
    let firmware = TestFirmware::new(dir.path(), "0.1.0", "A");
    let kiosk = Kiosk::start(dir.path(), firmware.clone()).await;
    kiosk.join_fleet(&fake, json!({})).await;
    let partial = dir.path().join("fleet/download/artifact");
    wait_until("the first megabyte", 20, || {
        std::fs::metadata(&partial).is_ok_and(|m| m.len() == 1 << 20)
    })
    .await;
    fake.stop().await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let status = kiosk.get("/api/v1/fleet").await;
    assert!(
        status["last_error"].is_string(),
        "the server is away: {status}"
    );
    fake.restart().await;
    wait_until("the reboot", 30, || {
        firmware.calls().contains(&"reboot".into())
    })
    .await;
    assert_eq!(
        firmware.calls()[0],
        format!("check {sha}"),
        "the whole bundle, intact"
    );
    let ranges: Vec<Option<String>> = fake.with(|s| {
        s.seen
            .iter()
            .filter(|r| r.path.contains("/artifacts/"))
            .map(|r| r.range.clone())
            .collect()
    });
    assert_eq!(ranges[0], None, "{ranges:?}");
    assert_eq!(
        ranges.last().unwrap().as_deref(),
        Some("bytes=1048576-"),
        "{ranges:?}"
    );
    assert_eq!(fake.with(|s| s.cut_at), Some(1 << 20));
    assert!(len > 1 << 20);
    kiosk.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_dripped_a_byte_a_second_is_bounded_as_a_whole_and_a_pause_interrupts_it() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeHawkbit::start(&token("drip"), "00:00:01").await;
    // The root resource (about 100 bytes) at one byte a second: every read is quick, the whole
    // is not. The kiosk's `request_timeout_secs` is 3.
    fake.with(|s| s.drip_root = true);
    let kiosk = Kiosk::start(dir.path(), TestFirmware::new(dir.path(), "0.1.0", "A")).await;
    kiosk.join_fleet(&fake, json!({})).await;
    wait_until("the first poll", 10, || fake.with(|s| !s.seen.is_empty())).await;
    let asked = fake.with(|s| s.seen[0].at);
    wait_until("the poll given up", 8, || {
        fake.with(|s| !s.drips_dropped.is_empty())
    })
    .await;
    let given_up = fake.with(|s| s.drips_dropped[0]) - asked;
    assert!(given_up < Duration::from_secs(5), "{given_up:?}");
    let mut status = kiosk.get("/api/v1/fleet").await;
    for _ in 0..20 {
        if status["last_error"].is_string() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        status = kiosk.get("/api/v1/fleet").await;
    }
    assert!(
        status["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("in time")),
        "{status}"
    );

    // A download (1 MiB announced: a bound of 3 s plus 16 s at 64 KiB/s) dripped: a pause
    // ends it at once.
    fake.offer(
        "30",
        "os",
        "0.2.0",
        "b.raucb",
        bundle("0.2.0", 1 << 20),
        json!({}),
    );
    fake.with(|s| {
        s.drip_root = false;
        s.drip_artifact = true;
        s.drips_dropped.clear();
    });
    // Without an answer the kiosk waits hawkBit's default five minutes: settings wake it.
    kiosk.join_fleet(&fake, json!({})).await;
    let downloads = || {
        fake.with(|s| {
            s.seen
                .iter()
                .filter(|r| r.path.contains("/artifacts/"))
                .map(|r| r.at)
                .collect::<Vec<_>>()
        })
    };
    wait_until("the download", 15, || !downloads().is_empty()).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(fake.with(|s| s.drips_dropped.is_empty()), "still dripping");
    pause(&kiosk, true).await;
    let paused = std::time::Instant::now();
    wait_until("the download ended by the pause", 5, || {
        fake.with(|s| !s.drips_dropped.is_empty())
    })
    .await;
    let ended = fake.with(|s| s.drips_dropped[0]) - paused;
    assert!(ended < Duration::from_secs(4), "{ended:?}");
    let count = fake.with(|s| s.seen.len());
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(fake.with(|s| s.seen.len()), count, "paused");

    // Announced as 1,000 bytes: the download's bound is 4 s (3 s, and a second for the bytes at
    // 64 KiB/s), whatever trickles after.
    fake.declare_size(1000);
    fake.with(|s| s.drips_dropped.clear());
    let before = downloads().len();
    pause(&kiosk, false).await;
    wait_until("the download again", 10, || downloads().len() > before).await;
    let started = downloads()[before];
    wait_until("the download given up", 10, || {
        fake.with(|s| !s.drips_dropped.is_empty())
    })
    .await;
    let lasted = fake.with(|s| s.drips_dropped[0]) - started;
    assert!(lasted < Duration::from_secs(6), "{lasted:?}");
    kiosk.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_servers_text_never_forges_a_line_of_the_log() {
    const FORGED: &str = "2026-01-01T00:00:00Z  INFO docent: slot marked good";
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeHawkbit::start(&token("forge"), "00:00:01").await;
    // A JSON enum value the kiosk does not know: quoted in the warning about the answer.
    fake.offer(
        "40",
        "os",
        "0.2.0",
        "b.raucb",
        bundle("0.2.0", 1000),
        json!({"download": format!("forced\n{FORGED}")}),
    );
    let firmware = TestFirmware::new(dir.path(), "0.1.0", "A");
    let kiosk = Kiosk::start(dir.path(), firmware.clone()).await;
    kiosk.join_fleet(&fake, json!({})).await;
    wait_until("the deployment read", 10, || {
        fake.with(|s| s.seen.iter().any(|r| r.path.contains("deploymentBase/40")))
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    // A sha256 that is no hash: quoted in the failure.
    fake.offer(
        "41",
        "os",
        "0.2.0",
        "b.raucb",
        bundle("0.2.0", 1000),
        json!({}),
    );
    fake.with(|s| {
        let (_, d) = s.deployment.as_mut().unwrap();
        d["chunks"][0]["artifacts"][0]["hashes"]["sha256"] =
            json!(format!("{}\n{FORGED}", "00".repeat(32)));
        s.generation += 1;
    });
    wait_until("the failure", 20, || fake.closed("41").is_some()).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let lines = docent::logs::recent(docent::logs::LINES);
    for line in &lines {
        assert!(!line.starts_with("2026-01-01"), "a forged line: {line}");
    }
    let quoted: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("slot marked good"))
        .collect();
    assert!(
        quoted.iter().any(|l| l.contains("unknown variant"))
            && quoted.iter().any(|l| l.contains("sha256 mismatch")),
        "both are logged, escaped: {quoted:?}"
    );
    assert!(firmware.calls().is_empty());
    kiosk.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_download_past_the_data_reserve_is_refused_midway_and_removed() {
    let Some(fs) = Tmpfs::mount(64) else {
        return;
    };
    let root = fs.path.clone();
    let fake = FakeHawkbit::start(&token("reserve"), "00:00:01").await;
    // Announced as 1,024 bytes, 24 MiB sent.
    fake.offer(
        "50",
        "os",
        "0.2.0",
        "b.raucb",
        bundle("0.2.0", 24 << 20),
        json!({}),
    );
    fake.declare_size(1024);
    let firmware = TestFirmware::new(&root, "0.1.0", "A");
    let kiosk = Kiosk::start(&root, firmware.clone()).await;
    // The default reserve is 8 MiB: 6 MiB more are free, far more than the announced size.
    let reserve: u64 = 8 << 20;
    fill(&root, reserve + (6 << 20));
    // The least free space seen while the kiosk works.
    let (done, watcher) = watch_free_space(&root);
    kiosk.join_fleet(&fake, json!({})).await;
    wait_until("the refusal", 30, || fake.closed("50").is_some()).await;
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let least = watcher.join().unwrap();
    assert!(
        least >= reserve,
        "the download went into the reserve: {least} bytes were left"
    );
    let (status, details) = fake.closed("50").unwrap();
    assert_eq!(status, "closed/failure");
    assert!(details.contains("no room"), "{details}");
    assert!(
        !root.join("fleet/download/artifact").exists(),
        "the partial file is removed"
    );
    let free = docent::store::free_bytes(&root).unwrap();
    assert!(free > reserve + (5 << 20), "{free}");
    assert!(firmware.calls().is_empty());
    kiosk.stop().await;
    drop(fs);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_servers_polling_interval_is_obeyed_with_etags() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeHawkbit::start(&token("poll"), "00:00:02").await;
    let kiosk = Kiosk::start(dir.path(), TestFirmware::new(dir.path(), "0.1.0", "A")).await;
    // Off by default: nothing is polled.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(fake.with(|s| s.seen.is_empty()));
    kiosk.join_fleet(&fake, json!({})).await;
    tokio::time::sleep(Duration::from_millis(9_000)).await;
    let polls: Vec<_> = fake.with(|s| s.seen.clone());
    assert!(
        (3..=6).contains(&polls.len()),
        "{} polls in 9 s at 2 s",
        polls.len()
    );
    for pair in polls.windows(2) {
        let gap = pair[1].at - pair[0].at;
        assert!(
            gap >= Duration::from_millis(1_900) && gap < Duration::from_millis(4_000),
            "{gap:?}"
        );
    }
    assert_eq!(polls[0].if_none_match, None);
    assert!(
        polls[1..]
            .iter()
            .all(|p| p.if_none_match.as_deref() == Some("\"0\""))
    );
    let status = kiosk.get("/api/v1/fleet").await;
    assert_eq!(status["interval_secs"], 2);
    assert!(status["last_poll"].is_u64());
    // Paused: no more polls until resumed.
    pause(&kiosk, true).await;
    let count = fake.with(|s| s.seen.len());
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(fake.with(|s| s.seen.len()), count, "paused");
    assert_eq!(kiosk.get("/api/v1/fleet").await["paused"], true);
    // A server asking for no pause at all is polled no faster than the kiosk's bound (1 s here).
    fake.with(|s| {
        s.sleep = "00:00:00".into();
        s.generation += 1;
    });
    pause(&kiosk, false).await;
    let from = fake.with(|s| s.seen.len());
    tokio::time::sleep(Duration::from_millis(4_500)).await;
    let fast: Vec<_> = fake.with(|s| s.seen[from..].to_vec());
    assert!(
        (3..=6).contains(&fast.len()),
        "{} polls in 4.5 s",
        fast.len()
    );
    for pair in fast.windows(2).skip(1) {
        assert!(pair[1].at - pair[0].at >= Duration::from_millis(900));
    }
    assert_eq!(kiosk.get("/api/v1/fleet").await["interval_secs"], 1);
    kiosk.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_update_installed_from_the_console_is_reported_as_installed_base() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeHawkbit::start(&token("installed"), "00:00:01").await;
    std::fs::create_dir_all(dir.path().join("update")).unwrap();
    let outcome = json!({"result": "updated", "from": "0.1.0", "to": "0.2.0", "reason": null, "at": now(), "installed_at": now()});
    std::fs::write(dir.path().join("update/outcome.json"), outcome.to_string()).unwrap();
    let kiosk = Kiosk::start(dir.path(), TestFirmware::new(dir.path(), "0.2.0", "B")).await;
    kiosk
        .join_fleet(&fake, json!({"distribution": "docent-rpi4"}))
        .await;
    wait_until("installedBase", 20, || {
        fake.with(|s| !s.installed_base.is_empty())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        fake.with(|s| s.installed_base.clone()),
        vec![json!({"name": "docent-rpi4", "version": "0.2.0"})],
        "once"
    );
    kiosk.stop().await;
}

/// A plain `http://` server sends the target token in clear: refused unless the administrator
/// says `allow_insecure_http = true` beside the address (issue 34, finding 7); with it, the
/// client works, and a new address needs the allowance again, as it needs the token again.
#[tokio::test(flavor = "multi_thread")]
async fn a_plain_http_server_needs_an_explicit_allowance() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeHawkbit::start(&token("plain"), "00:00:01").await;
    let kiosk = Kiosk::start(dir.path(), TestFirmware::new(dir.path(), "0.1.0", "A")).await;
    let put = |patch: Value| {
        let req = kiosk.http.put(kiosk.url("/api/v1/settings")).json(&patch);
        async move {
            let res = req.send().await.unwrap();
            (res.status().as_u16(), res.text().await.unwrap())
        }
    };
    let plain = json!({"fleet": {"enabled": true, "server_url": fake.url(), "tenant": TENANT,
        "controller_id": CONTROLLER, "target_token": fake.token}});
    let (status, text) = put(plain.clone()).await;
    assert_eq!(status, 400, "{text}");
    assert!(
        text.contains("allow_insecure_http") && text.contains("in clear"),
        "{text}"
    );
    assert_eq!(
        kiosk.get("/api/v1/settings").await["fleet"]["enabled"],
        false
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(fake.with(|s| s.seen.is_empty()), "nothing was asked");

    let mut allowed = plain;
    allowed["fleet"]["allow_insecure_http"] = json!(true);
    let (status, text) = put(allowed).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(
        kiosk.get("/api/v1/settings").await["fleet"]["allow_insecure_http"],
        true
    );
    wait_until("a poll", 20, || fake.with(|s| !s.seen.is_empty())).await;
    let (status, text) = put(json!({"fleet": {"server_url": "http://10.0.0.9:8080",
        "target_token": "tt-another-server-123456"}}))
    .await;
    assert_eq!(
        status, 400,
        "a new address needs the allowance again: {text}"
    );
    let (status, text) = put(json!({"fleet": {"server_url": "https://fleet.example:8443",
        "target_token": "tt-another-server-123456"}}))
    .await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(
        kiosk.get("/api/v1/settings").await["fleet"]["allow_insecure_http"],
        false,
        "the allowance stays with the address it was given for"
    );
    kiosk.stop().await;
}

/// A fleet key pair as base64: its 32-byte private key and its public key.
fn fleet_key(seed: u8) -> (String, String) {
    let seed = [seed; 32];
    let pair = ring::signature::Ed25519KeyPair::from_seed_unchecked(&seed).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD;
    (b64.encode(seed), b64.encode(pair.public_key().as_ref()))
}

/// Kiosk A's content, exported as a bundle signed with `seed`.
async fn exported_content(seed: u8) -> Vec<u8> {
    exported(seed, "2026.11-1", "Ada Lovelace").await
}

/// A kiosk's content with one character, `name`, exported as `version` signed with `seed`.
async fn exported(seed: u8, version: &str, name: &str) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let kiosk = Kiosk::start(dir.path(), TestFirmware::new(dir.path(), "0.1.0", "A")).await;
    let res = kiosk
        .http
        .post(kiosk.url("/api/v1/characters"))
        .json(&json!({ "name": name }))
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success(), "{}", res.status());
    kiosk
        .put_settings(
            json!({"llm": {"base_url": "http://10.0.0.2/v1", "api_key": "sk-of-kiosk-a-123456"}}),
        )
        .await;
    let (key, _) = fleet_key(seed);
    let res = kiosk
        .http
        .post(kiosk.url("/api/v1/fleet/content/export"))
        .json(&json!({"version": version, "signing_key": key}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let bytes = res.bytes().await.unwrap().to_vec();
    let text = String::from_utf8_lossy(&bytes);
    assert!(!text.contains("sk-of-kiosk-a-123456"), "no secret travels");
    kiosk.stop().await;
    bytes
}

async fn has(kiosk: &Kiosk, name: &str) -> bool {
    character_names(kiosk).await.iter().any(|n| n == name)
}

async fn character_names(kiosk: &Kiosk) -> Vec<String> {
    let list = kiosk.get("/api/v1/characters").await;
    let items = list
        .as_array()
        .cloned()
        .or_else(|| list["characters"].as_array().cloned());
    items
        .unwrap_or_default()
        .iter()
        .map(|c| c["name"].as_str().unwrap_or("").to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn content_bundles_apply_with_the_kiosks_own_kept_and_are_refused_unsigned() {
    let bundle = exported_content(7).await;
    let forged = exported_content(8).await;
    let (_, public) = fleet_key(7);

    let dir = tempfile::tempdir().unwrap();
    let secret = token("content");
    let fake = FakeHawkbit::start(&secret, "00:00:01").await;
    let kiosk = Kiosk::start(dir.path(), TestFirmware::new(dir.path(), "0.1.0", "A")).await;
    kiosk
        .put_settings(json!({"llm": {"base_url": "http://10.0.0.2/v1", "api_key": "sk-of-kiosk-b-654321"}, "kiosk": {"volume": 33}}))
        .await;
    let res = kiosk
        .http
        .post(kiosk.url("/api/v1/client-keys"))
        .json(&json!({"name": "hall screen"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);

    // A bundle signed with another key: refused, nothing changes.
    fake.offer(
        "20",
        "docent-content",
        "2026.11-1",
        "content.tar",
        forged,
        json!({}),
    );
    kiosk
        .join_fleet(&fake, json!({"content_public_key": public}))
        .await;
    wait_until("the refusal", 20, || fake.closed("20").is_some()).await;
    let (status, details) = fake.closed("20").unwrap();
    assert_eq!(status, "closed/failure");
    assert!(
        details.contains("not signed with the fleet's key"),
        "{details}"
    );
    assert!(
        !character_names(&kiosk)
            .await
            .contains(&"Ada Lovelace".to_string())
    );

    // The fleet's own bundle: applied at the restart, reported once applied.
    fake.offer(
        "21",
        "docent-content",
        "2026.11-1",
        "content.tar",
        bundle,
        json!({}),
    );
    wait_until("the content", 40, || fake.closed("21").is_some()).await;
    let (status, details) = fake.closed("21").unwrap();
    assert_eq!(status, "closed/success", "{details}");
    assert!(
        character_names(&kiosk)
            .await
            .contains(&"Ada Lovelace".to_string())
    );
    let settings = kiosk.get("/api/v1/settings").await;
    assert_eq!(
        settings["llm"]["api_key_set"], true,
        "this kiosk's key is kept"
    );
    assert_eq!(settings["kiosk"]["volume"], 33, "a local setting is kept");
    assert_eq!(settings["fleet"]["enabled"], true);
    assert_eq!(settings["fleet"]["target_token_set"], true);
    let keys = kiosk.get("/api/v1/client-keys").await;
    assert!(keys.to_string().contains("hall screen"), "{keys}");
    let status = kiosk.get("/api/v1/fleet").await;
    assert_eq!(status["content_version"], "2026.11-1");
    // The next configData says so.
    fake.with(|s| {
        s.config_data_requested = true;
        s.generation += 1;
    });
    wait_until("configData", 20, || {
        fake.with(|s| !s.config_data.is_empty())
    })
    .await;
    let data = fake.with(|s| s.config_data.last().unwrap().clone());
    assert_eq!(data["data"]["content_version"], "2026.11-1");
    assert_secret_kept(&kiosk, &secret).await;
    kiosk.stop().await;
}

/// A content bundle's version is its signed creation time: an older or the same one would roll
/// the content back (a replay by the server or a man in the middle), so it is refused; the
/// fleet never forces, an administrator may in the console (issue 34, finding 7).
#[tokio::test(flavor = "multi_thread")]
async fn an_older_content_bundle_is_refused_unless_an_administrator_forces_it() {
    let older = exported(7, "2026.11-1", "Ada Lovelace").await;
    let newer = exported(7, "2026.12-1", "Grace Hopper").await;
    let (_, public) = fleet_key(7);
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeHawkbit::start(&token("replay"), "00:00:01").await;
    let kiosk = Kiosk::start(dir.path(), TestFirmware::new(dir.path(), "0.1.0", "A")).await;

    fake.offer(
        "30",
        "docent-content",
        "2026.12-1",
        "content.tar",
        newer.clone(),
        json!({}),
    );
    kiosk
        .join_fleet(&fake, json!({"content_public_key": public}))
        .await;
    wait_until("the newer content", 40, || fake.closed("30").is_some()).await;
    assert_eq!(fake.closed("30").unwrap().0, "closed/success");
    assert!(has(&kiosk, "Grace Hopper").await);

    // The server offers the older bundle again: refused, nothing changes.
    fake.offer(
        "31",
        "docent-content",
        "2026.11-1",
        "content.tar",
        older.clone(),
        json!({}),
    );
    wait_until("the refusal", 40, || fake.closed("31").is_some()).await;
    let (status, details) = fake.closed("31").unwrap();
    assert_eq!(status, "closed/failure", "{details}");
    assert!(details.contains("not newer"), "{details}");
    assert!(has(&kiosk, "Grace Hopper").await);
    assert!(!has(&kiosk, "Ada Lovelace").await);
    pause(&kiosk, true).await;

    // In the console: the same bundle again or the older one are refused, the older one
    // forced is applied.
    let apply = |bundle: Vec<u8>, query: &str| {
        let req = kiosk
            .http
            .post(kiosk.url(&format!("/api/v1/fleet/content/apply{query}")))
            .header("content-type", "application/octet-stream")
            .body(bundle);
        async move {
            let res = req.send().await.unwrap();
            (res.status().as_u16(), res.text().await.unwrap())
        }
    };
    let (status, text) = apply(newer, "").await;
    assert_eq!(status, 409, "the same bundle again: {text}");
    let (status, text) = apply(older.clone(), "?force=false").await;
    assert_eq!(status, 409, "{text}");
    assert!(text.contains("not newer"), "{text}");
    let (status, text) = apply(older, "?force=true").await;
    assert_eq!(status, 200, "{text}");
    let mut applied = false;
    for _ in 0..300 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if let Ok(res) = kiosk.http.get(kiosk.url("/api/v1/characters")).send().await
            && res.status() == 200
            && res.text().await.unwrap().contains("Ada Lovelace")
        {
            applied = true;
            break;
        }
    }
    assert!(applied, "the forced bundle is applied at the restart");
    kiosk.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn only_an_administrator_exports_content() {
    let dir = tempfile::tempdir().unwrap();
    let server = crate::support::Server::start_in(dir, |c| {
        c.access.admin_password = Some("correct horse battery".into());
        c.devices = docent::config::DeviceMode::None;
    })
    .await;
    let (key, _) = fleet_key(1);
    let res = server
        .post("/api/v1/fleet/content/export")
        .json(&json!({"version": "1", "signing_key": key}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    for path in ["/api/v1/fleet"] {
        assert_eq!(server.get(path).send().await.unwrap().status(), 401);
    }
    let res = server
        .post("/api/v1/fleet/pause")
        .json(&json!({"paused": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_system_page_shows_the_fleet_and_pauses_it() {
    const PASSWORD: &str = "fleet-console-password";
    let fake = FakeHawkbit::start(&token("console"), "00:00:01").await;
    // Downloaded, then waiting outside the maintenance window: an action in progress.
    fake.offer(
        "12",
        "os",
        "0.2.0",
        "b.raucb",
        bundle("0.2.0", 1000),
        json!({"maintenanceWindow": "unavailable"}),
    );
    let mut s = crate::support::Server::start_with(|c| {
        c.access.admin_password = Some(PASSWORD.into());
        c.devices = docent::config::DeviceMode::None;
        c.fleet.min_poll_secs = 1;
    })
    .await;
    let cookie = crate::support::sign_in(&s, PASSWORD).await;
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("cookie", cookie.parse().unwrap());
    headers.insert("origin", s.base.parse().unwrap());
    s.http = reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .unwrap();
    let fleet = json!({"fleet": {"enabled": true, "server_url": fake.url(),
        "allow_insecure_http": true, "tenant": TENANT, "controller_id": CONTROLLER,
        "target_token": fake.token}});
    s.put_json("/api/v1/settings", fleet, 200).await;

    let mut b = crate::support::browser::Browser::launch().await;
    b.goto(&s.url("/console/login")).await;
    b.type_into("password", PASSWORD).await;
    b.press_enter().await;
    b.wait_for_page("/console/").await;
    b.goto(&s.url("/console/system")).await;
    let text = |id: &str| format!("((document.getElementById('{id}') || {{}}).textContent || '')");
    b.wait_within(
        &format!(
            "{}.includes('waiting for the maintenance window')",
            text("fleet-action")
        ),
        json!(true),
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(
        b.eval(&text("fleet-action")).await,
        json!("Firmware 0.2.0 (action 12): waiting for the maintenance window, 100%")
    );
    assert_eq!(
        b.eval(&text("fleet-server")).await,
        json!(format!("{} (tenant DEFAULT)", fake.url()))
    );
    assert_eq!(b.eval(&text("fleet-target")).await, json!(CONTROLLER));
    let state = b.eval(&text("fleet-state")).await;
    assert!(
        state
            .as_str()
            .unwrap()
            .starts_with("Asks the server every 1 s"),
        "{state}"
    );
    let reported = b.eval(&text("fleet-reported")).await;
    assert!(
        reported
            .as_str()
            .unwrap()
            .contains("feedback 12: proceeding/none"),
        "{reported}"
    );
    let page = b.eval("document.body.innerText").await;
    assert!(
        !page.as_str().unwrap().contains(&fake.token),
        "the token is never shown"
    );

    b.eval("document.getElementById('fleet-pause').click()")
        .await;
    b.wait_for(
        &format!("{}.startsWith('Paused')", text("fleet-state")),
        json!(true),
    )
    .await;
    assert_eq!(b.eval(&text("fleet-pause")).await, json!("Resume polling"));
    assert_eq!(s.get_json("/api/v1/fleet", 200).await["paused"], true);
    let polls = fake.with(|f| f.seen.len());
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(fake.with(|f| f.seen.len()), polls, "paused: nothing asked");
    b.eval("document.getElementById('fleet-pause').click()")
        .await;
    b.wait_for(
        &format!("{}.startsWith('Asks')", text("fleet-state")),
        json!(true),
    )
    .await;

    // The settings say what the plain-HTTP server of this test costs.
    b.goto(&s.url("/console/settings")).await;
    b.wait_for(
        "!!document.getElementById('s-fleet-allow_insecure_http')",
        json!(true),
    )
    .await;
    let warning = b.eval(&text("fleet-insecure")).await;
    assert!(
        warning
            .as_str()
            .unwrap()
            .contains("target token crosses the network in clear"),
        "{warning}"
    );
    drop(b);
    s.stop().await;
}

/// Open 10:00 to 18:00 every day, in the kiosk's local time.
async fn open_ten_to_six(kiosk: &Kiosk) {
    let day = json!({"open": "10:00", "close": "18:00"});
    kiosk
        .put_settings(
            json!({"hours": {"enabled": true, "week": [day, day, day, day, day, day, day]}}),
        )
        .await;
}

/// Saturday 28 November 2026 at `hour`:`minute` (and the days after it).
/// The polls of the controller's root resource the fake server has seen.
fn polls_of(fake: &FakeHawkbit) -> usize {
    fake.with(|s| {
        s.seen
            .iter()
            .filter(|r| r.path.ends_with("kiosk-1"))
            .count()
    })
}

fn saturday(day: u8, hour: u8, minute: u8) -> LocalTime {
    LocalTime::new(2026, 11, 28 + day, hour, minute)
}

/// The stage of the fleet's action, as the System page shows it.
async fn stage(kiosk: &Kiosk) -> String {
    let status = kiosk.get("/api/v1/fleet").await;
    status["action"]["stage"].as_str().unwrap_or("").to_string()
}

/// Polls the fleet's stage until `what` holds of it.
async fn stage_until(kiosk: &Kiosk, what: &str, done: impl Fn(&str) -> bool) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let stage = stage(kiosk).await;
        if done(&stage) {
            return stage;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}: {stage}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Issue 35: a deployment that arrives at 11 am on a Saturday waits for the closing at 18:00 to
/// install (said once to the server, with when), and its reboot waits too if the museum opened
/// during the install; then the success, as ever, after the new slot was marked good.
#[tokio::test(flavor = "multi_thread")]
async fn a_deployment_waits_for_the_museum_to_close_to_install_and_to_reboot() {
    let dir = tempfile::tempdir().unwrap();
    let secret = token("hours");
    let fake = FakeHawkbit::start(&secret, "00:00:01").await;
    let artifact = bundle("0.2.0", 50_000);
    let sha = hex(&sha2::Sha256::digest(&artifact));
    fake.offer(
        "31",
        "os",
        "0.2.0",
        "docent-0.2.0.raucb",
        artifact,
        json!({"update": "attempt"}),
    );
    let clock = Arc::new(SimClock::at(saturday(0, 11, 0)));
    let firmware = TestFirmware::new(dir.path(), "0.1.0", "A");
    let kiosk = Kiosk::start_at(dir.path(), firmware.clone(), clock.clone()).await;
    open_ten_to_six(&kiosk).await;
    kiosk.join_fleet(&fake, json!({})).await;

    let waiting = |f: &[(String, String)]| {
        f.iter()
            .filter(|(_, d)| d.contains("waiting for the museum to close"))
            .count()
    };
    wait_until("the wait reported", 20, || {
        waiting(&fake.feedback_of("31")) > 0
    })
    .await;
    let polls = || polls_of(&fake);
    let before = polls();
    wait_until("several more polls", 20, || polls() >= before + 4).await;
    assert!(
        !firmware.calls().contains(&"install".into()),
        "nothing installed while the museum is open: {:?}",
        firmware.calls()
    );
    let feedback = fake.feedback_of("31");
    assert_eq!(
        waiting(&feedback),
        1,
        "said once, not at every poll: {feedback:?}"
    );
    let (status, details) = feedback
        .iter()
        .find(|(_, d)| d.contains("waiting for the museum"))
        .unwrap();
    assert_eq!(status, "proceeding/none");
    assert!(details.contains("(today at 18:00)"), "{details}");
    assert!(
        feedback.iter().all(|(s, _)| s == "proceeding/none"),
        "{feedback:?}"
    );
    assert_eq!(stage(&kiosk).await, "waiting for the museum to close");
    assert!(
        dir.path().join("fleet/download/artifact.checked").exists(),
        "downloaded and checked"
    );

    // 18:00: closed. It installs; the museum opens again (the next morning) while it does, so
    // the reboot waits for the next closing.
    clock.set(saturday(0, 18, 0));
    wait_until("the install", 20, || {
        firmware.calls().contains(&"install".into())
    })
    .await;
    clock.set(saturday(1, 11, 0));
    stage_until(&kiosk, "the reboot's wait", |s| {
        s == "installed; waiting for the museum to close"
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        !firmware.calls().contains(&"reboot".into()),
        "no reboot while the museum is open"
    );
    clock.set(saturday(1, 18, 30));
    wait_until("the reboot", 20, || {
        firmware.calls().contains(&"reboot".into())
    })
    .await;
    assert_eq!(
        firmware.calls(),
        vec![format!("check {sha}"), "install".into(), "reboot".into()]
    );
    kiosk.stop().await;
    assert_eq!(fake.closed("31"), None, "the install alone is no success");

    // After the reboot, as the health gate leaves it: the success.
    let update = dir.path().join("update");
    let installed = installed_at(dir.path());
    std::fs::remove_file(update.join("pending.json")).unwrap();
    let outcome = json!({"result": "updated", "from": "0.1.0", "to": "0.2.0", "reason": null, "at": now(), "installed_at": installed});
    std::fs::write(update.join("outcome.json"), outcome.to_string()).unwrap();
    let firmware = TestFirmware::new(dir.path(), "0.2.0", "B");
    let kiosk = Kiosk::start_at(dir.path(), firmware.clone(), clock.clone()).await;
    wait_until("the success", 20, || fake.closed("31").is_some()).await;
    let (status, details) = fake.closed("31").unwrap();
    assert_eq!(status, "closed/success", "{details}");
    assert!(firmware.calls().is_empty(), "nothing installed again");
    assert_secret_kept(&kiosk, &secret).await;
    kiosk.stop().await;
}

/// The server's maintenance window and the museum's hours both apply: closed, but the window
/// `unavailable`, nothing installs; the window `available`, but the museum open, nothing
/// either; both, it installs. And the operator's `forced` installs at once, open or not.
#[tokio::test(flavor = "multi_thread")]
async fn the_maintenance_window_and_the_opening_hours_both_hold_and_forced_does_not_wait() {
    let dir = tempfile::tempdir().unwrap();
    let secret = token("window");
    let fake = FakeHawkbit::start(&secret, "00:00:01").await;
    fake.offer(
        "32",
        "os",
        "0.2.0",
        "docent-0.2.0.raucb",
        bundle("0.2.0", 1000),
        json!({"update": "attempt", "maintenanceWindow": "unavailable"}),
    );
    let clock = Arc::new(SimClock::at(saturday(0, 19, 0)));
    let firmware = TestFirmware::new(dir.path(), "0.1.0", "A");
    let kiosk = Kiosk::start_at(dir.path(), firmware.clone(), clock.clone()).await;
    open_ten_to_six(&kiosk).await;
    kiosk.join_fleet(&fake, json!({})).await;
    stage_until(&kiosk, "the window's wait", |s| {
        s == "waiting for the maintenance window"
    })
    .await;
    let polls = || polls_of(&fake);
    let before = polls();
    wait_until("several more polls", 20, || polls() >= before + 3).await;
    assert!(
        !firmware.calls().contains(&"install".into()),
        "nothing installed outside the window: {:?}",
        firmware.calls()
    );
    let feedback = fake.feedback_of("32");
    assert!(
        !feedback.iter().any(|(_, d)| d.contains("museum")),
        "closed: no wait for the museum: {feedback:?}"
    );
    // The window opens, the next morning, when the museum is open: the hours still hold it.
    clock.set(saturday(1, 11, 0));
    fake.with(|s| {
        let (_, d) = s.deployment.as_mut().unwrap();
        d["maintenanceWindow"] = json!("available");
        s.generation += 1;
    });
    wait_until("the museum's wait", 20, || {
        fake.feedback_of("32")
            .iter()
            .any(|(_, d)| d.contains("waiting for the museum to close (today at 18:00)"))
    })
    .await;
    assert!(!firmware.calls().contains(&"install".into()));
    // Closed, and the window available: installed and rebooted.
    clock.set(saturday(1, 19, 0));
    wait_until("the reboot", 20, || {
        firmware.calls().contains(&"reboot".into())
    })
    .await;
    kiosk.stop().await;

    // Forced by the operator at 11:00, the museum open: installed and rebooted at once.
    let dir = tempfile::tempdir().unwrap();
    fake.offer_os("33", "0.2.0", bundle("0.2.0", 1000));
    clock.set(saturday(0, 11, 0));
    let firmware = TestFirmware::new(dir.path(), "0.1.0", "A");
    let kiosk = Kiosk::start_at(dir.path(), firmware.clone(), clock.clone()).await;
    open_ten_to_six(&kiosk).await;
    kiosk.join_fleet(&fake, json!({})).await;
    wait_until("the forced reboot", 20, || {
        firmware.calls().contains(&"reboot".into())
    })
    .await;
    let feedback = fake.feedback_of("33");
    assert!(
        !feedback.iter().any(|(_, d)| d.contains("museum")),
        "{feedback:?}"
    );
    kiosk.stop().await;
}

/// A content bundle restarts docent: it waits for the closing as firmware does.
#[tokio::test(flavor = "multi_thread")]
async fn a_content_bundle_waits_for_the_museum_to_close() {
    let bundle = exported_content(7).await;
    let (_, public) = fleet_key(7);
    let dir = tempfile::tempdir().unwrap();
    let secret = token("content-hours");
    let fake = FakeHawkbit::start(&secret, "00:00:01").await;
    let clock = Arc::new(SimClock::at(saturday(0, 11, 0)));
    let kiosk = Kiosk::start_at(
        dir.path(),
        TestFirmware::new(dir.path(), "0.1.0", "A"),
        clock.clone(),
    )
    .await;
    open_ten_to_six(&kiosk).await;
    fake.offer(
        "34",
        "docent-content",
        "2026.11-1",
        "content.tar",
        bundle,
        json!({"update": "attempt"}),
    );
    kiosk
        .join_fleet(&fake, json!({"content_public_key": public}))
        .await;
    wait_until("the wait reported", 20, || {
        fake.feedback_of("34")
            .iter()
            .any(|(_, d)| d.contains("waiting for the museum to close (today at 18:00)"))
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!has(&kiosk, "Ada Lovelace").await, "not applied while open");
    assert_eq!(fake.closed("34"), None);
    clock.set(saturday(0, 18, 0));
    wait_until("the content", 40, || fake.closed("34").is_some()).await;
    let (status, details) = fake.closed("34").unwrap();
    assert_eq!(status, "closed/success", "{details}");
    assert!(has(&kiosk, "Ada Lovelace").await);
    kiosk.stop().await;
}
