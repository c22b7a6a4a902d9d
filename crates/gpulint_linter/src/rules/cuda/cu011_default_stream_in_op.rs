//! CU011: a kernel launched on the legacy default stream from framework op glue.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::Severity;
use gpulint_syntax::Lang;

declare_rule! {
    /// ## What it does
    /// In a file that includes PyTorch (`torch/…`, `ATen/…`, `c10/…`) or TensorFlow
    /// (`tensorflow/core/framework/op_kernel.h`) headers, finds kernel launches that give no
    /// stream (`kernel<<<grid, block>>>` or `kernel<<<grid, block, smem>>>`) or pass `0`,
    /// `nullptr`, `NULL` or `cudaStreamLegacy` as the stream, instead of the framework's current
    /// stream (`at::cuda::getCurrentCUDAStream()`, TF `d.stream()`).
    ///
    /// Standalone CUDA programs (no framework headers) are not reported.
    ///
    /// ## Why is this risky?
    /// The framework enqueues its ops on its current stream and its caching allocator recycles
    /// memory per stream. A kernel on the legacy default stream can read inputs before the op
    /// that writes them has run on the framework's stream, or write into blocks the allocator has
    /// already handed to another tensor: data races and sporadic illegal-address errors that
    /// depend on timing.
    ///
    /// ## Example
    /// ```cuda
    /// #include <torch/extension.h>
    /// __global__ void fill(float* y, float v, int n) {
    ///     int i = blockIdx.x * blockDim.x + threadIdx.x;
    ///     if (i < n) y[i] = v;
    /// }
    /// void fill_(torch::Tensor y) {
    ///     const int n = y.numel();
    ///     fill<<<(n + 255) / 256, 256>>>(y.data_ptr<float>(), 1.f, n);
    /// }
    /// ```
    ///
    /// ## Use instead
    /// ```cuda
    /// #include <torch/extension.h>
    /// #include <ATen/cuda/CUDAContext.h>
    /// __global__ void fill(float* y, float v, int n) {
    ///     int i = blockIdx.x * blockDim.x + threadIdx.x;
    ///     if (i < n) y[i] = v;
    /// }
    /// void fill_(torch::Tensor y) {
    ///     const int n = y.numel();
    ///     auto stream = at::cuda::getCurrentCUDAStream();
    ///     fill<<<(n + 255) / 256, 256, 0, stream>>>(y.data_ptr<float>(), 1.f, n);
    /// }
    /// ```
    ///
    /// ## References
    /// - PyTorch custom C++/CUDA operators tutorial (`at::cuda::getCurrentCUDAStream()`):
    ///   <https://pytorch.org/tutorials/advanced/cpp_custom_ops.html>
    /// - PyTorch, CUDA semantics → CUDA streams:
    ///   <https://pytorch.org/docs/stable/notes/cuda.html#cuda-streams>
    /// - TensorFlow "Create an op", GPU kernels (`d.stream()`):
    ///   <https://www.tensorflow.org/guide/create_op#gpu_kernels>
    pub static CU011 = {
        code: "CU011",
        name: "default-stream-in-op",
        lang: RuleLang::Source(Lang::Cuda),
        severity: Severity::Warning,
        summary: "Kernel launched on the legacy default stream from framework op glue",
        kinds: &[],
        needles: &["<<<"],
        options: &[],
    };
}

/// Includes that make a file framework op glue.
const FRAMEWORK_INCLUDES: &[&str] = &[
    "<torch/",
    "\"torch/",
    "<ATen/",
    "\"ATen/",
    "<c10/",
    "\"c10/",
    "tensorflow/core/framework/op_kernel.h",
];

pub struct DefaultStreamInOp;

impl Rule for DefaultStreamInOp {
    fn meta(&self) -> &'static RuleMeta {
        &CU011
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.cuda();
        let framework = m.source.lines().any(|l| {
            let l = l.trim_start();
            l.starts_with("#include") && FRAMEWORK_INCLUDES.iter().any(|i| l.contains(i))
        });
        if !framework || m.source.contains("per-thread") {
            return;
        }
        for l in &m.launches {
            if l.node.has_error() || l.config.len() < 2 {
                continue;
            }
            let (node, what) = match l.config.get(3) {
                None => (l.node, "gives no stream".to_string()),
                Some(s) => {
                    let t = m.text(*s).trim();
                    if !matches!(
                        t,
                        "0" | "nullptr" | "NULL" | "cudaStreamLegacy" | "(cudaStream_t)0"
                    ) {
                        continue;
                    }
                    (*s, format!("passes `{t}` as its stream"))
                }
            };
            let d = ctx
                .diagnostic(node, format!("launch of `{}` {what}: it runs on the legacy default stream, not the framework's current stream", l.kernel))
                .primary_label("legacy default stream")
                .note("the framework orders its ops and recycles memory on its current stream; a kernel on another stream can race with them")
                .help("launch on the current stream: `auto stream = at::cuda::getCurrentCUDAStream(); kernel<<<grid, block, smem, stream>>>(…)` (TF: `d.stream()`); confirm at run time with `compute-sanitizer --tool racecheck ./your_app`");
            ctx.report(d);
        }
    }
}
