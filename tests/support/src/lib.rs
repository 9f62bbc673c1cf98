//! What docent's integration tests (`tests/it`), appliance test (`tests/appliance`: the board
//! rig is [`board`]) and benchmarks (`benches`) share, as one crate instead of files included by
//! path.
//!
//! A real `docent` server on 127.0.0.1 with a fresh data directory: in this process
//! ([`Server`]), or the built binary as a process of its own ([`Process`]).

pub mod appliance;
pub mod bench;
pub mod board;
pub mod browser;
pub mod clock;
pub mod disk;
pub mod fake_hawkbit;
pub mod fake_wyoming;
pub mod fleet_kiosk;
mod process;
pub mod rauc;
pub mod soak;
pub mod testclip;
pub mod understanding;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use docent::config::Config;
use sha2::Digest as _;
use tokio::sync::oneshot;

pub use process::{Process, Running, docent, docent_under};

/// The repository's root (this crate is `tests/support`): test data, board files, `target`.
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("tests/support inside the repository")
}

/// The `docent` binary that cargo builds beside the running test or bench
/// (`target/<profile>/deps/<test>` -> `target/<profile>/docent`): `CARGO_BIN_EXE_docent` is
/// only given to the root package's own targets, not to this crate.
pub fn docent_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("the running test's path");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps")
        .join("docent")
}

/// A kiosk that `docent::run` started in this process, on a task of its own.
pub struct Started {
    pub ready: docent::Ready,
    /// Sent (or dropped) to stop the kiosk; `task` ends once it has stopped.
    pub stop: oneshot::Sender<()>,
    pub task: tokio::task::JoinHandle<()>,
}

/// Starts `docent::run` on a task and waits until it serves.
pub async fn start_kiosk(config: Config) -> Started {
    start_kiosk_run(docent::Run::new(config)).await
}

/// Starts `run` (a `docent::Run` with the test's hooks: a simulated clock) on a task and waits
/// until it serves.
pub async fn start_kiosk_run(run: docent::Run) -> Started {
    let (ready_tx, ready_rx) = oneshot::channel();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        docent::run(
            run.on_ready(move |ready| {
                let _ = ready_tx.send(ready);
            })
            .shutdown(async move {
                let _ = stopped.await;
            }),
        )
        .await
        .expect("server runs");
    });
    let ready = ready_rx.await.expect("server started");
    Started { ready, stop, task }
}

/// Sends `req` and reads its answer as JSON, whatever its status.
pub async fn answer_json(req: reqwest::RequestBuilder) -> serde_json::Value {
    req.send().await.unwrap().json().await.unwrap()
}

/// Sends `req` and reads its answer's body, whatever its status.
pub async fn body_of(req: reqwest::RequestBuilder) -> Vec<u8> {
    req.send().await.unwrap().bytes().await.unwrap().to_vec()
}

/// Sends `req`, which must succeed (`what` names it when it does not).
pub async fn send_ok(req: reqwest::RequestBuilder, what: &str) {
    let res = req.send().await.unwrap();
    assert!(res.status().is_success(), "{what}: {}", res.status());
}

