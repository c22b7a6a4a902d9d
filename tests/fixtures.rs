//! The fixture harness: every file under `fixtures/python`, `fixtures/cuda` and
//! `fixtures/manifest` is checked with every rule enabled, and its findings must match its
//! annotations exactly, line by line. Manifest fixtures are named as gpulint recognises them
//! (`MF004_cuda_image/Dockerfile`, `MF002_windows.requirements.txt`); in a Dockerfile, where a
//! comment cannot follow an instruction, annotate with `expect^:` on the line below.
//!
//! - `# expect: CODE[, CODE…]` / `// expect: CODE` — these codes fire on this line.
//! - `expect^: CODE` — on the line above (for lines that cannot carry a comment).
//! - `expect-todo: CODE` — a known miss: the code is not expected yet, and the test fails if it
//!   starts to fire (so the annotation gets promoted).

use gpulint::engine::Engine;
use gpulint::lang::Lang;
use gpulint::settings::Settings;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn fixture_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in ["fixtures/python", "fixtures/cuda", "fixtures/manifest"] {
        let mut stack = vec![PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(dir)];
        while let Some(d) = stack.pop() {
            for entry in std::fs::read_dir(&d).unwrap() {
                let p = entry.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else if Lang::of_path(&p).is_some() {
                    files.push(p);
                }
            }
        }
    }
    files.sort();
    files
}

/// Codes following `marker` in a line, up to the first word that is not a code.
fn codes_after<'a>(line: &'a str, marker: &str) -> Vec<&'a str> {
    let Some(at) = line.find(marker) else {
        return Vec::new();
    };
    // Codes are separated by commas or spaces; in a notebook the line ends with `\n",`.
    line[at + marker.len()..]
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .take_while(|w| {
            w.len() >= 5
                && w.bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
        })
        .collect()
}

type Expectations = BTreeMap<(usize, String), usize>;

fn expectations(text: &str) -> (Expectations, Expectations) {
    let mut expected = Expectations::new();
    let mut todo = Expectations::new();
    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
        for code in codes_after(line, "expect: ") {
            *expected.entry((line_no, code.to_string())).or_default() += 1;
        }
        for code in codes_after(line, "expect^: ") {
            *expected.entry((line_no - 1, code.to_string())).or_default() += 1;
        }
        for code in codes_after(line, "expect-todo: ") {
            *todo.entry((line_no, code.to_string())).or_default() += 1;
        }
    }
    (expected, todo)
}

#[test]
fn fixtures_match_their_annotations() {
    let settings = Settings {
        verbose: true,
        ..Settings::default()
    };
    let engine = Engine::new(settings);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = fixture_files();
    assert!(!files.is_empty(), "no fixtures found");
    let mut failures = Vec::new();
    for path in &files {
        let rel = path.strip_prefix(root).unwrap().display().to_string();
        let text = String::from_utf8_lossy(&std::fs::read(path).unwrap()).into_owned();
        let (expected, todo) = expectations(&text);
        let lang = Lang::of_path(path).unwrap();
        let result = engine.check_path(path, rel.clone(), lang);
        let mut actual = Expectations::new();
        let mut messages = BTreeMap::new();
        for d in &result.report.diagnostics {
            // The line of the file on disk (for a notebook: the .ipynb line holding the code).
            let line = result.report.file_line(d);
            *actual.entry((line, d.code.to_string())).or_default() += 1;
            messages.insert((line, d.code.to_string()), d.message.clone());
        }
        for (key, n) in &expected {
            let got = actual.get(key).copied().unwrap_or(0);
            if got < *n {
                failures.push(format!(
                    "{rel}:{}: expected {} but it did not fire",
                    key.0, key.1
                ));
            }
        }
        for (key, n) in &actual {
            let want = expected.get(key).copied().unwrap_or(0);
            if *n > want {
                if todo.contains_key(key) {
                    failures.push(format!(
                        "{rel}:{}: {} now fires on an `expect-todo` line: promote it to `expect`",
                        key.0, key.1
                    ));
                } else {
                    failures.push(format!(
                        "{rel}:{}: unexpected {}: {}",
                        key.0,
                        key.1,
                        messages.get(key).map(String::as_str).unwrap_or("")
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} fixture mismatch(es):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_rule_has_positive_fixtures() {
    let mut seen = std::collections::BTreeSet::new();
    for path in fixture_files() {
        let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
        let (expected, _) = expectations(&text);
        seen.extend(expected.into_keys().map(|(_, c)| c));
    }
    let missing: Vec<_> = gpulint::registry::all_metas()
        .into_iter()
        .filter(|m| !seen.contains(m.code))
        .map(|m| m.code)
        .collect();
    assert!(
        missing.is_empty(),
        "rules without a fixture line that expects them: {missing:?}"
    );
}
