//! Documents split, positioned, parsed and rejected.

use super::*;

#[test]
fn splits_and_positions_documents() {
    let text = "# leading comment\n---\napiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: gw}\nspec:\n  selector: {istio: ingressgateway}\n  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ['*']}]\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: s}\n---\n";
    let docs = parse_documents(text, "default");
    assert_eq!(docs.len(), 3, "{docs:?}");
    assert_eq!(docs[0].outcome, DocOutcome::Empty);
    assert_eq!(docs[1].line, 3);
    assert!(matches!(docs[1].outcome, DocOutcome::Config(_)));
    assert_eq!(docs[2].line, 10);
    assert!(matches!(docs[2].outcome, DocOutcome::Unsupported { .. }));
}

#[test]
fn the_creation_timestamp_is_read_from_the_metadata() {
    let gw = |meta: &str| {
        format!(
            "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {{name: gw, {meta}}}\nspec: {{servers: [{{port: {{number: 80, name: http, protocol: HTTP}}, hosts: ['*']}}]}}\n"
        )
    };
    let created = |meta: &str| match &parse_documents(&gw(meta), "default")[0].outcome {
        DocOutcome::Config(c) => Ok(c.created),
        DocOutcome::Invalid(e) => Err(e.to_string()),
        other => Err(format!("{other:?}")),
    };
    assert_eq!(
        created("creationTimestamp: '2024-05-01T10:00:00Z'"),
        Ok(Some(1_714_557_600_000_000_000))
    );
    // Unquoted, as kubectl prints it.
    assert_eq!(
        created("creationTimestamp: 2024-05-01T10:00:00Z"),
        Ok(Some(1_714_557_600_000_000_000))
    );
    assert_eq!(created("creationTimestamp: null"), Ok(None));
    assert_eq!(created("labels: {}"), Ok(None));
    assert_eq!(
        created("creationTimestamp: yesterday"),
        Err("metadata.creationTimestamp: yesterday is not an RFC 3339 time".into())
    );
}

#[test]
fn a_syntax_error_spoils_only_its_document() {
    let text = "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: a}\nspec: {servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ['*']}]}\n---\nkind: [unclosed\n---\napiVersion: networking.istio.io/v1beta1\nkind: Gateway\nmetadata: {name: b, namespace: x}\nspec: {servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ['*']}]}\n";
    let docs = parse_documents(text, "default");
    assert_eq!(docs.len(), 3);
    assert!(matches!(
        docs[1].outcome,
        DocOutcome::Invalid(DocError::Yaml(_))
    ));
    let DocOutcome::Config(b) = &docs[2].outcome else {
        panic!("{:?}", docs[2])
    };
    assert_eq!(b.key.to_string(), "Gateway/x/b");
    assert_eq!(docs[2].line, 8);
}

#[test]
fn ipv6_in_a_flow_sequence_reads_as_go_yaml_does() {
    let text = "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: a}\nspec:\n  hosts: [a.example.com]\n  addresses: [1.2.3.4, 001:db8::]\n  ports: [{number: 80, name: http, protocol: HTTP}]\n";
    let docs = parse_documents(text, "default");
    let DocOutcome::Config(c) = &docs[0].outcome else {
        panic!("{:?}", docs[0])
    };
    let Spec::ServiceEntry(se) = &c.spec else {
        panic!()
    };
    assert_eq!(se.addresses, ["1.2.3.4", "001:db8::"]);
}

#[test]
fn a_line_with_a_bracket_closed_before_it_opens_is_a_yaml_error_not_a_panic() {
    // Found by fuzzing (fuzz/seeds/yaml/crash-bracket-order.yaml): the go-yaml retry
    // sliced `line[open + 1..close]` with `close < open`.
    let docs = parse_documents("a: ]b[\n", "default");
    assert!(
        matches!(docs[0].outcome, DocOutcome::Invalid(DocError::Yaml(_))),
        "{docs:?}"
    );
    assert_eq!(go_yaml_flow_compat("x: ]1.2.3.4, 001:db8::["), None);
}

#[test]
fn missing_spec_and_bad_types_are_reported() {
    let docs = parse_documents(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: a}\n",
        "default",
    );
    assert_eq!(docs[0].outcome, DocOutcome::Invalid(DocError::MissingSpec));
    let docs = parse_documents(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: a}\nspec:\n  hosts: [a.com]\n  ports: [{number: notanumber, name: http}]\n",
        "default",
    );
    let DocOutcome::Invalid(DocError::Schema { path, .. }) = &docs[0].outcome else {
        panic!("{:?}", docs[0])
    };
    assert_eq!(path, "ports[0].number");
}

#[test]
fn aliases_of_aliases_are_bounded() {
    let mut doc = String::from("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for i in 1..9 {
        let p = i - 1;
        doc.push_str(&format!(
            "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        ));
    }
    // The parser's own repetition limit may stop it first; either way it is rejected.
    let started = std::time::Instant::now();
    let docs = parse_documents_within(
        &doc,
        "default",
        &YamlBounds {
            max_depth: 64,
            max_expanded_bytes: 1 << 20,
        },
    );
    assert!(
        matches!(docs[0].outcome, DocOutcome::Invalid(_)),
        "{:?}",
        docs[0].outcome
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}
