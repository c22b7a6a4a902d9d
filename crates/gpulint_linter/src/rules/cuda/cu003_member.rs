//! CU003 at a struct member's declaration: a member declared 32-bit (`int32_t bias_strideB;`)
//! whose product with a block or thread coordinate is an offset evaluated in 32 bits, where
//! the same function multiplies that coordinate by a 64-bit member (`batch_id * q_strideB`).
//! The fix is to widen the declaration, so the finding is there, once per member.

use super::{short, SANITIZER};
use crate::context::Context;
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::cuda::interval::MemberOverflow;
use gpulint_semantic::cuda::CudaModel;

/// Reports each member of `found` once, in the order of the declarations.
pub(super) fn report<'t>(
    ctx: &mut Context<'_>,
    m: &CudaModel<'t>,
    mut found: Vec<MemberOverflow<'t>>,
) {
    found.sort_by_key(|x| (x.declaration.start_byte(), x.product.start_byte()));
    found.dedup_by_key(|x| x.declaration.id());
    for x in found {
        let ty = m.text(x.type_node).trim();
        let name = x.name;
        let (product, sibling) = (short(m.text(x.product)), short(m.text(x.sibling)));
        let (line, sibling_line) = (
            m.line_of(x.product.start_byte()),
            m.line_of(x.sibling.start_byte()),
        );
        let d = ctx
            .diagnostic(
                x.type_node,
                format!("struct member `{name}` is a 32-bit `{ty}`, and `{product}` (line {line}) multiplies it by a block or thread coordinate in 32 bits into a pointer offset, while `{sibling}` (line {sibling_line}) scales the same coordinate in 64 bits: past 2³¹ − 1 elements the offset wraps and the kernel accesses memory far outside the tensor"),
            )
            .primary_label(format!("32-bit `{ty}`"))
            .with_label(Span::of(&x.product), "offset evaluated in 32 bits")
            .with_label(Span::of(&x.sibling), "the same coordinate scaled in 64 bits")
            .severity(Severity::Warning)
            .help(format!("declare `{name}` as `int64_t`, as the 64-bit offsets of the same coordinate do; confirm at run time with `{SANITIZER}`"));
        ctx.report(d);
    }
}
