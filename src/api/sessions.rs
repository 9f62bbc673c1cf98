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
use super::{AppState, blocking};
use crate::engine::sessions::{NewSession, SessionCreated, SessionSummary};
use crate::engine::tasks::TaskView;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/sessions", post(create).get(list))
        .route("/api/v1/sessions/{id}", delete(remove))
        .route("/api/v1/sessions/{id}/message", post(message))
        .route("/api/v1/sessions/{id}/tasks", get(tasks))
}

async fn create(
    State(s): State<AppState>,
    Caller(caller): Caller,
    JsonOrEmpty(req): JsonOrEmpty<NewSession>,
) -> ApiResult<(StatusCode, Json<SessionCreated>)> {
    let created = blocking(&s, move |e| e.create_session(req, caller)).await?;
    Ok((StatusCode::CREATED, Json(created)))
}

async fn list(
    State(s): State<AppState>,
    Caller(caller): Caller,
) -> ApiResult<Json<Vec<SessionSummary>>> {
    Ok(Json(s.engine.sessions(&caller)?))
}

async fn remove(
    State(s): State<AppState>,
    Caller(caller): Caller,
    Params(id): Params<String>,
) -> ApiResult<StatusCode> {
    blocking(&s, move |e| e.delete_session(&id, &caller)).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
struct MessageBody {
    text: String,
}

async fn message(
    State(s): State<AppState>,
    Caller(caller): Caller,
    Params(id): Params<String>,
    JsonBody(body): JsonBody<MessageBody>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let turn_seq = blocking(&s, move |e| e.post_message(&id, &body.text, &caller)).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({ "status": "queued", "turn_seq": turn_seq })),
    ))
}

#[derive(Deserialize)]
struct Limit {
    limit: Option<usize>,
}

async fn tasks(
    State(s): State<AppState>,
    Caller(caller): Caller,
    Params(id): Params<String>,
    QueryArgs(q): QueryArgs<Limit>,
) -> ApiResult<Json<Value>> {
    let tasks: Vec<TaskView> = s.engine.session_tasks(&id, q.limit, &caller)?;
    Ok(Json(json!({ "tasks": tasks })))
}
