//! CU001: global-memory access with a global thread index and no bounds guard.

use super::{short, SANITIZER};
use crate::context::Context;
use crate::declare_rule;
use crate::rule::{OptionKind, Rule, RuleLang, RuleMeta, RuleOption};
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::cuda::guards::{compact, sum_terms};
use gpulint_semantic::cuda::interval::Extent;
use gpulint_semantic::cuda::{Access, CudaModel, Flags, GridKind, Kernel, Launch};
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;
use std::cell::OnceCell;

declare_rule! {
    /// ## What it does
    /// Finds kernels that read or write global memory (`p[i]`, `*(p + i)`, `atomicAdd(p + i, v)`
    /// on a pointer parameter, or on a pointer built from one; any dimension of a PyTorch tensor
    /// accessor parameter, `out[n][c][h][w]`, also through a `#define` or alias of
    /// `PackedTensorAccessor32/64`) at a *global thread index*, an
    /// index computed from `blockIdx * blockDim + threadIdx` on any axis, when nothing bounds
    /// that index where the access runs: no enclosing `if (i < n)`, no earlier
    /// `if (i >= n) return;`, no grid-stride loop `for (; i < n; i += blockDim.x * gridDim.x)`,
    /// no `i < n ? p[i] : 0` or `i < n && p[i]`, and no grid-stride loop macro
    /// (`CUDA_1D_KERNEL_LOOP(i, n)`, `CUDA_KERNEL_LOOP`, `GPU_1D_KERNEL_LOOP`, … and the names in
    /// the `loop-macros` option).
    ///
    /// A guard on any variable the index is computed from counts (a 2-D guard
    /// `if (row < M && col < N)` covers `C[row * N + col]`), and so does a condition the rule
    /// does not understand (`if (in_bounds(i, n))`). Indices that are only `threadIdx` (one block
    /// per row) or only `blockIdx`, `i % n`, `min(i, n - 1)`, and shared-memory or local arrays
    /// are not reported, nor are the kernels of a file that checks the size is a multiple of the
    /// block (`TORCH_CHECK(n % 256 == 0)`), where the grid is exact, nor accesses that every
    /// launch in the file keeps inside the buffer (the largest index the grid reaches, with the
    /// sizes at the launch site, is below the buffer's extent: `cudaMalloc(&d, 65536 *
    /// sizeof(int))` with `65536 / 256` blocks of 256 threads, or per-block results written at
    /// `blockIdx.x * K + t` under `t < K` into `blocks * K` values). One finding is reported per
    /// kernel and index, at the first unguarded access.
    ///
    /// A guard that admits one index too many is reported too: `if (i <= n) y[i]` (or
    /// `if (i > n) return;`) reaches `y[n]`. The buffer's size comes from the launches in the same
    /// file when they show it (`cudaMalloc(&y, n * sizeof(float))`, `torch::empty({n})`,
    /// `y.data_ptr<float>()` with `y.numel()`), which also catches a buffer smaller than the range
    /// the guard admits (`if (i < count) out[i]` with `out` allocated for `count - 1` values);
    /// otherwise the bound the kernel checks is taken for the size, for global thread indices in a
    /// grid that is rounded up, and the message says so.
    ///
    /// Grids are judged per axis: with `dim3 grid((w + 15) / 16, h)` launched in the same file,
    /// x is rounded up and y is exact, so an index built only from `blockIdx.y` is trusted while
    /// one that also reads `blockIdx.x` needs a guard. A kernel that its own file does not
    /// launch (one in a `.cuh` header) is judged by the launches in the C/C++/CUDA files of its
    /// directory and the one above: launched there only with exact grids, it is trusted.
    ///
    /// ## Why is this risky?
    /// The grid is rounded up to whole blocks, so the last block has threads whose index is past
    /// the end of the data. Without a guard they read or write out of bounds: the kernel fails with
    /// `cudaErrorIllegalAddress` ("an illegal memory access was encountered"), which poisons the
    /// CUDA context, or it silently corrupts a neighbouring allocation of the framework's caching
    /// allocator. Compute Sanitizer's memcheck tool reports such accesses at run time.
    ///
    /// ## Example
    /// ```cuda
    /// __global__ void scale(const float* x, float* y, float a, int n) {
    ///     int i = blockIdx.x * blockDim.x + threadIdx.x;
    ///     y[i] = a * x[i];
    /// }
    /// ```
    ///
    /// ## Use instead
    /// ```cuda
    /// __global__ void scale(const float* x, float* y, float a, int n) {
    ///     int i = blockIdx.x * blockDim.x + threadIdx.x;
    ///     if (i < n) {
    ///         y[i] = a * x[i];
    ///     }
    /// }
    /// ```
    /// or a grid-stride loop, which also works for any grid size:
    /// ```cuda
    /// for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    ///     y[i] = a * x[i];
    /// }
    /// ```
    ///
    /// ## References
    /// - CUDA C++ Programming Guide, *Thread Hierarchy* (the `VecAdd`/`MatAdd` kernels guard with
    ///   `if (i < N && j < N)`):
    ///   <https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#thread-hierarchy>
    /// - PyTorch custom C++/CUDA operators tutorial (`if (idx < numel) result[idx] = …`):
    ///   <https://pytorch.org/tutorials/advanced/cpp_custom_ops.html>
    /// - TensorFlow "Create an op", GPU kernels (grid-stride loop):
    ///   <https://www.tensorflow.org/guide/create_op#gpu_kernels>
    /// - NVIDIA blog, "CUDA Pro Tip: Write Flexible Kernels with Grid-Stride Loops":
    ///   <https://developer.nvidia.com/blog/cuda-pro-tip-write-flexible-kernels-grid-stride-loops/>
    /// - Compute Sanitizer, memcheck tool:
    ///   <https://docs.nvidia.com/compute-sanitizer/ComputeSanitizer/index.html#memcheck-tool>
    pub static CU001 = {
        code: "CU001",
        name: "unguarded-thread-index",
        lang: RuleLang::Source(Lang::Cuda),
        severity: Severity::Error,
        summary: "Global-memory access at a global thread index without a bounds guard or grid-stride loop",
        kinds: &[],
        needles: &["__global__", "GLOBAL"],
        options: &[RuleOption {
            key: "loop-macros",
            kind: OptionKind::StringList,
            default: "[]",
            doc: "Names of grid-stride loop macros used as `NAME(i, n) { … }`, in addition to the built-in CUDA_1D_KERNEL_LOOP, CUDA_KERNEL_LOOP, GPU_1D_KERNEL_LOOP, CUDA_KERNEL_LOOP_TYPE, CUDA_2D_KERNEL_LOOP and friends.",
        }],
    };
}

