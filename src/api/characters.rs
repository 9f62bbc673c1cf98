//! Characters, their images, idle clips, knowledge and conversation history.

use axum::body::Body;
use axum::extract::{DefaultBodyLimit, FromRequest, Multipart, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use super::auth::Admin;
use super::error::{ApiError, ApiResult};
use super::extract::{JsonBody, Params, QueryArgs, check_length, read_body};
use super::{AppState, blocking, files};
use crate::config::Limits;
use crate::engine::characters::{Activation, CharacterInput, CharacterView, ImageView};
use crate::engine::knowledge::{Upload, extract::mime_for};
use crate::engine::sessions::{HistoryPage, Purge};
use crate::store::BlobRef;

/// Room for multipart framing around a file at its size bound.
const MULTIPART_SLACK: usize = 64 << 10;

pub fn routes(limits: &Limits) -> Router<AppState> {
    let clip = get(get_clip).put(put_clip).delete(delete_clip);
    Router::new()
        .route("/api/v1/characters", get(list).post(create))
        .route("/api/v1/characters/test-voice", post(test_voice))
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
        .route(
            "/api/v1/characters/{id}/conversations/messages",
            get(history).delete(purge_history),
        )
}

async fn list(State(s): State<AppState>) -> ApiResult<Response> {
    let json = s.engine.characters_json()?;
    Ok((
        [("content-type", "application/json")],
        Body::from(json.as_ref().clone()),
    )
        .into_response())
}

async fn create(
    _: Admin,
    State(s): State<AppState>,
    JsonBody(input): JsonBody<CharacterInput>,
) -> ApiResult<(StatusCode, Json<CharacterView>)> {
    let c = blocking(&s, move |e| e.create_character(input)).await?;
    Ok((StatusCode::CREATED, Json(c)))
}

async fn read(
    State(s): State<AppState>,
    Params(id): Params<String>,
) -> ApiResult<Json<CharacterView>> {
    Ok(Json(s.engine.character(&id)?))
}

async fn update(
    _: Admin,
    State(s): State<AppState>,
    Params(id): Params<String>,
    JsonBody(input): JsonBody<CharacterInput>,
) -> ApiResult<Json<CharacterView>> {
    Ok(Json(
        blocking(&s, move |e| e.update_character(&id, input)).await?,
    ))
}

async fn remove(
    _: Admin,
    State(s): State<AppState>,
    Params(id): Params<String>,
) -> ApiResult<StatusCode> {
    blocking(&s, move |e| e.delete_character(&id)).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
struct VoiceTest {
    #[serde(default)]
    voice_provider: String,
    #[serde(default)]
    voice_type: String,
}

async fn test_voice(
    _: Admin,
    State(s): State<AppState>,
    JsonBody(body): JsonBody<VoiceTest>,
) -> ApiResult<Json<Value>> {
    s.engine
        .test_voice(&body.voice_provider, &body.voice_type)
        .await?;
    Ok(Json(json!({ "status": "ok" })))
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

async fn upload_avatar(
    _: Admin,
    State(s): State<AppState>,
    Params(id): Params<String>,
    req: Request,
) -> ApiResult<Json<Value>> {
    let limit = s.engine.config.limits.image_bytes;
    check_length(req.headers(), limit + MULTIPART_SLACK)?;
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

async fn images(
    State(s): State<AppState>,
    Params(id): Params<String>,
) -> ApiResult<Json<Vec<ImageView>>> {
    Ok(Json(s.engine.images(&id)?))
}

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

async fn delete_image(
    _: Admin,
    State(s): State<AppState>,
    Params((id, filename)): Params<(String, String)>,
) -> ApiResult<StatusCode> {
    blocking(&s, move |e| e.delete_image(&id, &filename)).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn activate(
    _: Admin,
    State(s): State<AppState>,
    Params((id, filename)): Params<(String, String)>,
) -> ApiResult<Json<Activation>> {
    Ok(Json(
        blocking(&s, move |e| e.activate_image(&id, &filename)).await?,
    ))
}

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
        Json(
            json!({ "imgbase": clip.imgbase, "variant": clip.variant, "filename": clip.filename, "size": clip.blob.size }),
        ),
    ))
}

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

async fn knowledge(
    _: Admin,
    State(s): State<AppState>,
    Params(id): Params<String>,
) -> ApiResult<Json<Value>> {
    let sources = s.engine.sources(&id)?;
    Ok(Json(json!({ "sources": sources })))
}

/// Receives knowledge files, streaming each to a staged blob so that a large upload never sits
/// in memory; any failure discards every file of the request.
async fn upload_knowledge(
    _: Admin,
    State(s): State<AppState>,
    Params(id): Params<String>,
    req: Request,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let limits = s.engine.config.limits.clone();
    check_length(req.headers(), limits.knowledge_request_bytes)?;
    s.engine.sources(&id)?;
    let mut staged: Vec<(String, BlobRef)> = Vec::new();
    let received = receive_files(req, &s, &limits, &mut staged).await;
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
            _ => {}
        }
    }
    Ok(paths)
}

fn io_error(e: std::io::Error) -> ApiError {
    if crate::store::is_full(&e) {
        return crate::engine::Error::from(e).into();
    }
    tracing::error!("cannot stage an upload: {e}");
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "cannot store the upload")
}

async fn delete_source(
    _: Admin,
    State(s): State<AppState>,
    Params((id, source_id)): Params<(String, String)>,
) -> ApiResult<StatusCode> {
    blocking(&s, move |e| e.delete_source(&id, &source_id)).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn reindex(
    _: Admin,
    State(s): State<AppState>,
    Params((id, source_id)): Params<(String, String)>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let source = blocking(&s, move |e| e.reindex_source(&id, &source_id)).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(serde_json::to_value(source).expect("source serialises")),
    ))
}

#[derive(Deserialize)]
struct HistoryQuery {
    limit: Option<usize>,
    before: Option<String>,
}

async fn history(
    _: Admin,
    State(s): State<AppState>,
    Params(id): Params<String>,
    QueryArgs(q): QueryArgs<HistoryQuery>,
) -> ApiResult<Json<HistoryPage>> {
    Ok(Json(s.engine.history(&id, q.limit, q.before.as_deref())?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PurgeQuery {
    session_id: Option<String>,
    before_date: Option<String>,
}

/// Removes the whole history of a character, one session's messages, or those before a date.
async fn purge_history(
    _: Admin,
    State(s): State<AppState>,
    Params(id): Params<String>,
    QueryArgs(q): QueryArgs<PurgeQuery>,
) -> ApiResult<Json<Value>> {
    let purge = Purge::parse(q.session_id.as_deref(), q.before_date.as_deref())?;
    let deleted = blocking(&s, move |e| e.purge_history(&id, &purge)).await?;
    Ok(Json(json!({ "deleted": deleted })))
}
