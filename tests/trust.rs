//! Inputs and writes that used to lose findings, hang, or damage files: each case is a
//! reproducer of a reported problem.

mod common;

use common::{code, gpulint, stderr, stdout, write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const KERNEL: &str = "__global__ void relu(const float* x, float* y, int n) {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    y[i] = x[i] > 0.f ? x[i] : 0.f;\n}\n";

const CONDA: &str =
    "name: seg\ndependencies:\n  - python=3.12\n  - pip\n  - pip:\n    - tensorflow==2.15.0\n";

/// (code, line, column) of every finding in a JSON report.
fn findings(json: &str) -> Vec<(String, u64, u64)> {
    let v: serde_json::Value = serde_json::from_str(json).expect("JSON output");
    v.as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["code"].as_str().unwrap().to_string(),
                d["line"].as_u64().unwrap(),
                d["column"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn json(dir: &Path, args: &[&str]) -> Vec<(String, u64, u64)> {
    let mut all = vec!["--isolated", "--no-cache", "--output-format", "json"];
    all.extend_from_slice(args);
    let o = gpulint(dir, &all);
    assert!(code(&o) < 2, "{}", stderr(&o));
    findings(&stdout(&o))
}

/// Runs gpulint and fails the test if it takes longer than `limit` (a hang).
fn run_bounded(dir: &Path, args: &[&str], limit: Duration) -> std::process::Output {
    let mut child = common::command(dir, args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("gpulint {args:?} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(unix)]
fn mkfifo(path: &Path) -> bool {
    Command::new("mkfifo")
        .arg(path)
        .status()
        .is_ok_and(|s| s.success())
}

#[cfg(unix)]
#[test]
fn fifos_never_block_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(d, "requirements.txt", "-r other.txt\ntensorflow==2.15.0\n");
    if !mkfifo(&d.join("other.txt")) || !mkfifo(&d.join("pipe.py")) {
        return;
    }
    let limit = Duration::from_secs(30);
    let o = run_bounded(d, &["--isolated", "--no-cache", "."], limit);
    assert!(code(&o) < 2, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("pipe.py: not a regular file"),
        "{}",
        stderr(&o)
    );
    let o = run_bounded(d, &["--isolated", "--no-cache", "requirements.txt"], limit);
    assert!(code(&o) < 2, "{}", stderr(&o));
    // Named on the command line, a FIFO or a device is said to be skipped, not passed over.
    let o = run_bounded(d, &["--isolated", "--no-cache", "pipe.py"], limit);
    assert!(code(&o) < 2, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("pipe.py: not a regular file"),
        "{}",
        stderr(&o)
    );
    if std::path::Path::new("/dev/null").exists() {
        let o = run_bounded(d, &["--isolated", "--no-cache", "/dev/null"], limit);
        assert!(code(&o) < 2, "{}", stderr(&o));
        assert!(
            stderr(&o).contains("/dev/null: not a regular file (a FIFO, socket or device)"),
            "{}",
            stderr(&o)
        );
    }
    let o = run_bounded(d, &["estimate", "pipe.py"], limit);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("not a regular file (a FIFO)"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn lone_cr_line_ends_are_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(d, "lf/k.cu", KERNEL);
    write(d, "cr/k.cu", KERNEL.replace('\n', "\r"));
    let lf = json(d, &["lf"]);
    assert!(!lf.is_empty(), "the kernel has findings");
    assert_eq!(json(d, &["cr"]), lf);
}

#[test]
fn a_byte_order_mark_changes_no_position_and_loses_no_finding() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(d, "plain/k.cu", KERNEL);
    write(d, "bom/k.cu", format!("\u{feff}{KERNEL}"));
    write(d, "plain/environment.yml", CONDA);
    write(d, "bom/environment.yml", format!("\u{feff}{CONDA}"));
    let plain = json(d, &["plain"]);
    assert!(plain.iter().any(|f| f.0 == "MF001"), "{plain:?}");
    assert!(plain.iter().any(|f| f.0.starts_with("CU")), "{plain:?}");
    assert_eq!(json(d, &["bom"]), plain);
}

#[test]
fn overlapping_paths_check_each_file_once() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(d, "sub/k.cu", KERNEL);
    let once = json(d, &["sub"]);
    assert!(!once.is_empty());
    assert_eq!(json(d, &[".", "sub"]), once);
    assert_eq!(json(d, &["sub/k.cu", "./sub/k.cu"]), once);
}

#[cfg(unix)]
#[test]
fn links_to_directories_are_mentioned() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(d, "real/k.cu", KERNEL);
    std::os::unix::fs::symlink(d.join("real"), d.join("linked")).unwrap();
    let o = gpulint(d, &["--isolated", "--no-cache", "--verbose", "."]);
    assert!(
        stderr(&o).contains("linked: a link to a directory, not followed"),
        "{}",
        stderr(&o)
    );
}

#[cfg(unix)]
#[test]
fn add_noqa_writes_through_links_and_keeps_the_file() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let target = write(d, "src/k.cu", KERNEL);
    std::os::unix::fs::symlink(&target, d.join("k_link.cu")).unwrap();
    std::fs::hard_link(&target, d.join("k_hard.cu.txt")).unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o640)).unwrap();
    let before = std::fs::metadata(&target).unwrap();
    let o = gpulint(d, &["--isolated", "--no-cache", "--add-noqa", "k_link.cu"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(std::fs::symlink_metadata(d.join("k_link.cu"))
        .unwrap()
        .file_type()
        .is_symlink());
    let text = std::fs::read_to_string(&target).unwrap();
    assert!(text.contains("// NOLINT(CU001)"), "{text}");
    // The hard link sees the same content: same inode, same mode, same owner.
    assert_eq!(
        std::fs::read_to_string(d.join("k_hard.cu.txt")).unwrap(),
        text
    );
    let after = std::fs::metadata(&target).unwrap();
    assert_eq!(after.ino(), before.ino());
    assert_eq!(after.mode(), before.mode());
    assert_eq!((after.uid(), after.gid()), (before.uid(), before.gid()));
}

#[cfg(unix)]
#[test]
fn add_noqa_refuses_read_only_files_loudly() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let k = write(d, "k.cu", KERNEL);
    std::fs::set_permissions(&k, std::fs::Permissions::from_mode(0o444)).unwrap();
    let o = gpulint(d, &["--isolated", "--no-cache", "--add-noqa", "k.cu"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("read-only"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&k).unwrap(), KERNEL);
}

#[test]
fn add_noqa_reasons_cannot_inject_code() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let k = write(d, "k.cu", KERNEL);
    for reason in ["--add-noqa=x\nimport os", "--add-noqa=trailing \\"] {
        let o = gpulint(d, &["--isolated", "--no-cache", reason, "k.cu"]);
        assert_eq!(code(&o), 2, "{reason:?}: {}", stderr(&o));
        assert_eq!(std::fs::read_to_string(&k).unwrap(), KERNEL);
    }
}

#[test]
fn add_noqa_on_crlf_lines_ending_in_a_comment() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let src = KERNEL
        .replace(
            "    y[i] = x[i] > 0.f ? x[i] : 0.f;\n",
            "    y[i] = x[i] > 0.f ? x[i] : 0.f;  // relu\n",
        )
        .replace('\n', "\r\n");
    let k = write(d, "k.cu", &src);
    let o = gpulint(d, &["--isolated", "--no-cache", "--add-noqa", "k.cu"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let text = std::fs::read_to_string(&k).unwrap();
    assert!(text.contains("// relu  // NOLINT(CU001)\r\n"), "{text:?}");
    // Nothing is left to report.
    let o = gpulint(d, &["--isolated", "--no-cache", "k.cu"]);
    assert_eq!(code(&o), 0, "{}", stdout(&o));
}

/// The line of the `.ipynb` file each machine-readable format gives for the first finding of a
/// notebook; they must agree (and no format gives a cell's column as a file column).
#[test]
fn notebook_findings_point_at_the_same_file_line_in_every_format() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let nb = "fixtures/python/TF001_notebook_cells.ipynb";
    let run = |format: &str| {
        let o = gpulint(
            dir,
            &[
                "--isolated",
                "--no-cache",
                "--exit-zero",
                "--output-format",
                format,
                nb,
            ],
        );
        stdout(&o)
    };
    let sarif: serde_json::Value = serde_json::from_str(&run("sarif")).unwrap();
    let region = &sarif["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"];
    let line = region["startLine"].as_u64().unwrap();
    assert!(region.get("startColumn").is_none());
    let github = run("github");
    let first = github.lines().next().unwrap();
    assert!(
        first.contains(&format!(",line={line},endLine={line},")),
        "{first}"
    );
    assert!(!first.contains("col="), "{first}");
    let gitlab: serde_json::Value = serde_json::from_str(&run("gitlab")).unwrap();
    assert_eq!(gitlab[0]["location"]["lines"]["begin"].as_u64(), Some(line));
    let junit = run("junit");
    assert!(junit.contains(&format!("line=\"{line}\"")), "{junit}");
    assert!(junit.contains(" at cell "), "{junit}");
    // The terminal formats and JSON name the cell and its line.
    let json: serde_json::Value = serde_json::from_str(&run("json")).unwrap();
    let cell = json[0]["cell"].as_u64().unwrap();
    let cell_line = json[0]["line"].as_u64().unwrap();
    assert!(run("concise").contains(&format!(":cell {cell}:{cell_line}:")));
    assert!(run("full").contains(&format!(":cell {cell}:{cell_line}:")));
}

#[test]
fn a_mistyped_command_gets_a_suggestion() {
    let tmp = tempfile::tempdir().unwrap();
    let o = gpulint(tmp.path(), &["rule", "CU001"]);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("did you mean `gpulint rules`?"),
        "{}",
        stderr(&o)
    );
    // A folder of that name is a path, not a typo.
    std::fs::create_dir(tmp.path().join("rule")).unwrap();
    let o = gpulint(tmp.path(), &["--isolated", "--no-cache", "rule"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}

fn with_stdin(dir: &Path, args: &[&str], input: &[u8]) -> std::process::Output {
    use std::io::Write;
    let mut child = common::command(dir, args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        // The reader may stop early (over the limit): a broken pipe is expected then.
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

#[test]
fn standard_input_is_bounded_and_exclusive() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let big = vec![b'#'; 11 << 20];
    let o = with_stdin(d, &["--isolated", "--stdin-filename", "a.py"], &big);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("over the 10 MiB"), "{}", stderr(&o));
    let o = with_stdin(
        d,
        &["--isolated", "--stdin-filename", "a.py", "other.py"],
        b"x = 1\n",
    );
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("remove the path `other.py`"),
        "{}",
        stderr(&o)
    );
    let o = with_stdin(
        d,
        &["--isolated", "--stdin-filename", "a.py", "-"],
        b"x = 1\n",
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}

#[test]
fn estimate_says_what_is_wrong_with_its_input() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(d, "k.cu", KERNEL);
    write(d, "broken.ipynb", "{not json");
    let o = gpulint(d, &["estimate", "k.cu"]);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("not a Python file or notebook"),
        "{}",
        stderr(&o)
    );
    let o = gpulint(d, &["estimate", "broken.ipynb"]);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("not valid notebook JSON"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn escape_bytes_from_the_source_never_reach_the_terminal() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let src = KERNEL.replace("int n)", "int n) /* \u{1b}]0;owned\u{7} \u{1b}[2J */");
    write(d, "k\u{1b}[31m.cu", &src);
    for format in ["full", "concise"] {
        let o = gpulint(
            d,
            &["--isolated", "--no-cache", "--output-format", format, "."],
        );
        assert_eq!(code(&o), 1, "{}", stderr(&o));
        let out = stdout(&o);
        assert!(
            !out.contains('\u{1b}') && !out.contains('\u{7}'),
            "{format}: {out:?}"
        );
        assert!(out.contains("CU001"), "{out}");
    }
}

#[test]
fn a_cache_changed_on_disk_never_changes_the_findings() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(d, "gpulint.toml", "");
    write(d, "k.cu", KERNEL);
    let args = ["--output-format", "json", "--exit-zero", "."];
    let fresh = stdout(&gpulint(d, &args));
    assert!(fresh.contains("CU001"), "{fresh}");
    let cache = std::fs::read_dir(d.join(".gpulint_cache"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .expect("a cache file");
    let original = std::fs::read(&cache).unwrap();
    let files_at = original
        .windows(8)
        .position(|w| w == b"\"files\":")
        .unwrap();
    let digits: Vec<usize> = (files_at..original.len())
        .filter(|&i| original[i].is_ascii_digit())
        .collect();
    // 40 digits spread over the entries: each flipped, the run must report what it did.
    for &i in digits.iter().step_by((digits.len() / 40).max(1)).take(40) {
        let mut bytes = original.clone();
        bytes[i] = if bytes[i] == b'9' { b'0' } else { bytes[i] + 1 };
        std::fs::write(&cache, &bytes).unwrap();
        assert_eq!(
            stdout(&gpulint(d, &args)),
            fresh,
            "digit at byte {i} flipped"
        );
    }
}

/// `gpulint ARGS` in `dir` without the right to read what its mode forbids (as root, the
/// capabilities that override file modes are dropped); `None` where that cannot be arranged.
#[cfg(unix)]
fn gpulint_unprivileged(dir: &Path, args: &[&str]) -> Option<std::process::Output> {
    let probe = tempfile::tempdir().unwrap();
    let locked = probe.path().join("locked");
    std::fs::create_dir(&locked).unwrap();
    set_mode(&locked, 0o000);
    let privileged = std::fs::read_dir(&locked).is_ok();
    set_mode(&locked, 0o755);
    if !privileged {
        return Some(gpulint(dir, args));
    }
    let mut line = String::from(env!("CARGO_BIN_EXE_gpulint"));
    for a in args {
        line.push_str(&format!(" '{}'", a.replace('\'', "'\\''")));
    }
    let o = Command::new("capsh")
        .args([
            "--drop=cap_dac_override,cap_dac_read_search",
            "--",
            "-c",
            &line,
        ])
        .current_dir(dir)
        .output()
        .ok()?;
    // capsh missing or not allowed to drop: nothing to test here.
    (!stderr(&o).contains("capsh") && o.status.code().is_some()).then_some(o)
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[cfg(unix)]
#[test]
fn an_unreadable_directory_is_a_finding() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(d, "ok/k.cu", KERNEL);
    write(d, "locked/k.cu", KERNEL);
    std::os::unix::fs::symlink(d.join("ok"), d.join("linked")).unwrap();
    set_mode(&d.join("locked"), 0o000);
    let args = ["--isolated", "--no-cache", "--output-format", "json"];
    for (path, also) in [(".", true), ("locked", false)] {
        let mut all = args.to_vec();
        all.push(path);
        let Some(o) = gpulint_unprivileged(d, &all) else {
            set_mode(&d.join("locked"), 0o755);
            eprintln!("cannot drop the right to read any file here: not tested");
            return;
        };
        assert_eq!(code(&o), 1, "{path}: {}", stderr(&o));
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        let gl002: Vec<_> = v
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["code"] == "GL002")
            .collect();
        assert_eq!(gl002.len(), 1, "{path}: {v}");
        assert_eq!(gl002[0]["path"], "locked", "{v}");
        let message = gl002[0]["message"].as_str().unwrap();
        assert!(message.contains("permission denied"), "{message}");
        // The walk's other skipped entries are still mentioned.
        if also {
            assert!(
                stderr(&o).contains("linked: a link to a directory"),
                "{}",
                stderr(&o)
            );
        }
    }
    set_mode(&d.join("locked"), 0o755);
}

#[test]
fn notebook_cells_that_cannot_be_read_are_findings() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let cell = |source: &str| {
        format!(r#"{{"cell_type": "code", "metadata": {{}}, "outputs": [], "source": {source}}}"#)
    };
    let nb = format!(
        r#"{{"nbformat": 4, "nbformat_minor": 5, "metadata": {{}}, "cells": [{}, {}, {}, {}]}}"#,
        cell(r#"["import torch\n"]"#),
        cell("42"),
        cell(r#"["x = 1\n", 7]"#),
        r#"{"cell_type": "code", "metadata": {}, "outputs": []}"#,
    );
    write(d, "nb.ipynb", &nb);
    let o = gpulint(
        d,
        &[
            "--isolated",
            "--no-cache",
            "--output-format",
            "json",
            "nb.ipynb",
        ],
    );
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let cells: Vec<(u64, String)> = v
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == "GL002")
        .map(|f| {
            (
                f["cell"].as_u64().unwrap(),
                f["message"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(cells.len(), 3, "{v}");
    assert!(
        cells[0].0 == 2 && cells[0].1.contains("a number"),
        "{cells:?}"
    );
    assert!(
        cells[1].0 == 3 && cells[1].1.contains("not text"),
        "{cells:?}"
    );
    assert!(
        cells[2].0 == 4 && cells[2].1.contains("no `source`"),
        "{cells:?}"
    );
    // The same from the cache.
    write(d, "gpulint.toml", "");
    let run = || stdout(&gpulint(d, &["--output-format", "json", "nb.ipynb"]));
    assert_eq!(run(), stdout(&o));
    assert_eq!(run(), stdout(&o));
}

/// SARIF of a project checked from another working directory: an absolute path is an absolute
/// `file://` URI without `uriBaseId` (an absolute path given as a URI relative to `%SRCROOT%`
/// is SARIF1004, which code scanning rejects); a file below the working directory stays
/// relative to `%SRCROOT%`.
#[test]
fn sarif_locations_outside_the_working_directory_are_absolute_uris() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(d, "project/k.cu", KERNEL);
    std::fs::create_dir_all(d.join("elsewhere")).unwrap();
    let sarif = |cwd: &Path, target: &str| -> serde_json::Value {
        let o = gpulint(
            cwd,
            &[
                "--isolated",
                "--no-cache",
                "--exit-zero",
                "--output-format",
                "sarif",
                target,
            ],
        );
        assert!(code(&o) < 2, "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        v["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"].clone()
    };
    let project = d.join("project").canonicalize().unwrap();
    let outside = sarif(&d.join("elsewhere"), project.to_str().unwrap());
    let uri = outside["uri"].as_str().unwrap();
    assert!(
        uri.starts_with("file:///") && uri.ends_with("/project/k.cu"),
        "{outside}"
    );
    assert!(outside.get("uriBaseId").is_none(), "{outside}");
    let inside = sarif(d, "project");
    assert_eq!(inside["uri"], "project/k.cu", "{inside}");
    assert_eq!(inside["uriBaseId"], "%SRCROOT%", "{inside}");
}

/// The README's install routes exist and say what they need: every `cargo install` builds
/// with `Cargo.lock` (`--locked`), no release tag or version is offered that does not exist,
/// and the prerequisites (Rust 1.85, a C compiler) are stated.
#[test]
fn the_readme_install_routes_are_locked_and_state_their_needs() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let installs: Vec<&str> = readme
        .lines()
        .filter(|l| l.contains("cargo install ") && !l.contains("`cargo install`"))
        .collect();
    assert!(!installs.is_empty());
    for l in installs {
        assert!(l.contains("--locked"), "without --locked: {l}");
    }
    assert!(!readme.contains("rev: v0.1.0"), "a tag that does not exist");
    assert!(
        !readme
            .lines()
            .any(|l| l.trim_end().ends_with("pip install gpulint")),
        "nothing is published on PyPI"
    );
    assert!(readme.contains("Rust 1.85"), "the Rust version needed");
    assert!(readme.contains("C compiler"), "the C compiler needed");
}

/// A file that ends inside an open bracket (cut off, or still being written) made the parser
/// give up on all of it: every finding before the open statement was lost, in silence. Each
/// now keeps its findings, and the open statement is reported as not parsed (GL003).
#[test]
fn a_file_ending_inside_an_open_bracket_keeps_its_findings() {
    const PY: &str = "import torch\nx = torch.zeros(10**12, device=\"cuda\")\n\ndef g():\n    y = torch.zeros(10**12, device=\"cuda\")\n\n";
    const PY_OPEN: &str = "def f(n):\n    net = Seq([\n        Input(shape=(4, 4)),\n";
    const CU_OPEN: &str =
        "__global__ void g(float* y, const float* m, int n) {\n    for (int r = 0; r < n; ++r) {\n        for (int c = threadIdx.x; c < n; c += blockDim.x) {\n            if (r != c) {\n                if (c >= r) y[c] += m[r * n + c];\n";
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(d, "whole/train.py", PY);
    write(d, "open/train.py", format!("{PY}{PY_OPEN}"));
    write(d, "whole/k.cu", KERNEL);
    write(d, "open/k.cu", format!("{KERNEL}{CU_OPEN}"));
    let cell = |src: &str| serde_json::json!({"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": null, "source": src});
    let nb = |cells: Vec<serde_json::Value>| {
        serde_json::json!({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
            .to_string()
    };
    write(d, "whole/nb.ipynb", nb(vec![cell(PY), cell("z = 1\n")]));
    write(
        d,
        "open/nb.ipynb",
        nb(vec![cell(&format!("{PY}{PY_OPEN}")), cell("z = 1\n")]),
    );
    let whole = json(d, &["whole"]);
    assert_eq!(
        whole.iter().filter(|f| f.0 == "MEM002").count(),
        4,
        "{whole:?}"
    );
    assert!(whole.iter().any(|f| f.0 == "CU001"), "{whole:?}");
    // The same findings, and nothing else (GL003 is shown on request).
    assert_eq!(json(d, &["open"]), whole);
    let shown = json(d, &["open", "--extend-select", "GL003"]);
    let open_line = PY.lines().count() as u64 + 2;
    let kernel_line = KERNEL.lines().count() as u64 + 1;
    let gl003: Vec<_> = shown.iter().filter(|f| f.0 == "GL003").collect();
    assert_eq!(gl003.len(), 3, "{shown:?}");
    assert!(gl003.iter().any(|f| f.1 == kernel_line), "{gl003:?}");
    assert_eq!(
        gl003.iter().filter(|f| f.1 == open_line).count(),
        2,
        "{gl003:?}"
    );
}
