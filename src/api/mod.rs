//! The front doors: the HTTP API (and, on the same listener, WebSocket and gRPC).
//!
//! Handlers translate HTTP to engine calls and back; rules live in the engine. Every response
//! carries the CORS headers (`*` origin; methods GET, POST, PUT, DELETE, OPTIONS; headers
//! Content-Type, Authorization), and any OPTIONS request is answered 200 at once, before routing.

mod auth;
mod characters;
mod debug;
mod device;
mod error;
mod extract;
mod files;
mod grpc;
pub mod listen;
mod sessions;
mod site;
mod streams;
mod system;
mod tasks;
pub mod tls;
mod ws;

use std::sync::Arc;

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};

use error::ApiError;

use crate::device::Devices;
use crate::engine::Engine;

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub engine: Arc<Engine>,
    /// The kiosk's own devices (button, audio, display).
    pub devices: Arc<Devices>,
    images: Arc<site::ImageCache>,
    streams: Arc<streams::Streams>,
}

impl AppState {
    pub fn new(engine: Arc<Engine>, devices: Arc<Devices>) -> AppState {
        let images = Arc::new(site::ImageCache::new(engine.config.image_cache_bytes));
        let streams = Arc::new(streams::Streams::new(&engine.config));
        AppState {
            engine,
            devices,
            images,
            streams,
        }
    }
}

/// The whole HTTP application.
pub fn router(state: AppState) -> Router {
    let hooks = if state.engine.config.test_hooks {
        debug::routes()
    } else {
        Router::new()
    };
    Router::new()
        .merge(system::routes())
        .merge(site::routes())
        .merge(sessions::routes())
        .merge(tasks::routes())
        .merge(device::routes())
        .merge(ws::routes())
        .merge(grpc::routes(state.engine.clone(), state.streams.clone()))
        .merge(characters::routes(&state.engine.config.limits))
        .merge(hooks)
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "no such route") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method not allowed on this route",
            )
        })
        .with_state(state)
        .layer(middleware::from_fn(cors))
}

/// The CORS headers on every response; OPTIONS is answered before routing.
async fn cors(req: Request, next: Next) -> Response {
    let mut res = if req.method() == Method::OPTIONS {
        StatusCode::OK.into_response()
    } else {
        next.run(req).await
    };
    let h = res.headers_mut();
    h.insert("access-control-allow-origin", HeaderValue::from_static("*"));
    h.insert(
        "access-control-allow-methods",
        HeaderValue::from_static("GET, POST, PUT, DELETE, OPTIONS"),
    );
    h.insert(
        "access-control-allow-headers",
        HeaderValue::from_static("Content-Type, Authorization"),
    );
    res
}

/// Serves the application on `listener` (plain HTTP and HTTPS on the same port) until
/// `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    tls: Arc<tls::Tls>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let engine = state.engine.clone();
    listen::serve(listener, router(state), tls, &engine.config, shutdown).await
}

/// Runs an engine call that may block (every write waits for fsync) on the blocking pool.
pub async fn blocking<T: Send + 'static>(
    state: &AppState,
    f: impl FnOnce(&Arc<Engine>) -> crate::engine::Result<T> + Send + 'static,
) -> Result<T, ApiError> {
    let engine = state.engine.clone();
    tokio::task::spawn_blocking(move || f(&engine))
        .await
        .map_err(|_| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error"))?
        .map_err(ApiError::from)
}
