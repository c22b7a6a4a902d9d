//! Adopting gpulint in a real codebase: notebooks, baselines, `--add-noqa`, the cache and
//! `--stdin-filename`.

mod common;

use common::{command, gpulint, stderr, stdout, write};
use std::io::Write;
use std::process::Stdio;

const KERNEL: &str = "__global__ void add(const float* a, float* out, int n) {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    out[i] = a[i];\n}\n";

fn notebook(cells: &[&[&str]]) -> String {
    let cells: Vec<serde_json::Value> = cells
        .iter()
        .map(|lines| {
            serde_json::json!({
                "cell_type": "code",
                "execution_count": null,
                "metadata": {},
                "outputs": [],
                "source": lines,
            })
        })
        .collect();
    let nb = serde_json::json!({
        "cells": cells,
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    });
    serde_json::to_string_pretty(&nb).unwrap() + "\n"
}

#[test]
fn notebooks_report_cell_and_line_and_see_earlier_cells() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let nb = notebook(&[
        &["%matplotlib inline\n", "import torch\n"],
        &[
            "!nvidia-smi\n",
            "def walk(node):\n",
            "    return [walk(c) for c in node.children]\n",
        ],
        &["x = 1  # gpulint: ignore[PY001]\n"],
    ]);
    write(d, "explore.ipynb", &nb);
    let o = gpulint(d, &["--output-format", "concise", "--fail-on", "info"]);
    let out = stdout(&o);
    // `torch` imported in cell 1 makes cell 2 GPU training code.
    assert!(out.contains("explore.ipynb:cell 2:3:13: PY001 "), "{out}");
    assert!(out.contains("explore.ipynb:cell 3:1:8: GL001 "), "{out}");
    let json: serde_json::Value =
        serde_json::from_str(&stdout(&gpulint(d, &["--output-format", "json"]))).unwrap();
    let py = json
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["code"] == "PY001")
        .unwrap();
    assert_eq!(
        (py["cell"].as_u64(), py["line"].as_u64()),
        (Some(2), Some(3))
    );
    // SARIF points at the line of the .ipynb file that holds that source line.
    let sarif: serde_json::Value =
        serde_json::from_str(&stdout(&gpulint(d, &["--output-format", "sarif"]))).unwrap();
    let r = sarif["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["ruleId"] == "PY001")
        .unwrap();
    let line = r["locations"][0]["physicalLocation"]["region"]["startLine"]
        .as_u64()
        .unwrap() as usize;
    assert!(
        nb.lines()
            .nth(line - 1)
            .unwrap()
            .contains("return [walk(c)"),
        "line {line}"
    );
    // A malformed notebook is GL002, not a crash.
    write(d, "broken.ipynb", "{\"cells\": [");
    let out = stdout(&gpulint(d, &["--output-format", "concise", "broken.ipynb"]));
    assert!(out.starts_with("broken.ipynb:1:1: GL002 "), "{out}");
}

