//! The command line as users meet it: exit codes, formats, flags, configuration, suppressions,
//! determinism, and hostile inputs.

mod common;

use common::{code, command, stderr, stdout, write};
use std::path::Path;
use std::process::Output;

fn gpulint(dir: &Path, args: &[&str]) -> Output {
    command(dir, args)
        .env_remove("NO_COLOR")
        .output()
        .expect("gpulint runs")
}

/// A project with one recursive PyTorch helper (PY001), one unguarded kernel (CU001), a clean
/// file, and a stale suppression (GL001).
fn project() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(
        d,
        "train.py",
        "import torch\n\n\ndef walk(node):\n    return [walk(c) for c in node.children]\n\n\nmodel = torch.nn.Linear(4, 4)\n",
    );
    write(
        d,
        "ops/add.cu",
        "__global__ void add(const float* a, const float* b, float* out, int n) {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    out[i] = a[i] + b[i];\n}\n",
    );
    write(d, "clean.py", "import os\n\nprint(os.getcwd())\n");
    write(
        d,
        "stale.py",
        "import torch\n\nx = torch.zeros(3)  # gpulint: ignore[PY001]\n",
    );
    tmp
}

#[test]
fn exit_codes() {
    let tmp = project();
    let d = tmp.path();
    // Clean file: 0.
    let o = gpulint(d, &["clean.py"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    // Findings at or above the default fail-on (warning): 1.
    assert_eq!(code(&gpulint(d, &["."])), 1);
    // --exit-zero: 0 even so.
    assert_eq!(code(&gpulint(d, &["--exit-zero", "."])), 0);
    // Only an info finding (GL001) fails only with --fail-on info.
    assert_eq!(code(&gpulint(d, &["stale.py"])), 0);
    assert_eq!(code(&gpulint(d, &["--fail-on", "info", "stale.py"])), 1);
    // --fail-on error ignores warnings.
    assert_eq!(
        code(&gpulint(
            d,
            &["--fail-on", "error", "--select", "PY001", "train.py"]
        )),
        0
    );
    // Usage errors: 2.
    for args in [
        &["--no-such-flag"][..],
        &["--select", "XX"],
        &["--gpu-memory", "lots", "."],
        &["--threads", "0", "."],
        &["--output-format", "xml", "."],
        &["missing-dir"],
        &["explain", "NOPE999"],
    ] {
        let o = gpulint(d, args);
        assert_eq!(code(&o), 2, "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).is_empty(), "{args:?} says why");
    }
    // A missing path among existing ones: the rest is still checked, exit 2.
    let o = gpulint(d, &["--output-format", "concise", "missing.py", "ops"]);
    assert_eq!(code(&o), 2);
    assert!(stdout(&o).contains("ops/add.cu"), "{}", stdout(&o));
    assert!(stderr(&o).contains("missing.py"));
    // Help and version: 0.
    assert_eq!(code(&gpulint(d, &["--help"])), 0);
    let v = gpulint(d, &["--version"]);
    assert_eq!(code(&v), 0);
    assert!(stdout(&v).contains(env!("CARGO_PKG_VERSION")));
}

#[test]
fn concise_and_default_subcommand() {
    let tmp = project();
    let d = tmp.path();
    let a = gpulint(d, &["--output-format", "concise"]);
    let b = gpulint(d, &["check", "--output-format", "concise", "."]);
    assert_eq!(stdout(&a), stdout(&b));
    let out = stdout(&a);
    assert!(out.contains("ops/add.cu:3:5: CU001 [error] "), "{out}");
    assert!(out.contains("train.py:5:13: PY001 [warning] "), "{out}");
    assert!(out.contains("stale.py:3:21: GL001 [info] "), "{out}");
    // Sorted by path, then position.
    let paths: Vec<&str> = out.lines().map(|l| l.split(':').next().unwrap()).collect();
    let mut sorted = paths.clone();
    sorted.sort();
    assert_eq!(paths, sorted);
    // The summary goes to stderr, and --quiet drops it.
    assert!(stderr(&a).contains("Checked 4 files"), "{}", stderr(&a));
    assert!(stderr(&gpulint(d, &["-q"])).is_empty());
}

#[test]
fn full_format_has_labels_and_help_and_no_color_when_piped() {
    let tmp = project();
    let out = stdout(&gpulint(tmp.path(), &["ops/add.cu"]));
    assert!(out.contains("error[CU001]"), "{out}");
    assert!(out.contains("┌─ ops/add.cu:3:5"), "{out}");
    assert!(out.contains("= help: "), "{out}");
    assert!(
        !out.contains('\u{1b}'),
        "no ANSI colour when stdout is not a terminal"
    );
}

#[test]
fn json_format_is_the_documented_schema() {
    let tmp = project();
    let o = gpulint(tmp.path(), &["--output-format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let items = v.as_array().unwrap();
    assert_eq!(items.len(), 3);
    let keys = [
        "code",
        "name",
        "severity",
        "message",
        "path",
        "line",
        "column",
        "end_line",
        "end_column",
        "help",
        "notes",
        "fingerprint",
    ];
    for item in items {
        let obj = item.as_object().unwrap();
        for k in keys {
            assert!(obj.contains_key(k), "missing {k} in {item}");
        }
        assert_eq!(obj.len(), keys.len(), "no undocumented fields: {item}");
    }
    let cu = items.iter().find(|i| i["code"] == "CU001").unwrap();
    assert_eq!(cu["path"], "ops/add.cu");
    assert_eq!(cu["severity"], "error");
    assert_eq!(cu["name"], "unguarded-thread-index");
    assert_eq!(
        (cu["line"].as_u64(), cu["column"].as_u64()),
        (Some(3), Some(5))
    );
    assert!(cu["end_column"].as_u64() > cu["column"].as_u64());
}

#[test]
fn sarif_format() {
    let tmp = project();
    let o = gpulint(tmp.path(), &["--output-format", "sarif", "-o", "out.sarif"]);
    assert_eq!(code(&o), 1);
    assert!(stdout(&o).is_empty(), "-o writes to the file, not stdout");
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("out.sarif")).unwrap()).unwrap();
    assert_eq!(v["version"], "2.1.0");
    let run = &v["runs"][0];
    let driver = &run["tool"]["driver"];
    assert_eq!(driver["name"], "gpulint");
    let rules = driver["rules"].as_array().unwrap();
    let cu = rules.iter().find(|r| r["id"] == "CU001").unwrap();
    assert_eq!(cu["defaultConfiguration"]["level"], "error");
    assert!(cu["helpUri"]
        .as_str()
        .unwrap()
        .ends_with("lints/CU001_unguarded-thread-index.md"));
    let results = run["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    let r = results.iter().find(|r| r["ruleId"] == "CU001").unwrap();
    assert_eq!(
        rules[r["ruleIndex"].as_u64().unwrap() as usize]["id"],
        "CU001"
    );
    let loc = &r["locations"][0]["physicalLocation"];
    assert_eq!(loc["artifactLocation"]["uri"], "ops/add.cu");
    assert_eq!(loc["region"]["startLine"], 3);
    assert!(
        r["partialFingerprints"]["gpulint/v1"]
            .as_str()
            .unwrap()
            .len()
            > 16
    );
}

#[test]
fn sarif_fingerprints_survive_unrelated_line_shifts() {
    let tmp = project();
    let d = tmp.path();
    let fp = |d: &Path| -> Vec<String> {
        let v: serde_json::Value =
            serde_json::from_str(&stdout(&gpulint(d, &["--output-format", "sarif"]))).unwrap();
        let mut f: Vec<String> = v["runs"][0]["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                r["partialFingerprints"]["gpulint/v1"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        f.sort();
        f
    };
    let before = fp(d);
    let src = std::fs::read_to_string(d.join("ops/add.cu")).unwrap();
    write(
        d,
        "ops/add.cu",
        format!("// Copyright\n// Licensed\n\n{src}"),
    );
    assert_eq!(before, fp(d));
}

#[test]
fn github_format() {
    let tmp = project();
    let out = stdout(&gpulint(tmp.path(), &["--output-format", "github"]));
    let line = out.lines().find(|l| l.contains("CU001")).unwrap();
    assert!(
        line.starts_with("::error file=ops/add.cu,line=3,col=5,endLine=3,endColumn="),
        "{line}"
    );
    assert!(
        line.contains(",title=CU001 unguarded-thread-index::"),
        "{line}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("::warning file=train.py,line=5")),
        "{out}"
    );
    assert!(
        out.lines().any(|l| l.starts_with("::notice file=stale.py")),
        "{out}"
    );
}

#[test]
fn statistics() {
    let tmp = project();
    let out = stdout(&gpulint(tmp.path(), &["--statistics"]));
    assert!(
        out.contains("CU001") && out.contains("PY001") && out.contains("GL001"),
        "{out}"
    );
    assert_eq!(out.lines().count(), 3);
    let json: serde_json::Value = serde_json::from_str(&stdout(&gpulint(
        tmp.path(),
        &["--statistics", "--output-format", "json"],
    )))
    .unwrap();
    assert_eq!(json.as_array().unwrap().len(), 3);
}

#[test]
fn selection_flags() {
    let tmp = project();
    let d = tmp.path();
    let codes = |args: &[&str]| -> Vec<String> {
        let mut a = vec!["--output-format", "json"];
        a.extend_from_slice(args);
        let v: serde_json::Value = serde_json::from_str(&stdout(&gpulint(d, &a))).unwrap();
        let mut c: Vec<String> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["code"].as_str().unwrap().into())
            .collect();
        c.sort();
        c
    };
    assert_eq!(codes(&["--select", "CU"]), ["CU001"]);
    assert_eq!(codes(&["--select", "CU001,PY001"]), ["CU001", "PY001"]);
    assert_eq!(codes(&["--ignore", "CU,GL"]), ["PY001"]);
    assert_eq!(
        codes(&["--select", "CU", "--extend-select", "unbounded-recursion"]),
        ["CU001", "PY001"]
    );
    assert_eq!(
        codes(&["--select", "ALL", "--ignore", "PY001,GL001"]),
        ["CU001"]
    );
}

#[test]
fn configuration_files() {
    let tmp = project();
    let d = tmp.path();
    let concise = |args: &[&str]| {
        let mut a = vec!["--output-format", "concise"];
        a.extend_from_slice(args);
        stdout(&gpulint(d, &a))
    };
    write(
        d,
        "gpulint.toml",
        "ignore = [\"CU001\"]\n[per-file-ignores]\n\"stale.py\" = [\"GL\"]\n",
    );
    let out = concise(&[]);
    assert!(
        !out.contains("CU001") && !out.contains("GL001") && out.contains("PY001"),
        "{out}"
    );
    // The command line wins over the file.
    assert!(concise(&["--select", "CU001"]).contains("CU001"));
    // --isolated ignores the file.
    assert!(concise(&["--isolated"]).contains("CU001"));
    // Found from a subdirectory, upwards.
    let o = gpulint(&d.join("ops"), &["--output-format", "concise", "."]);
    assert!(stdout(&o).is_empty(), "{}", stdout(&o));
    // --config overrides discovery; pyproject.toml [tool.gpulint] works.
    write(
        d,
        "cfg/pyproject.toml",
        "[tool.gpulint]\nselect = [\"GL001\", \"PY\"]\nfail-on = \"info\"\n",
    );
    let o = gpulint(
        d,
        &[
            "--config",
            "cfg/pyproject.toml",
            "--output-format",
            "concise",
        ],
    );
    assert_eq!(code(&o), 1);
    assert_eq!(stdout(&o).lines().count(), 2, "{}", stdout(&o));
    assert!(!stdout(&o).contains("CU001"), "{}", stdout(&o));
    std::fs::remove_file(d.join("gpulint.toml")).unwrap();
    write(
        d,
        "pyproject.toml",
        "[project]\nname = \"x\"\n[tool.gpulint]\nextend-exclude = [\"ops\"]\n",
    );
    assert!(!concise(&[]).contains("add.cu"));
    // Rule options.
    write(d, "gpulint.toml", "[rules.PY001]\nrecursion-limit = 3000\n");
    assert_eq!(code(&gpulint(d, &["-q", "--exit-zero"])), 0);
}

#[test]
fn configuration_errors_exit_2_and_name_the_key() {
    let tmp = project();
    let d = tmp.path();
    for (text, needle) in [
        ("selct = [\"CU\"]\n", "selct"),
        ("select = [\"NOPE1\"]\n", "NOPE1"),
        ("fail-on = \"fatal\"\n", "fail-on"),
        ("gpu-memory = \"8 bananas\"\n", "gpu-memory"),
        ("[rules.PY001]\nrecursion-limt = 5\n", "recursion-limt"),
        (
            "[rules.PY001]\nrecursion-limit = \"big\"\n",
            "recursion-limit",
        ),
        (
            "[per-file-ignores]\n\"a[\" = [\"CU\"]\n",
            "per-file-ignores",
        ),
        ("select = \n", "gpulint.toml"),
    ] {
        write(d, "gpulint.toml", text);
        let o = gpulint(d, &["."]);
        assert_eq!(code(&o), 2, "{text}");
        let e = stderr(&o);
        assert!(
            e.contains("gpulint.toml") && e.contains(needle),
            "{text}: {e}"
        );
    }
}

#[test]
fn suppressions() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(
        d,
        "k.cu",
        "__global__ void a(float* out, int n) {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    out[i] = 0.f;  // NOLINT(CU001) -- sized exactly by the launcher\n}\n\
         __global__ void b(float* out, int n) {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    // NOLINTNEXTLINE(CU001)\n    out[i] = 1.f;\n}\n\
         __global__ void c(float* out, int n) {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    out[i] = 2.f;  // gpulint: ignore[CU001]\n}\n\
         __global__ void d(float* out, int n) {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) out[i] = 3.f;  // NOLINT(CU001)\n}\n",
    );
    write(
        d,
        "t.py",
        "import torch\n\n\ndef walk(node):\n    return [walk(c) for c in node.children]  # noqa: PY001\n\n\ndef walk2(node):\n    return [walk2(c) for c in node.children]  # gpulint: ignore[PY001]\n\n\ndef fine(x):  # noqa: PY001, E501\n    return x\n",
    );
    write(
        d,
        "f.py",
        "# gpulint: ignore-file[PY001] -- generated code\nimport torch\n\n\ndef walk(node):\n    return [walk(c) for c in node.children]\n",
    );
    let out = stdout(&gpulint(
        d,
        &["--output-format", "concise", "--fail-on", "info"],
    ));
    let lines: Vec<&str> = out.lines().collect();
    // Only the stale suppressions remain: the NOLINT on the guarded access in `d`, and the
    // noqa on `fine` (E501 belongs to another tool and is left alone).
    assert_eq!(lines.len(), 2, "{out}");
    assert!(
        lines[0].starts_with(
            "k.cu:16:31: GL001 [info] unused suppression: no CU001 finding on this line"
        ),
        "{out}"
    );
    assert!(
        lines[1].starts_with("t.py:12:15: GL001 [info] unused suppression: no PY001 finding"),
        "{out}"
    );
}

#[test]
fn multi_line_statement_suppression() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(
        d,
        "k.cu",
        "__global__ void a(float* out, const float* x, int n) {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    out[i] =  // NOLINT(CU001)\n        x[i] * 2.f;\n}\n",
    );
    let o = gpulint(d, &["--output-format", "concise", "--fail-on", "info"]);
    assert_eq!(
        stdout(&o),
        "",
        "the suppression on the first line covers the statement"
    );
    assert_eq!(code(&o), 0);
}

#[test]
fn rules_and_explain() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let out = stdout(&gpulint(d, &["rules"]));
    for code in [
        "GL001", "GL002", "GL003", "PY001", "TF001", "TF002", "CU001", "CU002",
    ] {
        assert!(out.contains(code), "{code} listed");
    }
    let json: serde_json::Value =
        serde_json::from_str(&stdout(&gpulint(d, &["rules", "--output-format", "json"]))).unwrap();
    let first = &json.as_array().unwrap()[0];
    for k in ["code", "name", "severity", "language", "summary"] {
        assert!(first.get(k).is_some(), "{k}");
    }
    let by_code = stdout(&gpulint(d, &["explain", "CU002"]));
    let by_name = stdout(&gpulint(d, &["explain", "guard-index-mismatch"]));
    assert_eq!(by_code, by_name);
    for section in [
        "## What it does",
        "## Why is this risky?",
        "## Example",
        "## Use instead",
        "## References",
    ] {
        assert!(by_code.contains(section), "{section}");
    }
}

#[test]
fn deterministic_across_thread_counts() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    for i in 0..60 {
        write(
            d,
            &format!("k{i:02}/kernel.cu"),
            "__global__ void k(float* out, int n) {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    out[i] = 0.f;\n    out[i + 1] = 1.f;\n}\n",
        );
        write(
            d,
            &format!("p{i:02}.py"),
            "import torch\n\n\ndef walk(node):\n    return [walk(c) for c in node.children]\n",
        );
    }
    for format in ["json", "sarif", "concise"] {
        let one = stdout(&gpulint(d, &["--threads", "1", "--output-format", format]));
        let four = stdout(&gpulint(d, &["--threads", "4", "--output-format", format]));
        assert_eq!(one, four, "{format}");
        assert!(!one.is_empty());
    }
}

