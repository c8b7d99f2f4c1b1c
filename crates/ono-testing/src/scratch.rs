//! Scratch folders for tests, removed when the test is done with them.
//!
//! Tests write datasets, run folders and checkpoints (one LSM checkpoint is 230 MB); a whole
//! `cargo xtask test` left about a gigabyte behind per run before this, and a CI machine's disk
//! filled up after a few dozen runs. A [`Scratch`] is removed on drop, also when its test
//! fails, unless `ONO_KEEP_TEST_DIRS` is set (then its path is printed so a person can look).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A fresh, empty folder under the system temp dir, named after its test, this process and a
/// count: two tests of one binary that ask for the same name (one helper called by both) get
/// folders of their own, so neither removes the other's while it is in use.
#[derive(Debug)]
pub struct Scratch(PathBuf);

impl Scratch {
    /// Creates `<temp>/<name>-<pid>-<k>`, emptied first if an earlier process of the same id
    /// left it.
    pub fn new(name: &str) -> Self {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let k = COUNT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("{name}-{}-{k}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|e| panic!("could not create {}: {e}", dir.display()));
        Scratch(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// The sorted names of the folder's entries.
    pub fn entries(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::env::var_os("ONO_KEEP_TEST_DIRS").is_some() {
            eprintln!("kept test folder {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<OsStr> for Scratch {
    fn as_ref(&self) -> &OsStr {
        self.0.as_os_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scratch_folder_is_fresh_and_gone_after_drop() {
        let s = Scratch::new("ono-testing-scratch");
        assert!(s.is_dir() && s.entries().is_empty());
        std::fs::write(s.join("a"), b"x").unwrap();
        std::fs::create_dir(s.join("b")).unwrap();
        assert_eq!(s.entries(), ["a", "b"]);
        // Two of one name are two folders.
        let twin = Scratch::new("ono-testing-scratch");
        assert_ne!(twin.path(), s.path());
        assert!(twin.entries().is_empty());
        let path = s.path().to_path_buf();
        drop(s);
        assert!(!path.exists() && twin.is_dir());
    }
}
