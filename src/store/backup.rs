//! The data directory as a whole: a consistent copy of the database while the kiosk runs, the
//! check of a database that is to replace ours, and the swap of a staged restore at start.
//!
//! A restore is staged in `restore-staging/` and committed by one rename to `restore-pending/`
//! (then the directory is fsynced). `apply_pending` runs before the database is opened: it moves
//! the staged blob files into `blobs/`, renames the staged database over `docent.redb` and removes
//! the directory. Each step can be repeated, so a crash anywhere leaves either the old data (not yet
//! committed) or the new data (finished at the next start); the old blob files, owned by no record
//! of the new database, are removed by the usual sweep at open.

use std::fs;
use std::path::{Path, PathBuf};

use redb::{
    Database, ReadTransaction, ReadableDatabase, ReadableTable, ReadableTableMetadata,
    TableDefinition, TableHandle,
};

use super::blobs::BlobRef;
use super::tables::{self, ADMIN_SESSIONS, BLOBS, CHARACTERS, LOGIN_FAILURES, META, Visit};
use super::{Result, SCHEMA_VERSION, Store, StoreError, decode_u64, from_json};

/// File name of the database in the data directory (and in a backup).
pub const DATABASE: &str = "docent.redb";
/// Where a restore is written before it is committed.
pub const STAGING: &str = "restore-staging";
/// A committed restore, applied at the next start.
pub const PENDING: &str = "restore-pending";

/// Whether a blob id has the one form the store issues (32 lowercase hex digits), so that it can
/// be used as a file name.
pub fn is_blob_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Tables left out of a backup: sessions and failed-login counts belong to this kiosk's run.
fn ephemeral(name: &str) -> bool {
    name == ADMIN_SESSIONS.name() || name == LOGIN_FAILURES.name()
}

impl Store {
    /// Writes a fresh database at `dest` with every record of one read transaction (so it is
    /// consistent while writes go on) and returns the blob files that copy owns.
    pub fn snapshot(&self, dest: &Path) -> Result<Vec<BlobRef>> {
        let read = self.read()?;
        let copy = Database::builder().set_cache_size(4 << 20).create(dest)?;
        let write = copy.begin_write()?;
        struct Copy<'a> {
            from: &'a ReadTransaction,
            to: &'a redb::WriteTransaction,
        }
        impl Visit for Copy<'_> {
            fn visit<K: redb::Key + 'static, V: redb::Value + 'static>(
                &mut self,
                def: TableDefinition<K, V>,
            ) -> Result<()> {
                let mut to = self.to.open_table(def)?;
                if ephemeral(def.name()) {
                    return Ok(());
                }
                for item in self.from.open_table(def)?.iter()? {
                    let (k, v) = item?;
                    to.insert(k.value(), v.value())?;
                }
                Ok(())
            }
        }
        tables::each(&mut Copy {
            from: &read,
            to: &write,
        })?;
        write.commit()?;
        let mut owned = Vec::new();
        for item in read.open_table(BLOBS)?.iter()? {
            let (_, v) = item?;
            owned.push(from_json::<BlobRef>(v.value())?);
        }
        Ok(owned)
    }

    /// The directory that holds a committed restore until the next start.
    pub fn staging_dir(&self) -> PathBuf {
        self.dir.join(STAGING)
    }

    /// Commits the restore staged in `staging_dir()`: after this rename the next start applies it.
    /// What belongs to a run (administrator sessions, failed-login counts) is never restored, even
    /// from an archive that holds some: it is emptied in the staged database first.
    pub fn commit_restore(&self) -> Result<()> {
        let staging = self.staging_dir();
        let db = staging.join(DATABASE);
        if db.exists() {
            forget_ephemeral(&db)?;
        }
        fs::File::open(staging.join("blobs"))?.sync_all()?;
        fs::File::open(&staging)?.sync_all()?;
        let pending = self.dir.join(PENDING);
        if pending.exists() {
            fs::remove_dir_all(&pending)?;
        }
        fs::rename(self.staging_dir(), &pending)?;
        fs::File::open(&self.dir)?.sync_all()?;
        Ok(())
    }
}

