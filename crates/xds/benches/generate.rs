//! Generating CDS, EDS, LDS and RDS for one sidecar of mesh-1k (1,000 services in 10
//! namespaces, 10 endpoints each, 200 VirtualServices, 200 DestinationRules with 2 subsets),
//! without and with a Sidecar `./*` per namespace; also the proxy's SidecarScope and a full
//! PushContext build and an endpoint-only update of it.
//!
//! `cargo bench --bench generate`

use std::collections::BTreeSet;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axon_config::config::{ConfigKey, ConfigKind};
use axon_model::fixtures;
use axon_model::push_context::PushContext;
use axon_model::push_request::{PushRequest, TriggerReason};
use axon_model::sidecar_scope::SidecarScope;
use axon_xds::{ResourceType, generate};
use criterion::{Criterion, criterion_group, criterion_main};

use axon_load::mesh;

fn bench_mesh(c: &mut Criterion, label: &str, sidecar_share: f64) {
    let m = mesh::Mesh {
        sidecar_share,
        ..mesh::Mesh::preset("mesh-1k").expect("preset")
    };
    let yaml = m.yaml();
    let ctx = fixtures::context(&yaml);
    let proxy = fixtures::proxy("sidecar", "10.200.0.1", "ns-0", &[("app", "proxy-0")]);
    let scope = SidecarScope::compute(&ctx, &proxy);
    let none = BTreeSet::new();
    let clusters = generate(ResourceType::Cluster, &ctx, &proxy, &scope, &none);
    let eds_names: BTreeSet<String> = clusters
        .iter()
        .map(|r| r.name.clone())
        .filter(|n| n.starts_with("outbound|"))
        .collect();
    let routes: BTreeSet<String> = ["80".to_string()].into();
    let mut g = c.benchmark_group(format!("mesh-1k/{label}"));
    g.sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for (name, ty, names) in [
        ("cds", ResourceType::Cluster, &none),
        ("eds", ResourceType::Endpoint, &eds_names),
        ("lds", ResourceType::Listener, &none),
        ("rds", ResourceType::Route, &routes),
    ] {
        let out = generate(ty, &ctx, &proxy, &scope, names);
        let bytes: usize = out.iter().map(|r| r.encoded_len()).sum();
        eprintln!(
            "mesh-1k/{label}/{name}: {} resources, {} KiB",
            out.len(),
            bytes / 1024
        );
        g.bench_function(name, |b| {
            b.iter(|| black_box(generate(ty, &ctx, &proxy, &scope, black_box(names))))
        });
    }
    g.bench_function("sidecar_scope", |b| {
        b.iter(|| black_box(SidecarScope::compute(&ctx, &proxy)))
    });
    let configs = fixtures::configs(&yaml);
    let mesh_config = Arc::default();
    g.bench_function("push_context_build", |b| {
        b.iter(|| {
            let req = PushRequest::full_push(TriggerReason::Config, Instant::now());
            black_box(PushContext::build(None, &configs, &req, &mesh_config))
        })
    });
    // An endpoint-only change (one endpoint of svc-1 moves): the endpoint index swap.
    let moved = yaml.replacen("{address: 10.0.1.1,", "{address: 10.0.1.61,", 1);
    assert_ne!(moved, yaml, "the mesh has svc-1's first endpoint");
    let moved_configs = fixtures::configs(&moved);
    let key = ConfigKey {
        kind: ConfigKind::ServiceEntry,
        namespace: "ns-1".into(),
        name: "svc-1".into(),
    };
    let prev = PushContext::build(
        None,
        &configs,
        &PushRequest::full_push(TriggerReason::Config, Instant::now()),
        &mesh_config,
    );
    g.bench_function("push_context_endpoint_update", |b| {
        b.iter(|| {
            let req = PushRequest::endpoint_change(BTreeSet::from([key.clone()]), Instant::now());
            black_box(PushContext::build(
                Some(&prev),
                &moved_configs,
                &req,
                &mesh_config,
            ))
        })
    });
    g.finish();
}

fn benches(c: &mut Criterion) {
    bench_mesh(c, "no-sidecar", 0.0);
    bench_mesh(c, "sidecar", 1.0);
}

criterion_group!(generate_benches, benches);
criterion_main!(generate_benches);
