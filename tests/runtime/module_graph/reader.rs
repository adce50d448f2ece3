//! The source reader of the module-graph test: files of `src/` stripped of comments and
//! literals, tokenized, and scanned for the paths they depend on (the rules are in the parent
//! module's docs).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

/// A token of stripped source: an identifier (or keyword, or number) or one punctuation mark;
/// `::` is one token.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Tok {
    pub(super) text: String,
    pub(super) line: usize,
}

/// One source file of the crate.
pub(super) struct SrcFile {
    /// Relative to the crate root, with `/` separators (`src/backend/cuda/device.rs`).
    pub(super) rel: String,
    /// Its module path (`["backend", "cuda", "device"]`; `[]` for `src/lib.rs`).
    pub(super) module: Vec<String>,
    pub(super) toks: Vec<Tok>,
}

/// A path found in a file, made absolute (module segments from the crate root, then item names).
pub(super) struct Ref {
    pub(super) path: Vec<String>,
    pub(super) line: usize,
    /// Set for a `use` leaf other than a glob: the name it binds in the module, so a path through
    /// the module (`super::Name`, or `crate::m::Name` for a `pub use`) can be followed.
    pub(super) binds: Option<String>,
    /// Whether it is a `pub use` (any visibility): a re-export.
    pub(super) public: bool,
}

/// The dependencies of one file, before they are resolved to files.
pub(super) struct Scan {
    pub(super) refs: Vec<Ref>,
    /// Identifiers of the file outside `use` items (to tell a used re-export from a facade).
    pub(super) code_idents: BTreeSet<String>,
}

pub(super) fn crate_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub(super) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
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
pub(super) fn module_of(rel: &str) -> Vec<String> {
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
pub(super) fn strip(src: &str) -> String {
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
pub(super) fn raw_string_start(c: &[char], i: usize) -> Option<(usize, usize)> {
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
pub(super) fn char_literal_len(c: &[char], i: usize) -> Option<usize> {
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

pub(super) fn tokenize(text: &str) -> Vec<Tok> {
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

pub(super) fn is_ident(t: &str) -> bool {
    t.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_' || c == '$')
}

/// The crate's module paths (those that have a file).
pub(super) type Modules = BTreeMap<Vec<String>, usize>;

/// `first` as the start of a path in module `here`: the absolute module path it stands for, or
/// `None` for an external crate, a local name or a type.
pub(super) fn anchor(first: &str, here: &[String], modules: &Modules) -> Option<Vec<String>> {
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
pub(super) fn absolute(segs: &[String], here: &[String], modules: &Modules) -> Option<Vec<String>> {
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
pub(super) struct UseParser<'a> {
    pub(super) toks: &'a [Tok],
    pub(super) pos: usize,
    pub(super) leaves: Vec<(Vec<String>, usize, String)>,
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
pub(super) fn is_pub_use(toks: &[Tok], i: usize) -> bool {
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

pub(super) fn scan(file: &SrcFile, modules: &Modules) -> Scan {
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
pub(super) type Exports = HashMap<Vec<String>, HashMap<String, Vec<String>>>;

/// The file a path names: the file of its longest module prefix, following that module's `use`
/// of the next segment (a few times at most, in case re-exports chain).
pub(super) fn resolve(path: &[String], modules: &Modules, exports: &Exports) -> usize {
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
