//! What every rule is: its check (its metadata, [`RuleMeta`], lives in `gpulint_diagnostics`).

use crate::context::Context;
pub use gpulint_diagnostics::{OptionKind, RuleLang, RuleMeta, RuleOption};
use tree_sitter::Node;

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
    fn check_manifest(&self, _ctx: &mut crate::manifest_context::ManifestContext<'_>) {}

    /// Does this source rule also check manifests and launcher scripts (environment variables
    /// set in a Dockerfile or a shell script)? Manifest rules always do.
    fn reads_manifests(&self) -> bool {
        self.meta().lang == RuleLang::Manifest
    }
}
