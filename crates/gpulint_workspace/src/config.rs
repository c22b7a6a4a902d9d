//! Configuration files: `gpulint.toml`, `.gpulint.toml`, or `[tool.gpulint]` in
//! `pyproject.toml`, found from the current directory upwards. Every key and value is checked:
//! a mistake is an error naming the file, the key and what was expected, never ignored.

use gpulint_diagnostics::OptionKind;
use gpulint_diagnostics::Severity;
use gpulint_linter::registry;
use gpulint_linter::settings::{parse_size, Selector};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// The keys of a configuration file.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ConfigFile {
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

/// A configuration file found and parsed.
#[derive(Debug, Clone)]
pub struct LoadedConfig {
    pub path: PathBuf,
    pub config: ConfigFile,
}

impl LoadedConfig {
    /// The directory that relative globs in the file are relative to.
    pub fn dir(&self) -> PathBuf {
        self.path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."))
    }
}

/// A configuration error: always exit 2.
#[derive(Debug)]
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

/// Finds the configuration file for `start` (a directory), searching upwards.
pub fn discover(start: &Path) -> Result<Option<LoadedConfig>, ConfigError> {
    let start = std::fs::canonicalize(start).unwrap_or_else(|_| start.to_path_buf());
    for dir in start.ancestors() {
        for name in ["gpulint.toml", ".gpulint.toml"] {
            let p = dir.join(name);
            if p.is_file() {
                return load(&p).map(Some);
            }
        }
        let p = dir.join("pyproject.toml");
        if p.is_file() {
            if let Some(c) = load_pyproject(&p)? {
                return Ok(Some(c));
            }
        }
    }
    Ok(None)
}

/// Loads a configuration file given explicitly (`--config`).
pub fn load(path: &Path) -> Result<LoadedConfig, ConfigError> {
    if path.file_name().is_some_and(|n| n == "pyproject.toml") {
        return load_pyproject(path)?.ok_or_else(|| err(path, "no [tool.gpulint] table"));
    }
    let text =
        std::fs::read_to_string(path).map_err(|e| err(path, format!("cannot read it: {e}")))?;
    let config: ConfigFile = toml::from_str(&text).map_err(|e| err(path, describe(&e)))?;
    validate(path, &config)?;
    Ok(LoadedConfig {
        path: path.to_path_buf(),
        config,
    })
}

fn load_pyproject(path: &Path) -> Result<Option<LoadedConfig>, ConfigError> {
    let text =
        std::fs::read_to_string(path).map_err(|e| err(path, format!("cannot read it: {e}")))?;
    let table: toml::Table = toml::from_str(&text).map_err(|e| err(path, describe(&e)))?;
    let Some(section) = table.get("tool").and_then(|t| t.get("gpulint")) else {
        return Ok(None);
    };
    let config: ConfigFile = section
        .clone()
        .try_into()
        .map_err(|e: toml::de::Error| err(path, format!("[tool.gpulint]: {}", describe(&e))))?;
    validate(path, &config)?;
    Ok(Some(LoadedConfig {
        path: path.to_path_buf(),
        config,
    }))
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
            return Ok((gpu_memory_value(v)?, BudgetOrigin::Config(l.path.clone())));
        }
        if let Some(g) = &l.config.gpu {
            let (name, bytes) = lookup(g)?;
            return Ok((
                bytes,
                BudgetOrigin::GpuConfig(name.to_string(), l.path.clone()),
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
}
