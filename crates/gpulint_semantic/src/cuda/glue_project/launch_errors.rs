//! Launch errors across files: a function that ends with a kernel launch leaves the check to
//! its callers. Whether one of them checks is read from the C/C++/CUDA files of its directory,
//! its parent and the sources of the parent's other subdirectories (an extension keeps its
//! bindings in a `pybind/` or `csrc/` folder next to the kernels' one). Those files are read through the
//! run's word sets (see `foreign`): parsed only when they spell a name a question asks about.

use super::foreign::sub_dirs;
use super::{dir_files, Resolver, Sibling, MAX_DEPTH, MAX_VISITS};
use crate::cuda::glue::{CallTail, FileFacts};
use crate::Options;
use std::path::{Path, PathBuf};

/// A caller as the resolver reports it: its name and, for another file, its path.
type Caller = (String, Option<PathBuf>);

/// A way out of a function that ends with a launch on which nothing checks for launch errors.
#[derive(Debug, Default, Clone)]
pub struct UncheckedPath {
    /// The callers on the way, nearest first.
    pub callers: Vec<Caller>,
    /// The function on the way that Python calls, if the way ends there (else it ends at a
    /// statement after the call of the last caller that is no check).
    pub bound: Option<String>,
}

impl Resolver<'static> {
    /// A resolver for launch-error questions about the file at `path` (facts `here`): its
    /// directory, its parent and the parent's other subdirectories (recorded as dependencies).
    pub fn for_launch_errors(here: &FileFacts, path: &Path, options: &Options) -> Self {
        let (mut files, mut paths, me) = Sibling::start(here, path);
        let dir = me.as_deref().and_then(Path::parent);
        let parent = dir.and_then(Path::parent);
        let mut dirs: Vec<PathBuf> = dir
            .into_iter()
            .chain(parent)
            .map(Path::to_path_buf)
            .collect();
        let own = dirs.len();
        if let (Some(dir), Some(parent)) = (dir, parent) {
            dirs.extend(sub_dirs(parent).iter().filter(|d| *d != dir).cloned());
        }
        for (k, d) in dirs.iter().enumerate() {
            if !d.is_dir() {
                continue;
            }
            gpulint_source::note_dependency(d);
            for f in dir_files(d).iter() {
                if Some(f) == me.as_ref() {
                    continue;
                }
                // In the other subdirectories, the sources only (bindings and callers); their
                // headers declare.
                let header = f
                    .extension()
                    .and_then(|e| e.to_str())
                    .is_some_and(|e| HEADERS.contains(&e));
                if k >= own && header {
                    continue;
                }
                gpulint_source::note_dependency(f);
                files.push(Sibling::on_disk(f));
                paths.push(f.clone());
            }
        }
        Resolver {
            indexes: files.iter().map(|_| std::cell::OnceCell::new()).collect(),
            files,
            options: options.clone(),
            trusted: &[],
            visits: std::cell::Cell::new(0),
            paths,
            python: None,
            python_sites: Default::default(),
        }
    }
}

/// Header extensions, not read in the parent's other subdirectories.
const HEADERS: &[&str] = &["h", "hpp", "cuh"];

/// Files besides the one that defines a function that may spell its name for its callers to
/// be followed.
const MAX_NAMING_FILES: usize = 8;

impl Sibling {
    /// Does the file spell `name` (or, once read, name it in its facts)?
    fn spells_name(&self, name: &str) -> bool {
        if let Some(facts) = self.facts.get() {
            return facts.as_deref().is_some_and(|f| {
                f.bound.contains(name)
                    || f.referenced.contains(name)
                    || f.fns
                        .iter()
                        .any(|g| g.name == name || g.calls.iter().any(|c| c.callee == name))
            });
        }
        if !self.on_disk {
            return false;
        }
        match self.words().and_then(|w| w.spells(name)) {
            Some(answer) => answer,
            None => self
                .path
                .as_deref()
                .is_some_and(|p| super::foreign::spelled_in(p, name)),
        }
    }
}

impl Resolver<'_> {
    /// At most [`MAX_NAMING_FILES`] files other than `home` spell `name`.
    fn few_spell(&self, home: usize, name: &str) -> bool {
        self.files
            .iter()
            .enumerate()
            .filter(|(i, f)| *i != home && f.spells_name(name))
            .nth(MAX_NAMING_FILES)
            .is_none()
    }

    /// Function `name` of this file ends with a launch: is there a path from Python (a
    /// binding, or a caller that goes on with another statement) on which no caller checks
    /// for launch errors? `Some(path)`: yes; `None`: every path checks, or the callers cannot
    /// all be seen (a function handed around as a pointer, no caller and no binding found).
    /// `is_check` tells whether a statement that follows a call checks (`CallTail::Other`).
    pub fn unchecked_launch_errors(
        &self,
        name: &str,
        is_check: &dyn Fn(&str) -> bool,
    ) -> Option<UncheckedPath> {
        self.visits.set(0);
        let mut path = UncheckedPath::default();
        let open = self.errors_open(0, name, 0, is_check, &mut path);
        path.callers.reverse();
        open.then_some(path)
    }

    fn errors_open(
        &self,
        home: usize,
        name: &str,
        depth: usize,
        is_check: &dyn Fn(&str) -> bool,
        path: &mut UncheckedPath,
    ) -> bool {
        self.visits.set(self.visits.get() + 1);
        if self.visits.get() > MAX_VISITS || depth > MAX_DEPTH || self.opaque(home, name) {
            return false;
        }
        // A name many files spell is a common word or a much-used helper: its callers are
        // not all followed (and the files are not parsed).
        if !self.few_spell(home, name) {
            return false;
        }
        // Another file defines a function of the same name (in another namespace, say): the
        // calls of the name cannot be told apart.
        let elsewhere = self.files.iter().enumerate().any(|(i, f)| {
            i != home
                && f.for_name(name, &self.options).is_some()
                && self.index(i).defined.contains(name)
        });
        if elsewhere {
            return false;
        }
        // Python calls it, and nothing between Python and the launch checks.
        if self.bound(home, name) {
            path.bound = Some(name.to_string());
            return true;
        }
        let mut seen = Vec::new();
        for (ci, gi) in self.callers_of(home, name, &mut seen) {
            let Some(g) = self.facts(ci).and_then(|f| f.fns.get(gi)) else {
                continue;
            };
            for call in g.calls.iter().filter(|c| c.callee == name) {
                let open = match &call.tail {
                    CallTail::Checked => false,
                    CallTail::Other(next) => !is_check(next),
                    CallTail::End => self.errors_open(ci, &g.name, depth + 1, is_check, path),
                };
                if open {
                    path.callers
                        .push((g.name.clone(), self.files[ci].path.clone()));
                    return true;
                }
            }
        }
        false
    }
}
