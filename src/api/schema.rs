//! The types the OpenAPI document names that are no handler's own: the error body every route
//! shares, and the schemas of raw and multipart bodies, which no Rust type describes.

use axum::http::HeaderValue;
use serde::Serialize;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, Schema, SchemaFormat, Type};
use utoipa::{PartialSchema, ToSchema};

/// `Content-Type: application/json`, built once.
pub const JSON: HeaderValue = HeaderValue::from_static("application/json");

/// The body of every JSON error answer.
#[derive(Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: String,
}

/// Raw bytes of a request or response body (`string`, `binary`).
pub enum Binary {}

impl PartialSchema for Binary {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Binary)))
            .into()
    }
}

impl ToSchema for Binary {}

/// The multipart form of an avatar upload: the image in the field `avatar`.
pub enum AvatarForm {}

impl PartialSchema for AvatarForm {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .property("avatar", Binary::schema())
            .required("avatar")
            .into()
    }
}

impl ToSchema for AvatarForm {}

/// The multipart form of a recorded answer: the FAQ question it answers, then the file (WAV,
/// FLAC, Ogg Vorbis or MP3).
pub enum RecordingForm {}

impl PartialSchema for RecordingForm {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .property("question", ObjectBuilder::new().schema_type(Type::String))
            .property("file", Binary::schema())
            .required("question")
            .required("file")
            .into()
    }
}

impl ToSchema for RecordingForm {}

/// The multipart form of a knowledge upload: files in `file` (or `files`) fields, and
/// optionally one `relative_paths` field per file, in order.
pub enum KnowledgeForm {}

impl PartialSchema for KnowledgeForm {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .property("file", Binary::schema())
            .property(
                "relative_paths",
                ObjectBuilder::new().schema_type(Type::String),
            )
            .property("language", ObjectBuilder::new().schema_type(Type::String))
            .required("file")
            .into()
    }
}

impl ToSchema for KnowledgeForm {}
