//! Unrolled loops over a rounded count: `for (k = 0; k < r; k += 4)` reading `a[k + 3]`, where
//! `r = n & ~2` (or `n - n % 2`, `n / 2 * 2`) is not always a multiple of the step. The last
//! iteration then starts below `r` but reads up to `k + step - 1`, past `r` and past `n`, the
//! count the rounding was taken from.

use super::{ArraySpace, CudaModel};
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

/// Ancestors searched from a subscript for its unrolled loop.
const MAX_UP: usize = 48;

/// One unrolled loop whose rounded bound leaves a remainder its body reads past.
#[derive(Debug, Clone, Copy)]
pub struct RoundedOverread<'t> {
    /// The subscript that reads past the bound.
    pub read: Node<'t>,
    /// The array read (a `__shared__` or per-thread array).
    pub array: &'t str,
    pub space: ArraySpace,
    /// The `for` loop.
    pub looop: Node<'t>,
    /// The loop counter and the bound's name.
    pub counter: &'t str,
    pub bound: &'t str,
    /// The rounding expression (`n & ~2`), the root cause.
    pub rounding: Node<'t>,
    /// The loop step.
    pub step: i128,
    /// The smallest remainder `bound % step` the rounding leaves possible (not zero).
    pub remainder: i128,
    /// The largest offset past the counter the body reads (`k + 3`: 3).
    pub reach: i128,
}

