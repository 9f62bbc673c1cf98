//! Characters, their images, idle clips and knowledge.

use axum::extract::{DefaultBodyLimit, FromRequest, Multipart, Request, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use super::auth::Admin;
use super::error::{ApiError, ApiResult};
use super::extract::{JsonBody, Params, QueryArgs, check_length, read_body};
use super::files;
use super::gzip::AcceptsGzip;
use super::state::{AppState, blocking};
use super::statuses;
use crate::config::Limits;
use crate::engine::characters::{Activation, CharacterInput, CharacterView, ImageView};
use crate::engine::error::not_found;
use crate::engine::knowledge::faq::{FAQ_MAX_BYTES, FaqInput, FaqView};
use crate::engine::knowledge::recordings::RecordingView;
use crate::engine::knowledge::screen::ScreenChoice;
use crate::engine::knowledge::{Upload, extract::mime_for};
use crate::engine::language::Language;
use crate::engine::turn::Asked;
use crate::engine::{BlobRef, CharacterId};

/// Room for multipart framing around a file at its size bound.
const MULTIPART_SLACK: usize = 64 << 10;

pub fn routes(limits: &Limits) -> Router<AppState> {
    let clip = get(get_clip).put(put_clip).delete(delete_clip);
    Router::new()
        .route("/api/v1/characters", get(list).post(create))
        .route("/api/v1/characters/test-voice", post(test_voice))
        .route("/api/v1/characters/voices", get(voices))
        .route(
            "/api/v1/characters/{id}",
            get(read).put(update).delete(remove),
        )
        .route(
            "/api/v1/characters/{id}/avatar",
            post(upload_avatar).layer(DefaultBodyLimit::max(limits.image_bytes + MULTIPART_SLACK)),
        )
        .route("/api/v1/characters/{id}/images", get(images))
        .route(
            "/api/v1/characters/{id}/images/{filename}",
            get(image).delete(delete_image),
        )
        .route(
            "/api/v1/characters/{id}/images/{filename}/activate",
            put(activate),
        )
        .route("/api/v1/characters/{id}/knowledge", get(knowledge))
        .route(
            "/api/v1/characters/{id}/knowledge/files",
            post(upload_knowledge).layer(DefaultBodyLimit::max(limits.knowledge_request_bytes)),
        )
        .route("/api/v1/characters/{id}/knowledge/ask", post(ask))
        .route(
            "/api/v1/characters/{id}/screen-questions",
            get(screen_questions).put(set_screen_questions),
        )
        .route("/api/v1/characters/{id}/faq", get(faq).put(set_faq))
        .route(
            "/api/v1/characters/{id}/faq.csv",
            get(faq_csv).put(set_faq_csv),
        )
        .route(
            "/api/v1/characters/{id}/recordings",
            get(recordings)
                .post(upload_recording)
                .layer(DefaultBodyLimit::max(
                    limits.recording_bytes + MULTIPART_SLACK,
                )),
        )
        .route(
            "/api/v1/characters/{id}/recordings/{recording_id}",
            get(recording).delete(delete_recording),
        )
        .route(
            "/api/v1/characters/{id}/knowledge/{source_id}",
            axum::routing::delete(delete_source),
        )
        .route(
            "/api/v1/characters/{id}/knowledge/{source_id}/reindex",
            post(reindex),
        )
        .route(
            "/api/v1/characters/{id}/idle-videos/{imgbase}/{variant}/{filename}",
            clip.clone(),
        )
        .route(
            "/api/v1/characters/{id}/idle-videos/{imgbase}/{filename}",
            clip,
        )
        .route("/api/v1/avatars/{filename}", get(avatar))
}

#[utoipa::path(get, path = "/api/v1/characters", tag = "characters",
    responses((status = 200, description = "Every character", body = Vec<CharacterView>)))]
async fn list(State(s): State<AppState>, accepts: AcceptsGzip) -> ApiResult<Response> {
    Ok(s.characters_gzip
        .answer(accepts, s.engine.characters_json()?))
}

#[utoipa::path(post, path = "/api/v1/characters", tag = "characters",
    request_body(content = CharacterInput, description = "JSON body", content_type = "application/json",),
    security(("admin_session" = []), ("bearer" = [])),
    responses((status = 201, description = "Created", body = CharacterView), statuses::AdminJsonWrite))]
async fn create(
    _: Admin,
    State(s): State<AppState>,
    JsonBody(input): JsonBody<CharacterInput>,
) -> ApiResult<(StatusCode, Json<CharacterView>)> {
    let c = blocking(&s, move |e| e.create_character(input)).await?;
    Ok((StatusCode::CREATED, Json(c)))
}

