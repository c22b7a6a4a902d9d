use gpulint_diagnostics::FileReport;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// One finding in `--output-format json`. The field set is a documented contract; `gpulint
/// merge` reads it back and writes it out again through this same type.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct JsonFinding<'a> {
    pub code: Cow<'a, str>,
    pub name: Cow<'a, str>,
    pub severity: Cow<'a, str>,
    pub message: Cow<'a, str>,
    pub path: Cow<'a, str>,
    pub line: usize,
    pub column: usize,
    pub end_line: usize,
    pub end_column: usize,
    pub help: Option<Cow<'a, str>>,
    pub notes: Cow<'a, [String]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell: Option<usize>,
    /// The SARIF `partialFingerprints["gpulint/v1"]`, as recorded by `--write-baseline`.
    pub fingerprint: Cow<'a, str>,
}

/// The findings of one file, as elements of the array of `--output-format json`.
pub fn items(r: &FileReport) -> String {
    let items = r.diagnostics.iter().map(|d| JsonFinding {
        code: Cow::Borrowed(d.code),
        name: Cow::Borrowed(d.name),
        severity: Cow::Borrowed(d.severity.as_str()),
        message: Cow::Borrowed(&d.message),
        path: Cow::Borrowed(&r.display_path),
        line: d.location.line,
        column: d.location.column,
        end_line: d.location.end_line,
        end_column: d.location.end_column,
        help: d.help.as_deref().map(Cow::Borrowed),
        notes: Cow::Borrowed(&d.notes),
        cell: d.cell,
        fingerprint: Cow::Borrowed(&d.fingerprint),
    });
    super::pretty_items(items, 1)
}

/// The JSON report of these findings, as `--output-format json` prints it.
pub fn write(items: &[JsonFinding<'_>]) -> String {
    let mut s = serde_json::to_string_pretty(items).unwrap_or_else(|_| "[]".into());
    s.push('\n');
    s
}
