//! Requests answered from what is open and what was published: quick fixes that suppress a
//! finding (`# noqa: CODE` in Python and manifests, `// NOLINT(CODE)` in C/C++/CUDA), and a
//! hover with the rule's summary and a link to its page.

use super::convert::rule_url;
use super::documents::{as_read, Documents, LineIndex};
use gpulint_linter::registry;
use gpulint_syntax::Lang;
use lsp_types::{
    CodeAction, CodeActionKind, CodeActionOrCommand, CodeActionParams, Hover, HoverContents,
    HoverParams, MarkupContent, MarkupKind, NumberOrString, Position, Range, TextEdit, Url,
    WorkspaceEdit,
};
use std::collections::HashMap;

/// The quick fixes for the gpulint diagnostics the client sends in the request's context.
pub fn code_actions(docs: &Documents, params: CodeActionParams) -> Vec<CodeActionOrCommand> {
    let uri = params.text_document.uri;
    let Some((raw, path, lang)) = docs.text_of(&uri) else {
        return Vec::new();
    };
    if gpulint_syntax::is_notebook(&path) {
        // An `.ipynb` opened as JSON: the comment would go inside a JSON string.
        return Vec::new();
    }
    let (text, bom) = as_read(&raw);
    let index = LineIndex::new(&text, bom);
    let mut out = Vec::new();
    for d in &params.context.diagnostics {
        let Some(NumberOrString::String(code)) = &d.code else {
            continue;
        };
        if d.source.as_deref() != Some("gpulint") || code.starts_with("GL") {
            continue;
        }
        let Some(meta) = registry::find(code) else {
            continue;
        };
        let line = d.range.start.line as usize;
        let Some((at, insert)) =
            gpulint_linter::noqa_writer::suppression_insert(&path, &text, lang, line, &[meta.code])
        else {
            continue;
        };
        let position = index.position(at);
        let comment = match lang {
            Lang::Cuda => format!("// NOLINT({})", meta.code),
            Lang::Python | Lang::Manifest => format!("# noqa: {}", meta.code),
        };
        let edit = TextEdit::new(Range::new(position, position), insert);
        out.push(CodeActionOrCommand::CodeAction(CodeAction {
            title: format!("Suppress {} ({}) with `{comment}`", meta.code, meta.name),
            kind: Some(CodeActionKind::QUICKFIX),
            diagnostics: Some(vec![d.clone()]),
            edit: Some(WorkspaceEdit {
                changes: Some(HashMap::from([(uri.clone(), vec![edit])])),
                ..WorkspaceEdit::default()
            }),
            ..CodeAction::default()
        }));
    }
    out
}

/// The rules of the findings under the cursor: code, name, severity, summary and page.
pub fn hover(docs: &Documents, params: HoverParams) -> Option<Hover> {
    let uri: &Url = &params.text_document_position_params.text_document.uri;
    let at = params.text_document_position_params.position;
    let found = docs.published.get(uri)?;
    let inside =
        |r: &Range, p: Position| r.start <= p && (p < r.end || r.start == r.end && p == r.start);
    let mut parts: Vec<String> = Vec::new();
    let mut range: Option<Range> = None;
    for d in found.iter().filter(|d| inside(&d.range, at)) {
        let Some(NumberOrString::String(code)) = &d.code else {
            continue;
        };
        let Some(meta) = registry::find(code) else {
            continue;
        };
        let mut part = format!(
            "**{}** `{}` ({}): {}",
            meta.code, meta.name, meta.severity, meta.summary
        );
        if let Some(url) = rule_url(meta.code) {
            part.push_str(&format!("\n\n[Rule documentation]({url})"));
        }
        if !parts.contains(&part) {
            parts.push(part);
        }
        range.get_or_insert(d.range);
    }
    if parts.is_empty() {
        return None;
    }
    Some(Hover {
        contents: HoverContents::Markup(MarkupContent {
            kind: MarkupKind::Markdown,
            value: parts.join("\n\n---\n\n"),
        }),
        range,
    })
}
