//! Istio YAML in, typed [`Config`]s out: one result per document, never one for the file.
//!
//! A file is split into documents at `---` lines before any YAML is parsed, so that a syntax
//! error in one document cannot hide the others, and each result carries the document's
//! position (its index and first line). Validation ([`super::validate`]) runs on every config.
//! The Kubernetes objects axon reads ([`super::kubernetes`]) are kept as such; the items of
//! a `v1` `List` are results of their own, each at its item's line.

use serde::Deserialize;
use thiserror::Error;

use super::config::{
    Config, ConfigKey, ConfigKind, ISTIO_NETWORKING_GROUP, ISTIO_NETWORKING_VERSIONS,
    ISTIO_SECURITY_GROUP, ISTIO_SECURITY_VERSIONS, ISTIO_TELEMETRY_GROUP, ISTIO_TELEMETRY_VERSIONS,
    Spec,
};
use super::istio::{Labels, schema};
use super::kubernetes::{KubeObject, ObjectCheck, ObjectKind};
use super::validate;
use super::yaml_bounds::YamlBounds;

mod documents;
mod kubernetes;
mod secret;
#[cfg(test)]
use documents::go_yaml_flow_compat;
use documents::{Lines, file_lines, read_document, split_documents};
use secret::{is_config_map, is_secret, now_seconds};
pub use secret::{parse_cluster_secret, parse_config_map, parse_secret};

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
    #[error("{kind}: apiVersion {api_version} is not served (want {group}/v1 or v1beta1)", group = ISTIO_SECURITY_GROUP)]
    SecurityApiVersion { kind: String, api_version: String },
    #[error("{kind}: apiVersion {api_version} is not served (want {group}/v1 or v1alpha1)", group = ISTIO_TELEMETRY_GROUP)]
    TelemetryApiVersion { kind: String, api_version: String },
    #[error("{kind}: apiVersion {api_version} is not served (istiod reads {group}/{})", versions.join(", "), group = crate::gateway_api::GROUP)]
    GatewayApiVersion {
        kind: String,
        api_version: String,
        versions: Vec<String>,
    },
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
    #[error("{kind}: {path}: {message}")]
    Object {
        kind: ObjectKind,
        path: String,
        message: String,
    },
    #[error("List: items must be a sequence of objects")]
    ListItems,
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
    /// A Kubernetes object axon reads (Namespace, Service, EndpointSlice, Pod).
    Kubernetes(Box<KubeObject>),
    Invalid(DocError),
}

/// One document of a file (or one item of a `List` document), with its position.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedDoc {
    /// 1-based index of the document in its file (a List's items share their document's).
    pub index: usize,
    /// 1-based line where the document's content (a List item: the item) starts; for an
    /// invalid one, the line of the first offending field when it is known.
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
    parse_documents_checked(text, default_namespace, bounds, None)
}

/// [`parse_documents_within`], each Kubernetes object checked against its type with
/// `check` (an object that fails is an invalid document, at the line of its field).
pub fn parse_documents_checked(
    text: &str,
    default_namespace: &str,
    bounds: &YamlBounds,
    check: Option<ObjectCheck>,
) -> Vec<ParsedDoc> {
    let mut out = Vec::new();
    for (i, (line, body)) in split_documents(text).into_iter().enumerate() {
        let doc = |line, outcome| ParsedDoc {
            index: i + 1,
            line,
            outcome,
            notes: Vec::new(),
        };
        let lines = Lines::new(&body, line);
        let value = match bounds.check(&body) {
            Ok(()) => read_document(&body, line),
            Err(e) => Err(DocOutcome::Invalid(DocError::OutOfBounds(file_lines(
                &e.to_string(),
                line,
            )))),
        };
        let value = match value {
            Ok(value) => value,
            Err(outcome) => {
                out.push(doc(line, outcome));
                continue;
            }
        };
        match kubernetes::list_items(&value) {
            None => {
                let outcome = parse_checked(value, default_namespace, check);
                out.push(locate(doc(line, outcome), &lines, ""));
            }
            Some(Ok(items)) if items.is_empty() => out.push(doc(line, DocOutcome::Empty)),
            Some(Ok(items)) => {
                for (j, item) in items.into_iter().enumerate() {
                    let prefix = format!("items[{j}].");
                    let at = lines.field(&format!("items[{j}]")).unwrap_or(line);
                    let outcome = parse_checked(item, default_namespace, check);
                    out.push(locate(doc(at, outcome), &lines, &prefix));
                }
            }
            Some(Err(e)) => {
                let at = lines.field("items").unwrap_or(line);
                out.push(doc(at, DocOutcome::Invalid(e)));
            }
        }
    }
    out
}

