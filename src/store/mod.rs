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
pub mod space;
pub mod tables;

use std::path::{Path, PathBuf};
use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};

use redb::{Database, ReadTransaction, ReadableDatabase, ReadableTable, WriteTransaction};
use serde::Serialize;
use serde::de::DeserializeOwned;

pub use blobs::{BlobRef, Blobs};
pub use space::Headroom;
use tables::*;

/// The schema this build writes. Older databases are migrated by `migrate` at open.
pub const SCHEMA_VERSION: u64 = 1;

/// A schema a build understands: its version and how to bring each older one up to it.
pub struct Schema {
    pub version: u64,
    /// Upgrades schema `from` to `from + 1` inside the opening transaction.
    pub upgrade: fn(&WriteTransaction, u64) -> Result<()>,
}

/// This build's schema.
pub const CURRENT: Schema = Schema {
    version: SCHEMA_VERSION,
    upgrade,
};

const DB_FILE: &str = "docent.redb";

/// The copy of the database kept before it was migrated from schema `version`: a build that
/// only knows `version` opens it after a fallback (docs/updates.md, "Data across versions").
fn copy_name(version: u64) -> String {
    format!("docent-schema-{version}.redb")
}

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
    /// Set when this start opened the copy kept before a newer version migrated the data.
    pub fell_back: Option<String>,
    /// Write transactions committed since the store was opened ([`Store::version`]).
    commits: AtomicU64,
}

/// A write transaction of the store. Committing it through [`Write::commit`] moves
/// [`Store::version`] on, so that what is derived from the data can be cached against it.
pub struct Write<'a> {
    tx: WriteTransaction,
    commits: &'a AtomicU64,
}

impl Write<'_> {
    pub fn commit(self) -> std::result::Result<(), redb::CommitError> {
        self.tx.commit()?;
        self.commits.fetch_add(1, Ordering::Release);
        Ok(())
    }
}

impl std::ops::Deref for Write<'_> {
    type Target = WriteTransaction;

    fn deref(&self) -> &WriteTransaction {
        &self.tx
    }
}

impl Store {
    /// Opens (or creates) the store in `dir`, migrates it to `SCHEMA_VERSION` and removes blob
    /// files that no committed record owns.
    pub fn open(dir: &Path, cache_bytes: usize) -> Result<Store> {
        Store::open_as(dir, cache_bytes, &CURRENT)
    }

    /// `open` for a build that knows `schema`. Before migrating, the database is copied; a
    /// database of a newer schema is replaced by the copy kept before that migration, when
    /// there is one (the newer database is kept beside it).
    pub fn open_as(dir: &Path, cache_bytes: usize, schema: &Schema) -> Result<Store> {
        std::fs::create_dir_all(dir)?;
        backup::apply_pending(dir)?;
        let mut db = open_db(dir, cache_bytes)?;
        let mut fell_back = None;
        match stored_schema(&db)? {
            Some(v) if v < schema.version => {
                drop(db);
                keep_copy(dir, v)?;
                db = open_db(dir, cache_bytes)?;
            }
            Some(v) if v > schema.version && dir.join(copy_name(schema.version)).exists() => {
                drop(db);
                let newer = copy_name(v);
                std::fs::rename(dir.join(DB_FILE), dir.join(&newer))?;
                std::fs::copy(dir.join(copy_name(schema.version)), dir.join(DB_FILE))?;
                std::fs::File::open(dir.join(DB_FILE))?.sync_all()?;
                std::fs::File::open(dir)?.sync_all()?;
                let note = format!(
                    "the data had schema {v}, written by a newer version; this version opened the copy \
                     kept before that migration (schema {}): changes made since are set aside in {newer}",
                    schema.version
                );
                tracing::warn!("{note}");
                fell_back = Some(note);
                db = open_db(dir, cache_bytes)?;
            }
            _ => {}
        }
        let blobs = Blobs::open(&dir.join("blobs"))?;
        let store = Store {
            db: RwLock::new((0, Some(db))),
            blobs,
            dir: dir.to_path_buf(),
            cache_bytes,
            fell_back,
            commits: AtomicU64::new(0),
        };
        store.migrate(schema)?;
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
    pub fn write(&self) -> Result<Write<'_>> {
        self.blobs.check_space()?;
        let tx = self.with_db(|db| db.begin_write())?;
        Ok(Write {
            tx,
            commits: &self.commits,
        })
    }

