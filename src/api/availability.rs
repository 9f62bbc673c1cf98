//! The kiosk's availability within opening hours (docs/operations.md, "Availability"): the
//! seconds open and fully serving per local day, for the technician and the console.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};

use super::auth::Admin;
use super::error::ApiResult;
use super::extract::QueryArgs;
use super::state::{AppState, blocking};
use super::statuses;
use crate::engine::availability::Availability;

/// Days the console shows, and the route's default.
const SHOWN_DAYS: u16 = 30;

pub fn routes() -> Router<AppState> {
    Router::new().route("/api/v1/system/availability", get(availability))
}

#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct AvailabilityQuery {
    /// How many local days, today included (default 30, 1 to 400).
    days: Option<u16>,
}

/// How available the kiosk was while open over the last days (`?days=`, default 30): per local
/// day the seconds open by the opening hours and the seconds fully serving, their percentage,
/// and the last sample.
#[utoipa::path(get, path = "/api/v1/system/availability", tag = "system",
    params(AvailabilityQuery),
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (status = 200, description = "The days, oldest first, and the whole period's percentage", body = Availability),
        statuses::InvalidParam,
        statuses::NotAdmin,
    ))]
async fn availability(
    _: Admin,
    State(s): State<AppState>,
    QueryArgs(q): QueryArgs<AvailabilityQuery>,
) -> ApiResult<Json<Availability>> {
    let days = q.days.unwrap_or(SHOWN_DAYS);
    Ok(Json(blocking(&s, move |e| e.availability(days)).await?))
}
