//! gpulint: finds the causes of GPU training crashes in Python training code, CUDA kernels,
//! their op glue and dependency manifests, before anything runs.
//!
//! The flow of one run: discover files → read → prefilter → parse once → one walk (semantic
//! model + rule dispatch by node kind) → suppressions → the C++/CUDA sources that checked
//! Python files build into extensions, checked in a second pass ([`link`]) → sort → render →
//! exit code.

pub mod baseline;
pub mod cache;
pub mod checker;
pub mod cli;
pub mod config;
pub mod decode;
pub mod diagnostic;
pub mod discover;
pub mod docs;
pub mod engine;
pub mod lang;
pub mod link;
pub mod manifest;
pub mod memory;
pub mod noqa_writer;
pub mod notebook;
pub mod registry;
pub mod render;
pub mod rule;
pub mod rules;
pub mod semantic;
pub mod settings;
pub mod source;
pub mod suppress;

use std::path::Path;

/// Checks `text` as the file at `path` with `settings`, and returns its findings, sorted.
/// The entry point for tests and embedders.
pub fn check_source(
    path: &Path,
    text: &str,
    settings: &settings::Settings,
) -> Vec<diagnostic::Diagnostic> {
    let Some(lang) = lang::Lang::of_path(path) else {
        return Vec::new();
    };
    let engine = engine::Engine::new(settings.clone());
    engine
        .check_text(path, path.display().to_string(), text.to_string(), lang)
        .report
        .diagnostics
}
