//! Finding the files to check: paths named on the command line, and the files under
//! directories, respecting `.gitignore`, `.ignore`, hidden files and exclusion globs.

use globset::{Glob, GlobSet, GlobSetBuilder};
use gpulint_syntax::Lang;
use std::path::{Path, PathBuf};

/// Paths never walked into unless `exclude` replaces this list.
pub const DEFAULT_EXCLUDE: &[&str] = &[
    ".bzr",
    ".direnv",
    ".eggs",
    ".git",
    ".git-rewrite",
    ".gpulint_cache",
    ".hg",
    ".ipynb_checkpoints",
    ".mypy_cache",
    ".nox",
    ".pants.d",
    ".pytest_cache",
    ".pytype",
    ".ruff_cache",
    ".svn",
    ".tox",
    ".venv",
    "__pypackages__",
    "_build",
    "buck-out",
    "node_modules",
    "site-packages",
    "venv",
];

pub use gpulint_linter::run::Candidate;

/// What discovery found.
#[derive(Debug, Default)]
pub struct Discovery {
    pub files: Vec<Candidate>,
    /// Paths that do not exist (exit 2).
    pub missing: Vec<String>,
    /// Files named explicitly that are of no kind gpulint reads, links to directories, special
    /// files, and walk errors that are not about reading a path.
    pub skipped: Vec<(String, String)>,
    /// Directories (or entries) the walk could not read, with why: each is reported as GL002.
    pub unreadable: Vec<Unreadable>,
}

/// A directory or entry the walk could not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    pub path: PathBuf,
    /// As shown to the user.
    pub display: String,
    pub reason: String,
}

/// Exclusion globs, each group relative to the folder of the configuration file that declares
/// it: a path is excluded when a glob matches its path relative to that folder, or its name (so
/// `build` excludes every `build` folder).
#[derive(Debug, Clone, Default)]
pub struct Excludes {
    groups: Vec<(PathBuf, GlobSet)>,
}

impl Excludes {
    /// `groups`: (the folder the globs are relative to, the globs).
    pub fn new(groups: &[(PathBuf, Vec<String>)]) -> Result<Excludes, String> {
        let mut out = Vec::new();
        for (base, patterns) in groups {
            let mut b = GlobSetBuilder::new();
            for p in patterns {
                let p = p.trim_end_matches('/');
                b.add(Glob::new(p).map_err(|e| format!("invalid exclude glob `{p}`: {e}"))?);
            }
            let base = std::fs::canonicalize(base).unwrap_or_else(|_| base.clone());
            out.push((base, b.build().map_err(|e| e.to_string())?));
        }
        Ok(Excludes { groups: out })
    }

    /// Is the entry at `path` (absolute) excluded, by its own name or path?
    pub fn is_excluded(&self, path: &Path) -> bool {
        let name = path.file_name().map(Path::new);
        self.groups.iter().any(|(base, set)| {
            !set.is_empty()
                && (name.is_some_and(|n| set.is_match(n))
                    || path.strip_prefix(base).is_ok_and(|rel| set.is_match(rel)))
        })
    }

    /// Is a file named on the command line excluded (`--force-exclude`)? The file is, and so
    /// is each folder on the way below a group's folder, as a walk would see them.
    pub fn excludes_file(&self, path: &Path, cwd: &Path) -> bool {
        let absolute = if path.is_absolute() {
            path.to_path_buf()
        } else {
            cwd.join(path)
        };
        let absolute = std::fs::canonicalize(&absolute).unwrap_or(absolute);
        if self.is_excluded(&absolute) {
            return true;
        }
        self.groups.iter().any(|(base, set)| {
            let Ok(rel) = absolute.strip_prefix(base) else {
                return false;
            };
            let mut prefix = PathBuf::new();
            rel.components().any(|c| {
                prefix.push(c);
                matches!(c, std::path::Component::Normal(_))
                    && (set.is_match(&prefix) || set.is_match(Path::new(c.as_os_str())))
            })
        })
    }
}

/// Decides whether the walk leaves out an entry, given its absolute path.
pub type Exclusion = std::sync::Arc<dyn Fn(&Path) -> bool + Send + Sync>;

pub use gpulint_source::display_path;

/// Collects the files to check under `paths`; the walk leaves out what `excluded` says.
pub fn discover(paths: &[PathBuf], excluded: &Exclusion, cwd: &Path) -> Discovery {
    let mut out = Discovery::default();
    for root in paths {
        let meta = std::fs::metadata(root);
        match meta {
            Err(_) if root.symlink_metadata().is_ok() => {
                // A broken link named explicitly: it is a file we cannot read.
                if let Some(lang) = Lang::of_path(root) {
                    out.files
                        .push(Candidate::new(root.clone(), display_path(root, cwd), lang));
                } else {
                    out.missing.push(root.display().to_string());
                }
            }
            Err(_) => out.missing.push(root.display().to_string()),
            Ok(m) if m.is_file() => match Lang::of_path(root) {
                // A file named explicitly is always checked, excluded or not.
                Some(lang) => {
                    out.files
                        .push(Candidate::new(root.clone(), display_path(root, cwd), lang))
                }
                None => out.skipped.push((
                    display_path(root, cwd),
                    "not a Python, CUDA/C++ or dependency manifest file".into(),
                )),
            },
            Ok(m) if !m.is_dir() => out.skipped.push((
                // Named on the command line (`gpulint /dev/null`): reading it could block or
                // never end, and it is no source file, whatever its name.
                display_path(root, cwd),
                "not a regular file (a FIFO, socket or device)".into(),
            )),
            Ok(_) => walk(root, excluded, cwd, &mut out),
        }
    }
    out.files.sort();
    out.files.dedup();
    if paths.len() > 1 {
        // Overlapping arguments (`gpulint . sub`, `gpulint a.py ./a.py`) name some files twice:
        // each is checked once, under the first name.
        let mut seen = std::collections::HashSet::new();
        out.files.retain(|c| {
            let absolute = cwd.join(c.path());
            seen.insert(std::fs::canonicalize(&absolute).unwrap_or(absolute))
        });
    }
    // The list lives until the run ends: no room for files that will never come.
    out.files.shrink_to_fit();
    out
}