/// The names of a list of characters (`GET /api/v1/characters`), sorted.
pub fn sorted_names(characters: &serde_json::Value) -> Vec<String> {
    let mut names: Vec<String> = characters
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

pub struct Server {
    pub base: String,
    pub addr: SocketAddr,
    pub http: reqwest::Client,
    pub dir: tempfile::TempDir,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
    /// `docent serve` when the server runs as a process of its own (killed when dropped).
    process: Option<Running>,
}

impl Server {
    /// Starts a server with the default configuration.
    pub async fn start() -> Server {
        Server::start_with(|_| {}).await
    }

    /// Starts a server after `tweak` adjusts its configuration.
    pub async fn start_with(tweak: impl FnOnce(&mut Config)) -> Server {
        let dir = tempfile::tempdir().unwrap();
        Server::start_in(dir, tweak).await
    }

    /// Starts a server on an existing data directory (to test restarts).
    pub async fn start_in(dir: tempfile::TempDir, tweak: impl FnOnce(&mut Config)) -> Server {
        Server::start_run(dir, tweak, docent::Run::new).await
    }

    /// Starts a server on `dir` whose local time is `clock`'s (a simulated day) after `tweak`
    /// adjusts its configuration.
    pub async fn start_at(
        dir: tempfile::TempDir,
        clock: std::sync::Arc<clock::SimClock>,
        tweak: impl FnOnce(&mut Config),
    ) -> Server {
        Server::start_run(dir, tweak, |config| docent::Run::new(config).clock(clock)).await
    }

    async fn start_run(
        dir: tempfile::TempDir,
        tweak: impl FnOnce(&mut Config),
        run: impl FnOnce(Config) -> docent::Run,
    ) -> Server {
        let mut config = Config {
            data_dir: dir.path().to_path_buf(),
            listen: "127.0.0.1:0".parse().unwrap(),
            ..Config::default()
        };
        tweak(&mut config);
        let Started { ready, stop, task } = start_kiosk_run(run(config)).await;
        let addr = ready.addr;
        Server {
            base: format!("http://{addr}"),
            addr,
            http: reqwest::Client::new(),
            dir,
            stop: Some(stop),
            task: Some(task),
            process: None,
        }
    }

    /// Starts the built binary (`process`) on `data` in a fresh directory, as a process of its
    /// own: for a test that changes what the server finds on its `PATH`.
    pub async fn spawn(process: Process) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let running = process.data_dir(&dir.path().join("data")).start().await;
        Server {
            base: running.base(),
            addr: running.addr,
            http: reqwest::Client::new(),
            dir,
            stop: None,
            task: None,
            process: Some(running),
        }
    }

    /// A client of a running process that the test keeps owning (no data directory of its own).
    pub fn attach(running: &Running) -> Server {
        Server::attach_to(running.addr)
    }

    /// A client of the kiosk at `addr` that the test keeps owning (a process, or a kiosk that
    /// `start_kiosk` started).
    pub fn attach_to(addr: SocketAddr) -> Server {
        // No server runs in this process to have installed it.
        let _ = rustls::crypto::ring::default_provider().install_default();
        Server {
            base: format!("http://{addr}"),
            addr,
            http: reqwest::Client::new(),
            dir: tempfile::tempdir().unwrap(),
            stop: None,
            task: None,
            process: None,
        }
    }

    /// Stops the server and gives back its data directory.
    pub async fn stop(mut self) -> tempfile::TempDir {
        self.shutdown().await;
        let dir = tempfile::tempdir().unwrap();
        std::mem::replace(&mut self.dir, dir)
    }

    async fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        if let Some(mut process) = self.process.take() {
            process.kill().await;
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    pub fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.http.get(self.url(path))
    }

    pub fn post(&self, path: &str) -> reqwest::RequestBuilder {
        self.http.post(self.url(path))
    }

    pub fn put(&self, path: &str) -> reqwest::RequestBuilder {
        self.http.put(self.url(path))
    }

    pub fn delete(&self, path: &str) -> reqwest::RequestBuilder {
        self.http.delete(self.url(path))
    }

    /// GET with the session `cookie` (a read needs no Origin).
    pub async fn get_as(&self, path: &str, cookie: &str) -> reqwest::Response {
        let res = self.get(path).header("cookie", cookie).send().await;
        res.unwrap()
    }

    /// The stored conversations of character `cid` (`.../conversations/messages`, 200).
    pub async fn history(&self, cid: &str) -> serde_json::Value {
        self.get_json(
            &format!("/api/v1/characters/{cid}/conversations/messages"),
            200,
        )
        .await
    }

    /// GET as JSON, asserting the status.
    pub async fn get_json(&self, path: &str, status: u16) -> serde_json::Value {
        let res = self.get(path).send().await.unwrap();
        assert_eq!(res.status().as_u16(), status, "GET {path}");
        res.json().await.unwrap()
    }

    /// POST a JSON body, asserting the status, returning the JSON answer (Null when empty).
    pub async fn post_json(
        &self,
        path: &str,
        body: serde_json::Value,
        status: u16,
    ) -> serde_json::Value {
        expect(self.post(path).json(&body), status).await
    }

    pub async fn put_json(
        &self,
        path: &str,
        body: serde_json::Value,
        status: u16,
    ) -> serde_json::Value {
        expect(self.put(path).json(&body), status).await
    }

    /// Makes every later request of this client an administrator's (the session cookie
    /// `cookie`), from the console's own origin, so cookie writes pass the Origin check.
    pub fn as_admin(&mut self, cookie: &str) {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("cookie", cookie.parse().unwrap());
        headers.insert("origin", self.base.parse().unwrap());
        self.http = reqwest::Client::builder()
            .default_headers(headers)
            .build()
            .unwrap();
    }

    /// The knowledge sources of character `id` as `[filename, status, size]`, in list order.
    pub async fn sources(&self, id: &str) -> Vec<serde_json::Value> {
        let knowledge = self
            .get_json(&format!("/api/v1/characters/{id}/knowledge"), 200)
            .await;
        knowledge["sources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| serde_json::json!([x["filename"], x["status"], x["size"]]))
            .collect()
    }

    /// Creates a character and returns its id.
    pub async fn character(&self, name: &str) -> String {
        let body = serde_json::json!({ "name": name });
        self.created("/api/v1/characters", body, "id").await
    }

    /// Opens a session with character `cid` as this client; returns its id.
    pub async fn session(&self, cid: &str) -> String {
        let body = serde_json::json!({ "character_id": cid });
        self.created("/api/v1/sessions", body, "session_id").await
    }

    /// Posts `body` to `path`, expects 201 and returns the new thing's id, named `field`.
    async fn created(&self, path: &str, body: serde_json::Value, field: &str) -> String {
        let v = self.post_json(path, body, 201).await;
        v[field].as_str().unwrap().to_string()
    }

    /// Uploads `text` as the knowledge file `name` of character `cid` and waits until that
    /// source is indexed (failing if it is not within 30 s, or ends in another state).
    pub async fn knowledge_ready(&self, cid: &str, name: &str, text: &str) {
        let form = reqwest::multipart::Form::new().part(
            "files",
            reqwest::multipart::Part::bytes(text.as_bytes().to_vec()).file_name(name.to_string()),
        );
        let res = self
            .post(&format!("/api/v1/characters/{cid}/knowledge/files"))
            .multipart(form)
            .send()
            .await
            .unwrap();
        let body = json_of(res, "POST", "knowledge/files", 201).await;
        let id = body["sources"][0]["id"].as_str().unwrap().to_string();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let all = self
                .get_json(&format!("/api/v1/characters/{cid}/knowledge"), 200)
                .await;
            let source = all["sources"]
                .as_array()
                .unwrap()
                .iter()
                .find(|x| x["id"] == id.as_str())
                .cloned()
                .unwrap_or_else(|| panic!("source {id} missing: {all}"));
            match source["status"].as_str() {
                Some("ready") => return,
                Some("indexing") => {}
                _ => panic!("knowledge source did not index: {source}"),
            }
            assert!(
                std::time::Instant::now() < deadline,
                "still indexing: {source}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// The id of the default character created at first start.
    pub async fn default_character(&self) -> String {
        let all = self.get_json("/api/v1/characters", 200).await;
        all[0]["id"].as_str().unwrap().to_string()
    }
}

async fn json_of(
    res: reqwest::Response,
    method: &str,
    path: &str,
    status: u16,
) -> serde_json::Value {
    let got = res.status().as_u16();
    let text = res.text().await.unwrap();
    assert_eq!(got, status, "{method} {path}: {text}");
    if text.is_empty() {
        serde_json::Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Signs in as the administrator over the API, asserting success; returns the session's
/// `Cookie` header value (`docent_session=<token>`).
pub async fn sign_in(s: &Server, password: &str) -> String {
    let res = s
        .post("/api/auth")
        .json(&serde_json::json!({ "password": password }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "sign in with {password}");
    let cookie = res.headers()["set-cookie"].to_str().unwrap();
    cookie.split(';').next().unwrap().to_string()
}

/// Asserts that each route is the administrator's alone: 401 without credentials, and a write
/// with the administrator's session `cookie` from another origin 403.
pub async fn assert_admin_only(s: &Server, cookie: &str, routes: &[(reqwest::Method, &str)]) {
    for (method, path) in routes {
        let res = s.http.request(method.clone(), s.url(path)).send().await;
        assert_eq!(res.unwrap().status(), 401, "{method} {path}");
        if *method != reqwest::Method::GET {
            let res = s
                .http
                .request(method.clone(), s.url(path))
                .header("cookie", cookie)
                .header("origin", "http://evil.example")
                .body("x")
                .send()
                .await;
            let status = res.unwrap().status();
            assert_eq!(status, 403, "{method} {path}: cross-origin cookie write");
        }
    }
}

/// The token of a session cookie (`docent_session=<token>`), for a bearer header.
pub fn token_of(cookie: &str) -> String {
    cookie
        .strip_prefix("docent_session=")
        .unwrap_or_else(|| panic!("unexpected cookie {cookie:?}"))
        .to_string()
}

/// A header of `res` as text ("" when absent or not text).
pub fn header<'a>(res: &'a reqwest::Response, name: &str) -> &'a str {
    res.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// Every file under `dir` with the SHA-256 of its bytes, in path order.
pub fn hash_tree(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let digest = sha2::Sha256::digest(std::fs::read(&path).unwrap());
                let name = path.strip_prefix(dir).unwrap().display().to_string();
                out.push((name, docent::store::blobs::hex(&digest)));
            }
        }
    }
    out.sort();
    out
}

/// Every `.rs` file under `dir`, appended to `out` (directory order).
pub fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every `/console/...` file that `body` (a page or a script) names whose name ends in one of
/// `kinds` (".js", ".css", ...), in order.
pub fn references(body: &str, kinds: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = body;
    while let Some(at) = rest.find("/console/") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || "/._-".contains(c)))
            .unwrap_or(tail.len());
        let path = &tail[..end];
        if kinds.iter().any(|k| path.ends_with(k)) {
            found.push(path.to_string());
        }
        rest = &tail[end.max(1)..];
    }
    found
}

