//! The one exclusive lock of the workspace: a lock file that processes sharing a folder (on one
//! machine, or several on a shared file system) take before they work on what it guards.
//!
//! The contract:
//! - at most one [`FileLock`] on a path is held at a time, across processes (and across opens in
//!   one process);
//! - dropping it releases it, and so does the death of its process, however it dies (`SIGKILL`
//!   included): the operating system drops the lock with the last open handle, so no lock is ever
//!   left stale by a crash and none needs to be broken by hand;
//! - the file itself stays (removing it would let a process that opened the old file and one that
//!   creates a new one both hold "the" lock); it holds a line naming its last holder
//!   ([`FileLock::holder`]), for messages only.
//!
//! It is the operating system's advisory whole-file lock (`flock` on Unix, `LockFileEx` on
//! Windows, through `std::fs::File::try_lock`). On NFS v4 and on cluster file systems mounted with
//! lock support (Lustre's `flock`, GPFS, BeeGFS) it holds between machines, and a machine that
//! dies loses its locks when its lease expires (NFS v4: 90 s by default).

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// A held lock; released on drop.
#[derive(Debug)]
pub struct FileLock {
    file: File,
    path: PathBuf,
}

impl FileLock {
    /// Takes the lock at `path` (creating the file) if no one holds it, else `Ok(None)` at once.
    /// `holder` (one line: who and where, such as `pid 4242 on node17`) is written into the
    /// file for [`FileLock::holder`].
    pub fn try_acquire(path: &Path, holder: &str) -> Result<Option<FileLock>> {
        let file = open(path)?;
        match file.try_lock() {
            Ok(()) => Self::held(file, path, holder).map(Some),
            Err(TryLockError::WouldBlock) => Ok(None),
            Err(TryLockError::Error(source)) => Err(Error::io(path, source)),
        }
    }

    /// Takes the lock at `path`, waiting for its holder to release it (or to die).
    pub fn acquire(path: &Path, holder: &str) -> Result<FileLock> {
        let file = open(path)?;
        file.lock().map_err(|source| Error::io(path, source))?;
        Self::held(file, path, holder)
    }

    /// The line the last holder of the lock at `path` wrote, if the file has one.
    pub fn holder(path: &Path) -> Option<String> {
        let text = std::fs::read_to_string(path).ok()?;
        let line = text.lines().next()?.trim();
        (!line.is_empty()).then(|| line.to_string())
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn held(mut file: File, path: &Path, holder: &str) -> Result<FileLock> {
        let line = holder.replace('\n', " ");
        let io = |source| Error::io(path, source);
        file.set_len(0).map_err(io)?;
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        file.write_all(format!("{line}\n").as_bytes()).map_err(io)?;
        Ok(FileLock {
            file,
            path: path.to_path_buf(),
        })
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        // Closing the file releases the lock anyway; unlocking first makes it explicit.
        let _ = self.file.unlock();
    }
}

fn open(path: &Path) -> Result<File> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| Error::io(dir, source))?;
    }
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|source| Error::io(path, source))?;
    // A lock file is a line of text; anything else at the path is not ours to lock.
    let mut head = [0u8; 1];
    if file.metadata().map_err(|e| Error::io(path, e))?.len() > 4096
        || (file.read(&mut head).map_err(|e| Error::io(path, e))? == 1 && head[0] == 0)
    {
        return Err(Error::Format {
            path: path.to_path_buf(),
            msg: "is not a lock file (binary or larger than 4 KiB)".into(),
        });
    }
    Ok(file)
}

/// The lock file of a folder whose contents processes share (a run's, generated data's): the
/// one name every such folder uses, so that any two users of a folder take the same lock.
pub fn folder_lock(dir: &Path) -> PathBuf {
    dir.join(".lock")
}

/// `pid <id> on <host>`: who holds a lock, for its file.
pub fn this_process() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "an unknown host".into());
    format!("pid {} on {host}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufRead;
    use std::process::{Command, Stdio};

    fn scratch(name: &str) -> ono_testing::Scratch {
        ono_testing::Scratch::new(&format!("ono-lock-{name}"))
    }

    #[test]
    fn one_holder_at_a_time_and_drop_releases() {
        let dir = scratch("one");
        let path = dir.join("sub").join(".lock");
        let a = FileLock::try_acquire(&path, "first")
            .unwrap()
            .expect("free");
        // Another open of the same file, even in this process, must not get it.
        assert!(FileLock::try_acquire(&path, "second").unwrap().is_none());
        assert_eq!(FileLock::holder(&path).as_deref(), Some("first"));
        drop(a);
        let b = FileLock::try_acquire(&path, "second\nline")
            .unwrap()
            .expect("released");
        assert_eq!(FileLock::holder(&path).as_deref(), Some("second line"));
        assert_eq!(b.path(), path);
        drop(b);
        assert!(path.is_file(), "the lock file stays");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn refuses_a_file_that_is_not_a_lock_file() {
        let dir = scratch("foreign");
        let path = dir.join("data.bin");
        std::fs::write(&path, [0u8, 1, 2, 3]).unwrap();
        let e = FileLock::try_acquire(&path, "x").unwrap_err().to_string();
        assert!(
            e.contains("data.bin") && e.contains("not a lock file"),
            "{e}"
        );
        assert_eq!(
            std::fs::read(&path).unwrap(),
            [0u8, 1, 2, 3],
            "left untouched"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Run by [`a_killed_holder_leaves_no_stale_lock`] in a child process: takes the lock named
    /// by the environment and holds it until killed.
    #[test]
    fn holder_child() {
        let Some(path) = std::env::var_os("ONO_LOCK_CHILD") else {
            return;
        };
        let _held = FileLock::try_acquire(Path::new(&path), &this_process())
            .unwrap()
            .expect("the parent left it free");
        println!("locked");
        std::io::stdout().flush().unwrap();
        std::thread::sleep(std::time::Duration::from_secs(120));
    }

    #[test]
    fn a_killed_holder_leaves_no_stale_lock() {
        let dir = scratch("killed");
        let path = dir.join(".lock");
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "lock::tests::holder_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("ONO_LOCK_CHILD", &path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        assert!(
            lines.any(|l| l.is_ok_and(|l| l.contains("locked"))),
            "the child took the lock"
        );
        assert!(FileLock::try_acquire(&path, "parent").unwrap().is_none());
        let holder = FileLock::holder(&path).unwrap();
        assert!(
            holder.starts_with(&format!("pid {}", child.id())),
            "{holder}"
        );
        child.kill().unwrap(); // SIGKILL: no destructor runs in the child
        child.wait().unwrap();
        let lock = FileLock::acquire(&path, "parent").unwrap();
        assert_eq!(FileLock::holder(lock.path()).as_deref(), Some("parent"));
        drop(lock);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
