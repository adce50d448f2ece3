//! No import circles among the crate's modules: a dependency between two modules points one way.
//!
//! The test reads every `src/**/*.rs` as text (no tool beyond this binary), strips comments and
//! string and character literals, and collects each file's dependencies on other modules of the
//! crate. It builds two graphs and reports every strongly connected component of more than one
//! node, with the edges (file:line) inside it:
//!
//! - **units**: the top-level modules (`src/backend`, `src/ops`, `src/buffer.rs`, `src/kernel.rs`,
//!   `src/context.rs`, `src/tensor.rs`, `src/nn`, `src/manager.rs`, ...); an edge between two files
//!   of one unit is not an edge of this graph;
//! - **files**: the files of `src/backend/cuda`, `src/backend/opencl`, `src/backend/hip` and
//!   `src/monitor`, each file a node.
//!
//! What counts as a dependency of a file:
//!
//! - every path of a `use` item (`use crate::a::b::C`, grouped `use crate::{a, b::{c, d}}`,
//!   `use super::...`, `use self::...`, and a path that starts at a child module, `use device::X`
//!   in a `mod.rs`), and every path in code that starts with `crate::`, `super::` or `self::`
//!   (`crate::ops::check::len(...)`) or with the name of a child module (`launch::run(...)`);
//! - a path names the file of the longest module prefix it has (`crate::ops::check::len` is
//!   `src/ops/check.rs`); when the next segment is a name that module re-exports (`pub use`), the
//!   path is followed to the re-exported item, so `crate::Buffer` is `src/buffer.rs` and
//!   `super::ClDevice` (re-exported by `opencl/mod.rs`) is `opencl/device.rs`;
//! - `super::` is the parent module as the compiler reads it (in an inline `mod tests` it is the
//!   file itself, which is no edge): a child that uses an item its parent *defines* depends on the
//!   parent, while a parent's re-export of the child's item leads back to the child itself;
//! - a `mod` declaration is not a dependency (a parent declaring its children is fine), and neither
//!   is a parent's `pub use` of a descendant's item, unless the parent's own code uses that name;
//!   a parent whose code uses a child's item depends on the child;
//! - test modules inside `src/` count like any other code.
//!
//! What it does not see: a method call (`self.launch_kernel(..)`) on a type whose `impl` block
//! sits in another file, a name brought in by a glob, or a path written inside a macro that
//! builds it from pieces. Such a file (the backends' `impl CudaDevice` / `impl ClDevice` files)
//! depends on the type's file, which must then not import it back.
//!
//! A circle may be allowed for a while by an entry in [`KNOWN`] (there is none); any other circle,
//! or a known one growing to more units, fails the test, and so does a known one once it is gone.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fmt::Write as _;
use std::fs;

mod reader;
use reader::*;

/// A circle that is allowed to remain, with the reason; a component must match `units` exactly.
struct Known {
    units: &'static [&'static str],
    reason: &'static str,
}

/// The circles allowed to remain.
const KNOWN: &[Known] = &[];

/// The directories whose files are the nodes of the file graph.
const FILE_SCOPES: &[&str] = &[
    "src/backend/cuda",
    "src/backend/opencl",
    "src/backend/hip",
    "src/monitor",
];

/// One dependency between two nodes, with where it is written.
#[derive(Clone)]
struct Edge {
    from: String,
    to: String,
    at: String,
}

/// The node of a file in the unit graph: `src/x` for a directory module, `src/x.rs` for a file.
fn unit_of(file: &SrcFile) -> Option<String> {
    let first = file.module.first()?;
    let parts = file.rel.split('/').count();
    Some(if parts > 2 {
        format!("src/{first}")
    } else {
        format!("src/{first}.rs")
    })
}

/// The node of a file in the file graph, when it is in one of [`FILE_SCOPES`].
fn scoped_file(file: &SrcFile) -> Option<String> {
    FILE_SCOPES
        .iter()
        .any(|s| file.rel.starts_with(&format!("{s}/")))
        .then(|| file.rel.clone())
}

