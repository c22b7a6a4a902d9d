//! OP002: a raw pointer from a tensor that may be non-contiguous goes to a kernel that indexes
//! it linearly.

use super::op_glue::{callers_note, merge_callers, LazyResolver};
use crate::context::Context;
use crate::declare_rule;
use crate::rule::{OptionKind, Rule, RuleLang, RuleMeta, RuleOption};
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::cuda::glue::{GlueFn, Origin, PtrUse, CONTIG};
use gpulint_semantic::cuda::{Access, CudaModel};
use gpulint_syntax::Lang;

declare_rule! {
    /// ## What it does
    /// Finds a `data_ptr`-family call (`data_ptr<T>()`, `data_ptr()`, `mutable_data_ptr`,
    /// `const_data_ptr`) on a tensor parameter whose pointer is passed to a kernel of the same
    /// file that indexes it (`p[i]`), when the tensor is
    /// - not the result of `.contiguous()` (`auto xc = x.contiguous();`, `x = x.contiguous();`,
    ///   or a caller passing `x.contiguous()`);
    /// - not checked with `TORCH_CHECK(x.is_contiguous())` (also through a check macro such as
    ///   `CHECK_INPUT(x)`), here or in its callers;
    /// - not a fresh allocation (`at::empty*`, `empty_like`, `zeros`).
    ///
    /// Accessors (`packed_accessor32/64`, `accessor`), `TensorIterator`, and launches that
    /// pass strides or a layout flag (`is_channels_last`) are not reported. A launcher whose
    /// callers cannot be seen (no binding in its file, no caller in the same directory or its
    /// parent) is not reported. Set
    /// `python-validated` to the bound functions whose Python wrappers pass contiguous
    /// tensors, or `["*"]`.
    ///
    /// ## Why is this risky?
    /// Transposed, sliced or `expand`ed tensors have strides that do not match linear
    /// indexing. An `expand`ed view has stride 0 and fewer real bytes than `numel()`, so a
    /// kernel that walks `numel()` elements from `data_ptr()` reads past the allocation (an
    /// illegal address) or silently computes on the wrong elements.
    ///
    /// ## Example
    /// ```cuda
    /// #include <torch/extension.h>
    /// __global__ void relu_kernel(const float* x, float* y, int64_t n) {
    ///     int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    ///     if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
    /// }
    /// torch::Tensor relu(torch::Tensor x) {
    ///     TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    ///     auto y = torch::empty(x.sizes(), x.options());
    ///     int64_t n = x.numel();
    ///     relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    ///     return y;
    /// }
    /// PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("relu", &relu); }
    /// ```
    ///
    /// ## Use instead
    /// ```cuda
    /// #include <torch/extension.h>
    /// __global__ void relu_kernel(const float* x, float* y, int64_t n) {
    ///     int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    ///     if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
    /// }
    /// torch::Tensor relu(torch::Tensor x) {
    ///     TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    ///     auto xc = x.contiguous();
    ///     auto y = torch::empty(xc.sizes(), xc.options());
    ///     int64_t n = xc.numel();
    ///     relu_kernel<<<(n + 255) / 256, 256>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n);
    ///     return y;
    /// }
    /// PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("relu", &relu); }
    /// ```
    ///
    /// ## References
    /// - PyTorch tutorial "Custom C++ and CUDA Operators"
    ///   (`at::Tensor a_contig = a.contiguous(); … a_contig.data_ptr<float>()`):
    ///   <https://pytorch.org/tutorials/advanced/cpp_custom_ops.html>
    /// - PyTorch, `torch.Tensor.contiguous` and `torch.Tensor.expand` (stride-0 views):
    ///   <https://pytorch.org/docs/stable/generated/torch.Tensor.expand.html>
    pub static OP002 = {
        code: "OP002",
        name: "non-contiguous-data-ptr",
        lang: RuleLang::Source(Lang::Cuda),
        severity: Severity::Warning,
        summary: "Raw pointer from a possibly non-contiguous tensor indexed linearly by a kernel",
        kinds: &[],
        needles: &["data_ptr", "data<"],
        options: &[RuleOption {
            key: "python-validated",
            kind: OptionKind::StringList,
            default: "[]",
            doc: "Functions bound to Python whose Python-side wrapper passes contiguous tensors (\"*\" for all).",
        }],
    };
}

pub struct NonContiguousDataPtr;

/// A tensor parameter, its raw pointer, and the kernel access that indexes it.
type Hit<'a, 't> = (usize, &'a PtrUse<'t>, &'a Access<'t>);

