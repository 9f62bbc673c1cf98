//! The answers the routes document in common (mostly errors), each declared once as a type, and
//! the sets of them that kinds of routes share (an admin JSON write, a client's read, an internal
//! write, a stored image...). A route's `#[utoipa::path]` lists its own answers and names its
//! set, so the attribute says what the route gives and who is refused, not the same statuses
//! spelled out again. An answer only one route gives stays written at that route.

use std::collections::BTreeMap;

use utoipa::IntoResponses;
use utoipa::openapi::content::ContentBuilder;
use utoipa::openapi::response::{Response, ResponseBuilder};
use utoipa::openapi::{Ref, RefOr, Type};

use super::schema::{Binary, ErrorBody};

type Answers = BTreeMap<String, RefOr<Response>>;

/// One answer: `status` with `description` and a body of `content_type` and `schema`.
fn answer(
    status: u16,
    description: &str,
    content_type: &str,
    schema: RefOr<utoipa::openapi::Schema>,
) -> Answers {
    let content = ContentBuilder::new().schema(Some(schema)).build();
    let response = ResponseBuilder::new()
        .description(description)
        .content(content_type, content)
        .build();
    BTreeMap::from([(status.to_string(), RefOr::T(response))])
}

/// A JSON error answer: `{"error": "..."}`.
fn json_error(status: u16, description: &str) -> Answers {
    let schema = Ref::from_schema_name(<ErrorBody as utoipa::ToSchema>::name());
    answer(status, description, "application/json", RefOr::Ref(schema))
}

/// A short text/plain error answer (the file routes).
fn text_error(status: u16, description: &str) -> Answers {
    let schema = utoipa::openapi::ObjectBuilder::new()
        .schema_type(Type::String)
        .into();
    answer(status, description, "text/plain", schema)
}

/// Bytes of a stored file of `content_type` (a range of them for 206).
fn file(status: u16, description: &str, content_type: &str) -> Answers {
    let schema = Ref::from_schema_name(<Binary as utoipa::ToSchema>::name());
    answer(status, description, content_type, RefOr::Ref(schema))
}

/// An answer without a body.
fn empty(status: u16, description: &str) -> Answers {
    let response = ResponseBuilder::new().description(description).build();
    BTreeMap::from([(status.to_string(), RefOr::T(response))])
}

/// Declares answers, each a type: `Name = kind status, "description"` (and the content type for
/// `file`), `kind` the function above that builds it.
macro_rules! answers {
    ($($(#[$doc:meta])* $name:ident = $kind:ident $status:literal, $($arg:literal),+;)+) => {$(
        $(#[$doc])*
        pub enum $name {}

        impl IntoResponses for $name {
            fn responses() -> Answers {
                $kind($status, $($arg),+)
            }
        }
    )+};
}

/// Declares sets of answers: `Name = Part, Part, ...;`, each part an answer or a set.
macro_rules! sets {
    ($($(#[$doc:meta])* $name:ident = $($part:ident),+;)+) => {$(
        $(#[$doc])*
        pub enum $name {}

        impl IntoResponses for $name {
            fn responses() -> Answers {
                let mut all = Answers::new();
                $(all.extend(<$part as IntoResponses>::responses());)+
                all
            }
        }
    )+};
}

answers! {
    StoredImage = file 200, "The image", "image/*";
    ImageRange = file 206, "A byte range", "image/*";
    NotModified = empty 304, "Not modified";
    InvalidBody = json_error 400, "Invalid body or parameter";
    InvalidParam = json_error 400, "Invalid parameter";
    NotAdmin = json_error 401, "Not an administrator (setup mode: not trusted loopback)";
    NotClient = json_error 401, "Not a conversation client";
    NotInternal = json_error 401, "Neither loopback nor the internal token";
    CrossOriginWrite = json_error 403, "A write authenticated by the session cookie from another origin";
    NotOwner = json_error 403, "Not the session's owner";
    NotOwnerOrCrossOrigin = json_error 403, "Not the session's owner, or a cookie write from another origin";
    NoSuchResource = json_error 404, "No such resource";
    NoSuchCharacter = json_error 404, "No such character";
    NotSimulated = json_error 409, "The display is not simulated";
    TooLarge = json_error 413, "Body too large";
    NotJson = json_error 415, "Body not sent as Content-Type: application/json";
    NoImageStore = json_error 500, "The image store is not configured";
    /// The file routes answer errors in short text.
    InvalidName = text_error 400, "Invalid name";
    NoSuchImage = text_error 404, "No such image";
    RangeNotSatisfiable = text_error 416, "Range not satisfiable";
    NoImageStoreText = text_error 500, "The image store is not configured";
}

sets! {
    /// An administrator's action without a body (or with one that cannot be refused).
    AdminAction = NotAdmin, CrossOriginWrite;
    /// An administrator's write: a body or parameter that may be refused.
    AdminWrite = InvalidBody, NotAdmin, CrossOriginWrite;
    /// An administrator's JSON body, bounded in size.
    AdminJsonWrite = AdminWrite, TooLarge, NotJson;
    /// An administrator's JSON body on a resource named in the path.
    AdminJsonUpdate = AdminJsonWrite, NoSuchResource;
    /// An administrator's upload (not JSON: each route says what type it refuses) to a
    /// resource named in the path.
    AdminUpload = AdminWrite, NoSuchResource, TooLarge;
    /// An administrator's change (activate, delete) of a resource named in the path.
    AdminChange = InvalidParam, NotAdmin, CrossOriginWrite, NoSuchResource;
    /// An administrator's read of a character's records.
    AdminCharacterRead = InvalidParam, NotAdmin, NoSuchCharacter;
    /// A read of a resource named in the path, open to every caller the route lets in.
    PublicRead = InvalidParam, NoSuchResource;
    /// A conversation client's read of a resource named in the path.
    ClientRead = InvalidParam, NotClient, NoSuchResource;
    /// A conversation client's JSON body on a resource named in the path.
    ClientJsonWrite = InvalidBody, NotClient, NoSuchResource, TooLarge, NotJson;
    /// An internal caller's JSON body on a resource named in the path.
    InternalJsonWrite = InvalidBody, NotInternal, NoSuchResource, TooLarge, NotJson;
    /// A stored file's errors but its 404 (each route says what it did not find).
    FileErrors = InvalidName, RangeNotSatisfiable;
    /// A stored image, with ETag/304 and byte ranges.
    ImageFile = StoredImage, ImageRange, NotModified, FileErrors, NoSuchImage;
}
