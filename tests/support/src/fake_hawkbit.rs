//! A fake Eclipse hawkBit server for the fleet tests: the Direct Device Integration API over a
//! real socket, as hawkBit documents it — `TargetToken` authentication, the controller's root
//! resource with `config.polling.sleep`, `_links` and an ETag, `deploymentBase`, its feedback,
//! `cancelAction` and its feedback, `configData`, `installedBase`, and artifact downloads with
//! `Range`. It records every request; the test scripts what it offers and may stop it (the
//! server goes away) and start it again on the same port. Used by the fleet tests (tests/it) and
//! by the appliance test, where the simulated board reaches it through QEMU's user network.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde_json::{Value, json};
use sha2::Digest as _;

pub const TENANT: &str = "DEFAULT";
pub const CONTROLLER: &str = "kiosk-1";

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub at: Instant,
    pub method: String,
    pub path: String,
    pub authorization: Option<String>,
    pub if_none_match: Option<String>,
    pub range: Option<String>,
    pub status: u16,
}

#[derive(Default)]
pub struct Script {
    /// `HH:MM:SS`.
    pub sleep: String,
    /// Bumped whenever the root resource changes (its ETag).
    pub generation: u64,
    pub config_data_requested: bool,
    /// The open deployment: its action id and `deployment` object.
    pub deployment: Option<(String, Value)>,
    /// A cancellation: its id and the action it stops.
    pub cancel: Option<(String, String)>,
    pub artifacts: HashMap<String, Vec<u8>>,
    /// The next download sends this many bytes, then stalls until the server is stopped.
    pub stall_after: Option<usize>,
    /// Bytes sent by downloads that were cut.
    pub cut_at: Option<usize>,
    /// The root resource's answer is sent one byte a second.
    pub drip_root: bool,
    /// Artifact downloads are sent one byte a second.
    pub drip_artifact: bool,
    /// Answers sent one byte a second that the client abandoned (their body was dropped
    /// before its end), with when.
    pub drips_dropped: Vec<Instant>,
    pub seen: Vec<Seen>,
    /// Action, body, and when it arrived.
    pub feedback: Vec<(String, Value, Instant)>,
    pub cancel_feedback: Vec<(String, Value)>,
    pub config_data: Vec<Value>,
    pub installed_base: Vec<Value>,
}

pub struct FakeHawkbit {
    pub addr: SocketAddr,
    pub token: String,
    pub script: Arc<Mutex<Script>>,
    task: Option<tokio::task::JoinHandle<()>>,
    stop: Arc<tokio::sync::Notify>,
}

#[derive(Clone)]
struct Shared {
    token: String,
    script: Arc<Mutex<Script>>,
    stop: Arc<tokio::sync::Notify>,
}

impl FakeHawkbit {
    pub async fn start(token: &str, sleep: &str) -> FakeHawkbit {
        let script = Arc::new(Mutex::new(Script {
            sleep: sleep.into(),
            ..Script::default()
        }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut fake = FakeHawkbit {
            addr: listener.local_addr().unwrap(),
            token: token.into(),
            script,
            task: None,
            stop: Arc::new(tokio::sync::Notify::new()),
        };
        fake.serve(listener);
        fake
    }

    fn serve(&mut self, listener: tokio::net::TcpListener) {
        let shared = Shared {
            token: self.token.clone(),
            script: self.script.clone(),
            stop: self.stop.clone(),
        };
        let base = format!("/{TENANT}/controller/v1/{{id}}");
        let app = Router::new()
            .route(&base, get(root))
            .route(
                &format!("{base}/deploymentBase/{{action}}"),
                get(deployment),
            )
            .route(
                &format!("{base}/deploymentBase/{{action}}/feedback"),
                post(feedback),
            )
            .route(&format!("{base}/cancelAction/{{action}}"), get(cancel))
            .route(
                &format!("{base}/cancelAction/{{action}}/feedback"),
                post(cancel_feedback),
            )
            .route(&format!("{base}/configData"), put(config_data))
            .route(&format!("{base}/installedBase"), put(installed_base))
            .route(
                &format!("{base}/softwaremodules/{{module}}/artifacts/{{file}}"),
                get(artifact),
            )
            .with_state(shared);
        self.task = Some(tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        }));
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The server goes away: the listener closes and a stalled download is cut.
    pub async fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
        self.stop.notify_waiters();
    }

    /// The server comes back on the same port.
    pub async fn restart(&mut self) {
        let listener = tokio::net::TcpListener::bind(self.addr).await.unwrap();
        self.serve(listener);
    }