#[utoipa::path(get, path = "/api/v1/characters/{id}", tag = "characters",
    params(("id" = String, Path, description = "Character id")),
    responses((status = 200, description = "The character", body = CharacterView), statuses::PublicRead))]
async fn read(
    State(s): State<AppState>,
    Params(id): Params<String>,
) -> ApiResult<Json<CharacterView>> {
    Ok(Json(s.engine.character(&CharacterId::parse(&id)?)?))
}

#[utoipa::path(put, path = "/api/v1/characters/{id}", tag = "characters",
    params(("id" = String, Path, description = "Character id")),
    request_body(content = CharacterInput, description = "JSON body", content_type = "application/json",),
    security(("admin_session" = []), ("bearer" = [])),
    responses((status = 200, description = "Updated", body = CharacterView), statuses::AdminJsonUpdate))]
async fn update(
    _: Admin,
    State(s): State<AppState>,
    Params(id): Params<String>,
    JsonBody(input): JsonBody<CharacterInput>,
) -> ApiResult<Json<CharacterView>> {
    Ok(Json(
        blocking(&s, move |e| {
            e.update_character(&CharacterId::parse(&id)?, input)
        })
        .await?,
    ))
}

#[utoipa::path(delete, path = "/api/v1/characters/{id}", tag = "characters",
    params(("id" = String, Path, description = "Character id")),
    security(("admin_session" = []), ("bearer" = [])),
    responses((status = 204, description = "Deleted"), statuses::AdminChange))]
async fn remove(
    _: Admin,
    State(s): State<AppState>,
    Params(id): Params<String>,
) -> ApiResult<StatusCode> {
    blocking(&s, move |e| e.delete_character(&CharacterId::parse(&id)?)).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize, utoipa::ToSchema)]
struct VoiceTest {
    #[serde(default)]
    voice_provider: String,
    #[serde(default)]
    voice_type: String,
}

/// Checks a voice (`{status: "ok"}`), or, asked with `Accept: audio/wav`, answers a sample of
/// it as a WAV file that a browser can play.
#[utoipa::path(post, path = "/api/v1/characters/test-voice", tag = "characters",
    request_body(content = VoiceTest, description = "JSON body", content_type = "application/json"),
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (
            status = 200,
            description = "The voice works (`{\"status\": \"ok\"}`), or, asked with `Accept: audio/wav`, \
                a sample of it",
            content((Object = "application/json"), (crate::api::schema::Binary = "audio/wav")),
        ),
        statuses::AdminJsonWrite,
        (status = 502, description = "The provider failed", body = crate::api::schema::ErrorBody),
        (status = 503, description = "The provider is unavailable", body = crate::api::schema::ErrorBody),
        (status = 504, description = "The provider timed out", body = crate::api::schema::ErrorBody),
    ))]
async fn test_voice(
    _: Admin,
    State(s): State<AppState>,
    headers: HeaderMap,
    JsonBody(body): JsonBody<VoiceTest>,
) -> ApiResult<Response> {
    let wants_wav = headers
        .get(axum::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("audio/wav"));
    if wants_wav {
        let wav = s
            .engine
            .voice_sample(&body.voice_provider, &body.voice_type)
            .await?;
        return Ok((
            [
                (CONTENT_TYPE, HeaderValue::from_static("audio/wav")),
                (CACHE_CONTROL, HeaderValue::from_static("no-store")),
            ],
            wav,
        )
            .into_response());
    }
    s.engine
        .test_voice(&body.voice_provider, &body.voice_type)
        .await?;
    Ok(Json(json!({ "status": "ok" })).into_response())
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct VoicesQuery {
    /// A speech provider's id; absent: the settings' speech provider.
    #[serde(default)]
    provider: String,
}

/// The voices a provider offers, for the console's voice picker.
#[utoipa::path(get, path = "/api/v1/characters/voices", tag = "characters",
    params(VoicesQuery),
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (
            status = 200,
            description = "The provider's voices; `closed`: a voice outside them is refused",
            body = crate::engine::providers::speech::Voices,
        ),
        statuses::InvalidParam,
        statuses::NotAdmin,
        (
            status = 503,
            description = "No list of the provider's voices now (not on this kiosk, not installed, not configured, \
                or its server does not answer)",
            body = crate::api::schema::ErrorBody,
        ),
    ))]
async fn voices(
    _: Admin,
    State(s): State<AppState>,
    QueryArgs(q): QueryArgs<VoicesQuery>,
) -> ApiResult<Json<crate::engine::providers::speech::Voices>> {
    Ok(Json(s.engine.voices(&q.provider).await?))
}

