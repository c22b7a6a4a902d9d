//! Languages gpulint reads, their grammars and file kinds; parsing (one parser per thread,
//! and the line-preserving CUDA retry parse); tree helpers (the one iterative walk, `NodeExt`).
//!
//! Knows nothing of rules, diagnostics, configuration or what the code means.

mod allocations;
pub mod cuda_retry;
pub mod kind;
mod parents;
mod siblings;
mod tree;
pub mod unclosed;

pub use parents::Parents;
pub use siblings::{position, NamedSiblings};
pub use tree::*;

use std::path::Path;
use tree_sitter::{Language, Parser, Tree};

/// A kind of file gpulint reads: a source language with its tree-sitter grammar, or a
/// dependency manifest (read by the parsers of `gpulint_manifest`, without tree-sitter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Lang {
    Python,
    /// CUDA and every C/C++ file, parsed with tree-sitter-cuda (a superset of C++).
    Cuda,
    /// `requirements*.txt`, `pyproject.toml`, conda environment files, Dockerfiles.
    Manifest,
}

impl Lang {
    pub fn as_str(self) -> &'static str {
        match self {
            Lang::Python => "python",
            Lang::Cuda => "cuda",
            Lang::Manifest => "manifest",
        }
    }

    /// The tree-sitter grammar; `None` for manifests.
    pub fn grammar(self) -> Option<Language> {
        match self {
            Lang::Python => Some(tree_sitter_python::LANGUAGE.into()),
            Lang::Cuda => Some(tree_sitter_cuda::LANGUAGE.into()),
            Lang::Manifest => None,
        }
    }

    /// The file kind of a path, from its name; `None` for files gpulint does not read.
    pub fn of_path(path: &Path) -> Option<Lang> {
        if crate::kind::Format::of_path(path).is_some() {
            return Some(Lang::Manifest);
        }
        let name = path.file_name()?.to_str()?;
        let ext = name.rsplit_once('.')?.1.to_ascii_lowercase();
        match ext.as_str() {
            "py" | "pyi" | "ipynb" => Some(Lang::Python),
            "cu" | "cuh" | "cc" | "cpp" | "cxx" | "h" | "hpp" | "hxx" => Some(Lang::Cuda),
            _ => None,
        }
    }

    /// Prefix of line comments, used by suppressions.
    pub fn comment_prefix(self) -> &'static str {
        match self {
            Lang::Python | Lang::Manifest => "#",
            Lang::Cuda => "//",
        }
    }
}

/// Runs `f` with a parser for `lang` (`None` for manifests, which have no tree-sitter grammar)
/// made for this parse. tree-sitter's parser keeps freed nodes for reuse from one parse to
/// the next; a parser of its own makes the allocation count of a parse (one of the bounds of
/// [`parse_bounded`]) depend on the text alone, not on which files the thread parsed before.
fn with_parser<R>(lang: Lang, f: impl FnOnce(&mut Parser) -> Option<R>) -> Option<R> {
    let grammar = lang.grammar()?;
    allocations::install();
    let mut parser = Parser::new();
    parser
        .set_language(&grammar)
        .expect("grammar version is compatible with the tree-sitter runtime");
    f(&mut parser)
}

/// Parses `text` with a parser for `lang` of its own; `None` for manifests, which have no
/// tree-sitter grammar.
pub fn parse(lang: Lang, text: &str) -> Option<Tree> {
    with_parser(lang, |parser| parse_bounded(parser, text, text.len()))
}

/// [`parse`], then the second parses for a tree with errors: for CUDA the line-preserving one
/// of [`cuda_retry`], and, when the text ends inside an open bracket or string and the parser
/// gave up on more than that, the one of [`unclosed`]. The tree, and where it stops short of
/// the end of the text (the rest did not parse).
pub fn parse_recovering(lang: Lang, text: &str) -> Option<(Tree, Option<usize>)> {
    let first = parse(lang, text)?;
    Some(recover(lang, text, first))
}

