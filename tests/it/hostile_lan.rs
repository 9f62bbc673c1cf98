//! A hostile LAN, round 3 (each test names the finding it reproduces): a file of the kiosk read
//! through a voice, memory used up before any credential is checked, places a client can take
//! from the kiosk's visitor, credentials that outlive their revocation. The attacker is a
//! client on 127.0.0.1 with `access.loopback_is_trusted = false` (see `access.rs`).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::access::{
    admin_token, bearer, client_key, converse, grpc, lan_server, new_session, status,
};
use docent::config::DeviceMode;
use docent::proto::{CheckVoiceRequest, VoiceLlmConfig};
use futures_util::StreamExt;
use serde_json::json;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

/// A line of the planted "key", which must never reach a client.
const SECRET_LINE: &str = "SECRET-LINE-c2VjcmV0IGtleSBtYXRlcmlhbA";

/// A voice that climbs from espeak-ng's voice directory to `file` (None without espeak-ng, or
/// when the path would be longer than the 39 characters espeak-ng reads).
fn climbing_voice(file: &std::path::Path) -> Option<String> {
    let out = std::process::Command::new("espeak-ng")
        .arg("--version")
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let data = text.split("Data at:").nth(1)?.trim();
    let depth = std::path::Path::new(data)
        .join("voices")
        .components()
        .count()
        - 1;
    let rel = file.to_str()?.trim_start_matches('/');
    let voice = format!("{}{rel}", "../".repeat(depth));
    (voice.len() <= 39).then_some(voice)
}

// Finding 1 -----------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voice_is_one_the_kiosk_lists_and_no_helper_output_reaches_a_client() {
    let s = lan_server(|c| c.devices = DeviceMode::None).await;
    let admin = admin_token(&s).await;
    let (_, key) = client_key(&s, &admin, "app").await;
    // A private key where a short climb from espeak-ng's voices reaches it, and the exact
    // attack of the report (the board's key is /data/tls/key.pem).
    let planted = std::path::PathBuf::from(format!("/tmp/dv-{}.pem", std::process::id()));
    std::fs::write(
        &planted,
        format!("-----BEGIN PRIVATE KEY-----\n{SECRET_LINE}\n-----END PRIVATE KEY-----\n"),
    )
    .unwrap();
    let mut attacks = vec!["../../../../data/tls/key.pem".to_string()];
    attacks.extend(climbing_voice(&planted));

    let session = new_session(&s, &key).await;
    let mut ws = format!("ws://{}/ws/chat/{session}", s.addr)
        .into_client_request()
        .unwrap();
    ws.headers_mut().insert(
        "authorization",
        HeaderValue::from_str(&format!("Bearer {key}")).unwrap(),
    );
    let (mut watcher, _) = tokio_tungstenite::connect_async(ws).await.unwrap();

    for voice in &attacks {
        // gRPC Converse: the config is refused, no turn runs with it.
        let e = converse(
            &s,
            Some(&key),
            VoiceLlmConfig {
                session_id: session.clone(),
                voice: voice.clone(),
                ..Default::default()
            },
        )
        .await
        .expect_err("a voice the kiosk does not list is refused");
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{voice}: {e:?}");
        assert!(!e.message().contains(SECRET_LINE), "{e:?}");

        // gRPC CheckVoice.
        let mut req = tonic::Request::new(CheckVoiceRequest {
            config: Some(VoiceLlmConfig {
                provider: "local".into(),
                voice: voice.clone(),
                ..Default::default()
            }),
        });
        req.metadata_mut()
            .insert("authorization", format!("Bearer {key}").parse().unwrap());
        let r = grpc(&s).await.check_voice(req).await.unwrap().into_inner();
        assert!(!r.ok, "{r:?}");
        assert!(!r.provider_error.contains(SECRET_LINE), "{r:?}");

        // The administrator's doors: a character, the settings, a voice test (and its sample).
        let (code, v) = status(
            bearer(s.post("/api/v1/characters"), &admin)
                .json(&json!({ "name": "Eve", "voice_provider": "local", "voice_type": voice })),
        )
        .await;
        assert_eq!(code, 400, "character voice_type {voice}: {v}");
        let (code, v) = status(
            bearer(s.put("/api/v1/settings"), &admin)
                .json(&json!({ "tts": { "provider": "local", "voice": voice } })),
        )
        .await;
        assert_eq!(code, 400, "settings tts.voice {voice}: {v}");
        for accept in ["application/json", "audio/wav"] {
            let (code, v) = status(
                bearer(s.post("/api/v1/characters/test-voice"), &admin)
                    .header("accept", accept)
                    .json(&json!({ "voice_provider": "local", "voice_type": voice })),
            )
            .await;
            assert_eq!(code, 400, "test-voice ({accept}) {voice}: {v}");
            assert!(!v.to_string().contains(SECRET_LINE), "{v}");
        }
    }

    // Whatever ran, nothing of the file reached the session's watcher.
    let deadline = Instant::now() + Duration::from_secs(3);
    while let Ok(Some(Ok(frame))) = tokio::time::timeout_at(deadline.into(), watcher.next()).await {
        let text = frame.to_text().unwrap_or("").to_string();
        assert!(
            !text.contains(SECRET_LINE) && !text.contains("Bad voice") && !text.contains("BEGIN"),
            "a helper's output reached a watcher: {text}"
        );
    }
    let _ = std::fs::remove_file(&planted);
}

// Finding 2 and 3 -----------------------------------------------------------------------------

type SlowBody = http_body_util::StreamBody<
    tokio_stream::wrappers::ReceiverStream<
        Result<hyper::body::Frame<bytes::Bytes>, std::convert::Infallible>,
    >,
