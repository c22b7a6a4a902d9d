//! PT002: graph-attached tensors stored in containers that outlive the training loop.

use super::{graph_kept_alive, paren};
use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::python::training::{Flow, StepMethod};
use gpulint_semantic::python::PythonModel;
use gpulint_syntax::named_children;
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;
use std::collections::HashMap;
use tree_sitter::Node;

declare_rule! {
    /// ## What it does
    /// Finds a loss or model output that still carries its autograd graph being stored in a
    /// container that lives across the iterations of a training loop (a loop that calls
    /// `backward()` or an optimizer's `step()`): `losses.append(loss)`,
    /// `history[step] = loss`, `self.outputs.append(out)`.
    ///
    /// Detached values (`.item()`, `.detach()`, `.cpu()`, `.tolist()`, `float(...)`), values
    /// computed under `torch.no_grad()` / `inference_mode()`, and containers re-created or
    /// cleared in every iteration are fine. Applies to files that import `torch`.
    ///
    /// The value is followed through tuple unpacking (`loss, logs = criterion(...)`), `for`
    /// targets over a graph-attached container (`for k, v in losses.items():`), calls of
    /// local functions and methods that return a graph-attached value, and the container a
    /// `backward()` runs from (`out["loss"].backward(); outputs.append(out)`, unless the entry
    /// is replaced by a detached copy first). In a `LightningModule`'s `training_step`,
    /// appending what the step returns (it holds the loss) to a list on `self` keeps every
    /// step's graph until the list is cleared. When the `LightningModule` also overrides
    /// `training_epoch_end(outputs)`, Lightning (before 2.0) itself keeps every dict
    /// `training_step` returns until the epoch ends, so a graph-attached entry other than the
    /// `"loss"` (`{"loss": loss, "preds": preds}`) is stored across the epoch.
    ///
    /// A call of a method that accumulates its argument into its object's state
    /// (`meter.update(loss)` where `update` does `self.sum += val * n` or
    /// `self._sum[i] += v` for each item, `self.history.append(val)`) stores the argument, when
    /// the receiver's class is known (every binding instantiates it: `meter = AverageMeter()`,
    /// or `self.losses = AverageMeter(...)` in the class's methods) and defined in the file or
    /// in the project module it is imported from; a meter that keeps `float(val)` or
    /// `val.item()` stores numbers. A method that backpropagates and that a loop calls on
    /// `self` once per step (in its own class, or in a base class imported from the project:
    /// `BaseRunner.train` calling the `train_step` a subclass overrides) is a training step:
    /// what it stores in an attribute of `self` outlives it, unless the attribute is rebound or
    /// cleared there or the entry's key is a constant (`self.loss["total"] = loss` replaces the
    /// previous step's). The other losses unpacked from the call that returns the
    /// backpropagated loss (`total, part = run(x); total.backward()`) carry the graph too.
    ///
    /// ## Why is this risky?
    /// Every stored tensor keeps the whole graph of its step alive, with the activations saved
    /// for backward. The PyTorch FAQ: "Don't hold onto tensors and variables you don't need",
    /// and "`total_loss` is accumulating history across your training loop". GPU memory grows
    /// with every iteration until CUDA runs out of memory.
    ///
    /// ## Example
    /// ```python
    /// import torch
    ///
    /// def train(model, loader, optimizer, criterion):
    ///     losses = []
    ///     for x, y in loader:
    ///         optimizer.zero_grad()
    ///         loss = criterion(model(x), y)
    ///         loss.backward()
    ///         optimizer.step()
    ///         losses.append(loss)
    ///     return losses
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// import torch
    ///
    /// def train(model, loader, optimizer, criterion):
    ///     losses = []
    ///     for x, y in loader:
    ///         optimizer.zero_grad()
    ///         loss = criterion(model(x), y)
    ///         loss.backward()
    ///         optimizer.step()
    ///         losses.append(loss.item())
    ///     return losses
    /// ```
    ///
    /// ## References
    /// - PyTorch FAQ, *My model reports "cuda runtime error(2): out of memory"* → "Don't hold
    ///   onto tensors and variables you don't need":
    ///   <https://pytorch.org/docs/stable/notes/faq.html>
    pub static PT002 = {
        code: "PT002",
        name: "stored-graph-tensor",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Warning,
        summary: "Graph-attached tensor stored in a container across training iterations",
        kinds: &[],
        needles: &["torch"],
        options: &[],
    };
}

