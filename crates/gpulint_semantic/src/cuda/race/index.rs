//! Which thread touches which element: the index of a shared-memory access as a polynomial
//! over the thread coordinates and the values fixed for the block, the guards that restrict
//! the threads making it (one thread, one warp), and the decision whether two accesses can
//! touch the same element from different threads.

use crate::cuda::interval::{Poly, RangeCx};
use crate::cuda::kernel::{peel, Kernel};
use crate::cuda::CudaModel;
use crate::hash::{HashMap, HashSet};
use gpulint_syntax::NodeExt;
use std::cell::RefCell;
use std::rc::Rc;
use tree_sitter::Node;

/// Substitutions of single-definition locals followed at most this deep.
const MAX_FORM_DEPTH: usize = 8;
/// Threads in a warp.
const WARP: i128 = 32;
/// Guard bounds kept per access (the outermost guards').
const MAX_BOUNDS: usize = 8;
/// Expressions nested deeper than this are one opaque value (no recursion past it).
const MAX_NESTING: usize = 64;

/// The threads that run an access: all, those of one warp, or one thread.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Threads {
    /// Under a guard that selects one thread (`tid == 0`): the guard's key, and for a single
    /// equality the thread index polynomial and its value.
    pub single: Option<(String, Option<(Poly, i128)>)>,
    /// Under a guard that keeps the threads within one warp (`tid < 32`, `warp == 0`).
    pub warp: bool,
    /// Under some guard that differs between threads.
    pub per_thread_guard: bool,
    /// `x < limit` bounds of the guards, as polynomials.
    pub bounds: Vec<(Poly, Poly)>,
}

impl Threads {
    /// Adds what one more guard says (`r`, what [`Forms::restrict`] gives from the default):
    /// as if that guard restricted `self` itself.
    pub fn add(&mut self, r: &Threads) {
        self.per_thread_guard |= r.per_thread_guard;
        self.warp |= r.warp;
        self.bounds.extend(r.bounds.iter().cloned());
        self.bounds.truncate(MAX_BOUNDS);
        if r.single.is_some() {
            self.single.clone_from(&r.single);
        }
    }
}

/// The index of an access: its polynomial (`None`: not understood), whether it differs
/// between threads, and its value range where it is one-dimensional and unaliased.
#[derive(Debug, Clone, Default)]
pub(crate) struct Index {
    pub poly: Option<Poly>,
    pub own: bool,
    pub range: Option<(Option<Poly>, Option<Poly>)>,
    /// `x ^ c` with `c` below the warp size: the index of a partner lane of the same warp,
    /// as the polynomial of `x`.
    pub lane_partner: Option<Poly>,
    /// A counter of block-stride loops (`for (j = t; …; j += blockDim.x)`): its start, the
    /// thread's index.
    pub stride_base: Option<Poly>,
    /// A guard bound relates the thread coordinate of the index to another of its values
    /// (`y < 2 * o` around `s[y - o]`): its range, taken from each value apart, overstates
    /// the elements the threads reach (see [`Forms::relate`]).
    pub correlated: bool,
}

/// Index forms and guard facts of one function.
pub(crate) struct Forms<'a, 't> {
    pub m: &'a CudaModel<'t>,
    pub k: &'a Kernel<'t>,
    pub rc: RangeCx<'a, 't>,
    prefix: String,
    atoms: Rc<AtomFacts>,
    /// The nesting of the expression [`Forms::form`] is at.
    nesting: std::cell::Cell<usize>,
}

/// What the atoms of [`Forms::form`] stand for, kept for the whole file: a helper's accesses
/// are paired in the functions that call it. Atom names carry their function's prefix.
#[derive(Debug, Default)]
pub(crate) struct AtomFacts {
    /// The atoms that stand for values differing between threads.
    thread: RefCell<HashSet<String>>,
    /// Atoms that stand for `x ^ k` (`k` the same for the whole block): `x`'s polynomial.
    xor: RefCell<HashMap<String, Poly>>,
}

