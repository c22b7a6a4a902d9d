//! CU002: the index a guard checks differs from the index that is accessed.

use super::SANITIZER;
use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::Severity;
use gpulint_semantic::cuda::guards::{compact, sum_terms};
use gpulint_semantic::cuda::interval::{Extent, OutOfRange};
use gpulint_semantic::cuda::{Access, Bound, CudaModel, Guard, Kernel};
use gpulint_syntax::Lang;
use tree_sitter::Node;

declare_rule! {
    /// ## What it does
    /// Finds global-memory accesses inside a bounds guard whose index is the guarded index plus
    /// at least the guard's own bound: under `if (i < n)` (or after `if (i >= n) return;`, or in
    /// a grid-stride loop over `i < n`), an access `out[i + n]`, or `out[i + N]` with a constant
    /// `N` at least the constant bound. The guard proves `i < n`, so the accessed index reaches
    /// up to `2n - 1`.
    ///
    /// It also finds neighbour reads past the guard and below the start of the buffer, from the
    /// range of values the index takes: under `if (i < n)`, `x[i + 1]` reaches `x[n]`, and at the
    /// first thread `in[i - 1]` reads `in[-1]`. The buffer's size comes from the launches in the
    /// same file when they show it (`cudaMalloc(&x, (n + 1) * sizeof(float))` makes `x[i + 1]`
    /// fine); otherwise the bound the kernel checks is taken for the size, for indices that are
    /// the guarded one plus a constant, and the message says so.
    ///
    /// Not reported: accesses checked by a second guard on the accessed index itself
    /// (`if (i + 1 < n)`, `i < n - 1`, `if (i > 0 && i < n)`, `i == 0` handled apart), clamped
    /// ones (`min(i + n, size - 1)`, `max(i - 1, 0)`), sums with more terms
    /// (`x[row * 2 * d + i + d]` spells out a row of `2 * d`), accesses through a pointer offset
    /// into a row, offset tables of integers read at `i` and `i + 1` (`rowptr[r + 1]`: `rows + 1`
    /// entries by construction), kernels that spell out a multiple of the bound (`2 * n`, `3 *
    /// n`, `n << 1`: buffers of several planes of `n`), a left neighbour when a launch passes a
    /// pointer past the start (`in + 1`), and files whose glue allocates a doubled buffer
    /// (`torch::empty({2 * n})`, `size * 2`): concatenation kernels write both halves on purpose.
    ///
    /// ## Why is this risky?
    /// The guard makes the kernel look safe while the write lands past the end of the buffer:
    /// an illegal-address fault (`cudaErrorIllegalAddress`), or heap corruption inside the
    /// framework's caching allocator that shows up later in an unrelated op. Compute Sanitizer's
    /// memcheck tool reports the out-of-bounds access at run time.
    ///
    /// ## Example
    /// ```cuda
    /// __global__ void split(const float2* in, float* out, int size) {
    ///     int i = blockIdx.x * blockDim.x + threadIdx.x;
    ///     if (i < size) {
    ///         out[i] = in[i].x;
    ///         out[i + size] = in[i].y;
    ///     }
    /// }
    /// ```
    ///
    /// ## Use instead
    /// ```cuda
    /// __global__ void split(const float2* in, float* re, float* im, int size) {
    ///     int i = blockIdx.x * blockDim.x + threadIdx.x;
    ///     if (i < size) {
    ///         re[i] = in[i].x;
    ///         im[i] = in[i].y;
    ///     }
    /// }
    /// ```
    /// or allocate `out` with `2 * size` elements where the kernel is launched.
    ///
    /// ## References
    /// - Compute Sanitizer, memcheck tool (out-of-bounds accesses to global memory):
    ///   <https://docs.nvidia.com/compute-sanitizer/ComputeSanitizer/index.html#memcheck-tool>
    /// - CUDA C++ Programming Guide, *Thread Hierarchy* (the guard idiom):
    ///   <https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#thread-hierarchy>
    /// - A real bug of this shape, an index computed differently from the guarded one (CUDA error
    ///   700): <https://github.com/microsoft/onnxruntime/issues/28107>
    pub static CU002 = {
        code: "CU002",
        name: "guard-index-mismatch",
        lang: RuleLang::Source(Lang::Cuda),
        severity: Severity::Error,
        summary: "Access past the guarded range: `out[i + n]` or `x[i + 1]` under `if (i < n)`, or `in[i - 1]` at the first thread",
        kinds: &[],
        needles: &["__global__", "GLOBAL"],
        options: &[],
    };
}

