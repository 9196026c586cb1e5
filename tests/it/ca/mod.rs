//! axon as the mesh's CA (`--ca-dir`): istiod's `CreateCertificate` on the TLS xDS port,
//! called as pilot-agent calls it (`support::ca_client`), against the real axon binary.
//!
//! - `service.rs`: who may ask and what they get (the caller's identity only, the chain as
//!   istiod returns it, `validity_duration`), the refusals, renewal with an issued
//!   certificate, and the TLS port's own certificate issued by the CA.
//! - `roots.rs`: the signing root as istiod keeps it: a self-signed root kept across a
//!   restart, a plug-in chain returned whole, a rotated plug-in picked up without a restart,
//!   the CA-issued serving certificate renewed.
//! - `kubernetes.rs`: the root published in every namespace's `istio-ca-root-cert`.

mod kubernetes;
mod roots;
mod service;
