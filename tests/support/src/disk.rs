//! A data partition that fills up for real: a tmpfs of a few MB (mounting one needs root) and
//! a filler file that leaves it a given number of free bytes, and a watch of the least free
//! space while a test writes.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs mounted on a fresh directory; unmounted when dropped.
pub struct Tmpfs {
    dir: Option<tempfile::TempDir>,
    pub path: PathBuf,
}

impl Tmpfs {
    /// Mounts a tmpfs of `mb` MB; `None` (with the reason printed) where this process may not
    /// mount one, as root or in a user and mount namespace of its own.
    pub fn mount(mb: u32) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        let out = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={mb}m,mode=0700"),
                "tmpfs",
            ])
            .arg(&path)
            .output();
        match out {
            Ok(o) if o.status.success() => Some(Tmpfs {
                dir: Some(dir),
                path,
            }),
            Ok(o) => {
                eprintln!(
                    "SKIPPED: cannot mount a tmpfs (needs root): {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                None
            }
            Err(e) => {
                eprintln!("SKIPPED: cannot run mount: {e}");
                None
            }
        }
    }

    pub fn take_dir(&mut self) -> tempfile::TempDir {
        self.dir.take().unwrap()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

/// Fills the file system of `dir` with `fill` until at most `leave` bytes are free.
pub fn fill(dir: &Path, leave: u64) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("filler"))
        .unwrap();
    let chunk = vec![0x5au8; 64 << 10];
    loop {
        let free = docent::store::free_bytes(dir).unwrap();
        if free <= leave {
            break;
        }
        let n = ((free - leave) as usize).min(chunk.len());
        if f.write_all(&chunk[..n]).is_err() {
            break;
        }
    }
    let _ = f.sync_all();
}

pub fn unfill(dir: &Path) {
    std::fs::remove_file(dir.join("filler")).unwrap();
}

/// The least free space on the file system holding `root` until the returned flag is set.
pub fn watch_free_space(
    root: &Path,
) -> (
    std::sync::Arc<std::sync::atomic::AtomicBool>,
    std::thread::JoinHandle<u64>,
) {
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let (done, root) = (done.clone(), root.to_path_buf());
        std::thread::spawn(move || {
            let mut least = u64::MAX;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                least = least.min(docent::store::free_bytes(&root).unwrap());
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            least
        })
    };
    (done, watcher)
}
