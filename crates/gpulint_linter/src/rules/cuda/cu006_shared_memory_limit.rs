//! CU006: static shared memory over 48 KB per block, or a dynamic request over 48 KB without
//! the `cudaFuncSetAttribute` opt-in.

use super::cu004_large_local_array::human;
use super::SANITIZER;
use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::cuda::ArraySpace;
use gpulint_syntax::Lang;

declare_rule! {
    /// ## What it does
    /// Adds up the `__shared__` arrays with constant extents declared in each kernel (extents
    /// folded from literals, `#define`, `constexpr`, `enum` and template arguments known from the
    /// launches in the same file) and reports kernels whose static shared memory exceeds 48 KB
    /// (49152 bytes). It also reports launches whose third `<<<…>>>` argument, the dynamic
    /// shared memory in bytes, folds to a constant above 48 KB when the file never calls
    /// `cudaFuncSetAttribute` / `cuFuncSetAttribute` with
    /// `cudaFuncAttributeMaxDynamicSharedMemorySize` for that kernel.
    ///
    /// Sizes that depend on a template parameter with no launch in the file, on a struct type or
    /// on a run-time value are not reported.
    ///
    /// ## Why is this risky?
    /// A block can use at most 48 KB of shared memory unless the kernel opts in. Static
    /// allocations above 48 KB do not compile or load, and dynamic requests above 48 KB without
    /// the opt-in make the launch fail with "invalid argument" or "too many resources requested
    /// for launch". Unchecked, the kernel simply does not run and its output stays stale.
    ///
    /// ## Example
    /// ```cuda
    /// #define TILE 128
    /// __global__ void transpose(const float* in, float* out, int n) {
    ///     __shared__ float tile[TILE][TILE + 1];
    ///     tile[threadIdx.y][threadIdx.x] = in[0];
    ///     __syncthreads();
    ///     out[0] = tile[threadIdx.x][threadIdx.y];
    /// }
    /// ```
    ///
    /// ## Use instead
    /// ```cuda
    /// #define TILE 32
    /// __global__ void transpose(const float* in, float* out, int n) {
    ///     __shared__ float tile[TILE][TILE + 1];
    ///     tile[threadIdx.y][threadIdx.x] = in[0];
    ///     __syncthreads();
    ///     out[0] = tile[threadIdx.x][threadIdx.y];
    /// }
    /// ```
    /// or dynamic shared memory (`extern __shared__ float tile[];`) with
    /// `cudaFuncSetAttribute(transpose, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes)`
    /// before the launch.
    ///
    /// ## References
    /// - CUDA C++ Programming Guide, *Compute Capabilities → Shared Memory* ("Kernels relying on
    ///   shared memory allocations over 48 KB per block … must use dynamic shared memory … and
    ///   require an explicit opt-in using cudaFuncSetAttribute()"):
    ///   <https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#shared-memory-8-x>
    /// - CUDA Runtime API, `cudaFuncSetAttribute`:
    ///   <https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__EXECUTION.html>
    /// - punica-ai/punica#20 (a launch over 46 KB of shared memory without the opt-in):
    ///   <https://github.com/punica-ai/punica/pull/20>
    pub static CU006 = {
        code: "CU006",
        name: "shared-memory-limit",
        lang: RuleLang::Source(Lang::Cuda),
        severity: Severity::Error,
        summary: "Shared memory over 48 KB per block: static, or dynamic without the opt-in",
        kinds: &[],
        needles: &["__shared__", "<<<"],
        options: &[],
    };
}

/// The shared memory a block may use without opting in.
const STATIC_LIMIT: i128 = 48 * 1024;

pub struct SharedMemoryLimit;

impl Rule for SharedMemoryLimit {
    fn meta(&self) -> &'static RuleMeta {
        &CU006
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.cuda();
        // (a) Static shared memory per kernel.
        for (fi, f) in m.functions.iter().enumerate() {
            if !f.space.global || f.node.has_error() {
                continue;
            }
            let mut total: i128 = 0;
            let mut largest: Option<(i128, tree_sitter::Node<'_>, &str)> = None;
            let mut unknown = false;
            for a in m.arrays_of(fi).filter(|a| a.space == ArraySpace::Shared) {
                match m.array_bytes(a) {
                    Some(b) => {
                        total = total.saturating_add(b);
                        if largest.is_none_or(|(l, _, _)| b > l) {
                            largest = Some((b, a.declarator, a.name));
                        }
                    }
                    None => unknown = true,
                }
            }
            let Some((_, node, name)) = largest else {
                continue;
            };
            // Unknown sizes only add: the known part alone is already over the limit.
            if total <= STATIC_LIMIT {
                continue;
            }
            let mut d = ctx
                .diagnostic(
                    node,
                    format!(
                        "kernel `{}` declares {} of static shared memory{}, over the 48 KB a block may use without opting in",
                        f.name,
                        human(total),
                        if unknown { " (at least)" } else { "" }
                    ),
                )
                .primary_label(format!("`{name}` is the largest shared array"))
                .note("static shared allocations over 48 KB per block fail to compile or to load; only dynamic shared memory can go beyond, after `cudaFuncSetAttribute`");
            d = d.help(format!(
                "shrink the tile, or switch to `extern __shared__` with `cudaFuncSetAttribute({}, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes)` before the launch; confirm at run time with `compute-sanitizer --tool memcheck ./your_app`",
                f.name
            ));
            ctx.report(d);
        }
        // (b) Constant dynamic shared memory over 48 KB without the opt-in.
        for l in &m.launches {
            let Some(smem) = l.config.get(2) else {
                continue;
            };
            if l.node.has_error() {
                continue;
            }
            let bytes = match m.enclosing_function(l.node) {
                Some(f) => m.eval_in_function(f, *smem),
                None => m.eval(*smem),
            };
            let Some(bytes) = bytes.filter(|b| *b > STATIC_LIMIT) else {
                continue;
            };
            if opted_in(m.source, l.kernel) {
                continue;
            }
            let d = ctx
                .diagnostic(
                    *smem,
                    format!(
                        "launch of `{}` asks for {} of dynamic shared memory without opting in to more than 48 KB",
                        l.kernel,
                        human(bytes)
                    ),
                )
                .primary_label(format!("{} per block", human(bytes)))
                .with_label(Span::of(&l.node), "the launch fails with \"invalid argument\"")
                .note("dynamic shared memory over 48 KB needs `cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes)` before the launch")
                .help(format!(
                    "call `cudaFuncSetAttribute({}, cudaFuncAttributeMaxDynamicSharedMemorySize, {})` before launching, and check the launch; confirm at run time with `{SANITIZER}`",
                    l.kernel,
                    m.text(*smem)
                ));
            ctx.report(d);
        }
    }
}

/// Does the file raise the dynamic shared memory limit (for `kernel`, or through a function
/// pointer the rule cannot follow)?
fn opted_in(source: &str, _kernel: &str) -> bool {
    source.contains("MaxDynamicSharedMemorySize")
        || source.contains("MAX_DYNAMIC_SHARED_SIZE_BYTES")
}
