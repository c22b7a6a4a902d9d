//! The result of a file by how its check ended: checked, skipped (GL002 says why), or an
//! internal error (a panic caught while checking it).

use super::{FileResult, Status};
use crate::rules::tool::GL002;
use gpulint_diagnostics::{Diagnostic, FileReport, Span};
use gpulint_source::SourceFile;
use sha2::{Digest, Sha256};
use std::path::Path;
use std::sync::Arc;

pub(super) fn internal_error(
    path: &Path,
    display: String,
    payload: Box<dyn std::any::Any + Send>,
) -> FileResult {
    let msg = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    let reason = format!("internal error while checking this file ({msg}); please report it");
    let mut r = skipped(path, display, reason);
    r.status = Status::InternalError;
    r
}

pub(super) fn skipped(path: &Path, display: String, reason: String) -> FileResult {
    let message = format!("file skipped: {reason}");
    let help = "fix the file or exclude it with `extend-exclude` in gpulint.toml";
    skipped_with(path, display, reason, message, help)
}

/// A directory that could not be read: nothing under it was checked.
pub fn unreadable_directory(path: &Path, display: String, reason: String) -> FileResult {
    let message =
        format!("directory skipped: cannot read it ({reason}); nothing under it was checked");
    let help = "fix its permissions or exclude it with `extend-exclude` in gpulint.toml";
    let reason = format!("cannot read this directory: {reason}");
    skipped_with(path, display, reason, message, help)
}

fn skipped_with(
    path: &Path,
    display: String,
    reason: String,
    message: String,
    help: &str,
) -> FileResult {
    let source = Arc::new(SourceFile::new(
        path.to_path_buf(),
        display.clone(),
        String::new(),
    ));
    let mut d = Diagnostic::new(&GL002, Span::new(0, 0), message)
        .primary_label("not checked")
        .help(help);
    d.location = gpulint_diagnostics::Location {
        line: 1,
        column: 1,
        end_line: 1,
        end_column: 1,
    };
    let mut h = Sha256::new();
    h.update(format!("GL002\0{display}").as_bytes());
    d.fingerprint = format!("{:x}", h.finalize())[..32].to_string() + ":1";
    FileResult {
        report: FileReport {
            display_path: display,
            source,
            diagnostics: vec![d],
            notebook: None,
        },
        status: Status::Skipped,
        reason: Some(reason),
        partial: false,
        dependencies: Vec::new(),
        links: Vec::new(),
        calls: Vec::new(),
    }
}

/// The result of a file that was checked.
pub(super) fn checked(
    report: FileReport,
    partial: bool,
    dependencies: Vec<std::path::PathBuf>,
    links: Vec<crate::link::Link>,
    calls: Vec<gpulint_semantic::python::ext_calls::ExtCall>,
) -> FileResult {
    FileResult {
        report,
        status: Status::Checked,
        reason: None,
        partial,
        dependencies,
        links,
        calls,
    }
}

/// GL002 for each code cell of a notebook whose `source` could not be read: at the cell, line 1.
pub(super) fn unread_cells(
    fingerprint_path: &str,
    notebook: &gpulint_source::notebook::Notebook,
) -> Vec<Diagnostic> {
    notebook
        .unread
        .iter()
        .map(|(cell, why)| {
            let mut d = Diagnostic::new(
                &GL002,
                Span::new(0, 0),
                format!("cell {cell} skipped: {why}; its code was not checked"),
            )
            .primary_label("not checked")
            .help("a code cell's `source` is a string or a list of strings: fix the notebook's JSON (open and save it in Jupyter)");
            d.location = gpulint_diagnostics::Location {
                line: 1,
                column: 1,
                end_line: 1,
                end_column: 1,
            };
            d.cell = Some(*cell);
            let mut h = Sha256::new();
            h.update(format!("GL002\0{fingerprint_path}\0cell {cell}").as_bytes());
            d.fingerprint = format!("{:x}", h.finalize())[..32].to_string() + ":1";
            d
        })
        .collect()
}
