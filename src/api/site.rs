//! The site administration API: `/api/auth` (the appliance login), `/api/data` (the site
//! document) and `/api/img/{name}` (the image store). Each handler checks in a fixed order
//! (authentication, then whether the store is configured, then the key, then the body), marked
//! step by step, so that every failure answers the same status whatever else is wrong.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{RawQuery, Request, State};
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, ETAG, HOST, IF_NONE_MATCH, RETRY_AFTER,
    SET_COOKIE, X_CONTENT_TYPE_OPTIONS,
};
use axum::http::request::Parts;
use axum::http::{self as http, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};

use super::auth::{SESSION_COOKIE, is_admin, peer, session_token};
use super::error::{ApiError, ApiResult};
use super::extract::{Params, check_length, read_body};
use super::listen::Transport;
use super::state::{AppState, blocking};
use super::statuses;
use crate::engine::auth::{Change, Login};

const IMAGE_CACHE_CONTROL: &str = "public, max-age=31536000, immutable";
const DATA_CACHE_CONTROL: &str = "public, max-age=30, stale-while-revalidate=300";
/// Longest client address kept as a rate-limit key.
const CLIENT_KEY_MAX: usize = 100;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/auth", get(auth_status).post(login).delete(logout))
        .route("/api/auth/logout-all", post(logout_all))
        .route("/api/auth/password", axum::routing::put(change_password))
        .route("/api/data", get(get_data).put(put_data).post(seed_data))
        .route(
            "/api/img/{name}",
            get(get_image).put(put_image).delete(delete_image),
        )
        .route(
            "/api/img/",
            get(get_image_empty)
                .put(put_image_empty)
                .delete(delete_image_empty),
        )
}

/// 401, or 403 when the request's cookie failed the Origin check (see `auth::ForeignCookie`).
fn unauthorized(extensions: &axum::http::Extensions) -> ApiError {
    super::auth::unauthenticated(extensions, "authentication required")
}

#[utoipa::path(get, path = "/api/auth", tag = "site",
    responses((status = 200, description = "Whether the request carries a live admin session", body = Object)))]
async fn auth_status(State(s): State<AppState>, headers: HeaderMap) -> Json<Value> {
    let authenticated = super::auth::admin_session(&headers, &s.engine);
    // Only a signed-in administrator is told, and only while the first-boot password is in
    // force; every other answer keeps the site API's shape, `{authenticated}` alone.
    if authenticated && s.engine.must_change_password() {
        Json(json!({ "authenticated": true, "must_change": true }))
    } else {
        Json(json!({ "authenticated": authenticated }))
    }
}

/// The rate-limit key: the TCP peer's address; only from a peer listed in `access.trusted_proxies`
/// the address that proxy reports (`Edge-Connecting-IP`, else the last `X-Forwarded-For`
/// entry, which is the one the proxy appended). `unknown` only without a peer address.
fn client_key(peer: Option<IpAddr>, headers: &HeaderMap, trusted: &[IpAddr]) -> String {
    let Some(peer) = peer else {
        return "unknown".into();
    };
    if !trusted.contains(&peer) {
        return peer.to_string();
    }
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.rsplit(',').next())
            .map(|v| v.trim().chars().take(CLIENT_KEY_MAX).collect::<String>())
            .filter(|v| !v.is_empty())
    };
    header("edge-connecting-ip")
        .or_else(|| header("x-forwarded-for"))
        .unwrap_or_else(|| peer.to_string())
}

/// `password` coerced to a string; an absent or unparsable body counts as empty.
fn password_of(body: &[u8]) -> String {
    let parsed: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    match parsed.get("password") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

fn too_many(wait: u64) -> Response {
    let mut res = ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        format!("Too many login attempts. Try again in {wait} seconds."),
    )
    .into_response();
    res.headers_mut()
        .insert(RETRY_AFTER, HeaderValue::from(wait));
    res
}

/// Whether the browser reached us over HTTPS: our own TLS, or a TLS proxy in front that says so.
fn over_https(req: &http::request::Parts) -> bool {
    req.extensions.get::<Transport>().is_some_and(|t| t.tls)
        || req
            .headers
            .get("x-forwarded-proto")
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"https"))
}

