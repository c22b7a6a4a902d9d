//! What shows that a 32-bit product works on tensors large enough to overflow it, when the
//! launches in the file do not prove it: framework headers, or, in any file, an element count
//! that multiplies three or more sizes (`if (i < B * T * V)`), or a factor that is a helper
//! parameter to which a call narrows a 64-bit value, or an offset into a tensor of four or more
//! dimensions when the file computes another offset of that shape in 64 bits.

use super::eval::{Point, RangeCx};
use super::overflow::LARGE;
use super::width::Width;
use crate::cuda::kernel::{peel, Kernel};
use crate::cuda::CudaModel;
use gpulint_syntax::NodeExt;
use gpulint_syntax::{descendants, named_children};
use tree_sitter::Node;

/// What shows that a 32-bit product that the launches do not bound works on large tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Evidence {
    /// The launches in this file give every size and the product passes the limit.
    Proven,
    /// The file includes framework headers (or a launch passes `x.numel()`): the kernel
    /// indexes framework tensors, whose element counts reach 2³¹.
    Framework,
    /// An element count that bounds a global index multiplies three or more data sizes (`if (i
    /// < B * T * V)`): the element count of a tensor of three or more dimensions.
    Dimensions,
    /// A factor is a 32-bit helper parameter to which a call passes a 64-bit value.
    NarrowedCall,
    /// The product is in an offset whose term with a block or thread coordinate multiplies
    /// three or more data sizes (`((b * H + h) * Q + q) * K`: a tensor of four or more
    /// dimensions), and a kernel of the file computes an offset of that shape in 64 bits
    /// (`(b * heads + h) * seq * seq` with `size_t` sizes): the file treats such offsets as
    /// 64-bit, and this one was left 32-bit.
    WideLayout,
}

/// What a whole file shows about the size of its tensors, computed on first use.
#[derive(Debug, Default)]
pub struct FileEvidence {
    /// The file includes a framework header (`<torch/`, `<ATen/` …).
    pub(super) framework: std::cell::OnceCell<bool>,
    /// A kernel computes an offset into a tensor of four or more dimensions in 64 bits.
    wide_layout: std::cell::OnceCell<bool>,
}

impl<'t> CudaModel<'t> {
    /// The degree of `e` in data sizes: how many sizes are multiplied in its largest term
    /// (`B * T * V`: 3; `((b * H + h) * Q + q) * K`: 3, `b` being a block coordinate; `s * n +
    /// i * m`: 2). A data size is a variable, member or parameter whose range reaches `LARGE`,
    /// not a constant, a compile-time tile count or a value derived from thread coordinates.
    pub(super) fn size_degree(
        &self,
        cx: &RangeCx<'_, 't>,
        k: &Kernel<'t>,
        e: Node<'t>,
        at: &Point<'t>,
    ) -> usize {
        self.degrees(cx, k, e, at, 0).0
    }

    /// The degree of `e` as in [`CudaModel::size_degree`], with the most data sizes multiplied
    /// together with a block or thread coordinate in one term of `e` (`((b * H + h) * Q + q) *
    /// K`: 3, the term `b * H * Q * K`; `None` without a coordinate): `(degree, coordinate
    /// degree)`, from one walk.
    pub(super) fn degrees(
        &self,
        cx: &RangeCx<'_, 't>,
        k: &Kernel<'t>,
        e: Node<'t>,
        at: &Point<'t>,
        depth: usize,
    ) -> (usize, Option<usize>) {
        if depth > 12 {
            return (0, None);
        }
        let e = peel(e);
        match e.kind_name() {
            "binary_expression" => {
                let (Some(l), Some(r)) = (e.field("left"), e.field("right")) else {
                    return (0, None);
                };
                let (dl, cl) = self.degrees(cx, k, l, at, depth + 1);
                let (dr, cr) = self.degrees(cx, k, r, at, depth + 1);
                match e.field("operator").map(|o| o.kind_name()) {
                    Some("*") => (dl + dr, cl.map(|c| c + dr).max(cr.map(|c| c + dl))),
                    Some("+" | "-") => (dl.max(dr), cl.max(cr)),
                    _ => (0, None),
                }
            }
            "identifier" | "field_expression" => {
                if k.flags(self, e).thread_dependent() {
                    return (0, Some(0));
                }
                if self.is_constant(k, e) || self.compile_time(k, e, 0) {
                    return (0, None);
                }
                let ranges = |a: &str| cx.atom_range(a);
                let large = match cx.range(e, at).hi {
                    Some(h) => h.poly.interval(&ranges).1 >= LARGE,
                    None => true,
                };
                (usize::from(large), None)
            }
            _ => (0, None),
        }
    }