/// Guards further out than this are not searched; the access is taken as guarded.
const MAX_CHAIN: usize = 256;

pub struct UnguardedThreadIndex;

impl Rule for UnguardedThreadIndex {
    fn meta(&self) -> &'static RuleMeta {
        &CU001
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.cuda();
        // `TORCH_CHECK(n % 256 == 0)`: the glue makes the grid exact.
        if !m.divisibility_checks.is_empty() {
            return;
        }
        let plain_only = OnceCell::new();
        for k in &m.kernels {
            if k.node.has_error() || k.too_large {
                continue;
            }
            check_kernel(ctx, m, k, &plain_only);
        }
    }
}

/// `plain_only`: whether every launch of the file has a plain grid, computed on first use.
fn check_kernel<'t>(
    ctx: &mut Context<'_>,
    m: &CudaModel<'t>,
    k: &Kernel<'t>,
    plain_only: &OnceCell<bool>,
) {
    let grid = m.kernel_grid(&m.function(k).name);
    // A guard that admits the index one past the buffer (`if (i <= n) y[i]`), or a buffer
    // smaller than the guarded range at a launch here.
    let found = m.out_of_range(k);
    let admitted: Vec<_> = found
        .iter()
        .filter(|v| v.guarded_itself && v.upper)
        // Threads past the data exist only when the grid is rounded up.
        .filter(|v| match v.extent {
            // Offset tables (`cu_seqlens[b]` under `b <= num_batch`) hold `n + 1` entries.
            Extent::Assumed(_) => {
                v.global_index
                    && !matches!(grid, Some((GridKind::Plain, _)))
                    && !super::bounds::integral_pointer(m, k, k.accesses[v.access].base)
            }
            Extent::Launch { .. } => true,
        })
        .collect();
    super::bounds::report_grouped(ctx, m, k, &admitted);
    check_unguarded(ctx, m, k, grid, plain_only);
}

