//! A file's result rebuilt from the cache, without parsing it again.

use super::{Engine, FileResult, Status};
use gpulint_diagnostics::FileReport;
use gpulint_source::decode;
use gpulint_source::SourceFile;
use gpulint_syntax as lang;
use std::path::Path;
use std::sync::Arc;

impl Engine {
    /// Rebuilds a file's result from cached findings: the text (and notebook map) is restored
    /// from the bytes, nothing is parsed. `None` if the bytes no longer decode as they did.
    pub fn restore(
        &self,
        path: &Path,
        display: String,
        bytes: Vec<u8>,
        cached: crate::cache::Cached,
    ) -> Option<FileResult> {
        let (diagnostics, parsed, partial, dependencies, links, calls) = cached;
        let text = decode(bytes).ok()?;
        let (text, notebook) = if lang::is_notebook(path) {
            let mut nb = gpulint_source::notebook::parse(&text).ok()?;
            let source = std::mem::take(&mut nb.source);
            (source, Some(Arc::new(nb)))
        } else {
            (text, None)
        };
        if diagnostics.iter().any(|d| d.span.end > text.len()) {
            return None;
        }
        Some(FileResult {
            report: FileReport {
                display_path: display.clone(),
                source: Arc::new(SourceFile::new(path.to_path_buf(), display, text)),
                diagnostics,
                notebook,
            },
            status: if parsed {
                Status::Checked
            } else {
                Status::Prefiltered
            },
            reason: None,
            partial,
            dependencies,
            links,
            calls,
        })
    }
}