>;

/// A TCP connection to `server` from the local address `from` (any 127.x.y.z works on Linux:
/// a client that adds addresses at will).
async fn connect_from(from: [u8; 4], server: SocketAddr) -> std::io::Result<tokio::net::TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(SocketAddr::from((std::net::IpAddr::from(from), 0)))?;
    socket.connect(server).await
}

/// An HTTP/2 connection (prior knowledge, as gRPC clients do) from `from`; the task that
/// drives it ends when the server closes it. `ping`: the client PINGs every 300 ms.
async fn h2_from(
    from: [u8; 4],
    server: SocketAddr,
    ping: bool,
) -> Option<(
    hyper::client::conn::http2::SendRequest<SlowBody>,
    tokio::task::JoinHandle<()>,
)> {
    let tcp = connect_from(from, server).await.ok()?;
    let mut builder =
        hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new());
    builder.timer(hyper_util::rt::TokioTimer::new());
    if ping {
        builder
            .keep_alive_interval(Duration::from_millis(300))
            .keep_alive_while_idle(true)
            .keep_alive_timeout(Duration::from_secs(5));
    }
    let (send, conn) = tokio::time::timeout(
        Duration::from_secs(3),
        builder.handshake(hyper_util::rt::TokioIo::new(tcp)),
    )
    .await
    .ok()?
    .ok()?;
    let driver = tokio::spawn(async move {
        let _ = conn.await;
    });
    Some((send, driver))
}

/// A gRPC call to `method` whose body starts with the 5-byte prefix of a message of
/// `claimed` bytes and then trickles (the sender keeps the rest); no credentials.
fn grpc_call(
    server: SocketAddr,
    method: &str,
    claimed: u32,
) -> (
    hyper::Request<SlowBody>,
    tokio::sync::mpsc::Sender<Result<hyper::body::Frame<bytes::Bytes>, std::convert::Infallible>>,
) {
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let mut prefix = vec![0u8];
    prefix.extend_from_slice(&claimed.to_be_bytes());
    prefix.extend_from_slice(&[0u8; 1024]);
    tx.try_send(Ok(hyper::body::Frame::data(bytes::Bytes::from(prefix))))
        .unwrap();
    let req = hyper::Request::post(format!(
        "http://{server}/cyberverse.VoiceLLMService/{method}"
    ))
    .header("content-type", "application/grpc")
    .header("te", "trailers")
    .body(http_body_util::StreamBody::new(
        tokio_stream::wrappers::ReceiverStream::new(rx),
    ))
    .unwrap();
    (req, tx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_is_authenticated_from_its_headers_before_its_body_is_read() {
    let s = lan_server(|c| c.devices = DeviceMode::None).await;
    let (mut send, _driver) = h2_from([127, 0, 0, 1], s.addr, false).await.unwrap();
    for (method, claimed) in [
        ("CheckVoice", 4 << 20),
        ("Interrupt", 4 << 20),
        ("Converse", 1 << 20),
    ] {
        // The body never completes: the answer must not wait for it.
        let (req, _keep) = grpc_call(s.addr, method, claimed);
        let res = tokio::time::timeout(Duration::from_secs(3), send.send_request(req))
            .await
            .unwrap_or_else(|_| panic!("{method}: no answer while the body is incomplete"))
            .unwrap();
        assert_eq!(
            res.headers()
                .get("grpc-status")
                .map(|v| v.to_str().unwrap()),
            Some("16"),
            "{method}: UNAUTHENTICATED at once: {res:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_authenticated_unary_call_is_bounded_to_a_small_message() {
    let s = lan_server(|c| c.devices = DeviceMode::None).await;
    let admin = admin_token(&s).await;
    let (_, key) = client_key(&s, &admin, "app").await;
    // CheckVoice with a 64 KiB config: refused for its size, not decoded.
    let mut req = tonic::Request::new(CheckVoiceRequest {
        config: Some(VoiceLlmConfig {
            system_prompt: "x".repeat(64 * 1024),
            ..Default::default()
        }),
    });
    req.metadata_mut()
        .insert("authorization", format!("Bearer {key}").parse().unwrap());
    let e = grpc(&s).await.check_voice(req).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::OutOfRange, "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_connection_without_a_request_is_closed_whatever_it_pings() {
    let s = lan_server(|c| {
        c.devices = DeviceMode::None;
        c.connections.header_read_timeout_ms = 1_000;
    })
    .await;
    let started = Instant::now();
    let (mut send, driver) = h2_from([127, 0, 0, 1], s.addr, true).await.unwrap();
    // One request, answered; then nothing but PINGs.
    let (req, tx) = grpc_call(s.addr, "CheckVoice", 8);
    drop(tx);
    send.send_request(req).await.unwrap();
    tokio::time::timeout(Duration::from_secs(8), driver)
        .await
        .expect("the server closes a connection that carries no request, PINGs or not")
        .unwrap();
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(900),
        "closed too early: {took:?}"
    );
}

/// A settings write from `from` whose body is half sent: a request in progress until the rest
/// comes (`finish`).
async fn write_in_progress(from: [u8; 4], s: &crate::support::Server, admin: &str) -> TcpStream {
    let mut tcp = connect_from(from, s.addr).await.expect("admitted");
    let head = format!(
        "PUT /api/v1/settings HTTP/1.1\r\nHost: kiosk\r\nAuthorization: Bearer {admin}\r\n\
         Content-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{"
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    tcp
}

/// Sends the rest of `write_in_progress`'s body: whether the write is answered 200.
async fn finish(mut tcp: TcpStream) -> bool {
    if tcp.write_all(b"}").await.is_err() {
        return false;
    }
    let mut reply = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), tcp.read_to_end(&mut reply)).await;
    reply.starts_with(b"HTTP/1.1 200")
}

/// Whether a health request from `from` is answered (false: the connection is closed unanswered).
async fn health_from(from: [u8; 4], server: SocketAddr) -> bool {
    let Ok(mut tcp) = connect_from(from, server).await else {
        return false;
    };
    let request = "GET /api/v1/health HTTP/1.1\r\nHost: kiosk\r\nConnection: close\r\n\r\n";
    if tcp.write_all(request.as_bytes()).await.is_err() {
        return false;
    }
    let mut reply = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), tcp.read_to_end(&mut reply)).await;
    reply.starts_with(b"HTTP/1.1 200")
}

