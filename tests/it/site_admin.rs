//! The site administration API over real HTTP (`/api/auth`, `/api/data`, `/api/img/{name}`),
//! following each handler's fixed order of checks step by step, the decisions of docs/api.md, who
//! may call what on every route, and a full run of the real binary whose log must hold no secret.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::support::{PNG, Process, Server, mp4_h264};
use base64::Engine as _;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, COOKIE, HeaderMap, ORIGIN};
use reqwest::multipart::{Form, Part};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const PW: &str = "correct horse battery staple";
const COOKIE_NAME: &str = "docent_session";
const DEFAULT_DOCUMENT: &str = include_str!("../../assets/site-default.json");
const IMAGE_CACHE_CONTROL: &str = "public, max-age=31536000, immutable";
const DATA_CACHE_CONTROL: &str = "public, max-age=30, stale-while-revalidate=300";
/// Address the helper logins come from, so they never touch a counter a test is watching.
const HELPER_IP: &str = "203.0.113.250";

// =============================================================================================
// Helpers

/// A whole response, read at once.
struct Reply {
    what: String,
    status: u16,
    headers: HeaderMap,
    body: Vec<u8>,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body for a failure message, cut short.
    fn shown(&self) -> String {
        self.text().chars().take(300).collect()
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{}: body is not JSON ({e}): {}", self.what, self.shown()))
    }

    /// A 201 Created's `id`.
    fn created_id(self) -> String {
        self.expect(201).json()["id"].as_str().unwrap().to_string()
    }

    fn expect(self, status: u16) -> Reply {
        assert_eq!(self.status, status, "{}: {}", self.what, self.shown());
        self
    }

    /// The status, with a JSON `{error: "<non-empty>"}` body.
    fn expect_error(self, status: u16) -> Reply {
        let r = self.expect(status);
        let ct = r.header("content-type").unwrap_or_default();
        assert!(
            ct.starts_with("application/json"),
            "{}: content-type {ct:?}",
            r.what
        );
        let v = r.json();
        let message = v["error"].as_str().unwrap_or_default();
        assert!(
            !message.is_empty(),
            "{}: expected {{error}}, got {v}",
            r.what
        );
        r
    }

    /// The status, with a short plain-text body (not JSON).
    fn expect_plain(self, status: u16) -> Reply {
        let r = self.expect(status);
        let ct = r.header("content-type").unwrap_or_default();
        assert!(
            ct.starts_with("text/plain"),
            "{}: content-type {ct:?}",
            r.what
        );
        assert!(!r.body.is_empty(), "{}: empty body", r.what);
        assert!(
            serde_json::from_slice::<Value>(&r.body).is_err(),
            "{}: body is JSON: {}",
            r.what,
            r.shown()
        );
        r
    }

