//! Backup and restore of the whole data directory, and the restart that a restore (or an
//! administrator) asks for.
//!
//! A backup is a tar archive of exactly these members, in this order: `docent-backup.json` (the
//! format, its version and the schema version), `docent.redb` (every table but the sessions and
//! failed logins, copied inside one read transaction into a fresh database) and `blobs/<id>` for
//! every blob file that copy owns. A restore reads such an archive entry by entry, refusing
//! anything else (another name, a link, a directory, a duplicate, too many entries), checks the
//! database and every blob (present, size and SHA-256 as recorded) and only then commits it; it
//! is applied at the next start (see `store::backup`). A name from the archive is only ever
//! compared, never used as a path: staged files get names built from checked blob ids.

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::Engine;
use super::error::{Error, Result, bad};
use crate::store::backup::{DATABASE, check_database, is_blob_id};
use crate::store::blobs::hex;
use crate::store::{self, BlobRef};

/// Name of the archive's first member.
pub const MANIFEST: &str = "docent-backup.json";
const FORMAT: &str = "docent-backup";
const FORMAT_VERSION: u32 = 1;
/// Largest manifest read.
const MANIFEST_BYTES: u64 = 64 << 10;
/// Times a backup starts over when a blob is removed between the copy and its link.
const ATTEMPTS: usize = 3;

#[derive(Serialize, Deserialize)]
struct Manifest {
    format: String,
    version: u32,
    schema_version: u64,
    created: String,
    blobs: usize,
}

/// What a checked, committed restore holds.
#[derive(Debug, Serialize)]
pub struct Restored {
    /// When the backup was written (RFC 3339, from its manifest).
    pub created: String,
    pub characters: u64,
    pub blobs: usize,
    pub bytes: u64,
}

impl Engine {
    /// Writes a backup archive of the data directory to `out` (see the module's documentation).
    /// One backup or restore at a time: `Conflict` while another runs.
    pub fn write_backup(&self, out: impl Write) -> Result<()> {
        self.write_archive(out, |_| Ok(()))
    }

    /// A backup archive of the data directory after `adjust` changed the database copy (it
    /// may drop tables and blobs: the archive holds the blobs the adjusted copy owns).
    pub(super) fn write_archive(
        &self,
        out: impl Write,
        adjust: impl FnOnce(&Path) -> Result<()>,
    ) -> Result<()> {
        let _one = self.maintenance_lock()?;
        // The database copy is written on the data partition: not into its reserve.
        self.check_reserve()?;
        let work = tempfile_dir(&self.scratch_dir(), "backup")?;
        let (db, _) = self.snapshot_into(work.path())?;
        adjust(&db)?;
        let blobs = crate::store::backup::check_database(&db)
            .map_err(Error::Internal)?
            .blobs;
        let manifest = Manifest {
            format: FORMAT.into(),
            version: FORMAT_VERSION,
            schema_version: crate::store::SCHEMA_VERSION,
            created: store::now(),
            blobs: blobs.len(),
        };
        let mut tar = tar::Builder::new(out);
        let json = serde_json::to_vec_pretty(&manifest).expect("manifest serialises");
        append(&mut tar, MANIFEST, json.len() as u64, json.as_slice())?;
        let file = File::open(&db)?;
        append(&mut tar, DATABASE, file.metadata()?.len(), file)?;
        for blob in &blobs {
            let file = File::open(work.path().join(&blob.id))?;
            let len = file.metadata()?.len();
            append(&mut tar, &format!("blobs/{}", blob.id), len, file)?;
        }
        tar.into_inner()?.flush()?;
        Ok(())
    }

