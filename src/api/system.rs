//! Health, components, settings and configuration routes, and the administrator's system
//! routes: restart, backup, restore and the recent log.

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::StatusCode;
use axum::http::header::{CACHE_CONTROL, CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use super::auth::Admin;
use super::error::{ApiError, ApiResult};
use super::extract::{JsonBody, JsonOrEmpty, QueryArgs};
use super::state::{AppState, blocking};
use super::statuses;
use super::tls::Refused;
use crate::engine::launch::LaunchUpdate;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/health", get(health))
        .route("/api/v1/components", get(components))
        .route("/api/v1/settings", get(get_settings).put(put_settings))
        .route("/api/v1/settings/test", post(test_settings))
        .route("/api/v1/settings/privacy", get(get_privacy))
        .route("/api/v1/config/avatar-model", get(avatar_model))
        .route("/api/v1/config/launch", get(get_launch).put(put_launch))
        .route(
            "/api/v1/tls/certificate",
            get(get_certificate).put(put_certificate),
        )
        .route("/api/v1/system/restart", post(restart))
        .route("/api/v1/system/backup", get(backup))
        .route("/api/v1/system/restore", post(restore))
        .route("/api/v1/system/logs", get(logs))
}

/// An answer that says what happens next: `restarting`, `saved`.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct StatusBody {
    status: &'static str,
}

impl StatusBody {
    pub fn new(status: &'static str) -> StatusBody {
        StatusBody { status }
    }
}

/// The process stops serving once this answer is sent, then starts again.
#[utoipa::path(post, path = "/api/v1/system/restart", tag = "system",
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (
            status = 200,
            description = "The kiosk restarts once this answer is sent (`status: restarting`)",
            body = StatusBody,
        ),
        statuses::AdminAction,
    ))]
async fn restart(_: Admin, State(s): State<AppState>) -> Json<StatusBody> {
    s.engine.request_restart();
    Json(StatusBody {
        status: "restarting",
    })
}

/// Chunks of the archive in flight between the thread that writes it and the response.
const BACKUP_CHUNKS: usize = 4;
const BACKUP_CHUNK_BYTES: usize = 64 << 10;

/// The backup archive, written by a blocking thread as the client reads it (at most
/// `BACKUP_CHUNKS` chunks buffered). A failure after the first bytes cuts the response short,
/// so the client sees an incomplete download rather than a well-formed bad archive.
#[utoipa::path(get, path = "/api/v1/system/backup", tag = "system",
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (
            status = 200,
            description = "The backup archive (tar: the database and the stored files), as a download",
            body = crate::api::schema::Binary,
            content_type = "application/x-tar",
        ),
        statuses::NotAdmin,
        (status = 409, description = "Another backup is being written", body = crate::api::schema::ErrorBody),
        (
            status = 507,
            description = "The data partition is below its reserve, or has no room for the database copy",
            body = crate::api::schema::ErrorBody,
        ),
    ))]
async fn backup(_: Admin, State(s): State<AppState>) -> ApiResult<Response> {
    let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<Bytes>>(BACKUP_CHUNKS);
    let (first_tx, first_rx) = tokio::sync::oneshot::channel();
    let engine = s.engine.clone();
    tokio::task::spawn_blocking(move || {
        let mut out = ChannelWriter {
            tx,
            buf: Vec::with_capacity(BACKUP_CHUNK_BYTES),
            started: Some(first_tx),
        };
        let result = engine.write_backup(&mut out);
        match result {
            Ok(()) => {
                let _ = out.send();
                if let Some(started) = out.started.take() {
                    let _ = started.send(Ok(()));
                }
            }
            Err(e) => {
                tracing::warn!("backup failed: {e}");
                match out.started.take() {
                    Some(started) => {
                        let _ = started.send(Err(e));
                    }
                    None => {
                        let _ = out
                            .tx
                            .blocking_send(Err(std::io::Error::other(e.to_string())));
                    }
                }
            }
        }
    });
    // Errors before the first bytes (another backup runs, the copy failed) get a status.
    if let Ok(Err(e)) = first_rx.await {
        return Err(e.into());
    }
    let name = format!(
        "attachment; filename=\"docent-backup-{}.tar\"",
        humantime::format_rfc3339_seconds(std::time::SystemTime::now())
            .to_string()
            .replace(':', "-")
    );
    let body = Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx));
    Ok((
        [
            (CONTENT_TYPE, "application/x-tar".to_string()),
            (CONTENT_DISPOSITION, name),
            (CACHE_CONTROL, "no-store".to_string()),
        ],
        body,
    )
        .into_response())
}

