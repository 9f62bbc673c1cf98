//! A kiosk on a shared LAN: logins limited per real peer and bounded in cost, sessions ended by a
//! password change or "sign out everywhere", settings that cannot inject, images served inert,
//! history bounded.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::support::Server;

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
    let r = login_from(s, None, PW).await;
    assert_eq!(r.status(), 200);
    let cookie = r.headers()["set-cookie"].to_str().unwrap();
    let first = cookie.split(';').next().unwrap();
    first.strip_prefix("docent_session=").unwrap().to_string()
}

async fn signed_in(s: &Server, token: &str) -> bool {
    let v: Value = s
        .get("/api/auth")
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v["authenticated"] == json!(true)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_header_from_an_untrusted_peer_neither_picks_nor_resets_the_counter() {
    let s = Server::start_with(|c| {
        c.admin_password = Some(PW.into());
        c.login_max_failures = 3;
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
        c.admin_password = Some(PW.into());
        c.login_max_failures = 2;
        c.trusted_proxies = vec![std::net::Ipv4Addr::LOCALHOST.into()];
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
            c.admin_password = Some(PW.into());
            c.login_max_failures = 10_000;
            c.login_concurrency = 1;
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
    let s = Server::start_with(|c| c.admin_password = Some(PW.into())).await;
    let old = token(&s).await;
    let dir = s.stop().await;
    // Same password: the session survives the restart.
    let s = Server::start_in(dir, |c| c.admin_password = Some(PW.into())).await;
    assert!(signed_in(&s, &old).await);
    let dir = s.stop().await;
    let s = Server::start_in(dir, |c| c.admin_password = Some("a new password".into())).await;
    assert!(
        !signed_in(&s, &old).await,
        "the old password's session ended"
    );
    let dir = s.stop().await;
    // And going back to the old password does not revive it.
    let s = Server::start_in(dir, |c| c.admin_password = Some(PW.into())).await;
    assert!(!signed_in(&s, &old).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_out_everywhere_ends_the_other_sessions() {
    let s = Server::start_with(|c| c.admin_password = Some(PW.into())).await;
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
    s.put_json("/api/v1/settings", all(&fake.base_url()), 200).await;
    let h = s.get_json("/api/v1/health", 200).await;
    assert_eq!(h["inference_connected"], json!(true), "{h}");
    let closed = fake_openai::closed_base_url().await;
    s.put_json("/api/v1/settings", all(&closed), 200).await;
    let h = s.get_json("/api/v1/health", 200).await;
    assert_eq!(h["inference_connected"], json!(false), "{h}");
}
