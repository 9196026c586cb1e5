//! The fleet view without Envoy: two replicas in file mode (`--peers`, a shared
//! `--debug-token-file`), one ADS client on each. `?fleet=true` answers for both, each entry
//! naming its replica; the per-proxy `/fleet/…` answers on the open monitoring address need
//! the token, and exist only with peers configured; a stopped peer is named unreachable and
//! left out of the rest.

use crate::support;
use crate::support::ads_client;

use std::time::Duration;

use ads_client::*;
use serde_json::Value;
use support::*;

const MESH: &str = "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: svc, namespace: demo}\nspec:\n  hosts: [svc.demo.svc.cluster.local]\n  location: MESH_INTERNAL\n  resolution: STATIC\n  ports: [{number: 80, name: http, protocol: HTTP}]\n  endpoints: [{address: 10.0.0.9}]\n";
const TOKEN: &str = "fleet-token";

fn get(addr: std::net::SocketAddr, path: &str, token: Option<&str>) -> HttpResponse {
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("Host", "localhost")];
    if let Some(auth) = &auth {
        headers.push(("Authorization", auth.as_str()));
    }
    http_request(addr, "GET", path, &headers, Duration::from_secs(5))
}

fn json(r: HttpResponse) -> Value {
    assert_eq!(r.status, 200, "{}", r.body);
    serde_json::from_str(&r.body).expect("JSON")
}

#[test]
fn the_fleet_view_answers_for_every_replica_and_names_the_silent_ones() {
    let config = ConfigDir::new();
    config.write("mesh.yaml", MESH);
    let secrets = ConfigDir::new();
    secrets.write("token", TOKEN);
    let token_file = secrets.file("token").display().to_string();
    let monitoring = [free_port(), free_port()];
    let peers = format!("127.0.0.1:{},127.0.0.1:{}", monitoring[0], monitoring[1]);
    let start = |i: usize| {
        Axon::start_at(
            config.path(),
            free_port(),
            monitoring[i],
            &[
                "--replica-name",
                ["a", "b"][i],
                "--peers",
                &peers,
                "--debug-token-file",
                &token_file,
            ],
        )
    };
    let a = start(0);
    let mut b = start(1);
    let rt = runtime();
    let ids = [
        "sidecar~10.0.0.1~app-a.demo~demo.svc.cluster.local",
        "sidecar~10.0.0.2~app-b.demo~demo.svc.cluster.local",
    ];
    let _clients: Vec<Client> = [(&a, ids[0]), (&b, ids[1])]
        .into_iter()
        .map(|(axon, id)| {
            rt.block_on(async {
                let mut c = Client::connect(axon).await;
                c.subscribe_wildcards(istio_node(id, "demo", &[("app", "x")]))
                    .await;
                c
            })
        })
        .collect();

    // The monitoring address: the count for anyone, the proxies only with the token.
    let replica = json(a.monitoring_get("/fleet/replica"));
    assert_eq!(
        (replica["replica"].as_str(), replica["streams"].as_u64()),
        (Some("a"), Some(1))
    );
    assert_eq!(get(a.monitoring_addr(), "/fleet/syncz", None).status, 401);
    let mine = json(get(a.monitoring_addr(), "/fleet/syncz", Some(TOKEN)));
    assert_eq!(mine["proxies"][0]["proxy"], ids[0], "{mine}");

    // The fleet view, asked of a.
    let mut view = Value::Null;
    let both = wait_until(Duration::from_secs(10), || {
        view = json(get(a.debug_addr(), "/debug/syncz?fleet=true", Some(TOKEN)));
        view["proxies"].as_array().is_some_and(|p| p.len() == 2)
    });
    assert!(both, "{view}");
    let mut held: Vec<(String, String)> = view["proxies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["proxy"].as_str().unwrap().into(),
                p["replica"].as_str().unwrap().into(),
            )
        })
        .collect();
    held.sort();
    assert_eq!(
        held,
        [(ids[0].into(), "a".into()), (ids[1].into(), "b".into())]
    );
    assert_eq!(view["unreachable"], serde_json::json!([]));
    let connections = json(get(
        a.debug_addr(),
        "/debug/connections?fleet=true",
        Some(TOKEN),
    ));
    assert_eq!(connections["total"], 2, "{connections}");
    let local = json(get(a.debug_addr(), "/debug/connections", Some(TOKEN)));
    assert_eq!(
        (
            local["total"].as_u64(),
            local["connections"][0]["replica"].as_str()
        ),
        (Some(1), Some("a"))
    );
    let fleet = json(get(a.debug_addr(), "/debug/fleet", Some(TOKEN)));
    assert_eq!(
        fleet["peers"].as_array().unwrap().len(),
        1,
        "a is not its own peer: {fleet}"
    );

    // b stops: it is named unreachable, a's own proxy is still there.
    b.stop();
    let view = json(get(a.debug_addr(), "/debug/syncz?fleet=true", Some(TOKEN)));
    assert_eq!(view["proxies"].as_array().unwrap().len(), 1, "{view}");
    assert_eq!(
        view["unreachable"][0]["address"],
        format!("127.0.0.1:{}", monitoring[1]),
        "{view}"
    );
    let distribution = json(get(
        a.debug_addr(),
        "/debug/distribution?fleet=true",
        Some(TOKEN),
    ));
    assert_eq!(
        distribution["unreachable"].as_array().unwrap().len(),
        1,
        "{distribution}"
    );

    // Without peers there is no per-proxy answer on the monitoring address.
    let alone = Axon::start(config.path());
    assert_eq!(alone.monitoring_get("/fleet/syncz").status, 404);
    assert_eq!(alone.monitoring_get("/fleet/replica").status, 200);
    assert!(!alone.logs().contains("without --debug-token-file"));
    assert!(
        !a.logs().contains("without --debug-token-file"),
        "a replica with the token says nothing"
    );

    // Peers without a token: the open per-proxy answers are said at start.
    let open = Axon::start_at(
        config.path(),
        free_port(),
        free_port(),
        &["--peers", &format!("127.0.0.1:{}", monitoring[0])],
    );
    assert!(
        open.wait_for_log("without --debug-token-file", Duration::from_secs(10)),
        "{}",
        open.logs()
    );
    assert_eq!(open.monitoring_get("/fleet/syncz").status, 200);
}
