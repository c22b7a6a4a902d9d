//! KR001: Keras models created in a loop without `clear_session()`.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::python::tf::{normalize, Init};
use gpulint_semantic::python::tf_function::{
    enclosing_loop, few_iterations, find_call_in, is_clear_session, trial_driver,
    unconditional_in_function,
};
use gpulint_semantic::python::PythonModel;
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;
use std::collections::HashSet;
use tree_sitter::Node;

declare_rule! {
    /// ## What it does
    /// Finds a `for` or `while` loop that builds a Keras model on every iteration
    /// (`Sequential(...)`, `Model(...)`, `load_model(...)`, `clone_model(...)`, a Keras
    /// application, a local `keras.Model` subclass that is then compiled, fitted or run, or a
    /// local function that does one of these) and never calls
    /// `tf.keras.backend.clear_session()` / `keras.utils.clear_session()`, neither in the
    /// loop body nor in a function the body calls (a helper counts only when it always builds
    /// the model). Loops over a few literal items (`range(5)`, a list of up to five, or
    /// `range(k)` after `k = 4`) and ensembles that keep every model (`models.append(model)`)
    /// are left alone. A name assigned several times counts with its last top-level assignment
    /// before the loop; in a notebook only the loop's own cell counts, since cells run in any
    /// order.
    ///
    /// A hyperparameter search runs its objective like a loop body: a model built in an
    /// Optuna objective (`study.optimize(objective, n_trials=N)`) or a hyperopt one
    /// (`fmin(objective, ...)`), or in a function the objective always calls, with no
    /// `clear_session()` in either, is reported too (not when `n_trials` folds to five or
    /// fewer).
    ///
    /// ## Why is this risky?
    /// Keras keeps global state for every model it builds (the graph, layer name counters,
    /// traced train and predict functions). The API documentation warns: "If you are creating
    /// many models in a loop, this global state will consume an increasing amount of memory
    /// over time". A hyper-parameter search or cross-validation loop then slows down and runs
    /// out of host or GPU memory after enough iterations.
    ///
    /// ## Example
    /// ```python
    /// import tensorflow as tf
    ///
    /// for units in range(16, 1024, 16):
    ///     model = tf.keras.Sequential([tf.keras.layers.Dense(units), tf.keras.layers.Dense(1)])
    ///     model.compile(optimizer="adam", loss="mse")
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// import tensorflow as tf
    ///
    /// for units in range(16, 1024, 16):
    ///     tf.keras.backend.clear_session()
    ///     model = tf.keras.Sequential([tf.keras.layers.Dense(units), tf.keras.layers.Dense(1)])
    ///     model.compile(optimizer="adam", loss="mse")
    /// ```
    ///
    /// ## References
    /// - `tf.keras.backend.clear_session` (Example 1, "creating many models in a loop"):
    ///   <https://www.tensorflow.org/api_docs/python/tf/keras/backend/clear_session>
    /// - Keras `clear_session`: <https://keras.io/api/utils/config_utils/#clearsession-function>
    pub static KR001 = {
        code: "KR001",
        name: "models-in-loop-without-clear-session",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Warning,
        summary: "Keras models created in a loop without clear_session()",
        kinds: &[],
        needles: &["keras", "tensorflow"],
        options: &[],
    };
}

pub struct ModelsInLoop;

/// Is the call a Keras model constructor by name (not a local subclass)?
fn named_constructor(m: &PythonModel<'_>, call: Node<'_>) -> bool {
    m.call_name(call).is_some_and(|q| {
        let q = normalize(&q);
        matches!(
            q.as_str(),
            "keras.Model"
                | "keras.Sequential"
                | "keras.models.Model"
                | "keras.models.Sequential"
                | "keras.models.load_model"
                | "keras.models.clone_model"
                | "keras.models.model_from_json"
                | "keras.saving.load_model"
        ) || q.starts_with("keras.applications.")
    })
}

