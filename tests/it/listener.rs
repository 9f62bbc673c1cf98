//! The one listener under a LAN client's abuse, and HTTPS on the same port: slow clients are
//! cut off, connection and stream caps hold while other clients are still served, the
//! self-signed certificate is made once and kept, and the password never crosses in clear.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use docent::proto::voice_llm_service_client::VoiceLlmServiceClient;
use docent::proto::{VoiceLlmInput, VoiceLlmOutput};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::support::Server;

const WAIT: Duration = Duration::from_secs(10);
const PW: &str = "correct horse battery staple";

/// Connects to `server` from the local address `from` (any 127.0.0.0/8 address is loopback on
/// Linux, so 127.0.0.2 is a second client machine for the per-peer cap).
async fn connect_from(from: [u8; 4], server: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket
        .bind(SocketAddr::from((IpAddr::from(from), 0)))
        .unwrap();
    socket.connect(server).await.unwrap()
}

/// Reads until the server closes the connection; the time it took.
async fn closed_after(mut tcp: TcpStream, within: Duration) -> Duration {
    let start = Instant::now();
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(within, tcp.read(&mut buf)).await {
            Err(_) => panic!("the server kept the connection open past {within:?}"),
            Ok(Ok(0) | Err(_)) => return start.elapsed(),
            Ok(Ok(_)) => {}
        }
    }
}

/// Whether the connection gets answered (true) or closed without a reply (false).
async fn health_over(mut tcp: TcpStream) -> bool {
    let request = "GET /api/v1/health HTTP/1.1\r\nHost: kiosk\r\nConnection: close\r\n\r\n";
    if tcp.write_all(request.as_bytes()).await.is_err() {
        return false;
    }
    let mut reply = Vec::new();
    let _ = tokio::time::timeout(WAIT, tcp.read_to_end(&mut reply))
        .await
        .expect("an answer or a close in time");
    reply.starts_with(b"HTTP/1.1 200")
}

/// Gives the server time to accept the connections just made (they are taken in order, so a
/// later one is refused or served only after them in any case).
async fn settle() {
    tokio::time::sleep(Duration::from_millis(200)).await;
}

#[tokio::test]
async fn slowloris_and_silent_clients_are_disconnected_after_the_header_timeout() {
    let s = Server::start_with(|c| c.connections.header_read_timeout_ms = 500).await;
    let mut slow = TcpStream::connect(s.addr).await.unwrap();
    slow.write_all(b"GET /api/v1/hea").await.unwrap();
    let took = closed_after(slow, Duration::from_secs(5)).await;
    assert!(
        took >= Duration::from_millis(400),
        "closed too early: {took:?}"
    );
    let silent = TcpStream::connect(s.addr).await.unwrap();
    let took = closed_after(silent, Duration::from_secs(5)).await;
    assert!(
        took >= Duration::from_millis(400),
        "closed too early: {took:?}"
    );
    // A half-finished TLS handshake is bounded the same way.
    let mut tls = TcpStream::connect(s.addr).await.unwrap();
    tls.write_all(&[0x16, 0x03, 0x01]).await.unwrap();
    closed_after(tls, Duration::from_secs(5)).await;
}

#[tokio::test]
async fn an_idle_connection_is_closed_after_the_idle_timeout() {
    let s = Server::start_with(|c| {
        c.connections.idle_timeout_secs = 1;
        c.connections.header_read_timeout_ms = 60_000;
    })
    .await;
    let mut tcp = TcpStream::connect(s.addr).await.unwrap();
    // Half a request line, then nothing: the header timeout is long, the idle one is not.
    tcp.write_all(b"P").await.unwrap();
    let took = closed_after(tcp, Duration::from_secs(5)).await;
    assert!(
        took >= Duration::from_millis(900),
        "closed too early: {took:?}"
    );
}

/// Whether the server has closed `tcp` (it sends nothing unasked).
fn closed(tcp: &TcpStream) -> bool {
    let mut byte = [0u8; 1];
    match tcp.try_read(&mut byte) {
        Ok(n) => n == 0,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    }
}

