//! Expressions in evaluation order: the reads and writes of shared buffers they make, the
//! barriers and warp-level synchronisations they call, and calls of summarised helpers.

use super::walk::{Buf, Sum, Walker};
use crate::cuda::kernel::{peel, peel_pointer};
use gpulint_syntax::{named_children, NodeExt};
use tree_sitter::Node;

/// Block-wide barriers by callee name.
const BARRIERS: &[&str] = &[
    "__syncthreads",
    "__syncthreads_count",
    "__syncthreads_and",
    "__syncthreads_or",
    "__barrier_sync",
    "sync",
    "barrier_sync",
];

/// What an lvalue writes: the buffer, the index facts per dimension, the access node.
type Target<'t> = (Buf, Vec<super::index::Index>, Node<'t>);

impl<'a, 'c, 't> Walker<'a, 'c, 't> {
    /// The summary of an expression.
    pub fn expr(&mut self, e: Node<'t>) -> Sum<'t> {
        if self.depth > 2 * 96 || e.is_error() {
            return Sum::empty();
        }
        self.depth += 1;
        let out = self.expr_inner(e);
        self.depth -= 1;
        out
    }

    fn children(&mut self, e: Node<'t>) -> Sum<'t> {
        let mut out = Sum::empty();
        for c in named_children(e) {
            if c.kind_name() == "comment" {
                continue;
            }
            let s = self.expr(c);
            out = self.seq(out, s);
        }
        out
    }

    fn expr_inner(&mut self, e: Node<'t>) -> Sum<'t> {
        match e.kind_name() {
            "call_expression" => self.call(e),
            "assignment_expression" => {
                let (Some(l), Some(r)) = (e.field("left"), e.field("right")) else {
                    return self.children(e);
                };
                let compound = e.field("operator").is_some_and(|o| o.kind_name() != "=");
                let rs = self.expr(r);
                let (ls, target) = self.lvalue(l);
                let mut out = self.seq(rs, ls);
                if let Some((buf, index, node)) = target {
                    if compound {
                        let read = self.access(node, &buf, false, index.clone());
                        out = self.seq(out, read);
                    }
                    let write = self.access(node, &buf, true, index);
                    out = self.seq(out, write);
                }
                out
            }
            "update_expression" => {
                let Some(arg) = e.field("argument") else {
                    return Sum::empty();
                };
                let (mut out, target) = self.lvalue(arg);
                if let Some((buf, index, node)) = target {
                    let read = self.access(node, &buf, false, index.clone());
                    out = self.seq(out, read);
                    let write = self.access(node, &buf, true, index);
                    out = self.seq(out, write);
                }
                out
            }
            "subscript_expression" | "identifier" | "field_expression" => {
                let (mut out, target) = self.lvalue(e);
                if let Some((buf, index, node)) = target {
                    let read = self.access(node, &buf, false, index);
                    out = self.seq(out, read);
                }
                out
            }
            "pointer_expression" => {
                let Some(arg) = e.field("argument") else {
                    return Sum::empty();
                };
                if e.child(0).is_some_and(|o| o.kind_name() == "&") {
                    // An address, not an access: only the index expressions are read.
                    let (out, _) = self.lvalue(arg);
                    return out;
                }
                let (mut out, target) = self.lvalue(e);
                if let Some((buf, index, node)) = target {
                    let read = self.access(node, &buf, false, index);
                    out = self.seq(out, read);
                }
                let _ = arg;
                out
            }
            "conditional_expression" => {
                let c = e
                    .field("condition")
                    .map(|c| self.expr(c))
                    .unwrap_or_else(Sum::empty);
                let a = e
                    .field("consequence")
                    .map(|x| self.expr(x))
                    .unwrap_or_else(Sum::empty);
                let b = e
                    .field("alternative")
                    .map(|x| self.expr(x))
                    .unwrap_or_else(Sum::empty);
                let branches = Self::merge(a, b);
                self.seq(c, branches)
            }
            "binary_expression"
                if e.field("operator")
                    .is_some_and(|o| matches!(o.kind_name(), "&&" | "||")) =>
            {
                let l = e
                    .field("left")
                    .map(|x| self.expr(x))
                    .unwrap_or_else(Sum::empty);
                let r = e
                    .field("right")
                    .map(|x| self.expr(x))
                    .unwrap_or_else(Sum::empty);
                let r = Self::merge(r, Sum::empty());
                self.seq(l, r)
            }
            "lambda_expression"
            | "sizeof_expression"
            | "alignof_expression"
            | "string_literal"
            | "number_literal"
            | "template_argument_list"
            | "type_descriptor" => Sum::empty(),
            _ => self.children(e),
        }
    }

    /// The index reads of an lvalue, and the shared buffer element it names (if it does).
    fn lvalue(&mut self, e: Node<'t>) -> (Sum<'t>, Option<Target<'t>>) {
        let e = peel(e);
        match e.kind_name() {
            "subscript_expression" => {
                let mut indices = Vec::new();
                let mut cur = e;
                while cur.kind_name() == "subscript_expression" && indices.len() < 8 {
                    if let Some(i) = cur.field("indices").and_then(|i| i.named_child(0)) {
                        indices.push(i);
                    }
                    match cur.field("argument") {
                        Some(a) => cur = peel(a),
                        None => break,
                    }
                }
                indices.reverse();
                let mut out = Sum::empty();
                for i in &indices {
                    let s = self.expr(*i);
                    out = self.seq(out, s);
                }
                let Some(buf) = self.buffer_of(cur, true) else {
                    let b = self.expr(cur);
                    return (self.seq(out, b), None);
                };
                if buf.volatile {
                    return (out, None);
                }
                if buf.global {
                    // Global memory: only the index's form and whether it differs between
                    // threads matter (see `Walker::access`), not its range.
                    let index = indices
                        .iter()
                        .map(|i| super::index::Index {
                            poly: self.f.form(*i),
                            own: self.f.per_thread(*i),
                            ..Default::default()
                        })
                        .collect();
                    return (out, Some((buf, index, e)));
                }
                let one = indices.len() == 1;
                let index = indices
                    .iter()
                    .map(|i| {
                        let b = if one {
                            buf.clone()
                        } else {
                            Buf {
                                offset: None,
                                ..buf.clone()
                            }
                        };
                        self.index_of(*i, &b)
                    })
                    .collect();
                (out, Some((buf, index, e)))
            }
            "identifier" | "field_expression" => match self.buffer_of(e, false) {
                Some(buf) if !buf.volatile => (Sum::empty(), Some((buf, Vec::new(), e))),
                Some(_) => (Sum::empty(), None),
                None if e.kind_name() == "field_expression" => {
                    let s = e
                        .field("argument")
                        .map(|a| self.expr(a))
                        .unwrap_or_else(Sum::empty);
                    (s, None)
                }
                None => (Sum::empty(), None),
            },
            "pointer_expression" if e.child(0).is_some_and(|o| o.kind_name() == "*") => {
                let Some(arg) = e.field("argument") else {
                    return (Sum::empty(), None);
                };
                let arg = peel(arg);
                if arg.kind_name() == "identifier" {
                    if let Some(buf) = self.bufs.get(self.f.m.text(arg)).cloned() {
                        if !buf.scalar && !buf.volatile {
                            let index = vec![super::index::Index {
                                poly: Some(buf.offset.clone().unwrap_or_default()),
                                own: false,
                                range: None,
                                lane_partner: None,
                                stride_base: None,
                                correlated: false,
                            }];
                            return (Sum::empty(), Some((buf, index, e)));
                        }
                    }
                }
                (self.expr(arg), None)
            }
            _ => (self.expr(e), None),
        }
    }

    /// The buffer an array expression (`subscripted`) or a scalar use names: `s`, `p` (a
    /// pointer into `s`), `storage.member`.
    fn buffer_of(&self, e: Node<'t>, subscripted: bool) -> Option<Buf> {
        let e = peel(e);
        match e.kind_name() {
            "identifier" => {
                let b = self.bufs.get(self.f.m.text(e))?;
                (b.scalar != subscripted).then(|| b.clone())
            }
            "field_expression" => {
                let mut root = e;
                for _ in 0..8 {
                    match root.kind_name() {
                        "field_expression" => root = peel(root.field("argument")?),
                        "subscript_expression" => return None,
                        _ => break,
                    }
                }
                if root.kind_name() != "identifier" {
                    return None;
                }
                let b = self.bufs.get(self.f.m.text(root))?;
                if !b.scalar {
                    return None;
                }
                let key: String = self.f.m.text(e).split_whitespace().collect();
                Some(Buf {
                    root: key.replace("->", "."),
                    ..b.clone()
                })
            }
            _ => None,
        }
    }

    /// A call: a barrier, a warp-level synchronisation, an atomic (not a race), a helper
    /// with a summary, or a call handed a shared buffer whole (taken as one that may
    /// synchronise: library block primitives do).
    fn call(&mut self, e: Node<'t>) -> Sum<'t> {
        let name = self.callee(e);
        let ftext = e.field("function").map(|f| self.f.m.text(f)).unwrap_or("");
        let args: Vec<Node<'t>> = crate::cuda::call_arguments(e);
        let mut out = Sum::empty();
        let atomic = name.starts_with("atomic") || name.starts_with("__atomic");
        for (i, a) in args.iter().enumerate() {
            let s = if atomic && i == 0 {
                self.lvalue(*a).0
            } else {
                self.expr(*a)
            };
            out = self.seq(out, s);
        }
        if BARRIERS.contains(&name)
            || ftext.ends_with(".sync")
            || ftext.ends_with("->sync")
            || ftext.ends_with(".barrier_sync")
            || ftext.ends_with(".barrier_wait")
        {
            return self.seq(out, Sum::barrier());
        }
        if name == "__syncwarp"
            || name.starts_with("__shfl") && name.ends_with("_sync")
            || matches!(
                name,
                "__ballot_sync"
                    | "__all_sync"
                    | "__any_sync"
                    | "__match_any_sync"
                    | "__match_all_sync"
            )
            || name.starts_with("__reduce_") && name.ends_with("_sync")
        {
            let w = Sum {
                warp_sync: true,
                ..Sum::empty()
            };
            return self.seq(out, w);
        }
        if atomic {
            return out;
        }
        if let Some(h) = self.helper_call(e, name) {
            return self.seq(out, h);
        }
        if self.ctx.helper_synchronises(name) {
            return self.seq(out, Sum::barrier());
        }
        let hands_buffer = args.iter().any(|a| self.hands_buffer(*a))
            || e.field("function").is_some_and(|f| {
                f.kind_name() == "field_expression"
                    && f.field("argument").is_some_and(|obj| {
                        let obj = peel(obj);
                        self.hands_buffer(obj)
                            || obj.kind_name() == "call_expression"
                                && obj.field("arguments").is_some_and(|oa| {
                                    named_children(oa).any(|x| self.hands_buffer(x))
                                })
                    })
            });
        if hands_buffer {
            return self.seq(out, Sum::barrier());
        }
        if let Some(f) = e.field("function") {
            if f.kind_name() == "field_expression" {
                if let Some(obj) = f.field("argument") {
                    let s = self.expr(obj);
                    out = self.seq(out, s);
                }
            }
        }
        out
    }

    /// Is `a` a shared buffer (or a pointer into one) passed whole?
    fn hands_buffer(&self, a: Node<'t>) -> bool {
        let a = peel_pointer(a, self.f.m.source);
        match a.kind_name() {
            "identifier" => self
                .bufs
                .get(self.f.m.text(a))
                .is_some_and(|b| !b.global && (!b.scalar || b.aggregate)),
            "field_expression" => self.buffer_of(a, false).is_some_and(|b| b.aggregate),
            "pointer_expression" | "binary_expression" => {
                gpulint_syntax::descendants(a).take(64).any(|n| {
                    n.kind_name() == "identifier"
                        && self
                            .bufs
                            .get(self.f.m.text(n))
                            .is_some_and(|b| !b.scalar && !b.global)
                })
            }
            _ => false,
        }
    }
}