pub struct StoredGraphTensor;

impl Rule for StoredGraphTensor {
    fn meta(&self) -> &'static RuleMeta {
        &PT002
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.python();
        if !m.imports_torch() {
            return;
        }
        let t = m.training();
        t.set_project(&ctx.file.path, &ctx.settings.root);
        if t.loops.iter().all(|l| !l.is_training())
            && m.functions_named("training_step").is_empty()
            && t.backward.is_empty()
        {
            return;
        }
        let mut stores: Vec<(Node<'_>, Node<'_>, Node<'_>)> = Vec::new();
        for &(call, _) in &m.calls {
            if let Some((c, v)) = append(m, call) {
                stores.push((call, c, v));
                continue;
            }
            // `meter.update(loss)` of a class whose method accumulates its argument, in a
            // training loop or a per-step method.
            let Some(recv) = call
                .field("function")
                .filter(|f| f.kind_name() == "attribute")
                .and_then(|f| f.field("object"))
                .filter(|o| matches!(o.kind_name(), "identifier" | "attribute"))
            else {
                continue;
            };
            let in_step = match t.loop_of(m, call) {
                Some(lp) => lp.is_training(),
                None => t.step_method(m, call).is_some(),
            };
            if !in_step {
                continue;
            }
            for v in t.stored_arguments(m, call) {
                stores.push((call, recv, v));
            }
        }
        for &a in &m.assignments {
            if a.kind_name() != "assignment" {
                continue;
            }
            let (Some(left), Some(right)) = (a.field("left"), a.field("right")) else {
                continue;
            };
            if left.kind_name() == "subscript" {
                if let Some(c) = left.field("value") {
                    stores.push((a, c, right));
                }
            }
        }
        for o in t.lightning_epoch_outputs(m) {
            let vtext = m.text(o.value);
            let d = ctx
                .diagnostic(
                    o.pair,
                    format!(
                        "`{vtext}` is returned from `training_step` with its autograd graph, and Lightning keeps every step's outputs for `training_epoch_end`"
                    ),
                )
                .primary_label("kept with its step's graph and activations until the epoch ends")
                .with_label(
                    Span::of(&o.epoch_end.field("name").unwrap_or(o.epoch_end)),
                    "overriding `training_epoch_end` makes Lightning (before 2.0) store what each `training_step` returns",
                );
            ctx.report(graph_kept_alive(d, o.value, o.source).help(format!(
                "return `{}.detach()`, or only the loss when the epoch end does not need it",
                paren(vtext)
            )));
        }
        stores.sort_by_key(|s| s.0.start_byte());
        // Per container, the answers that do not depend on the stored value: a loop or a
        // function stores into one list many times, and each question looks through all of
        // its backward calls (the square of the stores).
        let mut item_backward_of: HashMap<(usize, &str), Option<Node<'_>>> = HashMap::new();
        let mut summed_later: HashMap<(Option<usize>, &str), bool> = HashMap::new();
        for (at, container, value) in stores {
            if !matches!(container.kind_name(), "identifier" | "attribute") {
                continue;
            }
            let Some(lp) = t.loop_of(m, at) else {
                if let Some(sm) = t.step_method(m, at) {
                    if let Some(d) = step_method_store(ctx, m, t, &sm, at, container, value) {
                        ctx.report(d);
                        continue;
                    }
                }
                // Lightning's `training_step` appending what it returns (the loss) to a list on
                // the module: the list keeps every step's graph until the epoch ends.
                let name = m.text(container);
                if !name.starts_with("self.") || t.grad_free(at).is_some() {
                    continue;
                }
                let Some(ret) = t.lightning_step_result(m, value) else {
                    continue;
                };
                let vtext = m.text(value);
                let d = ctx
                    .diagnostic(
                        at,
                        format!(
                            "`{vtext}` is stored in `{name}` with its autograd graph, and `{name}` outlives the training step"
                        ),
                    )
                    .primary_label("each stored value keeps its step's graph and activations alive")
                    .with_label(
                        Span::of(&ret),
                        "`training_step` returns it, so it holds the loss Lightning backpropagates",
                    );
                ctx.report(d.help(
                    "store a detached copy (`.detach()` every tensor in it) or only the numbers you need (`.item()`)",
                ));
                continue;
            };
            if !lp.is_training() || t.grad_free(at).is_some() {
                continue;
            }
            let name = m.text(container);
            // `losses.append(...)` then `losses[-1].backward()`: what the list holds is what
            // the step backpropagates from, so every item carries its graph.
            let item_backward =
                *item_backward_of
                    .entry((lp.node.id(), name))
                    .or_insert_with(|| {
                        lp.backward
                            .iter()
                            .find(|(_, loss)| loss.is_some_and(|l| single_item_of(m, l, name)))
                            .map(|&(b, _)| b)
                    });
            let source = match (t.flow(m, value, &lp.backward), item_backward) {
                (Flow::Attached(source), _) => source,
                (Flow::Unknown, Some(b)) => b,
                _ => continue,
            };
            if t.rebound_in(m, lp, name) {
                continue;
            }
            // Stored to be backpropagated together later (`torch.stack(losses).sum().backward()`);
            // a backward from one item (`losses[-1]`) is not one over the whole container.
            let scope = m.enclosing_function(at);
            let summed = *summed_later.entry((scope, name)).or_insert_with(|| {
                t.backward_in(scope).any(|(_, loss)| {
                    loss.is_some_and(|l| {
                        gpulint_semantic::python::training::mentions(m, l, name)
                            && !single_item_of(m, l, name)
                    })
                })
            });
            if summed {
                continue;
            }
            let lived = (Span::of(&lp.header()), "the training loop".to_string());
            ctx.report(stored_finding(
                ctx,
                m,
                (at, name, value, source),
                "iteration",
                lived,
            ));
        }
    }
}