/// The session cookie; `Secure` whenever the browser came over HTTPS, so it never goes back in
/// clear.
fn session_cookie(value: &str, max_age: u64, secure: bool) -> HeaderValue {
    let cookie = format!(
        "{SESSION_COOKIE}={value}; HttpOnly; SameSite=Strict; Path=/; Max-Age={max_age}{}",
        if secure { "; Secure" } else { "" }
    );
    HeaderValue::from_str(&cookie).expect("cookie is ASCII")
}

/// The password must not cross the LAN in clear: a login over plain HTTP from another machine
/// is refused (unless `access.allow_plain_http_login`), naming the HTTPS address to use instead.
fn refuse_plain_login(s: &AppState, req: &http::request::Parts) -> Result<(), ApiError> {
    let from_loopback = req
        .extensions
        .get::<Transport>()
        .is_some_and(|t| t.peer.ip().to_canonical().is_loopback());
    // Our own TLS only: `X-Forwarded-Proto` is the client's word (a proxy in front that
    // terminates TLS is what `access.allow_plain_http_login` is for).
    let tls = req.extensions.get::<Transport>().is_some_and(|t| t.tls);
    if tls || from_loopback || s.engine.config.access.allow_plain_http_login {
        return Ok(());
    }
    let host = req
        .headers
        .get(HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| !h.is_empty() && h.len() <= 255 && !h.contains(['/', ' ']))
        .unwrap_or("this-kiosk");
    Err(ApiError::new(
        StatusCode::FORBIDDEN,
        format!("log in over HTTPS: https://{host}/ (the password is not sent in clear)"),
    ))
}

/// How long a login waits for a free password check before it is answered 429.
const LOGIN_QUEUE_WAIT: Duration = Duration::from_secs(2);
/// Largest login body read: a password of `MAX_PASSWORD_BYTES`, escaped, in a small object.
const LOGIN_BODY_MAX: usize = 4 * 1024;
/// Longest wait for a login body.
const LOGIN_BODY_WAIT: Duration = Duration::from_secs(5);

#[utoipa::path(post, path = "/api/auth", tag = "site",
    request_body(
        content = Object,
        description = "The password: {\"password\": \"...\"}",
        content_type = "application/json",
    ),
    responses(
        (status = 200, description = "Signed in; sets the session cookie", body = Object),
        statuses::TooLarge,
        (status = 400, description = "No password", body = crate::api::schema::ErrorBody),
        (status = 401, description = "Wrong password", body = crate::api::schema::ErrorBody),
        (status = 403, description = "A login in clear from the network", body = crate::api::schema::ErrorBody),
        (status = 429, description = "Too many failures or checks; see Retry-After", body = Object),
        (status = 500, description = "No administrator password is configured", body = crate::api::schema::ErrorBody),
    ))]
async fn login(State(s): State<AppState>, req: Request) -> ApiResult<Response> {
    let (parts, body) = req.into_parts();
    // 0. Never a password in clear over the network.
    refuse_plain_login(&s, &parts)?;
    let secure = over_https(&parts);
    // 1. No password configured.
    if !s.engine.has_admin_password() {
        return Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "no administrator password is configured (set ADMIN_PASSWORD)",
        ));
    }
    // 2. Rate limit by client address, before anything else is looked at.
    let peer = parts.extensions.get::<Transport>().map(|t| t.peer.ip());
    let client = client_key(
        peer,
        &parts.headers,
        &s.engine.config.access.trusted_proxies,
    );
    let probe = client.clone();
    if let Some(wait) = blocking(&s, move |e| e.login_wait(&probe)).await? {
        return Ok(too_many(wait));
    }
    // 3. Lenient parse of a small body (a password is at most `MAX_PASSWORD_BYTES`): a
    // caller with no credentials gets no more of the kiosk's memory than that, and not for
    // longer than `LOGIN_BODY_WAIT`.
    check_length(&parts.headers, LOGIN_BODY_MAX)?;
    let body = tokio::time::timeout(LOGIN_BODY_WAIT, read_body(body, LOGIN_BODY_MAX))
        .await
        .map_err(|_| ApiError::new(StatusCode::REQUEST_TIMEOUT, "the body came too slowly"))??;
    let password = password_of(&body);
    // 4. Empty password: a failed login like any other (it counts towards the limit).
    if password.is_empty() {
        let probe = client.clone();
        if let Some(wait) = blocking(&s, move |e| e.login_refused(&probe)).await? {
            return Ok(too_many(wait));
        }
        return Err(ApiError::bad("password is required"));
    }
    // While many logins fail (from any number of addresses), each waits a little longer.
    let delay = s.engine.login_delay();
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    // 5. and 6. Full-length constant-time comparison, then a session. Argon2 takes 19 MiB per
    // check: only `access.login_concurrency` run at once, the rest wait briefly, then 429.
    let Ok(Ok(slot)) =
        tokio::time::timeout(LOGIN_QUEUE_WAIT, s.logins.clone().acquire_owned()).await
    else {
        return Ok(too_many(LOGIN_QUEUE_WAIT.as_secs()));
    };
    let outcome = blocking(&s, move |e| {
        let outcome = e.login(&client, &password);
        drop(slot);
        outcome
    })
    .await?;
    match outcome {
        Login::Limited(wait) => Ok(too_many(wait)),
        Login::WrongPassword => Err(ApiError::new(StatusCode::UNAUTHORIZED, "wrong password")),
        Login::Success(token) => {
            let cookie = session_cookie(&token, s.engine.config.access.admin_session_secs, secure);
            Ok(([(SET_COOKIE, cookie)], Json(json!({ "ok": true }))).into_response())
        }
    }
}