/// The second parses of [`parse_recovering`] for `first`, the first parse of all of `text`.
pub fn recover(lang: Lang, text: &str, first: Tree) -> (Tree, Option<usize>) {
    let first = match lang {
        Lang::Cuda => cuda_retry::reparse(text, first),
        _ => first,
    };
    unclosed::reparse(lang, text, 0, text.len(), first)
}

/// [`parse_range`] with the second parse of [`parse_recovering`].
pub fn parse_range_recovering(
    lang: Lang,
    text: &str,
    start: usize,
    end: usize,
) -> Option<(Tree, Option<usize>)> {
    let first = parse_range(lang, text, start, end)?;
    Some(unclosed::reparse(lang, text, start, end, first))
}

/// tree-sitter allocations allowed per byte of the text parsed (plus
/// [`PARSE_MIN_ALLOCATIONS`]). Real files ask for at most 1.3 per byte (the corpus's 5,214
/// files); error recovery gone wild asks for 29 to 76 per byte, where the operation count is
/// still within its bound (7 s for a 131 KB mutant of the fuzz run).
pub const PARSE_ALLOCATIONS_PER_BYTE: u64 = 8;

/// The tree-sitter allocations allowed on a small text.
pub const PARSE_MIN_ALLOCATIONS: u64 = 100_000;

/// Parser operations allowed per byte of the text parsed (plus [`PARSE_MIN_OPERATIONS`]).
/// tree-sitter needs 1 to 10 per byte on real files and on thousands of mutated ones; only
/// error recovery gone wild on hostile input needs more (105 per byte, 20 s for 139 KB, on a
/// mutant of the fuzz run), and there each operation is slow.
pub const PARSE_OPERATIONS_PER_BYTE: u64 = 20;

/// The parser operations allowed on a small text.
pub const PARSE_MIN_OPERATIONS: u64 = 2_000_000;

/// Parses `text` (of which `len` bytes are to be parsed) with a bounded number of parser
/// operations and of allocations: `None` when the parser runs out of either (the file is then
/// reported as not parsed, GL002). The bounds count the parser's own operations (its progress
/// callback runs every 100) and allocations, not time, so a file parses or gives up the same
/// way on every machine.
fn parse_bounded(parser: &mut Parser, text: &str, len: usize) -> Option<Tree> {
    parse_bounded_from(parser, text, len, None)
}

/// [`parse_bounded`], reusing `old` (edited to `text`) where given.
fn parse_bounded_from(
    parser: &mut Parser,
    text: &str,
    len: usize,
    old: Option<&Tree>,
) -> Option<Tree> {
    let allowed = PARSE_MIN_OPERATIONS.saturating_add(PARSE_OPERATIONS_PER_BYTE * len as u64) / 100;
    let allowed_allocations =
        PARSE_MIN_ALLOCATIONS.saturating_add(PARSE_ALLOCATIONS_PER_BYTE.saturating_mul(len as u64));
    let first_allocation = allocations::allocations();
    let mut checks: u64 = 0;
    let mut progress = |_: &tree_sitter::ParseState| {
        checks += 1;
        if checks > allowed || allocations::allocations() - first_allocation > allowed_allocations {
            std::ops::ControlFlow::Break(())
        } else {
            std::ops::ControlFlow::Continue(())
        }
    };
    let bytes = text.as_bytes();
    parser.parse_with_options(
        &mut |i, _| bytes.get(i..).unwrap_or_default(),
        old,
        Some(tree_sitter::ParseOptions::new().progress_callback(&mut progress)),
    )
}

/// Parses `text`, which the text `old` was parsed from (`old_text`) became by rewrites that
/// keep every byte where it was (the same length, each line where it was), reusing the parts
/// of `old` the rewrites leave alone. The parse is bounded as [`parse`]'s.
pub fn parse_rewritten(lang: Lang, old_text: &[u8], old: &Tree, text: &str) -> Option<Tree> {
    parse_rewritten_in(lang, old_text, old, text, None)
}

