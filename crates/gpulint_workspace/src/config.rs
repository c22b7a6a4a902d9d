//! Configuration files: `gpulint.toml`, `.gpulint.toml`, or `[tool.gpulint]` in
//! `pyproject.toml`. The nearest one in a file's folder or its ancestors applies to the file;
//! one may build on another (`extend = "../base.toml"`, relative to the file that says it).
//! Every key and value is checked: a mistake is an error naming the file, the key and what was
//! expected, never ignored.
//!
//! A `pyproject.toml` that is not valid TOML is a configuration only if it has a
//! `[tool.gpulint]` table (then it is an error); otherwise it is no configuration, and the
//! check of the file itself reports it (GL002), wherever it is.

use gpulint_diagnostics::OptionKind;
use gpulint_diagnostics::Severity;
use gpulint_linter::registry;
use gpulint_linter::settings::{parse_size, Selector};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// The names of configuration files, in the order they are looked for in a folder.
pub const CONFIG_NAMES: &[&str] = &["gpulint.toml", ".gpulint.toml", "pyproject.toml"];

/// The keys of a configuration file.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ConfigFile {
    /// Another configuration file this one builds on, relative to this file: its settings
    /// apply, and this file's keys replace them (`extend-select`, `extend-exclude`,
    /// `per-file-ignores` and the options of `rules` add to them).
    pub extend: Option<String>,
    /// Rules to enable (codes, prefixes, names, or `ALL`); replaces the default (`ALL`).
    pub select: Option<Vec<String>>,
    /// Rules to enable on top of `select`.
    pub extend_select: Option<Vec<String>>,
    /// Rules to disable.
    pub ignore: Option<Vec<String>>,
    /// Globs of paths not to walk into; replaces the default exclusions.
    pub exclude: Option<Vec<String>>,
    /// Globs of paths not to walk into, on top of `exclude`.
    pub extend_exclude: Option<Vec<String>>,
    /// Glob → rules ignored in the files it matches.
    pub per_file_ignores: Option<BTreeMap<String, Vec<String>>>,
    /// Lowest severity that makes the run fail: `error`, `warning` (default) or `info`.
    pub fail_on: Option<String>,
    /// GPU-memory budget for the memory rules: `"8GiB"`, `"24GB"`, `"8192MiB"`.
    pub gpu_memory: Option<toml::Value>,
    /// GPU model for the budget, from the built-in table: `"rtx3060"`, `"a100-80gb"`.
    pub gpu: Option<String>,
    /// Per-rule options: `[rules.PY001] recursion-limit = 3000`.
    pub rules: Option<BTreeMap<String, toml::Table>>,
}

/// A glob and the folder it is relative to (that of the file that declares it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Based<T> {
    pub base: PathBuf,
    pub value: T,
}

/// A configuration file found (or named) and parsed, with the files it extends merged in.
#[derive(Debug, Clone)]
pub struct LoadedConfig {
    /// The file found or named.
    pub path: PathBuf,
    /// The settings of the whole chain; the path-like ones are below, with their folders.
    pub config: ConfigFile,
    /// The files read: this one, then the one it extends, and so on.
    pub chain: Vec<PathBuf>,
    /// `exclude` (the defaults when no file of the chain sets it), with its folder.
    pub exclude: Option<Based<Vec<String>>>,
    /// `extend-exclude` of every file of the chain.
    pub extend_exclude: Vec<Based<String>>,
    /// `per-file-ignores` of every file of the chain: glob → rules.
    pub per_file_ignores: Vec<Based<(String, Vec<String>)>>,
    /// The file that set `gpu-memory` or `gpu`.
    pub budget_from: PathBuf,
}

impl LoadedConfig {
    /// The folder the file is in: relative globs of the file are relative to it, and it is
    /// the root of the project the file configures.
    pub fn dir(&self) -> PathBuf {
        parent_dir(&self.path)
    }

    /// One file on its own.
    fn single(path: &Path, config: ConfigFile) -> LoadedConfig {
        let base = parent_dir(path);
        let based = |value| Based {
            base: base.clone(),
            value,
        };
        LoadedConfig {
            path: path.to_path_buf(),
            exclude: config.exclude.clone().map(based),
            extend_exclude: config
                .extend_exclude
                .iter()
                .flatten()
                .map(|g| Based {
                    base: base.clone(),
                    value: g.clone(),
                })
                .collect(),
            per_file_ignores: config
                .per_file_ignores
                .iter()
                .flatten()
                .map(|(g, codes)| Based {
                    base: base.clone(),
                    value: (g.clone(), codes.clone()),
                })
                .collect(),
            budget_from: path.to_path_buf(),
            chain: vec![path.to_path_buf()],
            config,
        }
    }

