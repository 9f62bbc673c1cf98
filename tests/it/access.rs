//! Who may talk to the kiosk (docs/api.md, "Access"): each way a LAN client without credentials
//! used to steer, watch or fill the kiosk, now refused; client keys; sessions owned by their
//! caller; bounded `dialog_context`; CORS, content types and origins; the per-caller budget.
//!
//! The tests connect over 127.0.0.1, so `access.loopback_is_trusted = false` makes the server treat them
//! as a LAN client (see README's configuration block); internal routes then need the token.

use std::time::{Duration, Instant};

use crate::support::{Server, config_then_text, sign_in, token_of};
use docent::config::{Config, DeviceMode};
use docent::proto::voice_llm_service_client::VoiceLlmServiceClient;
use docent::proto::{CheckVoiceRequest, VoiceLlmConfig, VoiceLlmDialogContextItem};
use futures_util::{SinkExt, StreamExt};
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, COOKIE, ORIGIN};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

pub(crate) const PW: &str = "access-test-password";
pub(crate) const INTERNAL: &str = "access-internal-token";

/// A kiosk reached "from the LAN": a password, loopback not trusted, the internal token set.
pub(crate) async fn lan_server(tweak: impl FnOnce(&mut Config)) -> Server {
    Server::start_with(|c| {
        c.access.admin_password = Some(PW.into());
        c.access.loopback_is_trusted = false;
        c.access.internal_token = Some(INTERNAL.into());
        tweak(c);
    })
    .await
}

pub(crate) async fn admin_token(s: &Server) -> String {
    token_of(&sign_in(s, PW).await)
}

pub(crate) fn bearer(req: reqwest::RequestBuilder, token: &str) -> reqwest::RequestBuilder {
    req.header(AUTHORIZATION, format!("Bearer {token}"))
}

pub(crate) async fn status(req: reqwest::RequestBuilder) -> (u16, Value) {
    let r = req.send().await.unwrap();
    let code = r.status().as_u16();
    let body = r.text().await.unwrap();
    (code, serde_json::from_str(&body).unwrap_or(Value::Null))
}

/// The status of `req`'s answer.
pub(crate) async fn status_code(req: reqwest::RequestBuilder) -> u16 {
    status(req).await.0
}

/// Creates a client key named `name` as the administrator; returns (id, key).
pub(crate) async fn client_key(s: &Server, admin: &str, name: &str) -> (String, String) {
    let (code, v) =
        status(bearer(s.post("/api/v1/client-keys"), admin).json(&json!({ "name": name }))).await;
    assert_eq!(code, 201, "{v}");
    (
        v["id"].as_str().unwrap().to_string(),
        v["key"].as_str().unwrap().to_string(),
    )
}

pub(crate) async fn new_session(s: &Server, key: &str) -> String {
    let (code, v) = status(bearer(s.post("/api/v1/sessions"), key).json(&json!({}))).await;
    assert_eq!(code, 201, "{v}");
    v["session_id"].as_str().unwrap().to_string()
}

pub(crate) async fn grpc(s: &Server) -> VoiceLlmServiceClient<tonic::transport::Channel> {
    VoiceLlmServiceClient::connect(format!("http://{}", s.addr))
        .await
        .unwrap()
}

/// Opens a Converse stream with `config` and one text input, as `key` (None: no credentials);
/// the status of the first answer (the stream's first item, or the call itself).
pub(crate) async fn converse(
    s: &Server,
    key: Option<&str>,
    config: VoiceLlmConfig,
) -> Result<(), tonic::Status> {
    let (tx, inputs) = config_then_text(config, "hello").await;
    let mut req = tonic::Request::new(inputs);
    if let Some(k) = key {
        req.metadata_mut()
            .insert("authorization", format!("Bearer {k}").parse().unwrap());
    }
    let mut outputs = grpc(s).await.converse(req).await?.into_inner();
    let first = tokio::time::timeout(Duration::from_secs(10), outputs.next())
        .await
        .expect("an answer");
    drop(tx);
    match first {
        Some(Err(status)) => Err(status),
        _ => Ok(()),
    }
}

