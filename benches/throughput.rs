//! Throughput of the front door against a bare hyper server, run by `cargo bench --bench
//! throughput` (and `./x bench`).
//!
//! The bench starts the release `docent` on a temporary data directory (21 characters, the
//! site document seeded), reads the answers of the measured routes, and starts a bare hyper
//! HTTP/1.1 server that answers the same bytes with the same headers: this binary again, as a
//! child process like `docent`, so both servers pay the same process and scheduling costs.
//! A load generator written here (hyper client connections, keep-alive, one request in flight
//! per connection, on a 2-thread runtime sharing the machine) then loads each pair in turns,
//! interleaved (A B, B A, A B, ...), so that load from elsewhere on the machine falls on both.
//! It prints, per pair, the req/s and latency p50 / p99 of each side, and the ratio per round
//! with its median and spread: the figure is the ratio, not the absolute rate.
//!
//! The req/s ratio moves with whatever else runs on the machine (the load average is printed
//! with each pair). Two ratios of CPU time per request (user + system, from /proc) move much
//! less: "by CPU" counts the server's and the load generator's, and predicts the req/s ratio
//! of a machine running only these two; "server CPU" counts the server's alone (bare hyper's
//! over docent's): what docent's own work costs. The summary says which meets the target.
//! Instructions per request, which no load moves, are counted when `DOCENT_BENCH_CALLGRIND` is
//! set to a number of requests: both servers then run under valgrind's callgrind, and the bench
//! prints, per route, the instructions and allocations (malloc, calloc, realloc) per request of
//! each, counted in the runtime's worker threads (the counters are zeroed after a warm-up and
//! dumped after the requests), instead of the timed pairs. Callgrind finds the workers by their
//! symbols, which the release profile strips: run it as `CARGO_PROFILE_RELEASE_STRIP=false
//! DOCENT_BENCH_CALLGRIND=2000 cargo bench --bench throughput`. The dumps stay in
//! `target/throughput-callgrind` for `callgrind_annotate`.
//!
//! Pairs: GET /api/v1/characters, /api/v1/health and /api/data against bare hyper, and docent
//! over HTTPS against docent over plain HTTP (health and characters). Requests say what a
//! browser says, `Accept-Encoding: gzip, deflate, br, zstd` (docent gzips the character list
//! for it); one more pair loads the character list over HTTPS and HTTP for a client that takes
//! no compression (`identity`). `DOCENT_BENCH_SECS`
//! (default 2) and `DOCENT_BENCH_ROUNDS` (default 4) set each run's length and the rounds;
//! `DOCENT_BENCH_CONNECTIONS` (default 64) the connections; `DOCENT_BENCH_ONLY` keeps the pairs
//! whose name contains it (`HTTPS`, `health`), for profiling one of them.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use docent_test_support::bench as support;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{
    ACCEPT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE, DATE, HOST, HeaderMap, HeaderName, HeaderValue,
};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::Command;

use support::Docent;

/// The environment variable that makes this binary the bare server, serving the directory it
/// names (see [`bare`]).
const BARE: &str = "DOCENT_BENCH_BARE_DIR";
/// Characters in the list: the default one and these.
const EXTRA_CHARACTERS: usize = 20;
/// The targets (issue 23): docent's throughput against bare hyper's, HTTPS's against HTTP's.
const BARE_TARGET: f64 = 0.90;
const TLS_TARGET: f64 = 0.85;

fn main() {
    if let Some(dir) = std::env::var_os(BARE) {
        bare(Path::new(&dir));
        return;
    }
    support::block_on(run());
}

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

