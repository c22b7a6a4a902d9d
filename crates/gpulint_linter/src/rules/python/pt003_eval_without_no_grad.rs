//! PT003: evaluation or inference that runs the model with autograd on.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::hash::HashSet;
use gpulint_semantic::python::training::is_model_name;
use gpulint_semantic::python::PythonModel;
use gpulint_syntax::descendants;
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

declare_rule! {
    /// ## What it does
    /// Finds evaluation code that calls the model without turning autograd off: a function
    /// that calls `model.eval()`, or is named `evaluate`, `validate`, `test`, `predict`,
    /// `infer` (or starts with `eval`, `valid`, `predict`, `infer`), calls the model, and is
    /// neither decorated with `@torch.no_grad()` / `@torch.inference_mode()` nor runs the model
    /// inside `with torch.no_grad():` / `with torch.inference_mode():`.
    ///
    /// Gradient-based evaluation (a `backward()`, `torch.autograd.grad`, `requires_grad_`,
    /// `torch.enable_grad` in the function: saliency maps, adversarial attacks) is left alone,
    /// and so is a function whose every call site in the file already runs without autograd:
    /// under `no_grad`, in Lightning's `validation_step` / `test_step` / `predict_step` (which
    /// Lightning runs without gradients), or in a function whose own callers are covered this
    /// way. Methods of `nn.Module` classes (a model's own `infer` or `predict`) are the model's
    /// API, left to their callers; constructing a module (`Encoder(...)`) is not a forward
    /// pass. Applies to files that import `torch`.
    ///
    /// A method that puts `self.<module>` in eval mode and then calls a wrapper method of the
    /// same object that runs `self.<module>(...)` (`self.module_.eval(); self.infer(x)`) counts
    /// as running the model. An evaluation script that calls `model.eval()` at module level
    /// and then runs `model(...)` in a module-level loop, in a file that never backpropagates
    /// or steps an optimizer, is reported too.
    ///
    /// ## Why is this risky?
    /// With autograd on, every forward pass records its graph and keeps the activations needed
    /// for a backward pass that never comes. Evaluation with large batches or long sequences
    /// then runs out of memory where training did not. `torch.no_grad` "will reduce memory
    /// consumption for computations that would otherwise have `requires_grad=True`"; note that
    /// `model.eval()` only switches dropout and batch norm, and `inference_mode` "does NOT
    /// automatically set the model to evaluation mode": both are needed.
    ///
    /// ## Example
    /// ```python
    /// import torch
    ///
    /// def evaluate(model, loader):
    ///     model.eval()
    ///     correct = 0
    ///     for x, y in loader:
    ///         out = model(x)
    ///         correct += (out.argmax(1) == y).sum().item()
    ///     return correct
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// import torch
    ///
    /// @torch.no_grad()
    /// def evaluate(model, loader):
    ///     model.eval()
    ///     correct = 0
    ///     for x, y in loader:
    ///         out = model(x)
    ///         correct += (out.argmax(1) == y).sum().item()
    ///     return correct
    /// ```
    ///
    /// ## References
    /// - `torch.no_grad`: <https://pytorch.org/docs/stable/generated/torch.no_grad.html>
    /// - `torch.inference_mode`:
    ///   <https://pytorch.org/docs/stable/generated/torch.autograd.grad_mode.inference_mode.html>
    pub static PT003 = {
        code: "PT003",
        name: "eval-without-no-grad",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Warning,
        summary: "Evaluation or inference runs the model without `no_grad` / `inference_mode`",
        kinds: &[],
        needles: &["torch"],
        options: &[],
    };
}

pub struct EvalWithoutNoGrad;

/// Calls that show the function wants gradients.
const GRAD_USES: &[&str] = &[
    "backward",
    "requires_grad_",
    "enable_grad",
    "set_grad_enabled",
    "grad",
    "manual_backward",
];