/// `io::Write` into the response's channel, in chunks; the first full chunk tells the handler
/// that the archive is under way.
struct ChannelWriter {
    tx: tokio::sync::mpsc::Sender<std::io::Result<Bytes>>,
    buf: Vec<u8>,
    started: Option<tokio::sync::oneshot::Sender<crate::engine::Result<()>>>,
}

impl ChannelWriter {
    fn send(&mut self) -> std::io::Result<()> {
        if let Some(started) = self.started.take() {
            let _ = started.send(Ok(()));
        }
        let chunk = Bytes::from(std::mem::replace(
            &mut self.buf,
            Vec::with_capacity(BACKUP_CHUNK_BYTES),
        ));
        self.tx
            .blocking_send(Ok(chunk))
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "client went away"))
    }
}

impl std::io::Write for ChannelWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let n = data.len().min(BACKUP_CHUNK_BYTES - self.buf.len());
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() == BACKUP_CHUNK_BYTES {
            self.send()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Restores a backup: the upload (at most `limits.backup_bytes`) is kept in the scratch
/// directory, checked completely and staged; then the kiosk restarts into it. A bad archive
/// changes nothing: 400 with the reason.
#[utoipa::path(post, path = "/api/v1/system/restore", tag = "system",
    request_body(
        content = crate::api::schema::Binary,
        description = "A backup archive (tar) from `GET /api/v1/system/backup`",
        content_type = "application/octet-stream",
    ),
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (status = 200, description = "Staged; the kiosk restarts into it", body = Restored),
        statuses::AdminAction,
        (
            status = 400,
            description = "Not a backup of this kiosk, or cut short; nothing changed",
            body = crate::api::schema::ErrorBody,
        ),
        (status = 409, description = "Another restore or backup is under way", body = crate::api::schema::ErrorBody),
        (status = 413, description = "Larger than `limits.backup_bytes`", body = crate::api::schema::ErrorBody),
        (
            status = 507,
            description = "The data partition is below its reserve, or has no room to stage the archive",
            body = crate::api::schema::ErrorBody,
        ),
    ))]
async fn restore(_: Admin, State(s): State<AppState>, body: Body) -> ApiResult<Json<Restored>> {
    let upload = Upload::receive(&s, body, "restore", "backup").await?;
    let restored = blocking(&s, move |e| {
        let restored = e.restore_backup(&upload.0);
        drop(upload);
        restored
    })
    .await?;
    s.engine.request_restart();
    Ok(Json(Restored {
        status: "restored",
        created: restored.created,
        characters: restored.characters,
        blobs: restored.blobs,
        bytes: restored.bytes,
        restarting: true,
    }))
}

/// What a restore staged.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct Restored {
    status: &'static str,
    /// When the backup was written (RFC 3339).
    created: String,
    /// Characters in the backup.
    characters: u64,
    /// Stored files in the archive.
    blobs: usize,
    /// Their bytes.
    bytes: u64,
    restarting: bool,
}

/// An uploaded archive in the scratch directory, removed when the route is done with it.
pub(super) struct Upload(pub(super) std::path::PathBuf);

