//! Tree helpers: the one iterative walk, fast field and kind look-ups, child and descendant
//! iterators.

use tree_sitter::{Node, Tree};

/// The one iterative walk: calls `visit(node, true)` when entering a node and
/// `visit(node, false)` when leaving it, in document order, without recursion.
pub fn walk<'t>(tree: &'t Tree, mut visit: impl FnMut(Node<'t>, bool)) {
    let mut cursor = tree.walk();
    // The nodes entered whose children are being walked, innermost last: a node is left as it
    // was entered, without asking the cursor for it again (a call into the C library each).
    let mut open: Vec<Node<'t>> = Vec::new();
    'walk: loop {
        let node = cursor.node();
        visit(node, true);
        if cursor.goto_first_child() {
            open.push(node);
            continue;
        }
        let mut leaving = node;
        loop {
            visit(leaving, false);
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                break 'walk;
            }
            match open.pop() {
                Some(parent) => leaving = parent,
                None => break 'walk,
            }
        }
    }
}

/// Is `node` an anonymous leaf (punctuation, an operator, a keyword) that the parser did not
/// insert? A MISSING node is not one: it marks a parse error.
#[inline]
pub fn is_plain_token(node: Node<'_>) -> bool {
    !node.is_named() && node.child_count() == 0 && !node.is_missing()
}

/// Visits the nodes of `tree` in document order, each once, on the way down; `visit` returns
/// whether to go into the node's children (a walk that skips subtrees where nothing it looks
/// for can be).
pub fn walk_pruned<'t>(tree: &'t Tree, mut visit: impl FnMut(Node<'t>) -> bool) {
    let mut cursor = tree.walk();
    'walk: loop {
        if visit(cursor.node()) && cursor.goto_first_child() {
            continue;
        }
        loop {
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                break 'walk;
            }
        }
    }
}

/// The nodes from `root` down to `target`, outermost first, `target` excluded (empty when
/// `target` is not below `root`). Found going down with a cursor: `Node::parent` starts again
/// from the root at every step, so walking up to the root that way is quadratic in the depth.
pub fn ancestors_of<'t>(root: Node<'t>, target: Node<'_>) -> Vec<Node<'t>> {
    let (start, end) = (target.start_byte(), target.end_byte());
    if root.start_byte() > start || root.end_byte() < end || root.id() == target.id() {
        return Vec::new();
    }
    // Going down by byte offset: `goto_first_child_for_byte` steps through the balanced
    // hidden nodes tree-sitter keeps for long repetitions, so a node among thousands of
    // siblings (a top-level item of a large file) is reached in logarithmic time, where
    // stepping from sibling to sibling is linear. A zero-width target (a missing node) is
    // found by the sibling walk below.
    if start < end {
        let mut path = vec![root];
        let mut cursor = root.walk();
        while cursor.goto_first_child_for_byte(start).is_some() {
            let n = cursor.node();
            if n.id() == target.id() {
                return path;
            }
            if !(n.start_byte() <= start && end <= n.end_byte()) {
                break;
            }
            path.push(n);
        }
    }
    let mut path = vec![root];
    let mut cursor = root.walk();
    'down: loop {
        if !cursor.goto_first_child() {
            return Vec::new();
        }
        loop {
            let n = cursor.node();
            if n.id() == target.id() {
                return path;
            }
            if n.start_byte() <= start && end <= n.end_byte() && n.child_count() > 0 {
                path.push(n);
                continue 'down;
            }
            if n.start_byte() > start || !cursor.goto_next_sibling() {
                return Vec::new();
            }
        }
    }
}

/// `Node::child_by_field_name` looks the field name up by a linear scan of the grammar's field
/// names on every call; this looks it up once per name in a table (one per grammar).
pub trait NodeExt<'t> {
    /// The child in field `name` (as `child_by_field_name`, faster).
    fn field(&self, name: &str) -> Option<Node<'t>>;

    /// The node's kind, as `Node::kind`, read from a table of the grammar's kind names
    /// (`Node::kind` measures and UTF-8-checks the grammar's C string on every call).
    fn kind_name(&self) -> &'t str;
}

struct FieldTable {
    kind_count: usize,
    ids: FieldIds,
    /// Kind id → name.
    kinds: Vec<Option<Box<str>>>,
}

/// Field name → field id: an open-addressed table over a hash of the name's length and three
/// of its bytes. Rules look a field up for nearly every node they inspect, and the names are a
/// few bytes long, all different in length or in those bytes for the most part, so one probe
/// and one comparison usually answer (a general hash map spends more on hashing the name than
/// this spends in all). The keys are the grammar's own names.
struct FieldIds {
    /// (name, id); id 0 marks an empty slot (tree-sitter's field ids start at 1).
    slots: Vec<(Box<str>, u16)>,
    mask: usize,
}

impl FieldIds {
    fn new(names: &[(String, u16)]) -> FieldIds {
        // At most a quarter full: probes stay short, and there is always an empty slot.
        let size = (names.len() * 4).next_power_of_two().max(16);
        let mut table = FieldIds {
            slots: vec![(Box::from(""), 0); size],
            mask: size - 1,
        };
        for (name, id) in names {
            let mut i = table.slot_of(name.as_bytes());
            while table.slots[i].1 != 0 {
                i = (i + 1) & table.mask;
            }
            table.slots[i] = (Box::from(name.as_str()), *id);
        }
        table
    }

