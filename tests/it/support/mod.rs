//! A real `docent` server on 127.0.0.1 with a fresh data directory, for integration tests:
//! in this process ([`Server`]), or the built binary as a process of its own ([`Process`]).

pub mod browser;
pub mod disk;
pub mod fake_hawkbit;
pub mod fake_wyoming;
mod process;
pub mod rauc;

use std::net::SocketAddr;
use std::path::Path;

use docent::config::Config;
use sha2::Digest as _;
use tokio::sync::oneshot;

pub use process::{Process, Running, docent, docent_under};

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
        let mut config = Config {
            data_dir: dir.path().to_path_buf(),
            listen: "127.0.0.1:0".parse().unwrap(),
            ..Config::default()
        };
        tweak(&mut config);
        let (ready_tx, ready_rx) = oneshot::channel();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            docent::run(
                config,
                move |addr| {
                    let _ = ready_tx.send(addr);
                },
                async move {
                    let _ = stopped.await;
                },
            )
            .await
            .expect("server runs");
        });
        let addr = ready_rx.await.expect("server started");
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
        // No server runs in this process to have installed it.
        let _ = rustls::crypto::ring::default_provider().install_default();
        Server {
            base: running.base(),
            addr: running.addr,
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

    /// Creates a character and returns its id.
    pub async fn character(&self, name: &str) -> String {
        let c = self
            .post_json(
                "/api/v1/characters",
                serde_json::json!({ "name": name }),
                201,
            )
            .await;
        c["id"].as_str().unwrap().to_string()
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
    let form = reqwest::multipart::Form::new().part(
        "files",
        reqwest::multipart::Part::bytes(
            b"The Analytical Engine was designed by Charles Babbage in 1837.".to_vec(),
        )
        .file_name("engine.txt"),
    );
    let res = s
        .post(&format!("/api/v1/characters/{ada}/knowledge/files"))
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let k = s
            .get_json(&format!("/api/v1/characters/{ada}/knowledge"), 200)
            .await;
        if k["sources"][0]["status"] == "ready" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "indexing: {k}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
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
