//! Istio YAML in, typed [`Config`]s out: one result per document, never one for the file.
//!
//! A file is split into documents at `---` lines before any YAML is parsed, so that a syntax
//! error in one document cannot hide the others, and each result carries the document's
//! position (its index and first line). Validation ([`super::validate`]) runs on every config.

use serde::Deserialize;
use thiserror::Error;

use super::config::{
    Config, ConfigKey, ConfigKind, ISTIO_NETWORKING_GROUP, ISTIO_NETWORKING_VERSIONS, Spec,
};
use super::istio::{Labels, schema};
use super::validate;
use super::yaml_bounds::YamlBounds;
use super::yaml_lines::FieldLines;

mod secret;
use secret::{is_secret, now_seconds};
pub use secret::{parse_cluster_secret, parse_secret};

/// Why one document was not accepted.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum DocError {
    #[error("invalid YAML: {0}")]
    Yaml(String),
    #[error("rejected: {0}")]
    OutOfBounds(String),
    #[error("document is not a mapping with apiVersion and kind")]
    NotAnObject,
    #[error("{kind}: apiVersion {api_version} is not served (want {group}/v1, v1beta1 or v1alpha3)", group = ISTIO_NETWORKING_GROUP)]
    ApiVersion { kind: String, api_version: String },
    #[error("kind {kind} is not a kind of {group}{hint}", group = ISTIO_NETWORKING_GROUP)]
    UnknownKind { kind: String, hint: String },
    #[error("metadata.name: Required value")]
    MissingName,
    #[error("spec: Required value")]
    MissingSpec,
    #[error("metadata.creationTimestamp: {0} is not an RFC 3339 time")]
    CreationTimestamp(String),
    #[error("spec.{path}: {message}")]
    Schema { path: String, message: String },
    #[error("{}", .0.join("; "))]
    Invalid(Vec<String>),
    #[error("Secret: {0}")]
    Secret(#[from] crate::secret::SecretError),
}

/// What one document turned out to be.
#[derive(Debug, Clone, PartialEq)]
pub enum DocOutcome {
    /// A comment-only or empty document.
    Empty,
    /// A well-formed object of a kind axon does not read (a Deployment, say).
    Unsupported {
        api_version: String,
        kind: String,
    },
    Config(Box<Config>),
    Invalid(DocError),
}

/// One document of a file, with its position.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedDoc {
    /// 1-based index of the document in its file.
    pub index: usize,
    /// 1-based line where the document's content starts; for an invalid document, the line
    /// of the first offending field when it is known.
    pub line: usize,
    pub outcome: DocOutcome,
    /// Fields of the config that axon accepts and does not apply, with their lines.
    pub notes: Vec<Note>,
}

/// A field that is accepted and not applied, at its line of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub line: usize,
    /// The field's path, e.g. `spec.http[0].retries`.
    pub path: String,
    /// What is not applied, when it is some of the field's values only.
    pub detail: Option<String>,
}

impl Note {
    /// From an entry of [`Config::not_applied`]: `path` or `path: detail`.
    fn new(line: usize, entry: &str) -> Note {
        let (path, detail) = match entry.split_once(": ") {
            Some((path, detail)) => (path, Some(detail.to_string())),
            None => (entry, None),
        };
        Note {
            line,
            path: path.to_string(),
            detail,
        }
    }
}

impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.detail {
            None => write!(f, "{}: accepted but not applied by axon", self.path),
            Some(detail) => write!(
                f,
                "{}: accepted but not applied by axon: {detail}",
                self.path
            ),
        }
    }
}

/// Parses every document of a multi-document YAML text, within the default [`YamlBounds`].
/// Objects without a namespace get `default_namespace`.
pub fn parse_documents(text: &str, default_namespace: &str) -> Vec<ParsedDoc> {
    parse_documents_within(text, default_namespace, &YamlBounds::default())
}