/// Empties the tables that belong to a run (see `ephemeral`) in the database at `path`.
fn forget_ephemeral(path: &Path) -> Result<()> {
    let db = Database::builder().set_cache_size(4 << 20).open(path)?;
    let tx = db.begin_write()?;
    tx.open_table(ADMIN_SESSIONS)?.retain(|_, _| false)?;
    tx.open_table(LOGIN_FAILURES)?.retain(|_, _| false)?;
    tx.commit()?;
    Ok(())
}

/// What a database that passed [`check_database`] holds: what the restore needs and what the
/// administrator is told.
#[derive(Debug, PartialEq)]
pub struct Checked {
    /// The blobs it owns.
    pub blobs: Vec<BlobRef>,
    pub characters: u64,
}

/// Opens the database at `path` (a restore's) and checks that this build can use it: every table
/// of the schema is there with its types, the schema version is one this build knows, and the
/// blob index parses, with ids of the form the store issues.
pub fn check_database(path: &Path) -> Result<Checked, String> {
    let db = Database::builder()
        .set_cache_size(4 << 20)
        .open(path)
        .map_err(|e| format!("the database does not open: {e}"))?;
    let read = db
        .begin_read()
        .map_err(|e| format!("the database cannot be read: {e}"))?;
    struct Check<'a>(&'a ReadTransaction);
    impl Visit for Check<'_> {
        fn visit<K: redb::Key + 'static, V: redb::Value + 'static>(
            &mut self,
            def: TableDefinition<K, V>,
        ) -> Result<()> {
            let table = match self.0.open_table(def) {
                Ok(table) => table,
                // A table this build added since the backup was made: the start after the
                // restore creates it empty.
                Err(redb::TableError::TableDoesNotExist(_)) => return Ok(()),
                Err(e) => {
                    return Err(StoreError::Corrupt(format!("table {}: {e}", def.name())));
                }
            };
            // Reading every entry proves the pages are sound.
            for item in table.iter()? {
                item?;
            }
            Ok(())
        }
    }
    tables::each(&mut Check(&read)).map_err(|e| format!("the database is not a kiosk's: {e}"))?;
    let meta = read.open_table(META).map_err(|e| e.to_string())?;
    let version = meta
        .get("schema_version")
        .map_err(|e| e.to_string())?
        .map(|v| decode_u64(v.value()));
    match version {
        Some(v) if (1..=SCHEMA_VERSION).contains(&v) => {}
        Some(v) => {
            return Err(format!(
                "the database has schema version {v}; this build knows 1 to {SCHEMA_VERSION}"
            ));
        }
        None => return Err("the database has no schema version".into()),
    }
    let mut owned = Vec::new();
    let blobs = read.open_table(BLOBS).map_err(|e| e.to_string())?;
    for item in blobs.iter().map_err(|e| e.to_string())? {
        let (k, v) = item.map_err(|e| e.to_string())?;
        let blob: BlobRef = from_json(v.value()).map_err(|e| format!("blob index entry: {e}"))?;
        if blob.id != k.value() || !is_blob_id(&blob.id) {
            return Err(format!("blob index entry {:?} is malformed", k.value()));
        }
        owned.push(blob);
    }
    let characters = read
        .open_table(CHARACTERS)
        .map_err(|e| e.to_string())?
        .len()
        .map_err(|e| e.to_string())?;
    Ok(Checked {
        blobs: owned,
        characters,
    })
}