fn multipart_error(e: axum::extract::multipart::MultipartError) -> ApiError {
    ApiError::new(
        e.status(),
        format!("invalid multipart body: {}", e.body_text()),
    )
}

async fn multipart(req: Request, s: &AppState) -> ApiResult<Multipart> {
    Multipart::from_request(req, s).await.map_err(|e| {
        ApiError::bad(format!(
            "expected a multipart/form-data body: {}",
            e.body_text()
        ))
    })
}

#[utoipa::path(post, path = "/api/v1/characters/{id}/avatar", tag = "characters",
    params(("id" = String, Path, description = "Character id")),
    request_body(content = crate::api::schema::AvatarForm, content_type = "multipart/form-data"),
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (status = 200, description = "Stored", body = Object),
        statuses::AdminUpload,
        (status = 415, description = "Not an image", body = crate::api::schema::ErrorBody),
    ))]
async fn upload_avatar(
    _: Admin,
    State(s): State<AppState>,
    Params(id): Params<String>,
    req: Request,
) -> ApiResult<Json<Value>> {
    let limit = s.engine.config.limits.image_bytes;
    check_length(req.headers(), limit + MULTIPART_SLACK)?;
    let id = CharacterId::parse(&id)?;
    s.engine.character_record(&id)?;
    let mut form = multipart(req, &s).await?;
    while let Some(mut field) = form.next_field().await.map_err(multipart_error)? {
        if field.name() != Some("avatar") {
            continue;
        }
        let orig_name = field.file_name().unwrap_or("").to_string();
        let mut bytes = Vec::new();
        while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
            if bytes.len() + chunk.len() > limit {
                return Err(ApiError::too_large(limit));
            }
            bytes.extend_from_slice(&chunk);
        }
        let path_id = id.clone();
        let image = blocking(&s, move |e| e.add_image(&id, &orig_name, &bytes)).await?;
        let path = format!("/api/v1/characters/{path_id}/images/{}", image.filename);
        return Ok(Json(json!({ "path": path, "filename": image.filename })));
    }
    Err(ApiError::bad("multipart field \"avatar\" is missing"))
}

#[utoipa::path(get, path = "/api/v1/characters/{id}/images", tag = "characters",
    params(("id" = String, Path, description = "Character id")),
    responses((status = 200, description = "The character's images", body = Vec<ImageView>), statuses::PublicRead))]
async fn images(
    State(s): State<AppState>,
    Params(id): Params<String>,
) -> ApiResult<Json<Vec<ImageView>>> {
    Ok(Json(s.engine.images(&CharacterId::parse(&id)?)?))
}

#[utoipa::path(get, path = "/api/v1/characters/{id}/images/{filename}", tag = "characters",
    params(
        ("id" = String, Path, description = "Character id"),
        ("filename" = String, Path, description = "Image file name"),
    ),
    responses(statuses::ImageFile))]
async fn image(
    State(s): State<AppState>,
    params: Result<Params<(String, String)>, ApiError>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let Params((id, filename)) = params.map_err(ApiError::plain)?;
    let image = s
        .engine
        .image(&id, &filename)
        .map_err(|e| ApiError::from(e).plain())?;
    files::serve(s.engine.blobs(), &image.blob, &headers).await
}

#[utoipa::path(delete, path = "/api/v1/characters/{id}/images/{filename}", tag = "characters",
    params(
        ("id" = String, Path, description = "Character id"),
        ("filename" = String, Path, description = "Image file name"),
    ),
    security(("admin_session" = []), ("bearer" = [])),
    responses((status = 204, description = "Deleted"), statuses::AdminChange))]
async fn delete_image(
    _: Admin,
    State(s): State<AppState>,
    Params((id, filename)): Params<(String, String)>,
) -> ApiResult<StatusCode> {
    blocking(&s, move |e| e.delete_image(&id, &filename)).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(put, path = "/api/v1/characters/{id}/images/{filename}/activate", tag = "characters",
    params(
        ("id" = String, Path, description = "Character id"),
        ("filename" = String, Path, description = "Image file name"),
    ),
    security(("admin_session" = []), ("bearer" = [])),
    responses((status = 200, description = "Activated", body = Activation), statuses::AdminChange))]
async fn activate(
    _: Admin,
    State(s): State<AppState>,
    Params((id, filename)): Params<(String, String)>,
) -> ApiResult<Json<Activation>> {
    Ok(Json(
        blocking(&s, move |e| e.activate_image(&id, &filename)).await?,
    ))
}

