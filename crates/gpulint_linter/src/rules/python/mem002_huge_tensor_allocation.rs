//! MEM002: one literal-shaped tensor allocation that takes a large part of the GPU budget.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{OptionKind, Rule, RuleLang, RuleMeta, RuleOption};
use crate::settings::BudgetOrigin;
use gpulint_diagnostics::{Severity, Span};
use gpulint_memory::alloc::{literal_allocation, Device};
use gpulint_semantic::python::tf::argument;
use gpulint_semantic::python::PythonModel;
use gpulint_source::format_size;
use gpulint_syntax::named_children;
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

declare_rule! {
    /// ## What it does
    /// Reports a tensor created on the GPU with a statically known shape (literals, folded
    /// constants, argparse defaults) whose size alone exceeds `huge-tensor-fraction` of the
    /// GPU-memory budget (a quarter by default): `torch.randn(50000, 50000, device="cuda")`,
    /// `torch.empty(...).cuda()`, `tf.zeros(...)`, `tf.random.normal(...)`, `jnp.ones(...)`, or
    /// a NumPy array passed straight to `torch.from_numpy(...).cuda()`, `jnp.asarray(...)` or
    /// `tf.constant(...)`. It is an error when the tensor alone exceeds the budget.
    ///
    /// The default budget (8 GiB) stands in for a GPU the project never named, so under it a
    /// tensor that still fits the largest card gpulint knows (192 GiB) is a warning, not an
    /// error, and an uninitialised buffer (`torch.empty(...)`, `jnp.empty(...)`) bound to a
    /// name that nothing reads is left alone: it only reserves memory, on purpose (a
    /// memory-pressure test sized for the target card). A budget set with `--gpu-memory`,
    /// `--gpu` or the configuration is authoritative: above it the finding is an error either
    /// way. Allocations in a test that a decorator always skips (`@pytest.mark.skip`,
    /// `@unittest.skip`, `@pytest.mark.skipif(True, ...)`, on the function or its class) never
    /// run and are not reported.
    ///
    /// TensorFlow and JAX place new tensors on the GPU by default; PyTorch only with
    /// `device=`/`.cuda()`/`.to(device)`. Tensors created under `with tf.device("/CPU:0")`,
    /// with `device="cpu"`, or never moved to the GPU are not reported. The budget is
    /// `--gpu-memory`, `--gpu NAME` or the configuration (8 GiB by default). Applies to files that
    /// import PyTorch, TensorFlow/Keras or JAX.
    ///
    /// ## Why is this risky?
    /// A 20000 × 20000 float32 tensor is 1.6 GB, and every operation on it (a product, a sum,
    /// its gradient) allocates another of the same size. Beside the model's weights and
    /// activations, a few of these exhaust the card and the step dies with an out-of-memory
    /// error.
    ///
    /// ## Example
    /// ```python
    /// import torch
    ///
    /// similarity = torch.randn(50000, 50000, device="cuda")
    /// ```
    ///
    /// ## Use instead
    /// Work in blocks, keep the full array on the host, or use a smaller dtype:
    /// ```python
    /// import torch
    ///
    /// block = torch.randn(5000, 50000, device="cuda", dtype=torch.float16)
    /// ```
    ///
    /// ## References
    /// - TensorFlow guide, "Use a GPU" (device placement and memory):
    ///   <https://www.tensorflow.org/guide/gpu>
    /// - PyTorch, "CUDA semantics" → memory management:
    ///   <https://pytorch.org/docs/stable/notes/cuda.html#memory-management>
    pub static MEM002 = {
        code: "MEM002",
        name: "huge-tensor-allocation",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Warning,
        summary: "Single tensor allocation too large for the GPU-memory budget",
        kinds: &["call"],
        needles: &["torch", "tensorflow", "jax"],
        options: &[RuleOption {
            key: "huge-tensor-fraction",
            kind: OptionKind::Fraction,
            default: "0.25",
            doc: "Report a single allocation larger than this fraction of the GPU-memory budget.",
        }],
    };
}

pub struct HugeTensorAllocation;

/// Is `node` in a function or class that a decorator always skips?
fn always_skipped(m: &PythonModel<'_>, node: Node<'_>) -> bool {
    m.ancestors(node)
        .into_iter()
        .filter(|a| a.kind_name() == "decorated_definition")
        .flat_map(|d| named_children(d).filter(|c| c.kind_name() == "decorator"))
        .any(|d| {
            let Some(e) = d.named_child(0) else {
                return false;
            };
            let (callee, call) = if e.kind_name() == "call" {
                (e.field("function"), Some(e))
            } else {
                (Some(e), None)
            };
            let Some(q) = callee.and_then(|c| m.qualified_name(c)) else {
                return false;
            };
            match q.as_str() {
                "pytest.mark.skip" | "unittest.skip" | "unittest.case.skip" => true,
                // `skipif(True, ...)`: only a condition that folds to true always skips.
                "pytest.mark.skipif" | "unittest.skipIf" => call
                    .and_then(|c| argument(c, 0, "condition", m))
                    .and_then(|c| m.const_value(c))
                    .is_some_and(|v| v.truthy()),
                _ => false,
            }
        })
}

