//! Where a tensor expression in a host function comes from: a parameter (made contiguous on
//! the way or not), a fresh allocation, or anything else.

use super::syntax::{callee, method_call, peel};
use super::Origin;
use crate::hash::HashMap;
use gpulint_syntax::{text, NodeExt};
use tree_sitter::Node;

/// Functions that allocate a fresh (contiguous) tensor.
const ALLOC_FUNCTIONS: &[&str] = &[
    "empty",
    "empty_like",
    "zeros",
    "zeros_like",
    "ones",
    "ones_like",
    "full",
    "full_like",
    "rand",
    "randn",
    "arange",
    "new_empty",
    "new_zeros",
    "new_ones",
    "new_full",
];

/// Parameter `index` (called `name`), given the values it is reassigned in the body:
/// `x = x.contiguous()` keeps it the parameter, made contiguous; any other reassignment
/// (`x = x.cuda().contiguous()`, `x = x.transpose(0, 1)`) makes it something else.
pub(super) fn reassigned_param(
    index: usize,
    name: &str,
    defs: &[Node<'_>],
    source: &str,
) -> Origin {
    let same_contiguous = format!("{name}.contiguous()");
    if defs.is_empty() {
        Origin::Param {
            index,
            contiguous: false,
        }
    } else if defs.iter().all(|d| {
        let t: String = text(*d, source).split_whitespace().collect();
        t == same_contiguous
    }) {
        Origin::Param {
            index,
            contiguous: true,
        }
    } else {
        Origin::Other
    }
}

pub(super) struct Ctx<'a, 't> {
    pub(super) source: &'t str,
    pub(super) params: &'a [(&'t str, bool)],
    pub(super) locals: &'a HashMap<&'t str, Vec<Node<'t>>>,
}

impl<'t> Ctx<'_, 't> {
    /// Where the tensor expression `e` comes from.
    pub(super) fn origin(&self, e: Node<'t>, depth: usize) -> Origin {
        let e = peel(e);
        if depth > 4 {
            return Origin::Other;
        }
        match e.kind_name() {
            "identifier" => {
                let name = text(e, self.source);
                if let Some(index) = self.params.iter().position(|p| p.0 == name && p.1) {
                    let defs = self.locals.get(name).map_or(&[][..], Vec::as_slice);
                    return reassigned_param(index, name, defs, self.source);
                }
                match self.locals.get(name).map(Vec::as_slice) {
                    Some([only]) => self.origin(*only, depth + 1),
                    _ => Origin::Other,
                }
            }
            "call_expression" => {
                if let Some((recv, method, _)) = method_call(e, self.source) {
                    if method == "contiguous" {
                        return match self.origin(recv, depth + 1) {
                            Origin::Param { index, .. } => Origin::Param {
                                index,
                                contiguous: true,
                            },
                            o => o,
                        };
                    }
                    if ALLOC_FUNCTIONS.contains(&method) {
                        return Origin::Fresh;
                    }
                    return Origin::Other;
                }
                match callee(e, self.source) {
                    Some(name) if ALLOC_FUNCTIONS.contains(&name) => Origin::Fresh,
                    _ => Origin::Other,
                }
            }
            _ => Origin::Other,
        }
    }
}
