//! GitLab Code Quality report: the subset of the Code Climate issue format that GitLab reads
//! (`artifacts:reports:codequality`). Every issue has `description`, `check_name`,
//! `fingerprint`, `severity` and `location.path` + `location.lines.begin`, the fields GitLab
//! requires; `type` and `categories` are kept for Code Climate consumers.

use super::{file_place, slash_path};
use gpulint_diagnostics::{FileReport, Severity};
use serde::Serialize;

#[derive(Serialize)]
struct Issue<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    check_name: &'a str,
    description: String,
    content: Content,
    categories: [&'static str; 1],
    severity: &'static str,
    fingerprint: &'a str,
    location: Location,
}

#[derive(Serialize)]
struct Content {
    body: String,
}

#[derive(Serialize)]
struct Location {
    path: String,
    lines: Lines,
}

#[derive(Serialize)]
struct Lines {
    begin: usize,
    end: usize,
}

/// gpulint severity → GitLab severity (`info`, `minor`, `major`, `critical`, `blocker`).
pub fn severity(s: Severity) -> &'static str {
    match s {
        Severity::Error => "critical",
        Severity::Warning => "major",
        Severity::Info => "info",
    }
}

/// The issues of one file, as elements of the report's array.
pub fn items(r: &FileReport) -> String {
    let issues = r.diagnostics.iter().map(|d| {
        let mut body = String::new();
        for note in &d.notes {
            body.push_str(&format!("note: {note}\n"));
        }
        if let Some(help) = &d.help {
            body.push_str(&format!("help: {help}\n"));
        }
        body.push_str(&format!("See `gpulint explain {}`.", d.code));
        Issue {
            kind: "issue",
            check_name: d.code,
            description: format!("{} [{}]: {}", d.code, d.name, d.message),
            content: Content { body },
            categories: ["Bug Risk"],
            severity: severity(d.severity),
            fingerprint: &d.fingerprint,
            location: {
                let place = file_place(r, d);
                Location {
                    path: slash_path(&r.display_path),
                    lines: Lines {
                        begin: place.line,
                        end: place.end_line,
                    },
                }
            },
        }
    });
    super::pretty_items(issues, 1)
}
