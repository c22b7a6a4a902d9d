//! Conditions fixed when the kernel is compiled: `if constexpr`, and conditions over template
//! parameters and named constants only. Every thread of the block takes the same branch, and
//! in a given build the branch is either always or never there.

use super::index::unclause;
use super::walk::Walker;
use crate::cuda::kernel::peel;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

/// Nodes of a condition looked at, at most.
const MAX_NODES: usize = 64;

impl<'t> Walker<'_, '_, 't> {
    /// The value of the condition of `if` statement `s` where it folds to a constant.
    pub(super) fn folded_condition(&self, cond: Node<'t>) -> Option<i128> {
        self.f.m.eval(peel(unclause(cond)))
    }

    /// Is the condition of `if` statement `s` fixed at compile time: `if constexpr`, or only
    /// template parameters, named constants, literals and `sizeof`?
    pub(super) fn compile_time(&self, s: Node<'t>, cond: Node<'t>) -> bool {
        let constexpr =
            (0..s.child_count()).any(|i| s.child(i).is_some_and(|c| c.kind_name() == "constexpr"));
        if constexpr {
            return true;
        }
        let c = peel(unclause(cond));
        if self.f.per_thread(c) {
            return false;
        }
        let m = self.f.m;
        let func = &m.functions[self.f.k.function];
        let mut stack = vec![c];
        let mut seen = 0;
        let mut any_name = false;
        while let Some(n) = stack.pop() {
            seen += 1;
            if seen > MAX_NODES {
                return false;
            }
            match n.kind_name() {
                "identifier" => {
                    let name = m.text(n);
                    let fixed = func.template_params.iter().any(|(p, _)| *p == name)
                        || m.constant(name).is_some()
                        || self.constexpr_local(n);
                    if !fixed {
                        return false;
                    }
                    any_name = true;
                }
                // `Traits::kFlag`, `std::is_same<T, float>::value`: static members of types.
                "qualified_identifier" => any_name = true,
                "number_literal" | "true" | "false" | "sizeof_expression" => {}
                "parenthesized_expression"
                | "binary_expression"
                | "unary_expression"
                | "condition_clause" => {
                    stack.extend(gpulint_syntax::named_children(n));
                }
                _ => return false,
            }
        }
        any_name
    }

    /// Is the identifier a local declared `constexpr`?
    fn constexpr_local(&self, n: Node<'t>) -> bool {
        let m = self.f.m;
        let Some(v) = self.f.k.local(m.text(n)) else {
            return false;
        };
        let defs = &self.f.k.defs[v];
        defs.len() == 1
            && self.f.k.updates[v].is_empty()
            && m.parent(defs[0])
                .and_then(|d| m.parent(d))
                .is_some_and(|decl| {
                    decl.kind_name() == "declaration"
                        && gpulint_syntax::named_children(decl)
                            .any(|c| c.kind_name() == "type_qualifier" && m.text(c) == "constexpr")
                })
    }
}
