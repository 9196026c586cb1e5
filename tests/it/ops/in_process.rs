//! axon started in process with `app::start` (no child process, no log to read): the bound
//! addresses come from its `Handles`, `/ready` answers once the config directory was read,
//! an ADS client gets the gateway's clusters, and the shutdown future given to
//! `Handles::serve_until` drains it and ends it.

use std::sync::mpsc;
use std::time::Duration;

use axon::app::{self, Settings};
use axon::cli::{Cli, Command};
use clap::Parser as _;

use crate::support::ads_client::{self, Client, GATEWAY_ID, gateway_node};
use crate::support::{ConfigDir, http_get, wait_until};

/// The settings `axon serve` would make of these flags: every address on port 0.
fn settings(dir: &ConfigDir) -> Settings {
    let dir = dir.path().to_str().expect("a UTF-8 path");
    let cli = Cli::parse_from([
        "axon",
        "serve",
        "--config-dir",
        dir,
        "--xds-addr",
        "127.0.0.1:0",
        "--monitoring-addr",
        "127.0.0.1:0",
        "--debug-addr",
        "127.0.0.1:0",
        "--replica-name",
        "in-process",
    ]);
    let Command::Serve(args) = cli.command else {
        panic!("a serve command")
    };
    axon::cli::settings(args).expect("the flags make settings")
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
