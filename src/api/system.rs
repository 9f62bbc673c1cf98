//! Health, components, settings and configuration routes.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};

use super::auth::Admin;
use super::error::{ApiError, ApiResult};
use super::extract::JsonBody;
use super::tls::Refused;
use super::{AppState, blocking};
use crate::engine::launch::LaunchUpdate;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/health", get(health))
        .route("/api/v1/components", get(components))
        .route("/api/v1/settings", get(get_settings).put(put_settings))
        .route("/api/v1/settings/test", post(test_settings))
        .route("/api/v1/config/avatar-model", get(avatar_model))
        .route("/api/v1/config/launch", get(get_launch).put(put_launch))
        .route(
            "/api/v1/tls/certificate",
            get(get_certificate).put(put_certificate),
        )
}

/// The HTTPS certificate in use: its fingerprint, and whether the console may replace it.
async fn get_certificate(_: Admin, State(s): State<AppState>) -> ApiResult<Json<Value>> {
    let tls = s.tls.as_ref().ok_or_else(no_tls)?;
    Ok(Json(json!({
        "fingerprint": tls.fingerprint(),
        "replaceable": !tls.configured(),
    })))
}

#[derive(serde::Deserialize)]
struct CertificateUpload {
    cert_pem: String,
    key_pem: String,
}

/// Replaces the certificate with the administrator's own (PEM), checked before anything is
/// replaced; new connections use it at once.
async fn put_certificate(
    _: Admin,
    State(s): State<AppState>,
    JsonBody(body): JsonBody<CertificateUpload>,
) -> ApiResult<Json<Value>> {
    let tls = s.tls.clone().ok_or_else(no_tls)?;
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
            "the configuration names the certificate files (tls_cert, tls_key): replace them there",
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

async fn health(State(s): State<AppState>) -> ApiResult<Json<Value>> {
    let e = &s.engine;
    let sessions = e.session_count().unwrap_or(0);
    let mut providers = serde_json::Map::new();
    let mut reasons = Vec::new();
    for (stage, provider, problem) in e.provider_health() {
        providers.insert(
            stage.into(),
            json!({ "provider": provider, "ok": problem.is_none(), "error": problem }),
        );
        reasons.extend(problem);
    }
    let characters: Vec<Value> = e
        .characters_not_on_this_kiosk()?
        .into_iter()
        .map(|(id, name, fields)| json!({ "id": id, "name": name, "fields": fields }))
        .collect();
    Ok(Json(json!({
        "status": if reasons.is_empty() { "ok" } else { "degraded" },
        "reasons": reasons,
        "version": env!("CARGO_PKG_VERSION"),
        "uptime_s": e.started.elapsed().as_secs(),
        "sessions": sessions,
        "admin_auth": if e.has_admin_password() { "password" } else { "setup" },
        "providers": providers,
        "characters_not_on_this_kiosk": characters,
        "inference_connected": e.inference_connected().await,
        "device": s.devices.health.get(),
    })))
}

async fn components(State(s): State<AppState>) -> Json<crate::engine::providers::Components> {
    Json(s.engine.components())
}

async fn get_settings(_: Admin, State(s): State<AppState>) -> Json<Value> {
    Json(s.engine.settings().masked())
}

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

async fn test_settings(_: Admin, State(s): State<AppState>) -> Response {
    let checks = s.engine.test_providers().await;
    match checks.iter().find(|c| !c.ok) {
        None => Json(json!({ "status": "ok", "checks": checks })).into_response(),
        Some(failed) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({
                "status": "error",
                "error": format!("{}: {}", failed.name, failed.error.as_deref().unwrap_or("failed")),
                "checks": checks,
            })),
        )
            .into_response(),
    }
}

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

async fn get_launch(
    _: Admin,
    State(s): State<AppState>,
) -> ApiResult<Json<crate::engine::launch::LaunchView>> {
    Ok(Json(s.engine.launch_config()?))
}

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
