//! Serving stored files: the right Content-Type, a strong ETag with `If-None-Match` -> 304, and
//! single byte ranges (`Range` -> 206) so video players can seek.

use axum::body::Body;
use axum::http::header::{
    ACCEPT_RANGES, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_RANGE, CONTENT_TYPE, ETAG, IF_NONE_MATCH,
    RANGE,
};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio_util::io::ReaderStream;

use super::error::{ApiError, ApiResult};
use crate::engine::{BlobRef, Blobs};

/// Answers a GET of a stored file.
pub async fn serve(blobs: &Blobs, blob: &BlobRef, req: &HeaderMap) -> ApiResult<Response> {
    let etag = blob.etag();
    let mut headers = HeaderMap::new();
    headers.insert(ETAG, HeaderValue::from_str(&etag).expect("hex etag"));
    headers.insert(ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_str(&blob.content_type)
            .unwrap_or(HeaderValue::from_static("application/octet-stream")),
    );
    if req
        .get(IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"))
    {
        return Ok((StatusCode::NOT_MODIFIED, headers).into_response());
    }
    let size = blob.size;
    let range = match req.get(RANGE).and_then(|v| v.to_str().ok()) {
        None => None,
        Some(r) => match parse_range(r, size) {
            Some(range) => Some(range),
            None => {
                headers.insert(
                    CONTENT_RANGE,
                    HeaderValue::from_str(&format!("bytes */{size}")).expect("ascii"),
                );
                return Ok((StatusCode::RANGE_NOT_SATISFIABLE, headers).into_response());
            }
        },
    };
    let mut file = tokio::fs::File::from_std(blobs.open_file(blob).map_err(internal)?);
    let (status, start, len) = match range {
        Some((start, end)) => {
            headers.insert(
                CONTENT_RANGE,
                HeaderValue::from_str(&format!("bytes {start}-{end}/{size}")).expect("ascii"),
            );
            (StatusCode::PARTIAL_CONTENT, start, end - start + 1)
        }
        None => (StatusCode::OK, 0, size),
    };
    file.seek(std::io::SeekFrom::Start(start))
        .await
        .map_err(internal)?;
    headers.insert(CONTENT_LENGTH, HeaderValue::from(len));
    let body = Body::from_stream(ReaderStream::new(file.take(len)));
    Ok((status, headers, body).into_response())
}

fn internal(e: std::io::Error) -> ApiError {
    tracing::error!("cannot read a stored file: {e}");
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "cannot read the stored file",
    )
    .plain()
}

/// Parses one `bytes=` range against a file of `size` bytes into inclusive bounds; `None` when
/// it cannot be satisfied. Multiple ranges are answered with the first.
fn parse_range(header: &str, size: u64) -> Option<(u64, u64)> {
    let spec = header.strip_prefix("bytes=")?.split(',').next()?.trim();
    let (a, b) = spec.split_once('-')?;
    let (start, end) = match (a.trim(), b.trim()) {
        ("", n) => {
            let n: u64 = n.parse().ok()?;
            if n == 0 {
                return None;
            }
            (size.saturating_sub(n), size.checked_sub(1)?)
        }
        (s, "") => (s.parse().ok()?, size.checked_sub(1)?),
        (s, e) => (
            s.parse().ok()?,
            e.parse::<u64>().ok()?.min(size.checked_sub(1)?),
        ),
    };
    (start <= end && start < size).then_some((start, end))
}

#[cfg(test)]
mod tests {
    use super::parse_range;

    #[test]
    fn ranges() {
        assert_eq!(parse_range("bytes=0-9", 100), Some((0, 9)));
        assert_eq!(parse_range("bytes=90-", 100), Some((90, 99)));
        assert_eq!(parse_range("bytes=-10", 100), Some((90, 99)));
        assert_eq!(parse_range("bytes=50-500", 100), Some((50, 99)));
        assert_eq!(parse_range("bytes=0-0,5-6", 100), Some((0, 0)));
        assert_eq!(parse_range("bytes=100-", 100), None);
        assert_eq!(parse_range("bytes=9-3", 100), None);
        assert_eq!(parse_range("bytes=-0", 100), None);
        assert_eq!(parse_range("items=0-1", 100), None);
        assert_eq!(parse_range("bytes=0-1", 0), None);
    }
}
