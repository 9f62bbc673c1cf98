//! Gzip for the character list, the largest answer the console polls: compressed once per
//! version of the list, sent to clients that accept it. Over HTTPS the bytes a request costs to
//! encrypt are the compressed ones (10-15 kB of JSON becomes 2-3 kB). Only public answers go
//! through here: compressing a secret beside text a caller chose would let the sizes tell it.

use std::io::Write;
use std::sync::Mutex;

use axum::body::{Body, Bytes};
use axum::extract::FromRequestParts;
use axum::http::header::{ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_TYPE, VARY};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};

/// Whether the request accepts a gzipped answer (read from its headers, which are not copied).
pub struct AcceptsGzip(bool);

impl<S: Sync> FromRequestParts<S> for AcceptsGzip {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(AcceptsGzip(accepts_gzip(&parts.headers)))
    }
}

/// The last list compressed and its gzip.
#[derive(Default)]
pub struct Gzipped(Mutex<Option<(Bytes, Bytes)>>);

impl Gzipped {
    /// `json` as a JSON answer, gzipped when the request accepts it.
    pub fn answer(&self, accepts: AcceptsGzip, json: Bytes) -> Response {
        let vary = (VARY, HeaderValue::from_static("accept-encoding"));
        let content_type = (CONTENT_TYPE, super::schema::JSON);
        if !accepts.0 {
            return ([content_type, vary], Body::from(json)).into_response();
        }
        let gzip = (CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        ([content_type, vary, gzip], Body::from(self.of(json))).into_response()
    }

    /// The gzip of `json`, compressed again only when `json` is not the list compressed last.
    /// The same list is the same allocation (the engine's cached list); holding the last one
    /// keeps its address from being reused by another.
    fn of(&self, json: Bytes) -> Bytes {
        let lock = || self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((last, gzip)) = &*lock()
            && last.as_ptr() == json.as_ptr()
            && last.len() == json.len()
        {
            return gzip.clone();
        }
        let mut encoder = flate2::write::GzEncoder::new(
            Vec::with_capacity(json.len() / 4),
            flate2::Compression::default(),
        );
        encoder.write_all(&json).expect("writing to memory");
        let gzip = Bytes::from(encoder.finish().expect("writing to memory"));
        *lock() = Some((json, gzip.clone()));
        gzip
    }
}

/// Whether `Accept-Encoding` names gzip (or `*`) without `q=0`.
fn accepts_gzip(request: &HeaderMap) -> bool {
    request
        .get_all(ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|item| {
            let mut parts = item.split(';').map(str::trim);
            let coding = parts.next().unwrap_or("");
            let refused = parts.any(|p| {
                p.strip_prefix("q=")
                    .and_then(|q| q.parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            (coding.eq_ignore_ascii_case("gzip") || coding == "*") && !refused
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accepts(value: &str) -> bool {
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT_ENCODING, HeaderValue::from_str(value).unwrap());
        accepts_gzip(&headers)
    }

    #[test]
    fn gzip_is_sent_only_to_a_client_that_accepts_it() {
        assert!(accepts("gzip, deflate, br, zstd"));
        assert!(accepts("br;q=1.0, GZIP;q=0.5"));
        assert!(accepts("*"));
        assert!(!accepts("gzip;q=0"));
        assert!(!accepts("gzip; q=0.000"));
        assert!(!accepts("br, deflate"));
        assert!(!accepts("identity"));
        assert!(!accepts_gzip(&HeaderMap::new()));
    }
}
