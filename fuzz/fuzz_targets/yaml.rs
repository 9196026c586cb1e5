//! Fuzz target `yaml`: Istio YAML into configs and validation
//! (`axon_config::parse::parse_documents`), and a directory's files through
//! `axon_config::file_set::FileSet` apply and commit.
//!
//! The input is one file's text, or several separated by NUL bytes: each part is applied as
//! the next version of one of three files, a commit after each.
#![no_main]

use std::path::PathBuf;

use axon_config::file_set::FileSet;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // `FileSet::apply` parses with `parse_documents`: each part is parsed once.
    let mut set = FileSet::new("default");
    let paths: Vec<PathBuf> = (0..3)
        .map(|i| PathBuf::from(format!("/d/{i}.yaml")))
        .collect();
    for (i, part) in text.split('\0').enumerate() {
        let report = set.apply(&paths[i % 3], Some(part));
        for e in &report.errors {
            assert!(e.index >= 1 && e.line >= 1, "{e:?}");
            let _ = e.to_string();
        }
        set.commit();
    }
    for path in &paths {
        set.apply(path, None);
    }
    set.commit();
    assert!(set.configs().is_empty(), "every file is gone");
});