impl Rule for ModelsInLoop {
    fn meta(&self) -> &'static RuleMeta {
        &KR001
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.python();
        if !m.imports_keras() && !m.imports_tensorflow() {
            return;
        }
        let tf = m.tf();
        let mut reported = HashSet::new();
        for &(call, _) in &m.calls {
            if tf.init_kind(call) != Some(Init::KerasModel) {
                continue;
            }
            // The loop that runs the construction: around it, or around a call of the local
            // function that contains it; or a hyperparameter search calling that function once
            // per trial.
            let (lp, via, trials) = match enclosing_loop(m, call) {
                Some(lp) => (lp, None, None),
                None => {
                    // Built in a helper: only when the helper always builds it.
                    let Some(f) = m
                        .enclosing_function(call)
                        .filter(|_| unconditional_in_function(m, call))
                    else {
                        continue;
                    };
                    let graph = m.call_graph();
                    let found = graph
                        .edges
                        .iter()
                        .flatten()
                        .chain(graph.module.iter())
                        .filter(|(_, callee)| *callee == f)
                        .find_map(|(c, _)| enclosing_loop(m, *c).map(|lp| (lp, *c)));
                    match found {
                        Some((lp, c)) => (lp, Some(c), None),
                        None => {
                            let Some((driver, objective)) = trial_driver(m, f, 5) else {
                                continue;
                            };
                            (driver, None, Some(m.functions[objective].node))
                        }
                    }
                }
            };
            if reported.contains(&lp.id()) || trials.is_none() && few_iterations(m, lp, 5) {
                continue;
            }
            // A loop inside a Keras class (building sub-layers in `__init__`) builds parts of
            // one model.
            if let Some(f) = m.enclosing_function(lp) {
                if trials.is_none()
                    && m.functions[f].class.is_some()
                    && m.functions[f].name.starts_with("__")
                {
                    continue;
                }
            }
            // What runs once per iteration: the loop body, or the objective of a search.
            let Some(body) = trials.or_else(|| lp.field("body")) else {
                continue;
            };
            // A local subclass might be a layer: require the loop to use it as a model.
            if !named_constructor(m, call)
                && find_call_in(m, body, |c| tf.init_kind(c) == Some(Init::ModelMethod)).is_none()
            {
                continue;
            }
            // An ensemble keeps every model on purpose: `models.append(model)`.
            let kept = m
                .parent(call)
                .filter(|p| p.kind_name() == "assignment")
                .and_then(|a| a.field("left"))
                .map(|l| m.text(l))
                .or_else(|| {
                    via.and_then(|c| m.parent(c))
                        .filter(|p| p.kind_name() == "assignment")
                        .and_then(|a| a.field("left"))
                        .map(|l| m.text(l))
                });
            if let Some(name) = kept.filter(|_| trials.is_none()) {
                if find_call_in(m, body, |c| {
                    c.field("function")
                        .is_some_and(|f| m.text(f).ends_with(".append"))
                        && c.field("arguments").is_some_and(|a| {
                            gpulint_syntax::named_children(a).any(|x| m.text(x) == name)
                        })
                })
                .is_some()
                {
                    continue;
                }
            }
            // A search's objective, or the function that builds the model, may clear the
            // session itself.
            if let Some(f) = trials.and(m.enclosing_function(call)) {
                if find_call_in(m, m.functions[f].node, |c| is_clear_session(m, c)).is_some() {
                    continue;
                }
            }
            if find_call_in(m, body, |c| is_clear_session(m, c)).is_some() {
                continue;
            }
            reported.insert(lp.id());
            if let Some(objective) = trials {
                let name = objective
                    .field("name")
                    .map(|n| ctx.text(n))
                    .unwrap_or("objective");
                let callee = call
                    .field("function")
                    .map(|f| ctx.text(f))
                    .unwrap_or("Model");
                let d = ctx
                    .diagnostic(call, format!("`{callee}(...)` builds a new Keras model in every trial of a hyperparameter search, and `{name}` never calls `clear_session()`"))
                    .primary_label("a new model per trial; the old ones stay in Keras's global state")
                    .with_label(Span::of(&lp), format!("the search calls `{name}` once per trial"))
                    .note("\"If you are creating many models in a loop, this global state will consume an increasing amount of memory over time\"")
                    .help(format!("call `tf.keras.backend.clear_session()` (Keras 3: `keras.utils.clear_session()`) at the start of `{name}`"));
                ctx.report(d);
                continue;
            }
            let head = if lp.kind_name() == "for_statement" {
                "for"
            } else {
                "while"
            };
            let callee = call
                .field("function")
                .map(|f| ctx.text(f))
                .unwrap_or("Model");
            let mut d = ctx
                .diagnostic(call, format!("`{callee}(...)` builds a new Keras model on every iteration of a loop that never calls `clear_session()`"))
                .primary_label("a new model per iteration; the old ones stay in Keras's global state")
                .with_label(Span::of(&lp), format!("this `{head}` loop"));
            if let Some(c) = via {
                d = d.with_label(
                    Span::of(&c),
                    "the model is built by this call, once per iteration",
                );
            }
            ctx.report(
                d.note("\"If you are creating many models in a loop, this global state will consume an increasing amount of memory over time\"")
                    .help("call `tf.keras.backend.clear_session()` (Keras 3: `keras.utils.clear_session()`) at the start of each iteration, and `del model` when done"),
            );
        }
    }
}