#[utoipa::path(delete, path = "/api/auth", tag = "site",
    responses((status = 200, description = "Signed out; clears the cookie", body = Object)))]
async fn logout(State(s): State<AppState>, req: Request) -> ApiResult<Response> {
    let (parts, _) = req.into_parts();
    if let Some(token) = session_token(&parts.headers).map(str::to_string) {
        blocking(&s, move |e| e.logout(&token)).await?;
    }
    let cookie = session_cookie("", 0, over_https(&parts));
    Ok(([(SET_COOKIE, cookie)], Json(json!({ "ok": true }))).into_response())
}

/// The body of a password change.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct PasswordChange {
    current: String,
    new: String,
}

/// `PUT /api/auth/password` `{current, new}`: the current password is checked again (rate
/// limited and through the bounded pool, like a login); every other session ends.
#[utoipa::path(put, path = "/api/auth/password", tag = "site",
    request_body(content = PasswordChange, content_type = "application/json"),
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (status = 200, description = "Changed; every other admin session ended", body = Object),
        statuses::NotAdmin,
        statuses::TooLarge,
        (
            status = 400,
            description = "Not `{current, new}`, or a new password the rules refuse",
            body = crate::api::schema::ErrorBody,
        ),
        (
            status = 403,
            description = "The current password is wrong, a change in clear from the network, \
                or a cookie write from another origin",
            body = crate::api::schema::ErrorBody,
        ),
        (
            status = 409,
            description = "No administrator password is configured (setup mode)",
            body = crate::api::schema::ErrorBody,
        ),
        (
            status = 429,
            description = "Too many failures or checks; see Retry-After",
            body = crate::api::schema::ErrorBody,
        ),
    ))]
async fn change_password(
    State(s): State<AppState>,
    _: super::auth::AdminSession,
    req: Request,
) -> ApiResult<Response> {
    let (parts, body) = req.into_parts();
    refuse_plain_login(&s, &parts)?;
    let peer = parts.extensions.get::<Transport>().map(|t| t.peer.ip());
    let client = client_key(
        peer,
        &parts.headers,
        &s.engine.config.access.trusted_proxies,
    );
    let keep = session_token(&parts.headers).map(str::to_string);
    let body = read_body(body, s.engine.config.limits.json_bytes).await?;
    let PasswordChange { current, new } = serde_json::from_slice(&body)
        .map_err(|_| ApiError::bad("expected {\"current\": string, \"new\": string}"))?;
    let Ok(Ok(slot)) =
        tokio::time::timeout(LOGIN_QUEUE_WAIT, s.logins.clone().acquire_owned()).await
    else {
        return Ok(too_many(LOGIN_QUEUE_WAIT.as_secs()));
    };
    let outcome = blocking(&s, move |e| {
        let outcome = e.change_password(&client, keep.as_deref(), &current, &new);
        drop(slot);
        outcome
    })
    .await?;
    match outcome {
        Change::Changed => Ok(Json(json!({ "ok": true })).into_response()),
        Change::WrongPassword => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "the current password is wrong",
        )),
        Change::Limited(wait) => Ok(too_many(wait)),
    }
}

