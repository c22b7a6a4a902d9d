//! `gpulint server` end to end: a real LSP client drives the binary over standard input and
//! output — initialize, open, diagnostics, quick fix, hover, change, notebooks, shutdown — with
//! a deadline on every wait, so that a hung server fails the test instead of CI.

mod common;
#[path = "common/lsp_client.rs"]
mod lsp_client;

use common::write;
use lsp_client::{file_uri, Client};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

fn client(cwd: &Path) -> Client {
    Client::spawn(
        Path::new(env!("CARGO_BIN_EXE_gpulint")),
        cwd,
        Duration::from_secs(60),
    )
}

fn kernel() -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/link/csrc/kernel.cu"),
    )
    .unwrap()
}

fn codes(params: &Value) -> Vec<String> {
    params["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap_or("").to_string())
        .collect()
}

fn find<'a>(params: &'a Value, code: &str) -> &'a Value {
    params["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["code"] == code)
        .unwrap_or_else(|| panic!("no {code} in {params:#}"))
}

#[test]
fn diagnostics_quick_fix_hover_and_changes_over_stdio() {
    let tmp = tempfile::tempdir().unwrap();
    // The configuration is found from the file's folder, not the server's working directory.
    write(tmp.path(), "proj/gpulint.toml", "ignore = [\"CU011\"]\n");
    let cu = write(tmp.path(), "proj/ops/add.cu", kernel());
    let elsewhere = tempfile::tempdir().unwrap();
    let mut c = client(elsewhere.path());
    let init = c.initialize(&tmp.path().join("proj"));
    let caps = &init["result"]["capabilities"];
    assert_eq!(caps["hoverProvider"], true, "{init}");
    assert_eq!(caps["codeActionProvider"]["codeActionKinds"][0], "quickfix");
    assert_eq!(init["result"]["serverInfo"]["name"], "gpulint");

    // didOpen → diagnostics.
    let uri = file_uri(&cu);
    c.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": uri, "languageId": "cuda-cpp", "version": 1, "text": kernel()}}),
    );
    let p = c.diagnostics(&uri, Some(1));
    assert!(codes(&p).contains(&"CU001".to_string()), "{p:#}");
    assert!(
        !codes(&p).contains(&"CU011".to_string()),
        "CU011 is ignored by gpulint.toml: {p:#}"
    );
    let cu001 = find(&p, "CU001").clone();
    // `param[i]` on line 5, column 5 (1-based).
    assert_eq!(cu001["range"]["start"], json!({"line": 4, "character": 4}));
    assert_eq!(cu001["range"]["end"], json!({"line": 4, "character": 12}));
    assert_eq!(cu001["severity"], 1);
    assert_eq!(cu001["source"], "gpulint");
    assert!(
        cu001["codeDescription"]["href"]
            .as_str()
            .unwrap()
            .ends_with("/lints/CU001_unguarded-thread-index.md"),
        "{cu001}"
    );
    assert_eq!(find(&p, "CU003")["severity"], 1);

    // A quick fix: `// NOLINT(CU001)` at the end of the line.
    let r = c.request(
        "textDocument/codeAction",
        json!({
            "textDocument": {"uri": uri},
            "range": cu001["range"],
            "context": {"diagnostics": [cu001]},
        }),
    );
    let actions = r["result"].as_array().unwrap_or_else(|| panic!("{r}"));
    assert_eq!(actions.len(), 1, "{r:#}");
    assert_eq!(actions[0]["kind"], "quickfix");
    let edit = &actions[0]["edit"]["changes"][&uri][0];
    assert_eq!(edit["newText"], "  // NOLINT(CU001)");
    let end_of_line = kernel().lines().nth(4).unwrap().chars().count();
    assert_eq!(
        edit["range"]["start"],
        json!({"line": 4, "character": end_of_line})
    );

    // A hover on the finding: the rule and its page.
    let r = c.request(
        "textDocument/hover",
        json!({"textDocument": {"uri": uri}, "position": {"line": 4, "character": 6}}),
    );
    let hover = r["result"]["contents"]["value"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"));
    assert!(
        hover.contains("CU001") && hover.contains("unguarded-thread-index"),
        "{hover}"
    );
    let r = c.request(
        "textDocument/hover",
        json!({"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}}),
    );
    assert_eq!(r["result"], Value::Null);

    // didChange with the fix applied (an incremental edit) → CU001 is gone.
    c.notify(
        "textDocument/didChange",
        json!({
            "textDocument": {"uri": uri, "version": 2},
            "contentChanges": [{"range": edit["range"], "text": edit["newText"]}],
        }),
    );
    let p = c.diagnostics(&uri, Some(2));
    assert!(!codes(&p).contains(&"CU001".to_string()), "{p:#}");
    assert!(codes(&p).contains(&"CU003".to_string()), "{p:#}");

    // didClose clears them.
    c.notify(
        "textDocument/didClose",
        json!({"textDocument": {"uri": uri}}),
    );
    let p = c.diagnostics(&uri, None);
    assert_eq!(p["diagnostics"], json!([]));

    assert_eq!(c.shutdown(), Some(0));
}

const TF: &str = "import tensorflow as tf\n\nmodel = tf.keras.Sequential([tf.keras.layers.Dense(10)])\nfor gpu in tf.config.list_physical_devices(\"GPU\"):\n    x = \"𝄞\"; tf.config.experimental.set_memory_growth(gpu, True)\n";

#[test]
fn python_positions_are_utf16_and_notebooks_report_per_cell() {
    let tmp = tempfile::tempdir().unwrap();
    let py = write(tmp.path(), "train.py", TF);
    let mut c = client(tmp.path());
    c.initialize(tmp.path());
    let uri = file_uri(&py);
    c.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": uri, "languageId": "python", "version": 7, "text": TF}}),
    );
    let p = c.diagnostics(&uri, Some(7));
    let tf001 = find(&p, "TF001");
    // `x = "𝄞"; ` is 9 code points but 10 UTF-16 units: the call starts at character 14.
    assert_eq!(
        tf001["range"]["start"],
        json!({"line": 4, "character": 14}),
        "{tf001}"
    );
    assert_eq!(tf001["severity"], 1);
    let related = tf001["relatedInformation"].as_array().unwrap();
    assert_eq!(
        related[0]["location"]["range"]["start"]["line"], 2,
        "{tf001}"
    );
    let r = c.request(
        "textDocument/codeAction",
        json!({"textDocument": {"uri": uri}, "range": tf001["range"], "context": {"diagnostics": [tf001]}}),
    );
    let edit = &r["result"][0]["edit"]["changes"][&uri][0];
    assert_eq!(edit["newText"], "  # noqa: TF001", "{r:#}");

    // The same code as a notebook document: findings go to the code cell, at its own lines.
    let nb = file_uri(&tmp.path().join("train.ipynb"));
    let cell = |n: u32| {
        format!(
            "vscode-notebook-cell:{}#cell{n}",
            nb.trim_start_matches("file://")
        )
    };
    c.notify(
        "notebookDocument/didOpen",
        json!({
            "notebookDocument": {
                "uri": nb, "notebookType": "jupyter-notebook", "version": 1,
                "cells": [{"kind": 1, "document": cell(1)}, {"kind": 2, "document": cell(2)}],
            },
            "cellTextDocuments": [
                {"uri": cell(1), "languageId": "markdown", "version": 1, "text": "# Training"},
                {"uri": cell(2), "languageId": "python", "version": 1, "text": TF},
            ],
        }),
    );
    let p = c.diagnostics(&cell(2), None);
    let tf001 = find(&p, "TF001");
    assert_eq!(
        tf001["range"]["start"],
        json!({"line": 4, "character": 14}),
        "{tf001}"
    );
    // Editing the cell: the fix applied, the finding is gone.
    let eol = TF.lines().nth(4).unwrap().encode_utf16().count();
    c.notify(
        "notebookDocument/didChange",
        json!({
            "notebookDocument": {"uri": nb, "version": 2},
            "change": {"cells": {"textContent": [{
                "document": {"uri": cell(2), "version": 2},
                "changes": [{"range": {"start": {"line": 4, "character": eol}, "end": {"line": 4, "character": eol}}, "text": "  # noqa: TF001"}],
            }]}},
        }),
    );
    let p = c.wait_for("cell diagnostics without TF001", |m| {
        m["method"] == "textDocument/publishDiagnostics"
            && m["params"]["uri"] == cell(2)
            && !m["params"]["diagnostics"].to_string().contains("TF001")
    });
    assert!(!p.to_string().contains("TF001"));

    // An `.ipynb` opened as a text document: on the JSON line that holds the code.
    let text = serde_json::to_string_pretty(&json!({
        "cells": [{"cell_type": "code", "metadata": {}, "source": TF.split_inclusive('\n').collect::<Vec<_>>(), "outputs": [], "execution_count": null}],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5,
    }))
    .unwrap();
    let line = text
        .lines()
        .position(|l| l.contains("set_memory_growth"))
        .unwrap();
    let raw = file_uri(&tmp.path().join("raw.ipynb"));
    c.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": raw, "languageId": "json", "version": 1, "text": text}}),
    );
    let p = c.diagnostics(&raw, Some(1));
    assert_eq!(find(&p, "TF001")["range"]["start"]["line"], line, "{p:#}");
    assert_eq!(c.shutdown(), Some(0));
}

