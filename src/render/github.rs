use super::{each, file_place, slash_path};
use gpulint_diagnostics::{FileReport, Severity};
use std::fmt::Write;

/// Escaping of workflow-command data (the message).
fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escaping of workflow-command property values.
fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

pub fn render(reports: &[&FileReport]) -> String {
    let mut out = String::new();
    for (r, d) in each(reports) {
        let level = match d.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "notice",
        };
        let mut message = d.message.clone();
        if let Some(help) = &d.help {
            message.push_str("\nhelp: ");
            message.push_str(help);
        }
        // In a notebook, annotate the line of the .ipynb file that holds the cell's line.
        let place = file_place(r, d);
        let at = match place.columns {
            Some((c, e)) => format!(
                "line={},col={c},endLine={},endColumn={e}",
                place.line, place.end_line
            ),
            None => format!("line={},endLine={}", place.line, place.end_line),
        };
        let _ = writeln!(
            out,
            "::{level} file={},{at},title={}::{}",
            escape_property(&slash_path(&r.display_path)),
            escape_property(&format!("{} {}", d.code, d.name)),
            escape_data(&message)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes() {
        assert_eq!(escape_data("a%b\nc"), "a%25b%0Ac");
        assert_eq!(escape_property("a:b,c"), "a%3Ab%2Cc");
    }
}