/// Whether the server has closed `tcp` (it sends nothing unasked).
fn closed(tcp: &TcpStream) -> bool {
    let mut byte = [0u8; 1];
    match tcp.try_read(&mut byte) {
        Ok(n) => n == 0,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    }
}

/// Issue 34, finding 8: four addresses of one /24 filled its 128 places and kept every other
/// client of the network (the staff's laptops among the visitors' phones) out until their
/// connections timed out. Now a newcomer takes the place of an idle connection of the address
/// that holds the most; a connection with a request in progress is never closed for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_network_makes_room_for_a_newcomer_and_cuts_no_request() {
    // The caps as shipped: 32 places per address, 128 per /24 (the header timeout longer than
    // the test, so that only a newcomer closes an idle connection).
    let s = lan_server(|c| {
        c.devices = DeviceMode::None;
        c.connections.header_read_timeout_ms = 60_000;
    })
    .await;
    let admin = admin_token(&s).await;
    let busy = write_in_progress([127, 0, 9, 1], &s, &admin).await;
    // The flood: five addresses of the /24 take its places (three each every place it is let
    // have, .1 one of them with the request in progress) and send nothing.
    let mut idle = Vec::new();
    for (host, own) in [(1u8, 31), (2, 32), (3, 32), (4, 20), (5, 12)] {
        for _ in 0..own {
            let tcp = connect_from([127, 0, 9, host], s.addr).await.unwrap();
            idle.push((host, tcp));
        }
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    // A newcomer of the same network is served at once (at its first connection).
    let started = Instant::now();
    assert!(
        health_from([127, 0, 9, 6], s.addr).await,
        "a newcomer of the full /24 is served"
    );
    // An address at its own cap makes room with one of its own idle connections.
    assert!(
        health_from([127, 0, 9, 3], s.addr).await,
        "an address at its cap is served"
    );
    let took = started.elapsed();
    assert!(took < Duration::from_secs(3), "served in {took:?}");
    // Another network is served as before.
    assert!(health_from([127, 0, 10, 1], s.addr).await);
    // The request in progress was not cut: its body ends and it is answered.
    assert!(finish(busy).await, "the write in progress is answered");
    // Two idle connections made room: the newcomer's, one of an address that held the most
    // (32), not of those that held fewer; the address at its cap, one of its own.
    let mut gone: Vec<u8> = idle
        .iter()
        .filter(|(_, tcp)| closed(tcp))
        .map(|(host, _)| *host)
        .collect();
    gone.sort();
    assert_eq!(
        gone.len(),
        2,
        "idle connections closed, by address: {gone:?}"
    );
    assert!(
        gone.contains(&3) && gone.iter().all(|h| [1, 2, 3].contains(h)),
        "idle connections closed, by address: {gone:?}"
    );

    // Where every place holds a request in progress, the newcomer waits: none is cut.
    let s = lan_server(|c| {
        c.devices = DeviceMode::None;
        c.connections.max_per_subnet = 2;
    })
    .await;
    let admin = admin_token(&s).await;
    let first = write_in_progress([127, 0, 9, 1], &s, &admin).await;
    let second = write_in_progress([127, 0, 9, 2], &s, &admin).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !health_from([127, 0, 9, 3], s.addr).await,
        "no place while both are busy"
    );
    assert!(
        finish(first).await && finish(second).await,
        "neither write was cut"
    );
    assert!(health_from([127, 0, 9, 3], s.addr).await, "a place freed");
    // The refusal is counted for the metrics, by the cap it met.
    let metrics = reqwest::Client::new()
        .get(s.url("/metrics"))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("docent_connections_refused_total{reason=\"subnet\"} 1\n"),
        "{metrics}"
    );
}