/// [`parse_rewritten`] for a tree that [`parse_range`] parsed from the byte range `range` of
/// `old_text` (`None`: all of it); the new tree covers the same range of `text`.
pub fn parse_rewritten_in(
    lang: Lang,
    old_text: &[u8],
    old: &Tree,
    text: &str,
    range: Option<(usize, usize)>,
) -> Option<Tree> {
    let new = text.as_bytes();
    if old_text.len() != new.len() {
        return match range {
            Some((start, end)) => parse_range(lang, text, start, end),
            None => parse(lang, text),
        };
    }
    let mut edited = old.clone();
    let (mut old_lines, mut new_lines) = (LineIndex::default(), LineIndex::default());
    for (start, end) in changed_runs(old_text, new) {
        let start_position = old_lines.point(old_text, start);
        // Each text's lines are counted on their own (a rewrite may move a line break).
        new_lines.point(new, start);
        edited.edit(&tree_sitter::InputEdit {
            start_byte: start,
            old_end_byte: end,
            new_end_byte: end,
            start_position,
            old_end_position: old_lines.point(old_text, end),
            new_end_position: new_lines.point(new, end),
        });
    }
    with_parser(lang, |parser| {
        let Some((start, end)) = range else {
            return parse_bounded_from(parser, text, text.len(), Some(&edited));
        };
        parser
            .set_included_ranges(&[included_range(text, start, end)])
            .ok()?;
        parse_bounded_from(parser, text, end.saturating_sub(start), Some(&edited))
    })
}

/// The byte ranges where `a` and `b` (of one length) differ, runs closer than a few bytes
/// merged, in order.
fn changed_runs(a: &[u8], b: &[u8]) -> Vec<(usize, usize)> {
    const GAP: usize = 8;
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i < a.len() {
        if a[i] == b[i] {
            i += 1;
            continue;
        }
        let start = i;
        while i < a.len() && a[i] != b[i] {
            i += 1;
        }
        match runs.last_mut() {
            Some(last) if start - last.1 <= GAP => last.1 = i,
            _ => runs.push((start, i)),
        }
    }
    runs
}

/// Rows and columns of the byte offsets of one text, asked in increasing order: counted from
/// the last one asked.
#[derive(Default)]
struct LineIndex {
    /// The last offset asked, its row and the offset its line starts at.
    last: usize,
    row: usize,
    line_start: usize,
}

impl LineIndex {
    fn point(&mut self, text: &[u8], byte: usize) -> tree_sitter::Point {
        let between = &text[self.last..byte];
        self.row += memchr::memchr_iter(b'\n', between).count();
        if let Some(p) = memchr::memrchr(b'\n', between) {
            self.line_start = self.last + p + 1;
        }
        self.last = byte;
        tree_sitter::Point {
            row: self.row,
            column: byte - self.line_start,
        }
    }
}

/// Parses only the byte range `start..end` of `text` (a notebook cell inside the notebook's
/// joined source): node offsets are positions in `text`, so trees of several ranges share one
/// source string.
pub fn parse_range(lang: Lang, text: &str, start: usize, end: usize) -> Option<Tree> {
    let range = included_range(text, start, end);
    with_parser(lang, |parser| {
        parser.set_included_ranges(&[range]).ok()?;
        parse_bounded(parser, text, end.saturating_sub(start))
    })
}

/// The byte range `start..end` of `text` as tree-sitter's included range, with its rows and
/// columns.
fn included_range(text: &str, start: usize, end: usize) -> tree_sitter::Range {
    let point = |byte: usize| {
        let before = &text.as_bytes()[..byte];
        let row = memchr::memchr_iter(b'\n', before).count();
        let col = byte
            - before
                .iter()
                .rposition(|&b| b == b'\n')
                .map(|p| p + 1)
                .unwrap_or(0);
        tree_sitter::Point { row, column: col }
    };
    tree_sitter::Range {
        start_byte: start,
        end_byte: end,
        start_point: point(start),
        end_point: point(end),
    }
}

/// Is this a Jupyter notebook?
pub fn is_notebook(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("ipynb"))
}