/// The inputs of a gRPC `Converse` stream: `config`, then the text `text`. The stream stays
/// open while the sender lives.
pub async fn config_then_text(
    config: docent::proto::VoiceLlmConfig,
    text: &str,
) -> (
    tokio::sync::mpsc::Sender<docent::proto::VoiceLlmInput>,
    tokio_stream::wrappers::ReceiverStream<docent::proto::VoiceLlmInput>,
) {
    use docent::proto::{VoiceLlmInput, voice_llm_input::Input};
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    for input in [Input::Config(config), Input::Text(text.into())] {
        let input = VoiceLlmInput { input: Some(input) };
        tx.send(input).await.unwrap();
    }
    (tx, tokio_stream::wrappers::ReceiverStream::new(rx))
}

/// A tiny valid PNG (1x1).
pub const PNG: &[u8] = &[
    0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1F, 0x15, 0xC4,
    0x89, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9C, 0x63, 0x00, 0x01, 0x00, 0x00,
    0x05, 0x00, 0x01, 0x0D, 0x0A, 0x2D, 0xB4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4E, 0x44, 0xAE,
    0x42, 0x60, 0x82,
];

/// A minimal MP4 whose single track has an H.264 (`avc1`) sample entry: enough for the upload
/// check, which looks at the container, not the frames.
pub fn mp4_h264() -> Vec<u8> {
    fn mp4_box(kind: &[u8; 4], payload: &[u8]) -> Vec<u8> {
        let mut out = ((payload.len() + 8) as u32).to_be_bytes().to_vec();
        out.extend_from_slice(kind);
        out.extend_from_slice(payload);
        out
    }
    let mut stsd = vec![0, 0, 0, 0, 0, 0, 0, 1];
    stsd.extend(mp4_box(b"avc1", &[0; 78]));
    let stbl = mp4_box(b"stbl", &mp4_box(b"stsd", &stsd));
    let trak = mp4_box(b"trak", &mp4_box(b"mdia", &mp4_box(b"minf", &stbl)));
    let mut file = mp4_box(b"ftyp", b"isom\0\0\x02\0isomavc1");
    file.extend(mp4_box(b"moov", &trak));
    file.extend(mp4_box(b"mdat", &[7u8; 4096]));
    file
}