#[test]
fn baseline_keeps_old_findings_silent_and_reports_new_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(d, "k.cu", KERNEL);
    let o = gpulint(d, &["--write-baseline", "baseline.json"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(d.join("baseline.json").exists());
    let o = gpulint(
        d,
        &["--baseline", "baseline.json", "--output-format", "concise"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert_eq!(stdout(&o), "");
    // Lines inserted above: still silent.
    write(
        d,
        "k.cu",
        format!("#include <cuda_runtime.h>\n\n// Adds.\n{KERNEL}"),
    );
    assert_eq!(
        stdout(&gpulint(d, &["--baseline", "baseline.json", "-q"])),
        ""
    );
    // A new finding of the same rule in the same file is reported.
    write(
        d,
        "k.cu",
        format!("{KERNEL}__global__ void sub(const float* a, float* out, int n) {{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    out[i] = -a[i];\n}}\n"),
    );
    let o = gpulint(
        d,
        &["--baseline", "baseline.json", "--output-format", "concise"],
    );
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(out.starts_with("k.cu:7:5: CU001"), "{out}");
    // Not a baseline: exit 2.
    write(d, "junk.json", "[1, 2]");
    assert_eq!(
        gpulint(d, &["--baseline", "junk.json"]).status.code(),
        Some(2)
    );
}

#[test]
fn add_noqa_suppresses_everything_idempotently_and_changes_nothing_else() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let py = "import torch\r\n\r\n\r\ndef walk(node):\r\n    return [walk(c) for c in node.children]  # noqa: E501\r\n\r\n\r\ndef doc():\r\n    return doc() + \"\"\"\r\n    text\"\"\"\r\n";
    write(d, "t.py", py);
    write(d, "k.cu", KERNEL);
    let nb = notebook(&[
        &["import torch\n"],
        &[
            "def walk(node):\n",
            "    return [walk(c) for c in node.children]\n",
        ],
    ]);
    write(d, "n.ipynb", &nb);
    let o = gpulint(d, &["--add-noqa=legacy code"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let t = std::fs::read_to_string(d.join("t.py")).unwrap();
    assert_eq!(
        t,
        py.replace("# noqa: E501", "# noqa: E501, PY001"),
        "merged into the existing noqa, CRLF kept, nothing else changed"
    );
    let k = std::fs::read_to_string(d.join("k.cu")).unwrap();
    assert_eq!(
        k,
        KERNEL.replace(
            "out[i] = a[i];",
            "out[i] = a[i];  // NOLINT(CU001) -- legacy code"
        )
    );
    let n = std::fs::read_to_string(d.join("n.ipynb")).unwrap();
    assert_eq!(
        n,
        nb.replace(
            "\"    return [walk(c) for c in node.children]\\n\"",
            "\"    return [walk(c) for c in node.children]  # noqa: PY001 -- legacy code\\n\""
        )
    );
    // Now clean (the line inside the multi-line string was refused, so its finding remains).
    let o = gpulint(d, &["--output-format", "concise", "--fail-on", "info"]);
    let remaining = stdout(&o);
    assert!(
        remaining.lines().all(|l| l.starts_with("t.py:9:")),
        "{remaining}"
    );
    // Idempotent.
    gpulint(d, &["--add-noqa=legacy code"]);
    assert_eq!(std::fs::read_to_string(d.join("t.py")).unwrap(), t);
    assert_eq!(std::fs::read_to_string(d.join("k.cu")).unwrap(), k);
    assert_eq!(std::fs::read_to_string(d.join("n.ipynb")).unwrap(), n);
}

#[test]
fn cache_is_used_and_a_corrupt_cache_is_rebuilt() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(d, "k.cu", KERNEL);
    write(
        d,
        "t.py",
        "import torch\n\n\ndef walk(node):\n    return [walk(c) for c in node.children]\n",
    );
    let cold = stdout(&gpulint(d, &["--output-format", "json"]));
    let cache_dir = d.join(".gpulint_cache");
    let files: Vec<_> = std::fs::read_dir(&cache_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let cache_file = files
        .iter()
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .unwrap()
        .clone();
    assert_eq!(
        stdout(&gpulint(d, &["--output-format", "json"])),
        cold,
        "warm run, same output"
    );
    // Changed file: the new content is checked, not the cached result.
    write(
        d,
        "k.cu",
        KERNEL.replace("out[i] = a[i];", "if (i < n) out[i] = a[i];"),
    );
    let fixed = stdout(&gpulint(d, &["--output-format", "concise"]));
    assert!(!fixed.contains("CU001"), "{fixed}");
    write(d, "k.cu", KERNEL);
    // Corrupt and foreign caches are ignored.
    std::fs::write(&cache_file, b"\x00garbage").unwrap();
    assert_eq!(stdout(&gpulint(d, &["--output-format", "json"])), cold);
    std::fs::write(
        &cache_file,
        "{\"format\":\"gpulint-cache\",\"version\":\"0.0.0\",\"settings\":\"x\",\"files\":{}}",
    )
    .unwrap();
    assert_eq!(stdout(&gpulint(d, &["--output-format", "json"])), cold);
    // A result that depends on another file (a launcher setting TF_FORCE_GPU_ALLOW_GROWTH) is
    // re-checked when that file appears or changes, although the file itself did not change.
    std::fs::create_dir_all(d.join(".git")).unwrap();
    write(
        d,
        "fit.py",
        "import tensorflow as tf\n\nmodel = tf.keras.Sequential([tf.keras.layers.Dense(1)])\nmodel.compile(\"adam\", \"mse\")\nmodel.fit(x, y)\n",
    );
    assert!(stdout(&gpulint(d, &["--output-format", "concise"])).contains("fit.py:1:1: TF002"));
    write(
        d,
        "run.sh",
        "export TF_FORCE_GPU_ALLOW_GROWTH=true\npython fit.py\n",
    );
    assert!(!stdout(&gpulint(d, &["--output-format", "concise"])).contains("TF002"));
    write(
        d,
        "run.sh",
        "export TF_FORCE_GPU_ALLOW_GROWTH=false\npython fit.py\n",
    );
    assert!(stdout(&gpulint(d, &["--output-format", "concise"])).contains("TF002"));
    std::fs::remove_file(d.join("fit.py")).unwrap();
    // --no-cache neither reads nor writes it.
    std::fs::remove_dir_all(&cache_dir).unwrap();
    assert_eq!(
        stdout(&gpulint(d, &["--no-cache", "--output-format", "json"])),
        cold
    );
    assert!(!cache_dir.exists());
}

#[test]
fn stdin_filename() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(
        d,
        "gpulint.toml",
        "[per-file-ignores]\n\"legacy/*.cu\" = [\"CU001\"]\n",
    );
    let run = |name: &str| {
        let mut child = command(d, &["--output-format", "concise", "--stdin-filename", name])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(KERNEL.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    };
    let o = run("ops/add.cu");
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stdout(&o).starts_with("ops/add.cu:3:5: CU001"),
        "{}",
        stdout(&o)
    );
    let o = run("legacy/add.cu");
    assert_eq!(
        o.status.code(),
        Some(0),
        "per-file-ignores apply to the name given"
    );
    assert_eq!(run("notes.txt").status.code(), Some(2));
}
