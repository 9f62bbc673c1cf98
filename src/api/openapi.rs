//! The OpenAPI 3.1 document of the HTTP API, generated from the handlers' `#[utoipa::path]`
//! attributes and the types they take and give, served at `GET /api/openapi.json` (public: it
//! holds nothing the routes themselves do not tell). Who may call an operation is its
//! `security`: `admin_session` (the cookie), `bearer` (an admin session token, a client key or
//! the internal token, per operation), and `{}` where a trusted loopback caller needs nothing.

use std::sync::OnceLock;

use axum::Router;
use axum::body::Bytes;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::get;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::auth::SESSION_COOKIE;
use super::schema::ErrorBody;
use super::state::AppState;
use super::{
    availability, characters, client_keys, console, conversations, device, fleet, metrics,
    sessions, site, system, tasks, update, ws,
};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Docent HTTP API",
        description = "The kiosk's HTTP API. Errors are `{\"error\": \"...\"}` (file routes: \
            short text/plain). Security: `admin_session` is the administrator's session cookie, \
            `bearer` is `Authorization: Bearer` with an administrator session token, a client \
            key (conversation routes; a metrics key for `/metrics`) or the internal token \
            (internal routes); an empty \
            requirement `{}` stands for a trusted loopback caller (and, for conversation \
            routes, anyone when `access.open_conversation_api` is on). See docs/api.md."
    ),
    paths(
        openapi_json,
        system::health,
        metrics::metrics,
        system::components,
        system::get_privacy,
        system::get_settings,
        system::put_settings,
        system::test_settings,
        system::avatar_model,
        system::get_launch,
        system::put_launch,
        system::restart,
        system::backup,
        system::restore,
        system::logs,
        availability::availability,
        system::get_certificate,
        system::put_certificate,
        update::upload_update,
        update::install_update,
        update::cancel_install,
        update::update_status,
        update::reboot,
        update::cancel_reboot,
        site::auth_status,
        site::login,
        site::logout,
        site::logout_all,
        site::change_password,
        site::get_data,
        site::put_data,
        site::seed_data,
        site::get_image,
        site::put_image,
        site::delete_image,
        site::get_image_empty,
        site::put_image_empty,
        site::delete_image_empty,
        sessions::create,
        sessions::list,
        sessions::remove,
        sessions::message,
        sessions::tasks,
        client_keys::create,
        client_keys::list,
        client_keys::revoke,
        tasks::task,
        tasks::events,
        tasks::artifact,
        tasks::post_event,
        tasks::post_artifact,
        tasks::search,
        device::device,
        device::ptt,
        device::choose,
        device::snapshot,
        ws::upgrade,
        characters::list,
        characters::create,
        characters::test_voice,
        characters::voices,
        characters::read,
        characters::update,
        characters::remove,
        characters::upload_avatar,
        characters::images,
        characters::image,
        characters::delete_image,
        characters::activate,
        characters::knowledge,
        characters::upload_knowledge,
        characters::delete_source,
        characters::reindex,
        characters::ask,
        characters::screen_questions,
        characters::set_screen_questions,
        characters::faq,
        characters::set_faq,
        characters::faq_csv,
        characters::set_faq_csv,
        characters::recordings,
        characters::upload_recording,
        characters::recording,
        characters::delete_recording,
        characters::get_clip,
        characters::put_clip,
        characters::delete_clip,
        characters::avatar,
        conversations::history,
        conversations::purge_history,
        conversations::export,
        conversations::unmatched,
        conversations::forget_visit,
        conversations::statistics,
        console::events::events,
        console::events::snapshot,
        console::events::test_sound,
        fleet::status,
        fleet::pause,
        fleet::export,
        fleet::apply,
    ),
    components(schemas(ErrorBody)),
    modifiers(&Security),
)]
pub struct ApiDoc;

/// The security schemes the operations name.
struct Security;

impl Modify for Security {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "admin_session",
            SecurityScheme::ApiKey(ApiKey::Cookie(ApiKeyValue::with_description(
                SESSION_COOKIE,
                "The administrator session cookie set by `POST /api/auth`.",
            ))),
        );
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "An administrator session token, a client key (conversation routes) or \
                         the internal token (internal routes).",
                    ))
                    .build(),
            ),
        );
    }
}

/// The document, built once.
pub fn document() -> &'static Bytes {
    static DOC: OnceLock<Bytes> = OnceLock::new();
    DOC.get_or_init(|| {
        let mut doc = ApiDoc::openapi();
        // One set of clip handlers serves two paths: with and without the variant segment.
        let with_variant = "/api/v1/characters/{id}/idle-videos/{imgbase}/{variant}/{filename}";
        if let Some(mut item) = doc.paths.paths.get(with_variant).cloned() {
            for op in [&mut item.get, &mut item.put, &mut item.delete]
                .into_iter()
                .flatten()
            {
                if let Some(params) = op.parameters.as_mut() {
                    params.retain(|p| p.name != "variant");
                }
                op.operation_id = op.operation_id.as_ref().map(|id| format!("{id}_plain"));
            }
            doc.paths
                .paths
                .insert(with_variant.replace("/{variant}", ""), item);
        }
        unique_operation_ids(&mut doc);
        Bytes::from(doc.to_pretty_json().expect("the document serialises"))
    })
}

/// Operation ids come from the handlers' names, which repeat across modules (`list`,
/// `create`): a repeated one is prefixed with its tag, so each names one operation.
fn unique_operation_ids(doc: &mut utoipa::openapi::OpenApi) {
    let ops = || {
        doc.paths.paths.values().flat_map(|item| {
            [&item.get, &item.put, &item.post, &item.delete]
                .into_iter()
                .flatten()
        })
    };
    let mut seen = std::collections::HashMap::<String, usize>::new();
    for op in ops() {
        *seen
            .entry(op.operation_id.clone().unwrap_or_default())
            .or_default() += 1;
    }
    for item in doc.paths.paths.values_mut() {
        for op in [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
        ]
        .into_iter()
        .flatten()
        {
            let id = op.operation_id.clone().unwrap_or_default();
            if seen.get(&id).copied().unwrap_or(0) > 1 {
                let tag = op.tags.iter().flatten().next().cloned().unwrap_or_default();
                op.operation_id = Some(format!("{}_{id}", tag.replace('-', "_")));
            }
        }
    }
}

pub fn routes() -> Router<AppState> {
    Router::new().route("/api/openapi.json", get(openapi_json))
}

/// This document.
#[utoipa::path(get, path = "/api/openapi.json", tag = "system",
    responses((status = 200, description = "The OpenAPI document", content_type = "application/json", body = Object)))]
async fn openapi_json() -> impl IntoResponse {
    ([(CONTENT_TYPE, "application/json")], document().clone())
}
