//! Who may call what: the admin guard and the internal-route guard, as extractors a handler
//! names in its signature, so a route's protection is visible where the route is written.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::StatusCode;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use subtle::ConstantTimeEq;

use super::AppState;
use super::error::ApiError;

/// Proof that the caller may use admin routes: an administrator session, or setup mode (no
/// password configured yet).
pub struct Admin;

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        if state.admin.allows(&parts.headers) {
            Ok(Admin)
        } else {
            Err(ApiError::new(StatusCode::UNAUTHORIZED, "authentication required"))
        }
    }
}

/// Proof that the caller is an internal component: it connected over loopback, or it presents
/// the configured internal token.
pub struct Internal;

impl FromRequestParts<AppState> for Internal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let loopback = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .is_some_and(|ConnectInfo(addr)| addr.ip().is_loopback());
        let token_ok = match (&state.engine.config.internal_token, bearer(&parts.headers)) {
            (Some(want), Some(got)) if !want.is_empty() => {
                bool::from(want.as_bytes().ct_eq(got.as_bytes()))
            }
            _ => false,
        };
        if loopback || token_ok {
            Ok(Internal)
        } else {
            Err(ApiError::new(StatusCode::UNAUTHORIZED, "internal route: loopback or internal token required"))
        }
    }
}

/// The token of an `Authorization: Bearer <token>` header.
pub fn bearer(headers: &axum::http::HeaderMap) -> Option<&str> {
    headers
        .get(AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
        .map(str::trim)
}

/// The administrator login state of the appliance.
pub struct AdminGate {
    password_set: bool,
}

impl AdminGate {
    pub fn new(password: Option<&str>) -> AdminGate {
        AdminGate { password_set: password.is_some_and(|p| !p.is_empty()) }
    }

    /// `"setup"` while no administrator password is configured (admin routes open), else
    /// `"password"`.
    pub fn mode(&self) -> &'static str {
        if self.password_set { "password" } else { "setup" }
    }

    fn allows(&self, _headers: &axum::http::HeaderMap) -> bool {
        !self.password_set
    }
}