/// Resident memory of a process, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// One attacker address: as many HTTP/2 connections as it is let have, each with as many
/// streams as it is let open, each a gRPC call or a login with a body that never ends; again
/// and again until `stop`.
async fn attacker(from: [u8; 4], server: SocketAddr, stop: tokio_util::sync::CancellationToken) {
    let mut conns = Vec::new();
    while !stop.is_cancelled() {
        conns.retain(|(_, d): &(_, tokio::task::JoinHandle<()>)| !d.is_finished());
        if conns.len() < 32 {
            match h2_from(from, server, true).await {
                Some(c) => conns.push(c),
                None => tokio::time::sleep(Duration::from_millis(100)).await,
            }
            continue;
        }
        for (send, _) in &mut conns {
            for i in 0..16 {
                let (req, tx) = if i % 4 == 0 {
                    let (tx, rx) = tokio::sync::mpsc::channel(4);
                    let _ = tx.try_send(Ok(hyper::body::Frame::data(bytes::Bytes::from(vec![
                        b' ';
                        1024
                    ]))));
                    let req = hyper::Request::post(format!("http://{server}/api/auth"))
                        .header("content-type", "application/json")
                        .header("content-length", (1u32 << 20).to_string())
                        .body(http_body_util::StreamBody::new(
                            tokio_stream::wrappers::ReceiverStream::new(rx),
                        ))
                        .unwrap();
                    (req, tx)
                } else {
                    grpc_call(server, "CheckVoice", 4 << 20)
                };
                let sent = send.send_request(req);
                // Keep trickling the body for a while.
                tokio::spawn(async move {
                    for _ in 0..20 {
                        if tx
                            .send(Ok(hyper::body::Frame::data(bytes::Bytes::from(vec![
                                0u8;
                                64 * 1024
                            ]))))
                            .await
                            .is_err()
                        {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(250)).await;
                    }
                });
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(Duration::from_secs(10), sent).await;
                });
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_without_credentials_leaves_memory_bounded_and_the_kiosk_answering() {
    let running = crate::support::Process::new()
        .config(&format!(
            "access.admin_password = \"{}\"\naccess.loopback_is_trusted = false\naccess.internal_token = \"{}\"\n",
            crate::access::PW,
            crate::access::INTERNAL
        ))
        .args(["--devices", "sim"])
        .start()
        .await;
    let s = crate::support::Server::attach(&running);
    let pid = running.child.id().unwrap();
    let admin = admin_token(&s).await;
    let (_, key) = client_key(&s, &admin, "kiosk-app").await;
    // The authorised client is on another network than the attacker (its /24 is full).
    let client = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from([127, 0, 1, 1]))
        .build()
        .unwrap();
    let session = {
        let (code, v) =
            status(bearer(client.post(s.url("/api/v1/sessions")), &key).json(&json!({}))).await;
        assert_eq!(code, 201, "{v}");
        v["session_id"].as_str().unwrap().to_string()
    };
    let before = rss_kib(pid);

    let stop = tokio_util::sync::CancellationToken::new();
    let attackers: Vec<_> = (1..=8)
        .map(|host| tokio::spawn(attacker([127, 0, 0, host], s.addr, stop.clone())))
        .collect();
    let mut peak = before;
    let mut answers = Vec::new();
    let flood = Instant::now();
    while flood.elapsed() < Duration::from_secs(15) {
        tokio::time::sleep(Duration::from_millis(500)).await;
        peak = peak.max(rss_kib(pid));
        if flood.elapsed() > Duration::from_secs(3) {
            let asked = Instant::now();
            let (code, v) = status(
                bearer(
                    client.post(s.url(&format!("/api/v1/sessions/{session}/message"))),
                    &key,
                )
                .json(&json!({ "text": "When do you open?" })),
            )
            .await;
            assert_eq!(
                code, 202,
                "the authorised client is answered under the flood: {v}"
            );
            answers.push(asked.elapsed());
        }
    }
    // The kiosk's own visitor presses the button while the flood goes on (the rig's button is
    // the internal route; the board's needs no connection at all).
    let visitor = kiosk_turn(&client, &s).await;
    stop.cancel();
    for a in attackers {
        a.abort();
    }
    answers.sort();
    let median = answers[answers.len() / 2];
    let worst = *answers.last().unwrap();
    eprintln!(
        "flood: docent RSS {} MiB before, {} MiB at most under the flood; the authorised \
         client's message answered in {median:?} (median), {worst:?} (worst) over {} tries; \
         the kiosk's visitor: press to answered and idle in {visitor:?}",
        before / 1024,
        peak / 1024,
        answers.len()
    );
    let visitor = visitor.expect("the kiosk's own visitor is answered under the flood");
    assert!(
        visitor < Duration::from_secs(20),
        "the visitor's turn took {visitor:?}"
    );
    assert!(
        peak < before + 96 * 1024,
        "RSS grew from {before} KiB to {peak} KiB under the flood"
    );
    // Generous: the attacker runs in this process, on the same two cores.
    assert!(
        worst < Duration::from_secs(10),
        "answers took up to {worst:?}"
    );
}

/// The kiosk's visitor: press, speak (nothing: the simulated microphone is silent, so the
/// kiosk asks to say it again), release; the time until the kiosk has spoken and is idle again.
async fn kiosk_turn(
    client: &reqwest::Client,
    s: &crate::support::Server,
) -> Result<Duration, String> {
    let started = Instant::now();
    for pressed in [true, false] {
        let (code, v) = status(
            bearer(
                client.post(s.url("/api/v1/internal/device/ptt")),
                crate::access::INTERNAL,
            )
            .json(&json!({ "pressed": pressed })),
        )
        .await;
        if code != 200 {
            return Err(format!("press {pressed}: {code} {v}"));
        }
        tokio::time::sleep(Duration::from_millis(900)).await;
    }
    let mut seen: Vec<String> = Vec::new();
    while started.elapsed() < Duration::from_secs(30) {
        let (_, v) = status(bearer(
            client.get(s.url("/api/v1/internal/device")),
            crate::access::INTERNAL,
        ))
        .await;
        let now = v["status"].as_str().unwrap_or_default().to_string();
        if seen.last() != Some(&now) {
            seen.push(now.clone());
        }
        if now == "idle" && seen.iter().any(|s| s == "speaking") {
            return Ok(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(format!("the kiosk did not answer: states {seen:?}"))
}

// Finding 4 -----------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_client_takes_its_share_of_places_and_the_kiosk_always_has_one() {
    let s = lan_server(|c| c.devices = DeviceMode::Sim).await;
    let admin = admin_token(&s).await;
    let (_, alice) = client_key(&s, &admin, "alice").await;
    let (_, bob) = client_key(&s, &admin, "bob").await;
    let (_, carol) = client_key(&s, &admin, "carol").await;
    // One key: its share (4 of 8), then 429.
    let mut sessions = Vec::new();
    for _ in 0..4 {
        sessions.push(new_session(&s, &alice).await);
    }
    let (code, v) = status(bearer(s.post("/api/v1/sessions"), &alice).json(&json!({}))).await;
    assert_eq!(code, 429, "one key cannot take every place: {v}");
    // Another key takes the rest; then everyone else waits (503)...
    for _ in 0..4 {
        new_session(&s, &bob).await;
    }
    let (code, v) = status(bearer(s.post("/api/v1/sessions"), &carol).json(&json!({}))).await;
    assert_eq!(code, 503, "{v}");
    // ... but the kiosk's visitor: the button still opens its session.
    let visit = crate::access::kiosk_session(&s, &admin).await;
    let (_, all) = status(bearer(s.get("/api/v1/sessions"), &admin)).await;
    assert_eq!(all.as_array().unwrap().len(), 9, "{all}");
    assert!(!sessions.contains(&visit));

    // Live streams: a key holds at most 8 WebSockets of the 32.
    let mut sockets = Vec::new();
    for i in 0..9 {
        let mut ws = format!("ws://{}/ws/chat/{}", s.addr, sessions[i % 4])
            .into_client_request()
            .unwrap();
        ws.headers_mut().insert(
            "authorization",
            HeaderValue::from_str(&format!("Bearer {alice}")).unwrap(),
        );
        match tokio_tungstenite::connect_async(ws).await {
            Ok((socket, _)) => sockets.push(socket),
            Err(e) => {
                assert_eq!(i, 8, "only the ninth is refused: {e}");
                assert!(e.to_string().contains("503"), "{e}");
            }
        }
    }
    assert_eq!(sockets.len(), 8);
}

// Finding 5 -----------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_boot_password_opens_nothing_but_its_change() {
    const FIRST: &str = "Fb3kQz9TmW2xLr7N";
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("admin-password");
    std::fs::write(&file, format!("{FIRST}\n")).unwrap();
    let s = crate::support::Server::start_with(|c| {
        c.access.admin_password_file = Some(file.clone());
        c.access.loopback_is_trusted = false;
        c.devices = DeviceMode::None;
    })
    .await;
    let token = admin_token_with(&s, FIRST).await;
    // Every admin route refuses the first-boot session (403, not 401: it is signed in).
    for req in [
        s.post("/api/v1/client-keys")
            .json(&json!({ "name": "early" })),
        s.get("/api/v1/client-keys"),
        s.get("/api/v1/system/backup"),
        s.get("/api/v1/settings"),
        s.post("/api/v1/characters").json(&json!({ "name": "Eve" })),
    ] {
        let (code, v) = status(bearer(req, &token)).await;
        assert_eq!(code, 403, "{v}");
    }
    // Nor is it an administrator on the conversation routes.
    let (code, v) = status(bearer(s.get("/api/v1/sessions"), &token)).await;
    assert_eq!(code, 401, "{v}");
    let (_, v) = status(bearer(s.get("/api/auth"), &token)).await;
    assert_eq!(v, json!({ "authenticated": true, "must_change": true }));
    // The change itself is allowed; then the session is a full administrator.
    let (code, v) = status(
        bearer(s.put("/api/auth/password"), &token)
            .json(&json!({ "current": FIRST, "new": "a long new password" })),
    )
    .await;
    assert_eq!(code, 200, "{v}");
    let (code, v) = status(bearer(s.get("/api/v1/client-keys"), &token)).await;
    assert_eq!(code, 200, "{v}");
}

async fn admin_token_with(s: &crate::support::Server, password: &str) -> String {
    crate::support::token_of(&crate::support::sign_in(s, password).await)
}

/// Run as systemd runs a service: with SIGPIPE ignored, so a pipe closed early is an error that
/// a program prints (`tr: write error: Broken pipe`) instead of a signal that ends it quietly.
#[test]
fn the_first_boot_step_never_prints_the_password() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new("sh")
        .args(["-c", "trap '' PIPE; exec sh \"$0\""])
        .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("board/firstboot.sh"))
        .env("DOCENT_DATA_DIR", dir.path())
        .env("DOCENT_USER", "no-such-user-docent-test")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let password = std::fs::read_to_string(dir.path().join("admin-password")).unwrap();
    let password = password.trim();
    assert_eq!(password.len(), 16);
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !printed.contains(password),
        "/dev/console may be the public screen: {printed}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.lines().all(|l| l.contains("is not a mount point")),
        "no errors (a temporary folder is not a mount point): {stderr}"
    );
}

