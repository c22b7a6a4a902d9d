//! The repository's fixture files, for tests that hold a property on every one of them.

use std::path::PathBuf;

/// The files under the fixture folders `dirs` (relative to `fixtures/`) whose extension is one
/// of `exts`, with their text (files that are not UTF-8 left out), in no particular order.
pub(crate) fn texts(dirs: &[&str], exts: &[&str]) -> Vec<(PathBuf, String)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let mut stack: Vec<PathBuf> = dirs.iter().map(|d| root.join(d)).collect();
    let mut out = Vec::new();
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().map(Result::unwrap) {
            let path = e.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if !path
                .extension()
                .and_then(|x| x.to_str())
                .is_some_and(|x| exts.contains(&x))
            {
                continue;
            }
            if let Ok(text) = std::fs::read_to_string(&path) {
                out.push((path, text));
            }
        }
    }
    out
}
