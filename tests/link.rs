//! Python files that build native extensions tie the C++/CUDA sources they name to the run:
//! `gpulint setup.py` checks the kernels, findings there name the Python entry, sources that do
//! not exist are reported at the Python line that names them, and inline sources are checked in
//! place. Fixture trees: `fixtures/link/`.

mod common;

use common::{gpulint, stderr, stdout};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/link")
}

/// The findings of a run over the fixture tree, as JSON, read-only (no cache, no config).
fn json_in(dir: &Path, paths: &[&str], extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["--isolated", "--no-cache", "--output-format", "json"];
    args.extend_from_slice(extra);
    args.extend_from_slice(paths);
    let o = gpulint(dir, &args);
    serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)))
}

fn json(paths: &[&str]) -> Vec<Value> {
    json_in(&fixtures(), paths, &[])
}

fn findings(v: &[Value], path: &str, code: &str) -> Vec<Value> {
    v.iter()
        .filter(|f| f["path"] == path && f["code"] == code)
        .cloned()
        .collect()
}

fn notes(f: &Value) -> Vec<String> {
    f["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect()
}

/// Copies the fixture tree into a fresh folder (for runs that write a cache or a config).
fn copy_tree() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let mut stack = vec![fixtures()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(fixtures()).unwrap();
            if p.is_dir() {
                std::fs::create_dir_all(tmp.path().join(rel)).unwrap();
                stack.push(p);
            } else {
                std::fs::copy(&p, tmp.path().join(rel)).unwrap();
            }
        }
    }
    tmp
}

