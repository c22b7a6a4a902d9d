//! CU007: a launch configuration beyond the hardware limits.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::Severity;
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;

declare_rule! {
    /// ## What it does
    /// Finds kernel launches whose block, folded to constants (an integer, `dim3(x, y, z)`, or
    /// a local `dim3 block(x, y, z)` defined once before the launch), has more than 1024
    /// threads, an x or y extent above 1024 or a z extent above 64, and launches whose grid has a
    /// y or z extent above 65535. Also `__launch_bounds__(N)` with N above 1024.
    ///
    /// Configurations computed at run time (from `cudaGetDeviceProperties`,
    /// `maxThreadsPerBlock` or any value that does not fold) are not reported.
    ///
    /// ## Why is this risky?
    /// A block holds at most 1024 threads (block z at most 64), and a grid's y and z extents are
    /// at most 65535. A launch beyond these fails with "invalid configuration argument"; unless
    /// the launch is checked (CU009), the kernel simply never runs and later code consumes
    /// whatever was in the output buffer.
    ///
    /// ## Example
    /// ```cuda
    /// __global__ void fill(float* y, float v, int n) {
    ///     int i = blockIdx.x * blockDim.x + threadIdx.x;
    ///     if (i < n) y[i] = v;
    /// }
    ///
    /// void run(float* y, int n) {
    ///     fill<<<(n + 2047) / 2048, 2048>>>(y, 1.f, n);
    /// }
    /// ```
    ///
    /// ## Use instead
    /// ```cuda
    /// __global__ void fill(float* y, float v, int n) {
    ///     int i = blockIdx.x * blockDim.x + threadIdx.x;
    ///     if (i < n) y[i] = v;
    /// }
    ///
    /// void run(float* y, int n) {
    ///     fill<<<(n + 255) / 256, 256>>>(y, 1.f, n);
    /// }
    /// ```
    ///
    /// ## References
    /// - CUDA C++ Programming Guide, *Technical Specifications per Compute Capability* (1024
    ///   threads per block; block dimensions 1024 × 1024 × 64; grid y and z at most 65535):
    ///   <https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#features-and-technical-specifications-technical-specifications-per-compute-capability>
    pub static CU007 = {
        code: "CU007",
        name: "launch-config-limits",
        lang: RuleLang::Source(Lang::Cuda),
        severity: Severity::Error,
        summary: "Launch configuration outside the hardware limits",
        kinds: &[],
        needles: &["<<<", "__launch_bounds__"],
        options: &[],
    };
}

const HELP: &str = "keep blocks at or below 1024 threads (z at most 64) and grid y/z at or below 65535, e.g. fold the extra work into a grid-stride loop; check the launch with `C10_CUDA_KERNEL_LAUNCH_CHECK()`; confirm at run time with `compute-sanitizer --tool memcheck ./your_app`";

pub struct LaunchConfigLimits;

impl Rule for LaunchConfigLimits {
    fn meta(&self) -> &'static RuleMeta {
        &CU007
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.cuda();
        for l in &m.launches {
            if l.node.has_error() {
                continue;
            }
            if let (Some(b), Some(node)) = (m.launch_dims(l, 1), l.config.get(1)) {
                let threads = b[0].saturating_mul(b[1]).saturating_mul(b[2]);
                let why = if b[2] > 64 {
                    Some(format!("block z extent {} is over 64", b[2]))
                } else if b[0] > 1024 || b[1] > 1024 || threads > 1024 {
                    Some(format!("{threads} threads per block is over 1024"))
                } else {
                    None
                };
                if let Some(why) = why {
                    let d = ctx
                        .diagnostic(*node, format!("launch of `{}`: {why}", l.kernel))
                        .primary_label(format!("block ({}, {}, {})", b[0], b[1], b[2]))
                        .note("the launch fails with \"invalid configuration argument\" and the kernel never runs")
                        .help(HELP);
                    ctx.report(d);
                    continue;
                }
            }
            if let (Some(g), Some(node)) = (m.launch_dims(l, 0), l.config.first()) {
                if g[1] > 65535 || g[2] > 65535 {
                    let d = ctx
                        .diagnostic(*node, format!("launch of `{}`: grid y/z extent over 65535", l.kernel))
                        .primary_label(format!("grid ({}, {}, {})", g[0], g[1], g[2]))
                        .note("the launch fails with \"invalid configuration argument\" and the kernel never runs")
                        .help(HELP);
                    ctx.report(d);
                }
            }
        }
        // `__launch_bounds__(N)` with N > 1024.
        for f in m.kernel_functions() {
            let head_end = f
                .node
                .field("body")
                .map(|b| b.start_byte())
                .unwrap_or(f.node.end_byte());
            let head = &m.source[f.node.start_byte()..head_end];
            let Some(pos) = head.find("__launch_bounds__(") else {
                continue;
            };
            let args = &head[pos + "__launch_bounds__(".len()..];
            let first = args.split([',', ')']).next().unwrap_or("").trim();
            let value =
                gpulint_semantic::cuda::parse_c_int(first).or_else(|| m.constant_in(f, first));
            let Some(n) = value.filter(|n| *n > 1024) else {
                continue;
            };
            let mut d = ctx.diagnostic(f.node, format!("`__launch_bounds__({first})` on `{}` asks for {n} threads per block, over the 1024 limit", f.name));
            d = d
                .primary_label("launch bounds over 1024 threads")
                .note("no launch can use this block size: it fails with \"invalid configuration argument\"")
                .help(HELP);
            ctx.report(d);
        }
    }
}
