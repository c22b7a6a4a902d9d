//! Execution order: the calls, assignments and imports of a module in the order they run.
//!
//! The module's statements are laid out as they execute, with `if __name__ == "__main__":`
//! bodies included and calls to local functions expanded in place (each function at most once
//! per sequence, to a bounded depth: a repeated call runs code that already ran). Function bodies
//! run only when called; `absl.app.run(main)` / `tf.compat.v1.app.run()` and `fire.Fire(main)`
//! count as calls of `main`, and instantiating a local class runs its `__init__`. A statement
//! in one branch of an `if` still counts as possibly executed; [`ExecOrder::exclusive`] tells
//! whether two events sit in different branches of the same `if`/`match` (or in the body and a
//! handler of the same `try`), so that neither can be relied on to follow the other.
//!
//! Besides the module, every function that nothing in the file calls is laid out as its own
//! sequence (a library's `train()` has an order of its own, whoever calls it).

use super::PythonModel;
use crate::hash::HashSet;
use gpulint_syntax::named_children;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

/// How many local calls deep expansion goes.
const MAX_CALL_DEPTH: u16 = 8;
/// Upper bound on the events of one file, all sequences together.
const MAX_EVENTS: usize = 200_000;

/// Why the events of a frame run.
#[derive(Debug, Clone, Copy)]
pub enum FrameKind<'t> {
    /// The start of a sequence.
    Root,
    /// Arm `arm` of the `if`/`match` statement with node id `stmt`; for a `try` statement, arm 0
    /// is the body and its `else`, arms 1.. the handlers.
    Branch { stmt: usize, arm: u16 },
    /// The body of a loop, an `except` handler or an `else` clause: maybe not run at all.
    Conditional,
    /// The body of local function `callee`, run by the call `site`.
    Call { site: Node<'t>, callee: usize },
}

/// A nesting level of the execution: events point at their innermost frame.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'t> {
    pub parent: Option<u32>,
    pub kind: FrameKind<'t>,
    /// Some enclosing frame may not run (a branch, a loop, a handler).
    pub conditional: bool,
    /// Number of expanded calls between the sequence root and this frame.
    pub depth: u16,
}

/// One thing that runs: a `call`, an `assignment` / `augmented_assignment`, or an import
/// statement.
#[derive(Debug, Clone, Copy)]
pub struct Event<'t> {
    pub node: Node<'t>,
    pub frame: u32,
}

/// One laid-out sequence: the module, or a function nothing in the file calls.
#[derive(Debug, Clone)]
pub struct Sequence {
    /// `None` for the module, else the index of the function.
    pub entry: Option<usize>,
    start: usize,
    end: usize,
}

/// The execution order of a file. See the module documentation.
#[derive(Debug, Default)]
pub struct ExecOrder<'t> {
    events: Vec<Event<'t>>,
    frames: Vec<Frame<'t>>,
    sequences: Vec<Sequence>,
}

impl<'t> ExecOrder<'t> {
    /// All sequences; the first is the module.
    pub fn sequences(&self) -> &[Sequence] {
        &self.sequences
    }

    /// The events of sequence `seq`, in execution order.
    pub fn events(&self, seq: usize) -> &[Event<'t>] {
        self.sequences
            .get(seq)
            .map(|s| &self.events[s.start..s.end])
            .unwrap_or(&[])
    }

    /// The events of the module, in execution order.
    /// Every event that runs at module level: the module's sequence, or in a notebook the
    /// sequences of all its cells (laid out one after the other).
    pub fn module(&self) -> &[Event<'t>] {
        let end = self
            .sequences
            .iter()
            .take_while(|s| s.entry.is_none())
            .last()
            .map(|s| s.end)
            .unwrap_or(0);
        &self.events[..end]
    }

