//! One walk over a function's statements that composes, bottom-up, what each statement
//! leaves open: the shared-memory accesses reachable from its start before any barrier
//! (`exposed`), those after which its end is reachable without a barrier (`pending`), and
//! whether some path runs through it with no barrier at all. Sequencing two statements pairs
//! the first one's pending accesses with the second one's exposed ones; a loop pairs its
//! body's pending accesses with its exposed ones (the next iteration).

use super::index::{Forms, Index, Threads};
use super::{Acc, Across, Ctx};
use crate::cuda::interval::Poly;
use crate::cuda::last_name;
use crate::hash::HashMap;
use gpulint_syntax::{named_children, NodeExt};
use tree_sitter::Node;

/// Accesses kept per set; beyond, the earliest exposed and the latest pending are kept.
const MAX_SET: usize = 24;
/// Statements nested deeper than this are not analysed.
const MAX_DEPTH: usize = 96;

/// What a statement leaves open (see the module documentation).
#[derive(Debug, Clone, Default)]
pub(crate) struct Sum<'t> {
    pub exposed: Vec<Acc<'t>>,
    pub pending: Vec<Acc<'t>>,
    pub through: bool,
    /// A warp-level synchronisation (`__syncwarp`, a `*_sync` shuffle) on every path.
    pub warp_sync: bool,
    /// Pending at a `return`.
    pub exit: Vec<Acc<'t>>,
    /// Pending at a `break` / `continue`.
    pub jump: Vec<Acc<'t>>,
    /// Contains a barrier.
    pub barrier: bool,
}

impl<'t> Sum<'t> {
    pub fn empty() -> Self {
        Sum {
            through: true,
            ..Default::default()
        }
    }

    /// A barrier on some path but not on all.
    pub fn partial(&self) -> bool {
        self.barrier && self.through
    }

    pub fn barrier() -> Self {
        Sum {
            through: false,
            barrier: true,
            ..Default::default()
        }
    }
}

/// A buffer a name refers to: the root shared variable (or scratch parameter), the offset of
/// the name's pointer into it, and `volatile` access.
#[derive(Debug, Clone)]
pub(crate) struct Buf {
    pub root: String,
    pub offset: Option<Poly>,
    pub volatile: bool,
    /// A scalar (or struct) variable, not an array or pointer.
    pub scalar: bool,
    /// A struct, union or library temporary storage, handed whole to library calls.
    pub aggregate: bool,
    /// A pointer to a slice of the buffer chosen by the warp index (`&s[warp * 64]`): only
    /// the threads of one warp touch it.
    pub warp_private: bool,
    /// A kernel's pointer parameter: global memory, checked only for one thread's write read
    /// by the others of its block (see [`super::Ctx::pairs`]).
    pub global: bool,
}

impl Buf {
    /// A shared array or pointer named `root`, seen whole (no offset into it).
    pub fn array(root: &str, volatile: bool) -> Self {
        Buf {
            root: root.to_string(),
            offset: None,
            volatile,
            scalar: false,
            aggregate: false,
            warp_private: false,
            global: false,
        }
    }
}

pub(crate) struct Walker<'a, 'c, 't> {
    pub f: Forms<'a, 't>,
    pub ctx: &'c mut Ctx<'a, 't>,
    pub bufs: HashMap<&'t str, Buf>,
    /// The guards open at the current statement: the model's guard index (for ranges), the
    /// condition and whether it is negated.
    pub guards: Vec<(Option<u32>, Node<'t>, bool)>,
    pub guard_ids: HashMap<(usize, u8), u32>,
    pub depth: usize,
    /// What each guard condition (by node id, and whether negated) says about the threads
    /// that pass it, computed once per walk: every access under a guard asks.
    pub restricted: std::cell::RefCell<HashMap<(usize, bool), Threads>>,
}

