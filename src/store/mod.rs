//! Persistent state: one redb database plus a directory of blobs, under the data directory.
//!
//! Records are JSON values in redb tables (see `tables`), so a field can be added without a
//! migration; the schema version in `META` covers the changes that need one. Large byte payloads
//! (images, clips, knowledge files, artifacts) live in `blobs/` as files named by a random id and
//! written atomically; a record and the `BLOBS` entry of its file are committed in the same
//! transaction, and files with no entry are removed at start, so a crash leaves neither a dangling
//! reference nor a visible half-written file.

pub mod backup;
pub mod blobs;
pub mod content;
pub mod records;
pub mod tables;

use std::path::{Path, PathBuf};
use std::sync::RwLock;

use redb::{Database, ReadTransaction, ReadableDatabase, ReadableTable, WriteTransaction};
use serde::Serialize;
use serde::de::DeserializeOwned;

pub use blobs::{BlobRef, Blobs};
use tables::*;

/// The schema this build writes. Older databases are migrated by `migrate` at open.
pub const SCHEMA_VERSION: u64 = 1;

/// A failure of the storage layer: always "our fault" for the caller.
#[derive(Debug)]
pub enum StoreError {
    Db(redb::Error),
    Io(std::io::Error),
    Corrupt(String),
    /// The data partition has less free space than the reserve (or none at all): the write was
    /// refused before anything was written.
    Full,
}

impl StoreError {
    /// Whether the failure is the file system running out of space (ENOSPC, or EDQUOT for a
    /// quota): a condition that ends when space is freed, not a fault of the store.
    pub fn is_full(&self) -> bool {
        let io = match self {
            StoreError::Full => return true,
            StoreError::Io(e) => Some(e),
            StoreError::Db(redb::Error::Io(e)) => Some(e),
            StoreError::Db(_) | StoreError::Corrupt(_) => None,
        };
        io.is_some_and(is_full)
    }
}

/// Whether an I/O error says the file system (or the user's quota) is full.
pub fn is_full(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT))
        || e.kind() == std::io::ErrorKind::StorageFull
}

/// Bytes the unprivileged user may still write on the file system holding `dir`.
pub fn free_bytes(dir: &Path) -> std::io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is a NUL-terminated string and `st` a valid out-parameter.
    if unsafe { libc::statvfs(path.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(st.f_bavail as u64 * st.f_frsize as u64)
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Db(e) => write!(f, "database: {e}"),
            StoreError::Io(e) => write!(f, "file store: {e}"),
            StoreError::Corrupt(e) => write!(f, "corrupt record: {e}"),
            StoreError::Full => f.write_str("the data partition is full"),
        }
    }
}

impl std::error::Error for StoreError {}

macro_rules! from_redb {
    ($($t:ty),*) => {$(
        impl From<$t> for StoreError {
            fn from(e: $t) -> Self { StoreError::Db(e.into()) }
        }
    )*};
}
from_redb!(
    redb::Error,
    redb::DatabaseError,
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError
);

