//! CU004: a large per-thread (local-memory) array in device code.

use super::SANITIZER;
use crate::context::Context;
use crate::declare_rule;
use crate::rule::{OptionKind, Rule, RuleLang, RuleMeta, RuleOption};
use gpulint_diagnostics::Severity;
use gpulint_semantic::cuda::ArraySpace;
use gpulint_syntax::Lang;

declare_rule! {
    /// ## What it does
    /// Finds automatic arrays in `__global__` and `__device__` functions (`float buf[N]`, not
    /// `__shared__`, `static` or `__constant__`) whose size, `N × sizeof(T)` after folding
    /// `#define`, `constexpr`, `enum` and template arguments known from the launches in the same
    /// file, reaches the `threshold-bytes` option (4 KB by default). At or above 512 KB, the
    /// per-thread local-memory limit, the finding is an error.
    ///
    /// Arrays whose extent or element type is not known (a template parameter with no launch in
    /// the file, a struct type) are not reported, and small register arrays such as `float acc[8]`
    /// never reach the threshold.
    ///
    /// ## Why is this risky?
    /// Arrays that are too large for registers live in *local memory*, which is device DRAM
    /// private to each thread. The runtime reserves that stack for every resident thread, so a
    /// large array makes launches fail with "too many resources requested for launch" or an
    /// out-of-memory error for the local heap, and where it fits, throughput collapses. Local
    /// memory per thread is capped at 512 KB: beyond that the kernel does not build or load.
    ///
    /// ## Example
    /// ```cuda
    /// __global__ void histogram(const int* keys, int* out, int n) {
    ///     int counts[4096];
    ///     for (int b = 0; b < 4096; ++b) counts[b] = 0;
    ///     out[0] = counts[keys[0]];
    /// }
    /// ```
    ///
    /// ## Use instead
    /// ```cuda
    /// __global__ void histogram(const int* keys, int* out, int n) {
    ///     __shared__ int counts[4096];
    ///     for (int b = threadIdx.x; b < 4096; b += blockDim.x) counts[b] = 0;
    ///     __syncthreads();
    ///     out[0] = counts[keys[0]];
    /// }
    /// ```
    /// or a scratch buffer in global memory allocated by the caller.
    ///
    /// ## References
    /// - CUDA C++ Programming Guide, *Device Memory Accesses → Local Memory*:
    ///   <https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#device-memory-accesses>
    /// - CUDA C++ Programming Guide, *Technical Specifications per Compute Capability* ("Maximum
    ///   amount of local memory per thread: 512 KB"):
    ///   <https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#features-and-technical-specifications-technical-specifications-per-compute-capability>
    /// - CUDA Runtime API, `cudaDeviceSetLimit` / `cudaLimitStackSize`:
    ///   <https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__DEVICE.html>
    pub static CU004 = {
        code: "CU004",
        name: "large-local-array",
        lang: RuleLang::Source(Lang::Cuda),
        severity: Severity::Warning,
        summary: "Large per-thread array in device code: it is placed in local memory",
        kinds: &[],
        needles: &["__global__", "__device__", "GLOBAL", "DEVICE"],
        options: &[RuleOption {
            key: "threshold-bytes",
            kind: OptionKind::Int,
            default: "4096",
            doc: "Per-thread array size in bytes from which an automatic array is reported.",
        }],
    };
}

/// The local memory a thread may use at most.
const LOCAL_LIMIT: i128 = 512 * 1024;

pub struct LargeLocalArray;

impl Rule for LargeLocalArray {
    fn meta(&self) -> &'static RuleMeta {
        &CU004
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let threshold = ctx
            .option_int("threshold-bytes")
            .map(i128::from)
            .unwrap_or(4096)
            .max(1);
        let m = ctx.cuda();
        let mut found = Vec::new();
        for a in m.arrays.iter().filter(|a| a.space == ArraySpace::Local) {
            if a.decl.has_error() {
                continue;
            }
            let Some(bytes) = m.array_bytes(a) else {
                continue;
            };
            if bytes >= threshold {
                found.push((a.declarator, a.name, a.elem_type, bytes, a.function));
            }
        }
        for (node, name, ty, bytes, f) in found {
            let func = &m.functions[f];
            let error = bytes >= LOCAL_LIMIT;
            let mut d = ctx
                .diagnostic(
                    node,
                    format!(
                        "per-thread array `{name}` of `{ty}` takes {} in `{}`: it lives in local memory (device DRAM), reserved for every resident thread",
                        human(bytes),
                        func.name
                    ),
                )
                .primary_label(format!("{} per thread", human(bytes)));
            if error {
                d = d.severity(Severity::Error).note(
                    "local memory per thread is capped at 512 KB: the kernel cannot be launched",
                );
            } else {
                d = d.note("large local arrays make launches fail with \"too many resources requested for launch\" or run far slower than registers or shared memory");
            }
            d = d.help(format!(
                "share it per block with `__shared__`, or pass a scratch buffer in global memory; confirm at run time with `{SANITIZER}`"
            ));
            ctx.report(d);
        }
    }
}

/// `4096` → `4 KB`, `3000` → `3000 bytes`.
pub(crate) fn human(bytes: i128) -> String {
    if bytes >= 1024 && bytes % 1024 == 0 {
        format!("{} KB", bytes / 1024)
    } else {
        format!("{bytes} bytes")
    }
}
