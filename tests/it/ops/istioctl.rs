//! `istioctl proxy-status` against axon, over xDS as istioctl asks istiod: the exact request
//! istioctl sends (`support/istioctl.rs`) gets every connected proxy, SotW and Delta, with
//! its per-type sync state as CSDS `ClientConfig`s, and the replica that answers in
//! `control_plane`; `istio.io/debug/config_dump` gives one proxy's config dump; on the TLS
//! port a caller outside the system namespace sees its own namespace only.

use std::collections::BTreeMap;
use std::time::Duration;

use envoy_types::pb::envoy::admin::v3::ClustersConfigDump;
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DiscoveryResponse};
use envoy_types::pb::envoy::service::status::v3::{ClientConfig, ConfigStatus};
use prost::Message;

use crate::support::ads_client::{
    CDS, Client, GATEWAY_ID, LDS, V1, gateway_node, istio_node, mesh,
};
use crate::support::axon_ca::AxonCa;
use crate::support::delta_client::Delta;
use crate::support::istioctl::{CONFIG_DUMP, Port, SYNCZ, ask, istioctl_node, istioctl_request};
use crate::support::{ConfigDir, wait_until};

const SHOP_PROXY: &str = "sidecar~10.0.0.5~app-1.shop~shop.svc.cluster.local";

/// Each proxy's sync state per type, from a syncz answer.
fn states(r: &DiscoveryResponse) -> BTreeMap<String, Vec<(String, ConfigStatus)>> {
    r.resources
        .iter()
        .map(|any| {
            assert_eq!(
                any.type_url,
                "type.googleapis.com/envoy.service.status.v3.ClientConfig"
            );
            let config = ClientConfig::decode(any.value.as_slice()).expect("a ClientConfig");
            let node = config.node.expect("a node");
            let types = config
                .generic_xds_configs
                .iter()
                .map(|g| {
                    let short = g.type_url.rsplit('.').next().unwrap().to_string();
                    (short, ConfigStatus::try_from(g.config_status).unwrap())
                })
                .collect();
            (node.id, types)
        })
        .collect()
}

fn syncz_at(
    xds: std::net::SocketAddr,
) -> Result<DiscoveryResponse, crate::support::istioctl::Refused> {
    ask(
        xds,
        &Port::Plaintext,
        istioctl_request("istio-system", SYNCZ, &[]),
    )
}

