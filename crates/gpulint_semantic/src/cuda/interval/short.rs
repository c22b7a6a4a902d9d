//! Bounds narrowed to 16 or 8 bits at a call: a `__device__` helper whose parameter is declared
//! `int16_t` (`short`, `uint16_t`, `int8_t`, `uint8_t`) and compared against an index (`if (col
//! < max_col)`), called with a 32- or 64-bit value that can pass the parameter's limit (a size
//! with no bound in this file, such as `p.num_keys - key_start`). The call wraps the bound: past
//! 32 767 keys the comparison admits or drops the wrong elements.

use super::eval::RangeCx;
use super::width::Width;
use crate::cuda::kernel::{peel, Kernel};
use crate::cuda::CudaModel;
use gpulint_syntax::named_children;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

/// A helper parameter narrower than 32 bits that bounds an index, and a call that passes it a
/// value it cannot hold.
#[derive(Debug, Clone, Copy)]
pub struct ShortBound<'t> {
    /// The parameter declaration.
    pub param: Node<'t>,
    pub name: &'t str,
    /// Its declared type, as written (`int16_t`).
    pub ty: &'t str,
    /// The largest value the type holds.
    pub limit: i128,
    /// The call and the argument it passes.
    pub call: Node<'t>,
    pub arg: Node<'t>,
    /// A comparison in the helper that uses the parameter as a bound.
    pub compared: Node<'t>,
    /// The largest value of the argument, when the launches give every size it depends on.
    pub proven: Option<i128>,
}

/// The largest value of a type narrower than 32 bits, else `None`.
fn short_limit(ty: &str) -> Option<i128> {
    let t = ty.replace("const", "").replace("volatile", "");
    let t: Vec<&str> = t.split_whitespace().collect();
    match t.join(" ").as_str() {
        "int16_t" | "short" | "short int" | "signed short" | "std::int16_t" => {
            Some(i16::MAX as i128)
        }
        "uint16_t" | "unsigned short" | "unsigned short int" | "std::uint16_t" => {
            Some(u16::MAX as i128)
        }
        "int8_t" | "std::int8_t" => Some(i8::MAX as i128),
        "uint8_t" | "std::uint8_t" => Some(u8::MAX as i128),
        _ => None,
    }
}

impl<'t> CudaModel<'t> {
    /// Helper parameters narrower than 32 bits that bound an index and receive, at a call in
    /// this file, a value that can pass their limit (see the module documentation). One per
    /// parameter.
    pub fn short_bounds(&self) -> Vec<ShortBound<'t>> {
        let mut out = Vec::new();
        for h in &self.helpers {
            if h.too_large {
                continue;
            }
            let f = &self.functions[h.function];
            if f.space.global {
                continue;
            }
            let callee = crate::cuda::last_name(&f.name);
            for (pos, p) in h.params.iter().enumerate() {
                if p.pointer || p.node.has_error() {
                    continue;
                }
                let Some(ty) = p.node.field("type").map(|t| self.text(t)) else {
                    continue;
                };
                // `int16_t& x` is an out-parameter, not a bound passed in.
                if p.node
                    .field("declarator")
                    .is_some_and(|d| d.kind_name() != "identifier")
                {
                    continue;
                }
                let Some(limit) = short_limit(ty) else {
                    continue;
                };
                let Some(compared) = bound_use(h, p.name, self.source) else {
                    continue;
                };
                if let Some(b) = self.short_call(h, pos, callee, limit) {
                    let (call, arg, proven) = b;
                    out.push(ShortBound {
                        param: p.node,
                        name: p.name,
                        ty: ty.trim(),
                        limit,
                        call,
                        arg,
                        compared,
                        proven,
                    });
                }
            }
        }
        out
    }

    /// The first call to helper `h` whose argument at `pos` can pass `limit`: the call, the
    /// argument, and its largest value when every size it depends on is known.
    fn short_call(
        &self,
        h: &Kernel<'t>,
        pos: usize,
        callee: &str,
        limit: i128,
    ) -> Option<(Node<'t>, Node<'t>, Option<i128>)> {
        for call in self.calls_to(callee) {
            if call.node.has_error() {
                continue;
            }
            let Some(caller) = self.code_of_function(call.caller) else {
                continue;
            };
            let Some(args) = call.node.field("arguments") else {
                continue;
            };
            let args: Vec<Node<'t>> = named_children(args)
                .filter(|a| a.kind_name() != "comment")
                .collect();
            // Another overload, or defaults in play: the position is not this parameter.
            if args.len() != h.params.len() {
                continue;
            }
            let arg = args[pos];
            if !self.wide_value(caller, arg) {
                continue;
            }
            let cx = RangeCx::new(self, caller);
            let range = cx.range(arg, &cx.point(call.guard, call.node.start_byte()));
            let ranges = |a: &str| cx.atom_range(a);
            match range.hi.map(|b| b.poly) {
                None => return Some((call.node, arg, None)),
                Some(hi) => {
                    let (_, max) = hi.interval(&ranges);
                    if max <= limit {
                        continue;
                    }
                    let proven = hi.atoms().all(|a| cx.atom_known(a)).then_some(max);
                    return Some((call.node, arg, proven));
                }
            }
        }
        None
    }

    /// Is `arg` a value of at least 32 bits in `caller`, not a constant, a cast, a call, or a
    /// name declared narrower than 32 bits?
    fn wide_value(&self, caller: &Kernel<'t>, arg: Node<'t>) -> bool {
        let a = arg;
        if matches!(
            a.kind_name(),
            "cast_expression" | "call_expression" | "number_literal" | "char_literal"
        ) || a.has_error()
        {
            return false;
        }
        if a.kind_name() == "identifier" {
            let name = self.text(a);
            let declared = caller
                .param(name)
                .and_then(|p| p.node.field("type"))
                .map(|t| self.text(t))
                .or_else(|| caller.types.get(name).copied());
            if declared.is_none_or(|t| short_limit(t).is_some()) {
                return false;
            }
        }
        if self.eval(peel(a)).is_some() {
            return false;
        }
        matches!(self.width(caller, a), Width::W32 { .. } | Width::W64)
    }
}

/// A relational comparison in `h` with parameter `name` alone on one side (`col < max_col`).
fn bound_use<'t>(h: &Kernel<'t>, name: &str, source: &str) -> Option<Node<'t>> {
    let body = h.node.field("body")?;
    gpulint_syntax::descendants(body).take(1 << 14).find(|n| {
        n.kind_name() == "binary_expression"
            && n.field("operator")
                .is_some_and(|o| matches!(o.kind_name(), "<" | "<=" | ">" | ">="))
            && match (n.field("left").map(peel), n.field("right").map(peel)) {
                (Some(l), Some(r)) => {
                    let is_param = |s: Node<'_>| {
                        s.kind_name() == "identifier" && gpulint_syntax::text(s, source) == name
                    };
                    // The other side varies: an index, not a constant (`max_col > 0`).
                    (is_param(l) && r.kind_name() != "number_literal")
                        || (is_param(r) && l.kind_name() != "number_literal")
                }
                _ => false,
            }
    })
}
