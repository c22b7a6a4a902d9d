//! CU008: `__syncthreads()` reached only by some threads of the block.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::Severity;
use gpulint_semantic::cuda::race::{Across, Hazard, MissingBarrier};
use gpulint_semantic::cuda::{CudaModel, Flags, Guard, GuardKind, Kernel};
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;

declare_rule! {
    /// ## What it does
    /// Finds block-wide barriers (`__syncthreads()`, `__syncthreads_count/and/or`,
    /// `this_thread_block().sync()`) in a kernel that sit inside an `if`, `?:`, `&&`/`||` or
    /// loop whose condition differs between the threads of a block: it reads `threadIdx`, or a
    /// variable computed from it (`tid`, `lane`, the global index). A barrier after an early
    /// `if (i >= n) return;` (or `continue`/`break`) on such a condition is reported as a
    /// warning, once per exit, at the first barrier after it.
    ///
    /// Conditions that are the same for the whole block are not reported: `blockIdx`,
    /// `blockDim`, `gridDim`, kernel parameters and constants (`if (blockIdx.x == 0)`,
    /// `for (int s = blockDim.x / 2; s > 0; s >>= 1)`). Loops over a compile-time bound
    /// (`for (col = lane; col < Traits::COLS; col += STRIDE)`, where the bound is chosen as a
    /// multiple of the stride), grid-stride loop macros and macros the analysis does not
    /// understand are not reported either.
    ///
    /// It also reports the other barrier error, a **missing** barrier (a warning): shared
    /// memory (`__shared__` and `extern __shared__` buffers, pointers taken from them or from
    /// an accessor of the file that returns one (`SharedMemory<T>().getPointer()`), and the
    /// scratch-buffer parameters of `__device__` helpers that synchronise the block; a helper
    /// that synchronises only through the helpers it calls is checked for the shared memory
    /// it obtains itself) written by
    /// some threads and then read (read-after-write) or overwritten (write-after-write) by
    /// others with no `__syncthreads()`, `block.sync()` or `cg::sync` on some path between; a
    /// loop whose body reads a buffer after its last barrier while the next iteration
    /// overwrites it first (write-after-read, no trailing barrier); and the same across two
    /// calls of a helper. On global memory (a kernel's writable, non-`volatile` pointer
    /// parameters) one shape only: an element written by one thread (`if (t == 0) out[m] =
    /// v;`) and read by the other threads of the block at the same element, the same index
    /// for the whole block, with no barrier between, also in the next iteration of a loop
    /// whose counter moves the read onto it (`… = out[m - 1]` after `m++`). "Another
    /// thread's element" is decided on the index: the thread's own `threadIdx`-derived index
    /// with the same offset is the same thread, `s[0]` written under `if (tid == 0)` and read
    /// by all is not (nor is `s[0]` read by thread 0 against a
    /// block-stride loop `for (j = tid; …; j += blockDim.x)`), and a guard such as `if (t < s)` in
    /// `s[t] += s[t + s]` keeps the halves apart. Warp-synchronous code (both accesses within
    /// one warp: `tid < 32`, `volatile` buffers, `__syncwarp`, shuffles), atomics, blocks of
    /// one thread and calls that hand the buffer to a library primitive are not reported.
    /// Nor are the shapes where each thread keeps to its own slots although the block size is
    /// not known: `s[t]` against `s[t + k]` with `k` the same for the whole block (`n / 2`,
    /// `blockDim.x`, a reduction's stride) unless the two ranges provably overlap, slots a
    /// stride apart (`s[6 * t]`, `s[6 * t + 1]`), a warp's own slice (`&s[warp * n]`),
    /// partner lanes (`s[t ^ 8]`), a compare-and-swap made by the lower thread of each pair,
    /// and views at multiples of one size (`&s[tile]`, `&s[2 * tile]`). A pair is reported
    /// only where two threads provably meet: per-thread indices that differ in another way
    /// than by an offset the block shares (`s[2 * t]` against `s[t]`, a view chosen by another
    /// thread coordinate, a stride that changes with the loop, places computed from data) are
    /// not, except `s[t]` against `s[n - 1 - t]` with two elements in common and `s[t ^ j]`
    /// against `s[t]`; a guard on another thread value than the index (a tile's rank) leaves
    /// the threads unknown (a guard that relates the thread coordinate to another value of
    /// the index, `if (y >= o && y < 2 * o) s[(y - o) * w + x]`, bounds it by that relation:
    /// here from 0); and a bound that needs the block size (`s[128]` written by thread
    /// 0 against `s[t]`) holds only where the launch in the file gives it. A helper that
    /// cannot be summarised but calls `__syncthreads()` counts as a barrier, and so does
    /// `if (r > 0) __syncthreads();` opening a loop counting from 0, for the iteration before;
    /// a barrier that ends an `if constexpr` (or template-constant) branch with no `else`
    /// counts as reached by every thread, and a condition that folds to a constant compiles
    /// one branch; a library call on storage carved out of the buffer counts as one even where
    /// it does not parse; and an index that moves with the loop counter names another element
    /// in the next iteration.
    ///
    /// ## Why is this risky?
    /// "`__syncthreads()` is allowed in conditional code but only if the conditional evaluates
    /// identically across the entire thread block, otherwise the code execution is likely to hang
    /// or produce unintended side effects." Threads that skip the barrier leave the others
    /// waiting for them, or pair with a different barrier: the kernel hangs (a watchdog reset
    /// on Windows) or computes with shared memory that was not written yet.
    ///
    /// ## Example
    /// ```cuda
    /// __global__ void block_sum(const float* x, float* out, int n) {
    ///     __shared__ float buf[256];
    ///     int i = blockIdx.x * blockDim.x + threadIdx.x;
    ///     if (i < n) {
    ///         buf[threadIdx.x] = x[i];
    ///         __syncthreads();
    ///     }
    ///     if (threadIdx.x == 0) out[blockIdx.x] = buf[0];
    /// }
    /// ```
    ///
    /// ## Use instead
    /// ```cuda
    /// __global__ void block_sum(const float* x, float* out, int n) {
    ///     __shared__ float buf[256];
    ///     int i = blockIdx.x * blockDim.x + threadIdx.x;
    ///     buf[threadIdx.x] = i < n ? x[i] : 0.f;
    ///     __syncthreads();
    ///     if (threadIdx.x == 0) out[blockIdx.x] = buf[0];
    /// }
    /// ```
    ///
    /// ## References
    /// - CUDA C++ Programming Guide, *Synchronization Functions*:
    ///   <https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#synchronization-functions>
    /// - NVIDIA CUDA C++ guideline CUDA-1.14 (Axivion):
    ///   <https://doc.qt.io/axivion/reference/analysis_configuration/CUDA-1.14.html>
    /// - Compute Sanitizer, synccheck tool:
    ///   <https://docs.nvidia.com/compute-sanitizer/ComputeSanitizer/index.html#synccheck-tool>
    pub static CU008 = {
        code: "CU008",
        name: "divergent-barrier",
        lang: RuleLang::Source(Lang::Cuda),
        severity: Severity::Error,
        summary: "`__syncthreads()` under a condition that differs between the threads of a block",
        kinds: &[],
        needles: &["__syncthreads", "this_thread_block", "__shared__", "sync("],
        options: &[],
    };
}