impl<'t> CudaModel<'t> {
    /// Subscripts of constant-size shared or per-thread arrays read at `k + d` inside a loop
    /// `for (k = c; k < r; k += s)` (start a multiple of `s`, `s >= 2`, `k` not changed in the
    /// body), where `r` is defined once as a rounding of another count that can leave a
    /// remainder `r % s` of at most `d`: the last iteration reads past `r`. One per rounding.
    pub fn rounded_overreads(&self) -> Vec<RoundedOverread<'t>> {
        let mut out: Vec<RoundedOverread<'t>> = Vec::new();
        for &(fi, sub) in &self.subscripts {
            if sub.has_error() {
                continue;
            }
            let Some(found) = self.rounded_overread(fi, sub) else {
                continue;
            };
            // One per rounding, at its farthest read.
            match out
                .iter_mut()
                .find(|o| o.rounding.id() == found.rounding.id())
            {
                Some(o) if o.reach < found.reach => *o = found,
                Some(_) => {}
                None => out.push(found),
            }
        }
        out
    }

    fn rounded_overread(&self, fi: usize, sub: Node<'t>) -> Option<RoundedOverread<'t>> {
        let (base, index) = (
            sub.field("argument")?,
            sub.field("indices")?.named_child(0)?,
        );
        if base.kind_name() != "identifier" {
            return None;
        }
        let name = self.text(base);
        let array = self
            .arrays_of(fi)
            .filter(|a| a.name == name && a.decl.end_byte() <= sub.start_byte())
            .max_by_key(|a| a.decl.start_byte())?;
        if !matches!(array.space, ArraySpace::Local | ArraySpace::Shared)
            || array.extents.len() != 1
        {
            return None;
        }
        // Cheap filter first: the index must add something to a bare identifier.
        let sums: Vec<(Node<'t>, Node<'t>)> = gpulint_syntax::descendants(index)
            .filter(|n| n.kind_name() == "binary_expression")
            .filter_map(|n| {
                if n.field("operator").map(|o| self.text(o)) != Some("+") {
                    return None;
                }
                let (l, r) = (strip(n.field("left")?), strip(n.field("right")?));
                if l.kind_name() == "identifier" {
                    Some((l, r))
                } else if r.kind_name() == "identifier" {
                    Some((r, l))
                } else {
                    None
                }
            })
            .take(8)
            .collect();
        if sums.is_empty() {
            return None;
        }
        let func = &self.functions[fi];
        let mut cur = sub;
        for _ in 0..MAX_UP {
            let parent = self.parent(cur)?;
            match parent.kind_name() {
                "function_definition" | "lambda_expression" => return None,
                "for_statement" if parent.field("body").is_some_and(|b| b.id() == cur.id()) => {
                    if let Some(l) = self.unrolled_loop(fi, parent) {
                        for &(counter, offset) in &sums {
                            if self.text(counter) != l.counter {
                                continue;
                            }
                            let Some((lo, hi)) = self.index_range(func, offset) else {
                                continue;
                            };
                            if lo >= 0 && hi >= l.remainder && hi < l.step {
                                return Some(RoundedOverread {
                                    read: sub,
                                    array: array.name,
                                    space: array.space,
                                    reach: hi,
                                    ..l
                                });
                            }
                        }
                    }
                }
                _ => {}
            }
            cur = parent;
        }
        None
    }

    /// `for (k = c; k < r; k += s)` with `r` a rounding that can leave a remainder modulo `s`.
    fn unrolled_loop(&self, fi: usize, f: Node<'t>) -> Option<RoundedOverread<'t>> {
        let func = &self.functions[fi];
        let update = f.field("update")?;
        if update.kind_name() != "assignment_expression"
            || self.text(update.field("operator")?) != "+="
        {
            return None;
        }
        let counter = self.text(update.field("left")?);
        let step = self.eval_in_function(func, update.field("right")?)?;
        if !(2..=64).contains(&step) {
            return None;
        }
        let cond = strip(f.field("condition")?);
        if cond.kind_name() != "binary_expression"
            || self.text(cond.field("operator")?) != "<"
            || self.text(cond.field("left")?) != counter
        {
            return None;
        }
        let bound_node = strip(cond.field("right")?);
        if bound_node.kind_name() != "identifier" {
            return None;
        }
        let bound = self.text(bound_node);
        // The start: a constant multiple of the step.
        let (var, start) = super::arrays::loop_start(f)?;
        if self.text(var) != counter || self.eval_in_function(func, start)? % step != 0 {
            return None;
        }
        // The bound: one definition in the function, a rounding of another count.
        let k = self.code_of_function(fi)?;
        let v = k.local(bound)?;
        if k.defs[v].len() != 1 || !k.updates[v].is_empty() || k.def_ops[v][0] != "init" {
            return None;
        }
        let rounding = strip(k.defs[v][0]);
        let remainder = self.rounding_remainder(fi, rounding, step)?;
        // The counter and the bound are not changed in the body, nor is the loop left early.
        if self.body_leaves_or_assigns(f.field("body")?, &[counter, bound]) {
            return None;
        }
        Some(RoundedOverread {
            read: f,
            array: "",
            space: ArraySpace::Local,
            looop: f,
            counter,
            bound,
            rounding,
            step,
            remainder,
            reach: 0,
        })
    }

    /// For a rounding `n & M`, `n - n % q`, `n / q * q` or `(n >> p) << p`, the smallest non-zero
    /// remainder modulo `step` it leaves possible; `None` when it is always a multiple of the
    /// step, or is not such a rounding.
    fn rounding_remainder(&self, fi: usize, e: Node<'t>, step: i128) -> Option<i128> {
        let func = &self.functions[fi];
        if e.kind_name() != "binary_expression" {
            return None;
        }
        let op = self.text(e.field("operator")?);
        let (l, r) = (strip(e.field("left")?), strip(e.field("right")?));
        let multiple_of = |q: i128| -> Option<i128> {
            // Multiples of q modulo step: multiples of gcd(q, step).
            (q > 0 && q % step != 0).then(|| gcd(q, step))
        };
        match op {
            "&" => {
                let m = match (
                    self.eval_in_function(func, r),
                    self.eval_in_function(func, l),
                ) {
                    (Some(m), None) | (None, Some(m)) => m,
                    _ => return None,
                };
                // A rounding mask clears a few low bits: `~c` with a small `c`.
                let cleared = if m < 0 {
                    !m
                } else if m > i32::MAX as i128 && m <= u32::MAX as i128 {
                    !m & u32::MAX as i128
                } else {
                    return None;
                };
                if !(1..1024).contains(&cleared) || step & (step - 1) != 0 {
                    return None;
                }
                let kept = !cleared & (step - 1);
                (kept != 0).then(|| kept & -kept)
            }
            // `n - n % q`
            "-" if r.kind_name() == "binary_expression"
                && r.field("operator").map(|o| self.text(o)) == Some("%")
                && r.field("left").map(|x| self.text(strip(x))) == Some(self.text(l)) =>
            {
                multiple_of(self.eval_in_function(func, r.field("right")?)?)
            }
            // `n / q * q`
            "*" if l.kind_name() == "binary_expression"
                && l.field("operator").map(|o| self.text(o)) == Some("/") =>
            {
                let q = self.eval_in_function(func, r)?;
                (self.eval_in_function(func, l.field("right")?)? == q)
                    .then_some(())
                    .and_then(|_| multiple_of(q))
            }
            // `(n >> p) << p`
            "<<" if l.kind_name() == "binary_expression"
                && l.field("operator").map(|o| self.text(o)) == Some(">>") =>
            {
                let p = self.eval_in_function(func, r)?;
                if !(0..31).contains(&p) || self.eval_in_function(func, l.field("right")?)? != p {
                    return None;
                }
                multiple_of(1 << p)
            }
            _ => None,
        }
    }
}

fn strip(mut n: Node<'_>) -> Node<'_> {
    for _ in 0..8 {
        if n.kind_name() != "parenthesized_expression" {
            break;
        }
        match n.named_child(0) {
            Some(c) => n = c,
            None => break,
        }
    }
    n
}

fn gcd(a: i128, b: i128) -> i128 {
    let (mut a, mut b) = (a.abs(), b.abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}
