//! The CUDA runtime ground truth: `fixtures/cuda/runtime/` holds small complete programs, each
//! faulting one (`*_bad.cu`) beside its minimally fixed twin (`*_ok.cu`), and `truth.json`
//! records the faults each one has under compute-sanitizer (`scripts/sanitize-runtime.sh`
//! measures them on a GPU; until then the file holds the faults expected from the CUDA
//! programming guide, marked `"measured": false`).
//!
//! An error-level finding claims a crash. So:
//! - every program with a fault has an error finding at the faulting line (±1: a launch that
//!   fails is reported at the launch, the program's check is on the next line), or anywhere in
//!   the file for a fault without a line (a build error, an API error);
//! - a program without a fault has no error finding at all.
//!
//! What gpulint does not meet yet is listed below by program name; the test fails when a listed
//! program starts to pass (promote it: remove it from the list) or an unlisted one fails.

use gpulint::diagnostic::Severity;
use gpulint::settings::Settings;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::PathBuf;

/// Faulting programs with no error finding at the fault, and why.
const KNOWN_MISSES: &[(&str, &str)] = &[
    (
        "CU004_local_array_bad.cu",
        "reported as a warning below 512 KiB",
    ),
    ("CU005_recursion_bad.cu", "device recursion is a warning"),
    (
        "CU009_unchecked_launch_bad.cu",
        "the `cudaDeviceSynchronize` check after the launch is taken as checking it",
    ),
    (
        "CU010_unchecked_malloc_bad.cu",
        "reported at the unchecked `cudaMalloc` (the cause), not at the kernel's write",
    ),
    (
        "GAP_missing_barrier_bad.cu",
        "CU008 reports the missing barrier as a warning: a race, not a crash",
    ),
    (
        "GAP_uninitialized_read_bad.cu",
        "no rule for reads of uninitialised memory",
    ),
];

/// Programs without a fault that have an error finding, and why.
const KNOWN_FALSE_ALARMS: &[(&str, &str)] = &[];

/// Sanitizer tools whose reports are device faults at a source line.
const DEVICE_TOOLS: &[&str] = &["memcheck", "racecheck", "synccheck", "initcheck"];

fn runtime_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/cuda/runtime")
}

/// The lines of the error-level findings gpulint reports in `file`.
fn error_lines(file: &str) -> BTreeSet<usize> {
    let path = runtime_dir().join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    gpulint::check_source(&path, &text, &Settings::default())
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .map(|d| d.location.line)
        .collect()
}

/// Does a fault of `program` count as a crash the program does not handle? The clean twins of
/// the unchecked-call programs report an error through their own check: that is the fix.
fn crash_faults(program: &str, entry: &Value) -> Vec<Option<usize>> {
    let mut out = Vec::new();
    for f in entry["faults"].as_array().unwrap() {
        let tool = f["tool"].as_str().unwrap();
        let line = f["line"].as_u64().map(|l| l as usize);
        let device = DEVICE_TOOLS.contains(&tool) && line.is_some();
        let build = tool == "nvcc";
        let unhandled = program.ends_with("_bad.cu") && (tool == "program" || line.is_none());
        if device || build || unhandled {
            out.push(line);
        }
    }
    out
}

#[test]
fn error_findings_are_the_recorded_faults() {
    let truth: Value =
        serde_json::from_str(&std::fs::read_to_string(runtime_dir().join("truth.json")).unwrap())
            .unwrap();
    let programs = truth["programs"].as_object().unwrap();
    // Every program in the folder is in the truth file, and the other way round.
    let on_disk: BTreeSet<String> = std::fs::read_dir(runtime_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".cu"))
        .collect();
    let recorded: BTreeSet<String> = programs.keys().cloned().collect();
    assert_eq!(on_disk, recorded, "programs on disk vs truth.json");

    let mut misses = BTreeSet::new();
    let mut false_alarms = BTreeSet::new();
    for (program, entry) in programs {
        let found = error_lines(program);
        let faults = crash_faults(program, entry);
        if faults.is_empty() {
            if !found.is_empty() {
                false_alarms.insert(program.as_str());
            }
            continue;
        }
        let hit = faults.iter().all(|line| match line {
            Some(l) => found.iter().any(|f| f.abs_diff(*l) <= 1),
            None => !found.is_empty(),
        });
        if !hit {
            misses.insert(program.as_str());
        }
    }
    let known_misses: BTreeSet<&str> = KNOWN_MISSES.iter().map(|(p, _)| *p).collect();
    let known_false: BTreeSet<&str> = KNOWN_FALSE_ALARMS.iter().map(|(p, _)| *p).collect();
    assert_eq!(
        misses, known_misses,
        "faulting programs without an error finding"
    );
    assert_eq!(
        false_alarms, known_false,
        "programs without a fault that have an error finding"
    );
}

/// The truth file says whether it was measured, and a measured one names the GPU.
#[test]
fn truth_file_says_what_it_is() {
    let truth: Value =
        serde_json::from_str(&std::fs::read_to_string(runtime_dir().join("truth.json")).unwrap())
            .unwrap();
    match truth["measured"].as_bool() {
        Some(true) => {
            for key in ["gpu", "driver", "cuda"] {
                assert!(
                    truth[key].is_string(),
                    "a measured truth file names its {key}"
                );
            }
        }
        Some(false) => {}
        None => panic!("truth.json must say \"measured\": true or false"),
    }
}
