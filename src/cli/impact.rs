//! `axon impact OLD NEW --proxies SOURCE`: a change's blast radius before it merges. Both
//! directories are read as `serve` reads a config directory (an invalid document is an
//! error: exit 2), the changed configs found as the FileRegistry finds them
//! (`config_set::compare`: changed keys, endpoint-only or not), the two push contexts built
//! as the SnapshotBuilder builds them (the new one from the old, for that request), and each
//! proxy of SOURCE run through the stream state machine (`axon_xds::impact`): ProxyNeedsPush
//! and only-changed-types decide, as on the server. SOURCE is a running axon's debug address
//! (`http://HOST:PORT`: its `/debug/nodes`, each connected proxy's Envoy `Node`) or a file of
//! Envoy `Node` objects, one JSON object a line.
//!
//! Prints, per changed config, the proxies a push would reach and the types each would be
//! sent (`--json`: one JSON document); exit status as `diff`'s: 0 nothing would be sent, 1
//! something would, 2 an error.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;

use crate::app::DEFAULT_NAMESPACE;
use crate::limits::Limits;
use crate::registry::cluster::{self, objects::DirectoryObjects};
use crate::registry::files::list_config_tree;
use crate::registry::files::watch::Content;
use axon_config::config_set::{ConfigSet, compare};
use axon_config::file_set::FileSet;
use axon_model::proxy::NodeInfo;
use axon_model::push_context::PushContext;
use axon_model::push_request::{PushRequest, TriggerReason};

/// The largest `/debug/nodes` answer read (10,000 proxies' nodes fit many times over).
const MAX_NODES_BYTES: usize = 64 << 20;

