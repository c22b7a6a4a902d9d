//! Which thread touches which element: the index of a shared-memory access as a polynomial
//! over the thread coordinates and the values fixed for the block, the guards that restrict
//! the threads making it (one thread, one warp), and the decision whether two accesses can
//! touch the same element from different threads.

use crate::cuda::interval::{Poly, RangeCx};
use crate::cuda::kernel::{peel, Kernel};
use crate::cuda::CudaModel;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

/// Substitutions of single-definition locals followed at most this deep.
const MAX_FORM_DEPTH: usize = 8;
/// Threads in a warp.
const WARP: i128 = 32;

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

/// The index of an access: its polynomial (`None`: not understood), whether it differs
/// between threads, and its value range where it is one-dimensional and unaliased.
#[derive(Debug, Clone, Default)]
pub(crate) struct Index {
    pub poly: Option<Poly>,
    pub own: bool,
    pub range: Option<(Option<Poly>, Option<Poly>)>,
}

/// Index forms and guard facts of one function.
pub(crate) struct Forms<'a, 't> {
    pub m: &'a CudaModel<'t>,
    pub k: &'a Kernel<'t>,
    pub rc: RangeCx<'a, 't>,
    prefix: String,
}

impl<'a, 't> Forms<'a, 't> {
    pub fn new(m: &'a CudaModel<'t>, k: &'a Kernel<'t>) -> Self {
        Forms {
            m,
            k,
            rc: RangeCx::new(m, k),
            prefix: format!("f{}:", k.function),
        }
    }

    /// `e` as a polynomial: builtins and constants as themselves, locals with a single
    /// definition through it, other names as atoms private to this function.
    pub fn form(&self, e: Node<'t>) -> Option<Poly> {
        self.form_depth(e, 0)
    }

