//! The fleet routes (admin only): the fleet client's state, pausing its polling, this kiosk's
//! content exported as a signed content bundle for the other kiosks, and a bundle applied by
//! hand (the only way to force an older one).

use axum::body::Body;
use axum::extract::State;
use axum::http::header::{CACHE_CONTROL, CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;

use super::auth::Admin;
use super::error::ApiResult;
use super::extract::{JsonBody, QueryArgs};
use super::schema::ErrorBody;
use super::state::{AppState, blocking};
use super::statuses;
use crate::engine::content::Replay;
use crate::fleet::Status;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/fleet", get(status))
        .route("/api/v1/fleet/pause", post(pause))
        .route("/api/v1/fleet/content/export", post(export))
        .route("/api/v1/fleet/content/apply", post(apply))
}

/// What the fleet client does: the server, the last poll, the action in progress and the last
/// messages it sent. The target token is never part of it.
#[utoipa::path(get, path = "/api/v1/fleet", tag = "fleet",
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (status = 200, description = "The fleet client's state", body = Status),
        statuses::NotAdmin,
    ))]
async fn status(_: Admin, State(s): State<AppState>) -> Json<Status> {
    Json(s.fleet.status())
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Pause {
    paused: bool,
}

/// Pauses or resumes polling (kept across restarts).
#[utoipa::path(post, path = "/api/v1/fleet/pause", tag = "fleet",
    request_body(content = Pause, content_type = "application/json"),
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (status = 200, description = "Saved; the fleet client's state", body = Status),
        statuses::AdminJsonWrite,
    ))]
async fn pause(
    _: Admin,
    State(s): State<AppState>,
    JsonBody(body): JsonBody<Pause>,
) -> ApiResult<Json<Status>> {
    let saved = blocking(&s, move |e| e.set_fleet_paused(body.paused)).await?;
    let mut status = s.fleet.status();
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
#[utoipa::path(post, path = "/api/v1/fleet/content/export", tag = "fleet",
    request_body(content = Export, content_type = "application/json"),
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (
            status = 200,
            description = "The signed content bundle (tar), as a download",
            body = crate::api::schema::Binary,
            content_type = "application/x-tar",
        ),
        statuses::AdminJsonWrite,
        (status = 409, description = "A backup or restore is under way", body = ErrorBody),
        (status = 507, description = "The data partition is below its reserve", body = ErrorBody),
    ))]
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

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct ApplyQuery {
    /// Apply a bundle that is not newer than the last one applied (rolls the content back).
    #[serde(default)]
    force: bool,
}

/// What an apply staged.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct Applied {
    status: &'static str,
    content_version: String,
    restarting: bool,
}

/// Applies a content bundle signed with the fleet's key (`fleet.content_public_key`), as a
/// deployment does: checked, staged, then the kiosk restarts into it. A bundle not newer than
/// the last one applied is refused (409) unless `force` says to roll the content back.
#[utoipa::path(post, path = "/api/v1/fleet/content/apply", tag = "fleet",
    params(ApplyQuery),
    request_body(
        content = crate::api::schema::Binary,
        description = "A content bundle (tar) from `POST /api/v1/fleet/content/export`",
        content_type = "application/octet-stream",
    ),
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (status = 200, description = "Staged; the kiosk restarts into it", body = Applied),
        statuses::NotAdmin,
        (status = 400, description = "Not a content bundle, or not one this kiosk can apply", body = ErrorBody),
        (status = 403, description = "Not signed with the fleet's key or no key is configured, \
            or a write authenticated by the session cookie from another origin", body = ErrorBody),
        (status = 409, description = "Not newer than the bundle applied last (without `force`), \
            or a backup or restore is under way", body = ErrorBody),
        (status = 413, description = "Larger than `limits.backup_bytes`", body = ErrorBody),
        (status = 507, description = "The data partition is below its reserve, \
            or has no room for the bundle", body = ErrorBody),
    ))]
async fn apply(
    _: Admin,
    State(s): State<AppState>,
    QueryArgs(q): QueryArgs<ApplyQuery>,
    body: Body,
) -> ApiResult<Json<Applied>> {
    let upload = super::system::Upload::receive(&s, body, "content", "content bundle").await?;
    let key = s.engine.settings().fleet.content_public_key.clone();
    let replay = if q.force {
        Replay::Force
    } else {
        Replay::Refuse
    };
    let version = blocking(&s, move |e| {
        let applied = e.apply_content(&upload.0, &key, replay);
        drop(upload);
        applied
    })
    .await?;
    s.engine.request_restart();
    Ok(Json(Applied {
        status: "applied",
        content_version: version,
        restarting: true,
    }))
}