    #[inline]
    fn slot_of(&self, name: &[u8]) -> usize {
        let n = name.len();
        let h = match n {
            0 => 0,
            _ => {
                n.wrapping_mul(0x9e37)
                    ^ (usize::from(name[0]) << 5)
                    ^ (usize::from(name[n / 2]) << 9)
                    ^ (usize::from(name[n - 1]) << 1)
            }
        };
        (h ^ (h >> 7)) & self.mask
    }

    #[inline]
    fn get(&self, name: &str) -> Option<u16> {
        let mut i = self.slot_of(name.as_bytes());
        loop {
            let (key, id) = &self.slots[i];
            if *id == 0 {
                return None;
            }
            if key.as_bytes() == name.as_bytes() {
                return Some(*id);
            }
            i = (i + 1) & self.mask;
        }
    }
}

fn field_table(language: tree_sitter::Language) -> FieldTable {
    let mut names = Vec::new();
    for id in 1..=language.field_count() as u16 {
        if let Some(name) = language.field_name_for_id(id) {
            names.push((name.to_string(), id));
        }
    }
    let kinds = (0..language.node_kind_count() as u16)
        .map(|id| language.node_kind_for_id(id).map(Box::from))
        .collect();
    FieldTable {
        kind_count: language.node_kind_count(),
        ids: FieldIds::new(&names),
        kinds,
    }
}

static FIELD_TABLES: std::sync::LazyLock<[FieldTable; 2]> = std::sync::LazyLock::new(|| {
    [
        field_table(tree_sitter_python::LANGUAGE.into()),
        field_table(tree_sitter_cuda::LANGUAGE.into()),
    ]
});

impl<'t> NodeExt<'t> for Node<'t> {
    #[inline]
    fn field(&self, name: &str) -> Option<Node<'t>> {
        let count = self.language().node_kind_count();
        match FIELD_TABLES.iter().find(|t| t.kind_count == count) {
            Some(t) => self.child_by_field_id(t.ids.get(name)?),
            None => self.child_by_field_name(name),
        }
    }

    #[inline]
    fn kind_name(&self) -> &'t str {
        let count = self.language().node_kind_count();
        let tables: &'static [FieldTable; 2] = &FIELD_TABLES;
        tables
            .iter()
            .find(|t| t.kind_count == count)
            .and_then(|t| t.kinds.get(self.kind_id() as usize)?.as_deref())
            .unwrap_or_else(|| self.kind())
    }
}

/// Source text of a node (empty if the range is not valid UTF-8, which cannot happen for text
/// that came from a `String`).
pub fn text<'s>(node: Node<'_>, source: &'s str) -> &'s str {
    source.get(node.start_byte()..node.end_byte()).unwrap_or("")
}

/// Iterates over the named children of `node`.
///
/// Walks the children with a cursor: `Node::named_child(i)` scans from the first child on
/// every call, which made iterating a long block (a module with thousands of statements)
/// quadratic.
pub fn named_children<'t>(node: Node<'t>) -> NamedChildren<'t> {
    NamedChildren {
        cursor: node.walk(),
        state: ChildState::Start,
    }
}

/// See [`named_children`].
pub struct NamedChildren<'t> {
    cursor: tree_sitter::TreeCursor<'t>,
    state: ChildState,
}

enum ChildState {
    Start,
    Walking,
    Done,
}

impl<'t> Iterator for NamedChildren<'t> {
    type Item = Node<'t>;