/// At a cap, a newcomer takes the place of an idle connection of whoever holds the most (issue
/// 34, finding 8; a request in progress is never cut:
/// `hostile_lan::a_full_network_makes_room_for_a_newcomer_and_cuts_no_request`).
#[tokio::test]
async fn at_a_cap_the_newcomer_takes_an_idle_place_of_whoever_holds_the_most() {
    let s = Server::start_with(|c| {
        c.connections.max_per_peer = 3;
        c.connections.max = 5;
        // Loopback as a LAN client: the kiosk's own connections do not count in all.
        c.access.loopback_is_trusted = false;
    })
    .await;
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(connect_from([127, 0, 0, 1], s.addr).await);
    }
    settle().await;
    // A fourth from the same address is served in place of one of its own idle ones.
    assert!(health_over(connect_from([127, 0, 0, 1], s.addr).await).await);
    assert_eq!(held.iter().filter(|t| closed(t)).count(), 1);
    held.retain(|t| !closed(t));
    // Another client is served meanwhile.
    assert!(health_over(connect_from([127, 0, 0, 2], s.addr).await).await);

    // The total cap: 3 held from .1 and 2 from .3 fill it; .4 is served in place of one of
    // .1's, which holds the most; .3's stay.
    held.push(connect_from([127, 0, 0, 1], s.addr).await);
    let mut third = Vec::new();
    for _ in 0..2 {
        third.push(connect_from([127, 0, 0, 3], s.addr).await);
    }
    settle().await;
    assert!(health_over(connect_from([127, 0, 0, 4], s.addr).await).await);
    assert_eq!(held.iter().filter(|t| closed(t)).count(), 1);
    assert!(third.iter().all(|t| !closed(t)));
}

#[tokio::test]
async fn websocket_and_grpc_caps_refuse_one_more_and_the_audio_budget_closes_a_hog() {
    let s = Server::start_with(|c| {
        c.connections.max_websockets = 1;
        c.connections.max_grpc_streams = 1;
        c.connections.stream_buffer_bytes = 100_000;
    })
    .await;
    let cid = s.default_character().await;
    let sid = s.session(&cid).await;
    let url = format!("ws://{}/ws/chat/{sid}", s.addr);
    let (mut first, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
    let refused = tokio_tungstenite::connect_async(&url).await.unwrap_err();
    match refused {
        tokio_tungstenite::tungstenite::Error::Http(res) => assert_eq!(res.status(), 503),
        other => panic!("expected 503, got {other}"),
    }
    // The first socket sends more audio than the shared budget: it is closed with 1013.
    use tokio_tungstenite::tungstenite::Message;
    first
        .send(Message::text(json!({"type": "audio_start"}).to_string()))
        .await
        .unwrap();
    for _ in 0..4 {
        if first
            .send(Message::binary(vec![0u8; 32_000]))
            .await
            .is_err()
        {
            break;
        }
    }
    let code = tokio::time::timeout(WAIT, async {
        while let Some(Ok(msg)) = first.next().await {
            if let Message::Close(Some(frame)) = msg {
                return Some(u16::from(frame.code));
            }
        }
        None
    })
    .await
    .expect("closed in time");
    assert_eq!(code, Some(1013));
    // Its place is free again.
    tokio::time::sleep(Duration::from_millis(200)).await;
    tokio_tungstenite::connect_async(&url).await.unwrap();

    let mut grpc = VoiceLlmServiceClient::connect(format!("http://{}", s.addr))
        .await
        .unwrap();
    let (tx1, rx1) = tokio::sync::mpsc::channel::<VoiceLlmInput>(4);
    let _open: tonic::Streaming<VoiceLlmOutput> = grpc
        .converse(tokio_stream::wrappers::ReceiverStream::new(rx1))
        .await
        .unwrap()
        .into_inner();
    let (_tx2, rx2) = tokio::sync::mpsc::channel::<VoiceLlmInput>(4);
    let second = grpc
        .converse(tokio_stream::wrappers::ReceiverStream::new(rx2))
        .await;
    let Err(status) = second else {
        panic!("a second stream was opened")
    };
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    drop(tx1);
}

// ---------------------------------------------------------------------------------------------
// HTTPS on the same port

fn cert_path(s: &Server) -> std::path::PathBuf {
    s.dir.path().join("tls/cert.pem")
}

/// A client that trusts only the kiosk's certificate.
fn trusting(cert_pem: &[u8]) -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(cert_pem).unwrap()])
        .build()
        .unwrap()
}

