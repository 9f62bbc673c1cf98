//! What can go wrong in an engine operation, in terms a front door can translate.

use crate::store::StoreError;

#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// The input is malformed or breaks a rule.
    BadRequest(String),
    NotFound(String),
    /// The operation conflicts with the resource's state (e.g. a finished task).
    Conflict(String),
    TooLarge(String),
    /// The caller may not do this to this resource (it belongs to another caller).
    Forbidden(String),
    /// The caller has used up its budget for now.
    TooMany(String),
    UnsupportedMedia(String),
    /// A limit or a provider is unavailable right now.
    Unavailable(String),
    /// A provider answered with an error.
    ProviderFailed(String),
    /// A provider did not answer in time.
    Timeout(String),
    /// The data partition is full: nothing was written; writes work again once space is freed.
    InsufficientStorage(String),
    /// Our fault: storage or an invariant broke.
    Internal(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (Error::BadRequest(m)
        | Error::NotFound(m)
        | Error::Conflict(m)
        | Error::TooLarge(m)
        | Error::Forbidden(m)
        | Error::TooMany(m)
        | Error::UnsupportedMedia(m)
        | Error::Unavailable(m)
        | Error::ProviderFailed(m)
        | Error::Timeout(m)
        | Error::InsufficientStorage(m)
        | Error::Internal(m)) = self;
        f.write_str(m)
    }
}

impl std::error::Error for Error {}

/// Whether an I/O error is the data partition being full: a front door that stages an upload
/// itself answers it as the engine would (507).
pub fn is_full(e: &std::io::Error) -> bool {
    crate::store::is_full(e)
}

impl From<StoreError> for Error {
    fn from(e: StoreError) -> Self {
        // Not logged here: a full partition is the caller's to report (a 507, or one line of
        // the turn whose history it could not store).
        if e.is_full() {
            return Error::InsufficientStorage(FULL.into());
        }
        tracing::error!("storage failure: {e}");
        Error::Internal("storage failure".into())
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::from(StoreError::Io(e))
    }
}

impl Error {
    /// A long write's refusal by `store::Headroom`: `InsufficientStorage` saying what had no
    /// room; any other storage failure as usual.
    pub fn no_room(e: StoreError, what: &str) -> Error {
        match e {
            StoreError::Full => Error::InsufficientStorage(format!(
                "the data partition has no room for {what} above its reserve"
            )),
            e => e.into(),
        }
    }
}

/// What a client is told when the data partition is full.
pub const FULL: &str = "the kiosk's storage is full: nothing was saved; free space (delete clips, images, knowledge or history) and try again";

pub type Result<T, E = Error> = std::result::Result<T, E>;

pub fn bad(msg: impl Into<String>) -> Error {
    Error::BadRequest(msg.into())
}

pub fn not_found(msg: impl Into<String>) -> Error {
    Error::NotFound(msg.into())
}

macro_rules! from_redb {
    ($($t:ty),*) => {$(
        impl From<$t> for Error {
            fn from(e: $t) -> Self { Error::from(StoreError::from(e)) }
        }
    )*};
}
from_redb!(
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError
);