    /// The database copy and a hard link to every blob it owns, in `dir`: the copy starts over
    /// when a blob it names was removed before it could be linked.
    fn snapshot_into(&self, dir: &Path) -> Result<(std::path::PathBuf, Vec<BlobRef>)> {
        let db = dir.join(DATABASE);
        for _ in 0..ATTEMPTS {
            let _ = fs::remove_file(&db);
            let blobs = self.store.snapshot(&db)?;
            let mut complete = true;
            for blob in &blobs {
                let link = dir.join(&blob.id);
                if link.exists() {
                    continue;
                }
                match self.store.blobs().link_to(blob, &link) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => complete = false,
                    Err(e) => return Err(e.into()),
                }
            }
            if complete {
                return Ok((db, blobs));
            }
        }
        Err(Error::Conflict(
            "the data changed too fast to be copied; try again".into(),
        ))
    }

    /// Checks the backup archive in `archive` completely and stages it; when everything checks
    /// out, commits it for the next start. A bad archive changes nothing and the error says why.
    pub fn restore_backup(&self, archive: &Path) -> Result<Restored> {
        self.restore_with(archive, |_| Ok(()))
    }

    /// `restore_backup`, with `adjust` run on the staging directory once everything checked
    /// out and before the commit (a content bundle brings back this kiosk's own records there).
    pub(super) fn restore_with(
        &self,
        archive: &Path,
        adjust: impl FnOnce(&Path) -> Result<()>,
    ) -> Result<Restored> {
        let _one = self.maintenance_lock()?;
        let staging = self.store.staging_dir();
        if staging.exists() {
            fs::remove_dir_all(&staging)?;
        }
        fs::create_dir_all(staging.join("blobs"))?;
        let mut room = self.headroom();
        let staged = stage(
            archive,
            &staging,
            self.config.limits.backup_entries,
            &mut room,
        );
        let restored = staged.and_then(
            |Staged {
                 created,
                 blobs: files,
             }| {
                let checked = check_database(&staging.join(DATABASE)).map_err(bad)?;
                let owned = checked.blobs;
                for blob in &owned {
                    match files.get(&blob.id) {
                        Some((size, sha)) if *size == blob.size && *sha == blob.sha256 => {}
                        Some(_) => {
                            return Err(bad(format!(
                                "blob {} differs from what the database records",
                                blob.id
                            )));
                        }
                        None => return Err(bad(format!("blob {} is missing", blob.id))),
                    }
                }
                if files.len() != owned.len() {
                    return Err(bad("the archive holds blobs the database does not own"));
                }
                adjust(&staging)?;
                Ok(Restored {
                    created,
                    characters: checked.characters,
                    blobs: owned.len(),
                    bytes: files.values().map(|(size, _)| size).sum(),
                })
            },
        );
        match restored {
            Ok(r) => {
                self.store.commit_restore()?;
                tracing::info!(
                    created = %r.created,
                    characters = r.characters,
                    blobs = r.blobs,
                    "backup checked and staged: restarting"
                );
                Ok(r)
            }
            Err(e) => {
                let _ = fs::remove_dir_all(&staging);
                Err(e)
            }
        }
    }

    /// `InsufficientStorage` when the data partition is below its reserve: a restore checks
    /// this before it keeps the upload, as every write does before it writes.
    pub fn check_reserve(&self) -> Result<()> {
        Ok(self.store.blobs().check_space()?)
    }

    /// Keeps the reserve during a long write on the data partition (an upload, a download, a
    /// restore's staged copy): told every chunk before it is written.
    pub fn headroom(&self) -> store::Headroom {
        store::Headroom::new(
            &self.config.data_dir,
            self.config.storage.data_reserve_bytes,
        )
    }

    /// Whether the data partition can take `bytes` more and keep its reserve (a download
    /// checks it first).
    pub fn has_room_for(&self, bytes: u64) -> Result<bool> {
        let free = store::free_bytes(&self.config.data_dir)?;
        Ok(free >= bytes.saturating_add(self.config.storage.data_reserve_bytes))
    }

    /// Whether a restore (or a content bundle) is staged for the next start: once that start
    /// applied it, it is gone.
    pub fn restore_staged(&self) -> bool {
        self.config.data_dir.join(store::backup::PENDING).exists()
    }

    fn maintenance_lock(&self) -> Result<std::sync::MutexGuard<'_, ()>> {
        self.maintenance.try_lock().map_err(|_| {
            Error::Conflict("a backup or restore is already running; try again later".into())
        })
    }

    /// Asks the process to restart: the server stops gracefully and the program starts again
    /// (see `docs/system.md`).
    pub fn request_restart(&self) {
        tracing::info!("restart requested");
        self.restart.cancel();
    }

    /// Completes when a restart has been asked for.
    pub fn restart_token(&self) -> tokio_util::sync::CancellationToken {
        self.restart.clone()
    }
}

/// One file of an archive, its metadata fixed (a backup and a content bundle alike).
pub(super) fn append(
    tar: &mut tar::Builder<impl Write>,
    name: &str,
    len: u64,
    data: impl Read,
) -> io::Result<()> {
    let mut header = tar::Header::new_ustar();
    header.set_path(name)?;
    header.set_size(len);
    header.set_mode(0o600);
    header.set_entry_type(tar::EntryType::Regular);
    header.set_mtime(0);
    header.set_cksum();
    tar.append(&header, data.take(len))
}

/// A fresh directory under `parent` that is removed when dropped.
fn tempfile_dir(parent: &Path, what: &str) -> Result<TempDir> {
    let dir = parent.join(format!("{what}-{}", super::new_id()));
    fs::create_dir_all(&dir)?;
    Ok(TempDir(dir))
}

