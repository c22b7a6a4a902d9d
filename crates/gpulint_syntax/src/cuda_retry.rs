//! A line-preserving second parse for C/C++/CUDA files whose first parse has errors.
//!
//! tree-sitter-cuda cannot expand macros, and most of its errors on real code come from a few
//! macro shapes: specifier macros (`DS_D_INLINE void f()`, `C10_LAUNCH_BOUNDS_1(256)`,
//! `__align__(16)`), macro invocations with no trailing `;` (`INSTANTIATE(float)`), and `#if/#else`
//! branches that split one construct in two (CUDA vs HIP). When, and only when, the first parse
//! has errors, the text is rewritten so that the grammar can read it and parsed again; the tree
//! with fewer error bytes wins. Applied to every file the rewrite would break clean ones, so it
//! is a retry, not a pre-pass.
//!
//! Every rewrite keeps the byte length and every newline: bytes are replaced by spaces, a
//! specifier macro by `__device__`/`__global__` padded with spaces, and a `;` goes into a
//! whitespace byte that was already there. Byte offsets and line numbers of the second tree are
//! therefore those of the original text, which is what rules read node text from.
//!
//! This module runs the retry; the rewrites are in [`specifiers`], [`statement_args`],
//! [`loop_pragmas`], [`semicolons`] and [`conditionals`], over the byte scanning of [`scan`].

mod conditionals;
mod loop_pragmas;
mod scan;
mod semicolons;
mod specifiers;
mod statement_args;

pub use specifiers::specifier_macro_space;

use super::Lang;
use conditionals::keep_first_if_branch;
use loop_pragmas::blank_loop_pragma_macros;
use semicolons::terminate_macro_calls;
use specifiers::rewrite_specifiers;
use statement_args::statement_arguments;
use tree_sitter::Tree;

/// Parses `text` again with macro-shaped constructs rewritten if `first` (its tree) has errors;
/// returns whichever tree has fewer error bytes.
pub fn reparse(text: &str, first: Tree) -> Tree {
    reparse_in(text, None, first)
}

/// [`reparse`] for a tree that [`crate::parse_range`] parsed from the byte range `range` of
/// `text` (`None`: all of it); the second parse covers the same range.
pub fn reparse_in(text: &str, range: Option<(usize, usize)>, first: Tree) -> Tree {
    if !first.root_node().has_error() {
        return first;
    }
    let mut best_score = error_score(&first);
    let mut best = first;

    let mut bytes = text.as_bytes().to_vec();
    let mut changed = rewrite_specifiers(&mut bytes);
    changed |= statement_arguments(&mut bytes);
    changed |= blank_loop_pragma_macros(&mut bytes);
    changed |= terminate_macro_calls(&mut bytes);
    // The last tree parsed and its text: the next parse reuses what the rewrites left alone.
    let mut last: Option<Tree> = None;
    if changed {
        if let Some(tree) = parse_bytes(&bytes, text.as_bytes(), &best, range) {
            let score = error_score(&tree);
            last = Some(tree.clone());
            if score < best_score {
                best_score = score;
                best = tree;
            }
        }
    }
    if best_score > 0 {
        let before = bytes.clone();
        if keep_first_if_branch(&mut bytes) {
            let tree = match &last {
                Some(last) => parse_bytes(&bytes, &before, last, range),
                None => parse_bytes(&bytes, text.as_bytes(), &best, range),
            };
            if let Some(tree) = tree {
                if error_score(&tree) < best_score {
                    best = tree;
                }
            }
        }
    }
    best
}

/// Parses the rewritten `bytes`, reusing `old`, the tree of `old_bytes`.
fn parse_bytes(
    bytes: &[u8],
    old_bytes: &[u8],
    old: &Tree,
    range: Option<(usize, usize)>,
) -> Option<Tree> {
    // Every rewrite writes ASCII over whole characters, so the text stays UTF-8.
    let text = std::str::from_utf8(bytes).ok()?;
    crate::parse_rewritten_in(Lang::Cuda, old_bytes, old, text, range)
}

/// Bytes inside ERROR nodes plus one per MISSING node: lower is better, 0 is a clean parse.
pub fn error_score(tree: &Tree) -> usize {
    let mut score = 0;
    crate::walk_pruned(tree, |node| {
        if node.is_error() {
            score += (node.end_byte() - node.start_byte()).max(1);
            false
        } else if node.is_missing() {
            score += 1;
            false
        } else {
            node.has_error()
        }
    });
    score
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse;

    pub(super) fn rewrite(text: &str, f: fn(&mut [u8]) -> bool) -> String {
        let mut b = text.as_bytes().to_vec();
        f(&mut b);
        let out = String::from_utf8(b).unwrap();
        assert_eq!(out.len(), text.len());
        assert_eq!(
            out.matches('\n').count(),
            text.matches('\n').count(),
            "newlines must stay where they are"
        );
        out
    }

    #[test]
    fn the_retry_keeps_the_better_tree() {
        let text = "INSTANTIATE(float)\nINSTANTIATE(half)\nDS_D_INLINE void f(int a) { return; }\n";
        let first = parse(Lang::Cuda, text).unwrap();
        assert!(first.root_node().has_error());
        let second = reparse(text, first);
        assert!(!second.root_node().has_error());
        assert_eq!(second.root_node().end_byte(), text.len());
    }
}