impl Rule for EvalWithoutNoGrad {
    fn meta(&self) -> &'static RuleMeta {
        &PT003
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.python();
        if !m.imports_torch() {
            return;
        }
        let t = m.training();
        check_module_level(ctx);
        let m = ctx.python();
        let modules = module_classes(m);
        for f in 0..m.functions.len() {
            let func = &m.functions[f];
            if t.grad_free(func.node).is_some()
                || func.class.as_deref().is_some_and(|c| modules.contains(c))
            {
                continue;
            }
            let eval_calls = eval_receivers(m, Some(f));
            let named = is_eval_name(&func.name);
            if !named && eval_calls.is_empty() {
                continue;
            }
            let Some(body) = func.node.field("body") else {
                continue;
            };
            if wants_grad(m, body) {
                continue;
            }
            let model_call = m.calls_in(f).find(|&&(c, _)| {
                t.grad_free(c).is_none()
                    && (c.field("function").is_some_and(|callee| {
                        let text = m.text(callee);
                        eval_calls.iter().any(|(_, r)| *r == text)
                            || (matches!(callee.kind_name(), "identifier" | "attribute")
                                && is_model_name(text.rsplit('.').next().unwrap_or(""))
                                && !text
                                    .rsplit('.')
                                    .next()
                                    .unwrap_or("")
                                    .starts_with(|c: char| c.is_ascii_uppercase())
                                && m.qualified_name(callee).is_none())
                    })
                    // A wrapper method of the same object that runs the model put in eval
                    // mode: `self.module_.eval(); y = self.infer(x)`.
                    || (!eval_calls.is_empty()
                        && m.local_callee(c).is_some_and(|g| {
                            g != f
                                && m.functions[g].class.is_some()
                                && runs_receiver(m, g, &eval_calls)
                        })))
            });
            let Some(&(call, _)) = model_call else {
                continue;
            };
            // The callers in the file already turn autograd off (a few call levels up).
            if covered_by_callers(m, f, 0) {
                continue;
            }
            let name_node = func.node.field("name").unwrap_or(func.node);
            let callee = call.field("function").map(|c| m.text(c)).unwrap_or("model");
            let mut d = ctx
                .diagnostic(
                    call,
                    format!(
                        "`{}` runs `{callee}(...)` for evaluation with autograd on",
                        func.name
                    ),
                )
                .primary_label("this forward pass records a graph and keeps its activations");
            d = match eval_calls.first() {
                Some((e, _)) => d.with_label(
                    Span::of(e),
                    "evaluation mode is set here, but it does not turn off autograd",
                ),
                None => d.with_label(Span::of(&name_node), "an evaluation function"),
            };
            ctx.report(
                d.note("evaluation can then run out of GPU memory where training did not")
                    .help(format!(
                        "decorate `{}` with `@torch.no_grad()` (or `@torch.inference_mode()`), or run the model inside `with torch.no_grad():`",
                        func.name
                    )),
            );
        }
    }
}

/// Does method `g` call one of the eval-mode receivers (`self.module_(...)`) outside
/// gradient-free regions? Only `self.` receivers: the same object in both methods.
fn runs_receiver(m: &PythonModel<'_>, g: usize, eval_calls: &[(Node<'_>, &str)]) -> bool {
    let t = m.training();
    m.calls_in(g).any(|&(c, _)| {
        t.grad_free(c).is_none()
            && c.field("function").is_some_and(|callee| {
                let text = m.text(callee);
                text.starts_with("self.") && eval_calls.iter().any(|(_, r)| *r == text)
            })
    })
}

/// An evaluation script: `model.eval()` at module level, then a module-level loop that runs
/// `model(...)` with autograd on, in a file that never backpropagates or steps an optimizer.
fn check_module_level(ctx: &mut Context<'_>) {
    let m = ctx.python();
    let t = m.training();
    if !t.backward.is_empty() || t.loops.iter().any(|l| l.is_training()) {
        return;
    }
    let evals = eval_receivers(m, None);
    if evals.is_empty() || wants_grad(m, m.root) {
        return;
    }
    let found = m.calls.iter().find_map(|&(c, scope)| {
        if scope.is_some() || t.grad_free(c).is_some() || t.loop_of(m, c).is_none() {
            return None;
        }
        let text = m.text(c.field("function")?);
        evals
            .iter()
            .find(|(e, r)| *r == text && e.end_byte() <= c.start_byte())
            .map(|(e, _)| (c, *e))
    });
    let Some((call, eval)) = found else {
        return;
    };
    let callee = call.field("function").map(|c| m.text(c)).unwrap_or("model");
    let lp = t.loop_of(m, call).map(|l| l.header()).unwrap_or(call);
    ctx.report(
        ctx.diagnostic(
            call,
            format!("the evaluation loop runs `{callee}(...)` with autograd on"),
        )
        .primary_label("this forward pass records a graph and keeps its activations")
        .with_label(
            Span::of(&eval),
            "evaluation mode is set here, but it does not turn off autograd",
        )
        .with_label(Span::of(&lp), "the evaluation loop")
        .note("evaluation can then run out of GPU memory where training did not")
        .help("run the model inside `with torch.no_grad():` (or `torch.inference_mode()`)"),
    );
}