#[utoipa::path(get, path = "/api/v1/avatars/{filename}", tag = "characters",
    params(("filename" = String, Path, description = "{character_id}_{image filename}")),
    responses(statuses::ImageFile))]
async fn avatar(
    State(s): State<AppState>,
    params: Result<Params<String>, ApiError>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let Params(filename) = params.map_err(ApiError::plain)?;
    let image = s
        .engine
        .avatar(&filename)
        .map_err(|e| ApiError::from(e).plain())?;
    files::serve(s.engine.blobs(), &image.blob, &headers).await
}

/// Path parameters of a clip, with or without the variant segment.
#[derive(Deserialize)]
struct ClipPath {
    id: String,
    imgbase: String,
    #[serde(default)]
    variant: String,
    filename: String,
}

#[utoipa::path(get, path = "/api/v1/characters/{id}/idle-videos/{imgbase}/{variant}/{filename}", tag = "characters",
    params(
        ("id" = String, Path, description = "Character id"),
        ("imgbase" = String, Path, description = "Base name of one of the character's images"),
        ("variant" = String, Path, description = "idle, listening, speaking or WIDTHxHEIGHT"),
        ("filename" = String, Path, description = "Clip file name"),
    ),
    responses(
        (status = 200, description = "The clip", body = crate::api::schema::Binary, content_type = "video/mp4"),
        (status = 206, description = "A byte range", body = crate::api::schema::Binary, content_type = "video/mp4"),
        statuses::NotModified,
        statuses::FileErrors,
        (status = 404, description = "No such clip", body = String, content_type = "text/plain"),
    ))]
async fn get_clip(
    State(s): State<AppState>,
    params: Result<Params<ClipPath>, ApiError>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let Params(p) = params.map_err(ApiError::plain)?;
    let clip = s
        .engine
        .clip(&p.id, &p.imgbase, &p.variant, &p.filename)
        .map_err(|e| ApiError::from(e).plain())?;
    files::serve(s.engine.blobs(), &clip.blob, &headers).await
}

#[utoipa::path(put, path = "/api/v1/characters/{id}/idle-videos/{imgbase}/{variant}/{filename}", tag = "characters",
    params(
        ("id" = String, Path, description = "Character id"),
        ("imgbase" = String, Path, description = "Base name of one of the character's images"),
        ("variant" = String, Path, description = "idle, listening, speaking or WIDTHxHEIGHT"),
        ("filename" = String, Path, description = "Clip file name"),
    ),
    request_body(
        content = crate::api::schema::Binary,
        description = "An MP4 with an H.264 track",
        content_type = "application/octet-stream",
    ),
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (status = 201, description = "Stored", body = Object),
        statuses::AdminUpload,
        (status = 415, description = "Not an MP4 with an H.264 track", body = crate::api::schema::ErrorBody),
    ))]
async fn put_clip(
    _: Admin,
    State(s): State<AppState>,
    Params(p): Params<ClipPath>,
    req: Request,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let limit = s.engine.config.limits.video_bytes;
    check_length(req.headers(), limit)?;
    let bytes = read_body(req.into_body(), limit).await?;
    let clip = blocking(&s, move |e| {
        e.put_clip(&p.id, &p.imgbase, &p.variant, &p.filename, &bytes)
    })
    .await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({
            "imgbase": clip.imgbase,
            "variant": clip.variant,
            "filename": clip.filename,
            "size": clip.blob.size,
        })),
    ))
}

#[utoipa::path(delete, path = "/api/v1/characters/{id}/idle-videos/{imgbase}/{variant}/{filename}", tag = "characters",
    params(
        ("id" = String, Path, description = "Character id"),
        ("imgbase" = String, Path, description = "Base name of one of the character's images"),
        ("variant" = String, Path, description = "idle, listening, speaking or WIDTHxHEIGHT"),
        ("filename" = String, Path, description = "Clip file name"),
    ),
    security(("admin_session" = []), ("bearer" = [])),
    responses((status = 204, description = "Deleted"), statuses::AdminWrite, statuses::NoSuchResource))]
