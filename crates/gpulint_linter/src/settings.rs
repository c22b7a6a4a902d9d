//! Resolved settings for the files of one configuration: which rules are on, per-file ignores,
//! rule options.

use globset::{Glob, GlobMatcher};
use gpulint_diagnostics::Severity;
pub use gpulint_source::{format_size, parse_size};
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// Default GPU-memory budget: 8 GiB.
pub const DEFAULT_GPU_MEMORY: u64 = 8 << 30;

pub use gpulint_source::MAX_FILE_SIZE;

/// A rule selector: `ALL`, a prefix such as `CU` or `TF00`, or a full code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector(pub(crate) String);

impl Selector {
    pub fn matches(&self, code: &str) -> bool {
        self.0 == "ALL" || code.starts_with(&self.0)
    }

    /// Does it name this exact code (not through a prefix or `ALL`)?
    pub fn is_exact(&self, code: &str) -> bool {
        self.0 == code
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// `per-file-ignores`: files matching the glob ignore the selected rules.
#[derive(Debug, Clone)]
pub struct PerFileIgnore {
    pub pattern: String,
    /// The folder the glob is relative to (that of the configuration file that declares it);
    /// `None`: the settings' root.
    pub base: Option<PathBuf>,
    matcher: GlobMatcher,
    /// Patterns without a `/` also match the file name alone, as in `.gitignore`.
    basename_only: bool,
    pub selectors: Vec<Selector>,
}

impl PerFileIgnore {
    pub fn new(pattern: &str, selectors: Vec<Selector>) -> Result<PerFileIgnore, String> {
        let glob = Glob::new(pattern).map_err(|e| format!("invalid glob `{pattern}`: {e}"))?;
        Ok(PerFileIgnore {
            pattern: pattern.to_string(),
            base: None,
            matcher: glob.compile_matcher(),
            basename_only: !pattern.contains('/'),
            selectors,
        })
    }

    /// The same, relative to `base` instead of the settings' root.
    pub fn relative_to(mut self, base: PathBuf) -> PerFileIgnore {
        self.base = Some(std::fs::canonicalize(&base).unwrap_or(base));
        self
    }

    pub fn matches(&self, relative: &Path) -> bool {
        self.matcher.is_match(relative)
            || (self.basename_only
                && relative
                    .file_name()
                    .is_some_and(|n| self.matcher.is_match(Path::new(n))))
    }
}

/// Everything that decides what a file's check reports.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Codes of the enabled rules, tool rules included.
    pub enabled: BTreeSet<&'static str>,
    /// Codes named exactly by `select`/`extend-select` (GL003 is shown only then or with
    /// `--verbose`).
    pub explicit: BTreeSet<&'static str>,
    pub per_file_ignores: Vec<PerFileIgnore>,
    /// The project's folder (that of the configuration file, else the repository's, else the
    /// checked path's): the bound of searches for launchers and pins, and the folder
    /// per-file-ignore globs without their own are relative to.
    pub root: PathBuf,
    pub rule_options: HashMap<String, toml::Table>,
    pub fail_on: Severity,
    pub gpu_memory: u64,
    /// Where `gpu_memory` came from, for messages.
    pub gpu_memory_origin: BudgetOrigin,
    pub verbose: bool,
    pub max_file_size: u64,
    /// The paths the run checks: files a manifest includes (`-r other.txt`) are read only
    /// below these. Empty: only below the manifest's own directory.
    pub roots: Vec<PathBuf>,
}

impl Settings {
    /// The options of the semantic models, taken from the rules' configuration.
    pub fn semantic_options(&self) -> gpulint_semantic::Options {
        let list = |code: &str, key: &str| -> Vec<String> {
            self.rule_option(code, key)
                .and_then(|v| v.as_array())
                .map(|l| {
                    l.iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        };
        gpulint_semantic::Options {
            loop_macros: list("CU001", "loop-macros"),
            dispatch_macros: list("OP003", "dispatch-macros"),
        }
    }

    pub fn rule_option(&self, code: &str, key: &str) -> Option<&toml::Value> {
        self.rule_options.get(code)?.get(key)
    }

    pub fn is_enabled(&self, code: &str) -> bool {
        self.enabled.contains(code)
    }

    /// Are findings of `code` in the file at `path` ignored by `per-file-ignores`?
    pub fn ignored_for(&self, path: &Path, code: &str) -> bool {
        if self.per_file_ignores.is_empty() {
            return false;
        }
        // The real path, so that a file named from any folder (or through a link to a
        // folder) matches the same globs.
        let absolute = std::fs::canonicalize(path)
            .or_else(|_| std::path::absolute(path))
            .unwrap_or_else(|_| path.to_path_buf());
        self.per_file_ignores.iter().any(|p| {
            if !p.selectors.iter().any(|s| s.matches(code)) {
                return false;
            }
            let base = p.base.as_deref().unwrap_or(&self.root);
            let relative = match absolute.strip_prefix(base) {
                Ok(r) => r,
                // Outside the folder: only a glob without `/` can match (the file name).
                Err(_) => absolute.file_name().map_or(path, Path::new),
            };
            p.matches(relative)
        })
    }

    /// A text that changes whenever a setting that affects findings changes (for the cache).
    pub fn cache_key(&self) -> String {
        let options: std::collections::BTreeMap<_, _> = self
            .rule_options
            .iter()
            .map(|(k, v)| (k.clone(), v.to_string()))
            .collect();
        let ignores: Vec<(String, Option<String>, Vec<&str>)> = self
            .per_file_ignores
            .iter()
            .map(|p| {
                (
                    p.pattern.clone(),
                    p.base.as_ref().map(|b| b.display().to_string()),
                    p.selectors.iter().map(Selector::as_str).collect(),
                )
            })
            .collect();
        format!(
            "{:?}|{:?}|{:?}|{}|{:?}|{}|{:?}|{}|{}",
            self.enabled,
            self.explicit,
            ignores,
            self.root.display(),
            options,
            self.gpu_memory,
            // Messages say where the budget came from.
            self.gpu_memory_origin,
            self.verbose,
            self.max_file_size
        )
    }

    /// Should GL003 (partially parsed) findings be shown?
    pub fn show_parse_errors(&self) -> bool {
        self.is_enabled("GL003") && (self.verbose || self.explicit.contains("GL003"))
    }
}

/// Where the GPU-memory budget came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BudgetOrigin {
    Default,
    /// `--gpu-memory SIZE`.
    Flag,
    /// `gpu-memory` in this configuration file.
    Config(PathBuf),
    /// `--gpu NAME`: the card's display name.
    GpuFlag(String),
    /// `gpu = "NAME"` in this configuration file.
    GpuConfig(String, PathBuf),
}

impl BudgetOrigin {
    /// `the default; set --gpu-memory SIZE or --gpu NAME`, `RTX 3060, from --gpu`.
    pub fn describe(&self) -> String {
        match self {
            BudgetOrigin::Default => {
                "the default; set `--gpu-memory SIZE` or `--gpu NAME`, or `gpu-memory`/`gpu` in gpulint.toml".into()
            }
            BudgetOrigin::Flag => "from `--gpu-memory`".into(),
            BudgetOrigin::Config(p) => format!("from `gpu-memory` in {}", p.display()),
            BudgetOrigin::GpuFlag(name) => format!("{name}, from `--gpu`"),
            BudgetOrigin::GpuConfig(name, p) => format!("{name}, from `gpu` in {}", p.display()),
        }
    }
}