// Issue 34, findings 2 and 3: root scripts that follow a path docent controls ------------------
//
// docent-firstboot.service and docent-update-gate.service run their scripts as root, in the data
// directory, which is docent's: a link docent plants there must not make root write (or chown)
// what it names. The scripts run as scripts, as root, on a scratch data directory owned by a
// stand-in for docent (`nobody`); they are skipped when the tests do not run as root (they
// could not hand a folder to another user).

/// `nobody`'s uid and gid, when the tests run as root and the user exists.
fn docent_stand_in() -> Option<(u32, u32)> {
    let id = |args: &[&str]| -> Option<u32> {
        let out = std::process::Command::new("id").args(args).output().ok()?;
        String::from_utf8(out.stdout).ok()?.trim().parse().ok()
    };
    if id(&["-u"])? != 0 {
        eprintln!("skipped: the root scripts' tests run as root");
        return None;
    }
    Some((id(&["-u", "nobody"])?, id(&["-g", "nobody"])?))
}

/// A scratch folder others can enter, holding `data` (docent's, 0700, as /data on the board) and
/// `outside`, a file of root's that a link planted in `data` names.
fn scratch_data(uid: u32, gid: u32) -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let scratch = tempfile::tempdir().unwrap();
    std::fs::set_permissions(scratch.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let data = scratch.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::chown(&data, Some(uid), Some(gid)).unwrap();
    let outside = scratch.path().join("outside");
    std::fs::write(&outside, "root's own\n").unwrap();
    std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o644)).unwrap();
    (scratch, data, outside)
}

