//! Fixtures shared by the validator's unit tests: validate a spec written as YAML, and assert
//! that it is valid, or invalid with a given message.

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::validate;
use crate::config::{Config, ConfigKey, Spec};
use crate::istio::Labels;

/// Validates `spec` (YAML) as a `kind` called `name` in namespace `default`.
pub(super) fn check_named(kind: &str, name: &str, spec: &str) -> Result<(), Vec<String>> {
    fn typed_spec<T: DeserializeOwned>(v: Value) -> T {
        serde_json::from_value(v).expect("fixture fits the typed model")
    }
    let value: Value = serde_norway::from_str(spec).expect("fixture is YAML");
    let spec = match kind {
        "ServiceEntry" => Spec::ServiceEntry(typed_spec(value)),
        "WorkloadEntry" => Spec::WorkloadEntry(typed_spec(value)),
        "WorkloadGroup" => Spec::WorkloadGroup(typed_spec(value)),
        "VirtualService" => Spec::VirtualService(typed_spec(value)),
        "DestinationRule" => Spec::DestinationRule(typed_spec(value)),
        "Gateway" => Spec::Gateway(typed_spec(value)),
        "Sidecar" => Spec::Sidecar(typed_spec(value)),
        "PeerAuthentication" => Spec::PeerAuthentication(typed_spec(value)),
        "AuthorizationPolicy" => Spec::AuthorizationPolicy(typed_spec(value)),
        "RequestAuthentication" => Spec::RequestAuthentication(typed_spec(value)),
        "Telemetry" => Spec::Telemetry(typed_spec(value)),
        other => panic!("unknown kind {other}"),
    };
    validate(&Config {
        key: ConfigKey::new(spec.kind(), "default", name),
        labels: Labels::new(),
        created: None,
        spec,
        not_applied: Vec::new(),
    })
}

pub(super) fn check(kind: &str, spec: &str) -> Result<(), Vec<String>> {
    check_named(kind, "test", spec)
}

#[track_caller]
pub(super) fn valid(kind: &str, spec: &str) {
    if let Err(errs) = check(kind, spec) {
        panic!("expected a valid {kind}, got:\n{}", errs.join("\n"));
    }
}

/// Asserts that some message contains `expected`; returns all messages.
#[track_caller]
pub(super) fn invalid(kind: &str, spec: &str, expected: &str) -> Vec<String> {
    match check(kind, spec) {
        Ok(()) => panic!("expected an error containing {expected:?}, but the {kind} is valid"),
        Err(errs) => {
            assert!(
                errs.iter().any(|e| e.contains(expected)),
                "expected an error containing {expected:?}, got:\n{}",
                errs.join("\n")
            );
            errs
        }
    }
}
