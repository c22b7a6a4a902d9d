//! CU003, the grid's element count as a signed 32-bit bound (`const int n_full = gridDim.x *
//! BLOCK_SIZE;` … `i < n_full`): reported at the declaration, whose value must be clamped or
//! kept 64-bit.

use super::{short, SANITIZER};
use crate::context::Context;
use gpulint_diagnostics::{Severity, Span};

/// Report each signed 32-bit bound that counts the elements the whole grid covers.
pub(super) fn check(ctx: &mut Context<'_>) {
    let m = ctx.cuda();
    for k in m.kernels.iter().chain(&m.helpers) {
        for g in m.grid_counts(k) {
            let (name, value) = (g.name, short(m.text(g.value)));
            let line = m.line_of(g.compared.start_byte());
            let d = ctx
                .diagnostic(
                    g.declaration,
                    format!("`{name}` counts the elements the whole grid covers (`{value}`, evaluated in `unsigned`) in a signed 32-bit local, and line {line} compares a thread's index with it: a grid sized for an element count within one block of 2³¹ − 1 covers more, `{name}` turns negative, and blocks whose base index wrapped the same way pass the check with a negative index"),
                )
                .primary_label("the grid's element count, narrowed to signed 32 bits")
                .with_label(Span::of(&g.compared), "compared with a thread's index here")
                .severity(Severity::Warning)
                .help(format!("clamp it (`min({value}, INT32_MAX)`) and keep the index in `int64_t`, or bound the loop by the element count itself; confirm at run time with `{SANITIZER}`"));
            ctx.report(d);
        }
    }
}
