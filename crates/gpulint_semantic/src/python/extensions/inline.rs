//! Source text passed inline (`load_inline(cpp_sources=…, cuda_sources=…)`), laid out at the
//! same byte offsets as in the Python file so that findings in it point into the Python file.

use super::{unresolved, ExtensionBuild, Folder, Inline, MAX_DEPTH};
use gpulint_source::Span;
use gpulint_syntax::NodeExt;
use gpulint_syntax::{descendants, named_children};
use tree_sitter::Node;

impl Folder<'_, '_> {
    /// `cuda_sources="..."`, `[SRC_A, SRC_B]`, or a name bound to either.
    pub(super) fn inline_sources(&self, arg: Node<'_>, b: &mut ExtensionBuild) {
        let mut stack = vec![(arg, 0usize)];
        while let Some((n, depth)) = stack.pop() {
            if depth > MAX_DEPTH {
                b.unresolved.push(unresolved(n, "nested too deeply"));
                continue;
            }
            match n.kind_name() {
                "string" | "concatenated_string" => match inline_text(n, self.m.source) {
                    Some(text) => b.inline.push(Inline {
                        span: Span::of(&n),
                        text,
                    }),
                    None => b
                        .unresolved
                        .push(unresolved(n, "the source text is an f-string")),
                },
                "list" | "tuple" | "parenthesized_expression" => {
                    let children: Vec<_> = named_children(n)
                        .filter(|c| c.kind_name() != "comment")
                        .collect();
                    stack.extend(children.into_iter().rev().map(|c| (c, depth + 1)));
                }
                "identifier" => match self.m.value_of_name(n, self.text(n)) {
                    Some(v) if v.kind_name() != "assignment" => stack.push((v, depth + 1)),
                    _ => b.unresolved.push(unresolved(
                        n,
                        format!("`{}` is not a constant", self.text(n)),
                    )),
                },
                _ => b
                    .unresolved
                    .push(unresolved(n, "the source text is not a constant string")),
            }
        }
        b.inline.sort_by_key(|i| i.span.start);
        b.inline.dedup_by_key(|i| i.span);
    }
}

/// The Python file's text with only the content of string `node` kept, at its own offsets, and
/// everything else blanked to spaces (line breaks kept). Escapes become the character they stand
/// for, padded to the escape's length. `None` for an f-string with interpolations.
pub fn inline_text(node: Node<'_>, source: &str) -> Option<String> {
    let mut out: Vec<u8> = source
        .bytes()
        .map(|b| if b == b'\n' || b == b'\r' { b } else { b' ' })
        .collect();
    let parts: Vec<Node<'_>> = if node.kind_name() == "concatenated_string" {
        named_children(node).collect()
    } else {
        vec![node]
    };
    for s in parts {
        if s.kind_name() != "string" {
            return None;
        }
        let raw = s
            .named_child(0)
            .filter(|c| c.kind_name() == "string_start")
            .and_then(|c| source.get(c.byte_range()))
            .is_some_and(|t| t.contains(['r', 'R']));
        for n in descendants(s) {
            match n.kind_name() {
                "interpolation" => return None,
                "string_content" => {
                    let r = n.byte_range();
                    out[r.clone()].copy_from_slice(source.get(r)?.as_bytes());
                }
                _ => {}
            }
        }
        if raw {
            continue;
        }
        for n in descendants(s) {
            if n.kind_name() != "escape_sequence" {
                continue;
            }
            let r = n.byte_range();
            let esc = source.get(r.clone())?;
            let ch: &[u8] = match esc {
                "\\n" => b"\n",
                "\\t" => b"\t",
                "\\\\" => b"\\",
                "\\\"" => b"\"",
                "\\'" => b"'",
                "\\\n" => b"\n",
                _ => continue,
            };
            // Pad before the character so a line break stays the last byte of the escape.
            let pad = esc.len() - ch.len();
            out[r.start..r.start + pad].fill(b' ');
            out[r.start + pad..r.end].copy_from_slice(ch);
        }
    }
    String::from_utf8(out).ok()
}
