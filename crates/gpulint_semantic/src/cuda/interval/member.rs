//! Members of the enclosing class read without `this->` in a member function (`attn_bias_ptr
//! += batch_id * bias_strideB;` in a `__device__` method of `struct Params { int32_t
//! bias_strideB; … }`), with the type their declaration in the class body gives; and the member
//! declarations whose 32-bit type makes an offset product overflow.
//!
//! A member is the place to widen when a product of a block or thread coordinate with it is
//! evaluated in 32 bits while the same function multiplies that coordinate by a 64-bit value
//! elsewhere (`query_ptr += batch_id * q_strideB;` with `int64_t q_strideB`): the code already
//! treats coordinate × stride as a 64-bit offset, and this stride was left 32-bit.

use super::overflow::{declared_pointer, product_factors, Overflow, OverflowKind};
use super::width::Width;
use crate::cuda::kernel::{peel, Kernel};
use crate::cuda::CudaModel;
use gpulint_syntax::NodeExt;
use gpulint_syntax::{descendants, named_children};
use tree_sitter::Node;

/// A struct member declared 32-bit whose products with a coordinate overflow.
#[derive(Debug, Clone, Copy)]
pub struct MemberOverflow<'t> {
    /// The member's `field_declaration`.
    pub declaration: Node<'t>,
    /// Its type node (where the finding points).
    pub type_node: Node<'t>,
    pub name: &'t str,
    /// The 32-bit product with the coordinate.
    pub product: Node<'t>,
    /// A product of the same coordinate that the function evaluates in 64 bits.
    pub sibling: Node<'t>,
}

/// The name a member declarator declares, and whether it is a pointer (`T* p = nullptr;`,
/// `int32_t n = 0;`, `int sizes[N];`).
fn member_name(d: Node<'_>) -> Option<(Node<'_>, bool)> {
    let mut d = d;
    let mut pointer = false;
    for _ in 0..4 {
        match d.kind_name() {
            "field_identifier" => return Some((d, pointer)),
            "pointer_declarator" => {
                pointer = true;
                d = d.field("declarator")?;
            }
            "array_declarator" => d = d.field("declarator")?,
            _ => return None,
        }
    }
    None
}

/// What a class member declaration says of the member.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MemberDecl<'t> {
    /// The `field_declaration`.
    pub node: Node<'t>,
    pub pointer: bool,
    /// `static constexpr int kStride = …;`, `static const int …`: a compile-time constant.
    pub constant: bool,
}

