//! The linter: settings, the rule trait and every rule, the registry, the one walk that builds
//! the semantic model and dispatches rules by node kind, suppressions and the `# noqa` writer,
//! the engine (read → prefilter → parse → check → finalize, with the cache), and the pass that
//! checks the C++/CUDA sources a Python file builds into an extension.
//!
//! The only crate that knows rules. It must not know configuration files, how files are
//! discovered, the command line or output formats.

pub mod cache;
pub mod checker;
pub mod context;
pub mod docs;
pub mod engine;
pub mod link;
pub mod manifest_context;
pub mod noqa_writer;
pub mod registry;
pub mod rule;
pub mod rules;
pub mod run;
pub mod selection;
pub mod settings;
pub mod suppress;

pub use gpulint_diagnostics::declare_rule;

use std::path::Path;

/// Checks `text` as the file at `path` with `settings`, and returns its findings, sorted.
/// The entry point for tests and embedders.
pub fn check_source(
    path: &Path,
    text: &str,
    settings: &settings::Settings,
) -> Vec<gpulint_diagnostics::Diagnostic> {
    let Some(lang) = gpulint_syntax::Lang::of_path(path) else {
        return Vec::new();
    };
    let engine = engine::Engine::new(settings.clone());
    engine
        .check_text(path, path.display().to_string(), text.to_string(), lang)
        .report
        .diagnostics
}
