//! The administrator's maintenance routes over real HTTP: changing the password (and the
//! first-boot password that must be changed), restart, backup and restore of the data directory,
//! and the recent log.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::disk::{Tmpfs, fill, watch_free_space};
use crate::support::{PNG, Process, Server, assert_admin_only, furnished, hash_tree, sign_in};

const PASSWORD: &str = "maintenance-test-password";
const FIRST_BOOT: &str = "Fb3kQz9TmW2xLr7N";

async fn auth_status(s: &Server, cookie: &str) -> Value {
    let res = s.get("/api/auth").header("cookie", cookie).send().await;
    res.unwrap().json().await.unwrap()
}

/// A cookie write from the console's own origin.
fn write(s: &Server, method: reqwest::Method, path: &str, cookie: &str) -> reqwest::RequestBuilder {
    s.http
        .request(method, s.url(path))
        .header("cookie", cookie)
        .header("origin", &s.base)
}

async fn change(s: &Server, cookie: &str, current: &str, new: &str) -> (u16, Value) {
    let res = write(s, reqwest::Method::PUT, "/api/auth/password", cookie)
        .json(&json!({ "current": current, "new": new }))
        .send()
        .await
        .unwrap();
    (
        res.status().as_u16(),
        res.json().await.unwrap_or(Value::Null),
    )
}

fn with_first_boot_file(dir: &Path) -> impl FnOnce(&mut docent::config::Config) + use<> {
    let file = dir.join("admin-password");
    std::fs::write(&file, format!("{FIRST_BOOT}\n")).unwrap();
    move |c| c.access.admin_password_file = Some(file)
}