/// Sign out everywhere: ends every administrator session but the caller's own.
#[utoipa::path(post, path = "/api/auth/logout-all", tag = "site",
    security(("admin_session" = []), ("bearer" = [])),
    responses((status = 200, description = "Every other admin session ended", body = Object), statuses::AdminAction))]
async fn logout_all(
    State(s): State<AppState>,
    _: super::auth::Admin,
    headers: HeaderMap,
) -> ApiResult<Json<Value>> {
    let keep = session_token(&headers).map(str::to_string);
    let ended = blocking(&s, move |e| e.logout_all(keep.as_deref())).await?;
    Ok(Json(json!({ "ok": true, "ended": ended })))
}

#[utoipa::path(get, path = "/api/data", tag = "site",
    responses((status = 200, description = "The site document", body = Object)))]
async fn get_data(State(s): State<AppState>) -> ApiResult<Response> {
    let doc = s.engine.site_document()?;
    Ok((
        [
            (CONTENT_TYPE, super::schema::JSON),
            (CACHE_CONTROL, HeaderValue::from_static(DATA_CACHE_CONTROL)),
        ],
        doc,
    )
        .into_response())
}

#[utoipa::path(put, path = "/api/data", tag = "site",
    request_body(content = Object, description = "The site document", content_type = "application/json"),
    security(("admin_session" = []), ("bearer" = [])),
    responses((status = 200, description = "Stored", body = Object), statuses::AdminWrite, statuses::TooLarge))]
async fn put_data(State(s): State<AppState>, req: Request) -> ApiResult<Json<Value>> {
    // 1. Authentication first.
    if !is_admin(req.headers(), peer_of(&req), &s) {
        return Err(unauthorized(req.extensions()));
    }
    // 2. to 6.: JSON, required keys in order, works, exhibitions, then store as given.
    let limit = s.engine.config.limits.json_bytes;
    check_length(req.headers(), limit)?;
    let body = read_body(req.into_body(), limit).await?;
    let counts = blocking(&s, move |e| e.put_site_document(&body)).await?;
    Ok(Json(json!({ "ok": true, "count": counts })))
}

#[utoipa::path(post, path = "/api/data", tag = "site",
    params(("seed" = Option<String>, Query, description = "Must be 1")),
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (status = 200, description = "Seeded with the default document", body = Object),
        statuses::AdminAction,
        (status = 405, description = "Without ?seed=1", body = crate::api::schema::ErrorBody),
    ))]
async fn seed_data(
    State(s): State<AppState>,
    RawQuery(query): RawQuery,
    request: Parts,
) -> ApiResult<Json<Value>> {
    let seed = query
        .as_deref()
        .is_some_and(|q| q.split('&').any(|pair| pair == "seed=1"));
    if !seed {
        return Err(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "POST /api/data needs ?seed=1",
        ));
    }
    if !is_admin(&request.headers, peer(&request), &s) {
        return Err(unauthorized(&request.extensions));
    }
    blocking(&s, |e| e.seed_site_document()).await?;
    Ok(Json(json!({ "ok": true, "seeded": true })))
}

/// Whole `/api/img` responses by request path (without the query), bounded in bytes, least recently used out.
/// Every PUT or DELETE of a key purges that key's responses and bumps `purges`; a fill started
/// before a purge is dropped, so a deleted image is never served from the cache.
pub struct ImageCache {
    inner: Mutex<CacheInner>,
    capacity: usize,
}

#[derive(Default)]
struct CacheInner {
    entries: HashMap<String, Cached>,
    used: usize,
    tick: u64,
    purges: u64,
}

#[derive(Clone)]
struct Cached {
    key: String,
    body: Bytes,
    content_type: String,
    etag: String,
    last_used: u64,
}

impl ImageCache {
    pub fn new(capacity: usize) -> ImageCache {
        ImageCache {
            inner: Mutex::default(),
            capacity,
        }
    }

