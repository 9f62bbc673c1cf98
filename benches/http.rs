//! HTTP benchmarks of the release `docent` binary, run by `cargo bench --bench http`.
//!
//! The bench builds nothing itself: it spawns the binary cargo built for it
//! (`CARGO_BIN_EXE_docent`, the release profile) on temporary data directories and measures it
//! from outside, over loopback, with a load generator written here on hyper's HTTP/1.1 client
//! connections (one keep-alive connection per concurrent worker, on a 2-thread tokio runtime,
//! sharing the machine with the server). It prints each figure as it is measured and a table with
//! the targets at the end.
//!
//! hyper's `client` feature comes from the reqwest dev-dependency (features are unified).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use docent::engine::knowledge::chunk;
use docent_test_support::bench as support;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{CONTENT_TYPE, HOST};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpStream;

use support::Docent;

const COLD_STARTS: usize = 5;
const LIST_CHARACTERS: usize = 20;
const CONNECTIONS: usize = 64;
const GET_SECS: u64 = 5;
const POST_SECS: u64 = 3;
const TARGET_CHUNKS: usize = 10_000;
const KNOWLEDGE_FILES: usize = 20;
const SEARCHES: usize = 1_000;
const INDEX_TIMEOUT: Duration = Duration::from_secs(600);
const CROSS_BINARY: &str = "target/cross/aarch64-unknown-linux-gnu/release/docent";

fn main() {
    let rows = support::block_on(run());
    print_table(&rows);
}

async fn run() -> Vec<Row> {
    let mut rows = vec![machine(), cold_start().await];
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Docent::start(dir.path(), None).await;
    rows.push(idle_rss(&server).await);
    rows.extend(get_characters(&server).await);
    rows.extend(post_characters(&server).await);
    rows.extend(knowledge_search(&server).await);
    server.stop().await;
    rows.extend(site_admin().await);
    rows.extend(binary_sizes());
    rows
}

// ---------------------------------------------------------------------------------------------
// HTTP/1.1 client connections

type Conn = SendRequest<Full<Bytes>>;

async fn connect(addr: SocketAddr) -> Conn {
    let stream = TcpStream::connect(addr).await.expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let (conn, driver) = http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(driver);
    conn
}

/// A request to replay: method, path and JSON body (empty for none). With `vary`, every
/// request gets its own query string (to miss URL-keyed caches).
#[derive(Clone)]
struct Call {
    method: Method,
    path: String,
    body: Bytes,
    vary: bool,
}

impl Call {
    fn get(path: impl Into<String>) -> Call {
        Call {
            method: Method::GET,
            path: path.into(),
            body: Bytes::new(),
            vary: false,
        }
    }

    fn post(path: impl Into<String>, body: &Value) -> Call {
        Call {
            method: Method::POST,
            path: path.into(),
            body: Bytes::from(serde_json::to_vec(body).expect("JSON")),
            vary: false,
        }
    }

    fn request(&self) -> Request<Full<Bytes>> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let uri = if self.vary {
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            format!("{}?v={n}", self.path)
        } else {
            self.path.clone()
        };
        let mut req = Request::builder()
            .method(self.method.clone())
            .uri(uri)
            .header(HOST, "127.0.0.1");
        if !self.body.is_empty() {
            req = req.header(CONTENT_TYPE, "application/json");
        }
        req.body(Full::new(self.body.clone())).expect("request")
    }
}

/// Sends one request and reads the whole answer.
async fn send(conn: &mut Conn, call: &Call) -> (StatusCode, Bytes) {
    conn.ready().await.expect("connection ready");
    let res = conn.send_request(call.request()).await.expect("response");
    let status = res.status();
    let body = res.into_body().collect().await.expect("body").to_bytes();
    (status, body)
}

/// Sends one request on a fresh connection and parses the JSON answer, asserting the status.
async fn call_json(addr: SocketAddr, call: &Call, want: StatusCode) -> Value {
    let (status, body) = send(&mut connect(addr).await, call).await;
    assert_eq!(status, want, "{} {}: {body:?}", call.method, call.path);
    serde_json::from_slice(&body).expect("JSON answer")
}