async fn delete_clip(
    _: Admin,
    State(s): State<AppState>,
    Params(p): Params<ClipPath>,
) -> ApiResult<StatusCode> {
    blocking(&s, move |e| {
        e.delete_clip(&p.id, &p.imgbase, &p.variant, &p.filename)
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(get, path = "/api/v1/characters/{id}/knowledge", tag = "knowledge",
    params(("id" = String, Path, description = "Character id")),
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (status = 200, description = "The knowledge sources", body = Object),
        statuses::PublicRead,
        statuses::NotAdmin,
    ))]
async fn knowledge(
    _: Admin,
    State(s): State<AppState>,
    Params(id): Params<String>,
) -> ApiResult<Json<Value>> {
    let sources = s.engine.sources(&CharacterId::parse(&id)?)?;
    Ok(Json(json!({ "sources": sources })))
}

/// Receives knowledge files, streaming each to a staged blob so that a large upload never sits
/// in memory; any failure discards every file of the request.
#[utoipa::path(post, path = "/api/v1/characters/{id}/knowledge/files", tag = "knowledge",
    params(("id" = String, Path, description = "Character id")),
    request_body(content = crate::api::schema::KnowledgeForm, content_type = "multipart/form-data"),
    security(("admin_session" = []), ("bearer" = [])),
    responses((status = 201, description = "Stored; indexing follows", body = Object), statuses::AdminUpload))]
async fn upload_knowledge(
    _: Admin,
    State(s): State<AppState>,
    Params(id): Params<String>,
    req: Request,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let limits = s.engine.config.limits.clone();
    check_length(req.headers(), limits.knowledge_request_bytes)?;
    let id = CharacterId::parse(&id)?;
    s.engine.sources(&id)?;
    let mut staged: Vec<(String, BlobRef)> = Vec::new();
    let mut language = None;
    let received = receive_files(req, &s, &limits, &mut staged, &mut language).await;
    let blobs = s.engine.blobs();
    let paths = match received {
        Ok(paths) => paths,
        Err(e) => {
            blobs.remove_all(&staged.into_iter().map(|(_, b)| b).collect::<Vec<_>>());
            return Err(e);
        }
    };
    if staged.is_empty() {
        return Err(ApiError::bad(
            "no file parts (\"file\" or \"files\") in the request",
        ));
    }
    if !paths.is_empty() && paths.len() != staged.len() {
        blobs.remove_all(&staged.into_iter().map(|(_, b)| b).collect::<Vec<_>>());
        return Err(ApiError::bad(
            "relative_paths must have one entry per file, in order",
        ));
    }
    let mut paths = paths.into_iter();
    let uploads = staged
        .into_iter()
        .map(|(filename, blob)| Upload {
            filename,
            relative_path: paths.next(),
            blob,
            language: language.clone(),
        })
        .collect();
    let (sources, skipped) = blocking(&s, move |e| e.add_sources(&id, uploads)).await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({ "sources": sources, "skipped": skipped })),
    ))
}

async fn receive_files(
    req: Request,
    s: &AppState,
    limits: &Limits,
    staged: &mut Vec<(String, BlobRef)>,
    language: &mut Option<Language>,
) -> ApiResult<Vec<String>> {
    let mut form = multipart(req, s).await?;
    let mut paths = Vec::new();
    while let Some(mut field) = form.next_field().await.map_err(multipart_error)? {
        match field.name() {
            Some("file" | "files") => {
                if staged.len() >= limits.knowledge_files {
                    return Err(ApiError::new(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        format!("at most {} files per request", limits.knowledge_files),
                    ));
                }
                let filename = field.file_name().unwrap_or("").to_string();
                let mut writer = s.engine.blobs().create().map_err(io_error)?;
                while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
                    if writer.size() + chunk.len() as u64 > limits.knowledge_file_bytes as u64 {
                        return Err(ApiError::new(
                            StatusCode::PAYLOAD_TOO_LARGE,
                            format!(
                                "{filename} is larger than {} bytes",
                                limits.knowledge_file_bytes
                            ),
                        ));
                    }
                    writer.write(&chunk).map_err(io_error)?;
                }
                let mime = mime_for(&filename);
                let blob = tokio::task::spawn_blocking(move || writer.finish(mime))
                    .await
                    .map_err(|_| {
                        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
                    })?
                    .map_err(io_error)?;
                staged.push((filename, blob));
            }
            Some("relative_paths") => paths.push(field.text().await.map_err(multipart_error)?),
            Some("language") => {
                let tag = field.text().await.map_err(multipart_error)?;
                *language = Some(Language::parse(&tag).ok_or_else(|| {
                    ApiError::bad("language must be a language tag such as de or pt-BR")
                })?);
            }
            _ => {}
        }
    }
    Ok(paths)
}

fn io_error(e: std::io::Error) -> ApiError {
    if crate::engine::error::is_full(&e) {
        return crate::engine::Error::from(e).into();
    }
    tracing::error!("cannot stage an upload: {e}");
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "cannot store the upload")
}

#[utoipa::path(delete, path = "/api/v1/characters/{id}/knowledge/{source_id}", tag = "knowledge",
    params(
        ("id" = String, Path, description = "Character id"),
        ("source_id" = String, Path, description = "Knowledge source id"),
    ),
    security(("admin_session" = []), ("bearer" = [])),
    responses((status = 204, description = "Deleted"), statuses::AdminChange))]
