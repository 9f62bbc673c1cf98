//! hawkBit's Direct Device Integration API as the kiosk speaks it: the JSON it reads and writes
//! and the requests, all authenticated with `Authorization: TargetToken <token>`.
//!
//! Links the server hands out (`_links.*.href`, artifact downloads) are followed by their path
//! and query only, on the configured server: the token never goes to another host, and a server
//! that names itself wrongly behind a proxy still works.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use super::FleetSettings;
use crate::engine::error::{Error, Result};

#[derive(Debug, Clone, Deserialize)]
pub struct Link {
    pub href: String,
}

/// The controller's root resource.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ControllerBase {
    #[serde(default)]
    pub config: Option<ControllerConfig>,
    #[serde(rename = "_links", default)]
    pub links: RootLinks,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ControllerConfig {
    #[serde(default)]
    pub polling: Option<Polling>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Polling {
    /// `HH:MM:SS`.
    #[serde(default)]
    pub sleep: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct RootLinks {
    #[serde(rename = "deploymentBase")]
    pub deployment_base: Option<Link>,
    #[serde(rename = "cancelAction")]
    pub cancel_action: Option<Link>,
    #[serde(rename = "configData")]
    pub config_data: Option<Link>,
    #[serde(rename = "installedBase")]
    pub installed_base: Option<Link>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct DeploymentBase {
    pub id: String,
    pub deployment: Deployment,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Deployment {
    #[serde(default)]
    pub download: Option<Handling>,
    #[serde(default)]
    pub update: Option<Handling>,
    #[serde(default)]
    pub chunks: Vec<Chunk>,
    #[serde(rename = "maintenanceWindow", default)]
    pub maintenance_window: Option<Window>,
}

/// How the server wants the download or the update handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Handling {
    /// Not now.
    Skip,
    /// When the kiosk sees fit (not in the middle of a visit).
    Attempt,
    /// At once.
    Forced,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Window {
    Available,
    Unavailable,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Chunk {
    /// The software module type's key: `os` or `docent-content`.
    pub part: String,
    pub version: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub artifacts: Vec<Artifact>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Artifact {
    pub filename: String,
    #[serde(default)]
    pub hashes: Hashes,
    #[serde(default)]
    pub size: Option<u64>,
    #[serde(rename = "_links", default)]
    pub links: ArtifactLinks,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Hashes {
    pub sha256: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ArtifactLinks {
    pub download: Option<Link>,
    #[serde(rename = "download-http")]
    pub download_http: Option<Link>,
}

impl Artifact {
    pub fn href(&self) -> Option<&str> {
        self.links
            .download
            .as_ref()
            .or(self.links.download_http.as_ref())
            .map(|l| l.href.as_str())
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct CancelAction {
    pub id: String,
    #[serde(rename = "cancelAction")]
    pub cancel_action: StopId,
}

#[derive(Debug, Clone, Deserialize)]
pub struct StopId {
    #[serde(rename = "stopId")]
    pub stop_id: String,
}

/// `status.execution` of a feedback.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Execution {
    Closed,
    Proceeding,
    Canceled,
    Rejected,
    Resumed,
    Downloaded,
    Download,
}

/// `status.result.finished` of a feedback.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Finished {
    Success,
    Failure,
    None,
}

#[derive(Debug, Clone, Serialize)]
pub struct Feedback {
    pub status: FeedbackStatus,
}

#[derive(Debug, Clone, Serialize)]
pub struct FeedbackStatus {
    pub execution: Execution,
    pub result: FeedbackResult,
    pub details: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FeedbackResult {
    pub finished: Finished,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<FeedbackProgress>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FeedbackProgress {
    pub cnt: u32,
    pub of: u32,
}

impl Feedback {
    pub fn new(execution: Execution, finished: Finished, details: impl Into<String>) -> Feedback {
        Feedback {
            status: FeedbackStatus {
                execution,
                result: FeedbackResult {
                    finished,
                    progress: None,
                },
                details: vec![details.into()],
            },
        }
    }

    pub fn with_progress(mut self, percent: u8) -> Feedback {
        self.status.result.progress = Some(FeedbackProgress {
            cnt: percent.into(),
            of: 100,
        });
        self
    }

    /// `closed/success`, `proceeding/none` (for the console).
    pub fn summary(&self) -> String {
        format!(
            "{}/{}",
            wire(&self.status.execution),
            wire(&self.status.result.finished)
        )
    }
}

/// The wire name of an enum value.
fn wire(v: &impl Serialize) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// `PUT configData`.
#[derive(Debug, Clone, Serialize)]
pub struct ConfigData {
    pub mode: &'static str,
    pub data: BTreeMap<String, String>,
}

/// `PUT installedBase`: what runs, installed by other means than this server.
#[derive(Debug, Clone, Serialize)]
pub struct AssignedVersion {
    pub name: String,
    pub version: String,
}

/// `HH:MM:SS` as seconds.
pub fn parse_sleep(s: &str) -> Option<u64> {
    let mut parts = s.split(':').map(|p| p.parse::<u64>().ok());
    let (h, m, sec) = (parts.next()??, parts.next()??, parts.next()??);
    (parts.next().is_none() && m < 60 && sec < 60).then_some(h * 3600 + m * 60 + sec)
}

/// What a conditional poll found.
pub enum Polled {
    /// 304: the same as the last time.
    Unchanged,
    Changed(ControllerBase, Option<String>),
}

/// Largest JSON document read from the server.
const JSON_BYTES: usize = 1 << 20;

/// The slowest download the kiosk waits for, in bytes a second: an artifact's download is
/// bounded as a whole by `request_timeout_secs` plus its announced size at this rate (400 MiB:
/// under two hours). A download cut at its bound is resumed at the next poll.
pub const MIN_DOWNLOAD_RATE: u64 = 64 << 10;

/// The bound of a whole download of `bytes` announced bytes.
pub fn download_bound(timeout: Duration, bytes: u64) -> Duration {
    timeout + Duration::from_secs(bytes.div_ceil(MIN_DOWNLOAD_RATE))
}

/// A connection to one server as one target.
pub struct Ddi {
    http: reqwest::Client,
    /// `https://host:port` plus any path prefix, without a trailing slash.
    base: String,
    /// `/{tenant}/controller/v1/{controllerId}`.
    root: String,
    token: String,
    timeout: Duration,
    /// Ends every request in flight when cancelled (pause, other settings, shutdown); the
    /// polling loop gives one to each cycle.
    interrupt: Mutex<CancellationToken>,
}

impl Ddi {
    pub fn new(settings: &FleetSettings, controller_id: &str, timeout: Duration) -> Result<Ddi> {
        settings.check_transport()?;
        // As `Engine::open` does; the first installation wins.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(timeout)
            .read_timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| Error::Internal(format!("HTTP client: {e}")))?;
        Ok(Ddi {
            http,
            base: settings.server_url.trim_end_matches('/').to_string(),
            root: format!("/{}/controller/v1/{}", settings.tenant, controller_id),
            token: settings.target_token.clone(),
            timeout,
            interrupt: Mutex::new(CancellationToken::new()),
        })
    }

    /// Requests from now on end when `token` is cancelled.
    pub fn set_interrupt(&self, token: CancellationToken) {
        *self.interrupt.lock().expect("fleet interrupt") = token;
    }

    /// Runs one whole request, its answer read, within `within`, or until interrupted.
    async fn bounded<T>(
        &self,
        within: Duration,
        request: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        let interrupt = self.interrupt.lock().expect("fleet interrupt").clone();
        tokio::select! {
            done = tokio::time::timeout(within, request) => done.map_err(|_| {
                Error::Timeout(format!(
                    "the fleet server did not answer in time ({} s)",
                    within.as_secs()
                ))
            })?,
            _ = interrupt.cancelled() => Err(Error::Unavailable(
                "the request was interrupted (paused, new settings or stopping)".into(),
            )),
        }
    }

    /// A URL on the configured server: `path` is ours, or a link's path and query.
    fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// The path and query of a link the server gave, to be requested on the configured server.
    pub fn link(&self, href: &str) -> Result<String> {
        let uri: axum::http::Uri = href
            .parse()
            .map_err(|_| Error::ProviderFailed("the server gave a malformed link".into()))?;
        let pq = uri
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_default();
        if !pq.starts_with('/') {
            return Err(Error::ProviderFailed(
                "the server gave a link without a path".into(),
            ));
        }
        // A server behind a path prefix gives links that include it; ours has it already.
        let prefix = self
            .base
            .parse::<axum::http::Uri>()
            .ok()
            .map(|u| u.path().trim_end_matches('/').to_string())
            .unwrap_or_default();
        Ok(match pq.strip_prefix(&prefix) {
            Some(rest) if !prefix.is_empty() && rest.starts_with('/') => rest.to_string(),
            _ => pq,
        })
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, self.url(path))
            .header(
                reqwest::header::AUTHORIZATION,
                format!("TargetToken {}", self.token),
            )
            .header(
                reqwest::header::ACCEPT,
                "application/hal+json, application/json",
            )
    }

    /// Sends a request; the caller bounds it (`bounded`).
    async fn send(&self, req: reqwest::RequestBuilder) -> Result<reqwest::Response> {
        let res = req.send().await.map_err(|e| {
            Error::Unavailable(format!("the fleet server is unreachable: {}", plain(&e)))
        })?;
        let status = res.status();
        if status.is_success() || status == reqwest::StatusCode::NOT_MODIFIED {
            return Ok(res);
        }
        Err(match status.as_u16() {
            401 | 403 => Error::Forbidden(format!(
                "the fleet server refused this kiosk's token ({status})"
            )),
            _ => Error::ProviderFailed(format!("the fleet server answered {status}")),
        })
    }

    async fn json<T: for<'de> Deserialize<'de>>(&self, res: reqwest::Response) -> Result<T> {
        let body = read_bounded(res, JSON_BYTES).await?;
        serde_json::from_slice(&body).map_err(|e| {
            Error::ProviderFailed(format!("the fleet server's answer is unreadable: {e}"))
        })
    }

    /// Polls the root resource, conditionally on the ETag of the last answer.
    pub async fn poll(&self, etag: Option<&str>) -> Result<Polled> {
        let mut req = self.request(reqwest::Method::GET, &self.root);
        if let Some(etag) = etag {
            req = req.header(reqwest::header::IF_NONE_MATCH, etag);
        }
        self.bounded(self.timeout, async {
            let res = self.send(req).await?;
            if res.status() == reqwest::StatusCode::NOT_MODIFIED {
                return Ok(Polled::Unchanged);
            }
            let etag = res
                .headers()
                .get(reqwest::header::ETAG)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            Ok(Polled::Changed(self.json(res).await?, etag))
        })
        .await
    }

    /// A GET of a link the server gave, its JSON answer read, within the request bound.
    async fn get_json<T: for<'de> Deserialize<'de>>(&self, href: &str) -> Result<T> {
        let req = self.request(reqwest::Method::GET, &self.link(href)?);
        self.bounded(self.timeout, async {
            self.json(self.send(req).await?).await
        })
        .await
    }

    /// A request whose answer is only its status, within the request bound.
    async fn call(&self, req: reqwest::RequestBuilder) -> Result<()> {
        self.bounded(self.timeout, async { self.send(req).await.map(drop) })
            .await
    }

    pub async fn deployment(&self, href: &str) -> Result<DeploymentBase> {
        self.get_json(href).await
    }

    pub async fn cancel_action(&self, href: &str) -> Result<CancelAction> {
        self.get_json(href).await
    }

    /// `POST .../deploymentBase/{id}/feedback`.
    pub async fn deployment_feedback(&self, id: &str, feedback: &Feedback) -> Result<()> {
        let path = format!("{}/deploymentBase/{}/feedback", self.root, segment(id)?);
        self.call(self.request(reqwest::Method::POST, &path).json(feedback))
            .await
    }

    /// `POST .../cancelAction/{id}/feedback`.
    pub async fn cancel_feedback(&self, id: &str, feedback: &Feedback) -> Result<()> {
        let path = format!("{}/cancelAction/{}/feedback", self.root, segment(id)?);
        self.call(self.request(reqwest::Method::POST, &path).json(feedback))
            .await
    }

    pub async fn config_data(&self, data: &ConfigData) -> Result<()> {
        let path = format!("{}/configData", self.root);
        self.call(self.request(reqwest::Method::PUT, &path).json(data))
            .await
    }

    pub async fn installed_base(&self, version: &AssignedVersion) -> Result<()> {
        let path = format!("{}/installedBase", self.root);
        self.call(self.request(reqwest::Method::PUT, &path).json(version))
            .await
    }

    /// Downloads `href` into `file`, resuming after the bytes it already holds (`Range`);
    /// at most `max` bytes in all, within `download_bound` of the `expected` bytes (the
    /// server's announcement, only advice: the other bounds hold whatever it sends).
    /// `space` is told every chunk's length before it is written (a `store::Headroom`, which
    /// keeps the data partition's reserve; its error ends the download); `on_bytes` hears the
    /// total after every chunk.
    pub async fn download(
        &self,
        href: &str,
        file: &Path,
        max: u64,
        expected: u64,
        space: impl FnMut(u64) -> Result<()>,
        on_bytes: impl FnMut(u64),
    ) -> Result<u64> {
        let within = download_bound(self.timeout, expected);
        self.bounded(
            within,
            self.download_within(href, file, max, space, on_bytes),
        )
        .await
        .map_err(|e| match e {
            Error::Timeout(_) => Error::Timeout(format!(
                "the download did not end within {} s; it goes on at the next poll",
                within.as_secs()
            )),
            e => e,
        })
    }

    async fn download_within(
        &self,
        href: &str,
        file: &Path,
        max: u64,
        mut space: impl FnMut(u64) -> Result<()>,
        mut on_bytes: impl FnMut(u64),
    ) -> Result<u64> {
        let have = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
        let mut req = self.request(reqwest::Method::GET, &self.link(href)?);
        if have > 0 {
            req = req.header(reqwest::header::RANGE, format!("bytes={have}-"));
        }
        let res = tokio::time::timeout(self.timeout, self.send(req))
            .await
            .map_err(|_| Error::Timeout("the fleet server did not answer in time".into()))??;
        let resumed = res.status() == reqwest::StatusCode::PARTIAL_CONTENT
            && content_range_start(&res) == Some(have);
        let mut out = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(resumed)
            .truncate(!resumed)
            .open(file)?;
        let mut total = if resumed { have } else { 0 };
        let mut stream = res.bytes_stream();
        loop {
            let next = tokio::time::timeout(self.timeout, stream.next())
                .await
                .map_err(|_| Error::Timeout("the download stalled".into()))?;
            let Some(chunk) = next else { break };
            let chunk = chunk
                .map_err(|e| Error::Unavailable(format!("the download was cut: {}", plain(&e))))?;
            total += chunk.len() as u64;
            if total > max {
                return Err(Error::TooLarge(format!(
                    "the artifact is larger than {max} bytes"
                )));
            }
            space(chunk.len() as u64)?;
            // A full partition is `InsufficientStorage`, as the reserve's refusal.
            out.write_all(&chunk)?;
            on_bytes(total);
        }
        out.sync_all()?;
        Ok(total)
    }
}

/// An action id as a path segment: hawkBit's are numbers; anything else is refused.
fn segment(id: &str) -> Result<&str> {
    if !id.is_empty() && id.len() <= 32 && id.bytes().all(|b| b.is_ascii_alphanumeric()) {
        Ok(id)
    } else {
        Err(Error::ProviderFailed(
            "the server gave a malformed action id".into(),
        ))
    }
}

/// Checks an action id the server gave.
pub fn check_action_id(id: &str) -> Result<()> {
    segment(id).map(drop)
}

fn content_range_start(res: &reqwest::Response) -> Option<u64> {
    let v = res
        .headers()
        .get(reqwest::header::CONTENT_RANGE)?
        .to_str()
        .ok()?;
    let range = v.strip_prefix("bytes ")?;
    range.split('-').next()?.trim().parse().ok()
}

/// Reads an answer of at most `max` bytes (its time is bounded by the caller).
async fn read_bounded(res: reqwest::Response, max: usize) -> Result<Vec<u8>> {
    let mut body = Vec::new();
    let mut stream = res.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| Error::Unavailable(plain(&e)))?;
        if body.len() + chunk.len() > max {
            return Err(Error::ProviderFailed(
                "the fleet server's answer is too large".into(),
            ));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A client error without its URL's query (links may carry tokens of the server's own).
fn plain(e: &reqwest::Error) -> String {
    let mut e = e.to_string();
    if let Some(q) = e.find('?') {
        let end = e[q..].find([' ', ')']).map_or(e.len(), |n| q + n);
        e.replace_range(q..end, "");
    }
    e
}

/// The SHA-256 of a file, as lowercase hex.
pub fn sha256_file(path: &Path) -> Result<String> {
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 256 << 10];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleep_is_hours_minutes_seconds() {
        assert_eq!(parse_sleep("00:05:00"), Some(300));
        assert_eq!(parse_sleep("12:00:01"), Some(43_201));
        for bad in ["", "5", "00:60:00", "1:2", "a:b:c", "00:00:00:00"] {
            assert_eq!(parse_sleep(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_download_is_bounded_by_its_announced_size() {
        let t = Duration::from_secs(30);
        assert_eq!(download_bound(t, 0), t);
        assert_eq!(download_bound(t, 1), Duration::from_secs(31));
        assert_eq!(download_bound(t, 400 << 20), Duration::from_secs(30 + 6400));
    }

    #[test]
    fn feedback_is_hawkbits_shape() {
        let f = Feedback::new(Execution::Closed, Finished::Success, "done").with_progress(50);
        assert_eq!(
            serde_json::to_value(&f).unwrap(),
            serde_json::json!({"status": {"execution": "closed", "result": {"finished": "success", "progress": {"cnt": 50, "of": 100}}, "details": ["done"]}})
        );
        assert_eq!(f.summary(), "closed/success");
    }

    #[test]
    fn links_stay_on_the_configured_server() {
        let s = FleetSettings {
            server_url: "https://fleet.example/hb/".into(),
            ..FleetSettings::default()
        };
        let ddi = Ddi::new(&s, "k1", Duration::from_secs(1)).unwrap();
        assert_eq!(
            ddi.link("https://elsewhere:9/hb/DEFAULT/controller/v1/k1/deploymentBase/3?c=1")
                .unwrap(),
            "/DEFAULT/controller/v1/k1/deploymentBase/3?c=1"
        );
        assert_eq!(ddi.link("http://x/other/a").unwrap(), "/other/a");
        assert!(segment("3/../x").is_err());
        assert!(segment("42").is_ok());
    }

    /// Settings saved before the allowance existed (or written by hand) meet the same rule.
    #[test]
    fn a_plain_http_server_needs_its_allowance_before_any_request() {
        let mut s = FleetSettings {
            server_url: "http://fleet.example".into(),
            ..FleetSettings::default()
        };
        let refused = Ddi::new(&s, "k1", Duration::from_secs(1)).err().unwrap();
        assert!(refused.to_string().contains("in clear"), "{refused}");
        s.allow_insecure_http = true;
        assert!(Ddi::new(&s, "k1", Duration::from_secs(1)).is_ok());
    }
}
