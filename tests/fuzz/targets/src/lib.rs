//! The fuzz targets' entry points, without AFL: each binary in `tests/fuzz/src/bin` hands AFL++'s
//! inputs to one of these, and the integration tests (`tests/it/fuzz_corpus.rs`) replay every
//! corpus input through the same functions on every `cargo test`.
//!
//! What they share: a real engine on a scratch data directory and the HTTP application in front
//! of it, driven in-process (no socket) from a loopback peer.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::http::Request;
use docent::api::listen::Transport;
use docent::api::{App, AppState};
use docent::config::{Config, DeviceMode};
use docent::device::Devices;
use docent::engine::Engine;
use docent::fleet::Fleet;
use docent::update::Updates;
use prost::Message;

/// Every target, by the name of its binary and its corpus folder.
pub const TARGETS: &[&str] = &[
    "extract", "clip", "image", "config", "site", "ws", "grpc", "http",
];

/// Knowledge extraction: the first byte picks the file type (PDF, DOCX, HTML, JSON, Markdown,
/// plain text), the rest is the file as uploaded. The PDF parser runs on a thread of its own
/// under `catch_unwind` (a panic there is the product's "could not read it").
pub fn extract(data: &[u8]) {
    const NAMES: &[&str] = &["a.pdf", "a.docx", "a.html", "a.json", "a.md", "a.txt"];
    let Some((&kind, file)) = data.split_first() else {
        return;
    };
    let _ =
        docent::engine::knowledge::extract::extract_text(NAMES[kind as usize % NAMES.len()], file);
}

/// The idle clip reader: MP4 parsing, the H.264 check of uploads, and the first frames decoded
/// as the display would (enough to pass the parameter sets and loop once on short clips).
pub fn clip(data: &[u8]) {
    use docent::engine::media::clip::{Clip, ClipDecoder};
    const FRAMES: usize = 4;
    let _ = docent::engine::media::is_h264_mp4(data);
    let Ok(clip) = Clip::from_bytes(data.to_vec()) else {
        return;
    };
    let _ = (clip.size(), clip.frame_count(), clip.frames_per_second());
    let Ok(mut decoder) = ClipDecoder::new(clip) else {
        return;
    };
    for _ in 0..FRAMES {
        if decoder.next_frame(|_| {}).is_err() {
            break;
        }
    }
}

/// Images: the content sniffing of every upload (avatars, site images) and the decoding of an
/// avatar for the screen (PNG, JPEG); a decoder panic is caught by the product.
pub fn image(data: &[u8]) {
    use docent::engine::media::{mime_for_name, sniff_image};
    let _ = sniff_image(data);
    if let Ok(name) = std::str::from_utf8(data) {
        let _ = mime_for_name(name);
    }
    let _ = docent::device::display::still::decode(data, (320, 240));
}

/// The configuration file, through the real loader (TOML, then every check of the values).
pub fn config(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = Config::from_toml(text);
    }
}

/// The site document of `PUT /api/data` (the checks before it is stored).
pub fn site(data: &[u8]) {
    let _ = docent::engine::site::validate_document(data);
}

/// A WebSocket chat client's text frames.
pub fn ws(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = docent::api::parse_client_message(text);
    }
}

/// VoiceLLMService messages: the protobuf decoding of every message the kiosk reads (the
/// server's inputs, and the outputs its `remote` provider reads from another service), the
/// bounds of a seeded history, and a real `Interrupt` call through the router (gRPC framing,
/// decoding, the handler).
pub fn grpc(kiosk: &Kiosk, data: &[u8]) {
    use docent::proto::{
        CheckVoiceRequest, InterruptRequest, VoiceLlmInput, VoiceLlmOutput, voice_llm_input::Input,
    };
    let Some((&kind, msg)) = data.split_first() else {
        return;
    };
    match kind % 4 {
        0 => {
            if let Ok(VoiceLlmInput {
                input: Some(Input::Config(c)),
            }) = VoiceLlmInput::decode(msg)
            {
                let items: Vec<(String, String)> = c
                    .dialog_context
                    .iter()
                    .map(|i| (i.role.clone(), i.text.clone()))
                    .collect();
                let _ = docent::engine::access::check_context(&items);
            }
        }
        1 => {
            let _ = VoiceLlmOutput::decode(msg);
        }
        2 => {
            let _ = CheckVoiceRequest::decode(msg);
            let _ = InterruptRequest::decode(msg);
        }
        _ => {
            // One length-prefixed gRPC frame, uncompressed.
            let mut body = vec![0];
            body.extend_from_slice(&(msg.len() as u32).to_be_bytes());
            body.extend_from_slice(msg);
            kiosk.send(
                "POST",
                "/cyberverse.VoiceLLMService/Interrupt",
                "application/grpc",
                body,
            );
        }
    }
}

const JSON: &str = "application/json";
const MULTIPART: &str = "multipart/form-data; boundary=fuzzbound";

/// HTTP request bodies through the real router and handlers, as a loopback administrator in
/// setup mode: the first byte picks the route, the rest is the body. JSON bodies of every write
/// route, multipart uploads (avatars, knowledge files), raw uploads (site images, idle clips).
/// Routes that start a turn or reach a provider (messages, voice and settings tests) are left
/// out: they would run the offline engine's processes or open connections.
pub struct Http {
    kiosk: Kiosk,
    routes: Vec<(&'static str, String, &'static str)>,
}

