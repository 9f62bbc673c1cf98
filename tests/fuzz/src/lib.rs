//! What the fuzz targets share: a real engine on a scratch data directory and the HTTP
//! application in front of it, driven in-process (no socket) from a loopback peer.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Request;
use docent::api::{AppState, router};
use docent::config::{Config, DeviceMode};
use docent::device::Devices;
use docent::engine::Engine;
use tower::ServiceExt;

/// A kiosk without devices on a scratch directory (in memory when `/dev/shm` exists, so the
/// fsync of every write is cheap), removed when this is dropped.
pub struct Kiosk {
    pub engine: Arc<Engine>,
    pub app: axum::Router,
    pub runtime: tokio::runtime::Runtime,
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
        let engine = Engine::open(config).expect("engine");
        let app = {
            let _entered = runtime.enter();
            router(AppState::new(engine.clone(), Arc::new(Devices::none())))
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
        let mut req = Request::builder()
            .method(method)
            .uri(uri)
            .header("content-type", content_type)
            .body(Body::from(body))
            .expect("request");
        req.extensions_mut()
            .insert(ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 40000))));
        let res = self
            .runtime
            .block_on(self.app.clone().oneshot(req))
            .expect("infallible");
        let status = res.status().as_u16();
        let documented = status == 500 && uri == "/api/auth";
        assert!(
            status < 500 || status == 503 || status == 507 || documented,
            "server error {status} on {method} {uri}"
        );
        // The whole answer is read, as a client would.
        let _ = self
            .runtime
            .block_on(axum::body::to_bytes(res.into_body(), usize::MAX));
        status
    }
}

impl Drop for Kiosk {
    fn drop(&mut self) {
        self.engine.knowledge.stop();
    }
}
