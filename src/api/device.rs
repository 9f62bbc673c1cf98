//! Internal routes of the kiosk's own devices: the simulated push-to-talk button and choices
//! (tests, a laptop) and a look at the kiosk loop.

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use super::auth::Internal;
use super::error::{ApiError, ApiResult};
use super::extract::JsonBody;
use super::state::AppState;
use super::statuses;
use crate::device::PressError;
use crate::device::choice::Choose;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/internal/device", get(device))
        .route("/api/v1/internal/device/ptt", post(ptt))
        .route("/api/v1/internal/device/choose", post(choose))
        .route("/api/v1/internal/device/snapshot", get(snapshot))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct Press {
    pressed: bool,
}

/// Presses (`true`) or releases (`false`) the simulated button; the kiosk reacts as to the real
/// one (debounce, short presses ignored). 409 when the button is a real one, 503 when the kiosk
/// runs without devices.
#[utoipa::path(post, path = "/api/v1/internal/device/ptt", tag = "internal",
    request_body(content = Press, description = "JSON body", content_type = "application/json"),
    security(("bearer" = []), ()),
    responses(
        (status = 200, description = "Pressed or released", body = Object),
        statuses::InvalidBody,
        statuses::NotInternal,
        statuses::TooLarge,
        statuses::NotJson,
        (status = 409, description = "The button is a real one", body = crate::api::schema::ErrorBody),
        (status = 503, description = "The kiosk runs without devices", body = crate::api::schema::ErrorBody),
    ))]
async fn ptt(
    _: Internal,
    State(s): State<AppState>,
    JsonBody(p): JsonBody<Press>,
) -> ApiResult<Json<Value>> {
    match s.devices.press(p.pressed) {
        Ok(()) => Ok(Json(json!({ "pressed": p.pressed }))),
        Err(PressError::NotSimulated) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "the push-to-talk button is not simulated",
        )),
        Err(PressError::NoDevices) => Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the kiosk runs without devices",
        )),
    }
}

/// A simulated choice without speaking: a touch at `{"touch": {"x", "y"}}` (0..1 of the
/// picture from its top-left corner) or a button, `"previous"`, `"next"` or `"choose"`. It goes
/// where a real touch screen's or button's would. 409 when those are real, 503 without devices.
#[utoipa::path(post, path = "/api/v1/internal/device/choose", tag = "internal",
    request_body(content = Choose, description = "JSON body", content_type = "application/json"),
    security(("bearer" = []), ()),
    responses(
        (status = 200, description = "Chosen", body = Object),
        statuses::InvalidBody,
        statuses::NotInternal,
        statuses::TooLarge,
        statuses::NotJson,
        (
            status = 409,
            description = "The touch screen and buttons are real ones",
            body = crate::api::schema::ErrorBody,
        ),
        (status = 503, description = "The kiosk runs without devices", body = crate::api::schema::ErrorBody),
    ))]
async fn choose(
    _: Internal,
    State(s): State<AppState>,
    JsonBody(c): JsonBody<Choose>,
) -> ApiResult<Json<Value>> {
    if !c.is_valid() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "a touch is at x and y from 0 to 1",
        ));
    }
    match s.devices.choose(c) {
        Ok(()) => Ok(Json(json!({ "chosen": true }))),
        Err(PressError::NotSimulated) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "the touch screen and buttons are not simulated",
        )),
        Err(PressError::NoDevices) => Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the kiosk runs without devices",
        )),
    }
}

/// The kiosk loop's state, the devices' health and the simulated pins.
#[utoipa::path(get, path = "/api/v1/internal/device", tag = "internal",
    security(("bearer" = []), ()),
    responses(
        (status = 200, description = "The kiosk loop's state and the devices", body = Object),
        statuses::NotInternal,
    ))]
async fn device(_: Internal, State(s): State<AppState>) -> Json<Value> {
    let d = &s.devices;
    let state = d.state.borrow().clone();
    Json(json!({
        "mode": d.mode,
        "status": state.status,
        "character_id": state.character_id,
        "session_id": state.session_id,
        "captions": {
            "level": state.captions.level,
            "heard": state.captions.heard,
            "said": state.captions.said,
        },
        "can_choose": state.can_choose,
        "language": state.language,
        "questions": state.questions.as_ref().map(|p| json!({
            "title": p.title, "rows": p.rows, "page": p.page, "pages": p.pages,
            "selected": p.selected,
        })),
        "health": d.health.get(),
        "button": d.sim_button.as_ref().map(|b| b.get()),
        "led": d.led(),
        "sim_audio": d.sim_audio.as_ref().map(|a| json!({
            "mic": a.mic, "mic_rate": crate::device::SimAudio::MIC_RATE,
            "speaker": a.speaker, "speaker_rate": crate::device::SimAudio::SPEAKER_RATE,
            "assistive": a.assistive,
        })),
    }))
}

/// The simulated screen as a PNG picture (`docent snapshot`); 409 when the display is a real
/// one or there is none.
#[utoipa::path(get, path = "/api/v1/internal/device/snapshot", tag = "internal",
    security(("bearer" = []), ()),
    responses(
        (
            status = 200,
            description = "The simulated screen",
            body = crate::api::schema::Binary,
            content_type = "image/png",
        ),
        statuses::NotInternal,
        statuses::NotSimulated,
    ))]
async fn snapshot(_: Internal, State(s): State<AppState>) -> ApiResult<axum::response::Response> {
    screen_png(&s).await
}

/// The simulated screen's picture (also the console's view of the display).
pub(super) async fn screen_png(s: &AppState) -> ApiResult<axum::response::Response> {
    use axum::response::IntoResponse;
    let Some(screen) = s.devices.sim_screen.clone() else {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "the display is not simulated",
        ));
    };
    let png = tokio::task::spawn_blocking(move || screen.to_png())
        .await
        .map_err(|_| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error"))?;
    Ok((
        [
            (axum::http::header::CONTENT_TYPE, "image/png"),
            (axum::http::header::CACHE_CONTROL, "no-store"),
        ],
        png,
    )
        .into_response())
}