    fn get(&self, url: &str) -> Option<Cached> {
        let mut inner = self.inner.lock().expect("cache lock");
        inner.tick += 1;
        let tick = inner.tick;
        let entry = inner.entries.get_mut(url)?;
        entry.last_used = tick;
        Some(entry.clone())
    }

    /// The purge count now; a fill must present it to prove no purge happened since its read.
    fn purges(&self) -> u64 {
        self.inner.lock().expect("cache lock").purges
    }

    fn insert(&self, url: String, mut entry: Cached, purges_at_read: u64) {
        let size = entry.body.len() + url.len();
        if size > self.capacity {
            return;
        }
        let mut inner = self.inner.lock().expect("cache lock");
        if inner.purges != purges_at_read {
            return;
        }
        // Two requests that missed together both fill: the second replaces the first, and must
        // not push out another image to make room for a copy that is about to go.
        if let Some(old) = inner.entries.remove(&url) {
            inner.used -= old.body.len() + url.len();
        }
        while inner.used + size > self.capacity {
            let Some(oldest) = inner
                .entries
                .iter()
                .min_by_key(|(_, e)| e.last_used)
                .map(|(u, _)| u.clone())
            else {
                break;
            };
            let gone = inner.entries.remove(&oldest).expect("present");
            inner.used -= gone.body.len() + oldest.len();
        }
        inner.tick += 1;
        entry.last_used = inner.tick;
        inner.used += size;
        inner.entries.insert(url, entry);
    }

    fn purge(&self, key: &str) {
        let mut inner = self.inner.lock().expect("cache lock");
        inner.purges += 1;
        let gone: Vec<String> = inner
            .entries
            .iter()
            .filter(|(_, e)| e.key == key)
            .map(|(u, _)| u.clone())
            .collect();
        for url in gone {
            let e = inner.entries.remove(&url).expect("present");
            inner.used -= e.body.len() + url.len();
        }
    }
}

/// The content type an image is served with: one of the recognised image types, else (an
/// object stored before uploads were checked) an inert download type.
fn served_type(stored: &str) -> HeaderValue {
    match stored {
        "image/png" | "image/jpeg" | "image/gif" | "image/webp" => {
            HeaderValue::from_str(stored).expect("ASCII")
        }
        _ => HeaderValue::from_static("application/octet-stream"),
    }
}

fn image_response(c: &Cached, req: &HeaderMap) -> Response {
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, served_type(&c.content_type));
    // Never sniffed into something else, and never a document with scripts or a same-origin
    // view, whatever the bytes are.
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(
        CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("sandbox; default-src 'none'"),
    );
    headers.insert(CACHE_CONTROL, HeaderValue::from_static(IMAGE_CACHE_CONTROL));
    headers.insert(ETAG, HeaderValue::from_str(&c.etag).expect("hex etag"));
    if req
        .get(IF_NONE_MATCH)
        .is_some_and(|v| v.as_bytes() == c.etag.as_bytes())
    {
        return (StatusCode::NOT_MODIFIED, headers).into_response();
    }
    (headers, Body::from(c.body.clone())).into_response()
}

/// The key of a `{name}` segment. One that does not decode to UTF-8 becomes an invalid key, so
/// that the earlier steps (authentication, store configured) still come first and the key step
/// answers it.
fn key_of(name: Result<Params<String>, ApiError>) -> String {
    name.map_or_else(|_| String::new(), |Params(n)| n)
}

#[utoipa::path(get, path = "/api/img/{name}", tag = "site",
    params(("name" = String, Path, description = "Image key")),
    responses(
        statuses::StoredImage,
        statuses::NotModified,
        statuses::NoSuchImage,
        statuses::NoImageStoreText,
        (status = 400, description = "Invalid key", body = String, content_type = "text/plain"),
    ))]
async fn get_image(
    State(s): State<AppState>,
    name: Result<Params<String>, ApiError>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    serve_image(&s, &key_of(name), &uri, &headers)
        .await
        .unwrap_or_else(|e| e.plain().into_response())
}

#[utoipa::path(get, path = "/api/img/", tag = "site",
    responses(
        statuses::NoImageStoreText,
        (status = 400, description = "The empty key is invalid", body = String, content_type = "text/plain"),
    ))]
