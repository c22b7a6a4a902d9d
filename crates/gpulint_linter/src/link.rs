//! The link between Python files and the C++/CUDA sources they build into extensions.
//!
//! A checked Python file that builds an extension (see
//! [`extensions`](gpulint_semantic::python::extensions)) names its sources; the run then also
//! checks those sources when they are not among the files already found (`gpulint setup.py`
//! checks the kernels it compiles), once each, in a deterministic order, unless the user's
//! `exclude` configuration excludes them. Findings in a source built by a Python entry get a
//! note (and, in SARIF, a related location) naming that entry: `built by setup.py:14
//! (CUDAExtension "fused_adam")`.

use crate::engine::Candidate;
use crate::engine::FileResult;
use gpulint_diagnostics::Related;
use gpulint_source::display_path;
use gpulint_syntax::Lang;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

/// Entries named in one note before the rest are counted.
const MAX_ENTRIES_IN_NOTE: usize = 3;

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
fn identity(path: &Path, cwd: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        cwd.join(path)
    };
    std::fs::canonicalize(&absolute)
        .unwrap_or_else(|_| gpulint_semantic::python::extensions::normalize(&absolute))
}

/// The C++/CUDA sources named by `links` (in the order of the checked files) that are not among `files`,
/// sorted, without duplicates, leaving out those `excluded` says the user excluded.
pub fn extra_sources<'a>(
    links: impl IntoIterator<Item = &'a Link>,
    files: &[Candidate],
    cwd: &Path,
    excluded: &dyn Fn(&Path) -> bool,
) -> Vec<Candidate> {
    let mut known: HashSet<PathBuf> = HashSet::new();
    let mut any = false;
    let mut extra = Vec::new();
    for link in links {
        for source in &link.sources {
            if !any {
                // Only runs that link anything pay for resolving the files found.
                known.extend(files.iter().map(|c| identity(&c.path, cwd)));
                any = true;
            }
            if Lang::of_path(source) != Some(Lang::Cuda) || excluded(source) {
                continue;
            }
            if known.insert(identity(source, cwd)) {
                extra.push(Candidate {
                    path: source.clone(),
                    display: display_path(source, cwd),
                    lang: Lang::Cuda,
                });
            }
        }
    }
    extra.sort();
    extra
}

/// Adds to every finding in a source built by a Python entry a note naming the entries (and
/// the same as related locations).
pub fn annotate(results: &mut [FileResult], cwd: &Path) {
    let mut built_by: BTreeMap<PathBuf, Vec<(String, Option<usize>, String)>> = BTreeMap::new();
    for r in results.iter() {
        for link in &r.links {
            for source in &link.sources {
                built_by.entry(identity(source, cwd)).or_default().push((
                    link.entry
                        .clone()
                        .unwrap_or_else(|| r.report.display_path.clone()),
                    // A notebook's line is cell-relative: no place in the file to point at.
                    link.cell.is_none().then_some(link.line),
                    link.describe(&r.report.display_path),
                ));
            }
        }
    }
    if built_by.is_empty() {
        return;
    }
    for entries in built_by.values_mut() {
        entries.sort();
        entries.dedup();
    }
    for r in results.iter_mut() {
        if r.report.diagnostics.is_empty()
            || Lang::of_path(&r.report.source.path) != Some(Lang::Cuda)
        {
            continue;
        }
        let Some(entries) = built_by.get(&identity(&r.report.source.path, cwd)) else {
            continue;
        };
        let mut names: Vec<&str> = entries
            .iter()
            .take(MAX_ENTRIES_IN_NOTE)
            .map(|e| e.2.as_str())
            .collect();
        let more = entries.len().saturating_sub(MAX_ENTRIES_IN_NOTE);
        let rest = format!("and {more} more");
        if more > 0 {
            names.push(&rest);
        }
        let note = format!("built by {}", names.join(", "));
        for d in &mut r.report.diagnostics {
            d.notes.push(note.clone());
            d.related
                .extend(entries.iter().filter_map(|(path, line, what)| {
                    Some(Related {
                        path: path.clone(),
                        line: (*line)?,
                        message: format!("built by {what}"),
                    })
                }));
        }
    }
}

/// For `--verbose`: what each extension build links, and what of it could not be read (in
/// the order of the files, then of the calls).
pub fn describe_all(results: &[FileResult]) -> Vec<String> {
    let mut out = Vec::new();
    for r in results {
        for link in &r.links {
            let n = link.sources.len();
            let mut line = format!(
                "linked {}: {n} source{}",
                link.describe(&r.report.display_path),
                if n == 1 { "" } else { "s" }
            );
            if link.inline > 0 {
                line.push_str(&format!(", {} inline", link.inline));
            }
            for (l, why) in &link.unresolved {
                line.push_str(&format!("; line {l} not resolved: {why}"));
            }
            out.push(line);
        }
    }
    out
}
