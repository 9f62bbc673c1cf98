//! Blob files: large payloads kept beside the database, written so a crash never exposes a
//! partial file.
//!
//! A blob is written to `tmp/`, fsynced, renamed to its final name (a random id, never a name a
//! client chose) and the directory fsynced. It becomes owned by the database when a transaction
//! inserts its `BlobRef` into `BLOBS`; files without an owner are removed at start.

use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use redb::WriteTransaction;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{Result, StoreError, tables::BLOBS, to_json};

/// What the database knows of a blob file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BlobRef {
    pub id: String,
    /// Hex SHA-256 of the bytes; also the strong entity tag.
    pub sha256: String,
    pub size: u64,
    pub content_type: String,
}

impl BlobRef {
    /// The quoted strong entity tag of the bytes.
    pub fn etag(&self) -> String {
        format!("\"{}\"", &self.sha256[..32])
    }
}

pub struct Blobs {
    dir: PathBuf,
    /// Free bytes the data partition keeps (see `Store::with_reserve`).
    pub(super) reserve: u64,
}

impl Blobs {
    /// Opens the blob directory and drops any staging file left by a crash.
    pub fn open(dir: &Path) -> io::Result<Blobs> {
        let staging = dir.join("tmp");
        if staging.exists() {
            fs::remove_dir_all(&staging)?;
        }
        fs::create_dir_all(&staging)?;
        Ok(Blobs {
            dir: dir.to_path_buf(),
            reserve: 0,
        })
    }

    /// Fails with `StoreError::Full` when the partition has less free space than the reserve.
    pub fn check_space(&self) -> Result<()> {
        if self.reserve > 0 && super::free_bytes(&self.dir)? < self.reserve {
            return Err(StoreError::Full);
        }
        Ok(())
    }

    /// Starts a blob; bytes are streamed in with `BlobWriter::write`. A full partition (below
    /// the reserve) is an `io::ErrorKind::StorageFull` error.
    pub fn create(&self) -> io::Result<BlobWriter> {
        match self.check_space() {
            Err(StoreError::Io(e)) => return Err(e),
            Err(_) => return Err(io::ErrorKind::StorageFull.into()),
            Ok(()) => {}
        }
        let id = uuid::Uuid::new_v4().simple().to_string();
        let staged = self.dir.join("tmp").join(&id);
        let file = File::create(&staged)?;
        Ok(BlobWriter {
            file: Some(file),
            staged,
            dir: self.dir.clone(),
            id,
            hasher: Sha256::new(),
            size: 0,
        })
    }

    /// Writes a whole blob durably.
    pub fn put(&self, bytes: &[u8], content_type: &str) -> io::Result<BlobRef> {
        let mut w = self.create()?;
        w.write(bytes)?;
        w.finish(content_type)
    }

    pub fn open_file(&self, blob: &BlobRef) -> io::Result<File> {
        File::open(self.path(&blob.id))
    }

    /// A second name for a blob's file at `dest` (same file system): the bytes stay readable
    /// there even if the blob is removed meanwhile.
    pub fn link_to(&self, blob: &BlobRef, dest: &Path) -> io::Result<()> {
        fs::hard_link(self.path(&blob.id), dest)
    }

    pub fn read(&self, blob: &BlobRef) -> io::Result<Vec<u8>> {
        let mut out = Vec::with_capacity(blob.size as usize);
        self.open_file(blob)?.read_to_end(&mut out)?;
        Ok(out)
    }

    /// Reads `len` bytes at `offset`.
    pub fn read_range(&self, blob: &BlobRef, offset: u64, len: u64) -> io::Result<Vec<u8>> {
        let mut f = self.open_file(blob)?;
        f.seek(SeekFrom::Start(offset))?;
        let mut out = Vec::with_capacity(len as usize);
        f.take(len).read_to_end(&mut out)?;
        Ok(out)
    }

    /// Removes blob files after the transaction that disowned them has committed. A failure
    /// leaves an orphan that the next start collects, so it is only logged.
    pub fn remove_all(&self, blobs: &[BlobRef]) {
        for b in blobs {
            if let Err(e) = fs::remove_file(self.path(&b.id)) {
                tracing::warn!(blob = %b.id, "could not remove blob file: {e}");
            }
        }
    }

