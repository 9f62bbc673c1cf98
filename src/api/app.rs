//! The HTTP application: the router of every route, and `front`, which runs before it for every
//! request (CORS, the request bodies' budget, OPTIONS answered before routing, the kiosk's own
//! origin for a write with a session cookie).

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::header::{
    ACCESS_CONTROL_ALLOW_CREDENTIALS, ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS,
    ACCESS_CONTROL_ALLOW_ORIGIN, AUTHORIZATION, COOKIE, HOST, ORIGIN, REFERER, VARY,
};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use hyper_util::service::TowerToHyperService;

use super::error::ApiError;
use super::state::AppState;
use super::{
    auth, availability, characters, client_keys, console, conversations, debug, device, extract,
    fleet, grpc, listen, metrics, openapi, sessions, site, system, tasks, update, ws,
};

/// The whole HTTP application: [`front`], then the routes.
///
/// `front` runs around the router as a whole, called directly: as a `Router::layer` it would
/// wrap every route, and each request would pay for boxed services and futures (four allocations
/// and as many dynamic calls) that do nothing. When the access log is on, it is such a layer,
/// under the log's, so that the log names the route of what `front` answers itself.
#[derive(Clone)]
pub struct App {
    routes: TowerToHyperService<Router>,
    state: AppState,
    /// Whether `routes` holds the front as a layer (the access log is on).
    layered: bool,
}

impl App {
    pub fn new(state: AppState) -> App {
        let layered = tracing::enabled!(target: crate::logs::ACCESS, tracing::Level::DEBUG);
        App {
            routes: TowerToHyperService::new(router(&state, layered)),
            state,
            layered,
        }
    }

    /// What every handler reaches.
    pub(super) fn state(&self) -> &AppState {
        &self.state
    }

    /// The answer to one request.
    pub async fn answer(&self, req: Request) -> Response {
        let routed = |req: Request| async move {
            let answered = hyper::service::Service::call(&self.routes, req).await;
            answered.unwrap_or_else(|never: std::convert::Infallible| match never {})
        };
        if self.layered {
            routed(req).await
        } else {
            front(&self.state, req, routed).await
        }
    }
}

/// The routes; `logged`: with [`front`] as a layer and the access log around it.
fn router(state: &AppState, logged: bool) -> Router {
    let hooks = if state.engine.config.test.hooks {
        debug::routes()
    } else {
        Router::new()
    };
    let app = Router::new()
        .merge(system::routes())
        .merge(availability::routes())
        .merge(update::routes())
        .merge(fleet::routes())
        .merge(openapi::routes())
        .merge(site::routes())
        .merge(sessions::routes())
        .merge(client_keys::routes())
        .merge(tasks::routes())
        .merge(device::routes())
        .merge(ws::routes())
        .merge(grpc::routes(state.engine.clone(), state.streams.clone()))
        .merge(characters::routes(&state.engine.config.limits))
        .merge(conversations::routes())
        .merge(hooks)
        .merge(console::routes())
        .merge(metrics::routes())
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "no such route") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method not allowed on this route",
            )
        });
    // The log's filter is set once at start: when the access log is off, its layer is left
    // out (a layer costs every request an allocation or two even when it does nothing).
    let app = if logged {
        app.layer(middleware::from_fn_with_state(state.clone(), front_layer))
            .layer(middleware::from_fn(access))
    } else {
        app
    };
    app.with_state(state.clone())
}

/// One debug line per answered request on [`crate::logs::ACCESS`]: method, the matched route's
/// template (never the URI: ids and query strings can carry secrets or a visitor's words), the
/// status and the time to the response's head. `Router::layer` runs it after routing, so the
/// template is known; a request that matched no route is logged as `-`. When the target is
/// off at start, [`router`] leaves it out.
async fn access(req: Request, next: Next) -> Response {
    if !tracing::enabled!(target: crate::logs::ACCESS, tracing::Level::DEBUG) {
        return next.run(req).await;
    }
    let method = req.method().clone();
    let route = req.extensions().get::<MatchedPath>().cloned();
    let started = std::time::Instant::now();
    let res = next.run(req).await;
    tracing::debug!(
        target: crate::logs::ACCESS,
        "{method} {} {} {} ms",
        route.as_ref().map_or("-", |r| r.as_str()),
        res.status().as_u16(),
        started.elapsed().as_millis()
    );
    res
}

/// Charges the request body of a caller other than the administrator to the one budget of
/// bodies in flight (a `Converse` stream, long-lived, has its own bounds: the stream places,
/// one message's size, the utterance budget). A request without a body has nothing to charge.
fn charged(state: &AppState, req: Request, peer: Option<std::net::SocketAddr>) -> Request {
    if axum::body::HttpBody::is_end_stream(req.body())
        || req.uri().path().ends_with("/Converse")
        || auth::is_admin(req.headers(), peer, state)
    {
        return req;
    }
    let (parts, body) = req.into_parts();
    let body = axum::body::Body::new(extract::Budgeted::new(body, state.bodies.clone()));
    Request::from_parts(parts, body)
}

