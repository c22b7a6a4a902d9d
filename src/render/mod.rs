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

/// Path with `/` separators, for URIs and annotations.
fn slash_path(p: &str) -> String {
    let p = p.replace('\\', "/");
    p.strip_prefix("./").map(str::to_owned).unwrap_or(p)
}
