//! Ranges of integer expressions at a point of a kernel: structural evaluation over the
//! thread coordinates, parameters and constants, through the definitions of locals, narrowed by
//! the facts of the conditions that hold there.

use super::facts::{Fact, Rel, Side};
use super::poly::Poly;
use super::range::{binary, negate, tighten, union};
pub use super::range::{Bound, Range};
use crate::cuda::arrays::BlockRange;
use crate::cuda::guards::compact;
use crate::cuda::kernel::{peel, Kernel};
use crate::cuda::{parse_c_int, CudaModel, Function};
use crate::hash::HashMap;
use gpulint_syntax::text;
use gpulint_syntax::NodeExt;
use std::cell::{Cell, RefCell};
use tree_sitter::Node;

/// Where an expression is evaluated: the innermost guard, the byte offset, and conditions
/// known to hold besides the guards.
#[derive(Debug, Clone)]
pub struct Point<'t> {
    pub guard: Option<u32>,
    pub pos: usize,
    facts: Vec<Fact<'t>>,
}

/// Guards further out than this are not read (each question about a range reads the facts of
/// all of them: at 256, 4,000 accesses each under one more `if` took 28 s).
const MAX_CHAIN: usize = 64;
/// Evaluation steps per question.
const BUDGET: u32 = 4000;
const MAX_DEPTH: usize = 40;

/// Evaluates ranges in one kernel; cheap to create, memoizes the ranges of locals.
pub struct RangeCx<'a, 't> {
    pub m: &'a CudaModel<'t>,
    pub k: &'a Kernel<'t>,
    pub func: &'a Function<'t>,
    block: Option<BlockRange>,
    /// The ranges of the kernel's scalar parameters and those its launches give.
    params: std::sync::Arc<super::extent::ParamRanges<'t>>,
    memo: RefCell<HashMap<usize, Range>>,
    busy: RefCell<Vec<usize>>,
    refining: RefCell<Vec<String>>,
    /// Inside the other side of a fact: evaluated without facts (one level only, which keeps
    /// the cost linear in the number of facts).
    plain: Cell<u32>,
    budget: Cell<u32>,
}

impl<'t> Point<'t> {
    pub(super) fn facts(&self) -> &[Fact<'t>] {
        &self.facts
    }
}

impl<'a, 't> RangeCx<'a, 't> {
    pub fn new(m: &'a CudaModel<'t>, k: &'a Kernel<'t>) -> Self {
        let func = &m.functions[k.function];
        let params = m.param_launch_ranges(k);
        RangeCx {
            m,
            k,
            func,
            block: m.block_range(func),
            params,
            memo: RefCell::new(HashMap::default()),
            busy: RefCell::new(Vec::new()),
            refining: RefCell::new(Vec::new()),
            plain: Cell::new(0),
            budget: Cell::new(BUDGET),
        }
    }

