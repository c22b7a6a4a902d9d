//! The workspace: configuration files (`gpulint.toml`, `.gpulint.toml`, `[tool.gpulint]`)
//! found per file (the nearest in its folder or above) and validated, `extend` chains
//! followed, the settings every command runs with built from them and the command line's
//! overrides (one resolver, memoised per folder), and the files a run checks, discovered
//! under the given paths.
//!
//! Knows the linter's settings and rule registry; it must not know output formats or the
//! command line's types.

pub mod config;
pub mod discover;
pub mod settings;
