//! OP001: a torch op takes a raw pointer from a tensor parameter without validating its device
//! (and, with several inputs, their shapes) before a kernel launch.

use super::op_glue::{callers_note, merge_callers, LazyResolver};
use crate::context::Context;
use crate::declare_rule;
use crate::rule::{OptionKind, Rule, RuleLang, RuleMeta, RuleOption};
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::cuda::glue::{GlueFn, Origin, PtrUse, VacuousCheck, DEVICE, SHAPE};
use gpulint_semantic::cuda::{CudaModel, Kernel};
use gpulint_syntax::Lang;

declare_rule! {
    /// ## What it does
    /// In a host function taking `at::Tensor` / `torch::Tensor` parameters that takes a raw
    /// pointer or accessor from a parameter (`data_ptr<T>()`, `data_ptr()`, `mutable_data_ptr`,
    /// `const_data_ptr`, `packed_accessor32/64`, `accessor`) and launches a kernel, finds
    /// parameters whose device is not checked, and, when two or more parameters reach the
    /// kernel, whose shape is not checked either. A check is a `TORCH_CHECK`,
    /// `STD_TORCH_CHECK`, `TORCH_INTERNAL_ASSERT` or `AT_ASSERTM` on `x.is_cuda()` /
    /// `x.device()` (device) or `x.sizes()` / `x.size(0)` / `x.numel()` / `x.dim()` (shape),
    /// also through a macro `#define`d in the file (`CHECK_INPUT(x)`), an `if (x.is_cuda())`
    /// around the call, or ATen's `checkAllSameGPU` / `checkSize`. Any other macro whose name
    /// contains `CHECK` or `ASSERT` and takes the tensor counts as validating it.
    ///
    /// Checks in a caller count: a launcher that is not bound to Python in its own file
    /// (`m.def`, `TORCH_LIBRARY` `.impl`) is judged by its callers in the same file or in the
    /// C/C++ files of its directory and their parent (the usual `.cpp` wrapper that checks and
    /// calls `foo_cuda`), and not reported when no caller can be seen. The dtype is left to
    /// the typed accessors (`data_ptr<float>()` raises on a mismatch) and to OP003 for untyped
    /// pointers. Severity is error when a pointer from one tensor goes to a launch sized by
    /// another tensor's `numel()`.
    ///
    /// Also reported, in any host function taking tensors: a check that compares a tensor's
    /// property with itself, directly or through a local holding the same expression
    /// (`const auto D = p2.size(2); TORCH_CHECK(p2.size(2) == D, …)`). It can never fail, so
    /// the comparison it was meant to make (usually with another input) is missing.
    ///
    /// Python callers count as well: when the checked files hold the extension's build
    /// (`CUDAExtension(name="ext", …)`, `load(name="ext", …)`) and the Python calls of the bound
    /// function (`ext.fn(…)`; ops registered with `TORCH_LIBRARY` are not matched), a device that every such call guarantees
    /// (`x.cuda()`, `assert x.is_cuda`) needs no check in C++. Set `python-validated` to the
    /// names of bound functions whose Python wrappers validate their inputs (`torch._check` in
    /// `register_fake`, explicit checks), or `["*"]`.
    ///
    /// ## Why is this risky?
    /// A CPU tensor's `data_ptr()` is a host address: the kernel faults with an illegal memory
    /// access (or reads garbage through unified addressing). Inputs of mismatched sizes make a
    /// kernel that indexes one by the other's extent read or write out of bounds (CU002).
    ///
    /// ## Example
    /// ```cuda
    /// #include <torch/extension.h>
    /// __global__ void add_kernel(const float* a, const float* b, float* out, int64_t n) {
    ///     int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    ///     if (i < n) out[i] = a[i] + b[i];
    /// }
    /// torch::Tensor add(torch::Tensor a, torch::Tensor b) {
    ///     auto out = torch::empty_like(a);
    ///     int64_t n = a.numel();
    ///     add_kernel<<<(n + 255) / 256, 256>>>(a.data_ptr<float>(), b.data_ptr<float>(),
    ///                                        out.data_ptr<float>(), n);
    ///     return out;
    /// }
    /// PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("add", &add); }
    /// ```
    ///
    /// ## Use instead
    /// ```cuda
    /// #include <torch/extension.h>
    /// __global__ void add_kernel(const float* a, const float* b, float* out, int64_t n) {
    ///     int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    ///     if (i < n) out[i] = a[i] + b[i];
    /// }
    /// torch::Tensor add(torch::Tensor a, torch::Tensor b) {
    ///     TORCH_CHECK(a.is_cuda() && b.is_cuda(), "a and b must be CUDA tensors");
    ///     TORCH_CHECK(a.sizes() == b.sizes(), "a and b must have the same shape");
    ///     auto out = torch::empty_like(a);
    ///     int64_t n = a.numel();
    ///     add_kernel<<<(n + 255) / 256, 256>>>(a.data_ptr<float>(), b.data_ptr<float>(),
    ///                                        out.data_ptr<float>(), n);
    ///     return out;
    /// }
    /// PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("add", &add); }
    /// ```
    ///
    /// ## References
    /// - PyTorch tutorial "Custom C++ and CUDA Operators" (`TORCH_CHECK(a.sizes() == b.sizes())`,
    ///   `TORCH_CHECK(a.dtype() == at::kFloat)`, `TORCH_INTERNAL_ASSERT(a.device().type() == at::DeviceType::CUDA)`):
    ///   <https://pytorch.org/tutorials/advanced/cpp_custom_ops.html>
    /// - NVIDIA Compute Sanitizer, memcheck tool:
    ///   <https://docs.nvidia.com/compute-sanitizer/ComputeSanitizer/index.html#memcheck-tool>
    pub static OP001 = {
        code: "OP001",
        name: "unvalidated-tensor-pointer",
        lang: RuleLang::Source(Lang::Cuda),
        severity: Severity::Warning,
        summary: "Torch op takes a raw pointer from a tensor without device or shape validation",
        kinds: &[],
        needles: &["data_ptr", "accessor", "data<"],
        options: &[RuleOption {
            key: "python-validated",
            kind: OptionKind::StringList,
            default: "[]",
            doc: "Functions bound to Python whose Python-side wrapper validates device, dtype and shape of their inputs (\"*\" for all).",
        }],
    };
}

