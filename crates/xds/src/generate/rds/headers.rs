//! `headers` of an HTTP route or destination as Envoy's header operations, as istiod's
//! `TranslateHeadersOperations`: `set` overwrites (or adds), `add` appends, `remove` removes;
//! pseudo-headers and `host` are never touched, and an `:authority`/`host` in `set` (else
//! `add`) rewrites the authority instead.

use envoy_types::pb::envoy::config::core::v3::{
    HeaderValue, HeaderValueOption, header_value_option::HeaderAppendAction,
};

use axon_config::istio::{HeaderOperations, Headers};

/// The operations of one `headers`.
#[derive(Debug, Default, Clone)]
pub(super) struct Operations {
    pub request_add: Vec<HeaderValueOption>,
    pub request_remove: Vec<String>,
    pub response_add: Vec<HeaderValueOption>,
    pub response_remove: Vec<String>,
    /// The authority to rewrite to, from `set` or `add` of `:authority` or `host`.
    pub authority: Option<String>,
}

pub(super) fn operations(headers: &Headers) -> Operations {
    let none = HeaderOperations::default();
    let request = headers.request.as_ref().unwrap_or(&none);
    let response = headers.response.as_ref().unwrap_or(&none);
    let authority_of = |m: &std::collections::BTreeMap<String, String>| {
        m.iter()
            .rfind(|(k, _)| is_authority(k))
            .map(|(_, v)| v.clone())
    };
    Operations {
        request_add: options(request),
        request_remove: kept(&request.remove),
        response_add: options(response),
        response_remove: kept(&response.remove),
        authority: authority_of(&request.set).or_else(|| authority_of(&request.add)),
    }
}

fn options(ops: &HeaderOperations) -> Vec<HeaderValueOption> {
    let one = |(key, value): (&String, &String), action: HeaderAppendAction| HeaderValueOption {
        header: Some(HeaderValue {
            key: key.clone(),
            value: value.clone(),
            ..Default::default()
        }),
        append_action: action as i32,
        ..Default::default()
    };
    // Each map is in key order (istiod sorts too): `set` first, then `add`.
    let set = ops
        .set
        .iter()
        .filter(|(k, _)| !is_internal(k))
        .map(|h| one(h, HeaderAppendAction::OverwriteIfExistsOrAdd));
    let add = ops
        .add
        .iter()
        .filter(|(k, _)| !is_internal(k))
        .map(|h| one(h, HeaderAppendAction::AppendIfExistsOrAdd));
    set.chain(add).collect()
}

fn kept(names: &[String]) -> Vec<String> {
    names.iter().filter(|n| !is_internal(n)).cloned().collect()
}

/// A header Envoy will not let a route change.
fn is_internal(name: &str) -> bool {
    name.starts_with(':') || name.eq_ignore_ascii_case("host")
}

fn is_authority(name: &str) -> bool {
    name.eq_ignore_ascii_case(":authority") || name.eq_ignore_ascii_case("host")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_add_and_remove_leave_internal_headers_alone() {
        let headers: Headers = serde_json::from_value(serde_json::json!({
            "request": {"set": {"x-a": "1", ":path": "/x", "host": "h.example"}, "add": {"x-b": "2"}, "remove": ["x-c", ":method"]},
            "response": {"set": {"x-d": "4"}, "remove": ["server"]}
        }))
        .unwrap();
        let ops = operations(&headers);
        let keys: Vec<(&str, i32)> = ops
            .request_add
            .iter()
            .map(|o| (o.header.as_ref().unwrap().key.as_str(), o.append_action))
            .collect();
        assert_eq!(
            keys,
            [
                ("x-a", HeaderAppendAction::OverwriteIfExistsOrAdd as i32),
                ("x-b", HeaderAppendAction::AppendIfExistsOrAdd as i32)
            ]
        );
        assert_eq!(ops.request_remove, ["x-c"]);
        assert_eq!(ops.response_remove, ["server"]);
        assert_eq!(ops.response_add.len(), 1);
        assert_eq!(ops.authority.as_deref(), Some("h.example"));
    }
}
