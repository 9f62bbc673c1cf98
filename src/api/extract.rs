//! Request extractors whose failures are answered in the API's own error shape, with the body
//! bounds of the configuration.

use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::AppState;
use super::error::ApiError;

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

/// Reads a whole body, refusing it with 413 as soon as it passes `limit`.
pub async fn read_body(body: Body, limit: usize) -> Result<Bytes, ApiError> {
    axum::body::to_bytes(body, limit).await.map_err(|e| {
        if std::error::Error::source(&e).is_some_and(|s| s.is::<http_body_util::LengthLimitError>())
        {
            ApiError::too_large(limit)
        } else {
            ApiError::bad(format!("could not read the request body: {e}"))
        }
    })
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
