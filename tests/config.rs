//! Configuration discovered per file: the nearest `gpulint.toml`, `.gpulint.toml` or
//! `pyproject.toml` with `[tool.gpulint]` in a file's folder or above applies to it, whatever
//! folder the command runs from; `extend` chains; `--config` and `--isolated`; the cache in
//! the project's folder; and the commands that must agree with `cd project && gpulint .`
//! (file lists as pre-commit passes them, shards, `estimate`).

mod common;

use common::{code, gpulint, stderr, stdout, write};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// 20000 × 20000 float32 on the GPU: 1.5 GiB, a huge tensor (MEM002) for a 2 GiB budget only.
const HUGE: &str = "import torch\nx = torch.randn(20000, 20000, device=\"cuda\")\n";
/// Unbounded recursion over a tree (PY001).
const RECURSIVE: &str = "import torch\n\n\ndef walk(node):\n    return [walk(c) for c in node.children]\n\n\nmodel = torch.nn.Linear(4, 4)\n";
/// A kernel without a bounds guard (CU001).
const KERNEL: &str = "__global__ void add(const float* a, const float* b, float* out, int n) {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    out[i] = a[i] + b[i];\n}\n";
/// A suppression of a code that does not exist (GL001, info).
const STALE: &str = "import torch\n\nx = torch.zeros(3)  # gpulint: ignore[ZZ999]\n";

fn real(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap()
}

/// A project whose `pyproject.toml` sets a 2 GiB budget and ignores PY001 in `legacy/`, with
/// a nested `ops/gpulint.toml` that turns CU001 off, and a folder it excludes.
fn project() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(
        d,
        "project/pyproject.toml",
        "[project]\nname = \"p\"\n\n[tool.gpulint]\ngpu-memory = \"2GiB\"\nfail-on = \"info\"\n\n[tool.gpulint.per-file-ignores]\n\"legacy/*.py\" = [\"PY001\"]\n",
    );
    write(d, "project/train.py", HUGE);
    write(d, "project/walk.py", RECURSIVE);
    write(d, "project/legacy/walk.py", RECURSIVE);
    write(d, "project/stale.py", STALE);
    write(d, "project/ops/add.cu", KERNEL);
    write(
        d,
        "project/ops/gpulint.toml",
        "extend = \"../pyproject.toml\"\nignore = [\"CU001\"]\nextend-exclude = [\"generated\"]\n",
    );
    write(d, "project/ops/generated/walk.py", RECURSIVE);
    write(d, "project/ops/sub/add.cu", KERNEL);
    write(d, "project/ops/sub/walk.py", RECURSIVE);
    write(d, "elsewhere/readme.txt", "not a project\n");
    tmp
}

/// The JSON findings of `gpulint ARGS` in `dir`, with the paths made relative to `project`
/// (so that runs from different folders compare). Fingerprints are kept: they hash the path
/// relative to the project's folder, so they must not depend on where gpulint runs.
fn findings(dir: &Path, project: &Path, args: &[&str]) -> (i32, Vec<Value>) {
    let mut all = vec!["--no-cache", "--output-format", "json"];
    all.extend_from_slice(args);
    let o = gpulint(dir, &all);
    let mut v: Vec<Value> = serde_json::from_str(&stdout(&o))
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout(&o), stderr(&o)));
    let prefix = format!("{}/", real(project).display());
    let from_dir = real(dir);
    for f in &mut v {
        let path = f["path"].as_str().unwrap().to_string();
        let absolute = if Path::new(&path).is_absolute() {
            PathBuf::from(&path)
        } else {
            from_dir.join(&path)
        };
        let absolute = std::fs::canonicalize(&absolute).unwrap_or(absolute);
        let relative = absolute
            .display()
            .to_string()
            .strip_prefix(&prefix)
            .unwrap_or_else(|| panic!("{} is not in {prefix}", absolute.display()))
            .to_string();
        f["path"] = Value::String(relative);
    }
    v.sort_by_key(|f| {
        (
            f["path"].as_str().unwrap().to_string(),
            f["line"].as_u64(),
            f["code"].as_str().unwrap().to_string(),
        )
    });
    (code(&o), v)
}

