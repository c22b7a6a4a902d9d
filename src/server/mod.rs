//! `gpulint server`: a Language Server Protocol server on standard input and output.
//!
//! Open documents are checked as the command line checks files — Python, notebooks (as
//! notebook documents, or an `.ipynb` opened as text), C/C++/CUDA and manifests — with the
//! configuration found from each file's folder upward, on open, on every change (full or
//! incremental sync) and on save. Checks run on worker threads, never on the thread that reads
//! the client's messages; a document changed again before its check began is checked once, and
//! findings are published only for the version still open. Quick fixes add `# noqa: CODE` /
//! `// NOLINT(CODE)`; a hover gives the rule's summary, and every diagnostic links to its
//! rule's page.

mod actions;
mod convert;
mod documents;
mod worker;

use documents::{
    apply_change, path_and_lang, DidChangeNotebook, DidCloseNotebook, DidOpenNotebook, NotebookDoc,
    TextDoc,
};
use lsp_server::{Connection, ErrorCode, Message, Notification, Request, Response};
use lsp_types::{
    DidChangeTextDocumentParams, DidCloseTextDocumentParams, DidOpenTextDocumentParams,
    DidSaveTextDocumentParams, InitializeParams, Url,
};
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use worker::{lock, Shared};

/// Runs the server until the client says `exit`. Exit code 0 after a `shutdown` request, 1
/// without one (as the protocol asks), 2 when the connection fails.
pub fn run() -> ExitCode {
    let (connection, _io) = Connection::stdio();
    match serve(connection) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("gpulint server: error: {e}");
            ExitCode::from(2)
        }
    }
}

/// What the server can do.
fn capabilities() -> serde_json::Value {
    json!({
        "textDocumentSync": {
            "openClose": true,
            "change": 2,
            "save": { "includeText": false },
        },
        "notebookDocumentSync": {
            "notebookSelector": [{
                "notebook": { "notebookType": "jupyter-notebook" },
                "cells": [{ "language": "python" }],
            }],
        },
        "codeActionProvider": { "codeActionKinds": ["quickfix"] },
        "hoverProvider": true,
    })
}

/// Serves one client on `connection`; `Ok(true)` when it shut down cleanly.
pub fn serve(connection: Connection) -> Result<bool, String> {
    let (id, params) = connection.initialize_start().map_err(|e| e.to_string())?;
    let params: InitializeParams = serde_json::from_value(params).unwrap_or_default();
    connection
        .initialize_finish(
            id,
            json!({
                "capabilities": capabilities(),
                "serverInfo": { "name": "gpulint", "version": env!("CARGO_PKG_VERSION") },
            }),
        )
        .map_err(|e| e.to_string())?;
    let roots = workspace_roots(&params);
    let sender = connection.sender.clone();
    let shared = Arc::new(Shared::new(
        roots,
        Box::new(move |m| {
            let _ = sender.send(m);
        }),
    ));
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 4));
    for i in 0..workers {
        let s = shared.clone();
        std::thread::Builder::new()
            .name(format!("gpulint-check-{i}"))
            .spawn(move || worker::work(s))
            .map_err(|e| format!("cannot start a thread: {e}"))?;
    }
    let mut clean = false;
    for msg in &connection.receiver {
        match msg {
            Message::Request(req) => {
                if connection
                    .handle_shutdown(&req)
                    .map_err(|e| e.to_string())?
                {
                    clean = true;
                    break;
                }
                let response = request(&shared, req);
                let _ = connection.sender.send(Message::Response(response));
            }
            Message::Notification(n) if n.method == "exit" => break,
            Message::Notification(n) => notification(&shared, n),
            Message::Response(_) => {}
        }
    }
    shared.queue.stop();
    Ok(clean)
}

/// The workspace folders, else the root the client names.
fn workspace_roots(params: &InitializeParams) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = params
        .workspace_folders
        .iter()
        .flatten()
        .filter_map(|f| f.uri.to_file_path().ok())
        .collect();
    #[allow(deprecated)]
    if roots.is_empty() {
        roots.extend(params.root_uri.as_ref().and_then(|u| u.to_file_path().ok()));
    }
    roots
        .into_iter()
        .map(|r| std::fs::canonicalize(&r).unwrap_or(r))
        .collect()
}

fn request(shared: &Shared, req: Request) -> Response {
    let id = req.id.clone();
    let result = match req.method.as_str() {
        "textDocument/codeAction" => serde_json::from_value(req.params)
            .map(|p| json!(actions::code_actions(&lock(&shared.docs), p))),
        "textDocument/hover" => serde_json::from_value(req.params)
            .map(|p| json!(actions::hover(&lock(&shared.docs), p))),
        method => {
            return Response::new_err(
                id,
                ErrorCode::MethodNotFound as i32,
                format!("gpulint does not handle `{method}`"),
            )
        }
    };
    match result {
        Ok(value) => Response::new_ok(id, value),
        Err(e) => Response::new_err(id, ErrorCode::InvalidParams as i32, e.to_string()),
    }
}