/// Puts the lines of the fields a document's errors and notes are about on them (read from
/// the document only when there is something to place). `prefix` is the path of the object
/// in its document (`items[2].` for a List's item, else empty).
fn locate(mut doc: ParsedDoc, lines: &Lines, prefix: &str) -> ParsedDoc {
    let first = doc.line;
    match &mut doc.outcome {
        DocOutcome::Invalid(DocError::Invalid(messages)) => {
            let found: Vec<Option<usize>> =
                messages.iter().map(|m| lines.message(prefix, m)).collect();
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
            if let Some(line) = lines.field(&format!("{prefix}spec.{path}")) {
                doc.line = line;
            }
        }
        DocOutcome::Invalid(DocError::Object { path, .. }) => {
            if let Some(line) = lines.field(&format!("{prefix}{path}")) {
                doc.line = line;
            }
        }
        DocOutcome::Config(config) if !config.not_applied.is_empty() => {
            doc.notes = config
                .not_applied
                .iter()
                .map(|entry| {
                    let line = lines
                        .message(prefix, entry)
                        .or_else(|| lines.field(&format!("{prefix}{entry}")));
                    Note::new(line.unwrap_or(first), entry)
                })
                .collect();
        }
        _ => {}
    }
    doc
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Envelope {
    api_version: Option<String>,
    kind: Option<String>,
    /// `metadata: null` (an empty `metadata:` in YAML) is no metadata: its name is then
    /// reported missing.
    #[serde(default)]
    metadata: Option<Metadata>,
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
    /// Read for the annotations that change a config's meaning (`istio.io/dry-run`).
    #[serde(default)]
    annotations: Option<std::collections::BTreeMap<String, serde_json::Value>>,
}

/// One object, already decoded (from YAML, or from the Kubernetes API as JSON): its kind is
/// checked, its spec typed and validated. `default_namespace` applies when it names none.
/// A Kubernetes object axon reads is kept unchecked (see [`parse_documents_checked`]).
pub fn parse_value(value: serde_json::Value, default_namespace: &str) -> DocOutcome {
    parse_checked(value, default_namespace, None)
}

fn parse_checked(
    value: serde_json::Value,
    default_namespace: &str,
    check: Option<ObjectCheck>,
) -> DocOutcome {
    if is_secret(&value) {
        return parse_secret(&value, default_namespace, now_seconds(), true);
    }
    if is_config_map(&value) {
        return parse_config_map(&value, default_namespace, now_seconds());
    }
    if let Some(kind) = kubernetes::object_kind(&value) {
        return kubernetes::parse_object(kind, value, default_namespace, check);
    }
    let envelope: Envelope = match serde_json::from_value(value) {
        Ok(e) => e,
        Err(_) => return DocOutcome::Invalid(DocError::NotAnObject),
    };
    let (Some(api_version), Some(kind)) = (envelope.api_version, envelope.kind) else {
        return DocOutcome::Invalid(DocError::NotAnObject);
    };
    let (group, version) = api_version.split_once('/').unwrap_or(("", &api_version));
    let security_kind = [
        ConfigKind::PeerAuthentication,
        ConfigKind::AuthorizationPolicy,
        ConfigKind::RequestAuthentication,
    ]
    .into_iter()
    .find(|k| k.as_str() == kind);
    let own_kind = match (group, security_kind) {
        (ISTIO_SECURITY_GROUP, Some(config_kind)) => {
            if !ISTIO_SECURITY_VERSIONS.contains(&version) {
                return DocOutcome::Invalid(DocError::SecurityApiVersion { kind, api_version });
            }
            Some(config_kind)
        }
        (ISTIO_TELEMETRY_GROUP, _) if kind == "Telemetry" => {
            if !ISTIO_TELEMETRY_VERSIONS.contains(&version) {
                return DocOutcome::Invalid(DocError::TelemetryApiVersion { kind, api_version });
            }
            Some(ConfigKind::Telemetry)
        }
        (crate::gateway_api::GROUP, _) => match ConfigKind::from_gateway_api_kind(&kind) {
            Some(config_kind) => {
                let versions = config_kind.gateway_api_versions();
                if !versions.contains(&version) {
                    return DocOutcome::Invalid(DocError::GatewayApiVersion {
                        kind,
                        api_version,
                        versions: versions.iter().map(|v| v.to_string()).collect(),
                    });
                }
                Some(config_kind)
            }
            None => return DocOutcome::Unsupported { api_version, kind },
        },
        _ => None,
    };
    if let Some(config_kind) = own_kind {
        return match build_config(
            config_kind,
            envelope.metadata.unwrap_or_default(),
            envelope.spec,
            default_namespace,
        ) {
            Ok(config) => DocOutcome::Config(Box::new(config)),
            Err(e) => DocOutcome::Invalid(e),
        };
    }
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
        envelope.metadata.unwrap_or_default(),
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
    let (mut namespace, name, created) = identity(&metadata, default_namespace)?;
    if kind == ConfigKind::GatewayClass {
        // Cluster-scoped: of no namespace, as the API server serves it and istiod keys it,
        // whatever the document or its directory says.
        namespace.clear();
    }
    let spec = match spec {
        None | Some(serde_json::Value::Null) => return Err(DocError::MissingSpec),
        Some(spec) => spec,
    };
    if kind.is_gateway_api() {
        return build_gateway_api(kind, namespace, name, created, metadata.labels, spec);
    }
    let findings = schema::check(&spec, schema_of(kind));
    if !findings.unknown.is_empty() {
        return Err(DocError::Invalid(findings.unknown));
    }
    let mut spec = typed_spec(kind, spec)?;
    if let Spec::AuthorizationPolicy(policy) = &mut spec {
        policy.dry_run = dry_run(&metadata)?;
    }
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

/// A Gateway API object: decoded strictly (an unknown field is named with its path), with
/// the CRDs' defaults, then validated.
fn build_gateway_api(
    kind: ConfigKind,
    namespace: String,
    name: String,
    created: Option<i64>,
    labels: Labels,
    spec: serde_json::Value,
) -> Result<Config, DocError> {
    let spec = typed_spec(kind, spec)?;
    let config = Config {
        key: ConfigKey::new(kind, namespace, name),
        labels,
        created,
        not_applied: super::applied::gateway_api_notes(&spec),
        spec,
    };
    validate::validate(&config).map_err(DocError::Invalid)?;
    Ok(config)
}

/// istiod's reading of the `istio.io/dry-run` annotation (`strconv.ParseBool`): a value it
/// cannot read is an error here (istiod logs it and enforces the policy).
fn dry_run(metadata: &Metadata) -> Result<bool, DocError> {
    let Some(value) = metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("istio.io/dry-run"))
    else {
        return Ok(false);
    };
    match value.as_str().unwrap_or_default() {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        other => Err(DocError::Invalid(vec![format!(
            "metadata.annotations[istio.io/dry-run]: {other:?} is not a boolean"
        )])),
    }
}

/// Kinds of the group that axon knows and does not serve: reported as not served, skipped.
const NOT_SERVED_KINDS: [&str; 2] = ["EnvoyFilter", "ProxyConfig"];

/// Whether a document axon skips (a [`DocOutcome::Unsupported`]) carries mesh meaning that is
/// then dropped: an Istio kind (any `*.istio.io` group: AuthorizationPolicy, Telemetry,
/// WasmPlugin, EnvoyFilter, ...) or a Gateway API kind. Such a document is a warning at load
/// and fails `axon validate --strict`, as a field not applied does; any other Kubernetes
/// kind (a Deployment) is only noted as skipped.
pub fn drops_meaning(api_version: &str) -> bool {
    let group = api_version.split_once('/').map_or("", |(g, _)| g);
    group.ends_with(".istio.io")
        || group == "gateway.networking.k8s.io"
        || group == "gateway.networking.x-k8s.io"
}

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
        ConfigKind::PeerAuthentication => &schema::PEER_AUTHENTICATION,
        ConfigKind::AuthorizationPolicy => &schema::AUTHORIZATION_POLICY,
        ConfigKind::RequestAuthentication => &schema::REQUEST_AUTHENTICATION,
        ConfigKind::Telemetry => &schema::TELEMETRY,
        // Secrets are decoded by `parse_secret`, and fetched JWKS made by the resolver, never
        // walked against a schema; the Gateway API's types deny unknown fields themselves.
        ConfigKind::Secret | ConfigKind::Jwks | ConfigKind::Namespace | ConfigKind::ConfigMap => {
            &NO_FIELDS
        }
        ConfigKind::GatewayClass
        | ConfigKind::KubernetesGateway
        | ConfigKind::HttpRoute
        | ConfigKind::GrpcRoute
        | ConfigKind::TlsRoute
        | ConfigKind::TcpRoute
        | ConfigKind::ReferenceGrant
        | ConfigKind::BackendTlsPolicy => &NO_FIELDS,
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
        ConfigKind::PeerAuthentication => Spec::PeerAuthentication(de(spec)?),
        ConfigKind::AuthorizationPolicy => Spec::AuthorizationPolicy(de(spec)?),
        ConfigKind::RequestAuthentication => Spec::RequestAuthentication(de(spec)?),
        ConfigKind::Telemetry => Spec::Telemetry(de(spec)?),
        ConfigKind::GatewayClass => Spec::GatewayClass(de(spec)?),
        ConfigKind::KubernetesGateway => Spec::KubernetesGateway(de(spec)?),
        ConfigKind::HttpRoute => Spec::HttpRoute(de(spec)?),
        ConfigKind::GrpcRoute => Spec::GrpcRoute(de(spec)?),
        ConfigKind::TlsRoute => Spec::TlsRoute(de(spec)?),
        ConfigKind::TcpRoute => Spec::TcpRoute(de(spec)?),
        ConfigKind::ReferenceGrant => Spec::ReferenceGrant(de(spec)?),
        ConfigKind::BackendTlsPolicy => Spec::BackendTlsPolicy(de(spec)?),
        ConfigKind::Secret | ConfigKind::Jwks | ConfigKind::Namespace | ConfigKind::ConfigMap => {
            return Err(DocError::NotAnObject);
        }
    })
}

#[cfg(test)]
mod tests;
