//! The walk of a config directory: every config file under it, following symlinks to
//! directories at most once (by device and inode), with the loops skipped and the
//! subdirectories that could not be listed.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use axon_config::file_set::is_config_file;

/// The config files under a directory, the directories skipped because the walk had read
/// them already (a symlink to a directory above or beside: a loop), and the subdirectories
/// that could not be listed.
#[derive(Debug, Default, PartialEq)]
pub struct ConfigTree {
    pub files: Vec<PathBuf>,
    pub loops: Vec<PathBuf>,
    pub unreadable_dirs: Vec<(PathBuf, String)>,
}

/// Walks `dir` recursively, following a symlink to a directory only to a directory it has
/// not read yet (by device and inode), so that two symlinks to `.` cannot make it endless.
/// Fails only when `dir` itself cannot be listed.
pub fn list_config_tree(dir: &Path) -> std::io::Result<ConfigTree> {
    let mut tree = ConfigTree::default();
    let mut seen = BTreeSet::new();
    seen.insert(dir_id(dir, &std::fs::metadata(dir)?)?);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let listed = std::fs::read_dir(&d).and_then(|entries| {
            entries
                .map(|e| e.map(|e| e.path()))
                .collect::<std::io::Result<Vec<PathBuf>>>()
        });
        let mut entries = match listed {
            Ok(entries) => entries,
            Err(e) if d == dir => return Err(e),
            Err(e) => {
                tree.unreadable_dirs.push((d, e.to_string()));
                continue;
            }
        };
        // Real directories before symlinks to them: a directory is read under its own name.
        entries.sort_by_cached_key(|p| (p.is_symlink(), p.clone()));
        for path in entries {
            let hidden = path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('.'));
            // One stat per entry (following symlinks); an entry that cannot be stat'ed (a
            // dangling symlink, one gone meanwhile) is not a directory.
            match std::fs::metadata(&path) {
                Ok(meta) if meta.is_dir() => {
                    if hidden {
                        continue;
                    }
                    if seen.insert(dir_id(&path, &meta)?) {
                        stack.push(path);
                    } else {
                        tree.loops.push(path);
                    }
                }
                _ if is_config_file(&path) => tree.files.push(path),
                _ => {}
            }
        }
    }
    tree.files.sort();
    tree.loops.sort();
    tree.unreadable_dirs.sort();
    Ok(tree)
}

/// What identifies a directory however it is reached: its device and inode.
#[cfg(unix)]
pub fn dir_id(_: &Path, meta: &std::fs::Metadata) -> std::io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    Ok((meta.dev(), meta.ino()))
}

#[cfg(not(unix))]
pub fn dir_id(dir: &Path, _: &std::fs::Metadata) -> std::io::Result<PathBuf> {
    std::fs::canonicalize(dir)
}

#[cfg(unix)]
pub type DirId = (u64, u64);
#[cfg(not(unix))]
pub type DirId = PathBuf;

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn the_walk_reads_each_directory_once_and_reports_loops() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("sub")).unwrap();
        std::fs::write(root.join("a.yaml"), "").unwrap();
        std::fs::write(root.join("sub/b.yaml"), "").unwrap();
        std::os::unix::fs::symlink(".", root.join("self")).unwrap();
        std::os::unix::fs::symlink("..", root.join("sub/up")).unwrap();
        std::os::unix::fs::symlink("sub", root.join("again")).unwrap();
        let tree = list_config_tree(root).unwrap();
        assert_eq!(tree.files, [root.join("a.yaml"), root.join("sub/b.yaml")]);
        assert!(tree.unreadable_dirs.is_empty());
        assert_eq!(
            tree.loops.len(),
            3,
            "self, sub/up and again (or sub): {tree:?}"
        );
    }
}