fn codes_at(v: &[Value], path: &str) -> Vec<String> {
    v.iter()
        .filter(|f| f["path"] == path)
        .map(|f| f["code"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_project_checked_from_elsewhere_gives_the_same_findings() {
    let tmp = project();
    let p = tmp.path().join("project");
    let (inside_code, inside) = findings(&p, &p, &["."]);
    // The project's budget (2 GiB) and its per-file ignores apply; the nested file's do in
    // its folder.
    assert_eq!(codes_at(&inside, "train.py"), ["MEM002"], "{inside:#?}");
    assert!(
        inside
            .iter()
            .any(|f| f["message"].as_str().unwrap().contains("2 GiB")),
        "{inside:#?}"
    );
    assert_eq!(codes_at(&inside, "walk.py"), ["PY001"]);
    assert!(codes_at(&inside, "legacy/walk.py").is_empty());
    assert_eq!(codes_at(&inside, "stale.py"), ["GL001"]);
    assert!(codes_at(&inside, "ops/add.cu").is_empty(), "{inside:#?}");
    assert!(codes_at(&inside, "ops/sub/add.cu").is_empty());
    assert_eq!(codes_at(&inside, "ops/sub/walk.py"), ["PY001"]);
    assert!(codes_at(&inside, "ops/generated/walk.py").is_empty());
    // `fail-on = "info"` of the project: GL001 alone fails the run.
    assert_eq!(inside_code, 1);

    let elsewhere = tmp.path().join("elsewhere");
    let abs = real(&p).display().to_string();
    let (c, from_elsewhere) = findings(&elsewhere, &p, &[&abs]);
    assert_eq!(from_elsewhere, inside);
    assert_eq!(c, inside_code);
    let (c, relative) = findings(&elsewhere, &p, &["../project"]);
    assert_eq!(relative, inside);
    assert_eq!(c, inside_code);
    // From a subfolder, the files there have the same findings as in the whole run.
    let (_, sub) = findings(&p.join("ops"), &p, &["."]);
    let whole_ops: Vec<Value> = inside
        .iter()
        .filter(|f| f["path"].as_str().unwrap().starts_with("ops/"))
        .cloned()
        .collect();
    assert_eq!(sub, whole_ops);
    // No cache was written anywhere (--no-cache).
    assert!(!elsewhere.join(".gpulint_cache").exists());
}

/// The files of the project, as `git ls-files` lists them (pre-commit passes such lists).
fn file_list(p: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![p.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path.strip_prefix(p).unwrap().display().to_string());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn file_lists_as_pre_commit_passes_them_give_the_same_findings() {
    let tmp = project();
    let p = tmp.path().join("project");
    let (_, whole) = findings(&p, &p, &["."]);
    let files = file_list(&p);
    // The hook's command line: `gpulint check --force-exclude -- FILES`.
    let mut args = vec!["check", "--force-exclude", "--"];
    args.extend(files.iter().map(String::as_str));
    let (_, listed) = findings(&p, &p, &args);
    assert_eq!(listed, whole);
    // Split over two processes (as pre-commit does without `require_serial`): together the
    // same findings.
    let (a, b) = files.split_at(files.len() / 2);
    let mut joined = Vec::new();
    for part in [a, b] {
        let mut args = vec!["check", "--force-exclude", "--"];
        args.extend(part.iter().map(String::as_str));
        joined.extend(findings(&p, &p, &args).1);
    }
    joined.sort_by_key(|f| {
        (
            f["path"].as_str().unwrap().to_string(),
            f["line"].as_u64(),
            f["code"].as_str().unwrap().to_string(),
        )
    });
    assert_eq!(joined, whole);
}

#[test]
fn nested_configuration_files_apply_to_their_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(d, "gpulint.toml", "ignore = [\"PY001\"]\n");
    write(d, "walk.py", RECURSIVE);
    write(d, "gen/walk.py", RECURSIVE);
    // A nested file on its own (no `extend`): only its own keys, the defaults otherwise.
    write(
        d,
        "research/.gpulint.toml",
        "select = [\"PY\"]\nexclude = [\"gen\"]\n",
    );
    write(d, "research/walk.py", RECURSIVE);
    write(d, "research/add.cu", KERNEL);
    write(d, "research/gen/walk.py", RECURSIVE);
    // A pyproject.toml without a [tool.gpulint] table configures nothing.
    write(
        d,
        "research/deep/pyproject.toml",
        "[project]\nname = \"deep\"\n",
    );
    write(d, "research/deep/walk.py", RECURSIVE);
    let (_, v) = findings(d, d, &["."]);
    let paths: Vec<&str> = v.iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert_eq!(
        paths,
        ["research/deep/walk.py", "research/walk.py"],
        "{v:#?}"
    );
    // `exclude` of the nested file is relative to it: the top-level `gen` is walked.
    write(d, "gen/walk.py", STALE);
    let (_, v) = findings(d, d, &["--fail-on", "info", "."]);
    assert_eq!(codes_at(&v, "gen/walk.py"), ["GL001"]);
    // Named on the command line, a file gets its own folder's configuration too.
    let (_, v) = findings(d, d, &["research/add.cu", "walk.py", "research/walk.py"]);
    assert_eq!(codes_at(&v, "research/walk.py"), ["PY001"]);
    assert!(codes_at(&v, "walk.py").is_empty() && codes_at(&v, "research/add.cu").is_empty());
}

#[test]
fn extend_chains_build_on_each_other_relative_to_each_file() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // base.toml (not a name discovery looks for) → shared/mid.toml → app/gpulint.toml.
    write(
        d,
        "base.toml",
        "gpu-memory = \"2GiB\"\nignore = [\"GL001\"]\n[per-file-ignores]\n\"app/legacy/*.py\" = [\"PY001\"]\n",
    );
    write(
        d,
        "shared/mid.toml",
        "extend = \"../base.toml\"\nextend-exclude = [\"skip\"]\n",
    );
    write(
        d,
        "app/gpulint.toml",
        "extend = \"../shared/mid.toml\"\nfail-on = \"error\"\n",
    );
    write(d, "app/train.py", HUGE);
    write(d, "app/stale.py", STALE);
    write(d, "app/legacy/walk.py", RECURSIVE);
    write(d, "app/walk.py", RECURSIVE);
    // `skip` is relative to shared/: it excludes shared/skip and, by name, app/skip.
    write(d, "app/skip/walk.py", RECURSIVE);
    let app = d.join("app");
    let (c, v) = findings(&app, &app, &["."]);
    // The budget of base.toml, its ignores (relative to its own folder), fail-on of app.
    assert_eq!(codes_at(&v, "train.py"), ["MEM002"], "{v:#?}");
    assert!(codes_at(&v, "stale.py").is_empty());
    assert!(codes_at(&v, "legacy/walk.py").is_empty());
    assert_eq!(codes_at(&v, "walk.py"), ["PY001"]);
    assert!(codes_at(&v, "skip/walk.py").is_empty());
    assert_eq!(c, 0, "fail-on = error: warnings do not fail the run");
    // The budget's origin names the file that set it.
    let msg = v.iter().find(|f| f["code"] == "MEM002").unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    let notes = v.iter().find(|f| f["code"] == "MEM002").unwrap()["notes"].to_string();
    assert!(
        msg.contains("base.toml") || notes.contains("base.toml"),
        "{msg} {notes}"
    );
    // A `select` in the extending file starts the selection again.
    write(
        d,
        "app/gpulint.toml",
        "extend = \"../shared/mid.toml\"\nselect = [\"GL\"]\nfail-on = \"info\"\n",
    );
    let (_, v) = findings(&app, &app, &["."]);
    let codes: Vec<&str> = v.iter().map(|f| f["code"].as_str().unwrap()).collect();
    assert_eq!(codes, ["GL001"], "{v:#?}");
}

#[test]
fn extend_cycles_and_missing_files_are_usage_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(d, "walk.py", RECURSIVE);
    write(d, "gpulint.toml", "extend = \"configs/a.toml\"\n");
    write(d, "configs/a.toml", "extend = \"b.toml\"\n");
    write(d, "configs/b.toml", "extend = \"a.toml\"\n");
    let o = gpulint(d, &["--no-cache", "."]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("cycle") && e.contains("a.toml -> ") && e.contains("b.toml"),
        "{e}"
    );
    // A file that extends itself.
    write(d, "gpulint.toml", "extend = \"gpulint.toml\"\n");
    let e = stderr(&gpulint(d, &["--no-cache", "."]));
    assert!(e.contains("cycle"), "{e}");
    // A file that is not there: named, with the file that names it.
    write(d, "gpulint.toml", "extend = \"nope.toml\"\n");
    let o = gpulint(d, &["--no-cache", "."]);
    assert_eq!(code(&o), 2);
    let e = stderr(&o);
    assert!(e.contains("nope.toml") && e.contains("gpulint.toml"), "{e}");
    // A mistake in an extended file names that file.
    write(d, "gpulint.toml", "extend = \"configs/c.toml\"\n");
    write(d, "configs/c.toml", "selct = [\"PY\"]\n");
    let e = stderr(&gpulint(d, &["--no-cache", "."]));
    assert!(e.contains("c.toml") && e.contains("selct"), "{e}");
}

#[test]
fn config_flag_overrides_discovery_and_isolated_ignores_all() {
    let tmp = project();
    let p = tmp.path().join("project");
    write(&p, "other.toml", "select = [\"PY\", \"CU\"]\n");
    // --config: one file for every file, nested ones included.
    let (_, v) = findings(&p, &p, &["--config", "other.toml", "."]);
    assert_eq!(codes_at(&v, "ops/add.cu"), ["CU001"], "{v:#?}");
    assert_eq!(codes_at(&v, "legacy/walk.py"), ["PY001"]);
    assert!(codes_at(&v, "train.py").is_empty(), "the default budget");
    // ops/generated is excluded only by ops/gpulint.toml.
    assert_eq!(codes_at(&v, "ops/generated/walk.py"), ["PY001"]);
    // From elsewhere, the same.
    let other = real(&p.join("other.toml")).display().to_string();
    let abs = real(&p).display().to_string();
    let (_, w) = findings(
        &tmp.path().join("elsewhere"),
        &p,
        &["--config", &other, &abs],
    );
    assert_eq!(w, v);
    // --isolated: no file at all.
    let (_, v) = findings(&p, &p, &["--isolated", "--fail-on", "info", "."]);
    assert_eq!(codes_at(&v, "ops/add.cu"), ["CU001"]);
    assert_eq!(codes_at(&v, "legacy/walk.py"), ["PY001"]);
    assert!(codes_at(&v, "train.py").is_empty());
}

#[test]
fn a_pyproject_that_is_not_toml_is_a_finding_wherever_it_is() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(d, "walk.py", RECURSIVE);
    write(d, "pyproject.toml", "[project\nname = \"broken\"\n");
    write(d, "sub/pyproject.toml", "[project\nname = \"broken\"\n");
    write(d, "sub/walk.py", RECURSIVE);
    // Never a configuration error: GL002 for each, in the working directory as below it.
    let (c, v) = findings(d, d, &["."]);
    assert_eq!(c, 1);
    assert_eq!(codes_at(&v, "pyproject.toml"), ["GL002"], "{v:#?}");
    assert_eq!(codes_at(&v, "sub/pyproject.toml"), ["GL002"]);
    assert_eq!(codes_at(&v, "walk.py"), ["PY001"]);
    assert_eq!(codes_at(&v, "sub/walk.py"), ["PY001"]);
    let (_, from_sub) = findings(&d.join("sub"), d, &["."]);
    assert_eq!(codes_at(&from_sub, "sub/pyproject.toml"), ["GL002"]);
    assert_eq!(codes_at(&from_sub, "sub/walk.py"), ["PY001"]);
    // One that declares [tool.gpulint] is a configuration, and a broken one: exit 2, named.
    write(
        d,
        "sub/pyproject.toml",
        "[tool.gpulint\nselect = [\"PY\"]\n",
    );
    let o = gpulint(d, &["--no-cache", "."]);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains(&format!("{}", real(d).join("sub/pyproject.toml").display())),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_broken_nested_configuration_is_reported_with_its_path() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(d, "walk.py", RECURSIVE);
    write(d, "team/gpulint.toml", "fail-on = \"fatal\"\n");
    write(d, "team/walk.py", RECURSIVE);
    let o = gpulint(d, &["--no-cache", "."]);
    assert_eq!(code(&o), 2);
    let e = stderr(&o);
    assert!(
        e.contains(&real(d).join("team/gpulint.toml").display().to_string())
            && e.contains("fail-on"),
        "{e}"
    );
    // Files outside its folder do not need it.
    assert_eq!(code(&gpulint(d, &["--no-cache", "walk.py"])), 1);
}