pub struct GuardIndexMismatch;

impl Rule for GuardIndexMismatch {
    fn meta(&self) -> &'static RuleMeta {
        &CU002
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.cuda();
        // Concatenation kernels: the glue sizes the output for both halves.
        if m.doubled_allocations().next().is_some() {
            return;
        }
        for k in &m.kernels {
            if k.node.has_error() || k.too_large {
                continue;
            }
            let mut reported: Vec<usize> = Vec::new();
            for a in k
                .accesses
                .iter()
                .filter(|a| a.global && a.alias_offsets.is_empty())
            {
                if let Some((guard, bound, term)) = mismatch(m, k, a) {
                    report(ctx, m, a, guard, bound, term);
                    reported.push(a.node.id());
                }
            }
            // Offsets past the guard (`x[i + 1]` under `i < n`) and below the start
            // (`in[i - 1]` at the first thread), one finding per pointer and index.
            let found = m.out_of_range(k);
            let offsets: Vec<_> = found
                .iter()
                .filter(|v| !v.guarded_itself)
                .filter(|v| !reported.contains(&k.accesses[v.access].node.id()))
                .filter(|v| !exempt(m, k, v))
                .collect();
            super::bounds::report_grouped(ctx, m, k, &offsets);
        }
    }
}

/// Offsets the kernel's own code shows to be intended, when the extent is only assumed: an
/// offset table read at `i` and `i + 1` (`rowptr`, `offsets`: `n + 1` integers by
/// construction), and kernels that spell out a multiple of the bound (`2 * n`: several planes).
fn exempt(m: &CudaModel<'_>, k: &Kernel<'_>, v: &OutOfRange<'_>) -> bool {
    let Extent::Assumed(extent) = &v.extent else {
        return false;
    };
    if !v.upper {
        return false;
    }
    let a = &k.accesses[v.access];
    if mentions_multiple(m, k, &extent.to_string()) {
        return true;
    }
    let integral = super::bounds::integral_pointer(m, k, a.base);
    let term = compact(m.text(v.term));
    integral
        && k.accesses
            .iter()
            .any(|b| b.base == a.base && b.index.is_some_and(|i| compact(m.text(i)) == term))
}

/// The guard and bound `g < B` such that the access is at `g + T` with `T >= B`.
fn mismatch<'a, 't>(
    m: &'a CudaModel<'t>,
    k: &Kernel<'t>,
    a: &Access<'t>,
) -> Option<(&'a Guard<'t>, &'a Bound<'t>, Node<'t>)> {
    let index = a.index?;
    let terms = sum_terms(index)?;
    if terms.len() != 2 || terms.iter().any(|(_, positive)| !positive) {
        return None;
    }
    let index_text = compact(m.text(index));
    let chain: Vec<&Guard<'t>> = m.guard_chain(a.guard).take(256).collect();
    // A guard on the accessed index itself settles it.
    if chain
        .iter()
        .flat_map(|g| &g.bounds)
        .any(|b| compact(span_text(m, b.term)) == index_text)
    {
        return None;
    }
    for g in &chain {
        for b in &g.bounds {
            let guarded = compact(span_text(m, b.term));
            for (i, (t, _)) in terms.iter().enumerate() {
                if compact(m.text(*t)) != guarded {
                    continue;
                }
                if !k.flags(m, *t).thread_dependent() {
                    continue;
                }
                let other = terms[1 - i].0;
                if reaches_bound(m, k, other, b) && !mentions_multiple(m, k, span_text(m, b.limit))
                {
                    return Some((g, b, other));
                }
            }
        }
    }
    None
}

