//! `axon validate`: reads a file or a directory as `serve` would (every document parsed and
//! validated, each Kubernetes Service, EndpointSlice, Pod and Namespace decoded into its type,
//! fields accepted but not applied noted, other Kubernetes kinds noted as skipped), then
//! builds the push context of what loaded, the Services' ServiceEntries with it (pure model,
//! no actor), to report what only it shows: VirtualService delegate problems and hosts several
//! mesh VirtualServices name, with the file and document of each VirtualService concerned.
//! `--strict` fails on notes, on documents of Istio or Gateway API kinds axon does not apply
//! (their meaning would be dropped) and on these problems, not on other skipped kinds.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;

use crate::app::DEFAULT_NAMESPACE;
use crate::limits::Limits;
use crate::registry::cluster::{self, objects::DirectoryObjects};
use crate::registry::files::list_config_tree;
use crate::registry::files::watch::Content;
use axon_config::file_set::{FileSet, Place};
use axon_model::push_context::PushContext;
use axon_model::push_request::{PushRequest, TriggerReason};

/// Checks `path`, a file or every config file under a directory; writes each problem, each
/// field accepted but not applied and each VirtualService problem to `out`. Returns whether
/// there was no error (and, with `strict`, no such field or VirtualService problem either).
pub fn validate(path: &Path, strict: bool, out: &mut impl std::io::Write) -> anyhow::Result<bool> {
    let mut errors_before = 0;
    let mut not_applied = 0;
    let files = if path.is_file() {
        vec![path.to_path_buf()]
    } else {
        let tree = list_config_tree(path).with_context(|| format!("reading {}", path.display()))?;
        for dir in &tree.loops {
            writeln!(
                out,
                "{}: note: a directory already read (a symlink loop), skipped",
                dir.display()
            )?;
        }
        for (dir, why) in &tree.unreadable_dirs {
            errors_before += 1;
            writeln!(out, "{}: cannot list: {why}", dir.display())?;
        }
        tree.files
    };
    let mut set = FileSet::new(DEFAULT_NAMESPACE).with_object_check(cluster::objects::check);
    let mut errors = errors_before;
    let mut unsupported = std::collections::BTreeSet::new();
    let mut dropped = 0;
    for path in &files {
        let text = match Content::read(path, Limits::default().max_file_bytes) {
            Content::Text(t) => t,
            Content::Gone => {
                errors += 1;
                writeln!(out, "{}: cannot read: the file is gone", path.display())?;
                continue;
            }
            Content::Unreadable(reason) | Content::Rejected(reason) => {
                errors += 1;
                writeln!(out, "{}: {reason}", path.display())?;
                continue;
            }
        };
        let report = set.apply(path, Some(&text));
        for error in &report.errors {
            errors += 1;
            writeln!(out, "{error}")?;
        }
        for note in &report.notes {
            not_applied += 1;
            writeln!(out, "{note}")?;
        }
        for (api_version, kind) in report.unsupported {
            if axon_config::parse::drops_meaning(&api_version) {
                // Every such document: its meaning is dropped, as a field not applied is.
                dropped += 1;
                writeln!(
                    out,
                    "{}: warning: {kind} ({api_version}) is not applied by axon: what it \
                     says is not enforced",
                    path.display()
                )?;
            } else if unsupported.insert((api_version.clone(), kind.clone())) {
                writeln!(
                    out,
                    "{}: note: {kind} ({api_version}) is not served by axon, skipped",
                    path.display()
                )?;
            }
        }
    }
    let commit = set.commit();
    let twice = commit.duplicates.iter().map(ToString::to_string);
    for key in twice.chain(commit.object_duplicates.iter().map(ToString::to_string)) {
        writeln!(
            out,
            "note: {key} is defined more than once; the last file in path order wins"
        )?;
    }
    // The Services' ServiceEntries, as `serve` makes them (no namespace selector).
    let mut objects = DirectoryObjects::new(&cluster::Settings::default());
    objects.apply(&commit.objects, set.objects());
    let mut configs = (*objects.configs()).clone();
    configs.extend(set.configs().iter().map(|(k, v)| (k.clone(), v.clone())));
    // What only the built index shows: delegates and hosts several mesh VirtualServices
    // name, as `serve` logs them (pure model: the context of these configs alone).
    let request = PushRequest::full_push(TriggerReason::Config, Instant::now());
    let ctx = PushContext::build(None, &configs, &request, &Arc::default());
    let problems = &ctx.virtual_services.problems;
    for problem in problems {
        let places: Vec<Place> = problem
            .configs
            .iter()
            .filter_map(|k| set.place(k))
            .collect();
        if places.is_empty() {
            writeln!(out, "warning: {problem}")?;
        }
        for place in places {
            writeln!(out, "{place}: warning: {problem}")?;
        }
    }
    // What of the Gateway API objects is not served, and the conditions istiod would write
    // on them that are not True.
    let mut gateway_api_problems = 0;
    for (key, problems) in &ctx.gateway_api.problems {
        let place = set.place(key).map_or(String::new(), |p| format!("{p}: "));
        for problem in problems {
            gateway_api_problems += 1;
            writeln!(out, "{place}warning: {key}: {problem}")?;
        }
    }
    for (key, status) in &ctx.gateway_api.status {
        let place = set.place(key).map_or(String::new(), |p| format!("{p}: "));
        for (line, wrong) in gateway_api_conditions(status) {
            let level = if wrong { "warning" } else { "note" };
            writeln!(out, "{place}{level}: {key}: {line}")?;
        }
    }
    // How many of the workloads read here each RequestAuthentication and AuthorizationPolicy
    // applies to.
    for (key, n) in ctx
        .request_authn_selected()
        .into_iter()
        .chain(ctx.authz_selected())
    {
        let place = set.place(&key).map_or(String::new(), |p| format!("{p}: "));
        writeln!(
            out,
            "{place}note: {key} applies to {n} workload{} of these files",
            if n == 1 { "" } else { "s" }
        )?;
    }
    let fails = strict
        && (not_applied > 0 || dropped > 0 || !problems.is_empty() || gateway_api_problems > 0);
    // The count of Kubernetes objects only when there are some: the line is otherwise as it was.
    let objects = match set.objects().len() {
        0 => String::new(),
        n => format!(", {n} Kubernetes objects"),
    };
    // The count of documents of kinds not applied only when there are some, likewise.
    let dropped_kinds = match dropped {
        0 => String::new(),
        n => format!(", {n} documents of kinds not applied"),
    };
    writeln!(
        out,
        "{} files, {} configs{objects}, {} errors, {} fields accepted but not applied{dropped_kinds}, {} VirtualService problems{}",
        files.len(),
        set.configs().len(),
        errors,
        not_applied,
        problems.len(),
        if fails { " (--strict: that fails)" } else { "" }
    )?;
    Ok(errors == 0 && !fails)
}

