//! The real-world corpus (the directory named by `AXON_REALWORLD_CORPUS`, e.g.
//! `../shared/realworld-corpus`: Istio and Gateway API documents from Istio's docs and
//! samples, the Gateway API conformance suite and public projects) through
//! `parse_documents`: every document of a kind axon applies loads, with nothing reported as
//! not applied, but for the documents listed here with the reason (invalid as the CRDs
//! would reject them, or applied in part, as the README says).
//!
//! Run with `AXON_REALWORLD_CORPUS=/path/to/realworld-corpus cargo test --test it
//! config::realworld` (`.ci/run` sets it). Without the variable the test prints one line
//! saying it was not run, and passes; with it, a missing directory fails it.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use axon_config::config::ConfigKind;
use axon_config::parse::{DocOutcome, parse_documents};

const CORPUS_VAR: &str = "AXON_REALWORLD_CORPUS";

/// The kinds whose every field axon applies: their documents must load in full.
const APPLIED_KINDS: [ConfigKind; 4] = [
    ConfigKind::Telemetry,
    ConfigKind::AuthorizationPolicy,
    ConfigKind::RequestAuthentication,
    ConfigKind::PeerAuthentication,
];

/// Documents of those kinds that do not load, `(file, document)`, and why.
const INVALID: [(&str, usize, &str); 2] = [
    // `match: CLIENT`: the CRD's `match` is an object (`{mode: CLIENT}`); the API server
    // rejects the string.
    ("istio-io/ref-telemetry-4.yaml", 1, "spec.tracing[0].match"),
    // `name:` and `namespace:` outside `metadata` (an indentation slip): no name.
    ("istio-io/tracing-telemetry-api-4.yaml", 1, "metadata.name"),
];

fn files(dir: &Path) -> Vec<(String, PathBuf)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                out.push(path);
            }
        }
    }
    let mut paths = Vec::new();
    walk(dir, &mut paths);
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            (rel, p)
        })
        .collect()
}

#[test]
fn every_policy_and_telemetry_document_loads_in_full() {
    let Some(dir) = std::env::var_os(CORPUS_VAR) else {
        let line = format!(
            "real-world corpus suite not run: {CORPUS_VAR} is not set; run it with \
             `{CORPUS_VAR}=/path/to/realworld-corpus cargo test --test it config::realworld`\n"
        );
        let _ = std::io::stderr().write_all(line.as_bytes());
        return;
    };
    let dir = PathBuf::from(dir);
    assert!(
        dir.is_dir(),
        "{CORPUS_VAR}={} is not a directory",
        dir.display()
    );
    let mut problems = Vec::new();
    let mut loaded = 0;
    let mut invalid_seen = 0;
    for (rel, path) in files(&dir) {
        let text = std::fs::read_to_string(&path).unwrap();
        for doc in parse_documents(&text, "default") {
            let expected_invalid = INVALID
                .iter()
                .find(|(f, d, _)| *f == rel && *d == doc.index);
            match (&doc.outcome, expected_invalid) {
                (DocOutcome::Invalid(e), Some((_, _, field))) => {
                    invalid_seen += 1;
                    if !e.to_string().contains(field) {
                        problems.push(format!("{rel} document {}: {e} (want {field})", doc.index));
                    }
                }
                (_, Some(_)) => problems.push(format!(
                    "{rel} document {}: loads, but is listed as invalid",
                    doc.index
                )),
                (DocOutcome::Config(c), None) if APPLIED_KINDS.contains(&c.kind()) => {
                    loaded += 1;
                    for note in &doc.notes {
                        problems.push(format!("{rel} document {}: {note:?}", doc.index));
                    }
                }
                (DocOutcome::Invalid(e), None) if applied_kind(&text, doc.index) => {
                    problems.push(format!("{rel} document {}: {e}", doc.index));
                }
                _ => {}
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert_eq!(invalid_seen, INVALID.len());
    // The corpus holds 17 Telemetries (2 invalid) and some 30 policies.
    assert!(loaded >= 40, "only {loaded} documents of the applied kinds");
}

/// Whether document `index` (1-based) of `text` names one of the applied kinds.
fn applied_kind(text: &str, index: usize) -> bool {
    let doc = text.split("\n---").nth(index - 1).unwrap_or_default();
    APPLIED_KINDS
        .iter()
        .any(|k| doc.contains(&format!("kind: {}", k.as_str())))
}

/// Gateway API documents that do not load, `(file, document)`, and why.
const GATEWAY_API_INVALID: [(&str, usize, &str); 1] = [
    // A snippet of istio.io's docs: a Gateway without listeners, which the CRD rejects
    // (`listeners` is required, at least one).
    ("istio-io/ingress-gateway-api-3.yaml", 1, "spec.listeners"),
];

#[test]
fn every_gateway_api_document_loads() {
    let Some(dir) = std::env::var_os(CORPUS_VAR) else {
        return;
    };
    let dir = PathBuf::from(dir);
    let mut problems = Vec::new();
    let mut loaded = 0;
    let mut invalid_seen = 0;
    for (rel, path) in files(&dir) {
        // The conformance suite's manifests name the class under test as a placeholder.
        let text = std::fs::read_to_string(&path)
            .unwrap()
            .replace("{GATEWAY_CLASS_NAME}", "istio");
        for doc in parse_documents(&text, "default") {
            let expected_invalid = GATEWAY_API_INVALID
                .iter()
                .find(|(f, d, _)| *f == rel && *d == doc.index);
            match (&doc.outcome, expected_invalid) {
                (DocOutcome::Invalid(e), Some((_, _, field))) => {
                    invalid_seen += 1;
                    if !e.to_string().contains(field) {
                        problems.push(format!("{rel} document {}: {e} (want {field})", doc.index));
                    }
                }
                (_, Some(_)) => problems.push(format!(
                    "{rel} document {}: loads, but is listed as invalid",
                    doc.index
                )),
                (DocOutcome::Config(c), None) if c.kind().is_gateway_api() => {
                    loaded += 1;
                    // Applied in full: istiod's unsupported features are noted, and none of
                    // the corpus's documents uses one.
                    for note in &doc.notes {
                        problems.push(format!("{rel} document {}: {note:?}", doc.index));
                    }
                }
                (DocOutcome::Invalid(e), None) if e.to_string().contains("gateway.networking") => {
                    problems.push(format!("{rel} document {}: {e}", doc.index));
                }
                (DocOutcome::Invalid(e), None)
                    if doc_text(&text, doc.index).contains("gateway.networking.k8s.io/") =>
                {
                    problems.push(format!("{rel} document {}: {e}", doc.index));
                }
                _ => {}
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert_eq!(invalid_seen, GATEWAY_API_INVALID.len());
    // The corpus holds 84 Gateway API documents, one of them invalid.
    assert!(loaded >= 83, "only {loaded} Gateway API documents loaded");
}

fn doc_text(text: &str, index: usize) -> &str {
    text.split("\n---").nth(index - 1).unwrap_or_default()
}
