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
    /// Under a guard or early exit on the thread index, the range is the one the guards leave,
    /// when its upper end is a constant: `if (threadIdx.x < col_size)` with `const int col_size
    /// = min(n - start, 64)` caps the thread at 63, so `block_boxes[threadIdx.x * 6 + 5]` in a
    /// buffer of `64 * 5` floats reaches 383 (a per-thread stride larger than the array was
    /// sized for). Guards with an equality or a remainder on the thread index (`threadIdx.x % 4
    /// == 0`) narrow the threads below what a range describes and keep the access silent, as do
    /// lower ends reached only through the guards.
    ///
    /// A work list refilled pass after pass is followed through the function's statements:
    /// loops with a constant start and step one iteration at a time, counters incremented
    /// inside them, assignments, `min`/`max`, and the values the file's device functions
    /// return. When the count of one pass bounds the loop of the next (`num = filled;` at the
    /// end of a pass, `for (i = 0; i < num; ++i)` in the next), the count can grow each pass,
    /// and an index that follows it past a fixed buffer (`Tri next[100]` filled by up to two
    /// pieces per item, five passes) is reported. Counts that only reach the extent when
    /// every data-dependent test of a single pass succeeds are not reported.
    ///
    /// An unrolled loop over a rounded count is checked against the rounding: with `int
    /// main_end = count & ~2;` bounding `for (int k = 0; k < main_end; k += 4)` whose body
    /// reads `tile[k + u]` for `u < 4`, `main_end % 4` can be 1, and the last pass reads three
    /// elements past `main_end` and past `count`, the elements that were filled. The rounding
    /// (`n & ~c`, `n - n % q`, `n / q * q`, `(n >> p) << p`, defined once) is reported, as a
    /// warning: the reads stay inside the array but return stale data. A mask that clears
    /// every bit below the step (`& ~3` or `& ~7` for a step of 4), a body that reads no
    /// farther than the smallest remainder, or a counter that does not start on a multiple of
    /// the step keeps it silent.
    ///
    /// Indices from run-time values, block sizes not known (`<<<g, threads>>>` with `threads` a
    /// parameter), counters changed inside their loop, uses under a condition that mentions the
    /// counter (`if (k < 8)`), and thread indices under a guard whose bound the file does not
    /// give (`if (threadIdx.x < count)`) are not reported: their range is not known.
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
            while base.kind_name() == "subscript_expression" && dim < 8 {
                let Some(inner) = base.field("argument") else {
                    break;
                };
                innermost = base;
                base = inner;
                dim += 1;
            }
            if base.kind_name() != "identifier" {
                continue;
            }
            let name = m.text(base);
            // The nearest declaration of that name before the use, in this function.
            let Some(array) = m
                .arrays_of(fi)
                .filter(|a| a.name == name && a.decl.end_byte() <= sub.start_byte())
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
            // A range from the block size, a warning when the size is only the
            // `__launch_bounds__` maximum. Under a guard on the thread coordinates, the range
            // the guards leave (`if (threadIdx.x < col_size)` with `col_size <= 64`), when its
            // ends are constants.
            let threads = m.thread_names(func, index);
            let guarded = !threads.is_empty() && m.thread_index_guarded(func, innermost, &threads);
            let simple = if guarded {
                None
            } else {
                m.index_range(func, index)
            };
            let mut stepped = false;
            let (lo, hi, from_guards) = match simple {
                Some((lo, hi)) => (lo, hi, false),
                None if !threads.is_empty() => {
                    match m.guarded_constant_range(fi, innermost, index) {
                        Some((lo, hi)) => (lo, hi, true),
                        None => continue,
                    }
                }
                // Counters and values carried through the function's statements and loops.
                None => match m.stepped_index_range(fi, sub) {
                    Some((lo, hi)) => {
                        stepped = true;
                        (lo, hi, false)
                    }
                    None => continue,
                },
            };
            // From the guards, the upper side only: a ternary or a clamp below the guard
            // (`t > 0 ? t - 1 : t`) keeps intervals from the lower bound.
            if (lo >= 0 || from_guards) && hi < extent {
                continue;
            }
            let block = if !threads.is_empty() && !from_guards {
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
                None if from_guards => d
                    .note("the range is what the guards on the thread coordinates that hold here leave")
                    .help("size the array by the largest index the guards allow, or tighten the guard; confirm at run time with `compute-sanitizer --tool memcheck ./your_app`"),
                None if stepped => d
                    .note(format!("the range follows `{}` statement by statement: assignments, loops with a constant start and step, counters incremented inside them, and the values the file's device functions return", func.name))
                    .help(format!("clamp the count before indexing (`min(count, {extent})`) or size the array for the largest count; confirm at run time with `compute-sanitizer --tool memcheck ./your_app`")),
                None => d.help("fix the loop bound or the array extent (`k < N`, not `k <= N`); confirm at run time with `compute-sanitizer --tool memcheck ./your_app`"),
            };
            ctx.report(d);
        }
        super::cu012_rounded::check_rounded_bounds(ctx);
    }
}
