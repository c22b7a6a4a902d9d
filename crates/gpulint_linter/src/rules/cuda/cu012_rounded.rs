//! CU012 at an unrolled loop over a rounded count whose rounding leaves a remainder: the last
//! iteration reads past the part of the array that holds data.

use super::short;
use crate::context::Context;
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::cuda::ArraySpace;

/// `r = n & ~2` bounding `for (k = 0; k < r; k += 4)` that reads `a[k + 3]`: reported at the
/// rounding, whose mask must clear every bit below the step.
pub(super) fn check_rounded_bounds(ctx: &mut Context<'_>) {
    let m = ctx.cuda();
    for o in m.rounded_overreads() {
        let (bound, counter, step, rem) = (o.bound, o.counter, o.step, o.remainder);
        let space = if o.space == ArraySpace::Shared {
            "shared"
        } else {
            "per-thread"
        };
        let rounding = short(m.text(o.rounding));
        let d = ctx
            .diagnostic(
                o.rounding,
                format!(
                    "`{bound} = {rounding}` is not always a multiple of {step}, the step of the unrolled loop at line {}: when `{bound} % {step}` is {rem}, its last pass reads {space} array `{}` up to `{counter} + {}`, past `{bound}` and past the elements that hold data",
                    m.line_of(o.looop.start_byte()),
                    o.array,
                    o.reach
                ),
            )
            .primary_label(format!("can leave a remainder of {rem} modulo {step}"))
            .with_label(Span::of(&o.looop), format!("steps `{counter}` by {step} while `{counter} < {bound}`"))
            .with_label(Span::of(&o.read), format!("reads up to `{counter} + {}`", o.reach))
            .severity(Severity::Warning)
            .note("the reads stay inside the array but past the count it was filled to: stale or uninitialised values enter the result")
            .help(format!("round down to a multiple of {step} (`& ~{}`, or `n - n % {step}`) and leave the rest to the remainder loop", step - 1));
        ctx.report(d);
    }
}
