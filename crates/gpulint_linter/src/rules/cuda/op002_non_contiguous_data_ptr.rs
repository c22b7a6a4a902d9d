//! OP002: a raw pointer from a tensor that may be non-contiguous goes to a kernel that indexes
//! it linearly.

use super::op_glue::{callers_note, python_note, LazyResolver};
use crate::context::Context;
use crate::declare_rule;
use crate::rule::{OptionKind, Rule, RuleLang, RuleMeta, RuleOption};
use gpulint_diagnostics::{Diagnostic, Severity, Span};
use gpulint_semantic::cuda::glue::{GlueFn, Origin, PtrUse, CONTIG};
use gpulint_semantic::cuda::{Access, CudaModel};
use gpulint_syntax::Lang;
use std::path::Path;

declare_rule! {
    /// ## What it does
    /// Finds a `data_ptr`-family call (`data_ptr<T>()`, `data_ptr()`, `mutable_data_ptr`,
    /// `const_data_ptr`) on a tensor parameter whose pointer is passed to a kernel that indexes
    /// it (`p[i]`), in the same file or in a project header it includes (`#include
    /// "foo_kernel.cuh"`), when the tensor is
    /// - not the result of `.contiguous()` (`auto xc = x.contiguous();`, `x = x.contiguous();`,
    ///   or a caller passing `x.contiguous()`);
    /// - not checked with `TORCH_CHECK(x.is_contiguous())` (also through a check macro such as
    ///   `CHECK_INPUT(x)`), here or in its callers;
    /// - not a fresh allocation (`at::empty*`, `empty_like`, `zeros`).
    ///
    /// Accessors (`packed_accessor32/64`, `accessor`) honour strides and are not reported,
    /// unless the kernel takes raw pointers to their rows (`acc[b][i].data()`, often
    /// reinterpreted as a vector type) and reads on from them. `TensorIterator`, and launches
    /// that pass strides or a layout flag (`is_channels_last`) are not reported. Each tensor is
    /// reported once, at its own raw pointer (the place its fix goes). A launcher whose
    /// callers cannot be seen (no binding in its file, no caller in the same directory or its
    /// parent) is not reported.
    ///
    /// Python callers count as well: when the checked files hold the extension's build
    /// (`CUDAExtension(name="ext", …)`, `load(name="ext", …)`) and the Python calls of the bound
    /// function (`ext.fn(…)`; ops registered with `TORCH_LIBRARY` are not matched), a tensor that every such call passes
    /// contiguous is not reported: `x.contiguous()`, a fresh `torch.empty(…)` or the
    /// `empty_like` of a contiguous tensor, a name made contiguous earlier in the same function
    /// (`x = x.contiguous()`, `if not x.is_contiguous(): x = x.contiguous()`, `assert
    /// x.is_contiguous()`, with no rebinding in between), or a tensor saved contiguous in
    /// `forward` of a `torch.autograd.Function` and read back in `backward`. One call that
    /// passes it as it came keeps the finding. Set `python-validated` to the bound functions
    /// whose Python wrappers pass contiguous tensors, or `["*"]`.
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

/// Where the launched kernel walks the pointer as contiguous.
enum Indexed<'a, 't> {
    /// An access in a kernel of this file.
    Here(&'a Access<'t>),
    /// A line of a kernel defined in a project header.
    Header { path: &'a Path, line: usize },
}

/// A launch that takes a tensor's pointer, how the kernel walks it, and whether what it walks
/// are the rows of an accessor (`acc[b][i].data()`) rather than a raw pointer.
struct Linear<'a, 't> {
    launch: usize,
    kernel_param: String,
    indexed: Indexed<'a, 't>,
    row: bool,
}

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
            let spans = ArgumentSpans::of(m, gf);
            // One finding per tensor, at its first raw pointer that a kernel walks linearly:
            // each tensor needs its own fix there.
            let mut seen: Vec<usize> = Vec::new();
            for u in &gf.uses {
                let Origin::Param {
                    index,
                    contiguous: false,
                } = u.origin
                else {
                    continue;
                };
                if seen.contains(&index)
                    || facts.covered.get(index).is_some_and(|p| p & CONTIG != 0)
                {
                    continue;
                }
                let Some(linear) = linear_access(m, gf, u, &spans) else {
                    continue;
                };
                let r = resolver.get(ctx).coverage(gf.facts, index);
                if r.props & CONTIG != 0 {
                    continue;
                }
                seen.push(index);
                let d = finding(ctx, gf, index, u, &linear);
                let d = callers_note(d, &r.callers, "do not make it contiguous either");
                let d = python_note(d, &r.python, CONTIG, "make it contiguous");
                ctx.report(d);
            }
        }
    }
}

