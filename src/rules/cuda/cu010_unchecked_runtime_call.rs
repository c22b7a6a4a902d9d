//! CU010: a CUDA runtime call whose `cudaError_t` result is dropped.

use crate::checker::Context;
use crate::declare_rule;
use crate::diagnostic::Severity;
use crate::lang::Lang;
use crate::rule::{Rule, RuleLang, RuleMeta};
use crate::semantic::NodeExt;
use tree_sitter::Node;

declare_rule! {
    /// ## What it does
    /// Finds statements that are a bare call to a CUDA runtime function whose `cudaError_t`
    /// result matters: `cudaMalloc`, `cudaMallocManaged`, `cudaMallocHost`, `cudaMallocAsync`,
    /// `cudaMemcpy*`, `cudaMemset*`, `cudaFree`, `cudaFreeHost`, `cudaStreamSynchronize`,
    /// `cudaDeviceSynchronize`, `cudaSetDevice`, `cudaFuncSetAttribute` and
    /// `cudaDeviceSetLimit`. A call wrapped in any checking macro or function
    /// (`C10_CUDA_CHECK(…)`, `AT_CUDA_CHECK(…)`, `CUDA_CHECK(…)`, `checkCudaErrors(…)`,
    /// `gpuErrchk(…)`), assigned (`err = cudaMalloc(…)`), tested, or explicitly discarded with
    /// `(void)` is not a bare call and is not reported. A dropped `cudaMalloc*` is an error.
    ///
    /// ## Why is this risky?
    /// Every runtime call returns a `cudaError_t`, and it may also carry an error from an
    /// earlier asynchronous launch. A failed `cudaMalloc` leaves a dangling or null pointer that
    /// the next kernel dereferences (an illegal address); a failed copy leaves stale data; a
    /// sticky error dropped here is reported later by an unrelated call, far from its cause.
    ///
    /// ## Example
    /// ```cuda
    /// void upload(const float* host, float** dev, size_t n) {
    ///     cudaMalloc(dev, n * sizeof(float));
    ///     cudaMemcpy(*dev, host, n * sizeof(float), cudaMemcpyHostToDevice);
    /// }
    /// ```
    ///
    /// ## Use instead
    /// ```cuda
    /// void upload(const float* host, float** dev, size_t n) {
    ///     CUDA_CHECK(cudaMalloc(dev, n * sizeof(float)));
    ///     CUDA_CHECK(cudaMemcpy(*dev, host, n * sizeof(float), cudaMemcpyHostToDevice));
    /// }
    /// ```
    /// In framework code, prefer the framework's allocator (`at::empty`, `allocate_output`).
    ///
    /// ## References
    /// - CUDA Runtime API, *Error Handling*:
    ///   <https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__ERROR.html>
    /// - CUDA C++ Programming Guide, *Error Checking*:
    ///   <https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#error-checking>
    pub static CU010 = {
        code: "CU010",
        name: "unchecked-runtime-call",
        lang: RuleLang::Source(Lang::Cuda),
        severity: Severity::Warning,
        summary: "CUDA runtime call whose error code is ignored",
        kinds: &["expression_statement"],
        needles: &[
            "cudaMalloc",
            "cudaMemcpy",
            "cudaMemset",
            "cudaFree",
            "cudaStreamSynchronize",
            "cudaDeviceSynchronize",
            "cudaSetDevice",
            "cudaFuncSetAttribute",
            "cudaDeviceSetLimit",
        ],
        options: &[],
    };
}

/// Runtime calls whose result must be checked (exact names, or prefixes ending in `*`).
const CHECKED: &[&str] = &[
    "cudaMalloc",
    "cudaMallocManaged",
    "cudaMallocHost",
    "cudaMallocAsync",
    "cudaMallocPitch",
    "cudaMemcpy*",
    "cudaMemset*",
    "cudaFree",
    "cudaFreeHost",
    "cudaFreeAsync",
    "cudaStreamSynchronize",
    "cudaDeviceSynchronize",
    "cudaSetDevice",
    "cudaFuncSetAttribute",
    "cudaDeviceSetLimit",
];

pub struct UncheckedRuntimeCall;

impl Rule for UncheckedRuntimeCall {
    fn meta(&self) -> &'static RuleMeta {
        &CU010
    }

    fn check(&self, node: Node<'_>, ctx: &mut Context<'_>) {
        let Some(call) = node
            .named_child(0)
            .filter(|c| c.kind() == "call_expression")
        else {
            return;
        };
        let Some(f) = call.field("function") else {
            return;
        };
        let name = ctx.text(f).trim_start_matches("::").to_string();
        let listed = CHECKED.iter().any(|c| match c.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => name == *c,
        });
        if !listed {
            return;
        }
        let alloc = name.starts_with("cudaMalloc");
        let mut d = ctx
            .diagnostic(
                call,
                format!("the `cudaError_t` returned by `{name}` is ignored"),
            )
            .primary_label("result dropped");
        d = if alloc {
            d.severity(Severity::Error).note("if the allocation fails, the pointer stays invalid and the next kernel that uses it fails with an illegal address")
        } else {
            d.note("runtime calls also return errors from earlier asynchronous launches; dropped here, they surface later in an unrelated call")
        };
        d = d.help(format!(
            "wrap it in your error-check macro, e.g. `CUDA_CHECK({name}(…))` or `C10_CUDA_CHECK({name}(…))`{}; confirm at run time with `compute-sanitizer --tool memcheck ./your_app`",
            if alloc { ", or allocate through the framework (`at::empty`)" } else { "" }
        ));
        ctx.report(d);
    }
}
