//! The link between Python files and the C++/CUDA sources they build into extensions.
//!
//! This module holds what is recorded of a build (and cached with the file); the pass itself
//! is part of [`run`](crate::run). A checked Python file that builds an extension (see
//! [`extensions`](gpulint_semantic::python::extensions)) names its sources; the run then also
//! checks those sources when they are not among the files already found (`gpulint setup.py`
//! checks the kernels it compiles), once each, in a deterministic order, unless the user's
//! `exclude` configuration excludes them. Findings in a source built by a Python entry get a
//! note (and, in SARIF, a related location) naming that entry: `built by setup.py:14
//! (CUDAExtension "fused_adam")`.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One extension build in a checked Python file, as the run needs it (cached with the file).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    /// 1-based line of the build call in the Python file (in a notebook: of the cell).
    pub line: usize,
    /// Notebook cell of the call, if any.
    #[serde(default)]
    pub cell: Option<usize>,
    /// `CUDAExtension "fused_adam"`.
    pub what: String,
    /// The existing sources it compiles, as paths from the working directory.
    pub sources: Vec<PathBuf>,
    /// Parts of its source list that could not be read without running the file: line and why.
    #[serde(default)]
    pub unresolved: Vec<(usize, String)>,
    /// Sources passed as text (`load_inline`), checked with the Python file.
    #[serde(default)]
    pub inline: usize,
    /// The Python file the entry is in, as shown, when it is not the checked file (a subclass
    /// in a sibling module that gives the sources: `line` is then its line there).
    #[serde(default)]
    pub entry: Option<String>,
    /// The name of the module it builds (`fused_adam`), when constant: the module Python
    /// imports to call the functions its sources bind.
    #[serde(default)]
    pub module: Option<String>,
}

impl Link {
    /// `setup.py:14 (CUDAExtension "fused_adam")`.
    pub fn describe(&self, python: &str) -> String {
        let python = self.entry.as_deref().unwrap_or(python);
        match self.cell {
            Some(c) => format!("{python}:cell {c}:{} ({})", self.line, self.what),
            None => format!("{python}:{} ({})", self.line, self.what),
        }
    }
}

/// A key under which the same file is found whatever path names it.
pub(crate) fn identity(path: &Path, cwd: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        cwd.join(path)
    };
    std::fs::canonicalize(&absolute)
        .unwrap_or_else(|_| gpulint_semantic::python::extensions::normalize(&absolute))
}