/// Hooks that frameworks run with autograd off (Lightning's evaluation steps).
const NO_GRAD_HOOKS: &[&str] = &["validation_step", "test_step", "predict_step"];

/// Is every call of `f` in the file made with autograd off: inside `no_grad`, from a
/// framework evaluation hook, or from a function that is itself covered this way?
fn covered_by_callers(m: &PythonModel<'_>, f: usize, depth: usize) -> bool {
    if depth > 3 {
        return false;
    }
    let t = m.training();
    let sites = &m.call_graph().sites[f];
    !sites.is_empty()
        && sites.iter().all(|&(s, scope)| {
            t.grad_free(s).is_some()
                || scope.is_some_and(|g| {
                    g != f
                        && (NO_GRAD_HOOKS.contains(&m.functions[g].name.as_str())
                            || t.grad_free(m.functions[g].node).is_some()
                            || covered_by_callers(m, g, depth + 1))
                })
        })
}

/// The names of the file's `nn.Module` (or Lightning module) classes: the `infer`/`predict`
/// of one is the model's API, and the caller decides about autograd.
fn module_classes<'a>(m: &'a PythonModel<'_>) -> HashSet<&'a str> {
    m.classes
        .iter()
        .filter(|c| {
            c.node.field("superclasses").is_some_and(|s| {
                gpulint_syntax::named_children(s).any(|b| {
                    let t = m.text(b);
                    t.ends_with("Module") || t.ends_with("Model")
                })
            })
        })
        .map(|c| c.name.as_str())
        .collect()
}

fn is_eval_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    if n.ends_with("_step") || n.ends_with("_epoch_end") || n.starts_with("on_") {
        return false;
    }
    n == "test"
        || n.starts_with("eval")
        || n.starts_with("valid")
        || n.starts_with("predict")
        || n.starts_with("infer")
}

/// `<model>.eval()` calls in the body of `f` (`None`: at module level), with the receiver's
/// text.
fn eval_receivers<'t>(m: &PythonModel<'t>, f: Option<usize>) -> Vec<(Node<'t>, &'t str)> {
    type Calls<'a, 't> = Box<dyn Iterator<Item = &'a (Node<'t>, Option<usize>)> + 'a>;
    let calls: Calls<'_, 't> = match f {
        Some(f) => Box::new(m.calls_in(f)),
        None => Box::new(m.calls.iter().filter(|(_, s)| s.is_none())),
    };
    calls
        .filter_map(|&(c, _)| {
            let func = c.field("function")?;
            if func.kind_name() != "attribute" || m.text(func.field("attribute")?) != "eval" {
                return None;
            }
            let args = c.field("arguments")?;
            if args.named_child_count() != 0 {
                return None;
            }
            let recv = func.field("object")?;
            if !matches!(recv.kind_name(), "identifier" | "attribute")
                || m.qualified_name(recv).is_some()
            {
                return None;
            }
            Some((c, m.text(recv)))
        })
        .collect()
}

/// Does the body compute gradients on purpose?
fn wants_grad(m: &PythonModel<'_>, body: Node<'_>) -> bool {
    descendants(body).any(|n| match n.kind_name() {
        "attribute" => n
            .field("attribute")
            .is_some_and(|a| GRAD_USES.contains(&m.text(a)) || m.text(a) == "requires_grad"),
        "identifier" => matches!(m.text(n), "enable_grad" | "set_grad_enabled"),
        _ => false,
    })
}