#[test]
fn shards_of_a_run_with_nested_configuration_merge_into_the_unsharded_report() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/link");
    for rel in ["setup.py", "csrc/kernel.cu", "csrc/binding.cpp"] {
        write(d, rel, std::fs::read(fixtures.join(rel)).unwrap());
    }
    write(d, "walk.py", RECURSIVE);
    write(d, "more/add.cu", KERNEL);
    write(d, "more/walk.py", RECURSIVE);
    write(d, "more/gpulint.toml", "ignore = [\"PY001\"]\n");
    // The kernel that setup.py builds is checked with its own folder's configuration.
    write(
        d,
        "csrc/gpulint.toml",
        "select = [\"CU\", \"GL\"]\nfail-on = \"error\"\n",
    );
    let run = |extra: &[&str], out: &Path| {
        let o_arg = out.display().to_string();
        let mut args = vec![
            "check",
            "--no-cache",
            "--quiet",
            "--exit-zero",
            "--output-format",
            "json",
            "-o",
            &o_arg,
        ];
        args.extend_from_slice(extra);
        let o = gpulint(d, &args);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        std::fs::read_to_string(out).unwrap()
    };
    let reports = tempfile::tempdir().unwrap();
    let whole = run(&["."], &reports.path().join("whole.json"));
    let v: Vec<Value> = serde_json::from_str(&whole).unwrap();
    let at = |p: &str| codes_at(&v, p);
    assert_eq!(at("walk.py"), ["PY001"]);
    assert!(at("more/walk.py").is_empty(), "{v:#?}");
    assert_eq!(at("more/add.cu"), ["CU001"]);
    assert!(
        at("csrc/kernel.cu").contains(&"CU001".to_string()),
        "{v:#?}"
    );
    for n in [2, 3] {
        let mut parts = Vec::new();
        for i in 1..=n {
            let p = reports.path().join(format!("{i}-of-{n}.json"));
            run(&["--shard", &format!("{i}/{n}"), "."], &p);
            parts.push(p.display().to_string());
        }
        let merged = reports.path().join(format!("merged-{n}.json"));
        let m = merged.display().to_string();
        let mut args = vec!["merge", "--quiet", "--exit-zero", "-o", &m];
        args.extend(parts.iter().map(String::as_str));
        let o = gpulint(d, &args);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        assert_eq!(
            std::fs::read_to_string(&merged).unwrap(),
            whole,
            "{n} shards"
        );
    }
    // `setup.py` alone: the kernel it builds still has csrc's configuration.
    let (_, v) = findings(d, d, &["setup.py"]);
    let (_, all) = findings(d, d, &["."]);
    let kernel = |v: &[Value]| -> Vec<Value> {
        v.iter()
            .filter(|f| f["path"] == "csrc/kernel.cu")
            .cloned()
            .collect()
    };
    assert_eq!(kernel(&v), kernel(&all));
    // The exit code: csrc/gpulint.toml fails only on errors.
    write(d, "csrc/gpulint.toml", "select = [\"GL\"]\n");
    let (_, v) = findings(d, d, &["setup.py"]);
    assert!(kernel(&v).is_empty(), "{v:#?}");
}

