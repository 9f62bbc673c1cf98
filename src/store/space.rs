//! The data partition's reserve during a long write (an upload, a download, a restore's staged
//! copy): the free space is looked at before the first byte and again every `CHECK_BYTES`, so
//! that such a write stops short of the reserve instead of eating into it (issue 34, finding 5).

use std::path::{Path, PathBuf};

use super::{StoreError, free_bytes};

/// Free space is looked at again after this many bytes of a long write: the partition must keep
/// its reserve plus this much (or plus the chunk about to be written, when that is larger).
pub const CHECK_BYTES: u64 = 4 << 20;

/// Told every chunk before it is written; refuses the chunk with `StoreError::Full` when the
/// partition holding `dir` would come below its reserve before the next look.
#[derive(Debug)]
pub struct Headroom {
    dir: PathBuf,
    reserve: u64,
    /// Bytes that may still be written before the free space is looked at again.
    covered: u64,
}

impl Headroom {
    /// For writes on the file system holding `dir`, which keeps `reserve` bytes free.
    pub fn new(dir: &Path, reserve: u64) -> Headroom {
        Headroom {
            dir: dir.to_path_buf(),
            reserve,
            covered: 0,
        }
    }

    /// Called before `len` more bytes are written: `Err(StoreError::Full)` when the partition
    /// has less than the reserve plus `CHECK_BYTES` (or plus `len`) free; the caller stops and
    /// removes what it wrote.
    pub fn before_write(&mut self, len: u64) -> Result<(), StoreError> {
        if len <= self.covered {
            self.covered -= len;
            return Ok(());
        }
        let window = len.max(CHECK_BYTES);
        let free = free_bytes(&self.dir).map_err(StoreError::Io)?;
        if free < self.reserve.saturating_add(window) {
            return Err(StoreError::Full);
        }
        self.covered = window - len;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_space_is_looked_at_first_and_then_every_check_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let free = free_bytes(dir.path()).unwrap();
        // A reserve that leaves 64 MiB: room for a window even while other tests write beside
        // this one, and far from room for a chunk of 1 TiB.
        let reserve = free.saturating_sub(64 << 20);
        let mut room = Headroom::new(dir.path(), reserve);
        room.before_write(1 << 20).unwrap();
        // Within the window nothing is looked at.
        room.before_write(3 << 20).unwrap();
        // A chunk larger than any window is looked at on its own size.
        assert!(matches!(room.before_write(1 << 40), Err(StoreError::Full)));
        // A reserve larger than the partition refuses the first byte.
        let mut none = Headroom::new(dir.path(), u64::MAX);
        assert!(matches!(none.before_write(1), Err(StoreError::Full)));
    }
}
