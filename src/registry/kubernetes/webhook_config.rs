//! The validating webhook's configuration kept current, as istiod's webhook controller
//! (`pkg/webhooks/validation/controller`): every webhook of the ValidatingWebhookConfiguration
//! `--webhook-config-name` gets the CA's root as its `clientConfig.caBundle`, set when the
//! configuration appears or is edited and again when the root changes; and a `failurePolicy`
//! of `Ignore` (the manifests', as istiod's chart installs it: fail open until the webhook
//! serves) is turned to `Fail` once the API server is seen to call the webhook: a dry-run
//! create of an invalid Gateway is denied by it (istiod's `readyForFailClose`).
//!
//! [`keep_current`] watches the ValidatingWebhookConfigurations (kube watcher with backoff)
//! and the root (a `watch` channel the wiring feeds from the CA), and looks again every 30 s
//! (a webhook that fails open is tried for readiness again); it writes only what differs
//! ([`updated`], pure).

use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};

/// The configuration with `pem` as every webhook's caBundle and, with `fail_close`, `Fail`
/// in place of an `Ignore` failurePolicy; `None` if it has all that already.
pub fn updated(
    current: &ValidatingWebhookConfiguration,
    pem: &str,
    fail_close: bool,
) -> Option<ValidatingWebhookConfiguration> {
    let bundle = ByteString(pem.as_bytes().to_vec());
    let mut next = current.clone();
    let mut changed = false;
    for webhook in next.webhooks.iter_mut().flatten() {
        if webhook.client_config.ca_bundle.as_ref() != Some(&bundle) {
            webhook.client_config.ca_bundle = Some(bundle.clone());
            changed = true;
        }
        if fail_close && webhook.failure_policy.as_deref() == Some("Ignore") {
            webhook.failure_policy = Some("Fail".to_string());
            changed = true;
        }
    }
    changed.then_some(next)
}

/// Whether any webhook of the configuration fails open.
fn fails_open(current: &ValidatingWebhookConfiguration) -> bool {
    current
        .webhooks
        .iter()
        .flatten()
        .any(|w| w.failure_policy.as_deref() == Some("Ignore"))
}

/// While a webhook fails open, how often the API server is tried again for fail-close
/// readiness (istiod requeues the configuration likewise).
const READY_RECHECK: std::time::Duration = std::time::Duration::from_secs(30);

/// Keeps the configuration `name` current with the root `root` holds; runs until the root's
/// sender is dropped.
pub async fn keep_current(
    client: kube::Client,
    name: String,
    mut root: tokio::sync::watch::Receiver<String>,
) {
    let api = Api::<ValidatingWebhookConfiguration>::all(client.clone());
    let mut stream = watcher(api.clone(), watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut missing_logged = false;
    let mut recheck = tokio::time::interval(READY_RECHECK);
    recheck.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = recheck.tick() => {
                let pem = root.borrow().clone();
                ensure(&client, &api, &name, &pem, &mut missing_logged).await;
            }
            next = stream.next() => match next {
                Some(Ok(watcher::Event::Apply(c) | watcher::Event::InitApply(c)))
                    if c.metadata.name.as_deref() == Some(name.as_str()) =>
                {
                    let pem = root.borrow().clone();
                    ensure(&client, &api, &name, &pem, &mut missing_logged).await;
                }
                Some(Ok(watcher::Event::InitDone)) => {
                    let pem = root.borrow().clone();
                    ensure(&client, &api, &name, &pem, &mut missing_logged).await;
                }
                Some(Ok(_)) => {}
                Some(Err(error)) => {
                    tracing::warn!(%error, "watching ValidatingWebhookConfigurations failed; retrying with backoff");
                }
                None => return,
            },
            changed = root.changed() => {
                if changed.is_err() {
                    return;
                }
                let pem = root.borrow_and_update().clone();
                tracing::info!(webhook_config = %name, "the CA's root changed; updating the webhook's caBundle");
                ensure(&client, &api, &name, &pem, &mut missing_logged).await;
            }
        }
    }
}

