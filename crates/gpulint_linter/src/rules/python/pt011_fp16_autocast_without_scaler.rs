//! PT011: float16 autocast training without a `GradScaler`.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::python::tf::argument;
use gpulint_semantic::python::{string_literal, PythonModel};
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

declare_rule! {
    /// ## What it does
    /// Finds float16 autocast around a training forward pass with no gradient scaling in the
    /// file: `with torch.autocast("cuda", dtype=torch.float16):`,
    /// `with torch.cuda.amp.autocast():` or `with torch.amp.autocast(device_type="cuda"):`
    /// (float16 is the CUDA default) inside a loop that calls `backward()` and an optimizer's
    /// `step()`, while nothing creates a `GradScaler` (`torch.amp`, `torch.cuda.amp`) or
    /// calls `.scale(loss)`. `dtype=torch.bfloat16`, autocast on the CPU, inference-only
    /// autocast, and files that use a framework which scales internally (Lightning, Accelerate,
    /// DeepSpeed, Fabric) are left alone. Applies to files that import `torch`.
    ///
    /// ## Why is this risky?
    /// The AMP docs: "If the forward pass for a particular op has float16 inputs, the backward
    /// pass for that op will produce float16 gradients. Gradient values with small magnitudes
    /// may not be representable in float16. These values will flush to zero ('underflow'), so
    /// the update for the corresponding parameters will be lost." Training silently stalls or
    /// diverges to NaN.
    ///
    /// ## Example
    /// ```python
    /// import torch
    ///
    /// def train(model, loader, optimizer, criterion):
    ///     for x, y in loader:
    ///         optimizer.zero_grad()
    ///         with torch.autocast("cuda", dtype=torch.float16):
    ///             loss = criterion(model(x), y)
    ///         loss.backward()
    ///         optimizer.step()
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// import torch
    ///
    /// def train(model, loader, optimizer, criterion):
    ///     scaler = torch.amp.GradScaler("cuda")
    ///     for x, y in loader:
    ///         optimizer.zero_grad()
    ///         with torch.autocast("cuda", dtype=torch.float16):
    ///             loss = criterion(model(x), y)
    ///         scaler.scale(loss).backward()
    ///         scaler.step(optimizer)
    ///         scaler.update()
    /// ```
    ///
    /// ## References
    /// - PyTorch "Automatic Mixed Precision package", *Gradient Scaling*:
    ///   <https://pytorch.org/docs/stable/amp.html#gradient-scaling>
    /// - AMP examples: <https://pytorch.org/docs/stable/notes/amp_examples.html>
    pub static PT011 = {
        code: "PT011",
        name: "fp16-autocast-without-scaler",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Warning,
        summary: "float16 autocast training without `GradScaler`",
        kinds: &[],
        needles: &["torch"],
        also_needles: &["autocast"],
        options: &[],
    };
}

pub struct Fp16AutocastWithoutScaler;

/// Imports of frameworks that scale the loss themselves.
const SCALING_FRAMEWORKS: &[&str] = &[
    "lightning",
    "pytorch_lightning",
    "accelerate",
    "deepspeed",
    "apex",
    "colossalai",
];

impl Rule for Fp16AutocastWithoutScaler {
    fn meta(&self) -> &'static RuleMeta {
        &PT011
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.python();
        if !m.imports_torch() || SCALING_FRAMEWORKS.iter().any(|f| m.imports_module(f)) {
            return;
        }
        let scaled = m.calls.iter().any(|&(c, _)| {
            c.field("function").is_some_and(|f| {
                m.qualified_name(f)
                    .is_some_and(|q| q.ends_with("GradScaler"))
                    || (f.kind_name() == "attribute"
                        && f.field("attribute").is_some_and(|a| m.text(a) == "scale"))
            })
        });
        if scaled {
            return;
        }
        let t = m.training();
        for &(call, _) in &m.calls {
            if !fp16_autocast(m, call)
                || m.parent(call).is_none_or(|p| p.kind_name() != "with_item")
            {
                continue;
            }
            let Some(lp) = t
                .loops_around(m, call)
                .into_iter()
                .find(|l| !l.backward.is_empty() && !l.steps.is_empty())
            else {
                continue;
            };
            let backward = lp.backward[0].0;
            ctx.report(
                ctx.diagnostic(call, "float16 autocast in a training loop with no `GradScaler`")
                    .primary_label("the forward pass runs in float16, so gradients are float16 too")
                    .with_label(Span::of(&backward), "gradients are computed without loss scaling here")
                    .note("small gradients underflow to zero in float16 and their updates are lost")
                    .help("create `scaler = torch.amp.GradScaler(\"cuda\")` and use `scaler.scale(loss).backward()`, `scaler.step(optimizer)`, `scaler.update()`; or autocast to `torch.bfloat16`"),
            );
        }
    }
}

/// Is this an autocast call that selects float16 on CUDA?
fn fp16_autocast(m: &PythonModel<'_>, call: Node<'_>) -> bool {
    let Some(q) = call.field("function").and_then(|f| m.qualified_name(f)) else {
        return false;
    };
    let cuda_default = matches!(q.as_str(), "torch.cuda.amp.autocast");
    let generic = matches!(
        q.as_str(),
        "torch.autocast" | "torch.amp.autocast" | "torch.amp.autocast_mode.autocast"
    );
    if !cuda_default && !generic {
        return false;
    }
    if argument(call, usize::MAX, "enabled", m)
        .is_some_and(|e| !m.const_value(e).is_some_and(|v| v.truthy()))
    {
        return false;
    }
    if generic {
        let device = argument(call, 0, "device_type", m).and_then(|d| string_literal(d, m.source));
        if device.as_deref() != Some("cuda") {
            return false;
        }
    }
    match argument(call, 1, "dtype", m) {
        None => true,
        Some(d) => {
            let text = m.text(d);
            text.ends_with("float16") && !text.ends_with("bfloat16") || text.ends_with(".half")
        }
    }
}