impl Upload {
    /// Receives an archive (at most `limits.backup_bytes`), keeping the data partition's
    /// reserve all along, not only at the first byte (issue 34, finding 5). `what` names it in
    /// the refusals ("a backup may be...").
    pub(super) async fn receive(
        s: &AppState,
        body: Body,
        name: &str,
        what: &str,
    ) -> ApiResult<Upload> {
        let limit = s.engine.config.limits.backup_bytes;
        let path = s
            .engine
            .scratch_dir()
            .join(format!("{name}-{}.tar", crate::engine::new_id()));
        s.engine.check_reserve()?;
        let upload = Upload(path.clone());
        let mut file = tokio::fs::File::create(&path)
            .await
            .map_err(crate::engine::Error::from)?;
        let too_large = || {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("a {what} may be at most {limit} bytes"),
            )
        };
        let this = format!("this {what}");
        super::extract::body_to_file(s, body, &mut file, limit, &this, too_large).await?;
        // A write that failed after its last chunk was handed over shows here, not at the drop.
        file.flush().await.map_err(crate::engine::Error::from)?;
        Ok(upload)
    }
}

impl Drop for Upload {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct LogsQuery {
    /// How many of the last lines (default 200; at most all that are kept).
    lines: Option<usize>,
}

/// The last lines of the log (`?lines=`, at most all that are kept), oldest first.
#[utoipa::path(get, path = "/api/v1/system/logs", tag = "system",
    params(LogsQuery),
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (status = 200, description = "The last lines of the log, oldest first", body = Logs),
        statuses::InvalidParam,
        statuses::NotAdmin,
    ))]
async fn logs(_: Admin, QueryArgs(q): QueryArgs<LogsQuery>) -> Json<Logs> {
    let n = q.lines.unwrap_or(200).min(crate::logs::LINES);
    Json(Logs {
        lines: crate::logs::recent(n),
        kept: crate::logs::LINES,
    })
}

/// The recent log.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct Logs {
    lines: Vec<String>,
    /// How many lines are kept.
    kept: usize,
}

/// The HTTPS certificate in use: its fingerprint, and whether the console may replace it.
#[utoipa::path(get, path = "/api/v1/tls/certificate", tag = "system",
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (
            status = 200,
            description = "The certificate's SHA-256 fingerprint, \
                and whether the console may replace it (not named in the configuration)",
            body = Certificate,
        ),
        statuses::NotAdmin,
    ))]
async fn get_certificate(_: Admin, State(s): State<AppState>) -> ApiResult<Json<Certificate>> {
    let tls = s.tls.get().ok_or_else(no_tls)?;
    Ok(Json(Certificate {
        fingerprint: tls.fingerprint(),
        replaceable: !tls.configured(),
    }))
}

/// The certificate in use.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct Certificate {
    fingerprint: String,
    replaceable: bool,
}

#[derive(serde::Deserialize, utoipa::ToSchema)]
struct CertificateUpload {
    cert_pem: String,
    key_pem: String,
}

/// Replaces the certificate with the administrator's own (PEM), checked before anything is
/// replaced; new connections use it at once.
#[utoipa::path(put, path = "/api/v1/tls/certificate", tag = "system",
    request_body(
        content = CertificateUpload,
        description = "A certificate chain and its private key, PEM",
        content_type = "application/json",
    ),
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (
            status = 200,
            description = "Installed; new connections use it (`status: saved`, the new fingerprint)",
            body = Object,
        ),
        statuses::AdminAction,
        statuses::TooLarge,
        statuses::NotJson,
        (
            status = 400,
            description = "Invalid body, or a certificate or key that does not parse or match",
            body = crate::api::schema::ErrorBody,
        ),
        (
            status = 409,
            description = "The configuration names the certificate files",
            body = crate::api::schema::ErrorBody,
        ),
    ))]
