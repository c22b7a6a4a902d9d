//! `pyproject.toml`: `[project]` dependencies, optional dependencies and `requires-python`
//! (PEP 621), `[dependency-groups]` (PEP 735), Poetry's `[tool.poetry.*dependencies]` with
//! its `^`/`~` constraints, and package indexes (`[[tool.poetry.source]]`,
//! `[[tool.uv.index]]`). Spans come from the TOML parser.

use super::pep508::{normalize, parse_requirement, parse_specifiers, Marker, Spec};
use super::{
    line_comments, Format, Index, IndexKind, Installer, Manifest, PythonDecl, Requirement, Scope,
};
use gpulint_source::SourceFile;
use gpulint_source::Span;
use toml::de::{DeTable, DeValue};
use toml::Spanned;

type Table<'i> = DeTable<'i>;

/// Parses a `pyproject.toml`. A file that is not valid TOML gets [`Manifest::fatal`].
pub fn parse(file: &SourceFile) -> Manifest {
    let mut m = Manifest::new(Format::Pyproject);
    line_comments(&mut m, file, false);
    let root = match DeTable::parse(&file.text) {
        Ok(t) => t,
        Err(e) => {
            let line = e.span().map(|s| file.position(s.start).0);
            let msg = e.message().lines().next().unwrap_or("").trim().to_string();
            m.fatal = Some(match line {
                Some(l) => format!("invalid TOML at line {l}: {msg}"),
                None => format!("invalid TOML: {msg}"),
            });
            return m;
        }
    };
    let root = root.get_ref();
    let text = file.text.as_str();

    if let Some(project) = table(root, "project") {
        if let Some(list) = array(project, "dependencies") {
            pep508_list(&mut m, text, list, 0);
        }
        if let Some(opt) = table(project, "optional-dependencies") {
            for (name, v) in opt.iter() {
                if let DeValue::Array(list) = v.get_ref() {
                    let scope = new_scope(&mut m, name.get_ref(), Some(0));
                    pep508_list(&mut m, text, list, scope);
                }
            }
        }
        if let Some(v) = project.get("requires-python") {
            if let Some(s) = v.get_ref().as_str() {
                let (spec, _) = parse_specifiers(s);
                m.pythons.push(PythonDecl {
                    spec,
                    text: format!("requires-python = \"{s}\""),
                    span: inner_span(text, v),
                    origin: None,
                    scope: 0,
                });
            }
        }
    }
    if let Some(groups) = table(root, "dependency-groups") {
        for (name, v) in groups.iter() {
            if let DeValue::Array(list) = v.get_ref() {
                let scope = new_scope(&mut m, name.get_ref(), Some(0));
                pep508_list(&mut m, text, list, scope);
            }
        }
    }
    if let Some(tool) = table(root, "tool") {
        if let Some(poetry) = table(tool, "poetry") {
            if let Some(deps) = table(poetry, "dependencies") {
                poetry_deps(&mut m, text, deps, 0);
            }
            if let Some(deps) = table(poetry, "dev-dependencies") {
                let scope = new_scope(&mut m, "dev", Some(0));
                poetry_deps(&mut m, text, deps, scope);
            }
            if let Some(groups) = table(poetry, "group") {
                for (name, g) in groups.iter() {
                    if let Some(deps) = g
                        .get_ref()
                        .as_table()
                        .and_then(|g| table(g, "dependencies"))
                    {
                        let scope = new_scope(&mut m, name.get_ref(), Some(0));
                        poetry_deps(&mut m, text, deps, scope);
                    }
                }
            }
            if let Some(sources) = array(poetry, "source") {
                indexes(&mut m, text, sources);
            }
        }
        if let Some(uv) = table(tool, "uv") {
            if let Some(list) = array(uv, "index") {
                indexes(&mut m, text, list);
            }
        }
    }
    let all: Vec<usize> = (0..m.indexes.len()).collect();
    for r in &mut m.requirements {
        r.indexes = all.clone();
    }
    m.requirements.sort_by_key(|r| r.span.start);
    m
}

fn table<'a, 'i>(t: &'a Table<'i>, key: &str) -> Option<&'a Table<'i>> {
    t.get(key)?.get_ref().as_table()
}

fn array<'a, 'i>(t: &'a Table<'i>, key: &str) -> Option<&'a toml::de::DeArray<'i>> {
    t.get(key)?.get_ref().as_array()
}

