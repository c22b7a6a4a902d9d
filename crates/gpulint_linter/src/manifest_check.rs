//! Running the MF rules over a parsed manifest: the context they see and the shared pieces
//! of their messages.

use crate::rule::{Rule, RuleMeta};
use crate::settings::Settings;
use gpulint_diagnostics::{Diagnostic, Severity, Span};
use gpulint_manifest::env::{self, Env};
use gpulint_manifest::{Manifest, Requirement};
use gpulint_source::SourceFile;

/// What a manifest rule sees.
pub struct ManifestContext<'a> {
    pub file: &'a SourceFile,
    pub manifest: &'a Manifest,
    /// The environments the manifest describes (see [`env::environments`]).
    pub envs: &'a [Env<'a>],
    pub settings: &'a Settings,
    rule: &'static RuleMeta,
    diagnostics: &'a mut Vec<Diagnostic>,
}

impl ManifestContext<'_> {
    pub fn rule(&self) -> &'static RuleMeta {
        self.rule
    }

    /// A new finding of the current rule at `span`.
    pub fn diagnostic(&self, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic::new(self.rule, span, message)
    }

    pub fn report(&mut self, diagnostic: Diagnostic) {
        self.diagnostics.push(diagnostic);
    }
}

/// Runs `rules` over a manifest and returns their findings, without duplicates (the same
/// finding from several environments of one file is reported once).
pub fn run(
    rules: &[&'static dyn Rule],
    file: &SourceFile,
    manifest: &Manifest,
    settings: &Settings,
) -> Vec<Diagnostic> {
    let envs = env::environments(manifest);
    let mut out = Vec::new();
    for rule in rules {
        let mut ctx = ManifestContext {
            file,
            manifest,
            envs: &envs,
            settings,
            rule: rule.meta(),
            diagnostics: &mut out,
        };
        rule.check_manifest(&mut ctx);
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|d| seen.insert((d.code, d.span, d.message.clone())));
    out
}

/// `error` when every release the specifier admits is affected, `warning` when only some are.
pub fn certainty(all: bool) -> Severity {
    if all {
        Severity::Error
    } else {
        Severity::Warning
    }
}

/// Adds a secondary label on a related requirement when it sits elsewhere in the checked file;
/// a note naming it when it is in an included file.
pub fn related(d: Diagnostic, primary: Span, r: &Requirement, what: &str) -> Diagnostic {
    if r.span == primary {
        return d;
    }
    match &r.origin {
        None => d.with_label(r.span, what.to_string()),
        Some(o) => d
            .with_label(r.span, format!("{what} (in {o})"))
            .note(format!("{what}: `{}` at {o}", r.text)),
    }
}

/// The note that cites a table row and its source.
pub fn row_note(description: &str, source: &str) -> String {
    let url = source.split_whitespace().next().unwrap_or(source);
    format!("tested configuration: {description} (source: {url})")
}
