//! Test hooks, routed only with `test.hooks = true` (404 otherwise): they make a loop stall for
//! real, so that tests can watch the watchdog notice and the process exit, and move the
//! retention's clock, so that tests can watch a month's transcripts go.

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use super::auth::Internal;
use super::error::{ApiError, ApiResult};
use super::extract::JsonBody;
use super::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/internal/debug/stall", post(stall))
        .route("/api/v1/internal/debug/clock", post(clock))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Advance {
    advance_secs: u64,
}

/// `{"advance_secs": n}` moves the retention's clock n seconds ahead and wakes its sweep;
/// 202 `{"advanced"}`.
async fn clock(
    _: Internal,
    State(s): State<AppState>,
    JsonBody(body): JsonBody<Advance>,
) -> (StatusCode, Json<Value>) {
    s.engine.advance_clock_for_test(body.advance_secs);
    (
        StatusCode::ACCEPTED,
        Json(json!({ "advanced": body.advance_secs })),
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Stall {
    #[serde(rename = "loop")]
    which: Loop,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum Loop {
    Engine,
    Device,
}

/// `{"loop": "engine"}` locks the engine's session registry for good (a deadlock);
/// `{"loop": "device"}` stops the kiosk loop turning. 202 `{"stalled"}`; 503 for `device` when the
/// kiosk runs without devices.
async fn stall(
    _: Internal,
    State(s): State<AppState>,
    JsonBody(body): JsonBody<Stall>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let name = match body.which {
        Loop::Engine => {
            let engine = s.engine.clone();
            // Taking the lock may wait for a holder to let go: not on a runtime thread.
            tokio::task::spawn_blocking(move || engine.stall_for_test())
                .await
                .map_err(|_| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error"))?;
            "engine"
        }
        Loop::Device if s.devices.stall_for_test() => "device",
        Loop::Device => {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "the kiosk runs without devices",
            ));
        }
    };
    Ok((StatusCode::ACCEPTED, Json(json!({ "stalled": name }))))
}
