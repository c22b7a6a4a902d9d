//! PT004: `backward(retain_graph=True)` inside a loop.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::python::tf::argument;
use gpulint_syntax::Lang;

declare_rule! {
    /// ## What it does
    /// Finds `loss.backward(retain_graph=True)` and `torch.autograd.backward(...,
    /// retain_graph=True)` inside a `for` or `while` loop, with the flag a literal `True` or a
    /// constant that folds to it. When the same loop body backpropagates a second time (several
    /// losses through one shared graph in the same step, as GAN and multi-task training do),
    /// retaining the graph is needed and nothing is reported. The finding is a warning, not
    /// advice, when the same loop also keeps a graph-attached value across iterations (PT001,
    /// PT002). Applies to files that import `torch`.
    ///
    /// ## Why is this risky?
    /// With `retain_graph=True` the graph's buffers are not freed after the backward pass. The
    /// PyTorch docs: "Note that in nearly all cases setting this option to True is not needed
    /// and often can be worked around in a much more efficient way." It is usually added to
    /// silence "Trying to backward through the graph a second time", which hides the real bug;
    /// together with a loss accumulated or stored across iterations (PT001, PT002) memory grows
    /// every step until CUDA runs out of memory.
    ///
    /// ## Example
    /// ```python
    /// import torch
    ///
    /// def train(model, loader, optimizer, criterion):
    ///     for x, y in loader:
    ///         optimizer.zero_grad()
    ///         loss = criterion(model(x), y)
    ///         loss.backward(retain_graph=True)
    ///         optimizer.step()
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// import torch
    ///
    /// def train(model, loader, optimizer, criterion):
    ///     for x, y in loader:
    ///         optimizer.zero_grad()
    ///         loss = criterion(model(x), y)
    ///         loss.backward()
    ///         optimizer.step()
    /// ```
    ///
    /// ## References
    /// - `torch.Tensor.backward` (`retain_graph`):
    ///   <https://pytorch.org/docs/stable/generated/torch.Tensor.backward.html>
    /// - `torch.autograd.backward`:
    ///   <https://pytorch.org/docs/stable/generated/torch.autograd.backward.html>
    pub static PT004 = {
        code: "PT004",
        name: "retain-graph-in-loop",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Info,
        summary: "`backward(retain_graph=True)` inside a training loop",
        kinds: &[],
        needles: &["torch"],
        also_needles: &["retain_graph"],
        options: &[],
    };
}

pub struct RetainGraphInLoop;

impl Rule for RetainGraphInLoop {
    fn meta(&self) -> &'static RuleMeta {
        &PT004
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.python();
        if !m.imports_torch() {
            return;
        }
        let t = m.training();
        // The leak below may flow through a class of another module of the project.
        t.set_project(&ctx.file.path, &ctx.settings.root);
        for &(call, _) in &t.backward {
            let Some(flag) = argument(call, usize::MAX, "retain_graph", m) else {
                continue;
            };
            if !m.const_value(flag).is_some_and(|v| v.truthy()) {
                continue;
            }
            let Some(lp) = t.loop_of(m, call) else {
                continue;
            };
            // Several backward passes through one graph in the same step.
            if lp.backward.iter().any(|(b, _)| b.id() != call.id()) {
                continue;
            }
            let leak = t.leak_in_loop(m, lp);
            let mut d = ctx
                .diagnostic(
                    flag,
                    "`retain_graph=True` keeps the autograd graph's buffers alive after every backward pass in this loop",
                )
                .primary_label("the graph is not freed after `backward()`")
                .with_label(Span::of(&lp.header()), "the loop")
                .note("nearly always unneeded; it usually hides a tensor reused across iterations, and with any reference kept across steps memory grows until CUDA runs out of memory")
                .help("drop `retain_graph=True`; if backward complains about a second pass, detach the tensor carried over from the previous iteration (`h = h.detach()`)");
            if let Some(l) = leak {
                d = d
                    .severity(Severity::Warning)
                    .with_label(Span::of(&l), "and a graph-attached value is kept across iterations here: memory grows every step");
            }
            ctx.report(d);
        }
    }
}
