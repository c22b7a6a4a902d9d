//! What a check validates: the property a check expression covers for a tensor, and the
//! expansion of the file's function-like check macros (`CHECK_INPUT(x)` →
//! `TORCH_CHECK(x.is_cuda(), …); TORCH_CHECK(x.is_contiguous(), …)`). Text level: macro
//! bodies are not syntax trees.

use crate::hash::{HashMap, HashSet};

/// Properties of a tensor a check can validate (a bit set).
pub type Props = u8;
pub const DEVICE: Props = 1;
pub const DTYPE: Props = 2;
pub const SHAPE: Props = 4;
pub const CONTIG: Props = 8;
pub const ALL: Props = 15;

/// Check calls whose condition says what they validate.
pub(super) const CHECK_CALLS: &[&str] = &[
    "TORCH_CHECK",
    "STD_TORCH_CHECK",
    "TORCH_INTERNAL_ASSERT",
    "TORCH_INTERNAL_ASSERT_DEBUG_ONLY",
    "AT_ASSERTM",
    "AT_ASSERT",
    "TORCH_CHECK_VALUE",
    "TORCH_CHECK_TYPE",
    "TORCH_CHECK_INDEX",
    "TORCH_CHECK_EQ",
    "TORCH_CHECK_NE",
    "TORCH_CHECK_LE",
    "TORCH_CHECK_LT",
    "TORCH_CHECK_GE",
    "TORCH_CHECK_GT",
];

/// ATen's `TensorArg` checks and what each validates.
pub(super) const ATEN_CHECKS: &[(&str, Props)] = &[
    ("checkAllSameGPU", DEVICE),
    ("checkSameGPU", DEVICE),
    ("checkDeviceType", DEVICE),
    ("checkBackend", DEVICE),
    ("checkAllSameType", DTYPE),
    ("checkSameType", DTYPE),
    ("checkScalarType", DTYPE),
    ("checkScalarTypes", DTYPE),
    ("checkContiguous", CONTIG),
    ("checkAllContiguous", CONTIG),
    ("checkDim", SHAPE),
    ("checkDimRange", SHAPE),
    ("checkSize", SHAPE),
    ("checkNumel", SHAPE),
    ("checkSameSize", SHAPE),
    ("checkAllSameNumel", SHAPE),
    ("checkSameNumel", SHAPE),
    ("checkSameDim", SHAPE),
];

/// A function-like macro of the file.
pub(super) struct Macro<'t> {
    pub params: Vec<&'t str>,
    pub body: &'t str,
}

pub(super) fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Byte offsets where `name` occurs in `s` as a whole identifier (not a member `.name`).
pub(super) fn occurrences<'a>(s: &'a str, name: &'a str) -> impl Iterator<Item = usize> + 'a {
    let b = s.as_bytes();
    s.match_indices(name).map(|(i, _)| i).filter(move |&i| {
        let before_ok = i == 0 || (!is_ident(b[i - 1]) && b[i - 1] != b'.' && b[i - 1] != b'>');
        let after = i + name.len();
        before_ok && (after >= b.len() || !is_ident(b[after]))
    })
}

/// What checks in `s` validate about tensor `name`: `name.is_cuda()` → device, `name.sizes()` →
/// shape, …; with `bare`, a bare argument (`CHECK_INPUT(name)`) validates everything.
pub fn classify(s: &str, name: &str, bare: bool) -> Props {
    let b = s.as_bytes();
    let mut props = 0;
    for i in occurrences(s, name) {
        let mut j = i + name.len();
        while j < b.len() && b[j] == b' ' {
            j += 1;
        }
        let rest = &s[j..];
        let method_at = if rest.starts_with("->") {
            Some(j + 2)
        } else if rest.starts_with('.') {
            Some(j + 1)
        } else {
            None
        };
        let Some(m) = method_at else {
            // `CHECK_INPUT(x)`, `checkAllSameGPU(c, {x_t, y_t})`: the last of a list too.
            if bare && (rest.starts_with(',') || rest.starts_with(')') || rest.starts_with('}')) {
                props |= ALL;
            }
            continue;
        };
        let end = s[m..]
            .bytes()
            .position(|c| !is_ident(c))
            .map_or(s.len(), |p| m + p);
        let method = &s[m..end];
        props |= match method {
            "device" | "is_cuda" | "get_device" | "is_cpu" | "device_type" | "is_hip"
            | "is_xpu" => DEVICE,
            "type" if s[end..].starts_with("().is_cuda") => DEVICE,
            "type" | "scalar_type" | "dtype" | "is_floating_point" | "element_size"
            | "itemsize" | "is_complex" => DTYPE,
            "sizes" | "size" | "dim" | "numel" | "ndimension" | "shape" | "sym_sizes"
            | "sym_size" | "sym_numel" | "ndim" | "stride" | "strides" => SHAPE,
            "is_contiguous" | "is_non_overlapping_and_dense" => CONTIG,
            "options" => DEVICE | DTYPE,
            _ => 0,
        };
    }
    props
}

/// Is `name` one of the dispatch macros (`AT_DISPATCH_*`, configured names)?
pub fn is_dispatch(name: &str, macros: &[String]) -> bool {
    macros.iter().any(|m| match m.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => name == m,
    })
}

