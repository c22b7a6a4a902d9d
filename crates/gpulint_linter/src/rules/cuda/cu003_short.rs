//! CU003 at a `__device__` helper's parameter narrower than 32 bits (`int16_t max_col`) that
//! bounds an index and receives a 32- or 64-bit size at a call.

use super::{short, SANITIZER};
use crate::context::Context;
use gpulint_diagnostics::{Severity, Span};

/// Helper parameters narrower than 32 bits (`int16_t max_col`) that bound an index and receive
/// a 32- or 64-bit size at a call: reported at the parameter, whose type must change.
pub(super) fn check_short_bounds(ctx: &mut Context<'_>) {
    let m = ctx.cuda();
    for b in m.short_bounds() {
        let call_line = m.line_of(b.call.start_byte());
        let (name, ty, limit) = (b.name, b.ty, b.limit);
        let arg = short(m.text(b.arg));
        let reach = match b.proven {
            Some(v) => format!("with the sizes at the launches in this file it reaches {v}"),
            None => "it is a size with no bound in this file".to_string(),
        };
        let d = ctx
            .diagnostic(
                b.param,
                format!("parameter `{name}` is a `{ty}` (at most {limit}) and bounds an index (`{}`), but the call at line {call_line} passes `{arg}`: {reach}; past {limit} the call wraps the bound and the comparison lets the wrong elements through", short(m.text(b.compared))),
            )
            .primary_label(format!("narrowed to `{ty}` by the call"))
            .with_label(Span::of(&b.arg), "32-bit or wider value passed here")
            .with_label(Span::of(&b.compared), "the narrowed bound is compared here")
            .severity(if b.proven.is_some() {
                Severity::Error
            } else {
                Severity::Warning
            })
            .help(format!("declare `{name}` as `int` (or `int64_t`), or check the size against {limit} before the call; confirm at run time with `{SANITIZER}`"));
        ctx.report(d);
    }
}
