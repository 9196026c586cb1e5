//! `ReferenceGrant` (`apis/v1beta1/referencegrant_types.go`) and `BackendTLSPolicy`
//! (`apis/v1/backendtlspolicy_types.go`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::common::LocalObjectReference;

/// `ReferenceGrantSpec`: objects of `to` may be referred to from `from`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReferenceGrantSpec {
    pub from: Vec<ReferenceGrantFrom>,
    pub to: Vec<ReferenceGrantTo>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReferenceGrantFrom {
    pub group: String,
    pub kind: String,
    pub namespace: String,
}

/// One kind of object that may be referred to; every object of it when `name` is unset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReferenceGrantTo {
    pub group: String,
    pub kind: String,
    pub name: Option<String>,
}

/// `BackendTLSPolicySpec`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BackendTlsPolicySpec {
    pub target_refs: Vec<PolicyTargetReference>,
    pub validation: BackendTlsValidation,
    #[serde(default)]
    pub options: BTreeMap<String, String>,
}

/// `LocalPolicyTargetReferenceWithSectionName`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyTargetReference {
    pub group: String,
    pub kind: String,
    pub name: String,
    pub section_name: Option<String>,
}

/// `BackendTLSPolicyValidation`: the CA (ConfigMaps, or the system's), the SNI and the names
/// the backend's certificate must carry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BackendTlsValidation {
    #[serde(default)]
    pub ca_certificate_refs: Vec<LocalObjectReference>,
    #[serde(rename = "wellKnownCACertificates")]
    pub well_known_ca_certificates: Option<String>,
    pub hostname: String,
    #[serde(default)]
    pub subject_alt_names: Vec<SubjectAltName>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SubjectAltName {
    #[serde(rename = "type")]
    pub san_type: String,
    pub hostname: Option<String>,
    pub uri: Option<String>,
}
