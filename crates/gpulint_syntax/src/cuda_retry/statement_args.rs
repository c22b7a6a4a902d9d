//! Statements passed as a macro argument (`DISPATCH(t, "f", launch(x);)`) turned into a comma
//! expression the grammar reads.

use super::scan::{code_bytes, is_ident_byte, is_macro_name, skip_literal_or_comment};

/// Turns statements passed as a macro argument (`DISPATCH(t, "f", launch(x, y);)`,
/// `MACRO(a; b;)`) into an expression the grammar reads: each `;` directly inside the macro's
/// parentheses becomes `,` (a comma expression), and the last one, right before `)`, trades
/// places with it (`f(x);)` → `f(x));`). A `;` inside braces (a lambda body) or nested
/// parentheses stays.
pub(super) fn statement_arguments(bytes: &mut [u8]) -> bool {
    let mut changed = false;
    let n = bytes.len();
    let mut i = 0;
    while i < n {
        if let Some(next) = skip_literal_or_comment(bytes, i) {
            i = next;
            continue;
        }
        let c = bytes[i];
        if !(c.is_ascii_uppercase() || c == b'_') || (i > 0 && is_ident_byte(bytes[i - 1])) {
            i += 1;
            continue;
        }
        let mut w = i;
        while w < n && is_ident_byte(bytes[w]) {
            w += 1;
        }
        let word = std::str::from_utf8(&bytes[i..w]).unwrap_or("");
        if w < n && bytes[w] == b'(' && word.len() >= 2 && is_macro_name(word) {
            if let Some((close, semis)) = statement_separators(bytes, w) {
                // A declaration among the statements (`using T = …; T* p = …;`) cannot become
                // part of a comma expression: leave the invocation as it is.
                let mut start = w + 1;
                let declares = semis.iter().any(|&at| {
                    let segment = &bytes[start..at];
                    start = at + 1;
                    looks_like_declaration(segment)
                });
                if declares {
                    i = close + 1;
                    continue;
                }
                for at in semis {
                    let between = &bytes[at + 1..close];
                    if between.iter().all(|b| *b == b' ' || *b == b'\t') {
                        // `x; )` → `x) ;`: the statement now ends after the invocation.
                        bytes[at] = b')';
                        bytes[at + 1..close].fill(b' ');
                        bytes[close] = b';';
                    } else if between.iter().all(|b| b.is_ascii_whitespace()) {
                        bytes[at] = b' ';
                    } else {
                        bytes[at] = b',';
                    }
                    changed = true;
                }
                i = close + 1;
                continue;
            }
        }
        i = w.max(i + 1);
    }
    changed
}

/// Does this statement start like a declaration: `using …`, `typedef …`, or a type (a name
/// with `::` and template arguments) followed by a declarator name and `=`, `[`, `{` or its end?
fn looks_like_declaration(segment: &[u8]) -> bool {
    let text = String::from_utf8_lossy(segment);
    let text = text.trim_start_matches(|c: char| c.is_whitespace() || c == ',');
    let first_word: String = text
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    if matches!(
        first_word.as_str(),
        "using" | "typedef" | "auto" | "const" | "constexpr" | "static" | "unsigned" | "signed"
    ) {
        return true;
    }
    if first_word.is_empty()
        || matches!(
            first_word.as_str(),
            "return" | "delete" | "throw" | "goto" | "case" | "else" | "new" | "co_return"
        )
    {
        return false;
    }
    // Skip the rest of the type: `::name`, `<…>` (balanced), `*`, `&`, spaces.
    let b = text.as_bytes();
    let mut i = first_word.len();
    let mut angle = 0usize;
    let mut gap = false;
    while i < b.len() {
        match b[i] {
            b'<' => angle += 1,
            b'>' if angle > 0 => angle -= 1,
            _ if angle > 0 => {}
            b':' if b.get(i + 1) == Some(&b':') => i += 1,
            c if c.is_ascii_alphanumeric() || c == b'_' => {
                if gap {
                    break;
                }
            }
            b'*' | b'&' | b' ' | b'\t' | b'\n' | b'\r' => gap = true,
            _ => return false,
        }
        i += 1;
    }
    if !gap || i >= b.len() {
        return false;
    }
    let name_end = b[i..]
        .iter()
        .position(|c| !(c.is_ascii_alphanumeric() || *c == b'_'))
        .map_or(b.len(), |p| i + p);
    let rest = text[name_end..].trim_start();
    rest.is_empty() || rest.starts_with(['=', '[', '{']) && !rest.starts_with("==")
}

/// For the `(` at `open`: its matching `)` and the `;` found directly inside (not in braces or
/// nested parentheses), when there is at least one. `None` past 64 KiB or when unbalanced.
fn statement_separators(bytes: &[u8], open: usize) -> Option<(usize, Vec<usize>)> {
    let mut parens = 0usize;
    let mut braces = 0usize;
    let mut semis = Vec::new();
    for (i, b) in code_bytes(bytes, open) {
        match b {
            b'(' => parens += 1,
            b')' => {
                parens = parens.checked_sub(1)?;
                if parens == 0 {
                    return (!semis.is_empty() && braces == 0).then_some((i, semis));
                }
            }
            b'{' => braces += 1,
            b'}' => braces = braces.checked_sub(1)?,
            b';' if parens == 1 && braces == 0 => semis.push(i),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::semicolons::terminate_macro_calls;
    use super::super::tests::rewrite;
    use super::*;
    use crate::{parse, Lang};

    #[test]
    fn statements_passed_to_macros_become_expressions() {
        let text = "void f() {\n  DISPATCH(t, \"f\",\n    launch<2>(a, b, Functor<s>(), x);)\n  TWO(g(1); h(\"a;b\"); )\n  AT_DISPATCH(t, \"k\", [&] { k<<<1, 2>>>(p); int y = 0; });\n}\n";
        let out = rewrite(text, statement_arguments);
        assert!(out.contains("Functor<s>(), x));"), "{out}");
        assert!(out.contains("TWO(g(1), h(\"a;b\")) ;"), "{out}");
        assert!(out.contains("k<<<1, 2>>>(p); int y = 0; });"), "{out}");
        let declares = "void f() {\n  D(t, using acc = float; acc* p = q; k<<<1, 2>>>(p););\n}\n";
        assert_eq!(rewrite(declares, statement_arguments), declares);
        for (segment, expected) in [
            ("using a = b", true),
            (" int* p = q", true),
            ("at::acc_type<float, true> x", true),
            ("launch<2>(a, b)", false),
            ("x = y", false),
            ("return x", false),
            ("a == b", false),
        ] {
            assert_eq!(
                looks_like_declaration(segment.as_bytes()),
                expected,
                "{segment}"
            );
        }
        let mut bytes = out.into_bytes();
        terminate_macro_calls(&mut bytes);
        let tree = parse(Lang::Cuda, std::str::from_utf8(&bytes).unwrap()).unwrap();
        assert!(
            !tree.root_node().has_error(),
            "{}\n{}",
            String::from_utf8_lossy(&bytes),
            tree.root_node().to_sexp()
        );
    }
}
