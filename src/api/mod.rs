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
mod sessions;
mod site;
mod system;
mod tasks;
mod ws;

use std::net::SocketAddr;
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
    /// Password checks allowed at once (`login_concurrency`).
    logins: Arc<tokio::sync::Semaphore>,
}

impl AppState {
    pub fn new(engine: Arc<Engine>, devices: Arc<Devices>) -> AppState {
        let images = Arc::new(site::ImageCache::new(engine.config.image_cache_bytes));
        let logins = Arc::new(tokio::sync::Semaphore::new(
            engine.config.login_concurrency.max(1),
        ));
        AppState {
            engine,
            devices,
            images,
            logins,
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
        .merge(grpc::routes(state.engine.clone()))
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

/// Serves the application on `listener` until `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use axum::serve::ListenerExt;
    // Replies stream in small frames (deltas, audio chunks); Nagle's algorithm would hold each
    // one back for a delayed ACK.
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!("cannot set TCP_NODELAY: {e}");
        }
    });
    axum::serve(
        listener,
        router(state).into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown)
    .await
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
