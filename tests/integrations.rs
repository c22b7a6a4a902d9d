//! Where users run gpulint: CI report formats (GitLab Code Quality, JUnit XML), `decode` for
//! crash exit codes, and the file lists that pre-commit passes. These tests use only findings
//! the engine reports itself (GL001, GL002), so they hold whatever rules are built in.

mod common;

use common::{code, gpulint, stderr, stdout};
use quick_xml::events::Event;
use quick_xml::{Reader, XmlVersion};
use std::path::Path;

/// A binary file with a `.py` name (GL002, warning), one whose name needs escaping in XML, and a
/// suppression naming an unknown code (GL001, info), plus a clean file.
fn project() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::create_dir_all(d.join("pkg")).unwrap();
    std::fs::write(d.join("pkg/weights.py"), b"PK\x03\x04\x00\x00binary").unwrap();
    std::fs::write(d.join("pkg/we&ird'\"<x>\u{1b}.py"), b"\x00\x01").unwrap();
    std::fs::write(
        d.join("stale.py"),
        "import torch\n\nx = 1  # gpulint: ignore[ZZ999]\n",
    )
    .unwrap();
    std::fs::write(d.join("clean.py"), "print('hello')\n").unwrap();
    tmp
}

#[test]
fn gitlab_code_quality_has_the_required_fields() {
    let tmp = project();
    let o = gpulint(
        tmp.path(),
        &[
            "--isolated",
            "--output-format",
            "gitlab",
            "--fail-on",
            "info",
        ],
    );
    assert_eq!(code(&o), 1);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("valid JSON");
    let issues = v.as_array().expect("an array");
    assert_eq!(issues.len(), 3, "{v:#}");
    let mut fingerprints = std::collections::BTreeSet::new();
    for i in issues {
        for key in ["description", "check_name", "fingerprint", "severity"] {
            assert!(
                i[key].as_str().is_some_and(|s| !s.is_empty()),
                "{key} in {i}"
            );
        }
        assert!(["info", "minor", "major", "critical", "blocker"]
            .contains(&i["severity"].as_str().unwrap()));
        let path = i["location"]["path"].as_str().unwrap();
        assert!(
            !path.starts_with('/') && !path.starts_with("./") && !path.contains('\\'),
            "{path}"
        );
        let begin = i["location"]["lines"]["begin"].as_u64().unwrap();
        assert!(begin >= 1 && i["location"]["lines"]["end"].as_u64().unwrap() >= begin);
        assert!(
            fingerprints.insert(i["fingerprint"].as_str().unwrap().to_string()),
            "duplicate fingerprint"
        );
    }
    let stale = issues.iter().find(|i| i["check_name"] == "GL001").unwrap();
    assert_eq!(stale["severity"], "info");
    assert_eq!(stale["location"]["path"], "stale.py");
    assert_eq!(stale["location"]["lines"]["begin"], 3);
    let weights = issues
        .iter()
        .find(|i| i["location"]["path"] == "pkg/weights.py")
        .unwrap();
    assert_eq!(
        (weights["check_name"].as_str(), weights["severity"].as_str()),
        (Some("GL002"), Some("major"))
    );

    // No findings: an empty array, which GitLab accepts.
    let o = gpulint(
        tmp.path(),
        &["--isolated", "--output-format", "gitlab", "clean.py"],
    );
    assert_eq!((code(&o), stdout(&o).trim()), (0, "[]"));
}

#[derive(Debug, Default)]
struct Junit {
    suites: Vec<(String, usize, usize)>,
    cases: usize,
    failures: Vec<(String, String, String)>,
    tests_total: usize,
}