async fn get_image_empty(State(s): State<AppState>, uri: Uri, headers: HeaderMap) -> Response {
    serve_image(&s, "", &uri, &headers)
        .await
        .unwrap_or_else(|e| e.plain().into_response())
}

async fn serve_image(s: &AppState, key: &str, uri: &Uri, req: &HeaderMap) -> ApiResult<Response> {
    // 1. Store off, and 2. a bad key, come before the cache.
    if !s.engine.config.storage.image_store {
        return Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "image store is not configured",
        ));
    }
    crate::engine::site::check_image_key(key)?;
    // 3. A cached response for the same path (a conditional request still gets its 304). The
    // query string is no part of the key: it does not change the answer, and as a key it would
    // let anyone fill the cache with copies of one image and push the others out.
    let url = uri.path().to_string();
    if let Some(hit) = s.images.get(&url) {
        return Ok(image_response(&hit, req));
    }
    // 4. to 7.
    let purges = s.images.purges();
    // A DELETE or PUT of the key may remove the file between reading the reference and reading
    // the file: then the key is read again (gone: 404; replaced: the new object).
    let mut vanished = 0;
    let (blob, etag, bytes) = loop {
        let owned = key.to_string();
        let Some(blob) = blocking(s, move |e| e.site_image(&owned)).await? else {
            return Err(ApiError::new(StatusCode::NOT_FOUND, "no such image"));
        };
        let etag = blob.etag();
        if req
            .get(IF_NONE_MATCH)
            .is_some_and(|v| v.as_bytes() == etag.as_bytes())
        {
            let c = Cached {
                key: key.into(),
                body: Bytes::new(),
                content_type: blob.content_type,
                etag,
                last_used: 0,
            };
            return Ok(image_response(&c, req));
        }
        let engine = s.engine.clone();
        let read = blob.clone();
        match tokio::task::spawn_blocking(move || engine.blobs().read(&read))
            .await
            .map_err(|_| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error"))?
        {
            Ok(bytes) => break (blob, etag, bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && vanished < 3 => vanished += 1,
            Err(e) => {
                return Err(ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("cannot read the image: {e}"),
                ));
            }
        }
    };
    let cached = Cached {
        key: key.into(),
        body: Bytes::from(bytes),
        content_type: blob.content_type,
        etag,
        last_used: 0,
    };
    let res = image_response(&cached, req);
    let state = s.clone();
    tokio::spawn(async move { state.images.insert(url, cached, purges) });
    Ok(res)
}

#[utoipa::path(delete, path = "/api/img/{name}", tag = "site",
    params(("name" = String, Path, description = "Image key")),
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (status = 200, description = "Deleted (absent keys too)", body = Object),
        statuses::AdminWrite,
        statuses::NoImageStore,
    ))]
async fn delete_image(
    State(s): State<AppState>,
    name: Result<Params<String>, ApiError>,
    request: Parts,
) -> ApiResult<Json<Value>> {
    remove_image(&s, key_of(name), &request).await
}

#[utoipa::path(delete, path = "/api/img/", tag = "site",
    security(("admin_session" = []), ("bearer" = [])),
    responses(statuses::AdminWrite, statuses::NoImageStore))]
async fn delete_image_empty(State(s): State<AppState>, request: Parts) -> ApiResult<Json<Value>> {
    remove_image(&s, String::new(), &request).await
}

async fn remove_image(s: &AppState, key: String, request: &Parts) -> ApiResult<Json<Value>> {
    // 1. Authentication, 2. store off, 3. key, 4. delete (absent keys too).
    if !is_admin(&request.headers, peer(request), s) {
        return Err(unauthorized(&request.extensions));
    }
    let owned = key.clone();
    blocking(s, move |e| e.delete_site_image(&owned)).await?;
    s.images.purge(&key);
    Ok(Json(json!({ "ok": true, "deleted": key })))
}

#[utoipa::path(put, path = "/api/img/{name}", tag = "site",
    params(("name" = String, Path, description = "Image key")),
    request_body(content = crate::api::schema::Binary, content_type = "image/png"),
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (status = 200, description = "Stored", body = Object),
        statuses::AdminWrite,
        statuses::TooLarge,
        statuses::NoImageStore,
        (status = 415, description = "Not a PNG, JPEG, GIF or WebP image", body = crate::api::schema::ErrorBody),
    ))]
