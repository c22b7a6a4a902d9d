//! PT001: a graph-attached loss accumulated across training iterations.

use super::{graph_kept_alive, paren};
use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::python::training::{accumulation, Flow};
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;

declare_rule! {
    /// ## What it does
    /// Finds a loss tensor that is added to an accumulator living across the iterations of a
    /// training loop (a loop that calls `backward()` or an optimizer's `step()`):
    /// `total_loss += loss`, `total = total + loss`, `self.running += loss`,
    /// `stats["loss"] += loss`, and `self.total += loss` in a per-step method such as Lightning's
    /// `training_step`. The loss is followed through local assignments: a value from a
    /// criterion or loss call, a model output's `.loss`, or the tensor `backward()` runs on.
    ///
    /// `loss.item()`, `loss.detach()`, `float(loss)`, `.tolist()`, `.cpu()`, values computed
    /// under `torch.no_grad()` / `inference_mode()`, accumulators re-created every iteration,
    /// and accumulators that are themselves backpropagated later (a deliberate combined
    /// `backward()`) are fine. Applies to files that import `torch`.
    ///
    /// The loss is also followed through tuple unpacking, `for` targets over a graph-attached
    /// container (`for name, v in losses.items(): totals[name] += v`, in an inner loop of the
    /// training loop), and calls of local functions and methods whose return value is
    /// graph-attached (`loss_each = self.train_one_batch(x)`), including a method of an object
    /// whose every binding instantiates one class, defined in the file or imported from a
    /// module of the project (`losses = trainer.train_step(x)` with
    /// `trainer = Trainer(model, optimizer)` and `from trainer import Trainer`); the items
    /// unpacked from a container named for losses are losses (`a, b, total = losses`). A loop
    /// that calls `train_step` / `training_step` on an object is a training loop.
    ///
    /// ## Why is this risky?
    /// The PyTorch FAQ: "`total_loss` is accumulating history across your training loop, since
    /// `loss` is a differentiable variable with autograd history. You can fix this by writing
    /// `total_loss += float(loss)`". Each step's graph (and the activations it holds) stays
    /// alive through the accumulator, so GPU memory grows every step until the run dies with
    /// CUDA out of memory.
    ///
    /// ## Example
    /// ```python
    /// import torch
    ///
    /// def train(model, loader, optimizer, criterion):
    ///     total_loss = 0.0
    ///     for x, y in loader:
    ///         optimizer.zero_grad()
    ///         loss = criterion(model(x), y)
    ///         loss.backward()
    ///         optimizer.step()
    ///         total_loss += loss
    ///     return total_loss / len(loader)
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// import torch
    ///
    /// def train(model, loader, optimizer, criterion):
    ///     total_loss = 0.0
    ///     for x, y in loader:
    ///         optimizer.zero_grad()
    ///         loss = criterion(model(x), y)
    ///         loss.backward()
    ///         optimizer.step()
    ///         total_loss += loss.item()
    ///     return total_loss / len(loader)
    /// ```
    ///
    /// ## References
    /// - PyTorch FAQ, *My model reports "cuda runtime error(2): out of memory"* → "Don't
    ///   accumulate history across your training loop":
    ///   <https://pytorch.org/docs/stable/notes/faq.html>
    pub static PT001 = {
        code: "PT001",
        name: "accumulated-loss-graph",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Warning,
        summary: "Graph-attached loss accumulated across training iterations",
        kinds: &[],
        needles: &["torch"],
        options: &[],
    };
}

pub struct AccumulatedLossGraph;

/// Methods that a trainer calls once per training step.
const STEP_HOOKS: &[&str] = &["training_step", "train_step", "training_step_end"];

impl Rule for AccumulatedLossGraph {
    fn meta(&self) -> &'static RuleMeta {
        &PT001
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.python();
        if !m.imports_torch() {
            return;
        }
        let t = m.training();
        t.set_project(&ctx.file.path, &ctx.settings.root);
        if t.backward.is_empty()
            && t.loops.iter().all(|l| !l.is_training())
            && STEP_HOOKS.iter().all(|h| m.functions_named(h).is_empty())
        {
            return;
        }
        for &a in &m.assignments {
            let Some((target, value)) = accumulation(m, a) else {
                continue;
            };
            if t.grad_free(a).is_some() {
                continue;
            }
            let acc = m.text(target);
            let scope = m.enclosing_function(a);
            // The innermost training loop around it (an inner loop over a step's loss items
            // runs inside one).
            let around = t.loops_around(m, a);
            let lp = around
                .iter()
                .copied()
                .find(|l| l.is_training())
                .or(around.first().copied());
            let (flow, place, place_label) = match lp {
                Some(lp) => {
                    if !lp.is_training() || t.rebound_in(m, lp, acc) {
                        continue;
                    }
                    (
                        t.flow(m, value, &lp.backward),
                        lp.header(),
                        "the training loop",
                    )
                }
                // A per-step hook (`training_step`) accumulating into the object: the
                // attribute lives across all steps.
                None => {
                    let Some(f) = scope else {
                        continue;
                    };
                    let func = &m.functions[f];
                    if !STEP_HOOKS.contains(&func.name.as_str()) || !acc.starts_with("self.") {
                        continue;
                    }
                    let backward: Vec<_> = t.backward_in(Some(f)).copied().collect();
                    (
                        t.flow(m, value, &backward),
                        func.node.field("name").unwrap_or(func.node),
                        "runs once per training step",
                    )
                }
            };
            let Flow::Attached(source) = flow else {
                continue;
            };
            // A deliberate combined backward: the accumulator is backpropagated itself.
            if t.is_backward_receiver(m, scope, acc).is_some() {
                continue;
            }
            let vtext = m.text(value);
            let d = ctx
                .diagnostic(
                    a,
                    format!(
                        "`{acc}` accumulates `{vtext}`, which still carries its autograd graph, across training iterations"
                    ),
                )
                .primary_label("every step's graph stays alive through this accumulator")
                .with_label(Span::of(&place), place_label);
            ctx.report(
                graph_kept_alive(d, value, source)
                    .help(format!(
                        "accumulate a Python number: `{acc} += {}.item()` (or `float(...)`, or `.detach()` to keep a tensor)",
                        paren(vtext)
                    )),
            );
        }
    }
}
