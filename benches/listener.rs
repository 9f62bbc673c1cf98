//! The listener's costs, run by `cargo bench --bench listener`: HTTPS against plain HTTP on
//! the same port (keep-alive requests per second on `GET /api/v1/characters`), the TLS
//! handshake, and how fast the kiosk still answers `GET /api/v1/health` from another address
//! while one client holds every connection it may and hammers the rest.
//!
//! The server runs in this process on a runtime of its own (2 worker threads, as on the board);
//! the load generator has another (2 threads). hyper's `client` feature comes from the reqwest
//! dev-dependency.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

const CONNECTIONS: usize = 8;
const SECS: u64 = 4;
const HANDSHAKES: usize = 200;
const PER_PEER: usize = 32;
const HEALTH_SAMPLES: usize = 300;

fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    let addr = start_server(dir.path());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(run(addr, dir.path()));
}

/// Starts docent on its own runtime and thread; the address it listens on.
fn start_server(data: &std::path::Path) -> SocketAddr {
    let config = docent::config::Config {
        data_dir: data.to_path_buf(),
        listen: "127.0.0.1:0".parse().expect("address"),
        devices: docent::config::DeviceMode::None,
        connections: docent::config::ConnectionsConfig {
            max_per_peer: PER_PEER,
            ..Default::default()
        },
        ..Default::default()
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("server runtime");
        runtime
            .block_on(docent::run(
                docent::Run::new(config).on_ready(move |ready| tx.send(ready.addr).expect("ready")),
            ))
            .expect("server runs");
    });
    rx.recv().expect("server started")
}

