//! What a rule sees while it checks a dependency manifest or launcher script, and the shared
//! pieces of the MF rules' messages.

use crate::settings::Settings;
use gpulint_diagnostics::RuleMeta;
use gpulint_diagnostics::{Diagnostic, Severity, Span};
use gpulint_manifest::env::Env;
use gpulint_manifest::{Manifest, Requirement};
use gpulint_source::SourceFile;

/// What a manifest rule sees.
pub struct ManifestContext<'a> {
    pub file: &'a SourceFile,
    pub manifest: &'a Manifest,
    /// The environments the manifest describes (see [`env::environments`]).
    pub envs: &'a [Env<'a>],
    pub settings: &'a Settings,
    pub(crate) rule: &'static RuleMeta,
    pub(crate) diagnostics: &'a mut Vec<Diagnostic>,
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