async fn put_certificate(
    _: Admin,
    State(s): State<AppState>,
    JsonBody(body): JsonBody<CertificateUpload>,
) -> ApiResult<Json<Value>> {
    let tls = s.tls.get().cloned().ok_or_else(no_tls)?;
    let installed = tokio::task::spawn_blocking(move || {
        tls.install(body.cert_pem.as_bytes(), body.key_pem.as_bytes())
    })
    .await
    .map_err(|_| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error"))?;
    match installed {
        Ok(fingerprint) => Ok(Json(
            json!({ "status": "saved", "fingerprint": fingerprint }),
        )),
        Err(Refused::Invalid(why)) => Err(ApiError::bad(why)),
        Err(Refused::Configured) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "the configuration names the certificate files ([access] tls_cert, tls_key): replace them there",
        )),
        Err(Refused::Io(e)) => {
            tracing::error!("cannot write the certificate: {e}");
            Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "cannot write the certificate",
            ))
        }
    }
}

fn no_tls() -> ApiError {
    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "HTTPS is not served")
}

#[utoipa::path(get, path = "/api/v1/health", tag = "system",
    description = "Public: whether the kiosk serves and what its providers and devices do. \
        `version` and `firmware` (the exact version, the last update's outcome with a rollback's \
        reason, the data copy opened) only for the administrator (a session cookie or token).",
    security((), ("admin_session" = []), ("bearer" = [])),
    responses((status = 200, description = "Health, providers and devices", body = Object)))]
async fn health(admin: Result<Admin, ApiError>, State(s): State<AppState>) -> ApiResult<Response> {
    let e = &s.engine;
    // The exact version and a rollback's reason tell the LAN which flaws the kiosk has.
    let admin = admin.is_ok();
    let probes = e.reachability().await;
    let inputs = HealthInputs {
        admin_password: e.has_admin_password(),
        foreign: e.characters_not_on_this_kiosk()?,
        device: s.devices.health.get(),
        inference_connected: probes.iter().all(|c| c.ok),
        outcome: s.updates.outcome(),
        firmware_version: s.updates.firmware_version().map(str::to_owned),
        admin,
        sessions: e.session_count().unwrap_or(0),
        stages: e.provider_health(&probes),
        uptime_s: e.started.elapsed().as_secs(),
    };
    let body = s.health.answer(inputs, |inputs| {
        // Room for the usual answer: the buffer does not grow (and move) while it is written.
        let mut body = Vec::with_capacity(HEALTH_BYTES);
        serde_json::to_writer(&mut body, &inputs.health(e)).expect("health serialises");
        body.into()
    });
    Ok(([(CONTENT_TYPE, super::schema::JSON)], body).into_response())
}

/// What a health answer usually takes (some 400 bytes; more with problems to report).
const HEALTH_BYTES: usize = 1024;

/// What a health answer says, gathered per poll; it is serialised again only when it differs
/// from the last poll's (between two polls usually nothing changes, the uptime counts seconds).
#[derive(PartialEq)]
struct HealthInputs {
    admin_password: bool,
    foreign: Vec<(String, String, Vec<crate::engine::characters::ForeignField>)>,
    device: crate::device::DeviceHealth,
    inference_connected: bool,
    outcome: Option<crate::update::Outcome>,
    firmware_version: Option<String>,
    /// The caller is the administrator: the answer says `version` and `firmware`.
    admin: bool,
    sessions: usize,
    stages: Vec<crate::engine::providers::StageHealth>,
    uptime_s: u64,
}