    pub fn with<T>(&self, f: impl FnOnce(&mut Script) -> T) -> T {
        f(&mut self.script.lock().unwrap())
    }

    /// Offers `bytes` as the bundle `docent-VERSION.raucb` of an `os` module, with nothing else.
    pub fn offer_os(&self, id: &str, version: &str, bytes: Vec<u8>) {
        let file = format!("docent-{version}.raucb");
        self.offer(id, "os", version, &file, bytes, serde_json::json!({}));
    }

    /// Offers a deployment of one software module of type `part` with one artifact.
    pub fn offer(
        &self,
        id: &str,
        part: &str,
        version: &str,
        file: &str,
        bytes: Vec<u8>,
        extra: Value,
    ) {
        let sha = hex(&sha2::Sha256::digest(&bytes));
        let href = format!(
            "http://hawkbit.invalid:8080/{TENANT}/controller/v1/{CONTROLLER}/softwaremodules/7/artifacts/{file}"
        );
        let mut deployment = json!({
            "download": "forced",
            "update": "forced",
            "chunks": [{
                "part": part,
                "version": version,
                "name": format!("{part} {version}"),
                "artifacts": [{
                    "filename": file,
                    "hashes": {"sha1": "0", "md5": "0", "sha256": sha},
                    "size": bytes.len(),
                    "_links": {"download": {"href": href.clone()}, "download-http": {"href": href}},
                }],
            }],
        });
        if let (Some(d), Value::Object(extra)) = (deployment.as_object_mut(), extra) {
            d.extend(extra);
        }
        self.with(|s| {
            s.artifacts.insert(file.into(), bytes);
            s.deployment = Some((id.into(), deployment));
            s.generation += 1;
        });
    }

    /// Declares another size for the offered artifact than its bytes have.
    pub fn declare_size(&self, size: u64) {
        self.with(|s| {
            let (_, d) = s.deployment.as_mut().unwrap();
            d["chunks"][0]["artifacts"][0]["size"] = json!(size);
            s.generation += 1;
        });
    }

    /// Announces another SHA-256 for the offered artifact than its bytes have.
    pub fn announce_wrong_sha256(&self) {
        self.with(|s| {
            let (_, d) = s.deployment.as_mut().unwrap();
            d["chunks"][0]["artifacts"][0]["hashes"]["sha256"] = json!("00".repeat(32));
            s.generation += 1;
        });
    }

    /// The feedback statuses of action `id` as `execution/finished`, in order.
    pub fn feedback_of(&self, id: &str) -> Vec<(String, String)> {
        self.feedback_timed(id)
            .into_iter()
            .map(|(_, status, details)| (status, details))
            .collect()
    }

    /// The feedback of action `id`, in order: when it arrived, `execution/finished`, details.
    pub fn feedback_timed(&self, id: &str) -> Vec<(Instant, String, String)> {
        self.with(|s| {
            s.feedback
                .iter()
                .filter(|(a, _, _)| a == id)
                .map(|(_, f, at)| {
                    (
                        *at,
                        format!(
                            "{}/{}",
                            f["status"]["execution"].as_str().unwrap_or(""),
                            f["status"]["result"]["finished"].as_str().unwrap_or("")
                        ),
                        f["status"]["details"].to_string(),
                    )
                })
                .collect()
        })
    }

    pub fn closed(&self, id: &str) -> Option<(String, String)> {
        self.feedback_of(id)
            .into_iter()
            .find(|(status, _)| status.starts_with("closed/"))
    }
}

/// Bytes through a TCP forwarder in front of the fake server, both ways, counted as they pass.
pub async fn counting_proxy(to: SocketAddr) -> (SocketAddr, Arc<std::sync::atomic::AtomicU64>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let count = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let total = count.clone();
    tokio::spawn(async move {
        while let Ok((inbound, _)) = listener.accept().await {
            let outbound = tokio::net::TcpStream::connect(to).await.unwrap();
            let (ir, iw) = inbound.into_split();
            let (or, ow) = outbound.into_split();
            let pipe = |mut from: tokio::net::tcp::OwnedReadHalf,
                        mut to: tokio::net::tcp::OwnedWriteHalf| {
                let total = total.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 64 << 10];
                    while let Ok(n) = from.read(&mut buf).await {
                        if n == 0 || to.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                        total.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
                    }
                    let _ = to.shutdown().await;
                });
            };
            pipe(ir, ow);
            pipe(or, iw);
        }
    });
    (addr, count)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Records the request and checks its token; `Err` is the 401 to send.
