//! Findings as LSP diagnostics: severities, ranges in UTF-16 positions, the rule's page as
//! `codeDescription`, secondary labels and the files that build a kernel as related
//! information; a notebook's findings go to the cell that holds them.

use super::documents::{as_read, LineIndex, NotebookDoc};
use crate::render::sarif::help_uri;
use gpulint_diagnostics::{Diagnostic, FileReport, Severity};
use gpulint_linter::registry;
use lsp_types::{
    CodeDescription, DiagnosticRelatedInformation, DiagnosticSeverity, Location, NumberOrString,
    Position, Range, Url,
};
use std::path::Path;

/// The URL of a rule's page.
pub fn rule_url(code: &str) -> Option<Url> {
    let meta = registry::find(code)?;
    Url::parse(&help_uri(&meta.page_name())).ok()
}

fn severity(s: Severity) -> DiagnosticSeverity {
    match s {
        Severity::Error => DiagnosticSeverity::ERROR,
        Severity::Warning => DiagnosticSeverity::WARNING,
        Severity::Info => DiagnosticSeverity::INFORMATION,
    }
}

/// One finding as an LSP diagnostic: the message, then its notes and help, as the `full`
/// format prints them.
fn diagnostic(
    d: &Diagnostic,
    range: Range,
    mut related: Vec<DiagnosticRelatedInformation>,
    cwd: &Path,
) -> lsp_types::Diagnostic {
    let mut message = d.message.clone();
    for note in &d.notes {
        message.push_str("\nnote: ");
        message.push_str(note);
    }
    if let Some(help) = &d.help {
        message.push_str("\nhelp: ");
        message.push_str(help);
    }
    for r in &d.related {
        let path = Path::new(&r.path);
        let absolute = if path.is_absolute() {
            path.to_path_buf()
        } else {
            cwd.join(path)
        };
        if let Ok(uri) = Url::from_file_path(&absolute) {
            let at = Position::new(r.line.saturating_sub(1) as u32, 0);
            related.push(DiagnosticRelatedInformation {
                location: Location::new(uri, Range::new(at, at)),
                message: r.message.clone(),
            });
        }
    }
    lsp_types::Diagnostic {
        range,
        severity: Some(severity(d.severity)),
        code: Some(NumberOrString::String(d.code.to_string())),
        code_description: rule_url(d.code).map(|href| CodeDescription { href }),
        source: Some("gpulint".into()),
        message,
        related_information: (!related.is_empty()).then_some(related),
        tags: None,
        data: None,
    }
}

/// The findings of a text document (`raw`: its text as the editor has it).
pub fn text_document(
    uri: &Url,
    raw: &str,
    report: &FileReport,
    cwd: &Path,
) -> Vec<lsp_types::Diagnostic> {
    if report.notebook.is_some() {
        return ipynb_text(raw, report, cwd);
    }
    let bom = raw.starts_with('\u{feff}');
    let index = LineIndex::new(&report.source.text, bom);
    let range = |start: usize, end: usize| Range::new(index.position(start), index.position(end));
    report
        .diagnostics
        .iter()
        .map(|d| {
            let related = d
                .labels
                .iter()
                .map(|l| DiagnosticRelatedInformation {
                    location: Location::new(uri.clone(), range(l.span.start, l.span.end)),
                    message: l.message.clone(),
                })
                .collect();
            diagnostic(d, range(d.span.start, d.span.end), related, cwd)
        })
        .collect()
}

/// A notebook opened as a text document (its JSON): a finding covers the line of the `.ipynb`
/// file that holds its source line.
fn ipynb_text(raw: &str, report: &FileReport, cwd: &Path) -> Vec<lsp_types::Diagnostic> {
    let (text, bom) = as_read(raw);
    let index = LineIndex::new(&text, bom);
    report
        .diagnostics
        .iter()
        .map(|d| {
            let line = report.file_line(d).saturating_sub(1);
            let range = match index.line_range(line) {
                Some((start, end)) => {
                    let indent = text[start..end].len() - text[start..end].trim_start().len();
                    Range::new(index.position(start + indent), index.position(end))
                }
                None => Range::default(),
            };
            diagnostic(d, range, Vec::new(), cwd)
        })
        .collect()
}

/// The findings of a notebook document, by cell: every Python cell gets its list (empty ones
/// clear what was there).
pub fn notebook(
    nb: &NotebookDoc,
    report: &FileReport,
    cwd: &Path,
) -> Vec<(Url, Vec<lsp_types::Diagnostic>)> {
    let mut out: Vec<(Url, Vec<lsp_types::Diagnostic>)> = nb
        .cells
        .iter()
        .filter(|c| c.python)
        .map(|c| (c.uri.clone(), Vec::new()))
        .collect();
    let Some(map) = &report.notebook else {
        // Not read as a notebook at all (GL002): on the first cell.
        if let Some(first) = out.first_mut() {
            first.1 = report
                .diagnostics
                .iter()
                .map(|d| diagnostic(d, Range::default(), Vec::new(), cwd))
                .collect();
        }
        return out;
    };
    // The cell text as read, and where the cell starts in the engine's source.
    let place = |byte: usize| -> Option<(usize, usize)> {
        let cell = map.cell_at(byte)?;
        Some((
            cell.number,
            byte.saturating_sub(cell.start).min(cell.end - cell.start),
        ))
    };
    let texts: Vec<(String, bool)> = nb.cells.iter().map(|c| as_read(&c.text)).collect();
    let position = |number: usize, offset: usize| -> Option<(Url, Position)> {
        let i = number.checked_sub(1)?;
        let (text, bom) = texts.get(i)?;
        Some((
            nb.cells[i].uri.clone(),
            LineIndex::new(text, *bom).position(offset),
        ))
    };
    for d in &report.diagnostics {
        let Some((number, start)) = place(d.span.start) else {
            continue;
        };
        let Some((uri, start)) = position(number, start) else {
            continue;
        };
        let end = place(d.span.end)
            .filter(|(n, _)| *n == number)
            .and_then(|(n, e)| position(n, e))
            .map_or(start, |(_, e)| e);
        let related = d
            .labels
            .iter()
            .filter_map(|l| {
                let (n, s) = place(l.span.start)?;
                let (u, s) = position(n, s)?;
                let e = place(l.span.end)
                    .filter(|(m, _)| *m == n)
                    .and_then(|(m, e)| position(m, e))
                    .map_or(s, |(_, e)| e);
                Some(DiagnosticRelatedInformation {
                    location: Location::new(u, Range::new(s, e)),
                    message: l.message.clone(),
                })
            })
            .collect();
        if let Some(slot) = out.iter_mut().find(|(u, _)| *u == uri) {
            slot.1
                .push(diagnostic(d, Range::new(start, end), related, cwd));
        }
    }
    out
}

/// A configuration that cannot be read: one error at the top of the file, naming it.
pub fn config_error(message: &str) -> lsp_types::Diagnostic {
    lsp_types::Diagnostic {
        range: Range::default(),
        severity: Some(DiagnosticSeverity::ERROR),
        source: Some("gpulint".into()),
        message: format!("gpulint: {message}"),
        ..Default::default()
    }
}
