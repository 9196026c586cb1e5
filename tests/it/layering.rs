//! What the compiler cannot see of the layering (docs/ARCHITECTURE.md, "The dependency
//! rule"). Between crates the compiler enforces the rule: a crate names only the crates it
//! depends on. This test keeps the rest:
//!
//! - each crate's manifest depends only on the layers below it, and the pure layers
//!   (`axon-config`, `axon-model`, `axon-xds`) on no runtime, Kubernetes client or server;
//!   the CA (`axon-ca`, a leaf) on no runtime, server, Kubernetes client or protobuf;
//! - `axon-model` and `axon-xds` make no clock, file-system or process calls outside their
//!   tests (the caller passes the time in; files are read by registries);
//! - inside the `axon` crate, `http` and `registry` talk to the actors and not the reverse,
//!   `app` (the wiring) knows them all, `cli` (flags and errors) only `app` and the files it
//!   reads,
//!   `limits` is a leaf, and the actors' pure state (`debouncer/state.rs`,
//!   `fleet/balance.rs`, `fleet/peers.rs`) names no actix;
//! - no import cycle between the modules of any crate (the compiler allows them).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The runtime, the Kubernetes client, the servers and the process's telemetry: what the
/// pure layers (`axon-config`, `axon-model`, `axon-xds`) must not depend on.
const NOT_PURE: &[&str] = &[
    "actix",
    "actix-rt",
    "tokio",
    "tonic",
    "kube",
    "k8s-openapi",
    "axum",
    "notify",
    "h2",
    "hyper",
    "prometheus",
    "tracing",
];

/// Envoy's protos: `axon-xds` alone knows them.
const ENVOY: &[&str] = &["envoy-types", "prost", "prost-reflect"];

/// TLS and certificates: decoded in `axon-config`, served by the transport.
const TLS: &[&str] = &["rustls", "ring", "x509-parser"];

/// A crate's folder, the crates of the workspace it may depend on, and the groups of external
/// crates it may not.
type Manifest = (
    &'static str,
    &'static [&'static str],
    &'static [&'static [&'static str]],
);

/// The crates of the workspace, each with the crates of the workspace and the groups of
/// external crates its `[dependencies]` may not name (dev-dependencies are free).
const MANIFESTS: &[Manifest] = &[
    ("crates/config", &[], &[NOT_PURE, ENVOY]),
    ("crates/model", &["axon-config"], &[NOT_PURE, ENVOY, TLS]),
    ("crates/xds", &["axon-config", "axon-model"], &[NOT_PURE]),
    (
        "crates/metrics",
        &[],
        &[&[
            "actix",
            "actix-rt",
            "tokio",
            "tonic",
            "kube",
            "k8s-openapi",
            "envoy-types",
            "axum",
        ]],
    ),
    (
        "crates/ca",
        &[],
        &[
            &[
                "actix",
                "actix-rt",
                "tokio",
                "tonic",
                "kube",
                "k8s-openapi",
                "axum",
                "notify",
                "h2",
                "hyper",
                "prometheus",
            ],
            ENVOY,
        ],
    ),
    (
        "crates/transport",
        &[
            "axon-config",
            "axon-model",
            "axon-xds",
            "axon-metrics",
            "axon-ca",
        ],
        &[&[
            "actix",
            "actix-rt",
            "kube",
            "k8s-openapi",
            "axum",
            "envoy-types",
        ]],
    ),
    (
        ".",
        &[
            "axon-config",
            "axon-model",
            "axon-xds",
            "axon-transport",
            "axon-metrics",
            "axon-ca",
        ],
        &[&["h2"]],
    ),
    (
        "crates/load",
        &[],
        &[&["actix", "actix-rt", "kube", "k8s-openapi", "axum"]],
    ),
];

/// What each top-level module of the `axon` crate may import of that crate (besides itself).
const ALLOWED: &[(&str, &[&str])] = &[
    ("actors", &["limits"]),
    ("registry", &["actors"]),
    ("http", &["actors"]),
    ("limits", &[]),
    ("app", &["actors", "registry", "http", "limits"]),
    ("cli", &["app", "registry", "limits"]),
];

/// External crates a top-level module of the `axon` crate must not name.
const FORBIDDEN_CRATES: &[(&str, &[&str])] = &[
    (
        "actors",
        &["kube", "k8s_openapi", "envoy_types", "axum", "tonic"],
    ),
    ("http", &["kube", "k8s_openapi", "envoy_types", "tonic"]),
    (
        "limits",
        &["actix", "tokio", "kube", "envoy_types", "tonic"],
    ),
];