/// Parses JUnit XML strictly: well-formed, end tags matching, every escape valid.
fn parse_junit(xml: &str) -> Junit {
    let mut reader = Reader::from_str(xml);
    let mut out = Junit::default();
    // The failure being read: message, type, text so far.
    let mut failure: Option<(String, String, String)> = None;
    loop {
        match reader.read_event().expect("well-formed XML") {
            Event::Eof => break,
            Event::Start(e) | Event::Empty(e) => {
                let attr = |name: &str| -> Option<String> {
                    e.try_get_attribute(name)
                        .expect("valid attributes")
                        .map(|a| {
                            a.normalized_value(XmlVersion::Explicit1_0)
                                .expect("valid escapes")
                                .into_owned()
                        })
                };
                match e.name().as_ref() {
                    b"testsuites" => out.tests_total = attr("tests").unwrap().parse().unwrap(),
                    b"testsuite" => out.suites.push((
                        attr("name").unwrap(),
                        attr("tests").unwrap().parse().unwrap(),
                        attr("failures").unwrap().parse().unwrap(),
                    )),
                    b"testcase" => {
                        assert!(attr("name").is_some() && attr("classname").is_some());
                        out.cases += 1;
                    }
                    b"failure" => {
                        failure = Some((
                            attr("message").unwrap(),
                            attr("type").unwrap(),
                            String::new(),
                        ))
                    }
                    other => panic!("unexpected element {}", String::from_utf8_lossy(other)),
                }
            }
            Event::Text(t) => {
                let text = t.decode().expect("utf-8");
                if let Some(f) = failure.as_mut() {
                    f.2.push_str(&text);
                }
            }
            // Character and entity references come as events of their own.
            Event::GeneralRef(r) => {
                let c = match r.resolve_char_ref().expect("valid character reference") {
                    Some(c) => c.to_string(),
                    None => {
                        let name = r.decode().expect("utf-8");
                        quick_xml::escape::resolve_predefined_entity(&name)
                            .expect("a predefined entity")
                            .to_string()
                    }
                };
                if let Some(f) = failure.as_mut() {
                    f.2.push_str(&c);
                }
            }
            Event::End(e) if e.name().as_ref() == b"failure" => out.failures.extend(failure.take()),
            _ => {}
        }
    }
    out
}

#[test]
fn junit_is_well_formed_and_escaped() {
    let tmp = project();
    let o = gpulint(
        tmp.path(),
        &[
            "--isolated",
            "--output-format",
            "junit",
            "--fail-on",
            "info",
        ],
    );
    assert_eq!(code(&o), 1);
    let xml = stdout(&o);
    assert!(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>"));
    let j = parse_junit(&xml);
    assert_eq!(j.tests_total, 3);
    assert_eq!(j.cases, 3);
    assert_eq!(j.failures.len(), 3);
    // One suite per file with findings, in output order; the odd name survives, with the
    // character XML forbids replaced.
    let names: Vec<&str> = j.suites.iter().map(|s| s.0.as_str()).collect();
    assert_eq!(
        names,
        ["pkg/we&ird'\"<x>\u{fffd}.py", "pkg/weights.py", "stale.py"]
    );
    assert!(j.suites.iter().all(|s| s.1 == 1 && s.2 == 1));
    let stale = j.failures.iter().find(|f| f.1 == "info").unwrap();
    assert!(stale.0.contains("ZZ999"), "{stale:?}");
    assert!(
        stale.2.starts_with("stale.py:3:") && stale.2.contains("\nhelp: "),
        "{stale:?}"
    );
    assert!(j.failures.iter().filter(|f| f.1 == "warning").count() == 2);

    // No findings: one passing test case, so that the report shows gpulint ran.
    let o = gpulint(
        tmp.path(),
        &["--isolated", "--output-format", "junit", "clean.py"],
    );
    assert_eq!(code(&o), 0);
    let j = parse_junit(&stdout(&o));
    assert_eq!((j.tests_total, j.cases, j.failures.len()), (1, 1, 0));
}

#[test]
fn decode_explains_the_three_spellings_of_a_windows_exit_code() {
    let tmp = tempfile::tempdir().unwrap();
    let mut texts = Vec::new();
    for spelling in ["-1073740791", "3221226505", "0xC0000409"] {
        let o = gpulint(tmp.path(), &["decode", spelling]);
        assert_eq!(code(&o), 0, "{spelling}");
        let text = stdout(&o);
        assert!(
            text.starts_with("-1073740791 = 3221226505 = 0xC0000409"),
            "{text}"
        );
        assert!(text.contains("STATUS_STACK_BUFFER_OVERRUN"));
        assert!(text.contains("What it does not mean:") && text.contains("0xC00000FD"));
        for rule in ["MF004", "MF007", "OP005", "CU009", "CU010", "PY002"] {
            assert!(text.contains(rule), "{rule}");
        }
        assert!(text.contains("python -X faulthandler"));
        texts.push(text);
    }
    assert!(texts.windows(2).all(|w| w[0] == w[1]));

    let o = gpulint(
        tmp.path(),
        &["decode", "0xC0000409", "--output-format", "json"],
    );
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["windows"]["signed"], -1073740791);
    assert_eq!(v["windows"]["unsigned"], 3221226505u64);
    assert_eq!(v["name"], "STATUS_STACK_BUFFER_OVERRUN");
    // The command line names only rules this build has, so that it runs as printed.
    if let Some(cmd) = v["command"].as_str() {
        let mut args: Vec<&str> = cmd.split_whitespace().skip(1).collect();
        args.push("--exit-zero");
        assert_eq!(code(&gpulint(tmp.path(), &args)), 0, "{cmd}");
    }
}

