//! The parent of every node of a file, from one walk: the bounded replacement for
//! `Node::parent`.
//!
//! tree-sitter's `Node::parent` keeps no parent pointer: it descends from the root of the tree
//! on every call, checking the children of each node on the way, so one call costs the depth
//! times the siblings, a climb to the root costs the square of the depth, and for a zero-width
//! node (a MISSING node of error recovery) the descent recurses once per level, which
//! overflows the stack of a thread on a file nested a hundred thousand levels deep. Code that
//! asks for parents asks a [`Parents`] built once per file instead (a table by node id, filled
//! by one cursor walk, which goes through the same visible nodes as `Node::parent`), or takes
//! the ancestors of one node going down from the root ([`crate::ancestors_of`]).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use tree_sitter::Node;

/// The parent of each node below some roots, by node id.
pub struct Parents<'t> {
    parent: HashMap<usize, Node<'t>, BuildHasherDefault<IdHasher>>,
}

/// An empty table, to be filled by [`Parents::record`] from a walk that is made anyway (the
/// checker's enter/leave walk): the same table as [`Parents::of`] without a walk of its own.
impl Default for Parents<'_> {
    fn default() -> Self {
        Parents {
            parent: HashMap::default(),
        }
    }
}

impl<'t> Parents<'t> {
    /// The parents of every node below `roots` (each root is a tree's root node, or a node
    /// whose own parent is not wanted: a root has no parent here).
    pub fn of(roots: impl IntoIterator<Item = Node<'t>> + Clone) -> Parents<'t> {
        // Sized once (tree-sitter keeps the count of each subtree): no rehashing as it fills.
        let count: usize = roots
            .clone()
            .into_iter()
            .map(|r| r.descendant_count())
            .sum();
        let mut parent = HashMap::with_capacity_and_hasher(count, Default::default());
        for root in roots {
            let mut cursor = root.walk();
            let mut stack = vec![root];
            'walk: loop {
                if cursor.goto_first_child() {
                    let n = cursor.node();
                    parent.insert(n.id(), stack[stack.len() - 1]);
                    stack.push(n);
                    continue;
                }
                loop {
                    stack.pop();
                    if cursor.goto_next_sibling() {
                        let n = cursor.node();
                        parent.insert(n.id(), stack[stack.len() - 1]);
                        stack.push(n);
                        break;
                    }
                    if !cursor.goto_parent() {
                        break 'walk;
                    }
                }
            }
        }
        Parents { parent }
    }

    /// Makes room for `additional` more nodes (a tree's `descendant_count`, when the walk
    /// enters its root): no rehashing as the table fills.
    pub fn reserve(&mut self, additional: usize) {
        self.parent.reserve(additional);
    }

    /// Records that `parent` is the parent of `node` (the walk's innermost open node when it
    /// enters `node`).
    #[inline]
    pub fn record(&mut self, node: Node<'t>, parent: Node<'t>) {
        self.parent.insert(node.id(), parent);
    }

    /// The parent of `node`, as `Node::parent` gives it (`None` for a root, or for a node of
    /// another tree).
    #[inline]
    pub fn parent(&self, node: Node<'_>) -> Option<Node<'t>> {
        self.parent.get(&node.id()).copied()
    }

    /// The ancestors of `node`, innermost first, up to its root.
    pub fn ancestors<'p>(&'p self, node: Node<'_>) -> impl Iterator<Item = Node<'t>> + 'p {
        std::iter::successors(self.parent(node), move |n| self.parent(*n))
    }

    /// The innermost ancestor of `node` (or `node` itself) of one of `kinds`.
    pub fn ancestor_of_kind(&self, node: Node<'t>, kinds: &[&str]) -> Option<Node<'t>> {
        std::iter::once(node)
            .chain(self.ancestors(node))
            .find(|n| kinds.contains(&crate::NodeExt::kind_name(n)))
    }
}

/// Node ids are addresses: distinct, but their low bits are zero (alignment) and their high
/// bits too (user-space addresses), and the table reads both (the bucket from the low bits, a
/// tag from the top seven): a multiply spreads the middle bits over the whole word.
#[derive(Default)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        let h = (self.0 ^ (self.0 >> 29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        h ^ (h >> 32)
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8) | u64::from(*b);
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.0 = n as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{descendants, Lang};

    /// The table gives what `Node::parent` gives, on the fixtures (broken ones and zero-width
    /// MISSING nodes included), for every node of every tree.
    #[test]
    fn parents_agree_with_node_parent() {
        let mut checked = 0;
        for (dir, lang) in [("python", Lang::Python), ("cuda", Lang::Cuda)] {
            let dir = format!("{}/../../fixtures/{dir}", env!("CARGO_MANIFEST_DIR"));
            let mut texts: Vec<String> = std::fs::read_dir(dir)
                .unwrap()
                .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap_or_default())
                .collect();
            texts.push("int f( { x = ; }\nvoid g() { h(1, ; }".into());
            texts.push("def f(:\n    return g(1,\nx = [\n".into());
            for text in texts {
                let Some(tree) = crate::parse(lang, &text) else {
                    continue;
                };
                let parents = Parents::of([tree.root_node()]);
                for n in descendants(tree.root_node()) {
                    assert_eq!(
                        parents.parent(n).map(|p| p.id()),
                        n.parent().map(|p| p.id()),
                        "{} at {}",
                        n.kind(),
                        n.start_byte()
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked > 10_000);
    }

    /// Built below an inner node, that node is a root; nodes outside it have no parent.
    #[test]
    fn inner_root_and_kinds() {
        let tree = crate::parse(Lang::Python, "def f():\n    return g(h(1))\nx = 2\n").unwrap();
        let root = tree.root_node();
        let f = root.named_child(0).unwrap();
        let parents = Parents::of([f]);
        assert!(parents.parent(f).is_none());
        assert!(parents.parent(root.named_child(1).unwrap()).is_none());
        let one = descendants(f).find(|n| n.kind() == "integer").unwrap();
        let kinds: Vec<&str> = parents.ancestors(one).map(|n| n.kind()).collect();
        assert_eq!(
            kinds,
            [
                "argument_list",
                "call",
                "argument_list",
                "call",
                "return_statement",
                "block",
                "function_definition"
            ]
        );
        let call = parents.ancestor_of_kind(one, &["call"]).unwrap();
        assert_eq!(call.start_byte(), 22);
        assert_eq!(
            parents.ancestor_of_kind(call, &["call"]).unwrap().id(),
            call.id()
        );
        assert!(parents.ancestor_of_kind(one, &["module"]).is_none());
    }
}