/// docent plants a link from `at` to `target` (the link is its own).
fn plant_link(target: &std::path::Path, at: &std::path::Path, uid: u32, gid: u32) {
    std::os::unix::fs::symlink(target, at).unwrap();
    std::os::unix::fs::lchown(at, Some(uid), Some(gid)).unwrap();
}

/// `file` is still root's, 0644, with its content.
fn assert_untouched(file: &std::path::Path, content: &str) {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(file).unwrap();
    assert!(meta.is_file(), "{file:?}");
    assert_eq!(std::fs::read_to_string(file).unwrap(), content, "{file:?}");
    assert_eq!((meta.uid(), meta.mode() & 0o7777), (0, 0o644), "{file:?}");
}

/// `file` is a plain file of `uid`'s, mode 0600.
fn assert_docents_own(file: &std::path::Path, uid: u32) {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(file).unwrap();
    assert!(meta.is_file(), "{file:?} is a file, not a link");
    assert_eq!((meta.uid(), meta.mode() & 0o7777), (uid, 0o600), "{file:?}");
}

#[test]
fn the_first_boot_step_never_writes_through_a_link_docent_planted() {
    use std::io::Write;
    let Some((uid, gid)) = docent_stand_in() else {
        return;
    };
    let (_scratch, data, outside) = scratch_data(uid, gid);
    // The script's temporary name holds its PID: the shell waits for a line, then `exec`s the
    // script under the same PID, once the link is in place.
    let mut child = std::process::Command::new("sh")
        .args(["-c", "read _; exec sh \"$0\""])
        .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("board/firstboot.sh"))
        .env("DOCENT_DATA_DIR", &data)
        .env("DOCENT_USER", "nobody")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let tmp = data.join(format!("admin-password.tmp.{}", child.id()));
    plant_link(&outside, &tmp, uid, gid);
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"go\n").unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert_untouched(&outside, "root's own\n");
    assert!(out.status.success(), "{out:?}");
    let file = data.join("admin-password");
    assert_docents_own(&file, uid);
    let password = std::fs::read_to_string(&file).unwrap();
    assert_eq!(password.trim().len(), 16);
    assert!(!String::from_utf8_lossy(&out.stdout).contains(password.trim()));
    assert!(!tmp.exists(), "the temporary name is gone");
}

/// docent's last line in the journal, in the gate's stand-in for journalctl.
const LAST_WORDS: &[u8] = b"docent: the configuration is refused";

/// Stand-ins for what the gate runs: docent.service has failed five times, so the gate rolls
/// back at once, and its last line in the journal is `last_words`; each records its call in
/// `calls`.
fn gate_stand_ins(bin: &std::path::Path, calls: &std::path::Path, last_words: &[u8]) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir(bin).unwrap();
    let words = bin.join("last-words");
    std::fs::write(&words, [last_words, b"\n"].concat()).unwrap();
    let journalctl = format!("cat '{}'", words.display());
    let calls = calls.display();
    for (name, body) in [
        (
            "systemctl",
            "case \"$*\" in *NRestarts*) echo 5 ;; show*) echo failed ;; esac",
        ),
        ("journalctl", journalctl.as_str()),
        ("rauc", ":"),
        ("fw_setenv", ":"),
    ] {
        let path = bin.join(name);
        std::fs::write(
            &path,
            format!("#!/bin/sh\necho \"{name} $*\" >>'{calls}'\n{body}\n"),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

fn run_gate(scratch: &std::path::Path, data: &std::path::Path) -> std::process::Output {
    run_gate_with(scratch, data, LAST_WORDS)
}

fn run_gate_with(
    scratch: &std::path::Path,
    data: &std::path::Path,
    last_words: &[u8],
) -> std::process::Output {
    let bin = scratch.join("bin");
    let calls = scratch.join("calls");
    gate_stand_ins(&bin, &calls, last_words);
    let cmdline = scratch.join("cmdline");
    std::fs::write(&cmdline, "root=/dev/mmcblk0p2 rauc.slot=B rootwait\n").unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    std::process::Command::new("sh")
        .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("board/rauc/update-gate.sh"))
        .env("PATH", path)
        .env("DOCENT_DATA_DIR", data)
        .env("DOCENT_USER", "nobody")
        .env("DOCENT_CMDLINE", &cmdline)
        .output()
        .unwrap()
}

const PENDING: &str = r#"{"slot":"B","from":"0.1.0","to":"0.2.0","installed_at":1700000000}"#;

#[test]
fn the_update_gate_never_writes_through_a_link_docent_planted() {
    let Some((uid, gid)) = docent_stand_in() else {
        return;
    };
    // A link at the outcome's temporary name, to a file of root's.
    let (scratch, data, outside) = scratch_data(uid, gid);
    let update = data.join("update");
    std::fs::create_dir(&update).unwrap();
    std::os::unix::fs::chown(&update, Some(uid), Some(gid)).unwrap();
    std::fs::write(update.join("pending.json"), PENDING).unwrap();
    std::os::unix::fs::chown(update.join("pending.json"), Some(uid), Some(gid)).unwrap();
    plant_link(&outside, &update.join("outcome.json.tmp"), uid, gid);
    let out = run_gate(scratch.path(), &data);
    assert_untouched(&outside, "root's own\n");
    assert!(out.status.success(), "{out:?}");
    // The rollback itself as before: the outcome as docent reads it, the slot marked bad.
    let outcome = update.join("outcome.json");
    assert_docents_own(&outcome, uid);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&outcome).unwrap()).unwrap();
    assert_eq!(
        (&v["result"], &v["from"], &v["to"], &v["installed_at"]),
        (
            &json!("rolled_back"),
            &json!("0.1.0"),
            &json!("0.2.0"),
            &json!(1_700_000_000)
        ),
        "{v}"
    );
    let reason = v["reason"].as_str().unwrap();
    assert!(
        reason.contains("failed to start 5 times") && reason.contains("configuration is refused"),
        "{reason}"
    );
    assert!(!update.join("pending.json").exists());
    let calls = std::fs::read_to_string(scratch.path().join("calls")).unwrap();
    assert!(
        calls.contains("rauc status mark-bad booted") && calls.contains("systemctl reboot"),
        "{calls}"
    );

    // The update folder itself a link, to a folder of root's (which holds a pending.json, so
    // that the gate goes as far as it can): root neither writes nor removes anything there.
    let (scratch, data, _) = scratch_data(uid, gid);
    let elsewhere = scratch.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("pending.json"), PENDING).unwrap();
    let readable = std::os::unix::fs::PermissionsExt::from_mode(0o644);
    std::fs::set_permissions(elsewhere.join("pending.json"), readable).unwrap();
    plant_link(&elsewhere, &data.join("update"), uid, gid);
    let out = run_gate(scratch.path(), &data);
    assert!(out.status.success(), "{out:?}");
    let mut left: Vec<_> = std::fs::read_dir(&elsewhere)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, ["pending.json"], "{out:?}");
    assert_untouched(&elsewhere.join("pending.json"), PENDING);
}