pub struct UnvalidatedTensorPointer;

/// Per parameter: its index, its first raw pointer, the missing properties, the tensor whose
/// `numel()` bounds the launch (and whether it is `numel`), and the launch.
type Finding<'a, 't> = (
    usize,
    &'a PtrUse<'t>,
    u8,
    Option<(&'t str, bool)>,
    Option<usize>,
);

impl Rule for UnvalidatedTensorPointer {
    fn meta(&self) -> &'static RuleMeta {
        &OP001
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.cuda();
        let trusted = ctx.option_strings("python-validated");
        let mut resolver = LazyResolver::new(&trusted);
        for gf in &m.glue.fns {
            for v in &gf.vacuous {
                report_vacuous(ctx, m, gf, v);
            }
            if gf.launches.is_empty() && !gf.calls_launcher {
                continue;
            }
            // The first raw pointer taken from each parameter.
            let mut used: Vec<(usize, &PtrUse<'_>)> = Vec::new();
            for u in &gf.uses {
                if let Origin::Param { index, .. } = u.origin {
                    if !used.iter().any(|(i, _)| *i == index) {
                        used.push((index, u));
                    }
                }
            }
            let facts = &m.glue.facts.fns[gf.facts];
            let fname = &m.functions[gf.func].name;
            // Per parameter: what is missing, and the tensor whose size sizes the launch.
            let mut findings: Vec<Finding<'_, '_>> = Vec::new();
            let mut callers = Vec::new();
            for (i, u) in &used {
                let launch = gf
                    .launches
                    .iter()
                    .copied()
                    .find(|l| gf.use_reaches(m, u, *l))
                    .or(gf.launches.first().copied());
                let sized_by = launch.and_then(|l| sized_by_other(m, gf, u, *i, l));
                let required = if sized_by.is_some() {
                    DEVICE | SHAPE
                } else {
                    DEVICE
                };
                let own = facts.covered.get(*i).copied().unwrap_or(0);
                if required & !own == 0 {
                    continue;
                }
                let r = resolver.get(ctx).coverage(gf.facts, *i);
                let missing = required & !own & !r.props;
                if missing == 0 {
                    continue;
                }
                merge_callers(&mut callers, r.callers);
                let sized_by = sized_by.filter(|_| missing & SHAPE != 0);
                findings.push((*i, *u, missing, sized_by, launch));
            }
            let Some(&(_, first, _, _, launch)) = findings.first() else {
                continue;
            };
            let names = |bit: u8| -> Vec<String> {
                findings
                    .iter()
                    .filter(|f| f.2 & bit != 0)
                    .map(|f| format!("`{}`", gf.params[f.0].0))
                    .collect()
            };
            let no_device = names(DEVICE);
            let reached = launch.is_some_and(|l| gf.use_reaches(m, first, l));
            let target = match launch.and_then(|l| m.launches.get(l)) {
                Some(l) if reached => format!("kernel `{}`", l.kernel),
                _ => format!("`{fname}`'s kernels"),
            };
            let mut parts = Vec::new();
            if !no_device.is_empty() {
                parts.push(format!(
                    "{} {} {target} as {} without a device check",
                    no_device.join(", "),
                    if no_device.len() == 1 {
                        "reaches"
                    } else {
                        "reach"
                    },
                    if no_device.len() == 1 {
                        "a raw pointer"
                    } else {
                        "raw pointers"
                    },
                ));
            }
            for (i, _, _, s, _) in &findings {
                if let Some((other, _)) = s {
                    parts.push(format!(
                        "`{}` is indexed up to `{other}.numel()` by {target} with no shape check against `{other}`",
                        gf.params[*i].0
                    ));
                }
            }
            let error = findings.iter().any(|f| f.3.is_some_and(|s| s.1));
            let mut d = ctx
                .diagnostic(first.node, format!("in `{fname}`: {}", parts.join("; ")))
                .primary_label(format!("raw pointer from `{}`", gf.params[findings[0].0].0));
            for (i, u, _, _, _) in findings.iter().skip(1) {
                d = d.with_label(
                    Span::of(&u.node),
                    format!("raw pointer from `{}`", gf.params[*i].0),
                );
            }
            if let Some(l) = launch.and_then(|l| m.launches.get(l)) {
                d = d.with_label(Span::of(&l.node), "launched here");
            }
            if error {
                d = d.severity(Severity::Error);
            }
            if !no_device.is_empty() {
                d = d.note("a CPU tensor's pointer is a host address: the kernel faults with an illegal memory access");
            }
            if findings.iter().any(|f| f.3.is_some()) {
                d = d.note("a tensor smaller than the one that sizes the launch is read or written past its end");
            }
            d = callers_note(d, &callers, "do not check either");
            let mut fixes = Vec::new();
            for (i, _, miss, s, _) in &findings {
                let name = gf.params[*i].0;
                if miss & DEVICE != 0 {
                    fixes.push(format!(
                        "`TORCH_CHECK({name}.is_cuda(), \"{name} must be a CUDA tensor\");`"
                    ));
                }
                if let Some((other, _)) = s {
                    fixes.push(format!("`TORCH_CHECK({name}.sizes() == {other}.sizes(), \"{name} and {other} must have the same shape\");`"));
                }
            }
            fixes.truncate(4);
            d = d.help(format!(
                "validate the inputs at the top of `{fname}` or of the function bound to Python: {}; confirm at run time with `compute-sanitizer --tool memcheck python train.py`",
                fixes.join(" ")
            ));
            ctx.report(d);
        }
    }
}

/// Another tensor parameter whose `numel()` bounds the kernel's accesses through this tensor's
/// pointer: the launch passes `other.numel()` (directly or through a local), and the kernel
/// reads or writes the pointer's parameter under a guard on that count.
/// A check that compares a tensor's property with itself validates nothing.
fn report_vacuous(ctx: &mut Context<'_>, m: &CudaModel<'_>, gf: &GlueFn<'_>, v: &VacuousCheck<'_>) {
    let (left, right) = (m.text(v.left), m.text(v.right));
    let name = gf.params[v.param].0;
    let fname = &m.functions[gf.func].name;
    let through = if left.trim() == right.trim() {
        String::new()
    } else {
        format!(" (`{right}` holds `{left}`)")
    };
    let d = ctx
        .diagnostic(
            v.call,
            format!("in `{fname}`: this check compares `{left}` with itself{through}, so it can never fail"),
        )
        .primary_label("always true")
        .with_label(Span::of(&v.right), format!("the same value as `{left}`"))
        .note(format!("whatever `{name}` was meant to be compared with is not checked: mismatched inputs reach the kernels, which index one by the other's extent"))
        .help(format!("compare `{left}` with the value it must match (the corresponding size of the other input)"));
    ctx.report(d);
}

fn sized_by_other<'t>(
    m: &CudaModel<'t>,
    gf: &GlueFn<'t>,
    u: &PtrUse<'t>,
    param: usize,
    launch: usize,
) -> Option<(&'t str, bool)> {
    let l = m.launches.get(launch)?;
    let kernel = m.launched_kernel(l)?;
    let ptr_pos = u.arg_position(m, l)?;
    let ptr_param = kernel.params.get(ptr_pos)?.name;
    for (pos, a) in l.args.iter().enumerate() {
        let t = m.text(*a);
        let mut texts = vec![t];
        for word in t.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
            texts.extend(gf.local_values(word).iter().take(4).map(|v| m.text(*v)));
        }
        let Some(count_param) = kernel.params.get(pos).map(|p| p.name) else {
            continue;
        };
        for (j, (p, is_tensor)) in gf.params.iter().enumerate() {
            if j == param || !is_tensor {
                continue;
            }
            let pat = format!("{p}.numel()");
            let hit = texts.iter().any(|t| {
                t.match_indices(&pat).any(|(k, _)| {
                    k == 0 || {
                        let c = t.as_bytes()[k - 1];
                        !(c.is_ascii_alphanumeric() || c == b'_' || c == b'.')
                    }
                })
            });
            if hit && bounded_by(m, kernel, ptr_param, count_param) {
                return Some((p, true));
            }
        }
    }
    None
}

/// Does the kernel access `ptr` under a guard that mentions `count`?
fn bounded_by<'t>(m: &CudaModel<'t>, k: &Kernel<'t>, ptr: &str, count: &str) -> bool {
    // `p[0]` reads one element whatever the count.
    m.indexed_accesses(k, ptr).any(|a| {
        m.guard_chain(a.guard).any(|g| {
            m.text(g.cond)
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .any(|w| w == count)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::super::op_tests::{count, neg_op, with_list};
    use crate::settings::Settings;

    #[test]
    fn python_side_validation_is_configurable() {
        let src = neg_op("PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\"neg\", &neg); }");
        assert_eq!(count("OP001", &src, &Settings::default()), 1);
        for names in [["neg"], ["*"]] {
            let settings = with_list("OP001", "python-validated", &names);
            assert_eq!(count("OP001", &src, &settings), 0);
        }
    }
}
