//! PT010: `cudnn.benchmark = True` with input shapes that vary per step.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::python::PythonModel;
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;
use gpulint_syntax::{descendants, named_children};
use tree_sitter::Node;

declare_rule! {
    /// ## What it does
    /// Finds `torch.backends.cudnn.benchmark = True` in a file that also shows signs of input
    /// shapes changing from step to step: padding batches to their longest sequence
    /// (`pad_sequence`, `pack_padded_sequence`), a random resize (`size=` computed with
    /// `random`, `np.random` or `torch.randint`), or size-jittering transforms
    /// (`RandomResize`, `RandomShortestSize`, `ScaleJitter`). Fixed-shape pipelines, the
    /// intended use of benchmark mode, are left alone. Applies to files that import `torch`.
    ///
    /// ## Why is this risky?
    /// With benchmark mode cuDNN times every convolution algorithm for each new input shape.
    /// With varying shapes it benchmarks again and again, and the algorithms it tries may need
    /// very large workspaces: "on a 40GB GPU, the first layer uses 36GB workspace, and then the
    /// second layer fails with OOM" (pytorch/pytorch#49207). Variable sizes also make each new
    /// shape slow (pytorch/pytorch#2759). `CUDNN_CONV_WSCAP_DBG` caps the workspace.
    ///
    /// ## Example
    /// ```python
    /// import torch
    /// from torch.nn.utils.rnn import pad_sequence
    ///
    /// torch.backends.cudnn.benchmark = True
    ///
    /// def collate(batch):
    ///     return pad_sequence(batch, batch_first=True)
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// import torch
    /// from torch.nn.utils.rnn import pad_sequence
    ///
    /// torch.backends.cudnn.benchmark = False
    ///
    /// def collate(batch):
    ///     return pad_sequence(batch, batch_first=True)
    /// ```
    ///
    /// ## References
    /// - pytorch/pytorch#49207 (benchmark workspace OOM):
    ///   <https://github.com/pytorch/pytorch/issues/49207>
    /// - pytorch/pytorch#2759 (variable input sizes with benchmark mode):
    ///   <https://github.com/pytorch/pytorch/issues/2759>
    /// - CUDA environment variables (`CUDNN_CONV_WSCAP_DBG`):
    ///   <https://pytorch.org/docs/stable/cuda_environment_variables.html>
    pub static PT010 = {
        code: "PT010",
        name: "cudnn-benchmark-variable-shapes",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Info,
        summary: "`cudnn.benchmark = True` with input shapes that vary per step",
        kinds: &[],
        needles: &["torch"],
        also_needles: &["benchmark"],
        options: &[],
    };
}

pub struct CudnnBenchmarkVariableShapes;

/// Calls whose presence means batch shapes vary.
const VARIABLE_SHAPE_CALLS: &[&str] = &[
    "torch.nn.utils.rnn.pad_sequence",
    "torch.nn.utils.rnn.pack_padded_sequence",
];

const JITTER_TRANSFORMS: &[&str] = &["RandomResize", "RandomShortestSize", "ScaleJitter"];

impl Rule for CudnnBenchmarkVariableShapes {
    fn meta(&self) -> &'static RuleMeta {
        &PT010
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.python();
        if !m.imports_torch() {
            return;
        }
        let Some(assign) = m.attribute_assignments.iter().copied().find(|a| {
            a.field("left")
                .and_then(|l| m.qualified_name(l))
                .is_some_and(|q| q == "torch.backends.cudnn.benchmark")
                && a.field("right")
                    .and_then(|r| m.const_value(r))
                    .is_some_and(|v| v.truthy())
        }) else {
            return;
        };
        let Some((sign, why)) = variable_shape_sign(m) else {
            return;
        };
        ctx.report(
            ctx.diagnostic(assign, "cuDNN benchmark mode is on, but input shapes vary from step to step")
                .primary_label("cuDNN benchmarks again for every new shape")
                .with_label(Span::of(&sign), why)
                .note("benchmarking may pick algorithms with huge workspaces and run out of GPU memory, and every new shape is slow")
                .help("leave `torch.backends.cudnn.benchmark` off for variable shapes, or pad / bucket inputs to a few fixed sizes (`CUDNN_CONV_WSCAP_DBG` caps the workspace)"),
        );
    }
}

/// The first sign of per-step shape changes, with why it is one.
fn variable_shape_sign<'t>(m: &PythonModel<'t>) -> Option<(Node<'t>, &'static str)> {
    for &(call, _) in &m.calls {
        let Some(func) = call.field("function") else {
            continue;
        };
        let q = m.qualified_name(func).unwrap_or_default();
        if VARIABLE_SHAPE_CALLS.contains(&q.as_str()) {
            return Some((
                call,
                "batches are padded to their longest sequence here, so their shape changes",
            ));
        }
        let last = m.text(func).rsplit('.').next().unwrap_or("");
        if JITTER_TRANSFORMS.contains(&last) {
            return Some((call, "this transform resizes to a random size"));
        }
        let Some(args) = call.field("arguments") else {
            continue;
        };
        for a in named_children(args).filter(|a| a.kind_name() == "keyword_argument") {
            let key = a.field("name").map(|n| m.text(n));
            let Some(value) = a.field("value") else {
                continue;
            };
            if matches!(key, Some("size" | "scale_factor")) && is_random(m, value) {
                return Some((a, "inputs are resized to a random size here"));
            }
        }
    }
    None
}

fn is_random(m: &PythonModel<'_>, expr: Node<'_>) -> bool {
    descendants(expr).any(|n| {
        n.kind_name() == "call"
            && n.field("function")
                .and_then(|f| m.qualified_name(f))
                .is_some_and(|q| {
                    q.starts_with("random.")
                        || q.starts_with("numpy.random.")
                        || q == "torch.randint"
                })
    })
}
