use super::each;
use gpulint_diagnostics::FileReport;
use serde::Serialize;

/// One finding in `--output-format json`. The field set is a documented contract.
#[derive(Serialize)]
struct JsonFinding<'a> {
    code: &'a str,
    name: &'a str,
    severity: &'a str,
    message: &'a str,
    path: &'a str,
    line: usize,
    column: usize,
    end_line: usize,
    end_column: usize,
    help: Option<&'a str>,
    notes: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    cell: Option<usize>,
}

pub fn render(reports: &[&FileReport]) -> String {
    let items: Vec<JsonFinding<'_>> = each(reports)
        .map(|(r, d)| JsonFinding {
            code: d.code,
            name: d.name,
            severity: d.severity.as_str(),
            message: &d.message,
            path: &r.display_path,
            line: d.location.line,
            column: d.location.column,
            end_line: d.location.end_line,
            end_column: d.location.end_column,
            help: d.help.as_deref(),
            notes: &d.notes,
            cell: d.cell,
        })
        .collect();
    let mut s = serde_json::to_string_pretty(&items).unwrap_or_else(|_| "[]".into());
    s.push('\n');
    s
}
