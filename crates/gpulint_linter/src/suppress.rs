//! Suppression comments: `# noqa: CODE`, `# gpulint: ignore[CODE]`, `// NOLINT(CODE)`,
//! `// NOLINTNEXTLINE(CODE)`, `gpulint: ignore-file[CODE]`, and the unused-suppression check.

use crate::registry;
use gpulint_diagnostics::{Diagnostic, Span};
use gpulint_source::SourceFile;
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use tree_sitter::{Node, Tree};

/// What a suppression covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The comment's line, or the whole statement it starts.
    Line,
    /// The next line (and the statement it starts).
    NextLine,
    /// The whole file.
    File,
}

/// One code named in a suppression, and whether it suppressed anything.
#[derive(Debug, Clone)]
pub struct NamedCode {
    /// Upper-cased code, or a rule name mapped to its code.
    pub code: String,
    pub used: bool,
}

/// One suppression comment (a comment can hold several).
#[derive(Debug, Clone)]
pub struct Suppression {
    pub scope: Scope,
    /// Empty: every code.
    pub codes: Vec<NamedCode>,
    /// `gpulint:` syntax (as opposed to the shared `noqa` / `NOLINT` conventions).
    pub own_syntax: bool,
    pub span: Span,
    /// 0-based inclusive line range covered.
    pub lines: (usize, usize),
    pub used_blanket: bool,
}

/// A parsed directive before its coverage is known.
#[derive(Debug, PartialEq, Eq)]
pub struct Directive {
    pub scope: Scope,
    pub codes: Vec<String>,
    pub own_syntax: bool,
}

/// Finds the suppression directives in one comment's text.
pub fn parse_comment(comment: &str, lang: Lang) -> Vec<Directive> {
    // A reason may follow ` -- `: it is ignored here.
    let body = comment.split(" -- ").next().unwrap_or(comment);
    let mut out = Vec::new();
    let mut rest = body;
    while let Some(at) = rest.find("gpulint:") {
        let after = rest[at + "gpulint:".len()..].trim_start();
        let (scope, tail) = if let Some(t) = after.strip_prefix("ignore-file") {
            (Scope::File, t)
        } else if let Some(t) = after.strip_prefix("ignore") {
            (Scope::Line, t)
        } else {
            rest = &rest[at + 1..];
            continue;
        };
        let (codes, tail) = bracketed(tail, '[', ']');
        out.push(Directive {
            scope,
            codes,
            own_syntax: true,
        });
        rest = tail;
    }
    match lang {
        Lang::Python | Lang::Manifest => {
            let lower = body.to_ascii_lowercase();
            if let Some(at) = lower.find("noqa") {
                let before_ok = at == 0 || body[..at].trim_end().ends_with('#');
                if before_ok {
                    let tail = &body[at + 4..];
                    let codes = match tail.trim_start().strip_prefix(':') {
                        Some(list) => code_list(list),
                        None => Vec::new(),
                    };
                    out.push(Directive {
                        scope: Scope::Line,
                        codes,
                        own_syntax: false,
                    });
                }
            }
        }
        Lang::Cuda => {
            let mut rest = body;
            while let Some(at) = rest.find("NOLINT") {
                let after = &rest[at + "NOLINT".len()..];
                let (scope, tail) = if let Some(t) = after.strip_prefix("NEXTLINE") {
                    (Scope::NextLine, t)
                } else if after.starts_with("BEGIN") || after.starts_with("END") {
                    rest = after;
                    continue;
                } else {
                    (Scope::Line, after)
                };
                let (codes, tail) = if tail.starts_with('(') {
                    bracketed(tail, '(', ')')
                } else {
                    (Vec::new(), tail)
                };
                out.push(Directive {
                    scope,
                    codes,
                    own_syntax: false,
                });
                rest = tail;
            }
        }
    }
    out
}

/// `[A, B]` → codes, and the text after the closing bracket. No bracket: no codes.
fn bracketed(s: &str, open: char, close: char) -> (Vec<String>, &str) {
    let t = s.trim_start();
    if let Some(inner) = t.strip_prefix(open) {
        if let Some(end) = inner.find(close) {
            return (code_list(&inner[..end]), &inner[end + 1..]);
        }
    }
    (Vec::new(), s)
}

/// `E501, TF001 some text` → `["E501", "TF001"]`: codes or rule names separated by commas or
/// spaces, up to the first word that is neither.
fn code_list(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in s.split(|c: char| c == ',' || c.is_whitespace()) {
        if word.is_empty() {
            continue;
        }
        let is_code = word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'*' || b == b'.');
        if !is_code {
            break;
        }
        out.push(word.to_string());
    }
    out
}

/// Node kinds that only group statements; a suppression never covers one of them whole.
const CONTAINERS: &[&str] = &[
    "module",
    "block",
    "translation_unit",
    "compound_statement",
    "declaration_list",
    "field_declaration_list",
    "preproc_if",
    "preproc_ifdef",
    "preproc_else",
    "preproc_elif",
    "linkage_specification",
    "namespace_definition",
    "template_declaration",
];