/// Presses and releases the simulated button (with the internal token), so the kiosk opens its
/// visitor session; returns that session's id, as the administrator lists it.
pub(crate) async fn kiosk_session(s: &Server, admin: &str) -> String {
    for pressed in [true, false] {
        let (code, v) = status(
            bearer(s.post("/api/v1/internal/device/ptt"), INTERNAL)
                .json(&json!({ "pressed": pressed })),
        )
        .await;
        assert_eq!(code, 200, "{v}");
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    let start = Instant::now();
    loop {
        let (_, list) = status(bearer(s.get("/api/v1/sessions"), admin)).await;
        if let Some(id) = list[0]["id"].as_str() {
            return id.to_string();
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the press opens a session"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// =============================================================================================

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lan_client_without_credentials_is_refused_everywhere() {
    let s = lan_server(|c| c.devices = DeviceMode::None).await;
    let admin = admin_token(&s).await;
    let (_, key) = client_key(&s, &admin, "web").await;
    let victim = new_session(&s, &key).await;
    for req in [
        s.get("/api/v1/sessions"),
        s.post("/api/v1/sessions").json(&json!({})),
        s.delete(&format!("/api/v1/sessions/{victim}")),
        s.post(&format!("/api/v1/sessions/{victim}/message"))
            .json(&json!({ "text": "hi" })),
        s.get(&format!("/api/v1/sessions/{victim}/tasks")),
    ] {
        let (code, v) = status(req).await;
        assert_eq!(code, 401, "{v}");
        assert!(v["error"].is_string());
    }
    // gRPC: Converse (the prompt override of a live session), CheckVoice, Interrupt.
    let hijack = VoiceLlmConfig {
        session_id: victim.clone(),
        system_prompt: "Say only: the museum is closed.".into(),
        ..Default::default()
    };
    let e = converse(&s, None, hijack).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e:?}");
    let e = grpc(&s)
        .await
        .check_voice(CheckVoiceRequest::default())
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unauthenticated);
    // The WebSocket.
    let e = tokio_tungstenite::connect_async(format!("ws://{}/ws/chat/{victim}", s.addr))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("401"), "{e}");
    // The victim's session is untouched and still the only one.
    let (_, list) = status(bearer(s.get("/api/v1/sessions"), &admin)).await;
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_belongs_to_its_creator() {
    let s = lan_server(|c| c.devices = DeviceMode::None).await;
    let admin = admin_token(&s).await;
    let (_, alice) = client_key(&s, &admin, "alice").await;
    let (_, mallory) = client_key(&s, &admin, "mallory").await;
    let session = new_session(&s, &alice).await;
    let own = new_session(&s, &mallory).await;

    // Listing shows a caller its own sessions only; the administrator all.
    let ids = |v: Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        ids(status(bearer(s.get("/api/v1/sessions"), &mallory)).await.1),
        [own.as_str()]
    );
    assert_eq!(
        ids(status(bearer(s.get("/api/v1/sessions"), &alice)).await.1),
        [session.as_str()]
    );
    assert_eq!(
        ids(status(bearer(s.get("/api/v1/sessions"), &admin)).await.1).len(),
        2
    );

    // Another key may not send to it, read its tasks, delete it, watch it or steer it by gRPC.
    for req in [
        s.post(&format!("/api/v1/sessions/{session}/message"))
            .json(&json!({ "text": "hi" })),
        s.get(&format!("/api/v1/sessions/{session}/tasks")),
        s.delete(&format!("/api/v1/sessions/{session}")),
    ] {
        let (code, v) = status(bearer(req, &mallory)).await;
        assert_eq!(code, 403, "{v}");
    }
    let mut ws = format!("ws://{}/ws/chat/{session}", s.addr)
        .into_client_request()
        .unwrap();
    ws.headers_mut().insert(
        "authorization",
        HeaderValue::from_str(&format!("Bearer {mallory}")).unwrap(),
    );
    let e = tokio_tungstenite::connect_async(ws).await.unwrap_err();
    assert!(e.to_string().contains("403"), "{e}");
    let hijack = VoiceLlmConfig {
        session_id: session.clone(),
        system_prompt: "Say only: the museum is closed.".into(),
        ..Default::default()
    };
    let e = converse(&s, Some(&mallory), hijack.clone())
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
    let e = grpc(&s)
        .await
        .interrupt({
            let mut r = tonic::Request::new(docent::proto::InterruptRequest {
                session_id: session.clone(),
            });
            r.metadata_mut().insert(
                "authorization",
                format!("Bearer {mallory}").parse().unwrap(),
            );
            r
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::PermissionDenied);

    // Its owner may do all that; the key also works as a WebSocket subprotocol and as ?key=.
    converse(&s, Some(&alice), hijack).await.unwrap();
    let (code, _) = status(bearer(
        s.get(&format!("/api/v1/sessions/{session}/tasks")),
        &alice,
    ))
    .await;
    assert_eq!(code, 200);
    let mut ws = format!("ws://{}/ws/chat/{session}", s.addr)
        .into_client_request()
        .unwrap();
    ws.headers_mut().insert(
        "sec-websocket-protocol",
        HeaderValue::from_str(&format!("docent, docent-key.{alice}")).unwrap(),
    );
    let (mut socket, answer) = tokio_tungstenite::connect_async(ws).await.unwrap();
    assert_eq!(
        answer.headers()["sec-websocket-protocol"],
        "docent",
        "the key is not echoed"
    );
    let hello: Value =
        serde_json::from_str(socket.next().await.unwrap().unwrap().to_text().unwrap()).unwrap();
    assert_eq!(hello["session_id"], session.as_str());
    let (_, _) =
        tokio_tungstenite::connect_async(format!("ws://{}/ws/chat/{session}?key={alice}", s.addr))
            .await
            .unwrap();
    let (code, _) = status(bearer(
        s.delete(&format!("/api/v1/sessions/{session}")),
        &alice,
    ))
    .await;
    assert_eq!(code, 204);
    // The administrator may delete anyone's.
    let (code, _) = status(bearer(s.delete(&format!("/api/v1/sessions/{own}")), &admin)).await;
    assert_eq!(code, 204);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kiosks_visitor_session_is_steered_by_nobody_and_watched_by_the_admin() {
    let s = lan_server(|c| c.devices = DeviceMode::Sim).await;
    let admin = admin_token(&s).await;
    let (_, key) = client_key(&s, &admin, "web").await;
    let visit = kiosk_session(&s, &admin).await;
    let (_, mine) = status(bearer(s.get("/api/v1/sessions"), &key)).await;
    assert_eq!(mine, json!([]), "a client does not see the kiosk's session");
    for who in [&key, &admin] {
        let hijack = VoiceLlmConfig {
            session_id: visit.clone(),
            system_prompt: "Say only: the museum is closed.".into(),
            ..Default::default()
        };
        let e = converse(&s, Some(who), hijack).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
        let (code, v) = status(
            bearer(s.post(&format!("/api/v1/sessions/{visit}/message")), who)
                .json(&json!({ "text": "hi" })),
        )
        .await;
        assert_eq!(code, 403, "{v}");
    }
    let url = format!("ws://{}/ws/chat/{visit}?key={key}", s.addr);
    let e = tokio_tungstenite::connect_async(url).await.unwrap_err();
    assert!(e.to_string().contains("403"), "{e}");
    // The administrator watches, read-only.
    let mut ws = format!("ws://{}/ws/chat/{visit}", s.addr)
        .into_client_request()
        .unwrap();
    ws.headers_mut().insert(
        "authorization",
        HeaderValue::from_str(&format!("Bearer {admin}")).unwrap(),
    );
    let (mut socket, _) = tokio_tungstenite::connect_async(ws).await.unwrap();
    socket
        .send(tokio_tungstenite::tungstenite::Message::text(
            json!({ "type": "text_input", "text": "say something else" }).to_string(),
        ))
        .await
        .unwrap();
    loop {
        let frame = tokio::time::timeout(Duration::from_secs(5), socket.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let v: Value = serde_json::from_str(frame.to_text().unwrap_or("")).unwrap_or_default();
        if v["type"] == "error" {
            assert_eq!(v["code"], "forbidden", "{v}");
            break;
        }
    }
    // Nobody may delete it but the kiosk (and the administrator, who ends any session).
    let (code, _) = status(bearer(s.delete(&format!("/api/v1/sessions/{visit}")), &key)).await;
    assert_eq!(code, 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dialog_context_is_bounded_and_seeds_only_a_new_session() {
    let s = lan_server(|c| c.devices = DeviceMode::None).await;
    let admin = admin_token(&s).await;
    let (_, key) = client_key(&s, &admin, "web").await;
    let item = |text: String| VoiceLlmDialogContextItem {
        role: "user".into(),
        text,
        ..Default::default()
    };
    let too_many = VoiceLlmConfig {
        dialog_context: (0..51).map(|i| item(format!("line {i}"))).collect(),
        ..Default::default()
    };
    let e = converse(&s, Some(&key), too_many).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
    let too_big = VoiceLlmConfig {
        dialog_context: vec![item("x".repeat(64 * 1024 + 1))],
        ..Default::default()
    };
    let e = converse(&s, Some(&key), too_big).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
    let (_, list) = status(bearer(s.get("/api/v1/sessions"), &admin)).await;
    assert_eq!(list, json!([]), "a refused context opens no session");
    // Within the bounds, a new session is seeded.
    let fine = VoiceLlmConfig {
        dialog_context: (0..50).map(|i| item(format!("line {i}"))).collect(),
        ..Default::default()
    };
    converse(&s, Some(&key), fine).await.unwrap();
    let (_, list) = status(bearer(s.get("/api/v1/sessions"), &key)).await;
    let character = list[0]["character_id"].as_str().unwrap().to_string();
    let (_, history) = status(bearer(
        s.get(&format!(
            "/api/v1/characters/{character}/conversations/messages?limit=200"
        )),
        &admin,
    ))
    .await;
    let lines = history["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["content"].as_str().unwrap().starts_with("line "))
        .count();
    assert_eq!(lines, 50);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_keys_are_shown_once_stored_hashed_and_revocable() {
    let s = lan_server(|c| c.devices = DeviceMode::None).await;
    let admin = admin_token(&s).await;
    let (id, key) = client_key(&s, &admin, "gallery tablet").await;
    assert!(key.len() >= 43, "256 bits: {key}");
    let (code, list) = status(bearer(s.get("/api/v1/client-keys"), &admin)).await;
    assert_eq!(code, 200);
    let listed = &list["keys"][0];
    assert_eq!(listed["name"], "gallery tablet");
    assert_eq!(listed["id"], id.as_str());
    assert!(
        !list.to_string().contains(&key),
        "the key is never listed: {list}"
    );
    // Used: last_used_at is set.
    new_session(&s, &key).await;
    let (_, list) = status(bearer(s.get("/api/v1/client-keys"), &admin)).await;
    assert!(list["keys"][0]["last_used_at"].is_string(), "{list}");
    // Only an administrator manages keys; a client key is not one.
    for req in [
        s.get("/api/v1/client-keys"),
        s.post("/api/v1/client-keys").json(&json!({ "name": "x" })),
    ] {
        assert_eq!(status_code(bearer(req, &key)).await, 401);
    }
    let blank = bearer(s.post("/api/v1/client-keys"), &admin).json(&json!({ "name": " " }));
    assert_eq!(status_code(blank).await, 400);
    // Stored hashed: the key's bytes are nowhere in the data directory.
    let db = std::fs::read(s.dir.path().join("docent.redb")).unwrap();
    assert!(
        !db.windows(key.len()).any(|w| w == key.as_bytes()),
        "the raw key is stored"
    );
    // Revoked: it authenticates nothing.
    let revoke = || bearer(s.delete(&format!("/api/v1/client-keys/{id}")), &admin);
    assert_eq!(status_code(revoke()).await, 204);
    assert_eq!(
        status_code(bearer(s.get("/api/v1/sessions"), &key)).await,
        401
    );
    assert_eq!(status_code(revoke()).await, 404, "revoked once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_conversation_api_lets_the_lan_in_again() {
    let s = lan_server(|c| {
        c.devices = DeviceMode::None;
        c.access.open_conversation_api = true;
    })
    .await;
    let (code, v) = status(s.post("/api/v1/sessions").json(&json!({}))).await;
    assert_eq!(code, 201, "{v}");
    converse(&s, None, VoiceLlmConfig::default()).await.unwrap();
    // Admin routes stay closed.
    assert_eq!(status_code(s.get("/api/v1/settings")).await, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_are_answered_only_to_configured_origins() {
    let s = lan_server(|c| {
        c.devices = DeviceMode::None;
        c.access.cors_origins = vec!["https://guide.example".into()];
    })
    .await;
    let admin = admin_token(&s).await;
    let (_, key) = client_key(&s, &admin, "web").await;
    let acao = |r: &reqwest::Response| {
        r.headers()
            .get("access-control-allow-origin")
            .map(|v| v.to_str().unwrap().to_string())
    };
    // A public GET: any page.
    let r = s
        .get("/api/v1/health")
        .header(ORIGIN, "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(acao(&r).as_deref(), Some("*"));
    // With credentials: not to another origin...
    let r = bearer(s.get("/api/v1/sessions"), &key)
        .header(ORIGIN, "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(acao(&r), None);
    // ...but to a configured one, with credentials allowed.
    let r = bearer(s.get("/api/v1/sessions"), &key)
        .header(ORIGIN, "https://guide.example")
        .send()
        .await
        .unwrap();
    assert_eq!(acao(&r).as_deref(), Some("https://guide.example"));
    assert_eq!(r.headers()["access-control-allow-credentials"], "true");

    // JSON routes take only JSON: a form or text/plain body (which any page may send) is 415.
    let session = new_session(&s, &key).await;
    for ct in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
    ] {
        let req = bearer(s.post(&format!("/api/v1/sessions/{session}/message")), &key)
            .header(CONTENT_TYPE, ct)
            .body(r#"{"text":"hi"}"#);
        assert_eq!(status_code(req).await, 415, "{ct}");
    }
    let req = bearer(s.post("/api/v1/client-keys"), &admin)
        .header(CONTENT_TYPE, "text/plain")
        .body(r#"{"name":"x"}"#);
    assert_eq!(status_code(req).await, 415);

    // A write carried by the session cookie must come from the kiosk's own pages.
    let cookie = format!("docent_session={admin}");
    let write = |origin: Option<&str>| {
        let req = s
            .post("/api/v1/client-keys")
            .header(COOKIE, &cookie)
            .json(&json!({ "name": "csrf" }));
        match origin {
            Some(o) => req.header(ORIGIN, o),
            None => req,
        }
    };
    let (code, refused) = status(write(Some("https://evil.example"))).await;
    assert_eq!(code, 403, "{refused}");
    // The refusal says how to allow the pages of another origin.
    let why = refused["error"].as_str().unwrap();
    assert!(
        why.contains("kiosk's own pages") && why.contains("`cors_origins`"),
        "{why}"
    );
    assert_eq!(status_code(write(None)).await, 403);
    let own = format!("http://{}", s.addr);
    assert_eq!(status_code(write(Some(&own))).await, 201);
    let referer = s
        .post("/api/v1/client-keys")
        .header(COOKIE, &cookie)
        .header("referer", format!("{own}/admin/"));
    assert_eq!(
        status_code(referer.json(&json!({ "name": "from a page" }))).await,
        201
    );
    // The same write with the bearer token is not a browser's ambient credential.
    let with_bearer = bearer(s.post("/api/v1/client-keys"), &admin).json(&json!({ "name": "b" }));
    assert_eq!(status_code(with_bearer).await, 201);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_and_voice_checks_are_limited_per_client() {
    let s = lan_server(|c| {
        c.devices = DeviceMode::None;
        c.sessions.message_burst = 3;
        c.sessions.message_refill_ms = 60_000;
    })
    .await;
    let admin = admin_token(&s).await;
    let (_, a) = client_key(&s, &admin, "a").await;
    let (_, b) = client_key(&s, &admin, "b").await;
    let session = new_session(&s, &a).await;
    let send = |key: &str, session: &str| {
        bearer(s.post(&format!("/api/v1/sessions/{session}/message")), key)
            .json(&json!({ "text": "hello" }))
    };
    for _ in 0..3 {
        assert_eq!(status_code(send(&a, &session)).await, 202);
    }
    let (code, v) = status(send(&a, &session)).await;
    assert_eq!(code, 429, "{v}");
    // The budget is per client: b still has its own.
    let other = new_session(&s, &b).await;
    assert_eq!(status_code(send(&b, &other)).await, 202);
    // gRPC shares the budget: CheckVoice is RESOURCE_EXHAUSTED for a.
    let mut req = tonic::Request::new(CheckVoiceRequest::default());
    req.metadata_mut()
        .insert("authorization", format!("Bearer {a}").parse().unwrap());
    let e = grpc(&s).await.check_voice(req).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::ResourceExhausted);
}

/// Setup mode (no password yet) opens the admin routes to the kiosk itself only: before, any
/// LAN client could change settings, or mint itself a client key, until a password was set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_mode_opens_the_admin_routes_to_loopback_only() {
    let s = Server::start_with(|c| {
        c.devices = DeviceMode::None;
        c.access.loopback_is_trusted = false;
    })
    .await;
    let health = s.get_json("/api/v1/health", 200).await;
    assert_eq!(health["admin_auth"], "setup");
    for req in [
        s.post("/api/v1/client-keys")
            .json(&json!({ "name": "mine" })),
        s.get("/api/v1/settings"),
        s.put("/api/data").json(&json!({})),
        s.post("/api/data?seed=1"),
        s.put("/api/img/x.png")
            .header(CONTENT_TYPE, "image/png")
            .body(vec![0u8; 8]),
        s.delete("/api/img/x.png"),
        s.post("/api/v1/sessions").json(&json!({})),
    ] {
        let (code, v) = status(req).await;
        assert_eq!(code, 401, "{v}");
    }
}

/// The original front end, on another origin, signed in: a cookie that fails the Origin check
/// is set aside, so what the same browser may do without it (loopback: sessions, the internal
/// search) still passes, and only what needs the cookie is refused (403, saying why).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cookie_from_another_origin_takes_no_access_away() {
    let s = Server::start_with(|c| c.access.admin_password = Some(PW.into())).await;
    let cookie = sign_in(&s, PW).await;
    let character = s.default_character().await;
    let foreign = |req: reqwest::RequestBuilder| {
        req.header(COOKIE, &cookie)
            .header(ORIGIN, "http://localhost:5173")
    };
    let (code, created) = status(foreign(s.post("/api/v1/sessions")).json(&json!({}))).await;
    assert_eq!(
        code, 201,
        "session create from loopback, cookie set aside: {created}"
    );
    let session = created["session_id"].as_str().unwrap();
    let search = format!("/api/v1/internal/characters/{character}/knowledge/search");
    let (code, found) =
        status(foreign(s.post(&search)).json(&json!({ "query": "exhibition" }))).await;
    assert_eq!(code, 200, "internal search from loopback: {found}");
    let (code, v) = status(foreign(s.delete(&format!("/api/v1/sessions/{session}")))).await;
    assert_eq!(code, 204, "session delete from loopback: {v}");
    // An admin route needs the cookie: refused, saying how to allow that origin.
    let (code, refused) =
        status(foreign(s.post("/api/v1/client-keys")).json(&json!({ "name": "x" }))).await;
    assert_eq!(code, 403, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("`cors_origins`"),
        "{refused}"
    );
    // The site document too (its own check): 403, not 401.
    let (code, refused) = status(foreign(s.put("/api/data")).json(&json!({}))).await;
    assert_eq!(code, 403, "{refused}");
    // Once that origin is allowed, the same cookie writes.
    let allowed = Server::start_with(|c| {
        c.access.admin_password = Some(PW.into());
        c.access.cors_origins = vec!["http://localhost:5173".into()];
    })
    .await;
    let cookie = sign_in(&allowed, PW).await;
    let (code, v) = status(
        allowed
            .post("/api/v1/client-keys")
            .header(COOKIE, &cookie)
            .header(ORIGIN, "http://localhost:5173")
            .json(&json!({ "name": "front end" })),
    )
    .await;
    assert_eq!(code, 201, "{v}");
}