// ---------------------------------------------------------------------------------------------
// Load generation and statistics

/// Latencies of the answered requests of a run, sorted, over its wall time, and the CPU time
/// the server and this process (the load generator) used meanwhile.
struct Load {
    latencies: Vec<Duration>,
    elapsed: Duration,
    server_cpu: Duration,
    client_cpu: Duration,
}

impl Load {
    fn per_sec(&self) -> f64 {
        self.latencies.len() as f64 / self.elapsed.as_secs_f64()
    }

    fn percentile(&self, p: f64) -> Duration {
        percentile(&self.latencies, p)
    }
}

/// `p` (0..=100) of sorted `values`, nearest rank.
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Replays `call` on `connections` keep-alive connections for `secs`, each worker sending its
/// next request as soon as the previous answer is read. Every answer must be `want`.
async fn load(
    server: &Docent,
    connections: usize,
    secs: u64,
    call: Call,
    want: StatusCode,
) -> Load {
    let mut conns = Vec::with_capacity(connections);
    for _ in 0..connections {
        conns.push(connect(server.addr).await);
    }
    let server_pid = server.pid().to_string();
    let (server_cpu, client_cpu) = (support::cpu_time(&server_pid), support::cpu_time("self"));
    let (latencies, elapsed) = support::drive(conns, secs, |conn, deadline| {
        worker(conn, call.clone(), want, deadline)
    })
    .await;
    Load {
        latencies,
        elapsed,
        server_cpu: support::cpu_time(&server_pid) - server_cpu,
        client_cpu: support::cpu_time("self") - client_cpu,
    }
}

