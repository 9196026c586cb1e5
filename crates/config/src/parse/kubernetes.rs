//! `v1` Namespaces, Services and Pods and `discovery.k8s.io/v1` EndpointSlices in a file
//! ([`crate::kubernetes`]), and `v1` `List` documents (`kubectl get -o yaml`), whose items
//! are read one by one as documents of their own.

use std::sync::Arc;

use super::{DocError, DocOutcome};
use crate::kubernetes::{KubeObject, ObjectCheck, ObjectKey, ObjectKind};

/// The kind of a Kubernetes object axon reads, if `value` is one.
pub(super) fn object_kind(value: &serde_json::Value) -> Option<ObjectKind> {
    let field = |name: &str| value.get(name).and_then(|v| v.as_str());
    ObjectKind::of(field("apiVersion")?, field("kind")?)
}

/// A `v1` `List`'s items (`None`: `value` is no List). Items that are not objects are
/// refused with the List.
pub(super) fn list_items(
    value: &serde_json::Value,
) -> Option<Result<Vec<serde_json::Value>, DocError>> {
    let field = |name: &str| value.get(name).and_then(|v| v.as_str());
    if field("apiVersion") != Some("v1") || field("kind") != Some("List") {
        return None;
    }
    Some(match value.get("items") {
        None | Some(serde_json::Value::Null) => Ok(Vec::new()),
        Some(serde_json::Value::Array(items)) if items.iter().all(|i| i.is_object()) => {
            Ok(items.clone())
        }
        Some(_) => Err(DocError::ListItems),
    })
}