    /// `self` built on `base` (the file it extends).
    fn over(self, base: LoadedConfig) -> LoadedConfig {
        let (own, old) = (self.config, base.config);
        let reset = own.select.is_some();
        // A `select` starts the selection again: what the extended file added or removed
        // applied to the selection it replaces.
        let joined = |old: Option<Vec<String>>, new: Option<Vec<String>>| {
            if reset {
                return new;
            }
            match (old, new) {
                (Some(mut a), Some(b)) => {
                    a.extend(b);
                    Some(a)
                }
                (a, b) => b.or(a),
            }
        };
        let budget_own = own.gpu.is_some() || own.gpu_memory.is_some();
        let mut rules = old.rules.unwrap_or_default();
        for (code, options) in own.rules.unwrap_or_default() {
            rules.entry(code).or_default().extend(options);
        }
        let mut extend_exclude = base.extend_exclude;
        extend_exclude.extend(self.extend_exclude);
        let mut per_file_ignores = base.per_file_ignores;
        per_file_ignores.extend(self.per_file_ignores);
        let mut chain = self.chain;
        chain.extend(base.chain);
        LoadedConfig {
            path: self.path,
            config: ConfigFile {
                extend: own.extend,
                extend_select: joined(old.extend_select, own.extend_select),
                ignore: joined(old.ignore, own.ignore),
                select: own.select.or(old.select),
                exclude: own.exclude.or(old.exclude),
                extend_exclude: None,
                per_file_ignores: None,
                fail_on: own.fail_on.or(old.fail_on),
                gpu_memory: if budget_own {
                    own.gpu_memory
                } else {
                    old.gpu_memory
                },
                gpu: if budget_own { own.gpu } else { old.gpu },
                rules: (!rules.is_empty()).then_some(rules),
            },
            chain,
            exclude: self.exclude.or(base.exclude),
            extend_exclude,
            per_file_ignores,
            budget_from: if budget_own {
                self.budget_from
            } else {
                base.budget_from
            },
        }
    }
}

fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// A configuration error: always exit 2.
#[derive(Debug, Clone)]
pub struct ConfigError {
    pub path: PathBuf,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid configuration in {}: {}",
            self.path.display(),
            self.message
        )
    }
}

