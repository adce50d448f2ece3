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
use std::path::{Path, PathBuf};

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

/// A token of stripped source: an identifier (or keyword, or number) or one punctuation mark;
/// `::` is one token.
#[derive(Debug, Clone, PartialEq)]
struct Tok {
    text: String,
    line: usize,
}

/// One source file of the crate.
struct SrcFile {
    /// Relative to the crate root, with `/` separators (`src/backend/cuda/device.rs`).
    rel: String,
    /// Its module path (`["backend", "cuda", "device"]`; `[]` for `src/lib.rs`).
    module: Vec<String>,
    toks: Vec<Tok>,
}

/// A path found in a file, made absolute (module segments from the crate root, then item names).
struct Ref {
    path: Vec<String>,
    line: usize,
    /// Set for a `use` leaf other than a glob: the name it binds in the module, so a path through
    /// the module (`super::Name`, or `crate::m::Name` for a `pub use`) can be followed.
    binds: Option<String>,
    /// Whether it is a `pub use` (any visibility): a re-export.
    public: bool,
}

/// The dependencies of one file, before they are resolved to files.
struct Scan {
    refs: Vec<Ref>,
    /// Identifiers of the file outside `use` items (to tell a used re-export from a facade).
    code_idents: BTreeSet<String>,
}

/// One dependency between two nodes, with where it is written.
#[derive(Clone)]
struct Edge {
    from: String,
    to: String,
    at: String,
}

fn crate_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// `src/a/b.rs` and `src/a/b/mod.rs` are module `a::b`; `src/lib.rs` is the root.
fn module_of(rel: &str) -> Vec<String> {
    let inner = rel.strip_prefix("src/").expect("a file under src/");
    let inner = inner.strip_suffix(".rs").expect("a .rs file");
    let mut segs: Vec<String> = inner.split('/').map(str::to_string).collect();
    if matches!(
        segs.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        segs.pop();
    }
    segs
}

/// The source with comments and string, byte-string, raw-string and character literals replaced
/// by spaces (line breaks kept, so lines still count); lifetimes are left alone.
fn strip(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    let mut i = 0;
    while i < c.len() {
        let prev_ident = i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_');
        if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if !prev_ident && raw_string_start(&c, i).is_some() {
            let (open_len, hashes) = raw_string_start(&c, i).unwrap();
            for _ in 0..open_len {
                out.push(' ');
            }
            i += open_len;
            while i < c.len() {
                if c[i] == '"' && (1..=hashes).all(|k| c.get(i + k) == Some(&'#')) {
                    for _ in 0..=hashes {
                        out.push(' ');
                    }
                    i += hashes + 1;
                    break;
                }
                blank(&mut out, c[i]);
                i += 1;
            }
        } else if c[i] == '"' {
            out.push(' ');
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' && i + 1 < c.len() {
                    blank(&mut out, c[i]);
                    i += 1;
                }
                blank(&mut out, c[i]);
                i += 1;
            }
            out.push(' ');
            i += 1;
        } else if c[i] == '\'' && char_literal_len(&c, i).is_some() {
            let len = char_literal_len(&c, i).unwrap();
            for _ in 0..len {
                out.push(' ');
            }
            i += len;
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// At `i`, `r"`, `r#"`, `br#"`, `cr"` ...: the length of the opening and the number of `#`.
fn raw_string_start(c: &[char], i: usize) -> Option<(usize, usize)> {
    let mut j = i;
    if matches!(c.get(j), Some('b' | 'c')) {
        j += 1;
    }
    if c.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let mut hashes = 0;
    while c.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    (c.get(j) == Some(&'"')).then_some((j + 1 - i, hashes))
}

/// At a `'`: the length of a character literal (`'a'`, `'\n'`, `'\u{1F600}'`), or `None` for a
/// lifetime or label.
fn char_literal_len(c: &[char], i: usize) -> Option<usize> {
    if c.get(i + 1) == Some(&'\\') {
        let mut j = i + 2;
        while j < c.len() && j < i + 12 {
            if c[j] == '\'' && j > i + 2 {
                return Some(j + 1 - i);
            }
            j += 1;
        }
        None
    } else if c.get(i + 2) == Some(&'\'') {
        Some(3)
    } else {
        None
    }
}

fn tokenize(text: &str) -> Vec<Tok> {
    let c: Vec<char> = text.chars().collect();
    let mut toks = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch.is_alphanumeric() || ch == '_' || (ch == '$' && c.get(i + 1) == Some(&'c')) {
            let start = i;
            i += 1;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            let mut text: String = c[start..i].iter().collect();
            if let Some(raw) = text.strip_prefix("r#") {
                text = raw.to_string();
            }
            toks.push(Tok { text, line });
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            toks.push(Tok {
                text: "::".into(),
                line,
            });
            i += 2;
        } else {
            toks.push(Tok {
                text: ch.to_string(),
                line,
            });
            i += 1;
        }
    }
    toks
}