    fn error(&self) -> String {
        self.json()["error"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

async fn send(req: reqwest::RequestBuilder) -> Reply {
    let (client, req) = req.build_split();
    let req = req.unwrap();
    let what = format!("{} {}", req.method(), req.url());
    let res = client
        .execute(req)
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let status = res.status().as_u16();
    let headers = res.headers().clone();
    let body = res.bytes().await.unwrap().to_vec();
    Reply {
        what,
        status,
        headers,
        body,
    }
}

/// An HTTP client that works before any in-process server has started: reqwest is built
/// without a TLS crypto provider, and the engine installs one only when it opens.
fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

fn method(name: &str) -> reqwest::Method {
    reqwest::Method::from_bytes(name.as_bytes()).unwrap()
}

fn request(s: &Server, m: &str, path: &str) -> reqwest::RequestBuilder {
    s.http.request(method(m), s.url(path))
}

/// The session cookie, sent as the kiosk's own page sends it: with the kiosk's `Origin`
/// (writes authenticated by the cookie need it).
fn with_cookie(req: reqwest::RequestBuilder, token: &str) -> reqwest::RequestBuilder {
    own_origin(req.header(COOKIE, format!("{COOKIE_NAME}={token}")))
}

/// Adds the `Origin` of the page the request's own server serves.
fn own_origin(req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    let (client, request) = req.build_split();
    let mut request = request.unwrap();
    let origin = request.url().origin().ascii_serialization();
    request
        .headers_mut()
        .insert(ORIGIN, origin.parse().unwrap());
    reqwest::RequestBuilder::from_parts(client, request)
}

fn with_bearer(req: reqwest::RequestBuilder, token: &str) -> reqwest::RequestBuilder {
    req.header(AUTHORIZATION, format!("Bearer {token}"))
}

/// Adds the session cookie when there is a session (setup mode has none).
fn authed(req: reqwest::RequestBuilder, token: Option<&str>) -> reqwest::RequestBuilder {
    match token {
        Some(t) => with_cookie(req, t),
        None => req,
    }
}

/// POST /api/auth with a raw body, from `ip` (or without the address header).
async fn login_raw(s: &Server, ip: Option<&str>, body: &str) -> Reply {
    let mut req = s
        .post("/api/auth")
        .header(CONTENT_TYPE, "application/json")
        .body(body.to_string());
    if let Some(ip) = ip {
        req = req.header("Edge-Connecting-IP", ip);
    }
    send(req).await
}

async fn login_with(s: &Server, ip: Option<&str>, password: &str) -> Reply {
    login_raw(s, ip, &json!({ "password": password }).to_string()).await
}

/// The token of a `docent_session=<token>; ...` Set-Cookie header.
fn token_of(r: &Reply) -> String {
    let cookie = r
        .header("set-cookie")
        .unwrap_or_else(|| panic!("{}: no Set-Cookie", r.what));
    let first = cookie.split(';').next().unwrap();
    first
        .strip_prefix(&format!("{COOKIE_NAME}="))
        .unwrap_or_else(|| panic!("unexpected cookie {cookie:?}"))
        .to_string()
}

/// Logs in with the configured password and returns the session token.
async fn login(s: &Server) -> String {
    let r = login_with(s, Some(HELPER_IP), PW).await.expect(200);
    token_of(&r)
}

/// The configured password, and the test client (on loopback) trusted as the edge proxy, so
/// that `Edge-Connecting-IP` stands for distinct client addresses.
fn behind_proxy(c: &mut docent::config::Config) {
    c.access.admin_password = Some(PW.into());
    c.access.trusted_proxies = vec![std::net::Ipv4Addr::LOCALHOST.into()];
}

async fn with_password() -> (Server, String) {
    let s = Server::start_with(behind_proxy).await;
    let token = login(&s).await;
    (s, token)
}

/// Reads a 429 answer: checks its message and `Retry-After` agree and returns the seconds.
fn retry_after(r: &Reply) -> u64 {
    assert_eq!(r.status, 429, "{}: {}", r.what, r.shown());
    let n: u64 = r
        .header("retry-after")
        .unwrap_or_else(|| panic!("{}: no Retry-After", r.what))
        .parse()
        .unwrap();
    assert!(n >= 1, "Retry-After {n}");
    assert_eq!(
        r.json(),
        json!({ "error": format!("Too many login attempts. Try again in {n} seconds.") })
    );
    n
}

async fn authenticated(
    s: &Server,
    req: impl Fn(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
) -> bool {
    let v = send(req(s.get("/api/auth"))).await.expect(200).json();
    assert_eq!(keys_of(&v), ["authenticated"], "{v}");
    v["authenticated"].as_bool().expect("a boolean")
}

fn keys_of(v: &Value) -> Vec<&str> {
    let mut k: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    k.sort_unstable();
    k
}

/// A site document with every required key, one extra top-level key and a null value.
fn site_doc() -> Value {
    json!({
        "hero": { "title": "Tides", "subtitle": "Paintings of the coast" },
        "bio": { "paragraphs": ["One", "Two"] },
        "exhibitions": [{ "id": "e1", "title": "Harbour" }],
        "contact": null,
        "works": [{ "id": "w1" }, { "id": "w2" }, { "id": "w3" }],
        "extra": { "kept": [1, 2, 3] },
    })
}

async fn put_data(s: &Server, token: Option<&str>, body: &str) -> Reply {
    send(
        authed(s.put("/api/data"), token)
            .header(CONTENT_TYPE, "application/json")
            .body(body.to_string()),
    )
    .await
}

/// `rest` behind a PNG signature: what the image store recognises as a PNG image.
fn image(rest: &[u8]) -> Vec<u8> {
    [&b"\x89PNG\r\n\x1a\n"[..], rest].concat()
}

async fn put_image(s: &Server, token: &str, key: &str, bytes: &[u8], content_type: &str) -> Reply {
    send(
        with_cookie(s.put(&format!("/api/img/{key}")), token)
            .header(CONTENT_TYPE, content_type)
            .body(bytes.to_vec()),
    )
    .await
}

/// Sends a request over a plain TCP connection, so the target reaches the server unnormalised
/// (a URL library would resolve `%2e%2e`). Returns the status, the lower-cased head and the body.
async fn raw_http(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
) -> (u16, String, Vec<u8>) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut req = format!(
        "{method} {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: 0\r\n"
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    stream.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    stream.read_to_end(&mut buf).await.unwrap();
    let split = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a response head");
    let head = String::from_utf8_lossy(&buf[..split]).to_lowercase();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, head, buf[split + 4..].to_vec())
}

/// A string in UUID form that no record has.
fn fresh_uuid() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(1);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        t as u32,
        (t >> 32) as u16,
        n & 0xfff,
        (t >> 48) & 0xfff,
        n
    )
}

// =============================================================================================
// 1. POST /api/auth, step by step

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_without_a_configured_password_is_500() {
    let s = Server::start().await;
    // Step 1 comes before everything: even a body that would be a 400 is a 500.
    for body in [
        json!({ "password": PW }).to_string(),
        String::new(),
        "garbage".into(),
    ] {
        let r = login_raw(&s, None, &body).await.expect_error(500);
        assert!(r.header("set-cookie").is_none());
    }
    login_raw(&s, Some("192.0.2.1"), r#"{"password":"x"}"#)
        .await
        .expect_error(500);
    // Nothing was counted: still 500, never 429.
    for _ in 0..7 {
        login_with(&s, None, "wrong").await.expect_error(500);
    }
    assert!(!authenticated(&s, |r| r).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_parses_leniently_and_refuses_empty_and_wrong_passwords() {
    let s = Server::start_with(behind_proxy).await;
    // Step 3 and 4: an absent, empty or unparsable body counts as an empty password.
    for (i, body) in [
        "",
        "garbage",
        "{\"password\": ",
        "[1, 2]",
        "\"password\"",
        "{}",
        r#"{"password": ""}"#,
        r#"{"password": null}"#,
        r#"{"pass": "correct horse battery staple"}"#,
    ]
    .iter()
    .enumerate()
    {
        let from = format!("192.0.2.{}", 100 + i);
        let r = login_raw(&s, Some(&from), body).await.expect_error(400);
        assert!(r.header("set-cookie").is_none(), "{body:?}");
    }
    // Step 5: a wrong password, also one that is a prefix or an extension of the right one.
    for wrong in [
        "correct horse battery",
        "correct horse battery staple!",
        "x",
    ] {
        let r = login_with(&s, Some("192.0.2.11"), wrong)
            .await
            .expect_error(401);
        assert!(r.header("set-cookie").is_none());
    }
    // A login without a password is a failed login (a flood of them meets the same limit).
    for _ in 0..3 {
        login_raw(&s, Some("192.0.2.10"), "{}")
            .await
            .expect_error(400);
    }
    for _ in 0..2 {
        login_with(&s, Some("192.0.2.10"), "nope")
            .await
            .expect_error(401);
    }
    retry_after(&login_raw(&s, Some("192.0.2.10"), "{}").await);
    retry_after(&login_with(&s, Some("192.0.2.10"), "nope").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_success_sets_the_session_cookie() {
    let s = Server::start_with(behind_proxy).await;
    let r = login_with(&s, Some("192.0.2.20"), PW).await.expect(200);
    assert_eq!(r.json(), json!({ "ok": true }));
    let cookies: Vec<&str> = r
        .headers
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect();
    assert_eq!(cookies.len(), 1, "{cookies:?}");
    let mut parts = cookies[0].split("; ");
    let token = parts
        .next()
        .unwrap()
        .strip_prefix("docent_session=")
        .expect("cookie name")
        .to_string();
    let mut attrs: Vec<&str> = parts.collect();
    attrs.sort_unstable();
    assert_eq!(
        attrs,
        ["HttpOnly", "Max-Age=604800", "Path=/", "SameSite=Strict"],
        "exactly these attributes, and no Secure over plain HTTP: {}",
        cookies[0]
    );
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(&token)
        .unwrap_or_else(|e| panic!("token {token:?} is not URL-safe base64: {e}"));
    assert_eq!(raw.len(), 32, "a 256-bit token");

    let second = token_of(&login_with(&s, Some("192.0.2.20"), PW).await.expect(200));
    assert_ne!(token, second, "every login gets its own token");

    // GET /api/auth: false without a session, true with the cookie or the bearer token.
    assert!(!authenticated(&s, |r| r).await);
    assert!(authenticated(&s, |r| with_cookie(r, &token)).await);
    assert!(authenticated(&s, |r| with_bearer(r, &token)).await);
    assert!(authenticated(&s, |r| with_cookie(r, &second)).await);
    // The cookie among others.
    assert!(
        authenticated(&s, |r| r.header(
            COOKIE,
            format!("theme=dark; {COOKIE_NAME}={token}; lang=en")
        ))
        .await
    );
    // The session opens admin routes, by cookie and by bearer.
    put_data(&s, Some(&token), &site_doc().to_string())
        .await
        .expect(200);
    send(with_bearer(s.put("/api/data"), &token).json(&site_doc()))
        .await
        .expect(200);
    send(with_bearer(s.get("/api/v1/settings"), &second))
        .await
        .expect(200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_and_empty_tokens_are_refused() {
    let (s, token) = with_password().await;
    let forged = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode([7u8; 32]);
    let mut altered = token.clone().into_bytes();
    altered[10] = if altered[10] == b'A' { b'B' } else { b'A' };
    let altered = String::from_utf8(altered).unwrap();
    for bad in [
        forged.as_str(),
        altered.as_str(),
        "",
        &token[..20],
        "null",
        "undefined",
    ] {
        assert!(!authenticated(&s, |r| with_cookie(r, bad)).await, "{bad:?}");
        assert!(!authenticated(&s, |r| with_bearer(r, bad)).await, "{bad:?}");
        let r = put_data(&s, Some(bad), &site_doc().to_string())
            .await
            .expect(401);
        assert_eq!(r.json(), json!({ "error": "authentication required" }));
        send(with_bearer(s.get("/api/v1/settings"), bad))
            .await
            .expect_error(401);
    }
    // The real token still works, and the other scheme name is not a bearer token.
    assert!(authenticated(&s, |r| with_cookie(r, &token)).await);
    send(
        s.get("/api/v1/settings")
            .header(AUTHORIZATION, format!("Basic {token}")),
    )
    .await
    .expect_error(401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn password_is_coerced_to_a_string() {
    let s = Server::start_with(|c| c.access.admin_password = Some("123".into())).await;
    let r = login_raw(&s, Some("192.0.2.30"), r#"{"password": 123}"#)
        .await
        .expect(200);
    assert_eq!(r.json(), json!({ "ok": true }));
    assert!(authenticated(&s, |q| with_cookie(q, &token_of(&r))).await);
    login_raw(&s, Some("192.0.2.30"), r#"{"password": "123"}"#)
        .await
        .expect(200);
    login_raw(&s, Some("192.0.2.30"), r#"{"password": 124}"#)
        .await
        .expect_error(401);
    login_raw(&s, Some("192.0.2.30"), r#"{"password": 123.5}"#)
        .await
        .expect_error(401);

    let s = Server::start_with(|c| c.access.admin_password = Some("true".into())).await;
    login_raw(&s, Some("192.0.2.31"), r#"{"password": true}"#)
        .await
        .expect(200);
    login_raw(&s, Some("192.0.2.31"), r#"{"password": false}"#)
        .await
        .expect_error(401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limit_is_per_address_and_checked_before_anything_else() {
    let s = Server::start_with(|c| {
        behind_proxy(c);
        c.access.login_max_failures = 3;
    })
    .await;
    let a = Some("198.51.100.7");
    for _ in 0..3 {
        login_with(&s, a, "wrong").await.expect_error(401);
    }
    // Step 2 comes before parsing, the empty check and the comparison.
    for body in [
        json!({ "password": PW }).to_string(),
        String::new(),
        "garbage".into(),
        "{}".into(),
    ] {
        let r = login_raw(&s, a, &body).await;
        let n = retry_after(&r);
        assert!(n <= 15 * 60, "{n}");
        assert!(r.header("set-cookie").is_none());
    }
    // Other addresses are not affected, and neither are requests without the header.
    let r = login_with(&s, Some("198.51.100.8"), PW).await.expect(200);
    assert!(authenticated(&s, |q| with_cookie(q, &token_of(&r))).await);
    login_with(&s, None, "wrong").await.expect_error(401);
    // Requests without the header share the proxy's own address, whatever connection they use.
    let other_client = client();
    send(
        other_client
            .post(s.url("/api/auth"))
            .json(&json!({ "password": "wrong" })),
    )
    .await
    .expect_error(401);
    login_with(&s, None, "wrong").await.expect_error(401);
    retry_after(&login_with(&s, None, PW).await);
    retry_after(
        &send(
            other_client
                .post(s.url("/api/auth"))
                .json(&json!({ "password": PW })),
        )
        .await,
    );
    // And the limited addresses stay limited while another one logs in.
    login_with(&s, Some("198.51.100.9"), PW).await.expect(200);
    retry_after(&login_with(&s, a, PW).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_successful_login_clears_the_failure_count() {
    let s = Server::start_with(|c| {
        behind_proxy(c);
        c.access.login_max_failures = 3;
    })
    .await;
    let ip = Some("198.51.100.20");
    for _ in 0..2 {
        login_with(&s, ip, "wrong").await.expect_error(401);
    }
    login_with(&s, ip, PW).await.expect(200);
    // Had the two failures stayed, the second of these would already be the limit.
    for _ in 0..3 {
        login_with(&s, ip, "wrong").await.expect_error(401);
    }
    retry_after(&login_with(&s, ip, PW).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_failed_logins_cannot_pass_the_limit() {
    let s = Arc::new(
        Server::start_with(|c| {
            behind_proxy(c);
            c.access.login_max_failures = 3;
        })
        .await,
    );
    let ip = "198.51.100.30";
    let guesses: Vec<_> = (0..24)
        .map(|i| {
            let s = s.clone();
            tokio::spawn(
                async move { login_with(&s, Some(ip), &format!("guess {i}")).await.status },
            )
        })
        .collect();
    let mut statuses: HashMap<u16, usize> = HashMap::new();
    for g in guesses {
        *statuses.entry(g.await.unwrap()).or_default() += 1;
    }
    let compared = statuses.get(&401).copied().unwrap_or(0);
    assert!(
        compared <= 3,
        "at most 3 passwords may be tried per window, {compared} were: {statuses:?}"
    );
    assert_eq!(
        compared + statuses.get(&429).copied().unwrap_or(0),
        24,
        "{statuses:?}"
    );
    retry_after(&login_with(&s, Some(ip), PW).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wait_counts_down_and_the_window_ends() {
    let s = Server::start_with(|c| {
        behind_proxy(c);
        c.access.login_max_failures = 2;
        c.access.login_window_secs = 3;
    })
    .await;
    let ip = Some("198.51.100.40");
    for _ in 0..2 {
        login_with(&s, ip, "wrong").await.expect_error(401);
    }
    let first = retry_after(&login_with(&s, ip, PW).await);
    assert!(first <= 3, "{first}");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let later = retry_after(&login_with(&s, ip, PW).await);
    assert!(later < first, "the wait counts down: {first} then {later}");
    tokio::time::sleep(Duration::from_millis(later * 1000 + 100)).await;
    let r = login_with(&s, ip, PW).await.expect(200);
    assert!(authenticated(&s, |q| with_cookie(q, &token_of(&r))).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logout_clears_the_cookie_and_ends_the_session() {
    let (s, token) = with_password().await;
    let other = login(&s).await;
    // Not logged in: still 200 with the clearing cookie.
    for req in [
        s.delete("/api/auth"),
        with_cookie(s.delete("/api/auth"), "forged"),
    ] {
        let r = send(req).await.expect(200);
        assert_eq!(r.json(), json!({ "ok": true }));
        assert_clearing_cookie(&r);
    }
    assert!(authenticated(&s, |q| with_cookie(q, &token)).await);

    let r = send(with_cookie(s.delete("/api/auth"), &token))
        .await
        .expect(200);
    assert_eq!(r.json(), json!({ "ok": true }));
    assert_clearing_cookie(&r);
    assert!(!authenticated(&s, |q| with_cookie(q, &token)).await);
    assert!(!authenticated(&s, |q| with_bearer(q, &token)).await);
    let r = put_data(&s, Some(&token), &site_doc().to_string())
        .await
        .expect(401);
    assert_eq!(r.json(), json!({ "error": "authentication required" }));
    send(with_cookie(s.get("/api/v1/settings"), &token))
        .await
        .expect_error(401);
    // Only that session ended.
    assert!(authenticated(&s, |q| with_cookie(q, &other)).await);
    // Logout by bearer token.
    send(with_bearer(s.delete("/api/auth"), &other))
        .await
        .expect(200);
    assert!(!authenticated(&s, |q| with_cookie(q, &other)).await);
}

fn assert_clearing_cookie(r: &Reply) {
    let cookie = r
        .header("set-cookie")
        .unwrap_or_else(|| panic!("{}: no Set-Cookie", r.what));
    let mut parts = cookie.split("; ");
    assert_eq!(parts.next(), Some("docent_session="), "{cookie}");
    let attrs: Vec<&str> = parts.collect();
    for want in ["Max-Age=0", "Path=/", "HttpOnly", "SameSite=Strict"] {
        assert!(attrs.contains(&want), "{want} missing from {cookie}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_methods_on_auth_are_405() {
    let (s, token) = with_password().await;
    for m in ["PATCH", "PUT"] {
        send(request(&s, m, "/api/auth").json(&json!({ "password": PW })))
            .await
            .expect_error(405);
        send(with_cookie(request(&s, m, "/api/auth"), &token))
            .await
            .expect_error(405);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_and_failure_counters_survive_a_restart() {
    let config = |c: &mut docent::config::Config| {
        behind_proxy(c);
        c.access.login_max_failures = 2;
    };
    let s = Server::start_with(config).await;
    let token = login(&s).await;
    let ip = Some("198.51.100.50");
    for _ in 0..2 {
        login_with(&s, ip, "wrong").await.expect_error(401);
    }
    login_with(&s, Some("198.51.100.51"), "wrong")
        .await
        .expect_error(401);
    retry_after(&login_with(&s, ip, PW).await);

    let dir = s.stop().await;
    let s = Server::start_in(dir, config).await;
    assert!(
        authenticated(&s, |q| with_cookie(q, &token)).await,
        "the session survived"
    );
    put_data(&s, Some(&token), &site_doc().to_string())
        .await
        .expect(200);
    retry_after(&login_with(&s, ip, PW).await);
    // The other address had one failure before the restart: one more and it is limited.
    login_with(&s, Some("198.51.100.51"), "wrong")
        .await
        .expect_error(401);
    retry_after(&login_with(&s, Some("198.51.100.51"), PW).await);
    // A logout after the restart still ends the session.
    send(with_cookie(s.delete("/api/auth"), &token))
        .await
        .expect(200);
    let dir = s.stop().await;
    let s = Server::start_in(dir, config).await;
    assert!(!authenticated(&s, |q| with_cookie(q, &token)).await);
}

// =============================================================================================
// 2. /api/data

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_start_stores_the_default_document() {
    let s = Server::start().await;
    let r = send(s.get("/api/data")).await.expect(200);
    assert_eq!(r.header("cache-control"), Some(DATA_CACHE_CONTROL));
    assert!(
        r.header("content-type")
            .unwrap()
            .starts_with("application/json")
    );
    let default: Value = serde_json::from_str(DEFAULT_DOCUMENT).unwrap();
    assert_eq!(r.json(), default);
    for key in ["hero", "bio", "exhibitions", "contact", "works"] {
        assert!(default.get(key).is_some(), "{key}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_data_follows_the_seed_order() {
    let (s, token) = with_password().await;
    let t = Some(token.as_str());
    let before = send(s.get("/api/data")).await.expect(200).json();

    // Step 1: authentication before anything, even an invalid body.
    for body in ["not json", "", "{}", &site_doc().to_string()] {
        let r = put_data(&s, None, body).await.expect(401);
        assert_eq!(
            r.json(),
            json!({ "error": "authentication required" }),
            "{body:?}"
        );
    }
    // Step 2: invalid JSON.
    for body in ["not json", "", "{\"hero\": ", "{'hero': 1}"] {
        put_data(&s, t, body).await.expect_error(400);
    }
    // Step 3: keys in order hero, bio, exhibitions, contact, works.
    let order = ["hero", "bio", "exhibitions", "contact", "works"];
    for (i, key) in order.iter().enumerate() {
        let mut doc = site_doc();
        for later in &order[i..] {
            doc.as_object_mut().unwrap().remove(*later);
        }
        let message = put_data(&s, t, &doc.to_string())
            .await
            .expect_error(400)
            .error();
        assert!(message.contains(key), "missing {key}: {message:?}");
        for other in order.iter().filter(|k| *k != key) {
            assert!(!message.contains(other), "only {key} is named: {message:?}");
        }
    }
    // A missing hero is reported before a bad works.
    let mut doc = site_doc();
    doc.as_object_mut().unwrap().remove("hero");
    doc["works"] = json!("not an array");
    let message = put_data(&s, t, &doc.to_string())
        .await
        .expect_error(400)
        .error();
    assert!(
        message.contains("hero") && !message.contains("works"),
        "{message:?}"
    );
    // Not an object at all: the first key is missing.
    for body in ["[]", "42", "\"text\"", "null"] {
        let message = put_data(&s, t, body).await.expect_error(400).error();
        assert!(message.contains("hero"), "{body}: {message:?}");
    }
    // Step 4 before step 5: works, then exhibitions.
    let mut doc = site_doc();
    doc["works"] = json!({ "w1": {} });
    doc["exhibitions"] = json!("none");
    let message = put_data(&s, t, &doc.to_string())
        .await
        .expect_error(400)
        .error();
    assert!(
        message.contains("works") && !message.contains("exhibitions"),
        "{message:?}"
    );
    let mut doc = site_doc();
    doc["exhibitions"] = json!(null);
    let message = put_data(&s, t, &doc.to_string())
        .await
        .expect_error(400)
        .error();
    assert!(message.contains("exhibitions"), "{message:?}");
    // Nothing refused was stored.
    assert_eq!(send(s.get("/api/data")).await.expect(200).json(), before);

    // Step 6: stored as given, extra keys kept.
    let doc = site_doc();
    let r = put_data(&s, t, &doc.to_string()).await.expect(200);
    assert_eq!(
        r.json(),
        json!({ "ok": true, "count": { "works": 3, "exhibitions": 1 } })
    );
    let r = send(s.get("/api/data")).await.expect(200);
    assert_eq!(r.header("cache-control"), Some(DATA_CACHE_CONTROL));
    assert_eq!(r.json(), doc);
    // The whole object is replaced: a key of the earlier document does not linger.
    let small = json!({ "hero": 1, "bio": "", "exhibitions": [], "contact": {}, "works": [] });
    let r = put_data(&s, t, &small.to_string()).await.expect(200);
    assert_eq!(
        r.json(),
        json!({ "ok": true, "count": { "works": 0, "exhibitions": 0 } })
    );
    assert_eq!(send(s.get("/api/data")).await.expect(200).json(), small);
    // The bearer token works as well.
    let r = send(with_bearer(s.put("/api/data"), &token).json(&doc))
        .await
        .expect(200);
    assert_eq!(r.json()["count"]["works"], 3);
    assert_eq!(send(s.get("/api/data")).await.json(), doc);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeding_resets_to_the_default_document() {
    let (s, token) = with_password().await;
    let default: Value = serde_json::from_str(DEFAULT_DOCUMENT).unwrap();
    put_data(&s, Some(&token), &site_doc().to_string())
        .await
        .expect(200);

    // Unauthenticated seed: the unauthorized response, nothing changes.
    let r = send(s.post("/api/data?seed=1")).await.expect(401);
    assert_eq!(r.json(), json!({ "error": "authentication required" }));
    // POST without seed=1 is 405, logged in or not.
    for path in [
        "/api/data",
        "/api/data?seed=0",
        "/api/data?seed=true",
        "/api/data?seeds=1",
    ] {
        send(with_cookie(s.post(path), &token))
            .await
            .expect_error(405);
        send(s.post(path)).await.expect_error(405);
    }
    for m in ["PATCH", "DELETE"] {
        send(with_cookie(request(&s, m, "/api/data"), &token))
            .await
            .expect_error(405);
        send(request(&s, m, "/api/data")).await.expect_error(405);
    }
    assert_eq!(send(s.get("/api/data")).await.json(), site_doc());

    let r = send(with_cookie(s.post("/api/data?seed=1"), &token))
        .await
        .expect(200);
    assert_eq!(r.json(), json!({ "ok": true, "seeded": true }));
    assert_eq!(send(s.get("/api/data")).await.expect(200).json(), default);
    // Every such call overwrites again.
    put_data(&s, Some(&token), &site_doc().to_string())
        .await
        .expect(200);
    let r = send(with_bearer(s.post("/api/data?seed=1"), &token))
        .await
        .expect(200);
    assert_eq!(r.json(), json!({ "ok": true, "seeded": true }));
    assert_eq!(send(s.get("/api/data")).await.json(), default);
}

// =============================================================================================
// 3. /api/img/{name}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_image_store_get_is_500_plain_and_delete_500_json() {
    let s = Server::start_with(|c| {
        behind_proxy(c);
        c.storage.image_store = false;
    })
    .await;
    let token = login(&s).await;
    // GET step 1 comes before the key check.
    for path in [
        "/api/img/photo.png",
        "/api/img/a%2Fb",
        "/api/img/a..b",
        "/api/img/",
        "/api/img/%FF",
    ] {
        send(s.get(path)).await.expect_plain(500);
    }
    let (status, head, _) = raw_http(s.addr, "GET", "/api/img/%2e%2e", &[]).await;
    assert_eq!(status, 500, "{head}");
    // DELETE: authentication first, then the store, then the key.
    for path in ["/api/img/photo.png", "/api/img/a%2Fb", "/api/img/%FF"] {
        let r = send(s.delete(path)).await.expect(401);
        assert_eq!(r.json(), json!({ "error": "authentication required" }));
        send(with_cookie(s.delete(path), &token))
            .await
            .expect_error(500);
    }
    // Upload too.
    send(s.put("/api/img/photo.png").body(PNG.to_vec()))
        .await
        .expect_error(401);
    put_image(&s, &token, "photo.png", PNG, "image/png")
        .await
        .expect_error(500);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_get_checks_the_key_then_serves_with_cache_headers_and_etag() {
    let (s, token) = with_password().await;
    // Step 2: invalid keys, plain text.
    for path in [
        "/api/img/a%2Fb",
        "/api/img/%2F",
        "/api/img/a..b",
        "/api/img/..x",
        "/api/img/",
        "/api/img/%FF",
    ] {
        send(s.get(path)).await.expect_plain(400);
    }
    for target in ["/api/img/%2e%2e", "/api/img/%2E%2E", "/api/img/.."] {
        let (status, head, body) = raw_http(s.addr, "GET", target, &[]).await;
        assert_eq!(status, 400, "{target}: {head}");
        assert!(
            head.contains("content-type: text/plain"),
            "{target}: {head}"
        );
        assert!(!body.is_empty());
    }
    // Step 4: no such object.
    send(s.get("/api/img/nothing.png")).await.expect_plain(404);

    // Upload, then serve with the stored content type, the cache policy and the entity tag.
    let bytes = [PNG, b"-padding-to-make-it-distinct"].concat();
    let up = put_image(&s, &token, "hero.png", &bytes, "image/png")
        .await
        .expect(200)
        .json();
    assert_eq!(up["ok"], true);
    assert_eq!(up["key"], "hero.png");
    assert_eq!(up["size"], bytes.len());
    let etag = up["etag"].as_str().unwrap().to_string();
    assert!(
        etag.len() > 2 && etag.starts_with('"') && etag.ends_with('"'),
        "a quoted strong tag: {etag}"
    );

    // A conditional request before any plain GET (nothing cached yet).
    let r = send(s.get("/api/img/hero.png").header("If-None-Match", &etag))
        .await
        .expect(304);
    assert_not_modified(&r, &etag, "image/png");

    let r = send(s.get("/api/img/hero.png")).await.expect(200);
    assert_served(&r, &bytes, &etag, "image/png");
    // Again, now likely from the cache, and the conditional request from the cache.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let r = send(s.get("/api/img/hero.png")).await.expect(200);
    assert_served(&r, &bytes, &etag, "image/png");
    let r = send(s.get("/api/img/hero.png").header("If-None-Match", &etag))
        .await
        .expect(304);
    assert_not_modified(&r, &etag, "image/png");
    // Any other If-None-Match is a full answer.
    for other in ["\"0000\"", "W/\"0000\"", &etag[1..etag.len() - 1]] {
        let r = send(s.get("/api/img/hero.png").header("If-None-Match", other))
            .await
            .expect(200);
        assert_served(&r, &bytes, &etag, "image/png");
    }
    // A percent-encoded key is decoded once.
    let jpeg = [&b"\xFF\xD8\xFF"[..], b"jpeg bytes"].concat();
    put_image(&s, &token, "two%20words.jpg", &jpeg, "image/jpeg")
        .await
        .expect(200);
    let r = send(s.get("/api/img/two%20words.jpg")).await.expect(200);
    assert_eq!(r.body, jpeg);
    assert_eq!(r.header("content-type"), Some("image/jpeg"));
    // Images are public.
    send(with_cookie(s.get("/api/img/hero.png"), "forged"))
        .await
        .expect(200);
}

fn assert_served(r: &Reply, bytes: &[u8], etag: &str, content_type: &str) {
    assert_eq!(r.body, bytes, "{}", r.what);
    assert_image_headers(r, etag, content_type);
}

fn assert_not_modified(r: &Reply, etag: &str, content_type: &str) {
    assert!(r.body.is_empty(), "{}: 304 with a body", r.what);
    assert_image_headers(r, etag, content_type);
}

/// The headers of an image answer, served (200) or not modified (304) alike.
fn assert_image_headers(r: &Reply, etag: &str, content_type: &str) {
    assert_eq!(r.header("content-type"), Some(content_type), "{}", r.what);
    let cache = r.header("cache-control");
    assert_eq!(cache, Some(IMAGE_CACHE_CONTROL), "{}", r.what);
    assert_eq!(r.header("etag"), Some(etag), "{}", r.what);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_delete_follows_the_seed_order() {
    let (s, token) = with_password().await;
    put_image(&s, &token, "gone.png", PNG, "image/png")
        .await
        .expect(200);
    // Step 1: authentication, even for a bad key.
    for path in [
        "/api/img/gone.png",
        "/api/img/a%2Fb",
        "/api/img/a..b",
        "/api/img/",
        "/api/img/%FF",
    ] {
        let r = send(s.delete(path)).await.expect(401);
        assert_eq!(
            r.json(),
            json!({ "error": "authentication required" }),
            "{path}"
        );
        send(with_cookie(s.delete(path), "forged"))
            .await
            .expect(401);
    }
    let (status, _, body) = raw_http(s.addr, "DELETE", "/api/img/%2e%2e", &[]).await;
    assert_eq!(status, 401, "{}", String::from_utf8_lossy(&body));
    send(s.get("/api/img/gone.png")).await.expect(200);
    // Step 3: invalid keys, as JSON.
    for path in [
        "/api/img/a%2Fb",
        "/api/img/a..b",
        "/api/img/",
        "/api/img/%FF",
    ] {
        send(with_cookie(s.delete(path), &token))
            .await
            .expect_error(400);
    }
    let cookie = format!("{COOKIE_NAME}={token}");
    let origin = format!("http://{}", s.addr);
    let (status, head, body) = raw_http(
        s.addr,
        "DELETE",
        "/api/img/%2e%2e",
        &[("Cookie", &cookie), ("Origin", &origin)],
    )
    .await;
    assert_eq!(status, 400, "{head}");
    assert!(serde_json::from_slice::<Value>(&body).unwrap()["error"].is_string());
    // Step 4.
    let r = send(with_cookie(s.delete("/api/img/gone.png"), &token))
        .await
        .expect(200);
    assert_eq!(r.json(), json!({ "ok": true, "deleted": "gone.png" }));
    send(s.get("/api/img/gone.png")).await.expect_plain(404);
    // No existence check: the same answer again, and for a key that never existed.
    let r = send(with_cookie(s.delete("/api/img/gone.png"), &token))
        .await
        .expect(200);
    assert_eq!(r.json(), json!({ "ok": true, "deleted": "gone.png" }));
    let r = send(with_bearer(s.delete("/api/img/never%20there.webp"), &token))
        .await
        .expect(200);
    assert_eq!(
        r.json(),
        json!({ "ok": true, "deleted": "never there.webp" })
    );
}

/// GET (fills the cache), then DELETE while GETs race it: one racer on the cached URL, the others
/// on fresh URLs of the same key, which miss the cache and fill it while the DELETE commits. After
/// the DELETE has answered, no URL of the key may be served, cached or not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_image_is_never_served_from_the_cache() {
    let (s, token) = with_password().await;
    let s = Arc::new(s);
    for round in 0..50 {
        // Large enough that reading it takes a while: a fill started before the DELETE
        // committed is still running when the DELETE answers.
        let bytes = image(format!("image of round {round};").repeat(4000).as_bytes());
        put_image(&s, &token, "race.png", &bytes, "image/png")
            .await
            .expect(200);
        for path in [
            "/api/img/race.png",
            "/api/img/race.png?v=2",
            "/api/img/race.png",
        ] {
            assert!(send(s.get(path)).await.expect(200).body == bytes, "{path}");
        }
        let deleted = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let racers: Vec<_> = (0..4)
            .map(|racer| {
                let (s, deleted, stop) = (s.clone(), deleted.clone(), stop.clone());
                tokio::spawn(async move {
                    let mut seen = Vec::new();
                    for n in 0.. {
                        if stop.load(Ordering::Acquire) {
                            break;
                        }
                        let path = match racer {
                            0 => "/api/img/race.png".to_string(),
                            _ => format!("/api/img/race.png?r={round}-{racer}-{n}"),
                        };
                        let after_delete = deleted.load(Ordering::Acquire);
                        let r = send(s.get(&path)).await;
                        seen.push((path, after_delete, r.status, r.body));
                    }
                    seen
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(2)).await;
        let r = send(with_cookie(s.delete("/api/img/race.png"), &token))
            .await
            .expect(200);
        assert_eq!(r.json()["deleted"], "race.png");
        deleted.store(true, Ordering::Release);
        for path in ["/api/img/race.png", "/api/img/race.png?v=2"] {
            send(s.get(path)).await.expect_plain(404);
        }
        // Let late fills land, then stop the racers.
        tokio::time::sleep(Duration::from_millis(10)).await;
        stop.store(true, Ordering::Release);
        let mut served = Vec::new();
        for racer in racers {
            for (path, after_delete, status, body) in racer.await.unwrap() {
                match status {
                    200 => {
                        assert!(
                            !after_delete,
                            "round {round}: {path} served after the DELETE answered"
                        );
                        assert!(body == bytes, "round {round}: {path} served other bytes");
                        served.push(path);
                    }
                    404 => {}
                    other => panic!(
                        "round {round}: GET {path} racing the DELETE got {other}: {}",
                        String::from_utf8_lossy(&body)
                    ),
                }
            }
        }
        // No URL that was served while the DELETE ran is served from the cache now.
        served.sort();
        served.dedup();
        for path in served {
            send(s.get(&path)).await.expect_plain(404);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reuploaded_image_is_served_with_its_new_bytes() {
    let (s, token) = with_password().await;
    let old = image(&b"old image bytes".repeat(20));
    let new = [&b"RIFF\0\0\0\0WEBP"[..], &b"new image bytes!".repeat(20)].concat();
    let old_tag = put_image(&s, &token, "swap.png", &old, "image/png")
        .await
        .expect(200)
        .json()["etag"]
        .clone();
    for _ in 0..3 {
        assert_eq!(send(s.get("/api/img/swap.png")).await.expect(200).body, old);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let new_tag = put_image(&s, &token, "swap.png", &new, "image/webp")
        .await
        .expect(200)
        .json()["etag"]
        .clone();
    assert_ne!(old_tag, new_tag);
    let r = send(s.get("/api/img/swap.png")).await.expect(200);
    assert_served(&r, &new, new_tag.as_str().unwrap(), "image/webp");
    // The old tag no longer matches.
    let r = send(
        s.get("/api/img/swap.png")
            .header("If-None-Match", old_tag.as_str().unwrap()),
    )
    .await
    .expect(200);
    assert_eq!(r.body, new);
    // The same bytes under two keys are two objects: deleting one leaves the other.
    put_image(&s, &token, "copy.png", &new, "image/png")
        .await
        .expect(200);
    send(with_cookie(s.delete("/api/img/swap.png"), &token))
        .await
        .expect(200);
    assert_eq!(send(s.get("/api/img/copy.png")).await.expect(200).body, new);
    // Re-uploading identical bytes keeps the object readable.
    put_image(&s, &token, "copy.png", &new, "image/png")
        .await
        .expect(200);
    assert_eq!(send(s.get("/api/img/copy.png")).await.expect(200).body, new);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_uploads_over_the_bound_are_413_and_other_methods_405() {
    let s = Server::start_with(|c| {
        behind_proxy(c);
        c.limits.image_bytes = 1024;
    })
    .await;
    let token = login(&s).await;
    put_image(&s, &token, "big.png", &image(&[1u8; 1025 - 8]), "image/png")
        .await
        .expect_error(413);
    // Without a declared length (chunked), too.
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = (0..4).map(|_| Ok(vec![2u8; 400])).collect();
    let body = reqwest::Body::wrap_stream(futures_util::stream::iter(chunks));
    send(
        with_cookie(s.put("/api/img/big.png"), &token)
            .header(CONTENT_TYPE, "image/png")
            .body(body),
    )
    .await
    .expect_error(413);
    send(s.get("/api/img/big.png")).await.expect_plain(404);
    put_image(&s, &token, "big.png", &image(&[3u8; 1024 - 8]), "image/png")
        .await
        .expect(200);
    assert_eq!(
        send(s.get("/api/img/big.png")).await.expect(200).body,
        image(&[3u8; 1024 - 8])
    );
    // Upload key rules and authentication.
    for path in ["/api/img/a%2Fb", "/api/img/a..b", "/api/img/"] {
        send(with_cookie(s.put(path), &token).body(PNG.to_vec()))
            .await
            .expect_error(400);
    }
    send(s.put("/api/img/x.png").body(PNG.to_vec()))
        .await
        .expect(401);
    // Other methods.
    for m in ["PATCH", "POST"] {
        send(with_cookie(request(&s, m, "/api/img/big.png"), &token))
            .await
            .expect_error(405);
        send(request(&s, m, "/api/img/big.png"))
            .await
            .expect_error(405);
    }
}

// =============================================================================================
// 4. Who may call what, on every route

#[derive(Clone, Copy, Debug, PartialEq)]
enum Access {
    /// Anyone.
    Public,
    /// An administrator session (or setup mode).
    Admin,
    /// Loopback or the internal token; the tests connect over loopback.
    Internal,
    /// A conversation client: trusted loopback, an admin session or a client key; a route naming
    /// a session also needs its owner (or an administrator).
    Conversation,
}

use Access::{Admin, Conversation, Internal, Public};

/// The routes of the CyberVerse conversation server's API, which its web front end calls.
const CYBERVERSE_ROUTES: &[(&str, &str)] = &[
    ("GET", "/api/v1/health"),
    ("GET", "/api/v1/components"),
    ("POST", "/api/v1/sessions"),
    ("GET", "/api/v1/sessions"),
    ("DELETE", "/api/v1/sessions/{id}"),
    ("POST", "/api/v1/sessions/{id}/message"),
    ("GET", "/api/v1/sessions/{id}/tasks"),
    ("GET", "/api/v1/tasks/{task_id}"),
    ("GET", "/api/v1/tasks/{task_id}/events"),
    ("GET", "/api/v1/tasks/{task_id}/artifacts/{artifact_id}"),
    ("POST", "/api/v1/internal/tasks/{task_id}/events"),
    ("POST", "/api/v1/internal/tasks/{task_id}/artifacts"),
    ("POST", "/api/v1/internal/characters/{id}/knowledge/search"),
    ("GET", "/ws/chat/{id}"),
    ("GET", "/api/v1/characters"),
    ("POST", "/api/v1/characters"),
    ("POST", "/api/v1/characters/test-voice"),
    ("GET", "/api/v1/characters/{id}"),
    ("PUT", "/api/v1/characters/{id}"),
    ("DELETE", "/api/v1/characters/{id}"),
    ("POST", "/api/v1/characters/{id}/avatar"),
    ("GET", "/api/v1/characters/{id}/images"),
    ("GET", "/api/v1/characters/{id}/images/{filename}"),
    ("DELETE", "/api/v1/characters/{id}/images/{filename}"),
    ("PUT", "/api/v1/characters/{id}/images/{filename}/activate"),
    ("GET", "/api/v1/characters/{id}/knowledge"),
    ("POST", "/api/v1/characters/{id}/knowledge/files"),
    ("DELETE", "/api/v1/characters/{id}/knowledge/{source_id}"),
    (
        "POST",
        "/api/v1/characters/{id}/knowledge/{source_id}/reindex",
    ),
    (
        "GET",
        "/api/v1/characters/{id}/idle-videos/{imgbase}/{variant}/{filename}",
    ),
    (
        "GET",
        "/api/v1/characters/{id}/idle-videos/{imgbase}/{filename}",
    ),
    ("GET", "/api/v1/avatars/{filename}"),
    ("GET", "/api/v1/characters/{id}/conversations/messages"),
    ("GET", "/api/v1/settings"),
    ("PUT", "/api/v1/settings"),
    ("POST", "/api/v1/settings/test"),
    ("GET", "/api/v1/config/avatar-model"),
    ("GET", "/api/v1/config/launch"),
    ("PUT", "/api/v1/config/launch"),
];

/// Every route of the kiosk with who may call it: the CyberVerse routes (each exactly once), the
/// added idle-clip routes, and the site administration routes. Admin rows that
/// destroy something come after the rows that need it.
const ROUTES: &[(&str, &str, Access)] = &[
    ("GET", "/api/v1/health", Public),
    ("GET", "/api/v1/components", Public),
    ("POST", "/api/v1/sessions", Conversation),
    ("GET", "/api/v1/sessions", Conversation),
    ("POST", "/api/v1/sessions/{id}/message", Conversation),
    ("GET", "/api/v1/sessions/{id}/tasks", Conversation),
    ("DELETE", "/api/v1/sessions/{id}", Conversation),
    ("GET", "/api/v1/tasks/{task_id}", Conversation),
    ("GET", "/api/v1/tasks/{task_id}/events", Conversation),
    (
        "GET",
        "/api/v1/tasks/{task_id}/artifacts/{artifact_id}",
        Conversation,
    ),
    ("POST", "/api/v1/internal/tasks/{task_id}/events", Internal),
    (
        "POST",
        "/api/v1/internal/tasks/{task_id}/artifacts",
        Internal,
    ),
    (
        "POST",
        "/api/v1/internal/characters/{id}/knowledge/search",
        Internal,
    ),
    ("GET", "/ws/chat/{id}", Conversation),
    ("GET", "/api/v1/characters", Public),
    ("GET", "/api/v1/characters/{id}", Public),
    ("GET", "/api/v1/characters/{id}/images", Public),
    ("GET", "/api/v1/characters/{id}/images/{filename}", Public),
    (
        "GET",
        "/api/v1/characters/{id}/idle-videos/{imgbase}/{variant}/{filename}",
        Public,
    ),
    (
        "GET",
        "/api/v1/characters/{id}/idle-videos/{imgbase}/{filename}",
        Public,
    ),
    ("GET", "/api/v1/avatars/{filename}", Public),
    ("GET", "/api/v1/config/avatar-model", Public),
    ("GET", "/api/data", Public),
    ("GET", "/api/img/{name}", Public),
    ("GET", "/api/auth", Public),
    ("POST", "/api/auth", Public),
    ("DELETE", "/api/auth", Public),
    ("POST", "/api/auth/logout-all", Admin),
    ("POST", "/api/v1/characters", Admin),
    ("POST", "/api/v1/characters/test-voice", Admin),
    ("PUT", "/api/v1/characters/{id}", Admin),
    ("POST", "/api/v1/characters/{id}/avatar", Admin),
    (
        "PUT",
        "/api/v1/characters/{id}/images/{filename}/activate",
        Admin,
    ),
    ("GET", "/api/v1/characters/{id}/knowledge", Admin),
    ("POST", "/api/v1/characters/{id}/knowledge/files", Admin),
    (
        "POST",
        "/api/v1/characters/{id}/knowledge/{source_id}/reindex",
        Admin,
    ),
    (
        "DELETE",
        "/api/v1/characters/{id}/knowledge/{source_id}",
        Admin,
    ),
    (
        "PUT",
        "/api/v1/characters/{id}/idle-videos/{imgbase}/{variant}/{filename}",
        Admin,
    ),
    (
        "PUT",
        "/api/v1/characters/{id}/idle-videos/{imgbase}/{filename}",
        Admin,
    ),
    (
        "DELETE",
        "/api/v1/characters/{id}/idle-videos/{imgbase}/{variant}/{filename}",
        Admin,
    ),
    (
        "DELETE",
        "/api/v1/characters/{id}/idle-videos/{imgbase}/{filename}",
        Admin,
    ),
    (
        "GET",
        "/api/v1/characters/{id}/conversations/messages",
        Admin,
    ),
    (
        "DELETE",
        "/api/v1/characters/{id}/conversations/messages",
        Admin,
    ),
    ("GET", "/api/v1/characters/{id}/conversations/export", Admin),
    (
        "GET",
        "/api/v1/characters/{id}/conversations/unmatched",
        Admin,
    ),
    ("POST", "/api/v1/characters/{id}/knowledge/ask", Admin),
    ("GET", "/api/v1/characters/{id}/screen-questions", Admin),
    ("PUT", "/api/v1/characters/{id}/screen-questions", Admin),
    ("GET", "/api/v1/settings", Admin),
    ("PUT", "/api/v1/settings", Admin),
    ("POST", "/api/v1/settings/test", Admin),
    ("GET", "/api/v1/characters/voices", Admin),
    ("GET", "/api/v1/characters/{id}/statistics", Admin),
    ("GET", "/api/v1/config/launch", Admin),
    ("PUT", "/api/v1/config/launch", Admin),
    ("POST", "/api/v1/client-keys", Admin),
    ("GET", "/api/v1/client-keys", Admin),
    ("GET", "/metrics", Admin),
    ("PUT", "/api/data", Admin),
    ("POST", "/api/data?seed=1", Admin),
    ("PUT", "/api/img/{name}", Admin),
    ("DELETE", "/api/img/{name}", Admin),
    ("DELETE", "/api/v1/characters/{id}/images/{filename}", Admin),
    ("DELETE", "/api/v1/characters/{id}", Admin),
    ("DELETE", "/api/v1/client-keys/{key_id}", Admin),
];

/// Real records for the path parameters, so no check is masked by a 404.
struct Fixture {
    cid: String,
    victim: String,
    victim_image: String,
    session: String,
    spare_session: String,
    task: String,
    artifact: String,
    source: String,
    /// A client key to revoke (the DELETE row), when the fixture has an admin session.
    spare_key: String,
}

fn avatar_form() -> Form {
    Form::new().part("avatar", Part::bytes(PNG.to_vec()).file_name("face.png"))
}

fn knowledge_form() -> Form {
    Form::new().part(
        "files",
        Part::bytes(b"The harbour painting dates from 1871.".to_vec()).file_name("notes.txt"),
    )
}

/// The fixture's records; `client` (a client key) opens its sessions and `internal` (the internal
/// token) drives its task, for a kiosk that does not trust loopback.
async fn fixture(
    s: &Server,
    token: Option<&str>,
    client: Option<&str>,
    internal: Option<&str>,
) -> Fixture {
    let create =
        |name: &str| authed(s.post("/api/v1/characters"), token).json(&json!({ "name": name }));
    let cid = send(create("Guarded")).await.created_id();
    let victim = send(create("Victim")).await.created_id();
    let image = send(
        authed(s.post(&format!("/api/v1/characters/{cid}/avatar")), token).multipart(avatar_form()),
    )
    .await
    .expect(200)
    .json();
    assert_eq!(image["filename"], "img_001.png");
    let victim_image = send(
        authed(
            s.post(&format!("/api/v1/characters/{victim}/avatar")),
            token,
        )
        .multipart(avatar_form()),
    )
    .await
    .expect(200)
    .json()["filename"]
        .as_str()
        .unwrap()
        .to_string();
    for path in ["img_001/idle/clip.mp4", "img_001/clip.mp4"] {
        send(
            authed(
                s.put(&format!("/api/v1/characters/{cid}/idle-videos/{path}")),
                token,
            )
            .body(mp4_h264()),
        )
        .await
        .expect(201);
    }
    let sources = send(
        authed(
            s.post(&format!("/api/v1/characters/{cid}/knowledge/files")),
            token,
        )
        .multipart(knowledge_form()),
    )
    .await
    .expect(201)
    .json();
    let source = sources["sources"][0]["id"].as_str().unwrap().to_string();
    let session = new_session(s, &cid, client).await;
    let spare_session = new_session(s, &cid, client).await;
    let task = fresh_uuid();
    let internal = |req: reqwest::RequestBuilder| match internal {
        Some(t) => with_bearer(req, t),
        None => req,
    };
    send(
        internal(s.post(&format!("/api/v1/internal/tasks/{task}/events")))
            .json(&json!({ "session_id": session, "user_request": "find the harbour painting", "status": "running" })),
    )
    .await
    .expect(200);
    let artifact = send(
        internal(s.post(&format!("/api/v1/internal/tasks/{task}/artifacts")))
            .json(&json!({ "content": "# Notes" })),
    )
    .await
    .created_id();
    put_data(s, token, &site_doc().to_string())
        .await
        .expect(200);
    send(
        authed(s.put("/api/img/guard.png"), token)
            .header(CONTENT_TYPE, "image/png")
            .body(PNG.to_vec()),
    )
    .await
    .expect(200);
    let spare_key =
        send(authed(s.post("/api/v1/client-keys"), token).json(&json!({ "name": "spare" })))
            .await
            .created_id();
    Fixture {
        spare_key,
        cid,
        victim,
        victim_image,
        session,
        spare_session,
        task,
        artifact,
        source,
    }
}

async fn new_session(s: &Server, cid: &str, client: Option<&str>) -> String {
    let req = s.post("/api/v1/sessions");
    let req = match client {
        Some(key) => with_bearer(req, key),
        None => req,
    };
    let r = send(req.json(&json!({ "character_id": cid })))
        .await
        .expect(201);
    r.json()["session_id"].as_str().unwrap().to_string()
}

/// The request for one row of `ROUTES`, on the fixture's records, with a plausible body.
fn route_request(s: &Server, fx: &Fixture, m: &str, template: &str) -> reqwest::RequestBuilder {
    let destroys_character = m == "DELETE"
        && template.starts_with("/api/v1/characters/{id}")
        && !template.contains("/idle-videos/")
        && !template.contains("/knowledge/");
    let id = if template.starts_with("/api/v1/sessions/{id}") {
        if m == "DELETE" {
            &fx.spare_session
        } else {
            &fx.session
        }
    } else if template.starts_with("/ws/chat/") {
        &fx.session
    } else if destroys_character {
        &fx.victim
    } else {
        &fx.cid
    };
    let filename = if template.contains("/idle-videos/") {
        "clip.mp4".to_string()
    } else if template.starts_with("/api/v1/avatars/") {
        format!("{}_img_001.png", fx.cid)
    } else if destroys_character {
        fx.victim_image.clone()
    } else {
        "img_001.png".to_string()
    };
    let path = template
        .replace("{id}", id)
        .replace("{filename}", &filename)
        .replace("{imgbase}", "img_001")
        .replace("{variant}", "idle")
        .replace("{task_id}", &fx.task)
        .replace("{artifact_id}", &fx.artifact)
        .replace("{source_id}", &fx.source)
        .replace("{name}", "guard.png")
        .replace("{key_id}", &fx.spare_key);
    assert!(!path.contains('{'), "unfilled parameter in {path}");
    let req = request(s, m, &path);
    match (m, template) {
        ("POST", "/api/v1/sessions") => req.json(&json!({ "character_id": fx.cid })),
        ("POST", "/api/v1/sessions/{id}/message") => req.json(&json!({ "text": "hello" })),
        ("POST", "/api/v1/internal/tasks/{task_id}/events") => {
            req.json(&json!({ "message": "working", "progress": 10 }))
        }
        ("POST", "/api/v1/internal/tasks/{task_id}/artifacts") => {
            req.json(&json!({ "content": "# More" }))
        }
        ("POST", "/api/v1/internal/characters/{id}/knowledge/search") => {
            req.json(&json!({ "query": "harbour" }))
        }
        ("POST", "/api/v1/characters") => req.json(&json!({ "name": "Another" })),
        ("POST", "/api/v1/characters/test-voice") => {
            req.json(&json!({ "voice_provider": "local", "voice_type": "en-us" }))
        }
        ("PUT", "/api/v1/characters/{id}") => req.json(&json!({ "name": "Renamed" })),
        ("POST", "/api/v1/characters/{id}/avatar") => req.multipart(avatar_form()),
        ("POST", "/api/v1/characters/{id}/knowledge/files") => req.multipart(knowledge_form()),
        ("POST", "/api/v1/characters/{id}/knowledge/ask") => {
            req.json(&json!({ "question": "harbour" }))
        }
        ("PUT", t) if t.contains("/idle-videos/") => req.body(mp4_h264()),
        ("PUT", "/api/v1/characters/{id}/images/{filename}/activate") => req,
        ("PUT", "/api/v1/characters/{id}/screen-questions") => {
            req.json(&json!({ "questions": [] }))
        }
        ("PUT", "/api/v1/settings") => req.json(&json!({ "kiosk": { "volume": 70 } })),
        ("PUT", "/api/v1/config/launch") => req.json(&json!({ "params": [] })),
        ("PUT", "/api/data") => req.json(&site_doc()),
        ("PUT", "/api/img/{name}") => req.header(CONTENT_TYPE, "image/png").body(PNG.to_vec()),
        ("POST", "/api/v1/client-keys") => req.json(&json!({ "name": "tablet" })),
        ("POST", "/api/auth") => req.json(&json!({})),
        ("GET" | "DELETE" | "POST", _) => req,
        _ => panic!("no request is written for {m} {template}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_is_listed_once_and_guarded_as_listed() {
    // The table covers every CyberVerse route exactly once.
    for (i, (m, t, _)) in ROUTES.iter().enumerate() {
        assert!(
            !ROUTES[i + 1..].iter().any(|(m2, t2, _)| m2 == m && t2 == t),
            "{m} {t} is listed twice"
        );
    }
    for (m, t) in CYBERVERSE_ROUTES {
        let n = ROUTES
            .iter()
            .filter(|(m2, t2, _)| m2 == m && t2 == t)
            .count();
        assert_eq!(n, 1, "{m} {t} of the CyberVerse routes appears {n} times");
    }
    let added = ROUTES
        .iter()
        .filter(|(m, t, _)| !CYBERVERSE_ROUTES.contains(&(*m, *t)))
        .count();
    assert_eq!(ROUTES.len(), CYBERVERSE_ROUTES.len() + added);
    assert_eq!(
        added, 26,
        "4 idle-clip routes, 3 of /api/data, 3 of /api/img, 4 of /api/auth, 3 of client keys, the history purge, its export, the unmatched questions, the knowledge ask, the voices, the statistics, the questions on the screen (2), the metrics"
    );

    let (s, token) = with_password().await;
    let health = send(s.get("/api/v1/health")).await.expect(200).json();
    assert_eq!(health["admin_auth"], "password");
    let fx = fixture(&s, Some(&token), None, None).await;
    let forged = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode([9u8; 32]);

    // Without a session: admin routes 401 {error}, the others never 401.
    for &(m, t, access) in ROUTES {
        let r = send(route_request(&s, &fx, m, t)).await;
        match access {
            Admin => {
                let r = r.expect_error(401);
                if t.starts_with("/api/data") || t.starts_with("/api/img") {
                    assert_eq!(
                        r.json(),
                        json!({ "error": "authentication required" }),
                        "{m} {t}"
                    );
                }
                send(with_cookie(route_request(&s, &fx, m, t), &forged))
                    .await
                    .expect_error(401);
                send(with_bearer(route_request(&s, &fx, m, t), &forged))
                    .await
                    .expect_error(401);
            }
            Public | Internal | Conversation => {
                assert_ne!(
                    r.status,
                    401,
                    "{m} {t} is {access:?} but answered 401: {}",
                    r.shown()
                );
                assert_ne!(r.status, 403, "{m} {t}: {}", r.shown());
            }
        }
    }
    // Public reads of the fixture's records succeed (so the ids above are real).
    for path in [
        format!("/api/v1/characters/{}/images/img_001.png", fx.cid),
        format!(
            "/api/v1/characters/{}/idle-videos/img_001/idle/clip.mp4",
            fx.cid
        ),
        format!("/api/v1/characters/{}/idle-videos/img_001/clip.mp4", fx.cid),
        format!("/api/v1/avatars/{}_img_001.png", fx.cid),
        format!("/api/v1/tasks/{}/artifacts/{}", fx.task, fx.artifact),
        "/api/img/guard.png".to_string(),
    ] {
        send(s.get(&path)).await.expect(200);
    }

    // With a session (cookie, then bearer): no admin route answers 401.
    for bearer in [false, true] {
        for &(m, t, access) in ROUTES.iter().filter(|r| r.2 == Admin) {
            let req = route_request(&s, &fx, m, t);
            let req = if bearer {
                with_bearer(req, &token)
            } else {
                with_cookie(req, &token)
            };
            let r = send(req).await;
            assert_ne!(
                r.status,
                401,
                "{m} {t} ({access:?}, bearer {bearer}) refused a valid session: {}",
                r.shown()
            );
            assert_ne!(r.status, 403, "{m} {t}: {}", r.shown());
        }
    }
    // The session is still valid after all that.
    assert!(authenticated(&s, |q| with_cookie(q, &token)).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_mode_opens_the_admin_routes() {
    let s = Server::start().await;
    let health = send(s.get("/api/v1/health")).await.expect(200).json();
    assert_eq!(health["admin_auth"], "setup");
    let fx = fixture(&s, None, None, None).await;
    for &(m, t, access) in ROUTES {
        let r = send(route_request(&s, &fx, m, t)).await;
        if t == "/api/auth" && m == "POST" {
            r.expect_error(500);
            continue;
        }
        assert_ne!(
            r.status,
            401,
            "{m} {t} ({access:?}) is closed in setup mode: {}",
            r.shown()
        );
        assert_ne!(r.status, 403, "{m} {t}: {}", r.shown());
    }
    assert!(!authenticated(&s, |q| q).await);
    let with_password = Server::start_with(behind_proxy).await;
    let health = send(with_password.get("/api/v1/health"))
        .await
        .expect(200)
        .json();
    assert_eq!(health["admin_auth"], "password");
}

/// The same table from the LAN (`access.loopback_is_trusted = false`): every row refuses a caller
/// without credentials except the public ones; internal rows take the internal token; the
/// conversation rows take a client key, and those naming a session only its owner's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_the_lan_every_row_needs_its_caller() {
    const INTERNAL: &str = "routes-internal-token";
    let s = Server::start_with(|c| {
        c.access.admin_password = Some(PW.into());
        c.access.loopback_is_trusted = false;
        c.access.internal_token = Some(INTERNAL.into());
    })
    .await;
    let token = login(&s).await;
    let key = |name: &str| {
        let req = with_bearer(s.post("/api/v1/client-keys"), &token).json(&json!({ "name": name }));
        async move {
            send(req).await.expect(201).json()["key"]
                .as_str()
                .unwrap()
                .to_string()
        }
    };
    let owner = key("owner").await;
    let other = key("other").await;
    let fx = fixture(&s, Some(&token), Some(&owner), Some(INTERNAL)).await;
    let names_session =
        |t: &str| t.starts_with("/api/v1/sessions/{id}") || t.starts_with("/ws/chat/");
    for &(m, t, access) in ROUTES {
        let r = send(route_request(&s, &fx, m, t)).await;
        match access {
            Public => {
                assert_ne!(r.status, 401, "{m} {t}: {}", r.shown());
                assert_ne!(r.status, 403, "{m} {t}: {}", r.shown());
                continue;
            }
            Admin | Internal | Conversation => {
                r.expect_error(401);
            }
        }
        let allowed = match access {
            Internal => with_bearer(route_request(&s, &fx, m, t), INTERNAL),
            Conversation => {
                let r = send(with_bearer(route_request(&s, &fx, m, t), &other)).await;
                if names_session(t) {
                    r.expect_error(403);
                } else {
                    assert!(![401, 403].contains(&r.status), "{m} {t}: {}", r.shown());
                }
                with_bearer(route_request(&s, &fx, m, t), &owner)
            }
            Admin => {
                // A client key is no admin session.
                send(with_bearer(route_request(&s, &fx, m, t), &owner))
                    .await
                    .expect_error(401);
                continue;
            }
            Public => unreachable!(),
        };
        let r = send(allowed).await;
        assert!(
            ![401, 403].contains(&r.status),
            "{m} {t} ({access:?}) refused its caller: {}",
            r.shown()
        );
    }
}

// =============================================================================================
// 5. No secret in any log line

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_appears_in_any_log_line() {
    const PASSWORD: &str = "Pw-LeakProbe-Quokka-77413";
    const WRONG: &str = "Pw-LeakProbe-Wombat-00291";
    const API_KEY: &str = "sk-LeakProbe-Llm-0193847561-zz";
    const ACCESS_TOKEN: &str = "db-LeakProbe-Access-5548203-qq";
    const INTERNAL: &str = "it-LeakProbe-Internal-99317-tok";

    let docent = Process::new()
        .config(&format!("access.internal_token = \"{INTERNAL}\"\n"))
        .env("DOCENT_LOG", "trace")
        .env("ADMIN_PASSWORD", PASSWORD)
        .start()
        .await;
    let base = docent.base();
    let http = client();
    let url = |p: &str| format!("{base}{p}");
    let login = |body: String| {
        send(
            http.post(url("/api/auth"))
                .header("Edge-Connecting-IP", "192.0.2.99")
                .header(CONTENT_TYPE, "application/json")
                .body(body),
        )
    };

    // Failed logins: wrong passwords, and an unparsable body holding the real one.
    login(json!({ "password": WRONG }).to_string())
        .await
        .expect_error(401);
    login(format!("{{\"password\": \"{PASSWORD}\""))
        .await
        .expect_error(400);
    login(json!({ "password": format!("{PASSWORD}x") }).to_string())
        .await
        .expect_error(401);
    // Successful logins.
    let cookie_token = token_of(
        &login(json!({ "password": PASSWORD }).to_string())
            .await
            .expect(200),
    );
    let bearer_token = token_of(
        &login(json!({ "password": PASSWORD }).to_string())
            .await
            .expect(200),
    );
    // Admin calls with the cookie and with the bearer token.
    let cookie = |req: reqwest::RequestBuilder| with_cookie(req, &cookie_token);
    let bearer =
        |req: reqwest::RequestBuilder| req.header(AUTHORIZATION, format!("Bearer {bearer_token}"));
    send(cookie(http.put(url("/api/data"))).json(&site_doc()))
        .await
        .expect(200);
    send(
        bearer(http.put(url("/api/img/leak.png")))
            .header(CONTENT_TYPE, "image/png")
            .body(PNG.to_vec()),
    )
    .await
    .expect(200);
    send(http.get(url("/api/img/leak.png"))).await.expect(200);
    let patch = json!({ "llm": { "api_key": API_KEY }, "doubao": { "app_id": "app-1", "access_token": ACCESS_TOKEN } });
    let saved = send(cookie(http.put(url("/api/v1/settings"))).json(&patch))
        .await
        .expect(200);
    let shown = send(bearer(http.get(url("/api/v1/settings"))))
        .await
        .expect(200);
    assert_eq!(shown.json()["llm"]["api_key_set"], true);
    assert_eq!(shown.json()["doubao"]["access_token_set"], true);
    // A refused settings update that carries a secret.
    send(
        cookie(http.put(url("/api/v1/settings")))
            .json(&json!({ "llm": { "api_key": API_KEY, "nope": 1 } })),
    )
    .await
    .expect_error(400);
    send(
        cookie(http.put(url("/api/v1/settings")))
            .header(CONTENT_TYPE, "application/json")
            .body(format!("{{\"llm\": {{\"api_key\": \"{API_KEY}\"")),
    )
    .await
    .expect_error(400);
    let characters = send(http.get(url("/api/v1/characters")))
        .await
        .expect(200)
        .json();
    let cid = characters[0]["id"].as_str().unwrap().to_string();
    send(bearer(http.get(url(&format!(
        "/api/v1/characters/{cid}/conversations/messages"
    )))))
    .await
    .expect(200);
    // An internal call with the internal token, and admin calls with tokens that are not sessions.
    send(
        http.post(url(&format!(
            "/api/v1/internal/characters/{cid}/knowledge/search"
        )))
        .header(AUTHORIZATION, format!("Bearer {INTERNAL}"))
        .json(&json!({ "query": "harbour" })),
    )
    .await
    .expect(200);
    send(
        http.get(url("/api/v1/settings"))
            .header(AUTHORIZATION, format!("Bearer {INTERNAL}")),
    )
    .await
    .expect_error(401);
    send(
        http.get(url("/api/v1/settings"))
            .header(COOKIE, format!("{COOKIE_NAME}={PASSWORD}")),
    )
    .await
    .expect_error(401);
    // A client key, created and used (REST and WebSocket query), is never logged either.
    let client_key =
        send(bearer(http.post(url("/api/v1/client-keys"))).json(&json!({ "name": "log probe" })))
            .await
            .expect(201)
            .json()["key"]
            .as_str()
            .unwrap()
            .to_string();
    let session = send(
        http.post(url("/api/v1/sessions"))
            .header(AUTHORIZATION, format!("Bearer {client_key}"))
            .json(&json!({})),
    )
    .await
    .expect(201)
    .json()["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let ws = format!("ws://{}/ws/chat/{session}?key={client_key}", docent.addr);
    drop(tokio_tungstenite::connect_async(ws).await.unwrap());
    // Logout.
    send(cookie(http.delete(url("/api/auth"))))
        .await
        .expect(200);
    send(bearer(http.delete(url("/api/auth"))))
        .await
        .expect(200);
    send(cookie(http.get(url("/api/v1/settings"))))
        .await
        .expect_error(401);

    let addr = docent.addr;
    let log = docent.kill_for_output().await;
    assert!(
        log.contains(&format!("docent listening on http://{addr}")),
        "the capture works:\n{log}"
    );
    assert!(
        log.contains("serving"),
        "the server's own log lines are captured:\n{log}"
    );

    // Each secret, and a middle part of it (a partial echo is a leak too).
    let secrets = [
        ("administrator password", PASSWORD.to_string()),
        ("a submitted wrong password", WRONG.to_string()),
        ("cookie session token", cookie_token.clone()),
        ("bearer session token", bearer_token.clone()),
        ("llm.api_key", API_KEY.to_string()),
        ("doubao.access_token", ACCESS_TOKEN.to_string()),
        ("internal token", INTERNAL.to_string()),
        ("client key", client_key.clone()),
    ];
    for (what, secret) in &secrets {
        let middle = &secret[5..secret.len() - 5];
        for line in log.lines() {
            assert!(
                !line.contains(middle),
                "the {what} appears in the log: {line}"
            );
        }
    }
    // The settings API never returns the secrets either.
    for (reply, name) in [
        (&saved, "PUT /api/v1/settings"),
        (&shown, "GET /api/v1/settings"),
    ] {
        let text = reply.text();
        for secret in [API_KEY, ACCESS_TOKEN] {
            assert!(
                !text.contains(&secret[3..secret.len() - 4]),
                "{name} shows {secret}: {text}"
            );
        }
    }
}