fn load() -> Vec<SrcFile> {
    let root = crate_root();
    let mut paths = Vec::new();
    rust_files(&root.join("src"), &mut paths);
    paths
        .into_iter()
        .map(|p| {
            let rel = p
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            let text = fs::read_to_string(&p).unwrap_or_else(|e| panic!("reading {rel}: {e}"));
            SrcFile {
                module: module_of(&rel),
                toks: tokenize(&strip(&text)),
                rel,
            }
        })
        .collect()
}

/// Every file-to-file dependency: (from file, to file, line).
fn file_edges(files: &[SrcFile]) -> Vec<(usize, usize, usize)> {
    let modules: Modules = files
        .iter()
        .enumerate()
        .map(|(i, f)| (f.module.clone(), i))
        .collect();
    let scans: Vec<Scan> = files.iter().map(|f| scan(f, &modules)).collect();
    let mut exports = Exports::new();
    for (f, s) in files.iter().zip(&scans) {
        for r in &s.refs {
            if let Some(name) = &r.binds {
                exports
                    .entry(f.module.clone())
                    .or_default()
                    .insert(name.clone(), r.path.clone());
            }
        }
    }
    let mut edges = Vec::new();
    for (from, (f, s)) in files.iter().zip(&scans).enumerate() {
        for r in &s.refs {
            let descendant = r.path.len() > f.module.len() && r.path.starts_with(&f.module);
            let facade = r.public && descendant;
            if facade && r.binds.as_ref().is_none_or(|n| !s.code_idents.contains(n)) {
                continue;
            }
            let to = resolve(&r.path, &modules, &exports);
            if to != from {
                edges.push((from, to, r.line));
            }
        }
    }
    edges
}

/// The graph's edges between nodes (`node_of` returns `None` for a file outside the graph).
fn graph(
    files: &[SrcFile],
    raw: &[(usize, usize, usize)],
    node_of: impl Fn(&SrcFile) -> Option<String>,
) -> Vec<Edge> {
    let mut edges = Vec::new();
    for &(from, to, line) in raw {
        let (Some(a), Some(b)) = (node_of(&files[from]), node_of(&files[to])) else {
            continue;
        };
        if a != b {
            edges.push(Edge {
                from: a,
                to: b,
                at: format!("{}:{line}", files[from].rel),
            });
        }
    }
    edges
}