/// The closing brace of a block (the statement itself otherwise).
fn closing(n: Node<'_>) -> Node<'_> {
    if n.kind_name() == "compound_statement" {
        if let Some(c) = n.child(n.child_count().saturating_sub(1)) {
            return c;
        }
    }
    n
}

fn cap(v: &mut Vec<Acc<'_>>, keep_last: bool) {
    if v.len() > MAX_SET {
        if keep_last {
            v.drain(..v.len() - MAX_SET);
        } else {
            v.truncate(MAX_SET);
        }
    }
}

impl<'a, 'c, 't> Walker<'a, 'c, 't> {
    /// `a` then `b`: pairs `a`'s pending accesses with `b`'s exposed ones.
    pub fn seq(&mut self, mut a: Sum<'t>, b: Sum<'t>) -> Sum<'t> {
        if !a.pending.is_empty() && !b.exposed.is_empty() {
            self.ctx
                .pairs(&self.f, &a.pending, &b.exposed, Across::Sequence);
        }
        let b_partial = b.partial();
        if a.through {
            for mut e in b.exposed {
                e.after_wsync |= a.warp_sync;
                a.exposed.push(e);
            }
            cap(&mut a.exposed, false);
        }
        let mut pending = Vec::new();
        if b.through {
            for mut p in a.pending {
                p.synced |= b.warp_sync;
                p.skipped |= b_partial;
                pending.push(p);
            }
        }
        pending.extend(b.pending);
        cap(&mut pending, true);
        a.exit.extend(b.exit);
        a.jump.extend(b.jump);
        cap(&mut a.exit, true);
        cap(&mut a.jump, true);
        Sum {
            exposed: a.exposed,
            pending,
            through: a.through && b.through,
            warp_sync: a.warp_sync || b.warp_sync,
            exit: a.exit,
            jump: a.jump,
            barrier: a.barrier || b.barrier,
        }
    }

    /// Either `a` or `b` runs.
    pub fn merge(a: Sum<'t>, b: Sum<'t>) -> Sum<'t> {
        let mut exposed = a.exposed;
        exposed.extend(b.exposed);
        cap(&mut exposed, false);
        let mut pending = a.pending;
        pending.extend(b.pending);
        cap(&mut pending, true);
        let mut exit = a.exit;
        exit.extend(b.exit);
        let mut jump = a.jump;
        jump.extend(b.jump);
        Sum {
            exposed,
            pending,
            through: a.through || b.through,
            warp_sync: a.warp_sync && b.warp_sync,
            exit,
            jump,
            barrier: a.barrier || b.barrier,
        }
    }

    /// A loop with `body` (its condition and update included): the next iteration's exposed
    /// accesses after this one's pending ones. A loop whose body holds a barrier is taken to
    /// run at least once.
    pub fn looped(
        &mut self,
        loop_node: Node<'t>,
        body_end: Node<'t>,
        mut body: Sum<'t>,
    ) -> Sum<'t> {
        let mut carried = body.pending.clone();
        carried.extend(body.jump.iter().cloned());
        if !carried.is_empty() && !body.exposed.is_empty() && !self.later_barrier(loop_node) {
            let exposed = body.exposed.clone();
            self.ctx.pairs(
                &self.f,
                &carried,
                &exposed,
                Across::Iteration {
                    loop_node,
                    body_end,
                },
            );
        }
        body.pending.append(&mut body.jump);
        cap(&mut body.pending, true);
        if !body.barrier {
            body.through = true;
        }
        body
    }

    /// The summary of a statement.
    pub fn stmt(&mut self, s: Node<'t>) -> Sum<'t> {
        if self.depth > MAX_DEPTH || s.is_error() {
            return Sum::empty();
        }
        self.depth += 1;
        let out = self.stmt_inner(s);
        self.depth -= 1;
        out
    }

    fn stmt_inner(&mut self, s: Node<'t>) -> Sum<'t> {
        if self.damaged_storage_call(s) {
            return Sum::barrier();
        }
        match s.kind_name() {
            "compound_statement" | "translation_unit" | "labeled_statement" => self.block(s),
            "declaration" => self.declaration(s),
            "if_statement" => {
                let cond = s.field("condition");
                // A condition that folds to a constant: only its branch is compiled.
                let folded = cond.and_then(|c| self.folded_condition(c));
                let mut out = cond.map(|c| self.expr(c)).unwrap_or_else(Sum::empty);
                let consequence = match s.field("consequence") {
                    Some(c) if folded != Some(0) => self.guarded(s, 0, cond, false, c),
                    _ => Sum::empty(),
                };
                let alternative = match s.field("alternative") {
                    Some(a) if folded.is_none_or(|v| v == 0) => {
                        let a = named_children(a)
                            .find(|c| c.kind_name() != "comment")
                            .unwrap_or(a);
                        Some(self.guarded(s, 1, cond, true, a))
                    }
                    _ => None,
                };
                let branches = match (folded, alternative) {
                    (Some(0), a) => a.unwrap_or_else(Sum::empty),
                    (Some(_), _) => consequence,
                    // `if constexpr (…) { …; __syncthreads(); }` with no `else` (the last link
                    // of a chain over a template parameter's cases): every thread reaches the
                    // barrier in a build that compiles the branch, and a build that does not
                    // has none of it; the path around it is not taken as one that skips it.
                    (None, None)
                        if !consequence.through
                            && consequence.barrier
                            && cond.is_some_and(|c| self.compile_time(s, c)) =>
                    {
                        consequence
                    }
                    (None, a) => Self::merge(consequence, a.unwrap_or_else(Sum::empty)),
                };
                out = self.seq(out, branches);
                out
            }
            "for_statement" => {
                let init = s
                    .field("initializer")
                    .map(|i| self.stmt_or_expr(i))
                    .unwrap_or_else(Sum::empty);
                let cond = s.field("condition");
                let mut body = cond.map(|c| self.expr(c)).unwrap_or_else(Sum::empty);
                if let Some(b) = s.field("body") {
                    let inner = self.guarded(s, 2, cond, false, b);
                    body = self.seq(body, inner);
                }
                if let Some(u) = s.field("update") {
                    let u = self.expr(u);
                    body = self.seq(body, u);
                }
                let end = closing(s.field("body").unwrap_or(s));
                let l = self.looped(s, end, body);
                self.seq(init, l)
            }
            "while_statement" | "do_statement" | "for_range_loop" => {
                let cond = s.field("condition");
                let mut body = match (s.kind_name(), cond) {
                    ("while_statement", Some(c)) => self.expr(c),
                    _ => Sum::empty(),
                };
                if let Some(b) = s.field("body") {
                    let inner = self.guarded(s, 2, cond, false, b);
                    body = self.seq(body, inner);
                }
                if let ("do_statement", Some(c)) = (s.kind_name(), cond) {
                    let c = self.expr(c);
                    body = self.seq(body, c);
                }
                let end = closing(s.field("body").unwrap_or(s));
                self.looped(s, end, body)
            }
            "return_statement" => {
                let mut out = named_children(s).fold(Sum::empty(), |acc, c| {
                    let e = self.expr(c);
                    self.seq(acc, e)
                });
                out.exit.append(&mut out.pending);
                out.through = false;
                out
            }
            "break_statement" | "continue_statement" => Sum {
                through: false,
                ..Default::default()
            },
            "switch_statement" => {
                let cond = s
                    .field("condition")
                    .map(|c| self.expr(c))
                    .unwrap_or_else(Sum::empty);
                let body = s
                    .field("body")
                    .map(|b| self.block(b))
                    .unwrap_or_else(Sum::empty);
                let body = Self::merge(body, Sum::empty());
                self.seq(cond, body)
            }
            "case_statement" => self.block(s),
            "preproc_if" | "preproc_ifdef" | "preproc_elif" | "preproc_else" => {
                let alt = s.field("alternative");
                let mut out = Sum::empty();
                for c in named_children(s) {
                    if Some(c.id()) == alt.map(|a| a.id())
                        || matches!(c.kind_name(), "preproc_arg" | "identifier")
                            && s.field("condition").is_some_and(|x| x.id() == c.id())
                        || s.field("name").is_some_and(|x| x.id() == c.id())
                    {
                        continue;
                    }
                    let n = self.stmt(c);
                    out = self.seq(out, n);
                }
                match alt {
                    Some(a) => {
                        let a = self.stmt(a);
                        Self::merge(out, a)
                    }
                    None => out,
                }
            }
            "expression_statement" => self.block(s),
            "function_definition"
            | "lambda_expression"
            | "class_specifier"
            | "struct_specifier" => Sum::empty(),
            "gnu_asm_expression" | "asm_statement" => self.asm(s),
            _ => {
                if s.kind_name().ends_with("expression") {
                    self.expr(s)
                } else {
                    self.block(s)
                }
            }
        }
    }

    /// A statement that did not parse (`typename T::BlockScan(storage).Scan(…);` reads as a
    /// broken declaration) naming library temporary storage carved out of a shared buffer:
    /// taken as the library call it is, which synchronises the block.
    fn damaged_storage_call(&self, s: Node<'t>) -> bool {
        matches!(s.kind_name(), "declaration" | "expression_statement")
            && s.has_error()
            && gpulint_syntax::descendants(s).take(256).any(|n| {
                n.kind_name() == "identifier"
                    && self.bufs.get(self.f.m.text(n)).is_some_and(|b| b.aggregate)
            })
    }

    fn stmt_or_expr(&mut self, n: Node<'t>) -> Sum<'t> {
        if n.kind_name() == "declaration" {
            self.declaration(n)
        } else {
            self.expr(n)
        }
    }

    fn asm(&mut self, s: Node<'t>) -> Sum<'t> {
        let t = self.f.m.text(s);
        if t.contains("bar.sync") || t.contains("barrier.sync") || t.contains("bar.arrive") {
            Sum::barrier()
        } else {
            Sum::empty()
        }
    }

    /// The statements of a block in order; an early exit (`if (c) return;`) keeps its negated
    /// condition open for the rest.
    fn block(&mut self, s: Node<'t>) -> Sum<'t> {
        let mut out = Sum::empty();
        let opened = self.guards.len();
        for c in named_children(s) {
            if c.kind_name() == "comment" {
                continue;
            }
            let n = self.stmt(c);
            let jump = matches!(
                c.kind_name(),
                "return_statement" | "break_statement" | "continue_statement"
            );
            let before = if jump {
                out.pending.clone()
            } else {
                Vec::new()
            };
            out = self.seq(out, n);
            if c.kind_name() == "return_statement" {
                out.exit.extend(before);
            } else {
                out.jump.extend(before);
            }
            if c.kind_name() == "if_statement" {
                if let Some(&g) = self.guard_ids.get(&(c.id(), 3)) {
                    let g_node = self.f.m.guards[g as usize].cond;
                    let neg = self.f.m.guards[g as usize].negated;
                    self.guards.push((Some(g), g_node, neg));
                }
            }
        }
        self.guards.truncate(opened);
        out
    }

    /// `body` under the guard of `owner` (`slot`: 0 consequence, 1 else, 2 loop body).
    fn guarded(
        &mut self,
        owner: Node<'t>,
        slot: u8,
        cond: Option<Node<'t>>,
        negated: bool,
        body: Node<'t>,
    ) -> Sum<'t> {
        let opened = self.guards.len();
        if let Some(c) = cond {
            let id = self.guard_ids.get(&(owner.id(), slot)).copied();
            self.guards.push((id, c, negated));
        }
        let out = self.stmt(body);
        self.guards.truncate(opened);
        out
    }

    /// The innermost model guard open here.
    fn guard_top(&self) -> Option<u32> {
        self.guards.iter().rev().find_map(|g| g.0)
    }

    /// The threads that run the current statement.
    pub fn threads(&self) -> Threads {
        let mut t = Threads::default();
        let mut restricted = self.restricted.borrow_mut();
        for &(_, cond, negated) in &self.guards {
            let r = restricted.entry((cond.id(), negated)).or_insert_with(|| {
                let mut r = Threads::default();
                self.f.restrict(cond, negated, &mut r);
                r
            });
            t.add(r);
        }
        t
    }

    /// A one-access summary for `node` (a read or write of `buf` at `index`).
    pub fn access(
        &mut self,
        node: Node<'t>,
        root: &Buf,
        write: bool,
        mut index: Vec<Index>,
    ) -> Sum<'t> {
        // Global memory: only one thread's writes and the block's reads of one element are
        // kept (see `handoff`), which leaves the shared-memory sets as they were.
        if root.global && (index.is_empty() || index.iter().any(|i| i.own || i.poly.is_none())) {
            return Sum::empty();
        }
        let mut threads = self.threads();
        threads.warp |= root.warp_private;
        if root.global && write == threads.single.is_none() {
            return Sum::empty();
        }
        if let [ix] = index.as_mut_slice() {
            self.f.relate(ix, &threads);
        }
        let acc = Acc {
            global: root.global,
            buf: root.root.clone(),
            write,
            node,
            site: node,
            index,
            threads,
            synced: false,
            after_wsync: false,
            skipped: false,
            via: None,
        };
        Sum {
            exposed: vec![acc.clone()],
            pending: vec![acc],
            ..Sum::empty()
        }
    }

    /// The index facts of `idx` into `buf`.
    pub fn index_of(&self, idx: Node<'t>, buf: &Buf) -> Index {
        let g = self.guard_top();
        self.f.index(idx, g, buf.offset.as_ref())
    }

    /// A call's callee name without namespace or template arguments.
    pub fn callee(&self, call: Node<'t>) -> &'t str {
        let f = call.field("function");
        let f = match f {
            Some(f) if f.kind_name() == "template_function" => f.field("name").unwrap_or(f),
            Some(f) => f,
            None => return "",
        };
        last_name(self.f.m.text(f))
    }
}
