//! One kernel out of a family's files: the text with every other kernel definition cut out, so
//! that a module compiles only the kernel it is for. A compiler emits code for every kernel of a
//! translation unit, while the helpers and templates only those kernels use cost nothing once
//! the kernels are gone; so the cost of a module is its kernel's, and a first use compiles only
//! what it launches.
//!
//! Reads the kernels as `kernels-cu/` and `kernels-cl/` write them: `extern "C" __global__ void
//! name(...) { ... }` or `__kernel void name(...) { ... }` (attributes between keyword and name
//! allowed), and kernels a macro stamps out (`#define ENTRY(NAME, ...) ... __global__ void
//! NAME(...)`, then one `ENTRY(name, ...)` line each). Enough C for this crate's kernels, not a
//! preprocessor: a test compiles every module and reads back the one kernel it defines.

/// `text` with every kernel definition except `entry`'s removed (its lines left blank, so that
/// compiler messages keep their line numbers). `opencl`: kernels are `__kernel`, else
/// `__global__`.
pub(crate) fn keep_only(text: &str, entry: &str, opencl: bool) -> String {
    let code = blank_comments(text);
    let mut cuts: Vec<(usize, usize)> = kernel_spans(&code, opencl)
        .into_iter()
        .filter(|(name, _)| name != entry)
        .map(|(_, span)| span)
        .collect();
    cuts.sort_unstable();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (start, end) in cuts {
        if start < at {
            continue;
        }
        out.push_str(&text[at..start]);
        out.extend(text[start..end].chars().filter(|&c| c == '\n'));
        at = end;
    }
    out.push_str(&text[at..]);
    out
}

/// Every kernel `code` (comments blanked) defines: its name and the byte span of its definition
/// (a plain definition from `extern "C"` or the keyword to its closing brace; a macro-stamped
/// one, the macro's use).
fn kernel_spans(code: &str, opencl: bool) -> Vec<(String, (usize, usize))> {
    let keyword = if opencl { "__kernel" } else { "__global__" };
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = find_word(code, keyword, from) {
        from = at + keyword.len();
        let Some((name, params_end)) = name_and_params(code, from) else {
            continue;
        };
        if let Some((mac, params)) = macro_around(code, at) {
            if let Some(slot) = params.iter().position(|p| *p == name) {
                out.extend(macro_uses(code, &mac, slot));
            }
            continue;
        }
        let Some(end) = body_end(code, params_end) else {
            continue;
        };
        out.push((name, (definition_start(code, at), end)));
    }
    out
}