async fn run() {
    if let Some(requests) = std::env::var("DOCENT_BENCH_CALLGRIND")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        instructions(requests).await;
        return;
    }
    let secs = setting("DOCENT_BENCH_SECS", 2);
    let rounds = setting("DOCENT_BENCH_ROUNDS", 4) as usize;
    let connections = setting("DOCENT_BENCH_CONNECTIONS", 64) as usize;
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "throughput: {cores} cores, load {} at start; {connections} connections, {rounds} rounds \
         of {secs} s per side",
        load_average()
    );
    let data = tempfile::tempdir().expect("temp dir");
    let docent = Docent::start(data.path(), None).await;
    furnish(&docent).await;
    // (path, Accept-Encoding): what the console's browser asks, and the list once more for a
    // client that takes no compression.
    let routes = [
        ("/api/v1/characters", BROWSER),
        ("/api/v1/characters", IDENTITY),
        ("/api/v1/health", BROWSER),
        ("/api/data", BROWSER),
    ];
    let bare_dir = tempfile::tempdir().expect("temp dir");
    let mut answers = Vec::new();
    for (i, &(path, accept)) in routes.iter().enumerate() {
        let (headers, body) = answer_of(docent.addr, path, accept).await;
        write_route(bare_dir.path(), i, path, accept, &headers, &body);
        answers.push(body.len());
    }
    let (_, list) = answer_of(docent.addr, routes[1].0, IDENTITY).await;
    let list: serde_json::Value = serde_json::from_slice(&list).expect("characters JSON");
    println!(
        "throughput: GET /api/v1/characters holds {} characters, {} bytes ({} gzipped); health {} \
         bytes; /api/data {} bytes",
        list.as_array().map_or(0, Vec::len),
        answers[1],
        answers[0],
        answers[2],
        answers[3]
    );
    let bare = spawn_bare(bare_dir.path(), &[]).await;
    let tls = tls_client();
    let plan = Plan {
        secs,
        rounds,
        connections,
    };
    let only = std::env::var("DOCENT_BENCH_ONLY").unwrap_or_default();
    let coding = |accept| if accept == IDENTITY { ", identity" } else { "" };
    let docent_as = |name| Target::plain(name, docent.pid(), docent.addr);
    let bare_pid = bare.child.id().expect("running");
    let pair = |name: String, (path, accept), length, target| Pair {
        name: format!("{name}{}", coding(accept)),
        path,
        accept,
        length,
        target,
    };
    let mut pairs = Vec::new();
    for (&(path, accept), &length) in routes.iter().zip(&answers) {
        let name = format!("GET {path}");
        let bare = Target::plain("bare hyper", bare_pid, bare.addr);
        let p = pair(name, (path, accept), length, BARE_TARGET);
        pairs.push((p, docent_as("docent"), bare));
    }
    for i in [0, 2, 1] {
        let name = format!("HTTPS vs HTTP, GET {}", routes[i].0);
        let p = pair(name, routes[i], answers[i], TLS_TARGET);
        pairs.push((
            p,
            docent_as("docent HTTPS").tls(tls.clone()),
            docent_as("docent HTTP"),
        ));
    }
    let mut table = Vec::new();
    for (pair, a, b) in pairs {
        if pair.name.contains(&only) {
            table.push(plan.pair(&pair, a, b).await);
        }
    }
    println!(
        "\n{:44} {:>22} {:>22}  ratio: median (min-max)",
        "pair", "A req/s", "B req/s"
    );
    for line in &table {
        println!("{}", line.detail);
    }
    println!(
        "\nthroughput summary (A/B; target: docent >= {BARE_TARGET} of bare hyper, HTTPS >= {TLS_TARGET} \
         of HTTP)\n{:44} {:>6} {:>20} {:>7} {:>10} {:>11}",
        "pair", "target", "req/s: median (range)", "by CPU", "server CPU", "load 1 min"
    );
    for line in &table {
        println!("{}", line.summary);
    }
    bare.stop().await;
    docent.stop().await;
}

/// 21 characters (the default one and 20 more) and the seeded site document.
async fn furnish(docent: &Docent) {
    let mut conn = connect(docent.addr, None).await;
    for i in 0..EXTRA_CHARACTERS {
        let body = json!({
            "name": format!("Bench character {i}"),
            "description": "A character created by the throughput benchmark, with a typical description.",
            "personality": "Curious, patient and precise.",
            "welcome_message": "Hello! Ask me anything about the exhibition.",
            "tags": ["bench", "museum"],
        });
        let req = request(Method::POST, "/api/v1/characters", Some(body.to_string()));
        let (status, _, body) = send(&mut conn, req).await;
        assert_eq!(status, StatusCode::CREATED, "{body:?}");
    }
    let req = request(Method::POST, "/api/data?seed=1", None);
    let (status, _, body) = send(&mut conn, req).await;
    assert_eq!(status, StatusCode::OK, "seed the site document: {body:?}");
}

