//! Findings of CU001 and CU002 for indices that can leave their buffer (from the interval facts
//! of the semantic model): the message names the index's range, the guard that fails to cover
//! it, and where the buffer's extent comes from.

use super::short;
use super::SANITIZER;
use crate::context::Context;
use gpulint_diagnostics::Span;
use gpulint_semantic::cuda::guards::compact;
use gpulint_semantic::cuda::interval::Poly;
use gpulint_semantic::cuda::interval::{Extent, OutOfRange};
use gpulint_semantic::cuda::{CudaModel, Kernel};
use gpulint_syntax::NodeExt;

/// Does the pointer parameter `base` point at integers (`int*`, `int64_t*`, `long*`)? Offset
/// tables (`rowptr`, `cu_seqlens`, `indptr`) are integers and hold `n + 1` entries by
/// construction, so `p[i + 1]` under `i < n` and `p[i]` under `i <= n` are their idiom.
pub(super) fn integral_pointer(m: &CudaModel<'_>, k: &Kernel<'_>, base: &str) -> bool {
    k.param(base)
        .and_then(|p| p.node.field("type"))
        .is_some_and(|t| {
            let t = m.text(t);
            t.contains("int") || t.contains("long") || t.contains("size_t") || t == "index_t"
        })
}

/// Reports out-of-range accesses, one finding per index expression (same guard and index
/// through several pointers: `y[i] = s * x[i]`), at the first.
pub(super) fn report_grouped<'t>(
    ctx: &mut Context<'_>,
    m: &CudaModel<'t>,
    k: &Kernel<'t>,
    found: &[&OutOfRange<'t>],
) {
    let mut groups: Vec<(String, bool, Vec<&OutOfRange<'t>>)> = Vec::new();
    for v in found {
        let a = &k.accesses[v.access];
        let key = compact(m.text(a.index.unwrap_or(a.node)));
        match groups
            .iter_mut()
            .find(|(k, upper, _)| *k == key && *upper == v.upper)
        {
            Some(g) => g.2.push(v),
            None => groups.push((key, v.upper, vec![v])),
        }
    }
    for (_, _, g) in groups {
        report(ctx, m, k, g[0], &g[1..]);
    }
}

/// Reports one out-of-range access; `also` are accesses at the same index.
fn report(
    ctx: &mut Context<'_>,
    m: &CudaModel<'_>,
    k: &Kernel<'_>,
    v: &OutOfRange<'_>,
    also: &[&OutOfRange<'_>],
) {
    let also: Vec<Span> = also
        .iter()
        .filter(|o| k.accesses[o.access].node.id() != k.accesses[v.access].node.id())
        .take(3)
        .map(|o| Span::of(&k.accesses[o.access].node))
        .collect();
    let a = &k.accesses[v.access];
    let access = short(m.text(a.node));
    let index = short(m.text(a.index.unwrap_or(a.node)));
    let base = a.base;
    let term = short(m.text(v.term));
    let guard = v.guard.and_then(|g| m.guards.get(g as usize));
    let guard_text = guard
        .map(|g| short(m.source.get(g.label.start..g.label.end).unwrap_or("")))
        .unwrap_or_default();
    let range = v.range.to_string();
    if !v.upper {
        let d = ctx
            .diagnostic(
                a.node,
                format!("`{access}` reads or writes before the start of `{base}`: `{term}` is 0 for the first thread, so the index `{index}` goes down to {}", v.range.lo.as_ref().map(|l| l.poly.to_string()).unwrap_or_default()),
            )
            .primary_label(format!("index ranges over {range}"))
            .note(format!("assuming `{base}` points at the start of its buffer (no launch in this file passes an offset pointer)"))
            .help(format!("start the range past the edge (`if ({term} > 0 && …)`) or clamp the index (`max({index}, 0)`); confirm at run time with `{SANITIZER}`"));
        let d = also.iter().fold(d, |d, s| d.with_label(*s, "also here"));
        ctx.report(d);
        return;
    }
    let (extent, whose) = match &v.extent {
        Extent::Launch {
            launch, extent, ..
        } => (
            extent.to_string(),
            format!(
                "the launch at line {} passes a buffer of {extent} elements",
                m.line_of(launch.start_byte())
            ),
        ),
        Extent::Assumed(e) => (
            e.to_string(),
            format!("assuming `{base}` holds `{e}` elements, the bound the kernel checks (no launch in this file shows its size)"),
        ),
    };
    let reached = match &v.extent {
        Extent::Launch { reached, .. } => reached.to_string(),
        Extent::Assumed(_) => v
            .range
            .hi
            .as_ref()
            .map(|h| h.poly.to_string())
            .unwrap_or_default(),
    };
    // No term of the index is the guarded one (`i = l * n + j` bounded through the loops over
    // `l` and `j`): the index as a whole passes the extent the launch shows.
    let whole =
        !v.guarded_itself && compact(m.text(v.term)) == compact(m.text(a.index.unwrap_or(a.node)));
    let message = if whole {
        format!("`{access}` is indexed past the end of `{base}`: under `{guard_text}`, `{index}` reaches {reached} while `{base}` holds {extent} elements")
    } else if v.guarded_itself {
        format!("`{access}` can access `{base}` at index {reached}, past its last element: `{guard_text}` admits `{term}` up to {reached}, and `{base}` holds {extent} elements")
    } else {
        format!("`{access}` is indexed past the end of `{base}`: `{guard_text}` bounds `{term}`, not `{index}`, which reaches {reached} while `{base}` holds {extent} elements")
    };
    let mut d = ctx
        .diagnostic(a.node, message)
        .primary_label(format!("index ranges over {range}"))
        .note(whose);
    if let Some(g) = guard {
        d = d.with_label(
            g.label,
            if v.guarded_itself {
                "this guard admits one index too many".to_string()
            } else if whole {
                format!("the largest `{index}` follows from this bound")
            } else {
                format!("this guard bounds `{term}`, not `{index}`")
            },
        );
    }
    if let Extent::Launch { launch, .. } = &v.extent {
        d = d.with_label(Span::of(launch), "launched here");
    }
    for s in also {
        d = d.with_label(s, "also here");
    }
    let help = if v.guarded_itself {
        match &v.extent {
            Extent::Assumed(e) => format!(
                "compare with `<`, not `<=`: `if ({term} < {e})`; confirm at run time with `{SANITIZER}`"
            ),
            Extent::Launch { .. } => format!(
                "bound the index by the size of `{base}`, or allocate `{base}` for every index the guard admits; confirm at run time with `{SANITIZER}`"
            ),
        }
    } else {
        format!("check the index that is accessed (`if ({index} < {extent})`), or allocate `{base}` for the largest index; confirm at run time with `{SANITIZER}`")
    };
    ctx.report(d.help(help));
}

/// Reports an offset past the guard at the launch that passes the guard's bound
/// (`ptr2ind<<<…>>>(ptr, …, ptr.numel())` for a kernel that reads `ptr[i + 1]` under
/// `i < numel`): the kernel's code is the idiom, the bound passed is one too large. `false`
/// when the bound is not a parameter of the kernel or the launch is not found.
pub(super) fn report_at_launch(
    ctx: &mut Context<'_>,
    m: &CudaModel<'_>,
    k: &Kernel<'_>,
    v: &OutOfRange<'_>,
) -> bool {
    let Extent::Launch {
        launch,
        extent,
        reached,
    } = &v.extent
    else {
        return false;
    };
    let Some(g) = v.guard.and_then(|g| m.guards.get(g as usize)) else {
        return false;
    };
    let term = compact(m.text(v.term));
    let Some(limit) = g
        .bounds
        .iter()
        .find(|b| compact(m.source.get(b.term.start..b.term.end).unwrap_or("")) == term)
        .and_then(|b| b.limit_node)
    else {
        return false;
    };
    let name = m.text(limit).trim();
    let Some(p) = k.params.iter().position(|p| !p.pointer && p.name == name) else {
        return false;
    };
    let kernel = &m.functions[k.function].name;
    let Some(arg) = m
        .launches_of(kernel)
        .find(|l| l.node.id() == launch.id())
        .and_then(|l| l.args.get(p).copied())
    else {
        return false;
    };
    let a = &k.accesses[v.access];
    let (access, index, base) = (
        short(m.text(a.node)),
        short(m.text(a.index.unwrap_or(a.node))),
        a.base,
    );
    let passed = short(m.text(arg));
    let guard_text = short(m.source.get(g.label.start..g.label.end).unwrap_or(""));
    let fix = reached
        .sub(extent)
        .and_then(|d| d.as_const())
        .and_then(|d| Poly::atom(&passed).add_const(-(d + 1)))
        .map(|p| format!(" (`{p}`)"))
        .unwrap_or_default();
    let d = ctx
        .diagnostic(
            arg,
            format!("launch of `{kernel}` passes `{passed}` as `{name}`, the bound of `{term}`, but the kernel reads `{access}`: `{index}` reaches {reached} while `{base}` holds {extent} elements"),
        )
        .primary_label(format!("`{name}` = {passed}"))
        .with_label(Span::of(&a.node), format!("`{index}` reaches {reached} here"))
        .with_label(g.label, format!("`{guard_text}` bounds `{term}`, not `{index}`"))
        .note(format!("`{base}` is an offset table read at `{term}` and `{index}`: it needs one more entry than the bound admits values of `{term}`"))
        .help(format!("pass a bound that keeps `{index}` below {extent}{fix}, or check `{index} < {name}` in the kernel; confirm at run time with `{SANITIZER}`"));
    ctx.report(d);
    true
}