/// The 0-based inclusive line range a suppression on `line` covers: the line, or the statement
/// that starts on it (only the header of a compound statement).
fn coverage(tree: &Tree, file: &SourceFile, line: usize) -> (usize, usize) {
    let (start, end) = file.line_range(line);
    let Some(offset) = file.text[start..end].find(|c: char| !c.is_whitespace()) else {
        return (line, line);
    };
    let b = start + offset;
    let root = tree.root_node();
    let mut best: Option<Node<'_>> = None;
    // The node at `b`, then its ancestors innermost first (found once going down from the
    // root: `Node::parent` descends from the root on every call).
    let leaf = root.descendant_for_byte_range(b, b + 1);
    let up = leaf
        .map(|l| gpulint_syntax::ancestors_of(root, l))
        .unwrap_or_default();
    for n in leaf.into_iter().chain(up.into_iter().rev()) {
        if n.start_byte() < b {
            break;
        }
        if n.start_byte() == b && !CONTAINERS.contains(&n.kind_name()) && n.kind_name() != "comment"
        {
            best = Some(n);
        }
    }
    let Some(stmt) = best else {
        return (line, line);
    };
    let last = file.line_index(stmt.end_byte().saturating_sub(1).max(stmt.start_byte()));
    let mut header_end = last;
    let mut inner = stmt;
    for _ in 0..4 {
        match inner.field("definition") {
            Some(d) => inner = d,
            None => break,
        }
    }
    for field in ["body", "consequence"] {
        if let Some(body) = inner.field(field) {
            let body_line = file.line_index(body.start_byte());
            header_end = if body_line > line {
                body_line - 1
            } else {
                line
            };
            break;
        }
    }
    (line, header_end.max(line))
}

/// Collects the suppressions of a parsed file from its comment nodes.
pub fn collect(
    trees: &[Tree],
    file: &SourceFile,
    lang: Lang,
    comments: &[Span],
) -> Vec<Suppression> {
    collect_with(file, lang, comments, &|span, line| {
        let tree = trees
            .iter()
            .find(|t| {
                t.root_node().start_byte() <= span.start && span.start < t.root_node().end_byte()
            })
            .or(trees.first());
        match tree {
            Some(tree) => coverage(tree, file, line),
            None => (line, line),
        }
    })
}

/// Collects the suppressions of a file from its comments; `cover` gives the 0-based line range
/// that a suppression in the comment at `span`, on `line`, covers (the statement it starts).
pub fn collect_with(
    file: &SourceFile,
    lang: Lang,
    comments: &[Span],
    cover: &dyn Fn(Span, usize) -> (usize, usize),
) -> Vec<Suppression> {
    let mut out = Vec::new();
    for &span in comments {
        let text = &file.text[span.start..span.end];
        if !(text.contains("gpulint:")
            || text.contains("noqa")
            || text.contains("NOQA")
            || text.contains("NOLINT"))
        {
            continue;
        }
        for d in parse_comment(text, lang) {
            let line = file.line_index(span.start);
            let lines = match d.scope {
                Scope::Line => cover(span, line),
                Scope::NextLine if line + 1 < file.line_count() => cover(span, line + 1),
                Scope::NextLine => (line + 1, line + 1),
                Scope::File => (0, usize::MAX),
            };
            let codes = d
                .codes
                .iter()
                .map(|c| NamedCode {
                    code: registry::find(c)
                        .map(|m| m.code.to_string())
                        .unwrap_or_else(|| c.to_ascii_uppercase()),
                    used: false,
                })
                .collect();
            out.push(Suppression {
                scope: d.scope,
                codes,
                own_syntax: d.own_syntax,
                span,
                lines,
                used_blanket: false,
            });
        }
    }
    out
}