/// What runs before every route ([`App`]): the CORS policy, then the body budget
/// ([`charged`]).
///
/// The CORS headers on every response; OPTIONS is answered before routing. A request that
/// carries credentials (cookie or `Authorization`), or comes from a page of another origin over
/// trusted loopback, is answered for the configured `access.cors_origins` only; anything else may be
/// read by any page (`*`). A write authenticated by a live session cookie, or in setup mode a
/// write from a page on trusted loopback, must come from the kiosk's own origin (or a
/// configured one). The setup-mode write is refused (403); the cookie of another origin is set
/// aside, so the route decides as for a caller without it and refuses for want of credentials
/// with 403 ([`auth::ForeignCookie`]): a call the caller may make without the cookie is not
/// taken away by signing in. A cookie that authenticates nothing is left to the route's own
/// 401. Signing out is never refused.
async fn front<F, A>(state: &AppState, mut req: Request, inner: F) -> Response
where
    F: FnOnce(Request) -> A,
    A: Future<Output = Response>,
{
    let headers = req.headers();
    let origin = headers.get(ORIGIN).cloned();
    let allowed = origin
        .as_ref()
        .and_then(|o| o.to_str().ok())
        .filter(|o| {
            state
                .engine
                .config
                .access
                .cors_origins
                .iter()
                .any(|c| c == o)
        })
        .is_some();
    // An answer that trusts loopback (the kiosk's own caller: setup mode's administrator, a
    // conversation client without a key) is as credentialed as one to a cookie: a page of
    // another site in a browser on the kiosk (its requests name their origin) must not read it.
    let peer = req.extensions().get::<listen::Transport>().map(|t| t.peer);
    let loopback = auth::trusted_loopback(&state.engine, peer);
    let foreign = headers.contains_key(ORIGIN) && !same_origin(headers, req.uri());
    let credentialed = headers.contains_key(COOKIE)
        || headers.contains_key(AUTHORIZATION)
        || (loopback && foreign);
    let class = metrics::RouteClass::of(req.uri());
    let writes = !matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    // Signing out is harmless from anywhere and must always work (the cookie is SameSite).
    let logout = req.method() == Method::DELETE && req.uri().path() == "/api/auth";
    // A write from a browser page names its origin: in setup mode loopback is the
    // administrator, so a page of another site must not write through it.
    let from_a_page = headers.contains_key(ORIGIN) || headers.contains_key(REFERER);
    let setup_write = loopback && from_a_page && !state.engine.has_admin_password();
    let checked = writes && !allowed && !logout && !same_origin(headers, req.uri());
    let foreign_cookie = checked && auth::cookie_session(headers, &state.engine);
    let mut res = if req.method() == Method::OPTIONS {
        StatusCode::OK.into_response()
    } else if checked && (setup_write || (foreign_cookie && signing_in(&req))) {
        ApiError::new(StatusCode::FORBIDDEN, auth::FOREIGN_COOKIE).into_response()
    } else {
        if foreign_cookie {
            req.headers_mut().remove(COOKIE);
            req.extensions_mut().insert(auth::ForeignCookie);
        }
        inner(charged(state, req, peer)).await
    };
    state.http.request(class, res.status());
    let h = res.headers_mut();
    h.append(VARY, HeaderValue::from_static("Origin"));
    match origin {
        Some(o) if allowed => {
            h.insert(ACCESS_CONTROL_ALLOW_ORIGIN, o);
            h.insert(
                ACCESS_CONTROL_ALLOW_CREDENTIALS,
                HeaderValue::from_static("true"),
            );
        }
        _ if credentialed => {}
        _ => {
            h.insert(ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
        }
    }
    h.insert(
        ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST, PUT, DELETE, OPTIONS"),
    );
    h.insert(
        ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("Content-Type, Authorization"),
    );
    res
}

/// [`front`] as a layer of every route, when the access log is on (see [`App`]).
async fn front_layer(State(state): State<AppState>, req: Request, next: Next) -> Response {
    front(&state, req, |req| next.run(req)).await
}

/// Whether `req` signs in: a page of another origin holding a live cookie has no reason to, so
/// that write is refused as before rather than handed to the login with the cookie set aside.
fn signing_in(req: &Request) -> bool {
    req.method() == Method::POST && req.uri().path() == "/api/auth"
}

/// Whether the request's `Origin` (else its `Referer`) names the host it was sent to (the
/// `Host` header, or the authority of an HTTP/2 request).
fn same_origin(headers: &HeaderMap, uri: &axum::http::Uri) -> bool {
    // HTTP/2 names the host in the `:authority` pseudo-header, which arrives as the URI's.
    let Some(host) = headers
        .get(HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| uri.authority().map(|a| a.as_str()))
    else {
        return false;
    };
    let source = headers
        .get(ORIGIN)
        .or_else(|| headers.get(REFERER))
        .and_then(|v| v.to_str().ok());
    source
        .and_then(|s| s.split_once("://"))
        .map(|(_, rest)| rest.split('/').next().unwrap_or(""))
        .is_some_and(|authority| authority.eq_ignore_ascii_case(host))
}