#[test]
fn setup_py_alone_checks_the_kernels_it_builds() {
    let v = json(&["setup.py"]);
    let cu = findings(&v, "csrc/kernel.cu", "CU001");
    assert_eq!(cu.len(), 1, "{v:#?}");
    assert_eq!(cu[0]["line"], 5);
    assert!(
        notes(&cu[0]).contains(&"built by setup.py:8 (CUDAExtension \"fused_adam\")".to_string()),
        "{:?}",
        notes(&cu[0])
    );
    // The missing source: one finding at the string that names it, not a crash or exit 2.
    let missing = findings(&v, "setup.py", "GL002");
    assert_eq!(missing.len(), 1, "{v:#?}");
    assert_eq!(
        (missing[0]["line"].as_u64(), missing[0]["column"].as_u64()),
        (Some(12), Some(38))
    );
    assert!(missing[0]["message"]
        .as_str()
        .unwrap()
        .contains("csrc/missing_norm.cu"));
    let o = gpulint(&fixtures(), &["--isolated", "--no-cache", "setup.py"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("Checked 3 files"));
}

#[test]
fn load_with_file_relative_paths_and_globs() {
    let v = json(&["jit/jit_ops.py"]);
    let scale = findings(&v, "jit/kernels/scale.cu", "CU001");
    assert_eq!(scale.len(), 1, "{v:#?}");
    assert!(notes(&scale[0]).contains(&"built by jit/jit_ops.py:8 (load \"scale_ext\")".into()));
    // From the glob: the unguarded one fires, the guarded one stays silent.
    let mul = findings(&v, "jit/kernels/pw_mul.cu", "CU001");
    assert_eq!(mul.len(), 1, "{v:#?}");
    assert!(notes(&mul[0]).contains(&"built by jit/jit_ops.py:13 (load \"pointwise_ext\")".into()));
    assert!(v.iter().all(|f| f["path"] != "jit/kernels/pw_add.cu"));
    // The near-miss (sources from a function call) links nothing and reports nothing.
    assert!(v.iter().all(|f| f["path"] != "jit/jit_ops.py"), "{v:#?}");
}

#[test]
fn inline_cuda_source_reports_at_the_python_line() {
    let v = json(&["jit/inline_ops.py"]);
    let cu = findings(&v, "jit/inline_ops.py", "CU001");
    assert_eq!(cu.len(), 1, "{v:#?}");
    // `    y[i] = x[i] * x[i];` is line 11 of the Python file, column 5.
    assert_eq!(
        (cu[0]["line"].as_u64(), cu[0]["column"].as_u64()),
        (Some(11), Some(5))
    );
    assert!(notes(&cu[0])
        .iter()
        .any(|n| n == "in the C++/CUDA source passed to load_inline \"square_ext\" (line 22)"));
    // Without CUDA rules, nothing of it is checked.
    let v = json_in(&fixtures(), &["jit/inline_ops.py"], &["--select", "PT"]);
    assert!(v.is_empty(), "{v:#?}");
}

#[test]
fn tf_load_op_library_maps_to_sources_with_the_same_stem() {
    let v = json(&["tf_ops/zero_out.py"]);
    let cu = findings(&v, "tf_ops/zero_out.cu.cc", "CU001");
    assert_eq!(cu.len(), 1, "{v:#?}");
    assert!(notes(&cu[0])
        .contains(&"built by tf_ops/zero_out.py:5 (tf.load_op_library \"zero_out.so\")".into()));
}

#[test]
fn sources_in_the_set_are_checked_once_and_noted() {
    let all = json(&["."]);
    assert_eq!(findings(&all, "csrc/kernel.cu", "CU001").len(), 1);
    let f = &findings(&all, "csrc/kernel.cu", "CU001")[0];
    assert_eq!(
        notes(f)
            .iter()
            .filter(|n| n.starts_with("built by"))
            .count(),
        1
    );
    // Named twice (the file and its folder): still once.
    let v = json(&["setup.py", "csrc", "csrc/kernel.cu"]);
    assert_eq!(findings(&v, "csrc/kernel.cu", "CU001").len(), 1);
    // The same whatever the thread count, in every format.
    for format in ["json", "sarif", "full", "concise"] {
        let run = |threads: &str| {
            stdout(&gpulint(
                &fixtures(),
                &[
                    "--isolated",
                    "--no-cache",
                    "--threads",
                    threads,
                    "--output-format",
                    format,
                    "setup.py",
                    "jit",
                    "tf_ops/zero_out.py",
                ],
            ))
        };
        assert_eq!(run("1"), run("4"), "{format}");
    }
}

#[test]
fn sarif_names_the_python_entry_as_a_related_location() {
    let o = gpulint(
        &fixtures(),
        &[
            "--isolated",
            "--no-cache",
            "--output-format",
            "sarif",
            "setup.py",
        ],
    );
    let sarif: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    let cu = results
        .iter()
        .find(|r| r["ruleId"] == "CU001")
        .expect("CU001 in the kernel");
    let related = cu["relatedLocations"].as_array().unwrap();
    let entry = related
        .iter()
        .find(|r| r["physicalLocation"]["artifactLocation"]["uri"] == "setup.py")
        .expect("the setup.py entry");
    assert_eq!(entry["physicalLocation"]["region"]["startLine"], 8);
}

#[test]
fn excluded_sources_stay_excluded() {
    let tmp = copy_tree();
    std::fs::write(
        tmp.path().join("gpulint.toml"),
        "extend-exclude = [\"csrc\"]\n",
    )
    .unwrap();
    let o = gpulint(
        tmp.path(),
        &["--no-cache", "--output-format", "json", "setup.py"],
    );
    let v: Vec<Value> = serde_json::from_str(&stdout(&o)).unwrap();
    assert!(v.iter().all(|f| f["path"] != "csrc/kernel.cu"), "{v:#?}");
}

#[test]
fn cache_follows_the_named_sources() {
    let tmp = copy_tree();
    let d = tmp.path();
    let run = || {
        let o = gpulint(d, &["--isolated", "--output-format", "json", "setup.py"]);
        serde_json::from_str::<Vec<Value>>(&stdout(&o)).unwrap()
    };
    let first = run();
    assert_eq!(run(), first, "a cached run gives the same findings");
    assert_eq!(findings(&first, "setup.py", "GL002").len(), 1);
    assert_eq!(findings(&first, "csrc/kernel.cu", "CU001").len(), 1);
    // The missing source appears: the setup.py's cached result is dropped.
    std::fs::write(
        d.join("csrc/missing_norm.cu"),
        "__global__ void norm(float* x, int n) {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    x[i] = 0.f;\n}\n",
    )
    .unwrap();
    let v = run();
    assert!(findings(&v, "setup.py", "GL002").is_empty(), "{v:#?}");
    let norm = findings(&v, "csrc/missing_norm.cu", "CU001");
    assert_eq!(norm.len(), 1, "{v:#?}");
    assert!(notes(&norm[0]).contains(&"built by setup.py:12 (CUDAExtension \"fused_norm\")".into()));
    // The kernel is fixed: its own cached result is dropped.
    let fixed = std::fs::read_to_string(d.join("csrc/kernel.cu"))
        .unwrap()
        .replace(
            "    param[i] -=",
            "    if (i >= n) return;\n    param[i] -=",
        );
    std::fs::write(d.join("csrc/kernel.cu"), fixed).unwrap();
    let v = run();
    assert!(findings(&v, "csrc/kernel.cu", "CU001").is_empty(), "{v:#?}");
    // The notes survive a fully cached run.
    let again = run();
    assert_eq!(again, v);
    assert!(notes(&findings(&again, "csrc/missing_norm.cu", "CU001")[0])
        .iter()
        .any(|n| n.starts_with("built by setup.py:12")));
}

#[test]
fn verbose_lists_each_build_and_what_was_not_resolved() {
    let o = gpulint(
        &fixtures(),
        &["--isolated", "--no-cache", "--verbose", "jit"],
    );
    let err = stderr(&o);
    assert!(
        err.contains("linked jit/jit_ops.py:8 (load \"scale_ext\"): 1 source\n"),
        "{err}"
    );
    assert!(err.contains(
        "linked jit/jit_ops.py:23 (load \"generated_ext\"): 0 sources; line 20 not resolved"
    ));
    assert!(err
        .contains("linked jit/inline_ops.py:22 (load_inline \"square_ext\"): 0 sources, 2 inline"));
}

/// `--verbose` names the extension sources checked though not under the paths given, in order,
/// and none when the paths given hold them already.
#[test]
fn verbose_names_the_sources_checked_beyond_the_paths_given() {
    let also = |path: &str| {
        let o = gpulint(
            &fixtures(),
            &["--isolated", "--no-cache", "--verbose", path],
        );
        stderr(&o)
            .lines()
            .filter_map(|l| l.strip_prefix("also checked: "))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let why = " (an extension source that a checked file builds)";
    assert_eq!(
        also("jit/jit_ops.py"),
        [
            format!("jit/kernels/pw_add.cu{why}"),
            format!("jit/kernels/pw_mul.cu{why}"),
            format!("jit/kernels/scale.cu{why}"),
        ]
    );
    assert_eq!(also("jit"), Vec::<String>::new());
}

#[test]
fn inline_findings_honour_both_kinds_of_suppression() {
    let tmp = tempfile::tempdir().unwrap();
    let kernel = |name: &str, nolint: &str| {
        format!(
            "__global__ void {name}(float* x, int n) {{\\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\\n  x[i] = 0.f;{nolint}\\n}}\\n"
        )
    };
    let src = format!(
        "from torch.utils.cpp_extension import load_inline\na = load_inline('a', cpp_sources='', cuda_sources=\"{}\")\nb = load_inline('b', cpp_sources='', cuda_sources=\"{}\")  # noqa: CU001\nc = load_inline('c', cpp_sources='', cuda_sources=\"{}\")\n",
        kernel("ka", ""),
        kernel("kb", ""),
        kernel("kc", "  // NOLINT(CU001)"),
    );
    std::fs::write(tmp.path().join("ops.py"), src).unwrap();
    let v = json_in(tmp.path(), &["ops.py"], &["--select", "CU001"]);
    assert_eq!(v.len(), 1, "{v:#?}");
    assert_eq!(v[0]["line"], 2);
}

#[test]
fn one_inline_string_passed_to_two_builds_is_reported_for_each() {
    // The string is checked once (by its span) and its findings given to each build, with the
    // build's own note: the access is line 6 of the file, the builds' calls lines 9 and 10.
    let tmp = tempfile::tempdir().unwrap();
    let src = "from torch.utils.cpp_extension import load_inline\n\nSRC = \"\"\"\n__global__ void k(float* x, int n) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  x[i] = 0.f;\n}\n\"\"\"\na = load_inline('a', cpp_sources='', cuda_sources=SRC)\nb = load_inline('b', cpp_sources='', cuda_sources=[SRC])\n";
    std::fs::write(tmp.path().join("ops.py"), src).unwrap();
    let v = json_in(tmp.path(), &["ops.py"], &["--select", "CU001"]);
    assert_eq!(v.len(), 2, "{v:#?}");
    let built: Vec<Vec<String>> = v.iter().map(notes).collect();
    for (f, build) in v
        .iter()
        .zip(["load_inline \"a\" (line 9)", "load_inline \"b\" (line 10)"])
    {
        assert_eq!(f["line"], 6, "{v:#?}");
        let want = format!("in the C++/CUDA source passed to {build}");
        assert!(
            built.iter().any(|n| n.contains(&want)),
            "{want}: {built:#?}"
        );
    }
}

#[test]
fn op_builder_subclasses_are_entries_of_their_own() {
    let v = json(&["op_builder/builder.py"]);
    let cu = findings(&v, "ops_csrc/scale/scale_kernel.cu", "CU001");
    assert_eq!(cu.len(), 1, "{v:#?}");
    // Built by both build calls of the base class: one entry, the subclass's method.
    let built: Vec<String> = notes(&cu[0])
        .into_iter()
        .filter(|n| n.starts_with("built by"))
        .collect();
    assert_eq!(
        built,
        ["built by op_builder/fused_scale.py:7 (FusedScaleBuilder.sources)"]
    );
    // The empty entry is dropped, the one joined to the root names a folder: no GL002.
    assert!(
        findings(&v, "op_builder/builder.py", "GL002").is_empty(),
        "{v:#?}"
    );
    let o = gpulint(
        &fixtures(),
        &["--isolated", "--no-cache", "--verbose", "op_builder"],
    );
    let err = stderr(&o);
    assert!(
        err.contains("linked op_builder/fused_scale.py:7 (FusedScaleBuilder.sources): 2 sources\n"),
        "{err}"
    );
    assert!(err.contains("linked op_builder/builder.py:35 (NoopBuilder.sources): 1 source;"));
    // A subclass whose list does not fold links nothing, and says where.
    assert!(err.contains(
        "linked op_builder/fused_scale.py:17 (DiscoveredBuilder.sources): 0 sources; line 23 not resolved: fused_scale.py:18: not a constant path"
    ));
    // The abstract base is no entry of its own.
    assert!(!err.contains("(CUDAExtension \"base\")") && !err.contains("(load \"base\")"));
}

#[test]
fn helper_functions_and_filtered_listdir() {
    let o = gpulint(
        &fixtures(),
        &["--isolated", "--no-cache", "--verbose", "jit/helper_ops.py"],
    );
    let err = stderr(&o);
    assert!(
        err.contains("linked jit/helper_ops.py:18 (load \"clamp_ext\"): 2 sources\n"),
        "{err}"
    );
    assert!(err.contains("linked jit/helper_ops.py:23 (load \"listed_ext\"): 2 sources\n"));
    let v = json(&["jit/helper_ops.py"]);
    let clamp = findings(&v, "jit/helpers/clamp.cu", "CU001");
    assert_eq!(clamp.len(), 1, "{v:#?}");
    assert!(notes(&clamp[0]).contains(
        &"built by jit/helper_ops.py:18 (load \"clamp_ext\"), jit/helper_ops.py:23 (load \"listed_ext\")".into()
    ));
    // The guarded kernel from the listing is checked and silent; the text file is not a source.
    assert!(
        v.iter().all(|f| f["path"] != "jit/helpers/gelu.cu"),
        "{v:#?}"
    );
}

#[test]
fn tf_custom_op_sources_in_a_cc_folder() {
    let v = json(&["tf_custom/python/ops/halve_ops.py"]);
    let cu = findings(&v, "tf_custom/cc/kernels/halve_kernels.cu.cc", "CU001");
    assert_eq!(cu.len(), 1, "{v:#?}");
    assert!(notes(&cu[0]).contains(
        &"built by tf_custom/python/ops/halve_ops.py:4 (tf.load_op_library \"_halve_ops.so\")"
            .into()
    ));
    // Another op's kernel in the same folder is not linked.
    assert!(v
        .iter()
        .all(|f| f["path"] != "tf_custom/cc/kernels/double_kernels.cu.cc"));
}

#[test]
fn op_builder_entries_follow_the_sibling_module() {
    let tmp = copy_tree();
    let d = tmp.path();
    let run = |format: &str| {
        stdout(&gpulint(
            d,
            &[
                "--isolated",
                "--output-format",
                format,
                "op_builder/builder.py",
            ],
        ))
    };
    let v: Vec<Value> = serde_json::from_str(&run("json")).unwrap();
    assert_eq!(
        findings(&v, "ops_csrc/scale/scale_kernel.cu", "CU001").len(),
        1
    );
    // SARIF: the related location is the subclass's method in its own file.
    let sarif: Value = serde_json::from_str(&run("sarif")).unwrap();
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    let cu = results.iter().find(|r| r["ruleId"] == "CU001").unwrap();
    let entry = cu["relatedLocations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["physicalLocation"]["artifactLocation"]["uri"] == "op_builder/fused_scale.py")
        .expect("the subclass entry");
    assert_eq!(entry["physicalLocation"]["region"]["startLine"], 7);
    // The subclass drops the kernel: the cached result of builder.py is dropped too.
    let sub = d.join("op_builder/fused_scale.py");
    let text = std::fs::read_to_string(&sub)
        .unwrap()
        .replace(", \"ops_csrc/scale/scale_kernel.cu\"", "");
    std::fs::write(&sub, text).unwrap();
    let v: Vec<Value> = serde_json::from_str(&run("json")).unwrap();
    assert!(
        v.iter()
            .all(|f| f["path"] != "ops_csrc/scale/scale_kernel.cu"),
        "{v:#?}"
    );
}
