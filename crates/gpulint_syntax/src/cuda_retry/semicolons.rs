//! Bare statement-level macro invocations (`INSTANTIATE(float)`): the `;` they lack added in a
//! whitespace byte after them.

use super::scan::{blank, find, is_ident_byte, is_macro_name, last_significant, matching_paren};

/// Adds the `;` that a bare statement-level macro invocation (`INSTANTIATE(float)`) lacks, in a
/// whitespace byte after it; a top-level invocation with no room for one is blanked.
///
/// An invocation is a name in capitals (`INSTANTIATE`), or any name the file defines as a
/// function-like macro (`#define MAKE_kOptimizer(oname, gtype) …`).
pub(super) fn terminate_macro_calls(bytes: &mut [u8]) -> bool {
    let defined = function_like_macros(bytes);
    let mut changed = false;
    let n = bytes.len();
    let mut line = 0;
    let mut prev_end: Option<u8> = None; // last significant byte of the previous code line
    let mut in_block_comment = false;
    while line < n {
        let eol = memchr::memchr(b'\n', &bytes[line..])
            .map(|e| line + e)
            .unwrap_or(n);
        let mut s = line;
        while s < eol && (bytes[s] == b' ' || bytes[s] == b'\t') {
            s += 1;
        }
        if in_block_comment {
            if let Some(end) = find(&bytes[line..eol], b"*/") {
                in_block_comment = false;
                let _ = end;
            }
            line = eol + 1;
            continue;
        }
        if s >= eol || bytes[s] == b'\r' {
            line = eol + 1;
            continue;
        }
        if bytes[s] == b'#' {
            // A directive: a statement may start after it; skip its continuation lines.
            // (A line continues the directive when the line before it ends in `\`: an empty
            // line after one ends the directive.)
            let mut start = line;
            let mut e = eol;
            while e > start && e < n && bytes[start..e].trim_ascii_end().ends_with(b"\\") {
                let next = memchr::memchr(b'\n', &bytes[e + 1..])
                    .map(|x| e + 1 + x)
                    .unwrap_or(n);
                start = e + 1;
                e = next;
            }
            prev_end = Some(b';');
            line = e + 1;
            continue;
        }
        if bytes[s..eol].starts_with(b"//") {
            line = eol + 1;
            continue;
        }
        if bytes[s..eol].starts_with(b"/*") {
            if find(&bytes[s..eol], b"*/").is_none() {
                in_block_comment = true;
            }
            line = eol + 1;
            continue;
        }
        let mut next_line = eol + 1;
        if bytes[s].is_ascii_uppercase() || bytes[s] == b'_' {
            let mut w = s;
            while w < eol && is_ident_byte(bytes[w]) {
                w += 1;
            }
            let word = std::str::from_utf8(&bytes[s..w]).unwrap_or("");
            let at_statement_start =
                matches!(prev_end, None | Some(b';' | b'{' | b'}' | b')' | b':'));
            if (is_macro_name(word) || defined.contains(word))
                && word.len() >= 2
                && w < eol
                && bytes[w] == b'('
                && at_statement_start
            {
                if let Some(close) = matching_paren(bytes, w) {
                    let close_eol = memchr::memchr(b'\n', &bytes[close..])
                        .map(|e| close + e)
                        .unwrap_or(n);
                    let rest = &bytes[close + 1..close_eol];
                    let rest_is_blank = rest_is_blank(rest);
                    if rest_is_blank && !next_code_continues(bytes, close_eol + 1) {
                        if let Some(at) = room_for_semicolon(bytes, close + 1, close_eol) {
                            bytes[at] = b';';
                            changed = true;
                        } else if s == line {
                            blank(bytes, s, close + 1);
                            changed = true;
                        }
                    }
                    next_line = close_eol + 1;
                    prev_end = Some(b';');
                    line = next_line;
                    continue;
                }
            }
        }
        if let Some(last) = last_significant(&bytes[s..eol]) {
            prev_end = Some(last);
        }
        line = next_line;
    }
    changed
}