/// Files of the `axon` crate's actors that hold pure state: no actix.
const PURE_ACTOR_STATE: &[&str] = &[
    "actors/debouncer/state.rs",
    "actors/fleet/balance.rs",
    "actors/fleet/peers.rs",
];

/// Calls `axon-model` and `axon-xds` must not make outside tests.
const IMPURE_CALLS: &[&str] = &[
    "Instant::now",
    "SystemTime::now",
    "std::fs",
    "fs::read",
    "File::open",
    "File::create",
    "std::process",
    "std::env::var",
    "std::thread::sleep",
];

type Module = Vec<String>;

struct Source {
    file: PathBuf,
    module: Module,
    /// The code without comments.
    code: String,
}

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The sources of one crate's `src/`, each with its module path.
fn sources(src: &Path) -> Vec<Source> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in fs::read_dir(dir).expect("src/ is readable") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(src, &mut files);
    files.sort();
    files
        .into_iter()
        .filter(|f| f.file_name().is_some_and(|n| n != "main.rs"))
        .map(|file| {
            let rel = file.strip_prefix(src).expect("under src/");
            let mut module: Module = rel
                .with_extension("")
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if module.last().is_some_and(|l| l == "mod" || l == "lib") {
                module.pop();
            }
            let text = fs::read_to_string(&file).expect("a readable source file");
            let code = text
                .lines()
                .map(|l| l.find("//").map_or(l, |i| &l[..i]))
                .collect::<Vec<_>>()
                .join("\n");
            Source { file, module, code }
        })
        .collect()
}

fn crate_sources() -> Vec<(String, Vec<Source>)> {
    MANIFESTS
        .iter()
        .map(|(dir, _, _)| (dir.to_string(), sources(&workspace().join(dir).join("src"))))
        .collect()
}

fn axon_sources() -> Vec<Source> {
    sources(&workspace().join("src"))
}

/// Whether a file holds only tests, or builders for tests and benchmarks (`tests.rs`,
/// `*_tests.rs`, under a `tests/` folder, or `fixtures.rs`).
fn is_test_file(source: &Source) -> bool {
    source
        .module
        .iter()
        .any(|m| m == "tests" || m.ends_with("_tests") || m == "fixtures")
}

