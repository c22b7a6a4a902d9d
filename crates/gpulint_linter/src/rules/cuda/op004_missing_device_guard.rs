//! OP004: an op launches kernels for tensor inputs with no CUDA device guard.

use super::op_glue::{callers_note, LazyResolver};
use crate::context::Context;
use crate::declare_rule;
use crate::rule::{OptionKind, Rule, RuleLang, RuleMeta, RuleOption};
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::cuda::glue::{GlueFn, Via};
use gpulint_semantic::cuda::glue_project::{foreign_launcher, ForeignLauncher};
use gpulint_semantic::cuda::last_name;
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

declare_rule! {
    /// ## What it does
    /// Finds host functions that launch a kernel (`<<<…>>>`, also through a `#define`d launch
    /// macro of the file, or through a helper of the file that launches and takes raw pointers)
    /// with raw pointers from their tensor parameters (or the tensors handed to a converter
    /// such as `getTensorInfo<…>(x)`) and hold no device guard: `at::cuda::OptionalCUDAGuard`,
    /// `c10::cuda::CUDAGuard`, `c10::cuda::OptionalCUDAGuard`, `at::DeviceGuard`, a
    /// `CUDAStreamGuard`, or `cudaSetDevice(x.get_device())`.
    ///
    /// A guard in a caller covers the launcher: callers in the same file and in the C/C++
    /// files of its directory and their parent are followed up to the function bound to
    /// Python (`m.def`, `TORCH_LIBRARY` `.impl`). A launcher whose callers cannot be seen is
    /// not reported, nor is one whose Python calls, all seen (see OP002 for how calls are
    /// matched), are made in `backward` of a `torch.autograd.Function`: autograd runs backward
    /// with the gradients' device current. If the Python side always runs the op under `torch.cuda.device(x.device)`
    /// (or the extension only ever runs on one GPU), list the bound functions in
    /// `python-guarded`, or `["*"]`.
    ///
    /// A function that launches nothing itself but hands a tensor parameter to a function of
    /// another file (in its directory, its parent, or a subdirectory such as the `cuda/`
    /// folder next to an extension's bindings) that launches kernels with it and holds no
    /// guard is reported at that call, under the same conditions: the guard can go in either
    /// function. Every definition of the called name found there must launch: a name defined
    /// twice (a CPU and a CUDA build) where one does not is left alone.
    ///
    /// ## Why is this risky?
    /// A kernel is launched on the *current* device, usually `cuda:0`, whatever device the
    /// inputs live on. PyTorch switches devices for its own (codegen'd) ops, but a custom
    /// extension bound with pybind11 runs on whatever device is current: with inputs on
    /// `cuda:1` the kernel dereferences pointers from another device's context and fails
    /// with an illegal memory access.
    ///
    /// ## Example
    /// ```cuda
    /// #include <torch/extension.h>
    /// #include <ATen/cuda/CUDAContext.h>
    /// __global__ void neg_kernel(const float* x, float* y, int64_t n) {
    ///     int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    ///     if (i < n) y[i] = -x[i];
    /// }
    /// torch::Tensor neg(torch::Tensor x) {
    ///     TORCH_CHECK(x.is_cuda() && x.is_contiguous(), "x must be a contiguous CUDA tensor");
    ///     auto y = torch::empty_like(x);
    ///     int64_t n = x.numel();
    ///     auto stream = at::cuda::getCurrentCUDAStream();
    ///     neg_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    ///     return y;
    /// }
    /// PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("neg", &neg); }
    /// ```
    ///
    /// ## Use instead
    /// ```cuda
    /// #include <torch/extension.h>
    /// #include <ATen/cuda/CUDAContext.h>
    /// #include <c10/cuda/CUDAGuard.h>
    /// __global__ void neg_kernel(const float* x, float* y, int64_t n) {
    ///     int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    ///     if (i < n) y[i] = -x[i];
    /// }
    /// torch::Tensor neg(torch::Tensor x) {
    ///     TORCH_CHECK(x.is_cuda() && x.is_contiguous(), "x must be a contiguous CUDA tensor");
    ///     const at::cuda::OptionalCUDAGuard guard(device_of(x));
    ///     auto y = torch::empty_like(x);
    ///     int64_t n = x.numel();
    ///     auto stream = at::cuda::getCurrentCUDAStream();
    ///     neg_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    ///     return y;
    /// }
    /// PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("neg", &neg); }
    /// ```
    ///
    /// ## References
    /// - pytorch/pytorch#54077, "[cuda extension] tutorial should mention device guard":
    ///   <https://github.com/pytorch/pytorch/issues/54077>
    /// - pytorch/tutorials#1133 (illegal memory access with inputs on another GPU):
    ///   <https://github.com/pytorch/tutorials/issues/1133>
    /// - Tiiiger/QPyTorch#46 (fixed by setting the device):
    ///   <https://github.com/Tiiiger/QPyTorch/issues/46>
    pub static OP004 = {
        code: "OP004",
        name: "missing-device-guard",
        lang: RuleLang::Source(Lang::Cuda),
        severity: Severity::Warning,
        summary: "Op launches kernels for tensor inputs without a CUDA device guard",
        kinds: &[],
        needles: &["<<<", "Tensor"],
        options: &[RuleOption {
            key: "python-guarded",
            kind: OptionKind::StringList,
            default: "[]",
            doc: "Functions bound to Python that always run under `torch.cuda.device(...)` matching their inputs, or in single-GPU deployments (\"*\" for all).",
        }],
    };
}

