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
    let chunks: Vec<Chunk> = reports
        .iter()
        .map(|r| render_file(format, r, color))
        .collect();
    assemble(format, chunks.iter())
}

/// The part of the output that one file's findings make, rendered as soon as the file is
/// checked (on the thread that checked it): the file's text is no longer needed afterwards.
/// [`assemble`] joins the parts of a run, in path order, into the output.
#[derive(Debug, Clone, Default)]
pub struct Chunk {
    text: String,
    /// Findings rendered in `text`.
    findings: usize,
}

/// The part of the output of `report`'s findings in `format`.
pub fn render_file(format: Format, report: &FileReport, color: bool) -> Chunk {
    let reports = [report];
    let text = match format {
        Format::Full => full::render(&reports, color),
        Format::Concise => concise::render(&reports),
        Format::Json => json::items(report),
        Format::Sarif => sarif::results(report),
        Format::Github => github::render(&reports),
        Format::Gitlab => gitlab::items(report),
        Format::Junit => junit::suite(report),
    };
    Chunk {
        text,
        findings: report.diagnostics.len(),
    }
}

/// The output of a run from the parts of its files (in output order).
pub fn assemble<'a>(format: Format, chunks: impl Iterator<Item = &'a Chunk> + Clone) -> String {
    let parts = chunks.filter(|c| c.findings > 0);
    match format {
        Format::Full | Format::Concise | Format::Github => parts.map(|c| c.text.as_str()).collect(),
        Format::Json | Format::Gitlab => json_array(parts),
        Format::Sarif => sarif::document(parts),
        Format::Junit => junit::document(parts),
    }
}

/// A top-level JSON array as `serde_json::to_string_pretty` writes it, of items already
/// written at depth 1 (see [`pretty_items`]), with a line end.
fn json_array<'a>(parts: impl Iterator<Item = &'a Chunk>) -> String {
    let mut out = String::from("[");
    let mut any = false;
    for part in parts {
        out.push_str(if any { ",\n" } else { "\n" });
        out.push_str(&part.text);
        any = true;
    }
    if any {
        out.push('\n');
    }
    out.push_str("]\n");
    out
}

/// `items` pretty-printed as the elements of an array whose elements are `depth` levels of
/// two spaces deep, joined as `serde_json::to_string_pretty` joins them.
fn pretty_items<T: serde::Serialize>(items: impl IntoIterator<Item = T>, depth: usize) -> String {
    let mut out = String::new();
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.push_str(",\n");
        }
        let text = serde_json::to_string_pretty(&item).unwrap_or_default();
        // Strings never hold a raw line end in JSON: every line is a line of the layout.
        for (j, line) in text.split('\n').enumerate() {
            if j > 0 {
                out.push('\n');
            }
            for _ in 0..depth {
                out.push_str("  ");
            }
            out.push_str(line);
        }
    }
    out
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
    use super::{assemble, pretty_items, sarif, visible, Chunk, Format};
    use serde_json::{json, Value};

    #[test]
    fn arrays_joined_from_the_parts_of_files_are_laid_out_as_the_whole_array() {
        let a = vec![
            json!({"a": 1, "b": [1, 2], "c": {}, "d": []}),
            json!({"e": "x\ny", "f": [{"g": null}]}),
        ];
        let b = vec![json!({"h": "i"})];
        let chunks = [
            Chunk {
                text: pretty_items(&a, 1),
                findings: 2,
            },
            Chunk::default(),
            Chunk {
                text: pretty_items(&b, 1),
                findings: 1,
            },
        ];
        let whole: Vec<&Value> = a.iter().chain(&b).collect();
        let expected = serde_json::to_string_pretty(&whole).unwrap() + "\n";
        assert_eq!(assemble(Format::Json, chunks.iter()), expected);
        assert_eq!(assemble(Format::Gitlab, chunks.iter()), expected);
        assert_eq!(assemble(Format::Json, [Chunk::default()].iter()), "[]\n");
    }

    #[test]
    fn sarif_results_from_the_parts_of_files_sit_in_the_log_as_serde_json_lays_it_out() {
        let items = vec![
            json!({"ruleId": "X", "locations": [{"region": {"startLine": 1}}]}),
            json!({"ruleId": "Y", "relatedLocations": []}),
        ];
        let parts = [Chunk {
            text: pretty_items(&items, 4),
            findings: 2,
        }];
        for (log, results) in [
            (sarif::document(parts.iter()), json!(items)),
            (sarif::document([].iter()), json!([])),
        ] {
            let value: Value = serde_json::from_str(&log).unwrap();
            assert_eq!(value["runs"][0]["results"], results);
            assert_eq!(serde_json::to_string_pretty(&value).unwrap() + "\n", log);
        }
    }

    #[test]
    fn control_characters_are_shown_as_question_marks_of_the_same_byte_length() {
        assert_eq!(visible("a\u{1b}[2Jb\tc\r\n"), "a?[2Jb\tc\r\n");
        assert_eq!(visible("x\u{9b}y"), "x??y");
        assert_eq!(visible("x\u{9b}y").len(), "x\u{9b}y".len());
        assert!(matches!(visible("plain"), std::borrow::Cow::Borrowed(_)));
    }
}
