//! CU003 at a struct member declared 32-bit (or at the alias it takes its type from) that host
//! code fills with tensor strides: `params.q_batch_stride = q.stride(0);` with `uint32_t
//! q_batch_stride;`. The fix is the declaration, so the finding is there, once per alias or
//! struct, with the stores (in this file or in the files next to a header) in the notes.

use super::{short, SANITIZER};
use crate::context::Context;
use gpulint_diagnostics::Severity;
use gpulint_semantic::cuda::narrow::stores::StrideStore;

/// Stores listed one by one in the notes; the rest are counted.
const LISTED: usize = 12;

fn place(s: &StrideStore) -> String {
    match &s.path {
        Some(p) => format!("{}:{}", p.display(), s.line),
        None => format!("line {}", s.line),
    }
}

pub(super) fn check(ctx: &mut Context<'_>) {
    let m = ctx.cuda();
    for g in m.narrowed_stride_members() {
        let Some(first) = g.stores.first() else {
            continue;
        };
        let ty = g.ty;
        let n = g.members.len();
        let members = if n == 1 {
            format!("struct member `{}`", g.members[0])
        } else {
            format!("{n} struct members (`{}`, …)", g.members[0])
        };
        let subject = match g.alias {
            Some(a) => format!("`{a}` is a 32-bit `{ty}`, and {members} declared through it"),
            None => format!("{members} declared as 32-bit `{ty}`"),
        };
        let verb = if n == 1 && g.alias.is_none() {
            "holds"
        } else {
            "hold"
        };
        let message = format!(
            "{subject} {verb} the outermost strides of tensors of rank three or more (`{}` at {}): a batch stride spans several dimensions, past 2³¹ − 1 elements it wraps, and the kernels that scale coordinates by it index out of range",
            short(&first.text),
            place(first)
        );
        let label = match g.alias {
            Some(a) => format!("`{a}` is 32-bit"),
            None => format!("32-bit `{ty}`"),
        };
        let fix = match g.alias {
            Some(a) => format!("declare `{a}` as `int64_t`"),
            None => "declare the stride members as `int64_t`".to_string(),
        };
        let mut d = ctx
            .diagnostic(g.at, message)
            .primary_label(label)
            .severity(Severity::Warning)
            .help(format!("{fix}, or check first: `TORCH_CHECK(x.stride(0) <= std::numeric_limits<int>::max())`; confirm at run time with `{SANITIZER}`"));
        let listed: Vec<String> = g
            .stores
            .iter()
            .take(LISTED)
            .map(|s| format!("{} `{}`", place(s), short(&s.text)))
            .collect();
        let mut note = format!("strides stored: {}", listed.join(", "));
        if g.stores.len() > LISTED {
            note.push_str(&format!(", and {} more", g.stores.len() - LISTED));
        }
        d = d.note(note);
        ctx.report(d);
    }
}
