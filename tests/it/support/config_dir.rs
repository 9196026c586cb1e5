//! [`ConfigDir`]: the temporary config directory an axon watches, written atomically
//! (a dot-prefixed temp file, then a rename) so that axon never reads half a file.

use std::fs;
use std::path::{Path, PathBuf};

use super::process::new_temp_dir;

/// A temporary config directory watched by axon. Files are written
/// atomically (dot-prefixed temp file in the same dir, then rename).
pub struct ConfigDir {
    dir: tempfile::TempDir,
}

impl ConfigDir {
    pub fn new() -> ConfigDir {
        ConfigDir {
            dir: new_temp_dir("axon-e2e-config-"),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Full path of `name` inside the dir.
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Atomically writes `contents` to `name`.
    pub fn write(&self, name: &str, contents: &str) {
        let tmp = self.dir.path().join(format!(".{name}.tmp"));
        fs::write(&tmp, contents).unwrap_or_else(|e| panic!("write {}: {e}", tmp.display()));
        let dst = self.file(name);
        fs::rename(&tmp, &dst).unwrap_or_else(|e| panic!("rename to {}: {e}", dst.display()));
    }

    pub fn remove(&self, name: &str) {
        let p = self.file(name);
        fs::remove_file(&p).unwrap_or_else(|e| panic!("remove {}: {e}", p.display()));
    }
}

impl Default for ConfigDir {
    fn default() -> Self {
        Self::new()
    }
}
