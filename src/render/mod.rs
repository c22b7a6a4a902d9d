//! Output formats. Every format renders the same sorted findings.

mod concise;
mod full;
mod github;
mod gitlab;
pub mod json;
mod junit;
pub mod sarif;

use clap::ValueEnum;
use gpulint_diagnostics::{Diagnostic, FileReport};

/// `--output-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// rustc-style with source snippets, labels, notes and help.
    Full,
    /// `path:line:col: CODE [severity] message`, one line each.
    Concise,
    /// A JSON array of findings (schema in the README).
    Json,
    /// SARIF 2.1.0, for code scanning.
    Sarif,
    /// GitHub Actions workflow commands (annotations).
    Github,
    /// GitLab Code Quality report (JSON), for `artifacts:reports:codequality`.
    Gitlab,
    /// JUnit XML: one test suite per file, one failure per finding.
    Junit,
}

/// Renders `reports` (already sorted by path) in `format`.
pub fn render(format: Format, reports: &[&FileReport], color: bool) -> String {
    match format {
        Format::Full => full::render(reports, color),
        Format::Concise => concise::render(reports),
        Format::Json => json::render(reports),
        Format::Sarif => sarif::render(reports),
        Format::Github => github::render(reports),
        Format::Gitlab => gitlab::render(reports),
        Format::Junit => junit::render(reports),
    }
}

/// All findings in output order, with the report each belongs to.
fn each<'a>(
    reports: &'a [&'a FileReport],
) -> impl Iterator<Item = (&'a FileReport, &'a Diagnostic)> {
    reports
        .iter()
        .flat_map(|r| r.diagnostics.iter().map(move |d| (*r, d)))
}

/// `path:line:col` or, in a notebook, `path:cell N:line L:col`.
fn position(report: &FileReport, d: &Diagnostic) -> String {
    match d.cell {
        Some(cell) => format!(
            "{}:cell {}:{}:{}",
            report.display_path, cell, d.location.line, d.location.column
        ),
        None => format!(
            "{}:{}:{}",
            report.display_path, d.location.line, d.location.column
        ),
    }
}

/// Where a finding is in the file on disk, for the formats that point at lines of files (SARIF,
/// GitHub annotations, GitLab, JUnit): start line, end line, and the columns when they are
/// columns of that line. In a notebook the line is the `.ipynb` line that holds the cell's
/// source line, and there are no columns (the cell's columns are not the JSON line's).
struct FilePlace {
    line: usize,
    end_line: usize,
    columns: Option<(usize, usize)>,
}

fn file_place(report: &FileReport, d: &Diagnostic) -> FilePlace {
    if report.notebook.is_some() {
        let line = report.file_line(d);
        return FilePlace {
            line,
            end_line: line,
            columns: None,
        };
    }
    FilePlace {
        line: d.location.line.max(1),
        end_line: d.location.end_line.max(d.location.line).max(1),
        columns: Some((d.location.column, d.location.end_column)),
    }
}

/// Text from the checked files (source lines, names and paths quoted in messages) made safe
/// for a terminal: control characters other than tab and line ends (an ESC would start an
/// escape sequence) become `?`, one per byte, so byte offsets into the text stay valid.
fn visible(s: &str) -> std::borrow::Cow<'_, str> {
    let control = |c: char| c.is_control() && !matches!(c, '\t' | '\n' | '\r');
    if !s.chars().any(control) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if control(c) {
            out.extend(std::iter::repeat_n('?', c.len_utf8()));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Path with `/` separators, for URIs and annotations.
fn slash_path(p: &str) -> String {
    let p = p.replace('\\', "/");
    p.strip_prefix("./").map(str::to_owned).unwrap_or(p)
}

#[cfg(test)]
mod tests {
    use super::visible;

    #[test]
    fn control_characters_are_shown_as_question_marks_of_the_same_byte_length() {
        assert_eq!(visible("a\u{1b}[2Jb\tc\r\n"), "a?[2Jb\tc\r\n");
        assert_eq!(visible("x\u{9b}y"), "x??y");
        assert_eq!(visible("x\u{9b}y").len(), "x\u{9b}y".len());
        assert!(matches!(visible("plain"), std::borrow::Cow::Borrowed(_)));
    }
}