fn check_unguarded<'t>(
    ctx: &mut Context<'_>,
    m: &CudaModel<'t>,
    k: &Kernel<'t>,
    grid: Option<(GridKind, &Launch<'t>)>,
    plain_only: &OnceCell<bool>,
) {
    // Launched here only with plain grids (`<<<rows, cols>>>`, `<<<n / 256, 256>>>`): every
    // thread maps to data, nothing runs past the end.
    if matches!(grid, Some((GridKind::Plain, _))) {
        return;
    }
    // Not launched here: the other launches of the file show its style.
    if grid.is_none()
        && !m.launches.is_empty()
        && *plain_only.get_or_init(|| {
            m.launches
                .iter()
                .all(|l| m.grid_kind(l) == Some(GridKind::Plain))
        })
    {
        return;
    }
    // One element per thread: the buffer is allocated from the grid (`grid.x * block.x`).
    if m.launches_of(&m.function(k).name)
        .any(|l| m.allocation_sized_by_grid(l))
    {
        return;
    }
    // A kernel with no size-like parameter cannot bound its index: its grid is exact by design.
    if !matches!(grid, Some((GridKind::CeilDiv, _))) && !k.params.iter().any(|p| p.size_like) {
        return;
    }
    // Per grid axis, the worst kind over the launches here: an index built only from exact
    // axes (`dim3 grid((w + 15) / 16, h)` indexed by `blockIdx.y`) covers its data exactly.
    let mut axis_kinds: Option<[GridKind; 3]> = None;
    for l in m.launches_of(&m.function(k).name) {
        let Some(kinds) = m.grid_axis_kinds(l) else {
            continue;
        };
        let acc = axis_kinds.get_or_insert(kinds);
        for (a, kind) in kinds.iter().enumerate() {
            acc[a] = acc[a].max(*kind);
        }
    }
    let grid_kind = grid.map(|(g, _)| g);
    // Unguarded accesses, grouped by the index variable they go through.
    let mut groups: Vec<Group<'_, 't>> = Vec::new();
    // Tensor accessors count too, one access per dimension (`out[n][c][h][w]` checks `h` and
    // `w` each against the guards).
    for a in k.accesses.iter().filter(|a| a.global || a.accessor) {
        let mut parts = a.alias_offsets.clone();
        parts.extend(a.index);
        if parts.is_empty() {
            continue;
        }
        let target = m.index_target(k, &parts);
        if !target.flags.is_global_index() {
            continue;
        }
        let kind = match axis_kinds {
            Some(kinds) => {
                let axes = k.block_axes(&parts, m.source);
                (0..3)
                    .filter(|a| axes[*a])
                    .map(|a| kinds[a])
                    .max()
                    .or(grid_kind)
            }
            None => grid_kind,
        };
        if kind == Some(GridKind::Plain) {
            continue;
        }
        // Without a launch here that rounds the grid up, only the canonical
        // `blockIdx * blockDim + threadIdx` counts: indices built from a fixed tile size
        // (`by * BLOCK_SIZE + ty`) belong to kernels tiled exactly by design.
        if kind != Some(GridKind::CeilDiv) && !target.flags.has(Flags::CANONICAL) {
            continue;
        }
        let chain: Vec<_> = m.guard_chain(a.guard).take(MAX_CHAIN + 1).collect();
        if chain.len() > MAX_CHAIN || chain.iter().any(|g| m.guard_covers(k, g, &target)) {
            continue;
        }
        // The launches here size the grid exactly for the buffer.
        let ai = k
            .accesses
            .iter()
            .position(|b| b.node.id() == a.node.id())
            .unwrap_or(0);
        if m.within_launch_extents(k, ai) {
            continue;
        }
        let var = k.first_of(&target.globals);
        // Inline indices (`p[blockIdx.x * blockDim.x + threadIdx.x]`) form one group.
        let key = match var {
            Some(v) => k.locals[v].to_string(),
            None => String::new(),
        };
        match groups.iter_mut().find(|g| g.0 == key) {
            Some(g) => g.2.push(a),
            None => groups.push((key, var, vec![a], kind)),
        }
    }
    // Not launched in this file (a kernel in a header): a plain grid in the C/C++/CUDA files
    // next to it that launch it shows the same style.
    if !groups.is_empty()
        && grid.is_none()
        && gpulint_semantic::cuda::glue_project::sibling_launch_grid(
            &ctx.file.path,
            &ctx.settings.semantic_options(),
            &m.function(k).name,
        ) == Some(GridKind::Plain)
    {
        return;
    }
    // Several unguarded dimensions of one accessor subscript: one finding, at the first.
    let mut reported: Vec<usize> = Vec::new();
    for (key, var, accesses, kind) in groups {
        let first = accesses[0];
        if reported.contains(&first.node.id()) {
            continue;
        }
        reported.push(first.node.id());
        let access = short(m.text(first.node));
        let index = match var {
            Some(_) => format!("`{key}`"),
            None => "the global thread index".to_string(),
        };
        let mut d = ctx
            .diagnostic(
                first.node,
                format!("`{access}` accesses global memory at {index} with no bounds guard: threads of the last block run past the end of the buffer"),
            )
            .primary_label("out of bounds for the threads past the end of the data");
        if let Some(v) = var {
            if let Some(def) = k.defs[v].first() {
                let line = m.line_of(def.start_byte());
                d = d.note(format!(
                    "`{key}` = `{}` (line {line}) is a global thread index",
                    short(m.text(*def))
                ));
            }
        }
        for other in accesses.iter().skip(1).take(3) {
            d = d.with_label(Span::of(&other.node), "also unguarded");
        }
        if accesses.len() > 4 {
            d = d.note(format!(
                "{} more accesses with the same index are unguarded",
                accesses.len() - 4
            ));
        }
        let bound = match var {
            Some(_) => key.clone(),
            None => "i".to_string(),
        };
        match grid {
            Some((GridKind::CeilDiv, launch)) if kind == Some(GridKind::CeilDiv) => {
                let g = launch
                    .config
                    .first()
                    .map(|g| Span::of(g))
                    .unwrap_or(Span::of(&launch.node));
                d = d.with_label(g, "the grid is rounded up to whole blocks here");
            }
            _ => {
                d = d.note("grids are rounded up to whole blocks, so the last block has threads whose index is past the data");
            }
        }
        // Name the kernel's own size parameter in the suggestion when it has one: the row
        // stride the index is added to (`row * cols + col` → `cols`), else one that no guard
        // already uses for another index.
        let n = var
            .and_then(|_| row_stride(m, k, &bound))
            .or_else(|| {
                let sizes: Vec<&str> = k
                    .params
                    .iter()
                    .filter(|p| p.size_like && integer_type(m, p))
                    .map(|p| p.name)
                    .collect();
                let used: Vec<String> = m
                    .guard_chain(first.guard)
                    .take(MAX_CHAIN)
                    .flat_map(|g| g.bounds.iter())
                    .map(|b| compact(m.source.get(b.limit.start..b.limit.end).unwrap_or("")))
                    .collect();
                sizes
                    .iter()
                    .find(|p| !used.iter().any(|u| u == *p))
                    .or(sizes.first())
                    .map(|p| p.to_string())
            })
            .unwrap_or_else(|| "n".to_string());
        d = d.help(format!(
            "bound the index first, e.g. `if ({bound} >= {n}) return;`, or use a grid-stride loop `for (; {bound} < {n}; {bound} += blockDim.x * gridDim.x)`; confirm at run time with `{SANITIZER}`"
        ));
        ctx.report(d);
    }
}

