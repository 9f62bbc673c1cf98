//! What every handler reaches: the engine, the devices, the update service and the fleet
//! client's state, plus the front doors' own caches and budgets; and [`blocking`], the way a
//! handler runs an engine call that waits for fsync.

use std::sync::Arc;

use axum::http::StatusCode;

use super::error::ApiError;
use super::{extract, gzip, metrics, site, streams, system, tls};
use crate::device::Devices;
use crate::engine::Engine;
use crate::fleet::Fleet;
use crate::update::Updates;

/// What every handler can reach: one `Arc`, so the clone each extractor and middleware makes
/// per request is one atomic increment.
#[derive(Clone)]
pub struct AppState(Arc<Reach>);

impl std::ops::Deref for AppState {
    type Target = Reach;

    fn deref(&self) -> &Reach {
        &self.0
    }
}

/// The parts of [`AppState`].
pub struct Reach {
    pub engine: Arc<Engine>,
    /// The kiosk's own devices (button, audio, display).
    pub devices: Arc<Devices>,
    /// Firmware updates through RAUC.
    pub updates: Arc<Updates>,
    /// The fleet client's state, which the console shows.
    pub fleet: Arc<Fleet>,
    pub(super) images: Arc<site::ImageCache>,
    /// Cancelled when the server starts to shut down, so that streams that never end by
    /// themselves (the console's event stream) let the graceful shutdown finish.
    pub(super) stopping: tokio_util::sync::CancellationToken,
    pub(super) streams: Arc<streams::Streams>,
    /// Password checks allowed at once (`access.login_concurrency`).
    pub(super) logins: Arc<tokio::sync::Semaphore>,
    /// The listener's certificate, set by `serve` (the certificate routes replace it).
    pub(super) tls: std::sync::OnceLock<Arc<tls::Tls>>,
    /// Request bodies being received at once (`connections.request_body_budget_bytes`).
    pub(super) bodies: Arc<extract::BodyBudget>,
    pub(super) health: system::HealthCache,
    pub(super) characters_gzip: gzip::Gzipped,
    /// The front doors' instruments and the scrape's gauges (`GET /metrics`).
    pub(super) http: metrics::Http,
}

impl AppState {
    pub fn new(
        engine: Arc<Engine>,
        devices: Arc<Devices>,
        updates: Arc<Updates>,
        fleet: Arc<Fleet>,
    ) -> AppState {
        let images = Arc::new(site::ImageCache::new(
            engine.config.storage.image_cache_bytes,
        ));
        let streams = Arc::new(streams::Streams::new(&engine.config));
        let logins = Arc::new(tokio::sync::Semaphore::new(
            engine.config.access.login_concurrency.max(1),
        ));
        let body_budget = engine.config.connections.request_body_budget_bytes;
        AppState(Arc::new(Reach {
            engine,
            devices,
            updates,
            fleet,
            images,
            stopping: Default::default(),
            streams,
            logins,
            tls: Default::default(),
            bodies: Arc::new(extract::BodyBudget::new(body_budget)),
            health: Default::default(),
            characters_gzip: Default::default(),
            http: Default::default(),
        }))
    }
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
