//! Launchers in other files: a binding that hands a tensor to a function defined in a C/C++/CUDA
//! file of its directory, its parent or a subdirectory (an extension's `cuda/` folder), which
//! launches kernels with that tensor's memory.

use super::{dir_files, facts_of_text, known_facts, read_small, remember, spells, MAX_DIR_ENTRIES};
use crate::cuda::glue::FileFacts;
use crate::Options;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

/// Subdirectories of a directory searched for the definitions of called functions.
const MAX_SUBDIRS: usize = 16;

static SUBDIRS: LazyLock<Mutex<HashMap<PathBuf, Arc<Vec<PathBuf>>>>> =
    LazyLock::new(Default::default);

/// The immediate subdirectories of `dir` (the first by name).
fn sub_dirs(dir: &Path) -> Arc<Vec<PathBuf>> {
    if let Some(v) = SUBDIRS.lock().ok().and_then(|m| m.get(dir).cloned()) {
        return v;
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .take(MAX_DIR_ENTRIES)
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    dirs.sort();
    dirs.truncate(MAX_SUBDIRS);
    let dirs = Arc::new(dirs);
    if let Ok(mut m) = SUBDIRS.lock() {
        m.insert(dir.to_path_buf(), dirs.clone());
    }
    dirs
}

/// The glue facts of the file at `path` when its text spells `name` as a whole word (parsed
/// once per run and kept; a file that does not spell it is read again by a later question
/// rather than held in memory).
fn facts_naming(path: &Path, name: &str, options: &Options) -> Option<Arc<FileFacts>> {
    if let Some(known) = known_facts(path) {
        return known;
    }
    let text = read_small(path)?;
    if !spells(&text, name) {
        return None;
    }
    let facts = facts_of_text(&text, options);
    remember(path, facts.clone());
    facts
}

/// A function defined in another file that launches kernels with a tensor's memory.
#[derive(Debug, Clone)]
pub struct ForeignLauncher {
    pub path: PathBuf,
    /// The parameter whose memory reaches the kernel.
    pub param: usize,
}

/// Where function `name`, which the file at `path` calls but does not define, is defined in
/// the C/C++/CUDA files of the file's directory, its parent or its subdirectories (the
/// `cuda/` folder of an extension's bindings): when every definition found hands a tensor
/// parameter's memory to a kernel without a device guard of its own, the first of them.
pub fn foreign_launcher(path: &Path, options: &Options, name: &str) -> Option<ForeignLauncher> {
    let me = std::path::absolute(path).ok()?;
    let dir = me.parent()?;
    let mut dirs: Vec<PathBuf> = std::iter::once(dir)
        .chain(dir.parent())
        .map(Path::to_path_buf)
        .collect();
    dirs.extend(sub_dirs(dir).iter().cloned());
    let mut found: Option<ForeignLauncher> = None;
    for d in &dirs {
        if !d.is_dir() {
            continue;
        }
        gpulint_source::note_dependency(d);
        for f in dir_files(d).iter().filter(|f| **f != me) {
            gpulint_source::note_dependency(f);
            // Parsed only when its text names the function.
            let Some(facts) = facts_naming(f, name, options) else {
                continue;
            };
            for g in facts.fns.iter().filter(|g| g.name == name) {
                match g.launches {
                    Some(param) if !g.guarded => {
                        found.get_or_insert(ForeignLauncher {
                            path: f.clone(),
                            param,
                        });
                    }
                    _ => return None,
                }
            }
        }
    }
    found
}