/// Finishes a committed restore (see the module's documentation); nothing to do without one.
pub fn apply_pending(dir: &Path) -> Result<()> {
    let pending = dir.join(PENDING);
    if !pending.is_dir() {
        return Ok(());
    }
    let blobs = dir.join("blobs");
    fs::create_dir_all(&blobs)?;
    let staged = pending.join("blobs");
    if staged.is_dir() {
        for entry in fs::read_dir(&staged)? {
            let entry = entry?;
            let name = entry.file_name();
            let Some(id) = name.to_str().filter(|n| is_blob_id(n)) else {
                continue;
            };
            fs::rename(entry.path(), blobs.join(id))?;
        }
        fs::File::open(&blobs)?.sync_all()?;
    }
    let db = pending.join(DATABASE);
    if db.exists() {
        fs::rename(&db, dir.join(DATABASE))?;
        fs::File::open(dir)?.sync_all()?;
    }
    fs::remove_dir_all(&pending)?;
    tracing::info!("a restored backup is now in force");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_is_a_database_this_build_accepts() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), 1 << 20).unwrap();
        let blob = store.blobs().put(b"hello", "text/plain").unwrap();
        let tx = store.write().unwrap();
        crate::store::blobs::register(&tx, &blob).unwrap();
        tx.open_table(CHARACTERS)
            .unwrap()
            .insert("c", b"{}".as_slice())
            .unwrap();
        tx.open_table(ADMIN_SESSIONS)
            .unwrap()
            .insert("s", b"{}".as_slice())
            .unwrap();
        tx.commit().unwrap();
        let out = dir.path().join("copy.redb");
        let owned = store.snapshot(&out).unwrap();
        assert_eq!(owned, std::slice::from_ref(&blob));
        assert_eq!(
            check_database(&out).unwrap(),
            Checked {
                blobs: vec![blob],
                characters: 1
            }
        );
        let copy = Database::open(&out).unwrap();
        let read = copy.begin_read().unwrap();
        assert!(
            read.open_table(CHARACTERS)
                .unwrap()
                .get("c")
                .unwrap()
                .is_some()
        );
        assert!(read.open_table(ADMIN_SESSIONS).unwrap().is_empty().unwrap());
    }

    #[test]
    fn a_restore_never_brings_sessions_or_failed_logins() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), 1 << 20).unwrap();
        let staging = store.staging_dir();
        fs::create_dir_all(staging.join("blobs")).unwrap();
        // A crafted archive's database: an administrator session and a cleared failure count.
        {
            let db = Database::create(staging.join(DATABASE)).unwrap();
            let tx = db.begin_write().unwrap();
            tables::create_all(&tx).unwrap();
            tx.open_table(ADMIN_SESSIONS)
                .unwrap()
                .insert("planted", b"{}".as_slice())
                .unwrap();
            tx.open_table(LOGIN_FAILURES)
                .unwrap()
                .insert("10.0.0.9", b"{}".as_slice())
                .unwrap();
            tx.open_table(CHARACTERS)
                .unwrap()
                .insert("c", b"{}".as_slice())
                .unwrap();
            tx.commit().unwrap();
        }
        store.commit_restore().unwrap();
        let db = Database::open(dir.path().join(PENDING).join(DATABASE)).unwrap();
        let read = db.begin_read().unwrap();
        assert!(read.open_table(ADMIN_SESSIONS).unwrap().is_empty().unwrap());
        assert!(read.open_table(LOGIN_FAILURES).unwrap().is_empty().unwrap());
        assert_eq!(read.open_table(CHARACTERS).unwrap().len().unwrap(), 1);
    }

    /// A backup made before a table was added (availability) restores: the table is made at the
    /// next start. A table of the wrong types is still refused.
    #[test]
    fn a_backup_from_before_a_table_was_added_is_accepted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(DATABASE);
        let write = |f: &dyn Fn(&redb::WriteTransaction)| {
            let db = Database::create(&path).unwrap();
            let tx = db.begin_write().unwrap();
            tables::create_all(&tx).unwrap();
            tx.open_table(META)
                .unwrap()
                .insert("schema_version", SCHEMA_VERSION.to_be_bytes().as_slice())
                .unwrap();
            f(&tx);
            tx.commit().unwrap();
        };
        write(&|tx| {
            tx.delete_table(tables::AVAILABILITY).unwrap();
        });
        assert!(check_database(&path).is_ok());
        std::fs::remove_file(&path).unwrap();
        write(&|tx| {
            tx.delete_table(tables::AVAILABILITY).unwrap();
            let wrong: redb::TableDefinition<u64, u64> = redb::TableDefinition::new("availability");
            tx.open_table(wrong).unwrap().insert(1, 2).unwrap();
        });
        let refused = check_database(&path).err().unwrap();
        assert!(refused.contains("table availability"), "{refused}");
    }

    #[test]
    fn blob_ids_are_only_the_issued_form() {
        assert!(is_blob_id("0123456789abcdef0123456789abcdef"));
        for bad in [
            "",
            "..",
            "0123456789ABCDEF0123456789abcdef",
            "../../etc/passwd",
        ] {
            assert!(!is_blob_id(bad), "{bad}");
        }
    }
}
