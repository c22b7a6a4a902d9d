//! OP003: a tensor's untyped `data_ptr()` reinterpreted as a typed pointer without a dtype
//! check or dispatch; or an `AT_DISPATCH_*` lambda that reads the dispatched tensor as `float`.

use super::op_glue::{callers_note, python_note, LazyResolver};
use crate::context::Context;
use crate::declare_rule;
use crate::rule::{OptionKind, Rule, RuleLang, RuleMeta, RuleOption};
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::cuda::glue::{GlueFn, Origin, PtrUse, DTYPE};
use gpulint_semantic::cuda::CudaModel;
use gpulint_syntax::{Lang, NodeExt};

declare_rule! {
    /// ## What it does
    /// Finds, in a host function taking tensor parameters:
    /// - an untyped pointer from a parameter reinterpreted as a typed one
    ///   (`(float*)x.data_ptr()`, `reinterpret_cast<half*>(x.data_ptr())`,
    ///   `static_cast<float*>(x.mutable_data_ptr())`) outside any dispatch macro and with no
    ///   dtype check on `x` (`TORCH_CHECK(x.scalar_type() == at::kFloat)`, `x.dtype()`, an `if`
    ///   or `switch` on it) here or in its callers, nor by every Python call of the bound
    ///   function that the checked files hold (`x.float()`, `x.to(torch.half)`, a dtype
    ///   comparison that guards the call or raises; see OP002 for how calls are matched);
    /// - inside an `AT_DISPATCH_*` lambda, the dispatched tensor read as `float`
    ///   (`x.data_ptr<float>()`, `(float*)x.data_ptr()`) instead of `scalar_t`.
    ///
    /// Only casts to arithmetic element types count: byte-level casts (`uint8_t*`, `char*`,
    /// `void*`), casts to a struct (a metadata buffer), to `scalar_t*` (a dispatch supplies it)
    /// or to a template parameter of the function are not reported, nor are typed
    /// `data_ptr<T>()` calls outside a dispatch: PyTorch checks their dtype at run time. The
    /// dispatch macros are `AT_DISPATCH_*` (with `AT_DISPATCH_V2`) and apex's `DISPATCH_*`;
    /// add your own with the `dispatch-macros` option (a trailing `*` matches a prefix).
    ///
    /// ## Why is this risky?
    /// A cast does not convert: an fp16 or bf16 tensor read through a `float*` covers twice
    /// the bytes the tensor holds, so the kernel reads and writes past its end (an illegal
    /// address) or produces garbage. A dispatch lambda that hard-codes `float` defeats the
    /// dispatch: every other dtype it accepts fails or is misread.
    ///
    /// ## Example
    /// ```cuda
    /// #include <torch/extension.h>
    /// __global__ void clamp_kernel(float* x, float lo, float hi, int64_t n) {
    ///     int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    ///     if (i < n) x[i] = fminf(hi, fmaxf(lo, x[i]));
    /// }
    /// void clamp_(torch::Tensor x, double lo, double hi) {
    ///     TORCH_CHECK(x.is_cuda() && x.is_contiguous(), "x must be a contiguous CUDA tensor");
    ///     float* p = (float*)x.data_ptr();
    ///     int64_t n = x.numel();
    ///     clamp_kernel<<<(n + 255) / 256, 256>>>(p, lo, hi, n);
    /// }
    /// PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("clamp_", &clamp_); }
    /// ```
    ///
    /// ## Use instead
    /// ```cuda
    /// #include <torch/extension.h>
    /// __global__ void clamp_kernel(float* x, float lo, float hi, int64_t n) {
    ///     int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    ///     if (i < n) x[i] = fminf(hi, fmaxf(lo, x[i]));
    /// }
    /// void clamp_(torch::Tensor x, double lo, double hi) {
    ///     TORCH_CHECK(x.is_cuda() && x.is_contiguous(), "x must be a contiguous CUDA tensor");
    ///     TORCH_CHECK(x.scalar_type() == at::kFloat, "x must be float32");
    ///     float* p = (float*)x.data_ptr();
    ///     int64_t n = x.numel();
    ///     clamp_kernel<<<(n + 255) / 256, 256>>>(p, lo, hi, n);
    /// }
    /// PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("clamp_", &clamp_); }
    /// ```
    ///
    /// ## References
    /// - PyTorch tutorial "Custom C++ and CUDA Operators" (dtype `TORCH_CHECK`):
    ///   <https://pytorch.org/tutorials/advanced/cpp_custom_ops.html>
    /// - The `AT_DISPATCH_*` pattern of PyTorch's own kernels,
    ///   `AT_DISPATCH_FLOATING_TYPES_AND_HALF(q.scalar_type(), …, [&] { kernel<scalar_t><<<…>>>(q.data_ptr<scalar_t>() …) })`:
    ///   <https://github.com/pytorch/pytorch/blob/main/aten/src/ATen/Dispatch.h>
    pub static OP003 = {
        code: "OP003",
        name: "unchecked-dtype-cast",
        lang: RuleLang::Source(Lang::Cuda),
        severity: Severity::Warning,
        summary: "Tensor pointer reinterpreted as a type its dtype was never checked against",
        kinds: &[],
        needles: &["data_ptr", "data<"],
        options: &[RuleOption {
            key: "dispatch-macros",
            kind: OptionKind::StringList,
            default: "[\"AT_DISPATCH_*\", \"DISPATCH_FLOAT_AND_HALF\", \"DISPATCH_DOUBLE_FLOAT_AND_HALF\", \"DISPATCH_FLOAT_HALF_AND_BFLOAT\", \"DISPATCH_HALF_AND_BFLOAT\", \"DISPATCH_DOUBLE_AND_FLOAT\"]",
            doc: "Dtype dispatch macros, in addition to the built-in ones; a trailing `*` matches by prefix. Pointers taken inside one are not reported as unchecked.",
        }],
    };
}

