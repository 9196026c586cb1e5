//! What reading one config file found: its text, that it is gone, that it cannot be read
//! (an I/O error), or that it is out of bounds (too large, not UTF-8). Only a file that is
//! gone can be a deletion.

use std::io::Read;
use std::path::Path;
use std::time::SystemTime;

/// When a file was last modified and its size: a rescan reads only files whose stamp moved.
pub type Stamp = (SystemTime, u64);

/// What the shell found at a path.
#[derive(Debug, Clone, PartialEq)]
pub struct FileRead {
    pub content: Content,
    pub stamp: Option<Stamp>,
}

/// A file's content, or why there is none.
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    Text(String),
    /// The file does not exist (any more).
    Gone,
    /// It exists but could not be read (permission denied, an I/O error): why. Its last good
    /// configs are kept, and the directory does not count as read cleanly (`/ready`).
    Unreadable(String),
    /// It was read but is refused: larger than `max_file_bytes`, or not UTF-8 (a parse error
    /// like any other). Its last good configs are kept.
    Rejected(String),
}

impl Content {
    /// Reads `path` as a config file of at most `max_bytes`.
    pub fn read(path: &Path, max_bytes: u64) -> Content {
        let file = match std::fs::File::open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Content::Gone,
            Err(e) => return Content::Unreadable(format!("cannot read: {e}")),
        };
        let mut bytes = Vec::new();
        // One byte past the bound tells a file that is too large, even one still growing.
        match file
            .take(max_bytes.saturating_add(1))
            .read_to_end(&mut bytes)
        {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Content::Gone,
            Err(e) => return Content::Unreadable(format!("cannot read: {e}")),
        }
        if bytes.len() as u64 > max_bytes {
            let size = std::fs::metadata(path).map_or(bytes.len() as u64, |m| m.len());
            return Content::Rejected(format!(
                "the file is {size} bytes, more than max_file_bytes ({max_bytes})"
            ));
        }
        match String::from_utf8(bytes) {
            Ok(text) => Content::Text(text),
            Err(e) => {
                let at = e.utf8_error().valid_up_to();
                let bytes = e.as_bytes();
                let line = 1 + bytes[..at].iter().filter(|b| **b == b'\n').count();
                Content::Rejected(format!(
                    "invalid UTF-8 at line {line} (byte {at}): a config file must be UTF-8"
                ))
            }
        }
    }

    /// Why the file is not text, if it is unreadable or rejected.
    pub fn problem(&self) -> Option<&str> {
        match self {
            Content::Unreadable(why) | Content::Rejected(why) => Some(why),
            Content::Text(_) | Content::Gone => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_utf8_is_reported_with_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.yaml");
        std::fs::write(&path, b"# ok\n# caf\xe9\nkind: VirtualService\n").unwrap();
        match Content::read(&path, 1 << 20) {
            Content::Rejected(reason) => {
                assert!(reason.contains("invalid UTF-8 at line 2"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            Content::read(&dir.path().join("none.yaml"), 1 << 20),
            Content::Gone
        );
        assert!(
            matches!(Content::read(dir.path(), 1 << 20), Content::Unreadable(_)),
            "a directory"
        );
    }

    #[test]
    fn a_file_over_the_bound_is_rejected_with_its_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.yaml");
        std::fs::write(&path, "x".repeat(101)).unwrap();
        match Content::read(&path, 100) {
            Content::Rejected(reason) => assert!(
                reason.contains("101 bytes") && reason.contains("max_file_bytes (100)"),
                "{reason}"
            ),
            other => panic!("{other:?}"),
        }
        assert!(matches!(Content::read(&path, 101), Content::Text(_)));
    }
}