/// Splits a macro argument list `(a, f(b, c), d)` at its top-level commas.
pub(super) fn split_args(s: &str) -> Vec<&str> {
    let inner = s
        .trim()
        .strip_prefix('(')
        .and_then(|x| x.strip_suffix(')'))
        .unwrap_or(s);
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(inner[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    if !inner[start..].trim().is_empty() {
        out.push(inner[start..].trim());
    }
    out
}

/// Expands the file's function-like macros in `s` (a bounded number of rounds).
pub(super) fn expand(s: &str, macros: &HashMap<&str, Macro<'_>>) -> String {
    let mut cur = s.to_string();
    for _ in 0..4 {
        let mut out = String::new();
        let mut changed = false;
        let b = cur.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if is_ident(b[i]) && (i == 0 || !is_ident(b[i - 1])) {
                let end = cur[i..]
                    .bytes()
                    .position(|c| !is_ident(c))
                    .map_or(cur.len(), |p| i + p);
                let word = &cur[i..end];
                if let (Some(m), true) = (macros.get(word), cur[end..].starts_with('(')) {
                    if let Some(close) = matching_paren(&cur[end..]) {
                        let args = split_args(&cur[end..end + close + 1]);
                        out.push_str(&substitute(m, &args));
                        out.push(';');
                        i = end + close + 1;
                        changed = true;
                        continue;
                    }
                }
                out.push_str(word);
                i = end;
                continue;
            }
            out.push(b[i] as char);
            i += 1;
        }
        cur = out;
        if !changed || cur.len() > 20_000 {
            break;
        }
    }
    cur
}

/// The offset of the `)` closing the `(` that starts `s`.
fn matching_paren(s: &str) -> Option<usize> {
    let mut depth = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

pub(super) fn substitute(m: &Macro<'_>, args: &[&str]) -> String {
    let mut out = m.body.replace("\\\n", " ");
    for (p, a) in m.params.iter().zip(args) {
        let positions: Vec<usize> = occurrences(&out, p).collect();
        for pos in positions.into_iter().rev() {
            out.replace_range(pos..pos + p.len(), a);
        }
    }
    out
}

/// Identifiers that occur somewhere not followed by `(` or `<` (not a call or a definition).
/// Comments and `#include` lines are skipped: a file name there (`// from nms_rotated_cuda.cu`,
/// `#include "foo_cuda.cuh"`) does not hand a function around. A name inside a string literal
/// counts: a registry or a dynamic lookup may be keyed by it.
pub(super) fn referenced_names(source: &str) -> HashSet<String> {
    let b = source.as_bytes();
    let mut out = HashSet::default();
    let mut i = 0;
    let mut line_start = true;
    while i < b.len() {
        let skip_to = |from: usize, end: &[u8]| {
            memchr::memmem::find(&b[from..], end).map_or(b.len(), |k| from + k + end.len())
        };
        if b[i] == b'/' && b.get(i + 1) == Some(&b'/') {
            i = skip_to(i, b"\n");
            line_start = true;
            continue;
        }
        if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
            i = skip_to(i + 2, b"*/");
            continue;
        }
        if line_start && b[i] == b'#' {
            let rest = source[i + 1..].trim_start_matches([' ', '\t']);
            if rest.starts_with("include") {
                i = skip_to(i, b"\n");
                continue;
            }
        }
        if b[i] == b'"' {
            // Its words are references; a `//` inside it starts no comment.
            let start = i + 1;
            i += 1;
            while i < b.len() && b[i] != b'"' && b[i] != b'\n' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            let end = i.min(b.len());
            for w in source[start..end].split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                if w.bytes().next().is_some_and(|c| !c.is_ascii_digit()) {
                    out.insert(w.to_string());
                }
            }
            i += 1;
            continue;
        }
        if b[i] == b'\n' {
            line_start = true;
        } else if !b[i].is_ascii_whitespace() {
            line_start = false;
        }
        if is_ident(b[i]) && !b[i].is_ascii_digit() && (i == 0 || !is_ident(b[i - 1])) {
            let start = i;
            while i < b.len() && is_ident(b[i]) {
                i += 1;
            }
            let mut j = i;
            while j < b.len() && (b[j] == b' ' || b[j] == b'\t') {
                j += 1;
            }
            if j >= b.len() || (b[j] != b'(' && b[j] != b'<') {
                out.insert(source[start..i].to_string());
            }
            continue;
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::referenced_names;

    #[test]
    fn file_names_in_comments_and_includes_are_not_references() {
        let src = "// from detectron2/nms_rotated_cuda.cu\n#include \"nms_rotated_cuda.cuh\"\n\
                   /* see launch_cuda.cpp */\nconst char* s = \"http://x\"; REGISTER(&im2col_cuda);\n\
                   Tensor nms_rotated_cuda(const Tensor x);\nLOOKUP(\"by_name_cuda\");\n";
        let names = referenced_names(src);
        assert!(!names.contains("nms_rotated_cuda"));
        assert!(!names.contains("launch_cuda"));
        assert!(
            names.contains("im2col_cuda"),
            "a function pointer handed to a macro"
        );
        assert!(
            names.contains("by_name_cuda"),
            "a name a lookup may be keyed by"
        );
    }

    #[test]
    fn bare_argument_ends_a_list() {
        let s = "checkAllSameGPU(c, {p1_t, lengths2_t})";
        assert_eq!(super::classify(s, "lengths2_t", true), super::ALL);
        assert_eq!(super::classify(s, "p1_t", true), super::ALL);
        assert_eq!(super::classify(s, "lengths2_t", false), 0);
    }
}
