//! Calls that give a list of paths: `glob.glob` / `glob.iglob`, `Path.glob` / `Path.rglob`
//! (expanded against the file system the way Python does, bounded), `sorted(x)` and `list(x)`.

use super::path::normalize;
use super::{
    argument, unresolved, Env, Folder, Item, Str, Unresolved, MAX_GLOB_DEPTH, MAX_GLOB_MATCHES,
};
use gpulint_source::Span;
use gpulint_syntax::NodeExt;
use std::path::{Component, Path, PathBuf};
use tree_sitter::Node;

impl Folder<'_, '_> {
    /// `glob.glob(p)`, `Path(d).glob(p)`, `sorted(x)`, `list(x)`: true when handled.
    pub(super) fn call_items(
        &self,
        call: Node<'_>,
        env: &Env<'_>,
        out: &mut Vec<Item>,
        depth: usize,
    ) -> bool {
        let src = self.m.source;
        let Some(func) = call.field("function") else {
            return false;
        };
        let q = self.m.qualified_name(func);
        if let Some("glob.glob" | "glob.iglob") = q.as_deref() {
            let Some(p) = argument(call, 0, "pathname", src) else {
                return false;
            };
            let recursive = argument(call, usize::MAX, "recursive", src)
                .is_some_and(|r| self.text(r) == "True");
            match self.string(p, env, depth) {
                Some(s) => self.glob(&self.resolve(&s), &s, recursive, Span::of(&p), out),
                None => out.push(Err(unresolved(p, "the glob pattern is not a constant"))),
            }
            return true;
        }
        if func.kind_name() == "identifier"
            && matches!(self.text(func), "sorted" | "list")
            && q.is_none()
        {
            if let Some(a) = argument(call, 0, "", src) {
                self.items(a, env, out, depth);
                return true;
            }
        }
        // `Path(d).glob("*.cu")`, `here.rglob("*.cu")`.
        if func.kind_name() == "attribute" {
            let attr = func.field("attribute").map(|a| self.text(a));
            if let (Some(a @ ("glob" | "rglob")), Some(obj)) = (attr, func.field("object")) {
                let (Some(base), Some(p)) = (
                    self.string(obj, env, depth),
                    argument(call, 0, "pattern", src),
                ) else {
                    return false;
                };
                let Some(pat) = self.string(p, env, depth) else {
                    out.push(Err(unresolved(p, "the glob pattern is not a constant")));
                    return true;
                };
                let pat = if a == "rglob" {
                    format!("**/{}", pat.value)
                } else {
                    pat.value
                };
                let full = self.resolve(&base).join(&pat);
                self.glob(&full, &base, true, Span::of(&call), out);
                return true;
            }
        }
        false
    }

    /// Expands a glob pattern (already relative to the working directory) the way Python's
    /// `glob` does, sorted. `**` spans folders only when `recursive`.
    fn glob(&self, pattern: &Path, s: &Str, recursive: bool, span: Span, out: &mut Vec<Item>) {
        let mut current: Vec<PathBuf> = vec![PathBuf::new()];
        let comps: Vec<Component<'_>> = pattern.components().collect();
        for (i, c) in comps.iter().enumerate() {
            let last = i + 1 == comps.len();
            let part = c.as_os_str().to_string_lossy();
            let is_pattern = part.contains(['*', '?', '[']);
            let mut next = Vec::new();
            for base in &current {
                if !is_pattern {
                    let p = base.join(c.as_os_str());
                    if last || p.is_dir() {
                        next.push(p);
                    }
                    continue;
                }
                if part == "**" && recursive {
                    // Zero or more folders; links to folders are not followed (no loops).
                    let mut stack = vec![(base.clone(), 0)];
                    while let Some((d, depth)) = stack.pop() {
                        if next.len() >= MAX_GLOB_MATCHES {
                            break;
                        }
                        next.push(d.clone());
                        if depth >= MAX_GLOB_DEPTH {
                            continue;
                        }
                        for (p, is_dir) in list(&d) {
                            let link = std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_symlink());
                            if is_dir && !link && !hidden(&p) {
                                stack.push((p, depth + 1));
                            }
                        }
                    }
                    continue;
                }
                let Ok(matcher) = globset::GlobBuilder::new(&part.replace("**", "*"))
                    .literal_separator(true)
                    .backslash_escape(true)
                    .build()
                    .map(|g| g.compile_matcher())
                else {
                    out.push(Err(Unresolved {
                        span,
                        reason: format!("invalid glob pattern `{}`", s.value),
                    }));
                    return;
                };
                for (p, is_dir) in list(base) {
                    let Some(name) = p.file_name() else { continue };
                    if hidden(&p) && !part.starts_with('.') {
                        continue;
                    }
                    if matcher.is_match(name) && (last || is_dir) {
                        next.push(p);
                    }
                }
            }
            next.sort();
            next.dedup();
            next.truncate(MAX_GLOB_MATCHES);
            current = next;
        }
        let mut found: Vec<PathBuf> = current
            .into_iter()
            .filter(|p| p.is_file())
            .map(|p| normalize(&p))
            .collect();
        found.sort();
        // Python's glob answers in the pattern's terms: relative for a relative pattern.
        let relative = !s.anchored && !Path::new(&s.value).is_absolute();
        let dir = self.dir();
        for p in found {
            let value = match p.strip_prefix(&dir) {
                Ok(rel) if relative => rel.to_string_lossy().into_owned(),
                _ => p.to_string_lossy().into_owned(),
            };
            out.push(Ok((
                Str {
                    value,
                    anchored: !relative,
                },
                span,
            )));
        }
    }
}

fn hidden(p: &Path) -> bool {
    p.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with('.'))
}

/// Directory entries listed at most before sorting (a larger directory is cut).
const MAX_LISTED: usize = 20_000;

/// The entries of a folder (empty path: the working directory), noted as a dependency.
fn list(dir: &Path) -> Vec<(PathBuf, bool)> {
    let d = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    gpulint_source::note_dependency(d);
    let Ok(entries) = std::fs::read_dir(d) else {
        return Vec::new();
    };
    // Sorted before the cut: the same entries whatever order the file system lists them in.
    let mut names: Vec<std::ffi::OsString> = entries
        .filter_map(|e| e.ok())
        .take(MAX_LISTED)
        .map(|e| e.file_name())
        .collect();
    names.sort();
    names.truncate(MAX_GLOB_MATCHES);
    names
        .into_iter()
        .map(|name| {
            let is_dir = std::fs::metadata(d.join(&name)).is_ok_and(|m| m.is_dir());
            (dir.join(name), is_dir)
        })
        .collect()
}
