//! What every checked file gets after its rules ran: selection and per-file ignores,
//! suppressions and unused ones (GL001), the partial-parse note (GL003), then positions,
//! fingerprints and order.

use super::Engine;
use crate::rules::tool::GL003;
use crate::suppress;
use gpulint_diagnostics::{Diagnostic, Span};
use gpulint_source::SourceFile;
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;
use sha2::{Digest, Sha256};
use std::collections::HashMap;

impl Engine {
    /// What every checked file gets after its rules ran: selection and per-file ignores,
    /// suppressions and unused ones (GL001), the partial-parse note (GL003), positions.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn finish_file(
        &self,
        file: &SourceFile,
        mut diagnostics: Vec<Diagnostic>,
        mut suppressions: Vec<suppress::Suppression>,
        error_spans: &[Span],
        trees: &[tree_sitter::Tree],
        lang: Lang,
        notebook: Option<&gpulint_source::notebook::Notebook>,
    ) -> Vec<Diagnostic> {
        let settings = &self.settings;
        diagnostics
            .retain(|d| settings.is_enabled(d.code) && !settings.ignored_for(&file.path, d.code));
        suppress::apply(&mut diagnostics, &mut suppressions, file);
        if settings.is_enabled("GL001") && !settings.ignored_for(&file.path, "GL001") {
            let unused = suppress::unused(&suppressions, &|code| settings.is_enabled(code));
            // Only a file-level ignore of GL001 silences it (a line suppression cannot vouch
            // for itself).
            let mut file_level: Vec<_> = suppressions
                .into_iter()
                .filter(|s| s.scope == suppress::Scope::File)
                .collect();
            let mut unused = unused;
            suppress::apply(&mut unused, &mut file_level, file);
            diagnostics.extend(unused);
        }
        if !error_spans.is_empty()
            && settings.show_parse_errors()
            && !settings.ignored_for(&file.path, "GL003")
        {
            let first = error_spans[0];
            let (line, _) = file.position(first.start);
            let bytes: usize = error_spans.iter().map(|s| s.end - s.start).sum();
            diagnostics.push(
                Diagnostic::new(
                    &GL003,
                    Span::new(first.start, first.start),
                    format!(
                        "file only partly understood: {} region{} did not parse ({} bytes, first at line {line}); nothing is reported from inside them",
                        error_spans.len(),
                        if error_spans.len() == 1 { "" } else { "s" },
                        bytes
                    ),
                )
                .primary_label("the parser could not read from here"),
            );
        }
        let fingerprint_path = self.fingerprint_path(&file.path, &file.display_path);
        finalize(
            file,
            &fingerprint_path,
            &mut diagnostics,
            trees,
            lang,
            notebook,
        );
        diagnostics
    }

    /// The file's path as fingerprints hash it: relative to the project's folder (the
    /// settings' root), so that a finding keeps its fingerprint, and a baseline its meaning,
    /// whatever folder gpulint runs from; the path as shown for a file outside that folder.
    pub(super) fn fingerprint_path(&self, path: &std::path::Path, display: &str) -> String {
        let absolute = |p: &std::path::Path| -> std::path::PathBuf {
            let joined = if p.is_absolute() {
                p.to_path_buf()
            } else {
                std::env::current_dir().unwrap_or_default().join(p)
            };
            // `./a.py` and `a.py` are one file.
            joined
                .components()
                .filter(|c| !matches!(c, std::path::Component::CurDir))
                .collect()
        };
        let root = absolute(&self.settings.root);
        let file = absolute(path);
        let relative = file
            .strip_prefix(&root)
            .ok()
            .map(|r| r.to_path_buf())
            .or_else(|| {
                // One of them through a link: compare where both really are.
                let (f, r) = (file.canonicalize().ok()?, root.canonicalize().ok()?);
                f.strip_prefix(r).ok().map(|r| r.to_path_buf())
            });
        match relative {
            Some(r) if !r.as_os_str().is_empty() => r
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/"),
            _ => display.to_string(),
        }
    }
}

/// Resolves positions (cell-relative in notebooks) and fingerprints, and sorts.
/// `fingerprint_path` is the file's path as fingerprints hash it (see
/// [`Engine::fingerprint_path`]).
pub fn finalize(
    file: &SourceFile,
    fingerprint_path: &str,
    diagnostics: &mut [Diagnostic],
    trees: &[tree_sitter::Tree],
    lang: Lang,
    notebook: Option<&gpulint_source::notebook::Notebook>,
) {
    let mut seen: HashMap<String, usize> = HashMap::new();
    for d in diagnostics.iter_mut() {
        let (mut line, column) = file.position(d.span.start);
        let (mut end_line, end_column) = file.position(d.span.end);
        if let Some(cell) = notebook.and_then(|nb| nb.cell_at(d.span.start)) {
            line -= cell.first_line;
            end_line = end_line.saturating_sub(cell.first_line).max(line);
            d.cell = Some(cell.number);
        }
        d.location = gpulint_diagnostics::Location {
            line,
            column,
            end_line,
            end_column,
        };
    }
    diagnostics.sort_by(|a, b| {
        (a.cell, a.location, a.code, &a.message).cmp(&(b.cell, b.location, b.code, &b.message))
    });
    for d in diagnostics.iter_mut() {
        let tree = trees
            .iter()
            .find(|t| {
                t.root_node().start_byte() <= d.span.start
                    && d.span.start < t.root_node().end_byte().max(1)
            })
            .or(trees.first());
        let function = tree
            .and_then(|t| enclosing_function_name(t, file, d.span, lang))
            .unwrap_or_default();
        let snippet: String = if file.text.is_empty() {
            String::new()
        } else {
            file.line_text(file.line_index(d.span.start.min(file.text.len())))
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        };
        let mut h = Sha256::new();
        for part in [
            d.code,
            fingerprint_path,
            function.as_str(),
            snippet.as_str(),
        ] {
            h.update(part.as_bytes());
            h.update([0u8]);
        }
        let base = format!("{:x}", h.finalize());
        let n = seen.entry(base.clone()).or_insert(0);
        *n += 1;
        d.fingerprint = format!("{}:{}", &base[..32], n);
    }
}

/// The names of the functions around `span`, outermost first. Found going down from the root
/// with a cursor: `Node::parent` starts again from the root at every step, which makes walking
/// up quadratic in the nesting depth.
fn enclosing_function_name(
    tree: &tree_sitter::Tree,
    file: &SourceFile,
    span: Span,
    lang: Lang,
) -> Option<String> {
    let (start, end) = (span.start, span.end.max(span.start));
    let mut cursor = tree.root_node().walk();
    let mut names = Vec::new();
    loop {
        let n = cursor.node();
        if n.kind_name() == "function_definition" {
            let name = match lang {
                Lang::Python => n
                    .field("name")
                    .and_then(|x| file.text.get(x.start_byte()..x.end_byte())),
                Lang::Cuda => gpulint_semantic::cuda::function_name(n, &file.text),
                Lang::Manifest => None,
            };
            names.push(name.unwrap_or("?").to_string());
        }
        // Into the child that holds the whole span, if one does.
        if cursor.goto_first_child_for_byte(start).is_none() {
            break;
        }
        let c = cursor.node();
        if c.start_byte() > start || c.end_byte() < end {
            break;
        }
    }
    (!names.is_empty()).then(|| names.join("."))
}
