//! Time to first diagnostics of `gpulint server`: after opening a 2,000-line Python file, and
//! after one keystroke in it (`didChange`), measured from the client's side over standard
//! input and output, median of 25 runs each.
//!
//! ```sh
//! cargo build --release && cargo run --release --example lsp_latency [-- FILE.py]
//! ```
//!
//! The file is FILE, or else the Python fixtures (TensorFlow, PyTorch, JAX code with findings
//! of most rules: a worst case) joined and cut to 2,000 lines. Each run opens the file under a new name in a fresh
//! server's workspace (the first open also builds the engine), then types one character.

#[path = "../tests/common/lsp_client.rs"]
mod lsp_client;

use lsp_client::{file_uri, Client};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const RUNS: usize = 25;
const LINES: usize = 2000;

fn main() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bin = std::env::var_os("GPULINT_BIN")
        .map(PathBuf::from)
        .or_else(|| {
            // target/<profile>/examples/lsp_latency → target/<profile>/gpulint
            let exe = std::env::current_exe().ok()?;
            Some(exe.parent()?.parent()?.join("gpulint"))
        })
        .filter(|p| p.exists())
        .unwrap_or_else(|| {
            eprintln!("build the binary first: cargo build --release (or set GPULINT_BIN)");
            std::process::exit(2)
        });
    let text = match std::env::args_os().nth(1) {
        Some(file) => std::fs::read_to_string(&file).unwrap_or_else(|e| {
            eprintln!("cannot read {}: {e}", Path::new(&file).display());
            std::process::exit(2)
        }),
        None => source(repo),
    };
    let lines = text.lines().count();
    let tmp = std::env::temp_dir().join(format!("gpulint-lsp-latency-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).expect("temporary folder");
    let mut open = Vec::new();
    let mut keystroke = Vec::new();
    let mut findings = 0;
    for run in 0..RUNS {
        let mut c = Client::spawn(&bin, &tmp, Duration::from_secs(30));
        c.initialize(&tmp);
        let path = tmp.join(format!("train_{run}.py"));
        std::fs::write(&path, &text).expect("write the file");
        let uri = file_uri(&path);
        let started = Instant::now();
        c.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}}),
        );
        let p = c.diagnostics(&uri, Some(1));
        open.push(started.elapsed());
        findings = p["diagnostics"].as_array().map_or(0, Vec::len);
        // One keystroke: a character typed at the end of a line in the middle of the file.
        let line = lines as u32 / 2;
        let at = json!({"line": line, "character": 0});
        let started = Instant::now();
        c.notify(
            "textDocument/didChange",
            json!({
                "textDocument": {"uri": uri, "version": 2},
                "contentChanges": [{"range": {"start": at, "end": at}, "text": " "}],
            }),
        );
        c.diagnostics(&uri, Some(2));
        keystroke.push(started.elapsed());
        let _ = c.shutdown();
        let _ = std::fs::remove_file(&path);
    }
    let _ = std::fs::remove_dir_all(&tmp);
    // The engine alone, in this process, for comparison: what the server adds is the rest.
    let settings = gpulint_workspace::settings::settings(
        &gpulint_workspace::settings::Overrides::default(),
        None,
        repo,
    )
    .expect("default settings");
    let engine = gpulint::engine::Engine::new(settings);
    let mut alone: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let started = Instant::now();
            let r = engine.check_text(
                Path::new("train.py"),
                "train.py".into(),
                text.clone(),
                gpulint::lang::Lang::Python,
            );
            assert_eq!(r.report.diagnostics.len(), findings);
            started.elapsed()
        })
        .collect();
    let median = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2].as_secs_f64() * 1000.0
    };
    let max = |v: &[Duration]| v.iter().max().map_or(0.0, |d| d.as_secs_f64() * 1000.0);
    println!(
        "{lines}-line Python file, {findings} findings, {RUNS} runs, {} CPUs",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!(
        "didOpen → publishDiagnostics:   median {:.1} ms (max {:.1} ms)",
        median(&mut open),
        max(&open)
    );
    println!(
        "didChange → publishDiagnostics: median {:.1} ms (max {:.1} ms)",
        median(&mut keystroke),
        max(&keystroke)
    );
    println!(
        "the engine alone (check_text):  median {:.1} ms (max {:.1} ms)",
        median(&mut alone),
        max(&alone)
    );
}

/// The Python fixtures, joined and cut or repeated to exactly `LINES` lines.
fn source(repo: &Path) -> String {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo.join("fixtures/python"))
        .expect("fixtures/python")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|e| e == "py")
                && !p
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("GL"))
        })
        .collect();
    files.sort();
    let mut lines: Vec<String> = Vec::new();
    while lines.len() < LINES {
        for f in &files {
            let text = std::fs::read_to_string(f).unwrap_or_default();
            lines.extend(text.lines().map(str::to_string));
        }
    }
    lines.truncate(LINES);
    lines.join("\n") + "\n"
}
