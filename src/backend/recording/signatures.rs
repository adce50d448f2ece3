//! The parameter lists of the kernels a source defines, read from the text: CUDA/HIP
//! `extern "C" __global__ void name(...)`, OpenCL `__kernel void name(...)`, also where a
//! macro stamps out entries (`#define ENTRY(NAME, ...) __global__ void NAME(...)` then
//! `ENTRY(sgemm_tc128, ...)`). Enough C to read this crate's kernels, not a preprocessor.

use std::fmt;

/// The C type of one kernel parameter, as far as the launch ABI cares.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum CType {
    /// A pointer to device memory (`float*`, `__global uint*`, ...).
    Pointer,
    /// An OpenCL `__local` pointer: dynamic local memory, which the backend passes itself
    /// after the op's arguments (`LaunchConfig::shared_bytes`).
    Local,
    /// `unsigned int` / `uint`.
    U32,
    /// `int`.
    I32,
    /// `float`.
    F32,
    /// `unsigned long long` / `u64` / `ulong`.
    U64,
    /// A type the launch ABI has no argument kind for.
    Other(String),
}

impl fmt::Display for CType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CType::Pointer => f.write_str("pointer"),
            CType::Local => f.write_str("__local pointer"),
            CType::U32 => f.write_str("uint"),
            CType::I32 => f.write_str("int"),
            CType::F32 => f.write_str("float"),
            CType::U64 => f.write_str("u64"),
            CType::Other(s) => write!(f, "`{s}`"),
        }
    }
}

/// One kernel definition: its entry name and its parameters (`(type, declaration text)`).
#[derive(Debug, Clone)]
pub(crate) struct Signature {
    pub(crate) entry: String,
    pub(crate) params: Vec<(CType, String)>,
}

/// Every kernel `source` defines. `opencl`: the keyword is `__kernel`, else `__global__`.
pub(crate) fn kernels(source: &str, opencl: bool) -> Vec<Signature> {
    let text = strip_comments(source).replace("\\\n", " ");
    let keyword = if opencl { "__kernel" } else { "__global__" };
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = find_word(&text, keyword, from) {
        from = at + keyword.len();
        let Some((name, params)) = definition(&text[from..]) else {
            continue;
        };
        let params: Vec<(CType, String)> = split_top(&params)
            .into_iter()
            .filter(|p| !p.is_empty() && p != "void")
            .map(|p| (ctype(&p), p))
            .collect();
        match macro_around(&text, at) {
            Some((mac, args)) if args.contains(&name) => {
                let slot = args.iter().position(|a| *a == name).unwrap_or(0);
                for entry in invocations(&text, &mac, slot) {
                    out.push(Signature {
                        entry,
                        params: params.clone(),
                    });
                }
            }
            _ => out.push(Signature {
                entry: name,
                params,
            }),
        }
    }
    out
}

/// Removes `//` and `/* */` comments (the kernels have no string literal holding either).
fn strip_comments(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    loop {
        let line = rest.find("//");
        let block = rest.find("/*");
        match (line, block) {
            (Some(l), b) if b.is_none_or(|b| l < b) => {
                out.push_str(&rest[..l]);
                rest = &rest[l..];
                rest = rest.find('\n').map_or("", |e| &rest[e..]);
            }
            (_, Some(b)) => {
                out.push_str(&rest[..b]);
                out.push(' ');
                rest = rest[b + 2..]
                    .find("*/")
                    .map_or("", |e| &rest[b + 2 + e + 2..]);
            }
            _ => {
                out.push_str(rest);
                return out;
            }
        }
    }
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The next occurrence of `word` at or after `from` with no identifier character either side.
fn find_word(text: &str, word: &str, from: usize) -> Option<usize> {
    let mut i = from;
    while let Some(rel) = text[i..].find(word) {
        let at = i + rel;
        let before = text[..at].chars().next_back().is_some_and(is_ident);
        let after = text[at + word.len()..].chars().next().is_some_and(is_ident);
        if !before && !after {
            return Some(at);
        }
        i = at + word.len();
    }
    None
}

/// The text inside the parentheses that open `s` (after whitespace), and what follows them.
fn parenthesized(s: &str) -> Option<(&str, &str)> {
    let s = s.trim_start();
    if !s.starts_with('(') {
        return None;
    }
    let mut depth = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some((&s[1..i], &s[i + 1..]));
                }
            }
            _ => {}
        }
    }
    None
}

