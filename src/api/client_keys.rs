//! Client keys, an admin resource: created with a name and a scope (conversation, or metrics:
//! `GET /metrics` only), the key in that answer only; listed without the keys, revoked.

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{delete, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use super::auth::Admin;
use super::error::ApiResult;
use super::extract::{JsonBody, Params};
use super::state::{AppState, blocking};
use super::statuses;
use crate::engine::access::{KeyScope, NewClientKey};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/client-keys", post(create).get(list))
        .route("/api/v1/client-keys/{id}", delete(revoke))
}

#[derive(Deserialize, utoipa::ToSchema)]
struct NewKey {
    name: String,
    /// What the key opens: the conversation API (the default) or `GET /metrics` only.
    #[serde(default)]
    scope: KeyScope,
}

#[utoipa::path(post, path = "/api/v1/client-keys", tag = "client-keys",
    request_body(content = NewKey, description = "JSON body", content_type = "application/json"),
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (status = 201, description = "Created; the only answer that holds the key", body = NewClientKey,),
        statuses::AdminJsonWrite,
        (status = 409, description = "At most 64 keys", body = crate::api::schema::ErrorBody),
    ))]
async fn create(
    State(s): State<AppState>,
    _: Admin,
    JsonBody(body): JsonBody<NewKey>,
) -> ApiResult<(StatusCode, Json<NewClientKey>)> {
    let created = blocking(&s, move |e| e.create_client_key(&body.name, body.scope)).await?;
    Ok((StatusCode::CREATED, Json(created)))
}

#[utoipa::path(get, path = "/api/v1/client-keys", tag = "client-keys",
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (status = 200, description = "The keys, without the keys themselves", body = Object),
        statuses::NotAdmin,
    ))]
async fn list(State(s): State<AppState>, _: Admin) -> ApiResult<Json<Value>> {
    Ok(Json(json!({ "keys": s.engine.client_keys()? })))
}

#[utoipa::path(delete, path = "/api/v1/client-keys/{id}", tag = "client-keys",
    params(("id" = String, Path, description = "Client key id")),
    security(("admin_session" = []), ("bearer" = [])),
    responses((status = 204, description = "Revoked"), statuses::AdminChange))]
async fn revoke(
    State(s): State<AppState>,
    _: Admin,
    Params(id): Params<String>,
) -> ApiResult<StatusCode> {
    blocking(&s, move |e| e.revoke_client_key(&id)).await?;
    Ok(StatusCode::NO_CONTENT)
}