    /// A number that changes whenever a write transaction commits. A value derived from the
    /// data and kept with the version read *before* reading the data is still true while the
    /// version is the same.
    pub fn version(&self) -> u64 {
        self.commits.load(Ordering::Acquire)
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
    fn migrate(&self, schema: &Schema) -> Result<()> {
        let tx = self.write()?;
        tables::create_all(&tx)?;
        {
            let mut meta = tx.open_table(META)?;
            let found = meta.get("schema_version")?.map(|v| decode_u64(v.value()));
            match found {
                None => {
                    meta.insert("schema_version", schema.version.to_be_bytes().as_slice())?;
                }
                Some(v) if v > schema.version => {
                    return Err(StoreError::Corrupt(format!(
                        "data directory has schema {v}, this build understands up to {} and has no copy of it",
                        schema.version
                    )));
                }
                Some(v) => {
                    for from in v..schema.version {
                        (schema.upgrade)(&tx, from)?;
                    }
                    meta.insert("schema_version", schema.version.to_be_bytes().as_slice())?;
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
        .create(dir.join(DB_FILE))?)
}

/// The schema version recorded in the database (`None` for a new one).
fn stored_schema(db: &Database) -> Result<Option<u64>> {
    let tx = db.begin_read()?;
    let meta = match tx.open_table(META) {
        Ok(t) => t,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    Ok(meta.get("schema_version")?.map(|v| decode_u64(v.value())))
}

/// Copies the database (closed) before a migration from `version`, synced, under the reserve:
/// a migration with no room for its copy does not happen.
fn keep_copy(dir: &Path, version: u64) -> Result<()> {
    let size = std::fs::metadata(dir.join(DB_FILE))?.len();
    if free_bytes(dir)? < size.saturating_mul(2) {
        return Err(StoreError::Full);
    }
    let tmp = dir.join(format!("{}.tmp", copy_name(version)));
    std::fs::copy(dir.join(DB_FILE), &tmp)?;
    std::fs::File::open(&tmp)?.sync_all()?;
    std::fs::rename(&tmp, dir.join(copy_name(version)))?;
    std::fs::File::open(dir)?.sync_all()?;
    tracing::info!("kept a copy of the data at schema {version} before migrating it");
    Ok(())
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

    fn noop_upgrade(_: &WriteTransaction, _: u64) -> Result<()> {
        Ok(())
    }

    fn counter(store: &Store) -> u64 {
        let tx = store.write().unwrap();
        let n = next_counter(&tx, "c").unwrap();
        tx.commit().unwrap();
        n
    }

    #[test]
    fn a_fallback_after_a_migration_opens_the_copy_kept_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let next = Schema {
            version: SCHEMA_VERSION + 1,
            upgrade: noop_upgrade,
        };
        {
            let old = Store::open(dir.path(), 1 << 20).unwrap();
            assert_eq!(counter(&old), 1);
        }
        {
            // The newer build migrates, keeping a copy, then writes.
            let new = Store::open_as(dir.path(), 1 << 20, &next).unwrap();
            assert_eq!(new.schema_version().unwrap(), SCHEMA_VERSION + 1);
            assert!(dir.path().join(copy_name(SCHEMA_VERSION)).exists());
            assert_eq!(counter(&new), 2);
            assert!(new.fell_back.is_none());
        }
        // Back on the old build: it opens its copy, not the newer data, and says so.
        let old = Store::open(dir.path(), 1 << 20).unwrap();
        assert_eq!(old.schema_version().unwrap(), SCHEMA_VERSION);
        let note = old.fell_back.clone().expect("the fallback is reported");
        assert!(
            note.contains(&format!("schema {}", SCHEMA_VERSION + 1)),
            "{note}"
        );
        assert_eq!(
            counter(&old),
            2,
            "the write made on the newer version is the price"
        );
        assert!(dir.path().join(copy_name(SCHEMA_VERSION + 1)).exists());
        drop(old);
        // Updating again migrates again from the old build's data.
        let new = Store::open_as(dir.path(), 1 << 20, &next).unwrap();
        assert_eq!(counter(&new), 3);
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
