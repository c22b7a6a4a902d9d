//! What rules ask about code. Built once per file, during the single walk, then read-only.

pub mod cuda;
pub mod python;

use crate::lang::Lang;
use crate::settings::Settings;
use tree_sitter::{Node, Tree};

/// The semantic model of one file (one per file, never moved around: the size gap between the
/// variants costs nothing).
#[allow(clippy::large_enum_variant)]
pub enum Model<'t> {
    Python(python::PythonModel<'t>),
    Cuda(cuda::CudaModel<'t>),
}

/// Builds a [`Model`] from the enter/leave events of the checker's walk.
pub enum Builder<'t> {
    Python(python::PythonBuilder<'t>),
    Cuda(cuda::CudaBuilder<'t>),
}

impl<'t> Builder<'t> {
    pub fn new(lang: Lang, source: &'t str, settings: &Settings) -> Builder<'t> {
        match lang {
            // Manifests are not parsed with tree-sitter and never reach the checker's walk.
            Lang::Python | Lang::Manifest => Builder::Python(python::PythonBuilder::new(source)),
            Lang::Cuda => Builder::Cuda(cuda::CudaBuilder::new(source, settings)),
        }
    }

    #[inline]
    pub fn enter(&mut self, node: Node<'t>) {
        match self {
            Builder::Python(b) => b.enter(node),
            Builder::Cuda(b) => b.enter(node),
        }
    }

    #[inline]
    pub fn leave(&mut self, node: Node<'t>) {
        match self {
            Builder::Python(b) => b.leave(node),
            Builder::Cuda(b) => b.leave(node),
        }
    }

    /// The model of a file parsed as one tree, or as one tree per notebook cell (in order).
    pub fn finish(self, trees: &'t [Tree]) -> Model<'t> {
        match self {
            Builder::Python(b) => {
                let mut m = b.finish(&trees[0]);
                m.roots = trees.iter().map(Tree::root_node).collect();
                Model::Python(m)
            }
            Builder::Cuda(b) => Model::Cuda(b.finish(&trees[0])),
        }
    }
}

/// Source text of a node (empty if the range is not valid UTF-8, which cannot happen for text
/// that came from a `String`).
pub fn text<'s>(node: Node<'_>, source: &'s str) -> &'s str {
    source.get(node.start_byte()..node.end_byte()).unwrap_or("")
}

/// Iterates over the named children of `node` (no allocation of a cursor per call site).
pub fn named_children<'t>(node: Node<'t>) -> impl Iterator<Item = Node<'t>> {
    (0..node.named_child_count() as u32).filter_map(move |i| node.named_child(i))
}

/// Iterates over all nodes of the subtree under `node` in document order, without recursion.
pub fn descendants<'t>(node: Node<'t>) -> Descendants<'t> {
    Descendants {
        cursor: node.walk(),
        done: false,
        started: false,
    }
}

/// See [`descendants`].
pub struct Descendants<'t> {
    cursor: tree_sitter::TreeCursor<'t>,
    done: bool,
    started: bool,
}

impl<'t> Iterator for Descendants<'t> {
    type Item = Node<'t>;

    fn next(&mut self) -> Option<Node<'t>> {
        if self.done {
            return None;
        }
        if !self.started {
            self.started = true;
            return Some(self.cursor.node());
        }
        if self.cursor.goto_first_child() {
            return Some(self.cursor.node());
        }
        loop {
            if self.cursor.goto_next_sibling() {
                return Some(self.cursor.node());
            }
            // The cursor was created at the subtree root, so goto_parent stops there.
            if !self.cursor.goto_parent() {
                self.done = true;
                return None;
            }
        }
    }
}

/// The innermost ancestor (or the node itself) of one of the given kinds.
pub fn ancestor_of_kind<'t>(node: Node<'t>, kinds: &[&str]) -> Option<Node<'t>> {
    let mut cur = Some(node);
    while let Some(n) = cur {
        if kinds.contains(&n.kind()) {
            return Some(n);
        }
        cur = n.parent();
    }
    None
}