/// Guards further out than this are not searched.
const MAX_CHAIN: usize = 256;

pub struct DivergentBarrier;

impl Rule for DivergentBarrier {
    fn meta(&self) -> &'static RuleMeta {
        &CU008
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.cuda();
        // One warning per early exit: the first barrier after it.
        let mut exits_reported: Vec<gpulint_diagnostics::Span> = Vec::new();
        for b in &m.barriers {
            let Some(k) = m.kernels.get(b.kernel) else {
                continue;
            };
            if k.too_large || k.node.has_error() {
                continue;
            }
            // The innermost divergent guard; an enclosing branch beats an early exit.
            let mut found = None;
            for g in m.guard_chain(b.guard).take(MAX_CHAIN) {
                let branch = match g.kind {
                    GuardKind::If
                    | GuardKind::Else
                    | GuardKind::Loop
                    | GuardKind::Ternary
                    | GuardKind::ShortCircuit => true,
                    GuardKind::EarlyExit => false,
                    _ => continue,
                };
                if !k.per_thread(m, g.cond) || constant_trip_bound(m, k, g) {
                    continue;
                }
                if branch {
                    found = Some((g, true));
                    break;
                }
                if found.is_none() {
                    found = Some((g, false));
                }
            }
            let Some((g, branch)) = found else {
                continue;
            };
            let cond = m.text(g.cond);
            let cond = match cond.strip_prefix('(').and_then(|c| c.strip_suffix(')')) {
                Some(inner) if !inner.contains(['(', ')']) => inner,
                _ => cond,
            };
            let cond: String = cond.split_whitespace().collect::<Vec<_>>().join(" ");
            if !branch {
                if exits_reported.contains(&g.label) {
                    continue;
                }
                exits_reported.push(g.label);
            }
            let mut d = if branch {
                ctx.diagnostic(
                    b.node,
                    format!("`{}` runs only in threads where `{cond}` holds, and that differs between the threads of a block", m.text(b.node)),
                )
                .primary_label("barrier under a per-thread condition")
                .with_label(g.label, "this condition reads `threadIdx`")
            } else {
                ctx.diagnostic(
                    b.node,
                    format!("`{}` comes after threads with `{cond}` have left: not every thread of the block reaches it", m.text(b.node)),
                )
                .severity(Severity::Warning)
                .primary_label("barrier after a per-thread exit")
                .with_label(g.label, "some threads leave here")
            };
            d = d
                .note("every thread of the block must reach the same `__syncthreads()`; otherwise the block hangs or reads shared memory before it is written")
                .help("move the barrier out of the condition and guard only the work (`if (i < n) buf[t] = x[i]; __syncthreads();`); confirm at run time with `compute-sanitizer --tool synccheck ./your_app`");
            ctx.report(d);
        }
        for r in m.missing_barriers() {
            let d = missing_barrier(ctx, m, &r);
            ctx.report(d);
        }
    }
}