#[test]
fn a_kernel_names_the_open_python_file_that_builds_it() {
    let tmp = tempfile::tempdir().unwrap();
    let cu = write(tmp.path(), "csrc/kernel.cu", kernel());
    let setup = "from setuptools import setup\nfrom torch.utils.cpp_extension import CUDAExtension\n\nsetup(name=\"x\", ext_modules=[CUDAExtension(\"fused\", [\"csrc/kernel.cu\"])])\n";
    let py = write(tmp.path(), "setup.py", setup);
    let mut c = client(tmp.path());
    c.initialize(tmp.path());
    let (cu_uri, py_uri) = (file_uri(&cu), file_uri(&py));
    c.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": cu_uri, "languageId": "cuda-cpp", "version": 1, "text": kernel()}}),
    );
    c.diagnostics(&cu_uri, Some(1));
    // Opening the Python file that builds it checks the kernel again, with the note.
    c.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": py_uri, "languageId": "python", "version": 1, "text": setup}}),
    );
    let p = c.wait_for("kernel diagnostics naming setup.py", |m| {
        m["method"] == "textDocument/publishDiagnostics"
            && m["params"]["uri"] == cu_uri
            && m["params"]["diagnostics"]
                .to_string()
                .contains("built by setup.py:4")
    });
    let d = find(&p["params"], "CU001");
    let related = d["relatedInformation"].to_string();
    assert!(related.contains("setup.py"), "{d:#}");
    // A malformed configuration is shown, not fatal.
    write(tmp.path(), "gpulint.toml", "select = 3\n");
    c.notify(
        "textDocument/didSave",
        json!({"textDocument": {"uri": file_uri(&tmp.path().join("gpulint.toml"))}}),
    );
    let p = c.wait_for("a configuration error", |m| {
        m["params"]["uri"] == cu_uri
            && m["params"]["diagnostics"]
                .to_string()
                .contains("invalid configuration")
    });
    assert_eq!(p["params"]["diagnostics"][0]["severity"], 1);
    // An unknown request is an error, not a crash.
    let r = c.request(
        "textDocument/definition",
        json!({"textDocument": {"uri": cu_uri}, "position": {"line": 0, "character": 0}}),
    );
    assert_eq!(r["error"]["code"], -32601);
    assert_eq!(c.shutdown(), Some(0));
}