#[test]
fn hostile_inputs_are_reported_never_crash() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(d, "binary.py", b"\x00\x01\x02 not text");
    write(d, "latin1.py", b"import torch\n# caf\xe9\n\ndef walk(node):\n    return [walk(c) for c in node.children]\n");
    write(d, "empty.py", "");
    write(d, "empty.cu", "");
    let deep = format!(
        "import torch\nx = {}1{}\n",
        "(".repeat(100_000),
        ")".repeat(100_000)
    );
    write(d, "deep.py", deep);
    let deep_cu = format!(
        "__global__ void k(float* o) {{ o[0] = {}1{}; }}\n",
        "(".repeat(100_000),
        ")".repeat(100_000)
    );
    write(d, "deep.cu", deep_cu);
    let nested_if = format!(
        "__global__ void k(float* o, int n) {{\n{}o[0] = 1;\n{}}}\n",
        "if (n) {\n".repeat(20_000),
        "}\n".repeat(20_000)
    );
    write(d, "nested.cu", nested_if);
    write(d, "huge.py", vec![b'#'; 11 << 20]);
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(d.join("nowhere.py"), d.join("dangling.py")).unwrap();
        std::fs::create_dir_all(d.join("loop")).unwrap();
        std::os::unix::fs::symlink(d, d.join("loop/back")).unwrap();
        std::os::unix::fs::symlink(d.join("loop"), d.join("loop/self")).unwrap();
    }
    let o = gpulint(d, &["--output-format", "json", "--threads", "2"]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let found = |path: &str, code: &str| {
        v.as_array()
            .unwrap()
            .iter()
            .any(|i| i["path"] == path && i["code"] == code)
    };
    assert!(found("binary.py", "GL002"));
    assert!(found("huge.py", "GL002"));
    assert!(
        found("latin1.py", "PY001"),
        "invalid UTF-8 is decoded lossily and linted"
    );
    #[cfg(unix)]
    assert!(found("dangling.py", "GL002"));
    assert!(
        stderr(&o).contains("skipped binary.py: binary content"),
        "{}",
        stderr(&o)
    );
}

