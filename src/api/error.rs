//! How engine errors and request problems become HTTP responses: `{"error": "..."}` with a
//! status that says whose fault it was, or a short plain-text body on file routes.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::engine::Error;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// File-serving routes answer with `text/plain` instead of JSON.
    pub plain: bool,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            plain: false,
        }
    }

    pub fn bad(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn too_large(limit: usize) -> ApiError {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("request body is larger than {limit} bytes"),
        )
    }

    pub fn plain(mut self) -> ApiError {
        self.plain = true;
        self
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        let status = match &e {
            Error::BadRequest(_) => StatusCode::BAD_REQUEST,
            Error::NotFound(_) => StatusCode::NOT_FOUND,
            Error::Conflict(_) => StatusCode::CONFLICT,
            Error::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Error::Forbidden(_) => StatusCode::FORBIDDEN,
            Error::TooMany(_) => StatusCode::TOO_MANY_REQUESTS,
            Error::UnsupportedMedia(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Error::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Error::ProviderFailed(_) => StatusCode::BAD_GATEWAY,
            Error::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
            Error::InsufficientStorage(_) => StatusCode::INSUFFICIENT_STORAGE,
            Error::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(status, e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut res = self.body();
        // A refused body may still be arriving (too large, or no room to store it): the
        // connection is closed after this answer, so say so, or a client could send its next
        // request on a connection about to go away.
        if matches!(
            res.status(),
            StatusCode::PAYLOAD_TOO_LARGE | StatusCode::INSUFFICIENT_STORAGE
        ) {
            res.headers_mut().insert(
                axum::http::header::CONNECTION,
                axum::http::HeaderValue::from_static("close"),
            );
        }
        res
    }
}

impl ApiError {
    fn body(self) -> Response {
        if self.plain {
            (
                self.status,
                [(
                    axum::http::header::CONTENT_TYPE,
                    axum::http::HeaderValue::from_static("text/plain; charset=utf-8"),
                )],
                self.message,
            )
                .into_response()
        } else {
            let body = super::schema::ErrorBody {
                error: self.message,
            };
            (self.status, Json(body)).into_response()
        }
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