/// The names of the function-like macros the text defines (`#define NAME(` at a line's start,
/// spaces allowed around the `#`).
fn function_like_macros(bytes: &[u8]) -> std::collections::HashSet<String> {
    let mut names = std::collections::HashSet::new();
    for line in bytes.split(|&b| b == b'\n') {
        let t = line.trim_ascii_start();
        let Some(rest) = t.strip_prefix(b"#") else {
            continue;
        };
        let Some(rest) = rest.trim_ascii_start().strip_prefix(b"define") else {
            continue;
        };
        let rest = rest.trim_ascii_start();
        let end = rest
            .iter()
            .position(|&c| !is_ident_byte(c))
            .unwrap_or(rest.len());
        // Function-like only: the `(` follows the name with no space.
        if end > 0 && rest.get(end) == Some(&b'(') {
            if let Ok(name) = std::str::from_utf8(&rest[..end]) {
                names.insert(name.to_string());
            }
        }
    }
    names
}

/// Does the code after `from` continue the expression or declaration before it (a block, an
/// operator, an initializer list)?
fn next_code_continues(bytes: &[u8], from: usize) -> bool {
    let mut i = from;
    while i < bytes.len() && bytes[i].is_ascii_whitespace() {
        i += 1;
    }
    if i >= bytes.len() {
        return false;
    }
    matches!(
        bytes[i],
        b'{' | b':'
            | b','
            | b'.'
            | b'?'
            | b'+'
            | b'*'
            | b'&'
            | b'|'
            | b'='
            | b'<'
            | b'>'
            | b'('
            | b'['
    ) || (bytes[i] == b'-' && bytes.get(i + 1) == Some(&b'>'))
}

/// A whitespace byte for a `;`: right after the invocation on its line, else the first byte of
/// the next code line's indentation (not before a directive).
fn room_for_semicolon(bytes: &[u8], after: usize, eol: usize) -> Option<usize> {
    if after < eol && (bytes[after] == b' ' || bytes[after] == b'\t') {
        return Some(after);
    }
    let mut line = eol + 1;
    while line < bytes.len() {
        let e = memchr::memchr(b'\n', &bytes[line..])
            .map(|x| line + x)
            .unwrap_or(bytes.len());
        let mut s = line;
        while s < e && (bytes[s] == b' ' || bytes[s] == b'\t' || bytes[s] == b'\r') {
            s += 1;
        }
        if s < e {
            if bytes[s] == b'#' || s == line {
                return None;
            }
            return Some(line);
        }
        // A whitespace-only line has room.
        if e > line {
            return Some(line);
        }
        line = e + 1;
    }
    None
}

fn rest_is_blank(rest: &[u8]) -> bool {
    let mut i = 0;
    while i < rest.len() && (rest[i] == b' ' || rest[i] == b'\t' || rest[i] == b'\r') {
        i += 1;
    }
    i == rest.len() || rest[i..].starts_with(b"//")
}

#[cfg(test)]
mod tests {
    use super::super::tests::rewrite;
    use super::*;

    #[test]
    fn bare_macro_calls_get_a_semicolon() {
        let out = rewrite(
            "INSTANTIATE(float)\nINSTANTIATE(half)\nvoid f() {\n  CHECK_INPUT(x)\n  int y = 0;\n  LOOP(i, n) {\n  }\n}\n",
            terminate_macro_calls,
        );
        assert!(out.starts_with("                  \n"), "{out}");
        assert!(out.contains("  CHECK_INPUT(x)\n; int y"), "{out}");
        assert!(out.contains("LOOP(i, n) {"), "{out}");
    }

    /// A name the file defines as a function-like macro is an invocation whatever its case; a
    /// call of a function, or of an object-like macro's name, is not.
    #[test]
    fn invocations_of_macros_the_file_defines() {
        let text = "#define MAKE_kOpt(oname, gtype) \\\ntemplate void k<gtype, oname>(gtype* p); \\\n\nMAKE_kOpt(ADAM, float)\nMAKE_kOpt(LION, half)\n#define Half_T half\nvoid g() {\n  run_kernel(x)\n  Half_T(y)\n}\n";
        let out = rewrite(text, terminate_macro_calls);
        assert!(
            out.contains(&format!(
                "\n{}\n{}\n#define",
                " ".repeat(22),
                " ".repeat(21)
            )),
            "{out}"
        );
        assert!(out.contains("run_kernel(x)\n  Half_T(y)\n}"), "{out}");
    }
}