    /// Keeps only the blob files for which `owned(id)` is true.
    pub fn retain(&self, owned: impl Fn(&str) -> bool) -> io::Result<()> {
        for entry in fs::read_dir(&self.dir)? {
            let entry = entry?;
            if !entry.file_type()?.is_file() {
                continue;
            }
            let name = entry.file_name();
            let Some(id) = name.to_str() else { continue };
            if !owned(id) {
                tracing::info!(blob = id, "removing unowned blob file");
                fs::remove_file(entry.path())?;
            }
        }
        Ok(())
    }

    fn path(&self, id: &str) -> PathBuf {
        debug_assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));
        self.dir.join(id)
    }
}

/// A blob being written. Dropping it without `finish` discards the staged file.
pub struct BlobWriter {
    file: Option<File>,
    staged: PathBuf,
    dir: PathBuf,
    id: String,
    hasher: Sha256,
    size: u64,
}

impl BlobWriter {
    pub fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.hasher.update(bytes);
        self.size += bytes.len() as u64;
        self.file
            .as_mut()
            .expect("open until finish")
            .write_all(bytes)
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    /// Makes the blob durable under its final name and returns its reference (still unowned
    /// until a transaction registers it).
    pub fn finish(mut self, content_type: &str) -> io::Result<BlobRef> {
        let file = self.file.take().expect("finish once");
        file.sync_all()?;
        drop(file);
        let target = self.dir.join(&self.id);
        fs::rename(&self.staged, &target)?;
        File::open(&self.dir)?.sync_all()?;
        let digest = std::mem::take(&mut self.hasher).finalize();
        Ok(BlobRef {
            id: std::mem::take(&mut self.id),
            sha256: hex(&digest),
            size: self.size,
            content_type: content_type.to_string(),
        })
    }
}

impl Drop for BlobWriter {
    fn drop(&mut self) {
        if self.file.is_some() {
            let _ = fs::remove_file(&self.staged);
        }
    }
}

/// Records that a committed record owns `blob`; part of the caller's transaction.
pub fn register(tx: &WriteTransaction, blob: &BlobRef) -> Result<()> {
    tx.open_table(BLOBS)?
        .insert(blob.id.as_str(), to_json(blob).as_slice())?;
    Ok(())
}

/// Disowns `blob`; its file is removed with `Blobs::remove_all` after the commit.
pub fn unregister(tx: &WriteTransaction, blob: &BlobRef) -> Result<()> {
    tx.open_table(BLOBS)?.remove(blob.id.as_str())?;
    Ok(())
}

pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finished_blob_is_readable_and_hashed() {
        let dir = tempfile::tempdir().unwrap();
        let blobs = Blobs::open(dir.path()).unwrap();
        let b = blobs.put(b"hello world", "text/plain").unwrap();
        assert_eq!(b.size, 11);
        assert_eq!(
            b.sha256,
            "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9"
        );
        assert_eq!(blobs.read(&b).unwrap(), b"hello world");
        assert_eq!(blobs.read_range(&b, 6, 5).unwrap(), b"world");
        assert!(b.etag().starts_with('"') && b.etag().ends_with('"'));
    }

    #[test]
    fn abandoned_writer_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let blobs = Blobs::open(dir.path()).unwrap();
        let mut w = blobs.create().unwrap();
        w.write(b"partial").unwrap();
        drop(w);
        assert_eq!(fs::read_dir(dir.path().join("tmp")).unwrap().count(), 0);
    }

    #[test]
    fn retain_removes_unowned_files() {
        let dir = tempfile::tempdir().unwrap();
        let blobs = Blobs::open(dir.path()).unwrap();
        let keep = blobs.put(b"a", "x/y").unwrap();
        let lose = blobs.put(b"b", "x/y").unwrap();
        blobs.retain(|id| id == keep.id).unwrap();
        assert!(blobs.read(&keep).is_ok());
        assert!(blobs.read(&lose).is_err());
    }
}