struct TempDir(std::path::PathBuf);

impl TempDir {
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// What [`stage`] read from an archive.
struct Staged {
    /// When the backup was written (its manifest's RFC 3339 time).
    created: String,
    /// Each blob's size and hex SHA-256, by id.
    blobs: HashMap<String, (u64, String)>,
}

/// Reads the archive and writes its members into `staging`. Only the three kinds of member are
/// accepted, each once, regular files only.
/// The staged copy keeps the data partition's reserve (`room`).
fn stage(
    archive: &Path,
    staging: &Path,
    max_entries: usize,
    room: &mut store::Headroom,
) -> Result<Staged> {
    let mut tar = tar::Archive::new(File::open(archive)?);
    let mut blobs = HashMap::new();
    let mut created = None;
    let mut seen_db = false;
    let entries = tar
        .entries()
        .map_err(|e| bad(format!("not a backup archive: {e}")))?;
    for (n, entry) in entries.enumerate() {
        // The tar crate's reason quotes the bad header's bytes: the administrator gets where
        // it went wrong instead, the details go to the log.
        let mut entry = entry.map_err(|e| {
            tracing::info!("restore: unreadable tar header after {n} members: {e}");
            match n {
                0 => bad("not a backup archive: not a tar file"),
                _ => bad(format!(
                    "the archive is damaged after its first {n} members"
                )),
            }
        })?;
        if n >= max_entries {
            return Err(bad(format!(
                "the archive has more than {max_entries} entries"
            )));
        }
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let shown: String = name.chars().take(80).collect();
        if !entry.header().entry_type().is_file() {
            return Err(bad(format!(
                "archive member {shown:?} is not a regular file"
            )));
        }
        if n == 0 && name != MANIFEST {
            return Err(bad(format!(
                "not a backup archive: it does not start with {MANIFEST}"
            )));
        }
        if name == MANIFEST && created.is_none() {
            let mut text = Vec::new();
            (&mut entry).take(MANIFEST_BYTES).read_to_end(&mut text)?;
            let manifest: Manifest = serde_json::from_slice(&text)
                .map_err(|e| bad(format!("the backup's manifest is unreadable: {e}")))?;
            if manifest.format != FORMAT || manifest.version != FORMAT_VERSION {
                return Err(bad(format!(
                    "unknown backup format {:?} version {}",
                    manifest.format, manifest.version
                )));
            }
            // Shown to the administrator: only a real timestamp.
            if humantime::parse_rfc3339(&manifest.created).is_err() {
                return Err(bad("the backup's manifest has no valid creation time"));
            }
            created = Some(manifest.created);
        } else if name == DATABASE && !seen_db {
            seen_db = true;
            copy_exact(&mut entry, &staging.join(DATABASE), room)?;
        } else if let Some(id) = name.strip_prefix("blobs/").filter(|id| is_blob_id(id)) {
            if blobs.contains_key(id) {
                return Err(bad(format!("blob {id} is in the archive twice")));
            }
            // The file name is the checked id, never the archive's name as such.
            let id = id.to_string();
            let (size, sha) = copy_exact(&mut entry, &staging.join("blobs").join(&id), room)?;
            blobs.insert(id, (size, sha));
        } else {
            return Err(bad(format!(
                "archive member {shown:?} is not part of a backup"
            )));
        }
    }
    let Some(created) = created else {
        return Err(bad("not a backup archive: empty"));
    };
    if !seen_db {
        return Err(bad("the archive holds no database"));
    }
    Ok(Staged { created, blobs })
}

/// Copies a member to `dest` and fsyncs it; a member shorter than its header says (a truncated
/// archive) is an error. Returns the size and hex SHA-256.
fn copy_exact(
    entry: &mut tar::Entry<'_, File>,
    dest: &Path,
    room: &mut store::Headroom,
) -> Result<(u64, String)> {
    let want = entry.header().size().map_err(|e| bad(e.to_string()))?;
    let mut out = File::create(dest)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 << 10];
    let mut got = 0u64;
    loop {
        let n = entry
            .read(&mut buf)
            .map_err(|e| bad(format!("the archive is damaged: {e}")))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        room.before_write(n as u64)
            .map_err(|e| Error::no_room(e, "this backup's staged copy"))?;
        out.write_all(&buf[..n])?;
        got += n as u64;
    }
    if got != want {
        return Err(bad("the archive is truncated"));
    }
    out.sync_all()?;
    Ok((got, hex(&hasher.finalize())))
}
