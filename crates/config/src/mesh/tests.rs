//! The mesh config file's reading: applied fields, reported ones, and errors with their line.

use super::*;

#[test]
fn inbound_traffic_policy_modes() {
    assert!(!parse("").unwrap().mesh.inbound_localhost);
    let file = parse("inboundTrafficPolicy: {mode: LOCALHOST}\n").unwrap();
    assert!(file.mesh.inbound_localhost && file.not_applied.is_empty());
    assert!(
        !parse("inboundTrafficPolicy: {mode: PASSTHROUGH}\n")
            .unwrap()
            .mesh
            .inbound_localhost
    );
    assert!(parse("inboundTrafficPolicy: {mode: SOMETIMES}\n").is_err());
}

#[test]
fn reads_the_applied_fields_and_reports_the_rest() {
    let file = parse(
        "rootNamespace: mesh-root\ndefaultServiceExportTo: [\".\"]\nh2UpgradePolicy: UPGRADE\nconnectTimeout: 2s\nlocalityLbSetting: {enabled: false}\nenableEnvoyAccessLogService: true\ntrustDomain: example.org\n",
    )
    .unwrap();
    assert_eq!(file.mesh.root_namespace, "mesh-root");
    assert_eq!(file.mesh.default_service_export_to, ["."]);
    assert_eq!(file.mesh.default_virtual_service_export_to, ["*"]);
    assert!(file.mesh.h2_upgrade);
    assert_eq!(file.mesh.connect_timeout_nanos, 2_000_000_000);
    assert_eq!(
        file.mesh.locality_lb_setting.map(|l| l.enabled),
        Some(Some(false))
    );
    assert_eq!(file.trust_domain.as_deref(), Some("example.org"));
    assert_eq!(
        file.not_applied,
        ["line 6: enableEnvoyAccessLogService: accepted but not applied by axon"]
    );
    assert_eq!(parse("").unwrap().mesh, MeshConfig::default());
    let file = parse("outboundTrafficPolicy: {mode: REGISTRY_ONLY}\n").unwrap();
    assert!(file.mesh.outbound_registry_only && file.not_applied.is_empty());
    assert!(
        !parse("outboundTrafficPolicy: {mode: ALLOW_ANY}\n")
            .unwrap()
            .mesh
            .outbound_registry_only
    );
    let file = parse("outboundTrafficPolicy: {mode: ALLOW_ANY_DYNAMIC_DNS}\n").unwrap();
    assert_eq!(file.not_applied.len(), 1);
    assert!(parse("outboundTrafficPolicy: {mode: NEVER}\n").is_err());
}

#[test]
fn reads_the_default_traffic_policy_and_reports_what_it_does_not_apply() {
    let file = parse(
        "defaultTrafficPolicy:\n  connectionPool: {tcp: {maxConnections: 7}, http: {http2ProtocolOptions: {}}}\n  outlierDetection: {consecutive5xxErrors: 3}\n",
    )
    .unwrap();
    let pool = file.mesh.default_connection_pool.unwrap();
    assert_eq!(pool.tcp.and_then(|t| t.max_connections), Some(7));
    let outlier = file.mesh.default_outlier_detection.unwrap();
    assert_eq!(outlier.consecutive_5xx_errors, Some(3));
    assert_eq!(
        file.not_applied,
        [
            "line 1: defaultTrafficPolicy.connectionPool.http.http2ProtocolOptions: accepted but not applied by axon"
        ]
    );
    let err = parse("defaultTrafficPolicy: {loadBalancer: {simple: RANDOM}}\n").unwrap_err();
    assert!(
        err.to_string().contains("unknown field `loadBalancer`"),
        "{err}"
    );
    let err =
        parse("defaultTrafficPolicy: {outlierDetection: {maxEjectionPercent: 101}}\n").unwrap_err();
    assert!(
        err.to_string().starts_with("line 1: defaultTrafficPolicy"),
        "{err}"
    );
    assert_eq!(
        parse("defaultTrafficPolicy: {}\n").unwrap().mesh,
        MeshConfig::default()
    );
}

#[test]
fn rejects_unknown_fields_and_bad_values_with_their_line() {
    let err = parse("rootNamespace: a\nrootNamspace: b\n").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("line 2: unknown field \"rootNamspace\"")
            && err.to_string().contains("did you mean \"rootNamespace\""),
        "{err}"
    );
    let err = parse("h2UpgradePolicy: SOMETIMES\n").unwrap_err();
    assert!(
        err.to_string().starts_with("line 1: h2UpgradePolicy"),
        "{err}"
    );
    let err = parse("connectTimeout: banana\n").unwrap_err();
    assert!(err.to_string().contains("connectTimeout"), "{err}");
    let err = parse("localityLbSetting:\n  distribute: [{from: r1, to: {r1: 50}}]\n").unwrap_err();
    assert!(
        err.to_string().contains("total locality weight 50"),
        "{err}"
    );
    assert!(parse("- a\n").is_err());
}