/// The warning for a pair of shared-memory accesses with no barrier between.
fn missing_barrier(
    ctx: &Context<'_>,
    m: &CudaModel<'_>,
    r: &MissingBarrier<'_>,
) -> gpulint_diagnostics::Diagnostic {
    let line = |n: tree_sitter::Node<'_>| m.line_of(n.start_byte());
    let end_line = |n: tree_sitter::Node<'_>| m.line_of(n.end_byte().saturating_sub(1));
    let (a, b) = (line(r.first), line(r.second));
    let buf = &r.buffer;
    let verb = |w: bool| if w { "written" } else { "read" };
    let (message, place) = match r.across {
        Across::Sequence => {
            let what = match r.hazard {
                Hazard::ReadAfterWrite => format!(
                    "`{buf}` is written at line {a} and read at line {b} by other threads of the block with no `__syncthreads()` between: the read can see the value from before the write"
                ),
                Hazard::WriteAfterWrite => format!(
                    "`{buf}` is written at line {a} and written again at line {b} by other threads of the block with no `__syncthreads()` between: which value stays is a race"
                ),
                Hazard::WriteAfterRead => format!(
                    "`{buf}` is read at line {a} and overwritten at line {b} by other threads of the block with no `__syncthreads()` between: slower threads can read the new value"
                ),
            };
            let after = end_line(r.first_site).max(a);
            (
                what,
                format!(
                    "a `__syncthreads()` after line {after} and before line {}",
                    line(r.second_site)
                ),
            )
        }
        Across::Iteration {
            loop_node,
            body_end,
        } => {
            let l = line(loop_node);
            let what = match r.hazard {
                Hazard::ReadAfterWrite => format!(
                    "`{buf}` is written at line {a} in one iteration of the loop at line {l} and read at line {b} by other threads in the next, with no `__syncthreads()` between"
                ),
                _ => format!(
                    "`{buf}` is {} at line {a} late in each iteration of the loop at line {l} and overwritten at line {b} by the next iteration with no `__syncthreads()` between: threads that run ahead overwrite what slower threads still use",
                    verb(r.first_write)
                ),
            };
            let place = match r.hazard {
                Hazard::ReadAfterWrite => {
                    format!("a `__syncthreads()` at the start of the loop body (before line {b})")
                }
                _ => format!(
                    "a `__syncthreads()` at the end of the loop body (line {})",
                    line(body_end)
                ),
            };
            (what, place)
        }
        Across::Calls { body } => {
            let name = &m.functions[r.function].name;
            (
                format!(
                    "`{buf}` is {} at line {a} after the last barrier that every call of `{name}` reaches, and overwritten at line {b} by the next call with no `__syncthreads()` between: two calls in a row race",
                    verb(r.first_write)
                ),
                format!("a `__syncthreads()` that every call reaches before the function returns (line {})", line(body)),
            )
        }
    };
    let first_label = format!("{} here", verb(r.first_write));
    let second_label = if r.second_write {
        "written here"
    } else {
        "read here"
    };
    let mut d = ctx
        .diagnostic(r.at, message)
        .severity(Severity::Warning)
        .primary_label(format!("missing barrier: {place}"));
    let mut spans = vec![
        (r.first_site, first_label),
        (r.second_site, second_label.to_string()),
    ];
    if r.first.id() != r.first_site.id() {
        spans.push((r.first, "the access in the helper".to_string()));
    }
    for (n, msg) in spans {
        if n.id() != r.at.id() {
            d = d.with_label(gpulint_diagnostics::Span::of(&n), msg);
        }
    }
    let note = if r.global {
        "threads of a block run in no fixed order: global memory written by one thread is visible to the other threads of its block only after a barrier they all pass (`__syncthreads()` orders global as well as shared memory within the block)"
    } else {
        "threads of a block run in no fixed order: shared memory written by one thread is visible to another only after a barrier both pass; `compute-sanitizer --tool racecheck` reports this hazard"
    };
    d.note(note)
        .help(format!("add {place}, outside any condition that differs between the threads (`__syncthreads();`); a cooperative group's `block.sync()` does the same"))
}

/// `for (col = lane; col < Traits::COLS; col += STRIDE)`: a compile-time bound, which kernels
/// pick as a multiple of the stride, so every thread runs the same number of iterations.
fn constant_trip_bound<'t>(m: &CudaModel<'t>, k: &Kernel<'t>, g: &Guard<'_>) -> bool {
    if g.kind != GuardKind::Loop || g.cond.kind_name() != "binary_expression" {
        return false;
    }
    let Some(bound) = g.cond.field("right") else {
        return false;
    };
    let f = k.flags(m, bound);
    m.text(bound).contains("::")
        || f.has(Flags::CONST) && !f.has(Flags::PARAM | Flags::TID | Flags::BID | Flags::BDIM)
}