    /// Does a kernel of this file compute an offset into a tensor of four or more dimensions
    /// in 64 bits: an expression of 64-bit width whose term with a block or thread coordinate
    /// multiplies three or more data sizes (`(batch_idx * num_heads + head_idx) * seq_len *
    /// seq_len` with `size_t` sizes)? Computed once per file, on first use; each kernel body
    /// is read up to a bounded number of nodes.
    pub(super) fn wide_layout(&self) -> bool {
        *self.evidence.wide_layout.get_or_init(|| {
            self.kernels.iter().any(|k| {
                if k.too_large || k.parse_damaged() {
                    return false;
                }
                let cx = RangeCx::new(self, k);
                let body = self.functions[k.function].node;
                descendants(body).take(8192).any(|n| {
                    let arithmetic = |x: Node<'t>| {
                        x.kind_name() == "binary_expression"
                            && x.field("operator")
                                .is_some_and(|o| matches!(o.kind_name(), "+" | "-" | "*"))
                    };
                    // The whole offset only: not a part of a larger sum or product.
                    if !arithmetic(n)
                        || peel(arithmetic_root(self, n)).id() != n.id()
                        || self.width(k, n) != Width::W64
                    {
                        return false;
                    }
                    let at = cx.point(None, n.start_byte());
                    self.degrees(&cx, k, n, &at, 0).1 >= Some(3)
                })
            })
        })
    }

    /// Does the offset `root` index a tensor of four or more dimensions whose batch stride a
    /// helper applies, with `p` in its highest-order term computed inline? `root` passes a
    /// product of three or more data sizes to a call that also takes a block or thread
    /// coordinate (`binfo.q_offset(seqlen * h * d, h * d, bidb)`: the batch stride of a
    /// `[batch, rows, heads, features]` tensor, multiplied by the batch coordinate in the
    /// helper), and `p` multiplies two or more sizes in the term of `root` with the most
    /// (`(m_block * kBlockM + 128 * bidb) * h * d`, the row offset over all batches). Lower-order
    /// terms (`bidh * d`) and offsets whose helper strides are single sizes (the per-row
    /// statistics, `q_offset(seqlen, 1, bidb)`) do not qualify.
    pub(super) fn strided_term(
        &self,
        cx: &RangeCx<'_, 't>,
        k: &Kernel<'t>,
        root: Node<'t>,
        p: Node<'t>,
        at: &Point<'t>,
    ) -> bool {
        let term = self.term_degree(cx, k, root, p, at);
        if term < 2 || term < self.size_degree(cx, k, root, at) {
            return false;
        }
        let coordinate = |n: Node<'t>| {
            std::iter::once(n)
                .chain(descendants(n).take(64))
                .any(|x| x.kind_name() == "identifier" && k.flags(self, x).thread_dependent())
        };
        arithmetic_terms(root).into_iter().any(|c| {
            if c.kind_name() != "call_expression" {
                return false;
            }
            let args: Vec<Node<'t>> = c
                .field("arguments")
                .map(|a| named_children(a).collect())
                .unwrap_or_default();
            args.iter().any(|a| coordinate(*a))
                && args
                    .iter()
                    .any(|a| !coordinate(*a) && self.size_degree(cx, k, *a, at) >= 3)
        })
    }

    /// How many data sizes the term of `root` that holds `p` multiplies: the degree of `p`
    /// plus that of every factor applied to the sums `p` sits in, up to `root`.
    fn term_degree(
        &self,
        cx: &RangeCx<'_, 't>,
        k: &Kernel<'t>,
        root: Node<'t>,
        p: Node<'t>,
        at: &Point<'t>,
    ) -> usize {
        let mut degree = self.size_degree(cx, k, p, at);
        let mut cur = p;
        while cur.id() != root.id() {
            let Some(up) = self.parent(cur) else { break };
            if up.kind_name() == "binary_expression"
                && up.field("operator").is_some_and(|o| o.kind_name() == "*")
            {
                let other = if up.field("left").is_some_and(|l| l.id() == cur.id()) {
                    up.field("right")
                } else {
                    up.field("left")
                };
                if let Some(o) = other {
                    degree += self.size_degree(cx, k, o, at);
                }
            }
            cur = up;
        }
        degree
    }

    /// Is a factor of the product a 32-bit helper parameter to which a call passes a 64-bit
    /// value (`long idx; helper(idx, …)` with `helper(int idx, …) { inp + idx * P }`)?
    pub(super) fn narrowed_factor(&self, k: &Kernel<'t>, l: Node<'t>, r: Node<'t>) -> bool {
        [l, r].into_iter().any(|f| {
            let f = peel(f);
            f.kind_name() == "identifier" && self.narrowed_param(k, self.text(f)).is_some()
        })
    }
}

/// The largest expression holding `p` through `+`, `-`, `*` and parentheses: the whole index
/// or count `p` is a part of.
pub(super) fn arithmetic_root<'t>(m: &CudaModel<'t>, p: Node<'t>) -> Node<'t> {
    let mut top = p;
    while let Some(up) = m.parent(top) {
        let arithmetic = match up.kind_name() {
            "parenthesized_expression" => true,
            "binary_expression" => up
                .field("operator")
                .is_some_and(|o| matches!(o.kind_name(), "+" | "-" | "*")),
            _ => false,
        };
        if !arithmetic {
            break;
        }
        top = up;
    }
    top
}

/// The operands of the sums and products that make up `root` (through `+`, `-`, `*` and
/// parentheses): the calls and names an offset adds together.
fn arithmetic_terms(root: Node<'_>) -> Vec<Node<'_>> {
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(e) = stack.pop() {
        let e = peel(e);
        let arithmetic = e.kind_name() == "binary_expression"
            && e.field("operator")
                .is_some_and(|o| matches!(o.kind_name(), "+" | "-" | "*"));
        match (arithmetic, e.field("left"), e.field("right")) {
            (true, Some(l), Some(r)) if out.len() + stack.len() < 64 => {
                stack.push(r);
                stack.push(l);
            }
            _ => out.push(e),
        }
    }
    out
}