/// A store in a per-step method (one that backpropagates and that a loop calls once per
/// iteration) into an attribute of `self`, which outlives the call: the finding, if the value
/// carries the graph and the attribute is not rebound or cleared in the method. A store under
/// a constant key (`self.loss["total"] = loss`) replaces the previous step's entry and is left
/// alone.
fn step_method_store<'a>(
    ctx: &Context<'_>,
    m: &PythonModel<'a>,
    t: &gpulint_semantic::python::training::Training<'a>,
    sm: &StepMethod<'a>,
    at: Node<'a>,
    container: Node<'a>,
    value: Node<'a>,
) -> Option<gpulint_diagnostics::Diagnostic> {
    let name = m.text(container);
    if !name.starts_with("self.") || t.grad_free(at).is_some() {
        return None;
    }
    if at.kind_name() == "assignment"
        && at
            .field("left")
            .and_then(|l| l.field("subscript"))
            .is_some_and(|k| m.const_value(k).is_some())
    {
        return None;
    }
    let Flow::Attached(source) = t.flow(m, value, &sm.backward) else {
        return None;
    };
    let f = sm.function;
    let body = m.functions[f].node;
    // Looked up among the method's own assignments to `name` and its own calls: a scan of
    // the file's per store would cost the file's size per finding.
    let rebound = t.assignments_to(Some(f), name).iter().any(|&a| {
        a.field("right")
            .is_some_and(|r| !gpulint_semantic::python::training::mentions(m, r, name))
    });
    let cleared = m.calls_in(f).any(|&(c, _)| {
        c.field("function").is_some_and(|func| {
            func.kind_name() == "attribute"
                && func
                    .field("attribute")
                    .is_some_and(|a| matches!(m.text(a), "clear" | "reset"))
                && func.field("object").is_some_and(|o| m.text(o) == name)
        })
    });
    if rebound || cleared {
        return None;
    }
    if t.backward_in(Some(f)).any(|(_, loss)| {
        loss.is_some_and(|l| gpulint_semantic::python::training::mentions(m, l, name))
    }) {
        return None;
    }
    let method = m.functions[f].name.as_str();
    let lived = (
        Span::of(&body.field("name").unwrap_or(body)),
        format!(
            "`{method}` backpropagates and runs once per iteration of the loop in `{}`",
            sm.caller
        ),
    );
    Some(stored_finding(
        ctx,
        m,
        (at, name, value, source),
        "step",
        lived,
    ))
}