impl<'a, 't> Forms<'a, 't> {
    pub fn new(m: &'a CudaModel<'t>, k: &'a Kernel<'t>, atoms: Rc<AtomFacts>) -> Self {
        Forms {
            m,
            k,
            rc: RangeCx::new(m, k),
            prefix: format!("f{}:", k.function),
            atoms,
            nesting: std::cell::Cell::new(0),
        }
    }

    /// `e` as a polynomial: builtins and constants as themselves, locals with a single
    /// definition through it, other names as atoms private to this function.
    pub fn form(&self, e: Node<'t>) -> Option<Poly> {
        self.form_depth(e, 0)
    }

    fn form_depth(&self, e: Node<'t>, depth: usize) -> Option<Poly> {
        let n = self.nesting.get();
        if n > MAX_NESTING {
            return Some(self.opaque(e, &compact(self.m.text(e))));
        }
        self.nesting.set(n + 1);
        let out = self.form_nested(e, depth);
        self.nesting.set(n);
        out
    }

    fn form_nested(&self, e: Node<'t>, depth: usize) -> Option<Poly> {
        let e = peel(e);
        if let Some(c) = self.m.eval(e) {
            return Some(Poly::constant(c));
        }
        match e.kind_name() {
            "identifier" => {
                let name = self.m.text(e);
                if let Some(def) = self.k.local(name).and_then(|v| self.reaching_def(v, e)) {
                    if depth < MAX_FORM_DEPTH {
                        if let Some(p) = self.form_depth(def, depth + 1) {
                            return Some(p);
                        }
                    }
                }
                Some(self.opaque(e, name))
            }
            "field_expression" => {
                let t: String = self.m.text(e).split_whitespace().collect();
                let builtin = ["threadIdx.", "blockIdx.", "blockDim.", "gridDim."]
                    .iter()
                    .any(|b| t.starts_with(b));
                Some(if builtin {
                    Poly::atom(&t)
                } else {
                    self.opaque(e, &t)
                })
            }
            "binary_expression" => {
                let (l, r) = (e.field("left")?, e.field("right")?);
                let op = e.field("operator").map(|o| self.m.text(o)).unwrap_or("");
                let (a, b) = (self.form_depth(l, depth), self.form_depth(r, depth));
                let opaque = || Some(self.opaque(e, &compact(self.m.text(e))));
                match (op, a, b) {
                    ("+", Some(a), Some(b)) => a.add(&b).or_else(opaque),
                    ("-", Some(a), Some(b)) => a.sub(&b).or_else(opaque),
                    ("*", Some(a), Some(b)) => a.mul(&b).or_else(opaque),
                    ("^", Some(a), Some(_)) if self.per_thread(l) && !self.per_thread(r) => {
                        let x = opaque()?;
                        if let Some(name) = x.atoms().next() {
                            self.atoms.xor.borrow_mut().insert(name.to_string(), a);
                        }
                        Some(x)
                    }
                    _ => opaque(),
                }
            }
            _ => Some(self.opaque(e, &compact(self.m.text(e)))),
        }
    }

