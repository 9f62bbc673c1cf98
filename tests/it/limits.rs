//! A kiosk on a shared LAN: logins limited per real peer and bounded in cost, sessions ended by a
//! password change or "sign out everywhere", settings that cannot inject, images served inert,
//! history bounded.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::support::{Server, answer_json, sign_in, token_of};

const PW: &str = "correct horse battery staple";

async fn login_from(s: &Server, header_ip: Option<&str>, password: &str) -> reqwest::Response {
    let mut req = s.post("/api/auth").json(&json!({ "password": password }));
    if let Some(ip) = header_ip {
        req = req
            .header("Edge-Connecting-IP", ip)
            .header("X-Forwarded-For", ip);
    }
    req.send().await.unwrap()
}

async fn token(s: &Server) -> String {
    token_of(&sign_in(s, PW).await)
}

async fn signed_in(s: &Server, token: &str) -> bool {
    let v = answer_json(s.get("/api/auth").bearer_auth(token)).await;
    v["authenticated"] == json!(true)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_header_from_an_untrusted_peer_neither_picks_nor_resets_the_counter() {
    let s = Server::start_with(|c| {
        c.access.admin_password = Some(PW.into());
        c.access.login_max_failures = 3;
    })
    .await;
    // Each guess claims another address: all are counted against the one real peer.
    for i in 0..3 {
        let r = login_from(&s, Some(&format!("198.51.100.{i}")), "wrong").await;
        assert_eq!(r.status(), 401);
    }
    let r = login_from(&s, Some("198.51.100.99"), PW).await;
    assert_eq!(r.status(), 429, "a fresh header value is no fresh counter");
    assert_eq!(login_from(&s, None, PW).await.status(), 429);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_proxy_names_the_client() {
    let s = Server::start_with(|c| {
        c.access.admin_password = Some(PW.into());
        c.access.login_max_failures = 2;
        c.access.trusted_proxies = vec![std::net::Ipv4Addr::LOCALHOST.into()];
    })
    .await;
    for _ in 0..2 {
        assert_eq!(
            login_from(&s, Some("198.51.100.1"), "wrong").await.status(),
            401
        );
    }
    assert_eq!(login_from(&s, Some("198.51.100.1"), PW).await.status(), 429);
    // The administrator behind the same proxy is not locked out.
    assert_eq!(login_from(&s, Some("198.51.100.2"), PW).await.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_logins_queue_for_a_few_password_checks_then_get_429() {
    let s = Arc::new(
        Server::start_with(|c| {
            c.access.admin_password = Some(PW.into());
            c.access.login_max_failures = 10_000;
            c.access.login_concurrency = 1;
            // 150 clients at once from one address: the listener's own caps are not the subject.
            c.connections.max = 512;
            c.connections.max_per_peer = 512;
        })
        .await,
    );
    let started = std::time::Instant::now();
    let guesses: Vec<_> = (0..150)
        .map(|i| {
            let s = s.clone();
            tokio::spawn(async move {
                let r = login_from(&s, None, &format!("guess {i}")).await;
                let status = r.status().as_u16();
                let text = r.text().await.unwrap();
                (status, text)
            })
        })
        .collect();
    let (mut compared, mut busy) = (0, 0);
    for g in guesses {
        match g.await.unwrap() {
            (401, _) => compared += 1,
            (429, text) => {
                assert!(text.contains("Too many login attempts"), "{text}");
                busy += 1;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(
        busy > 0,
        "one check at a time cannot serve 150 in the 2 s wait ({compared} compared in {:?})",
        started.elapsed()
    );
    assert!(compared > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_change_ends_every_session() {
    let s = Server::start_with(|c| c.access.admin_password = Some(PW.into())).await;
    let old = token(&s).await;
    let dir = s.stop().await;
    // Same password: the session survives the restart.
    let s = Server::start_in(dir, |c| c.access.admin_password = Some(PW.into())).await;
    assert!(signed_in(&s, &old).await);
    let dir = s.stop().await;
    let s = Server::start_in(dir, |c| {
        c.access.admin_password = Some("a new password".into())
    })
    .await;
    assert!(
        !signed_in(&s, &old).await,
        "the old password's session ended"
    );
    let dir = s.stop().await;
    // And going back to the old password does not revive it.
    let s = Server::start_in(dir, |c| c.access.admin_password = Some(PW.into())).await;
    assert!(!signed_in(&s, &old).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_out_everywhere_ends_the_other_sessions() {
    let s = Server::start_with(|c| c.access.admin_password = Some(PW.into())).await;
    let (mine, other) = (token(&s).await, token(&s).await);
    let r = s.post("/api/auth/logout-all").send().await.unwrap();
    assert_eq!(r.status(), 401, "admin only");
    let r = s
        .post("/api/auth/logout-all")
        .bearer_auth(&mine)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>().await.unwrap()["ended"], json!(1));
    assert!(signed_in(&s, &mine).await);
    assert!(!signed_in(&s, &other).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_read_can_be_written_back_and_a_new_address_drops_the_key() {
    let s = Server::start().await;
    s.put_json(
        "/api/v1/settings",
        json!({ "llm": { "provider": "openai", "base_url": "http://127.0.0.1:9/v1",
                          "api_key": "sk-1234567890abcd" },
                 "doubao": { "access_token": "t" } }),
        200,
    )
    .await;
    let read = s.get_json("/api/v1/settings", 200).await;
    let saved = s.put_json("/api/v1/settings", read.clone(), 200).await;
    assert_eq!(saved["settings"], read, "the round trip changes nothing");
    assert_eq!(read["llm"]["api_key_set"], json!(true));

    // The same document pointing the model elsewhere: the key is not sent there.
    let mut moved = read.clone();
    moved["llm"]["base_url"] = json!("http://127.0.0.1:10/v1");
    let saved = s.put_json("/api/v1/settings", moved, 200).await;
    assert_eq!(saved["settings"]["llm"]["api_key_set"], json!(false));
    let bad = json!({ "llm": { "base_url": "file:///etc/passwd" } });
    let r = s.put("/api/v1/settings").json(&bad).send().await.unwrap();
    assert_eq!(r.status(), 400);
}

/// An HTTP server on 127.0.0.1 that answers every request 500 with an HTML page holding
/// `secret`: some other service on the kiosk's network. Returns its `/v1` base URL.
async fn internal_page(secret: &'static str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                let _ = tcp.read(&mut buf).await;
                let body = format!("<html><body>{secret}</body></html>");
                let head = format!(
                    "HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/html\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = tcp.write_all(head.as_bytes()).await;
                let _ = tcp.write_all(body.as_bytes()).await;
            });
        }
    });
    format!("http://{addr}/v1")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_check_does_not_echo_what_another_service_answers() {
    let s = Server::start().await;
    let base = internal_page("ROUTER-ADMIN-PAGE-1234").await;
    s.put_json(
        "/api/v1/settings",
        json!({ "tts": { "provider": "openai", "base_url": base, "api_key": "k" } }),
        200,
    )
    .await;
    let r = s
        .post("/api/v1/characters/test-voice")
        .json(&json!({ "voice_provider": "openai", "voice_type": "alloy" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 502);
    let text = r.text().await.unwrap();
    assert!(text.contains("500"), "{text}");
    assert!(!text.contains("ROUTER-ADMIN-PAGE"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_says_whether_the_configured_providers_answer() {
    let s = Server::start().await;
    let fake = fake_openai::FakeOpenAi::start().await;
    let all = |base: &str| {
        json!({
            "llm": { "provider": "openai", "base_url": base },
            "asr": { "provider": "openai", "base_url": base },
            "tts": { "provider": "openai", "base_url": base },
        })
    };
    s.put_json("/api/v1/settings", all(&fake.base_url()), 200)
        .await;
    let h = s.get_json("/api/v1/health", 200).await;
    assert_eq!(h["inference_connected"], json!(true), "{h}");
    let closed = fake_openai::closed_base_url().await;
    s.put_json("/api/v1/settings", all(&closed), 200).await;
    let h = s.get_json("/api/v1/health", 200).await;
    assert_eq!(h["inference_connected"], json!(false), "{h}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alsa_plugin_string_is_refused_on_save() {
    let s = Server::start_with(|c| c.devices = docent::config::DeviceMode::None).await;
    for name in [
        "file:'|touch /tmp/docent-pwned',raw",
        "plug:{type file slave.pcm null file \"|id\"}",
        "hw:0 ",
    ] {
        for path in ["audio.playback_device", "audio.capture_device"] {
            let r = s
                .put("/api/v1/config/launch")
                .json(&json!({ "params": [{ "path": path, "value": name }] }))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 400, "{path} = {name}");
        }
    }
    let ok = json!({ "params": [{ "path": "audio.playback_device",
                                  "value": "plughw:CARD=Headphones,DEV=0" }] });
    s.put_json("/api/v1/config/launch", ok, 200).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_image_store_takes_only_images_and_serves_them_inert() {
    let s = Server::start_with(|c| c.access.admin_password = Some(PW.into())).await;
    let t = token(&s).await;
    let svg = br#"<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>"#;
    for (body, claimed) in [
        (&svg[..], "image/svg+xml"),
        (b"<html><script>alert(1)</script></html>", "text/html"),
        (b"<html><script>alert(1)</script></html>", "image/png"),
    ] {
        let r = s
            .put("/api/img/x.svg")
            .bearer_auth(&t)
            .header("content-type", claimed)
            .body(body.to_vec())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 415, "{claimed}");
    }
    assert_eq!(s.get("/api/img/x.svg").send().await.unwrap().status(), 404);

    // A real image, whatever type the client claims, is served as what it is.
    let r = s
        .put("/api/img/p")
        .bearer_auth(&t)
        .header("content-type", "text/html")
        .body(crate::support::PNG.to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    for path in ["/api/img/p", "/api/img/p?again", "/api/img/p"] {
        let r = s.get(path).send().await.unwrap();
        assert_eq!(r.status(), 200);
        let h = r.headers();
        assert_eq!(h["content-type"], "image/png", "{path}");
        assert_eq!(h["x-content-type-options"], "nosniff", "{path}");
        assert!(
            h["content-security-policy"]
                .to_str()
                .unwrap()
                .contains("sandbox"),
            "{path}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_strings_do_not_multiply_cached_images() {
    // Room for about two copies of the image: a query-keyed cache would push `b` out with
    // copies of `a`, and a later delete-and-read would show whether `b` was still cached.
    let image = [crate::support::PNG, &[7u8; 4000]].concat();
    let s = Server::start_with(|c| {
        c.access.admin_password = Some(PW.into());
        c.storage.image_cache_bytes = 2 * image.len() + 2000;
    })
    .await;
    let t = token(&s).await;
    for key in ["a", "b"] {
        let r = s
            .put(&format!("/api/img/{key}"))
            .bearer_auth(&t)
            .body(image.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    assert_eq!(s.get("/api/img/b").send().await.unwrap().status(), 200);
    // The cache is filled after the answer is sent.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    for i in 0..20 {
        let r = s.get(&format!("/api/img/a?v={i}")).send().await.unwrap();
        assert_eq!(r.status(), 200);
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    // `b`'s file goes away behind the cache's back (its record stays): only a cached copy can
    // still answer 200 with the bytes.
    let blobs = s.dir.path().join("blobs");
    let removed = remove_files_of_size(&blobs, image.len() as u64);
    assert!(removed > 0, "found the stored files");
    let r = s.get("/api/img/b").send().await.unwrap();
    assert_eq!(r.status(), 200, "b is still cached");
}

/// Removes every file of `size` bytes under `dir`; returns how many.
fn remove_files_of_size(dir: &std::path::Path, size: u64) -> usize {
    let mut n = 0;
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            n += remove_files_of_size(&path, size);
        } else if entry.metadata().is_ok_and(|m| m.len() == size) {
            std::fs::remove_file(&path).unwrap();
            n += 1;
        }
    }
    n
}