    pub fn frame(&self, ev: &Event<'t>) -> &Frame<'t> {
        &self.frames[ev.frame as usize]
    }

    /// Could the event be skipped (a branch, a loop body, an `except` handler)?
    pub fn is_conditional(&self, ev: &Event<'t>) -> bool {
        self.frame(ev).conditional
    }

    /// The local calls that led to the event, outermost first.
    pub fn call_sites(&self, ev: &Event<'t>) -> Vec<Node<'t>> {
        let mut out = Vec::new();
        let mut cur = Some(ev.frame);
        while let Some(i) = cur {
            let f = &self.frames[i as usize];
            if let FrameKind::Call { site, .. } = f.kind {
                out.push(site);
            }
            cur = f.parent;
        }
        out.reverse();
        out
    }

    /// Do the two events sit in different arms of the same `if` or `match` (so that at most one
    /// of them runs)?
    pub fn exclusive(&self, a: &Event<'t>, b: &Event<'t>) -> bool {
        let arms = |ev: &Event<'t>| {
            let mut out = Vec::new();
            let mut cur = Some(ev.frame);
            while let Some(i) = cur {
                let f = &self.frames[i as usize];
                if let FrameKind::Branch { stmt, arm } = f.kind {
                    out.push((stmt, arm));
                }
                cur = f.parent;
            }
            out
        };
        let a = arms(a);
        if a.is_empty() {
            return false;
        }
        arms(b)
            .iter()
            .any(|(s, arm)| a.iter().any(|(s2, arm2)| s == s2 && arm != arm2))
    }

    pub(super) fn build(m: &PythonModel<'t>) -> ExecOrder<'t> {
        let mut b = OrderBuilder {
            m,
            order: ExecOrder::default(),
            stack: Vec::new(),
            visited: HashSet::default(),
        };
        // Module level. In a notebook each code cell is a sequence of its own: cells can run
        // in any order, so only what happens inside one cell is certain to be ordered.
        let mut reached = HashSet::default();
        for root in &m.roots {
            reached.extend(b.sequence(None, std::slice::from_ref(root)));
        }
        let graph = m.call_graph();
        for f in 0..m.functions.len() {
            if b.order.events.len() >= MAX_EVENTS {
                break;
            }
            if reached.contains(&f) || graph.callers[f] > 0 {
                continue;
            }
            if let Some(body) = m.functions[f].node.field("body") {
                b.sequence(Some(f), &[body]);
            }
        }
        b.order
    }
}

enum Work<'t> {
    Stmt(Node<'t>, u32),
    Event(Node<'t>, u32),
}

struct OrderBuilder<'m, 't> {
    m: &'m PythonModel<'t>,
    order: ExecOrder<'t>,
    stack: Vec<Work<'t>>,
    /// Functions already expanded in the current sequence.
    visited: HashSet<usize>,
}

impl<'t> OrderBuilder<'_, 't> {
    /// Lays out one sequence starting at `body` (the module root or a function body); returns
    /// the functions it expanded.
    fn sequence(&mut self, entry: Option<usize>, bodies: &[Node<'t>]) -> HashSet<usize> {
        let start = self.order.events.len();
        self.visited.clear();
        if let Some(f) = entry {
            self.visited.insert(f);
        }
        let root = self.frame(None, FrameKind::Root, false);
        for body in bodies.iter().rev() {
            self.push_block(*body, root);
        }
        while let Some(w) = self.stack.pop() {
            if self.order.events.len() >= MAX_EVENTS {
                self.stack.clear();
                break;
            }
            match w {
                Work::Stmt(node, frame) => self.stmt(node, frame),
                Work::Event(node, frame) => self.event(node, frame),
            }
        }
        self.order.sequences.push(Sequence {
            entry,
            start,
            end: self.order.events.len(),
        });
        std::mem::take(&mut self.visited)
    }

    fn frame(&mut self, parent: Option<u32>, kind: FrameKind<'t>, conditional: bool) -> u32 {
        let (pc, pd) = parent
            .map(|p| {
                let f = &self.order.frames[p as usize];
                (f.conditional, f.depth)
            })
            .unwrap_or((false, 0));
        let depth = pd + matches!(kind, FrameKind::Call { .. }) as u16;
        self.order.frames.push(Frame {
            parent,
            kind,
            conditional: pc || conditional,
            depth,
        });
        (self.order.frames.len() - 1) as u32
    }

    /// Schedules the statements of a block (or module) to run next, in order.
    fn push_block(&mut self, block: Node<'t>, frame: u32) {
        let children: Vec<Node<'t>> = named_children(block)
            .filter(|c| c.kind_name() != "comment")
            .collect();
        for c in children.into_iter().rev() {
            self.stack.push(Work::Stmt(c, frame));
        }
    }

    /// Schedules the events of an expression (or simple statement) to run next.
    fn push_events(&mut self, node: Node<'t>, frame: u32) {
        let mut found = self.m.events_under(node);
        // Inner calls run before the calls that take their results: post-order.
        found.sort_by_key(|n| (n.end_byte(), std::cmp::Reverse(n.start_byte())));
        for n in found.into_iter().rev() {
            self.stack.push(Work::Event(n, frame));
        }
    }

    fn stmt(&mut self, node: Node<'t>, frame: u32) {
        match node.kind_name() {
            "function_definition" => {}
            "decorated_definition" => {
                if let Some(def) = node.field("definition") {
                    if def.kind_name() == "class_definition" {
                        self.stmt(def, frame);
                    }
                }
            }
            "class_definition" => {
                if let Some(body) = node.field("body") {
                    self.push_block(body, frame);
                }
            }
            "block" | "module" => self.push_block(node, frame),
            "import_statement" | "import_from_statement" => {
                self.stack.push(Work::Event(node, frame));
            }
            "if_statement" => self.if_statement(node, frame),
            "for_statement" => {
                let body_frame = self.frame(Some(frame), FrameKind::Conditional, true);
                if let Some(alt) = node.field("alternative") {
                    self.push_clause_body(alt, body_frame);
                }
                if let Some(body) = node.field("body") {
                    self.push_block(body, body_frame);
                }
                if let Some(right) = node.field("right") {
                    self.push_events(right, frame);
                }
            }
            "while_statement" => {
                let forever = node.field("condition").is_some_and(|c| {
                    c.kind_name() == "true" || (c.kind_name() == "integer" && self.m.text(c) != "0")
                });
                let body_frame = self.frame(Some(frame), FrameKind::Conditional, !forever);
                if let Some(alt) = node.field("alternative") {
                    self.push_clause_body(alt, body_frame);
                }
                if let Some(body) = node.field("body") {
                    self.push_block(body, body_frame);
                }
                if let Some(cond) = node.field("condition") {
                    self.push_events(cond, frame);
                }
            }
            "try_statement" => {
                // A handler runs when the body failed part-way: what the body does after the
                // failing statement never ran. So the body (and its `else`, which runs after a
                // body that completed) and each handler are treated as exclusive arms.
                let clauses: Vec<Node<'t>> = named_children(node).collect();
                let arm = |k: usize| FrameKind::Branch {
                    stmt: node.id(),
                    arm: k as u16,
                };
                let handlers = clauses
                    .iter()
                    .filter(|c| matches!(c.kind_name(), "except_clause" | "except_group_clause"))
                    .count();
                let mut handler = handlers;
                for c in clauses.into_iter().rev() {
                    match c.kind_name() {
                        "except_clause" | "except_group_clause" => {
                            let f = self.frame(Some(frame), arm(handler), true);
                            handler -= 1;
                            self.push_clause_body(c, f);
                        }
                        "else_clause" => {
                            let f = self.frame(Some(frame), arm(0), true);
                            self.push_clause_body(c, f);
                        }
                        "finally_clause" => self.push_clause_body(c, frame),
                        "block" => {
                            let f = self.frame(Some(frame), arm(0), false);
                            self.push_block(c, f);
                        }
                        _ => {}
                    }
                }
            }
            "with_statement" => {
                if let Some(body) = node.field("body") {
                    self.push_block(body, frame);
                }
                for c in named_children(node)
                    .filter(|c| c.kind_name() == "with_clause")
                    .collect::<Vec<_>>()
                {
                    self.push_events(c, frame);
                }
            }
            "match_statement" => {
                let cases: Vec<Node<'t>> = node
                    .field("body")
                    .map(|b| {
                        named_children(b)
                            .filter(|c| c.kind_name() == "case_clause")
                            .collect()
                    })
                    .unwrap_or_default();
                for (arm, case) in cases.iter().enumerate().rev() {
                    let f = self.frame(
                        Some(frame),
                        FrameKind::Branch {
                            stmt: node.id(),
                            arm: arm as u16,
                        },
                        true,
                    );
                    if let Some(body) = case.field("consequence") {
                        self.push_block(body, f);
                    }
                    if let Some(guard) = case.field("guard") {
                        self.push_events(guard, f);
                    }
                }
                for s in node
                    .children_by_field_name("subject", &mut node.walk())
                    .collect::<Vec<_>>()
                {
                    self.push_events(s, frame);
                }
            }
            // Simple statements (and anything the parser could not classify).
            _ => self.push_events(node, frame),
        }
    }

    /// The block inside an `else`/`except`/`finally` clause.
    fn push_clause_body(&mut self, clause: Node<'t>, frame: u32) {
        if let Some(body) = clause.field("body").or_else(|| {
            named_children(clause)
                .filter(|c| c.kind_name() == "block")
                .last()
        }) {
            self.push_block(body, frame);
        }
    }

    fn if_statement(&mut self, node: Node<'t>, frame: u32) {
        let cond = node.field("condition");
        let main_guard = cond.is_some_and(|c| is_main_guard(c, self.m));
        let mut arms: Vec<(Option<Node<'t>>, Option<Node<'t>>)> =
            vec![(None, node.field("consequence"))];
        for alt in node.children_by_field_name("alternative", &mut node.walk()) {
            match alt.kind_name() {
                "elif_clause" => arms.push((alt.field("condition"), alt.field("consequence"))),
                "else_clause" => arms.push((None, alt.field("body"))),
                _ => {}
            }
        }
        for (arm, (arm_cond, body)) in arms.iter().enumerate().rev() {
            let f = if arm == 0 && main_guard {
                frame
            } else {
                self.frame(
                    Some(frame),
                    FrameKind::Branch {
                        stmt: node.id(),
                        arm: arm as u16,
                    },
                    true,
                )
            };
            if let Some(body) = body {
                self.push_block(*body, f);
            }
            if let Some(c) = arm_cond {
                self.push_events(*c, f);
            }
        }
        if let Some(c) = cond {
            self.push_events(c, frame);
        }
    }

    fn event(&mut self, node: Node<'t>, frame: u32) {
        self.order.events.push(Event { node, frame });
        if node.kind_name() != "call" {
            return;
        }
        let Some(callee) = self.expansion(node) else {
            return;
        };
        if self.order.frames[frame as usize].depth >= MAX_CALL_DEPTH || !self.visited.insert(callee)
        {
            return;
        }
        let Some(body) = self.m.functions[callee].node.field("body") else {
            return;
        };
        let f = self.frame(Some(frame), FrameKind::Call { site: node, callee }, false);
        self.push_block(body, f);
    }

    /// The local function a call runs: a local function or method, the `__init__` of a local
    /// class, or the `main` handed to an app runner.
    fn expansion(&self, call: Node<'t>) -> Option<usize> {
        let m = self.m;
        if let Some(f) = m.local_callee(call) {
            return Some(f);
        }
        let func = call.field("function")?;
        if func.kind_name() == "identifier" {
            let name = m.text(func);
            if m.qualified_name(func).is_none() {
                if let Some(c) = m.local_class(call, name) {
                    return m.method_of(c, "__init__");
                }
            }
        }
        // Cheap test first: only `...run(...)` and `Fire(...)` can be app runners.
        let last = match func.kind_name() {
            "attribute" => func.field("attribute").map(|a| m.text(a)),
            _ => Some(m.text(func)),
        };
        if !matches!(last, Some("run" | "Fire")) {
            return None;
        }
        let q = m.call_name(call)?;
        let runner = matches!(
            q.as_str(),
            "absl.app.run"
                | "tensorflow.app.run"
                | "tensorflow.compat.v1.app.run"
                | "tensorflow.compat.v2.app.run"
                | "fire.Fire"
        );
        if !runner {
            return None;
        }
        let args = call.field("arguments")?;
        let target = named_children(args).find_map(|a| match a.kind_name() {
            "identifier" => Some(a),
            "keyword_argument" if a.field("name").map(|n| m.text(n)) == Some("main") => {
                a.field("value").filter(|v| v.kind_name() == "identifier")
            }
            _ => None,
        });
        let name = match target {
            Some(t) => m.text(t),
            None if q != "fire.Fire" => "main",
            None => return None,
        };
        m.functions_named(name)
            .iter()
            .copied()
            .find(|&f| m.functions[f].parent.is_none() && m.functions[f].class.is_none())
    }
}

/// `__name__ == "__main__"` (either side).
pub(crate) fn is_main_guard(cond: Node<'_>, m: &PythonModel<'_>) -> bool {
    if cond.kind_name() != "comparison_operator" {
        return false;
    }
    let parts: Vec<Node<'_>> = named_children(cond).collect();
    parts.len() == 2
        && parts
            .iter()
            .any(|p| p.kind_name() == "identifier" && m.text(*p) == "__name__")
        && parts
            .iter()
            .any(|p| super::string_literal(*p, m.source).as_deref() == Some("__main__"))
        && m.text(cond).contains("==")
}

#[cfg(test)]
mod tests {
    use super::super::build;
    use gpulint_syntax::NodeExt;
    use gpulint_syntax::{parse, Lang};

    /// The source text of the call events of sequence `seq`.
    fn calls(src: &str, seq: usize) -> Vec<String> {
        let tree = parse(Lang::Python, src).unwrap();
        let m = build(&tree, src);
        let o = m.order();
        o.events(seq)
            .iter()
            .filter(|e| e.node.kind_name() == "call")
            .map(|e| m.text(e.node.field("function").unwrap()).to_string())
            .collect()
    }

    #[test]
    fn module_order_expands_local_calls_once() {
        let src = "import tensorflow as tf\ndef setup():\n    tf.config.experimental.set_memory_growth(g, True)\ndef build():\n    return tf.keras.Sequential([tf.keras.layers.Dense(2)])\ndef main():\n    setup()\n    m = build()\n    m.fit(x(), y)\n    setup()\nif __name__ == '__main__':\n    main()\n";
        assert_eq!(
            calls(src, 0),
            [
                "main",
                "setup",
                "tf.config.experimental.set_memory_growth",
                "build",
                "tf.keras.layers.Dense",
                "tf.keras.Sequential",
                "x",
                "m.fit",
                "setup"
            ]
        );
    }

    #[test]
    fn app_runners_and_class_init_run_code() {
        let src = "from absl import app\nclass T:\n    def __init__(self):\n        self.go()\n    def go(self):\n        work()\ndef main(argv):\n    T()\nif __name__ == '__main__':\n    app.run(main)\n";
        assert_eq!(calls(src, 0), ["app.run", "T", "self.go", "work"]);
    }

    #[test]
    fn uncalled_functions_are_sequences_and_branches_exclusive() {
        let src = "def train():\n    if tpu:\n        a()\n    else:\n        b()\n    for x in xs:\n        c()\n";
        let tree = parse(Lang::Python, src).unwrap();
        let m = build(&tree, src);
        let o = m.order();
        assert_eq!(o.sequences().len(), 2);
        assert_eq!(o.sequences()[1].entry, Some(0));
        let ev = o.events(1);
        assert_eq!(ev.len(), 3);
        assert!(o.exclusive(&ev[0], &ev[1]));
        assert!(!o.exclusive(&ev[0], &ev[2]));
        assert!(o.is_conditional(&ev[2]));
        // Nothing runs at module level: defining a function runs none of its body.
        assert!(o.module().is_empty());
    }

    #[test]
    fn try_body_and_handlers_are_exclusive() {
        let src = "try:\n    a()\nexcept ValueError:\n    b()\nelse:\n    c()\nfinally:\n    d()\n";
        let tree = parse(Lang::Python, src).unwrap();
        let m = build(&tree, src);
        let o = m.order();
        let ev = o.module();
        assert_eq!(calls(src, 0), ["a", "b", "c", "d"]);
        assert!(o.exclusive(&ev[0], &ev[1]));
        assert!(!o.exclusive(&ev[0], &ev[2]));
        assert!(!o.exclusive(&ev[1], &ev[3]));
        assert!(!o.is_conditional(&ev[0]) && o.is_conditional(&ev[1]));
    }

    #[test]
    fn deep_nesting_does_not_overflow() {
        let mut src = String::new();
        for i in 0..3000 {
            src.push_str(&" ".repeat(i));
            src.push_str("if x:\n");
        }
        src.push_str(&" ".repeat(3000));
        src.push_str("f()\n");
        let tree = parse(Lang::Python, &src).unwrap();
        let m = build(&tree, &src);
        assert_eq!(m.order().module().len(), 1);
    }
}
