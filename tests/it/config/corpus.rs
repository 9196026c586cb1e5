//! The Istio YAML corpus (the directory named by `AXON_ISTIO_CORPUS`, e.g.
//! `../shared/istio-corpus`; see its README) through `parse_documents`.
//!
//! * Every document of every file except `*-invalid.yaml` is accepted: a `Config`, an
//!   `Empty` (comment-only) document, or an `Unsupported` Kubernetes kind. Never `Invalid`.
//! * Every document of the four `api-validation/*-invalid.yaml` files is rejected, one
//!   document at a time, after the istio/api test-harness key `_err` is stripped from it,
//!   and without disturbing valid documents in the same text.
//!
//! Run with `AXON_ISTIO_CORPUS=/path/to/istio-corpus cargo test --test it config::corpus` (`.ci/run`
//! sets it). Without the variable each test prints one line saying the corpus suite was not
//! run, and passes; with it, a missing or wrong directory fails the tests.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use axon_config::parse::{DocError, DocOutcome, ParsedDoc, parse_documents};

/// The environment variable naming the corpus directory.
const CORPUS_VAR: &str = "AXON_ISTIO_CORPUS";
const NAMESPACE: &str = "default";

/// The negative files and how many non-empty documents each holds (corpus README).
const INVALID_FILES: [(&str, usize); 4] = [
    ("api-validation/destinationrule-invalid.yaml", 3),
    ("api-validation/serviceentry-invalid.yaml", 13),
    ("api-validation/workloadentry-invalid.yaml", 8),
    ("api-validation/workloadgroup-invalid.yaml", 4),
];

/// The corpus directory from [`CORPUS_VAR`], or `None` (after printing one line saying so)
/// when the variable is not set. Panics when it is set to anything but a directory.
fn corpus() -> Option<&'static Path> {
    let Some(dir) = std::env::var_os(CORPUS_VAR) else {
        // Straight to stderr, not through the test harness's capture: the line is for the
        // person who ran `cargo test`.
        let line = format!(
            "corpus suite not run: {CORPUS_VAR} is not set; run it with \
             `{CORPUS_VAR}=/path/to/istio-corpus cargo test --test it config::corpus`\n"
        );
        let _ = std::io::stderr().write_all(line.as_bytes());
        return None;
    };
    Some(corpus_dir_from(dir))
}

fn corpus_dir_from(dir: std::ffi::OsString) -> &'static Path {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = PathBuf::from(dir);
        assert!(
            !dir.as_os_str().is_empty(),
            "{CORPUS_VAR} is set but empty: unset it to skip the corpus suite, or name the \
             Istio YAML corpus directory"
        );
        assert!(
            dir.is_dir(),
            "{CORPUS_VAR}={} is not a directory: the Istio YAML corpus is missing there",
            dir.display()
        );
        dir
    })
}

/// The corpus directory, for the helpers of a test that already checked [`corpus`].
fn corpus_dir() -> &'static Path {
    let dir = std::env::var_os(CORPUS_VAR).expect("the test checked corpus() first");
    corpus_dir_from(dir)
}

/// Every `*.yaml` file under the corpus, as (path relative to the corpus, full path), sorted.
fn yaml_files() -> Vec<(String, PathBuf)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let entries =
            fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                out.push(path);
            }
        }
    }
    let root = corpus_dir();
    let mut paths = Vec::new();
    walk(root, &mut paths);
    let mut files: Vec<(String, PathBuf)> = paths
        .into_iter()
        .map(|p| {
            let rel = p
                .strip_prefix(root)
                .expect("under the corpus")
                .to_string_lossy()
                .replace('\\', "/");
            (rel, p)
        })
        .collect();
    files.sort();
    files
}

