//! The dependency rule of `src/`, read from the source (docs/ARCHITECTURE.md, "The
//! dependency rule"):
//!
//! ```text
//!  cli (wiring) ─▶ everything
//!  http, registry ─▶ actors ─▶ transport ─▶ xds ─▶ model
//!  metrics: a leaf that anything but model and xds may use; limits: a leaf for actors and cli
//! ```
//!
//! Fails on an import of the crate's own modules that breaks the rule, on a crate a layer
//! must not know (actix, tokio or tonic in `xds`; anything of the runtime or of Envoy in
//! `model`; `kube` outside the Kubernetes registry and the wiring), and on any import
//! cycle, between top-level modules or between any two modules of `src/` that are not
//! nested in one another. `src/bin/` (the load tool, a separate binary) is not a layer.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// What each top-level module may import of the crate (besides itself).
const ALLOWED: &[(&str, &[&str])] = &[
    ("model", &[]),
    ("xds", &["model"]),
    ("transport", &["xds", "model", "metrics"]),
    (
        "actors",
        &["transport", "xds", "model", "metrics", "limits"],
    ),
    ("registry", &["actors", "model", "metrics"]),
    ("http", &["actors", "xds", "model", "metrics"]),
    ("metrics", &[]),
    ("limits", &[]),
    (
        "cli",
        &[
            "actors",
            "transport",
            "xds",
            "model",
            "registry",
            "http",
            "metrics",
            "limits",
        ],
    ),
];

/// Crates a top-level module must not name.
const FORBIDDEN_CRATES: &[(&str, &[&str])] = &[
    (
        "model",
        &[
            "actix",
            "actix_rt",
            "tokio",
            "tonic",
            "kube",
            "k8s_openapi",
            "envoy_types",
            "prost",
            "axum",
            "notify",
            "h2",
            "hyper",
        ],
    ),
    (
        "xds",
        &[
            "actix",
            "actix_rt",
            "tokio",
            "tonic",
            "kube",
            "k8s_openapi",
            "axum",
            "notify",
            "h2",
            "hyper",
        ],
    ),
    (
        "transport",
        &[
            "actix",
            "actix_rt",
            "kube",
            "k8s_openapi",
            "envoy_types",
            "axum",
        ],
    ),
    (
        "actors",
        &["kube", "k8s_openapi", "envoy_types", "axum", "tonic"],
    ),
    ("http", &["kube", "k8s_openapi", "envoy_types", "tonic"]),
    ("metrics", &["actix", "kube", "envoy_types", "tonic"]),
    (
        "limits",
        &["actix", "tokio", "kube", "envoy_types", "tonic"],
    ),
];

type Module = Vec<String>;

struct Source {
    file: PathBuf,
    module: Module,
    /// The code without comments.
    code: String,
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn sources() -> Vec<Source> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in fs::read_dir(dir).expect("src/ is readable") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "bin") {
                    walk(&path, out);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let root = src_dir();
    let mut files = Vec::new();
    walk(&root, &mut files);
    files.sort();
    files
        .into_iter()
        .filter(|f| f.file_name().is_some_and(|n| n != "main.rs"))
        .map(|file| {
            let rel = file.strip_prefix(&root).expect("under src/");
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
            if let Some(to) = resolve(&source.module, &path, &modules) {
                if !to.is_empty() && !nested(&source.module, &to) {
                    out.entry(source.module.clone()).or_default().insert(to);
                }
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

#[test]
fn every_import_follows_the_dependency_rule() {
    let sources = sources();
    assert!(sources.len() > 50, "src/ was read");
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

#[test]
fn layers_do_not_name_crates_they_must_not_know() {
    let forbidden: BTreeMap<&str, &[&str]> = FORBIDDEN_CRATES.iter().copied().collect();
    let mut found = Vec::new();
    for source in sources() {
        let Some(crates) = source
            .module
            .first()
            .and_then(|t| forbidden.get(t.as_str()))
        else {
            continue;
        };
        for name in *crates {
            let needle = format!("{name}::");
            let mut from = 0;
            while let Some(i) = source.code[from..].find(&needle) {
                let at = from + i;
                from = at + needle.len();
                let before = source.code[..at].chars().next_back();
                if !before.is_some_and(|c| is_ident(c) || c == ':') {
                    found.push(format!("{} names {name}", source.file.display()));
                    break;
                }
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn no_import_cycles_between_top_level_modules() {
    let mut top: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, tos) in edges(&sources()) {
        for to in tos {
            if from[0] != to[0] {
                top.entry(from[0].clone())
                    .or_default()
                    .insert(to[0].clone());
            }
        }
    }
    let found = cycles(&top);
    assert!(
        found.is_empty(),
        "cycles between top-level modules: {found:?}"
    );
}

#[test]
fn no_import_cycles_between_modules() {
    let found = cycles(&edges(&sources()));
    let shown: Vec<String> = found
        .iter()
        .map(|c| {
            c.iter()
                .map(|m| m.join("::"))
                .collect::<Vec<_>>()
                .join(" ⇄ ")
        })
        .collect();
    assert!(found.is_empty(), "import cycles:\n{}", shown.join("\n"));
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