/// Is `term` at least the guard's bound: the same expression, or a constant at least as
/// large?
fn reaches_bound<'t>(m: &CudaModel<'t>, k: &Kernel<'t>, term: Node<'_>, b: &Bound<'_>) -> bool {
    let limit = compact(span_text(m, b.limit));
    if limit.is_empty() || k.flags(m, term).thread_dependent() {
        return false;
    }
    let t = compact(m.text(term));
    if t == limit || t == format!("({limit})") {
        return true;
    }
    // Two constants.
    match (m.eval(term), b.limit_node.and_then(|n| m.eval(n))) {
        (Some(t), Some(l)) => l > 0 && t >= l,
        _ => false,
    }
}

/// Does the kernel spell out a multiple of the bound (`2 * n`, `n * 3`, `n << 1`, `n + n`)?
/// Then its buffers hold several planes of `n` (structure-of-arrays, concatenations), and
/// `p[i + n]` is the second one.
fn mentions_multiple(m: &CudaModel<'_>, k: &Kernel<'_>, limit: &str) -> bool {
    let limit = compact(limit);
    if limit.is_empty() {
        return false;
    }
    let body = compact(m.text(k.node));
    let ident = |c: char| c.is_alphanumeric() || c == '_' || c == '.';
    let forms = [limit.clone(), format!("({limit})")];
    forms.iter().any(|form| {
        body.match_indices(form.as_str()).any(|(at, _)| {
            let before = &body[..at];
            let after = &body[at + form.len()..];
            if before
                .chars()
                .next_back()
                .is_some_and(|c| ident(c) && c != '.')
                && form == &limit
            {
                return false;
            }
            if after
                .chars()
                .next()
                .is_some_and(|c| c.is_alphanumeric() || c == '_')
                && form == &limit
            {
                return false;
            }
            // `k*n` / `n*k` with a literal k >= 2, `n<<1`, `n+n`.
            let factor_before = before
                .strip_suffix('*')
                .map(|b| {
                    b.chars()
                        .rev()
                        .take_while(char::is_ascii_digit)
                        .collect::<String>()
                })
                .filter(|d| !d.is_empty())
                .map(|d| d.chars().rev().collect::<String>());
            let factor_after = after
                .strip_prefix('*')
                .map(|a| {
                    a.chars()
                        .take_while(char::is_ascii_digit)
                        .collect::<String>()
                })
                .filter(|d| !d.is_empty());
            let big = |d: Option<String>| {
                d.and_then(|d| d.parse::<u64>().ok())
                    .is_some_and(|v| v >= 2)
            };
            big(factor_before)
                || big(factor_after)
                || after.starts_with("<<")
                || after
                    .strip_prefix('+')
                    .is_some_and(|a| a.starts_with(form.as_str()))
        })
    })
}

fn span_text<'t>(m: &CudaModel<'t>, s: gpulint_diagnostics::Span) -> &'t str {
    m.source.get(s.start..s.end).unwrap_or("")
}

fn report(
    ctx: &mut Context<'_>,
    m: &CudaModel<'_>,
    a: &Access<'_>,
    guard: &Guard<'_>,
    b: &Bound<'_>,
    term: Node<'_>,
) {
    let access = m.text(a.node);
    let (g, limit) = (span_text(m, b.term), span_text(m, b.limit));
    let op = if b.inclusive { "<=" } else { "<" };
    let d = ctx
        .diagnostic(
            a.node,
            format!(
                "`{access}` is indexed past the guarded range: the guard proves only `{g} {op} {limit}`, so `{g} + {}` reaches up to twice that",
                m.text(term)
            ),
        )
        .primary_label(format!("index `{}` is not bounded by the guard", m.text(a.index.unwrap_or(a.node))))
        .with_label(guard.label, format!("this guard bounds `{g}`, not `{}`", m.text(a.index.unwrap_or(a.node))))
        .note(format!("unless `{}` holds at least `{limit}` more elements than the guard's bound, the access writes out of bounds", a.base))
        .help(format!(
            "check the accessed index against the buffer's real size (`if ({} < {}_size)`), or allocate `{}` for it where the kernel is launched; confirm at run time with `{SANITIZER}`",
            m.text(a.index.unwrap_or(a.node)),
            a.base,
            a.base
        ));
    ctx.report(d);
}
