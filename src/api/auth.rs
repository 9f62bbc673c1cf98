//! Who may call what: the admin guard and the internal-route guard, as extractors a handler
//! names in its signature, so a route's protection is visible where the route is written.

use std::net::SocketAddr;

use axum::extract::FromRequestParts;
use axum::http::StatusCode;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use subtle::ConstantTimeEq;

use super::error::ApiError;
use super::state::AppState;
use crate::engine::Engine;
use crate::engine::access::Owner;

/// Name of the administrator session cookie.
pub const SESSION_COOKIE: &str = "docent_session";

/// Set on a write whose session cookie failed the Origin check: the cookie was taken off, so
/// the route decides as for a caller without it (a conversation client on loopback, an internal
/// caller, a public route still pass), and a refusal for want of credentials says why (403).
#[derive(Clone, Copy)]
pub struct ForeignCookie;

/// Why a write with the session cookie from another origin is refused, and how to allow one.
pub const FOREIGN_COOKIE: &str = "a write with the session cookie must come from the kiosk's own pages; \
    to allow the pages of another origin, add it to `cors_origins` in the configuration's `[access]` table";

/// The refusal of a caller without the credentials a route needs: 403 when a cookie of another
/// origin was set aside ([`ForeignCookie`]), else 401 with `message`.
pub fn unauthenticated(extensions: &axum::http::Extensions, message: &'static str) -> ApiError {
    if extensions.get::<ForeignCookie>().is_some() {
        ApiError::new(StatusCode::FORBIDDEN, FOREIGN_COOKIE)
    } else {
        ApiError::new(StatusCode::UNAUTHORIZED, message)
    }
}

/// Proof that the caller may use admin routes: a live administrator session (cookie or bearer
/// token), or setup mode (no password configured yet).
pub struct Admin;

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        if is_admin(&parts.headers, peer(parts), state) {
            Ok(Admin)
        } else if admin_session(&parts.headers, &state.engine) {
            // Signed in with the first-boot password, which must be changed first.
            Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "change the first-boot password first (PUT /api/auth/password)",
            ))
        } else {
            Err(unauthenticated(
                &parts.extensions,
                "authentication required",
            ))
        }
    }
}

/// Proof that the caller holds a live administrator session, the first-boot password still in
/// force or not: only the password change takes it (every other admin route takes [`Admin`]).
pub struct AdminSession;

impl FromRequestParts<AppState> for AdminSession {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        if is_admin(&parts.headers, peer(parts), state)
            || admin_session(&parts.headers, &state.engine)
        {
            Ok(AdminSession)
        } else {
            Err(unauthenticated(
                &parts.extensions,
                "authentication required",
            ))
        }
    }
}

/// Whether the caller is the administrator: a live administrator session once the first-boot
/// password is changed, or, in setup mode, a caller on trusted loopback (setup mode must not
/// hand the LAN the admin routes).
pub fn is_admin(
    headers: &axum::http::HeaderMap,
    peer: Option<SocketAddr>,
    state: &AppState,
) -> bool {
    if state.engine.has_admin_password() {
        admin_session(headers, &state.engine) && !state.engine.must_change_password()
    } else {
        trusted_loopback(&state.engine, peer)
    }
}

/// Whether the request carries a live administrator session (the first-boot password may still
/// be in force: see [`is_admin`]).
pub fn admin_session(headers: &axum::http::HeaderMap, engine: &Engine) -> bool {
    engine.has_admin_password()
        && session_token(headers).is_some_and(|t| engine.admin_session_valid(t))
}

/// Whether the request's credential is a live administrator session cookie (a request with an
/// `Authorization` header has no other credential).
pub fn cookie_session(headers: &axum::http::HeaderMap, engine: &Engine) -> bool {
    !headers.contains_key(AUTHORIZATION)
        && cookie(headers).is_some_and(|t| engine.admin_session_valid(t))
}

fn cookie(headers: &axum::http::HeaderMap) -> Option<&str> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            (name == SESSION_COOKIE).then_some(value)
        })
}

/// The session token of a request: its bearer token when it has an `Authorization` header
/// (then the only credential considered: a header that authenticates nothing never lets a
/// cookie through, which would skip the cookie's Origin check), else the session cookie.
pub fn session_token(headers: &axum::http::HeaderMap) -> Option<&str> {
    if headers.contains_key(AUTHORIZATION) {
        bearer(headers)
    } else {
        cookie(headers)
    }
}

/// Proof that the caller is an internal component: it connected over loopback, or it presents
/// the configured internal token.
pub struct Internal;

impl FromRequestParts<AppState> for Internal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let loopback = trusted_loopback(&state.engine, peer(parts));
        let token_ok = match (
            &state.engine.config.access.internal_token,
            bearer(&parts.headers),
        ) {
            (Some(want), Some(got)) if !want.is_empty() => {
                bool::from(want.as_bytes().ct_eq(got.as_bytes()))
            }
            _ => false,
        };
        if loopback || token_ok {
            Ok(Internal)
        } else {
            Err(unauthenticated(
                &parts.extensions,
                "internal route: loopback or internal token required",
            ))
        }
    }
}

