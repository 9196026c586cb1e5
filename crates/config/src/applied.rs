//! What of a config axon applies that the field tables ([`super::istio::schema`]) cannot
//! say: fields applied for some of their values only. Each case is a note
//! `path: what is not applied`, reported beside the tables' fields.

mod destination_rule;
mod gateway;
mod gateway_api;

pub use gateway_api::gateway_api_notes;

use super::config::Spec;

/// The notes of one typed spec.
pub fn partial_notes(spec: &Spec) -> Vec<String> {
    let mut notes = Vec::new();
    match spec {
        Spec::Gateway(gw) => gateway::notes(gw, &mut notes),
        Spec::ServiceEntry(se) => {
            for (i, port) in se.ports.iter().enumerate() {
                let protocol = port.protocol.to_ascii_uppercase();
                if protocol.is_empty() {
                    notes.push(format!(
                        "spec.ports[{i}].protocol: none given: istiod sniffs such a port (HTTP \
                         or TCP); axon's sidecars proxy it as TCP"
                    ));
                } else if protocol == "UDP" {
                    notes.push(format!(
                        "spec.ports[{i}].protocol: UDP: the port gets a cluster but no \
                         outbound listener (as from istiod)"
                    ));
                }
            }
        }
        Spec::VirtualService(vs) => {
            for (i, http) in vs.http.iter().enumerate() {
                let code = http.redirect.as_ref().and_then(|r| r.redirect_code);
                if let Some(code @ (300 | 304 | 305 | 306)) = code {
                    notes.push(format!(
                        "spec.http[{i}].redirect.redirectCode: {code} has no Envoy redirect \
                         code; the route is not served (as istiod leaves it without an action)"
                    ));
                }
            }
        }
        Spec::DestinationRule(dr) => destination_rule::notes(dr, &mut notes),
        Spec::AuthorizationPolicy(ap) => {
            for (i, target) in ap.target_refs().enumerate() {
                if target.kind != "Gateway" || target.group != "gateway.networking.k8s.io" {
                    notes.push(format!(
                        "spec.targetRefs[{i}]: {} {}: istiod attaches this kind to waypoints \
                         only, and axon serves no waypoint: it selects no proxy",
                        target.kind, target.name
                    ));
                }
            }
        }
        Spec::Sidecar(sc) => {
            for (i, ingress) in sc.ingress.iter().enumerate() {
                let endpoint = ingress["defaultEndpoint"].as_str().unwrap_or("");
                if endpoint.starts_with("unix://") {
                    notes.push(format!(
                        "spec.ingress[{i}].defaultEndpoint: {endpoint}: axon serves no Unix \
                         socket endpoints; the ingress listener is not built"
                    ));
                }
            }
        }
        _ => {}
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The typed spec of a one-document YAML (its `kind` and `spec`).
    fn spec(yaml: &str) -> Spec {
        let doc: serde_json::Value = serde_norway::from_str(yaml).unwrap();
        let spec = doc["spec"].clone();
        match doc["kind"].as_str().unwrap() {
            "Gateway" => Spec::Gateway(serde_json::from_value(spec).unwrap()),
            "ServiceEntry" => Spec::ServiceEntry(serde_json::from_value(spec).unwrap()),
            "VirtualService" => Spec::VirtualService(serde_json::from_value(spec).unwrap()),
            "DestinationRule" => Spec::DestinationRule(serde_json::from_value(spec).unwrap()),
            other => panic!("{other}"),
        }
    }

    #[test]
    fn values_applied_in_part_are_noted() {
        let gw = spec(
            "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: g}\nspec:\n  selector: {istio: ingressgateway}\n  servers:\n  - {port: {number: 80, name: http, protocol: HTTP}, hosts: ['*']}\n  - {port: {number: 443, name: https, protocol: HTTPS}, hosts: ['*'], tls: {mode: SIMPLE, credentialName: c}}\n  - {port: {number: 444, name: m, protocol: HTTPS}, hosts: ['*'], tls: {mode: ISTIO_MUTUAL}}\n  - {port: {number: 445, name: auto, protocol: TLS}, hosts: ['*'], tls: {mode: AUTO_PASSTHROUGH}}\n  - {port: {number: 446, name: mf, protocol: HTTPS}, hosts: ['*'], tls: {mode: MUTUAL, serverCertificate: c, privateKey: k, caCertificates: ca, verifyCertificateSpki: [x]}}\n",
        );
        let notes = partial_notes(&gw);
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert!(notes[0].starts_with("spec.servers[2].tls.mode: ISTIO_MUTUAL needs"));
        assert!(notes[1].starts_with("spec.servers[3].tls.mode: AUTO_PASSTHROUGH"));
        assert!(notes[2].starts_with("spec.servers[4].tls.verifyCertificateSpki: not applied"));

        let se = spec(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: s}\nspec:\n  hosts: [db.example.com]\n  ports: [{number: 80, name: http, protocol: HTTP}, {number: 5432, name: pg, protocol: TCP}]\n  resolution: DNS\n",
        );
        assert!(partial_notes(&se).is_empty(), "TCP ports get TCP listeners");
        let se = spec(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: s}\nspec:\n  hosts: [db.example.com]\n  ports: [{number: 53, name: dns, protocol: UDP}, {number: 5432, name: pg}]\n  resolution: DNS\n",
        );
        let notes = partial_notes(&se);
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].starts_with("spec.ports[0].protocol: UDP: the port gets a cluster"));
        assert!(notes[1].starts_with("spec.ports[1].protocol: none given: istiod sniffs"));
        let mesh_l4 = spec(
            "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: v}\nspec:\n  hosts: [a]\n  tcp: [{route: [{destination: {host: a}}]}]\n",
        );
        assert!(
            partial_notes(&mesh_l4).is_empty(),
            "sidecars build tcp routes"
        );

        let vs = spec(
            "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: v}\nspec:\n  hosts: [a]\n  exportTo: ['.']\n  http: [{route: [{destination: {host: a}}]}]\n",
        );
        assert!(
            partial_notes(&vs).is_empty(),
            "exportTo is applied everywhere"
        );
        let odd_code = spec(
            "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: v}\nspec:\n  hosts: [a]\n  http: [{redirect: {uri: /b, redirectCode: 304}}]\n",
        );
        assert!(partial_notes(&odd_code)[0].starts_with("spec.http[0].redirect.redirectCode: 304"));
        let everywhere = spec(
            "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: v}\nspec:\n  hosts: [a]\n  exportTo: ['*']\n  http: [{route: [{destination: {host: a}}]}]\n",
        );
        assert!(partial_notes(&everywhere).is_empty());
    }

    #[test]
    fn istio_mutual_is_noted_wherever_it_is() {
        let dr = spec(
            "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: d}\nspec:\n  host: a\n  trafficPolicy: {tls: {mode: SIMPLE}, portLevelSettings: [{port: {number: 80}, tls: {mode: ISTIO_MUTUAL}}]}\n  subsets: [{name: s, trafficPolicy: {tls: {mode: ISTIO_MUTUAL}}}]\n",
        );
        let notes = partial_notes(&dr);
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(
            notes[0].starts_with("spec.trafficPolicy.portLevelSettings[0].tls.mode: ISTIO_MUTUAL")
        );
        assert!(notes[1].starts_with("spec.subsets[0].trafficPolicy.tls.mode: ISTIO_MUTUAL"));
    }
}
