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

/// Exclusion globs: a path is excluded when the glob matches its path relative to the walk
/// root, or any of its components (so `build` excludes every `build` folder).
pub struct Excludes {
    set: GlobSet,
}

impl Excludes {
    pub fn new(patterns: &[String]) -> Result<Excludes, String> {
        let mut b = GlobSetBuilder::new();
        for p in patterns {
            let p = p.trim_end_matches('/');
            b.add(Glob::new(p).map_err(|e| format!("invalid exclude glob `{p}`: {e}"))?);
        }
        Ok(Excludes {
            set: b.build().map_err(|e| e.to_string())?,
        })
    }

    pub fn is_excluded(&self, relative: &Path) -> bool {
        if self.set.is_empty() {
            return false;
        }
        if self.set.is_match(relative) {
            return true;
        }
        relative
            .file_name()
            .is_some_and(|name| self.set.is_match(Path::new(name)))
    }
}

impl Excludes {
    /// Is a file named on the command line excluded (`--force-exclude`)? Its path relative to
    /// `root` is matched, and so is each folder on the way, as a walk would.
    pub fn excludes_file(&self, path: &Path, root: &Path, cwd: &Path) -> bool {
        let absolute = if path.is_absolute() {
            path.to_path_buf()
        } else {
            cwd.join(path)
        };
        let absolute = std::fs::canonicalize(&absolute).unwrap_or(absolute);
        let relative = absolute.strip_prefix(root).unwrap_or(path);
        let mut prefix = PathBuf::new();
        relative.components().any(|c| {
            prefix.push(c);
            matches!(c, std::path::Component::Normal(_)) && self.is_excluded(&prefix)
        })
    }
}

pub use gpulint_source::display_path;

/// Collects the files to check under `paths`.
pub fn discover(paths: &[PathBuf], excludes: &Excludes, cwd: &Path) -> Discovery {
    let mut out = Discovery::default();
    for root in paths {
        let meta = std::fs::metadata(root);
        match meta {
            Err(_) if root.symlink_metadata().is_ok() => {
                // A broken link named explicitly: it is a file we cannot read.
                if let Some(lang) = Lang::of_path(root) {
                    out.files.push(Candidate {
                        path: root.clone(),
                        display: display_path(root, cwd),
                        lang,
                    });
                } else {
                    out.missing.push(root.display().to_string());
                }
            }
            Err(_) => out.missing.push(root.display().to_string()),
            Ok(m) if m.is_file() => match Lang::of_path(root) {
                // A file named explicitly is always checked, excluded or not.
                Some(lang) => out.files.push(Candidate {
                    path: root.clone(),
                    display: display_path(root, cwd),
                    lang,
                }),
                None => out.skipped.push((
                    display_path(root, cwd),
                    "not a Python, CUDA/C++ or dependency manifest file".into(),
                )),
            },
            Ok(_) => walk(root, excludes, cwd, &mut out),
        }
    }
    out.files.sort();
    out.files.dedup();
    if paths.len() > 1 {
        // Overlapping arguments (`gpulint . sub`, `gpulint a.py ./a.py`) name some files twice:
        // each is checked once, under the first name.
        let mut seen = std::collections::HashSet::new();
        out.files.retain(|c| {
            let absolute = cwd.join(&c.path);
            seen.insert(std::fs::canonicalize(&absolute).unwrap_or(absolute))
        });
    }
    out
}

fn walk(root: &Path, excludes: &Excludes, cwd: &Path, out: &mut Discovery) {
    let root_owned = root.to_path_buf();
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
            let ex = std::sync::Arc::new(Excludes {
                set: excludes.set.clone(),
            });
            move |entry| {
                let rel = entry.path().strip_prefix(&root).unwrap_or(entry.path());
                rel.as_os_str().is_empty() || !ex.is_excluded(rel)
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
            out.files.push(Candidate {
                path: path.to_path_buf(),
                display: display_path(path, cwd),
                lang,
            });
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
        let d = discover(&[root.to_path_buf()], &Excludes::new(&ex).unwrap(), root);
        let names: Vec<_> = d.files.iter().map(|c| c.display.clone()).collect();
        assert_eq!(names, vec!["a.py", "k.cu", "sub/op.cc"]);
        // Named explicitly: always checked.
        let d = discover(
            &[root.join("venv/z.py")],
            &Excludes::new(&ex).unwrap(),
            root,
        );
        assert_eq!(d.files.len(), 1);
        let d = discover(&[root.join("nope")], &Excludes::new(&ex).unwrap(), root);
        assert_eq!(d.missing.len(), 1);
    }
}