#[tokio::test]
async fn https_and_plain_http_share_the_port_and_the_certificate_survives_a_restart() {
    let s = Server::start().await;
    let pem = std::fs::read(cert_path(&s)).expect("a certificate was created");
    let https = trusting(&pem);
    let port = s.addr.port();
    for host in ["127.0.0.1", "localhost"] {
        let res = https
            .get(format!("https://{host}:{port}/api/v1/health"))
            .send()
            .await
            .unwrap_or_else(|e| panic!("https://{host}: {e:?}"));
        assert_eq!(res.status(), 200);
    }
    assert_eq!(s.get("/api/v1/health").send().await.unwrap().status(), 200);

    let dir = s.stop().await;
    let s = Server::start_in(dir, |_| {}).await;
    assert_eq!(
        std::fs::read(cert_path(&s)).unwrap(),
        pem,
        "same certificate"
    );
    let res = https
        .get(format!("https://127.0.0.1:{}/api/v1/health", s.addr.port()))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
}

/// A server whose configuration names the administrator's own certificate files (`c.pem`,
/// `k.pem` in the directory it returns); the certificate is made here.
async fn with_own_certificate() -> (
    Server,
    rcgen::CertifiedKey<rcgen::KeyPair>,
    tempfile::TempDir,
) {
    let own = tempfile::tempdir().unwrap();
    let pair = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).unwrap();
    let (cert, key) = (own.path().join("c.pem"), own.path().join("k.pem"));
    std::fs::write(&cert, pair.cert.pem()).unwrap();
    std::fs::write(&key, pair.signing_key.serialize_pem()).unwrap();
    let s = Server::start_with(|c| {
        c.access.tls_cert = Some(cert.clone());
        c.access.tls_key = Some(key.clone());
    })
    .await;
    (s, pair, own)
}

#[tokio::test]
async fn the_administrators_own_certificate_is_served() {
    let (s, pair, _own) = with_own_certificate().await;
    assert!(!cert_path(&s).exists(), "no certificate of our own is made");
    let res = trusting(pair.cert.pem().as_bytes())
        .get(format!("https://127.0.0.1:{}/api/v1/health", s.addr.port()))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
}

async fn login(client: &reqwest::Client, url: String) -> (u16, String, Value) {
    let res = client
        .post(url)
        .json(&json!({ "password": PW }))
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    let cookie = res
        .headers()
        .get("set-cookie")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (status, cookie, res.json().await.unwrap())
}

#[tokio::test]
async fn the_session_cookie_is_secure_over_https_only() {
    let s = Server::start_with(|c| c.access.admin_password = Some(PW.into())).await;
    let https = trusting(&std::fs::read(cert_path(&s)).unwrap());
    let url = format!("https://127.0.0.1:{}/api/auth", s.addr.port());
    let (status, cookie, _) = login(&https, url).await;
    assert_eq!(status, 200);
    assert!(cookie.contains("; Secure"), "{cookie}");
    let (status, cookie, _) = login(&s.http, s.url("/api/auth")).await;
    assert_eq!(status, 200);
    assert!(!cookie.contains("Secure"), "{cookie}");
}

/// The board's address on the network (not loopback), as the kernel would route outwards.
fn lan_address() -> IpAddr {
    let probe = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    probe.connect("192.0.2.1:9").unwrap();
    let ip = probe.local_addr().unwrap().ip();
    assert!(!ip.is_loopback(), "this test needs a network interface");
    ip
}

