//! Sessions, messages and a session's tasks.

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use super::auth::Caller;
use super::error::ApiResult;
use super::extract::{JsonBody, JsonOrEmpty, Params, QueryArgs};
use super::state::{AppState, blocking};
use super::statuses;
use crate::engine::SessionId;
use crate::engine::sessions::{NewSession, SessionCreated, SessionSummary};
use crate::engine::tasks::TaskView;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/sessions", post(create).get(list))
        .route("/api/v1/sessions/{id}", delete(remove))
        .route("/api/v1/sessions/{id}/message", post(message))
        .route("/api/v1/sessions/{id}/tasks", get(tasks))
}

#[utoipa::path(post, path = "/api/v1/sessions", tag = "sessions",
    request_body(
        content = Option<NewSession>,
        description = "Optional; empty means defaults",
        content_type = "application/json",
    ),
    security(("admin_session" = []), ("bearer" = []), ()),
    responses(
        (status = 201, description = "Created", body = SessionCreated),
        statuses::ClientJsonWrite,
        statuses::CrossOriginWrite,
        (status = 503, description = "Every session place is taken", body = crate::api::schema::ErrorBody),
    ))]
async fn create(
    State(s): State<AppState>,
    Caller(caller): Caller,
    JsonOrEmpty(req): JsonOrEmpty<NewSession>,
) -> ApiResult<(StatusCode, Json<SessionCreated>)> {
    let created = blocking(&s, move |e| e.create_session(req, caller)).await?;
    Ok((StatusCode::CREATED, Json(created)))
}

#[utoipa::path(get, path = "/api/v1/sessions", tag = "sessions",
    security(("admin_session" = []), ("bearer" = []), ()),
    responses(
        (status = 200, description = "The caller's sessions (an administrator: all)", body = Vec<SessionSummary>,),
        statuses::NotClient,
    ))]
async fn list(
    State(s): State<AppState>,
    Caller(caller): Caller,
) -> ApiResult<Json<Vec<SessionSummary>>> {
    Ok(Json(s.engine.sessions(&caller)?))
}

#[utoipa::path(delete, path = "/api/v1/sessions/{id}", tag = "sessions",
    params(("id" = String, Path, description = "Session id")),
    security(("admin_session" = []), ("bearer" = []), ()),
    responses((status = 204, description = "Deleted"), statuses::ClientRead, statuses::NotOwnerOrCrossOrigin))]
async fn remove(
    State(s): State<AppState>,
    Caller(caller): Caller,
    Params(id): Params<String>,
) -> ApiResult<StatusCode> {
    blocking(&s, move |e| {
        e.delete_session(&SessionId::parse(&id)?, &caller)
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize, utoipa::ToSchema)]
struct MessageBody {
    text: String,
}

#[utoipa::path(post, path = "/api/v1/sessions/{id}/message", tag = "sessions",
    params(("id" = String, Path, description = "Session id")),
    request_body(content = MessageBody, description = "JSON body", content_type = "application/json"),
    security(("admin_session" = []), ("bearer" = []), ()),
    responses(
        (status = 202, description = "Queued", body = Object),
        statuses::ClientJsonWrite,
        statuses::NotOwnerOrCrossOrigin,
        (status = 429, description = "Message budget spent", body = crate::api::schema::ErrorBody),
    ))]
async fn message(
    State(s): State<AppState>,
    Caller(caller): Caller,
    Params(id): Params<String>,
    JsonBody(body): JsonBody<MessageBody>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let turn_seq = blocking(&s, move |e| {
        e.post_message(&SessionId::parse(&id)?, &body.text, &caller)
    })
    .await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({ "status": "queued", "turn_seq": turn_seq })),
    ))
}

#[derive(Deserialize)]
struct Limit {
    limit: Option<usize>,
}

#[utoipa::path(get, path = "/api/v1/sessions/{id}/tasks", tag = "sessions",
    params(
        ("id" = String, Path, description = "Session id"),
        ("limit" = Option<usize>, Query, description = "At most this many"),
    ),
    security(("admin_session" = []), ("bearer" = []), ()),
    responses(
        (status = 200, description = "The session's tasks", body = Object),
        statuses::InvalidParam,
        statuses::NotClient,
        statuses::NotOwner,
    ))]
async fn tasks(
    State(s): State<AppState>,
    Caller(caller): Caller,
    Params(id): Params<String>,
    QueryArgs(q): QueryArgs<Limit>,
) -> ApiResult<Json<Value>> {
    let tasks: Vec<TaskView> = s.engine.session_tasks(&id, q.limit, &caller)?;
    Ok(Json(json!({ "tasks": tasks })))
}