fn admit(
    s: &Shared,
    method: &str,
    path: String,
    headers: &HeaderMap,
    id: &str,
) -> Result<(), StatusCode> {
    let text = |name: header::HeaderName| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let authorization = text(header::AUTHORIZATION);
    let good =
        authorization.as_deref() == Some(&format!("TargetToken {}", s.token)) && id == CONTROLLER;
    s.script.lock().unwrap().seen.push(Seen {
        at: Instant::now(),
        method: method.into(),
        path,
        authorization,
        if_none_match: text(header::IF_NONE_MATCH),
        range: text(header::RANGE),
        status: if good { 200 } else { 401 },
    });
    if good {
        Ok(())
    } else {
        Err(StatusCode::UNAUTHORIZED)
    }
}

async fn root(State(s): State<Shared>, Path(id): Path<String>, headers: HeaderMap) -> Response {
    if let Err(status) = admit(
        &s,
        "GET",
        format!("/{TENANT}/controller/v1/{id}"),
        &headers,
        &id,
    ) {
        return status.into_response();
    }
    let script = s.script.lock().unwrap();
    let etag = format!("\"{}\"", script.generation);
    if headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        == Some(&etag)
    {
        return (StatusCode::NOT_MODIFIED, [(header::ETAG, etag)]).into_response();
    }
    let host = "https://hawkbit.invalid";
    let base = format!("{host}/{TENANT}/controller/v1/{id}");
    let mut links = serde_json::Map::new();
    if let Some((action, _)) = &script.cancel {
        links.insert(
            "cancelAction".into(),
            json!({"href": format!("{base}/cancelAction/{action}")}),
        );
    } else if let Some((action, _)) = &script.deployment {
        links.insert(
            "deploymentBase".into(),
            json!({"href": format!("{base}/deploymentBase/{action}?c=-2127183556")}),
        );
    }
    if script.config_data_requested {
        links.insert(
            "configData".into(),
            json!({"href": format!("{base}/configData")}),
        );
    }
    let body = json!({"config": {"polling": {"sleep": script.sleep}}, "_links": links});
    let headers = [
        (header::ETAG, etag),
        (header::CONTENT_TYPE, "application/hal+json".into()),
    ];
    if script.drip_root {
        let bytes = Bytes::from(serde_json::to_vec(&body).unwrap());
        return (headers, drip(bytes, s.script.clone())).into_response();
    }
    (headers, Json(body)).into_response()
}

