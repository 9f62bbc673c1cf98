//! A fleet update from the fleet tests' fake hawkBit server (`./x appliance-long`): one that
//! waits for the museum to close, then succeeds after the mark good, and a bad one that fails
//! after the rollback.

use std::net::SocketAddrV4;
use std::time::{Duration, Instant};

use serde_json::json;

use docent_test_support::appliance::{
    board_clock, boot_status, bundle, closed, host_clock, installed, marked_good, on_slot,
    own_password, runtime, unix, wait_health, wait_some,
};
use docent_test_support::board::{Board, Disk, HostService};
use docent_test_support::fake_hawkbit::{self, CONTROLLER, FakeHawkbit, TENANT, counting_proxy};

/// Where the board reaches the fleet server: an address of QEMU's user network that leads to
/// the fake hawkBit server on the host (board::HostService).
const FLEET_SERVER: &str = "10.0.2.100:80";

/// A museum's fleet (docs/fleet.md): the fleet tests' fake hawkBit server runs on the host behind
/// a byte-counting forwarder, and the board reaches it (and nothing else). The administrator joins
/// the kiosk to the fleet in its settings and opening hours by which it closes in about three
/// minutes; the server offers 0.2.0: the board downloads it, says it waits for the museum to
/// close, and once closed installs it into slot B and reboots, the start check marks slot B good, and only then does the
/// server hear `closed/success` (its arrival, on the host's clock, against the mark in docent's
/// log, on the board's; the offset between the clocks measured). Then the server offers 0.3.0,
/// whose docent refuses its configuration: the update gate rolls it back, and the server hears
/// `closed/failure` with the reason from 0.2.0 on slot B. The token is in no log on the board.
/// Prints the cost of a poll and the times from each offer to its result.
#[test]
#[ignore = "boots the simulated board: run by ./x appliance-long"]
fn long_a_fleet_update_succeeds_after_the_mark_good_and_a_bad_one_fails_after_the_rollback() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let (v2, v3) = (bundle("0.2.0"), bundle("0.3.0"));
    let token = format!("tt-board-{}", uuid::Uuid::new_v4().simple());
    let fake = rt.block_on(FakeHawkbit::start(&token, "00:00:10"));
    let (forwarder, wire) = rt.block_on(counting_proxy(fake.addr));
    let server = HostService {
        guest: FLEET_SERVER.parse::<SocketAddrV4>().unwrap(),
        host: forwarder.port(),
    };
    let disk = Disk::flash(dir.path());
    let mut b = Board::boot_reaching(&disk, dir.path(), &[server]);
    rt.block_on(wait_health(&b, Duration::from_secs(180)));
    let admin = own_password(&mut b, &rt);
    on_slot(&mut b, "A", "0.1.0");

    // --- The administrator joins the kiosk to the fleet ---
    fake.with(|s| s.config_data_requested = true);
    let fleet = json!({
        "enabled": true,
        "server_url": format!("http://{FLEET_SERVER}"),
        // The fake server speaks plain HTTP.
        "allow_insecure_http": true,
        "tenant": TENANT,
        "controller_id": CONTROLLER,
        "target_token": token,
    });
    rt.block_on(
        admin.expect(
            admin
                .request(reqwest::Method::PUT, "/api/v1/settings")
                .json(&json!({ "fleet": fleet })),
            200,
        ),
    );
    let config = wait_some("the kiosk's attributes", Duration::from_secs(120), || {
        fake.with(|s| s.config_data.first().cloned())
    });
    assert_eq!(
        [
            &config["data"]["firmware_version"],
            &config["data"]["booted_slot"],
            &config["data"]["compatible"]
        ],
        [&json!("0.1.0"), &json!("A"), &json!("docent-qemu-aarch64")],
        "{config}"
    );

    // --- What a poll costs while nothing is offered: one request, answered 304 ---
    let polls = |s: &fake_hawkbit::Script| -> Vec<Instant> {
        s.seen
            .iter()
            .filter(|r| r.method == "GET" && r.path.ends_with(CONTROLLER))
            .map(|r| r.at)
            .collect()
    };
    // The attributes changed the root resource: the next poll is answered in full, the one
    // after it unchanged (304).
    let sent = fake.with(|s| s.seen.len());
    wait_some("an unchanged poll", Duration::from_secs(60), || {
        fake.with(|s| {
            let with_etag = s.seen[sent..].iter().filter(|r| r.if_none_match.is_some());
            (with_etag.count() >= 2).then_some(())
        })
    });
    // Sampled between polls (the next is 10 s away).
    std::thread::sleep(Duration::from_secs(1));
    let (seen0, polls0, bytes0) = fake.with(|s| (s.seen.len(), polls(s).len(), wire_bytes(&wire)));
    std::thread::sleep(Duration::from_secs(45));
    let (window, times) = fake.with(|s| (s.seen[seen0..].to_vec(), polls(s)[polls0..].to_vec()));
    let bytes = wire_bytes(&wire) - bytes0;
    assert!(
        times.len() >= 3
            && window.len() == times.len()
            && window.iter().all(|r| r.if_none_match.is_some()),
        "only polls, each with its ETag, while nothing is offered: {window:?}"
    );
    let gaps: Vec<f64> = times
        .windows(2)
        .map(|w| (w[1] - w[0]).as_secs_f64())
        .collect();
    assert!(
        gaps.iter().all(|g| *g > 9.5),
        "polled at the server's interval (10 s): {gaps:?}"
    );
    println!(
        "fleet poll on the board: {} polls in 45 s, one request each (304), {} bytes each on the \
         wire (request and answer); {:.1} s apart",
        times.len(),
        bytes / times.len() as u64,
        gaps.iter().sum::<f64>() / gaps.len().max(1) as f64
    );

    // --- The museum is open now and closes in three minutes or so (issue 35) ---
    let closes = open_until_soon(&mut b, &rt, &admin);

    // --- 0.2.0 from the fleet: waits for the closing, then installed into slot B, rebooted
    // into, marked good ---
    let artifact = std::fs::read(&v2).unwrap();
    let size = artifact.len();
    let mark = b.mark();
    let offered = Instant::now();
    // hawkBit's soft assignment: the kiosk decides when (`forced` would not wait).
    fake.offer(
        "8",
        "os",
        "0.2.0",
        "docent-0.2.0.raucb",
        artifact,
        json!({"update": "attempt"}),
    );
    let (waiting, why) = wait_some("the wait for the closing", Duration::from_secs(300), || {
        fake.feedback_timed("8")
            .into_iter()
            .find(|(_, _, d)| d.contains("waiting for the museum to close ("))
            .map(|(t, _, d)| (t, d))
    });
    assert!(
        waiting < closes,
        "downloaded and checked before the closing (this machine was too slow): {why}"
    );
    let done = installed(&fake, "8");
    let feedback = fake.feedback_timed("8");
    let began = feedback
        .iter()
        .find(|(_, _, d)| d.contains("installing 0.2.0"))
        .map(|(t, _, _)| *t)
        .expect("the install's feedback");
    assert!(
        began + Duration::from_secs(1) >= closes,
        "nothing installed while the museum was open: the install began {:.0} s before the \
         closing",
        (closes - began).as_secs_f64()
    );
    assert_eq!(
        feedback
            .iter()
            .filter(|(_, _, d)| d.contains("waiting for the museum"))
            .count(),
        1,
        "the wait said once: {feedback:?}"
    );
    assert_eq!(fake.closed("8"), None, "an install is no success");
    let on_b = b.wait_for("docent boot: slot B", mark, Duration::from_secs(300));
    let rebooted = Instant::now();
    b.wait_ready(on_b);
    rt.block_on(wait_health(&b, Duration::from_secs(180)));
    let (succeeded, details) = closed(&fake, "8", "closed/success");
    assert!(details.contains("marked good"), "{details}");
    b.wait_for(
        "update gate: docent took the update",
        on_b,
        Duration::from_secs(60),
    );
    on_slot(&mut b, "B", "0.2.0");
    marked_good(&mut b, "B");
    // docent logs the outcome once RAUC has marked the slot good (src/update).
    let line = b.sh(
        "journalctl -b -u docent.service -o cat --no-pager | grep -m1 'updated from 0.1.0 to 0.2.0'",
    );
    let marked = line
        .split_whitespace()
        .next()
        .and_then(|t| humantime::parse_rfc3339(t).ok())
        .map(unix)
        .unwrap_or_else(|| panic!("docent logged the update with its time: {line:?}"));
    let (offset, within) = board_clock(&mut b);
    let heard = host_clock(succeeded) + offset;
    assert!(
        heard > marked - within,
        "the server heard the success {:.3} s before slot B was marked good (clocks compared \
         within {within:.3} s)",
        marked - heard
    );
    let polled = fake.with(|s| {
        polls(s)
            .into_iter()
            .filter(|t| (rebooted..succeeded).contains(t))
            .count()
    });
    let feedback = fake.feedback_timed("8");
    let seen = fake.with(|s| s.seen.clone());
    let downloads = seen
        .iter()
        .filter(|r| r.path.ends_with("/docent-0.2.0.raucb"))
        .count();
    let fetched = seen
        .iter()
        .find(|r| r.at > offered && r.path.ends_with("/docent-0.2.0.raucb"))
        .expect("the download")
        .at;
    // The kiosk asks once more for a cancellation once the bundle is downloaded and checked.
    let last_look = seen
        .iter()
        .find(|r| r.at > fetched && r.path.ends_with(CONTROLLER) && r.if_none_match.is_none())
        .expect("a last look for a cancellation before the install")
        .at;
    let at = |what: &str| {
        feedback
            .iter()
            .find(|(_, _, d)| d.contains(what))
            .map(|(t, _, _)| *t)
            .unwrap_or_else(|| panic!("feedback {what:?} in {feedback:?}"))
    };
    let installing = at("installing 0.2.0");
    let secs = |from: Instant, to: Instant| (to - from).as_secs_f64();
    println!(
        "fleet update 0.1.0 -> 0.2.0 ({} MiB bundle): offer to download {:.0} s (the next poll); \
         download, fsync and SHA-256 {:.0} s ({:.1} MB/s, {downloads} request(s)); waited for \
         the closing {:.0} s ({why}); closing to install {:.0} s; RAUC's check {:.0} s; install \
         {:.0} s; installed to success heard {:.0} s (reboot, start check, {polled} poll(s) \
         after the reboot before it); success heard {:.1} s after the mark (clocks within \
         {:.0} ms); offer to success {:.0} s; feedback: {:?}",
        size >> 20,
        secs(offered, fetched),
        secs(fetched, waiting),
        size as f64 / 1e6 / secs(fetched, waiting),
        secs(waiting, closes),
        secs(closes, last_look),
        secs(last_look, installing),
        secs(installing, done),
        secs(done, succeeded),
        heard - marked,
        within * 1000.0,
        secs(offered, succeeded),
        feedback
            .iter()
            .map(|(_, s, _)| s.as_str())
            .collect::<Vec<_>>()
    );

    // --- 0.3.0 from the fleet: its docent refuses its configuration; the gate rolls it back ---
    let artifact = std::fs::read(&v3).unwrap();
    let mark = b.mark();
    let offered = Instant::now();
    fake.offer_os("9", "0.3.0", artifact);
    installed(&fake, "9");
    let on_a = b.wait_for("docent boot: slot A", mark, Duration::from_secs(300));
    let rolling = b.wait_for(
        "update gate: rolling back 0.3.0",
        on_a,
        Duration::from_secs(300),
    );
    assert_eq!(
        fake.closed("9"),
        None,
        "nothing reported before the rollback"
    );
    let back = b.wait_for("docent boot: slot B", rolling, Duration::from_secs(120));
    let back_at = Instant::now();
    b.wait_ready(back);
    rt.block_on(wait_health(&b, Duration::from_secs(180)));
    let (failed, details) = closed(&fake, "9", "closed/failure");
    assert!(
        details.contains("0.3.0 was rolled back: docent failed to start")
            && details.contains("teleported")
            && details.contains("running 0.2.0"),
        "the failure says why, in docent's own words: {details}"
    );
    assert!(
        failed > back_at,
        "reported once the board was back on slot B"
    );
    on_slot(&mut b, "B", "0.2.0");
    assert_eq!(boot_status(&mut b, "A"), "bad", "slot A is marked bad");
    println!(
        "fleet update 0.2.0 -> 0.3.0 (refused configuration): offer to failure heard {:.0} s, \
         {:.0} s after the board was back on slot B: {details}",
        secs(offered, failed),
        secs(back_at, failed)
    );

    // Every request carried the token, which no log line on the board holds; the fleet's own
    // updates are not reported again as installed from the console.
    assert!(fake.with(|s| s.seen.iter().all(|r| r.status == 200)));
    assert_eq!(
        b.sh(&format!(
            "journalctl -o cat --no-pager | grep -c -F '{token}'"
        )),
        "0",
        "the target token is in no log line on the board"
    );
    assert!(fake.with(|s| s.installed_base.is_empty()));
}

