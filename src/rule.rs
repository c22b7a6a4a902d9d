//! What every rule is: its metadata, documentation and check.

use crate::checker::Context;
use crate::diagnostic::Severity;
use crate::lang::Lang;
use tree_sitter::Node;

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
    pub options: &'static [RuleOption],
}

impl RuleMeta {
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

/// A lint rule.
pub trait Rule: Send + Sync {
    fn meta(&self) -> &'static RuleMeta;

    /// Called for every node whose kind is in `meta().kinds`, in document order, after the
    /// semantic model of the file is complete.
    fn check(&self, _node: Node<'_>, _ctx: &mut Context<'_>) {}

    /// Called once per file, after every `check`.
    fn check_file(&self, _ctx: &mut Context<'_>) {}

    /// Called once per dependency manifest or launcher script, for rules of
    /// [`RuleLang::Manifest`] and source rules whose [`Rule::reads_manifests`] is true.
    fn check_manifest(&self, _ctx: &mut crate::manifest::check::ManifestContext<'_>) {}

    /// Does this source rule also check manifests and launcher scripts (environment variables
    /// set in a Dockerfile or a shell script)? Manifest rules always do.
    fn reads_manifests(&self) -> bool {
        self.meta().lang == RuleLang::Manifest
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
        pub static $id: $crate::rule::RuleMeta = $crate::rule::RuleMeta {
            doc: concat!($($doc, "\n"),*),
            $($field: $val),*
        };
    };
}
