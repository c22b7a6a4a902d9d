//! The GPU-memory estimator against real GPU memory.
//!
//! `tests/calibration/torch-h100.json` holds measurements on an H100 (80 GB, torch 2.11, CUDA
//! 13) of every PyTorch model in `tests/memory_models/` that existed then: the device memory at
//! the peak of one training step at the file's own batch, and the largest batch whose step ran
//! with the caching allocator capped at 8 GiB (the CUDA context, 619 MiB there, outside the cap).
//! See `tests/calibration/torch-h100.md` for the method.
//!
//! What was fitted to these figures: the recurrent reserve-space factor
//! (`saved::RECURRENT_RESERVE`) on `torch_lstm_classifier.py` and `torch_bigru_tagger.py`, and
//! the CUDA context (the measured 619 MiB). Every other term comes from what PyTorch saves for
//! backward, so the other 18 models are held out.
//!
//! Required: the predicted largest batch is never more than 1.10× the real one (an optimistic
//! estimate is the crash the tool exists to prevent), at least 90% of the models are within
//! ±15% of it, and the errors do not grow past the figures recorded below. Run with
//! `--nocapture` for the table.

use gpulint::memory;
use gpulint::semantic::with_python_model;
use serde_json::Value;
use std::path::Path;

/// The allocator's cap in the measurements.
const CAP: u64 = 8 << 30;

/// Recorded when this test was written: the worst ratio of predicted to real largest batch on
/// either side, and how many models were within ±15%. A change that makes them worse fails.
const WORST_OVER: f64 = 1.10;
const MIN_WITHIN: usize = 18;

#[test]
fn estimator_matches_real_gpu_memory() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let truth: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("tests/calibration/torch-h100.json")).unwrap(),
    )
    .unwrap();
    let context = truth["cuda_context_and_driver_mib"].as_u64().unwrap() << 20;
    assert_eq!(context, memory::estimate::CUDA_CONTEXT);
    let models = truth["models"].as_array().unwrap();
    let mut problems = Vec::new();
    let mut within = 0;
    let mut worst: f64 = 0.0;
    println!(
        "{:<44} {:>8} {:>8} {:>6}   {:>8} {:>8} {:>6}",
        "model", "batch", "real", "ratio", "peak MiB", "real", "ratio"
    );
    for m in models {
        let file = m["file"].as_str().unwrap();
        let src = std::fs::read_to_string(root.join(file)).unwrap();
        let reports = with_python_model(&src, memory::analyze).expect("parses");
        let Some(r) = reports
            .iter()
            .find(|r| r.estimate.is_some() && r.setup.trained)
        else {
            problems.push(format!("{file}: no estimate"));
            continue;
        };
        let e = r.estimate.as_ref().unwrap();
        let real = m["largest_batch_allocator_cap_8gib_approx"]
            .as_u64()
            .unwrap();
        let predicted = e.max_batch(CAP + context).unwrap_or(0);
        let ratio = predicted as f64 / real as f64;
        let batch = m["batch"].as_u64().unwrap();
        let peak = e.peak_for(batch) >> 20;
        let real_peak = m["device_peak_mib"].as_u64().unwrap();
        let peak_ratio = peak as f64 / real_peak as f64;
        println!(
            "{file:<44} {predicted:>8} {real:>8} {ratio:>6.2}   {peak:>8} {real_peak:>8} {peak_ratio:>6.2}"
        );
        if std::env::var("CALIB_DEBUG").is_ok() {
            let real_per = (CAP + context - e.fixed()) as f64 / real as f64;
            println!(
                "   act {} back {} input {} | real/sample {:.0} ratio-to-act {:.2} fixed {}",
                e.activation_bytes_per_sample,
                e.backward_bytes_per_sample,
                e.input_bytes_per_sample,
                real_per,
                real_per / e.activation_bytes_per_sample as f64,
                e.fixed() >> 20
            );
        }
        worst = worst.max(ratio);
        if (0.85..=1.15).contains(&ratio) {
            within += 1;
        }
        if ratio > WORST_OVER {
            problems.push(format!(
                "{file}: predicts a largest batch of {predicted}, {ratio:.2}× the real {real}"
            ));
        }
    }
    println!(
        "\nwithin ±15%: {within}/{}; worst optimism {worst:.2}×",
        models.len()
    );
    if within < MIN_WITHIN {
        problems.push(format!(
            "{within} models within ±15% of the real largest batch, want at least {MIN_WITHIN}"
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