/// What a browser accepts (Chromium's `Accept-Encoding`).
const BROWSER: &str = "gzip, deflate, br, zstd";
/// What a client that takes no compression accepts.
const IDENTITY: &str = "identity";

/// The headers (but the date and length, which the server sets) and body of docent's answer.
async fn answer_of(addr: SocketAddr, path: &str, accept: &str) -> (HeaderMap, Bytes) {
    let mut conn = connect(addr, None).await;
    let (status, mut headers, body) = send(&mut conn, get(path, accept)).await;
    assert_eq!(status, StatusCode::OK, "GET {path}: {body:?}");
    headers.remove(DATE);
    headers.remove(CONTENT_LENGTH);
    (headers, body)
}

// ---------------------------------------------------------------------------------------------
// The bare server: this binary with `BARE` set

/// Writes route `i` for the bare server: its path and `Accept-Encoding`, its header lines and
/// its body.
fn write_route(dir: &Path, i: usize, path: &str, accept: &str, headers: &HeaderMap, body: &[u8]) {
    let head: String = headers
        .iter()
        .map(|(n, v)| format!("{n}: {}\n", v.to_str().expect("ASCII header")))
        .collect();
    std::fs::write(dir.join(format!("{i}.path")), path).expect("write route");
    std::fs::write(dir.join(format!("{i}.accept")), accept).expect("write route");
    std::fs::write(dir.join(format!("{i}.head")), head).expect("write route");
    std::fs::write(dir.join(format!("{i}.body")), body).expect("write route");
}

/// Answers by path, then by `Accept-Encoding`.
type Routes = HashMap<String, HashMap<String, (HeaderMap, Bytes)>>;

fn read_routes(dir: &Path) -> Routes {
    let mut routes = Routes::new();
    for i in 0.. {
        let file = |ext: &str| dir.join(format!("{i}.{ext}"));
        let Ok(path) = std::fs::read_to_string(file("path")) else {
            break;
        };
        let mut headers = HeaderMap::new();
        for line in std::fs::read_to_string(file("head")).expect("head").lines() {
            let (name, value) = line.split_once(": ").expect("header line");
            headers.append(
                HeaderName::from_bytes(name.as_bytes()).expect("header name"),
                HeaderValue::from_str(value).expect("header value"),
            );
        }
        let body = Bytes::from(std::fs::read(file("body")).expect("body"));
        let accept = std::fs::read_to_string(file("accept")).expect("accept");
        routes
            .entry(path)
            .or_default()
            .insert(accept, (headers, body));
    }
    routes
}