#[cfg(unix)]
#[test]
fn unreadable_file_is_skipped_with_gl002() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let p = write(d, "secret.py", "import torch\n");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o000)).unwrap();
    if std::fs::read(&p).is_ok() {
        // Running as root: permissions do not apply, nothing to test here.
        return;
    }
    let o = gpulint(d, &["--output-format", "concise"]);
    assert_eq!(code(&o), 1);
    assert!(stdout(&o).contains(
        "secret.py:1:1: GL002 [warning] file skipped: cannot read it: permission denied"
    ));
}

/// `--select GL003` reports every file that parses badly, also files no other rule would read.
#[test]
fn select_gl003_reads_every_file() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // Nothing here interests a rule (no needle), and the second line does not parse.
    write(d, "util.cc", "int f(int a) { return a; }\nint g( { ]\n");
    write(d, "fine.cc", "int f(int a) { return a; }\n");
    let o = gpulint(
        d,
        &[
            "--select",
            "GL003",
            "--output-format",
            "concise",
            "--no-cache",
        ],
    );
    let out = stdout(&o);
    assert!(out.contains("util.cc:2:"), "{out}");
    assert!(out.contains("GL003"), "{out}");
    assert!(!out.contains("fine.cc"), "{out}");
    // Selected among others, the cheap prefilter stays: no parse-error note for a file that
    // nothing else reads.
    let o = gpulint(d, &["--output-format", "concise", "--no-cache"]);
    assert!(!stdout(&o).contains("GL003"), "{}", stdout(&o));
}