/// The token of an `Authorization: Bearer <token>` header.
pub fn bearer(headers: &axum::http::HeaderMap) -> Option<&str> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?;
    // The scheme name is case-insensitive (RFC 9110).
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// A conversation client (sessions, tasks, WebSocket chat, gRPC), as the owner its sessions
/// get: an administrator session, a client key, a trusted loopback caller (an administrator in
/// setup mode), or anyone when `access.open_conversation_api` is on. Else 401.
pub struct Caller(pub Owner);

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        caller(&state.engine, &parts.headers, peer(parts), None)
            .map(Caller)
            .map_err(|refused| {
                let foreign = parts.extensions.get::<ForeignCookie>().is_some();
                if foreign && refused.status == StatusCode::UNAUTHORIZED {
                    ApiError::new(StatusCode::FORBIDDEN, FOREIGN_COOKIE)
                } else {
                    refused
                }
            })
    }
}

/// The peer address of a request (the listener records it for every connection).
pub fn peer(parts: &Parts) -> Option<SocketAddr> {
    parts
        .extensions
        .get::<super::listen::Transport>()
        .map(|t| t.peer)
}

/// Whether `peer` is on the kiosk itself and loopback is trusted (`access.loopback_is_trusted`).
pub fn trusted_loopback(engine: &Engine, peer: Option<SocketAddr>) -> bool {
    engine.config.access.loopback_is_trusted && peer.is_some_and(|a| a.ip().is_loopback())
}

/// Turns a request's credentials into the caller: `key` is a client key presented another way
/// than `Authorization` (the WebSocket's subprotocol or query). Credentials that do not check
/// out are ignored, so a stale cookie on the kiosk's own browser still counts as loopback.
pub fn caller(
    engine: &Engine,
    headers: &axum::http::HeaderMap,
    peer: Option<SocketAddr>,
    key: Option<&str>,
) -> Result<Owner, ApiError> {
    let loopback = trusted_loopback(engine, peer);
    let admin = if engine.has_admin_password() {
        admin_session(headers, engine) && !engine.must_change_password()
    } else {
        loopback
    };
    if admin {
        return Ok(Owner::Admin);
    }
    // With an `Authorization` header, it is the only credential considered.
    let key = if headers.contains_key(AUTHORIZATION) {
        None
    } else {
        key
    };
    for key in [bearer(headers), key].into_iter().flatten() {
        if let Some(owner) = engine.client_of_key(key).map_err(ApiError::from)? {
            return Ok(owner);
        }
    }
    if loopback {
        Ok(Owner::Loopback)
    } else if engine.config.access.open_conversation_api {
        // Each address its own owner; the open API shares one message budget (see `access`).
        Ok(Owner::Anonymous(peer.map_or_else(
            || "unknown".into(),
            |p| p.ip().to_canonical().to_string(),
        )))
    } else {
        Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "a client key, an admin session or loopback is required",
        ))
    }
}

/// The credentials that opened a stream (WebSocket, gRPC `Converse`, the console's events), to
/// check again whenever one ends: a stream ends with the credential that opened it (a revoked
/// key, a logout, a password change, an expired session).
pub struct Opener {
    headers: axum::http::HeaderMap,
    peer: Option<SocketAddr>,
    key: Option<String>,
    owner: Owner,
}

/// How often an open stream checks its credential besides when one ends (a session expires
/// without an event).
const RECHECK_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

impl Opener {
    /// The credentials of a request (only `Authorization` and `Cookie` are kept) that made
    /// `owner` the caller.
    pub fn new(
        headers: &axum::http::HeaderMap,
        peer: Option<SocketAddr>,
        key: Option<&str>,
        owner: Owner,
    ) -> Opener {
        let mut kept = axum::http::HeaderMap::new();
        for name in [AUTHORIZATION, axum::http::header::COOKIE] {
            for v in headers.get_all(&name) {
                kept.append(name.clone(), v.clone());
            }
        }
        Opener {
            headers: kept,
            peer,
            key: key.map(str::to_string),
            owner,
        }
    }

    /// Whether the same credentials still make the same caller.
    pub fn stands(&self, engine: &Engine) -> bool {
        caller(engine, &self.headers, self.peer, self.key.as_deref()).is_ok_and(|o| o == self.owner)
    }

    /// Completes once the credentials no longer stand.
    pub async fn ended(&self, engine: &Engine) {
        let mut changes = engine.credential_changes();
        loop {
            tokio::select! {
                changed = changes.changed() => {
                    if changed.is_err() {
                        std::future::pending::<()>().await;
                    }
                }
                () = tokio::time::sleep(RECHECK_EVERY) => {}
            }
            if !self.stands(engine) {
                return;
            }
        }
    }
}