#[test]
fn reads_auto_mtls_aliases_and_mesh_mtls() {
    let mesh = parse("").unwrap().mesh;
    assert!(mesh.enable_auto_mtls && !mesh.mesh_mtls.min_tls13);
    let file = parse(
        "enableAutoMtls: false\ntrustDomainAliases: [old.td]\nmeshMTLS: {minProtocolVersion: TLSV1_3, cipherSuites: [ECDHE-ECDSA-AES256-GCM-SHA384]}\n",
    )
    .unwrap();
    assert!(file.not_applied.is_empty(), "{:?}", file.not_applied);
    assert!(!file.mesh.enable_auto_mtls);
    assert_eq!(file.mesh.trust_domain_aliases, ["old.td"]);
    assert!(file.mesh.mesh_mtls.min_tls13);
    assert_eq!(
        file.mesh.mesh_mtls.cipher_suites.as_deref(),
        Some(&["ECDHE-ECDSA-AES256-GCM-SHA384".to_string()][..])
    );
    assert!(parse("meshMTLS: {ecdhCurves: [P-256]}\n").is_err());
    assert!(parse("meshMTLS: {minProtocolVersion: TLSV1_1}\n").is_err());
}

#[test]
fn reads_the_telemetry_fields() {
    let file = parse(
        "accessLogFile: /var/log/a.log\naccessLogEncoding: JSON\naccessLogFormat: '{\"m\": \"%REQ(:METHOD)%\"}'\nenableTracing: false\ndefaultProviders: {accessLogging: [envoy], metrics: [prometheus]}\ndefaultConfig:\n  concurrency: 2\n  tracing: {sampling: 50, maxPathTagLength: 99, customTags: {a: {literal: {value: b}}}, zipkin: {address: zipkin.istio-system:9411}}\nextensionProviders:\n- name: zipkin\n  zipkin: {service: zipkin.istio-system.svc.cluster.local, port: 9411}\n- name: otel\n  opentelemetry: {service: otel.o.svc.cluster.local, port: 4317, resourceDetectors: {environment: {}}}\n- name: file\n  envoyFileAccessLog: {path: /tmp/x, logFormat: {text: '%RESPONSE_CODE%'}}\n",
    )
    .unwrap();
    let t = &file.mesh.telemetry;
    assert_eq!(t.access_log_file, "/var/log/a.log");
    assert!(t.access_log_json && !t.enable_tracing);
    assert_eq!(t.default_providers.access_logging, ["envoy"]);
    assert_eq!(t.default_providers.metrics, ["prometheus"]);
    assert_eq!(t.proxy_tracing.sampling_percent(), 50.0);
    assert_eq!(t.proxy_tracing.max_path_tag_length, 99);
    assert_eq!(t.proxy_tracing.custom_tags.len(), 1);
    // The built-in providers stay, the user's follow.
    let names: Vec<&str> = t.providers.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "prometheus",
            "stackdriver",
            "envoy",
            "zipkin",
            "otel",
            "file"
        ]
    );
    assert!(matches!(
        t.provider("ZIPKIN").map(|p| &p.kind),
        Some(ProviderKind::Zipkin { at, .. }) if at.port == 9411
    ));
    // What is not applied is said, line by line.
    assert_eq!(
        file.not_applied,
        [
            "line 9: extensionProviders[1] (otel): opentelemetry.resourceDetectors: accepted but not applied by axon",
            "line 6: defaultConfig.concurrency: accepted but not applied by axon",
            "line 6: defaultConfig.tracing.zipkin: the tracer of the proxy's bootstrap (written by pilot-agent, not sent over xDS): not applied by axon; name the tracer in extensionProviders and a Telemetry",
        ]
    );
    assert!(parse("accessLogEncoding: XML\n").is_err());
    assert!(parse("accessLogEncoding: JSON\naccessLogFormat: 'not json'\n").is_err());
    assert!(parse("extensionProviders: [{name: z, zipkin: {service: '', port: 9411}}]\n").is_err());
    assert!(parse("defaultConfig: {tracing: {sampling: 101}}\n").is_err());
    // Defaults: tracing on at istiod's 1%, no access log.
    let mesh = parse("").unwrap().mesh;
    assert!(mesh.telemetry.enable_tracing && mesh.telemetry.access_log_file.is_empty());
    assert_eq!(mesh.telemetry.proxy_tracing.sampling_percent(), 1.0);
}