pub struct UncheckedDtypeCast;

impl Rule for UncheckedDtypeCast {
    fn meta(&self) -> &'static RuleMeta {
        &OP003
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.cuda();
        let none: Vec<String> = Vec::new();
        let mut resolver = LazyResolver::new(&none);
        for gf in &m.glue.fns {
            let facts = &m.glue.facts.fns[gf.facts];
            let mut seen: Vec<usize> = Vec::new();
            for u in &gf.uses {
                if let Some(d) = u.dispatch {
                    hard_coded_float(ctx, m, gf, u, d);
                    continue;
                }
                let (Origin::Param { index, .. }, None, Some((cast, ty))) =
                    (u.origin, u.type_arg, u.cast)
                else {
                    continue;
                };
                if !is_element_pointer(ty) || seen.contains(&index) || in_dtype_branch(m, cast) {
                    continue;
                }
                if facts.covered.get(index).is_some_and(|p| p & DTYPE != 0) {
                    continue;
                }
                let r = resolver.get(ctx).coverage(gf.facts, index);
                if r.props & DTYPE != 0 {
                    continue;
                }
                let elem = ty.trim().trim_end_matches('*').trim();
                let elem = elem.trim_start_matches("const ").trim();
                // `(T*)x.data_ptr()` in a template: the binding picks T (`&op<float>`).
                if m.functions[gf.func]
                    .template_params
                    .iter()
                    .any(|(p, _)| *p == elem)
                {
                    continue;
                }
                seen.push(index);
                let name = gf.params[index].0;
                let mut d = ctx
                    .diagnostic(
                        cast,
                        format!(
                            "`{name}`'s data is reinterpreted as `{}` with no dtype check and no dispatch",
                            ty.trim()
                        ),
                    )
                    .primary_label(format!("assumes `{name}` holds `{elem}`"))
                    .note(format!(
                        "a cast does not convert: `{name}` of any other dtype is misread, and one with narrower elements than `{elem}` (fp16/bf16 read as fp32) is read and written past the end of its storage"
                    ));
                if let Some(l) = gf.launches.iter().find(|l| gf.use_reaches(m, u, **l)) {
                    let l = &m.launches[*l];
                    d = d.with_label(
                        Span::of(&l.node),
                        format!("`{}` reads it as `{elem}`", l.kernel),
                    );
                }
                d = callers_note(d, &r.callers, "do not check its dtype either");
                d = python_note(d, &r.python, DTYPE, "check or convert its dtype");
                d = d.help(format!(
                    "check the dtype first (`TORCH_CHECK({name}.scalar_type() == {}, \"{name} must be {elem}\");`) or dispatch with `AT_DISPATCH_FLOATING_TYPES_AND_HALF({name}.scalar_type(), …, [&] {{ … {name}.data_ptr<scalar_t>() … }})`; confirm at run time with `compute-sanitizer --tool memcheck python train.py`",
                    scalar_type_of(elem)
                ));
                ctx.report(d);
            }
        }
    }
}

/// Is `node` in a branch on some tensor's dtype (`if (x.scalar_type() == at::kHalf)`,
/// `switch (x.scalar_type())`): a dispatch written by hand?
fn in_dtype_branch(m: &CudaModel<'_>, node: tree_sitter::Node<'_>) -> bool {
    const DTYPE_WORDS: &[&str] = &[
        "scalar_type",
        "dtype",
        "ScalarType",
        "kFloat",
        "kHalf",
        "kBFloat16",
        "kDouble",
        "is_floating_point",
        "element_size",
        "itemsize",
    ];
    let mut cur = node;
    for _ in 0..64 {
        let Some(p) = m.parent(cur) else {
            return false;
        };
        match p.kind_name() {
            "function_definition" => return false,
            "if_statement" | "switch_statement" | "conditional_expression" => {
                if let Some(c) = p.field("condition") {
                    let t = m.text(c);
                    if DTYPE_WORDS.iter().any(|w| t.contains(w)) {
                        return true;
                    }
                }
            }
            _ => {}
        }
        cur = p;
    }
    false
}