/// [`parse_documents`] with the given bounds: a document out of them is rejected before the
/// YAML parser reads it.
pub fn parse_documents_within(
    text: &str,
    default_namespace: &str,
    bounds: &YamlBounds,
) -> Vec<ParsedDoc> {
    split_documents(text)
        .into_iter()
        .enumerate()
        .map(|(i, (line, body))| {
            let outcome = match bounds.check(&body) {
                Ok(()) => parse_document(&body, line, default_namespace),
                Err(e) => {
                    DocOutcome::Invalid(DocError::OutOfBounds(file_lines(&e.to_string(), line)))
                }
            };
            locate(
                ParsedDoc {
                    index: i + 1,
                    line,
                    outcome,
                    notes: Vec::new(),
                },
                &body,
            )
        })
        .collect()
}

/// Puts the lines of the fields a document's errors and notes are about on them (read from
/// the document only when there is something to place).
fn locate(mut doc: ParsedDoc, body: &str) -> ParsedDoc {
    let first = doc.line;
    let absolute = |rel: usize| first + rel.max(1) - 1;
    match &mut doc.outcome {
        DocOutcome::Invalid(DocError::Invalid(messages)) => {
            let lines = FieldLines::read(body);
            let found: Vec<Option<usize>> = messages
                .iter()
                .map(|m| lines.line_of_message(m).map(absolute))
                .collect();
            if let Some(line) = found.iter().flatten().next() {
                doc.line = *line;
            }
            if found.iter().flatten().any(|l| *l != doc.line) {
                for (message, line) in messages.iter_mut().zip(found) {
                    if let Some(line) = line {
                        message.push_str(&format!(" (line {line})"));
                    }
                }
            }
        }
        DocOutcome::Invalid(DocError::Schema { path, .. }) => {
            if let Some(line) = FieldLines::read(body).line_of(&format!("spec.{path}")) {
                doc.line = absolute(line);
            }
        }
        DocOutcome::Config(config) if !config.not_applied.is_empty() => {
            let lines = FieldLines::read(body);
            doc.notes = config
                .not_applied
                .iter()
                .map(|entry| {
                    let line = lines
                        .line_of_message(entry)
                        .or_else(|| lines.line_of(entry));
                    Note::new(line.map_or(first, absolute), entry)
                })
                .collect();
        }
        _ => {}
    }
    doc
}

/// Splits at lines that are exactly a document marker (`---`, optionally followed by
/// content or a comment, or `...`). Returns each document's first line and text.
fn split_documents(text: &str) -> Vec<(usize, String)> {
    let mut docs = Vec::new();
    let mut current = String::new();
    let mut start = 1;
    for (i, line) in text.lines().enumerate() {
        let is_start = line == "---" || line.starts_with("--- ") || line.starts_with("---\t");
        let is_end = line == "..." || line.starts_with("... ");
        if is_start || is_end {
            if !current.trim().is_empty() || !docs.is_empty() || i > 0 {
                docs.push((start, std::mem::take(&mut current)));
            }
            start = i + 2;
            if is_start {
                // `--- key: value` puts content on the marker line itself.
                let rest = line[3..].trim_start();
                if !rest.is_empty() && !rest.starts_with('#') {
                    current.push_str(rest);
                    current.push('\n');
                    start = i + 1;
                }
            }
            continue;
        }
        current.push_str(line);
        current.push('\n');
    }
    docs.push((start, current));
    // Markers at the very top or bottom of a file make empty documents that users never
    // meant; keep numbering stable by dropping only those with no content at all.
    docs.retain(|(_, body)| !body.trim().is_empty() || has_comment_only(body));
    docs
}

fn has_comment_only(body: &str) -> bool {
    body.lines().any(|l| l.trim_start().starts_with('#'))
}

/// Rewrites the parser's `line N` (counted from the document's start) as a line of the file.
fn file_lines(message: &str, first_line: usize) -> String {
    static LINE: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"line (\d+)").expect("valid regex"));
    LINE.replace_all(message, |c: &regex::Captures| {
        let n: usize = c[1].parse().unwrap_or(1);
        format!("line {}", n + first_line - 1)
    })
    .into_owned()
}