#[test]
fn open_files_use_their_nearest_configuration_and_what_it_extends() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "proj/gpulint.toml", "ignore = [\"CU011\"]\n");
    // ops/ has its own file, which builds on shared/base.toml (not on proj/gpulint.toml).
    write(
        tmp.path(),
        "proj/ops/gpulint.toml",
        "extend = \"../shared/base.toml\"\n",
    );
    let base = write(
        tmp.path(),
        "proj/shared/base.toml",
        "ignore = [\"CU001\"]\n",
    );
    let cu = write(tmp.path(), "proj/ops/add.cu", kernel());
    let mut c = client(tmp.path());
    c.initialize(&tmp.path().join("proj"));
    let uri = file_uri(&cu);
    c.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": uri, "languageId": "cuda-cpp", "version": 1, "text": kernel()}}),
    );
    let p = c.diagnostics(&uri, Some(1));
    assert!(!codes(&p).contains(&"CU001".to_string()), "{p:#}");
    assert!(codes(&p).contains(&"CU011".to_string()), "{p:#}");
    // Saving the extended file re-checks the open files with it.
    std::fs::write(&base, "ignore = [\"CU011\"]\n").unwrap();
    c.notify(
        "textDocument/didSave",
        json!({"textDocument": {"uri": file_uri(&base)}}),
    );
    let p = c.wait_for("findings with the changed base", |m| {
        m["method"] == "textDocument/publishDiagnostics"
            && m["params"]["uri"] == uri
            && m["params"]["diagnostics"].to_string().contains("CU001")
    });
    assert!(!codes(&p["params"]).contains(&"CU011".to_string()), "{p:#}");
    assert_eq!(c.shutdown(), Some(0));
}