/// Gives the board opening hours by which it is open now and closes in 150 to 210 s, by its
/// own local time (`date` on the board: the clock and zone docent reads), today only; returns
/// when it closes, on the host's clock.
fn open_until_soon(
    b: &mut Board,
    rt: &tokio::runtime::Runtime,
    admin: &docent_test_support::appliance::Admin,
) -> Instant {
    let asked = Instant::now();
    let now = b.sh("date '+%u %H %M %S'");
    let parts: Vec<u32> = now.split_whitespace().map(|p| p.parse().unwrap()).collect();
    let [weekday, h, m, sec] = parts[..] else {
        panic!("the board's date: {now:?}")
    };
    let secs = h * 3600 + m * 60 + sec;
    // The next whole minute at least 150 s away; at most midnight (`24:00`).
    let close = ((secs + 150).div_ceil(60) * 60).min(86_400);
    let mut week = vec![serde_json::Value::Null; 7];
    week[weekday as usize - 1] = json!({
        "open": "00:00",
        "close": format!("{:02}:{:02}", close / 3600, close / 60 % 60),
    });
    rt.block_on(
        admin.expect(
            admin
                .request(reqwest::Method::PUT, "/api/v1/settings")
                .json(&json!({ "hours": { "enabled": true, "week": week } })),
            200,
        ),
    );
    asked + Duration::from_secs((close - secs).into())
}

fn wire_bytes(count: &std::sync::atomic::AtomicU64) -> u64 {
    count.load(std::sync::atomic::Ordering::Relaxed)
}