/// One object of kind `kind`: checked against its type with `check` (when given), named
/// (a namespaced object without a namespace is put in `default_namespace`).
pub(super) fn parse_object(
    kind: ObjectKind,
    mut value: serde_json::Value,
    default_namespace: &str,
    check: Option<ObjectCheck>,
) -> DocOutcome {
    if let Some(check) = check
        && let Err(e) = check(kind, &value)
    {
        return DocOutcome::Invalid(DocError::Object {
            kind,
            path: e.path,
            message: e.message,
        });
    }
    let meta = |field: &str| {
        value
            .get("metadata")
            .and_then(|m| m.get(field))
            .and_then(|v| v.as_str())
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let Some(name) = meta("name") else {
        return DocOutcome::Invalid(DocError::MissingName);
    };
    let namespace = match (kind.is_namespaced(), meta("namespace")) {
        (false, _) => String::new(),
        (true, Some(ns)) => ns,
        (true, None) => {
            let ns = default_namespace.to_string();
            if let Some(metadata) = value.get_mut("metadata").and_then(|m| m.as_object_mut()) {
                metadata.insert("namespace".into(), serde_json::Value::String(ns.clone()));
            }
            ns
        }
    };
    DocOutcome::Kubernetes(Box::new(KubeObject {
        key: ObjectKey {
            kind,
            namespace,
            name,
        },
        object: Arc::new(value),
    }))
}

#[cfg(test)]
mod tests {
    use super::super::{ParsedDoc, parse_documents, parse_documents_checked};
    use super::*;
    use crate::kubernetes::FieldError;
    use crate::yaml_bounds::YamlBounds;

    /// A stand-in for the binary's check: `spec.ports[i].port` must be a number.
    fn check(kind: ObjectKind, value: &serde_json::Value) -> Result<(), FieldError> {
        let ports = value.pointer("/spec/ports").and_then(|p| p.as_array());
        for (i, port) in ports.into_iter().flatten().enumerate() {
            if kind == ObjectKind::Service && !port["port"].is_number() {
                return Err(FieldError {
                    path: format!("spec.ports[{i}].port"),
                    message: "invalid type: string, expected i32".into(),
                });
            }
        }
        Ok(())
    }

    fn parse(text: &str) -> Vec<ParsedDoc> {
        parse_documents_checked(text, "default", &YamlBounds::default(), Some(check))
    }

    fn key(doc: &ParsedDoc) -> String {
        match &doc.outcome {
            DocOutcome::Kubernetes(o) => o.key.to_string(),
            other => format!("{other:?}"),
        }
    }

    const SERVICE: &str = "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  clusterIP: 10.96.0.1\n  ports:\n  - name: http\n    port: 80\n";

    #[test]
    fn kubernetes_kinds_are_kept_and_others_skipped() {
        let text = format!(
            "{SERVICE}---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: shop, namespace: ignored}}\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{name: web-1, namespace: shop}}\naddressType: IPv4\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web}}\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: web}}\n"
        );
        let docs = parse(&text);
        let keys: Vec<String> = docs.iter().take(3).map(key).collect();
        assert_eq!(
            keys,
            [
                "Service/default/web",
                "Namespace/shop",
                "EndpointSlice/shop/web-1"
            ]
        );
        let DocOutcome::Kubernetes(web) = &docs[0].outcome else {
            panic!()
        };
        assert_eq!(
            web.object["metadata"]["namespace"], "default",
            "the default namespace is put in the object"
        );
        assert_eq!(
            docs[3].outcome,
            DocOutcome::Unsupported {
                api_version: "apps/v1".into(),
                kind: "Deployment".into()
            }
        );
        assert!(matches!(docs[4].outcome, DocOutcome::Unsupported { .. }));
    }

    #[test]
    fn a_bad_object_names_its_field_and_line() {
        let bad = SERVICE.replace("port: 80", "port: eighty");
        let docs = parse(&format!("{SERVICE}---\n{bad}"));
        assert!(matches!(docs[0].outcome, DocOutcome::Kubernetes(_)));
        let DocOutcome::Invalid(e) = &docs[1].outcome else {
            panic!("{:?}", docs[1])
        };
        assert_eq!(
            e.to_string(),
            "Service: spec.ports[0].port: invalid type: string, expected i32"
        );
        // The second document starts at line 11; its `port:` is its 9th line.
        assert_eq!((docs[1].index, docs[1].line), (2, 19));
        let docs = parse("apiVersion: v1\nkind: Pod\nmetadata: {namespace: x}\n");
        assert_eq!(docs[0].outcome, DocOutcome::Invalid(DocError::MissingName));
    }

    #[test]
    fn a_list_reports_each_item_on_its_own_line() {
        let text = "# kubectl get svc,pods -o yaml\napiVersion: v1\nitems:\n- apiVersion: v1\n  kind: Service\n  metadata: {name: a, namespace: shop}\n  spec:\n    ports:\n    - {name: http, port: x}\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: a-1, namespace: shop}\n- apiVersion: apps/v1\n  kind: Deployment\n  metadata: {name: a, namespace: shop}\n- apiVersion: networking.istio.io/v1\n  kind: Gateway\n  metadata: {name: gw, namespace: shop}\n  spec:\n    servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ['*']}]\nkind: List\nmetadata: {resourceVersion: ''}\n";
        let docs = parse(text);
        assert_eq!(docs.len(), 4, "{docs:?}");
        assert!(docs.iter().all(|d| d.index == 1));
        let lines: Vec<usize> = docs.iter().map(|d| d.line).collect();
        assert_eq!(
            lines,
            [9, 10, 13, 16],
            "the bad port's line, then each item's"
        );
        assert!(
            matches!(&docs[0].outcome, DocOutcome::Invalid(DocError::Object { path, .. }) if path == "spec.ports[0].port")
        );
        assert_eq!(key(&docs[1]), "Pod/shop/a-1");
        assert!(matches!(docs[2].outcome, DocOutcome::Unsupported { .. }));
        assert!(
            matches!(&docs[3].outcome, DocOutcome::Config(c) if c.key.to_string() == "Gateway/shop/gw")
        );
        let empty = parse_documents("apiVersion: v1\nkind: List\nitems: []\n", "default");
        assert_eq!(empty[0].outcome, DocOutcome::Empty);
        let bad = parse_documents("apiVersion: v1\nkind: List\nitems: [1, 2]\n", "default");
        assert_eq!(bad[0].outcome, DocOutcome::Invalid(DocError::ListItems));
    }
}