async fn delete_source(
    _: Admin,
    State(s): State<AppState>,
    Params((id, source_id)): Params<(String, String)>,
) -> ApiResult<StatusCode> {
    blocking(&s, move |e| {
        // A malformed character id names no source of it, as before.
        let id = CharacterId::parse(&id).map_err(|_| not_found("no such knowledge source"))?;
        e.delete_source(&id, &source_id)
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(post, path = "/api/v1/characters/{id}/knowledge/{source_id}/reindex", tag = "knowledge",
    params(
        ("id" = String, Path, description = "Character id"),
        ("source_id" = String, Path, description = "Knowledge source id"),
    ),
    security(("admin_session" = []), ("bearer" = [])),
    responses((status = 202, description = "Reindexing", body = Object), statuses::AdminChange))]
async fn reindex(
    _: Admin,
    State(s): State<AppState>,
    Params((id, source_id)): Params<(String, String)>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let source = blocking(&s, move |e| {
        let id = CharacterId::parse(&id).map_err(|_| not_found("no such knowledge source"))?;
        e.reindex_source(&id, &source_id)
    })
    .await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(serde_json::to_value(source).expect("source serialises")),
    ))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct Question {
    question: String,
}

/// What the kiosk would answer to a question: the passages and the reply, nothing stored.
#[utoipa::path(post, path = "/api/v1/characters/{id}/knowledge/ask", tag = "knowledge",
    params(("id" = String, Path, description = "Character id")),
    request_body(content = Question, content_type = "application/json"),
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (status = 200, description = "The passages found and the reply", body = Asked),
        statuses::AdminAction,
        statuses::NoSuchCharacter,
        statuses::TooLarge,
        statuses::NotJson,
        (
            status = 400,
            description = "Invalid body, or a blank or too long question",
            body = crate::api::schema::ErrorBody,
        ),
        (status = 502, description = "The language model failed", body = crate::api::schema::ErrorBody),
        (status = 503, description = "The language model is unavailable", body = crate::api::schema::ErrorBody),
        (status = 504, description = "The language model timed out", body = crate::api::schema::ErrorBody),
    ))]
async fn ask(
    _: Admin,
    State(s): State<AppState>,
    Params(id): Params<String>,
    JsonBody(q): JsonBody<Question>,
) -> ApiResult<Json<Asked>> {
    Ok(Json(s.engine.ask_knowledge(&id, &q.question).await?))
}

/// The questions on the kiosk's screen and the FAQ questions they are chosen from.
#[utoipa::path(get, path = "/api/v1/characters/{id}/screen-questions", tag = "knowledge",
    params(("id" = String, Path, description = "Character id")),
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (
            status = 200,
            description = "The questions on the screen, in order, and the FAQ questions",
            body = ScreenChoice,
        ),
        statuses::AdminCharacterRead,
    ))]
async fn screen_questions(
    _: Admin,
    State(s): State<AppState>,
    Params(id): Params<String>,
) -> ApiResult<Json<ScreenChoice>> {
    Ok(Json(
        blocking(&s, move |e| e.screen_choice(&CharacterId::parse(&id)?)).await?,
    ))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct OnScreen {
    /// The questions to show, in order: each an FAQ question of the knowledge (or one already
    /// on the screen); at most 30, each at most 120 characters.
    questions: Vec<String>,
}

/// Puts FAQ questions on the kiosk's screen, in the order given (an empty list clears it).
#[utoipa::path(put, path = "/api/v1/characters/{id}/screen-questions", tag = "knowledge",
    params(("id" = String, Path, description = "Character id")),
    request_body(content = OnScreen, content_type = "application/json"),
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (status = 200, description = "The questions now on the screen, and the FAQ questions", body = ScreenChoice),
        statuses::AdminAction,
        statuses::NoSuchCharacter,
        statuses::TooLarge,
        statuses::NotJson,
        (
            status = 400,
            description = "Invalid body, too many or too long questions, a question twice, or one \
                that is not an FAQ question of the knowledge",
            body = crate::api::schema::ErrorBody,
        ),
    ))]
async fn set_screen_questions(
    _: Admin,
    State(s): State<AppState>,
    Params(id): Params<String>,
    JsonBody(q): JsonBody<OnScreen>,
) -> ApiResult<Json<ScreenChoice>> {
    Ok(Json(
        blocking(&s, move |e| e.set_on_screen(&id, &q.questions)).await?,
    ))
}