fn is_ident(t: &str) -> bool {
    t.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_' || c == '$')
}

/// The crate's module paths (those that have a file).
type Modules = BTreeMap<Vec<String>, usize>;

/// `first` as the start of a path in module `here`: the absolute module path it stands for, or
/// `None` for an external crate, a local name or a type.
fn anchor(first: &str, here: &[String], modules: &Modules) -> Option<Vec<String>> {
    match first {
        "crate" | "$crate" => Some(Vec::new()),
        "self" => Some(here.to_vec()),
        "super" => Some(here[..here.len().saturating_sub(1)].to_vec()),
        name => {
            let mut child = here.to_vec();
            child.push(name.to_string());
            modules.contains_key(&child).then_some(child)
        }
    }
}

/// Makes `segs` (as written in module `here`) absolute: `super::super::x` climbs twice.
fn absolute(segs: &[String], here: &[String], modules: &Modules) -> Option<Vec<String>> {
    let mut base = anchor(segs.first()?, here, modules)?;
    let mut rest = &segs[1..];
    if segs[0] == "super" {
        while rest.first().is_some_and(|s| s == "super") {
            base.pop();
            rest = &rest[1..];
        }
    }
    base.extend(rest.iter().filter(|s| *s != "self").cloned());
    Some(base)
}

/// The tokens of `use` items and the paths they bring in, from the token after `use`.
struct UseParser<'a> {
    toks: &'a [Tok],
    pos: usize,
    leaves: Vec<(Vec<String>, usize, String)>,
}

impl UseParser<'_> {
    fn peek(&self) -> &str {
        self.toks.get(self.pos).map_or(";", |t| t.text.as_str())
    }

    /// One use tree under `prefix`: `a::b::{...}`, `a::b as c`, `a::*`, `{...}`.
    fn tree(&mut self, prefix: Vec<String>) {
        let mut segs = prefix;
        if self.peek() == "::" {
            self.pos += 1;
        }
        loop {
            match self.peek() {
                "{" => {
                    self.pos += 1;
                    while !matches!(self.peek(), "}" | ";") {
                        self.tree(segs.clone());
                        if self.peek() == "," {
                            self.pos += 1;
                        }
                    }
                    self.pos += 1;
                    return;
                }
                "*" => {
                    let line = self.toks[self.pos].line;
                    self.pos += 1;
                    self.leaves.push((segs, line, "*".into()));
                    return;
                }
                t if is_ident(t) => {
                    let line = self.toks[self.pos].line;
                    segs.push(t.to_string());
                    self.pos += 1;
                    if self.peek() == "::" {
                        self.pos += 1;
                        continue;
                    }
                    let mut name = segs.last().cloned().unwrap_or_default();
                    if name == "self" {
                        segs.pop();
                        name = segs.last().cloned().unwrap_or_default();
                    }
                    if self.peek() == "as" {
                        self.pos += 1;
                        name = self.peek().to_string();
                        self.pos += 1;
                    }
                    self.leaves.push((segs, line, name));
                    return;
                }
                _ => {
                    // Something this reader does not know: skip to the end of the item.
                    while !matches!(self.peek(), ";" | "}" | ",") {
                        self.pos += 1;
                    }
                    return;
                }
            }
        }
    }
}

