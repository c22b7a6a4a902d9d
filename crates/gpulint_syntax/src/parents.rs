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
///
/// Each node maps to the index of its parent in a list that holds every parent once: 16 bytes
/// a node in the table (an id and an index) instead of 40 (an id and a node), and a node per
/// parent, not per child. For a 200 kB Python file that is 2 MB less while it is checked.
pub struct Parents<'t> {
    /// Each recorded node's parent, as an index in `nodes`.
    slot: HashMap<usize, u32, BuildHasherDefault<IdHasher>>,
    /// Every node that is a parent, once (twice only if [`Parents::record`] is not called in
    /// the order of a walk).
    nodes: Vec<Node<'t>>,
    /// The parents still open in the walk, outermost first: the id of each and its index in
    /// `nodes`.
    open: Vec<(usize, u32)>,
    /// The id of the node recorded last: a parent first met is always that node (a walk enters
    /// a node's first child right after the node).
    last: usize,
}

/// An empty table, to be filled by [`Parents::record`] from a walk that is made anyway (the
/// checker's enter/leave walk): the same table as [`Parents::of`] without a walk of its own.
impl Default for Parents<'_> {
    fn default() -> Self {
        Parents {
            slot: HashMap::default(),
            nodes: Vec::new(),
            open: Vec::new(),
            last: 0,
        }
    }
}

impl<'t> Parents<'t> {
    /// The parents of every node below `roots` (each root is a tree's root node, or a node
    /// whose own parent is not wanted: a root has no parent here).
    pub fn of(roots: impl IntoIterator<Item = Node<'t>> + Clone) -> Parents<'t> {
        let mut parents = Parents::default();
        for root in roots {
            // Sized once (tree-sitter keeps the count of each subtree): no rehashing as it
            // fills.
            parents.reserve(root.descendant_count());
            let mut cursor = root.walk();
            let mut stack = vec![root];
            'walk: loop {
                if cursor.goto_first_child() {
                    let n = cursor.node();
                    parents.record(n, stack[stack.len() - 1]);
                    stack.push(n);
                    continue;
                }
                loop {
                    stack.pop();
                    if cursor.goto_next_sibling() {
                        let n = cursor.node();
                        parents.record(n, stack[stack.len() - 1]);
                        stack.push(n);
                        break;
                    }
                    if !cursor.goto_parent() {
                        break 'walk;
                    }
                }
            }
        }
        parents
    }

    /// Makes room for `additional` more nodes (a tree's `descendant_count`, when the walk
    /// enters its root): no rehashing as the table fills.
    pub fn reserve(&mut self, additional: usize) {
        self.slot.reserve(additional);
    }

    /// Records that `parent` is the parent of `node` (the walk's innermost open node when it
    /// enters `node`). Called in the order of a walk (each node after its parent, a node's
    /// subtree before its next sibling), each parent is kept once; in any other order the
    /// answers are the same, with some parents kept more than once.
    #[inline]
    pub fn record(&mut self, node: Node<'t>, parent: Node<'t>) {
        let pid = parent.id();
        let index = match self.open.last() {
            Some(&(id, index)) if id == pid => index,
            _ => self.open_parent(parent),
        };
        self.slot.insert(node.id(), index);
        self.last = node.id();
    }

    /// The index of `parent`, a node whose children are being recorded, but not the last
    /// one's: either its first child (it is the node recorded last), or a later child after
    /// the subtrees of earlier ones closed.
    #[cold]
    fn open_parent(&mut self, parent: Node<'t>) -> u32 {
        let pid = parent.id();
        if pid != self.last {
            while let Some(&(id, index)) = self.open.last() {
                if id == pid {
                    return index;
                }
                self.open.pop();
            }
        }
        // Met first (or out of the order of a walk): kept as a new parent.
        let index = u32::try_from(self.nodes.len()).unwrap_or(u32::MAX);
        if index == u32::MAX {
            // Four billion parents: no tree of a file this tool reads (its size is bounded)
            // comes near; the node is then recorded with no parent rather than a wrong one.
            return u32::MAX;
        }
        self.nodes.push(parent);
        self.open.push((pid, index));
        index
    }

    /// The parent of `node`, as `Node::parent` gives it (`None` for a root, or for a node of
    /// another tree).
    #[inline]
    pub fn parent(&self, node: Node<'_>) -> Option<Node<'t>> {
        let index = *self.slot.get(&node.id())?;
        self.nodes.get(index as usize).copied()
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

    /// Recorded in another order than a walk's (children after their siblings' subtrees, a
    /// subtree after its parent's next sibling), the answers are the same.
    #[test]
    fn any_order_of_records_gives_the_same_parents() {
        let text = "def f(a):\n    return g(h(a), [1, 2])\nclass C:\n    x = f(1)\n";
        let tree = crate::parse(Lang::Python, text).unwrap();
        let walked = Parents::of([tree.root_node()]);
        let mut pairs: Vec<(Node, Node)> = descendants(tree.root_node())
            .filter_map(|n| Some((n, walked.parent(n)?)))
            .collect();
        assert!(pairs.len() > 30);
        for order in 0..3 {
            match order {
                0 => pairs.reverse(),
                1 => pairs.sort_by_key(|(n, _)| std::cmp::Reverse(n.end_byte())),
                _ => pairs.rotate_left(7),
            }
            let mut table = Parents::default();
            for &(n, p) in &pairs {
                table.record(n, p);
            }
            for n in descendants(tree.root_node()) {
                assert_eq!(
                    table.parent(n).map(|p| p.id()),
                    n.parent().map(|p| p.id()),
                    "order {order}: {} at {}",
                    n.kind(),
                    n.start_byte()
                );
            }
        }
        // In the order of a walk, each parent is kept once.
        let parents_count = descendants(tree.root_node())
            .filter(|n| n.child_count() > 0)
            .count();
        assert_eq!(walked.nodes.len(), parents_count);
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
