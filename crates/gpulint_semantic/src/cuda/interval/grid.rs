//! Bounds that count the elements the whole grid covers (`const int n_full = gridDim.x *
//! BLOCK_SIZE;`), stored in a signed 32-bit local and compared with a thread's index (`for (int
//! i = blockIdx.x * BLOCK_SIZE; i < n_full; …)`).
//!
//! The product is evaluated in `unsigned`, and a grid sized for `n` elements covers `n` rounded
//! up to whole blocks: for a 32-bit element count within one block of 2³¹ − 1 it passes the
//! signed limit, the bound turns negative, and the blocks whose own base index wrapped the same
//! way pass the comparison with a negative index. Not reported: an unsigned index (the
//! comparison is then unsigned, and the bound converts back to the count it came from), and a
//! count of launched threads kept as a stride (`int stride = blockDim.x * gridDim.x; i +=
//! stride`), which is not a bound.

use super::width::Width;
use crate::cuda::kernel::{peel, Kernel};
use crate::cuda::{CudaModel, GuardKind};
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

/// A signed 32-bit bound that counts the elements the grid covers.
#[derive(Debug, Clone)]
pub struct GridCount<'t> {
    /// The declaration of the local (`const int n_full = gridDim.x * BLOCK_SIZE;`).
    pub declaration: Node<'t>,
    pub name: &'t str,
    /// Its initialiser, the unsigned product.
    pub value: Node<'t>,
    /// The comparison of a thread's index with it (`i < n_full`).
    pub compared: Node<'t>,
}

impl<'t> CudaModel<'t> {
    /// The signed 32-bit locals of kernel `k` initialised once with the number of elements the
    /// grid covers (a product of `gridDim` with `blockDim` or compile-time per-block counts)
    /// and compared, as the upper side, with a signed 32-bit value that depends on the thread
    /// or block.
    pub fn grid_counts(&self, k: &Kernel<'t>) -> Vec<GridCount<'t>> {
        let mut out = Vec::new();
        if k.too_large || k.parse_damaged() {
            return out;
        }
        for (v, defs) in k.defs.iter().enumerate() {
            let name = k.locals[v];
            let signed = matches!(
                k.types.get(name).map(|t| self.resolved_width(t)),
                Some(Width::W32 { signed: true })
            );
            let ([value], ["init"]) = (defs.as_slice(), k.def_ops[v].as_slice()) else {
                continue;
            };
            if !signed || !self.grid_product(k, *value) {
                continue;
            }
            let Some(declaration) = self
                .parent(*value)
                .and_then(|d| self.parent(d))
                .filter(|d| d.kind_name() == "declaration")
            else {
                continue;
            };
            let compared = self.guards_in(k).into_iter().find_map(|gi| {
                let g = &self.guards[gi];
                if !matches!(
                    g.kind,
                    GuardKind::If | GuardKind::EarlyExit | GuardKind::Loop
                ) {
                    return None;
                }
                g.bounds.iter().find_map(|b| {
                    let (t, l) = (b.term_node?, b.limit_node?);
                    let l = peel(l);
                    // A signed comparison: with an unsigned index (`unsigned i < n_full`) the
                    // bound converts back to the unsigned count it came from.
                    (l.kind_name() == "identifier"
                        && self.text(l) == name
                        && k.flags(self, t).thread_dependent()
                        && self.width(k, t) == (Width::W32 { signed: true }))
                    .then_some(g.cond)
                })
            });
            if let Some(compared) = compared {
                out.push(GridCount {
                    declaration,
                    name,
                    value: *value,
                    compared,
                });
            }
        }
        out
    }

    /// Is `e` an unsigned product of `gridDim` with `blockDim` or compile-time per-block counts
    /// (`gridDim.x * BLOCK_SIZE`, `(blockDim.x * gridDim.x) * NUM_PER_THREAD`): the number of
    /// elements the whole grid covers? Not a product of grid sizes alone (a count of blocks).
    fn grid_product(&self, k: &Kernel<'t>, e: Node<'t>) -> bool {
        let e = peel(e);
        if self.width(k, e) != (Width::W32 { signed: false }) {
            return false;
        }
        let mut factors = Vec::new();
        let mut stack = vec![e];
        while let Some(x) = stack.pop() {
            let x = peel(x);
            let product = x.kind_name() == "binary_expression"
                && x.field("operator").is_some_and(|o| o.kind_name() == "*");
            match (product, x.field("left"), x.field("right")) {
                (true, Some(l), Some(r)) if factors.len() + stack.len() < 8 => {
                    stack.push(r);
                    stack.push(l);
                }
                _ => factors.push(x),
            }
        }
        let builtin = |f: Node<'t>, of: &str| {
            f.kind_name() == "field_expression"
                && f.field("argument").is_some_and(|a| self.text(a) == of)
        };
        // A per-block element count beside the grid size: `gridDim.x * gridDim.y` counts blocks.
        factors.iter().any(|f| builtin(*f, "gridDim"))
            && factors.iter().any(|f| !builtin(*f, "gridDim"))
            && factors.iter().all(|f| {
                builtin(*f, "gridDim")
                    || builtin(*f, "blockDim")
                    || (self.compile_time(k, *f, 0) && self.eval(*f).is_none_or(|c| c >= 2))
            })
    }
}
