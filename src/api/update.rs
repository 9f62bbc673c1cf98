//! Firmware updates from the console: upload a bundle (RAUC's verdict comes back before anything
//! is written), install it, follow its progress, reboot; the install and the reboot now or when
//! the museum closes (`update::schedule`), and a scheduled one cancelled. Administrators only.

use axum::body::Body;
use axum::extract::State;
use axum::http::header::CONTENT_LENGTH;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use axum::{Json, Router};

use super::auth::Admin;
use super::error::{ApiError, ApiResult};
use super::extract::JsonOrEmpty;
use super::schema::ErrorBody;
use super::state::AppState;
use super::statuses;
use crate::update::{Status, Verdict, When, museum_open};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/api/v1/system/update",
            get(update_status).post(upload_update),
        )
        .route(
            "/api/v1/system/update/install",
            axum::routing::post(install_update).delete(cancel_install),
        )
        .route(
            "/api/v1/system/reboot",
            axum::routing::post(reboot).delete(cancel_reboot),
        )
}

/// The bundle is streamed to the data partition (never held in memory), then RAUC checks its
/// signature and manifest. Nothing is installed: the answer says whether it may be.
#[utoipa::path(
    post,
    path = "/api/v1/system/update",
    tag = "system",
    request_body(
        content = crate::api::schema::Binary,
        description = "A RAUC bundle (`./x bundle`)",
        content_type = "application/octet-stream"
    ),
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (status = 200, description = "RAUC's verdict; nothing is installed yet", body = Verdict),
        statuses::AdminAction,
        (status = 409, description = "Another update is being uploaded or installed",
            body = ErrorBody),
        (status = 413, description = "Larger than `update.max_bundle_bytes`", body = ErrorBody),
        (status = 503, description = "This kiosk cannot update itself (no RAUC)", body = ErrorBody),
        (status = 507, description = "The data partition is below its reserve", body = ErrorBody),
    )
)]
async fn upload_update(
    _: Admin,
    State(s): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<Verdict>> {
    let updates = &s.updates;
    let _busy = updates.begin()?;
    // Another bundle replaces the one whose install was scheduled.
    updates.cancel_install()?;
    let limit = updates.max_bundle_bytes();
    let too_large = || {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("an update may be at most {limit} bytes"),
        )
    };
    // Refused on its declared length before a byte is received.
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(too_large());
    }
    s.engine.check_reserve()?;
    updates.available().await?;
    let path = updates.bundle_path();
    let part = path.with_extension("part");
    let mut file = tokio::fs::File::create(&part)
        .await
        .map_err(crate::engine::Error::from)?;
    let received = async {
        super::extract::body_to_file(&s, body, &mut file, limit, "this update", too_large).await?;
        file.sync_all().await.map_err(crate::engine::Error::from)?;
        Ok(())
    }
    .await;
    if let Err(e) = received {
        let _ = tokio::fs::remove_file(&part).await;
        return Err(e);
    }
    tokio::fs::rename(&part, &path)
        .await
        .map_err(crate::engine::Error::from)?;
    Ok(Json(updates.check(&path).await?))
}

#[derive(Default, serde::Deserialize, utoipa::ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct InstallRequest {
    /// Install a bundle older than the running firmware.
    force: bool,
    /// `now` (the default): at once, whoever is there; `closed`: once the museum is closed by
    /// its opening hours (at once when it is closed now or keeps no hours).
    when: When,
}