#[tokio::test]
async fn a_login_over_plain_http_from_the_network_is_refused_with_the_https_address() {
    let lan = lan_address();
    let s = Server::start_with(|c| {
        c.access.admin_password = Some(PW.into());
        c.listen = "0.0.0.0:0".parse().unwrap();
    })
    .await;
    let port = s.addr.port();
    let (status, cookie, body) = login(&s.http, format!("http://{lan}:{port}/api/auth")).await;
    assert_eq!(status, 403, "{body}");
    assert!(cookie.is_empty());
    // A header the client sets does not make the connection encrypted.
    let res = s
        .http
        .post(format!("http://{lan}:{port}/api/auth"))
        .header("x-forwarded-proto", "https")
        .json(&json!({ "password": PW }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    let message = body["error"].as_str().unwrap();
    assert!(
        message.contains(&format!("https://{lan}:{port}/")),
        "{message}"
    );
    // Over HTTPS to the same address (a name the self-signed certificate carries) it works.
    let https = trusting(&std::fs::read(cert_path(&s)).unwrap());
    let (status, cookie, _) = login(&https, format!("https://{lan}:{port}/api/auth")).await;
    assert_eq!(status, 200);
    assert!(cookie.contains("; Secure"), "{cookie}");

    let s = Server::start_with(|c| {
        c.access.admin_password = Some(PW.into());
        c.listen = "0.0.0.0:0".parse().unwrap();
        c.access.allow_plain_http_login = true;
    })
    .await;
    let url = format!("http://{lan}:{}/api/auth", s.addr.port());
    assert_eq!(login(&s.http, url).await.0, 200);
}

/// The administrator uploads their own certificate and key: a bad pair is refused (400) and
/// nothing is replaced; a good one is written over the self-signed files, served to the next
/// connection at once, shown by its fingerprint, and kept across a restart.
#[tokio::test]
async fn an_uploaded_certificate_replaces_the_self_signed_one_at_once() {
    let s = Server::start().await;
    let url = format!("https://127.0.0.1:{}/api/v1/health", s.addr.port());
    let old_pem = std::fs::read(cert_path(&s)).unwrap();
    let before = s.get_json("/api/v1/tls/certificate", 200).await;
    assert_eq!(before["replaceable"], true);
    let old_fingerprint = before["fingerprint"].as_str().unwrap().to_string();
    assert_eq!(old_fingerprint.len(), 32 * 3 - 1, "{before}");

    let mine = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).unwrap();
    let other = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).unwrap();
    for (what, cert, key) in [
        (
            "another certificate's key",
            mine.cert.pem(),
            other.signing_key.serialize_pem(),
        ),
        (
            "no certificate",
            "junk".into(),
            mine.signing_key.serialize_pem(),
        ),
        ("no key", mine.cert.pem(), String::new()),
        ("a certificate as the key", mine.cert.pem(), mine.cert.pem()),
    ] {
        let r = s
            .put("/api/v1/tls/certificate")
            .json(&json!({ "cert_pem": cert, "key_pem": key }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{what}");
        assert!(r.json::<Value>().await.unwrap()["error"].is_string());
        assert_eq!(std::fs::read(cert_path(&s)).unwrap(), old_pem, "{what}");
        let now = s.get_json("/api/v1/tls/certificate", 200).await;
        assert_eq!(now["fingerprint"], old_fingerprint.as_str(), "{what}");
    }
    trusting(&old_pem)
        .get(&url)
        .send()
        .await
        .expect("still the self-signed one");

    let saved = s
        .put_json(
            "/api/v1/tls/certificate",
            json!({ "cert_pem": mine.cert.pem(), "key_pem": mine.signing_key.serialize_pem() }),
            200,
        )
        .await;
    let fingerprint = saved["fingerprint"].as_str().unwrap().to_string();
    assert_ne!(fingerprint, old_fingerprint);
    let shown = s.get_json("/api/v1/tls/certificate", 200).await;
    assert_eq!(shown["fingerprint"], fingerprint.as_str());
    // The next connection gets the new certificate; a client that trusts only the old one fails.
    let res = trusting(mine.cert.pem().as_bytes())
        .get(&url)
        .send()
        .await
        .expect("the uploaded certificate is served");
    assert_eq!(res.status(), 200);
    assert!(trusting(&old_pem).get(&url).send().await.is_err());
    assert_eq!(
        std::fs::read(cert_path(&s)).unwrap(),
        mine.cert.pem().as_bytes()
    );

    let dir = s.stop().await;
    let s = Server::start_in(dir, |_| {}).await;
    let shown = s.get_json("/api/v1/tls/certificate", 200).await;
    assert_eq!(
        shown["fingerprint"],
        fingerprint.as_str(),
        "kept across a restart"
    );
}

/// Where the configuration names the certificate files, an upload is refused (409).
#[tokio::test]
async fn a_configured_certificate_is_not_replaced_by_an_upload() {
    let (s, pair, own) = with_own_certificate().await;
    let cert = own.path().join("c.pem");
    assert_eq!(
        s.get_json("/api/v1/tls/certificate", 200).await["replaceable"],
        false
    );
    let mine = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).unwrap();
    let r = s
        .put("/api/v1/tls/certificate")
        .json(&json!({ "cert_pem": mine.cert.pem(), "key_pem": mine.signing_key.serialize_pem() }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    assert_eq!(std::fs::read(&cert).unwrap(), pair.cert.pem().as_bytes());
}