#[test]
fn istioctl_proxy_status_over_xds_sees_every_proxy_and_only_its_namespace_on_tls() {
    let config = ConfigDir::new();
    config.write("mesh.yaml", &mesh(100));
    let ca = AxonCa::start(&config);
    let axon = &ca.axon;
    let rt = crate::support::ads_client::runtime();

    // Two proxies: a gateway on SotW (CDS and LDS ACKed) and a sidecar in `shop` on Delta
    // (its clusters sent, not ACKed).
    let mut gateway = rt.block_on(Client::connect(axon));
    rt.block_on(gateway.subscribe_wildcards(gateway_node(GATEWAY_ID)));
    let mut sidecar = rt.block_on(Delta::connect(axon));
    rt.block_on(async {
        sidecar
            .send(DeltaDiscoveryRequest {
                node: Some(istio_node(SHOP_PROXY, "shop", &[("app", "app")])),
                type_url: CDS.to_string(),
                ..Default::default()
            })
            .await;
        sidecar.next().await
    });

    let xds = axon.xds_addr();
    let syncz = || {
        ask(
            xds,
            &Port::Plaintext,
            istioctl_request("istio-system", SYNCZ, &[]),
        )
    };
    assert!(
        wait_until(Duration::from_secs(10), || syncz()
            .is_ok_and(|r| r.resources.len() == 2)),
        "{:?}",
        syncz()
    );
    let answer = syncz().expect("syncz answered");
    assert_eq!(answer.type_url, SYNCZ);
    let states = states(&answer);
    assert_eq!(
        states[GATEWAY_ID],
        [
            ("Cluster".to_string(), ConfigStatus::Synced),
            ("Listener".to_string(), ConfigStatus::Synced)
        ],
        "{states:?}"
    );
    assert_eq!(
        states[SHOP_PROXY],
        [("Cluster".to_string(), ConfigStatus::Stale)],
        "{states:?}"
    );
    assert!(
        !states.contains_key(&istioctl_node("istio-system").id),
        "istioctl's own stream is no proxy"
    );
    let replica: serde_json::Value =
        serde_json::from_str(&axon.monitoring_get("/fleet/replica").body).unwrap();
    let replica = replica["replica"]
        .as_str()
        .expect("the replica's name")
        .to_string();
    let identifier: serde_json::Value =
        serde_json::from_str(&answer.control_plane.expect("control_plane").identifier).unwrap();
    assert_eq!(identifier["ID"], replica.as_str(), "{identifier}");
    assert_eq!(identifier["Component"], "istiod");

    // Two istioctl clients at once do not wait on each other (each answers the other's
    // status while it gathers its own), well within debug_query_timeout.
    let started = std::time::Instant::now();
    let both: Vec<_> = (0..2)
        .map(|_| std::thread::spawn(move || syncz_at(xds)))
        .collect();
    for answer in both {
        let answer = answer.join().unwrap().expect("answered");
        assert_eq!(answer.resources.len(), 2);
    }
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );

    // The same over Delta.
    rt.block_on(async {
        let mut client = Delta::connect(axon).await;
        client
            .send(DeltaDiscoveryRequest {
                node: Some(istioctl_node("istio-system")),
                type_url: SYNCZ.to_string(),
                ..Default::default()
            })
            .await;
        let r = client.next().await;
        let mut names: Vec<_> = r.resources.iter().map(|x| x.name.clone()).collect();
        names.sort();
        assert_eq!(names, [GATEWAY_ID, SHOP_PROXY]);
    });

    // A config dump of one proxy, named as `istioctl proxy-status POD.NAMESPACE` names it.
    let dump = ask(
        xds,
        &Port::Plaintext,
        istioctl_request("istio-system", CONFIG_DUMP, &["gw-1.istio-system"]),
    )
    .expect("config_dump answered");
    let clusters = dump
        .resources
        .iter()
        .find(|a| a.type_url.ends_with("ClustersConfigDump"))
        .map(|a| ClustersConfigDump::decode(a.value.as_slice()).unwrap())
        .expect("a clusters section");
    assert!(
        clusters.dynamic_active_clusters.iter().any(|c| c
            .cluster
            .as_ref()
            .is_some_and(|a| a.value.windows(V1.len()).any(|w| w == V1.as_bytes()))),
        "{clusters:?}"
    );

    // The TLS port: the system namespace sees both; `shop` sees its own proxy only, and no
    // config dump of another namespace's.
    let tls = axon.xds_tls_addr().expect("the TLS port");
    let system = Port::Tls {
        root: ca.root_path.clone(),
        token: ca.token("istio-system", "default"),
    };
    let all = ask(tls, &system, istioctl_request("istio-system", SYNCZ, &[])).expect("answered");
    assert_eq!(all.resources.len(), 2);
    let shop = Port::Tls {
        root: ca.root_path.clone(),
        token: ca.token("shop", "default"),
    };
    let own = ask(tls, &shop, istioctl_request("shop", SYNCZ, &[])).expect("answered");
    assert_eq!(
        self::states(&own).into_keys().collect::<Vec<_>>(),
        [SHOP_PROXY]
    );
    let other = ask(
        tls,
        &shop,
        istioctl_request("shop", CONFIG_DUMP, &["gw-1.istio-system"]),
    )
    .expect("answered");
    assert!(
        other.resources.is_empty(),
        "another namespace's proxy is not shown"
    );
    let mine = ask(
        tls,
        &shop,
        istioctl_request("shop", CONFIG_DUMP, &["app-1.shop"]),
    )
    .expect("answered");
    assert!(!mine.resources.is_empty(), "its own namespace's proxy is");

    // `istio.io/debug` (istioctl x internal-debug): a proven identity only; the system
    // namespace reads any path, another namespace config_dump of its own proxies alone.
    let http = "istio.io/debug";
    let plain = ask(
        xds,
        &Port::Plaintext,
        istioctl_request("istio-system", http, &["syncz"]),
    );
    assert_eq!(
        plain.map_err(|r| r.code),
        Err("16".to_string()),
        "UNAUTHENTICATED"
    );
    let syncz = ask(
        tls,
        &system,
        istioctl_request("istio-system", http, &["syncz"]),
    )
    .expect("answered");
    assert_eq!(syncz.resources[0].type_url, http);
    let body: serde_json::Value = serde_json::from_slice(&syncz.resources[0].value).unwrap();
    let proxies: Vec<&str> = body
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["proxy"].as_str())
        .collect();
    assert!(
        proxies.contains(&GATEWAY_ID) && proxies.contains(&SHOP_PROXY),
        "{body}"
    );
    let denied = ask(tls, &shop, istioctl_request("shop", http, &["syncz"]));
    assert_eq!(
        denied.map_err(|r| r.code),
        Err("7".to_string()),
        "PERMISSION_DENIED"
    );
    let own_dump = ask(
        tls,
        &shop,
        istioctl_request("shop", http, &["config_dump?proxyID=app-1.shop"]),
    )
    .expect("answered");
    let body: serde_json::Value = serde_json::from_slice(&own_dump.resources[0].value).unwrap();
    assert!(body["configs"].is_array(), "{body}");
    let other = ask(
        tls,
        &shop,
        istioctl_request("shop", http, &["config_dump?proxyID=gw-1.istio-system"]),
    )
    .expect("answered");
    let text = String::from_utf8_lossy(&other.resources[0].value).into_owned();
    assert!(
        text.starts_with("{\"statusCode\":\"404\"}Proxy not connected to this Pilot instance"),
        "{text}"
    );

    // Without proving its namespace, a caller is refused on the TLS port.
    let stranger = Port::Tls {
        root: ca.root_path.clone(),
        token: "not-a-token".to_string(),
    };
    let refused = ask(tls, &stranger, istioctl_request("istio-system", SYNCZ, &[]));
    assert!(refused.is_err(), "{refused:?}");
    drop((gateway, sidecar));
    let _ = LDS;
}

