//! No Istio field is dropped silently. README's list of the fields axon accepts and does not
//! apply is exactly the schema tables' list (`axon_config::istio::schema::not_applied_fields`),
//! so that it stays true; a running axon logs such a field with its file and line and lists
//! it in `/debug/configz`; a field the API does not have (a typo) rejects its document, named
//! with its line and the field meant, and the file's last good config stays served.

use crate::support;

use std::path::Path;
use std::time::Duration;

use support::*;

const START: &str = "<!-- not-applied:start -->";
const END: &str = "<!-- not-applied:end -->";

#[test]
fn the_readme_lists_exactly_the_fields_not_applied() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md");
    let expected = axon_config::istio::schema::not_applied_fields();
    let block: String = expected.iter().map(|f| format!("- `{f}`\n")).collect();
    let listed = readme
        .split_once(START)
        .and_then(|(_, rest)| rest.split_once(END))
        .map(|(block, _)| block.trim().to_string());
    assert_eq!(
        listed.as_deref(),
        Some(block.trim()),
        "README.md's list between {START} and {END} must be:\n{block}"
    );
}

const ROUTES: &str = "apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: r, namespace: demo}
spec:
  hosts: [a.demo.svc.cluster.local]
  http:
  - route:
    - destination: {host: a.demo.svc.cluster.local}
  tcp:
  - match: [{sourceSubnet: 10.0.0.0/8}]
    route: [{destination: {host: a.demo.svc.cluster.local}}]
";

#[test]
fn a_running_axon_reports_fields_not_applied_and_rejects_unknown_ones() {
    let dir = ConfigDir::new();
    dir.write("routes.yaml", ROUTES);
    let axon = Axon::start(dir.path());
    let file = dir.file("routes.yaml").display().to_string();
    assert!(
        axon.wait_for_log("accepted but not applied by axon", Duration::from_secs(30)),
        "no log line for the TCP route's sourceSubnet"
    );
    assert!(
        axon.logs().contains(&format!(
            "{file}: document 1 (line 10): spec.tcp[0].match[0].sourceSubnet: accepted but not applied by axon"
        )),
        "{}",
        axon.logs()
    );
    let configz = axon.debug_json("/debug/configz");
    assert_eq!(
        configz["not_applied"].as_array().map(Vec::len),
        Some(1),
        "{configz}"
    );
    assert!(
        configz["not_applied"]
            .to_string()
            .contains("spec.tcp[0].match[0].sourceSubnet"),
        "{configz}"
    );

    // A typo: the document is rejected, naming the line and the field meant; the good
    // version stays served.
    dir.write(
        "routes.yaml",
        &ROUTES.replacen("  - route:", "  - rout:", 1),
    );
    assert!(
        axon.wait_config_error("did you mean `route`?", Duration::from_secs(30)),
        "{:?}",
        axon.config_errors()
    );
    let errors = axon.config_errors();
    assert!(
        errors
            .iter()
            .any(|e| e.contains("(line 7): spec.http[0].rout: unknown field `rout` of HTTPRoute")),
        "{errors:?}"
    );
    let configz = axon.debug_json("/debug/configz");
    assert_eq!(configz["configs"][0]["key"]["name"], "r", "{configz}");
}