/// The code of `code` outside its inline modules named `tests` and its `#[cfg(test)]` items.
fn non_test_code(code: &str) -> String {
    let mut out = String::new();
    let mut skip_depth: Option<usize> = None;
    let mut depth = 0usize;
    let mut pending_cfg_test = false;
    for line in code.lines() {
        let trimmed = line.trim();
        if skip_depth.is_none() && trimmed.starts_with("#[cfg(test)]") {
            pending_cfg_test = true;
            continue;
        }
        let opens = line.matches('{').count();
        let closes = line.matches('}').count();
        if skip_depth.is_none() && pending_cfg_test {
            pending_cfg_test = false;
            if opens > closes {
                skip_depth = Some(depth);
            }
            depth = depth + opens - closes.min(depth + opens);
            continue;
        }
        depth = (depth + opens).saturating_sub(closes);
        match skip_depth {
            Some(d) if depth <= d => skip_depth = None,
            Some(_) => {}
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The byte ranges of the inline modules (`mod name { ... }`) of `code`.
fn inline_modules(code: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = code[from..].find("mod ") {
        let at = from + i;
        from = at + 4;
        if code[..at].chars().next_back().is_some_and(is_ident) {
            continue;
        }
        let rest = &code[from..];
        let name = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
        let after = rest[name..].trim_start();
        if name == 0 || !after.starts_with('{') {
            continue;
        }
        let open = from + name + (rest[name..].len() - after.len());
        let mut depth = 0;
        for (j, c) in code[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        out.push((open, open + j));
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// Every path that starts with `crate::` or `super::` in `code`, as its segments (the
/// leading `super`s kept), each preceded by one `{inline}` per inline module it is in (a
/// `super` there names the file's own module).
fn crate_paths(code: &str) -> Vec<Vec<String>> {
    let inline = inline_modules(code);
    let mut out = Vec::new();
    for start in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(i) = code[from..].find(start) {
            let at = from + i;
            from = at + start.len();
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| is_ident(c) || c == ':') {
                continue;
            }
            let rest = &code[at..];
            let depth = inline.iter().filter(|(a, b)| *a < at && at < *b).count();
            let mut segments = vec!["{inline}".to_string(); depth];
            let mut cursor = rest;
            loop {
                let len = cursor.find(|c: char| !is_ident(c)).unwrap_or(cursor.len());
                if len == 0 {
                    break;
                }
                segments.push(cursor[..len].to_string());
                cursor = &cursor[len..];
                match cursor.strip_prefix("::") {
                    Some(next) => cursor = next,
                    None => break,
                }
            }
            out.push(segments);
        }
    }
    out
}

/// The module a path names: the longest known module its segments start with.
fn resolve(from: &Module, segments: &[String], modules: &BTreeSet<Module>) -> Option<Module> {
    let mut base: Module = from.clone();
    let mut rest = segments;
    while rest.first().is_some_and(|s| s == "{inline}") {
        base.push("{inline}".to_string());
        rest = &rest[1..];
    }
    if rest.first().is_some_and(|s| s == "crate") {
        base = Vec::new();
        rest = &rest[1..];
    } else {
        while rest.first().is_some_and(|s| s == "super") {
            base.pop()?;
            rest = &rest[1..];
        }
    }
    if base.iter().any(|s| s == "{inline}") {
        // Inside an inline module of the file: its own module.
        return Some(from.clone());
    }
    let mut best = base.clone();
    for segment in rest {
        base.push(segment.clone());
        if modules.contains(&base) {
            best = base.clone();
        } else {
            break;
        }
    }
    Some(best)
}

fn nested(a: &Module, b: &Module) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// Module-level edges: (from, to) for every reference between modules not nested in one
/// another.
fn edges(sources: &[Source]) -> BTreeMap<Module, BTreeSet<Module>> {
    let modules: BTreeSet<Module> = sources.iter().map(|s| s.module.clone()).collect();
    let mut out: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for source in sources {
        for path in crate_paths(&source.code) {
            if let Some(to) = resolve(&source.module, &path, &modules)
                && !to.is_empty()
                && !nested(&source.module, &to)
            {
                out.entry(source.module.clone()).or_default().insert(to);
            }
        }
    }
    out
}

/// Strongly connected components of more than one node (Tarjan).
fn cycles<N: Ord + Clone>(graph: &BTreeMap<N, BTreeSet<N>>) -> Vec<Vec<N>> {
    struct Tarjan<'g, N: Ord> {
        graph: &'g BTreeMap<N, BTreeSet<N>>,
        index: BTreeMap<&'g N, usize>,
        low: BTreeMap<&'g N, usize>,
        stack: Vec<&'g N>,
        on_stack: BTreeSet<&'g N>,
        next: usize,
        out: Vec<Vec<N>>,
    }
    impl<'g, N: Ord + Clone> Tarjan<'g, N> {
        fn visit(&mut self, v: &'g N) {
            self.index.insert(v, self.next);
            self.low.insert(v, self.next);
            self.next += 1;
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.graph.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w.clone());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.out.push(component);
                }
            }
        }
    }
    let mut t = Tarjan {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.out
}

fn dependencies(manifest: &Path) -> BTreeSet<String> {
    let text = fs::read_to_string(manifest).expect("a readable Cargo.toml");
    let doc: toml::Table = text.parse().expect("Cargo.toml parses");
    doc.get("dependencies")
        .and_then(|d| d.as_table())
        .map(|t| t.keys().cloned().collect())
        .unwrap_or_default()
}

#[test]
fn each_crate_depends_only_on_the_layers_below_it() {
    let ours: BTreeSet<&str> = MANIFESTS
        .iter()
        .map(|(dir, _, _)| {
            if *dir == "." {
                "axon"
            } else {
                dir.trim_start_matches("crates/")
            }
        })
        .collect();
    let mut broken = Vec::new();
    for (dir, below, forbidden) in MANIFESTS {
        let manifest = workspace().join(dir).join("Cargo.toml");
        for dep in dependencies(&manifest) {
            let is_ours =
                dep == "axon" || dep.strip_prefix("axon-").is_some_and(|d| ours.contains(d));
            if is_ours && !below.contains(&dep.as_str()) {
                broken.push(format!("{dir} depends on {dep}, not a layer below it"));
            }
            if forbidden.iter().any(|group| group.contains(&dep.as_str())) {
                broken.push(format!(
                    "{dir} depends on {dep}, which its layer must not know"
                ));
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn the_model_and_xds_make_no_clock_file_or_process_calls() {
    let mut found = Vec::new();
    for (dir, sources) in crate_sources() {
        if dir != "crates/model" && dir != "crates/xds" {
            continue;
        }
        assert!(sources.len() > 10, "{dir}/src was read");
        for source in sources.iter().filter(|s| !is_test_file(s)) {
            let code = non_test_code(&source.code);
            for call in IMPURE_CALLS {
                if code.contains(call) {
                    found.push(format!("{} calls {call}", source.file.display()));
                }
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn every_import_of_the_axon_crate_follows_the_dependency_rule() {
    let sources = axon_sources();
    assert!(sources.len() > 30, "src/ was read");
    let allowed: BTreeMap<&str, &[&str]> = ALLOWED.iter().copied().collect();
    let mut broken = Vec::new();
    for (from, tos) in edges(&sources) {
        let top_from = &from[0];
        for to in tos {
            let top_to = &to[0];
            if top_to == top_from {
                continue;
            }
            let ok = allowed
                .get(top_from.as_str())
                .is_some_and(|a| a.contains(&top_to.as_str()));
            if !ok {
                broken.push(format!("{} imports {}", from.join("::"), to.join("::")));
            }
        }
    }
    for top in sources.iter().filter_map(|s| s.module.first()) {
        assert!(
            allowed.contains_key(top.as_str()),
            "src/{top} is a top-level module the rule does not place: add it to ALLOWED and to docs/ARCHITECTURE.md"
        );
    }
    assert!(
        broken.is_empty(),
        "imports against the rule:\n{}",
        broken.join("\n")
    );
}

fn names_crate(code: &str, name: &str) -> bool {
    let needle = format!("{name}::");
    let mut from = 0;
    while let Some(i) = code[from..].find(&needle) {
        let at = from + i;
        from = at + needle.len();
        let before = code[..at].chars().next_back();
        if !before.is_some_and(|c| is_ident(c) || c == ':') {
            return true;
        }
    }
    false
}

#[test]
fn modules_do_not_name_crates_they_must_not_know() {
    let forbidden: BTreeMap<&str, &[&str]> = FORBIDDEN_CRATES.iter().copied().collect();
    let mut found = Vec::new();
    for source in axon_sources() {
        let rel = source
            .file
            .strip_prefix(workspace().join("src"))
            .expect("under src/")
            .to_string_lossy()
            .into_owned();
        let mut crates: Vec<&str> = source
            .module
            .first()
            .and_then(|t| forbidden.get(t.as_str()))
            .map(|c| c.to_vec())
            .unwrap_or_default();
        if PURE_ACTOR_STATE.contains(&rel.as_str()) {
            crates.extend(["actix", "actix_rt"]);
        }
        for name in crates {
            if names_crate(&source.code, name) {
                found.push(format!("{} names {name}", source.file.display()));
            }
        }
    }
    for file in PURE_ACTOR_STATE {
        assert!(
            workspace().join("src").join(file).exists(),
            "src/{file} exists"
        );
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn no_import_cycles_between_modules_of_any_crate() {
    let mut shown = Vec::new();
    let mut all = crate_sources();
    all.retain(|(dir, _)| dir != ".");
    all.push(("src".to_string(), axon_sources()));
    for (dir, sources) in all {
        for cycle in cycles(&edges(&sources)) {
            let names: Vec<String> = cycle.iter().map(|m| m.join("::")).collect();
            shown.push(format!("{dir}: {}", names.join(" ⇄ ")));
        }
    }
    assert!(shown.is_empty(), "import cycles:\n{}", shown.join("\n"));
}

#[test]
fn the_test_code_filter_drops_cfg_test_items() {
    let code = "fn a() { Instant::now(); }\n#[cfg(test)]\nmod tests {\n    fn b() {\n        x();\n    }\n}\nfn c() {}\n";
    let kept = non_test_code(code);
    assert!(kept.contains("fn a()") && kept.contains("fn c()"), "{kept}");
    assert!(!kept.contains("x()"), "{kept}");
}

#[test]
fn the_reader_finds_paths_and_cycles() {
    let code = "use crate::model::config::ConfigKey;\nlet x = super::super::a::B;\nfoo::crate::x\nmod tests {\n use super::C;\n}";
    assert_eq!(
        crate_paths(code),
        [
            vec!["crate", "model", "config", "ConfigKey"],
            vec!["super", "super", "a", "B"],
            vec!["{inline}", "super", "C"],
        ]
    );
    let known: BTreeSet<Module> = [vec!["a".to_string()], vec!["a".into(), "b".into()]].into();
    let from: Module = vec!["a".into(), "b".into()];
    let inline = ["{inline}", "super", "C"].map(String::from);
    assert_eq!(resolve(&from, &inline, &known), Some(from.clone()));
    let graph: BTreeMap<u8, BTreeSet<u8>> = [
        (1, [2].into()),
        (2, [3].into()),
        (3, [1].into()),
        (4, [1].into()),
    ]
    .into();
    assert_eq!(cycles(&graph), [vec![1, 2, 3]]);
}
