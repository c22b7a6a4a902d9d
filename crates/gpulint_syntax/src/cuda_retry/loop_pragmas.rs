//! Object-like macros standing for `#pragma unroll` before a loop (`TCNN_PRAGMA_UNROLL`)
//! blanked.

use super::scan::{blank, is_ident_byte, is_macro_name, last_significant};

/// Blanks an object-like macro standing alone on its line before a loop
/// (`TCNN_PRAGMA_UNROLL` / `UNROLL` → `#pragma unroll`): a bare upper-case name after a `;`,
/// `{` or `}`, with `for`, `while` or `do` starting the next code line.
pub(super) fn blank_loop_pragma_macros(bytes: &mut [u8]) -> bool {
    let mut changed = false;
    let n = bytes.len();
    let mut line = 0;
    let mut prev_end: Option<u8> = None;
    while line < n {
        let eol = memchr::memchr(b'\n', &bytes[line..]).map_or(n, |e| line + e);
        let code = &bytes[line..eol];
        let Some(s) = code.iter().position(|c| !c.is_ascii_whitespace()) else {
            line = eol + 1;
            continue;
        };
        let word_end = code[s..]
            .iter()
            .position(|c| !is_ident_byte(*c))
            .map_or(code.len(), |p| s + p);
        let word = std::str::from_utf8(&code[s..word_end]).unwrap_or("");
        let alone = code[word_end..].iter().all(|c| c.is_ascii_whitespace());
        if alone
            && word.len() >= 2
            && is_macro_name(word)
            && matches!(prev_end, Some(b';' | b'{' | b'}'))
        {
            let next = bytes[(eol + 1).min(n)..]
                .split(|c| *c == b'\n')
                .map(|l| l.trim_ascii_start())
                .find(|l| !l.is_empty());
            let loop_next = next.is_some_and(|l| {
                ["for", "while", "do"].iter().any(|k| {
                    l.starts_with(k.as_bytes()) && l.get(k.len()).is_none_or(|c| !is_ident_byte(*c))
                })
            });
            if loop_next {
                blank(bytes, line + s, line + word_end);
                changed = true;
                line = eol + 1;
                continue;
            }
        }
        if !code[s..].starts_with(b"//") && code[s] != b'#' {
            prev_end = last_significant(code).or(prev_end);
        }
        line = eol + 1;
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::super::tests::rewrite;
    use super::*;
    use crate::{parse, Lang};

    #[test]
    fn pragma_macros_before_loops_are_blanked() {
        let text = "void f() {\n  int a = 0;\n  MY_UNROLL\n  for (int i = 0; i < 4; ++i) {}\n  x = Y\n  ;\n  {\n    PRAGMA\n    while (a) {}\n  }\n}\n";
        let out = rewrite(text, blank_loop_pragma_macros);
        assert!(out.contains("\n           \n  for"), "{out}");
        assert!(out.contains("x = Y\n"), "{out}");
        assert!(!out.contains("PRAGMA"), "{out}");
        let tree = parse(Lang::Cuda, &out).unwrap();
        assert!(
            !tree.root_node().has_error(),
            "{}",
            tree.root_node().to_sexp()
        );
    }
}