#[tokio::test]
async fn a_first_boot_password_must_be_changed_and_a_change_ends_other_sessions() {
    let outside = tempfile::tempdir().unwrap();
    let s = Server::start_with(with_first_boot_file(outside.path())).await;
    let anonymous = s.get_json("/api/auth", 200).await;
    assert_eq!(anonymous, json!({ "authenticated": false }));
    let res = s
        .put("/api/auth/password")
        .json(&json!({ "current": FIRST_BOOT, "new": "a-new-password" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401, "no cookie");

    let mine = sign_in(&s, FIRST_BOOT).await;
    let other = sign_in(&s, FIRST_BOOT).await;
    assert_eq!(auth_status(&s, &mine).await["must_change"], true);

    // A cookie write from another origin is refused before the route sees it.
    let res = s
        .put("/api/auth/password")
        .header("cookie", &mine)
        .header("origin", "http://evil.example")
        .json(&json!({ "current": FIRST_BOOT, "new": "a-new-password" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);

    let (status, body) = change(&s, &mine, FIRST_BOOT, "short").await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("at least 10"),
        "{body}"
    );
    let (status, _) = change(&s, &mine, FIRST_BOOT, FIRST_BOOT).await;
    assert_eq!(status, 400, "the same password again");
    let (status, body) = change(&s, &mine, "not-the-password", "a-new-password").await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(
        auth_status(&s, &mine).await["must_change"],
        true,
        "nothing changed"
    );

    let (status, body) = change(&s, &mine, FIRST_BOOT, "a-new-password").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        auth_status(&s, &mine).await,
        json!({ "authenticated": true })
    );
    assert_eq!(
        auth_status(&s, &other).await["authenticated"],
        false,
        "other session ended"
    );
    let res = s
        .post("/api/auth")
        .json(&json!({ "password": FIRST_BOOT }))
        .send()
        .await;
    assert_eq!(
        res.unwrap().status(),
        401,
        "the old password no longer opens"
    );

    // The chosen password wins over the file's after a restart too.
    let dir = s.stop().await;
    let s = Server::start_in(dir, with_first_boot_file(outside.path())).await;
    let res = s
        .post("/api/auth")
        .json(&json!({ "password": FIRST_BOOT }))
        .send()
        .await;
    assert_eq!(res.unwrap().status(), 401);
    let cookie = sign_in(&s, "a-new-password").await;
    assert_eq!(
        auth_status(&s, &cookie).await,
        json!({ "authenticated": true })
    );
}

#[tokio::test]
async fn a_configured_password_need_not_be_changed_and_system_routes_need_an_admin() {
    let s = Server::start_with(|c| c.access.admin_password = Some(PASSWORD.into())).await;
    let cookie = sign_in(&s, PASSWORD).await;
    assert_eq!(
        auth_status(&s, &cookie).await,
        json!({ "authenticated": true })
    );
    let routes = [
        (reqwest::Method::POST, "/api/v1/system/restart"),
        (reqwest::Method::GET, "/api/v1/system/backup"),
        (reqwest::Method::POST, "/api/v1/system/restore"),
        (reqwest::Method::GET, "/api/v1/system/logs"),
        (reqwest::Method::PUT, "/api/auth/password"),
    ];
    assert_admin_only(&s, &cookie, &routes).await;
}

async fn backup(s: &Server, cookie: &str) -> Vec<u8> {
    let res = s.get_as("/api/v1/system/backup", cookie).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "application/x-tar");
    res.bytes().await.unwrap().to_vec()
}

async fn restore(s: &Server, cookie: &str, archive: Vec<u8>) -> (u16, Value) {
    let res = write(s, reqwest::Method::POST, "/api/v1/system/restore", cookie)
        .body(archive)
        .send()
        .await
        .unwrap();
    (
        res.status().as_u16(),
        res.json().await.unwrap_or(Value::Null),
    )
}

/// Names, images and knowledge of every character, as the API lists them.
async fn inventory(s: &Server) -> Vec<Value> {
    let all = s.get_json("/api/v1/characters", 200).await;
    let mut out = Vec::new();
    for c in all.as_array().unwrap() {
        let id = c["id"].as_str().unwrap();
        let images = s
            .get_json(&format!("/api/v1/characters/{id}/images"), 200)
            .await;
        let sources = s.sources(id).await;
        out.push(json!({ "id": id, "name": c["name"], "images": images, "knowledge": sources }));
    }
    out
}

#[tokio::test]
async fn a_backup_restores_into_an_empty_kiosk() {
    let mut a = Server::start_with(|c| c.access.admin_password = Some(PASSWORD.into())).await;
    let cookie = sign_in(&a, PASSWORD).await;
    a.as_admin(&cookie);
    let ada = furnished(&a).await;
    let before = inventory(&a).await;
    let archive = backup(&a, &cookie).await;
    let mut tar = tar::Archive::new(archive.as_slice());
    let names: Vec<String> = tar
        .entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().display().to_string())
        .collect();
    assert_eq!(names[..2], ["docent-backup.json", "docent.redb"]);
    assert!(
        names[2..].iter().all(|n| n.starts_with("blobs/")),
        "{names:?}"
    );
    assert!(names.len() >= 4, "avatar and knowledge blobs: {names:?}");
    let image = a
        .get_json(&format!("/api/v1/characters/{ada}/images"), 200)
        .await;
    drop(a);

    let mut b = Server::start_with(|c| c.access.admin_password = Some(PASSWORD.into())).await;
    let cookie = sign_in(&b, PASSWORD).await;
    b.as_admin(&cookie);
    assert_ne!(inventory(&b).await, before);
    let (status, body) = restore(&b, &cookie, archive).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["restarting"], true);
    // What it staged: the backup's time, A's characters (its first one and two more), files.
    assert_eq!(body["characters"], 3, "{body}");
    assert_eq!(body["blobs"], names.len() - 2, "{body}");
    assert!(
        humantime::parse_rfc3339(body["created"].as_str().unwrap()).is_ok(),
        "{body}"
    );
    let dir = b.stop().await;
    let mut b = Server::start_in(dir, |c| c.access.admin_password = Some(PASSWORD.into())).await;
    let cookie = sign_in(&b, PASSWORD).await;
    b.as_admin(&cookie);
    assert_eq!(inventory(&b).await, before);
    let filename = image[0]["filename"]
        .as_str()
        .or(image["images"][0]["filename"].as_str())
        .unwrap_or_else(|| panic!("an image: {image}"));
    let res = b
        .get(&format!("/api/v1/avatars/{ada}_{filename}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(
        res.bytes().await.unwrap().as_ref(),
        PNG,
        "the image's bytes"
    );
    let found = b
        .post_json(
            &format!("/api/v1/internal/characters/{ada}/knowledge/search"),
            json!({ "query": "who designed the analytical engine", "top_k": 1 }),
            200,
        )
        .await;
    assert!(
        found["results"][0]["content"]
            .as_str()
            .unwrap()
            .contains("Babbage"),
        "{found}"
    );
    assert!(!b.dir.path().join("restore-pending").exists());
}

/// A tar member with any name and type, written header by header (the `tar` crate refuses to
/// write the names an attacker would use).
fn raw_member(out: &mut Vec<u8>, name: &str, kind: tar::EntryType, data: &[u8]) {
    let mut header = tar::Header::new_old();
    header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
    header.set_size(data.len() as u64);
    header.set_mode(0o644);
    header.set_entry_type(kind);
    header.set_cksum();
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out.resize(out.len().div_ceil(512) * 512, 0);
}