async fn deployment(
    State(s): State<Shared>,
    Path((id, action)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let path = format!("/{TENANT}/controller/v1/{id}/deploymentBase/{action}");
    if let Err(status) = admit(&s, "GET", path, &headers, &id) {
        return status.into_response();
    }
    match &s.script.lock().unwrap().deployment {
        Some((a, d)) if *a == action => Json(json!({
            "id": a,
            "deployment": d,
            "actionHistory": {"status": "RUNNING", "messages": []},
        }))
        .into_response(),
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn feedback(
    State(s): State<Shared>,
    Path((id, action)): Path<(String, String)>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let path = format!("/{TENANT}/controller/v1/{id}/deploymentBase/{action}/feedback");
    if let Err(status) = admit(&s, "POST", path, &headers, &id) {
        return status.into_response();
    }
    let mut script = s.script.lock().unwrap();
    let execution = body["status"]["execution"]
        .as_str()
        .unwrap_or("")
        .to_string();
    script.feedback.push((action.clone(), body, Instant::now()));
    // A closed action (or a download-only one, downloaded) is no longer offered.
    if execution == "closed" || execution == "downloaded" {
        if script
            .deployment
            .as_ref()
            .is_some_and(|(a, _)| *a == action)
        {
            script.deployment = None;
        }
        script.generation += 1;
    }
    StatusCode::OK.into_response()
}

async fn cancel(
    State(s): State<Shared>,
    Path((id, action)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let path = format!("/{TENANT}/controller/v1/{id}/cancelAction/{action}");
    if let Err(status) = admit(&s, "GET", path, &headers, &id) {
        return status.into_response();
    }
    match &s.script.lock().unwrap().cancel {
        Some((c, stop)) if *c == action => {
            Json(json!({"id": c, "cancelAction": {"stopId": stop}})).into_response()
        }
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn cancel_feedback(
    State(s): State<Shared>,
    Path((id, action)): Path<(String, String)>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let path = format!("/{TENANT}/controller/v1/{id}/cancelAction/{action}/feedback");
    if let Err(status) = admit(&s, "POST", path, &headers, &id) {
        return status.into_response();
    }
    let mut script = s.script.lock().unwrap();
    script.cancel_feedback.push((action, body));
    script.cancel = None;
    script.deployment = None;
    script.generation += 1;
    StatusCode::OK.into_response()
}

async fn config_data(
    State(s): State<Shared>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let path = format!("/{TENANT}/controller/v1/{id}/configData");
    if let Err(status) = admit(&s, "PUT", path, &headers, &id) {
        return status.into_response();
    }
    let mut script = s.script.lock().unwrap();
    script.config_data.push(body);
    script.config_data_requested = false;
    script.generation += 1;
    StatusCode::OK.into_response()
}

async fn installed_base(
    State(s): State<Shared>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let path = format!("/{TENANT}/controller/v1/{id}/installedBase");
    if let Err(status) = admit(&s, "PUT", path, &headers, &id) {
        return status.into_response();
    }
    s.script.lock().unwrap().installed_base.push(body);
    StatusCode::OK.into_response()
}

async fn artifact(
    State(s): State<Shared>,
    Path((id, module, file)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Response {
    let path = format!("/{TENANT}/controller/v1/{id}/softwaremodules/{module}/artifacts/{file}");
    if let Err(status) = admit(&s, "GET", path, &headers, &id) {
        return status.into_response();
    }
    let (bytes, stall, dripping) = {
        let mut script = s.script.lock().unwrap();
        let Some(bytes) = script.artifacts.get(&file).cloned() else {
            return StatusCode::NOT_FOUND.into_response();
        };
        (bytes, script.stall_after.take(), script.drip_artifact)
    };
    let len = bytes.len();
    let start = headers
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.strip_suffix('-'))
        .and_then(|n| n.parse::<usize>().ok());
    let (status, from) = match start {
        Some(n) if n < len => (StatusCode::PARTIAL_CONTENT, n),
        Some(_) => return StatusCode::RANGE_NOT_SATISFIABLE.into_response(),
        None => (StatusCode::OK, 0),
    };
    let body = Bytes::from(bytes).slice(from..);
    let mut headers = vec![
        (header::CONTENT_TYPE, "application/octet-stream".to_string()),
        (header::ACCEPT_RANGES, "bytes".to_string()),
    ];
    if status == StatusCode::PARTIAL_CONTENT {
        headers.push((
            header::CONTENT_RANGE,
            format!("bytes {from}-{}/{len}", len - 1),
        ));
    }
    let body = match stall {
        None if dripping => drip(body, s.script.clone()),
        None => Body::from(body),
        Some(n) => {
            let first = body.slice(..n.min(body.len()));
            let stop = s.stop.clone();
            let script = s.script.clone();
            let sent = first.len();
            let stream = async_stream(first, stop, move || {
                script.lock().unwrap().cut_at = Some(sent);
            });
            Body::from_stream(stream)
        }
    };
    let mut res = (status, body).into_response();
    for (k, v) in headers {
        res.headers_mut().insert(k, v.parse().unwrap());
    }
    res
}

/// A body sent one byte a second; if the client goes away before its end, the time is recorded
/// in `drips_dropped` (the body is dropped unfinished).
fn drip(bytes: Bytes, script: Arc<Mutex<Script>>) -> Body {
    struct Dropped(Option<Arc<Mutex<Script>>>);
    impl Drop for Dropped {
        fn drop(&mut self) {
            if let Some(script) = self.0.take() {
                script.lock().unwrap().drips_dropped.push(Instant::now());
            }
        }
    }
    let stream = futures_util::stream::unfold(
        (bytes, Dropped(Some(script))),
        |(mut rest, mut guard)| async move {
            if rest.is_empty() {
                guard.0.take(); // sent to its end
                return None;
            }
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            let byte = rest.split_to(1);
            Some((Ok::<_, std::io::Error>(byte), (rest, guard)))
        },
    );
    Body::from_stream(stream)
}

/// A body that sends `first`, then waits until the server stops and ends with an error (the
/// connection is cut mid-download).
fn async_stream(
    first: Bytes,
    stop: Arc<tokio::sync::Notify>,
    on_cut: impl FnOnce() + Send + 'static,
) -> impl futures_util::Stream<Item = std::io::Result<Bytes>> + Send {
    futures_util::stream::unfold(
        (Some(first), Some((stop, on_cut))),
        |(first, rest)| async move {
            if let Some(first) = first {
                return Some((Ok(first), (None, rest)));
            }
            let (stop, on_cut) = rest?;
            stop.notified().await;
            on_cut();
            Some((Err(std::io::Error::other("cut")), (None, None)))
        },
    )
}
