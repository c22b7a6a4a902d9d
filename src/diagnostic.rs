//! Findings: what a rule reports, and where.

use serde::Serialize;
use std::fmt;

/// How bad a finding is. Ordered: `Info < Warning < Error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Hygiene, or advice that depends on how the program is deployed.
    Info,
    /// Likely OOM, hang or silent corruption at realistic sizes.
    Warning,
    /// Likely hard crash, abort, illegal address, or undefined behaviour.
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }

    pub fn parse(s: &str) -> Option<Severity> {
        match s.to_ascii_lowercase().as_str() {
            "info" => Some(Severity::Info),
            "warning" => Some(Severity::Warning),
            "error" => Some(Severity::Error),
            _ => None,
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A byte range in a source file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Span {
        Span { start, end }
    }

    pub fn of(node: &tree_sitter::Node) -> Span {
        Span {
            start: node.start_byte(),
            end: node.end_byte(),
        }
    }

    pub fn contains(&self, other: Span) -> bool {
        self.start <= other.start && other.end <= self.end
    }
}

/// A secondary place related to a finding (the guard, the first GPU use, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    pub span: Span,
    pub message: String,
}

/// A related place in another file (the Python entry that builds a kernel's source).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Related {
    /// The other file, as shown to the user.
    pub path: String,
    /// 1-based line.
    pub line: usize,
    pub message: String,
}

/// 1-based position of a finding, resolved against its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize)]
pub struct Location {
    pub line: usize,
    pub column: usize,
    pub end_line: usize,
    pub end_column: usize,
}

/// One finding.
#[derive(Debug, Clone)]
pub struct Diagnostic {
    pub code: &'static str,
    pub name: &'static str,
    pub severity: Severity,
    pub message: String,
    /// The exact expression the finding is about.
    pub span: Span,
    /// Message shown under the primary span in the `full` format.
    pub label: Option<String>,
    pub labels: Vec<Label>,
    pub notes: Vec<String>,
    pub help: Option<String>,
    /// Places in other files (rendered as SARIF related locations; the notes say the same).
    pub related: Vec<Related>,
    /// Filled in by the engine once the finding is tied to its file.
    pub location: Location,
    /// Notebook cell (1-based), when the file is a notebook.
    pub cell: Option<usize>,
    /// Stable identity that survives unrelated line shifts (see `fingerprint`).
    pub fingerprint: String,
}

impl Diagnostic {
    /// A finding of `rule` at `span`. Severity defaults to the rule's default.
    pub fn new(
        rule: &'static crate::rule::RuleMeta,
        span: Span,
        message: impl Into<String>,
    ) -> Self {
        Diagnostic {
            code: rule.code,
            name: rule.name,
            severity: rule.severity,
            message: message.into(),
            span,
            label: None,
            labels: Vec::new(),
            notes: Vec::new(),
            help: None,
            related: Vec::new(),
            location: Location::default(),
            cell: None,
            fingerprint: String::new(),
        }
    }

    pub fn severity(mut self, severity: Severity) -> Self {
        self.severity = severity;
        self
    }

    pub fn primary_label(mut self, message: impl Into<String>) -> Self {
        self.label = Some(message.into());
        self
    }

    pub fn with_label(mut self, span: Span, message: impl Into<String>) -> Self {
        self.labels.push(Label {
            span,
            message: message.into(),
        });
        self
    }

    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }

    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }
}

/// All findings of one file, with the text needed to render them.
#[derive(Debug)]
pub struct FileReport {
    /// The path as it is shown to the user.
    pub display_path: String,
    /// The text the findings point into (for a notebook: its code cells joined).
    pub source: std::sync::Arc<crate::source::SourceFile>,
    pub diagnostics: Vec<Diagnostic>,
    /// For a notebook: where its cells sit in `source` and in the `.ipynb` file.
    pub notebook: Option<std::sync::Arc<crate::notebook::Notebook>>,
}

impl FileReport {
    /// The 1-based line of the file on disk that a finding points at: the line itself, or for a
    /// notebook the line of the `.ipynb` file that holds the cell's source line.
    pub fn file_line(&self, d: &Diagnostic) -> usize {
        match &self.notebook {
            Some(nb) => nb
                .cell_at(d.span.start)
                .map(|c| {
                    nb.file_line(
                        c,
                        self.source
                            .line_index(d.span.start.min(self.source.text.len())),
                    )
                })
                .unwrap_or(1),
            None => d.location.line,
        }
    }
}
