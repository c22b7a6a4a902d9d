//! TF008: `tf.function` retracing driven by Python values.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::python::tf_function::enclosing_loop;
use gpulint_semantic::python::PythonModel;
use gpulint_syntax::named_children;
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

declare_rule! {
    /// ## What it does
    /// Finds a call of a local `tf.function` (decorated with `@tf.function`, no
    /// `input_signature=` and no `reduce_retracing=True`) inside a `for` loop over `range(...)`
    /// or `enumerate(...)`, that passes the loop's Python integer (`i`, `epoch`, `step`) as an
    /// argument. Values passed through `tf.constant(i)` or `tf.convert_to_tensor(i)` and
    /// constant configuration arguments (`training=True`) are fine.
    ///
    /// ## Why is this risky?
    /// "For Python primitive values, the type corresponds to the value itself": every new
    /// integer is a new trace, so the function is traced and compiled again on every
    /// iteration. Each trace keeps a new graph, time per step grows and memory grows until the
    /// job runs out of it; TensorFlow warns "triggered tf.function retracing".
    ///
    /// ## Example
    /// ```python
    /// import tensorflow as tf
    ///
    /// @tf.function
    /// def scaled(x, step):
    ///     return x * step
    ///
    /// for step in range(1000):
    ///     scaled(tf.ones(3), step)
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// import tensorflow as tf
    ///
    /// @tf.function
    /// def scaled(x, step):
    ///     return x * tf.cast(step, x.dtype)
    ///
    /// for step in range(1000):
    ///     scaled(tf.ones(3), tf.constant(step))
    /// ```
    ///
    /// ## References
    /// - TensorFlow guide "Better performance with tf.function", *Rules of tracing*:
    ///   <https://www.tensorflow.org/guide/function#rules_of_tracing>
    /// - *Controlling retracing* ("Pass tensors instead of python literals"):
    ///   <https://www.tensorflow.org/guide/function#controlling_retracing>
    /// - tensorflow/tensorflow#46012 (the retracing warning and its causes):
    ///   <https://github.com/tensorflow/tensorflow/issues/46012>
    pub static TF008 = {
        code: "TF008",
        name: "retracing-python-values",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Warning,
        summary: "tf.function retraced for every Python value of a loop variable",
        kinds: &[],
        needles: &["tensorflow", "tf_keras"],
        also_needles: &["function"],
        options: &[],
    };
}

pub struct RetracingPythonValues;

/// The integer loop variable of `for i in range(...)` / `for i, x in enumerate(...)`.
fn int_loop_var<'t>(m: &PythonModel<'t>, lp: Node<'t>) -> Option<&'t str> {
    if lp.kind_name() != "for_statement" {
        return None;
    }
    let left = lp.field("left")?;
    let right = lp.field("right")?;
    if right.kind_name() != "call" {
        return None;
    }
    match m.text(right.field("function")?) {
        "range" if left.kind_name() == "identifier" => Some(m.text(left)),
        "enumerate" if matches!(left.kind_name(), "pattern_list" | "tuple_pattern") => {
            let first = left.named_child(0)?;
            (first.kind_name() == "identifier").then(|| m.text(first))
        }
        _ => None,
    }
}

impl Rule for RetracingPythonValues {
    fn meta(&self) -> &'static RuleMeta {
        &TF008
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.python();
        if !m.imports_tensorflow() {
            return;
        }
        let tfn = m.tf_functions();
        for &(call, _) in &m.calls {
            let Some(f) = m.local_callee(call) else {
                continue;
            };
            let Some(traced) = tfn.traced.get(f).copied().flatten() else {
                continue;
            };
            if traced.stable_signature || tfn.traced_function(m, call).is_some() {
                continue;
            }
            // The innermost enclosing loop (in the same function) over Python integers.
            let mut found = None;
            let mut cur = enclosing_loop(m, call);
            for _ in 0..16 {
                let Some(lp) = cur else { break };
                if let Some(v) = int_loop_var(m, lp) {
                    found = Some((lp, v));
                    break;
                }
                cur = enclosing_loop(m, lp);
            }
            let Some((lp, var)) = found else {
                continue;
            };
            let Some(args) = call.field("arguments") else {
                continue;
            };
            let Some(arg) = named_children(args).find(|a| {
                let v = match a.kind_name() {
                    "keyword_argument" => a.field("value"),
                    _ => Some(*a),
                };
                v.is_some_and(|v| v.kind_name() == "identifier" && m.text(v) == var)
            }) else {
                continue;
            };
            let name = &m.functions[f].name;
            ctx.report(
                ctx.diagnostic(arg, format!("the Python integer `{var}` is passed to `tf.function` `{name}` on every iteration: each new value traces the function again"))
                    .primary_label("a new Python value, a new trace and graph")
                    .with_label(Span::of(&lp), format!("`{var}` changes on every iteration of this loop"))
                    .with_label(Span::of(&traced.site), format!("`{name}` is traced by `tf.function` here, without `input_signature` or `reduce_retracing`"))
                    .note("for Python primitives the trace key is the value itself; graphs accumulate and memory grows")
                    .help(format!("pass a tensor, `tf.constant({var})`, or give `{name}` an `input_signature`")),
            );
        }
    }
}
