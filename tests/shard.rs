//! `gpulint check --shard I/N` and `gpulint merge`: the merged reports of all N shards are the
//! report of one unsharded run, byte for byte (JSON and SARIF), a kernel built by Python files
//! of several shards is reported once with all its notes, and usage errors exit 2.

mod common;

use common::{code, gpulint, stderr, stdout, write};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

const CHECK: &[&str] = &[
    "check",
    "--isolated",
    "--no-cache",
    "--quiet",
    "--exit-zero",
];

/// The report of `gpulint check` over `paths` in `dir`, in `format`, of shard `shard` if any.
fn report(dir: &Path, paths: &[&str], format: &str, shard: Option<String>, out: &Path) {
    let mut args: Vec<String> = CHECK.iter().map(|s| s.to_string()).collect();
    args.extend(["--output-format".into(), format.into(), "-o".into()]);
    args.push(out.display().to_string());
    if let Some(s) = shard {
        args.extend(["--shard".into(), s]);
    }
    args.extend(paths.iter().map(|p| p.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = gpulint(dir, &args);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}

/// Asserts that merging the N shards' reports gives the unsharded report, for each N and
/// format; returns the folder that holds the reports (`{i}-of-{n}.json`, …).
fn assert_merge_is_unsharded(dir: &Path, paths: &[&str], counts: &[u32]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for format in ["json", "sarif"] {
        let whole = tmp.path().join(format!("whole.{format}"));
        report(dir, paths, format, None, &whole);
        let expected = std::fs::read(&whole).unwrap();
        for &n in counts {
            let mut parts = Vec::new();
            for i in 1..=n {
                let p = tmp.path().join(format!("{i}-of-{n}.{format}"));
                report(dir, paths, format, Some(format!("{i}/{n}")), &p);
                parts.push(p.display().to_string());
            }
            let merged = tmp.path().join(format!("merged-{n}.{format}"));
            let mut args = vec!["merge", "--isolated", "--quiet", "--exit-zero", "-o"];
            let m = merged.display().to_string();
            args.push(&m);
            args.extend(parts.iter().map(String::as_str));
            let o = gpulint(dir, &args);
            assert_eq!(code(&o), 0, "{}", stderr(&o));
            let got = std::fs::read(&merged).unwrap();
            assert!(
                got == expected,
                "{format}, {n} shards: the merged report differs from the unsharded one ({} vs {} bytes)",
                got.len(),
                expected.len()
            );
        }
    }
    tmp
}

#[test]
fn merged_shards_of_the_fixtures_are_the_unsharded_report() {
    let _ = assert_merge_is_unsharded(&repo(), &["fixtures"], &[1, 2, 3, 7]);
}

/// A project where one kernel is built by Python files that hash to different shards, one
/// kernel is found by the walk and built, and one lies outside the checked folder.
fn linked_project() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let kernel = std::fs::read_to_string(repo().join("fixtures/link/csrc/kernel.cu")).unwrap();
    write(tmp.path(), "src/ops/shared.cu", &kernel);
    write(tmp.path(), "src/ops/own.cu", &kernel);
    write(tmp.path(), "outside/extra.cu", &kernel);
    for name in ["a", "b", "c", "d", "e", "f", "g", "h"] {
        write(
            tmp.path(),
            &format!("src/{name}_ops.py"),
            format!(
                "from torch.utils.cpp_extension import load\n\next = load(name=\"{name}\", sources=[\"ops/shared.cu\", \"../outside/extra.cu\"])\n"
            ),
        );
    }
    write(
        tmp.path(),
        "src/own.py",
        "from torch.utils.cpp_extension import load\n\next = load(name=\"own\", sources=[\"ops/own.cu\"])\n",
    );
    tmp
}

#[test]
fn a_kernel_built_in_several_shards_is_reported_once_with_all_its_builders() {
    let tmp = linked_project();
    let reports = assert_merge_is_unsharded(tmp.path(), &["src"], &[2, 3, 7]);
    // Each kernel's findings come from exactly one shard.
    for n in [2u32, 3, 7] {
        let mut shards_with = [0, 0, 0];
        for i in 1..=n {
            let text = std::fs::read_to_string(reports.path().join(format!("{i}-of-{n}.json")));
            let v: serde_json::Value = serde_json::from_str(&text.unwrap()).unwrap();
            for (k, path) in ["src/ops/shared.cu", "src/ops/own.cu", "outside/extra.cu"]
                .iter()
                .enumerate()
            {
                if v.as_array().unwrap().iter().any(|f| f["path"] == *path) {
                    shards_with[k] += 1;
                }
            }
        }
        assert_eq!(shards_with, [1, 1, 1], "{n} shards");
    }
}

#[test]
fn the_baseline_is_applied_once_and_the_exit_code_is_the_whole_runs() {
    let tmp = linked_project();
    let dir = tmp.path();
    let parts: Vec<String> = (1..=3)
        .map(|i| {
            let p = dir.join(format!("s{i}.sarif"));
            report(dir, &["src"], "sarif", Some(format!("{i}/3")), &p);
            p.display().to_string()
        })
        .collect();
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    // Findings at or above the default `fail-on` (warning): exit 1, as `check` would.
    let o = gpulint(dir, &[&["merge", "--isolated"][..], &parts].concat());
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert!(stderr(&o).contains("Merged 3 reports:"), "{}", stderr(&o));
    let o = gpulint(
        dir,
        &[&["merge", "--isolated", "--exit-zero"][..], &parts].concat(),
    );
    assert_eq!(code(&o), 0);
    // Everything baselined: no result, exit 0.
    let o = gpulint(
        dir,
        &[
            "check",
            "--isolated",
            "--no-cache",
            "--write-baseline",
            "base.json",
            "src",
        ],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = gpulint(
        dir,
        &[
            &["merge", "--isolated", "--baseline", "base.json"][..],
            &parts,
        ]
        .concat(),
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["runs"][0]["results"].as_array().unwrap().len(), 0);
    assert!(!v["runs"][0]["tool"]["driver"]["rules"]
        .as_array()
        .unwrap()
        .is_empty());
    // The same with JSON reports, whose findings carry their fingerprints.
    let parts: Vec<String> = (1..=2)
        .map(|i| {
            let p = dir.join(format!("s{i}.json"));
            report(dir, &["src"], "json", Some(format!("{i}/2")), &p);
            p.display().to_string()
        })
        .collect();
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    let o = gpulint(
        dir,
        &[
            &["merge", "--isolated", "--baseline", "base.json"][..],
            &parts,
        ]
        .concat(),
    );
    assert_eq!(
        (code(&o), stdout(&o)),
        (0, "[]\n".to_string()),
        "{}",
        stderr(&o)
    );
    let o = gpulint(
        dir,
        &[&["merge", "--isolated", "--fail-on", "error"][..], &parts].concat(),
    );
    assert_eq!(code(&o), 1, "CU001 is an error");
}

#[test]
fn usage_errors_exit_2_with_a_clear_message() {
    let tmp = linked_project();
    let dir = tmp.path();
    for (shard, says) in [
        ("0/3", "between 1 and N (3)"),
        ("4/3", "between 1 and N (3)"),
        ("1/0", "at least 1"),
        ("2", "expected I/N"),
        ("x/2", "not a whole number"),
    ] {
        let o = gpulint(dir, &["check", "--shard", shard, "src"]);
        assert_eq!(code(&o), 2, "--shard {shard}");
        assert!(stderr(&o).contains(says), "--shard {shard}: {}", stderr(&o));
    }
    report(dir, &["src"], "json", None, &dir.join("r.json"));
    report(dir, &["src"], "sarif", None, &dir.join("r.sarif"));
    std::fs::write(dir.join("bad.json"), "{\"not\": \"a report\"}").unwrap();
    std::fs::write(
        dir.join("stats.json"),
        "[{\"code\": \"CU001\", \"count\": 2}]",
    )
    .unwrap();
    for (args, says) in [
        (&["r.json", "r.sarif"][..], "must all be JSON or all SARIF"),
        (&["r.json", "missing.json"][..], "cannot read missing.json"),
        (&["bad.json"][..], "is not a gpulint JSON or SARIF report"),
        (&["stats.json"][..], "does not have the JSON schema"),
        (
            &["--output-format", "sarif", "r.json"][..],
            "merge writes the format it reads",
        ),
        (
            &["--output-format", "full", "r.json"][..],
            "invalid value 'full'",
        ),
        (&["r.json", "r.json"][..], "was a report merged twice?"),
        (&[][..], "required"),
    ] {
        let o = gpulint(dir, &[&["merge", "--isolated"][..], args].concat());
        assert_eq!(code(&o), 2, "merge {args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "merge {args:?}: {}", stderr(&o));
    }
}