    /// The one definition of local `v` that a use at `at` sees: its only one, or, for a name
    /// declared (never assigned) in several blocks (`int i0 = …` in two loops), the latest
    /// declaration before `at` in a block that holds `at`.
    pub(super) fn reaching_def(&self, v: usize, at: Node<'t>) -> Option<Node<'t>> {
        let defs = &self.k.defs[v];
        if !self.k.updates[v].is_empty() {
            return None;
        }
        let ops = &self.k.def_ops[v];
        if defs.len() == 1 && matches!(ops.first(), Some(&"init") | Some(&"=")) {
            return Some(defs[0]);
        }
        if defs.is_empty() || defs.len() > 16 || ops.len() != defs.len() {
            return None;
        }
        if ops.iter().any(|o| *o != "init") {
            return None;
        }
        let mut best: Option<Node<'t>> = None;
        for &d in defs {
            if d.start_byte() >= at.start_byte() {
                continue;
            }
            // value -> init_declarator -> declaration -> the block it is declared in
            let scope = self
                .m
                .parent(d)
                .and_then(|x| self.m.parent(x))
                .and_then(|x| self.m.parent(x));
            let scope = scope?;
            if scope.start_byte() <= at.start_byte()
                && at.end_byte() <= scope.end_byte()
                && best.is_none_or(|b| b.start_byte() < d.start_byte())
            {
                best = Some(d);
            }
        }
        best
    }

    /// The atom private to this function that stands for `e` (spelled `text`), noted as one
    /// that differs between threads where `e` does.
    fn opaque(&self, e: Node<'t>, text: &str) -> Poly {
        let name = format!("{}{text}", self.prefix);
        if self.per_thread(e) {
            self.atoms.thread.borrow_mut().insert(name.clone());
        }
        Poly::atom(&name)
    }

    /// For an atom that stands for `x ^ k`: `x`'s polynomial.
    pub fn xor_base(&self, atom: &str) -> Option<Poly> {
        self.atoms.xor.borrow().get(atom).cloned()
    }

    /// Does the atom stand for a value that differs between the threads of a block?
    pub fn thread_atom(&self, atom: &str) -> bool {
        atom.starts_with("threadIdx.") || self.atoms.thread.borrow().contains(atom)
    }

    /// Does `e` differ between the threads of a block?
    pub fn per_thread(&self, e: Node<'t>) -> bool {
        self.k.flags(self.m, e).per_thread()
    }

    /// The index facts of a one-dimensional access `base[e]` at `guard`.
    pub fn index(&self, e: Node<'t>, guard: Option<u32>, offset: Option<&Poly>) -> Index {
        let poly = self.form(e).and_then(|p| match offset {
            Some(o) => p.add(o),
            None => Some(p),
        });
        let range = offset.is_none().then(|| {
            let at = self.rc.point(guard, e.start_byte());
            let r = self.rc.range(e, &at);
            (r.lo.map(|b| b.poly), r.hi.map(|b| b.poly))
        });
        Index {
            poly,
            own: self.per_thread(e),
            range,
            stride_base: offset.is_none().then(|| self.stride_base(e)).flatten(),
            lane_partner: self.lane_partner(e).and_then(|p| match offset {
                Some(o) => p.add(o),
                None => Some(p),
            }),
            correlated: false,
        }
    }

    /// What a guard condition (`negated`: its region runs when it is false) says about the
    /// threads that pass it.
    pub fn restrict(&self, cond: Node<'t>, negated: bool, t: &mut Threads) {
        let cond = unclause(cond);
        if !self.k.per_thread(self.m, cond) {
            return;
        }
        t.per_thread_guard = true;
        let mut eqs = Vec::new();
        let mut all_eq = true;
        for c in conjuncts(cond, negated) {
            let (l, op, r) = c;
            let (l, r) = (peel(l), peel(r));
            if let (Some(x), Some(y)) = (self.form(l), self.form(r)) {
                match op {
                    "<" => t.bounds.push((x, y)),
                    "<=" => t.bounds.extend(y.add_const(1).map(|y| (x, y))),
                    ">" => t.bounds.push((y, x)),
                    ">=" => t.bounds.extend(x.add_const(1).map(|x| (y, x))),
                    _ => {}
                }
                t.bounds.truncate(MAX_BOUNDS);
            }
            let (var, konst, op) = match (self.m.eval(l), self.m.eval(r)) {
                (None, Some(c)) => (l, c, op),
                (Some(c), None) => (r, c, crate::cuda::guards::flip_comparison(op)),
                _ => {
                    all_eq = false;
                    continue;
                }
            };
            if !self.per_thread(var) {
                all_eq = false;
                continue;
            }
            match op {
                "==" if self.is_thread_linear(var) => {
                    eqs.push((self.form(var), konst));
                    t.warp = true;
                }
                "==" => {
                    all_eq = false;
                    let v = compact(self.m.text(var));
                    let def = self.form(var).map(|p| p.to_string()).unwrap_or_default();
                    let grouped = |s: &str| {
                        s.contains("/32")
                            || s.contains(">>5")
                            || s.contains("arp")
                            || s.contains("ARP")
                    };
                    if grouped(&v) || grouped(&compact(&def)) {
                        t.warp = true;
                    }
                }
                "<" if konst <= WARP && self.is_thread_offset(var) => t.warp = true,
                "<=" if konst < WARP && self.is_thread_offset(var) => t.warp = true,
                _ => all_eq = false,
            }
        }
        if all_eq && !eqs.is_empty() {
            let key = format!(
                "{}{}",
                if negated { "!" } else { "" },
                compact(self.m.text(cond))
            );
            let detail = match eqs.as_slice() {
                [(Some(p), c)] => Some((p.clone(), *c)),
                _ => None,
            };
            t.single = Some((key, detail));
        }
    }

    /// Is `e` a linear combination of the thread coordinates, one value per thread
    /// (`tid`, `threadIdx.x + threadIdx.y * blockDim.x`)?
    fn is_thread_linear(&self, e: Node<'t>) -> bool {
        self.form(e).is_some_and(|p| {
            p.mentions("threadIdx.x") || p.atoms().any(|a| a.starts_with("threadIdx."))
        } && p.atoms().all(|a| a.starts_with("threadIdx.") || a.starts_with("blockDim.")))
    }

    /// Is `e` the thread's index within the block plus a constant (`tid`, `threadIdx.x`,
    /// `threadIdx.x + 1`)? Then `e < 32` keeps the threads within the first warp.
    pub(super) fn is_thread_offset(&self, e: Node<'t>) -> bool {
        self.form(e).is_some_and(|p| {
            let v = p.without_constant();
            v == Poly::atom("threadIdx.x")
                || (v.atoms().count() == 1 && v.atoms().all(|a| a.starts_with("threadIdx.")))
        })
    }
}

/// `a == b` for `!=` under negation, the comparisons of an `&&` chain (of an `||` chain
/// when negated), as (left, operator, right).
fn conjuncts<'t>(cond: Node<'t>, negated: bool) -> Vec<(Node<'t>, &'static str, Node<'t>)> {
    let mut out = Vec::new();
    let mut stack = vec![cond];
    while let Some(c) = stack.pop() {
        let c = peel(c);
        if c.kind_name() != "binary_expression" || out.len() > 8 {
            continue;
        }
        let (Some(l), Some(r)) = (c.field("left"), c.field("right")) else {
            continue;
        };
        let op = c.field("operator").map(|o| o.kind_name()).unwrap_or("");
        let joined = if negated { "||" } else { "&&" };
        if op == joined {
            stack.push(l);
            stack.push(r);
            continue;
        }
        let op = match (op, negated) {
            ("==", false) | ("!=", true) => "==",
            ("<", false) | (">=", true) => "<",
            ("<=", false) | (">", true) => "<=",
            (">", false) | ("<=", true) => ">",
            (">=", false) | ("<", true) => ">=",
            _ => "?",
        };
        out.push((l, op, r));
    }
    out
}