/// `--verbose` names each file that was read but not parsed (no enabled rule could match it),
/// in order, with 1 thread and with 2, from disk and from standard input; without
/// `--verbose`, only the summary counts them.
#[test]
fn verbose_names_the_files_not_parsed() {
    let tmp = project();
    let d = tmp.path();
    write(d, "util.cc", "int f(int a) { return a; }\n");
    for threads in ["1", "2"] {
        let o = gpulint(d, &["--no-cache", "--verbose", "--threads", threads, "."]);
        let err = stderr(&o);
        let named: Vec<&str> = err
            .lines()
            .filter_map(|l| l.strip_prefix("not parsed: "))
            .collect();
        // train.py, stale.py and ops/add.cu are parsed: they name what rules look for.
        assert_eq!(named, ["clean.py", "util.cc"], "{err}");
        assert!(
            err.contains("(2 needed no parse: no enabled rule could match them)"),
            "{err}"
        );
    }
    let o = gpulint(d, &["--no-cache", "."]);
    assert!(!stderr(&o).contains("not parsed:"), "{}", stderr(&o));
    let mut child = command(
        d,
        &["--no-cache", "--verbose", "--stdin-filename", "clean.py"],
    )
    .stdin(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .stdout(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    {
        use std::io::Write;
        let mut input = child.stdin.take().unwrap();
        input.write_all(b"import os\n").unwrap();
    }
    let o = child.wait_with_output().unwrap();
    assert!(
        stderr(&o).contains("not parsed: clean.py\n"),
        "{}",
        stderr(&o)
    );
}

/// A rule's findings do not depend on which other rules run: PT004 alone follows a value
/// through a class of another module of the project, as it does beside PT001.
#[test]
fn a_rule_selected_alone_reads_the_project_as_with_every_rule() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::create_dir(d.join(".git")).unwrap();
    write(
        d,
        "trainer.py",
        "import torch\n\n\nclass Trainer:\n    def __init__(self, model, optimizer):\n        self.model = model\n        self.optimizer = optimizer\n\n    def train_step(self, x, y):\n        self.optimizer.zero_grad()\n        loss = self.model(x, y)\n        loss.backward()\n        self.optimizer.step()\n        return loss\n",
    );
    write(
        d,
        "main.py",
        "import torch\n\nfrom trainer import Trainer\n\n\ndef run(loader, model, optimizer, aux):\n    trainer = Trainer(model, optimizer)\n    total = 0\n    for x, y in loader:\n        out = trainer.train_step(x, y)\n        extra = aux(x)\n        extra.backward(retain_graph=True)\n        total += out\n    return total\n",
    );
    let pt004 = |extra: &[&str]| {
        let mut args = vec![
            "check",
            "--no-cache",
            "--output-format",
            "concise",
            "main.py",
        ];
        args.extend_from_slice(extra);
        let out = command(d, &args).output().unwrap();
        stdout(&out)
            .lines()
            .find(|l| l.contains("PT004"))
            .map(str::to_string)
    };
    let with_every_rule = pt004(&[]).expect("PT004 reports");
    // The value kept across iterations makes it a warning.
    assert!(with_every_rule.contains("[warning]"), "{with_every_rule}");
    assert_eq!(pt004(&["--select", "PT004"]), Some(with_every_rule));
}
