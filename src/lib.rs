//! gpulint: finds the causes of GPU training crashes in Python training code, CUDA kernels,
//! their op glue and dependency manifests, before anything runs.
//!
//! This crate is the top of the workspace: the command line and its commands (`check`,
//! `estimate`, `rules`, `explain`, `decode`), the output formats and the baseline. What it
//! runs lives in the libraries under `crates/`, each of which may use only those below it:
//!
//! ```text
//! gpulint_workspace    configuration discovery, one settings loader, file discovery
//! gpulint_linter       settings, rules, registry, the walk, suppressions, engine, link pass
//! gpulint_memory       the GPU-memory cost model and estimator
//! gpulint_semantic     Python and CUDA semantic models
//! gpulint_manifest     dependency manifests, PEP 508, versions, compatibility tables
//! gpulint_diagnostics  severity, diagnostics, rule metadata
//! gpulint_syntax       languages, grammars, parsing, tree helpers
//! gpulint_source       reading and decoding files, line index, notebooks, spans
//! ```
//!
//! The flow of one run: discover files → read → prefilter → parse once → one walk (semantic
//! model + rule dispatch by node kind) → suppressions → the C++/CUDA sources that checked
//! Python files build into extensions, checked in a second pass → sort → render → exit code.

pub mod baseline;
pub mod check;
pub mod cli;
pub mod decode;
pub mod estimate;
pub mod merge;
pub mod output;
pub mod render;
pub mod server;
pub mod shard;

// The libraries, under the names embedders and the tests use.
pub use gpulint_diagnostics as diagnostic;
pub use gpulint_linter::{
    cache, checker, docs, engine, link, noqa_writer, registry, rule, rules, settings, suppress,
};
pub use gpulint_manifest as manifest;
pub use gpulint_memory as memory;
pub use gpulint_semantic as semantic;
pub use gpulint_source::notebook;
pub use gpulint_syntax as lang;
pub use gpulint_workspace::{config, discover};

pub use gpulint_linter::check_source;
