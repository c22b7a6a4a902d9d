//! Indices that stay within one warp: a warp's private slice of a buffer (`&s[warp * 64]`,
//! the warp taken as `threadIdx.x / 32` or `>> 5`) and a butterfly partner lane (`s[t ^ 8]`).

use super::index::Forms;
use crate::cuda::kernel::peel;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

/// Threads in a warp.
const WARP: i128 = 32;
/// Single-definition locals followed at most this deep.
const MAX_DEPTH: usize = 8;

impl<'t> Forms<'_, 't> {
    /// Does `e` differ between threads only through the warp index? `Some(true)` where it
    /// does (`warp * 64 + 16`), `Some(false)` where it is the same for the whole block, `None`
    /// where it differs in another or an unknown way.
    pub fn warp_only(&self, e: Node<'t>) -> Option<bool> {
        self.warp_only_depth(e, 0)
    }

    fn warp_only_depth(&self, e: Node<'t>, depth: usize) -> Option<bool> {
        let e = peel(e);
        if !self.per_thread(e) {
            return Some(false);
        }
        if depth > MAX_DEPTH {
            return None;
        }
        match e.kind_name() {
            "identifier" => {
                let v = self.k.local(self.m.text(e))?;
                self.warp_only_depth(self.reaching_def(v, e)?, depth + 1)
            }
            "binary_expression" => {
                let (l, r) = (e.field("left")?, e.field("right")?);
                let op = e.field("operator").map(|o| o.kind_name()).unwrap_or("");
                match op {
                    "/" | ">>" if self.is_thread_offset(peel(l)) => {
                        let base = self.form(peel(l))?.constant_term();
                        let Some(c) = self.m.eval(peel(r)) else {
                            // A group size fixed elsewhere (a template parameter): a warp
                            // where the function orders its accesses with `__syncwarp()`.
                            let uniform = !self.per_thread(peel(r));
                            return (uniform && base == 0 && self.syncs_warps()).then_some(true);
                        };
                        let lanes = if op == "/" {
                            c
                        } else if (5..64).contains(&c) {
                            1i128 << c
                        } else {
                            0
                        };
                        (lanes > 0 && lanes % WARP == 0 && base % WARP == 0).then_some(true)
                    }
                    "+" | "-" | "*" => {
                        let a = self.warp_only_depth(l, depth + 1)?;
                        let b = self.warp_only_depth(r, depth + 1)?;
                        Some(a || b)
                    }
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// For a local that only ever starts at the thread's index and steps by the block size
    /// (`for (j = threadIdx.x; …; j += blockDim.x)`, in any number of loops): that start.
    pub fn stride_base(&self, e: Node<'t>) -> Option<crate::cuda::interval::Poly> {
        let e = peel(e);
        if e.kind_name() != "identifier" {
            return None;
        }
        let v = self.k.local(self.m.text(e))?;
        if !self.k.updates[v].is_empty() {
            return None;
        }
        let step = crate::cuda::interval::Poly::atom("blockDim.x");
        let mut base = None;
        let mut stepped = false;
        for (d, op) in self.k.defs[v].iter().zip(&self.k.def_ops[v]) {
            let p = self.form(*d)?;
            match *op {
                "init" | "=" if base.is_none() || base.as_ref() == Some(&p) => base = Some(p),
                "+=" if p == step => stepped = true,
                _ => return None,
            }
        }
        let base = base?;
        (stepped && base == crate::cuda::interval::Poly::atom("threadIdx.x")).then_some(base)
    }

    /// Does the function call `__syncwarp()`?
    fn syncs_warps(&self) -> bool {
        self.m.functions[self.k.function]
            .node
            .field("body")
            .is_some_and(|b| self.m.text(b).contains("__syncwarp"))
    }

    /// `x ^ c` with `0 < c < 32` and `x` the thread's index in the block (a multiple of the
    /// warp size added): the partner lane's index, of the same warp, as `x`'s polynomial.
    pub fn lane_partner(&self, e: Node<'t>) -> Option<crate::cuda::interval::Poly> {
        let e = peel(e);
        if e.kind_name() != "binary_expression"
            || e.field("operator").map(|o| o.kind_name()) != Some("^")
        {
            return None;
        }
        let (l, r) = (peel(e.field("left")?), peel(e.field("right")?));
        let (x, c) = match (self.m.eval(l), self.m.eval(r)) {
            (None, Some(c)) => (l, c),
            (Some(c), None) => (r, c),
            _ => return None,
        };
        if !(1..WARP).contains(&c) || !self.is_thread_offset(x) {
            return None;
        }
        let p = self.form(x)?;
        (p.constant_term() % WARP == 0).then_some(p)
    }
}

impl<'t> super::walk::Walker<'_, '_, 't> {
    /// `for (int r = 0; …; ++r) { if (r > 0) __syncthreads(); … }`: a barrier that opens every
    /// iteration but the first, so nothing carries from one iteration to the next.
    pub(super) fn later_barrier(&self, loop_node: Node<'t>) -> bool {
        let m = self.f.m;
        if loop_node.kind_name() != "for_statement" {
            return false;
        }
        let Some(counter) = counter_from_zero(m, loop_node) else {
            return false;
        };
        let Some(body) = loop_node.field("body") else {
            return false;
        };
        let Some(first) = gpulint_syntax::named_children(body).find(|c| c.kind_name() != "comment")
        else {
            return false;
        };
        if first.kind_name() != "if_statement" || first.field("alternative").is_some() {
            return false;
        }
        let (Some(cond), Some(then)) = (first.field("condition"), first.field("consequence"))
        else {
            return false;
        };
        let cond = peel(super::index::unclause(cond));
        if cond.kind_name() != "binary_expression" {
            return false;
        }
        let (Some(l), Some(r)) = (cond.field("left"), cond.field("right")) else {
            return false;
        };
        let op = cond.field("operator").map(|o| o.kind_name()).unwrap_or("");
        let (l, r) = (peel(l), peel(r));
        let is_counter = |n: Node<'t>| n.kind_name() == "identifier" && m.text(n) == counter;
        let past_first = match (op, m.eval(l), m.eval(r)) {
            (">" | "!=", None, Some(0)) | (">=", None, Some(1)) => is_counter(l),
            ("<" | "!=", Some(0), None) | ("<=", Some(1), None) => is_counter(r),
            _ => false,
        };
        let call: String = m.text(then).split_whitespace().collect();
        let call = call.trim_start_matches('{').trim_end_matches('}');
        past_first
            && call.matches(';').count() == 1
            && (call.starts_with("__syncthreads(") || call.ends_with(".sync();"))
    }
}

/// The counter of `for (int r = 0; …; ++r)` (or `r++`, `r += k` with `k > 0`).
fn counter_from_zero<'t>(m: &crate::cuda::CudaModel<'t>, f: Node<'t>) -> Option<&'t str> {
    let (_, value) = counter_init(f)?;
    if m.eval(peel(value)) != Some(0) {
        return None;
    }
    loop_counter(m, f)
}

/// The variable a `for` loop's initializer sets (`int r = v` or `r = v`) and its value.
fn counter_init(f: Node<'_>) -> Option<(Node<'_>, Node<'_>)> {
    let init = f.field("initializer")?;
    let (name, value) = match init.kind_name() {
        "declaration" => {
            let d = gpulint_syntax::named_children(init)
                .find(|c| c.kind_name() == "init_declarator")?;
            (d.field("declarator")?, d.field("value")?)
        }
        "assignment_expression" => (init.field("left")?, init.field("right")?),
        _ => return None,
    };
    (name.kind_name() == "identifier").then_some((name, value))
}

/// The counter a `for` loop steps up every iteration (`++r`, `r++`, `r += k` with `k > 0`).
pub(super) fn loop_counter<'t>(m: &crate::cuda::CudaModel<'t>, f: Node<'t>) -> Option<&'t str> {
    loop_counter_step(m, f).map(|(name, _)| name)
}

/// [`loop_counter`] with the constant it steps by.
pub(super) fn loop_counter_step<'t>(
    m: &crate::cuda::CudaModel<'t>,
    f: Node<'t>,
) -> Option<(&'t str, i128)> {
    if f.kind_name() != "for_statement" {
        return None;
    }
    let name = m.text(counter_init(f)?.0);
    let update = peel(f.field("update")?);
    let (var, step) = match update.kind_name() {
        "update_expression" => {
            let t = m.text(update);
            if !t.contains("++") {
                return None;
            }
            (update.field("argument")?, 1)
        }
        "assignment_expression" => {
            let op = update.field("operator").map(|o| o.kind_name())?;
            let k = m.eval(peel(update.field("right")?))?;
            if op != "+=" || k <= 0 {
                return None;
            }
            (update.field("left")?, k)
        }
        _ => return None,
    };
    (m.text(peel(var)) == name).then_some((name, step))
}