fn err(path: &Path, message: impl Into<String>) -> ConfigError {
    ConfigError {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// The configuration file of the folder `dir` itself (not of its ancestors), if it has one.
pub fn in_dir(dir: &Path) -> Result<Option<LoadedConfig>, ConfigError> {
    for name in CONFIG_NAMES {
        let p = dir.join(name);
        if !p.is_file() {
            continue;
        }
        let found = if *name == "pyproject.toml" {
            pyproject_table(&p)?
        } else {
            Some(read_config(&p)?)
        };
        if let Some(config) = found {
            return complete(&p, config, &mut Vec::new()).map(Some);
        }
    }
    Ok(None)
}

/// Finds the configuration file for `start` (a directory): the nearest, searching upwards.
pub fn discover(start: &Path) -> Result<Option<LoadedConfig>, ConfigError> {
    let start = std::fs::canonicalize(start).unwrap_or_else(|_| start.to_path_buf());
    for dir in start.ancestors() {
        if let Some(c) = in_dir(dir)? {
            return Ok(Some(c));
        }
    }
    Ok(None)
}

/// Loads a configuration file given explicitly (`--config`).
pub fn load(path: &Path) -> Result<LoadedConfig, ConfigError> {
    load_chain(path, &mut Vec::new())
}

/// Loads the file at `path` and what it extends; `stack` holds the files that extend it.
fn load_chain(path: &Path, stack: &mut Vec<PathBuf>) -> Result<LoadedConfig, ConfigError> {
    let config = if path.file_name().is_some_and(|n| n == "pyproject.toml") {
        pyproject_table(path)?.ok_or_else(|| err(path, "no [tool.gpulint] table"))?
    } else {
        read_config(path)?
    };
    complete(path, config, stack)
}

/// The file at `path` with `config`, built on the file it extends (if any).
fn complete(
    path: &Path,
    config: ConfigFile,
    stack: &mut Vec<PathBuf>,
) -> Result<LoadedConfig, ConfigError> {
    let id = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    if let Some(at) = stack.iter().position(|p| *p == id) {
        let cycle: Vec<String> = stack[at..]
            .iter()
            .chain([&id])
            .map(|p| p.display().to_string())
            .collect();
        return Err(err(
            path,
            format!(
                "`extend` makes a cycle: {} (a file cannot build on itself)",
                cycle.join(" -> ")
            ),
        ));
    }
    let own = LoadedConfig::single(path, config);
    let Some(target) = own.config.extend.clone() else {
        return Ok(own);
    };
    let target = own.dir().join(&target);
    if !target.is_file() {
        return Err(err(
            path,
            format!(
                "`extend`: {} is not a file (the path is relative to this file)",
                target.display()
            ),
        ));
    }
    stack.push(id);
    let base = load_chain(&target, stack);
    stack.pop();
    Ok(own.over(base?))
}

/// Reads and validates a `gpulint.toml` or `.gpulint.toml`.
fn read_config(path: &Path) -> Result<ConfigFile, ConfigError> {
    let text =
        std::fs::read_to_string(path).map_err(|e| err(path, format!("cannot read it: {e}")))?;
    let config: ConfigFile = toml::from_str(&text).map_err(|e| err(path, describe(&e)))?;
    validate(path, &config)?;
    Ok(config)
}

/// Does the text of a `pyproject.toml` that TOML cannot read declare gpulint's table
/// (`[tool.gpulint]`, `[tool.gpulint.rules…]`, or `gpulint…` keys under `[tool]`)?
fn declares_gpulint(text: &str) -> bool {
    let mut in_tool = false;
    text.lines().any(|line| {
        let l: String = line.chars().filter(|c| !c.is_whitespace()).collect();
        let named = |rest: &str| rest.is_empty() || rest.starts_with(['.', ']', '='].as_slice());
        if l.starts_with('[') {
            in_tool = l == "[tool]";
            return l.strip_prefix("[tool.gpulint").is_some_and(named);
        }
        l.strip_prefix("tool.gpulint").is_some_and(named)
            || (in_tool && l.strip_prefix("gpulint").is_some_and(named))
    })
}

/// The `[tool.gpulint]` table of a `pyproject.toml`, validated; `None` when it has none (or
/// is not valid TOML and does not declare one: not a configuration, see the module docs).
fn pyproject_table(path: &Path) -> Result<Option<ConfigFile>, ConfigError> {
    let text =
        std::fs::read_to_string(path).map_err(|e| err(path, format!("cannot read it: {e}")))?;
    let table: toml::Table = match toml::from_str(&text) {
        Ok(t) => t,
        Err(e) if declares_gpulint(&text) => return Err(err(path, describe(&e))),
        Err(_) => return Ok(None),
    };
    let Some(section) = table.get("tool").and_then(|t| t.get("gpulint")) else {
        return Ok(None);
    };
    let config: ConfigFile = section
        .clone()
        .try_into()
        .map_err(|e: toml::de::Error| err(path, format!("[tool.gpulint]: {}", describe(&e))))?;
    validate(path, &config)?;
    Ok(Some(config))
}

fn describe(e: &toml::de::Error) -> String {
    e.to_string().trim().replace('\n', "\n  ")
}

/// Checks values that serde cannot: selectors, severities, sizes, globs, rule options.
fn validate(path: &Path, c: &ConfigFile) -> Result<(), ConfigError> {
    for (key, list) in [
        ("select", &c.select),
        ("extend-select", &c.extend_select),
        ("ignore", &c.ignore),
    ] {
        for s in list.iter().flatten() {
            Selector::parse(s).map_err(|e| err(path, format!("`{key}`: {e}")))?;
        }
    }
    for (key, list) in [
        ("exclude", &c.exclude),
        ("extend-exclude", &c.extend_exclude),
    ] {
        for g in list.iter().flatten() {
            globset::Glob::new(g)
                .map_err(|e| err(path, format!("`{key}`: invalid glob `{g}`: {e}")))?;
        }
    }
    if let Some(map) = &c.per_file_ignores {
        for (glob, codes) in map {
            globset::Glob::new(glob).map_err(|e| {
                err(
                    path,
                    format!("`per-file-ignores`: invalid glob `{glob}`: {e}"),
                )
            })?;
            for s in codes {
                Selector::parse(s)
                    .map_err(|e| err(path, format!("`per-file-ignores.\"{glob}\"`: {e}")))?;
            }
        }
    }
    if let Some(f) = &c.fail_on {
        Severity::parse(f).ok_or_else(|| {
            err(
                path,
                format!("`fail-on`: expected one of `error`, `warning`, `info`, found `{f}`"),
            )
        })?;
    }
    if let Some(v) = &c.gpu_memory {
        gpu_memory_value(v).map_err(|e| err(path, format!("`gpu-memory`: {e}")))?;
    }
    if let Some(g) = &c.gpu {
        if c.gpu_memory.is_some() {
            return Err(err(
                path,
                "`gpu` and `gpu-memory` both set the budget: keep one",
            ));
        }
        gpulint_memory::budget::lookup(g).map_err(|e| err(path, format!("`gpu`: {e}")))?;
    }
    if let Some(rules) = &c.rules {
        for (code, options) in rules {
            let meta = registry::find(code).ok_or_else(|| {
                err(
                    path,
                    format!("`rules.{code}`: unknown rule (see `gpulint rules` for the codes)"),
                )
            })?;
            if meta.code != code {
                return Err(err(
                    path,
                    format!("`rules.{code}`: write the rule code `{}`", meta.code),
                ));
            }
            for (key, value) in options {
                let Some(opt) = meta.options.iter().find(|o| o.key == key) else {
                    let valid: Vec<&str> = meta.options.iter().map(|o| o.key).collect();
                    let expected = if valid.is_empty() {
                        format!("{code} has no options")
                    } else {
                        format!("expected one of `{}`", valid.join("`, `"))
                    };
                    return Err(err(
                        path,
                        format!("`rules.{code}.{key}`: unknown option; {expected}"),
                    ));
                };
                let ok = match opt.kind {
                    OptionKind::Int => value.as_integer().is_some_and(|i| i >= 0),
                    OptionKind::Fraction => value
                        .as_float()
                        .or(value.as_integer().map(|i| i as f64))
                        .is_some_and(|f| f > 0.0 && f <= 1.0),
                    OptionKind::Bool => value.is_bool(),
                    OptionKind::StringList => value
                        .as_array()
                        .is_some_and(|a| a.iter().all(|v| v.is_str())),
                };
                if !ok {
                    let expected = match opt.kind {
                        OptionKind::Int => "a non-negative integer",
                        OptionKind::Fraction => "a number greater than 0 and at most 1",
                        OptionKind::Bool => "true or false",
                        OptionKind::StringList => "a list of strings",
                    };
                    return Err(err(
                        path,
                        format!("`rules.{code}.{key}`: expected {expected}, found `{value}`"),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The GPU-memory budget and where it came from: `--gpu-memory`, `--gpu`, then `gpu-memory` or
/// `gpu` in the configuration file, else the default.
pub fn resolve_budget(
    flag_size: Option<u64>,
    flag_gpu: Option<&str>,
    loaded: Option<&LoadedConfig>,
) -> Result<(u64, gpulint_linter::settings::BudgetOrigin), String> {
    use gpulint_linter::settings::BudgetOrigin;
    use gpulint_memory::budget::lookup;
    if let Some(b) = flag_size {
        return Ok((b, BudgetOrigin::Flag));
    }
    if let Some(g) = flag_gpu {
        let (name, bytes) = lookup(g).map_err(|e| format!("--gpu: {e}"))?;
        return Ok((bytes, BudgetOrigin::GpuFlag(name.to_string())));
    }
    if let Some(l) = loaded {
        if let Some(v) = &l.config.gpu_memory {
            return Ok((
                gpu_memory_value(v)?,
                BudgetOrigin::Config(l.budget_from.clone()),
            ));
        }
        if let Some(g) = &l.config.gpu {
            let (name, bytes) = lookup(g)?;
            return Ok((
                bytes,
                BudgetOrigin::GpuConfig(name.to_string(), l.budget_from.clone()),
            ));
        }
    }
    Ok((
        gpulint_linter::settings::DEFAULT_GPU_MEMORY,
        BudgetOrigin::Default,
    ))
}

/// `gpu-memory` accepts a size string or a number of bytes.
pub fn gpu_memory_value(v: &toml::Value) -> Result<u64, String> {
    match v {
        toml::Value::String(s) => parse_size(s),
        toml::Value::Integer(i) if *i > 0 => Ok(*i as u64),
        other => Err(format!("expected a size such as \"8GiB\", found `{other}`")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn finds_upwards_and_validates() {
        let tmp = tempfile::tempdir().unwrap();
        let sub = tmp.path().join("a/b");
        std::fs::create_dir_all(&sub).unwrap();
        write(
            tmp.path(),
            "pyproject.toml",
            "[tool.gpulint]\nselect = [\"GL\"]\n",
        );
        let c = discover(&sub).unwrap().unwrap();
        assert_eq!(c.config.select.unwrap(), vec!["GL"]);
        write(
            tmp.path().join("a").as_path(),
            "gpulint.toml",
            "fail-on = \"info\"\n",
        );
        let c = discover(&sub).unwrap().unwrap();
        assert!(c.path.ends_with("a/gpulint.toml"));
    }

    #[test]
    fn errors_name_the_key() {
        let tmp = tempfile::tempdir().unwrap();
        let p = write(tmp.path(), "gpulint.toml", "selct = [\"GL\"]\n");
        let e = load(&p).unwrap_err().to_string();
        assert!(e.contains("selct") && e.contains("gpulint.toml"), "{e}");
        let p = write(tmp.path(), "gpulint.toml", "fail-on = \"fatal\"\n");
        assert!(load(&p).unwrap_err().to_string().contains("fail-on"));
        let p = write(tmp.path(), "gpulint.toml", "gpu-memory = \"lots\"\n");
        assert!(load(&p).unwrap_err().to_string().contains("gpu-memory"));
        let p = write(tmp.path(), "gpulint.toml", "[rules.GL001]\nfoo = 1\n");
        assert!(load(&p)
            .unwrap_err()
            .to_string()
            .contains("rules.GL001.foo"));
        let p = write(tmp.path(), "gpulint.toml", "gpu = \"voodoo2\"\n");
        assert!(load(&p).unwrap_err().to_string().contains("unknown GPU"));
        let p = write(
            tmp.path(),
            "gpulint.toml",
            "gpu = \"t4\"\ngpu-memory = \"8GiB\"\n",
        );
        assert!(load(&p).unwrap_err().to_string().contains("keep one"));
        let p = write(tmp.path(), "gpulint.toml", "[rules.XX001]\n");
        assert!(load(&p).unwrap_err().to_string().contains("unknown rule"));
    }

    #[test]
    fn extend_merges_and_keeps_each_file_s_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        std::fs::create_dir_all(d.join("base")).unwrap();
        write(
            &d.join("base"),
            "shared.toml",
            "select = [\"CU\"]\nignore = [\"CU002\"]\nextend-exclude = [\"gen\"]\ngpu = \"t4\"\n[rules.PY001]\nrecursion-limit = 10\n[per-file-ignores]\n\"a.py\" = [\"PY\"]\n",
        );
        let p = write(
            d,
            "gpulint.toml",
            "extend = \"base/shared.toml\"\nignore = [\"CU003\"]\ngpu-memory = \"4GiB\"\nextend-exclude = [\"out\"]\n[per-file-ignores]\n\"b.py\" = [\"CU\"]\n",
        );
        let c = load(&p).unwrap();
        assert_eq!(c.config.select.as_deref(), Some(&["CU".to_string()][..]));
        assert_eq!(c.config.ignore.clone().unwrap(), vec!["CU002", "CU003"]);
        // The budget is the extending file's, whole: no `gpu` left beside `gpu-memory`.
        assert!(c.config.gpu.is_none() && c.config.gpu_memory.is_some());
        assert_eq!(c.budget_from, p);
        assert!(c.config.rules.unwrap().contains_key("PY001"));
        let bases: Vec<(String, bool)> = c
            .extend_exclude
            .iter()
            .map(|e| (e.value.clone(), e.base.ends_with("base")))
            .collect();
        assert_eq!(
            bases,
            vec![("gen".to_string(), true), ("out".to_string(), false)]
        );
        assert_eq!(c.per_file_ignores.len(), 2);
        assert_eq!(c.chain.len(), 2);
        // A `select` of the extending file starts the selection again.
        write(
            d,
            "gpulint.toml",
            "extend = \"base/shared.toml\"\nselect = [\"PY\"]\n",
        );
        let c = load(&p).unwrap();
        assert!(c.config.ignore.is_none(), "{:?}", c.config.ignore);
    }

    #[test]
    fn broken_pyprojects_are_configurations_only_when_they_say_so() {
        for (text, declares) in [
            ("[project\nname = 1\n", false),
            ("[tool.black\n", false),
            ("[tool.gpulint\nselect = [\"PY\"]\n", true),
            ("[tool.gpulint.rules.PY001]\nx = [\n", true),
            ("tool.gpulint.select = [\n", true),
            ("[tool]\ngpulint = { select = [\n", true),
            ("[project]\ngpulint = [\n", false),
            ("[tool.gpulintx]\n[\n", false),
        ] {
            assert_eq!(declares_gpulint(text), declares, "{text}");
        }
        let tmp = tempfile::tempdir().unwrap();
        write(tmp.path(), "pyproject.toml", "[project\nname = 1\n");
        assert!(discover(tmp.path()).unwrap().is_none());
        write(tmp.path(), "pyproject.toml", "[tool.gpulint\n");
        assert!(discover(tmp.path()).is_err());
    }
}
