//! CU003 in host glue: 64-bit element counts narrowed to 32 bits before a launch.

use super::short;
use super::SANITIZER;
use crate::context::Context;
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::cuda::narrow::{checks_int32_before, method_name, narrowing_of, COUNT_CALLS};
use gpulint_semantic::cuda::CudaModel;
use gpulint_syntax::descendants;
use gpulint_syntax::NodeExt;
use std::collections::{HashMap, HashSet};
use tree_sitter::Node;

/// Host glue that narrows a 64-bit element count to 32 bits and passes it to a launch in this
/// file, with no check against the 32-bit limit before the launch.
pub(super) fn check_glue(ctx: &mut Context<'_>) {
    let m = ctx.cuda();
    // Sizes narrowed one by one, then multiplied in 32 bits: an element count.
    for (decl, product) in m.narrowed_size_products() {
        let line = m.line_of(product.start_byte());
        let d = ctx
            .diagnostic(
                decl,
                format!(
                    "`{}` narrows a tensor size to 32 bits, and `{}` (line {line}) multiplies it with another in 32 bits: that element count wraps past 2³¹ − 1",
                    short(m.text(decl)),
                    short(m.text(product))
                ),
            )
            .primary_label("narrowed to 32 bits")
            .with_label(Span::of(&product), "32-bit element count")
            .severity(Severity::Warning)
            .help(format!("keep the sizes in `int64_t`; confirm at run time with `{SANITIZER}`"));
        ctx.report(d);
    }
    // Element counts stored in 32-bit struct members (`tl.sizes[t] = x.numel();` with `int
    // sizes[N];`): reported at the member's declaration when it is in this file.
    for n in m.narrowed_count_fields() {
        let line = m.source[..n.assignment.start_byte()].matches('\n').count() + 1;
        let at = n
            .declaration
            .and_then(|d| d.child_by_field_name("type"))
            .unwrap_or(n.assignment);
        let d = ctx
            .diagnostic(
                at,
                format!(
                    "struct member `{}` is a 32-bit `{}`, but line {line} stores an element count in it (`{}`): past 2³¹ − 1 elements it wraps and the kernels that read it index out of range",
                    n.field,
                    n.ty,
                    short(m.text(n.assignment))
                ),
            )
            .primary_label(format!("32-bit `{}`", n.ty))
            .with_label(Span::of(&n.assignment), "64-bit element count stored here")
            .severity(Severity::Warning)
            .help(format!("declare `{}` as `int64_t`, or check first: `TORCH_CHECK(x.numel() <= std::numeric_limits<int>::max())`; confirm at run time with `{SANITIZER}`", n.field));
        ctx.report(d);
    }
    // Counts narrowed by the call itself: `kernel<<<…>>>(…, x.numel())` into an `int n`.
    let mut params: Vec<usize> = Vec::new();
    for n in m.narrowed_launch_args() {
        if params.contains(&n.param.id()) {
            continue;
        }
        params.push(n.param.id());
        let what = if n.count {
            "a 64-bit element count"
        } else {
            "a product of 64-bit tensor sizes"
        };
        let line = m.line_of(n.launch.start_byte());
        let d = ctx
            .diagnostic(
                n.param,
                format!(
                    "kernel parameter `{}` is a 32-bit `{}`, but the launch at line {line} passes `{}`, {what}: past 2³¹ − 1 elements it wraps and the kernel indexes out of range",
                    short(m.text(n.param)),
                    n.ty,
                    short(m.text(n.arg))
                ),
            )
            .primary_label(format!("narrowed to `{}` by the call", n.ty))
            .with_label(Span::of(&n.arg), "64-bit value passed here")
            .severity(if n.count { Severity::Error } else { Severity::Warning })
            .help(format!("declare the parameter `int64_t` (and the index computed from it), or check first: `TORCH_CHECK({} <= std::numeric_limits<int>::max())`; confirm at run time with `{SANITIZER}`", short(m.text(n.arg))));
        ctx.report(d);
    }
    let src = m.source;
    let computes = m.tf_computes();
    let mut seen: Vec<usize> = Vec::new();
    // What each value narrows, asked once across the launches.
    type Narrowed<'t> = Option<(Node<'t>, &'t str, &'static str, bool)>;
    let mut narrowed: HashMap<(usize, bool), Narrowed<'_>> = HashMap::new();
    let mut limits = Default::default();
    for l in &m.launches {
        if l.node.has_error() {
            continue;
        }
        let Some(func) = m.enclosing_function(l.node) else {
            continue;
        };
        if func.space.global || func.space.device {
            continue;
        }
        // `TORCH_CHECK(n <= INT_MAX)`, `canUse32BitIndexMath(x)`, … before the launch.
        if checks_int32_before(&mut limits, src, func.node, l.node.start_byte()) {
            continue;
        }
        // TF op kernels: OP005 reports the narrowed `NumElements()`.
        let in_tf_op = computes
            .iter()
            .any(|c| m.functions[c.function].node.id() == func.node.id());
        // The expressions that reach the kernel: its arguments, and one step back through
        // the locals they name (`int n = x.numel(); int count = n * 2;`). A count that only
        // sizes the grid is not an index the kernel uses.
        // Each value once, at its first place (later ones name no other narrowing), and the
        // locals of each followed once: a function with many launches and many assignments
        // to one name would otherwise walk the same expressions again and again.
        let mut values: Vec<(Node<'_>, Option<Node<'_>>)> = Vec::new();
        let mut listed: HashSet<usize> = HashSet::new();
        let mut followed: HashSet<usize> = HashSet::new();
        for e in &l.args {
            if listed.insert(e.id()) {
                values.push((*e, None));
            }
        }
        for e in &l.args {
            for id in descendants(*e)
                .take(256)
                .filter(|n| n.kind_name() == "identifier")
            {
                for v in m.host_values_at(l, m.text(id)) {
                    if listed.insert(v.id()) {
                        values.push((v, Some(id)));
                    }
                    if !followed.insert(v.id()) {
                        continue;
                    }
                    for id2 in descendants(v)
                        .take(256)
                        .filter(|n| n.kind_name() == "identifier")
                    {
                        for v2 in m.host_values_at(l, m.text(id2)) {
                            if listed.insert(v2.id()) {
                                values.push((v2, Some(id)));
                            }
                        }
                    }
                }
            }
        }
        for (v, via) in values {
            let found = *narrowed
                .entry((v.id(), in_tf_op))
                .or_insert_with(|| narrowed_count(m, v, in_tf_op));
            let Some((narrow, ty, what, count)) = found else {
                continue;
            };
            if seen.contains(&narrow.id()) {
                continue;
            }
            seen.push(narrow.id());
            let mut d = ctx
                .diagnostic(
                    narrow,
                    format!(
                        "`{}` narrows {what} to a 32-bit `{ty}` that reaches the launch of `{}`, with no check against the 32-bit limit: past 2³¹ − 1 elements it wraps and the kernel indexes out of range",
                        short(m.text(narrow)),
                        l.kernel
                    ),
                )
                .primary_label(format!("narrowed to `{ty}`"))
                .with_label(
                    via.map(|n| Span::of(&n)).unwrap_or(Span::of(&l.node)),
                    "passed to the kernel launch here",
                );
            if !count {
                d = d.severity(Severity::Warning);
            } else {
                d = d.severity(Severity::Error);
            }
            d = d.help(format!(
                "keep sizes in `int64_t`, or check first: `TORCH_CHECK({} <= std::numeric_limits<int>::max(), \"tensor too large for 32-bit indexing\");`; confirm at run time with `{SANITIZER}`",
                short(m.text(v))
            ));
            ctx.report(d);
        }
    }
}