/// Writes the configuration's caBundle (and failurePolicy) unless it holds them; a failure
/// is logged (the next event tries again).
async fn ensure(
    client: &kube::Client,
    api: &Api<ValidatingWebhookConfiguration>,
    name: &str,
    pem: &str,
    missing_logged: &mut bool,
) {
    let current = match api.get_opt(name).await {
        Ok(Some(current)) => current,
        Ok(None) => {
            if !std::mem::replace(missing_logged, true) {
                tracing::warn!(
                    webhook_config = name,
                    "no ValidatingWebhookConfiguration of this name (--webhook-config-name); its caBundle is set once it exists"
                );
            }
            return;
        }
        Err(error) => {
            tracing::warn!(webhook_config = name, %error, "cannot read the ValidatingWebhookConfiguration");
            return;
        }
    };
    *missing_logged = false;
    let fail_close = fails_open(&current) && denies_invalid_config(client).await;
    let Some(next) = updated(&current, pem, fail_close) else {
        return;
    };
    match api.replace(name, &PostParams::default(), &next).await {
        Ok(_) => tracing::info!(
            webhook_config = name,
            fail_close,
            "the webhook's caBundle is the CA's root"
        ),
        Err(error) => {
            tracing::warn!(webhook_config = name, %error, "cannot update the ValidatingWebhookConfiguration")
        }
    }
}

/// istiod's `readyForFailClose`: a dry-run create of an invalid Gateway in axon's namespace is
/// denied by the webhook, so the API server reaches it and it refuses what it must.
async fn denies_invalid_config(client: &kube::Client) -> bool {
    let gvk = GroupVersionKind::gvk("networking.istio.io", "v1", "Gateway");
    let resource = ApiResource::from_gvk(&gvk);
    let namespace = client.default_namespace().to_string();
    let api = Api::<DynamicObject>::namespaced_with(client.clone(), &namespace, &resource);
    let mut invalid = DynamicObject::new("axon-invalid-gateway-dry-run", &resource);
    invalid.metadata.labels = Some([("istio.io/rev".to_string(), "default".to_string())].into());
    invalid.data = serde_json::json!({"spec": {"servers": [{"hosts": []}]}});
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    match api.create(&params, &invalid).await {
        Err(kube::Error::Api(e)) => e.message.contains("denied the request"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::admissionregistration::v1::{ValidatingWebhook, WebhookClientConfig};

    fn config(bundle: Option<&str>, policy: &str) -> ValidatingWebhookConfiguration {
        ValidatingWebhookConfiguration {
            webhooks: Some(vec![ValidatingWebhook {
                name: "rev.validation.istio.io".into(),
                client_config: WebhookClientConfig {
                    ca_bundle: bundle.map(|b| ByteString(b.as_bytes().to_vec())),
                    ..Default::default()
                },
                failure_policy: Some(policy.into()),
                ..Default::default()
            }]),
            ..Default::default()
        }
    }

    #[test]
    fn writes_only_what_differs() {
        let fresh = config(None, "Ignore");
        let next = updated(&fresh, "ROOT", false).expect("a caBundle to set");
        let webhook = &next.webhooks.as_ref().unwrap()[0];
        assert_eq!(
            webhook.client_config.ca_bundle,
            Some(ByteString(b"ROOT".to_vec()))
        );
        assert_eq!(
            webhook.failure_policy.as_deref(),
            Some("Ignore"),
            "not ready: fail open"
        );
        assert!(updated(&next, "ROOT", false).is_none(), "nothing to write");
        let closed = updated(&next, "ROOT", true).expect("ready: fail closed");
        assert_eq!(
            closed.webhooks.unwrap()[0].failure_policy.as_deref(),
            Some("Fail")
        );
        assert!(updated(&config(Some("ROOT"), "Fail"), "ROOT", true).is_none());
        assert!(
            updated(&config(Some("OLD"), "Fail"), "ROOT", true).is_some(),
            "a new root"
        );
    }
}