/// Is the call an uninitialised `empty(...)` buffer bound to a name that its scope never
/// reads (a pure reservation of memory)?
fn unread_reservation(m: &PythonModel<'_>, call: Node<'_>) -> bool {
    let is_empty = m
        .call_name(call)
        .is_some_and(|q| q.rsplit('.').next() == Some("empty"));
    let Some(target) = m
        .parent(call)
        .filter(|p| p.kind_name() == "assignment")
        .and_then(|a| a.field("left"))
        .filter(|l| l.kind_name() == "identifier")
    else {
        return false;
    };
    if !is_empty {
        return false;
    }
    let name = m.text(target);
    let scope: Vec<Node<'_>> = match m.enclosing_function(call) {
        Some(f) => vec![m.functions[f].node],
        None => m.roots.clone(),
    };
    !scope.iter().any(|s| {
        gpulint_syntax::descendants(*s)
            .any(|n| n.kind_name() == "identifier" && n.id() != target.id() && m.text(n) == name)
    })
}

impl Rule for HugeTensorAllocation {
    fn meta(&self) -> &'static RuleMeta {
        &MEM002
    }

    fn check(&self, node: Node<'_>, ctx: &mut Context<'_>) {
        let pm = ctx.python();
        if !["torch", "tensorflow", "jax"]
            .iter()
            .any(|m| pm.imports_module(m))
        {
            return;
        }
        let Some(alloc) = literal_allocation(pm, node) else {
            return;
        };
        if alloc.device != Device::Gpu {
            return;
        }
        let budget = ctx.settings.gpu_memory as u128;
        let fraction = ctx.option_fraction("huge-tensor-fraction").unwrap_or(0.25);
        if (alloc.bytes as f64) <= fraction * budget as f64 {
            return;
        }
        if always_skipped(pm, node) {
            return;
        }
        let default_budget = ctx.settings.gpu_memory_origin == BudgetOrigin::Default;
        if default_budget && unread_reservation(pm, node) {
            return;
        }
        // The largest card of the table: under the default budget, what fits it may well fit
        // the card the project targets.
        let largest = gpulint_memory::budget::table()
            .map(|(_, b)| b as u128)
            .max()
            .unwrap_or(0);
        let size = format_size(alloc.bytes.min(u64::MAX as u128) as u64);
        let call = ctx
            .text(node)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let call = if call.chars().count() > 60 {
            format!("{}…", call.chars().take(57).collect::<String>())
        } else {
            call
        };
        let (message, severity) = if alloc.bytes > budget
            && default_budget
            && alloc.bytes <= largest
        {
            (
                format!(
                    "`{call}` allocates {size} on the GPU ({}), more than the whole default {} budget: only a GPU with more than {size} can hold it",
                    alloc.describe(),
                    format_size(budget as u64)
                ),
                Severity::Warning,
            )
        } else if alloc.bytes > budget {
            (
                format!(
                    "`{call}` allocates {size} on the GPU ({}), more than the whole {} budget",
                    alloc.describe(),
                    format_size(budget as u64)
                ),
                Severity::Error,
            )
        } else {
            (
                format!(
                    "`{call}` allocates {size} on the GPU ({}), {:.0}% of the {} budget",
                    alloc.describe(),
                    100.0 * alloc.bytes as f64 / budget as f64,
                    format_size(budget as u64)
                ),
                Severity::Warning,
            )
        };
        let mut d = ctx
            .diagnostic(node, message)
            .severity(severity)
            .primary_label(format!("{size} in one tensor"));
        if let Some(m) = alloc.moved_by {
            // From the method name (`.cuda()`, `.to(device)`) or the wrapping call to its end.
            let start = m
                .field("function")
                .and_then(|f| f.field("attribute"))
                .map_or(m.start_byte(), |a| a.start_byte());
            d = d.with_label(Span::new(start, m.end_byte()), "moved to the GPU here");
        }
        d = d
            .note("every operation on it (a product, a sum, its gradient) allocates another tensor of similar size beside the model's own memory")
            .note(format!(
                "budget: {} ({}); reported above {:.0}% of it (`huge-tensor-fraction`)",
                format_size(budget as u64),
                ctx.settings.gpu_memory_origin.describe(),
                fraction * 100.0
            ))
            .help("process it in blocks, keep the full array on the host and move slices, or use a smaller dtype (float16/bfloat16)");
        ctx.report(d);
    }
}
