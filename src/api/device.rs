//! Internal routes of the kiosk's own devices: the simulated push-to-talk button (tests, a
//! laptop) and a look at the kiosk loop.

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use super::AppState;
use super::auth::Internal;
use super::error::{ApiError, ApiResult};
use super::extract::JsonBody;
use crate::device::PressError;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/internal/device", get(device))
        .route("/api/v1/internal/device/ptt", post(ptt))
        .route("/api/v1/internal/device/snapshot", get(snapshot))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Press {
    pressed: bool,
}

/// Presses (`true`) or releases (`false`) the simulated button; the kiosk reacts as to the real
/// one (debounce, short presses ignored). 409 when the button is a real one, 503 when the kiosk
/// runs without devices.
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

/// The kiosk loop's state, the devices' health and the simulated pins.
async fn device(_: Internal, State(s): State<AppState>) -> Json<Value> {
    let d = &s.devices;
    let state = d.state.borrow().clone();
    Json(json!({
        "mode": d.mode,
        "status": state.status,
        "character_id": state.character_id,
        "health": d.health.get(),
        "button": d.sim_button.as_ref().map(|b| b.get()),
        "led": d.led(),
        "sim_audio": d.sim_audio.as_ref().map(|a| json!({
            "mic": a.mic, "mic_rate": crate::device::SimAudio::MIC_RATE,
            "speaker": a.speaker, "speaker_rate": crate::device::SimAudio::SPEAKER_RATE,
        })),
    }))
}

/// The simulated screen as a PNG picture (`docent snapshot`); 409 when the display is a real
/// one or there is none.
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
