//! The one atomic file writer of the workspace.
//!
//! A kill, a crash or a full disk in the middle of a write must leave the previous file or the
//! new one, never a torn one, and a file reported as written must survive a power cut. So every
//! write goes:
//!
//! 1. into a new temporary file in the target's directory (same file system, so the rename below
//!    is atomic; created exclusively, so two writers never share one);
//! 2. buffered, flushed, then `fsync`ed (`sync_all`): the data reach the disk before the name does;
//! 3. renamed over the target: readers see the old file or the new one;
//! 4. then the directory is `fsync`ed, which makes the rename itself durable (without it, a crash
//!    soon after can bring back the old name on ext4/xfs). This step is best effort where a
//!    platform cannot do it: Windows cannot open a directory as a file, and some file systems
//!    refuse to sync one (`EINVAL`); an I/O error of the sync itself is reported.
//!
//! The temporary file is removed on every failure path before the rename: an error or a panic of
//! the caller's write closure, a failed flush, sync or rename. Errors name the target path.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::{Error, Result};

/// Buffer of the temporary file: large enough that streaming writers of small pieces (npy
/// elements, MAT tags) make few system calls.
const BUFFER_BYTES: usize = 1 << 20;

/// Writes `bytes` to `path` atomically and durably (see the [module docs](self)).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_with(path, |w| w.write_all(bytes))
}

/// Streams the content of `path` through `write`, atomically and durably. An I/O error of
/// `write` becomes [`Error::Io`] naming `path`; the previous file is then untouched.
pub fn write_atomic_with<F>(path: &Path, write: F) -> Result<()>
where
    F: FnOnce(&mut Writer) -> io::Result<()>,
{
    try_write_atomic_with(path, |w| write(w).map_err(|source| Error::io(path, source)))
}

/// [`write_atomic_with`] for a closure with an error type of its own (a format error found while
/// writing): its errors come back unchanged, and those of the writer through `E: From<Error>`.
pub fn try_write_atomic_with<E, F>(path: &Path, write: F) -> std::result::Result<(), E>
where
    E: From<Error>,
    F: FnOnce(&mut Writer) -> std::result::Result<(), E>,
{
    let (dir, name) = split(path)?;
    let mut temp = Temp::create(&dir, name, path)?;
    let writer = temp
        .writer
        .as_mut()
        .ok_or_else(|| Error::io(path, io::Error::other("temporary file already closed")))?;
    write(writer)?;
    temp.commit(path, &dir)?;
    Ok(())
}

/// The temporary file a write closure writes to: buffered, and seekable for formats that patch
/// a length after the fact (zip, MAT's compressed elements).
pub struct Writer {
    inner: BufWriter<File>,
}

impl Write for Writer {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.inner.write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl Seek for Writer {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        self.inner.seek(pos)
    }
}

/// The directory and file name of a write target.
fn split(path: &Path) -> Result<(PathBuf, &std::ffi::OsStr)> {
    let name = path.file_name().ok_or_else(|| Error::NotAFile {
        path: path.to_path_buf(),
    })?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok((dir, name))
}

/// A temporary file that removes itself when dropped, unless it was renamed into place.
struct Temp {
    path: PathBuf,
    writer: Option<Writer>,
}

