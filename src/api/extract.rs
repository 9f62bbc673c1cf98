//! Request extractors whose failures are answered in the API's own error shape, with the body
//! bounds of the configuration.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::error::ApiError;
use super::state::AppState;

/// A JSON body no larger than `limits.json_bytes`.
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let json = is_json(req.headers());
        let bytes = read_body(req.into_body(), state.engine.config.limits.json_bytes).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(ApiError::bad("request body must be a JSON object"));
        }
        json?;
        serde_json::from_slice(&bytes)
            .map(JsonBody)
            .map_err(|e| ApiError::bad(format!("invalid JSON body: {e}")))
    }
}

/// A JSON body must say so (`Content-Type: application/json`, 415 otherwise): a form or a
/// `text/plain` body, which any web page may send without asking, cannot forge a write.
fn is_json(headers: &axum::http::HeaderMap) -> Result<(), ApiError> {
    let essence = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(str::trim);
    match essence {
        Some(t) if t.eq_ignore_ascii_case("application/json") => Ok(()),
        _ => Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "the body must be sent as Content-Type: application/json",
        )),
    }
}

/// Reads a whole body, refusing it with 413 as soon as it passes `limit` (503 when the
/// process-wide budget of bodies in flight has no room for it).
pub async fn read_body(body: Body, limit: usize) -> Result<Bytes, ApiError> {
    axum::body::to_bytes(body, limit).await.map_err(|e| {
        let source = std::error::Error::source(&e);
        if source.is_some_and(|s| s.is::<http_body_util::LengthLimitError>()) {
            ApiError::too_large(limit)
        } else if source.is_some_and(|s| s.is::<OverBudget>()) {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "server busy: too many request bodies at once; try again later",
            )
        } else {
            ApiError::bad(format!("could not read the request body: {e}"))
        }
    })
}

/// The one budget of request bodies being received at once (`connections.request_body_budget_bytes`):
/// every body of a caller that is not the administrator is charged as its bytes arrive and
/// gives them back when it is dropped (read whole, or abandoned).
pub struct BodyBudget {
    limit: usize,
    used: AtomicUsize,
}

impl BodyBudget {
    pub fn new(limit: usize) -> BodyBudget {
        BodyBudget {
            limit,
            used: AtomicUsize::new(0),
        }
    }
}

/// A body would go beyond the budget of bodies in flight.
#[derive(Debug)]
pub struct OverBudget;

impl std::fmt::Display for OverBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("too many request bodies at once")
    }
}

impl std::error::Error for OverBudget {}

/// A request body charged to the [`BodyBudget`].
pub struct Budgeted {
    inner: Body,
    budget: Arc<BodyBudget>,
    held: usize,
}

impl Budgeted {
    pub fn new(inner: Body, budget: Arc<BodyBudget>) -> Budgeted {
        Budgeted {
            inner,
            budget,
            held: 0,
        }
    }
}

impl hyper::body::Body for Budgeted {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(data) = frame.data_ref()
        {
            let n = data.len();
            let budget = self.budget.clone();
            let charged = budget
                .used
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                    used.checked_add(n).filter(|&u| u <= budget.limit)
                });
            if charged.is_err() {
                return Poll::Ready(Some(Err(Box::new(OverBudget))));
            }
            self.held += n;
        }
        polled.map_err(Into::into)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Budgeted {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.held, Ordering::AcqRel);
    }
}

/// Refuses a request whose declared length is over `limit` before reading anything.
pub fn check_length(parts_headers: &axum::http::HeaderMap, limit: usize) -> Result<(), ApiError> {
    let declared = parts_headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    match declared {
        Some(n) if n > limit as u64 => Err(ApiError::too_large(limit)),
        _ => Ok(()),
    }
}

/// Path parameters; a segment that does not decode is a 400 like any other bad name.
pub struct Params<T>(pub T);

impl<T: DeserializeOwned + Send> FromRequestParts<AppState> for Params<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| Params(p.0))
            .map_err(|e| ApiError::bad(e.body_text()))
    }
}

/// Query parameters, with parse failures as 400 `{error}`.
pub struct QueryArgs<T>(pub T);

impl<T: DeserializeOwned + Send> FromRequestParts<AppState> for QueryArgs<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| QueryArgs(q.0))
            .map_err(|e| ApiError::bad(e.body_text()))
    }
}

/// A JSON body that may also be absent (empty), meaning `T::default()`.
pub struct JsonOrEmpty<T>(pub T);

impl<T: DeserializeOwned + Default> FromRequest<AppState> for JsonOrEmpty<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let json = is_json(req.headers());
        let bytes = read_body(req.into_body(), state.engine.config.limits.json_bytes).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(JsonOrEmpty(T::default()));
        }
        json?;
        serde_json::from_slice(&bytes)
            .map(JsonOrEmpty)
            .map_err(|e| ApiError::bad(format!("invalid JSON body: {e}")))
    }
}

/// Writes a streamed upload to `file`: refused with `too_large` past `limit` bytes, and with 507
/// before a chunk would eat into the data partition's reserve (`what` names it: "this update").
pub(super) async fn body_to_file(
    s: &AppState,
    body: Body,
    file: &mut tokio::fs::File,
    limit: u64,
    what: &str,
    too_large: impl Fn() -> ApiError,
) -> Result<(), ApiError> {
    use futures_util::StreamExt;
    use tokio::io::AsyncWriteExt;
    let mut stream = body.into_data_stream();
    let mut size = 0u64;
    let mut room = s.engine.headroom();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| ApiError::bad(format!("upload cut short: {e}")))?;
        size += chunk.len() as u64;
        if size > limit {
            return Err(too_large());
        }
        room.before_write(chunk.len() as u64)
            .map_err(|e| crate::engine::Error::no_room(e, what))?;
        file.write_all(&chunk)
            .await
            .map_err(crate::engine::Error::from)?;
    }
    Ok(())
}