/// The conditions of a Gateway API object's status, one line per object, listener and parent:
/// those that are as they should be named together (`listener http (1 attached routes):
/// Accepted, Programmed, ResolvedRefs, no conflicts`), each other one with its reason and
/// message (`parent Gateway/gw: ResolvedRefs=False (BackendNotFound: ...)`). The second of
/// each pair says whether anything is wrong.
fn gateway_api_conditions(status: &serde_json::Value) -> Vec<(String, bool)> {
    let list = |v: &serde_json::Value| v.as_array().cloned().unwrap_or_default();
    let summarize = |prefix: String, conditions: &serde_json::Value| -> (String, bool) {
        let mut good = Vec::new();
        let mut bad = Vec::new();
        for c in list(conditions) {
            let kind = c["type"].as_str().unwrap_or_default();
            let ok = (c["status"] == "True") != (kind == "Conflicted");
            if ok {
                good.push(if kind == "Conflicted" {
                    "no conflicts".to_string()
                } else {
                    kind.to_string()
                });
            } else {
                bad.push(format!(
                    "{kind}={} ({}: {})",
                    c["status"].as_str().unwrap_or_default(),
                    c["reason"].as_str().unwrap_or_default(),
                    c["message"].as_str().unwrap_or_default()
                ));
            }
        }
        let wrong = !bad.is_empty();
        bad.extend((!good.is_empty()).then(|| good.join(", ")));
        (format!("{prefix}{}", bad.join("; ")), wrong)
    };
    let mut out = vec![summarize(String::new(), &status["conditions"])];
    for l in list(&status["listeners"]) {
        let prefix = format!(
            "listener {} ({} attached routes): ",
            l["name"].as_str().unwrap_or_default(),
            l["attachedRoutes"]
        );
        out.push(summarize(prefix, &l["conditions"]));
    }
    for p in list(&status["parents"]) {
        let r = &p["parentRef"];
        let prefix = format!(
            "parent {}/{}{}: ",
            r["kind"].as_str().unwrap_or_default(),
            r["name"].as_str().unwrap_or_default(),
            r["sectionName"]
                .as_str()
                .map(|s| format!("/{s}"))
                .unwrap_or_default()
        );
        out.push(summarize(prefix, &p["conditions"]));
    }
    out.retain(|(line, _)| !line.is_empty());
    out
}
