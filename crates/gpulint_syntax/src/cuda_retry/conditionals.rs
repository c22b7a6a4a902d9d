//! `#if` groups whose branches split one construct in two (CUDA vs HIP): only the first branch
//! kept.

use super::scan::{blank, is_ident_byte, last_significant};

/// Blanks `#if`/`#ifdef`/`#ifndef` groups down to their first branch: the directives and every
/// `#elif`/`#else` branch become spaces, the first branch stays as plain code.
pub(super) fn keep_first_if_branch(bytes: &mut [u8]) -> bool {
    let n = bytes.len();
    // One entry per open group: whether the current branch of it is dropped.
    let mut stack: Vec<bool> = Vec::new();
    let mut changed = false;
    let mut line = 0;
    while line < n {
        let mut eol = memchr::memchr(b'\n', &bytes[line..])
            .map(|e| line + e)
            .unwrap_or(n);
        let mut s = line;
        while s < eol && (bytes[s] == b' ' || bytes[s] == b'\t') {
            s += 1;
        }
        let dropped = stack.iter().any(|d| *d);
        if s < eol && bytes[s] == b'#' {
            while eol < n && last_significant(&bytes[line..eol]) == Some(b'\\') {
                eol = memchr::memchr(b'\n', &bytes[eol + 1..])
                    .map(|x| eol + 1 + x)
                    .unwrap_or(n);
            }
            let mut d = s + 1;
            while d < eol && (bytes[d] == b' ' || bytes[d] == b'\t') {
                d += 1;
            }
            let directive = &bytes[d..eol];
            let is = |kw: &[u8]| {
                directive.starts_with(kw)
                    && directive.get(kw.len()).is_none_or(|c| !is_ident_byte(*c))
            };
            if is(b"if") || is(b"ifdef") || is(b"ifndef") {
                stack.push(false);
                blank(bytes, line, eol);
                changed = true;
            } else if is(b"elif") || is(b"else") || is(b"elifdef") || is(b"elifndef") {
                if let Some(top) = stack.last_mut() {
                    *top = true;
                }
                blank(bytes, line, eol);
                changed = true;
            } else if is(b"endif") {
                stack.pop();
                blank(bytes, line, eol);
                changed = true;
            } else if dropped {
                blank(bytes, line, eol);
                changed = true;
            }
        } else if dropped && s < eol {
            blank(bytes, line, eol);
            changed = true;
        }
        line = eol + 1;
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::super::tests::rewrite;
    use super::*;

    #[test]
    fn first_if_branch_is_kept() {
        let out = rewrite(
            "#ifdef USE_HIP\n  foo(a,\n#else\n  foo(b,\n#endif\n  c);\n",
            keep_first_if_branch,
        );
        assert_eq!(
            out.trim_matches(|c: char| c.is_whitespace())
                .replace(' ', ""),
            "foo(a,\n\n\n\nc);"
        );
    }

    #[test]
    fn nested_groups_keep_their_first_branches() {
        let out = rewrite(
            "#if defined(A) && \\\n    defined(B)\nint a;\n#ifdef C\nint c;\n#else\nint d;\n#endif\n#elif E\nint e;\n#else\nint f;\n#endif\nint g;\n",
            keep_first_if_branch,
        );
        let kept: Vec<&str> = out
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        assert_eq!(kept, ["int a;", "int c;", "int g;"]);
    }
}