/// Strongly connected components of more than one node (Tarjan), each sorted.
fn circles(edges: &[Edge]) -> Vec<Vec<String>> {
    let mut nodes: BTreeSet<&str> = BTreeSet::new();
    let mut adj: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for e in edges {
        nodes.insert(&e.from);
        nodes.insert(&e.to);
        adj.entry(&e.from).or_default().insert(&e.to);
    }
    struct State<'a> {
        adj: &'a BTreeMap<&'a str, BTreeSet<&'a str>>,
        index: HashMap<&'a str, usize>,
        low: HashMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for &w in s.adj.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let mut s = State {
        adj: &adj,
        index: HashMap::new(),
        low: HashMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in nodes {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out.sort();
    s.out
}

/// A shortest cycle through the component's first node, as `a -> b -> a`.
fn one_cycle(comp: &[String], edges: &[Edge]) -> String {
    let inside = |n: &str| comp.iter().any(|c| c == n);
    let start = comp[0].as_str();
    let mut prev: HashMap<&str, &str> = HashMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for e in edges.iter().filter(|e| e.from == v && inside(&e.to)) {
            if e.to == start {
                let mut path = vec![start, v];
                let mut at = v;
                while at != start {
                    at = prev[at];
                    path.push(at);
                }
                path.reverse();
                return path.join(" -> ");
            }
            if !prev.contains_key(e.to.as_str()) {
                prev.insert(&e.to, v);
                queue.push_back(&e.to);
            }
        }
    }
    String::new()
}

/// The report of one component: a cycle through it and every edge inside it, with where.
fn describe(comp: &[String], edges: &[Edge]) -> String {
    let inside = |n: &str| comp.iter().any(|c| c == n);
    let mut pairs: BTreeMap<(&str, &str), Vec<&str>> = BTreeMap::new();
    for e in edges.iter().filter(|e| inside(&e.from) && inside(&e.to)) {
        pairs.entry((&e.from, &e.to)).or_default().push(&e.at);
    }
    let mut out = format!(
        "  circle among {}\n    e.g. {}\n",
        comp.join(", "),
        one_cycle(comp, edges)
    );
    for ((a, b), mut at) in pairs {
        at.dedup();
        let more = at.len().saturating_sub(4);
        at.truncate(4);
        let tail = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        let _ = writeln!(out, "    {a} -> {b}: {}{tail}", at.join(", "));
    }
    out
}

/// The failures of one graph: circles not in `known`, and `known` entries no longer seen.
fn check(name: &str, edges: &[Edge], known: &[Known]) -> Vec<String> {
    let found = circles(edges);
    let mut failures = Vec::new();
    for comp in &found {
        let allowed = known.iter().any(|k| {
            let mut units: Vec<&str> = k.units.to_vec();
            units.sort();
            units == comp.iter().map(String::as_str).collect::<Vec<_>>()
        });
        if !allowed {
            failures.push(format!(
                "{name} graph: new import circle\n{}",
                describe(comp, edges)
            ));
        }
    }
    for k in known {
        let mut units: Vec<String> = k.units.iter().map(|s| s.to_string()).collect();
        units.sort();
        if !found.contains(&units) {
            failures.push(format!(
                "{name} graph: the known circle among {} is gone; remove its entry from KNOWN ({})",
                units.join(", "),
                k.reason
            ));
        }
    }
    failures
}

#[test]
fn no_import_circles() {
    let files = load();
    let raw = file_edges(&files);
    let units = graph(&files, &raw, unit_of);
    let scoped = graph(&files, &raw, scoped_file);
    let mut failures = check("unit", &units, KNOWN);
    failures.extend(check("file", &scoped, &[]));
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// The reader itself: grouped and nested `use` trees, `self` in a group, `as`, globs, paths in
/// code, `super` in an inline module, and text in comments and literals that must not count.
#[test]
fn reader_finds_the_paths_it_should() {
    let src = r##"
use crate::{a, b::{c, d as e, self}};
use super::f::*;
pub(crate) use child::G;
// use crate::in_comment;
/* crate::in_block /* nested */ crate::still_comment */
fn x() {
    let s = "crate::in_string";
    let r = r#"crate::in_raw "string""#;
    let q = '"';
    crate::ops::check::len(1);
    child::run();
    other::run::<'static>();
}
mod tests {
    use super::*;
    use super::super::h;
}
"##;
    let module: Vec<String> = vec!["m".into(), "n".into()];
    let file = SrcFile {
        rel: "src/m/n.rs".into(),
        module,
        toks: tokenize(&strip(src)),
    };
    let modules: Modules = [
        vec![],
        vec!["m".to_string(), "n".into()],
        vec!["m".into(), "n".into(), "child".into()],
    ]
    .into_iter()
    .enumerate()
    .map(|(i, m)| (m, i))
    .collect();
    let s = scan(&file, &modules);
    let got: Vec<(String, usize)> = s.refs.iter().map(|r| (r.path.join("::"), r.line)).collect();
    let want = [
        ("a", 2),
        ("b::c", 2),
        ("b::d", 2),
        ("b", 2),
        ("m::f", 3),
        ("m::n::child::G", 4),
        ("ops::check::len", 11),
        ("m::n::child::run", 12),
        ("m::n", 16),
        ("m::h", 17),
    ];
    let want: Vec<(String, usize)> = want.iter().map(|(p, l)| (p.to_string(), *l)).collect();
    assert_eq!(got, want);
    assert_eq!(s.refs[2].binds.as_deref(), Some("e"));
    assert!(s.refs[5].public && !s.refs[2].public);
    assert_eq!(s.refs[5].binds.as_deref(), Some("G"));
    assert_eq!(s.refs[4].binds, None);
    assert!(!s.code_idents.contains("in_comment") && !s.code_idents.contains("in_string"));
}
