//! JUnit XML: one `<testsuite>` per file with findings, one `<testcase>` with a `<failure>` per
//! finding. A run without findings is one passing test case, so that CI test reports show that
//! gpulint ran.

use super::{file_place, position, slash_path, Chunk};
use gpulint_diagnostics::{Diagnostic, FileReport};
use std::fmt::Write;

/// Escapes text for XML content and attribute values. Characters XML 1.0 forbids (most control
/// characters) become U+FFFD; line breaks and tabs are kept as character references so that
/// attribute values keep them too.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            '\t' => out.push_str("&#9;"),
            '\u{0}'..='\u{1f}' | '\u{fffe}' | '\u{ffff}' => out.push('\u{fffd}'),
            _ => out.push(c),
        }
    }
    out
}

fn details(report: &FileReport, d: &Diagnostic) -> String {
    let mut text = format!(
        "{}: {} [{}] {}",
        position(report, d),
        d.code,
        d.severity,
        d.message
    );
    for note in &d.notes {
        text.push_str(&format!("\nnote: {note}"));
    }
    if let Some(help) = &d.help {
        text.push_str(&format!("\nhelp: {help}"));
    }
    text
}

/// The test suite of one file's findings.
pub fn suite(r: &FileReport) -> String {
    let mut out = String::new();
    if r.diagnostics.is_empty() {
        return out;
    }
    let path = escape(&slash_path(&r.display_path));
    let n = r.diagnostics.len();
    let _ = writeln!(
        out,
        "  <testsuite name=\"{path}\" tests=\"{n}\" failures=\"{n}\" errors=\"0\" skipped=\"0\">"
    );
    for d in &r.diagnostics {
        // The name says where, as the terminal formats do (`cell N:line:col` in a
        // notebook); `line` is the line of the file on disk.
        let at = position(r, d);
        let at = at
            .strip_prefix(&r.display_path)
            .unwrap_or(&at)
            .trim_start_matches(':');
        let _ = writeln!(
            out,
            "    <testcase name=\"{} {} at {}\" classname=\"{path}\" file=\"{path}\" line=\"{}\">",
            d.code,
            d.name,
            escape(at),
            file_place(r, d).line
        );
        let _ = writeln!(
            out,
            "      <failure message=\"{}\" type=\"{}\">{}</failure>",
            escape(&d.message),
            d.severity,
            escape(&details(r, d))
        );
        out.push_str("    </testcase>\n");
    }
    out.push_str("  </testsuite>\n");
    out
}

/// The report of a run from the test suites of its files (see [`suite`]).
pub fn document<'a>(parts: impl Iterator<Item = &'a Chunk> + Clone) -> String {
    let total: usize = parts.clone().map(|c| c.findings).sum();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"gpulint\" tests=\"{}\" failures=\"{total}\" errors=\"0\">",
        total.max(1)
    );
    if total == 0 {
        out.push_str("  <testsuite name=\"gpulint\" tests=\"1\" failures=\"0\" errors=\"0\" skipped=\"0\">\n");
        out.push_str("    <testcase name=\"no findings\" classname=\"gpulint\"/>\n");
        out.push_str("  </testsuite>\n");
    }
    for part in parts {
        out.push_str(&part.text);
    }
    out.push_str("</testsuites>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn escapes_markup_quotes_and_forbidden_characters() {
        assert_eq!(escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&apos;");
        assert_eq!(escape("x\u{0}y\u{1b}z\n"), "x\u{fffd}y\u{fffd}z&#10;");
        assert_eq!(escape("ü→✓"), "ü→✓");
    }
}