pub struct MissingDeviceGuard;

impl Rule for MissingDeviceGuard {
    fn meta(&self) -> &'static RuleMeta {
        &OP004
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.cuda();
        let trusted = ctx.option_strings("python-guarded");
        let mut resolver = LazyResolver::new(&trusted);
        for gf in &m.glue.fns {
            if gf.guard.is_some() {
                continue;
            }
            // The first launch (or launch macro, or launching helper) that takes a tensor
            // parameter's memory; else a call handing a tensor parameter to a function of
            // another file that launches with it.
            let Some(hit) = gf.launch_hit(m) else {
                if let Some((call, callee, index, foreign)) = foreign_hit(ctx, gf) {
                    let Some(callers) = resolver.get(ctx).unguarded(gf.facts) else {
                        continue;
                    };
                    report_foreign(ctx, gf, call, callee, index, &foreign, &callers);
                }
                continue;
            };
            let (site, target, via, index, arg) =
                (hit.node, hit.target, hit.via, hit.param, hit.arg);
            let Some(callers) = resolver.get(ctx).unguarded(gf.facts) else {
                continue;
            };
            let name = gf.params[index].0;
            let fname = &m.functions[gf.func].name;
            let (message, label) = match via {
                None => (
                    format!("`{fname}` launches kernel `{target}` without a CUDA device guard"),
                    "runs on the current device, which need not be the inputs' device".to_string(),
                ),
                Some(Via::Macro(mac)) => (
                    format!("`{fname}` launches kernel `{target}` (through macro `{mac}`) without a CUDA device guard"),
                    format!("`{mac}` launches on the current device, which need not be the inputs' device"),
                ),
                Some(Via::Helper) => (
                    format!("`{fname}` launches kernels through `{target}` without a CUDA device guard"),
                    format!("`{target}` launches on the current device, which need not be the inputs' device"),
                ),
            };
            let mut d = ctx
                .diagnostic(site, message)
                .primary_label(label)
                .with_label(Span::of(&arg), format!("`{name}` may live on another GPU"))
                .note(format!(
                    "a custom op runs on whatever device is current (usually cuda:0): with `{name}` on cuda:1 the kernel dereferences another device's memory and fails with an illegal memory access"
                ));
            d = callers_note(d, &callers, "hold no guard either");
            d = d.help(format!(
                "add `const at::cuda::OptionalCUDAGuard guard(device_of({name}));` at the top of `{fname}` (or of the function bound to Python); confirm at run time with `compute-sanitizer --tool memcheck python train.py` with the inputs on cuda:1"
            ));
            ctx.report(d);
        }
    }
}

