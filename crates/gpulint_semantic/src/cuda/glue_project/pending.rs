//! Sibling files parsed before their own check: a question about a file next to the checked
//! one parses it when the run has not checked it yet (a `.cpp` binding sorts before the `.cu`
//! launcher it calls, and a launcher asks about the binding that calls it). When that file is
//! one the run will check, the tree is kept for its own check, which then does not parse the
//! same text a second time.
//!
//! Only the files the run announced ([`expect`]) and has not begun to check are kept, within
//! [`MAX_KEPT_BYTES`] of text; a file's check takes its tree ([`take`]) or, when it did not
//! parse (a cached result), lets it go ([`done`]), so nothing is held past the file's turn.

use gpulint_syntax::{parse, Lang};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};
use tree_sitter::Tree;

/// Text kept with the trees, at most (a tree takes a few times its text).
const MAX_KEPT_BYTES: usize = 2 << 20;

#[derive(Default)]
struct Pending {
    /// The C/C++/CUDA files the run will check and has not begun to (absolute paths).
    files: HashSet<PathBuf>,
    /// Trees of some of them, with the text each was parsed from.
    trees: HashMap<PathBuf, (String, Tree)>,
    /// Bytes of text in `trees`.
    bytes: usize,
}

static PENDING: LazyLock<Mutex<Pending>> = LazyLock::new(Default::default);

fn pending() -> std::sync::MutexGuard<'static, Pending> {
    PENDING.lock().unwrap_or_else(|e| e.into_inner())
}

fn absolute(path: &Path) -> Option<PathBuf> {
    std::path::absolute(path).ok()
}

/// The C/C++/CUDA files the run is about to check; replaces those of the last run and lets
/// go of any tree still kept (an empty list at the end of a run).
pub fn expect(files: impl IntoIterator<Item = PathBuf>) {
    let files = files.into_iter().filter_map(|p| absolute(&p)).collect();
    *pending() = Pending {
        files,
        ..Pending::default()
    };
}

/// The first parse of the file at `path` (absolute), whose text is `text`, as
/// [`gpulint_syntax::parse`] gives it; kept for the file's own check when the run will check
/// it and has not begun to.
pub(super) fn parse_sibling(path: &Path, text: &str) -> Option<Tree> {
    let tree = parse(Lang::Cuda, text)?;
    let mut p = pending();
    if p.files.contains(path)
        && !p.trees.contains_key(path)
        && p.bytes + text.len() <= MAX_KEPT_BYTES
    {
        p.bytes += text.len();
        p.trees
            .insert(path.to_path_buf(), (text.to_string(), tree.clone()));
    }
    Some(tree)
}

/// The check of the file at `path` begins and parses `text`: the tree a question of another
/// file parsed from the same text, if one is kept. From here on no tree of it is kept.
pub fn take(path: &Path, text: &str) -> Option<Tree> {
    if pending().files.is_empty() {
        // Outside a run (standard input, the language server): nothing is ever kept.
        return None;
    }
    let (kept, tree) = forget(&absolute(path)?)?;
    (kept == text).then_some(tree)
}

/// The check of the file at `path` is over (or needed no parse): no tree of it is kept.
pub fn done(path: &Path) {
    if let Some(path) = absolute(path) {
        forget(&path);
    }
}

/// The file at `path` (absolute) is no longer waiting for its turn: its kept tree, if any,
/// with the text it was parsed from.
fn forget(path: &Path) -> Option<(String, Tree)> {
    let mut p = pending();
    p.files.remove(path);
    let (kept, tree) = p.trees.remove(path)?;
    p.bytes -= kept.len();
    Some((kept, tree))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One test for the whole life of the table (it is shared by the process).
    #[test]
    fn a_tree_is_kept_only_for_an_expected_file_until_its_turn() {
        let dir = std::env::temp_dir();
        let (a, b) = (dir.join("pending_a.cu"), dir.join("pending_b.cu"));
        let text = "__global__ void k(float* x) { x[threadIdx.x] = 0; }\n";
        expect([a.clone()]);
        // Not expected: parsed, not kept.
        assert!(parse_sibling(&b, text).is_some());
        assert!(take(&b, text).is_none());
        // Expected: kept once, for the same text only.
        let tree = parse_sibling(&a, text).unwrap();
        assert_eq!(pending().bytes, text.len());
        let taken = take(&a, text).expect("kept for its own check");
        assert_eq!(taken.root_node().to_sexp(), tree.root_node().to_sexp());
        assert_eq!(pending().bytes, 0);
        // Its turn has come: a later question's parse is not kept.
        parse_sibling(&a, text);
        assert!(pending().trees.is_empty());
        // A different text is never handed over; `done` lets a kept tree go.
        expect([a.clone(), b.clone()]);
        parse_sibling(&a, text);
        assert!(take(&a, "int x;\n").is_none());
        parse_sibling(&b, text);
        done(&b);
        assert!(pending().trees.is_empty() && pending().files.is_empty());
        assert_eq!(pending().bytes, 0);
        expect(Vec::new());
    }
}
