//! The RBAC filters' configurations as prost messages wire-identical to Envoy's
//! (`envoy.config.rbac.v3.RBAC`, `envoy.extensions.filters.{http,network}.rbac.v3.RBAC`),
//! but for `RBAC.policies`: a protobuf map is a repeated message of key and value on the
//! wire, which these write in key order, so that a configuration encodes the same in every
//! process (prost's `HashMap` would iterate in its random hash order).

use envoy_types::pb::envoy::config::rbac::v3::{
    Permission, Policy, Principal, permission, principal,
};
use envoy_types::pb::google::protobuf::Any;
use prost::Message;

/// `envoy.config.rbac.v3.RBAC`: the action, the policies by name.
#[derive(Clone, PartialEq, Message)]
pub(super) struct RbacRules {
    #[prost(int32, tag = "1")]
    pub action: i32,
    /// Kept sorted by name.
    #[prost(message, repeated, tag = "2")]
    policies: Vec<PolicyEntry>,
}

#[derive(Clone, PartialEq, Message)]
struct PolicyEntry {
    #[prost(string, tag = "1")]
    key: String,
    #[prost(message, optional, tag = "2")]
    value: Option<Policy>,
}

impl RbacRules {
    pub(super) fn new(action: i32) -> RbacRules {
        RbacRules {
            action,
            ..Default::default()
        }
    }

    /// Adds (or replaces) the policy `name`, keeping the names in order.
    pub(super) fn insert(&mut self, name: String, policy: Policy) {
        let entry = PolicyEntry {
            key: name,
            value: Some(policy),
        };
        match self
            .policies
            .binary_search_by(|p| p.key.as_str().cmp(entry.key.as_str()))
        {
            Ok(i) => self.policies[i] = entry,
            Err(i) => self.policies.insert(i, entry),
        }
    }

    /// Its policies, by name in order.
    pub(super) fn entries(self) -> impl Iterator<Item = (String, Policy)> {
        self.policies
            .into_iter()
            .map(|e| (e.key, e.value.unwrap_or_default()))
    }

    pub(super) fn is_empty(&self) -> bool {
        self.policies.is_empty()
    }

    /// The policies' names, in order.
    #[cfg(test)]
    pub(super) fn names(&self) -> Vec<&str> {
        self.policies.iter().map(|p| p.key.as_str()).collect()
    }
}

/// `envoy.extensions.filters.http.rbac.v3.RBAC`.
#[derive(Clone, PartialEq, Message)]
pub(super) struct HttpRbac {
    #[prost(message, optional, tag = "1")]
    pub rules: Option<RbacRules>,
    #[prost(message, optional, tag = "2")]
    pub shadow_rules: Option<RbacRules>,
    #[prost(string, tag = "3")]
    pub shadow_rules_stat_prefix: String,
}

/// `envoy.extensions.filters.network.rbac.v3.RBAC`.
#[derive(Clone, PartialEq, Message)]
pub(super) struct NetworkRbac {
    #[prost(message, optional, tag = "1")]
    pub rules: Option<RbacRules>,
    #[prost(message, optional, tag = "2")]
    pub shadow_rules: Option<RbacRules>,
    #[prost(string, tag = "3")]
    pub stat_prefix: String,
    #[prost(string, tag = "5")]
    pub shadow_rules_stat_prefix: String,
}

impl HttpRbac {
    pub(super) fn to_any(&self) -> Any {
        Any {
            type_url: "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC".to_string(),
            value: self.encode_to_vec(),
        }
    }
}

impl NetworkRbac {
    pub(super) fn to_any(&self) -> Any {
        Any {
            type_url: "type.googleapis.com/envoy.extensions.filters.network.rbac.v3.RBAC"
                .to_string(),
            value: self.encode_to_vec(),
        }
    }
}

/// istiod's `rbacPolicyMatchNever`: a policy no request matches.
pub(super) fn never() -> Policy {
    Policy {
        permissions: vec![Permission {
            rule: Some(permission::Rule::NotRule(Box::new(Permission {
                rule: Some(permission::Rule::Any(true)),
            }))),
        }],
        principals: vec![Principal {
            identifier: Some(principal::Identifier::NotId(Box::new(Principal {
                identifier: Some(principal::Identifier::Any(true)),
            }))),
        }],
        ..Default::default()
    }
}