impl HealthInputs {
    fn health<'a>(&'a self, e: &'a crate::engine::Engine) -> Health<'a> {
        Health {
            admin_auth: if self.admin_password {
                "password"
            } else {
                "setup"
            },
            characters_not_on_this_kiosk: self
                .foreign
                .iter()
                .map(|(id, name, fields)| ForeignCharacter { fields, id, name })
                .collect(),
            device: &self.device,
            firmware: self.admin.then(|| Firmware {
                data: e.data_fell_back(),
                update: self.outcome.as_ref().map(|o| o.sentence()),
                version: self.firmware_version.as_deref(),
            }),
            inference_connected: self.inference_connected,
            providers: self
                .stages
                .iter()
                .map(|h| {
                    let state = StageState {
                        error: h.error.as_deref(),
                        last_call: h.last_call.as_ref(),
                        ok: h.ok,
                        provider: h.provider,
                    };
                    (h.stage, state)
                })
                .collect(),
            status: if self.stages.iter().all(|h| h.ok) {
                "ok"
            } else {
                "degraded"
            },
            reasons: self
                .stages
                .iter()
                .filter_map(|h| h.error.as_deref())
                .collect(),
            sessions: self.sessions,
            uptime_s: self.uptime_s,
            version: self.admin.then_some(env!("CARGO_PKG_VERSION")),
        }
    }
}

/// The last health answers and what they were made of: the public one and the administrator's.
#[derive(Default)]
pub(super) struct HealthCache(std::sync::Mutex<[Option<(HealthInputs, Bytes)>; 2]>);

impl HealthCache {
    /// The answer for `inputs`: the last one when they are the same, else `serialise`'s.
    fn answer(
        &self,
        inputs: HealthInputs,
        serialise: impl FnOnce(&HealthInputs) -> Bytes,
    ) -> Bytes {
        let lock = || self.0.lock().unwrap_or_else(|e| e.into_inner());
        let slot = usize::from(inputs.admin);
        if let Some((last, body)) = &lock()[slot]
            && *last == inputs
        {
            return body.clone();
        }
        let body = serialise(&inputs);
        lock()[slot] = Some((inputs, body.clone()));
        body
    }
}

/// The health answer, serialised from borrowed parts in one pass (a poll builds no JSON
/// tree); fields in the order of their names, as a JSON object's.
#[derive(serde::Serialize)]
struct Health<'a> {
    admin_auth: &'static str,
    characters_not_on_this_kiosk: Vec<ForeignCharacter<'a>>,
    device: &'a crate::device::DeviceHealth,
    #[serde(skip_serializing_if = "Option::is_none")]
    firmware: Option<Firmware<'a>>,
    inference_connected: bool,
    providers: std::collections::BTreeMap<&'static str, StageState<'a>>,
    reasons: Vec<&'a str>,
    sessions: usize,
    status: &'static str,
    uptime_s: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<&'static str>,
}

/// What runs, what the last update did, and whether the data is a copy from before a migration.
#[derive(serde::Serialize)]
struct Firmware<'a> {
    data: Option<&'a str>,
    update: Option<String>,
    version: Option<&'a str>,
}

#[derive(serde::Serialize)]
struct ForeignCharacter<'a> {
    fields: &'a [crate::engine::characters::ForeignField],
    id: &'a str,
    name: &'a str,
}

#[derive(serde::Serialize)]
struct StageState<'a> {
    error: Option<&'a str>,
    last_call: Option<&'a crate::engine::providers::LastCall>,
    ok: bool,
    provider: &'static str,
}

#[utoipa::path(get, path = "/api/v1/components", tag = "system",
    responses(
        (status = 200, description = "Selectable providers per stage", body = crate::engine::providers::Components),
    ))]
async fn components(State(s): State<AppState>) -> Json<crate::engine::providers::Components> {
    Json(s.engine.components())
}

#[utoipa::path(get, path = "/api/v1/settings", tag = "settings",
    security(("admin_session" = []), ("bearer" = [])),
    responses((status = 200, description = "The settings, secrets masked", body = Object), statuses::NotAdmin))]
async fn get_settings(_: Admin, State(s): State<AppState>) -> Json<Value> {
    Json(s.engine.settings().masked())
}

