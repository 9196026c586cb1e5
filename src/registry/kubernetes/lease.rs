//! Leader election over a `coordination.k8s.io/v1` Lease, as client-go's leader election
//! that istiod's controllers use: a candidate takes the Lease when it is absent or its
//! holder let it expire, and the holder renews it. [`Election::acquire`] is one round of
//! that, called by the task that does the leader's work (the Gateway API status writer,
//! the gateway deployer) at its own pace, at least every [`Timing::renew`].

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};

/// How long a Lease lasts unrenewed, and how often the holder renews it (client-go's
/// leader election defaults: 15 s and 10 s; a candidate retries as often).
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub lease: Duration,
    pub renew: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            lease: Duration::from_secs(15),
            renew: Duration::from_secs(10),
        }
    }
}

/// One replica's candidacy for the Lease `name` in a namespace.
pub struct Election {
    leases: Api<Lease>,
    namespace: String,
    name: &'static str,
    identity: String,
    pub timing: Timing,
}

impl Election {
    pub fn new(
        client: &kube::Client,
        namespace: &str,
        name: &'static str,
        identity: &str,
        timing: Timing,
    ) -> Self {
        Election {
            leases: Api::namespaced(client.clone(), namespace),
            namespace: namespace.to_string(),
            name,
            identity: identity.to_string(),
            timing,
        }
    }

    /// The namespace of the Lease (axon's own).
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Takes or renews the Lease: whether this replica holds it now.
    pub async fn acquire(&self) -> bool {
        let (leases, name, identity, timing) =
            (&self.leases, self.name, &self.identity, self.timing);
        let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
        let spec = |transitions: i32, acquired: Option<MicroTime>| LeaseSpec {
            holder_identity: Some(identity.clone()),
            lease_duration_seconds: Some(timing.lease.as_secs() as i32),
            acquire_time: acquired.or_else(|| Some(now.clone())),
            renew_time: Some(now.clone()),
            lease_transitions: Some(transitions),
            ..Default::default()
        };
        match leases.get_opt(name).await {
            Ok(None) => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(name.to_string()),
                        ..Default::default()
                    },
                    spec: Some(spec(0, None)),
                };
                leases.create(&PostParams::default(), &lease).await.is_ok()
            }
            Ok(Some(mut lease)) => {
                let current = lease.spec.clone().unwrap_or_default();
                let ours = current.holder_identity.as_deref() == Some(identity.as_str());
                let expired = current.renew_time.as_ref().is_none_or(|t| {
                    let lasts = current.lease_duration_seconds.unwrap_or(15).max(1) as i64;
                    t.0.as_second() + lasts < now.0.as_second()
                });
                if !ours && !expired {
                    return false;
                }
                let transitions = current.lease_transitions.unwrap_or(0) + i32::from(!ours);
                let acquired = if ours { current.acquire_time } else { None };
                lease.spec = Some(spec(transitions, acquired));
                // A replace with the resourceVersion read: another replica's write in between
                // makes it a conflict, and this one not the holder.
                leases
                    .replace(name, &PostParams::default(), &lease)
                    .await
                    .is_ok()
            }
            Err(e) => {
                tracing::warn!(lease = name, error = %e, "a Lease cannot be read");
                false
            }
        }
    }
}
