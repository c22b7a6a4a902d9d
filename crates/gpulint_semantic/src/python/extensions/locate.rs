//! Sources on disk that a build call does not name exactly: the C++/CUDA sources of a
//! TensorFlow op library, relative sources found in an ancestor folder, and whether the folder
//! of a missing source holds anything. Every folder consulted is noted as a dependency.

use super::{push_source, unresolved, ExtensionBuild, Folder, Source, Str, MAX_GLOB_MATCHES};
use gpulint_source::Span;
use std::path::{Path, PathBuf};
use tree_sitter::Node;

impl Folder<'_, '_> {
    /// `x.so` → the C++/CUDA sources with the same stem next to it.
    pub(super) fn op_library_sources(&self, arg: Node<'_>, lib: &Str, b: &mut ExtensionBuild) {
        let path = self.resolve(lib);
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            b.unresolved
                .push(unresolved(arg, "the library path has no file name"));
            return;
        };
        let stem = name.split('.').next().unwrap_or(name);
        let mut stems = vec![stem];
        for prefix in ["lib", "_"] {
            if let Some(s) = stem.strip_prefix(prefix).filter(|s| !s.is_empty()) {
                stems.push(s);
            }
        }
        let listed = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir.as_path()
        };
        gpulint_source::note_dependency(listed);
        let mut found = Vec::new();
        for s in stems {
            for ext in ["cc", "cu.cc", "cu", "cpp"] {
                let p = dir.join(format!("{s}.{ext}"));
                if p.is_file() && !found.contains(&p) {
                    found.push(p);
                }
            }
        }
        if found.is_empty() {
            found = tf_op_sources(&dir, stem);
        }
        if found.is_empty() {
            b.unresolved.push(unresolved(
                arg,
                format!("no C++/CUDA source with the stem of `{name}` next to it"),
            ));
        }
        for path in found {
            push_source(
                &mut b.sources,
                Source {
                    path,
                    span: Span::of(&arg),
                    exists: true,
                },
            );
        }
    }
}

/// Does the folder of `path` exist and hold anything (noted as a dependency)?
pub(super) fn folder_has_entries(path: &Path) -> bool {
    let Some(dir) = path.parent() else {
        return false;
    };
    gpulint_source::note_dependency(dir);
    std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_some())
}

/// A relative source that is not next to the file: the nearest ancestor folder (up to the
/// repository root, a folder holding `.git`, or 4 levels up) under which it exists.
pub(super) fn in_ancestor(dir: &Path, relative: &str) -> Option<PathBuf> {
    let mut cur = dir.to_path_buf();
    for _ in 0..4 {
        if cur.join(".git").exists() {
            return None;
        }
        cur = cur.parent()?.to_path_buf();
        let p = super::normalize(&cur.join(relative));
        gpulint_source::note_dependency(&p);
        if p.is_file() {
            return Some(p);
        }
    }
    None
}

/// TensorFlow custom-op layout: `_foo_ops.so` built from `cc/kernels/foo_kernels.cc` and
/// `cc/ops/foo_ops.cc`. Looks for a folder named `cc` or `kernels` in the library's folder or
/// up to two folders above, and in it and its direct subfolders for sources named after the
/// op; the nearest folder with any wins.
fn tf_op_sources(lib_dir: &Path, stem: &str) -> Vec<PathBuf> {
    let stem = stem.trim_start_matches('_').trim_start_matches("lib");
    let base = stem
        .strip_suffix("_ops")
        .or_else(|| stem.strip_suffix("_op"))
        .unwrap_or(stem);
    if base.is_empty() {
        return Vec::new();
    }
    let mut names = Vec::new();
    for suffix in ["", "_ops", "_op", "_kernels", "_kernel"] {
        for ext in ["cc", "cu.cc", "cu", "cpp"] {
            names.push(format!("{base}{suffix}.{ext}"));
        }
    }
    let mut dir = Some(lib_dir);
    for _ in 0..3 {
        let Some(d) = dir else { break };
        let mut found = Vec::new();
        for root in ["cc", "kernels"] {
            let root = d.join(root);
            if !root.is_dir() {
                continue;
            }
            let mut folders = vec![root.clone()];
            gpulint_source::note_dependency(&root);
            if let Ok(entries) = std::fs::read_dir(&root) {
                let mut subs: Vec<PathBuf> = entries
                    .filter_map(|e| e.ok())
                    .take(MAX_GLOB_MATCHES)
                    .map(|e| e.path())
                    .filter(|p| p.is_dir())
                    .collect();
                subs.sort();
                folders.extend(subs);
            }
            for f in folders {
                gpulint_source::note_dependency(&f);
                for n in &names {
                    let p = f.join(n);
                    if p.is_file() && !found.contains(&p) {
                        found.push(p);
                    }
                }
            }
        }
        if !found.is_empty() {
            found.sort();
            return found;
        }
        dir = d.parent();
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::super::tests::tree;
    use super::*;

    #[test]
    fn ancestors_stop_at_the_repository_root() {
        let tmp = tree(&["csrc/r.cu", "repo/.git/HEAD", "repo/a/b/x.py"]);
        let d = tmp.path();
        assert_eq!(in_ancestor(&d.join("repo/a/b"), "csrc/r.cu"), None);
        std::fs::create_dir_all(d.join("repo/csrc")).unwrap();
        std::fs::write(d.join("repo/csrc/r.cu"), "").unwrap();
        assert_eq!(
            in_ancestor(&d.join("repo/a/b"), "csrc/r.cu"),
            Some(d.join("repo/csrc/r.cu"))
        );
    }

    #[test]
    fn tf_op_sources_nearest_folder_wins() {
        let tmp = tree(&[
            "op/cc/kernels/foo_kernels.cu.cc",
            "op/cc/ops/foo_ops.cc",
            "op/cc/kernels/bar_kernels.cc",
            "op/python/ops/kernels/foo.cc",
        ]);
        let d = tmp.path();
        let rel = |v: Vec<PathBuf>| -> Vec<String> {
            v.iter()
                .map(|p| p.strip_prefix(d).unwrap().display().to_string())
                .collect()
        };
        assert_eq!(
            rel(tf_op_sources(&d.join("op/python/ops"), "_foo_ops")),
            ["op/python/ops/kernels/foo.cc"]
        );
        assert_eq!(
            rel(tf_op_sources(&d.join("op/python"), "_foo_ops")),
            ["op/cc/kernels/foo_kernels.cu.cc", "op/cc/ops/foo_ops.cc"]
        );
        assert!(tf_op_sources(&d.join("op/python"), "_baz_ops").is_empty());
    }
}