#[test]
fn each_replica_answers_for_its_own_proxies_and_names_itself() {
    let config = ConfigDir::new();
    config.write("mesh.yaml", &mesh(100));
    let a = crate::support::Axon::start_with_args(config.path(), &["--replica-name", "axon-a"]);
    let b = crate::support::Axon::start_with_args(config.path(), &["--replica-name", "axon-b"]);
    let rt = crate::support::ads_client::runtime();
    let mut on_a = rt.block_on(Client::connect(&a));
    rt.block_on(on_a.subscribe_wildcards(gateway_node(GATEWAY_ID)));
    let other = "router~10.0.0.2~gw-2.istio-system~istio-system.svc.cluster.local";
    let mut on_b = rt.block_on(Client::connect(&b));
    rt.block_on(on_b.subscribe_wildcards(gateway_node(other)));
    for (axon, replica, proxy) in [(&a, "axon-a", GATEWAY_ID), (&b, "axon-b", other)] {
        let answer = ask(
            axon.xds_addr(),
            &Port::Plaintext,
            istioctl_request("istio-system", SYNCZ, &[]),
        )
        .expect("answered");
        assert_eq!(
            states(&answer).into_keys().collect::<Vec<_>>(),
            [proxy],
            "{replica} answers for its own proxies"
        );
        let identifier: serde_json::Value =
            serde_json::from_str(&answer.control_plane.expect("control_plane").identifier).unwrap();
        assert_eq!(identifier["ID"], replica);
    }
    drop((on_a, on_b));
}