async fn put_image(
    State(s): State<AppState>,
    name: Result<Params<String>, ApiError>,
    req: Request,
) -> ApiResult<Json<Value>> {
    store_image(&s, key_of(name), req).await
}

#[utoipa::path(put, path = "/api/img/", tag = "site",
    request_body(content = crate::api::schema::Binary, content_type = "image/png"),
    security(("admin_session" = []), ("bearer" = [])),
    responses(statuses::AdminWrite, statuses::NoImageStore))]
async fn put_image_empty(State(s): State<AppState>, req: Request) -> ApiResult<Json<Value>> {
    store_image(&s, String::new(), req).await
}

async fn store_image(s: &AppState, key: String, req: Request) -> ApiResult<Json<Value>> {
    if !is_admin(req.headers(), peer_of(&req), s) {
        return Err(unauthorized(req.extensions()));
    }
    if !s.engine.config.storage.image_store {
        return Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "image store is not configured",
        ));
    }
    crate::engine::site::check_image_key(&key)?;
    let limit = s.engine.config.limits.image_bytes;
    check_length(req.headers(), limit)?;
    let body = read_body(req.into_body(), limit).await?;
    let owned = key.clone();
    let blob = blocking(s, move |e| e.put_site_image(&owned, &body)).await?;
    s.images.purge(&key);
    Ok(Json(
        json!({ "ok": true, "key": key, "etag": blob.etag(), "size": blob.size }),
    ))
}

/// The peer address of a whole request (see `auth::peer`).
fn peer_of(req: &Request) -> Option<std::net::SocketAddr> {
    req.extensions().get::<Transport>().map(|t| t.peer)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &str, n: usize) -> Cached {
        Cached {
            key: key.into(),
            body: Bytes::from(vec![0; n]),
            content_type: "image/png".into(),
            etag: "\"e\"".into(),
            last_used: 0,
        }
    }

    #[test]
    fn cache_is_bounded_and_least_recently_used_goes_first() {
        let c = ImageCache::new(300);
        c.insert("/a".into(), entry("a", 100), 0);
        c.insert("/b".into(), entry("b", 100), 0);
        assert!(c.get("/a").is_some());
        c.insert("/c".into(), entry("c", 100), 0);
        assert!(c.get("/b").is_none(), "b was least recently used");
        assert!(c.get("/a").is_some() && c.get("/c").is_some());
        c.insert("/big".into(), entry("big", 1000), 0);
        assert!(c.get("/big").is_none(), "larger than the whole cache");
    }

    #[test]
    fn a_second_fill_of_the_same_url_replaces_it_and_evicts_nothing() {
        let c = ImageCache::new(220);
        c.insert("/b".into(), entry("b", 100), 0);
        c.insert("/a".into(), entry("a", 100), 0);
        c.insert("/a".into(), entry("a", 100), 0);
        assert!(c.get("/b").is_some(), "b made way for a second copy of a");
        assert_eq!(c.inner.lock().unwrap().used, 2 * (100 + 2));
    }

    #[test]
    fn purge_removes_every_url_of_a_key_and_voids_older_fills() {
        let c = ImageCache::new(10_000);
        c.insert("/api/img/a".into(), entry("a", 10), 0);
        c.insert("/api/img/a?v=2".into(), entry("a", 10), 0);
        let before = c.purges();
        c.purge("a");
        assert!(c.get("/api/img/a").is_none() && c.get("/api/img/a?v=2").is_none());
        c.insert("/api/img/a".into(), entry("a", 10), before);
        assert!(
            c.get("/api/img/a").is_none(),
            "a fill read before the purge is dropped"
        );
    }

    #[test]
    fn passwords_are_coerced() {
        assert_eq!(password_of(br#"{"password":"pw"}"#), "pw");
        assert_eq!(password_of(br#"{"password":123}"#), "123");
        assert_eq!(password_of(br#"{"password":null}"#), "");
        assert_eq!(password_of(b"not json"), "");
        assert_eq!(password_of(b""), "");
        assert_eq!(password_of(br#"["password"]"#), "");
    }
}