/// Is a parameter of an integer type (a size)?
fn integer_type(m: &CudaModel<'_>, p: &gpulint_semantic::cuda::Param<'_>) -> bool {
    let ty = p.node.field("type").map(|t| m.text(t)).unwrap_or("");
    ty.contains("int")
        || ty.contains("size")
        || ty.contains("long")
        || ty.contains("unsigned")
        || ty.contains("index")
}

/// The stride `s` of a linear index `r * s + var` (or `var + r * s`) in the kernel: the
/// extent of `var`'s axis.
fn row_stride(m: &CudaModel<'_>, k: &Kernel<'_>, var: &str) -> Option<String> {
    let exprs = k
        .accesses
        .iter()
        .filter_map(|a| a.index)
        .chain(k.defs.iter().flatten().copied());
    for e in exprs {
        let Some(terms) = sum_terms(e) else {
            continue;
        };
        if !terms.iter().any(|(t, p)| *p && m.text(*t) == var) {
            continue;
        }
        for (t, _) in &terms {
            if t.kind_name() != "binary_expression"
                || t.field("operator").is_none_or(|o| o.kind_name() != "*")
            {
                continue;
            }
            let (Some(l), Some(r)) = (t.field("right"), t.field("left")) else {
                continue;
            };
            for f in [l, r] {
                let name = m.text(f);
                if k.param(name).is_some_and(|p| !p.pointer) {
                    return Some(name.to_string());
                }
            }
        }
    }
    None
}

/// Unguarded accesses through one index variable: its name, its local, the accesses, and how
/// the grid axes the index reads are computed.
type Group<'a, 't> = (String, Option<usize>, Vec<&'a Access<'t>>, Option<GridKind>);