/// `text` with the characters of `//` and `/* */` comments made spaces (newlines kept), so
/// that byte offsets in it are offsets in `text`. The kernels have no string literal holding
/// either.
fn blank_comments(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = bytes.to_vec();
    let mut i = 0;
    while i + 1 < bytes.len() {
        let end = match &bytes[i..i + 2] {
            b"//" => text[i..].find('\n').map_or(bytes.len(), |e| i + e),
            b"/*" => text[i + 2..]
                .find("*/")
                .map_or(bytes.len(), |e| i + 2 + e + 2),
            _ => {
                i += 1;
                continue;
            }
        };
        for b in &mut out[i..end] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
        i = end;
    }
    // Only ASCII bytes were replaced, each whole character of a comment by spaces: still UTF-8.
    String::from_utf8(out).unwrap_or_else(|_| text.to_string())
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The next occurrence of `word` at or after `from` with no identifier character either side.
fn find_word(text: &str, word: &str, from: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut i = from;
    while let Some(rel) = text[i..].find(word) {
        let at = i + rel;
        let end = at + word.len();
        let before = at > 0 && is_ident(bytes[at - 1]);
        let after = end < bytes.len() && is_ident(bytes[end]);
        if !before && !after {
            return Some(at);
        }
        i = end;
    }
    None
}

/// The offset after whitespace (and line continuations) from `at`.
fn skip_space(text: &str, mut at: usize) -> usize {
    let bytes = text.as_bytes();
    while at < bytes.len() && (bytes[at].is_ascii_whitespace() || bytes[at] == b'\\') {
        at += 1;
    }
    at
}

/// The offset just past the bracket that closes the one at `open` (`(` or `{`).
fn close_of(text: &str, open: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let (inc, dec) = match bytes.get(open)? {
        b'(' => (b'(', b')'),
        b'{' => (b'{', b'}'),
        _ => return None,
    };
    let mut depth = 0usize;
    for (i, &b) in bytes.iter().enumerate().skip(open) {
        if b == inc {
            depth += 1;
        } else if b == dec {
            depth -= 1;
            if depth == 0 {
                return Some(i + 1);
            }
        }
    }
    None
}

/// After a kernel keyword at `from`: attributes, `void`, then the name and its parameter list;
/// the name and the offset past the list.
fn name_and_params(code: &str, mut from: usize) -> Option<(String, usize)> {
    loop {
        from = skip_space(code, from);
        let len = code[from..].bytes().take_while(|&b| is_ident(b)).count();
        if len == 0 {
            return None;
        }
        let word = &code[from..from + len];
        let after = skip_space(code, from + len);
        match word {
            "__attribute__" | "__launch_bounds__" => from = close_of(code, after)?,
            "void" => from = after,
            _ => return Some((word.to_string(), close_of(code, after)?)),
        }
    }
}

/// The offset past the body that follows a kernel's parameter list (which ends at `from`).
fn body_end(code: &str, from: usize) -> Option<usize> {
    let open = skip_space(code, from);
    close_of(code, open)
}

/// Where the definition whose kernel keyword is at `at` starts: at `extern "C"` when it has
/// one.
fn definition_start(code: &str, at: usize) -> usize {
    let before = code[..at].trim_end();
    match before.strip_suffix("\"C\"").map(str::trim_end) {
        Some(rest) if rest.ends_with("extern") => rest.len() - "extern".len(),
        _ => at,
    }
}

/// The macro whose `#define` holds byte `at` of `code` (its first line, or one continued from
/// it): its name and parameters.
fn macro_around(code: &str, at: usize) -> Option<(String, Vec<String>)> {
    let mut start = code[..at].rfind('\n').map_or(0, |i| i + 1);
    while start > 0 && code[..start - 1].trim_end_matches(' ').ends_with('\\') {
        start = code[..start - 1].rfind('\n').map_or(0, |i| i + 1);
    }
    let line = code[start..].trim_start().strip_prefix('#')?.trim_start();
    let line = line.strip_prefix("define")?.trim_start();
    let len = line.bytes().take_while(|&b| is_ident(b)).count();
    let rest = &line[len..];
    if !rest.starts_with('(') {
        return None;
    }
    let close = close_of(rest, 0)?;
    let params = rest[1..close - 1]
        .split(',')
        .map(|p| p.trim().to_string())
        .collect();
    Some((line[..len].to_string(), params))
}

/// Every use of macro `name` outside `#` lines: argument `slot` (the kernel's name) and the
/// span of the use, from its line's start to its closing parenthesis.
fn macro_uses(code: &str, name: &str, slot: usize) -> Vec<(String, (usize, usize))> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = find_word(code, name, from) {
        from = at + name.len();
        let line = code[..at].rfind('\n').map_or(0, |i| i + 1);
        if code[line..].trim_start().starts_with('#') {
            continue;
        }
        let open = skip_space(code, from);
        let Some(close) = close_of(code, open) else {
            continue;
        };
        let args: Vec<&str> = code[open + 1..close - 1]
            .split(',')
            .map(str::trim)
            .collect();
        if let Some(arg) = args.get(slot) {
            out.push((arg.to_string(), (line, close)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const CUDA: &str = "// __global__ void commented(int x) { }\n\
        __device__ float helper(float x) { return x; }\n\
        extern \"C\" __global__ void __launch_bounds__(256, 4) a(float* x, uint n) {\n\
            if (n) { x[0] = helper(1.0f); }\n\
        }\n\
        #define ENTRY(NAME, W) extern \"C\" __global__ void NAME(float* p, \\\n\
            unsigned int n) { body<W>(p); }\n\
        ENTRY(b_one, 1)\n\
        ENTRY(b_two, 2)\n\
        extern \"C\" __global__ void c(float* y) { /* } */ y[0] = 0; }\n";

    fn defined(text: &str, opencl: bool) -> Vec<String> {
        kernel_spans(&blank_comments(text), opencl)
            .into_iter()
            .map(|(name, _)| name)
            .collect()
    }

    #[test]
    fn finds_plain_attributed_and_macro_stamped_kernels() {
        assert_eq!(defined(CUDA, false), ["a", "b_one", "b_two", "c"]);
    }

    #[test]
    fn keeps_one_kernel_with_the_helpers_and_the_line_numbers() {
        for entry in ["a", "b_one", "b_two", "c"] {
            let kept = keep_only(CUDA, entry, false);
            assert_eq!(defined(&kept, false), [entry]);
            assert_eq!(kept.lines().count(), CUDA.lines().count(), "{kept}");
            assert!(kept.contains("__device__ float helper"), "{kept}");
            assert!(kept.contains("#define ENTRY"), "{kept}");
        }
        let b_two = keep_only(CUDA, "b_two", false);
        assert!(b_two.contains("ENTRY(b_two, 2)") && !b_two.contains("b_one"));
        assert!(!b_two.contains("extern \"C\" __global__ void c("));
        // A name no kernel has: every kernel goes.
        assert!(defined(&keep_only(CUDA, "none", false), false).is_empty());
    }

    #[test]
    fn opencl_kernels_with_attributes() {
        let cl = "__kernel __attribute__((reqd_work_group_size(256, 1, 1)))\n\
            void s(__global float* y, ulong y_off) { y[y_off] = 1; }\n\
            __kernel void t(__global float* y) { y[0] = 2; }\n";
        assert_eq!(defined(cl, true), ["s", "t"]);
        let kept = keep_only(cl, "t", true);
        assert_eq!(defined(&kept, true), ["t"]);
        assert!(!kept.contains("reqd_work_group_size"), "{kept}");
    }
}
