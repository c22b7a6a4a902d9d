//! The one settings loader of every command: the configuration found (or named, or none with
//! `--isolated`), then the settings built from it and the command line's overrides.

use crate::config::{self, ConfigError, LoadedConfig};
use gpulint_diagnostics::Severity;
use gpulint_linter::settings::{PerFileIgnore, Selector, Settings};
use std::path::{Path, PathBuf};

/// What the command line says about the settings; empty or `None`: the configuration's, or
/// the default.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--select`: replaces the configured selection (and its ignores).
    pub select: Vec<String>,
    pub extend_select: Vec<String>,
    pub ignore: Vec<String>,
    pub fail_on: Option<Severity>,
    pub gpu_memory: Option<u64>,
    pub gpu: Option<String>,
    pub verbose: bool,
    /// The paths the run checks (none: `.`).
    pub paths: Vec<PathBuf>,
}

/// The configuration a command runs with: none with `isolated`, the file `explicit` names, or
/// the one found from `cwd` upward.
pub fn find_config(
    explicit: Option<&Path>,
    isolated: bool,
    cwd: &Path,
) -> Result<Option<LoadedConfig>, ConfigError> {
    if isolated {
        Ok(None)
    } else if let Some(path) = explicit {
        config::load(path).map(Some)
    } else {
        config::discover(cwd)
    }
}

fn parse_selectors(list: &[String], what: &str) -> Result<Vec<Selector>, String> {
    list.iter()
        .map(|s| Selector::parse(s).map_err(|e| format!("{what}: {e}")))
        .collect()
}

/// The settings of a run: the configuration file's, with the command line's overrides (the
/// command line wins).
pub fn settings(
    args: &Overrides,
    loaded: Option<&LoadedConfig>,
    cwd: &Path,
) -> Result<Settings, String> {
    let file = loaded.map(|l| l.config.clone()).unwrap_or_default();
    let select = if !args.select.is_empty() {
        parse_selectors(&args.select, "--select")?
    } else if let Some(s) = &file.select {
        parse_selectors(s, "select")?
    } else {
        vec![Selector::parse("ALL")?]
    };
    let mut extend = parse_selectors(
        file.extend_select.as_deref().unwrap_or(&[]),
        "extend-select",
    )?;
    extend.extend(parse_selectors(&args.extend_select, "--extend-select")?);
    // An explicit --select replaces the configured selection, ignores included.
    let mut ignore = if args.select.is_empty() {
        parse_selectors(file.ignore.as_deref().unwrap_or(&[]), "ignore")?
    } else {
        Vec::new()
    };
    ignore.extend(parse_selectors(&args.ignore, "--ignore")?);

    let mut settings = Settings::with_selection(&select, &extend, &ignore);
    settings.root = loaded.map(|l| l.dir()).unwrap_or_else(|| cwd.to_path_buf());
    if let Ok(root) = std::fs::canonicalize(&settings.root) {
        settings.root = root;
    }
    for (glob, codes) in file.per_file_ignores.iter().flatten() {
        settings.per_file_ignores.push(PerFileIgnore::new(
            glob,
            parse_selectors(codes, "per-file-ignores")?,
        )?);
    }
    settings.rule_options = file.rules.clone().unwrap_or_default().into_iter().collect();
    settings.fail_on = match args.fail_on {
        Some(s) => s,
        None => file
            .fail_on
            .as_deref()
            .and_then(Severity::parse)
            .unwrap_or(Severity::Warning),
    };
    (settings.gpu_memory, settings.gpu_memory_origin) =
        config::resolve_budget(args.gpu_memory, args.gpu.as_deref(), loaded)?;
    settings.verbose = args.verbose;
    // Manifests read the files they include only below the checked paths.
    let paths = if args.paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        args.paths.clone()
    };
    settings.roots = paths
        .iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .map(|p| {
            if p.is_file() {
                p.parent().map(Path::to_path_buf).unwrap_or(p)
            } else {
                p
            }
        })
        .collect();
    Ok(settings)
}