/// After the kernel keyword: attributes, `void`, the name and the parameter list.
fn definition(mut s: &str) -> Option<(String, String)> {
    loop {
        s = s.trim_start();
        let word: String = s.chars().take_while(|&c| is_ident(c)).collect();
        if word.is_empty() {
            return None;
        }
        let rest = &s[word.len()..];
        match word.as_str() {
            "__attribute__" | "__launch_bounds__" => s = parenthesized(rest)?.1,
            "void" => s = rest,
            _ => {
                let (params, _) = parenthesized(rest)?;
                return Some((word, params.to_string()));
            }
        }
    }
}

/// `s` split at its top-level commas, each part trimmed.
fn split_top(s: &str) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut depth = 0;
    for c in s.chars() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(String::new());
                continue;
            }
            _ => {}
        }
        parts.last_mut().expect("never empty").push(c);
    }
    parts
        .into_iter()
        .map(|p| p.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

/// The ABI type of one parameter declaration (`const float* x_base`, `uint n`).
fn ctype(decl: &str) -> CType {
    if decl.contains('*') {
        let local = decl
            .split_whitespace()
            .any(|w| w == "__local" || w == "local");
        return if local { CType::Local } else { CType::Pointer };
    }
    let mut words: Vec<&str> = decl
        .split_whitespace()
        .filter(|w| !matches!(*w, "const" | "restrict" | "__restrict__" | "volatile"))
        .collect();
    words.pop(); // the parameter's name
    match words.join(" ").as_str() {
        "uint" | "unsigned" | "unsigned int" => CType::U32,
        "int" => CType::I32,
        "float" => CType::F32,
        "u64" | "ulong" | "unsigned long long" => CType::U64,
        other => CType::Other(other.to_string()),
    }
}

/// The macro whose `#define` line holds byte `at` of `text`: its name and parameters.
fn macro_around(text: &str, at: usize) -> Option<(String, Vec<String>)> {
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line = text[start..].trim_start().strip_prefix('#')?.trim_start();
    let line = line.strip_prefix("define")?.trim_start();
    let name: String = line.chars().take_while(|&c| is_ident(c)).collect();
    let (params, _) = parenthesized(&line[name.len()..])?;
    Some((name, split_top(params)))
}

/// Argument `slot` of every use of macro `name` outside `#` lines.
fn invocations(text: &str, name: &str, slot: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = find_word(text, name, from) {
        from = at + name.len();
        let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
        if text[start..].trim_start().starts_with('#') {
            continue;
        }
        if let Some((args, _)) = parenthesized(&text[from..]) {
            if let Some(arg) = split_top(args).into_iter().nth(slot) {
                out.push(arg);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_plain_attributed_and_macro_stamped_kernels() {
        let src = "// __global__ void commented(int x)\n\
            extern \"C\" __global__ void __launch_bounds__(256, 4) a(const float* x_base, u64 x_off,\n\
                uint n, float alpha) {}\n\
            #define ENTRY(NAME, W) extern \"C\" __global__ void NAME(float* p, \\\n\
                unsigned int n) { body(W); }\n\
            ENTRY(b_one, 1)\nENTRY(b_two, 2)\n";
        let k = kernels(src, false);
        let names: Vec<&str> = k.iter().map(|s| s.entry.as_str()).collect();
        assert_eq!(names, ["a", "b_one", "b_two"]);
        let types: Vec<CType> = k[0].params.iter().map(|p| p.0.clone()).collect();
        assert_eq!(types, [CType::Pointer, CType::U64, CType::U32, CType::F32]);
        assert_eq!(k[2].params.len(), 2);
        let cl = "__kernel __attribute__((reqd_work_group_size(256, 1, 1)))\n\
            void c(__global float* restrict y, ulong y_off, int i) {}";
        let k = kernels(cl, true);
        assert_eq!(k[0].entry, "c");
        let types: Vec<CType> = k[0].params.iter().map(|p| p.0.clone()).collect();
        assert_eq!(types, [CType::Pointer, CType::U64, CType::I32]);
    }
}