fn finding(
    ctx: &Context<'_>,
    gf: &GlueFn<'_>,
    index: usize,
    u: &PtrUse<'_>,
    linear: &Linear<'_, '_>,
) -> Diagnostic {
    let m = ctx.cuda();
    let l = &m.launches[linear.launch];
    let name = gf.params[index].0;
    let message = if linear.row {
        format!("`{name}` may be non-contiguous, but kernel `{}` takes raw pointers to rows of its accessor and walks them as contiguous", l.kernel)
    } else {
        format!(
            "`{name}` may be non-contiguous, but kernel `{}` indexes its raw pointer linearly",
            l.kernel
        )
    };
    let what = if linear.row { "row pointer" } else { "indexed" };
    let mut d = ctx
        .diagnostic(u.node, message)
        .primary_label(format!("raw pointer from `{name}`, strides ignored"))
        .with_label(Span::of(&l.node), "launched here");
    d = match &linear.indexed {
        Indexed::Here(a) => d.with_label(
            Span::of(&a.node),
            format!("{what} as if `{name}` were contiguous"),
        ),
        Indexed::Header { path, line } => d.note(format!(
            "kernel `{}` is defined in `{}`: line {line} {} `{}` as if it were contiguous",
            l.kernel,
            path.file_name()
                .map_or_else(|| path.to_string_lossy(), |f| f.to_string_lossy()),
            if linear.row {
                "takes a row pointer of"
            } else {
                "indexes"
            },
            linear.kernel_param,
        )),
    };
    let note = if linear.row {
        "`acc[b][i].data()` points at a row's first element; reading on from it assumes the last dimension has stride 1, which a transposed or sliced tensor does not have"
    } else {
        "a transposed, sliced or expanded tensor has strides that linear indexing ignores: an expanded view has stride 0 and fewer bytes than numel(), so the kernel reads past the allocation"
    };
    d.note(note).help(format!(
        "take the pointer from a contiguous copy (`auto {name}_c = {name}.contiguous();` then `{name}_c.data_ptr<…>()`) or check `TORCH_CHECK({name}.is_contiguous(), \"{name} must be contiguous\");`; confirm at run time with `compute-sanitizer --tool memcheck python train.py`"
    ))
}

/// Does a launch argument or kernel parameter carry the memory layout (strides, a
/// channels-last flag)? Then the kernel does not assume a contiguous tensor.
fn layout_aware(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.contains("stride") || lower.contains("channels_last") || lower.contains("layout")
}

/// The argument spans of the launches of `gf`: per launch, the bytes from its first
/// argument's start to its last one's end, sorted by start, each with the launch's position in
/// `gf.launches` and the largest end of the spans up to it. A use outside them is in none of
/// the launches' arguments: a function of many launches, each with its own pointer, would
/// otherwise ask every launch about every use (the square of the launches).
struct ArgumentSpans {
    /// `(start, end, position in gf.launches, largest end so far)`.
    sorted: Vec<(usize, usize, usize, usize)>,
}

impl ArgumentSpans {
    fn of(m: &CudaModel<'_>, gf: &GlueFn<'_>) -> Self {
        let mut sorted: Vec<(usize, usize, usize, usize)> = gf
            .launches
            .iter()
            .enumerate()
            .filter_map(|(i, &li)| {
                let args = &m.launches.get(li)?.args;
                let start = args.iter().map(|a| a.start_byte()).min()?;
                let end = args.iter().map(|a| a.end_byte()).max()?;
                Some((start, end, i, 0))
            })
            .collect();
        sorted.sort_unstable();
        let mut reach = 0;
        for span in &mut sorted {
            reach = reach.max(span.1);
            span.3 = reach;
        }
        Self { sorted }
    }

    /// The positions in `gf.launches` of the launches whose arguments hold the bytes
    /// `start..end`, in increasing order.
    fn holding(&self, start: usize, end: usize) -> Vec<usize> {
        let upto = self.sorted.partition_point(|s| s.0 <= start);
        let mut found: Vec<usize> = self.sorted[..upto]
            .iter()
            .rev()
            .take_while(|s| s.3 >= end)
            .filter(|s| s.1 >= end)
            .map(|s| s.2)
            .collect();
        found.sort_unstable();
        found
    }
}

/// The launch that takes this pointer and where its kernel (of this file, or of a project
/// header) walks the matching parameter as contiguous, when the launch passes no strides.
/// `spans`: the [`ArgumentSpans`] of `gf`.
fn linear_access<'a, 't>(
    m: &'a CudaModel<'t>,
    gf: &GlueFn<'t>,
    u: &PtrUse<'t>,
    spans: &ArgumentSpans,
) -> Option<Linear<'a, 't>> {
    // A use not stored in a variable reaches a launch only inside one of its arguments.
    let candidates: Vec<usize> = if u.var.is_none() {
        spans.holding(u.node.start_byte(), u.node.end_byte())
    } else {
        (0..gf.launches.len()).collect()
    };
    for li in candidates.into_iter().map(|i| gf.launches[i]) {
        if !gf.use_reaches(m, u, li) {
            continue;
        }
        let l = &m.launches[li];
        if l.args.iter().any(|a| layout_aware(m.text(*a))) {
            return None;
        }
        let pos = u.arg_position(m, l)?;
        if let Some(kernel) = m.launched_kernel(l) {
            if kernel.params.iter().any(|p| layout_aware(p.name)) {
                return None;
            }
            let param = kernel.params.get(pos)?;
            // `p[0]` reads one element: strides do not matter. An accessor honours them,
            // unless its rows are taken as raw pointers.
            let access = if u.accessor {
                param
                    .accessor
                    .then(|| m.row_pointer(kernel, param.name))
                    .flatten()
            } else {
                param
                    .pointer
                    .then(|| m.indexed_accesses(kernel, param.name).next())
                    .flatten()
            };
            return access.map(|a| Linear {
                launch: li,
                kernel_param: param.name.to_string(),
                indexed: Indexed::Here(a),
                row: u.accessor,
            });
        }
        let seen = m.headers().kernel(l.kernel)?;
        if seen.kernel.params.iter().any(|p| layout_aware(&p.name)) {
            return None;
        }
        let param = seen.kernel.params.get(pos)?;
        let line = if u.accessor {
            param.row_pointer.filter(|_| param.accessor)
        } else {
            param.linear.filter(|_| param.pointer)
        };
        return line.map(|line| Linear {
            launch: li,
            kernel_param: param.name.clone(),
            indexed: Indexed::Header {
                path: seen.path,
                line,
            },
            row: u.accessor,
        });
    }
    None
}