/// The condition inside `if (…)`'s clause.
pub(crate) fn unclause(cond: Node<'_>) -> Node<'_> {
    if cond.kind_name() == "condition_clause" {
        if let Some(v) = cond.field("value") {
            return v;
        }
    }
    cond
}

pub(crate) fn compact(s: &str) -> String {
    s.split_whitespace().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bound(c: i128) -> (Poly, Poly) {
        (Poly::atom("threadIdx.x"), Poly::constant(c))
    }

    #[test]
    fn guards_add_up_as_if_each_restricted_in_turn() {
        let outer = Threads {
            per_thread_guard: true,
            bounds: (0..6).map(bound).collect(),
            ..Default::default()
        };
        let inner = Threads {
            per_thread_guard: true,
            warp: true,
            single: Some(("tid==0".into(), None)),
            bounds: (10..14).map(bound).collect(),
        };
        let mut t = Threads::default();
        t.add(&outer);
        t.add(&Threads::default());
        t.add(&inner);
        assert!(t.per_thread_guard && t.warp);
        assert_eq!(t.single, inner.single);
        // The outermost bounds are kept, up to the limit.
        let kept: Vec<(Poly, Poly)> = (0..6).chain(10..12).map(bound).collect();
        assert_eq!(t.bounds, kept);
        // A later guard without a single thread keeps the one before.
        t.add(&outer);
        assert_eq!(t.single, inner.single);
    }
}