/// Uploads `bytes` as the avatar of character `id`; returns the response JSON.
pub async fn upload_avatar(s: &Server, id: &str, bytes: &[u8], status: u16) -> serde_json::Value {
    let form = reqwest::multipart::Form::new().part(
        "avatar",
        reqwest::multipart::Part::bytes(bytes.to_vec()).file_name("face.png"),
    );
    let res = s
        .post(&format!("/api/v1/characters/{id}/avatar"))
        .multipart(form)
        .send()
        .await
        .unwrap();
    json_of(res, "POST", "avatar", status).await
}

/// Gives the kiosk two characters: Ada Lovelace with an avatar image and a knowledge file that
/// is indexed, and Charles Babbage. Returns Ada's id.
pub async fn furnished(s: &Server) -> String {
    let ada = s.character("Ada Lovelace").await;
    s.character("Charles Babbage").await;
    upload_avatar(s, &ada, PNG, 200).await;
    let engine = "The Analytical Engine was designed by Charles Babbage in 1837.";
    s.knowledge_ready(&ada, "engine.txt", engine).await;
    ada
}

/// Sends any request, asserting the status; returns the JSON answer (Null when empty, a
/// string when not JSON).
pub async fn expect(req: reqwest::RequestBuilder, status: u16) -> serde_json::Value {
    let (client, req) = req.build_split();
    let req = req.unwrap();
    let (method, path) = (req.method().to_string(), req.url().path().to_string());
    json_of(client.execute(req).await.unwrap(), &method, &path, status).await
}

/// Asserts that `v` is an error body: `{"error": "<non-empty message>"}`.
pub fn assert_error(v: &serde_json::Value) {
    let message = v["error"].as_str().unwrap_or_default();
    assert!(!message.is_empty(), "expected {{error}}, got {v}");
}

/// The keys of a JSON object, sorted.
pub fn keys(v: &serde_json::Value) -> Vec<&str> {
    let mut k: Vec<&str> = v
        .as_object()
        .unwrap_or_else(|| panic!("expected an object, got {v}"))
        .keys()
        .map(String::as_str)
        .collect();
    k.sort_unstable();
    k
}

/// The check called `name` of a settings test answer (`POST /api/v1/settings/test`).
pub fn check<'a>(answer: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    answer["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name} in {answer}"))
}

/// The launch parameter at `path` in a `GET /api/v1/config/launch` answer.
pub fn launch_param<'a>(launch: &'a serde_json::Value, path: &str) -> &'a serde_json::Value {
    launch["sections"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["params"].as_array().unwrap())
        .find(|p| p["path"] == path)
        .unwrap_or_else(|| panic!("no launch parameter {path}"))
}