/// What leaves the kiosk under the settings in force: per stage, which provider receives what,
/// and where (docs/privacy.md).
#[utoipa::path(get, path = "/api/v1/settings/privacy", tag = "settings",
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (status = 200, description = "Per stage, the provider, what it receives and its host",
            body = crate::engine::privacy::Disclosure),
        statuses::NotAdmin,
    ))]
async fn get_privacy(
    _: Admin,
    State(s): State<AppState>,
) -> Json<crate::engine::privacy::Disclosure> {
    Json(s.engine.disclosure())
}

#[utoipa::path(put, path = "/api/v1/settings", tag = "settings",
    request_body(
        content = Object,
        description = "A partial settings document; null resets a field",
        content_type = "application/json",
    ),
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (status = 200, description = "Saved; the settings, secrets masked", body = Object),
        statuses::AdminJsonWrite,
    ))]
async fn put_settings(
    _: Admin,
    State(s): State<AppState>,
    JsonBody(patch): JsonBody<Value>,
) -> ApiResult<Json<Value>> {
    let saved = blocking(&s, move |e| e.update_settings(&patch)).await?;
    Ok(Json(
        json!({ "status": "saved", "settings": saved.masked() }),
    ))
}

#[utoipa::path(post, path = "/api/v1/settings/test", tag = "settings",
    request_body(
        content = Object,
        description = "Optional: a partial settings document (as for PUT) tested without being saved; \
            empty tests the settings in force",
        content_type = "application/json",
    ),
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (status = 200, description = "Every provider check passed", body = Object),
        statuses::AdminJsonWrite,
        (status = 503, description = "A provider check failed", body = Object),
    ))]
async fn test_settings(
    _: Admin,
    State(s): State<AppState>,
    JsonOrEmpty(patch): JsonOrEmpty<Value>,
) -> ApiResult<Response> {
    let checks = s.engine.test_settings(&patch).await?;
    match checks.iter().find(|c| !c.ok) {
        None => Ok(Json(json!({ "status": "ok", "checks": checks })).into_response()),
        Some(failed) => Ok((
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({
                "status": "error",
                "error": format!("{}: {}", failed.name, failed.error.as_deref().unwrap_or("failed")),
                "checks": checks,
            })),
        )
            .into_response()),
    }
}

#[utoipa::path(get, path = "/api/v1/config/avatar-model", tag = "system",
    responses((status = 200, description = "The avatar model (cached idle clips)", body = Object)))]
async fn avatar_model() -> Json<Value> {
    Json(json!({
        "active_model": "cached_video",
        "configured_default_model": "cached_video",
        "avatar_enabled": false,
        "models": [{
            "id": "cached_video",
            "name": "Cached idle clips",
            "available": true,
            "description": "The kiosk plays each character's uploaded idle clips; it renders no live avatar.",
        }],
        "config_status": "ok",
    }))
}

#[utoipa::path(get, path = "/api/v1/config/launch", tag = "settings",
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (status = 200, description = "Launch parameters", body = crate::engine::launch::LaunchView),
        statuses::NotAdmin,
    ))]
async fn get_launch(
    _: Admin,
    State(s): State<AppState>,
) -> ApiResult<Json<crate::engine::launch::LaunchView>> {
    Ok(Json(s.engine.launch_config()?))
}

#[utoipa::path(put, path = "/api/v1/config/launch", tag = "settings",
    request_body(content = LaunchUpdate, description = "JSON body", content_type = "application/json",),
    security(("admin_session" = []), ("bearer" = [])),
    responses((status = 200, description = "Saved", body = Object), statuses::AdminJsonWrite))]
async fn put_launch(
    _: Admin,
    State(s): State<AppState>,
    JsonBody(update): JsonBody<LaunchUpdate>,
) -> ApiResult<Json<Value>> {
    let requires_restart = blocking(&s, move |e| e.update_launch_config(update)).await?;
    Ok(Json(
        json!({ "status": "saved", "requires_restart": requires_restart }),
    ))
}