impl From<std::io::Error> for StoreError {
    fn from(e: std::io::Error) -> Self {
        StoreError::Io(e)
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// The opened data directory.
pub struct Store {
    /// The database and how many times it was opened; `None` after a reopen that failed (see
    /// `reopen`).
    db: RwLock<(u64, Option<Database>)>,
    blobs: Blobs,
    dir: PathBuf,
    cache_bytes: usize,
}

impl Store {
    /// Opens (or creates) the store in `dir`, migrates it to `SCHEMA_VERSION` and removes blob
    /// files that no committed record owns.
    pub fn open(dir: &Path, cache_bytes: usize) -> Result<Store> {
        std::fs::create_dir_all(dir)?;
        backup::apply_pending(dir)?;
        let db = open_db(dir, cache_bytes)?;
        let blobs = Blobs::open(&dir.join("blobs"))?;
        let store = Store {
            db: RwLock::new((0, Some(db))),
            blobs,
            dir: dir.to_path_buf(),
            cache_bytes,
        };
        store.migrate()?;
        store.collect_garbage()?;
        Ok(store)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Keeps `bytes` of the data partition free: a write transaction or a new blob is refused
    /// with `StoreError::Full` below it, so that the database itself never meets a full disk
    /// (where redb would fail every later read until it is reopened).
    pub fn with_reserve(mut self, bytes: u64) -> Store {
        self.blobs.reserve = bytes;
        self
    }

    pub fn blobs(&self) -> &Blobs {
        &self.blobs
    }

    pub fn read(&self) -> Result<ReadTransaction> {
        self.with_db(|db| db.begin_read())
    }

    /// Begins a write transaction if the partition still has its reserve.
    pub fn write(&self) -> Result<WriteTransaction> {
        self.blobs.check_space()?;
        self.with_db(|db| db.begin_write())
    }

    /// Runs `begin` on the database. After an I/O failure redb refuses every new write
    /// (`PreviousIo`) until the database is opened again: it is reopened here, so that freeing
    /// space is enough to recover. Opening replays redb's recovery; if it cannot run yet (the
    /// disk still full, a transaction of the failed database still alive), the next call tries
    /// again.
    fn with_db<T>(
        &self,
        begin: impl Fn(&Database) -> Result<T, redb::TransactionError>,
    ) -> Result<T> {
        let seen = {
            let db = self.db.read().unwrap_or_else(|p| p.into_inner());
            if let Some(open) = db.1.as_ref() {
                match begin(open) {
                    Err(redb::TransactionError::Storage(redb::StorageError::PreviousIo)) => {}
                    other => return Ok(other?),
                }
            }
            db.0
        };
        self.reopen(seen)?;
        let db = self.db.read().unwrap_or_else(|p| p.into_inner());
        let open = db.1.as_ref().ok_or(StoreError::Full)?;
        Ok(begin(open)?)
    }

    /// Opens the database again unless another caller already replaced generation `seen`.
    fn reopen(&self, seen: u64) -> Result<()> {
        let mut db = self.db.write().unwrap_or_else(|p| p.into_inner());
        if db.0 != seen && db.1.is_some() {
            return Ok(());
        }
        tracing::warn!("reopening the database after an I/O failure");
        db.1 = None;
        db.1 = Some(open_db(&self.dir, self.cache_bytes)?);
        db.0 += 1;
        tracing::info!("database reopened");
        Ok(())
    }

    /// Creates every table and brings an older schema up to date. A database written by a newer
    /// build is refused rather than misread.
    fn migrate(&self) -> Result<()> {
        let tx = self.write()?;
        tables::create_all(&tx)?;
        {
            let mut meta = tx.open_table(META)?;
            let found = meta.get("schema_version")?.map(|v| decode_u64(v.value()));
            match found {
                None => {
                    meta.insert("schema_version", SCHEMA_VERSION.to_be_bytes().as_slice())?;
                }
                Some(v) if v > SCHEMA_VERSION => {
                    return Err(StoreError::Corrupt(format!(
                        "data directory has schema {v}, this build understands up to {SCHEMA_VERSION}"
                    )));
                }
                Some(v) => {
                    for from in v..SCHEMA_VERSION {
                        upgrade(&tx, from)?;
                    }
                    meta.insert("schema_version", SCHEMA_VERSION.to_be_bytes().as_slice())?;
                }
            }
        }
        tx.commit()?;
        Ok(())
    }

    pub fn schema_version(&self) -> Result<u64> {
        let tx = self.read()?;
        let meta = tx.open_table(META)?;
        Ok(meta
            .get("schema_version")?
            .map(|v| decode_u64(v.value()))
            .unwrap_or(0))
    }

    fn collect_garbage(&self) -> Result<()> {
        let tx = self.read()?;
        let table = tx.open_table(BLOBS)?;
        self.blobs
            .retain(|id| table.get(id).ok().flatten().is_some())?;
        Ok(())
    }
}

fn open_db(dir: &Path, cache_bytes: usize) -> Result<Database> {
    Ok(Database::builder()
        .set_cache_size(cache_bytes)
        .create(dir.join("docent.redb"))?)
}

/// The migration hook: upgrades schema `from` to `from + 1` inside the opening transaction, so a
/// crash mid-migration leaves the old version intact. Add an arm per schema change.
fn upgrade(_tx: &WriteTransaction, from: u64) -> Result<()> {
    Err(StoreError::Corrupt(format!(
        "no migration from schema {from}"
    )))
}

fn decode_u64(bytes: &[u8]) -> u64 {
    bytes.try_into().map(u64::from_be_bytes).unwrap_or(0)
}

/// Next value of a named counter in `META`, starting at 1; part of the caller's transaction.
pub fn next_counter(tx: &WriteTransaction, name: &str) -> Result<u64> {
    let mut meta = tx.open_table(META)?;
    let next = meta.get(name)?.map(|v| decode_u64(v.value())).unwrap_or(0) + 1;
    meta.insert(name, next.to_be_bytes().as_slice())?;
    Ok(next)
}

/// Whether a one-time event (e.g. "the default character was created") already happened.
pub fn meta_flag(tx: &WriteTransaction, name: &str) -> Result<bool> {
    Ok(tx.open_table(META)?.get(name)?.is_some())
}

pub fn set_meta_flag(tx: &WriteTransaction, name: &str) -> Result<()> {
    tx.open_table(META)?.insert(name, [1u8].as_slice())?;
    Ok(())
}

/// Serialises a record for a JSON-valued table.
pub fn to_json<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).expect("records serialise")
}

/// Parses a record read from a JSON-valued table.
pub fn from_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// Reads one JSON record by string key.
pub fn get<T: DeserializeOwned>(
    table: &impl ReadableTable<&'static str, &'static [u8]>,
    key: &str,
) -> Result<Option<T>> {
    match table.get(key)? {
        Some(v) => Ok(Some(from_json(v.value())?)),
        None => Ok(None),
    }
}

/// Every JSON record whose key starts with `prefix` followed by `/`, in key order.
pub fn scan<T: DeserializeOwned>(
    table: &impl ReadableTable<&'static str, &'static [u8]>,
    prefix: &str,
) -> Result<Vec<T>> {
    let (lo, hi) = prefix_bounds(prefix);
    let mut out = Vec::new();
    for item in table.range(lo.as_str()..hi.as_str())? {
        let (_, v) = item?;
        out.push(from_json(v.value())?);
    }
    Ok(out)
}

/// Key bounds covering `"{prefix}/..."`: `'0'` is the character after `'/'`.
pub fn prefix_bounds(prefix: &str) -> (String, String) {
    (format!("{prefix}/"), format!("{prefix}0"))
}

/// Composite key of a child record; parts never contain `/` (ids, or validated names).
pub fn key(parts: &[&str]) -> String {
    parts.join("/")
}

/// Now as an RFC 3339 UTC timestamp with milliseconds.
pub fn now() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_twice_keeps_schema_and_counters() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = Store::open(dir.path(), 1 << 20).unwrap();
            let tx = store.write().unwrap();
            assert_eq!(next_counter(&tx, "c").unwrap(), 1);
            assert_eq!(next_counter(&tx, "c").unwrap(), 2);
            tx.commit().unwrap();
        }
        let store = Store::open(dir.path(), 1 << 20).unwrap();
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
        let tx = store.write().unwrap();
        assert_eq!(next_counter(&tx, "c").unwrap(), 3);
    }

    #[test]
    fn newer_schema_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = Store::open(dir.path(), 1 << 20).unwrap();
            let tx = store.write().unwrap();
            tx.open_table(META)
                .unwrap()
                .insert("schema_version", 99u64.to_be_bytes().as_slice())
                .unwrap();
            tx.commit().unwrap();
        }
        let err = Store::open(dir.path(), 1 << 20).err().unwrap();
        assert!(err.to_string().contains("schema 99"), "{err}");
    }

    #[test]
    fn prefix_scan_stays_inside_its_parent() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), 1 << 20).unwrap();
        let tx = store.write().unwrap();
        {
            let mut t = tx.open_table(IMAGES).unwrap();
            for k in ["a/1", "a/2", "ab/1", "a0", "b/1"] {
                t.insert(k, to_json(&k).as_slice()).unwrap();
            }
        }
        tx.commit().unwrap();
        let tx = store.read().unwrap();
        let t = tx.open_table(IMAGES).unwrap();
        let got: Vec<String> = scan(&t, "a").unwrap();
        assert_eq!(got, ["a/1", "a/2"]);
    }
}