/// Namespaces of the libraries an extension calls, whose functions it does not define.
const LIBRARY_NAMESPACES: &[&str] = &["at", "torch", "c10", "std", "thrust", "cub"];

/// The first call of `gf` that hands one of its tensor parameters to a function defined in
/// another file (next to this one, in its parent or in a subdirectory) which launches kernels
/// with that tensor's memory and holds no guard: the call, the callee, the parameter and
/// where the callee is.
fn foreign_hit<'t>(
    ctx: &Context<'t>,
    gf: &GlueFn<'t>,
) -> Option<(Node<'t>, &'t str, usize, ForeignLauncher)> {
    let m = ctx.cuda();
    let facts = m.glue.facts.fns.get(gf.facts)?;
    let options = ctx.settings.semantic_options();
    for (call, node) in facts.calls.iter().zip(&gf.calls) {
        // A tensor parameter among the arguments, and a callee this file does not define.
        if !call
            .args
            .iter()
            .any(|a| a.is_some_and(|(i, _)| gf.params.get(i).is_some_and(|p| p.1)))
            || m.glue.facts.fns.iter().any(|f| f.name == call.callee)
        {
            continue;
        }
        // The libraries' own functions (`at::zeros_like(x)`, `torch::empty_like(x)`) and
        // macros (`OP_REQUIRES(ctx, …)`, upper case by convention) are not looked for.
        let function = node.field("function").map_or("", |f| m.text(f));
        if !call.callee.bytes().any(|b| b.is_ascii_lowercase())
            || LIBRARY_NAMESPACES.iter().any(|ns| {
                function
                    .strip_prefix(ns)
                    .is_some_and(|r| r.starts_with("::"))
            })
        {
            continue;
        }
        let Some(foreign) = foreign_launcher(&ctx.file.path, &options, &call.callee) else {
            continue;
        };
        let Some(Some((index, _))) = call.args.get(foreign.param) else {
            continue;
        };
        if gf.params.get(*index).is_some_and(|p| p.1) {
            let callee = node
                .field("function")
                .map_or(call.callee.as_str(), |f| last_name(m.text(f)));
            return Some((*node, callee, *index, foreign));
        }
    }
    None
}

fn report_foreign(
    ctx: &mut Context<'_>,
    gf: &GlueFn<'_>,
    call: Node<'_>,
    callee: &str,
    index: usize,
    foreign: &ForeignLauncher,
    callers: &[super::op_glue::Caller],
) {
    let m = ctx.cuda();
    let name = gf.params[index].0;
    let fname = &m.functions[gf.func].name;
    let file = foreign
        .path
        .file_name()
        .map_or_else(String::new, |f| f.to_string_lossy().into_owned());
    let mut d = ctx
        .diagnostic(
            call,
            format!("`{fname}` calls `{callee}` ({file}), which launches kernels with `{name}`, without a CUDA device guard"),
        )
        .primary_label(format!("`{callee}` launches on the current device, which need not be the inputs' device"))
        .note(format!(
            "`{callee}` in {file} holds no guard either; a custom op runs on whatever device is current (usually cuda:0): with `{name}` on cuda:1 the kernel dereferences another device's memory and fails with an illegal memory access"
        ));
    d = callers_note(d, callers, "hold no guard either");
    d = d.help(format!(
        "add `const at::cuda::OptionalCUDAGuard guard(device_of({name}));` at the top of `{fname}` (or of `{callee}`); confirm at run time with `compute-sanitizer --tool memcheck python train.py` with the inputs on cuda:1"
    ));
    ctx.report(d);
}

#[cfg(test)]
mod tests {
    use super::super::op_tests::{count, neg_op, with_list};
    use crate::settings::Settings;

    #[test]
    fn python_side_device_context_is_configurable() {
        let src = neg_op("TORCH_LIBRARY_IMPL(my_ops, CUDA, m) { m.impl(\"neg\", &neg); }");
        assert_eq!(count("OP004", &src, &Settings::default()), 1);
        let settings = with_list("OP004", "python-guarded", &["neg"]);
        assert_eq!(count("OP004", &src, &settings), 0);
    }
}
