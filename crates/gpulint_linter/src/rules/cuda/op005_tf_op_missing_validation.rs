//! OP005: a TensorFlow GPU op's `Compute` that uses its inputs without `OP_REQUIRES`
//! validation, narrows the element count to 32 bits, or drops the status of `allocate_output`.

use super::short;
use super::SANITIZER;
use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::cuda::narrow::{narrowing_of, INT32_LIMITS};
use gpulint_semantic::cuda::tf_op::{callee_name, method_object, TfCompute};
use gpulint_semantic::cuda::CudaModel;
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;

declare_rule! {
    /// ## What it does
    /// Checks the `Compute(OpKernelContext* context)` method of TensorFlow op kernels that read
    /// an input (`context->input(i)`) and start GPU work (a kernel launch, a
    /// `Functor<GPUDevice, T>()(context->eigen_device<…>(), …)` call, or a `Launch…` helper on
    /// the op's device or stream). It reports:
    ///
    /// - a rank-dependent use of an input (`x.dim_size(2)`, `x.shape().dim_size(1)`,
    ///   `x.matrix<T>()`, `x.tensor<T, 4>()`, `x.vec<T>()`, `x.scalar<T>()`) before any
    ///   `OP_REQUIRES`, `OP_REQUIRES_OK`, validation helper or early-returning `if` that
    ///   mentions that input;
    /// - `static_cast<int>(x.NumElements())` (or `int n = x.NumElements()`) in an op that never
    ///   checks `NumElements() <= tensorflow::kint32max` (or `INT_MAX`);
    /// - `context->allocate_output(…)` / `allocate_temp(…)` called as a bare statement, its
    ///   `Status` dropped instead of passed to `OP_REQUIRES_OK`.
    ///
    /// The rank finding is not reported when the file registers the op with a shape function
    /// that checks ranks (`SetShapeFn` with `WithRank`) and a dtype constraint: that validates
    /// graph construction. The element count is a run-time size and is reported regardless.
    ///
    /// ## Why is this risky?
    /// An input of the wrong rank makes `matrix<T>()` and friends fail a `CHECK`, which aborts
    /// the process (on Windows the `0xC0000409` fast-fail exit), and `dim_size(d)` past the rank
    /// reads garbage in optimised builds, so the kernel is launched with wrong sizes and
    /// accesses memory out of range. A count narrowed to `int` wraps past 2³¹ − 1 elements. A
    /// failed `allocate_output` leaves the output pointer null and the kernel writes through it:
    /// an illegal memory access instead of a clean `OOM` or `InvalidArgument` error.
    ///
    /// ## Example
    /// ```cuda
    /// class RowSumOp : public OpKernel {
    ///  public:
    ///   explicit RowSumOp(OpKernelConstruction* context) : OpKernel(context) {}
    ///   void Compute(OpKernelContext* context) override {
    ///     const Tensor& input = context->input(0);
    ///     const int rows = input.dim_size(0);
    ///     const int cols = input.dim_size(1);
    ///     Tensor* output = nullptr;
    ///     OP_REQUIRES_OK(context, context->allocate_output(0, TensorShape({rows}), &output));
    ///     RowSumFunctor<GPUDevice>()(context->eigen_device<GPUDevice>(),
    ///                                input.flat<float>().data(), output->flat<float>().data(),
    ///                                rows, cols);
    ///   }
    /// };
    /// ```
    ///
    /// ## Use instead
    /// ```cuda
    /// class RowSumOp : public OpKernel {
    ///  public:
    ///   explicit RowSumOp(OpKernelConstruction* context) : OpKernel(context) {}
    ///   void Compute(OpKernelContext* context) override {
    ///     const Tensor& input = context->input(0);
    ///     OP_REQUIRES(context, TensorShapeUtils::IsMatrix(input.shape()),
    ///                 errors::InvalidArgument("input must be a matrix"));
    ///     OP_REQUIRES(context, input.NumElements() <= tensorflow::kint32max,
    ///                 errors::InvalidArgument("too many elements"));
    ///     const int rows = input.dim_size(0);
    ///     const int cols = input.dim_size(1);
    ///     Tensor* output = nullptr;
    ///     OP_REQUIRES_OK(context, context->allocate_output(0, TensorShape({rows}), &output));
    ///     RowSumFunctor<GPUDevice>()(context->eigen_device<GPUDevice>(),
    ///                                input.flat<float>().data(), output->flat<float>().data(),
    ///                                rows, cols);
    ///   }
    /// };
    /// ```
    ///
    /// ## References
    /// - TensorFlow guide, "Create an op" (validation with `OP_REQUIRES` / `OP_REQUIRES_OK`,
    ///   and the GPU kernel's `OP_REQUIRES(context, input_tensor.NumElements() <=
    ///   tensorflow::kint32max, …)`): <https://www.tensorflow.org/guide/create_op>
    /// - Compute Sanitizer, memcheck tool:
    ///   <https://docs.nvidia.com/compute-sanitizer/ComputeSanitizer/index.html#memcheck-tool>
    pub static OP005 = {
        code: "OP005",
        name: "tf-op-missing-validation",
        lang: RuleLang::Source(Lang::Cuda),
        severity: Severity::Warning,
        summary: "TensorFlow GPU op uses its inputs without OP_REQUIRES validation, or narrows sizes to 32 bits",
        kinds: &[],
        needles: &["OpKernelContext"],
        options: &[],
    };
}

