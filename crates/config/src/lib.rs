//! axon-config: the API objects as users write them.
//!
//! Istio's networking kinds ([`istio`], with the schema tables of what axon applies), the
//! Kubernetes Secrets that hold TLS material ([`secret`]), the Kubernetes objects a config
//! directory may hold (Services, EndpointSlices, Pods, Namespaces: [`kubernetes`]) and
//! MeshConfig ([`mesh`]); their
//! strict decoding from YAML or JSON ([`parse`], with the line of every field:
//! [`yaml_lines`], and the bounds on a document: [`yaml_bounds`]), their validation
//! ([`validate`]), what of them axon applies ([`applied`]), the envelope that names one object
//! ([`config`]) and the sets registries hold ([`config_set`], [`file_set`]), and the one stable 64-bit hash
//! ([`hash`]).
//!
//! Pure: nothing here knows actix, tokio, tonic, kube or Envoy. The world view built from
//! these objects is `axon-model`'s.

pub mod applied;
pub mod config;
pub mod config_set;
pub mod file_set;
/// Test material (certificates) for tests of this crate and of its dependents.
#[cfg(any(test, feature = "fixtures"))]
#[doc(hidden)]
pub mod fixtures;
pub mod gateway_api;
pub mod hash;
pub mod host;
pub mod istio;
pub mod kubernetes;
pub mod labels;
pub mod log_safe;
pub mod mesh;
pub mod parse;
pub mod secret;
pub mod timestamp;
pub mod validate;
pub mod yaml_bounds;
pub mod yaml_lines;
