//! The versions of the file formats ono writes for itself (model files, checkpoints).
//!
//! # Contract
//! - A file of a kind carries one tag, its kind's name and its version: `ono-model-v2`.
//! - Its reader accepts every version from 1 to the current one, and refuses by name a file of
//!   another kind or of a version newer than the build (written by a later ono).
//! - An older file is brought to the current layout by its kind's one migration function, a
//!   step per version, before the current types read it. So the types hold the current layout
//!   only, and the history of a kind is its migration function: the place to read it, and the
//!   one place a layout change adds to (with the version bumped).
//!
//! Files people write (experiment TOML, `ono data` configurations) carry no version: a key
//! added to them takes a default that keeps an earlier file's meaning, and their tests hold
//! files of each earlier layout.

/// A kind of file and its current version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileFormat {
    /// The kind's name, the tag before `-v`.
    pub name: &'static str,
    /// The version this build writes.
    pub current: u32,
}

impl FileFormat {
    /// The tag this build writes.
    pub fn tag(&self) -> String {
        format!("{}-v{}", self.name, self.current)
    }

    /// The version of a file whose tag is `tag` (`None`: no tag). The error says what the file
    /// is instead, in words.
    pub fn version(&self, tag: Option<&str>) -> Result<u32, String> {
        let what = || {
            format!(
                "a file of format {tag:?}, not {} 1 to {}",
                self.name, self.current
            )
        };
        let tag = tag.ok_or_else(|| format!("no format tag: not a {} file", self.name))?;
        let version = tag
            .strip_prefix(self.name)
            .and_then(|rest| rest.strip_prefix("-v"))
            .and_then(|v| v.parse::<u32>().ok())
            .filter(|&v| v >= 1)
            .ok_or_else(what)?;
        if version > self.current {
            return Err(format!(
                "{tag} was written by a later ono (this build reads {} up to v{})",
                self.name, self.current
            ));
        }
        Ok(version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_up_to_the_current_are_read_and_the_rest_refused_by_name() {
        let f = FileFormat {
            name: "ono-thing",
            current: 3,
        };
        assert_eq!(f.tag(), "ono-thing-v3");
        for v in 1..=3 {
            assert_eq!(f.version(Some(&format!("ono-thing-v{v}"))), Ok(v));
        }
        let later = f.version(Some("ono-thing-v4")).unwrap_err();
        assert!(later.contains("later ono"), "{later}");
        for bad in [
            "ono-thing-v0",
            "ono-thing",
            "ono-thing-vx",
            "ono-other-v1",
            "ono-thing-v1x",
        ] {
            let e = f.version(Some(bad)).unwrap_err();
            assert!(e.contains(bad) && e.contains("ono-thing"), "{bad}: {e}");
        }
        assert!(f.version(None).unwrap_err().contains("no format tag"));
    }
}