impl Rule for NonContiguousDataPtr {
    fn meta(&self) -> &'static RuleMeta {
        &OP002
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.cuda();
        let trusted = ctx.option_strings("python-validated");
        let mut resolver = LazyResolver::new(&trusted);
        for gf in &m.glue.fns {
            if gf.tensor_iterator || gf.launches.is_empty() {
                continue;
            }
            let facts = &m.glue.facts.fns[gf.facts];
            // Per launch: the tensors it takes through possibly strided raw pointers.
            let mut by_launch: Vec<(usize, Vec<Hit<'_, '_>>)> = Vec::new();
            let mut callers = Vec::new();
            let mut seen: Vec<usize> = Vec::new();
            for u in &gf.uses {
                let Origin::Param {
                    index,
                    contiguous: false,
                } = u.origin
                else {
                    continue;
                };
                if u.accessor || seen.contains(&index) {
                    continue;
                }
                if facts.covered.get(index).is_some_and(|p| p & CONTIG != 0) {
                    continue;
                }
                let Some((launch, access)) = linear_access(m, gf, u) else {
                    continue;
                };
                let r = resolver.get(ctx).coverage(gf.facts, index);
                if r.props & CONTIG != 0 {
                    continue;
                }
                seen.push(index);
                merge_callers(&mut callers, r.callers);
                match by_launch.iter_mut().find(|(l, _)| *l == launch) {
                    Some((_, hits)) => hits.push((index, u, access)),
                    None => by_launch.push((launch, vec![(index, u, access)])),
                }
            }
            for (launch, hits) in by_launch {
                let l = &m.launches[launch];
                let names: Vec<String> = hits
                    .iter()
                    .map(|h| format!("`{}`", gf.params[h.0].0))
                    .collect();
                let (first, u, access) = hits[0];
                let name = gf.params[first].0;
                let message = if names.len() == 1 {
                    format!("`{name}` may be non-contiguous, but kernel `{}` indexes its raw pointer linearly", l.kernel)
                } else {
                    format!("{} may be non-contiguous, but kernel `{}` indexes their raw pointers linearly", names.join(", "), l.kernel)
                };
                let mut d = ctx
                    .diagnostic(u.node, message)
                    .primary_label(format!("raw pointer from `{name}`, strides ignored"));
                for (i, u, _) in hits.iter().skip(1) {
                    d = d.with_label(
                        Span::of(&u.node),
                        format!("raw pointer from `{}`", gf.params[*i].0),
                    );
                }
                d = d
                    .with_label(Span::of(&l.node), "launched here")
                    .with_label(
                        Span::of(&access.node),
                        format!("indexed as if `{name}` were contiguous"),
                    )
                    .note("a transposed, sliced or expanded tensor has strides that linear indexing ignores: an expanded view has stride 0 and fewer bytes than numel(), so the kernel reads past the allocation");
                d = callers_note(d, &callers, "do not make them contiguous either");
                d = d.help(format!(
                    "take the pointer from a contiguous copy (`auto {name}_c = {name}.contiguous();` then `{name}_c.data_ptr<…>()`) or check `TORCH_CHECK({name}.is_contiguous(), \"{name} must be contiguous\");`; confirm at run time with `compute-sanitizer --tool memcheck python train.py`"
                ));
                ctx.report(d);
            }
        }
    }
}

/// Does a launch argument or kernel parameter carry the memory layout (strides, a
/// channels-last flag)? Then the kernel does not assume a contiguous tensor.
fn layout_aware(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.contains("stride") || lower.contains("channels_last") || lower.contains("layout")
}

/// The launch that takes this pointer and the kernel's first indexed access through the
/// matching parameter, when the launch passes no strides.
fn linear_access<'a, 't>(
    m: &'a CudaModel<'t>,
    gf: &GlueFn<'t>,
    u: &PtrUse<'t>,
) -> Option<(usize, &'a Access<'t>)> {
    for &li in &gf.launches {
        if !gf.use_reaches(m, u, li) {
            continue;
        }
        let l = &m.launches[li];
        if l.args.iter().any(|a| layout_aware(m.text(*a))) {
            return None;
        }
        let kernel = m.launched_kernel(l)?;
        if kernel.params.iter().any(|p| layout_aware(p.name)) {
            return None;
        }
        let pos = u.arg_position(m, l)?;
        let param = kernel.params.get(pos).filter(|p| p.pointer)?;
        // `p[0]` reads one element: strides do not matter.
        return m
            .indexed_accesses(kernel, param.name)
            .next()
            .map(|a| (li, a));
    }
    None
}