fn new_scope(m: &mut Manifest, name: &str, parent: Option<usize>) -> usize {
    m.scopes.push(Scope {
        name: name.to_string(),
        parent,
    });
    m.scopes.len() - 1
}

/// The span of a string value without its quotes, when the source between them is the value
/// itself (no escapes); else the whole value.
fn inner_span(text: &str, v: &Spanned<DeValue<'_>>) -> Span {
    let r = v.span();
    let raw = text.get(r.clone()).unwrap_or("");
    let q = if raw.starts_with("\"\"\"") || raw.starts_with("'''") {
        3
    } else if raw.starts_with('"') || raw.starts_with('\'') {
        1
    } else {
        0
    };
    if q > 0 && raw.len() >= 2 * q {
        let inner = &raw[q..raw.len() - q];
        if Some(inner) == v.get_ref().as_str() {
            return Span::new(r.start + q, r.end - q);
        }
    }
    Span::new(r.start, r.end)
}

fn pep508_list(m: &mut Manifest, text: &str, list: &toml::de::DeArray<'_>, scope: usize) {
    for item in list.iter() {
        let Some(s) = item.get_ref().as_str() else {
            continue;
        };
        let span = inner_span(text, item);
        let exact = text.get(span.start..span.end) == Some(s);
        let Some(r) = parse_requirement(s) else {
            continue;
        };
        m.requirements
            .push(Requirement::pip(r, s, span, exact, scope));
    }
}

/// Poetry's version constraints as PEP 440: `^2.15` → `>=2.15,<3.0`, `~2.15.1` →
/// `>=2.15.1,<2.16`, `2.15` → `==2.15`, `*` → any.
pub fn poetry_spec(s: &str) -> Spec {
    if s.contains("||") || s.contains('|') {
        return Spec::Unknown;
    }
    let mut out: Vec<String> = Vec::new();
    for clause in s.split(',') {
        let c = clause.trim();
        if c.is_empty() || c == "*" {
            continue;
        }
        let nums =
            |v: &str| -> Option<Vec<u64>> { v.trim().split('.').map(|p| p.parse().ok()).collect() };
        if let Some(v) = c.strip_prefix('^') {
            let Some(parts) = nums(v) else {
                return Spec::Unknown;
            };
            let k = parts
                .iter()
                .position(|&p| p != 0)
                .unwrap_or(parts.len().saturating_sub(1));
            let mut upper: Vec<u64> = parts[..=k.min(parts.len() - 1)].to_vec();
            if let Some(last) = upper.last_mut() {
                *last += 1;
            }
            out.push(format!(">={}", v.trim()));
            out.push(format!("<{}", join(&upper)));
        } else if c.starts_with('~') && !c.starts_with("~=") {
            let v = &c[1..];
            let Some(parts) = nums(v) else {
                return Spec::Unknown;
            };
            let upper = if parts.len() >= 2 {
                vec![parts[0], parts[1] + 1]
            } else {
                vec![parts[0] + 1]
            };
            out.push(format!(">={}", v.trim()));
            out.push(format!("<{}", join(&upper)));
        } else if c.starts_with(['<', '>', '=', '!', '~']) {
            out.push(c.to_string());
        } else {
            out.push(format!("=={c}"));
        }
    }
    if out.is_empty() {
        return Spec::Any;
    }
    parse_specifiers(&out.join(",")).0
}

fn join(parts: &[u64]) -> String {
    parts
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(".")
}

