//! The named siblings after a node, from its parent's children read once per parent.
//!
//! `Node::next_named_sibling` finds the node's parent again from the root and then steps
//! through the parent's children up to the node, on every call: following k statements of a
//! block that way, for each of k statements (a launch and the statements after it), grows
//! with k³. Here each parent's named children are read once, and a node is found among them by
//! its position.

use crate::parents::IdHasher;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::rc::Rc;
use tree_sitter::Node;

/// Named children by parent (keyed by node id, hashed as [`crate::Parents`] hashes them), each
/// list read once (see the module's documentation).
#[derive(Default)]
pub struct NamedSiblings<'t> {
    lists: HashMap<usize, Rc<[Node<'t>]>, BuildHasherDefault<IdHasher>>,
}

impl<'t> NamedSiblings<'t> {
    /// The named children of `parent`, in order, read the first time they are asked for (a
    /// shared list: the caller may keep it while it asks about other parents).
    pub fn of(&mut self, parent: Node<'t>) -> Rc<[Node<'t>]> {
        Rc::clone(
            self.lists
                .entry(parent.id())
                .or_insert_with(|| crate::named_children(parent).collect()),
        )
    }

    /// The named siblings after `node` in `parent`, in order: what repeated
    /// `next_named_sibling` calls give. `None` when `node` is not a named child of `parent`.
    pub fn after(&mut self, parent: Node<'t>, node: Node<'_>) -> Option<&[Node<'t>]> {
        self.of(parent);
        let list = &self.lists[&parent.id()];
        position(list, node).map(|i| &list[i + 1..])
    }
}

/// The index of `node` among `children` (a parent's children, in document order), found by a
/// binary search on its start; `None` when it is not one of them.
pub fn position(children: &[Node<'_>], node: Node<'_>) -> Option<usize> {
    // Children are in document order; zero-width ones (a missing node) can share a start.
    let start = node.start_byte();
    let mut i = children.partition_point(|c| c.start_byte() < start);
    while i < children.len() && children[i].start_byte() == start {
        if children[i].id() == node.id() {
            return Some(i);
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::NamedSiblings;
    use crate::{descendants, parse, Lang, Parents};

    /// For every named node of a few sources (comments, preprocessor lines, a missing node,
    /// nested blocks), the list read from the parent is what `next_named_sibling` walks.
    #[test]
    fn siblings_after_a_node_are_those_next_named_sibling_walks() {
        for (lang, src) in [
            (
                Lang::Cuda,
                "void f(float* x, int n) {\n  k<<<1, 2>>>(x); // launch\n  k<<<1, 2>>>(x);\n  \
                 #ifdef A\n  g();\n  #endif\n  if (n) { h(); cudaGetLastError(); }\n  \
                 switch (n) { case 1: k<<<1,1>>>(x); break; }\n}\nint y = (1 + ;\n",
            ),
            (
                Lang::Python,
                "def f(x):\n    a = 1  # one\n    b = g(a)\n    if b:\n        h()\n\nclass C:\n    pass\n",
            ),
        ] {
            let tree = parse(lang, src).expect("parses");
            let mut siblings = NamedSiblings::default();
            let parents = Parents::of([tree.root_node()]);
            let mut compared = 0;
            for node in descendants(tree.root_node()).filter(|n| n.is_named()) {
                let Some(parent) = parents.parent(node) else {
                    continue;
                };
                let mut walked = Vec::new();
                let mut next = node.next_named_sibling();
                while let Some(n) = next {
                    walked.push(n);
                    next = n.next_named_sibling();
                }
                let listed = siblings.after(parent, node).expect("a named child").to_vec();
                assert_eq!(listed, walked, "{:?} in {lang:?}", node.kind());
                compared += 1;
            }
            assert!(compared > 20, "{compared} nodes compared");
        }
    }

    #[test]
    fn a_node_of_another_parent_is_not_found() {
        let tree = parse(Lang::Python, "a = 1\nif a:\n    b = 2\n").expect("parses");
        let root = tree.root_node();
        let inner = descendants(root)
            .find(|n| n.kind() == "expression_statement" && n.start_position().row == 2)
            .expect("the inner statement");
        assert!(NamedSiblings::default().after(root, inner).is_none());
    }
}