fn is_invalid_file(rel: &str) -> bool {
    rel.ends_with("-invalid.yaml")
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn read_rel(rel: &str) -> String {
    read(&corpus_dir().join(rel))
}

fn describe(doc: &ParsedDoc) -> String {
    match &doc.outcome {
        DocOutcome::Empty => "empty".to_string(),
        DocOutcome::Unsupported { api_version, kind } => {
            format!("unsupported {api_version} {kind}")
        }
        DocOutcome::Config(c) => format!("config {}", c.key),
        DocOutcome::Kubernetes(o) => format!("kubernetes {}", o.key),
        DocOutcome::Invalid(e) => format!("INVALID: {e}"),
    }
}

/// Splits a file at `---` lines, keeping comment-only chunks, as the negative files are
/// written (one object per document).
fn split_documents(text: &str) -> Vec<String> {
    let mut docs = vec![String::new()];
    for line in text.lines() {
        if line == "---" || line.starts_with("--- ") {
            docs.push(String::new());
        } else {
            let current = docs.last_mut().expect("at least one document");
            current.push_str(line);
            current.push('\n');
        }
    }
    docs
}

/// One document of a negative file, with the harness key `_err` removed.
struct NegativeDoc {
    /// 1-based position among the file's non-empty documents.
    number: usize,
    /// What istio/api's harness expects the rejection to mention.
    expected: String,
    /// The document re-serialized as YAML, without `_err`.
    yaml: String,
}

/// The non-empty documents of a negative file, each stripped of its `_err` key.
fn negative_docs(rel: &str) -> Vec<NegativeDoc> {
    let mut out = Vec::new();
    for chunk in split_documents(&read_rel(rel)) {
        let mut value: serde_json::Value = serde_norway::from_str(&chunk)
            .unwrap_or_else(|e| panic!("{rel}: a document is not YAML: {e}\n{chunk}"));
        if value.is_null() {
            continue; // comment-only, e.g. a commented-out case
        }
        let object = value
            .as_object_mut()
            .unwrap_or_else(|| panic!("{rel}: a document is not a mapping:\n{chunk}"));
        let expected = match object.remove("_err") {
            Some(serde_json::Value::String(s)) => s,
            other => panic!("{rel}: document without a string `_err` key ({other:?}):\n{chunk}"),
        };
        let yaml = serde_norway::to_string(&value).expect("re-serialize a JSON value as YAML");
        out.push(NegativeDoc {
            number: out.len() + 1,
            expected,
            yaml,
        });
    }
    out
}

/// The valid sibling of a negative file: `x-invalid.yaml` -> `x-valid.yaml`.
fn valid_sibling(rel: &str) -> String {
    rel.replace("-invalid.yaml", "-valid.yaml")
}

#[test]
fn corpus_is_complete() {
    if corpus().is_none() {
        return;
    }
    let files = yaml_files();
    assert_eq!(
        files.len(),
        50,
        "the corpus README lists 50 YAML files: {files:#?}"
    );
    let invalid: Vec<&str> = files
        .iter()
        .map(|(rel, _)| rel.as_str())
        .filter(|rel| is_invalid_file(rel))
        .collect();
    let expected: Vec<&str> = INVALID_FILES.iter().map(|(rel, _)| *rel).collect();
    assert_eq!(invalid, expected);
    for (rel, _) in INVALID_FILES {
        let sibling = valid_sibling(rel);
        assert!(
            corpus_dir().join(&sibling).is_file(),
            "{rel} has no valid sibling {sibling}"
        );
    }
}

/// Every document of the files other than the negative ones: (file, document).
fn documents_outside_the_negative_files() -> Vec<(String, ParsedDoc)> {
    let mut out = Vec::new();
    for (rel, path) in yaml_files() {
        if is_invalid_file(&rel) {
            continue;
        }
        let docs = parse_documents(&read(&path), NAMESPACE);
        assert!(!docs.is_empty(), "{rel}: no documents at all");
        out.extend(docs.into_iter().map(|d| (rel.clone(), d)));
    }
    out
}

/// The validation layer (schema, required fields, `validate`) accepts every valid document
/// that the YAML reader could read.
#[test]
fn validation_accepts_every_document_outside_the_negative_files() {
    if corpus().is_none() {
        return;
    }
    let failures: Vec<String> = documents_outside_the_negative_files()
        .iter()
        .filter_map(|(rel, doc)| match &doc.outcome {
            DocOutcome::Invalid(e) if !matches!(e, DocError::Yaml(_)) => Some(format!(
                "{rel}: document {} (line {}): {e}",
                doc.index, doc.line
            )),
            _ => None,
        })
        .collect();
    assert!(
        failures.is_empty(),
        "validation rejected valid Istio config ({} documents):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The whole contract: every document is a config, an empty document, a Kubernetes object
/// axon reads (the Services) or an unsupported (Kubernetes) kind, and the kinds add up to the
/// corpus README's counts.
#[test]
fn every_document_outside_the_negative_files_is_accepted() {
    if corpus().is_none() {
        return;
    }
    let mut failures = Vec::new();
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    let documents = documents_outside_the_negative_files();
    for (rel, doc) in &documents {
        match &doc.outcome {
            DocOutcome::Config(config) => {
                *kinds.entry(config.kind().to_string()).or_default() += 1;
            }
            DocOutcome::Empty => {}
            DocOutcome::Kubernetes(object) => {
                *kinds
                    .entry(format!("(kubernetes) {}", object.key.kind))
                    .or_default() += 1;
            }
            DocOutcome::Unsupported { api_version, kind } => {
                // Every networking.istio.io kind in the corpus is one axon reads.
                if api_version.starts_with("networking.istio.io/") {
                    failures.push(format!(
                        "{rel}: document {} (line {}): {api_version} {kind} reported as unsupported",
                        doc.index, doc.line
                    ));
                }
                *kinds.entry(format!("(unsupported) {kind}")).or_default() += 1;
            }
            DocOutcome::Invalid(e @ DocError::Yaml(_)) => failures.push(format!(
                "{rel}: document {} (line {}): {e} [refused by the YAML reader of model::parse; \
                 Istio's YAML reader (go-yaml) accepts it]",
                doc.index, doc.line
            )),
            DocOutcome::Invalid(e) => failures.push(format!(
                "{rel}: document {} (line {}): {e}",
                doc.index, doc.line
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "valid Istio config was rejected ({} documents):\n{}",
        failures.len(),
        failures.join("\n")
    );
    let files: BTreeSet<&str> = documents.iter().map(|(rel, _)| rel.as_str()).collect();
    assert_eq!(files.len(), 46, "files outside the negative ones");

    // Counts from the corpus README ("Coverage"), minus the documents of the negative files.
    let expected: BTreeMap<String, usize> = [
        ("Gateway", 8),
        ("VirtualService", 41),
        ("DestinationRule", 23 - 3),
        ("ServiceEntry", 44 - 13),
        ("Sidecar", 3),
        ("WorkloadEntry", 14 - 8),
        ("WorkloadGroup", 7 - 4),
        ("(kubernetes) Service", 5),
        ("(unsupported) ServiceAccount", 4),
        ("(unsupported) Deployment", 8),
    ]
    .into_iter()
    .map(|(k, n)| (k.to_string(), n))
    .collect();
    assert_eq!(kinds, expected, "documents per kind");
}

#[test]
fn every_document_of_the_negative_files_is_rejected() {
    if corpus().is_none() {
        return;
    }
    let mut failures = Vec::new();
    for (rel, count) in INVALID_FILES {
        let docs = negative_docs(rel);
        assert_eq!(docs.len(), count, "{rel}: number of non-empty documents");
        for doc in &docs {
            let parsed = parse_documents(&doc.yaml, NAMESPACE);
            assert_eq!(
                parsed.len(),
                1,
                "{rel}: document {} split into {parsed:?}",
                doc.number
            );
            match &parsed[0].outcome {
                DocOutcome::Invalid(e) => {
                    // A rejection names a field (or says which top-level part is missing).
                    let message = e.to_string();
                    assert!(
                        !message.is_empty(),
                        "{rel}: document {}: empty error",
                        doc.number
                    );
                    if let DocError::Invalid(messages) = e {
                        for m in messages {
                            assert!(
                                m.starts_with("spec") || m.starts_with("metadata"),
                                "{rel}: document {}: message without a field path: {m}",
                                doc.number
                            );
                        }
                    }
                    // Rejected for the reason istio/api gives, not an incidental one.
                    if !agrees_with_istio(&message, &doc.expected) {
                        failures.push(format!(
                            "{rel}: document {} was rejected with {message:?}, but istio/api \
                             rejects it for {:?}",
                            doc.number, doc.expected
                        ));
                    }
                }
                _ => failures.push(format!(
                    "{rel}: document {} (istio/api expects {:?}) was accepted as {}:\n{}",
                    doc.number,
                    doc.expected,
                    describe(&parsed[0]),
                    doc.yaml
                )),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "invalid Istio config was accepted ({} documents):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Whether axon's rejection `message` is about what istio/api's `_err` names. `_err` is either
/// a CEL message (which axon repeats) or `<path>: <reason>` / `<path> in body <reason>` from
/// the OpenAPI schema, whose paths differ between Istio releases; then the last field of the
/// path and the reason must both appear.
fn agrees_with_istio(message: &str, expected: &str) -> bool {
    if message.contains(expected) {
        return true;
    }
    let split = expected
        .split_once(": ")
        .or_else(|| expected.split_once(" in body "));
    match split {
        Some((path, reason)) if path.starts_with("spec") => {
            let field = path.rsplit('.').next().unwrap_or(path);
            message.contains(field) && message.contains(reason)
        }
        _ => false,
    }
}

/// Each negative document, alone between two valid documents of its sibling file, is the
/// only one rejected.
#[test]
fn a_negative_document_spoils_only_itself() {
    if corpus().is_none() {
        return;
    }
    for (rel, _) in INVALID_FILES {
        let sibling = valid_sibling(rel);
        let valid = parse_documents(&read_rel(&sibling), NAMESPACE);
        let first_valid = split_documents(&read_rel(&sibling))
            .into_iter()
            .find(|chunk| {
                let docs = parse_documents(chunk, NAMESPACE);
                docs.len() == 1 && matches!(docs[0].outcome, DocOutcome::Config(_))
            })
            .unwrap_or_else(|| panic!("{sibling}: no valid document"));
        assert!(
            valid
                .iter()
                .any(|d| matches!(d.outcome, DocOutcome::Config(_)))
        );

        for doc in negative_docs(rel) {
            let text = format!("{first_valid}---\n{}---\n{first_valid}", doc.yaml);
            let parsed = parse_documents(&text, NAMESPACE);
            let outcomes: Vec<String> = parsed.iter().map(describe).collect();
            assert_eq!(
                parsed.len(),
                3,
                "{rel}: document {}: {outcomes:#?}",
                doc.number
            );
            assert!(
                matches!(parsed[0].outcome, DocOutcome::Config(_))
                    && matches!(parsed[1].outcome, DocOutcome::Invalid(_))
                    && matches!(parsed[2].outcome, DocOutcome::Config(_)),
                "{rel}: document {} (expects {:?}) between two valid documents of {sibling}: {outcomes:#?}",
                doc.number,
                doc.expected,
            );
            assert_eq!(parsed[0].outcome, parsed[2].outcome);
        }
    }
}

/// The whole valid sibling file, with every stripped negative document appended, loads its
/// valid documents exactly as the sibling file alone does.
#[test]
fn valid_documents_are_unaffected_by_negative_neighbours() {
    if corpus().is_none() {
        return;
    }
    for (rel, count) in INVALID_FILES {
        let sibling = valid_sibling(rel);
        let sibling_text = read_rel(&sibling);
        let alone = parse_documents(&sibling_text, NAMESPACE);
        let mut text = sibling_text.clone();
        if !text.ends_with('\n') {
            text.push('\n');
        }
        for doc in negative_docs(rel) {
            text.push_str("---\n");
            text.push_str(&doc.yaml);
        }
        let mixed = parse_documents(&text, NAMESPACE);
        assert_eq!(mixed.len(), alone.len() + count, "{sibling} + {rel}");
        for (a, m) in alone.iter().zip(&mixed) {
            assert_eq!(
                normalized(&a.outcome),
                normalized(&m.outcome),
                "{sibling}: document {} changed",
                a.index
            );
            assert_eq!(a.line, m.line);
        }
        for m in &mixed[alone.len()..] {
            assert!(
                matches!(m.outcome, DocOutcome::Invalid(_)),
                "{rel}: appended document {} accepted: {}",
                m.index,
                describe(m)
            );
        }
        // And in the other order: the negative documents first.
        let mut reversed = String::new();
        for doc in negative_docs(rel) {
            reversed.push_str(&doc.yaml);
            reversed.push_str("---\n");
        }
        reversed.push_str(&sibling_text);
        let mixed = parse_documents(&reversed, NAMESPACE);
        let tail: Vec<String> = mixed[count..]
            .iter()
            .map(|d| normalized(&d.outcome))
            .collect();
        let expected: Vec<String> = alone.iter().map(|d| normalized(&d.outcome)).collect();
        assert_eq!(tail, expected, "{sibling} after the documents of {rel}");
    }
}

/// What a document became, without the positions inside YAML errors (they move when texts
/// are concatenated).
fn normalized(outcome: &DocOutcome) -> String {
    match outcome {
        DocOutcome::Invalid(DocError::Yaml(_)) => "invalid YAML".to_string(),
        // The lines of fields are lines of the text, which the directory load shifts.
        other => {
            let text = format!("{other:?}");
            let lines = regex::Regex::new(r" \(line \d+\)").unwrap();
            lines.replace_all(&text, "").into_owned()
        }
    }
}

/// Each directory loaded as one text (negative files replaced by their stripped documents):
/// every document comes out as it does from its own file, and exactly the negative
/// documents are rejected.
#[test]
fn directory_load_matches_per_file_load() {
    if corpus().is_none() {
        return;
    }
    let mut dirs: BTreeMap<String, Vec<(String, PathBuf)>> = BTreeMap::new();
    for (rel, path) in yaml_files() {
        let dir = rel.rsplit_once('/').map_or("", |(d, _)| d).to_string();
        dirs.entry(dir).or_default().push((rel, path));
    }
    let mut rejected_negatives = 0;
    for (dir, files) in dirs {
        let mut text = String::new();
        let mut expected: Vec<String> = Vec::new();
        for (rel, path) in &files {
            let file_text = if is_invalid_file(rel) {
                negative_docs(rel)
                    .into_iter()
                    .map(|d| d.yaml)
                    .collect::<Vec<_>>()
                    .join("---\n")
            } else {
                read(path)
            };
            for doc in parse_documents(&file_text, NAMESPACE) {
                if is_invalid_file(rel) {
                    assert!(
                        matches!(doc.outcome, DocOutcome::Invalid(_)),
                        "{rel}: document {} accepted: {}",
                        doc.index,
                        describe(&doc)
                    );
                    rejected_negatives += 1;
                }
                if doc.outcome != DocOutcome::Empty {
                    expected.push(normalized(&doc.outcome));
                }
            }
            if !text.is_empty() {
                text.push_str("---\n");
            }
            text.push_str(&file_text);
            if !text.ends_with('\n') {
                text.push('\n');
            }
        }
        let loaded: Vec<String> = parse_documents(&text, NAMESPACE)
            .iter()
            .filter(|d| d.outcome != DocOutcome::Empty)
            .map(|d| normalized(&d.outcome))
            .collect();
        assert_eq!(loaded, expected, "directory {dir} loaded as one text");
    }
    let expected: usize = INVALID_FILES.iter().map(|(_, n)| n).sum();
    assert_eq!(rejected_negatives, expected);
}