/// An update folder of docent's in a scratch data directory, with a pending update of slot B.
fn pending_update(uid: u32, gid: u32) -> (tempfile::TempDir, std::path::PathBuf) {
    let (scratch, data, _) = scratch_data(uid, gid);
    let update = data.join("update");
    std::fs::create_dir(&update).unwrap();
    std::os::unix::fs::chown(&update, Some(uid), Some(gid)).unwrap();
    std::fs::write(update.join("pending.json"), PENDING).unwrap();
    std::os::unix::fs::chown(update.join("pending.json"), Some(uid), Some(gid)).unwrap();
    (scratch, data)
}

/// Issue 34, finding 7: the gate keeps 300 bytes of docent's last line; a cut through a
/// character left a lone byte in the outcome, docent could not read it and never reported the
/// rollback. The gate now cuts at a character's end (docent reads the outcome leniently too:
/// `update::tests::an_outcome_with_a_bad_byte_is_still_read`).
#[test]
fn the_update_gate_cuts_docents_last_words_between_characters() {
    let Some((uid, gid)) = docent_stand_in() else {
        return;
    };
    // 299 bytes, then "é" (2 bytes) across the 300th, then more.
    let mut words = vec![b'x'; 299];
    words.extend_from_slice("é and what follows".as_bytes());
    let (scratch, data) = pending_update(uid, gid);
    let out = run_gate_with(scratch.path(), &data, &words);
    assert!(out.status.success(), "{out:?}");
    let bytes = std::fs::read(data.join("update/outcome.json")).unwrap();
    let text = String::from_utf8(bytes).expect("the outcome is UTF-8");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["result"], "rolled_back", "{v}");
    let reason = v["reason"].as_str().unwrap();
    assert!(
        reason.ends_with(&format!(": {}", "x".repeat(299))),
        "the line cut before the character it would split: {reason}"
    );
}

// Finding 6 -----------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_end_with_the_credential_that_opened_them() {
    let s = lan_server(|c| c.devices = DeviceMode::Sim).await;
    let admin = admin_token(&s).await;

    // A WebSocket of a key that is revoked: closed (1008).
    let (ws_key_id, ws_key) = client_key(&s, &admin, "phone").await;
    let session = new_session(&s, &ws_key).await;
    let mut ws = format!("ws://{}/ws/chat/{session}", s.addr)
        .into_client_request()
        .unwrap();
    ws.headers_mut().insert(
        "authorization",
        HeaderValue::from_str(&format!("Bearer {ws_key}")).unwrap(),
    );
    let (mut socket, _) = tokio_tungstenite::connect_async(ws).await.unwrap();
    socket.next().await.unwrap().unwrap(); // the session frame

    // A Converse stream of another key that is revoked: UNAUTHENTICATED.
    let (grpc_key_id, grpc_key) = client_key(&s, &admin, "app").await;
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tx.send(docent::proto::VoiceLlmInput {
        input: Some(docent::proto::voice_llm_input::Input::Config(
            VoiceLlmConfig::default(),
        )),
    })
    .await
    .unwrap();
    let mut req = tonic::Request::new(tokio_stream::wrappers::ReceiverStream::new(rx));
    req.metadata_mut().insert(
        "authorization",
        format!("Bearer {grpc_key}").parse().unwrap(),
    );
    let mut outputs = grpc(&s).await.converse(req).await.unwrap().into_inner();

    // The console's event stream of an administrator session that signs out.
    let cookie = crate::support::sign_in(&s, crate::access::PW).await;
    let mut events = s.get_as("/api/v1/kiosk/events", &cookie).await;
    assert_eq!(events.status(), 200);

    for id in [&ws_key_id, &grpc_key_id] {
        let (code, v) = status(bearer(
            s.delete(&format!("/api/v1/client-keys/{id}")),
            &admin,
        ))
        .await;
        assert_eq!(code, 204, "{v}");
    }
    // Signing out: 200 and the cookie cleared, Origin or not (finding 11).
    let (code, v) = status(s.delete("/api/auth").header("cookie", &cookie)).await;
    assert_eq!(code, 200, "{v}");

    let within = Duration::from_secs(5);
    let closed = tokio::time::timeout(within, async {
        loop {
            match socket.next().await {
                Some(Ok(tokio_tungstenite::tungstenite::Message::Close(f))) => return f,
                Some(Ok(_)) => continue,
                _ => return None,
            }
        }
    })
    .await
    .expect("the revoked key's WebSocket is closed");
    assert_eq!(closed.map(|f| u16::from(f.code)), Some(1008));

    let ended = tokio::time::timeout(within, async {
        loop {
            match outputs.next().await {
                Some(Ok(_)) => continue,
                Some(Err(status)) => return Some(status),
                None => return None,
            }
        }
    })
    .await
    .expect("the revoked key's Converse stream ends");
    assert_eq!(
        ended.map(|st| st.code()),
        Some(tonic::Code::Unauthenticated)
    );
    drop(tx);

    tokio::time::timeout(within, async {
        while let Ok(Some(_)) = events.chunk().await {}
    })
    .await
    .expect("the signed-out session's event stream ends");
}

