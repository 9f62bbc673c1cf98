//! The statuses of states that take a kiosk of their own (a language model that answers or
//! fails, a spent login limit and a certificate named in the configuration, a backup under way,
//! a full data partition) or a long preparation on the probe's kiosk (64 client keys, every
//! event stream taken, another client's session). Each kiosk runs beside the others.

use std::collections::BTreeSet;
use std::time::Duration;

use fake_openai::{Chat, Failure, FakeOpenAi, Speech};
use reqwest::{Method, RequestBuilder};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use super::Pair;
use super::statuses::{INTERNAL_TOKEN, PASSWORD, Probe, config};
use crate::support::Process;
use crate::support::disk::{Tmpfs, fill, unfill};
use crate::support::rauc::{COMPATIBLE, RaucRig, Signer};

/// What a kiosk's probes produced, and what they got wrong.
pub type Outcome = (BTreeSet<Pair>, Vec<String>);

fn outcome(p: Probe) -> Outcome {
    (p.answered(), p.wrong)
}

impl Probe {
    fn admin(&self, m: Method, path: &str) -> RequestBuilder {
        self.http
            .request(m, format!("{}{path}", self.base))
            .bearer_auth(&self.token)
    }

    async fn new_client_key(&mut self, name: &str) -> String {
        let body = self
            .expect(
                "POST client key 201",
                self.admin(Method::POST, "/api/v1/client-keys")
                    .json(&json!({ "name": name })),
                201,
            )
            .await;
        serde_json::from_str::<Value>(&body).unwrap_or_default()["key"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    async fn new_character(&mut self) -> String {
        let body = self
            .expect(
                "POST /api/v1/characters 201",
                self.admin(Method::POST, "/api/v1/characters")
                    .json(&json!({ "name": "Probe" })),
                201,
            )
            .await;
        serde_json::from_str::<Value>(&body).unwrap_or_default()["id"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

/// With the probe's one WebSocket place taken by the session's owner (`key`): another one is
/// 503, another client is 403 on the socket and on the session's tasks, and an upgrade over
/// HTTP/1.0 (which cannot switch protocols) is 426.
pub async fn websockets(p: &mut Probe, session: &str, key: &str) {
    let other = p.new_client_key("another client").await;
    let ws = |key: &str| {
        let mut upgrade = format!("ws://{}/ws/chat/{session}", p.server.addr)
            .into_client_request()
            .unwrap();
        upgrade
            .headers_mut()
            .insert("authorization", format!("Bearer {key}").parse().unwrap());
        upgrade
    };
    for (what, key, status) in [
        (
            "a second WebSocket (connections.max_websockets = 1)",
            key,
            503,
        ),
        ("another client's session", other.as_str(), 403),
    ] {
        match tokio_tungstenite::connect_async(ws(key)).await {
            Err(tokio_tungstenite::tungstenite::Error::Http(res))
                if res.status().as_u16() == status => {}
            Err(e) => p
                .wrong
                .push(format!("WebSocket, {what}: wanted {status}, got {e}")),
            Ok(_) => p
                .wrong
                .push(format!("WebSocket, {what}: wanted {status}, got 101")),
        }
    }
    p.expect(
        "GET /api/v1/sessions/{id}/tasks of another client's session 403",
        p.request("get", &format!("/api/v1/sessions/{session}/tasks"))
            .bearer_auth(&other),
        403,
    )
    .await;
    let mut tcp = tokio::net::TcpStream::connect(p.server.addr).await.unwrap();
    let request = format!(
        "GET /ws/chat/{session} HTTP/1.0\r\nHost: {}\r\nConnection: Upgrade\r\n\
         Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: Bearer {key}\r\n\r\n",
        p.server.addr
    );
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), tcp.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer);
    if !answer.starts_with("HTTP/1.0 426") && !answer.starts_with("HTTP/1.1 426") {
        p.wrong.push(format!(
            "WebSocket upgrade over HTTP/1.0: wanted 426, got {answer}"
        ));
    }
}

/// On the probe's kiosk: the image store's keys and revalidation, every console event stream
/// taken, 64 client keys, a launch parameter and an uploaded certificate.
pub async fn on_the_probe(p: &mut Probe) {
    // The site image store: a key that is none, a stored image revalidated.
    for m in [Method::GET, Method::PUT, Method::DELETE] {
        let mut req = p.admin(m.clone(), "/api/img/%FF");
        if m == Method::PUT {
            req = req
                .header("content-type", "image/png")
                .body(crate::support::PNG.to_vec());
        }
        p.expect(&format!("{m} /api/img/%FF 400"), req, 400).await;
    }
    p.expect(
        "PUT /api/img/probe.png 200",
        p.admin(Method::PUT, "/api/img/probe.png")
            .header("content-type", "image/png")
            .body(crate::support::PNG.to_vec()),
        200,
    )
    .await;
    // A key with no image (schemathesis' generated keys do not always meet one).
    p.expect(
        "GET /api/img/absent.png 404",
        p.request("get", "/api/img/absent.png"),
        404,
    )
    .await;
    match p.request("get", "/api/img/probe.png").send().await {
        Ok(res) if res.headers().contains_key("etag") => {
            let etag = res.headers()["etag"].clone();
            p.expect(
                "GET /api/img/probe.png 304",
                p.request("get", "/api/img/probe.png")
                    .header("if-none-match", etag),
                304,
            )
            .await;
        }
        other => p
            .wrong
            .push(format!("GET /api/img/probe.png: no ETag: {other:?}")),
    }

    // The console's event streams: 8 at once, then 503.
    let mut streams = Vec::new();
    for _ in 0..8 {
        match p.admin(Method::GET, "/api/v1/kiosk/events").send().await {
            Ok(res) if res.status() == 200 => streams.push(res),
            other => p.wrong.push(format!("GET /api/v1/kiosk/events: {other:?}")),
        }
    }
    p.expect(
        "GET /api/v1/kiosk/events, every stream taken 503",
        p.admin(Method::GET, "/api/v1/kiosk/events"),
        503,
    )
    .await;
    drop(streams);

    // Client keys up to the limit, then 409.
    let mut made = 0;
    loop {
        let res = p
            .admin(Method::POST, "/api/v1/client-keys")
            .json(&json!({ "name": format!("key {made}") }))
            .send()
            .await
            .unwrap();
        match res.status().as_u16() {
            201 if made < 64 => made += 1,
            409 => break,
            other => {
                p.wrong.push(format!(
                    "POST /api/v1/client-keys after {made} more: wanted 201 then 409, got {other}"
                ));
                break;
            }
        }
    }

    p.expect(
        "PUT /api/v1/config/launch 200",
        p.admin(Method::PUT, "/api/v1/config/launch")
            .json(&json!({ "params": [{ "path": "audio.playback_device", "value": "default" }] })),
        200,
    )
    .await;
    let pair = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).unwrap();
    p.expect(
        "PUT /api/v1/tls/certificate 200",
        p.admin(Method::PUT, "/api/v1/tls/certificate")
            .json(&json!({
                "cert_pem": pair.cert.pem(),
                "key_pem": pair.signing_key.serialize_pem(),
            })),
        200,
    )
    .await;
}

/// A kiosk whose language model and voice are an OpenAI-compatible fake that answers, fails
/// (500), is unavailable (503) and hangs; then a provider address where nothing listens.
pub async fn providers() -> Outcome {
    let fake = FakeOpenAi::start().await;
    let mut p = Probe::launch(
        Process::new().args(["--devices", "none"]),
        &config("providers.first_byte_timeout_ms = 500"),
    )
    .await;
    let settings = |base: &str| {
        json!({
            "llm": { "provider": "openai", "base_url": base, "model": "fake-chat" },
            "tts": { "provider": "openai", "base_url": base },
        })
    };
    p.expect(
        "PUT /api/v1/settings (the fake) 200",
        p.admin(Method::PUT, "/api/v1/settings")
            .json(&settings(&fake.base_url())),
        200,
    )
    .await;
    let c = p.new_character().await;
    let ask = format!("/api/v1/characters/{c}/knowledge/ask");
    let voice = json!({ "voice_provider": "openai", "voice_type": "alloy" });
    let question = json!({ "question": "When does the museum open?" });
    let failing = |f: Failure| Speech {
        failure: Some(f),
        ..Speech::millis(200)
    };
    for (what, status, speech, chat) in [
        ("answers", 200, Speech::millis(200), Chat::reply("At nine.")),
        (
            "fails",
            502,
            failing(Failure::Status(500, "boom".into())),
            Chat::failing(Failure::Status(500, "boom".into())),
        ),
        (
            "is unavailable",
            503,
            failing(Failure::Status(503, "overloaded".into())),
            Chat::failing(Failure::Status(503, "overloaded".into())),
        ),
        (
            "hangs",
            504,
            failing(Failure::Hang),
            Chat::failing(Failure::Hang),
        ),
    ] {
        fake.set_speech(speech);
        fake.set_chat(chat);
        p.expect(
            &format!("POST test-voice, the provider {what}"),
            p.admin(Method::POST, "/api/v1/characters/test-voice")
                .json(&voice),
            status,
        )
        .await;
        p.expect(
            &format!("POST knowledge/ask, the language model {what}"),
            p.admin(Method::POST, &ask).json(&question),
            status,
        )
        .await;
    }
    p.expect(
        "GET /api/v1/characters/voices of openai 200",
        p.admin(Method::GET, "/api/v1/characters/voices?provider=openai"),
        200,
    )
    .await;
    p.expect(
        "GET /api/v1/characters/voices of a provider not on this kiosk 503",
        p.admin(Method::GET, "/api/v1/characters/voices?provider=doubao"),
        503,
    )
    .await;
    let closed = fake_openai::closed_base_url().await;
    p.expect(
        "PUT /api/v1/settings (nothing listens) 200",
        p.admin(Method::PUT, "/api/v1/settings")
            .json(&settings(&closed)),
        200,
    )
    .await;
    p.expect(
        "POST /api/v1/settings/test, a provider unreachable 503",
        p.admin(Method::POST, "/api/v1/settings/test"),
        503,
    )
    .await;
    p.expect(
        "POST /api/v1/kiosk/test-sound without devices (no speaker) 503",
        p.admin(Method::POST, "/api/v1/kiosk/test-sound")
            .json(&json!({ "volume": 50 })),
        503,
    )
    .await;
    outcome(p)
}

/// A kiosk that allows one failed login, whose configuration names its certificate files and
/// its devices as real ones (there are none here): a certificate upload is 409, the simulated
/// button 409; a password change, then the login limit spent (429 on a login and on a change);
/// last a restart.
pub async fn logins() -> Outcome {
    let own = tempfile::tempdir().unwrap();
    let pair = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).unwrap();
    let (cert, key) = (own.path().join("c.pem"), own.path().join("k.pem"));
    std::fs::write(&cert, pair.cert.pem()).unwrap();
    std::fs::write(&key, pair.signing_key.serialize_pem()).unwrap();
    let extra = format!(
        "access.login_max_failures = 1\naccess.tls_cert = {:?}\naccess.tls_key = {:?}",
        cert.display().to_string(),
        key.display().to_string()
    );
    let mut p = Probe::launch(Process::new().args(["--devices", "real"]), &config(&extra)).await;
    p.expect(
        "PUT /api/v1/tls/certificate, the configuration names it 409",
        p.admin(Method::PUT, "/api/v1/tls/certificate")
            .json(&json!({
                "cert_pem": pair.cert.pem(),
                "key_pem": pair.signing_key.serialize_pem(),
            })),
        409,
    )
    .await;
    p.expect(
        "POST ptt, the button is a real one 409",
        p.request("post", "/api/v1/internal/device/ptt")
            .bearer_auth(INTERNAL_TOKEN)
            .json(&json!({ "pressed": true })),
        409,
    )
    .await;
    p.expect(
        "POST choose, the touch screen and buttons are real 409",
        p.request("post", "/api/v1/internal/device/choose")
            .bearer_auth(INTERNAL_TOKEN)
            .json(&json!("next")),
        409,
    )
    .await;
    let new = "another-statuses-password";
    p.expect(
        "PUT /api/auth/password 200",
        p.admin(Method::PUT, "/api/auth/password")
            .json(&json!({ "current": PASSWORD, "new": new })),
        200,
    )
    .await;
    for status in [401, 429] {
        p.expect(
            &format!("POST /api/auth wrong password {status}"),
            p.request("post", "/api/auth")
                .json(&json!({ "password": "wrong" })),
            status,
        )
        .await;
    }
    p.expect(
        "PUT /api/auth/password, the login limit spent 429",
        p.admin(Method::PUT, "/api/auth/password")
            .json(&json!({ "current": new, "new": PASSWORD })),
        429,
    )
    .await;
    p.expect(
        "POST /api/v1/system/restart 200",
        p.admin(Method::POST, "/api/v1/system/restart"),
        200,
    )
    .await;
    drop(own);
    outcome(p)
}

/// A kiosk that applies its own content bundle (larger than the probe's bounds) and restarts
/// into it.
pub async fn content() -> Outcome {
    let mut p = Probe::launch(
        Process::new().args(["--devices", "none"]),
        "access.loopback_is_trusted = false\naccess.allow_plain_http_login = true\n",
    )
    .await;
    let bundle = p.content_bundle().await;
    p.expect(
        "POST /api/v1/fleet/content/apply 200",
        p.admin(Method::POST, "/api/v1/fleet/content/apply")
            .header("content-type", "application/octet-stream")
            .body(bundle),
        200,
    )
    .await;
    outcome(p)
}

/// A kiosk with a backup larger than every buffer between its writer and a client that does
/// not read: while that backup is under way another is 409 and so is a restore; then a whole
/// backup is restored (200), and the kiosk restarts into it.
pub async fn maintenance() -> Outcome {
    let mut p = Probe::launch(
        Process::new().args(["--devices", "none"]),
        "access.loopback_is_trusted = false\naccess.allow_plain_http_login = true\n",
    )
    .await;
    let c = p.new_character().await;
    let bundle = p.content_bundle().await;
    let big = [crate::support::PNG, &vec![0u8; 8 << 20]].concat();
    let avatar = reqwest::multipart::Form::new().part(
        "avatar",
        reqwest::multipart::Part::bytes(big).file_name("big.png"),
    );
    p.expect(
        "POST an 8 MB avatar 200",
        p.admin(Method::POST, &format!("/api/v1/characters/{c}/avatar"))
            .multipart(avatar),
        200,
    )
    .await;
    p.expect(
        "POST /api/v1/fleet/content/export 200",
        p.admin(Method::POST, "/api/v1/fleet/content/export")
            .json(&json!({"version": "1", "signing_key": FLEET_SEED})),
        200,
    )
    .await;
    match p.admin(Method::GET, "/api/v1/system/backup").send().await {
        Ok(unread) if unread.status() == 200 => {
            p.expect(
                "GET /api/v1/system/backup, another under way 409",
                p.admin(Method::GET, "/api/v1/system/backup"),
                409,
            )
            .await;
            p.expect(
                "POST /api/v1/system/restore, a backup under way 409",
                p.admin(Method::POST, "/api/v1/system/restore")
                    .header("content-type", "application/octet-stream")
                    .body(vec![0u8; 1024]),
                409,
            )
            .await;
            p.expect(
                "POST /api/v1/fleet/content/export, a backup under way 409",
                p.admin(Method::POST, "/api/v1/fleet/content/export")
                    .json(&json!({"version": "1", "signing_key": FLEET_SEED})),
                409,
            )
            .await;
            p.expect(
                "POST /api/v1/fleet/content/apply, a backup under way 409",
                p.admin(Method::POST, "/api/v1/fleet/content/apply")
                    .header("content-type", "application/octet-stream")
                    .body(bundle),
                409,
            )
            .await;
            drop(unread);
        }
        other => p
            .wrong
            .push(format!("GET /api/v1/system/backup: {other:?}")),
    }
    // The unread backup's writer notices that its client went away and lets go.
    let mut archive = None;
    for _ in 0..100 {
        let res = p
            .admin(Method::GET, "/api/v1/system/backup")
            .send()
            .await
            .unwrap();
        if res.status() == 200 {
            archive = res.bytes().await.ok();
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    match archive {
        Some(archive) => {
            p.expect(
                "POST /api/v1/system/restore 200",
                p.admin(Method::POST, "/api/v1/system/restore")
                    .header("content-type", "application/octet-stream")
                    .body(archive),
                200,
            )
            .await;
        }
        None => p.wrong.push("no whole backup after the unread one".into()),
    }
    outcome(p)
}

/// A fleet signing key (base64 of a 32-byte Ed25519 seed) for the content export.
const FLEET_SEED: &str = "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=";

impl Probe {
    /// This kiosk's content exported as a bundle, and the kiosk told the fleet's key that
    /// signed it, so that the bundle applies.
    async fn content_bundle(&mut self) -> Vec<u8> {
        use base64::Engine as _;
        use ring::signature::KeyPair as _;
        let pair = ring::signature::Ed25519KeyPair::from_seed_unchecked(&[7; 32]).unwrap();
        let public = base64::engine::general_purpose::STANDARD.encode(pair.public_key().as_ref());
        self.expect(
            "PUT the fleet's public key 200",
            self.admin(Method::PUT, "/api/v1/settings")
                .json(&json!({"fleet": {"content_public_key": public}})),
            200,
        )
        .await;
        let res = self
            .admin(Method::POST, "/api/v1/fleet/content/export")
            .json(&json!({"version": "1", "signing_key": FLEET_SEED}))
            .send()
            .await
            .unwrap();
        res.bytes().await.unwrap().to_vec()
    }
}

/// Free space on the kiosk's partition while it is full.
const RESERVE: u64 = 1 << 20;

/// A kiosk on a tmpfs filled below its reserve: a purge, a backup and a restore are 507.
/// Mounting needs root: elsewhere nothing is probed (and the full test names these statuses).
pub async fn full_disk() -> Outcome {
    let Some(fs) = Tmpfs::mount(16) else {
        return (BTreeSet::new(), Vec::new());
    };
    let mut p = Probe::launch(
        Process::new()
            .args(["--devices", "none"])
            .data_dir(&fs.path.join("data")),
        &config(&format!("storage.data_reserve_bytes = {RESERVE}")),
    )
    .await;
    let c = p.new_character().await;
    fill(&fs.path, RESERVE / 2);
    p.expect(
        "DELETE messages on a full disk 507",
        p.admin(
            Method::DELETE,
            &format!("/api/v1/characters/{c}/conversations/messages"),
        ),
        507,
    )
    .await;
    p.expect(
        "DELETE a visit on a full disk 507",
        p.admin(
            Method::DELETE,
            &format!("/api/v1/characters/{c}/conversations/visits/{c}"),
        ),
        507,
    )
    .await;
    p.expect(
        "GET /api/v1/system/backup on a full disk 507",
        p.admin(Method::GET, "/api/v1/system/backup"),
        507,
    )
    .await;
    p.expect(
        "POST /api/v1/system/restore on a full disk 507",
        p.admin(Method::POST, "/api/v1/system/restore")
            .header("content-type", "application/octet-stream")
            .body(vec![0u8; 1024]),
        507,
    )
    .await;
    p.expect(
        "POST /api/v1/system/update on a full disk 507",
        p.admin(Method::POST, "/api/v1/system/update")
            .header("content-type", "application/octet-stream")
            .body(vec![0u8; 1024]),
        507,
    )
    .await;
    p.expect(
        "POST /api/v1/fleet/content/export on a full disk 507",
        p.admin(Method::POST, "/api/v1/fleet/content/export")
            .json(&json!({"version": "1", "signing_key": FLEET_SEED})),
        507,
    )
    .await;
    p.expect(
        "POST /api/v1/fleet/content/apply on a full disk 507",
        p.admin(Method::POST, "/api/v1/fleet/content/apply")
            .header("content-type", "application/octet-stream")
            .body(vec![0u8; 1024]),
        507,
    )
    .await;
    unfill(&fs.path);
    let result = outcome(p);
    drop(fs);
    result
}

/// A kiosk whose RAUC answers (a real one on a bus of its own): a bundle's verdict, an upload
/// while another is under way, an install, one with nothing to install, and a reboot.
pub async fn updates() -> Outcome {
    let rig = RaucRig::start();
    let bundle = std::fs::read(rig.bundle("probe", COMPATIBLE, "9.0.0", Signer::Kiosk)).unwrap();
    let reboot = rig.dir.path().join("reboot");
    let mut p = Probe::launch(
        Process::new()
            .args(["--devices", "none"])
            .env("DBUS_SYSTEM_BUS_ADDRESS", &rig.address),
        &config("")
            .replace(
                "[update]\n",
                &format!("[update]\nreboot_request = \"{}\"\n", reboot.display()),
            )
            .replace("max_bundle_bytes = 65536", "max_bundle_bytes = 1048576"),
    )
    .await;
    p.expect(
        "POST /api/v1/system/update/install, nothing uploaded 409",
        p.admin(Method::POST, "/api/v1/system/update/install"),
        409,
    )
    .await;
    // An upload that has sent its first bytes and waits: the next one is 409.
    let (more, rest) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(1);
    more.send(Ok(vec![0u8; 1024])).await.unwrap();
    let slow = p
        .admin(Method::POST, "/api/v1/system/update")
        .header("content-type", "application/octet-stream")
        .body(reqwest::Body::wrap_stream(
            tokio_stream::wrappers::ReceiverStream::new(rest),
        ))
        .send();
    let slow = tokio::spawn(slow);
    tokio::time::sleep(Duration::from_millis(300)).await;
    p.expect(
        "POST /api/v1/system/update while another is received 409",
        p.admin(Method::POST, "/api/v1/system/update")
            .header("content-type", "application/octet-stream")
            .body(bundle.clone()),
        409,
    )
    .await;
    drop(more);
    let _ = slow.await;
    p.expect(
        "POST /api/v1/system/update 200",
        p.admin(Method::POST, "/api/v1/system/update")
            .header("content-type", "application/octet-stream")
            .body(bundle),
        200,
    )
    .await;
    p.expect(
        "POST /api/v1/system/update/install 202",
        p.admin(Method::POST, "/api/v1/system/update/install")
            .json(&json!({ "force": false })),
        202,
    )
    .await;
    p.expect(
        "POST /api/v1/system/reboot 202",
        p.admin(Method::POST, "/api/v1/system/reboot"),
        202,
    )
    .await;
    let result = outcome(p);
    drop(rig);
    result
}