/// Tensor methods that require a given rank.
const RANK_METHODS: &[&str] = &["dim_size", "matrix", "tensor", "vec", "scalar"];

/// Allocations that return a `Status`.
const ALLOCATIONS: &[&str] = &[
    "allocate_output",
    "allocate_temp",
    "forward_input_or_allocate_output",
    "allocate_persistent",
];

pub struct TfOpMissingValidation;

impl Rule for TfOpMissingValidation {
    fn meta(&self) -> &'static RuleMeta {
        &OP005
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.cuda();
        let src = m.source;
        let shape_fn_checks_rank = src.contains("SetShapeFn")
            && src.contains("WithRank")
            && (src.contains("TypeConstraint") || src.contains(".Attr("));
        for c in m.tf_computes() {
            if !shape_fn_checks_rank {
                check_rank(ctx, m, &c);
            }
            check_narrowing(ctx, m, &c);
            check_allocations(ctx, m, &c);
        }
    }
}

fn check_rank<'t>(ctx: &mut Context<'_>, m: &CudaModel<'t>, c: &TfCompute<'t>) {
    for call in &c.calls {
        let Some(method) = callee_name(*call, m.source) else {
            continue;
        };
        if !RANK_METHODS.contains(&method) {
            continue;
        }
        let Some(input) = method_object(*call, m.source).and_then(|o| c.input_of(o)) else {
            continue;
        };
        if c.validated_before(input, call.start_byte(), m.source) {
            continue;
        }
        let read = c.inputs.iter().find(|(n, _)| *n == input).map(|(_, r)| *r);
        let what = if method == "dim_size" {
            "an input of lower rank makes `dim_size` read past the shape (garbage sizes in optimised builds), and the GPU kernel then indexes out of range"
        } else {
            "an input of another rank fails a `CHECK` here, which aborts the whole process instead of raising an error"
        };
        let mut d = ctx
            .diagnostic(
                *call,
                format!(
                    "`{}` assumes the rank of input `{input}`, but no `OP_REQUIRES` checks it first: {what}",
                    short(m.text(*call))
                ),
            )
            .primary_label("rank assumed here");
        if let Some(r) = read {
            d = d.with_label(Span::of(&r), "the input is read here");
        }
        d = d.help(format!(
            "validate the input first, e.g. `OP_REQUIRES({0}, {input}.dims() == 2, errors::InvalidArgument(\"{input} must be rank 2\"));` or `TensorShapeUtils::IsMatrix({input}.shape())`; confirm at run time with `{SANITIZER}`",
            c.ctx
        ));
        ctx.report(d);
        // One finding per op: the first unvalidated use.
        return;
    }
}

fn check_narrowing<'t>(ctx: &mut Context<'_>, m: &CudaModel<'t>, c: &TfCompute<'t>) {
    let end = m.functions[c.function].node.end_byte();
    if c.validation_with(INT32_LIMITS, end, m.source).is_some() {
        return;
    }
    for call in &c.calls {
        if !matches!(
            callee_name(*call, m.source),
            Some("NumElements" | "num_elements")
        ) {
            continue;
        }
        let Some((narrow, ty)) = narrowing_of(m, *call) else {
            continue;
        };
        let d = ctx
            .diagnostic(
                narrow,
                format!(
                    "`{}` narrows the element count to a 32-bit `{ty}`, and the op never checks `NumElements() <= tensorflow::kint32max`: past 2³¹ − 1 elements the count wraps and the GPU kernel indexes out of range",
                    short(m.text(narrow))
                ),
            )
            .primary_label(format!("narrowed to `{ty}`"))
            .help(format!(
                "check first: `OP_REQUIRES({}, {}.NumElements() <= tensorflow::kint32max, errors::InvalidArgument(\"Too many elements in tensor\"));`, or index with `int64`; confirm at run time with `{SANITIZER}`",
                c.ctx,
                method_object(*call, m.source).unwrap_or("input")
            ));
        ctx.report(d);
        return;
    }
}

fn check_allocations<'t>(ctx: &mut Context<'_>, m: &CudaModel<'t>, c: &TfCompute<'t>) {
    for call in &c.calls {
        let Some(name) = callee_name(*call, m.source) else {
            continue;
        };
        let bare = m
            .parent(*call)
            .is_some_and(|p| p.kind_name() == "expression_statement");
        if !bare || !ALLOCATIONS.contains(&name) {
            continue;
        }
        let d = ctx
            .diagnostic(
                *call,
                format!("the `Status` of `{name}` is dropped: if the allocation fails, the output pointer stays null and the GPU kernel writes through it"),
            )
            .primary_label("status ignored")
            .help(format!(
                "wrap it: `OP_REQUIRES_OK({0}, {0}->{name}(…));`; confirm at run time with `{SANITIZER}`",
                c.ctx
            ));
        ctx.report(d);
    }
}
