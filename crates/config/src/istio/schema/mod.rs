//! The Istio networking API's shape, field by field (istio/api `networking/v1alpha3/*.proto`,
//! which `v1beta1` and `v1` share, in their JSON form: camelCase names; and
//! `security/v1/peer_authentication.proto`, `request_authentication.proto` and `jwt.proto`), and which fields axon
//! applies. A document is checked against it before it is typed: a field the API does not have
//! is an error (with the nearest known name as a suggestion), and a field the API has but axon
//! does not translate is reported as "accepted but not applied by axon" with its path, so that
//! no field is ever dropped silently.

mod tables;
mod telemetry;

pub use tables::{
    AUTHORIZATION_POLICY, DESTINATION_RULE, GATEWAY, MESH_DEFAULT_TRAFFIC_POLICY,
    PEER_AUTHENTICATION, REQUEST_AUTHENTICATION, SERVICE_ENTRY, SIDECAR, VIRTUAL_SERVICE,
    WORKLOAD_ENTRY, WORKLOAD_GROUP,
};
pub use telemetry::TELEMETRY;

/// A message of the API.
#[derive(Debug)]
pub struct Message {
    /// The proto message name, e.g. `HTTPRoute`.
    pub name: &'static str,
    pub fields: &'static [Field],
}

/// A field of a message, by its JSON name.
#[derive(Debug)]
pub struct Field {
    /// The JSON (camelCase) name, e.g. `perTryTimeout`.
    pub name: &'static str,
    pub kind: Kind,
    /// Whether axon translates it as istiod does.
    pub applied: Applied,
}

/// What a field holds (a repeated field holds a list of it).
#[derive(Debug)]
pub enum Kind {
    /// A string, number, bool, enum, Duration or wrapper value.
    Scalar,
    /// A message.
    Message(&'static Message),
    /// A map from strings to messages.
    MapOf(&'static Message),
    /// A map from strings to scalars (labels, annotations).
    ScalarMap,
    /// Anything (`google.protobuf.Struct`, `Any`).
    Any,
}

/// Whether axon applies a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// Translated as istiod translates it (for a message: those of its fields marked so).
    Yes,
    /// Accepted and validated, not translated: reported, with everything under it.
    No,
}

/// What a spec holds beyond what axon applies.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Findings {
    /// `path: reason` for each field the API does not have, e.g.
    /// ``spec.http[0].gateway: unknown field `gateway` of HTTPMatchRequest; did you mean `gateways`?``
    pub unknown: Vec<String>,
    /// The path of each field the API has and axon does not apply, e.g. `spec.http[0].retries`.
    pub not_applied: Vec<String>,
}

/// Checks `spec` (a document's `spec`, as decoded) against `root`. Values of the wrong type
/// are left to the typed decoding, which reports them.
pub fn check(spec: &serde_json::Value, root: &'static Message) -> Findings {
    let mut findings = Findings::default();
    walk(spec, &Kind::Message(root), "spec", true, &mut findings);
    findings
}

/// `applied`: whether everything above is applied (only then is a field that is not
/// reported: one report covers a subtree).
fn walk(value: &serde_json::Value, kind: &Kind, path: &str, applied: bool, out: &mut Findings) {
    use serde_json::Value;
    if let Value::Array(items) = value {
        if !matches!(kind, Kind::Any) {
            for (i, item) in items.iter().enumerate() {
                walk(item, kind, &format!("{path}[{i}]"), applied, out);
            }
        }
        return;
    }
    let Value::Object(map) = value else {
        return;
    };
    match kind {
        Kind::Scalar | Kind::ScalarMap | Kind::Any => {}
        Kind::MapOf(message) => {
            for (key, entry) in map {
                walk(
                    entry,
                    &Kind::Message(message),
                    &format!("{path}.{key}"),
                    applied,
                    out,
                );
            }
        }
        Kind::Message(message) => {
            for (key, entry) in map {
                let here = format!("{path}.{key}");
                let Some(field) = message.fields.iter().find(|f| f.name == key) else {
                    out.unknown.push(unknown_field(&here, key, message));
                    continue;
                };
                if entry.is_null() {
                    continue;
                }
                let applied_here = applied && field.applied == Applied::Yes;
                if applied && !applied_here {
                    out.not_applied.push(here.clone());
                }
                walk(entry, &field.kind, &here, applied_here, out);
            }
        }
    }
}

fn unknown_field(path: &str, key: &str, message: &Message) -> String {
    let nearest = message
        .fields
        .iter()
        .map(|f| {
            (
                strsim::levenshtein(&key.to_ascii_lowercase(), &f.name.to_ascii_lowercase()),
                f.name,
            )
        })
        .min();
    let hint = match nearest {
        Some((distance, name)) if distance <= (key.len() / 3).max(2) => {
            format!("; did you mean `{name}`?")
        }
        _ => String::new(),
    };
    format!("{path}: unknown field `{key}` of {}{hint}", message.name)
}

/// Every field that is not applied, as `Kind: path` lines (`[]` for a list or map entry),
/// in table order: what the README lists.
pub fn not_applied_fields() -> Vec<String> {
    let mut out = Vec::new();
    for (kind, root) in [
        ("VirtualService", &VIRTUAL_SERVICE),
        ("DestinationRule", &DESTINATION_RULE),
        ("Gateway", &GATEWAY),
        ("ServiceEntry", &SERVICE_ENTRY),
        ("WorkloadEntry", &WORKLOAD_ENTRY),
        ("WorkloadGroup", &WORKLOAD_GROUP),
        ("Sidecar", &SIDECAR),
        ("PeerAuthentication", &PEER_AUTHENTICATION),
        ("RequestAuthentication", &REQUEST_AUTHENTICATION),
        ("Telemetry", &TELEMETRY),
    ] {
        list(kind, root, "spec", &mut Vec::new(), &mut out);
    }
    out
}

