use super::visible;
use codespan_reporting::diagnostic::{Diagnostic as CsDiagnostic, Label, Severity as CsSeverity};
use codespan_reporting::files::SimpleFile;
use codespan_reporting::term::{self, termcolor, Config, Styles, StylesWriter};
use gpulint_diagnostics::{FileReport, Severity};

pub fn render(reports: &[&FileReport], color: bool) -> String {
    let config = Config::default();
    let styles = Styles::default();
    let mut buffer: Vec<u8> = Vec::new();
    for report in reports {
        // Nothing from the checked files reaches the terminal unescaped.
        let source = visible(&report.source.text);
        let display_path = visible(&report.display_path).into_owned();
        let whole = SimpleFile::new(display_path.clone(), source.as_ref());
        for d in &report.diagnostics {
            // In a notebook, show the cell on its own with cell-relative line numbers.
            let cell = report
                .notebook
                .as_ref()
                .and_then(|nb| d.cell.and_then(|n| nb.cells.iter().find(|c| c.number == n)));
            let (base, text) = match cell {
                Some(c) => (c.start, &source[c.start..c.end]),
                None => (0, source.as_ref()),
            };
            let cell_file;
            let file = match cell {
                Some(c) => {
                    cell_file = SimpleFile::new(format!("{display_path}:cell {}", c.number), text);
                    &cell_file
                }
                None => &whole,
            };
            let severity = match d.severity {
                Severity::Error => CsSeverity::Error,
                Severity::Warning => CsSeverity::Warning,
                Severity::Info => CsSeverity::Note,
            };
            let len = text.len();
            let inside = |s: usize| s >= base && s <= base + len;
            let clamp = |s: usize, e: usize| {
                let (s, e) = (
                    s.saturating_sub(base).min(len),
                    e.saturating_sub(base).min(len),
                );
                s..e.max(s)
            };
            let mut labels = vec![Label::primary((), clamp(d.span.start, d.span.end))
                .with_message(visible(d.label.as_deref().unwrap_or_default()).into_owned())];
            let mut notes: Vec<String> = Vec::new();
            for l in &d.labels {
                if inside(l.span.start) {
                    labels.push(
                        Label::secondary((), clamp(l.span.start, l.span.end))
                            .with_message(visible(&l.message).into_owned()),
                    );
                } else if let Some(nb) = &report.notebook {
                    // A related place in another cell: name it.
                    if let Some(c) = nb.cell_at(l.span.start) {
                        let line = report.source.line_index(l.span.start) - c.first_line + 1;
                        notes.push(format!(
                            "note: {} (cell {}, line {line})",
                            visible(&l.message),
                            c.number
                        ));
                    }
                }
            }
            notes.extend(d.notes.iter().map(|n| format!("note: {}", visible(n))));
            if let Some(help) = &d.help {
                notes.push(format!("help: {}", visible(help)));
            }
            let diagnostic = CsDiagnostic::new(severity)
                .with_code(d.code.to_string())
                .with_message(format!("{} [{}]", visible(&d.message), d.name))
                .with_labels(labels)
                .with_notes(notes);
            let result = if color {
                let mut w = StylesWriter::new(termcolor::Ansi::new(&mut buffer), &styles);
                term::emit_to_write_style(&mut w, &config, file, &diagnostic)
            } else {
                term::emit_to_io_write(&mut buffer, &config, file, &diagnostic)
            };
            if result.is_err() {
                // A span that no longer fits the text: fall back to one line.
                buffer.extend_from_slice(
                    format!(
                        "{}[{}]: {}\n  --> {}:{}:{}\n\n",
                        d.severity,
                        d.code,
                        visible(&d.message),
                        display_path,
                        d.location.line,
                        d.location.column
                    )
                    .as_bytes(),
                );
            }
        }
    }
    String::from_utf8_lossy(&buffer).into_owned()
}