/// Serves the routes of `dir` on 127.0.0.1 with hyper's HTTP/1.1 server and nothing else: a
/// lookup by path and `Accept-Encoding`, the headers cloned, the body shared. Prints its address, then runs until
/// killed.
fn bare(dir: &Path) {
    let routes = Arc::new(read_routes(dir));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        println!(
            "bare listening on {}",
            listener.local_addr().expect("address")
        );
        loop {
            let (stream, _) = listener.accept().await.expect("accept");
            stream.set_nodelay(true).expect("nodelay");
            let routes = routes.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: Request<_>| {
                    let accept = req.headers().get(ACCEPT_ENCODING);
                    let accept = accept.and_then(|a| a.to_str().ok()).unwrap_or("");
                    let route = routes.get(req.uri().path()).and_then(|r| r.get(accept));
                    let answer = match route {
                        Some((headers, body)) => {
                            let mut res = Response::new(Full::new(body.clone()));
                            *res.headers_mut() = headers.clone();
                            res
                        }
                        None => {
                            let mut res = Response::new(Full::new(Bytes::new()));
                            *res.status_mut() = StatusCode::NOT_FOUND;
                            res
                        }
                    };
                    async move { Ok::<_, std::convert::Infallible>(answer) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
}

struct Bare {
    child: tokio::process::Child,
    addr: SocketAddr,
}

impl Bare {
    async fn stop(mut self) {
        self.child.kill().await.expect("stop the bare server");
    }
}

/// Starts the bare server on the routes of `dir`, run by `wrapper` when one is given.
async fn spawn_bare(dir: &Path, wrapper: &[String]) -> Bare {
    let this = std::env::current_exe().expect("this bench");
    let mut child = support::wrapped(wrapper, this)
        .env(BARE, dir)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the bare server");
    let stdout = child.stdout.take().expect("stdout");
    let line = BufReader::new(stdout)
        .lines()
        .next_line()
        .await
        .expect("read")
        .expect("the bare server exited");
    let addr = line
        .strip_prefix("bare listening on ")
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("unexpected line {line:?}"));
    Bare { child, addr }
}

// ---------------------------------------------------------------------------------------------
// Client connections

type Conn = SendRequest<Full<Bytes>>;

/// A server to load: its process, its address, over TLS when a client configuration is given.
#[derive(Clone)]
struct Target {
    name: &'static str,
    pid: u32,
    addr: SocketAddr,
    tls: Option<Arc<ClientConfig>>,
}

impl Target {
    fn plain(name: &'static str, pid: u32, addr: SocketAddr) -> Target {
        let tls = None;
        Target {
            name,
            pid,
            addr,
            tls,
        }
    }

    fn tls(self, tls: Arc<ClientConfig>) -> Target {
        Target {
            tls: Some(tls),
            ..self
        }
    }
}

async fn connect(addr: SocketAddr, tls: Option<&Arc<ClientConfig>>) -> Conn {
    let stream = TcpStream::connect(addr).await.expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let (conn, driver) = match tls {
        None => {
            let (conn, driver) = http1::handshake(TokioIo::new(stream))
                .await
                .expect("handshake");
            (conn, tokio::spawn(async move { drop(driver.await) }))
        }
        Some(config) => {
            let name = ServerName::try_from("localhost").expect("server name");
            let stream = tokio_rustls::TlsConnector::from(config.clone())
                .connect(name, stream)
                .await
                .expect("TLS handshake");
            let suite = stream.get_ref().1.negotiated_cipher_suite();
            let first = rustls::CipherSuite::TLS13_AES_128_GCM_SHA256;
            assert_eq!(
                suite.map(|s| s.suite()),
                Some(first),
                "the browser's choice"
            );
            let (conn, driver) = http1::handshake(TokioIo::new(stream))
                .await
                .expect("handshake");
            (conn, tokio::spawn(async move { drop(driver.await) }))
        }
    };
    drop(driver);
    conn
}

/// A GET of `path` accepting the content codings `accept`.
fn get(path: &str, accept: &str) -> Request<Full<Bytes>> {
    let mut req = request(Method::GET, path, None);
    let accept = HeaderValue::from_str(accept).expect("Accept-Encoding");
    req.headers_mut().insert(ACCEPT_ENCODING, accept);
    req
}

fn request(method: Method, path: &str, json: Option<String>) -> Request<Full<Bytes>> {
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header(HOST, "127.0.0.1");
    if json.is_some() {
        req = req.header(CONTENT_TYPE, "application/json");
    }
    req.body(Full::new(json.map(Bytes::from).unwrap_or_default()))
        .expect("request")
}

async fn send(conn: &mut Conn, req: Request<Full<Bytes>>) -> (StatusCode, HeaderMap, Bytes) {
    conn.ready().await.expect("connection ready");
    let res = conn.send_request(req).await.expect("response");
    let (parts, body) = res.into_parts();
    let body = body.collect().await.expect("body").to_bytes();
    (parts.status, parts.headers, body)
}

/// A TLS client that takes the kiosk's self-signed certificate (the bench measures the cost of
/// TLS, not the trust in a certificate), offering HTTP/1.1 only, and AES-128-GCM first as
/// browsers do (Chromium, Firefox and Safari; rustls's own first choice is AES-256-GCM). The
/// kiosk takes the client's choice.
fn tls_client() -> Arc<ClientConfig> {
    let mut provider = rustls::crypto::ring::default_provider();
    let first = rustls::CipherSuite::TLS13_AES_128_GCM_SHA256;
    provider.cipher_suites.sort_by_key(|s| s.suite() != first);
    let provider = Arc::new(provider);
    let mut config = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(config)
}

#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl AnyCertificate {
    /// The provider's signature algorithms, which still check the handshake's signatures.
    fn algorithms(&self) -> &rustls::crypto::WebPkiSupportedAlgorithms {
        &self.0.signature_verification_algorithms
    }
}

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, self.algorithms())
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, self.algorithms())
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