fn walk(root: &Path, excluded: &Exclusion, cwd: &Path, out: &mut Discovery) {
    let root_owned = root.to_path_buf();
    // Entries are judged by their absolute path: the root's real path and the rest.
    let absolute_root = {
        let a = if root.is_absolute() {
            root.to_path_buf()
        } else {
            cwd.join(root)
        };
        std::fs::canonicalize(&a).unwrap_or(a)
    };
    let mut builder = ignore::WalkBuilder::new(root);
    builder
        .hidden(true)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(false)
        .ignore(true)
        .parents(true)
        .require_git(false)
        .follow_links(false);
    let walker = builder
        .filter_entry({
            let root = root_owned.clone();
            let excluded = excluded.clone();
            move |entry| {
                let rel = entry.path().strip_prefix(&root).unwrap_or(entry.path());
                rel.as_os_str().is_empty() || !excluded(&absolute_root.join(rel))
            }
        })
        .build();
    for entry in walker {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                if let Some(io) = e.io_error() {
                    // A folder that cannot be listed (or an entry that cannot be looked at):
                    // everything under it goes unchecked, so it is a finding, not a note.
                    let path = error_path(&e).unwrap_or_else(|| root.to_path_buf());
                    out.unreadable.push(Unreadable {
                        display: display_path(&path, cwd),
                        path,
                        reason: match io.kind() {
                            std::io::ErrorKind::PermissionDenied => "permission denied".into(),
                            _ => first_line(&io.to_string()).to_string(),
                        },
                    });
                    continue;
                }
                let path = error_path(&e)
                    .map(|p| display_path(&p, cwd))
                    .unwrap_or_else(|| display_path(root, cwd));
                out.skipped.push((
                    path,
                    format!("cannot walk into it: {}", first_line(&e.to_string())),
                ));
                continue;
            }
        };
        let Some(ft) = entry.file_type() else {
            continue;
        };
        let path = entry.path();
        let target = ft.is_symlink().then(|| std::fs::metadata(path));
        if let Some(Ok(m)) = &target {
            if m.is_dir() {
                // Links to directories are not followed, so link loops cannot happen; said, so
                // that nothing is left out in silence.
                out.skipped.push((
                    display_path(path, cwd),
                    "a link to a directory, not followed (name it on the command line to check it)"
                        .into(),
                ));
                continue;
            }
        }
        let Some(lang) = Lang::of_path(path) else {
            continue;
        };
        let is_file = match &target {
            // Links to files are checked (a broken one becomes GL002).
            Some(t) => t.as_ref().map(|m| m.is_file()).unwrap_or(true),
            None => ft.is_file(),
        };
        if !is_file
            && !ft.is_dir()
            && !target
                .as_ref()
                .is_some_and(|t| t.as_ref().is_ok_and(|m| m.is_dir()))
        {
            // A FIFO, socket or device with a source file's name: reading it could block.
            out.skipped.push((
                display_path(path, cwd),
                "not a regular file (a FIFO, socket or device)".into(),
            ));
            continue;
        }
        if is_file {
            // The files of a folder come one after the other: they share its path.
            let file = Candidate::beside(
                path.to_path_buf(),
                display_path(path, cwd),
                lang,
                out.files.last(),
            );
            out.files.push(file);
        }
    }
}

fn error_path(e: &ignore::Error) -> Option<PathBuf> {
    match e {
        ignore::Error::WithPath { path, .. } => Some(path.clone()),
        ignore::Error::WithDepth { err, .. } => error_path(err),
        ignore::Error::WithLineNumber { err, .. } => error_path(err),
        _ => None,
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_respecting_gitignore_and_excludes() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        for f in [
            "a.py",
            "k.cu",
            "notes.txt",
            "ignored/x.py",
            ".hidden/y.py",
            "venv/z.py",
            "sub/op.cc",
            "build/gen.py",
        ] {
            let p = root.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, "x = 1\n").unwrap();
        }
        std::fs::write(root.join(".gitignore"), "ignored/\n").unwrap();
        let mut ex: Vec<String> = DEFAULT_EXCLUDE.iter().map(|s| s.to_string()).collect();
        ex.push("build".into());
        let ex = Excludes::new(&[(root.to_path_buf(), ex)]).unwrap();
        let ex: Exclusion = std::sync::Arc::new(move |p: &Path| ex.is_excluded(p));
        let d = discover(&[root.to_path_buf()], &ex, root);
        let names: Vec<_> = d.files.iter().map(|c| c.display()).collect();
        assert_eq!(names, vec!["a.py", "k.cu", "sub/op.cc"]);
        // Named explicitly: always checked.
        let d = discover(&[root.join("venv/z.py")], &ex, root);
        assert_eq!(d.files.len(), 1);
        let d = discover(&[root.join("nope")], &ex, root);
        assert_eq!(d.missing.len(), 1);
    }
}