impl Http {
    /// A kiosk with one character that has an avatar, so that idle clip uploads have an
    /// `imgbase`.
    pub fn start() -> Http {
        const TASK: &str = "6f1c1d7e-3a55-4b0e-9b8e-0c3c3b1f2a10";
        const AVATAR: &[u8] = include_bytes!("../../corpus/image/tiny.png");
        let kiosk = Kiosk::start();
        let (status, created) = kiosk.exchange(
            "POST",
            "/api/v1/characters",
            JSON,
            br#"{"name":"Fuzz"}"#.to_vec(),
        );
        assert_eq!(status, 201, "character created");
        let v: serde_json::Value = serde_json::from_slice(&created).expect("a JSON answer");
        let id = v["id"].as_str().expect("an id").to_string();
        let mut avatar = concat!(
            "--fuzzbound\r\nContent-Disposition: form-data; name=\"avatar\"; filename=\"a.png\"\r\n",
            "Content-Type: image/png\r\n\r\n"
        )
        .as_bytes()
        .to_vec();
        avatar.extend_from_slice(AVATAR);
        avatar.extend_from_slice(b"\r\n--fuzzbound--\r\n");
        let status = kiosk.send(
            "POST",
            &format!("/api/v1/characters/{id}/avatar"),
            MULTIPART,
            avatar,
        );
        assert!(status < 300, "avatar upload: {status}");
        let routes = vec![
            ("POST", "/api/v1/characters".into(), JSON),
            ("PUT", format!("/api/v1/characters/{id}"), JSON),
            ("POST", "/api/v1/sessions".into(), JSON),
            ("PUT", "/api/v1/settings".into(), JSON),
            ("PUT", "/api/v1/config/launch".into(), JSON),
            ("POST", "/api/v1/client-keys".into(), JSON),
            ("POST", "/api/auth".into(), JSON),
            ("PUT", "/api/data".into(), JSON),
            (
                "POST",
                format!("/api/v1/internal/tasks/{TASK}/events"),
                JSON,
            ),
            (
                "POST",
                format!("/api/v1/internal/tasks/{TASK}/artifacts"),
                JSON,
            ),
            (
                "POST",
                format!("/api/v1/internal/characters/{id}/knowledge/search"),
                JSON,
            ),
            ("POST", "/api/v1/internal/device/ptt".into(), JSON),
            ("POST", format!("/api/v1/characters/{id}/avatar"), MULTIPART),
            (
                "POST",
                format!("/api/v1/characters/{id}/knowledge/files"),
                MULTIPART,
            ),
            ("PUT", "/api/img/fuzz.png".into(), "image/png"),
            (
                "PUT",
                format!("/api/v1/characters/{id}/idle-videos/img_001/idle/a.mp4"),
                "video/mp4",
            ),
        ];
        Http { kiosk, routes }
    }

    pub fn run(&self, data: &[u8]) {
        let Some((&pick, body)) = data.split_first() else {
            return;
        };
        let (method, uri, content_type) = &self.routes[pick as usize % self.routes.len()];
        self.kiosk.send(method, uri, content_type, body.to_vec());
    }
}

/// A kiosk without devices on a scratch directory (in memory when `/dev/shm` exists, so the
/// fsync of every write is cheap), removed when this is dropped.
pub struct Kiosk {
    engine: Arc<Engine>,
    app: App,
    runtime: tokio::runtime::Runtime,
    _dir: tempfile::TempDir,
}

impl Kiosk {
    pub fn start() -> Kiosk {
        let shm = std::path::Path::new("/dev/shm");
        let dir = if shm.is_dir() {
            tempfile::tempdir_in(shm)
        } else {
            tempfile::tempdir()
        }
        .expect("scratch directory");
        let config = Config {
            data_dir: dir.path().to_path_buf(),
            devices: DeviceMode::None,
            ..Config::default()
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let updates = Updates::open(&config.update, &config.data_dir).expect("update service");
        let engine = Engine::open(config).expect("engine");
        let app = {
            let _entered = runtime.enter();
            App::new(AppState::new(
                engine.clone(),
                Arc::new(Devices::none()),
                Arc::new(updates),
                Arc::new(Fleet::default()),
            ))
        };
        Kiosk {
            engine,
            app,
            runtime,
            _dir: dir,
        }
    }

    /// Sends one request as a loopback client (trusted, and an administrator in setup mode)
    /// and returns the status, failing on a server error (5xx) except the ones that say the
    /// server is full (503, 507) and the documented answer of a login in setup mode (500: no
    /// administrator password is configured).
    pub fn send(&self, method: &str, uri: &str, content_type: &str, body: Vec<u8>) -> u16 {
        let (status, _) = self.exchange(method, uri, content_type, body);
        let documented = status == 500 && uri == "/api/auth";
        assert!(
            status < 500 || status == 503 || status == 507 || documented,
            "server error {status} on {method} {uri}"
        );
        status
    }

    /// One request and its whole answer, read as a client would.
    fn exchange(
        &self,
        method: &str,
        uri: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> (u16, Vec<u8>) {
        let mut req = Request::builder()
            .method(method)
            .uri(uri)
            .header("content-type", content_type)
            .body(Body::from(body))
            .expect("request");
        req.extensions_mut().insert(Transport {
            peer: SocketAddr::from(([127, 0, 0, 1], 40000)),
            tls: false,
        });
        self.runtime.block_on(async {
            let res = self.app.answer(req).await;
            let status = res.status().as_u16();
            let body = axum::body::to_bytes(res.into_body(), usize::MAX).await;
            (status, body.map(|b| b.to_vec()).unwrap_or_default())
        })
    }
}

impl Drop for Kiosk {
    fn drop(&mut self) {
        self.engine.knowledge.stop();
    }
}