// ---------------------------------------------------------------------------------------------
// Load and figures

/// How long and how often each side of a pair is loaded, on how many connections.
struct Plan {
    secs: u64,
    rounds: usize,
    connections: usize,
}

/// What a run measured: the latency of every answered request, sorted, over the wall time, and
/// the CPU time the server and the load generator used meanwhile.
struct Run {
    latencies: Vec<Duration>,
    elapsed: Duration,
    server_cpu: Duration,
    client_cpu: Duration,
}

impl Run {
    fn per_sec(&self) -> f64 {
        self.latencies.len() as f64 / self.elapsed.as_secs_f64()
    }

    /// Microseconds of CPU per request: (server, load generator).
    fn cpu_per_request(&self) -> (f64, f64) {
        let n = self.latencies.len().max(1) as f64;
        (
            self.server_cpu.as_secs_f64() * 1e6 / n,
            self.client_cpu.as_secs_f64() * 1e6 / n,
        )
    }
}

/// The ratio A/B of the CPU per request of B over A's. With the load generator's CPU counted,
/// it is the throughput ratio the CPU per request predicts when the server and the generator
/// have the machine to themselves (each request costs both); without it, how much more the
/// server alone spends. Other work on a shared machine moves the measured req/s much more.
fn cpu_ratio(a: &[Run], b: &[Run], with_generator: bool) -> f64 {
    let cost = |runs: &[Run]| {
        let n: f64 = runs.iter().map(|r| r.latencies.len() as f64).sum();
        let cpu: f64 = runs
            .iter()
            .map(|r| {
                let generator = if with_generator {
                    r.client_cpu
                } else {
                    Duration::ZERO
                };
                (r.server_cpu + generator).as_secs_f64()
            })
            .sum();
        cpu / n
    };
    cost(b) / cost(a)
}

/// A pair to compare: the route both sides are asked, the length of its answer, and the target
/// ratio A/B.
struct Pair<'a> {
    name: String,
    path: &'a str,
    /// The request's `Accept-Encoding`.
    accept: &'static str,
    length: usize,
    target: f64,
}

/// What a pair prints: its detail lines and its line of the summary.
struct Measured {
    detail: String,
    summary: String,
}

/// The 1-minute load average.
fn load_average() -> String {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    load.split_whitespace().next().unwrap_or("?").to_string()
}

