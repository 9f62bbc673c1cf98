//! The fleet routes (admin only): the fleet client's state, pausing its polling, and this
//! kiosk's content exported as a signed content bundle for the other kiosks.

use axum::body::Body;
use axum::extract::State;
use axum::http::header::{CACHE_CONTROL, CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;

use super::auth::Admin;
use super::error::ApiResult;
use super::extract::JsonBody;
use super::{AppState, blocking};
use crate::engine::fleet::Status;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/fleet", get(status))
        .route("/api/v1/fleet/pause", post(pause))
        .route("/api/v1/fleet/content/export", post(export))
}

/// What the fleet client does: the server, the last poll, the action in progress and the last
/// messages it sent. The target token is never part of it.
#[utoipa::path(get, path = "/api/v1/fleet", tag = "fleet", security(("admin_session" = []), ("bearer" = [])), responses((status = 200, description = "The fleet client's state", body = Status), (status = 401, description = "Not an administrator (setup mode: not trusted loopback)", body = crate::api::openapi::ErrorBody)))]
async fn status(_: Admin, State(s): State<AppState>) -> Json<Status> {
    Json(s.engine.fleet.status())
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Pause {
    paused: bool,
}

/// Pauses or resumes polling (kept across restarts).
#[utoipa::path(post, path = "/api/v1/fleet/pause", tag = "fleet", request_body(content = Pause, content_type = "application/json"), security(("admin_session" = []), ("bearer" = [])), responses((status = 200, description = "Saved; the fleet client's state", body = Status), (status = 400, description = "Invalid body", body = crate::api::openapi::ErrorBody), (status = 401, description = "Not an administrator (setup mode: not trusted loopback)", body = crate::api::openapi::ErrorBody), (status = 403, description = "A write authenticated by the session cookie from another origin", body = crate::api::openapi::ErrorBody), (status = 415, description = "Body not sent as Content-Type: application/json", body = crate::api::openapi::ErrorBody)))]
async fn pause(
    _: Admin,
    State(s): State<AppState>,
    JsonBody(body): JsonBody<Pause>,
) -> ApiResult<Json<Status>> {
    let saved = blocking(&s, move |e| e.set_fleet_paused(body.paused)).await?;
    let mut status = s.engine.fleet.status();
    status.paused = saved.paused;
    Ok(Json(status))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Export {
    /// The content version the kiosks will report (letters, digits, `.-_+`).
    version: String,
    /// The fleet's Ed25519 private key, base64 (a 32-byte seed or PKCS#8 DER); used for this
    /// signature only, never stored or logged.
    signing_key: String,
}

/// This kiosk's content (characters, images, clips, knowledge, site, settings without secrets)
/// as a content bundle signed with the fleet's key, to upload to the fleet server.
#[utoipa::path(post, path = "/api/v1/fleet/content/export", tag = "fleet", request_body(content = Export, content_type = "application/json"), security(("admin_session" = []), ("bearer" = [])), responses((status = 200, description = "The signed content bundle (tar), as a download", body = crate::api::openapi::Binary, content_type = "application/x-tar"), (status = 400, description = "Invalid version or key", body = crate::api::openapi::ErrorBody), (status = 401, description = "Not an administrator (setup mode: not trusted loopback)", body = crate::api::openapi::ErrorBody), (status = 403, description = "A write authenticated by the session cookie from another origin", body = crate::api::openapi::ErrorBody), (status = 409, description = "A backup or restore is under way", body = crate::api::openapi::ErrorBody), (status = 415, description = "Body not sent as Content-Type: application/json", body = crate::api::openapi::ErrorBody), (status = 507, description = "The data partition is below its reserve", body = crate::api::openapi::ErrorBody)))]
async fn export(
    _: Admin,
    State(s): State<AppState>,
    JsonBody(body): JsonBody<Export>,
) -> ApiResult<Response> {
    let version = body.version.clone();
    let file = blocking(&s, move |e| {
        let path = e
            .scratch_dir()
            .join(format!("export-{}.tar", crate::engine::new_id()));
        let out = std::fs::File::create(&path)?;
        let written = e.export_content(&body.version, &body.signing_key, out);
        // Opened before it is removed: the download reads a file no one else can find.
        let file = written.and_then(|()| Ok(std::fs::File::open(&path)?));
        let _ = std::fs::remove_file(&path);
        file
    })
    .await?;
    let stream = tokio_util::io::ReaderStream::new(tokio::fs::File::from_std(file));
    let name = format!("attachment; filename=\"docent-content-{version}.tar\"");
    Ok((
        [
            (CONTENT_TYPE, "application/x-tar".to_string()),
            (CONTENT_DISPOSITION, name),
            (CACHE_CONTROL, "no-store".to_string()),
        ],
        Body::from_stream(stream),
    )
        .into_response())
}