/// Starts installing the bundle uploaded last into the slot that is not running, now or once
/// the museum is closed (kept across a restart; `scheduled_install` in the answer).
#[utoipa::path(
    post,
    path = "/api/v1/system/update/install",
    tag = "system",
    request_body(content = InstallRequest, description = "Optional", content_type = "application/json"),
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (status = 202, description = "Installing, or scheduled for the closing; \
            `GET /api/v1/system/update` follows it", body = Status),
        statuses::AdminJsonWrite,
        (status = 409, description = "No accepted bundle uploaded, or an install is under way",
            body = ErrorBody),
        (status = 503, description = "This kiosk cannot update itself (no RAUC)", body = ErrorBody),
    )
)]
async fn install_update(
    _: Admin,
    State(s): State<AppState>,
    JsonOrEmpty(req): JsonOrEmpty<InstallRequest>,
) -> ApiResult<(StatusCode, Json<Status>)> {
    if req.when == When::Closed && museum_open(&s.engine).is_some() {
        s.updates.available().await?;
        s.updates.schedule_install(req.force)?;
    } else {
        s.updates.cancel_install()?;
        s.updates.install(req.force).await?;
    }
    Ok((
        StatusCode::ACCEPTED,
        Json(s.updates.status(&s.engine).await),
    ))
}

/// Cancels an install scheduled for the closing; the bundle stays uploaded.
#[utoipa::path(
    delete,
    path = "/api/v1/system/update/install",
    tag = "system",
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (status = 200, description = "Nothing scheduled to install any more", body = Status),
        statuses::AdminAction,
    )
)]
async fn cancel_install(_: Admin, State(s): State<AppState>) -> ApiResult<Json<Status>> {
    s.updates.cancel_install()?;
    Ok(Json(s.updates.status(&s.engine).await))
}

/// Whether this kiosk can update itself, what it runs, and the install in progress or the last
/// update's outcome.
#[utoipa::path(
    get,
    path = "/api/v1/system/update",
    tag = "system",
    responses(
        (status = 200, description = "The update state", body = Status),
        statuses::NotAdmin,
    ),
    security(("admin_session" = []), ("bearer" = [])),
)]
async fn update_status(_: Admin, State(s): State<AppState>) -> Json<Status> {
    Json(s.updates.status(&s.engine).await)
}

#[derive(Default, serde::Deserialize, utoipa::ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct RebootRequest {
    /// `now` (the default): at once, a visit under way or not; `closed`: once the museum is
    /// closed by its opening hours and no visit is under way.
    when: When,
}

/// Asks the board to reboot, now or once the museum is closed: the kiosk is back in about a
/// minute (on the new slot after an install).
#[utoipa::path(
    post,
    path = "/api/v1/system/reboot",
    tag = "system",
    request_body(content = RebootRequest, description = "Optional", content_type = "application/json"),
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (status = 202, description = "The board reboots (`status: rebooting`), or will once the \
            museum is closed (`status: scheduled`; `scheduled_reboot` in \
            `GET /api/v1/system/update`)", body = super::system::StatusBody),
        statuses::AdminJsonWrite,
        (status = 503, description = "This machine has no reboot path", body = ErrorBody),
    )
)]
async fn reboot(
    _: Admin,
    State(s): State<AppState>,
    JsonOrEmpty(req): JsonOrEmpty<RebootRequest>,
) -> ApiResult<(StatusCode, Json<super::system::StatusBody>)> {
    if req.when == When::Closed {
        // The scheduler reboots within seconds when the museum is closed and nobody visits.
        s.updates.schedule_reboot()?;
        return Ok((
            StatusCode::ACCEPTED,
            Json(super::system::StatusBody::new("scheduled")),
        ));
    }
    s.updates.cancel_reboot()?;
    s.updates.request_reboot()?;
    Ok((
        StatusCode::ACCEPTED,
        Json(super::system::StatusBody::new("rebooting")),
    ))
}

/// Cancels a reboot scheduled for the closing.
#[utoipa::path(
    delete,
    path = "/api/v1/system/reboot",
    tag = "system",
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (status = 200, description = "No reboot scheduled any more", body = Status),
        statuses::AdminAction,
    )
)]
async fn cancel_reboot(_: Admin, State(s): State<AppState>) -> ApiResult<Json<Status>> {
    s.updates.cancel_reboot()?;
    Ok(Json(s.updates.status(&s.engine).await))
}
