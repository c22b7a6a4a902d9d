use crate::diagnostic::{FileReport, Severity};
use codespan_reporting::diagnostic::{Diagnostic as CsDiagnostic, Label, Severity as CsSeverity};
use codespan_reporting::files::SimpleFile;
use codespan_reporting::term::{self, termcolor, Config, Styles, StylesWriter};

pub fn render(reports: &[&FileReport], color: bool) -> String {
    let config = Config::default();
    let styles = Styles::default();
    let mut buffer: Vec<u8> = Vec::new();
    for report in reports {
        let file = SimpleFile::new(report.display_path.as_str(), report.source.text.as_str());
        for d in &report.diagnostics {
            let severity = match d.severity {
                Severity::Error => CsSeverity::Error,
                Severity::Warning => CsSeverity::Warning,
                Severity::Info => CsSeverity::Note,
            };
            let len = report.source.text.len();
            let clamp = |s: usize, e: usize| s.min(len)..e.min(len).max(s.min(len));
            let mut labels = vec![Label::primary((), clamp(d.span.start, d.span.end))
                .with_message(d.label.clone().unwrap_or_default())];
            for l in &d.labels {
                labels.push(Label::secondary((), clamp(l.span.start, l.span.end)).with_message(l.message.clone()));
            }
            let mut notes: Vec<String> = d.notes.iter().map(|n| format!("note: {n}")).collect();
            if let Some(cell) = d.cell {
                notes.insert(0, format!("note: in notebook cell {cell}"));
            }
            if let Some(help) = &d.help {
                notes.push(format!("help: {help}"));
            }
            let diagnostic = CsDiagnostic::new(severity)
                .with_code(format!("{}", d.code))
                .with_message(format!("{} [{}]", d.message, d.name))
                .with_labels(labels)
                .with_notes(notes);
            let result = if color {
                let mut w = StylesWriter::new(termcolor::Ansi::new(&mut buffer), &styles);
                term::emit_to_write_style(&mut w, &config, &file, &diagnostic)
            } else {
                term::emit_to_io_write(&mut buffer, &config, &file, &diagnostic)
            };
            if result.is_err() {
                // A span that no longer fits the text: fall back to one line.
                buffer.extend_from_slice(
                    format!(
                        "{}[{}]: {}\n  --> {}:{}:{}\n\n",
                        d.severity, d.code, d.message, report.display_path, d.location.line, d.location.column
                    )
                    .as_bytes(),
                );
            }
        }
    }
    String::from_utf8_lossy(&buffer).into_owned()
}