/// The `at::ScalarType` constant for a C++ element type.
fn scalar_type_of(elem: &str) -> &'static str {
    match gpulint_semantic::cuda::last_name(elem) {
        "float" | "float2" | "float4" => "at::kFloat",
        "double" => "at::kDouble",
        "half" | "__half" | "half2" | "__half2" | "Half" => "at::kHalf",
        "__nv_bfloat16" | "nv_bfloat16" | "BFloat16" | "__nv_bfloat162" => "at::kBFloat16",
        "int" | "int32_t" => "at::kInt",
        "int64_t" | "long" | "long long" => "at::kLong",
        "int16_t" | "short" => "at::kShort",
        "bool" => "at::kBool",
        _ => "at::k…",
    }
}

/// A pointer to an arithmetic element type the tensor's dtype must match (`float*`,
/// `const __half*`, `int64_t*`). Not: byte pointers (`uint8_t*`, `char*`, `void*`: byte-level
/// access sized by `nbytes()`), `scalar_t*` (the type comes from a dispatch), structs
/// (a metadata buffer read as its layout), pointers to pointers.
fn is_element_pointer(ty: &str) -> bool {
    let t = ty.replace("const", " ").replace("volatile", " ");
    if t.matches('*').count() != 1 {
        return false;
    }
    let t = t.replace('*', " ");
    let t = t.split_whitespace().collect::<Vec<_>>().join(" ");
    matches!(
        gpulint_semantic::cuda::last_name(&t),
        "float"
            | "double"
            | "half"
            | "__half"
            | "half2"
            | "__half2"
            | "Half"
            | "BFloat16"
            | "__nv_bfloat16"
            | "__nv_bfloat162"
            | "nv_bfloat16"
            | "float2"
            | "float4"
            | "double2"
            | "int"
            | "unsigned"
            | "unsigned int"
            | "long"
            | "long long"
            | "short"
            | "int16_t"
            | "int32_t"
            | "int64_t"
            | "uint16_t"
            | "uint32_t"
            | "uint64_t"
            | "bool"
    )
}

/// Inside an `AT_DISPATCH_*` lambda over floating types, the dispatched tensor read as `float`.
fn hard_coded_float<'t>(
    ctx: &mut Context<'_>,
    m: &CudaModel<'t>,
    gf: &GlueFn<'t>,
    u: &PtrUse<'t>,
    d: usize,
) {
    let Some(dispatch) = m.glue.dispatches.get(d) else {
        return;
    };
    let name = dispatch.name;
    let floating = name.starts_with("AT_DISPATCH_")
        && (name.contains("FLOATING") || name.contains("ALL_TYPES") || name == "AT_DISPATCH_V2");
    let (Some(body), Some(tensor), true) = (dispatch.body, dispatch.tensor, floating) else {
        return;
    };
    if u.node.start_byte() < body.start_byte() || u.node.end_byte() > body.end_byte() {
        return;
    }
    let is_float = |t: &str| {
        let t: String = t.chars().filter(|c| !c.is_whitespace()).collect();
        t == "float" || t == "float*" || t == "constfloat*"
    };
    let (node, how) = match (u.type_arg, u.cast) {
        (Some(t), _) if is_float(t) => (u.node, "data_ptr<float>()"),
        (None, Some((c, t))) if is_float(t) => (c, "a float* cast"),
        _ => return,
    };
    // The same tensor as the dispatch: same name, or both from the same parameter.
    let receiver = m.text(u.receiver).trim();
    let same = receiver == tensor
        || match gf.origin_of_name(m.source, tensor) {
            Origin::Param { index, .. } => {
                matches!(u.origin, Origin::Param { index: i, .. } if i == index)
            }
            _ => false,
        };
    if !same {
        return;
    }
    let diag = ctx
        .diagnostic(
            node,
            format!("`{name}` dispatches on the dtype of `{tensor}`, but its lambda reads `{receiver}` through {how}"),
        )
        .primary_label("hard-coded `float` instead of `scalar_t`")
        .with_label(Span::of(&dispatch.node), "dispatched here")
        .note(format!("for every other dtype the dispatch accepts (double, half, …) this raises or reinterprets the bytes of `{receiver}` as fp32, reading past its end"))
        .help(format!("use the dispatched type: `{receiver}.data_ptr<scalar_t>()` (and `kernel<scalar_t>`); confirm at run time with `compute-sanitizer --tool memcheck python train.py`"));
    ctx.report(diag);
}

#[cfg(test)]
mod tests {
    use super::super::op_tests::{count, with_list};
    use crate::settings::Settings;

    const SRC: &str = r#"#include <torch/extension.h>
__global__ void neg_kernel(float* y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = -y[i];
}
void neg_(torch::Tensor y) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous(), "y must be a contiguous CUDA tensor");
  int64_t n = y.numel();
  MY_FLOAT_DISPATCH(y.scalar_type(), [&] {
    neg_kernel<<<(n + 255) / 256, 256>>>((float*)y.data_ptr(), n);
  });
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("neg_", &neg_); }
"#;

    #[test]
    fn dispatch_macros_come_from_config() {
        assert_eq!(count("OP003", SRC, &Settings::default()), 1);
        let settings = with_list(
            "OP003",
            "dispatch-macros",
            &["MY_*_DISPATCH", "MY_FLOAT_DISPATCH"],
        );
        assert_eq!(count("OP003", SRC, &settings), 0);
    }
}
