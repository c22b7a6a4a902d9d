//! The declaration whose 32-bit type makes an index product overflow, when it is not the
//! product's own statement: the fix is to widen that declaration, so a finding belongs there.
//!
//! - the 32-bit local the product is stored in, declared earlier (`int qk_offset; … qk_offset
//!   = (bi * h + hi) * q * k + ki;`);
//! - a factor that is a 32-bit local holding a global index (`int first_batch = (blockDim.y *
//!   blockIdx.x + threadIdx.y) * 4; … src += first_batch * element_count;`): the index of a
//!   whole grid scaled by a row size; a local holding one block coordinate (`int b =
//!   blockIdx.x`) is not one, the product is the place to widen;
//! - a factor that is a 32-bit parameter of a `__device__` helper to which a call passes a
//!   64-bit value (`long idx; helper(idx, …)` with `helper(int idx, …) { x = inp + idx * P; }`):
//!   the call narrows what its caller kept 64-bit.

use super::overflow::{Overflow, OverflowKind};
use super::width::Width;
use crate::cuda::kernel::{declarator_name, peel, Kernel};
use crate::cuda::CudaModel;
use gpulint_syntax::NodeExt;
use gpulint_syntax::{descendants, named_children};
use tree_sitter::Node;

/// Why a declaration is the place of a 32-bit overflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CulpritKind {
    /// The 32-bit local the product is stored in.
    Destination,
    /// A 32-bit local holding a global index, a factor of the product.
    GlobalIndex,
    /// A 32-bit helper parameter a call passes a 64-bit value to (the call's line).
    NarrowedParam { call_line: usize },
}

/// See the module documentation.
#[derive(Debug, Clone, Copy)]
pub struct Culprit<'t> {
    /// The declaration (a declaration statement, or the parameter declaration).
    pub node: Node<'t>,
    pub name: &'t str,
    pub kind: CulpritKind,
}

impl<'t> CudaModel<'t> {
    /// The declaration to widen for overflow `o` of kernel or helper `k` (see the module
    /// documentation), when it is not the product's own statement.
    pub fn overflow_culprit(&self, k: &Kernel<'t>, o: &Overflow<'t>) -> Option<Culprit<'t>> {
        if o.kind == OverflowKind::Narrowed {
            return None;
        }
        let p = o.node;
        for side in [p.field("left"), p.field("right")].into_iter().flatten() {
            let f = peel(side);
            if f.kind_name() != "identifier" {
                continue;
            }
            let name = self.text(f);
            if let Some(c) = self.narrowed_param(k, name) {
                return Some(c);
            }
            if let Some(v) = k.local(name) {
                let defs = &k.defs[v];
                let global = defs.len() == 1
                    && k.def_ops[v][0] == "init"
                    && k.flags(self, defs[0]).is_global_index();
                if global && self.is_narrow(k.types.get(name).copied()) {
                    if let Some(d) = local_declaration(k, name, self.source) {
                        if !contains(d, p) {
                            return Some(Culprit {
                                node: d,
                                name,
                                kind: CulpritKind::GlobalIndex,
                            });
                        }
                    }
                }
            }
        }
        // Stored in a 32-bit local through `+`, `-`, `*` and parentheses only.
        let mut cur = p;
        while let Some(up) = self.parent(cur) {
            match up.kind_name() {
                "binary_expression" | "parenthesized_expression" => cur = up,
                "assignment_expression" => {
                    let plain = up.field("operator").is_some_and(|o| o.kind_name() == "=");
                    let right = up.field("right").is_some_and(|r| r.id() == cur.id());
                    let left = up.field("left").filter(|l| l.kind_name() == "identifier")?;
                    let name = self.text(left);
                    if !plain || !right || k.local(name).is_none() {
                        return None;
                    }
                    if !self.is_narrow(k.types.get(name).copied()) {
                        return None;
                    }
                    let d = local_declaration(k, name, self.source)?;
                    return (!contains(d, p)).then_some(Culprit {
                        node: d,
                        name,
                        kind: CulpritKind::Destination,
                    });
                }
                _ => return None,
            }
        }
        None
    }

    fn is_narrow(&self, ty: Option<&str>) -> bool {
        ty.is_some_and(|t| matches!(self.resolved_width(t), Width::W32 { .. }))
    }

    /// A 32-bit parameter `name` of helper `k` to which a call in this file passes a 64-bit
    /// value.
    pub(super) fn narrowed_param(&self, k: &Kernel<'t>, name: &str) -> Option<Culprit<'t>> {
        let f = &self.functions[k.function];
        if f.space.global || self.helper_of_function(k.function).is_none() {
            return None;
        }
        let pos = k.params.iter().position(|p| p.name == name)?;
        let param = k.params[pos].node;
        if !self.is_narrow(param.field("type").map(|t| self.text(t))) || k.params[pos].pointer {
            return None;
        }
        let callee = crate::cuda::last_name(&f.name);
        for call in self.calls_to(callee) {
            let caller = self.code_of_function(call.caller);
            let (Some(caller), Some(args)) = (caller, call.node.field("arguments")) else {
                continue;
            };
            let Some(arg) = named_children(args)
                .filter(|a| a.kind_name() != "comment")
                .nth(pos)
            else {
                continue;
            };
            if self.width(caller, arg) == Width::W64 {
                return Some(Culprit {
                    node: param,
                    name: k.params[pos].name,
                    kind: CulpritKind::NarrowedParam {
                        call_line: self.line_of(call.node.start_byte()),
                    },
                });
            }
        }
        None
    }
}

/// Does `outer` hold `inner`?
fn contains(outer: Node<'_>, inner: Node<'_>) -> bool {
    outer.start_byte() <= inner.start_byte() && inner.end_byte() <= outer.end_byte()
}

/// The declaration statement of local `name` in `k` (its first).
fn local_declaration<'t>(k: &Kernel<'t>, name: &str, source: &str) -> Option<Node<'t>> {
    descendants(k.node).take(1 << 14).find(|n| {
        n.kind_name() == "declaration"
            && named_children(*n).any(|d| {
                declarator_name(d)
                    .0
                    .is_some_and(|id| gpulint_syntax::text(id, source) == name)
            })
    })
}