async fn run(addr: SocketAddr, data: &std::path::Path) {
    let pem = std::fs::read(data.join("tls/cert.pem")).expect("certificate");
    let tls = Arc::new(client_config(&pem));

    let plain = requests_per_second(addr, None).await;
    println!(
        "bench: GET /api/v1/characters, HTTP, {CONNECTIONS} keep-alive connections: {plain:.0} req/s"
    );
    let https = requests_per_second(addr, Some(tls.clone())).await;
    println!(
        "bench: GET /api/v1/characters, HTTPS, {CONNECTIONS} keep-alive connections: {https:.0} req/s ({:.0} % of HTTP)",
        https / plain * 100.0
    );

    let mut handshakes = Vec::with_capacity(HANDSHAKES);
    for _ in 0..HANDSHAKES {
        let tcp = TcpStream::connect(addr).await.expect("connect");
        let t = Instant::now();
        let stream = handshake(tcp, &tls).await;
        handshakes.push(t.elapsed());
        drop(stream);
    }
    handshakes.sort_unstable();
    println!(
        "bench: TLS handshake (ECDSA P-256, TLS 1.3), {HANDSHAKES} in a row: p50 {}, p99 {}",
        ms(percentile(&handshakes, 50.0)),
        ms(percentile(&handshakes, 99.0))
    );

    let quiet = health_latencies(addr).await;
    println!(
        "bench: GET /api/v1/health from 127.0.0.2, quiet: p50 {}, p99 {}",
        ms(percentile(&quiet, 50.0)),
        ms(percentile(&quiet, 99.0))
    );
    // 127.0.0.1 takes every connection it may: half hammer the API, half sit silent; a storm
    // of further connections from it is refused meanwhile.
    let stop = tokio_util::sync::CancellationToken::new();
    let mut tasks = Vec::new();
    for i in 0..PER_PEER {
        let stop = stop.clone();
        let tcp = connect_from([127, 0, 0, 1], addr).await;
        tasks.push(tokio::spawn(async move {
            if i % 2 == 0 {
                let mut conn = http(tcp).await;
                while !stop.is_cancelled() {
                    get(&mut conn, "/api/v1/characters").await;
                }
            } else {
                let mut tcp = tcp;
                let _ = tcp.write_all(b"GET /api/v1/hea").await;
                stop.cancelled().await;
            }
        }));
    }
    let refused = Arc::new(std::sync::atomic::AtomicU64::new(0));
    {
        let (stop, refused) = (stop.clone(), refused.clone());
        tasks.push(tokio::spawn(async move {
            while !stop.is_cancelled() {
                let mut tcp = connect_from([127, 0, 0, 1], addr).await;
                let mut buf = [0u8; 1];
                if let Ok(Ok(0)) = tokio::time::timeout(
                    Duration::from_secs(1),
                    tokio::io::AsyncReadExt::read(&mut tcp, &mut buf),
                )
                .await
                {
                    refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let loaded = health_latencies(addr).await;
    stop.cancel();
    for t in tasks {
        let _ = t.await;
    }
    println!(
        "bench: GET /api/v1/health from 127.0.0.2, 127.0.0.1 at its cap ({PER_PEER}: {} hammering, {} silent, {} more refused): p50 {}, p99 {}",
        PER_PEER / 2,
        PER_PEER / 2,
        refused.load(std::sync::atomic::Ordering::Relaxed),
        ms(percentile(&loaded, 50.0)),
        ms(percentile(&loaded, 99.0))
    );
}

/// Health asked again and again on one keep-alive connection from another address.
async fn health_latencies(addr: SocketAddr) -> Vec<Duration> {
    let mut conn = http(connect_from([127, 0, 0, 2], addr).await).await;
    let mut latencies = Vec::with_capacity(HEALTH_SAMPLES);
    for _ in 0..HEALTH_SAMPLES {
        let t = Instant::now();
        get(&mut conn, "/api/v1/health").await;
        latencies.push(t.elapsed());
    }
    latencies.sort_unstable();
    latencies
}

async fn requests_per_second(addr: SocketAddr, tls: Option<Arc<rustls::ClientConfig>>) -> f64 {
    let mut conns = Vec::new();
    for _ in 0..CONNECTIONS {
        let tcp = TcpStream::connect(addr).await.expect("connect");
        conns.push(match &tls {
            Some(tls) => http(handshake(tcp, tls).await).await,
            None => http(tcp).await,
        });
    }
    let deadline = Instant::now() + Duration::from_secs(SECS);
    let start = Instant::now();
    let workers: Vec<_> = conns
        .into_iter()
        .map(|mut conn| {
            tokio::spawn(async move {
                let mut n = 0u64;
                while Instant::now() < deadline {
                    get(&mut conn, "/api/v1/characters").await;
                    n += 1;
                }
                n
            })
        })
        .collect();
    let mut total = 0;
    for w in workers {
        total += w.await.expect("worker");
    }
    total as f64 / start.elapsed().as_secs_f64()
}

type Conn = SendRequest<Empty<Bytes>>;

async fn http<I: AsyncRead + AsyncWrite + Unpin + Send + 'static>(io: I) -> Conn {
    let (conn, driver) = http1::handshake(TokioIo::new(io))
        .await
        .expect("HTTP handshake");
    tokio::spawn(driver);
    conn
}

async fn get(conn: &mut Conn, path: &str) {
    conn.ready().await.expect("connection ready");
    let req = Request::get(path)
        .header("host", "127.0.0.1")
        .body(Empty::new())
        .expect("request");
    let res = conn.send_request(req).await.expect("response");
    assert_eq!(res.status(), StatusCode::OK, "{path}");
    res.into_body().collect().await.expect("body");
}

fn client_config(pem: &[u8]) -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        roots.add(cert.expect("PEM")).expect("root");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth()
}

async fn handshake(
    tcp: TcpStream,
    tls: &Arc<rustls::ClientConfig>,
) -> tokio_rustls::client::TlsStream<TcpStream> {
    tcp.set_nodelay(true).expect("nodelay");
    let name = ServerName::IpAddress(IpAddr::from([127, 0, 0, 1]).into());
    tokio_rustls::TlsConnector::from(tls.clone())
        .connect(name, tcp)
        .await
        .expect("TLS handshake")
}

async fn connect_from(from: [u8; 4], server: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("socket");
    socket
        .bind(SocketAddr::from((IpAddr::from(from), 0)))
        .expect("bind");
    let tcp = socket.connect(server).await.expect("connect");
    tcp.set_nodelay(true).expect("nodelay");
    tcp
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}