impl Temp {
    fn create(dir: &Path, name: &std::ffi::OsStr, target: &Path) -> Result<Temp> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        // Long names are shortened so that the temporary name stays within NAME_MAX.
        let stem: String = name.to_string_lossy().chars().take(96).collect();
        let mut tries = 0;
        loop {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let path = dir.join(format!(".{stem}.tmp-{}-{n}", std::process::id()));
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(file) => {
                    return Ok(Temp {
                        path,
                        writer: Some(Writer {
                            inner: BufWriter::with_capacity(BUFFER_BYTES, file),
                        }),
                    })
                }
                // A leftover of a killed process that had our pid: take the next name.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && tries < 64 => tries += 1,
                Err(source) => return Err(Error::io(target, source)),
            }
        }
    }

    /// Flush, sync, close, rename over `target`, sync the directory.
    fn commit(&mut self, target: &Path, dir: &Path) -> Result<()> {
        let io = |source| Error::io(target, source);
        let writer = self
            .writer
            .take()
            .ok_or_else(|| io(io::Error::other("temporary file already closed")))?;
        let file = writer.inner.into_inner().map_err(|e| io(e.into_error()))?;
        file.sync_all().map_err(io)?;
        drop(file);
        std::fs::rename(&self.path, target).map_err(io)?;
        // From here on the temporary name no longer exists: nothing to remove.
        self.path = PathBuf::new();
        sync_dir(dir).map_err(|source| Error::io(dir, source))
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        if let Some(writer) = self.writer.take() {
            // Close without flushing the buffer: the file is going away.
            let (file, _) = writer.inner.into_parts();
            drop(file);
        }
        if !self.path.as_os_str().is_empty() {
            // Best effort: the error being returned matters more than a leftover file.
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Makes a rename in `dir` durable.
#[cfg(unix)]
fn sync_dir(dir: &Path) -> io::Result<()> {
    // Not being able to open the directory (no read permission) only loses the durability of
    // the name, which the platform then gives as it does for any program.
    let Ok(d) = File::open(dir) else {
        return Ok(());
    };
    match d.sync_all() {
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::InvalidInput | io::ErrorKind::Unsupported
            ) =>
        {
            Ok(())
        }
        other => other,
    }
}

/// Windows cannot open a directory as a `File` to flush it (NTFS journals the rename itself).
#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh empty directory under the system temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> Self {
            let p =
                std::env::temp_dir().join(format!("ono_io_atomic_{}_{tag}", std::process::id()));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).unwrap();
            TempDir(p)
        }

        fn entries(&self) -> Vec<String> {
            let mut v: Vec<String> = std::fs::read_dir(&self.0)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn writes_and_leaves_no_temporary_file() {
        let dir = TempDir::new("success");
        let path = dir.0.join("a.bin");
        write_atomic(&path, b"hello").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"hello");
        assert_eq!(dir.entries(), ["a.bin"]);
    }

    #[test]
    fn an_existing_target_is_replaced_whole() {
        let dir = TempDir::new("replace");
        let path = dir.0.join("a.bin");
        std::fs::write(&path, vec![7u8; 10_000]).unwrap();
        write_atomic(&path, b"short").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"short");
        write_atomic_with(&path, |w| {
            w.write_all(b"0123456789")?;
            // Seeking back patches in place, as zip and MAT writers do.
            w.seek(SeekFrom::Start(2))?;
            w.write_all(b"ab")
        })
        .unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"01ab456789");
        assert_eq!(dir.entries(), ["a.bin"]);
    }

    #[test]
    fn a_failing_closure_leaves_the_old_file_and_no_temporary_file() {
        let dir = TempDir::new("closure");
        let path = dir.0.join("a.bin");
        write_atomic(&path, b"old").unwrap();
        // Enough bytes that part of them reached the temporary file before the failure.
        let err = write_atomic_with(&path, |w| {
            w.write_all(&vec![1u8; 3 * BUFFER_BYTES])?;
            Err(io::Error::other("the encoder gave up"))
        })
        .unwrap_err();
        match err {
            Error::Io { path: p, source } => {
                assert_eq!(p, path);
                assert!(source.to_string().contains("gave up"));
            }
            other => panic!("expected Error::Io, got {other:?}"),
        }
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        assert_eq!(dir.entries(), ["a.bin"]);

        // A closure with its own error type gets it back unchanged.
        #[derive(Debug)]
        enum Mine {
            Refused,
            File(#[allow(dead_code)] Error),
        }
        impl From<Error> for Mine {
            fn from(e: Error) -> Self {
                Mine::File(e)
            }
        }
        let r: std::result::Result<(), Mine> = try_write_atomic_with(&path, |w| {
            w.write_all(b"partial")
                .map_err(|e| Mine::File(Error::io(&path, e)))?;
            Err(Mine::Refused)
        });
        assert!(matches!(r, Err(Mine::Refused)));
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        assert_eq!(dir.entries(), ["a.bin"]);
    }

    #[test]
    fn a_panicking_closure_leaves_no_temporary_file() {
        let dir = TempDir::new("panic");
        let path = dir.0.join("a.bin");
        let caught = std::panic::catch_unwind(|| {
            let _ = write_atomic_with(&path, |w| {
                w.write_all(b"partial")?;
                panic!("drawing failed");
            });
        });
        assert!(caught.is_err());
        assert!(dir.entries().is_empty(), "{:?}", dir.entries());
    }

    #[test]
    fn a_missing_directory_is_an_io_error_naming_the_path() {
        let dir = TempDir::new("missing");
        let path = dir.0.join("no-such-dir").join("a.bin");
        match write_atomic(&path, b"x") {
            Err(Error::Io { path: p, source }) => {
                assert_eq!(p, path);
                assert_eq!(source.kind(), io::ErrorKind::NotFound);
                assert!(Error::Io { path: p, source }
                    .to_string()
                    .contains("no-such-dir"));
            }
            other => panic!("expected Error::Io, got {other:?}"),
        }
        assert!(dir.entries().is_empty());
    }

    #[test]
    fn a_directory_target_or_no_file_name_is_refused_without_leftovers() {
        let dir = TempDir::new("dirtarget");
        let sub = dir.0.join("sub");
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(sub.join("keep"), b"k").unwrap();
        // Renaming a file over a non-empty directory fails; the temporary file goes.
        assert!(matches!(
            write_atomic(&sub, b"x"),
            Err(Error::Io { path, .. }) if path == sub
        ));
        assert_eq!(dir.entries(), ["sub"]);
        for p in ["/", "", "a/.."] {
            assert!(
                matches!(
                    write_atomic(Path::new(p), b"x"),
                    Err(Error::NotAFile { .. })
                ),
                "{p:?}"
            );
        }
    }

    #[test]
    fn a_relative_path_in_the_current_directory_works() {
        // `Path::parent` of a bare name is "", which must mean ".".
        let (dir, name) = split(Path::new("x.bin")).unwrap();
        assert_eq!(dir, Path::new("."));
        assert_eq!(name, "x.bin");
    }

    #[test]
    fn concurrent_writers_never_share_a_temporary_file() {
        let dir = TempDir::new("concurrent");
        let path = dir.0.join("a.bin");
        std::thread::scope(|s| {
            for i in 0..8u8 {
                let path = &path;
                s.spawn(move || {
                    for _ in 0..20 {
                        write_atomic(path, &vec![i; 4096]).unwrap();
                    }
                });
            }
        });
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), 4096);
        assert!(bytes.iter().all(|&b| b == bytes[0]), "a torn file");
        assert_eq!(dir.entries(), ["a.bin"]);
    }
}