/// All kind ids of `lang` whose name is `kind` (a named node kind can have several ids,
/// through aliases). Empty when the grammar has no such kind.
pub fn kind_ids(lang: Lang, kind: &str) -> Vec<u16> {
    let Some(grammar) = lang.grammar() else {
        return Vec::new();
    };
    (0..grammar.node_kind_count() as u16)
        .filter(|&id| grammar.node_kind_is_named(id) && grammar.node_kind_for_id(id) == Some(kind))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_kinds() {
        assert_eq!(Lang::of_path(Path::new("a/train.py")), Some(Lang::Python));
        assert_eq!(Lang::of_path(Path::new("k.cu")), Some(Lang::Cuda));
        assert_eq!(
            Lang::of_path(Path::new("explore.ipynb")),
            Some(Lang::Python)
        );
        assert_eq!(Lang::of_path(Path::new("k.cu.cc")), Some(Lang::Cuda));
        assert_eq!(Lang::of_path(Path::new("k.CUH")), Some(Lang::Cuda));
        assert_eq!(Lang::of_path(Path::new("op.hpp")), Some(Lang::Cuda));
        assert_eq!(Lang::of_path(Path::new("README.md")), None);
        assert_eq!(Lang::of_path(Path::new("Makefile")), None);
        assert_eq!(
            Lang::of_path(Path::new("requirements.txt")),
            Some(Lang::Manifest)
        );
        assert_eq!(
            Lang::of_path(Path::new("docker/Dockerfile")),
            Some(Lang::Manifest)
        );
        assert_eq!(Lang::of_path(Path::new("setup.py")), Some(Lang::Python));
    }

    /// Every node of `tree` as kind and byte range, in document order.
    fn nodes(tree: &Tree) -> Vec<(String, usize, usize, tree_sitter::Point)> {
        let mut out = Vec::new();
        walk(tree, |n, entering| {
            if entering {
                out.push((
                    n.kind().to_string(),
                    n.start_byte(),
                    n.end_byte(),
                    n.start_position(),
                ));
            }
        });
        out
    }

    #[test]
    fn a_rewritten_text_parses_as_it_would_from_scratch() {
        let old = "DS_D_INLINE void f(int a) {\n  if (a) { g(a); }\n}\nINSTANTIATE(float)\nvoid h() { f(1); }\n";
        let new = "            void f(int a) {\n  if (a) { g(a); }\n}\nINSTANTIATE(float);\nvoid h() { f(1); }\n";
        let new = &new[..old.len()];
        assert_eq!(old.len(), new.len());
        let first = parse(Lang::Cuda, old).unwrap();
        let reused = parse_rewritten(Lang::Cuda, old.as_bytes(), &first, new).unwrap();
        let fresh = parse(Lang::Cuda, new).unwrap();
        assert_eq!(nodes(&reused), nodes(&fresh));
        // A text of another length is parsed from scratch.
        let longer = format!("{new}int x;\n");
        let other = parse_rewritten(Lang::Cuda, old.as_bytes(), &first, &longer).unwrap();
        assert_eq!(nodes(&other), nodes(&parse(Lang::Cuda, &longer).unwrap()));
    }

    #[test]
    fn changed_runs_are_merged_when_close() {
        assert_eq!(changed_runs(b"abcdef", b"abcdef"), vec![]);
        assert_eq!(
            changed_runs(b"aXcdefghijklmnopY", b"a_cdefghijklmnop_"),
            vec![(1, 2), (16, 17)]
        );
        assert_eq!(changed_runs(b"aXcdeYg", b"a_cde_g"), vec![(1, 6)]);
        let mut lines = LineIndex::default();
        let text = b"ab\ncd\n\nef";
        assert_eq!(
            lines.point(text, 1),
            tree_sitter::Point { row: 0, column: 1 }
        );
        assert_eq!(
            lines.point(text, 4),
            tree_sitter::Point { row: 1, column: 1 }
        );
        assert_eq!(
            lines.point(text, 9),
            tree_sitter::Point { row: 3, column: 2 }
        );
    }

    #[test]
    fn kinds_resolve() {
        assert!(!kind_ids(Lang::Python, "call").is_empty());
        assert!(!kind_ids(Lang::Cuda, "function_definition").is_empty());
        assert!(kind_ids(Lang::Cuda, "no_such_kind").is_empty());
    }
}