impl<'t> CudaModel<'t> {
    /// The body (`field_declaration_list`) of the class that defines function `k` inline.
    fn class_body(&self, k: &Kernel<'t>) -> Option<Node<'t>> {
        let mut p = self.parent(self.functions[k.function].node)?;
        if p.kind_name() == "template_declaration" {
            p = self.parent(p)?;
        }
        (p.kind_name() == "field_declaration_list").then_some(p)
    }

    /// The declaration of `name` as a member of the class whose body defines `k`, when `k`
    /// reads it without `this->` (it is not a parameter or a declared local).
    pub(crate) fn implicit_member(&self, k: &Kernel<'t>, name: &str) -> Option<MemberDecl<'t>> {
        if k.param(name).is_some() || k.types.contains_key(name) {
            return None;
        }
        let body = self.class_body(k)?;
        named_children(body)
            .filter(|c| c.kind_name() == "field_declaration")
            .find_map(|d| {
                let (_, pointer) = named_children(d)
                    .filter_map(member_name)
                    .find(|(n, _)| self.text(*n) == name)?;
                let constant = named_children(d).any(|c| {
                    matches!(c.kind_name(), "type_qualifier" | "storage_class_specifier")
                        && matches!(self.text(c), "constexpr" | "static")
                });
                Some(MemberDecl {
                    node: d,
                    pointer,
                    constant,
                })
            })
    }

    /// The width of the implicit member `name` of `k` (see [`CudaModel::implicit_member`]):
    /// a compile-time constant takes the other operand's type.
    pub(super) fn implicit_member_width(&self, k: &Kernel<'t>, name: &str) -> Width {
        match self.implicit_member(k, name) {
            Some(m) if m.constant => Width::Constant,
            Some(m) if !m.pointer => m
                .node
                .field("type")
                .map(|t| self.resolved_width(self.text(t)))
                .unwrap_or(Width::Unknown),
            _ => Width::Unknown,
        }
    }

    /// Does the value of `e` read a data member of `k`'s class without `this->`?
    pub fn reads_implicit_member(&self, k: &Kernel<'t>, e: Node<'t>) -> bool {
        std::iter::once(e)
            .chain(descendants(e))
            .filter(|n| n.kind_name() == "identifier")
            .any(|n| {
                self.implicit_member(k, self.text(n))
                    .is_some_and(|m| !m.constant && !m.pointer)
            })
    }

    /// Offsets added to pointers in place, as (assignment, offset): `src += first_batch *
    /// element_count;` on a pointer parameter, `g += chunk_idx * chunk_size;` on a pointer
    /// local, `query_ptr += batch_id * q_strideB;` on a pointer member of the method's class.
    pub(super) fn pointer_advances(&self, k: &Kernel<'t>) -> Vec<(Node<'t>, Node<'t>)> {
        let mut out = Vec::new();
        for &n in &k.advances {
            let (Some(l), Some(r)) = (n.field("left"), n.field("right")) else {
                continue;
            };
            let name = self.text(l);
            let pointer = match k.param(name) {
                Some(p) => p.pointer,
                None => {
                    k.local(name)
                        .is_some_and(|v| k.defs[v].iter().any(|d| declared_pointer(self, *d)))
                        || self.implicit_member(k, name).is_some_and(|m| m.pointer)
                }
            };
            if pointer {
                out.push((n, r));
            }
        }
        out
    }

    /// The struct members of `k`'s class declared 32-bit whose products with a block or
    /// thread coordinate overflow in `found` (the overflows of `k`), where most pointer
    /// offsets of `k` that scale that coordinate do so in 64 bits (see the module
    /// documentation). Every such product; the finding goes to the member's declaration.
    pub fn member_overflows(
        &self,
        k: &Kernel<'t>,
        found: &[Overflow<'t>],
    ) -> Vec<MemberOverflow<'t>> {
        let mut out: Vec<MemberOverflow<'t>> = Vec::new();
        let mut terms: Option<Vec<Node<'t>>> = None;
        for o in found {
            if o.kind != OverflowKind::IndexProduct {
                continue;
            }
            let (Some(l), Some(r)) = (o.node.field("left"), o.node.field("right")) else {
                continue;
            };
            for (member, coord) in [(l, r), (r, l)] {
                let (member, coord) = (peel(member), peel(coord));
                if !matches!(coord.kind_name(), "identifier" | "field_expression")
                    || !k.flags(self, coord).thread_dependent()
                {
                    continue;
                }
                let Some((decl, name)) = self.member_declaration(k, member) else {
                    continue;
                };
                let Some(type_node) = decl.field("type") else {
                    continue;
                };
                if !matches!(self.resolved_width(self.text(type_node)), Width::W32 { .. }) {
                    continue;
                }
                // The additive terms of the pointer offsets (and of the pointers built as
                // `base + offset`), collected once per function.
                let terms = terms.get_or_insert_with(|| {
                    let mut t = Vec::new();
                    for (_, r) in self.pointer_advances(k) {
                        additive_terms(r, &mut t);
                    }
                    // Pointer locals built as `base + offset`.
                    for d in k.defs.iter().flatten() {
                        if declared_pointer(self, *d) {
                            additive_terms(*d, &mut t);
                        }
                    }
                    t
                });
                // The product is (part of) a pointer offset.
                let p = o.node;
                let offset = terms.iter().any(|t| {
                    t.start_byte() <= p.start_byte()
                        && p.end_byte() <= t.end_byte()
                        && product_factors(*t).len() >= 2
                });
                if !offset {
                    continue;
                }
                if let Some(sibling) = self.mostly_wide(k, terms, self.text(coord)) {
                    out.push(MemberOverflow {
                        declaration: decl,
                        type_node,
                        name,
                        product: o.node,
                        sibling,
                    });
                }
            }
        }
        out
    }

    /// The declaration in this file of the struct member `e` reads, with its name: a data
    /// member of `k`'s class read without `this->`, or the field of a member access
    /// (`p.bias_strideB`) declared once in this file.
    fn member_declaration(&self, k: &Kernel<'t>, e: Node<'t>) -> Option<(Node<'t>, &'t str)> {
        match e.kind_name() {
            "identifier" => {
                let name = self.text(e);
                let m = self.implicit_member(k, name)?;
                (!m.pointer && !m.constant).then_some((m.node, name))
            }
            "field_expression" => {
                let name = self.text(e.field("field")?);
                (self.fields.get(name)?.len() == 1).then_some(())?;
                Some((self.field_declaration(name)?, name))
            }
            _ => None,
        }
    }

    /// Among the offset `terms` that multiply coordinate `coord` by something else, are those
    /// evaluated in 64 bits at least two and more than those evaluated in 32 bits? The first
    /// 64-bit one, if so. Terms are told apart by their text.
    fn mostly_wide(&self, k: &Kernel<'t>, terms: &[Node<'t>], coord: &str) -> Option<Node<'t>> {
        let mut wide: Vec<(Node<'t>, &'t str)> = Vec::new();
        let mut narrow: Vec<&'t str> = Vec::new();
        for t in terms {
            let factors = product_factors(*t);
            if factors.len() < 2 || !factors.iter().any(|f| self.text(*f) == coord) {
                continue;
            }
            let text = self.text(*t);
            match self.width(k, *t) {
                Width::W64 if !wide.iter().any(|(_, x)| *x == text) => wide.push((*t, text)),
                Width::W32 { .. } if !narrow.contains(&text) => narrow.push(text),
                _ => {}
            }
        }
        (wide.len() >= 2 && wide.len() > narrow.len()).then(|| wide[0].0)
    }
}

/// The terms of a sum (`a * s + b * t - c` → `a * s`, `b * t`, `c`), through parentheses.
fn additive_terms<'t>(e: Node<'t>, out: &mut Vec<Node<'t>>) {
    let e = peel(e);
    let sum = e.kind_name() == "binary_expression"
        && e.field("operator")
            .is_some_and(|o| matches!(o.kind_name(), "+" | "-"));
    match (sum, e.field("left"), e.field("right")) {
        (true, Some(l), Some(r)) if out.len() < 256 => {
            additive_terms(l, out);
            additive_terms(r, out);
        }
        _ => out.push(e),
    }
}