    /// The point after guard `guard` at byte `pos`.
    pub fn point(&self, guard: Option<u32>, pos: usize) -> Point<'t> {
        let mut facts = Vec::new();
        let mut next = guard;
        for _ in 0..MAX_CHAIN {
            let Some(g) = next else {
                break;
            };
            self.m.guard_facts(g, &mut facts);
            next = self.m.guards.get(g as usize).and_then(|x| x.prev);
        }
        Point { guard, pos, facts }
    }

    /// The same point where `cond` is also `positive`.
    fn with(&self, at: &Point<'t>, cond: Node<'t>, positive: bool) -> Point<'t> {
        let mut p = at.clone();
        let start = p.facts.len();
        self.m.cond_facts(cond, positive, 0, &mut p.facts);
        for f in &mut p.facts[start..] {
            f.after = cond.end_byte();
        }
        p
    }

    /// The range of `e` at `at`.
    pub fn range(&self, e: Node<'t>, at: &Point<'t>) -> Range {
        self.budget.set(BUDGET);
        self.eval(e, at, 0)
    }

    /// The numeric range of an atom: a parameter (from the launches in this file, else its
    /// type), a block or grid dimension (from the launches, `__launch_bounds__`, or the
    /// hardware limits).
    pub fn atom_range(&self, atom: &str) -> (i128, i128) {
        if let Some(r) = self.params.ranges.get(atom) {
            return *r;
        }
        let axis = |a: &str| match a {
            "x" => 0,
            "y" => 1,
            _ => 2,
        };
        if let Some(a) = atom.strip_prefix("blockDim.") {
            let i = axis(a);
            return match self.block {
                Some(b) => (b.lo[i].max(1), b.hi[i]),
                None => (1, if i == 2 { 64 } else { 1024 }),
            };
        }
        if let Some(a) = atom.strip_prefix("gridDim.") {
            return (1, if axis(a) == 0 { (1 << 31) - 1 } else { 65535 });
        }
        (i64::MIN as i128, i64::MAX as i128)
    }

    /// Is the value of an atom known at the launches (not just bounded by its type or the
    /// hardware)?
    pub fn atom_known(&self, atom: &str) -> bool {
        if atom.starts_with("blockDim.") {
            return self.block.is_some_and(|b| b.from_launch);
        }
        self.params.known.contains(&atom)
    }

    fn spend(&self) -> bool {
        let b = self.budget.get();
        if b == 0 {
            return false;
        }
        self.budget.set(b - 1);
        true
    }

    fn eval(&self, e: Node<'t>, at: &Point<'t>, depth: usize) -> Range {
        if depth > MAX_DEPTH || !self.spend() {
            return Range::default();
        }
        let e = peel(e);
        let base = self.structural(e, at, depth + 1);
        if matches!(e.kind_name(), "number_literal" | "true" | "false")
            || at.facts.is_empty()
            || self.plain.get() > 0
        {
            return base;
        }
        let t = compact(self.m.text(e));
        if t.len() > 200 || !at.facts.iter().any(|f| f.term == t) {
            return base;
        }
        self.refine(base, &t, e, at, depth + 1)
    }

    /// Narrows `r`, the range of the expression `t` (compact text), by the facts at `at`.
    fn refine(&self, mut r: Range, t: &str, e: Node<'t>, at: &Point<'t>, depth: usize) -> Range {
        if self.refining.borrow().iter().any(|x| x == t) {
            return r;
        }
        self.refining.borrow_mut().push(t.to_string());
        for f in at.facts.iter().filter(|f| f.term == t) {
            if f.after > at.pos || self.changed_since(e, f, at.pos) {
                continue;
            }
            self.plain.set(self.plain.get() + 1);
            let other = match f.other {
                Side::Node(n) => self.eval(n, at, depth),
                Side::Text(span) => self.eval_text(span, at),
            };
            self.plain.set(self.plain.get() - 1);
            match f.rel {
                Rel::Upper => {
                    if let Some(h) = other.hi.as_ref().and_then(|h| h.poly.add_const(f.offset)) {
                        tighten(
                            &mut r.hi,
                            &mut r.loose,
                            Bound {
                                poly: h,
                                guard: f.guard.or(other.hi.as_ref().and_then(|h| h.guard)),
                            },
                            true,
                        );
                    }
                }
                Rel::Lower => {
                    if let Some(l) = other.lo.as_ref().and_then(|l| l.poly.add_const(f.offset)) {
                        tighten(
                            &mut r.lo,
                            &mut r.loose,
                            Bound {
                                poly: l,
                                guard: f.guard,
                            },
                            false,
                        );
                    }
                }
                Rel::NotEqual => {
                    let Some(c) = other.as_const() else {
                        continue;
                    };
                    if r.lo_const() == Some(c) {
                        r.lo = Some(Bound {
                            poly: Poly::constant(c + 1),
                            guard: f.guard,
                        });
                    }
                    if r.hi_const() == Some(c) {
                        r.hi = Some(Bound {
                            poly: Poly::constant(c - 1),
                            guard: f.guard,
                        });
                    }
                }
            }
        }
        self.refining.borrow_mut().pop();
        r
    }

    /// Is a local read by `e` assigned or updated between where fact `f` starts to hold and
    /// `pos` (a loop's own update clause excepted)?
    fn changed_since(&self, e: Node<'t>, f: &Fact<'t>, pos: usize) -> bool {
        let names: Vec<&str> = if e.kind_name() == "identifier" {
            vec![self.m.text(e)]
        } else {
            crate::cuda::kernel::identifiers(e, self.m.source)
        };
        let skipped = |n: Node<'_>| {
            f.skip
                .is_some_and(|s| s.start <= n.start_byte() && n.end_byte() <= s.end)
        };
        names.iter().any(|name| {
            let Some(v) = self.k.local(name) else {
                return false;
            };
            let assigned = self.k.defs[v]
                .iter()
                .zip(&self.k.def_ops[v])
                .filter(|(_, op)| **op != "init")
                .map(|(d, _)| *d);
            assigned
                .chain(self.k.updates[v].iter().copied())
                .any(|n| f.after <= n.start_byte() && n.start_byte() < pos && !skipped(n))
        })
    }

    /// The range of a macro argument's text: a constant or a name.
    fn eval_text(&self, span: gpulint_source::Span, at: &Point<'t>) -> Range {
        let t = self.m.source.get(span.start..span.end).unwrap_or("").trim();
        let _ = at;
        if let Some(v) = self.k.local(t) {
            return self.local_range(v);
        }
        if let Some(p) = self.k.param(t) {
            return if p.pointer {
                Range::default()
            } else {
                Range::exact(Poly::atom(t))
            };
        }
        match parse_c_int(t).or_else(|| self.m.constant_in(self.func, t)) {
            Some(v) => Range::constant(v),
            None => Range::default(),
        }
    }

    fn structural(&self, e: Node<'t>, at: &Point<'t>, depth: usize) -> Range {
        let m = self.m;
        let field = |f: &str| e.field(f);
        let sub = |n: Option<Node<'t>>| match n {
            Some(n) => self.eval(n, at, depth),
            None => Range::default(),
        };
        match e.kind_name() {
            "number_literal" => parse_c_int(m.text(e))
                .map(Range::constant)
                .unwrap_or_default(),
            "true" => Range::constant(1),
            "false" => Range::constant(0),
            "sizeof_expression" => m.eval(e).map(Range::constant).unwrap_or_default(),
            "identifier" => self.identifier(e),
            "field_expression" => self.member(e),
            "parenthesized_expression" => sub(e.named_child(0)),
            "comma_expression" => sub(field("right")),
            "unary_expression" => match field("operator").map(|o| o.kind_name()) {
                Some("-") => negate(sub(field("argument"))),
                Some("+") => sub(field("argument")),
                _ => Range::default(),
            },
            "conditional_expression" => {
                let (Some(c), Some(a), Some(b)) = (
                    field("condition"),
                    field("consequence"),
                    field("alternative"),
                ) else {
                    return Range::default();
                };
                let ra = self.eval(a, &self.with(at, c, true), depth);
                let rb = self.eval(b, &self.with(at, c, false), depth);
                union(ra, rb)
            }
            "binary_expression" => {
                let op = field("operator").map(|o| o.kind_name()).unwrap_or("");
                if !matches!(op, "+" | "-" | "*" | "/" | "%" | "&" | ">>" | "<<") {
                    return Range::default();
                }
                let l = sub(field("left"));
                let r = sub(field("right"));
                binary(op, l, r)
            }
            "call_expression" => self.call(e, at, depth),
            _ => Range::default(),
        }
    }

    fn identifier(&self, e: Node<'t>) -> Range {
        let name = self.m.text(e);
        if let Some(v) = self.k.local(name) {
            return self.local_range(v);
        }
        if let Some(p) = self.k.param(name) {
            return if p.pointer {
                Range::default()
            } else {
                Range::exact(Poly::atom(name))
            };
        }
        if name == "warpSize" {
            return Range::constant(32);
        }
        match self.m.constant_in(self.func, name) {
            Some(v) => Range::constant(v),
            None => Range::default(),
        }
    }

    /// `threadIdx.x`, `blockIdx.y`, `blockDim.x`, `gridDim.z`, and members of parameters
    /// (`p.n`): atoms.
    fn member(&self, e: Node<'t>) -> Range {
        let (Some(arg), Some(f)) = (e.field("argument"), e.field("field")) else {
            return Range::default();
        };
        let (a, f) = (self.m.text(arg), self.m.text(f));
        let axis = match f {
            "x" => 0,
            "y" => 1,
            "z" => 2,
            _ => 3,
        };
        let dim = |prefix: &str| -> Poly {
            match self.block {
                Some(b) if prefix == "blockDim" && b.lo[axis] == b.hi[axis] => {
                    Poly::constant(b.hi[axis])
                }
                _ => Poly::atom(&format!("{prefix}.{f}")),
            }
        };
        match a {
            "threadIdx" if axis < 3 => {
                Range::between(Some(Poly::constant(0)), dim("blockDim").add_const(-1))
            }
            "blockIdx" if axis < 3 => {
                Range::between(Some(Poly::constant(0)), dim("gridDim").add_const(-1))
            }
            "blockDim" | "gridDim" if axis < 3 => Range::exact(dim(a)),
            _ => {
                // A member of a parameter passed by value, read-only in the kernel.
                let mut root = arg;
                while root.kind_name() == "field_expression" {
                    match root.field("argument") {
                        Some(r) => root = r,
                        None => return Range::default(),
                    }
                }
                if root.kind_name() == "identifier" && self.k.param(self.m.text(root)).is_some() {
                    Range::exact(Poly::atom(&compact(self.m.text(e))))
                } else {
                    Range::default()
                }
            }
        }
    }

    fn call(&self, e: Node<'t>, at: &Point<'t>, depth: usize) -> Range {
        let Some(f) = e.field("function") else {
            return Range::default();
        };
        let name = crate::cuda::last_name(text(f.field("name").unwrap_or(f), self.m.source));
        let args: Vec<Node<'t>> = crate::cuda::call_arguments(e);
        let arg = |i: usize| match args.get(i) {
            Some(a) => self.eval(*a, at, depth),
            None => Range::default(),
        };
        match name {
            "static_cast" | "int" | "int64_t" | "size_t" | "long" | "unsigned" | "uint32_t"
            | "uint64_t" | "int32_t" | "index_t"
                if args.len() == 1 =>
            {
                arg(0)
            }
            "min" | "umin" | "llmin" | "ullmin" | "__min" | "std::min" if args.len() == 2 => {
                let (a, b) = (arg(0), arg(1));
                let mut loose = a.loose || b.loose;
                let mut hi = a.hi.clone();
                if let Some(h) = b.hi.clone() {
                    tighten(&mut hi, &mut loose, h, true);
                }
                // `min(n - s, 64)`: a constant cap bounds the value whatever the size.
                let cap = [&a.hi, &b.hi]
                    .into_iter()
                    .flatten()
                    .filter_map(|h| h.poly.as_const())
                    .min();
                if let (Some(c), Some(h)) = (cap, hi.as_ref()) {
                    if h.poly.as_const().is_none() {
                        loose = true;
                        hi = Some(Bound {
                            poly: Poly::constant(c),
                            guard: h.guard,
                        });
                    }
                }
                let lo = union(a, b).lo;
                Range { lo, hi, loose }
            }
            "max" | "umax" | "llmax" | "ullmax" | "__max" if args.len() == 2 => {
                let (a, b) = (arg(0), arg(1));
                let mut loose = a.loose || b.loose;
                let mut lo = a.lo.clone();
                if let Some(l) = b.lo.clone() {
                    tighten(&mut lo, &mut loose, l, false);
                }
                let hi = union(a, b).hi;
                Range { lo, hi, loose }
            }
            "__mul24" | "__umul24" if args.len() == 2 => binary("*", arg(0), arg(1)),
            _ => Range::default(),
        }
    }

    /// The range of local `v` from its definitions and updates, before any guard.
    pub fn local_range(&self, v: usize) -> Range {
        if let Some(r) = self.memo.borrow().get(&v) {
            return r.clone();
        }
        if self.busy.borrow().contains(&v) {
            return Range::default();
        }
        self.busy.borrow_mut().push(v);
        // A definition is evaluated with the facts at its own point.
        let plain = self.plain.replace(0);
        let mut out: Option<Range> = None;
        let (mut grows, mut shrinks) = (!self.k.updates[v].is_empty(), false);
        for ((d, op), g) in self.k.defs[v]
            .iter()
            .zip(&self.k.def_ops[v])
            .zip(&self.k.def_guards[v])
        {
            match *op {
                "init" | "=" => {
                    let at = self.point(*g, d.start_byte());
                    let r = self.eval(*d, &at, 1);
                    out = Some(match out {
                        None => r,
                        Some(prev) => union(prev, r),
                    });
                }
                "+=" | "-=" => {
                    let step = self.eval(*d, &self.point(*g, d.start_byte()), 1);
                    let nonneg = step.lo_const().is_some_and(|c| c >= 0);
                    match (*op, nonneg) {
                        ("+=", true) => grows = true,
                        ("-=", true) => shrinks = true,
                        _ => {
                            grows = true;
                            shrinks = true;
                        }
                    }
                }
                _ => {
                    grows = true;
                    shrinks = true;
                }
            }
        }
        for u in &self.k.updates[v] {
            if self.m.text(*u).contains("--") {
                shrinks = true;
            }
        }
        let mut r = out.unwrap_or_default();
        if self.k.updates[v]
            .iter()
            .all(|u| self.m.text(*u).contains("--"))
            && !self.k.defs[v]
                .iter()
                .zip(&self.k.def_ops[v])
                .any(|(_, op)| *op == "+=")
        {
            grows = false;
        }
        if grows {
            r.hi = None;
        }
        if shrinks {
            r.lo = None;
        }
        self.busy.borrow_mut().retain(|x| *x != v);
        self.plain.set(plain);
        self.memo.borrow_mut().insert(v, r.clone());
        r
    }
}