fn poetry_deps(m: &mut Manifest, text: &str, deps: &Table<'_>, scope: usize) {
    for (key, value) in deps.iter() {
        let name = normalize(key.get_ref());
        let span = Span::new(key.span().start, value.span().end);
        let written = text
            .get(span.start..span.end)
            .unwrap_or("")
            .lines()
            .next()
            .unwrap_or("")
            .trim()
            .to_string();
        // One constraint, or several for different platforms / Python versions.
        let entries: Vec<&DeValue<'_>> = match value.get_ref() {
            DeValue::Array(list) => list.iter().map(|v| v.get_ref()).collect(),
            v => vec![v],
        };
        for entry in entries {
            let (spec, marker, extras) = match entry {
                DeValue::String(s) => (poetry_spec(s), None, Vec::new()),
                DeValue::Table(t) => {
                    let spec = t
                        .get("version")
                        .and_then(|v| v.get_ref().as_str())
                        .map(poetry_spec)
                        .unwrap_or(Spec::Any);
                    let mut conds = Vec::new();
                    if let Some(mk) = t.get("markers").and_then(|v| v.get_ref().as_str()) {
                        conds.push(format!("({mk})"));
                    }
                    if let Some(p) = t.get("platform").and_then(|v| v.get_ref().as_str()) {
                        conds.push(format!("sys_platform == \"{p}\""));
                    }
                    let marker = (!conds.is_empty()).then(|| Marker::parse(&conds.join(" and ")));
                    let extras = t
                        .get("extras")
                        .and_then(|v| v.get_ref().as_array())
                        .map(|a| {
                            a.iter()
                                .filter_map(|e| e.get_ref().as_str())
                                .map(normalize)
                                .collect()
                        })
                        .unwrap_or_default();
                    (spec, marker, extras)
                }
                _ => continue,
            };
            if name == "python" {
                m.pythons.push(PythonDecl {
                    spec,
                    text: written.clone(),
                    span,
                    origin: None,
                    scope,
                });
                continue;
            }
            m.requirements.push(Requirement {
                name: name.clone(),
                extras,
                spec,
                local: None,
                build: None,
                marker,
                installer: Installer::Pip,
                text: written.clone(),
                span,
                origin: None,
                scope,
                indexes: Vec::new(),
            });
        }
    }
}

fn indexes(m: &mut Manifest, text: &str, list: &toml::de::DeArray<'_>) {
    for item in list.iter() {
        let Some(t) = item.get_ref().as_table() else {
            continue;
        };
        let Some(url) = t.get("url") else {
            continue;
        };
        let Some(u) = url.get_ref().as_str() else {
            continue;
        };
        m.indexes.push(Index {
            url: u.to_string(),
            kind: IndexKind::Primary,
            span: inner_span(text, url),
            origin: None,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pep440_rs::Version;
    use std::str::FromStr;

    fn v(s: &str) -> Version {
        Version::from_str(s).unwrap()
    }

    #[test]
    fn poetry_constraints() {
        let s = poetry_spec("^2.15");
        assert_eq!(s.admits(&v("2.21.0")), Some(true));
        assert_eq!(s.admits(&v("3.0")), Some(false));
        let s = poetry_spec("^0.4.13");
        assert_eq!(s.admits(&v("0.5.0")), Some(false));
        let s = poetry_spec("~2.15");
        assert_eq!(s.admits(&v("2.16.0")), Some(false));
        assert_eq!(poetry_spec("2.15.0").admits(&v("2.15.0")), Some(true));
        assert!(matches!(poetry_spec("*"), Spec::Any));
        assert!(matches!(poetry_spec("^1 || ^2"), Spec::Unknown));
    }

    #[test]
    fn reads_project_and_poetry() {
        let text = r#"[project]
name = "x"
requires-python = ">=3.9"
dependencies = ["tensorflow==2.15.0", 'numpy']

[project.optional-dependencies]
gpu = ["tensorflow[and-cuda]==2.15.0"]

[tool.poetry.dependencies]
python = "^3.10"
torch = { version = "2.1.0", source = "pytorch" }

[[tool.poetry.source]]
name = "pytorch"
url = "https://download.pytorch.org/whl/cu118"
"#;
        let f = SourceFile::new(
            "pyproject.toml".into(),
            "pyproject.toml".into(),
            text.into(),
        );
        let m = parse(&f);
        assert!(m.fatal.is_none());
        let names: Vec<_> = m.requirements.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["tensorflow", "numpy", "tensorflow", "torch"]);
        let tf = &m.requirements[0];
        assert_eq!(&text[tf.span.start..tf.span.end], "tensorflow==2.15.0");
        assert_eq!(m.requirements[2].scope, 1);
        assert_eq!(m.pythons.len(), 2);
        assert_eq!(m.indexes.len(), 1);
        assert_eq!(m.requirements[3].indexes, vec![0]);
    }

    #[test]
    fn invalid_toml_is_fatal_not_a_panic() {
        let f = SourceFile::new(
            "pyproject.toml".into(),
            "p".into(),
            "[project\ndependencies = [".into(),
        );
        assert!(parse(&f).fatal.unwrap().starts_with("invalid TOML"));
        let deep = format!("x = {}{}", "[".repeat(100_000), "]".repeat(100_000));
        let f = SourceFile::new("pyproject.toml".into(), "p".into(), deep);
        let _ = parse(&f);
    }
}
