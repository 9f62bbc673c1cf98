//! The front doors: the HTTP API (and, on the same listener, WebSocket and gRPC).
//!
//! Handlers translate HTTP to engine calls and back; rules live in the engine. Every response
//! carries the CORS headers (`*` origin unless the request carries credentials, see [`cors`];
//! methods GET, POST, PUT, DELETE, OPTIONS; headers Content-Type, Authorization), and any
//! OPTIONS request is answered 200 at once, before routing.

mod app;
mod auth;
mod availability;
mod characters;
mod client_keys;
mod console;
mod conversations;
mod debug;
mod device;
mod error;
mod extract;
mod files;
mod fleet;
mod grpc;
mod gzip;
pub mod listen;
pub mod mdns;
mod metrics;
mod openapi;
mod schema;
mod sessions;
mod site;
mod state;
mod statuses;
mod streams;
mod system;
mod tasks;
pub mod tls;
mod update;
mod ws;

use std::sync::Arc;

pub use app::App;
/// The WebSocket chat's message parser, public for the fuzz targets (tests/fuzz).
pub use ws::{ClientMessage, parse_client_message};

pub use state::{AppState, Reach, blocking};

/// Serves the application on `listener` (plain HTTP and HTTPS on the same port) until
/// `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    tls: Arc<tls::Tls>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    // An application is served once; a second `serve` keeps the first certificate.
    let _ = state.tls.set(tls.clone());
    let engine = state.engine.clone();
    let stopping = state.stopping.clone();
    let shutdown = async move {
        shutdown.await;
        stopping.cancel();
    };
    listen::serve(listener, App::new(state), tls, &engine.config, shutdown).await
}
