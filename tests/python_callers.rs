//! The op-glue rules (OP002–OP004) weigh what the Python callers of a bound function guarantee:
//! a wrapper that passes `x.contiguous()`, converts with `.float()`, or calls only from
//! `autograd.Function.backward` covers the check the C++ side lacks, when gpulint sees every
//! call (the extension's build names the module, the wrapper is in the linted tree). Fixture
//! tree: `fixtures/link/py_callers/` (`// expect:` comments mark the findings that stay).

mod common;

use common::{gpulint, stdout};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn tree() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/link/py_callers")
}

const SOURCES: &[&str] = &["csrc/scale.cpp", "csrc/scale_kernel.cu"];

/// (path, line, code) of the op-glue findings of a run in `dir`.
fn op_findings(dir: &Path, args: &[&str]) -> BTreeSet<(String, u64, String)> {
    let mut all = vec!["--isolated", "--output-format", "json", "--select", "OP"];
    all.extend_from_slice(args);
    let o = gpulint(dir, &all);
    let v: Vec<Value> =
        serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)));
    v.iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().to_string(),
                f["line"].as_u64().unwrap(),
                f["code"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The `// expect: CODE, CODE` annotations of the C++ sources.
fn expected(dir: &Path) -> BTreeSet<(String, u64, String)> {
    let mut out = BTreeSet::new();
    for path in SOURCES {
        let text = std::fs::read_to_string(dir.join(path)).unwrap();
        for (i, line) in text.lines().enumerate() {
            if let Some((_, codes)) = line.split_once("// expect:") {
                for c in codes.split(',') {
                    out.insert((path.to_string(), i as u64 + 1, c.trim().to_string()));
                }
            }
        }
    }
    out
}

#[test]
fn guarantees_of_every_python_call_cover_the_checks() {
    let got = op_findings(&tree(), &["--no-cache", "."]);
    assert_eq!(got, expected(&tree()));
}

#[test]
fn without_the_python_side_the_findings_stay() {
    let alone = op_findings(&tree(), &["--no-cache", "csrc"]);
    let want = expected(&tree());
    assert!(alone.is_superset(&want), "{alone:#?}");
    let codes = |line_of: &str| -> BTreeSet<String> {
        let text = std::fs::read_to_string(tree().join("csrc/scale_kernel.cu")).unwrap();
        let line = text.lines().position(|l| l.contains(line_of)).unwrap() as u64 + 1;
        alone
            .iter()
            .filter(|f| f.1 == line)
            .map(|f| f.2.clone())
            .collect()
    };
    assert!(codes("scale_kernel<<<").contains("OP002"), "{alone:#?}");
    assert!(codes("mul_kernel<<<(n + 255) / 256, 256>>>(grad_x").contains("OP004"));
    assert!(codes("float* dst = (float*)out.data_ptr();").contains("OP003"));
    // The wrapper without the build that names its module: the calls are not matched.
    let unbuilt = op_findings(&tree(), &["--no-cache", "csrc", "scale_ops"]);
    assert_eq!(unbuilt, alone);
}

#[test]
fn a_cached_run_sees_a_wrapper_that_drops_its_guarantee() {
    let tmp = tempfile::tempdir().unwrap();
    for f in ["setup.py", "scale_ops/__init__.py", "scale_ops/ops.py"]
        .iter()
        .chain(SOURCES)
    {
        let to = tmp.path().join(f);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(tree().join(f), to).unwrap();
    }
    let d = tmp.path();
    let first = op_findings(d, &["."]);
    assert_eq!(first, expected(&tree()));
    assert_eq!(op_findings(d, &["."]), first, "a cached run");
    let ops = d.join("scale_ops/ops.py");
    let text = std::fs::read_to_string(&ops).unwrap();
    std::fs::write(
        &ops,
        text.replace(
            "scale_ext.scale_forward(out, x, alpha)",
            "scale_ext.scale_forward(out, x.t(), alpha)",
        ),
    )
    .unwrap();
    let after = op_findings(d, &["."]);
    assert_eq!(after.difference(&first).count(), 1, "{after:#?}");
    assert!(after
        .iter()
        .any(|f| f.0 == "csrc/scale_kernel.cu" && f.2 == "OP002" && !first.contains(f)));
}

#[test]
fn a_finding_that_stays_names_the_python_call_that_lacks_the_guarantee() {
    let o = gpulint(
        &tree(),
        &[
            "--isolated",
            "--no-cache",
            "--output-format",
            "json",
            "--select",
            "OP002",
            ".",
        ],
    );
    let v: Vec<Value> = serde_json::from_str(&stdout(&o)).unwrap();
    let ops = std::fs::read_to_string(tree().join("scale_ops/ops.py")).unwrap();
    let lines: Vec<usize> = ops
        .lines()
        .enumerate()
        .filter(|(_, l)| l.trim() == "scale_ext.mul_forward(out, a, b)")
        .map(|(i, _)| i + 1)
        .collect();
    // The first is guarded by `if b.is_contiguous()`, the second passes `b` as it came.
    assert_eq!(lines.len(), 2);
    let b = v
        .iter()
        .find(|f| f["message"].as_str().unwrap().starts_with("`b` may be"))
        .unwrap_or_else(|| panic!("{v:#?}"));
    let notes: Vec<&str> = b["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    let want = format!(
        "its Python call at scale_ops/ops.py:{} does not make it contiguous",
        lines[1]
    );
    assert!(notes.contains(&want.as_str()), "{notes:#?}");
}