/// Can this be a configuration file, whose change changes every check? Any TOML file can be
/// one that another extends (`extend = "../base.toml"`).
fn is_config(uri: &Url) -> bool {
    uri.path_segments()
        .and_then(|mut s| s.next_back())
        .is_some_and(|name| name.ends_with(".toml"))
}

fn notification(shared: &Shared, n: Notification) {
    match n.method.as_str() {
        "textDocument/didOpen" => {
            let Ok(p) = serde_json::from_value::<DidOpenTextDocumentParams>(n.params) else {
                return;
            };
            let d = p.text_document;
            let (path, lang) = path_and_lang(&d.uri, &d.language_id);
            let doc = TextDoc {
                version: d.version,
                text: d.text,
                path,
                lang,
            };
            lock(&shared.docs).text.insert(d.uri.clone(), doc);
            shared.queue.push(d.uri);
        }
        "textDocument/didChange" => {
            let Ok(p) = serde_json::from_value::<DidChangeTextDocumentParams>(n.params) else {
                return;
            };
            let uri = p.text_document.uri;
            {
                let mut docs = lock(&shared.docs);
                let Some(doc) = docs.text.get_mut(&uri) else {
                    return;
                };
                for change in p.content_changes {
                    apply_change(&mut doc.text, change);
                }
                doc.version = p.text_document.version;
            }
            // A configuration file takes effect when saved (engines read it from disk).
            shared.queue.push(uri);
        }
        "textDocument/didSave" => {
            let Ok(p) = serde_json::from_value::<DidSaveTextDocumentParams>(n.params) else {
                return;
            };
            if is_config(&p.text_document.uri) {
                shared.reload();
            } else if lock(&shared.docs).text.contains_key(&p.text_document.uri) {
                shared.queue.push(p.text_document.uri);
            }
        }
        "textDocument/didClose" => {
            let Ok(p) = serde_json::from_value::<DidCloseTextDocumentParams>(n.params) else {
                return;
            };
            let uri = p.text_document.uri;
            let mut docs = lock(&shared.docs);
            docs.text.remove(&uri);
            docs.published.remove(&uri);
            shared.forget(&uri);
            shared.publish(uri, Vec::new(), None);
        }
        "notebookDocument/didOpen" => {
            let Ok(p) = serde_json::from_value::<DidOpenNotebook>(n.params) else {
                return;
            };
            let (uri, nb) = NotebookDoc::open(p);
            lock(&shared.docs).notebooks.insert(uri.clone(), nb);
            shared.queue.push(uri);
        }
        "notebookDocument/didChange" => {
            let Ok(p) = serde_json::from_value::<DidChangeNotebook>(n.params) else {
                return;
            };
            let uri = p.notebook_document.uri;
            let cleared = {
                let mut docs = lock(&shared.docs);
                let Some(nb) = docs.notebooks.get_mut(&uri) else {
                    return;
                };
                let before: Vec<Url> = nb.cells.iter().map(|c| c.uri.clone()).collect();
                nb.change(p.notebook_document.version, p.change);
                let after: Vec<Url> = nb.cells.iter().map(|c| c.uri.clone()).collect();
                before
                    .into_iter()
                    .filter(|u| !after.contains(u))
                    .collect::<Vec<_>>()
            };
            for cell in cleared {
                lock(&shared.docs).published.remove(&cell);
                shared.publish(cell, Vec::new(), None);
            }
            shared.queue.push(uri);
        }
        "notebookDocument/didSave" => {
            if let Some(uri) = n
                .params
                .pointer("/notebookDocument/uri")
                .and_then(|u| u.as_str())
                .and_then(|u| Url::parse(u).ok())
            {
                shared.queue.push(uri);
            }
        }
        "notebookDocument/didClose" => {
            let Ok(p) = serde_json::from_value::<DidCloseNotebook>(n.params) else {
                return;
            };
            let uri = p.notebook_document.uri;
            let mut docs = lock(&shared.docs);
            let cells: Vec<Url> = docs
                .notebooks
                .remove(&uri)
                .map(|nb| nb.cells.into_iter().map(|c| c.uri).collect())
                .unwrap_or_default();
            shared.forget(&uri);
            for cell in cells
                .into_iter()
                .chain(p.cell_text_documents.into_iter().map(|c| c.uri))
            {
                if docs.published.remove(&cell).is_some() {
                    shared.publish(cell, Vec::new(), None);
                }
            }
        }
        _ => {}
    }
}