/// Kubernetes reads YAML with go-yaml, which takes a plain scalar such as `001:db8::` in a
/// one-line flow sequence (`[1.2.3.4, 001:db8::]`) as a string; libyaml stops at the `:`
/// before `]`. Only for a document that failed to parse, this quotes such items and returns
/// the text to try again (`None` when there is nothing to quote).
fn go_yaml_flow_compat(body: &str) -> Option<String> {
    let mut changed = false;
    let lines: Vec<String> = body
        .lines()
        .map(|line| {
            let (Some(open), Some(close)) = (line.find('['), line.rfind(']')) else {
                return line.to_string();
            };
            if close < open {
                return line.to_string();
            }
            let inner = &line[open + 1..close];
            if inner.contains(['[', ']', '{', '}', '"', '\'']) {
                return line.to_string();
            }
            let items: Vec<String> = inner
                .split(',')
                .map(|item| {
                    let t = item.trim();
                    if t.contains(':') && !t.contains(": ") {
                        changed = true;
                        format!("\"{t}\"")
                    } else {
                        t.to_string()
                    }
                })
                .collect();
            format!(
                "{}[{}]{}",
                &line[..open],
                items.join(", "),
                &line[close + 1..]
            )
        })
        .collect();
    changed.then(|| lines.join("\n"))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Envelope {
    api_version: Option<String>,
    kind: Option<String>,
    #[serde(default)]
    metadata: Metadata,
    spec: Option<serde_json::Value>,
}

#[derive(Deserialize, Default)]
struct Metadata {
    name: Option<String>,
    namespace: Option<String>,
    #[serde(default)]
    labels: Labels,
    /// RFC 3339 (Kubernetes always sets it; `null` or absent in a file is none).
    #[serde(default, rename = "creationTimestamp")]
    creation_timestamp: Option<serde_json::Value>,
}

fn parse_document(body: &str, first_line: usize, default_namespace: &str) -> DocOutcome {
    let value: serde_json::Value = match serde_norway::from_str(body) {
        Ok(v) => v,
        Err(e) => match go_yaml_flow_compat(body).and_then(|b| serde_norway::from_str(&b).ok()) {
            Some(v) => v,
            None => {
                return DocOutcome::Invalid(DocError::Yaml(file_lines(&e.to_string(), first_line)));
            }
        },
    };
    if value.is_null() {
        return DocOutcome::Empty;
    }
    parse_value(value, default_namespace)
}

/// One object, already decoded (from YAML, or from the Kubernetes API as JSON): its kind is
/// checked, its spec typed and validated. `default_namespace` applies when it names none.
pub fn parse_value(value: serde_json::Value, default_namespace: &str) -> DocOutcome {
    if is_secret(&value) {
        return parse_secret(&value, default_namespace, now_seconds(), true);
    }
    let envelope: Envelope = match serde_json::from_value(value) {
        Ok(e) => e,
        Err(_) => return DocOutcome::Invalid(DocError::NotAnObject),
    };
    let (Some(api_version), Some(kind)) = (envelope.api_version, envelope.kind) else {
        return DocOutcome::Invalid(DocError::NotAnObject);
    };
    let (group, version) = api_version.split_once('/').unwrap_or(("", &api_version));
    if group != ISTIO_NETWORKING_GROUP {
        return DocOutcome::Unsupported { api_version, kind };
    }
    let Some(config_kind) = ConfigKind::from_kind(&kind) else {
        if NOT_SERVED_KINDS.contains(&kind.as_str()) {
            return DocOutcome::Unsupported { api_version, kind };
        }
        return DocOutcome::Invalid(DocError::UnknownKind {
            hint: nearest_kind(&kind),
            kind,
        });
    };
    if !ISTIO_NETWORKING_VERSIONS.contains(&version) {
        return DocOutcome::Invalid(DocError::ApiVersion { kind, api_version });
    }
    match build_config(
        config_kind,
        envelope.metadata,
        envelope.spec,
        default_namespace,
    ) {
        Ok(config) => DocOutcome::Config(Box::new(config)),
        Err(e) => DocOutcome::Invalid(e),
    }
}

/// The namespace, name and creation time of an object.
fn identity(
    metadata: &Metadata,
    default_namespace: &str,
) -> Result<(String, String, Option<i64>), DocError> {
    let name = metadata
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .ok_or(DocError::MissingName)?;
    let namespace = metadata
        .namespace
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| default_namespace.to_string());
    let created = match &metadata.creation_timestamp {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(t)) => Some(
            super::timestamp::parse_rfc3339(t)
                .ok_or_else(|| DocError::CreationTimestamp(t.clone()))?,
        ),
        Some(other) => return Err(DocError::CreationTimestamp(other.to_string())),
    };
    Ok((namespace, name, created))
}