#[test]
fn decode_signals_and_unknown_codes() {
    let tmp = tempfile::tempdir().unwrap();
    let o = gpulint(tmp.path(), &["decode", "139"]);
    assert_eq!(code(&o), 0);
    assert!(stdout(&o).contains("SIGSEGV"));
    let o = gpulint(tmp.path(), &["decode", "-9"]);
    assert!(stdout(&o).contains("SIGKILL") && stdout(&o).contains("host RAM"));
    // Unknown but well-formed: explained as far as possible, exit 2.
    let o = gpulint(tmp.path(), &["decode", "0xC0000135"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("Known codes:"));
    // Not a number: a usage error.
    assert_eq!(code(&gpulint(tmp.path(), &["decode", "segfault"])), 2);
}

#[test]
fn no_paths_after_double_dash_checks_nothing() {
    let tmp = project();
    // `gpulint` alone walks `.`; `gpulint --` with nothing after checks nothing (what a
    // pre-commit hook that runs with no files passes).
    assert_eq!(code(&gpulint(tmp.path(), &["--isolated"])), 1);
    for args in [&["--isolated", "--"][..], &["check", "--isolated", "--"]] {
        let o = gpulint(tmp.path(), args);
        assert_eq!(code(&o), 0, "{args:?}");
        assert!(stderr(&o).contains("Checked 0 files"));
    }
    // Files after `--` are checked, even one whose name starts with a dash.
    std::fs::write(tmp.path().join("-dash.py"), b"\x00").unwrap();
    let o = gpulint(
        tmp.path(),
        &["--isolated", "--output-format", "concise", "--", "-dash.py"],
    );
    assert_eq!(code(&o), 1);
    assert!(stdout(&o).starts_with("-dash.py:1:1: GL002"));
}

#[test]
fn force_exclude_applies_exclusions_to_named_files() {
    let tmp = project();
    let d = tmp.path();
    std::fs::write(d.join("gpulint.toml"), "extend-exclude = [\"pkg\"]\n").unwrap();
    std::fs::create_dir_all(d.join("sub")).unwrap();
    // Named explicitly, an excluded file is checked...
    assert_eq!(code(&gpulint(d, &["pkg/weights.py"])), 1);
    // ...unless --force-exclude, also from a subfolder (exclusions are relative to the
    // configuration file).
    assert_eq!(code(&gpulint(d, &["--force-exclude", "pkg/weights.py"])), 0);
    assert_eq!(
        code(&gpulint(
            &d.join("sub"),
            &["--force-exclude", "../pkg/weights.py"]
        )),
        0
    );
    let o = gpulint(
        d,
        &[
            "--force-exclude",
            "--output-format",
            "concise",
            "pkg/weights.py",
            "stale.py",
        ],
    );
    assert!(!stdout(&o).contains("weights") && stdout(&o).contains("stale.py"));
}

/// The repository's own pyproject.toml (packaging for pip) must not configure gpulint.
#[test]
fn repository_pyproject_is_not_a_gpulint_configuration() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let found = gpulint::config::discover(root).expect("no configuration error");
    assert!(found.is_none(), "{:?}", found.map(|c| c.path));
}
