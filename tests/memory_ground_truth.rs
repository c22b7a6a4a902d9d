//! The GPU-memory estimator against the real frameworks.
//!
//! `tests/memory_ground_truth.json` was written by `scripts/memory_ground_truth.py`, which builds
//! every model of `tests/memory_models/` with TensorFlow/Keras and PyTorch on the CPU and records
//! parameter counts and per-layer output shapes. This test runs the estimator over the same
//! sources (no Python needed) and requires:
//!
//! - parameter counts to match exactly wherever the estimator gives one;
//! - per-layer output shapes and parameters to match;
//! - per-sample activation elements (the sum of all layer outputs) within 1%.
//!
//! Run with `--nocapture` to see the comparison table.

use gpulint::memory;
use gpulint::semantic::with_python_model;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

type Calls = BTreeMap<String, Vec<Vec<u64>>>;

fn shapes(v: &Value) -> Vec<Vec<u64>> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|s| {
                    s.as_array()
                        .map(|d| d.iter().filter_map(Value::as_u64).collect())
                        .unwrap_or_default()
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn estimator_matches_the_frameworks() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let truth: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("tests/memory_ground_truth.json")).unwrap(),
    )
    .unwrap();
    let models = truth["models"].as_object().expect("models");
    assert!(
        models.len() >= 40,
        "the test set has {} models, want at least 40",
        models.len()
    );

    let mut problems = Vec::new();
    let (mut inferred, mut param_given, mut param_exact) = (0usize, 0usize, 0usize);
    let (mut layers_total, mut layers_exact) = (0usize, 0usize);
    let mut act_errors: Vec<f64> = Vec::new();
    let mut saved_ratios: Vec<(String, f64, u64, u64)> = Vec::new();
    println!(
        "{:<32} {:>10} {:>12} {:>12} {:>8}",
        "model", "inferred", "params", "truth", "act.err"
    );
    for (file, gt) in models {
        let src = std::fs::read_to_string(root.join("tests/memory_models").join(file)).unwrap();
        let reports = with_python_model(&src, memory::analyze).expect("parses");
        let Some(r) = reports
            .iter()
            .find(|r| r.model.var.as_deref() == Some("model"))
        else {
            problems.push(format!("{file}: no model bound to `model` found"));
            continue;
        };
        let m = &r.model;
        let want_params = gt["params"].as_u64().unwrap();
        if let Some(p) = m.params {
            param_given += 1;
            if p.total == want_params {
                param_exact += 1;
            } else {
                problems.push(format!(
                    "{file}: {} parameters, the framework counts {want_params}",
                    p.total
                ));
            }
        }
        if let Some(why) = &m.unknown {
            println!(
                "{file:<32} {:>10} {:>12} {want_params:>12} {:>8}",
                "no", "-", "-"
            );
            problems.push(format!("{file}: not fully inferred: {why}"));
            continue;
        }
        inferred += 1;
        // What autograd keeps per sample (PyTorch; the CPU's choice, without cuDNN's recurrent
        // reserve space).
        if let (Some(want), Some(e)) = (gt["saved_bytes_per_sample"].as_u64(), &r.estimate) {
            // The input is saved by the first layer and counted apart by the estimator.
            let got = e.activation_bytes_per_sample - e.recurrent_bytes_per_sample
                + e.input_bytes_per_sample;
            let ratio = got as f64 / want.max(1) as f64;
            // PyTorch on the CPU has no cuDNN: its recurrent layers save other things.
            if e.recurrent_bytes_per_sample == 0 {
                saved_ratios.push((file.clone(), ratio, got, want));
            }
        }
        let strict = gt["layers_strict"].as_bool().unwrap_or(true);
        // Per layer: the output shapes of every call, and the parameters.
        let mut ours: Calls = BTreeMap::new();
        let mut our_params: BTreeMap<String, u64> = BTreeMap::new();
        for s in m.steps.iter().filter(|s| s.module) {
            ours.entry(s.name.clone())
                .or_default()
                .push(s.output.clone());
            *our_params.entry(s.name.clone()).or_default() += s.params.total;
        }
        for layer in gt["layers"].as_array().unwrap().iter().filter(|_| strict) {
            let name = layer["name"].as_str().unwrap().to_string();
            let calls = shapes(&layer["output_shapes"]);
            if calls.is_empty() {
                continue;
            }
            layers_total += 1;
            let p = layer["params"].as_u64().unwrap();
            let mut mine = ours.get(&name).cloned().unwrap_or_default();
            let mut want = calls.clone();
            mine.sort();
            want.sort();
            if mine == want && our_params.get(&name).copied().unwrap_or(0) == p {
                layers_exact += 1;
            } else {
                problems.push(format!(
                    "{file}: layer `{name}`: estimated {:?} with {} parameters, the framework gives {:?} with {p}",
                    ours.get(&name),
                    our_params.get(&name).copied().unwrap_or(0),
                    calls
                ));
            }
        }
        for name in ours.keys().filter(|_| strict) {
            if !gt["layers"]
                .as_array()
                .unwrap()
                .iter()
                .any(|l| l["name"] == name.as_str())
            {
                problems.push(format!(
                    "{file}: estimated layer `{name}` is not a layer of the framework's model"
                ));
            }
        }
        let want_act = gt["activation_elements_per_sample"].as_u64().unwrap() as f64;
        let got_act: u64 = m
            .steps
            .iter()
            .filter(|s| s.module)
            .map(|s| s.output.iter().product::<u64>())
            .sum();
        let err = (got_act as f64 - want_act).abs() / want_act.max(1.0);
        if strict {
            act_errors.push(err);
        }
        if err > 0.01 && strict {
            problems.push(format!(
                "{file}: {got_act} activation elements per sample, the framework has {want_act}"
            ));
        }
        let got = m.params.map(|p| p.total).unwrap_or(0);
        println!(
            "{file:<32} {:>10} {got:>12} {want_params:>12} {:>7.2}%",
            "yes",
            err * 100.0
        );
    }
    let n = models.len();
    let mean = act_errors.iter().sum::<f64>() / act_errors.len().max(1) as f64;
    let max = act_errors.iter().cloned().fold(0.0, f64::max);
    println!(
        "\nfully inferred: {inferred}/{n}; parameters exact: {param_exact}/{param_given}; layers exact: {layers_exact}/{layers_total}; activation error per sample: max {:.3}%, mean {:.3}%",
        max * 100.0,
        mean * 100.0
    );
    println!("\nsaved for backward per sample, estimated / PyTorch (CPU):");
    for (file, ratio, got, want) in &saved_ratios {
        println!("  {file:<44} {ratio:.2} ({got} / {want})");
        if !(0.85..=1.15).contains(ratio) {
            problems.push(format!(
                "{file}: keeps {ratio:.2}× the bytes PyTorch saves for backward per sample"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// `from_pretrained("<checkpoint>")`: the parameters of the published configuration, as the
/// library counts them (built on the meta device by `scripts/memory_ground_truth.py`).
#[test]
fn checkpoints_match_the_library() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let truth: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("tests/memory_ground_truth.json")).unwrap(),
    )
    .unwrap();
    let checkpoints = truth["checkpoints"].as_object().expect("checkpoints");
    assert!(checkpoints.len() >= 15);
    let mut problems = Vec::new();
    for (name, gt) in checkpoints {
        let class = gt["class"].as_str().unwrap();
        let src = format!(
            "import torch\nfrom transformers import {class}\n\nmodel = {class}.from_pretrained(\"{name}\")\n"
        );
        let reports = with_python_model(&src, memory::analyze).expect("parses");
        let want = gt["params"].as_u64().unwrap();
        match reports.first().map(|r| (&r.model.params, &r.model.unknown)) {
            Some((Some(p), None)) if p.total == want => {}
            Some((p, why)) => problems.push(format!(
                "{name}: {:?} parameters ({why:?}), the library counts {want}",
                p.map(|p| p.total)
            )),
            None => problems.push(format!("{name}: no model")),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