fn build_config(
    kind: ConfigKind,
    metadata: Metadata,
    spec: Option<serde_json::Value>,
    default_namespace: &str,
) -> Result<Config, DocError> {
    let (namespace, name, created) = identity(&metadata, default_namespace)?;
    let spec = match spec {
        None | Some(serde_json::Value::Null) => return Err(DocError::MissingSpec),
        Some(spec) => spec,
    };
    let findings = schema::check(&spec, schema_of(kind));
    if !findings.unknown.is_empty() {
        return Err(DocError::Invalid(findings.unknown));
    }
    let spec = typed_spec(kind, spec)?;
    let mut not_applied = findings.not_applied;
    not_applied.extend(super::applied::partial_notes(&spec));
    let config = Config {
        key: ConfigKey::new(kind, namespace, name),
        labels: metadata.labels,
        created,
        spec,
        not_applied,
    };
    validate::validate(&config).map_err(DocError::Invalid)?;
    Ok(config)
}

/// Kinds of the group that axon knows and does not serve: reported as not served, skipped.
const NOT_SERVED_KINDS: [&str; 2] = ["EnvoyFilter", "ProxyConfig"];

/// `; did you mean ...?` for a kind close to one of the group's, or nothing.
fn nearest_kind(kind: &str) -> String {
    let known = ConfigKind::ALL
        .iter()
        .map(|k| k.as_str())
        .chain(NOT_SERVED_KINDS);
    match known
        .map(|k| {
            (
                strsim::levenshtein(&kind.to_ascii_lowercase(), &k.to_ascii_lowercase()),
                k,
            )
        })
        .min()
    {
        Some((d, k)) if d <= 3 => format!("; did you mean {k}?"),
        _ => String::new(),
    }
}

/// The schema of a kind that has none (a Secret's data is not a spec).
static NO_FIELDS: schema::Message = schema::Message {
    name: "Secret",
    fields: &[],
};

fn schema_of(kind: ConfigKind) -> &'static schema::Message {
    match kind {
        ConfigKind::ServiceEntry => &schema::SERVICE_ENTRY,
        ConfigKind::WorkloadEntry => &schema::WORKLOAD_ENTRY,
        ConfigKind::WorkloadGroup => &schema::WORKLOAD_GROUP,
        ConfigKind::VirtualService => &schema::VIRTUAL_SERVICE,
        ConfigKind::DestinationRule => &schema::DESTINATION_RULE,
        ConfigKind::Gateway => &schema::GATEWAY,
        ConfigKind::Sidecar => &schema::SIDECAR,
        // Secrets are decoded by `parse_secret`, never walked against a schema.
        ConfigKind::Secret => &NO_FIELDS,
    }
}

fn typed_spec(kind: ConfigKind, spec: serde_json::Value) -> Result<Spec, DocError> {
    fn de<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> Result<T, DocError> {
        serde_path_to_error::deserialize(v).map_err(|e| DocError::Schema {
            path: e.path().to_string(),
            message: e.inner().to_string(),
        })
    }
    Ok(match kind {
        ConfigKind::ServiceEntry => Spec::ServiceEntry(de(spec)?),
        ConfigKind::WorkloadEntry => Spec::WorkloadEntry(de(spec)?),
        ConfigKind::WorkloadGroup => Spec::WorkloadGroup(de(spec)?),
        ConfigKind::VirtualService => Spec::VirtualService(de(spec)?),
        ConfigKind::DestinationRule => Spec::DestinationRule(de(spec)?),
        ConfigKind::Gateway => Spec::Gateway(de(spec)?),
        ConfigKind::Sidecar => Spec::Sidecar(de(spec)?),
        ConfigKind::Secret => return Err(DocError::NotAnObject),
    })
}

#[cfg(test)]
mod tests;