#[tokio::test]
async fn a_bad_archive_changes_nothing_and_says_why() {
    let mut s = Server::start_with(|c| c.access.admin_password = Some(PASSWORD.into())).await;
    let cookie = sign_in(&s, PASSWORD).await;
    s.as_admin(&cookie);
    furnished(&s).await;
    let good = backup(&s, &cookie).await;
    let members: Vec<(String, Vec<u8>)> = tar::Archive::new(good.as_slice())
        .entries()
        .unwrap()
        .map(|e| {
            let mut e = e.unwrap();
            let name = e.path().unwrap().display().to_string();
            let mut data = Vec::new();
            std::io::Read::read_to_end(&mut e, &mut data).unwrap();
            (name, data)
        })
        .collect();
    let rebuilt = |edit: &dyn Fn(&str, &mut Vec<u8>) -> Option<String>| {
        let mut out = Vec::new();
        for (name, data) in &members {
            let mut data = data.clone();
            let name = edit(name, &mut data).unwrap_or_else(|| name.clone());
            raw_member(&mut out, &name, tar::EntryType::Regular, &data);
        }
        out.extend_from_slice(&[0; 1024]);
        out
    };
    let escaping = rebuilt(&|name, _| name.starts_with("blobs/").then(|| format!("../{name}")));
    let absolute = rebuilt(&|name, _| (name == "docent.redb").then(|| "/tmp/docent.redb".into()));
    let flipped_blob = rebuilt(&|name, data| {
        if name.starts_with("blobs/") {
            data[0] ^= 0xff;
        }
        None
    });
    let damaged_db = rebuilt(&|name, data| {
        if name == "docent.redb" {
            for b in data.iter_mut().take(4096) {
                *b = 0x5a;
            }
        }
        None
    });
    let missing_blob = {
        let mut out = Vec::new();
        for (name, data) in members.iter().filter(|(n, _)| !n.starts_with("blobs/")) {
            raw_member(&mut out, name, tar::EntryType::Regular, data);
        }
        out.extend_from_slice(&[0; 1024]);
        out
    };
    let mut link = Vec::new();
    raw_member(
        &mut link,
        &members[0].0,
        tar::EntryType::Regular,
        &members[0].1,
    );
    raw_member(&mut link, "docent.redb", tar::EntryType::Symlink, b"");
    link.extend_from_slice(&[0; 1024]);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("truncated", good[..good.len() / 2].to_vec()),
        ("cut inside a header", good[..700].to_vec()),
        (
            "not a tar",
            b"hello, this is not an archive at all".repeat(40),
        ),
        ("empty", Vec::new()),
        ("path escaping", escaping),
        ("absolute path", absolute),
        ("blob differs", flipped_blob),
        ("database damaged", damaged_db),
        ("blob missing", missing_blob),
        ("symlink", link),
    ];
    let before = hash_tree(s.dir.path());
    for (what, archive) in cases {
        let (status, body) = restore(&s, &cookie, archive).await;
        assert_eq!(status, 400, "{what}: {body}");
        assert!(!body["error"].as_str().unwrap().is_empty(), "{what}");
        assert_eq!(
            hash_tree(s.dir.path()),
            before,
            "{what}: the data directory changed"
        );
    }
    // Nothing asked for a restart: the kiosk still serves.
    s.get_json("/api/v1/health", 200).await;
}