async fn worker(mut conn: Conn, call: Call, want: StatusCode, deadline: Instant) -> Vec<Duration> {
    let mut latencies = Vec::new();
    while Instant::now() < deadline {
        let t = Instant::now();
        let (status, body) = send(&mut conn, &call).await;
        latencies.push(t.elapsed());
        assert_eq!(status, want, "{} {}: {body:?}", call.method, call.path);
    }
    latencies
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn conns(n: usize) -> String {
    format!("{n} conn{}", if n == 1 { "" } else { "s" })
}

/// Decimal megabytes, the unit of the targets.
fn mb(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

// ---------------------------------------------------------------------------------------------
// The measurements

/// A line of the final table: a figure, its value and, if it has one, its target and whether it
/// was met.
struct Row {
    figure: String,
    value: String,
    target: Option<(&'static str, bool)>,
}

impl Row {
    fn new(figure: impl Into<String>, value: impl Into<String>) -> Row {
        let row = Row {
            figure: figure.into(),
            value: value.into(),
            target: None,
        };
        println!("bench: {}: {}", row.figure, row.value);
        row
    }

    fn target(mut self, target: &'static str, met: bool) -> Row {
        self.target = Some((target, met));
        self
    }
}

/// Cores and load of the machine: other work on it skews every figure.
fn machine() -> Row {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let loadavg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let one_minute = loadavg.split_whitespace().next().unwrap_or("?").to_string();
    Row::new(
        "machine: cores, load average (1 min) at start",
        format!("{cores} cores, load {one_minute} (server and load generator share them)"),
    )
}

/// Spawn to the first answered health check, median of fresh starts on empty directories.
async fn cold_start() -> Row {
    let mut times = Vec::new();
    for _ in 0..COLD_STARTS {
        let dir = tempfile::tempdir().expect("temp dir");
        let t = Instant::now();
        let server = Docent::start(dir.path(), None).await;
        call_json(server.addr, &Call::get("/api/v1/health"), StatusCode::OK).await;
        times.push(t.elapsed());
        server.stop().await;
    }
    times.sort_unstable();
    let median = times[times.len() / 2];
    let all: Vec<String> = times.iter().map(|t| ms(*t)).collect();
    Row::new(
        format!("cold start: spawn to first health answer, median of {COLD_STARTS}"),
        format!("{} (all: {})", ms(median), all.join(", ")),
    )
    .target("<= 150 ms", median <= Duration::from_millis(150))
}

/// Resident memory a second after the server became ready.
async fn idle_rss(server: &Docent) -> Row {
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss = vm_rss(server.pid());
    Row::new("idle RSS, 1 s after ready", mb(rss)).target("<= 30 MB", rss <= 30_000_000)
}

/// VmRSS of a process, in bytes.
fn vm_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS line");
    kb * 1024
}

/// Creates characters until the list holds `n`.
async fn ensure_characters(server: &Docent, n: usize) {
    let list = call_json(
        server.addr,
        &Call::get("/api/v1/characters"),
        StatusCode::OK,
    )
    .await;
    let have = list.as_array().expect("array").len();
    let mut conn = connect(server.addr).await;
    for i in have..n {
        let call = Call::post("/api/v1/characters", &character_body(i));
        let (status, body) = send(&mut conn, &call).await;
        assert_eq!(status, StatusCode::CREATED, "{body:?}");
    }
}

fn character_body(i: usize) -> Value {
    json!({
        "name": format!("Bench character {i}"),
        "description": "A character created by the HTTP benchmark, with a typical description.",
        "personality": "Curious, patient and precise.",
        "welcome_message": "Hello! Ask me anything about the exhibition.",
        "tags": ["bench", "museum"],
    })
}

async fn get_characters(server: &Docent) -> Vec<Row> {
    ensure_characters(server, LIST_CHARACTERS).await;
    let call = Call::get("/api/v1/characters");
    let run = load(server, CONNECTIONS, GET_SECS, call, StatusCode::OK).await;
    let name = format!("GET characters ({LIST_CHARACTERS}), {}", conns(CONNECTIONS));
    load_rows(&name, &run, Some((">= 30,000 req/s", 30_000.0)))
}

/// Throughput (against `target`: its text and the least req/s), latency and CPU cost of a run.
fn load_rows(name: &str, run: &Load, target: Option<(&'static str, f64)>) -> Vec<Row> {
    let n = run.latencies.len() as f64;
    let per_request = |cpu: Duration| cpu.as_secs_f64() * 1e6 / n;
    let cores = |cpu: Duration| cpu.as_secs_f64() / run.elapsed.as_secs_f64();
    let mut throughput = Row::new(
        format!("{name}: throughput"),
        format!("{:.0} req/s", run.per_sec()),
    );
    if let Some((text, least)) = target {
        throughput = throughput.target(text, run.per_sec() >= least);
    }
    vec![
        throughput,
        Row::new(
            format!("{name}: latency p50 / p99"),
            format!(
                "{} / {}",
                ms(run.percentile(50.0)),
                ms(run.percentile(99.0))
            ),
        ),
        Row::new(
            format!("{name}: CPU per request, server / load gen"),
            format!(
                "{:.0} us / {:.0} us ({:.2} / {:.2} cores busy)",
                per_request(run.server_cpu),
                per_request(run.client_cpu),
                cores(run.server_cpu),
                cores(run.client_cpu),
            ),
        ),
    ]
}

async fn post_characters(server: &Docent) -> Vec<Row> {
    let call = Call::post("/api/v1/characters", &character_body(0));
    let mut rows = Vec::new();
    for n in [CONNECTIONS, 1] {
        let run = load(server, n, POST_SECS, call.clone(), StatusCode::CREATED).await;
        rows.extend(load_rows(
            &format!("POST character, {}", conns(n)),
            &run,
            None,
        ));
    }
    rows
}

/// The site administration API: login latency (Argon2id), the public site document and the
/// image store, by one URL and with a new query string each time (the cache key has no query).
async fn site_admin() -> Vec<Row> {
    const PASSWORD: &str = "bench-password";
    const LOGINS: usize = 20;
    const IMAGE_BYTES: usize = 50 * 1024;
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Docent::start(dir.path(), Some(PASSWORD)).await;
    let login = Call::post("/api/auth", &json!({ "password": PASSWORD }));
    let mut conn = connect(server.addr).await;
    let mut times = Vec::with_capacity(LOGINS);
    let mut token = String::new();
    for _ in 0..LOGINS {
        let t = Instant::now();
        conn.ready().await.expect("connection ready");
        let res = conn.send_request(login.request()).await.expect("response");
        times.push(t.elapsed());
        assert_eq!(res.status(), StatusCode::OK, "login");
        let cookie = res.headers()["set-cookie"]
            .to_str()
            .expect("ASCII cookie")
            .to_string();
        token = cookie["docent_session=".len()..]
            .split(';')
            .next()
            .expect("token")
            .to_string();
        res.into_body().collect().await.expect("body");
    }
    times.sort_unstable();
    let upload = Request::builder()
        .method(Method::PUT)
        .uri("/api/img/bench.png")
        .header(HOST, "127.0.0.1")
        .header(CONTENT_TYPE, "image/png")
        .header("authorization", format!("Bearer {token}"))
        // The store takes only what its bytes show to be an image: a PNG signature, then filler.
        .body(Full::new(Bytes::from(
            [&b"\x89PNG\r\n\x1a\n"[..], &[0xA5u8; IMAGE_BYTES - 8]].concat(),
        )))
        .expect("request");
    conn.ready().await.expect("connection ready");
    let res = conn.send_request(upload).await.expect("response");
    assert_eq!(res.status(), StatusCode::OK, "image upload");
    let mut rows = vec![
        Row::new(
            format!("login (Argon2id), {LOGINS} sequential: p50 / p95"),
            format!(
                "{} / {}",
                ms(percentile(&times, 50.0)),
                ms(percentile(&times, 95.0))
            ),
        )
        .target(
            "<= 100 ms",
            percentile(&times, 95.0) <= Duration::from_millis(100),
        ),
    ];
    for (name, call) in [
        ("GET /api/data", Call::get("/api/data")),
        (
            "GET /api/img (50 KiB, cached)",
            Call::get("/api/img/bench.png"),
        ),
        (
            "GET /api/img (50 KiB, a new query string each time: the cache ignores it)",
            Call {
                vary: true,
                ..Call::get("/api/img/bench.png")
            },
        ),
    ] {
        let run = load(&server, CONNECTIONS, GET_SECS, call, StatusCode::OK).await;
        rows.extend(load_rows(
            &format!("{name}, {}", conns(CONNECTIONS)),
            &run,
            None,
        ));
    }
    server.stop().await;
    rows
}

/// Uploads ~`TARGET_CHUNKS` passages of generated text, waits for indexing and times searches.
async fn knowledge_search(server: &Docent) -> Vec<Row> {
    let mut corpus = Corpus::new(0x5eed_cafe);
    let (id, chunks, indexing) = index_corpus(server, &mut corpus).await;
    let path = format!("/api/v1/internal/characters/{id}/knowledge/search");
    let mut conn = connect(server.addr).await;
    let mut latencies = Vec::with_capacity(SEARCHES);
    let mut results = 0;
    for _ in 0..SEARCHES {
        let call = Call::post(path.as_str(), &json!({ "query": corpus.query() }));
        let t = Instant::now();
        let (status, body) = send(&mut conn, &call).await;
        latencies.push(t.elapsed());
        assert_eq!(status, StatusCode::OK, "{body:?}");
        results += result_count(&body);
    }
    latencies.sort_unstable();
    let p = |q| ms(percentile(&latencies, q));
    let search = Row::new(
        format!("search, {chunks} passages, HTTP end to end: p50 / p95 / p99"),
        format!(
            "{} / {} / {} ({SEARCHES} queries of 3-6 words, {:.1} results each)",
            p(50.0),
            p(95.0),
            p(99.0),
            results as f64 / SEARCHES as f64
        ),
    );
    let p95_met = percentile(&latencies, 95.0) <= Duration::from_millis(5);
    vec![indexing, search.target("p95 <= 5 ms", p95_met)]
}

/// Creates a character and gives it the corpus' documents; returns its id, the passage count
/// and a row timing upload and indexing.
async fn index_corpus(server: &Docent, corpus: &mut Corpus) -> (String, u64, Row) {
    let files = corpus.documents();
    let bytes: usize = files.iter().map(String::len).sum();
    let call = Call::post("/api/v1/characters", &json!({ "name": "Librarian" }));
    let created = call_json(server.addr, &call, StatusCode::CREATED).await;
    let id = created["id"].as_str().expect("id").to_string();
    let t = Instant::now();
    upload_knowledge(server, &id, files).await;
    let chunks = wait_until_indexed(server, &id).await;
    let row = Row::new(
        "knowledge upload + indexing",
        format!(
            "{chunks} passages from {} in {KNOWLEDGE_FILES} files: {:.1} s",
            mb(bytes as u64),
            t.elapsed().as_secs_f64()
        ),
    );
    (id, chunks, row)
}

fn result_count(body: &[u8]) -> usize {
    let v: Value = serde_json::from_slice(body).expect("JSON answer");
    v["results"].as_array().map_or(0, Vec::len)
}

async fn upload_knowledge(server: &Docent, id: &str, files: Vec<String>) {
    let mut form = reqwest::multipart::Form::new();
    for (i, text) in files.into_iter().enumerate() {
        let part = reqwest::multipart::Part::text(text).file_name(format!("guide-{i:02}.txt"));
        form = form.part("files", part);
    }
    // reqwest is built without a default TLS crypto provider (the server installs its own).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let res = reqwest::Client::new()
        .post(format!(
            "{}/api/v1/characters/{id}/knowledge/files",
            server.base()
        ))
        .multipart(form)
        .send()
        .await
        .expect("upload");
    assert_eq!(res.status(), 201, "upload: {:?}", res.text().await);
}

/// Polls the knowledge list until every source is ready; returns the passage count.
async fn wait_until_indexed(server: &Docent, id: &str) -> u64 {
    let call = Call::get(format!("/api/v1/characters/{id}/knowledge"));
    let deadline = Instant::now() + INDEX_TIMEOUT;
    loop {
        let list = call_json(server.addr, &call, StatusCode::OK).await;
        let sources = list["sources"].as_array().expect("sources");
        assert!(
            sources.iter().all(|s| s["status"] != "failed"),
            "indexing failed: {sources:?}"
        );
        if sources.iter().all(|s| s["status"] == "ready") {
            return sources
                .iter()
                .map(|s| s["chunk_count"].as_u64().unwrap_or(0))
                .sum();
        }
        assert!(
            Instant::now() < deadline,
            "indexing did not finish in {INDEX_TIMEOUT:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn binary_sizes() -> Vec<Row> {
    let host = Path::new(env!("CARGO_BIN_EXE_docent"));
    let (size, _) = file_size_and_age(host).expect("host binary");
    let host_row = Row::new("binary size, host x86_64 release (stripped)", mb(size));
    let cross = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(CROSS_BINARY);
    let cross_row = match file_size_and_age(&cross) {
        Some((size, age)) => Row::new(
            "binary size, static aarch64 release (stripped)",
            format!("{} (built {} min ago)", mb(size), age.as_secs() / 60),
        )
        .target("<= 20 MB", size <= 20_000_000),
        None => Row::new(
            "binary size, static aarch64 release",
            "not built; run ./x cross",
        )
        .target("<= 20 MB", false),
    };
    vec![host_row, cross_row]
}

/// Size of a file and how long ago it was written.
fn file_size_and_age(path: &Path) -> Option<(u64, Duration)> {
    let meta = std::fs::metadata(path).ok()?;
    let age = meta.modified().ok()?.elapsed().unwrap_or_default();
    Some((meta.len(), age))
}

/// The figures as a table: figure, target (and whether it was met), value.
fn print_table(rows: &[Row]) {
    let targets: Vec<String> = rows
        .iter()
        .map(|r| match r.target {
            Some((t, true)) => format!("{t} (met)"),
            Some((t, false)) => format!("{t} (MISSED)"),
            None => String::new(),
        })
        .collect();
    let fw = rows.iter().map(|r| r.figure.len()).max().unwrap_or(0);
    let tw = targets.iter().map(String::len).max().unwrap_or(0);
    println!("\n{:fw$}  {:tw$}  value", "figure", "target");
    println!("{}", "-".repeat(fw + tw + 40));
    for (r, target) in rows.iter().zip(&targets) {
        println!("{:fw$}  {target:tw$}  {}", r.figure, r.value);
    }
}

// ---------------------------------------------------------------------------------------------
// Generated English-like text

/// xorshift64*: deterministic text and queries without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

const FILLER: &[&str] = &[
    "the", "of", "and", "a", "to", "in", "is", "was", "that", "for", "it", "with", "as", "on",
    "by", "at", "from", "which", "this", "were", "are", "be", "an", "their", "its", "into",
    "after",
];
const SYLLABLES: &[&str] = &[
    "ar", "bel", "can", "dor", "el", "fen", "gal", "har", "in", "jor", "kel", "lan", "mor", "nel",
    "or", "pal", "quin", "ros", "sel", "tor", "ur", "val", "wen", "xan", "yor", "zel", "ba", "ce",
    "di", "fo", "gu", "hy", "ka", "li", "mo", "nu", "pe", "ri", "so", "ta", "vi", "ste", "tha",
];
/// Distinct content words; drawn with a Zipf law, so a few are everywhere and most are rare.
const VOCABULARY: usize = 30_000;

/// A vocabulary of made-up words and a Zipf sampler over it.
struct Corpus {
    rng: Rng,
    words: Vec<String>,
    cdf: Vec<f64>,
}

impl Corpus {
    fn new(seed: u64) -> Corpus {
        let mut rng = Rng(seed);
        let mut words = std::collections::BTreeSet::new();
        while words.len() < VOCABULARY {
            let n = 2 + rng.below(3);
            words.insert(
                (0..n)
                    .map(|_| SYLLABLES[rng.below(SYLLABLES.len())])
                    .collect::<String>(),
            );
        }
        let mut words: Vec<String> = words.into_iter().collect();
        // Shuffle, so that rank (frequency) is unrelated to spelling.
        for i in (1..words.len()).rev() {
            words.swap(i, rng.below(i + 1));
        }
        let mut total = 0.0;
        let cdf = (1..=VOCABULARY)
            .map(|rank| {
                total += 1.0 / rank as f64;
                total
            })
            .collect();
        Corpus { rng, words, cdf }
    }

    fn content_word(&mut self) -> &str {
        let x = self.rng.unit() * self.cdf.last().expect("vocabulary");
        let i = self.cdf.partition_point(|&c| c < x).min(VOCABULARY - 1);
        &self.words[i]
    }

    fn word(&mut self) -> String {
        if self.rng.below(3) == 0 {
            FILLER[self.rng.below(FILLER.len())].to_string()
        } else {
            self.content_word().to_string()
        }
    }

    fn sentence(&mut self) -> String {
        let n = 6 + self.rng.below(15);
        let mut s = String::new();
        for i in 0..n {
            let w = self.word();
            if i == 0 {
                let mut c = w.chars();
                s.extend(c.next().map(|f| f.to_ascii_uppercase()));
                s.push_str(c.as_str());
            } else {
                s.push(' ');
                s.push_str(&w);
            }
        }
        s.push_str(if self.rng.below(10) == 0 { "?" } else { "." });
        s
    }

    /// A document of about `chunks` passages, as the server's chunker will cut it.
    fn document(&mut self, chunks: usize) -> String {
        let mut text = String::new();
        let mut sentences = 0;
        loop {
            text.push_str(&self.sentence());
            sentences += 1;
            text.push_str(if self.rng.below(6) == 0 { "\n\n" } else { " " });
            // Each passage moves on by well over a third of CHUNK_CHARS, so shorter text cannot
            // hold `chunks` of them; past that, count (a linear pass) every 50 sentences.
            if text.len() >= chunks * chunk::CHUNK_CHARS / 3
                && sentences % 50 == 0
                && chunk::chunk_text(&text).len() >= chunks
            {
                return text;
            }
        }
    }

    /// `KNOWLEDGE_FILES` documents holding `TARGET_CHUNKS` passages in all.
    fn documents(&mut self) -> Vec<String> {
        (0..KNOWLEDGE_FILES)
            .map(|_| self.document(TARGET_CHUNKS / KNOWLEDGE_FILES))
            .collect()
    }

    /// A 3-6 word query, words drawn like the text's.
    fn query(&mut self) -> String {
        let n = 3 + self.rng.below(4);
        (0..n).map(|_| self.word()).collect::<Vec<_>>().join(" ")
    }
}