    fn next(&mut self) -> Option<Node<'t>> {
        loop {
            let moved = match self.state {
                ChildState::Start => {
                    self.state = ChildState::Walking;
                    self.cursor.goto_first_child()
                }
                ChildState::Walking => self.cursor.goto_next_sibling(),
                ChildState::Done => return None,
            };
            if !moved {
                self.state = ChildState::Done;
                return None;
            }
            let n = self.cursor.node();
            if n.is_named() {
                return Some(n);
            }
        }
    }
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
        // Each node visited spends a unit of the file's work budget; a walk that runs out ends
        // early (the engine then reports where the analysis stopped).
        if !gpulint_source::budget::spend(1) {
            gpulint_source::budget::stopped_at(self.cursor.node().start_byte());
            self.done = true;
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

/// The innermost ancestor of `node` below `root` (or the node itself) of one of the given
/// kinds. The ancestors are found going down from `root` ([`ancestors_of`]), not by climbing
/// with `Node::parent`.
pub fn ancestor_of_kind<'t>(root: Node<'t>, node: Node<'t>, kinds: &[&str]) -> Option<Node<'t>> {
    if kinds.contains(&node.kind_name()) {
        return Some(node);
    }
    ancestors_of(root, node)
        .into_iter()
        .rev()
        .find(|n| kinds.contains(&n.kind_name()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Lang;

    /// A pruned walk visits what the full walk visits, in order, less the skipped subtrees.
    #[test]
    fn walk_pruned_skips_subtrees() {
        let src = "def f(a):\n    return g(a + 1)\n\nx = [1, 2]\n";
        let tree = crate::parse(Lang::Python, src).unwrap();
        let mut all = Vec::new();
        walk(&tree, |n, entering| {
            if entering {
                all.push(n.id());
            }
        });
        let mut every = Vec::new();
        walk_pruned(&tree, |n| {
            every.push(n.id());
            true
        });
        assert_eq!(every, all);
        let mut kinds = Vec::new();
        walk_pruned(&tree, |n| {
            kinds.push(n.kind());
            n.kind() != "call" && n.kind() != "list"
        });
        assert!(kinds.contains(&"call") && kinds.contains(&"list"));
        assert!(!kinds.contains(&"argument_list") && !kinds.contains(&"integer"));
    }

    /// The field table answers what tree-sitter's own look-up answers, for every field name of
    /// both grammars, and nothing for names that are not fields.
    #[test]
    fn field_ids_agree_with_the_grammar() {
        for language in [
            tree_sitter::Language::from(tree_sitter_python::LANGUAGE),
            tree_sitter::Language::from(tree_sitter_cuda::LANGUAGE),
        ] {
            let table = field_table(language.clone());
            let mut checked = 0;
            for id in 1..=language.field_count() as u16 {
                let Some(name) = language.field_name_for_id(id) else {
                    continue;
                };
                assert_eq!(
                    table.ids.get(name),
                    language.field_id_for_name(name).map(u16::from)
                );
                assert_eq!(table.ids.get(name), Some(id), "{name}");
                checked += 1;
            }
            assert!(checked > 20);
            for name in [
                "",
                "x",
                "nonexistent",
                "functions",
                "Function",
                "argument_list",
            ] {
                assert_eq!(table.ids.get(name), None, "{name}");
                assert_eq!(language.field_id_for_name(name), None, "{name}");
            }
        }
    }

    /// `kind_name` agrees with `Node::kind` on every node of every fixture (aliases, ERROR
    /// and MISSING nodes included).
    #[test]
    fn kind_name_is_kind() {
        let mut checked = 0;
        for dir in [
            concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/python"),
            concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/cuda"),
        ] {
            let lang = if dir.ends_with("python") {
                Lang::Python
            } else {
                Lang::Cuda
            };
            for entry in std::fs::read_dir(dir).unwrap() {
                let text = std::fs::read_to_string(entry.unwrap().path()).unwrap_or_default();
                let Some(tree) = crate::parse(lang, &text) else {
                    continue;
                };
                for n in descendants(tree.root_node()) {
                    assert_eq!(n.kind_name(), n.kind());
                    checked += 1;
                }
            }
        }
        let broken = crate::parse(Lang::Cuda, "int f( { x = ; }").unwrap();
        for n in descendants(broken.root_node()) {
            assert_eq!(n.kind_name(), n.kind());
        }
        assert!(checked > 10_000);
    }

    /// The nodes `Node::parent` climbs through, outermost first.
    fn parents(root: Node<'_>, n: Node<'_>) -> Vec<usize> {
        let mut out = Vec::new();
        let mut cur = n;
        while cur.id() != root.id() {
            let Some(p) = cur.parent() else { break };
            out.push(p.id());
            cur = p;
        }
        out.reverse();
        out
    }

    /// `ancestors_of` gives the chain `Node::parent` climbs, for every node of the fixtures
    /// (broken ones and zero-width MISSING nodes included), and from an inner root.
    #[test]
    fn ancestors_of_agrees_with_parent() {
        let mut checked = 0;
        for dir in [
            concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/python"),
            concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/cuda"),
        ] {
            let lang = if dir.ends_with("python") {
                Lang::Python
            } else {
                Lang::Cuda
            };
            let mut texts: Vec<String> = std::fs::read_dir(dir)
                .unwrap()
                .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap_or_default())
                .collect();
            texts.push("int f( { x = ; }\nvoid g() { h(1, ; }".into());
            for text in texts {
                let Some(tree) = crate::parse(lang, &text) else {
                    continue;
                };
                let root = tree.root_node();
                for n in descendants(root).step_by(7) {
                    let got: Vec<usize> = ancestors_of(root, n).iter().map(|a| a.id()).collect();
                    assert_eq!(got, parents(root, n), "{} at {}", n.kind(), n.start_byte());
                    checked += 1;
                }
            }
        }
        assert!(checked > 1_000);
        // Below an inner root; a node outside it gives nothing.
        let tree = crate::parse(Lang::Python, "def f():\n    return g(1)\nx = 2\n").unwrap();
        let root = tree.root_node();
        let f = root.named_child(0).unwrap();
        let call = descendants(f).find(|n| n.kind() == "call").unwrap();
        let got: Vec<usize> = ancestors_of(f, call).iter().map(|a| a.id()).collect();
        let want: Vec<usize> = parents(root, call)[1..].to_vec();
        assert_eq!(got, want);
        let x = root.named_child(1).unwrap();
        assert!(ancestors_of(f, x).is_empty());
    }
}