fn cache_dirs(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                if p.file_name().unwrap() == ".gpulint_cache" {
                    out.push(p.strip_prefix(root).unwrap().display().to_string());
                } else {
                    stack.push(p);
                }
            }
        }
    }
    out.sort();
    out
}

#[test]
fn the_cache_goes_next_to_the_project_root() {
    let tmp = project();
    let d = tmp.path();
    let abs = real(&d.join("project")).display().to_string();
    // The configuration file's folder, not the working directory.
    let o = gpulint(&d.join("elsewhere"), &["-q", "--exit-zero", &abs]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(cache_dirs(d), ["project/.gpulint_cache"]);
    // The same run from a subfolder uses the same cache.
    let o = gpulint(&d.join("project/legacy"), &["-q", "--exit-zero", "."]);
    assert_eq!(code(&o), 0);
    assert_eq!(cache_dirs(d), ["project/.gpulint_cache"]);
    // Without a configuration file: the repository's folder, else the checked path's.
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(d, "repo/.git/HEAD", "ref: refs/heads/main\n");
    write(d, "repo/src/walk.py", RECURSIVE);
    write(d, "plain/walk.py", RECURSIVE);
    std::fs::create_dir_all(d.join("cwd")).unwrap();
    let cwd = d.join("cwd");
    let src = real(&d.join("repo/src")).display().to_string();
    assert_eq!(code(&gpulint(&cwd, &["-q", &src])), 1);
    let plain = real(&d.join("plain")).display().to_string();
    assert_eq!(code(&gpulint(&cwd, &["-q", &plain])), 1);
    assert_eq!(
        cache_dirs(d),
        ["plain/.gpulint_cache", "repo/.gpulint_cache"]
    );
}

#[test]
fn a_changed_nested_configuration_is_not_hidden_by_the_cache() {
    let tmp = project();
    let p = tmp.path().join("project");
    let run = || {
        let o = gpulint(&p, &["--output-format", "concise", "."]);
        stdout(&o)
    };
    let before = run();
    assert!(!before.contains("ops/add.cu"), "{before}");
    assert_eq!(run(), before, "the cached run gives the same findings");
    // Only the nested file changes: its folder's files are checked again.
    write(&p, "ops/gpulint.toml", "extend = \"../pyproject.toml\"\n");
    let after = run();
    assert!(
        after.contains("ops/add.cu") && after.contains("CU001"),
        "{after}"
    );
    // And the extended file: a change there reaches the files of the extending one.
    write(
        &p,
        "pyproject.toml",
        "[tool.gpulint]\nignore = [\"CU001\"]\n",
    );
    let again = run();
    assert!(!again.contains("CU001"), "{again}");
}

#[test]
fn estimate_reads_the_configuration_of_its_file() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(d, "project/gpulint.toml", "gpu-memory = \"3GiB\"\n");
    write(
        d,
        "project/train.py",
        "from tensorflow import keras\nfrom tensorflow.keras import layers\n\nmodel = keras.Sequential([\n    keras.Input(shape=(32, 32, 3)),\n    layers.Flatten(),\n    layers.Dense(10),\n])\nmodel.compile(optimizer=\"adam\", loss=\"mse\")\nmodel.fit(x, y, batch_size=32)\n",
    );
    std::fs::create_dir_all(d.join("elsewhere")).unwrap();
    let file = real(&d.join("project/train.py")).display().to_string();
    for dir in [d.join("elsewhere"), d.join("project")] {
        let o = gpulint(&dir, &["estimate", "--output-format", "json", &file]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert_eq!(v["budget_bytes"], 3u64 << 30, "{v:#}");
        assert!(
            v["budget_source"]
                .as_str()
                .unwrap()
                .contains("gpulint.toml"),
            "{v:#}"
        );
    }
}

#[test]
fn standard_input_takes_the_configuration_of_the_file_it_stands_for() {
    use std::io::Write;
    let tmp = project();
    let p = tmp.path().join("project");
    let with_stdin = |dir: &Path, name: &str| {
        let mut child = common::command(
            dir,
            &["--output-format", "concise", "--stdin-filename", name],
        )
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(KERNEL.as_bytes())
            .unwrap();
        stdout(&child.wait_with_output().unwrap())
    };
    // Under ops/ (CU001 ignored there), and at the top (not ignored).
    assert!(!with_stdin(&p, "ops/new.cu").contains("CU001"));
    assert!(with_stdin(&p, "new.cu").contains("CU001"));
    // From elsewhere, the same.
    let ops = real(&p).join("ops/new.cu").display().to_string();
    assert!(!with_stdin(&tmp.path().join("elsewhere"), &ops).contains("CU001"));
}