// Findings 7 to 9 -----------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_authorization_header_is_the_only_credential_when_present() {
    let s = lan_server(|c| c.devices = DeviceMode::None).await;
    let cookie = crate::support::sign_in(&s, crate::access::PW).await;
    // A cookie write from another site that also sends an Authorization header which
    // authenticates nothing: the header is the credential, and it is none.
    let (code, v) = status(
        s.post("/api/v1/client-keys")
            .header("cookie", &cookie)
            .header("authorization", "Bearer nothing")
            .header("origin", "https://evil.example")
            .json(&json!({ "name": "stolen" })),
    )
    .await;
    assert_eq!(code, 401, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_logins_from_many_addresses_slow_every_login_down() {
    let s = crate::support::Server::start_with(|c| {
        c.access.admin_password = Some(crate::access::PW.into());
        c.access.trusted_proxies = vec!["127.0.0.1".parse().unwrap()];
    })
    .await;
    let login = |from: String, password: &'static str| {
        s.post("/api/auth")
            .header("edge-connecting-ip", from)
            .json(&json!({ "password": password }))
    };
    let quick = Instant::now();
    let (code, _) = status(login("192.0.2.200".into(), "wrong")).await;
    assert_eq!(code, 401);
    let unhindered = quick.elapsed();
    // Thirty addresses, one failure each: each stays under its own limit.
    for i in 0..30 {
        let (code, v) = status(login(format!("198.51.100.{i}"), "wrong")).await;
        assert_eq!(code, 401, "{v}");
    }
    let slowed = Instant::now();
    let (code, _) = status(login("203.0.113.7".into(), crate::access::PW)).await;
    assert_eq!(code, 200, "the administrator still gets in");
    let took = slowed.elapsed();
    assert!(
        took >= unhindered + Duration::from_secs(1),
        "after 31 failures everywhere a login waits: {took:?} (first {unhindered:?})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_mode_answers_pages_of_other_sites_nothing() {
    // Setup mode: loopback is the administrator.
    let s = crate::support::Server::start_with(|c| c.devices = DeviceMode::None).await;
    let res = s
        .get("/api/v1/settings")
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert!(
        res.headers().get("access-control-allow-origin").is_none(),
        "no `*` on an answer that trusts loopback: {:?}",
        res.headers()
    );
    let (code, v) = status(
        s.post("/api/v1/client-keys")
            .header("origin", "https://evil.example")
            .json(&json!({ "name": "x" })),
    )
    .await;
    assert_eq!(
        code, 403,
        "a setup-mode write from another site's page: {v}"
    );
    // The kiosk's own page, and a tool without an Origin, still may.
    let own = format!("http://{}", s.addr);
    let (code, v) = status(
        s.post("/api/v1/client-keys")
            .header("origin", own)
            .json(&json!({ "name": "x" })),
    )
    .await;
    assert_eq!(code, 201, "{v}");
}

// Finding 10 ----------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_without_credentials_are_each_their_own_owner() {
    let s = lan_server(|c| {
        c.devices = DeviceMode::None;
        c.access.open_conversation_api = true;
    })
    .await;
    let from = |a: [u8; 4]| {
        reqwest::Client::builder()
            .local_address(std::net::IpAddr::from(a))
            .build()
            .unwrap()
    };
    let (phone, other) = (from([127, 0, 3, 1]), from([127, 0, 3, 2]));
    let (code, v) = status(phone.post(s.url("/api/v1/sessions")).json(&json!({}))).await;
    assert_eq!(code, 201, "{v}");
    let mine = v["session_id"].as_str().unwrap().to_string();
    let (_, listed) = status(other.get(s.url("/api/v1/sessions"))).await;
    assert_eq!(listed, json!([]), "another phone does not see it");
    let (code, v) = status(other.delete(s.url(&format!("/api/v1/sessions/{mine}")))).await;
    assert_eq!(code, 403, "nor deletes it: {v}");
    let (code, _) = status(phone.delete(s.url(&format!("/api/v1/sessions/{mine}")))).await;
    assert_eq!(code, 204);
}