/// Runs `axon impact`; `Ok(true)` if a push would send something.
pub fn impact(
    old: &Path,
    new: &Path,
    proxies: &str,
    token_file: Option<&Path>,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<bool> {
    let before = load(old).with_context(|| format!("{}", old.display()))?;
    let after = load(new).with_context(|| format!("{}", new.display()))?;
    let nodes =
        read_proxies(proxies, token_file).with_context(|| format!("--proxies {proxies}"))?;
    let (changed, endpoints_only) = compare(&before, &after);
    let started = Instant::now();
    let full = PushRequest::full_push(TriggerReason::Config, started);
    let old_ctx = Arc::new(PushContext::build(None, &before, &full, &Arc::default()));
    let request = if endpoints_only {
        PushRequest::endpoint_change(changed.clone(), started)
    } else {
        PushRequest::config_change(changed.clone(), started)
    };
    let new_ctx = Arc::new(PushContext::build(
        Some(&old_ctx),
        &after,
        &request,
        &old_ctx.mesh,
    ));
    // The configs made of Gateway API objects that changed with them are changes too.
    let request = new_ctx.effective_request(&request);
    // Per changed config, the proxies it reaches and what each is sent.
    let mut reached: BTreeMap<String, Vec<(String, Vec<&'static str>)>> = changed
        .iter()
        .map(|k| (k.to_string(), Vec::new()))
        .collect();
    let mut pushed = 0;
    for node in nodes {
        let id = node.id.clone();
        let result = axon_xds::impact::impact(&old_ctx, &new_ctx, &request, node)
            .with_context(|| format!("proxy {id}"))?;
        if result.types.is_empty() {
            continue;
        }
        pushed += 1;
        let types: Vec<&'static str> = result.types.iter().map(|t| t.short()).collect();
        for key in &result.configs {
            reached
                .entry(key.to_string())
                .or_default()
                .push((id.clone(), types.clone()));
        }
    }
    if json {
        let changed: Vec<serde_json::Value> = reached
            .iter()
            .map(|(config, proxies)| {
                let proxies: Vec<serde_json::Value> = proxies
                    .iter()
                    .map(|(proxy, types)| serde_json::json!({"proxy": proxy, "types": types}))
                    .collect();
                serde_json::json!({"config": config, "proxies": proxies})
            })
            .collect();
        let doc = serde_json::json!({
            "changed": changed,
            "endpoints_only": endpoints_only,
            "proxies_pushed": pushed,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
    } else {
        for (config, proxies) in &reached {
            writeln!(out, "{config}: {} proxies", proxies.len())?;
            for (proxy, types) in proxies {
                writeln!(out, "  {proxy}: {}", types.join(", "))?;
            }
        }
        writeln!(
            out,
            "{} changed configs{}, {pushed} proxies would be pushed",
            reached.len(),
            if endpoints_only {
                " (endpoints only)"
            } else {
                ""
            }
        )?;
    }
    Ok(pushed > 0)
}

/// The configs of a directory (or a file) as `serve` would hold them, the Services'
/// ServiceEntries included; an unreadable file or an invalid document is an error.
fn load(path: &Path) -> anyhow::Result<ConfigSet> {
    let files = if path.is_file() {
        vec![path.to_path_buf()]
    } else {
        list_config_tree(path)?.files
    };
    let mut set = FileSet::new(DEFAULT_NAMESPACE).with_object_check(cluster::objects::check);
    for file in &files {
        let text = match Content::read(file, Limits::default().max_file_bytes) {
            Content::Text(t) => t,
            Content::Gone => anyhow::bail!("{}: the file is gone", file.display()),
            Content::Unreadable(reason) | Content::Rejected(reason) => {
                anyhow::bail!("{}: {reason}", file.display())
            }
        };
        let report = set.apply(file, Some(&text));
        if let Some(error) = report.errors.first() {
            anyhow::bail!("{error} (axon validate lists every problem)");
        }
    }
    let commit = set.commit();
    let mut objects = DirectoryObjects::new(&cluster::Settings::default());
    objects.apply(&commit.objects, set.objects());
    let mut configs = (*objects.configs()).clone();
    configs.extend(set.configs().iter().map(|(k, v)| (k.clone(), v.clone())));
    Ok(configs)
}

/// The proxies' nodes: from a running axon's `/debug/nodes`, or a file of JSON lines.
fn read_proxies(source: &str, token_file: Option<&Path>) -> anyhow::Result<Vec<NodeInfo>> {
    let text = match source.strip_prefix("http://") {
        Some(address) => {
            let token = match token_file {
                Some(path) => Some(
                    std::fs::read_to_string(path)
                        .with_context(|| format!("--token-file {}", path.display()))?
                        .trim()
                        .to_string(),
                ),
                None => None,
            };
            get_nodes(address.trim_end_matches('/'), token.as_deref())?
        }
        None => std::fs::read_to_string(source)?,
    };
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            let node = axon_xds::debug::json::node_from_json(line)
                .with_context(|| format!("line {}: not an Envoy Node", i + 1))?;
            Ok(axon_xds::node::node_info(&node))
        })
        .collect()
}

/// `GET /debug/nodes` of the axon at `address` (HTTP/1.1, at most [`MAX_NODES_BYTES`]).
fn get_nodes(address: &str, token: Option<&str>) -> anyhow::Result<String> {
    use std::net::ToSocketAddrs;
    let addr = address
        .to_socket_addrs()?
        .next()
        .context("the address resolves to nothing")?;
    let mut stream = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(10))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        stream,
        "GET /debug/nodes HTTP/1.1\r\nHost: {address}\r\n{auth}Connection: close\r\n\r\n"
    )?;
    let mut body = Vec::new();
    stream
        .take(MAX_NODES_BYTES as u64 + 1)
        .read_to_end(&mut body)?;
    anyhow::ensure!(
        body.len() <= MAX_NODES_BYTES,
        "the answer is over {MAX_NODES_BYTES} bytes"
    );
    let text = String::from_utf8(body).context("the answer is not UTF-8")?;
    let (head, body) = text.split_once("\r\n\r\n").context("not an HTTP answer")?;
    let status = head.split(' ').nth(1).unwrap_or_default();
    anyhow::ensure!(
        status == "200",
        "/debug/nodes answered {}",
        head.lines().next().unwrap_or_default()
    );
    anyhow::ensure!(
        !head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked"),
        "/debug/nodes answered in chunks"
    );
    Ok(body.to_string())
}
