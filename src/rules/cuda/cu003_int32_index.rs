//! CU003: a 32-bit global thread index compared against a 64-bit size.

use super::cu001_unguarded_thread_index::SANITIZER;
use crate::checker::Context;
use crate::declare_rule;
use crate::diagnostic::{Severity, Span};
use crate::lang::Lang;
use crate::rule::{Rule, RuleLang, RuleMeta};
use crate::semantic::cuda::{Flags, GuardKind};
use crate::semantic::NodeExt;

declare_rule! {
    /// ## What it does
    /// Finds kernels that compute a global thread index (`blockIdx.x * blockDim.x +
    /// threadIdx.x`) into a 32-bit variable (`int`, `unsigned`, `int32_t`, `uint32_t`) and
    /// bound it with a size parameter declared 64-bit (`int64_t`, `size_t`, `long`,
    /// `long long`): the kernel is written for tensors with more than 2³¹ − 1 elements, but its
    /// index cannot reach them.
    ///
    /// Kernels whose size parameter is itself 32-bit are not reported: they are consistently
    /// limited to small tensors (the glue must check the size). The narrowing in the glue
    /// (`int n = x.numel()`) is not checked yet.
    ///
    /// ## Why is this risky?
    /// The product `blockIdx.x * blockDim.x` is evaluated in 32-bit unsigned arithmetic and the
    /// result is stored in a 32-bit variable. With more than 2³¹ − 1 elements (about 8.6 GB of
    /// fp32, common for embeddings and large batches) the index wraps or turns negative, and the
    /// kernel reads or writes far outside the tensor: an illegal memory access, or silent
    /// corruption. The comparison `i < n` against the 64-bit size does not catch it.
    ///
    /// ## Example
    /// ```cuda
    /// __global__ void scale(const float* x, float* y, float a, int64_t n) {
    ///     int i = blockIdx.x * blockDim.x + threadIdx.x;
    ///     if (i < n) y[i] = a * x[i];
    /// }
    /// ```
    ///
    /// ## Use instead
    /// ```cuda
    /// __global__ void scale(const float* x, float* y, float a, int64_t n) {
    ///     int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    ///     if (i < n) y[i] = a * x[i];
    /// }
    /// ```
    ///
    /// ## References
    /// - TensorFlow "Create an op", GPU kernels (`OP_REQUIRES(context, input_tensor.NumElements()
    ///   <= tensorflow::kint32max, …)`): <https://www.tensorflow.org/guide/create_op#gpu_kernels>
    /// - microsoft/onnxruntime#28107 (int32 index overflow in Gather, CUDA error 700):
    ///   <https://github.com/microsoft/onnxruntime/issues/28107>
    /// - tensorflow/tensorflow#60330 (illegal address when the element count exceeds int32):
    ///   <https://github.com/tensorflow/tensorflow/issues/60330>
    /// - Compute Sanitizer, memcheck tool:
    ///   <https://docs.nvidia.com/compute-sanitizer/ComputeSanitizer/index.html#memcheck-tool>
    pub static CU003 = {
        code: "CU003",
        name: "int32-thread-index",
        lang: RuleLang::Source(Lang::Cuda),
        severity: Severity::Warning,
        summary: "32-bit global thread index bounded by a 64-bit size: it overflows on large tensors",
        kinds: &[],
        needles: &["__global__", "GLOBAL"],
        options: &[],
    };
}

const NARROW: &[&str] = &[
    "int",
    "unsigned",
    "unsigned int",
    "int32_t",
    "uint32_t",
    "uint",
];
const WIDE: &[&str] = &[
    "int64_t",
    "size_t",
    "long",
    "long long",
    "unsigned long",
    "unsigned long long",
    "uint64_t",
    "ssize_t",
    "ptrdiff_t",
];

pub struct Int32ThreadIndex;

impl Rule for Int32ThreadIndex {
    fn meta(&self) -> &'static RuleMeta {
        &CU003
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.cuda();
        for k in &m.kernels {
            if k.too_large || k.node.has_error() {
                continue;
            }
            let (ks, ke) = (k.node.start_byte(), k.node.end_byte());
            let mut done: Vec<&str> = Vec::new();
            for g in &m.guards {
                if !matches!(
                    g.kind,
                    GuardKind::If | GuardKind::EarlyExit | GuardKind::Loop
                ) || g.cond.start_byte() < ks
                    || g.cond.end_byte() > ke
                {
                    continue;
                }
                let mut c = g.cond;
                for _ in 0..4 {
                    c = match c.kind() {
                        "condition_clause" | "parenthesized_expression" => {
                            match c.field("value").or_else(|| c.named_child(0)) {
                                Some(inner) => inner,
                                None => break,
                            }
                        }
                        _ => break,
                    };
                }
                if c.kind() != "binary_expression"
                    || !c
                        .field("operator")
                        .is_some_and(|o| matches!(o.kind(), "<" | "<=" | ">=" | ">"))
                {
                    continue;
                }
                let (Some(l), Some(r)) = (c.field("left"), c.field("right")) else {
                    continue;
                };
                let (idx, size) = (m.text(l), m.text(r));
                let Some(p) = k.param(size) else {
                    continue;
                };
                let pty = p.node.field("type").map(|t| m.text(t).trim()).unwrap_or("");
                if !WIDE.contains(&pty) || done.contains(&idx) {
                    continue;
                }
                let Some(li) = k.local(idx) else {
                    continue;
                };
                if !k.flags[li].has(Flags::CANONICAL) {
                    continue;
                }
                // The declaration of the index: a 32-bit type.
                let Some(decl) = k.defs[li].iter().find_map(|v| {
                    let d = v.parent()?.parent()?;
                    (d.kind() == "declaration").then_some(d)
                }) else {
                    continue;
                };
                let ty = decl.field("type").map(|t| m.text(t).trim()).unwrap_or("");
                if !NARROW.contains(&ty) {
                    continue;
                }
                done.push(idx);
                let Some(tnode) = decl.field("type") else {
                    continue;
                };
                let d = ctx
                    .diagnostic(
                        tnode,
                        format!("thread index `{idx}` is a 32-bit `{ty}`, but it is bounded by `{size}`, a 64-bit `{pty}`: past 2³¹ − 1 elements it wraps and the kernel accesses memory far outside the tensor"),
                    )
                    .primary_label(format!("`{idx}` is 32-bit"))
                    .with_label(Span::of(&p.node), "the size is 64-bit")
                    .with_label(g.label, "this check cannot catch the wrapped index")
                    .note("`blockIdx.x * blockDim.x` is evaluated in 32-bit unsigned arithmetic")
                    .help(format!("declare `int64_t {idx} = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;`; confirm at run time with `{SANITIZER}`"));
                ctx.report(d);
            }
        }
    }
}