/// Drops the diagnostics that a suppression covers, marking the suppressions used.
pub fn apply(
    diagnostics: &mut Vec<Diagnostic>,
    suppressions: &mut [Suppression],
    file: &SourceFile,
) {
    if suppressions.is_empty() {
        return;
    }
    // A sweep over the findings in line order, keeping the suppressions whose range has begun
    // and not yet ended: linear in the findings and suppressions (plus the matches), where
    // asking every suppression about every finding grows with their product.
    let lines: Vec<usize> = diagnostics
        .iter()
        .map(|d| file.line_index(d.span.start))
        .collect();
    let range = |s: &Suppression| match s.scope {
        Scope::File => (0, usize::MAX),
        _ => s.lines,
    };
    let mut order: Vec<usize> = (0..diagnostics.len()).collect();
    order.sort_by_key(|&i| lines[i]);
    let mut by_start: Vec<usize> = (0..suppressions.len()).collect();
    by_start.sort_by_key(|&i| range(&suppressions[i]).0);
    let mut next = 0;
    let mut active: BinaryHeap<Reverse<(usize, usize)>> = BinaryHeap::new();
    let mut suppressed = vec![false; diagnostics.len()];
    for i in order {
        let line = lines[i];
        while next < by_start.len() && range(&suppressions[by_start[next]]).0 <= line {
            let s = by_start[next];
            active.push(Reverse((range(&suppressions[s]).1, s)));
            next += 1;
        }
        while active.peek().is_some_and(|Reverse((end, _))| *end < line) {
            active.pop();
        }
        let code = diagnostics[i].code;
        for &Reverse((_, s)) in active.iter() {
            let s = &mut suppressions[s];
            if s.codes.is_empty() {
                s.used_blanket = true;
                suppressed[i] = true;
            }
            for c in s.codes.iter_mut() {
                if c.code == code
                    || (c.code.ends_with('*') && code.starts_with(c.code.trim_end_matches('*')))
                {
                    c.used = true;
                    suppressed[i] = true;
                }
            }
        }
    }
    let mut i = 0;
    diagnostics.retain(|_| {
        i += 1;
        !suppressed[i - 1]
    });
}

/// GL001 findings for suppressions that suppressed nothing. Only codes that gpulint knows and
/// that are enabled (a disabled rule cannot prove a suppression unused), blanket suppressions
/// written in gpulint's own syntax, and unknown codes in gpulint's own syntax are reported.
pub fn unused(suppressions: &[Suppression], enabled: &dyn Fn(&str) -> bool) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for s in suppressions {
        if s.codes.is_empty() {
            if s.own_syntax && !s.used_blanket {
                out.push(
                    Diagnostic::new(
                        &crate::rules::tool::GL001,
                        s.span,
                        "unused suppression: no finding here to ignore",
                    )
                    .primary_label("suppresses nothing")
                    .help("remove the comment"),
                );
            }
            continue;
        }
        let mut unknown = Vec::new();
        let mut stale = Vec::new();
        for c in &s.codes {
            match registry::find(&c.code) {
                Some(m) if !c.used && enabled(m.code) && m.code != "GL001" => stale.push(m.code),
                Some(_) => {}
                None if s.own_syntax => unknown.push(c.code.clone()),
                None => {}
            }
        }
        if !stale.is_empty() {
            let what = stale.join(", ");
            let scope = match s.scope {
                Scope::File => "in this file",
                Scope::NextLine => "on the next line",
                Scope::Line => "on this line",
            };
            out.push(
                Diagnostic::new(
                    &crate::rules::tool::GL001,
                    s.span,
                    format!("unused suppression: no {what} finding {scope}"),
                )
                .primary_label(format!("suppresses nothing {scope}"))
                .help(format!("remove {what} from the comment")),
            );
        }
        if !unknown.is_empty() {
            out.push(
                Diagnostic::new(
                    &crate::rules::tool::GL001,
                    s.span,
                    format!(
                        "suppression names unknown code{} {}",
                        if unknown.len() > 1 { "s" } else { "" },
                        unknown.join(", ")
                    ),
                )
                .primary_label("not a gpulint rule")
                .help("see `gpulint rules` for the codes"),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codes(d: &Directive) -> Vec<&str> {
        d.codes.iter().map(String::as_str).collect()
    }

    #[test]
    fn python_forms() {
        let d = parse_comment("# noqa: TF001, PY001 -- intended", Lang::Python);
        assert_eq!(d.len(), 1);
        assert_eq!(codes(&d[0]), ["TF001", "PY001"]);
        let d = parse_comment("# noqa", Lang::Python);
        assert!(d[0].codes.is_empty());
        let d = parse_comment("# gpulint: ignore[CU001,TF002] -- reason", Lang::Python);
        assert_eq!(codes(&d[0]), ["CU001", "TF002"]);
        assert!(d[0].own_syntax);
        let d = parse_comment("# gpulint: ignore-file[TF002]", Lang::Python);
        assert_eq!(d[0].scope, Scope::File);
        assert!(parse_comment("# not a noqa-like thing: snoqa", Lang::Python).is_empty());
    }

    #[test]
    fn cuda_forms() {
        let d = parse_comment("// NOLINT(CU001)", Lang::Cuda);
        assert_eq!((d[0].scope, codes(&d[0])), (Scope::Line, vec!["CU001"]));
        let d = parse_comment("// NOLINTNEXTLINE(CU002, CU001)", Lang::Cuda);
        assert_eq!(
            (d[0].scope, codes(&d[0])),
            (Scope::NextLine, vec!["CU002", "CU001"])
        );
        let d = parse_comment("// NOLINT", Lang::Cuda);
        assert!(d[0].codes.is_empty());
        assert!(parse_comment("// NOLINTBEGIN", Lang::Cuda).is_empty());
    }
}