    fn form_depth(&self, e: Node<'t>, depth: usize) -> Option<Poly> {
        let e = peel(e);
        if let Some(c) = self.m.eval(e) {
            return Some(Poly::constant(c));
        }
        match e.kind_name() {
            "identifier" => {
                let name = self.m.text(e);
                if let Some(v) = self.k.local(name) {
                    let defs = &self.k.defs[v];
                    let single = defs.len() == 1
                        && self.k.updates[v].is_empty()
                        && matches!(self.k.def_ops[v].first(), Some(&"init") | Some(&"="));
                    if single && depth < MAX_FORM_DEPTH {
                        if let Some(p) = self.form_depth(defs[0], depth + 1) {
                            return Some(p);
                        }
                    }
                }
                Some(Poly::atom(&format!("{}{name}", self.prefix)))
            }
            "field_expression" => {
                let t: String = self.m.text(e).split_whitespace().collect();
                let builtin = ["threadIdx.", "blockIdx.", "blockDim.", "gridDim."]
                    .iter()
                    .any(|b| t.starts_with(b));
                Some(Poly::atom(&if builtin {
                    t
                } else {
                    format!("{}{t}", self.prefix)
                }))
            }
            "binary_expression" => {
                let (l, r) = (e.field("left")?, e.field("right")?);
                let op = e.field("operator").map(|o| self.m.text(o)).unwrap_or("");
                let (a, b) = (self.form_depth(l, depth), self.form_depth(r, depth));
                let opaque = || {
                    Some(Poly::atom(&format!(
                        "{}{}",
                        self.prefix,
                        compact(self.m.text(e))
                    )))
                };
                match (op, a, b) {
                    ("+", Some(a), Some(b)) => a.add(&b).or_else(opaque),
                    ("-", Some(a), Some(b)) => a.sub(&b).or_else(opaque),
                    ("*", Some(a), Some(b)) => a.mul(&b).or_else(opaque),
                    _ => opaque(),
                }
            }
            _ => Some(Poly::atom(&format!(
                "{}{}",
                self.prefix,
                compact(self.m.text(e))
            ))),
        }
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
                t.bounds.truncate(8);
            }
            let (var, konst, op) = match (self.m.eval(l), self.m.eval(r)) {
                (None, Some(c)) => (l, c, op),
                (Some(c), None) => (r, c, flip(op)),
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
    fn is_thread_offset(&self, e: Node<'t>) -> bool {
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
        let op = c.field("operator").map(|o| o.kind()).unwrap_or("");
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

fn flip(op: &'static str) -> &'static str {
    match op {
        "<" => ">",
        "<=" => ">=",
        ">" => "<",
        ">=" => "<=",
        o => o,
    }
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

/// One side of an access pair, as [`may_conflict`] sees it.
pub(crate) struct Side<'x> {
    pub index: &'x [Index],
    pub threads: &'x Threads,
}

/// Can two accesses to one buffer (at least one a write) touch the same element from two
/// different threads? `range` gives the numeric range of an atom for the proofs.
pub(crate) fn may_conflict(
    a: &Side<'_>,
    b: &Side<'_>,
    range: &dyn Fn(&str) -> (i128, i128),
) -> bool {
    if a.threads.warp && b.threads.warp {
        return false;
    }
    if let (Some((ka, _)), Some((kb, _))) = (&a.threads.single, &b.threads.single) {
        if ka == kb {
            return false;
        }
    }
    if a.index.len() != b.index.len() {
        return false;
    }
    let (own_a, own_b) = (a.index.iter().any(|i| i.own), b.index.iter().any(|i| i.own));
    let diffs: Option<Vec<Poly>> = a
        .index
        .iter()
        .zip(b.index)
        .map(|(x, y)| x.poly.as_ref()?.sub(y.poly.as_ref()?))
        .collect();
    let Some(diffs) = diffs else {
        // Not understood: only an own index against one the block shares is evidence.
        return own_a != own_b;
    };
    let equal = diffs.iter().all(|d| d.as_const() == Some(0));
    let constant = diffs.iter().all(|d| d.as_const().is_some());
    match (own_a, own_b) {
        // One element for the whole block on both sides: a thread that the other side does
        // not also run writes what the other threads read (`if (tid == 0) s = v; … = s;`).
        (false, false) => equal && (a.threads.single.is_some() != b.threads.single.is_some()),
        (true, true) if equal => false,
        (true, true) if split_by_guard(a, b) => false,
        (true, true) if constant => {
            // `s[t]` against `s[t + k]`: only where the ranges provably overlap (a reduction's
            // `if (t < s) s[t] += s[t + s]` keeps them apart).
            a.index.len() == 1
                && !strided_apart(&a.index[0], &diffs[0])
                && !bounded_by_symbol(a)
                && !bounded_by_symbol(b)
                && ranges_overlap(&a.index[0], &b.index[0], range)
        }
        (true, true) => !ranges_disjoint(a.index, b.index, range),
        _ => {
            let (shared, own) = if own_a { (b, a) } else { (a, b) };
            // `if (tid == 0) … = s[0];` against `s[tid] = …`: element 0 is thread 0's own.
            if let (Some((_, Some((p, c)))), [idx]) = (&shared.threads.single, shared.index) {
                if own.index.len() == 1
                    && own.index[0].poly.as_ref() == Some(p)
                    && idx.poly.as_ref().and_then(Poly::as_const) == Some(*c)
                {
                    return false;
                }
            }
            !ranges_disjoint(a.index, b.index, range)
        }
    }
}

/// `if (t < d) s[t] += s[t + d]`: the guard keeps the threads below `d` and the elements they
/// read at or above it.
fn split_by_guard(a: &Side<'_>, b: &Side<'_>) -> bool {
    let ([x], [y]) = (a.index, b.index) else {
        return false;
    };
    let (Some(p), Some(q)) = (&x.poly, &y.poly) else {
        return false;
    };
    // The side at the lower index must be the one bounded: its threads stay below `d`.
    let bounded = |lo: &Poly, hi: &Poly, lo_threads: &Threads| {
        let Some(d) = hi.sub(lo) else {
            return false;
        };
        lo_threads
            .bounds
            .iter()
            .any(|(v, limit)| v == lo && *limit == d)
    };
    bounded(p, q, a.threads) || bounded(q, p, b.threads)
}

/// `s[5 * t + 0]` against `s[5 * t + 1]`: each thread's slots are a stride apart, and an
/// offset that is not a multiple of the stride never reaches another thread's slot.
fn strided_apart(x: &Index, diff: &Poly) -> bool {
    let (Some(p), Some(d)) = (&x.poly, diff.as_const()) else {
        return false;
    };
    let g = p.gcd_where(&|a| a.starts_with("threadIdx."));
    g > 1 && d % g != 0
}

/// Is the side's own index kept below a bound that is not a constant (`if (t < lanes)`)?
/// Then whether it reaches the other side's elements is not known.
fn bounded_by_symbol(side: &Side<'_>) -> bool {
    let [x] = side.index else {
        return false;
    };
    let Some(p) = &x.poly else {
        return false;
    };
    let var = p.without_constant();
    side.threads
        .bounds
        .iter()
        .any(|(v, limit)| v.without_constant() == var && limit.as_const().is_none())
}

/// Are the ranges of two one-dimensional indices provably apart?
fn ranges_disjoint(a: &[Index], b: &[Index], range: &dyn Fn(&str) -> (i128, i128)) -> bool {
    let ([a], [b]) = (a, b) else {
        return false;
    };
    let (Some((alo, ahi)), Some((blo, bhi))) = (&a.range, &b.range) else {
        return false;
    };
    let below = |hi: &Option<Poly>, lo: &Option<Poly>| match (hi, lo) {
        (Some(h), Some(l)) => h.sub(l).is_some_and(|d| d.interval(range).1 < 0),
        _ => false,
    };
    below(ahi, blo) || below(bhi, alo)
}

/// Do the ranges of two indices provably overlap (blocks of at least two warps)?
fn ranges_overlap(a: &Index, b: &Index, range: &dyn Fn(&str) -> (i128, i128)) -> bool {
    let (Some((Some(alo), Some(ahi))), Some((Some(blo), Some(bhi)))) = (&a.range, &b.range) else {
        return false;
    };
    let wide = |atom: &str| {
        let (lo, hi) = range(atom);
        if atom.starts_with("blockDim.x") {
            (lo.max(2 * WARP), hi.max(2 * WARP))
        } else {
            (lo, hi)
        }
    };
    let at_least = |x: &Poly, y: &Poly| x.sub(y).is_some_and(|d| d.interval(&wide).0 >= 0);
    at_least(ahi, blo) && at_least(bhi, alo)
}