fn list(
    kind: &str,
    message: &'static Message,
    path: &str,
    seen: &mut Vec<&'static str>,
    out: &mut Vec<String>,
) {
    if seen.contains(&message.name) {
        return; // a recursive message (a route's own sub-routes) is listed once
    }
    seen.push(message.name);
    for field in message.fields {
        let here = format!("{path}.{}", field.name);
        if field.applied == Applied::No {
            out.push(format!("{kind}: {here}"));
            continue;
        }
        match &field.kind {
            Kind::Message(m) | Kind::MapOf(m) => list(kind, m, &here, seen, out),
            Kind::Scalar | Kind::ScalarMap | Kind::Any => {}
        }
    }
    seen.pop();
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    static MATCH: Message = Message {
        name: "HTTPMatchRequest",
        fields: &[
            Field {
                name: "uri",
                kind: Kind::Scalar,
                applied: Applied::Yes,
            },
            Field {
                name: "gateways",
                kind: Kind::Scalar,
                applied: Applied::Yes,
            },
            Field {
                name: "method",
                kind: Kind::Scalar,
                applied: Applied::No,
            },
            Field {
                name: "headers",
                kind: Kind::MapOf(&STRING_MATCH),
                applied: Applied::Yes,
            },
        ],
    };
    static STRING_MATCH: Message = Message {
        name: "StringMatch",
        fields: &[
            Field {
                name: "exact",
                kind: Kind::Scalar,
                applied: Applied::Yes,
            },
            Field {
                name: "regex",
                kind: Kind::Scalar,
                applied: Applied::No,
            },
        ],
    };
    static RETRY: Message = Message {
        name: "HTTPRetry",
        fields: &[Field {
            name: "attempts",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        }],
    };
    static ROUTE: Message = Message {
        name: "HTTPRoute",
        fields: &[
            Field {
                name: "match",
                kind: Kind::Message(&MATCH),
                applied: Applied::Yes,
            },
            Field {
                name: "retries",
                kind: Kind::Message(&RETRY),
                applied: Applied::No,
            },
            Field {
                name: "delegate",
                kind: Kind::Message(&ROUTE),
                applied: Applied::Yes,
            },
        ],
    };
    static ROOT: Message = Message {
        name: "VirtualService",
        fields: &[Field {
            name: "http",
            kind: Kind::Message(&ROUTE),
            applied: Applied::Yes,
        }],
    };

    #[test]
    fn unknown_fields_are_named_with_the_nearest_known_one() {
        let spec = json!({"http": [{"match": [{"gateway": ["gw"], "uri": {"exact": "/"}}, {"fooBarBaz": 1}]}]});
        let found = check(&spec, &ROOT);
        assert_eq!(
            found.unknown,
            [
                "spec.http[0].match[0].gateway: unknown field `gateway` of HTTPMatchRequest; did you mean `gateways`?",
                "spec.http[0].match[1].fooBarBaz: unknown field `fooBarBaz` of HTTPMatchRequest",
            ]
        );
        assert!(found.not_applied.is_empty());
    }

    #[test]
    fn fields_not_applied_are_reported_once_per_subtree_and_still_checked() {
        let spec = json!({"http": [
            {"match": [{"method": {"exact": "POST"}, "headers": {"x-a": {"regex": "a.*"}}}]},
            {"retries": {"attempts": 3, "atempts": 1}, "delegate": {"retries": null}},
        ]});
        let found = check(&spec, &ROOT);
        assert_eq!(
            found.not_applied,
            [
                "spec.http[0].match[0].headers.x-a.regex",
                "spec.http[0].match[0].method",
                "spec.http[1].retries",
            ]
        );
        // Under a field that is not applied, an unknown one is still an error.
        assert_eq!(found.unknown.len(), 1, "{:?}", found.unknown);
        assert!(found.unknown[0].starts_with("spec.http[1].retries.atempts: unknown field"));
    }

    #[test]
    fn values_of_the_wrong_type_are_left_to_the_typed_decoding() {
        let found = check(&json!({"http": "not a list", "x": 1}), &ROOT);
        assert_eq!(
            found.unknown,
            ["spec.x: unknown field `x` of VirtualService"]
        );
        assert!(check(&json!("scalar spec"), &ROOT) == Findings::default());
    }

    #[test]
    fn every_message_has_distinct_field_names() {
        fn visit(m: &'static Message, seen: &mut Vec<&'static str>) {
            if seen.contains(&m.name) {
                return;
            }
            seen.push(m.name);
            let mut names: Vec<_> = m.fields.iter().map(|f| f.name).collect();
            names.sort();
            let before = names.len();
            names.dedup();
            assert_eq!(names.len(), before, "{} has a field twice", m.name);
            for f in m.fields {
                if let Kind::Message(c) | Kind::MapOf(c) = f.kind {
                    visit(c, seen);
                }
            }
        }
        let mut seen = Vec::new();
        for root in [
            &VIRTUAL_SERVICE,
            &DESTINATION_RULE,
            &GATEWAY,
            &SERVICE_ENTRY,
            &WORKLOAD_ENTRY,
            &WORKLOAD_GROUP,
            &SIDECAR,
        ] {
            visit(root, &mut seen);
        }
        assert!(seen.len() > 40, "only {} messages", seen.len());
    }
}
