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
    let source = Arc::new(SourceFile::new(
        path.to_path_buf(),
        display.clone(),
        String::new(),
    ));
    let mut d = Diagnostic::new(&GL002, Span::new(0, 0), format!("file skipped: {reason}"))
        .primary_label("not checked")
        .help("fix the file or exclude it with `extend-exclude` in gpulint.toml");
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
    }
}

/// The result of a file that was checked.
pub(super) fn checked(
    report: FileReport,
    partial: bool,
    dependencies: Vec<std::path::PathBuf>,
    links: Vec<crate::link::Link>,
) -> FileResult {
    FileResult {
        report,
        status: Status::Checked,
        reason: None,
        partial,
        dependencies,
        links,
    }
}