/// The FAQ with its translations side by side, and the museum's languages each entry lacks.
#[utoipa::path(get, path = "/api/v1/characters/{id}/faq", tag = "knowledge",
    params(("id" = String, Path, description = "Character id")),
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (status = 200, description = "The FAQ's entries and the museum's languages", body = FaqView),
        statuses::AdminCharacterRead,
    ))]
async fn faq(
    _: Admin,
    State(s): State<AppState>,
    Params(id): Params<String>,
) -> ApiResult<Json<FaqView>> {
    Ok(Json(
        blocking(&s, move |e| e.faq(&CharacterId::parse(&id)?)).await?,
    ))
}

/// Reads a whole body of `content_type` (415 for another: a form cannot forge it) up to the
/// FAQ's bound, and no larger than a knowledge file (which the FAQ becomes).
async fn faq_body(s: &AppState, req: Request, content_type: &str) -> ApiResult<axum::body::Bytes> {
    let limit = FAQ_MAX_BYTES.min(s.engine.config.limits.knowledge_file_bytes);
    let essence = req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(str::trim);
    if !essence.is_some_and(|t| t.eq_ignore_ascii_case(content_type)) {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("the body must be sent as Content-Type: {content_type}"),
        ));
    }
    check_length(req.headers(), limit)?;
    read_body(req.into_body(), limit).await
}

/// Replaces the FAQ (entries without an id are new) and regenerates its knowledge files.
#[utoipa::path(put, path = "/api/v1/characters/{id}/faq", tag = "knowledge",
    params(("id" = String, Path, description = "Character id")),
    request_body(content = FaqInput, content_type = "application/json"),
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (status = 200, description = "The FAQ as stored", body = FaqView),
        statuses::AdminAction,
        statuses::NoSuchCharacter,
        statuses::TooLarge,
        statuses::NotJson,
        (
            status = 400,
            description = "Invalid body, too many or too long entries, a question without its \
                answer, a question twice in one language",
            body = crate::api::schema::ErrorBody,
        ),
    ))]
async fn set_faq(
    _: Admin,
    State(s): State<AppState>,
    Params(id): Params<String>,
    req: Request,
) -> ApiResult<Json<FaqView>> {
    let bytes = faq_body(&s, req, "application/json").await?;
    let input: FaqInput = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::bad(format!("invalid JSON body: {e}")))?;
    Ok(Json(blocking(&s, move |e| e.set_faq(&id, input)).await?))
}

/// The FAQ as CSV for a translation agency: `id`, then `question:<lang>`, `answer:<lang>` per
/// language (RFC 4180, UTF-8 with a byte order mark).
#[utoipa::path(get, path = "/api/v1/characters/{id}/faq.csv", tag = "knowledge",
    params(("id" = String, Path, description = "Character id")),
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (status = 200, description = "The FAQ", content_type = "text/csv", body = String),
        statuses::AdminCharacterRead,
    ))]
async fn faq_csv(
    _: Admin,
    State(s): State<AppState>,
    Params(id): Params<String>,
) -> ApiResult<impl IntoResponse> {
    let name = format!("attachment; filename=\"faq-{id}.csv\"");
    let csv = blocking(&s, move |e| e.faq_csv(&CharacterId::parse(&id)?)).await?;
    Ok((
        [
            (CONTENT_TYPE, "text/csv; charset=utf-8".to_string()),
            (CACHE_CONTROL, "no-store".to_string()),
            (axum::http::header::CONTENT_DISPOSITION, name),
        ],
        csv,
    ))
}

/// Replaces the FAQ with a CSV file's entries (as the export writes them); a bad file is
/// refused with the line it goes wrong on, and nothing changes.
#[utoipa::path(put, path = "/api/v1/characters/{id}/faq.csv", tag = "knowledge",
    params(("id" = String, Path, description = "Character id")),
    request_body(content = String, content_type = "text/csv"),
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (status = 200, description = "The FAQ as stored", body = FaqView),
        statuses::AdminAction,
        statuses::NoSuchCharacter,
        statuses::TooLarge,
        (status = 415, description = "The body is not sent as text/csv", body = crate::api::schema::ErrorBody),
        (
            status = 400,
            description = "Not UTF-8, an unknown column, a line with too few or many fields, \
                an entry out of bounds (the error names the line)",
            body = crate::api::schema::ErrorBody,
        ),
    ))]
async fn set_faq_csv(
    _: Admin,
    State(s): State<AppState>,
    Params(id): Params<String>,
    req: Request,
) -> ApiResult<Json<FaqView>> {
    let bytes = faq_body(&s, req, "text/csv").await?;
    let text = String::from_utf8(bytes.to_vec())
        .map_err(|_| ApiError::bad("the CSV file must be UTF-8"))?;
    Ok(Json(
        blocking(&s, move |e| e.set_faq_csv(&CharacterId::parse(&id)?, &text)).await?,
    ))
}

