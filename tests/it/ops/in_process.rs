//! axon started in process with `app::start` (no child process, no log to read): the bound
//! addresses come from its `Handles`, `/ready` answers once the config directory was read,
//! an ADS client gets the gateway's clusters, and the shutdown future given to
//! `Handles::serve_until` drains it and ends it.

use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::Duration;

use axon::app::{self, Settings};
use axon::limits::Limits;

use crate::support::ads_client::{self, Client, GATEWAY_ID, gateway_node};
use crate::support::{ConfigDir, http_get, wait_until};

fn settings(dir: &ConfigDir) -> Settings {
    let any: SocketAddr = "127.0.0.1:0".parse().expect("an address");
    Settings {
        config_dir: Some(dir.path().to_path_buf()),
        kubernetes: false,
        cluster_domain: "cluster.local".to_string(),
        namespace_selector: None,
        xds_addr: Some(any),
        xds_tls: None,
        token_auth: None,
        token_audience: vec!["istio-ca".to_string()],
        monitoring_addr: any,
        debug_addr: any,
        debug_token_file: None,
        limits: Limits::default(),
        mesh: app::mesh_config::load(None, None, None, None).expect("the default mesh"),
        plaintext_secrets: true,
        peers: Vec::new(),
        peer_service: None,
        replica_name: Some("in-process".to_string()),
        listening_file: None,
    }
}

#[test]
fn axon_serves_in_process_and_drains_when_told() {
    let dir = ConfigDir::new();
    dir.write("mesh.yaml", &ads_client::mesh(100));
    let settings = settings(&dir);
    let (addrs_tx, addrs_rx) = mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        actix_rt::System::with_tokio_rt(|| runtime).block_on(async move {
            let handles = app::start(settings).await?;
            let listening = handles.listening();
            addrs_tx
                .send((handles.xds_addr, handles.monitoring_addr, listening))
                .expect("the test waits");
            handles
                .serve_until(async {
                    let _ = stop_rx.await;
                })
                .await
        })
    });
    let (xds, monitoring, listening) = addrs_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("app::start returns its handles");
    let xds = xds.expect("plaintext xDS is on");
    assert_eq!(listening["xds_addr"], xds.to_string());
    assert_eq!(listening["monitoring_addr"], monitoring.to_string());
    assert_eq!(listening["replica"], "in-process");
    assert!(
        wait_until(Duration::from_secs(30), || http_get(
            monitoring,
            "/ready",
            &[]
        )
        .0 == 200),
        "/ready never answered 200"
    );
    let clusters = ads_client::runtime().block_on(async {
        let mut client = Client::connect_to(xds).await;
        client
            .first_cds(gateway_node(GATEWAY_ID))
            .await
            .resources
            .len()
    });
    assert!(clusters > 0, "the gateway got no clusters");
    stop_tx.send(()).expect("the server waits for the stop");
    let served = server.join().expect("the server thread ends");
    assert!(served.is_ok(), "{served:?}");
}