impl Plan {
    /// Loads `a` and `b` in interleaved rounds; prints each round and returns the pair's lines.
    async fn pair(&self, pair: &Pair<'_>, a: Target, b: Target) -> Measured {
        let (name, path, length) = (&pair.name, pair.path, pair.length);
        let run = |target| self.run(target, path, pair.accept, length);
        let load_before = load_average();
        let (mut a_runs, mut b_runs, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..self.rounds {
            // A first in even rounds, B first in odd ones.
            let (ra, rb) = if round % 2 == 0 {
                let ra = run(&a).await;
                (ra, run(&b).await)
            } else {
                let rb = run(&b).await;
                (run(&a).await, rb)
            };
            let ratio = ra.per_sec() / rb.per_sec();
            let (sa, ca) = ra.cpu_per_request();
            let (sb, cb) = rb.cpu_per_request();
            println!(
                "throughput: {name}, round {}: {} {:.0} req/s ({sa:.1} + {ca:.1} us CPU), {} {:.0} \
                 req/s ({sb:.1} + {cb:.1} us CPU), ratio {ratio:.3}",
                round + 1,
                a.name,
                ra.per_sec(),
                b.name,
                rb.per_sec()
            );
            ratios.push(ratio);
            a_runs.push(ra);
            b_runs.push(rb);
        }
        let load = format!("{load_before}-{}", load_average());
        ratios.sort_by(f64::total_cmp);
        let median = (ratios[(ratios.len() - 1) / 2] + ratios[ratios.len() / 2]) / 2.0;
        let (low, high) = (ratios[0], ratios[ratios.len() - 1]);
        let by_cpu = cpu_ratio(&a_runs, &b_runs, true);
        let by_server = cpu_ratio(&a_runs, &b_runs, false);
        let detail = format!(
            "{name:44} {:>22} {:>22}  {median:.3} ({low:.3}-{high:.3}); by CPU per request: {by_cpu:.3}, \
             server CPU alone: {by_server:.3}; load {load}\n\
             {:44} {:>22} {:>22}\n{:44} {:>22} {:>22}",
            format!("{} {}", a.name, rate(&a_runs)),
            format!("{} {}", b.name, rate(&b_runs)),
            "  latency p50 / p99",
            percentiles(&a_runs),
            percentiles(&b_runs),
            "  CPU per request: server + load generator",
            cpu(&a_runs),
            cpu(&b_runs),
        );
        let verdict = |r: f64| if r >= pair.target { "met" } else { "NOT met" };
        let summary = format!(
            "{name:44} {:>6.2} {:>20} {by_cpu:>7.3} {by_server:>10.3} {load:>11}  req/s {}, by CPU {}, \
             server CPU {}",
            pair.target,
            format!("{median:.3} ({low:.2}-{high:.2})"),
            verdict(median),
            verdict(by_cpu),
            verdict(by_server),
        );
        Measured { detail, summary }
    }

    /// `connections` keep-alive connections, each sending its next GET as soon as the previous
    /// answer is read, for `secs`; every answer must be 200 with a body of `length` bytes.
    async fn run(&self, target: &Target, path: &str, accept: &'static str, length: usize) -> Run {
        let mut conns = Vec::with_capacity(self.connections);
        for _ in 0..self.connections {
            conns.push(connect(target.addr, target.tls.as_ref()).await);
        }
        let server = target.pid.to_string();
        let (server_cpu, client_cpu) = (support::cpu_time(&server), support::cpu_time("self"));
        let (latencies, elapsed) = support::drive(conns, self.secs, |conn, deadline| {
            worker(conn, path.to_string(), accept, length, deadline)
        })
        .await;
        Run {
            latencies,
            elapsed,
            server_cpu: support::cpu_time(&server) - server_cpu,
            client_cpu: support::cpu_time("self") - client_cpu,
        }
    }
}

async fn worker(
    mut conn: Conn,
    path: String,
    accept: &str,
    length: usize,
    deadline: Instant,
) -> Vec<Duration> {
    let mut latencies = Vec::new();
    while Instant::now() < deadline {
        let t = Instant::now();
        let (status, _, body) = send(&mut conn, get(&path, accept)).await;
        latencies.push(t.elapsed());
        answered(&path, status, &body, length);
    }
    latencies
}

/// A GET of `path` answered 200 with `length` bytes, give or take the two digits by which the
/// health answer's uptime may grow.
fn answered(path: &str, status: StatusCode, body: &Bytes, length: usize) {
    assert_eq!(status, StatusCode::OK, "GET {path}: {body:?}");
    assert!(
        body.len().abs_diff(length) <= 2,
        "GET {path}: {} bytes, not {length}",
        body.len()
    );
}

/// The median req/s of the runs.
fn rate(runs: &[Run]) -> String {
    let mut rates: Vec<f64> = runs.iter().map(Run::per_sec).collect();
    rates.sort_by(f64::total_cmp);
    format!("{:.0}", rates[rates.len() / 2])
}

/// Microseconds of CPU per request over all the runs: server + load generator.
fn cpu(runs: &[Run]) -> String {
    let n: f64 = runs.iter().map(|r| r.latencies.len() as f64).sum();
    let us = |d: Duration| d.as_secs_f64() * 1e6 / n;
    let server: Duration = runs.iter().map(|r| r.server_cpu).sum();
    let client: Duration = runs.iter().map(|r| r.client_cpu).sum();
    format!("{:.1} + {:.1} us", us(server), us(client))
}

/// p50 / p99 of all the runs' latencies together.
fn percentiles(runs: &[Run]) -> String {
    let mut all: Vec<Duration> = runs
        .iter()
        .flat_map(|r| r.latencies.iter().copied())
        .collect();
    all.sort_unstable();
    let at = |p: f64| {
        let rank = ((p / 100.0) * all.len() as f64).ceil() as usize;
        all[rank.clamp(1, all.len()) - 1].as_secs_f64() * 1e3
    };
    format!("{:.2} / {:.2} ms", at(50.0), at(99.0))
}

// ---------------------------------------------------------------------------------------------
// Instructions per request (callgrind)

/// When docent's start check has run, even under callgrind.
const START_CHECK_PASSED: Duration = Duration::from_secs(15);

/// Connections the counted requests are spread over.
const COUNTED_CONNECTIONS: usize = 8;

/// Runs docent and the bare server under callgrind and prints, per route, the instructions and
/// allocations per request of each over `requests` requests (and of docent over HTTPS).
async fn instructions(requests: usize) {
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/throughput-callgrind");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).expect("callgrind output directory");
    let wrapper = |name: &str| -> Vec<String> {
        vec![
            "valgrind".into(),
            "--quiet".into(),
            "--tool=callgrind".into(),
            "--dump-instr=no".into(),
            // Only the runtime's workers, where requests are served: docent's display thread
            // draws frames at a rate of its own, which the slowed-down run would count as
            // thousands of instructions per request.
            "--collect-atstart=no".into(),
            "--toggle-collect=tokio::runtime::scheduler::multi_thread::worker::run".into(),
            format!("--callgrind-out-file={}/{name}.%p", out.display()),
        ]
    };
    println!("throughput: counting instructions under callgrind, {requests} requests per route");
    let data = tempfile::tempdir().expect("temp dir");
    let docent = Docent::start_under(data.path(), None, &wrapper("docent")).await;
    furnish(&docent).await;
    // Docent's start check (an HTTP client built, once, 5 s after the start) would fall among
    // the counted requests of the slowed-down process.
    tokio::time::sleep(START_CHECK_PASSED).await;
    let paths = ["/api/v1/characters", "/api/v1/health", "/api/data"];
    let bare_dir = tempfile::tempdir().expect("temp dir");
    let mut lengths = Vec::new();
    for (i, path) in paths.iter().enumerate() {
        let (headers, body) = answer_of(docent.addr, path, BROWSER).await;
        write_route(bare_dir.path(), i, path, BROWSER, &headers, &body);
        lengths.push(body.len());
    }
    let bare = spawn_bare(bare_dir.path(), &wrapper("bare")).await;
    let bare_pid = bare.child.id().expect("running");
    let tls = tls_client();
    let docent_http = Target::plain("docent", docent.pid(), docent.addr);
    let docent_https = docent_http.clone().tls(tls);
    let bare_http = Target::plain("bare hyper", bare_pid, bare.addr);
    let mut lines = Vec::new();
    for (path, &length) in paths.iter().zip(&lengths) {
        let count = |t: &Target| counted(t.clone(), &out, path, length, requests);
        let (d, b) = (count(&docent_http).await, count(&bare_http).await);
        let https = if *path == "/api/data" {
            String::new()
        } else {
            let s = count(&docent_https).await;
            format!(
                "; docent HTTPS {:.0} ({:.1} allocations), HTTP/HTTPS {:.3}",
                s.0,
                s.1,
                d.0 / s.0
            )
        };
        lines.push(format!(
            "GET {path}: docent {:.0} instructions ({:.1} allocations) per request, bare hyper {:.0} \
             ({:.1}), bare/docent {:.3}{https}",
            d.0,
            d.1,
            b.0,
            b.1,
            b.0 / d.0
        ));
    }
    println!();
    for line in &lines {
        println!("throughput (callgrind): {line}");
    }
    bare.stop().await;
    docent.stop().await;
}

/// Zeroes the counters of `target`'s callgrind after a warm-up, sends `requests` GETs on
/// [`COUNTED_CONNECTIONS`] connections, dumps the counters: (instructions, allocations) per
/// request.
async fn counted(
    target: Target,
    out: &Path,
    path: &str,
    length: usize,
    requests: usize,
) -> (f64, f64) {
    let per_connection = requests.div_ceil(COUNTED_CONNECTIONS);
    let mut conns = Vec::new();
    for _ in 0..COUNTED_CONNECTIONS {
        conns.push(connect(target.addr, target.tls.as_ref()).await);
    }
    let load = |conns: Vec<Conn>, n: usize| {
        let workers: Vec<_> = conns
            .into_iter()
            .map(|mut conn| {
                let path = path.to_string();
                tokio::spawn(async move {
                    for _ in 0..n {
                        let (status, _, body) = send(&mut conn, get(&path, BROWSER)).await;
                        answered(&path, status, &body, length);
                    }
                    conn
                })
            })
            .collect();
        async move {
            let mut back = Vec::new();
            for w in workers {
                back.push(w.await.expect("load worker"));
            }
            back
        }
    };
    let conns = load(conns, 200 / COUNTED_CONNECTIONS).await;
    callgrind_control("-z", target.pid).await;
    let conns = load(conns, per_connection).await;
    callgrind_control("-d", target.pid).await;
    drop(conns);
    let dump = newest_dump(out, target.pid);
    let (instructions, allocations) = read_dump(&dump);
    assert!(
        instructions > 0,
        "no instructions counted in {}: is the binary stripped (CARGO_PROFILE_RELEASE_STRIP=false)?",
        dump.display()
    );
    let n = (per_connection * COUNTED_CONNECTIONS) as f64;
    println!(
        "throughput (callgrind): {} GET {path}{}: {:.0} instructions, {:.1} allocations per request",
        target.name,
        if target.tls.is_some() {
            " over TLS"
        } else {
            ""
        },
        instructions as f64 / n,
        allocations as f64 / n
    );
    (instructions as f64 / n, allocations as f64 / n)
}

async fn callgrind_control(option: &str, pid: u32) {
    let status = Command::new("callgrind_control")
        .arg(option)
        .arg(pid.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .await
        .expect("run callgrind_control (valgrind)");
    assert!(
        status.success(),
        "callgrind_control {option} {pid}: {status}"
    );
}

/// The last dump callgrind wrote for process `pid` in `out`.
fn newest_dump(out: &Path, pid: u32) -> std::path::PathBuf {
    let marker = format!(".{pid}.");
    std::fs::read_dir(out)
        .expect("callgrind output")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.to_string_lossy().contains(&marker))
        .max_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
        .expect("a callgrind dump")
}

/// The total instructions of a callgrind dump and its calls to malloc, calloc and realloc.
fn read_dump(path: &Path) -> (u64, u64) {
    let text = std::fs::read_to_string(path).expect("read the callgrind dump");
    let mut names: HashMap<&str, &str> = HashMap::new();
    let (mut total, mut allocations) = (0, 0);
    let mut callee: Option<&str> = None;
    for line in text.lines() {
        if let Some(v) = line
            .strip_prefix("totals: ")
            .or(line.strip_prefix("summary: "))
        {
            total = v
                .split_whitespace()
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
        } else if let Some(rest) = line.strip_prefix("cfn=").or(line.strip_prefix("fn=")) {
            // Names are compressed: "(id) name" the first time, "(id)" after.
            let (id, name) = rest.split_once(' ').unwrap_or((rest, ""));
            if !name.is_empty() {
                names.insert(id, name);
            }
            let name = names.get(id).copied().unwrap_or("");
            callee = line.starts_with("cfn=").then_some(name);
        } else if let Some(calls) = line.strip_prefix("calls=") {
            let base = callee.take().map(|n| n.split('\'').next().unwrap_or(n));
            if matches!(base, Some("malloc" | "calloc" | "realloc")) {
                allocations += calls
                    .split_whitespace()
                    .next()
                    .and_then(|c| c.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
    }
    (total, allocations)
}