/// The finding for a store at `at` of `value` (attached to the graph through `source`) into
/// `container`, which outlives the training `unit` ("iteration", "step"); `lived` labels what
/// makes it per step.
fn stored_finding<'a>(
    ctx: &Context<'_>,
    m: &PythonModel<'a>,
    (at, container, value, source): (Node<'a>, &str, Node<'a>, Node<'a>),
    unit: &str,
    lived: (Span, String),
) -> gpulint_diagnostics::Diagnostic {
    let vtext = m.text(value);
    let how = stored_how(m, at, container);
    let d = ctx
        .diagnostic(
            at,
            format!(
                "`{vtext}` {how} with its autograd graph, and `{container}` outlives the training {unit}"
            ),
        )
        .primary_label("each stored tensor keeps its step's graph and activations alive")
        .with_label(lived.0, lived.1);
    graph_kept_alive(d, value, source).help(format!(
        "store `{}.item()` for a number, or `.detach()` (`.detach().cpu()`) for a tensor",
        paren(vtext)
    ))
}

/// How the store at `at` keeps its value in `container`: "is stored in `losses`", or "is
/// accumulated by `meter.update(...)`" for a method that accumulates its argument.
fn stored_how<'t>(m: &PythonModel<'t>, at: Node<'t>, container: &str) -> String {
    if at.kind_name() == "call" && append(m, at).is_none() {
        let callee = at.field("function").map_or("", |c| m.text(c));
        format!("is accumulated by `{callee}(...)`")
    } else {
        format!("is stored in `{container}`")
    }
}

/// `container[k]` with a constant integer index (`losses[-1]`): one item of the container.
fn single_item_of(m: &PythonModel<'_>, expr: Node<'_>, container: &str) -> bool {
    expr.kind_name() == "subscript"
        && expr.field("value").is_some_and(|v| m.text(v) == container)
        && expr
            .field("subscript")
            .is_some_and(|i| m.const_value(i).and_then(|c| c.as_int()).is_some())
}

/// `c.append(v)` / `c.insert(i, v)`: the container and the stored value.
fn append<'t>(m: &PythonModel<'t>, call: Node<'t>) -> Option<(Node<'t>, Node<'t>)> {
    let func = call.field("function")?;
    if func.kind_name() != "attribute" {
        return None;
    }
    let attr = m.text(func.field("attribute")?);
    let args: Vec<Node<'t>> = named_children(call.field("arguments")?)
        .filter(|a| a.kind_name() != "comment")
        .collect();
    let value = match (attr, args.as_slice()) {
        ("append", [v]) => *v,
        ("insert", [_, v]) => *v,
        _ => return None,
    };
    if value.kind_name() == "keyword_argument" {
        return None;
    }
    Some((func.field("object")?, value))
}