/// The built binary: a restart runs it again (same arguments) when no systemd supervises it,
/// and exits 75 for systemd to restart it when one does; the log lines are there for an
/// administrator, without the password.
#[tokio::test]
async fn restart_runs_the_program_again_and_the_log_is_kept() {
    let mut p = Process::new().env("ADMIN_PASSWORD", PASSWORD).start().await;
    let s = Server::attach(&p);
    let cookie = sign_in(&s, PASSWORD).await;
    let logs = s
        .get_as("/api/v1/system/logs?lines=50", &cookie)
        .await
        .json::<Value>()
        .await
        .unwrap();
    let lines = logs["lines"].as_array().unwrap();
    assert!(
        lines
            .iter()
            .any(|l| l.as_str().unwrap().contains("serving")),
        "{logs}"
    );
    assert!(!logs.to_string().contains(PASSWORD));
    let res = write(&s, reqwest::Method::POST, "/api/v1/system/restart", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let again = p.listening_again(Duration::from_secs(60)).await;
    let health: Value = reqwest::get(format!("http://{again}/api/v1/health"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["admin_auth"], "password", "{health}");
    assert!(p.stderr().contains("docent: restarting"), "{}", p.stderr());
    p.kill().await;

    let mut p = Process::new()
        .env("ADMIN_PASSWORD", PASSWORD)
        .env("INVOCATION_ID", "0123456789abcdef")
        .start()
        .await;
    let s = Server::attach(&p);
    let cookie = sign_in(&s, PASSWORD).await;
    let res = write(&s, reqwest::Method::POST, "/api/v1/system/restart", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(p.exited(Duration::from_secs(30)).await.code(), Some(75));
}

/// Files left in the scratch directory (where an upload is kept) and the restore's staging.
fn leftovers(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(dir) = std::fs::read_dir(root.join("tmp")) {
        out.extend(dir.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()));
    }
    if root.join("restore-staging").exists() {
        out.push("restore-staging".into());
    }
    out
}

/// A kiosk (a password, no devices) on a 64 MiB tmpfs of its own, signed in: the tmpfs, its
/// root, the server and the cookie; none where no tmpfs can be mounted.
async fn kiosk_on_a_small_tmpfs() -> Option<(Tmpfs, std::path::PathBuf, Server, String)> {
    let mut fs = Tmpfs::mount(64)?;
    let root = fs.path.clone();
    let s = Server::start_in(fs.take_dir(), |c| {
        c.access.admin_password = Some(PASSWORD.into());
        c.devices = docent::config::DeviceMode::None;
    })
    .await;
    let cookie = sign_in(&s, PASSWORD).await;
    Some((fs, root, s, cookie))
}

/// Issue 34, finding 5: the upload is refused midway when the free space comes near the
/// reserve (looked at every 4 MiB, as a firmware upload), not only before its first byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_upload_past_the_data_reserve_is_refused_midway_and_removed() {
    let Some((fs, root, s, cookie)) = kiosk_on_a_small_tmpfs().await else {
        return;
    };
    // The default reserve is 8 MiB: 6 MiB more are free, and 24 MiB are sent.
    let reserve = docent::config::Config::default().storage.data_reserve_bytes;
    assert_eq!(reserve, 8 << 20);
    fill(&root, reserve + (6 << 20));
    let (done, watcher) = watch_free_space(&root);
    let chunks = (0..384).map(|_| Ok::<_, std::io::Error>(vec![0x5au8; 64 << 10]));
    let sent = write(&s, reqwest::Method::POST, "/api/v1/system/restore", &cookie)
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(
            chunks,
        )))
        .send()
        .await;
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let least = watcher.join().unwrap();
    assert!(
        least >= reserve,
        "the upload went into the reserve: {least} bytes were left"
    );
    // The kiosk may answer before the client is done sending, which then sees the cut.
    if let Ok(res) = sent {
        let status = res.status().as_u16();
        let body: Value = res.json().await.unwrap_or(Value::Null);
        assert_eq!(status, 507, "{body}");
        assert!(
            body["error"].as_str().unwrap().contains("no room"),
            "{body}"
        );
    }
    assert!(leftovers(&root).is_empty(), "{:?}", leftovers(&root));
    // The kiosk may answer before its upload task has closed the removed file, whose blocks
    // are freed only then: a few seconds at most, on a machine busy with other tests.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut free = docent::store::free_bytes(&root).unwrap();
    while free <= reserve + (5 << 20) && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        free = docent::store::free_bytes(&root).unwrap();
    }
    assert!(free > reserve + (5 << 20), "{free}");
    s.get_json("/api/v1/health", 200).await;
    drop(s);
    drop(fs);
}

/// Issue 34, finding 5: an archive that fits as an upload but not a second time as its staged
/// copy is refused while it is staged, before the copy reaches the reserve.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_staged_past_the_data_reserve_is_refused_midway_and_removed() {
    let Some((fs, root, s, cookie)) = kiosk_on_a_small_tmpfs().await else {
        return;
    };
    // A backup of this kiosk with one more blob of 8 MiB at its end.
    let good = backup(&s, &cookie).await;
    let mut archive = Vec::new();
    for e in tar::Archive::new(good.as_slice()).entries().unwrap() {
        let mut e = e.unwrap();
        let name = e.path().unwrap().display().to_string();
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut e, &mut data).unwrap();
        raw_member(&mut archive, &name, tar::EntryType::Regular, &data);
    }
    let blob = vec![0xa5u8; 8 << 20];
    let id = "0123456789abcdef0123456789abcdef";
    raw_member(
        &mut archive,
        &format!("blobs/{id}"),
        tar::EntryType::Regular,
        &blob,
    );
    archive.extend_from_slice(&[0; 1024]);
    // 14 MiB above the reserve: the upload fits, its staged copy does not.
    let reserve = docent::config::Config::default().storage.data_reserve_bytes;
    fill(&root, reserve + (14 << 20));
    let (done, watcher) = watch_free_space(&root);
    let (status, body) = restore(&s, &cookie, archive).await;
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let least = watcher.join().unwrap();
    assert!(
        least >= reserve,
        "the staged copy went into the reserve: {least} bytes were left"
    );
    assert_eq!(status, 507, "{body}");
    assert!(leftovers(&root).is_empty(), "{:?}", leftovers(&root));
    assert!(!root.join("restore-pending").exists());
    let free = docent::store::free_bytes(&root).unwrap();
    assert!(free > reserve + (13 << 20), "{free}");
    s.get_json("/api/v1/health", 200).await;
    drop(s);
    drop(fs);
}
