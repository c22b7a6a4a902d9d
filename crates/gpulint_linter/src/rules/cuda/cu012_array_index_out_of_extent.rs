//! CU012: a constant-size shared or local array indexed past its extent.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::cuda::ArraySpace;
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;

declare_rule! {
    /// ## What it does
    /// Finds subscripts of `__shared__` and per-thread arrays with a constant extent (folded
    /// from literals, `#define`, `constexpr`, `enum` and template arguments known from the
    /// launches in the same file) whose index can reach or pass that extent, or go below zero.
    /// The index range comes from folded constants and the counters of enclosing `for` loops:
    /// `float acc[8]` read at `acc[k]` in `for (int k = 0; k <= 8; ++k)`, or `tile[k + 1]` in
    /// `for (int k = 0; k < 32; ++k)` with `float tile[32]`.
    ///
    /// `threadIdx.x` ranges over the block, and `blockDim.x` is the block size, when the block
    /// size is known: from every launch of the kernel in the same file (`kernel<<<g, 512>>>`,
    /// `dim3 block(16, 16)`, constant template arguments), or else from
    /// `__launch_bounds__(N)`, an upper bound only, which makes the finding a warning. Locals
    /// defined once from them (`const int tid = threadIdx.x;`) carry the same range, and `%`,
    /// `/`, `>>` and `&` by constants narrow it. So `__shared__ float s[256]` written at
    /// `s[threadIdx.x]` in a kernel launched with 512 threads is reported.
    ///
    /// Indices from run-time values, block sizes not known (`<<<g, threads>>>` with `threads` a
    /// parameter), counters changed inside their loop, uses under a condition that mentions the
    /// counter (`if (k < 8)`), and thread indices under a guard or early exit on the thread
    /// index (`if (threadIdx.x < 256)`, `if (tid >= 256) return;`) are not reported: their
    /// range is not known.
    ///
    /// ## Why is this risky?
    /// An out-of-range shared-memory access silently overwrites another array of the block (or
    /// faults with an out-of-range shared address); an out-of-range local access corrupts the
    /// thread's stack. The results are wrong, intermittently, and only Compute Sanitizer's
    /// memcheck tool reports the access at run time.
    ///
    /// ## Example
    /// ```cuda
    /// __global__ void dot8(const float* a, const float* b, float* out) {
    ///     float acc[8];
    ///     for (int k = 0; k <= 8; ++k) acc[k] = a[k] * b[k];
    ///     out[0] = acc[0] + acc[7];
    /// }
    /// ```
    ///
    /// ## Use instead
    /// ```cuda
    /// __global__ void dot8(const float* a, const float* b, float* out) {
    ///     float acc[8];
    ///     for (int k = 0; k < 8; ++k) acc[k] = a[k] * b[k];
    ///     out[0] = acc[0] + acc[7];
    /// }
    /// ```
    ///
    /// ## References
    /// - Compute Sanitizer, memcheck tool (out-of-bounds accesses to shared and local memory):
    ///   <https://docs.nvidia.com/compute-sanitizer/ComputeSanitizer/index.html#memcheck-tool>
    /// - CUDA C++ Programming Guide, *Variable Memory Space Specifiers* (`__shared__`):
    ///   <https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#variable-memory-space-specifiers>
    pub static CU012 = {
        code: "CU012",
        name: "array-index-out-of-extent",
        lang: RuleLang::Source(Lang::Cuda),
        severity: Severity::Error,
        summary: "Constant-size shared or local array indexed beyond its extent",
        kinds: &[],
        needles: &["__global__", "__device__", "GLOBAL", "DEVICE"],
        options: &[],
    };
}

pub struct ArrayIndexOutOfExtent;

impl Rule for ArrayIndexOutOfExtent {
    fn meta(&self) -> &'static RuleMeta {
        &CU012
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.cuda();
        for &(fi, sub) in &m.subscripts {
            if sub.has_error() {
                continue;
            }
            let (Some(mut base), Some(index)) = (
                sub.field("argument"),
                sub.field("indices").and_then(|i| i.named_child(0)),
            ) else {
                continue;
            };
            // `a[i][j]`: the dimension is the number of subscripts below this one.
            let mut dim = 0;
            let mut innermost = sub;
            while base.kind() == "subscript_expression" && dim < 8 {
                let Some(inner) = base.field("argument") else {
                    break;
                };
                innermost = base;
                base = inner;
                dim += 1;
            }
            if base.kind() != "identifier" {
                continue;
            }
            let name = m.text(base);
            // The nearest declaration of that name before the use, in this function.
            let Some(array) = m
                .arrays
                .iter()
                .filter(|a| {
                    a.function == fi && a.name == name && a.decl.end_byte() <= sub.start_byte()
                })
                .max_by_key(|a| a.decl.start_byte())
            else {
                continue;
            };
            if !matches!(array.space, ArraySpace::Local | ArraySpace::Shared) {
                continue;
            }
            let func = &m.functions[fi];
            let Some(Some(extent_node)) = array.extents.get(dim) else {
                continue;
            };
            let Some(extent) = m.eval_in_function(func, *extent_node) else {
                continue;
            };
            if extent <= 0 {
                continue;
            }
            let Some((lo, hi)) = m.index_range(func, index) else {
                continue;
            };
            if lo >= 0 && hi < extent {
                continue;
            }
            // A range from the block size: silent under a guard on the thread coordinates,
            // a warning when the size is only the `__launch_bounds__` maximum.
            let threads = m.thread_names(func, index);
            let block = if !threads.is_empty() {
                if m.thread_index_guarded(func, innermost, &threads) {
                    continue;
                }
                m.block_range(func)
            } else {
                None
            };
            let (what, bad) = if hi >= extent {
                ("reaches", hi)
            } else {
                ("goes down to", lo)
            };
            let space = if array.space == ArraySpace::Shared {
                "shared"
            } else {
                "per-thread"
            };
            let mut d = ctx
                .diagnostic(
                    index,
                    format!(
                        "index `{}` of {space} array `{name}` {what} {bad}, outside its extent {extent} (valid: 0..={})",
                        m.text(index),
                        extent - 1
                    ),
                )
                .primary_label(format!("ranges over {lo}..={hi}"))
                .with_label(Span::of(&array.declarator), format!("`{name}` has {extent} elements in this dimension"))
                .note("out-of-range shared or local accesses silently overwrite neighbouring data or fault with an out-of-range address");
            d = match block {
                Some(b) if b.from_launch => d
                    .note(format!("`{}` runs with blocks of up to {} × {} × {} threads (its launches in this file)", func.name, b.hi[0], b.hi[1], b.hi[2]))
                    .help("size the array by the block size, launch with smaller blocks, or guard the access (`if (threadIdx.x < N)`); confirm at run time with `compute-sanitizer --tool memcheck ./your_app`"),
                Some(b) => d
                    .severity(Severity::Warning)
                    .note(format!("`__launch_bounds__({})` allows blocks of up to {} threads; no launch in this file shows the actual size", b.hi[0], b.hi[0]))
                    .help("size the array by the block size, lower `__launch_bounds__`, or guard the access (`if (threadIdx.x < N)`); confirm at run time with `compute-sanitizer --tool memcheck ./your_app`"),
                None => d.help("fix the loop bound or the array extent (`k < N`, not `k <= N`); confirm at run time with `compute-sanitizer --tool memcheck ./your_app`"),
            };
            ctx.report(d);
        }
    }
}