#[utoipa::path(get, path = "/api/v1/characters/{id}/recordings", tag = "knowledge",
    params(("id" = String, Path, description = "Character id")),
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (status = 200, description = "The recorded answers, in the FAQ's order", body = Vec<RecordingView>),
        statuses::AdminCharacterRead,
    ))]
async fn recordings(
    _: Admin,
    State(s): State<AppState>,
    Params(id): Params<String>,
) -> ApiResult<Json<Vec<RecordingView>>> {
    Ok(Json(
        blocking(&s, move |e| e.recordings(&CharacterId::parse(&id)?)).await?,
    ))
}

/// Stores a recorded answer to one FAQ question (multipart: `question`, then `file`), decoded
/// and normalised first; a file the kiosk cannot play is refused and nothing is stored.
#[utoipa::path(post, path = "/api/v1/characters/{id}/recordings", tag = "knowledge",
    params(("id" = String, Path, description = "Character id")),
    request_body(content = crate::api::schema::RecordingForm, content_type = "multipart/form-data"),
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (status = 201, description = "Stored, replacing the question's earlier recording", body = RecordingView),
        statuses::AdminUpload,
    ))]
async fn upload_recording(
    _: Admin,
    State(s): State<AppState>,
    Params(id): Params<String>,
    req: Request,
) -> ApiResult<(StatusCode, Json<RecordingView>)> {
    let limit = s.engine.config.limits.recording_bytes;
    check_length(req.headers(), limit + MULTIPART_SLACK)?;
    let id = CharacterId::parse(&id)?;
    s.engine.character_record(&id)?;
    let mut form = multipart(req, &s).await?;
    let mut question: Option<String> = None;
    while let Some(mut field) = form.next_field().await.map_err(multipart_error)? {
        match field.name() {
            Some("question") => {
                let text = field.text().await.map_err(multipart_error)?;
                if text.chars().count() > 1_000 {
                    return Err(ApiError::bad("question is longer than 1000 characters"));
                }
                question = Some(text);
            }
            Some("file") => {
                let question = question
                    .take()
                    .ok_or_else(|| ApiError::bad("the \"question\" field comes before the file"))?;
                let orig_name = field.file_name().unwrap_or("").to_string();
                let mut bytes = Vec::new();
                while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
                    if bytes.len() + chunk.len() > limit {
                        return Err(ApiError::too_large(limit));
                    }
                    bytes.extend_from_slice(&chunk);
                }
                let view = blocking(&s, move |e| {
                    e.add_recording(&id, &question, &orig_name, &bytes)
                })
                .await?;
                return Ok((StatusCode::CREATED, Json(view)));
            }
            _ => {}
        }
    }
    Err(ApiError::bad("multipart field \"file\" is missing"))
}

/// A recorded answer as WAV (mono 24 kHz), for the console to play.
#[utoipa::path(get, path = "/api/v1/characters/{id}/recordings/{recording_id}", tag = "knowledge",
    params(
        ("id" = String, Path, description = "Character id"),
        ("recording_id" = String, Path, description = "Recording id"),
    ),
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (status = 200, description = "The recording", content_type = "audio/wav", body = Vec<u8>),
        statuses::AdminCharacterRead,
    ))]
async fn recording(
    _: Admin,
    State(s): State<AppState>,
    Params((id, recording_id)): Params<(String, String)>,
) -> ApiResult<impl IntoResponse> {
    let wav = blocking(&s, move |e| {
        e.recording_wav(&CharacterId::parse(&id)?, &recording_id)
    })
    .await?;
    Ok((
        [(CONTENT_TYPE, "audio/wav"), (CACHE_CONTROL, "no-store")],
        wav,
    ))
}

#[utoipa::path(delete, path = "/api/v1/characters/{id}/recordings/{recording_id}", tag = "knowledge",
    params(
        ("id" = String, Path, description = "Character id"),
        ("recording_id" = String, Path, description = "Recording id"),
    ),
    security(("admin_session" = []), ("bearer" = [])),
    responses((status = 204, description = "Deleted: the question is synthesised again"), statuses::AdminChange))]
async fn delete_recording(
    _: Admin,
    State(s): State<AppState>,
    Params((id, recording_id)): Params<(String, String)>,
) -> ApiResult<StatusCode> {
    blocking(&s, move |e| {
        e.delete_recording(&CharacterId::parse(&id)?, &recording_id)
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}
