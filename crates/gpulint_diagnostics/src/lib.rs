//! Findings and what is known of a rule without running it: severity, diagnostics with their
//! labels and related places, per-file reports, rule metadata ([`RuleMeta`]) and the
//! [`declare_rule!`] macro that writes it.
//!
//! Knows source files and spans (`gpulint_source`) and language names (`gpulint_syntax`); it
//! must not know how rules run, configuration, or any output format.

use gpulint_syntax::Lang;
use serde::Serialize;
use std::fmt;

pub use gpulint_source::Span;

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
    pub fn new(rule: &'static crate::RuleMeta, span: Span, message: impl Into<String>) -> Self {
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
    pub source: std::sync::Arc<gpulint_source::SourceFile>,
    pub diagnostics: Vec<Diagnostic>,
    /// For a notebook: where its cells sit in `source` and in the `.ipynb` file.
    pub notebook: Option<std::sync::Arc<gpulint_source::notebook::Notebook>>,
}

impl FileReport {
    /// The 1-based line of the file on disk that a finding points at: the line itself, or for a
    /// notebook the line of the `.ipynb` file that holds the cell's source line.
    pub fn file_line(&self, d: &Diagnostic) -> usize {
        match &self.notebook {
            Some(nb) => nb
                .cell_at(d.span.start)
                // A finding about a cell that has no code (one that could not be read) is at
                // the top of the file.
                .filter(|c| d.cell.is_none_or(|n| n == c.number))
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

/// What files a rule reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RuleLang {
    /// A rule over parsed source in one language.
    Source(Lang),
    /// A rule over a dependency manifest (`requirements*.txt`, `pyproject.toml`, conda
    /// environment files, Dockerfiles, the `install_requires` of `setup.py`).
    Manifest,
    /// A finding the engine itself reports, in any file.
    Any,
}

impl RuleLang {
    pub fn as_str(self) -> &'static str {
        match self {
            RuleLang::Source(l) => l.as_str(),
            RuleLang::Manifest => "manifest",
            RuleLang::Any => "any",
        }
    }
}

/// The type of a per-rule configuration option (`[rules.CODE]` in the config file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptionKind {
    /// A non-negative integer.
    Int,
    /// A list of strings.
    StringList,
    /// true / false.
    Bool,
    /// A number in (0, 1].
    Fraction,
}

/// One per-rule option: its key, type, default (as text) and meaning.
#[derive(Debug)]
pub struct RuleOption {
    pub key: &'static str,
    pub kind: OptionKind,
    pub default: &'static str,
    pub doc: &'static str,
}

/// Everything known about a rule without running it.
#[derive(Debug)]
pub struct RuleMeta {
    /// Stable code, e.g. `TF002`.
    pub code: &'static str,
    /// Stable kebab-case name, e.g. `missing-memory-growth`.
    pub name: &'static str,
    pub lang: RuleLang,
    pub severity: Severity,
    /// One line: what the rule reports.
    pub summary: &'static str,
    /// Markdown: What it does / Why is this risky? / Example / Use instead / References.
    pub doc: &'static str,
    /// Node kinds the rule's `check` wants to see.
    pub kinds: &'static [&'static str],
    /// A file can only produce findings of this rule if it contains one of these byte strings.
    /// Empty: every file of the rule's language.
    pub needles: &'static [&'static str],
    /// A second condition of the same kind: when not empty, a file can only produce findings
    /// of this rule if it also contains one of these (a rule about training steps needs a
    /// framework's name and a training call). Files are parsed by `needles` alone; this only
    /// decides whether the rule runs on a parsed file.
    pub also_needles: &'static [&'static str],
    pub options: &'static [RuleOption],
}

impl RuleMeta {
    /// The fields a rule declaration may leave out (only `also_needles` is optional in
    /// practice: [`declare_rule!`] takes the others from the declaration).
    #[doc(hidden)]
    pub const UNSET: RuleMeta = RuleMeta {
        code: "",
        name: "",
        lang: RuleLang::Any,
        severity: Severity::Info,
        summary: "",
        doc: "",
        kinds: &[],
        needles: &[],
        also_needles: &[],
        options: &[],
    };

    /// The documentation with the one leading space of `///` comments removed.
    pub fn doc_markdown(&self) -> String {
        let mut out = String::with_capacity(self.doc.len());
        for line in self.doc.lines() {
            out.push_str(line.strip_prefix(' ').unwrap_or(line));
            out.push('\n');
        }
        out
    }

    /// The name of the page in `lints/` that documents this rule.
    pub fn page_name(&self) -> String {
        format!("{}_{}.md", self.code, self.name)
    }
}

/// Declares a rule's metadata with its documentation written as doc comments:
///
/// ```ignore
/// declare_rule! {
///     /// ## What it does
///     /// ...
///     pub static META = { code: "PY001", name: "unbounded-recursion", ... };
/// }
/// ```
#[macro_export]
macro_rules! declare_rule {
    (
        $(#[doc = $doc:literal])*
        pub static $id:ident = { $($field:ident : $val:expr),* $(,)? };
    ) => {
        $(#[doc = $doc])*
        // A declaration that names every field leaves nothing to `UNSET`.
        #[allow(clippy::needless_update)]
        pub static $id: $crate::RuleMeta = $crate::RuleMeta {
            doc: concat!($($doc, "\n"),*),
            $($field: $val,)*
            ..$crate::RuleMeta::UNSET
        };
    };
}