/// If `v` narrows an element count (`x.numel()`, `t.NumElements()`) or a product of three or
/// more sizes (`x.size(0) * x.size(1) * x.size(2)`) to 32 bits: the narrowing node, the type,
/// what was narrowed, and whether it is a full element count.
fn narrowed_count<'t>(
    m: &CudaModel<'t>,
    v: Node<'t>,
    in_tf_op: bool,
) -> Option<(Node<'t>, &'t str, &'static str, bool)> {
    let src = m.source;
    let calls: Vec<Node<'t>> = std::iter::once(v)
        .chain(descendants(v).take(256))
        .filter(|n| n.kind_name() == "call_expression")
        .collect();
    for c in &calls {
        let Some(name) = method_name(*c, src) else {
            continue;
        };
        if !COUNT_CALLS.contains(&name) || (in_tf_op && name == "NumElements") {
            continue;
        }
        if let Some((n, ty)) = narrowing_of(m, *c) {
            return Some((n, ty, "the element count", true));
        }
    }
    let sizes: Vec<&Node<'t>> = calls
        .iter()
        .filter(|c| matches!(method_name(**c, src), Some("size" | "dim_size")))
        .collect();
    if sizes.len() >= 3 {
        if let Some((n, ty)) = narrowing_of(m, *sizes[0]) {
            // The whole product is narrowed, not one factor used as an argument.
            let product = descendants(n)
                .filter(|x| x.kind_name() == "call_expression")
                .filter(|x| matches!(method_name(*x, src), Some("size" | "dim_size")))
                .count();
            if product >= 3 {
                return Some((n, ty, "a product of tensor sizes", false));
            }
        }
    }
    None
}
