//! Task reads and the internal routes that drive tasks and search knowledge.

use axum::extract::State;
use axum::http::header::{CONTENT_SECURITY_POLICY, CONTENT_TYPE, X_CONTENT_TYPE_OPTIONS};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use super::auth::{Caller, Internal};
use super::error::ApiResult;
use super::extract::{JsonBody, Params, QueryArgs};
use super::state::{AppState, blocking};
use super::statuses;
use crate::engine::tasks::{ArtifactInput, ArtifactView, EventInput, Posted, TaskView};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/tasks/{task_id}", get(task))
        .route("/api/v1/tasks/{task_id}/events", get(events))
        .route(
            "/api/v1/tasks/{task_id}/artifacts/{artifact_id}",
            get(artifact),
        )
        .route("/api/v1/internal/tasks/{task_id}/events", post(post_event))
        .route(
            "/api/v1/internal/tasks/{task_id}/artifacts",
            post(post_artifact),
        )
        .route(
            "/api/v1/internal/characters/{id}/knowledge/search",
            post(search),
        )
}

#[utoipa::path(get, path = "/api/v1/tasks/{task_id}", tag = "tasks",
    params(("task_id" = String, Path, description = "Task id")),
    security(("admin_session" = []), ("bearer" = []), ()),
    responses((status = 200, description = "The task", body = TaskView), statuses::ClientRead))]
async fn task(
    State(s): State<AppState>,
    _: Caller,
    Params(id): Params<String>,
) -> ApiResult<Json<TaskView>> {
    Ok(Json(s.engine.task(&id)?))
}

#[derive(Deserialize)]
struct EventsQuery {
    after_seq: Option<u64>,
    limit: Option<usize>,
}

#[utoipa::path(get, path = "/api/v1/tasks/{task_id}/events", tag = "tasks",
    params(
        ("task_id" = String, Path, description = "Task id"),
        ("after_seq" = Option<u64>, Query, description = "Only events after this sequence number"),
        ("limit" = Option<usize>, Query, description = "At most this many"),
    ),
    security(("admin_session" = []), ("bearer" = []), ()),
    responses((status = 200, description = "The task's events", body = Object), statuses::ClientRead))]
async fn events(
    State(s): State<AppState>,
    _: Caller,
    Params(id): Params<String>,
    QueryArgs(q): QueryArgs<EventsQuery>,
) -> ApiResult<Json<Value>> {
    let events = s.engine.task_events(&id, q.after_seq, q.limit)?;
    Ok(Json(json!({ "events": events })))
}

#[utoipa::path(get, path = "/api/v1/tasks/{task_id}/artifacts/{artifact_id}", tag = "tasks",
    params(
        ("task_id" = String, Path, description = "Task id"),
        ("artifact_id" = String, Path, description = "Artifact id"),
    ),
    security(("admin_session" = []), ("bearer" = []), ()),
    responses(
        (
            status = 200,
            description = "The artifact's content, with its type",
            body = crate::api::schema::Binary,
            content_type = "*/*",
        ),
        statuses::ClientRead,
    ))]
async fn artifact(
    State(s): State<AppState>,
    _: Caller,
    Params((task_id, artifact_id)): Params<(String, String)>,
) -> ApiResult<Response> {
    let (blob, bytes) = blocking(&s, move |e| e.artifact(&task_id, &artifact_id)).await?;
    let mut headers = HeaderMap::new();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_str(&blob.content_type).expect("known mime"),
    );
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    if blob.content_type.starts_with("text/html") {
        headers.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static("sandbox"));
    }
    Ok((headers, bytes).into_response())
}

#[utoipa::path(post, path = "/api/v1/internal/tasks/{task_id}/events", tag = "internal",
    params(("task_id" = String, Path, description = "Task id")),
    request_body(content = EventInput, description = "JSON body", content_type = "application/json",),
    security(("bearer" = []), ()),
    responses((status = 200, description = "Recorded", body = Posted), statuses::InternalJsonWrite))]
async fn post_event(
    _: Internal,
    State(s): State<AppState>,
    Params(id): Params<String>,
    JsonBody(input): JsonBody<EventInput>,
) -> ApiResult<Json<Posted>> {
    Ok(Json(
        blocking(&s, move |e| e.post_task_event(&id, input)).await?,
    ))
}

#[utoipa::path(post, path = "/api/v1/internal/tasks/{task_id}/artifacts", tag = "internal",
    params(("task_id" = String, Path, description = "Task id")),
    request_body(content = ArtifactInput, description = "JSON body", content_type = "application/json",),
    security(("bearer" = []), ()),
    responses((status = 201, description = "Stored", body = ArtifactView), statuses::InternalJsonWrite))]
async fn post_artifact(
    _: Internal,
    State(s): State<AppState>,
    Params(id): Params<String>,
    JsonBody(input): JsonBody<ArtifactInput>,
) -> ApiResult<(StatusCode, Json<ArtifactView>)> {
    let (artifact, _event) = blocking(&s, move |e| e.post_artifact(&id, input)).await?;
    Ok((StatusCode::CREATED, Json(artifact)))
}

#[derive(Deserialize, utoipa::ToSchema)]
struct SearchBody {
    query: String,
    top_k: Option<usize>,
}

#[utoipa::path(post, path = "/api/v1/internal/characters/{id}/knowledge/search", tag = "internal",
    params(("id" = String, Path, description = "Character id")),
    request_body(content = SearchBody, description = "JSON body", content_type = "application/json"),
    security(("bearer" = []), ()),
    responses((status = 200, description = "Matching passages", body = Object), statuses::InternalJsonWrite))]
async fn search(
    _: Internal,
    State(s): State<AppState>,
    Params(id): Params<String>,
    JsonBody(body): JsonBody<SearchBody>,
) -> ApiResult<Json<Value>> {
    let results = s
        .engine
        .search_knowledge(&id, &body.query, body.top_k, None)?;
    Ok(Json(json!({ "results": results })))
}