/// Whether the `use` at `i` is a re-export (`pub use`, `pub(crate) use`, `pub(super) use`, ...).
fn is_pub_use(toks: &[Tok], i: usize) -> bool {
    if i == 0 {
        return false;
    }
    if toks[i - 1].text == "pub" {
        return true;
    }
    if toks[i - 1].text == ")" {
        let mut j = i - 1;
        while j > 0 && toks[j].text != "(" {
            j -= 1;
        }
        return j > 0 && toks[j - 1].text == "pub";
    }
    false
}

fn scan(file: &SrcFile, modules: &Modules) -> Scan {
    let toks = &file.toks;
    let mut refs = Vec::new();
    let mut code_idents = BTreeSet::new();
    // Inline modules (`mod tests { ... }`): (brace depth at which they close, module path).
    let mut inline: Vec<(usize, Vec<String>)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < toks.len() {
        let here = inline.last().map_or(&file.module, |(_, m)| m).clone();
        let t = toks[i].text.as_str();
        match t {
            "{" => depth += 1,
            "}" => {
                depth = depth.saturating_sub(1);
                if inline.last().is_some_and(|(d, _)| *d == depth) {
                    inline.pop();
                }
            }
            "mod" if toks.get(i + 2).is_some_and(|t| t.text == "{") => {
                let mut m = here.clone();
                m.push(toks[i + 1].text.clone());
                inline.push((depth, m));
                depth += 1;
                i += 3;
                continue;
            }
            "use" => {
                let public = is_pub_use(toks, i);
                let mut p = UseParser {
                    toks,
                    pos: i + 1,
                    leaves: Vec::new(),
                };
                p.tree(Vec::new());
                for (segs, line, name) in p.leaves {
                    if let Some(path) = absolute(&segs, &here, modules) {
                        let binds = (name != "*").then_some(name);
                        refs.push(Ref {
                            path,
                            line,
                            binds,
                            public,
                        });
                    }
                }
                while p.pos < toks.len() && toks[p.pos].text != ";" {
                    p.pos += 1;
                }
                i = p.pos + 1;
                continue;
            }
            _ if is_ident(t) => {
                let after_colons = i > 0 && toks[i - 1].text == "::";
                let starts_path = toks.get(i + 1).is_some_and(|n| n.text == "::");
                if !after_colons {
                    code_idents.insert(t.to_string());
                }
                if !after_colons && starts_path {
                    let mut segs = vec![t.to_string()];
                    let mut j = i + 1;
                    while toks.get(j).is_some_and(|x| x.text == "::")
                        && toks.get(j + 1).is_some_and(|x| is_ident(&x.text))
                    {
                        segs.push(toks[j + 1].text.clone());
                        j += 2;
                    }
                    if let Some(path) = absolute(&segs, &here, modules) {
                        refs.push(Ref {
                            path,
                            line: toks[i].line,
                            binds: None,
                            public: false,
                        });
                    }
                    i = j;
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
    Scan { refs, code_idents }
}

/// The names each module binds with `use`: module path -> (name -> absolute path of the item).
type Exports = HashMap<Vec<String>, HashMap<String, Vec<String>>>;

/// The file a path names: the file of its longest module prefix, following that module's `use`
/// of the next segment (a few times at most, in case re-exports chain).
fn resolve(path: &[String], modules: &Modules, exports: &Exports) -> usize {
    let mut path = path.to_vec();
    let mut file = 0;
    for _ in 0..8 {
        let k = (0..=path.len())
            .rev()
            .find(|k| modules.contains_key(&path[..*k]))
            .expect("the crate root is a module");
        let module = &path[..k];
        file = modules[module];
        let Some(target) = path.get(k).and_then(|name| exports.get(module)?.get(name)) else {
            break;
        };
        let mut followed = target.clone();
        followed.extend(path[k + 1..].iter().cloned());
        if followed == path {
            break;
        }
        path = followed;
    }
    file
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
