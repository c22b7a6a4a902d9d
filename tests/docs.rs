//! The rule reference in `lints/` is generated from the rules' docs and must be current, and
//! every rule's Example must fire it while its "Use instead" must not.
//! Regenerate with `GPULINT_UPDATE_DOCS=1 cargo test --test docs`.

use gpulint::docs;
use gpulint::registry;
use gpulint::rule::RuleLang;
use gpulint::settings::Settings;
use std::path::{Path, PathBuf};

fn lints_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("lints")
}

#[test]
fn lint_pages_are_current() {
    let dir = lints_dir();
    let update = std::env::var_os("GPULINT_UPDATE_DOCS").is_some();
    let mut expected = vec![("README.md".to_string(), docs::index())];
    for m in registry::all_metas() {
        expected.push((m.page_name(), docs::rule_page(m)));
    }
    if update {
        std::fs::create_dir_all(&dir).unwrap();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let p = entry.unwrap().path();
            if p.extension().is_some_and(|e| e == "md")
                && !expected.iter().any(|(n, _)| p.ends_with(n))
            {
                std::fs::remove_file(p).unwrap();
            }
        }
        for (name, text) in &expected {
            std::fs::write(dir.join(name), text).unwrap();
        }
        return;
    }
    let mut stale = Vec::new();
    for (name, text) in &expected {
        match std::fs::read_to_string(dir.join(name)) {
            Ok(t) if &t == text => {}
            _ => stale.push(name.clone()),
        }
    }
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".md") && !expected.iter().any(|(n, _)| *n == name) {
            stale.push(format!("{name} (no such rule)"));
        }
    }
    assert!(
        stale.is_empty(),
        "stale pages in lints/: {stale:?}\nregenerate with: GPULINT_UPDATE_DOCS=1 cargo test --test docs"
    );
}

#[test]
fn examples_fire_and_fixes_do_not() {
    let settings = Settings {
        verbose: true,
        ..Settings::default()
    };
    let mut problems = Vec::new();
    for m in registry::all_metas() {
        let doc = m.doc_markdown();
        for (section, must_fire) in [("Example", true), ("Use instead", false)] {
            let block = docs::first_code_block(&doc, section);
            // Manifest examples are checked as the file their tag names.
            let path_for = |tag: &str| match tag {
                "python" => Some("example.py"),
                "cuda" | "cpp" | "c++" => Some("example.cu"),
                "requirements" => Some("requirements.txt"),
                "toml" => Some("pyproject.toml"),
                "yaml" => Some("environment.yml"),
                "dockerfile" => Some("Dockerfile"),
                _ => None,
            };
            let Some((path, code)) = block.and_then(|(t, c)| Some((path_for(t)?, c))) else {
                if matches!(m.lang, RuleLang::Source(_) | RuleLang::Manifest) {
                    problems.push(format!(
                        "{}: `## {section}` has no ```python, ```cuda, ```requirements, ```toml, ```yaml or ```dockerfile block",
                        m.code
                    ));
                }
                continue;
            };
            let found = gpulint::check_source(Path::new(path), &code, &settings)
                .iter()
                .any(|d| d.code == m.code);
            if found != must_fire {
                problems.push(format!(
                    "{}: the `## {section}` code {}",
                    m.code,
                    if must_fire {
                        "does not fire the rule"
                    } else {
                        "fires the rule"
                    }
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
