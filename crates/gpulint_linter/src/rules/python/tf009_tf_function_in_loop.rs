//! TF009: `tf.function` created inside a loop.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::python::tf_function::{
    enclosing_loop, few_iterations, find_call_in, is_clear_session, unconditional_in_function,
};
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;

declare_rule! {
    /// ## What it does
    /// Finds `tf.function` objects created inside a `for` or `while` loop: a `tf.function(f)`
    /// call or a `@tf.function`-decorated `def` in the loop body, or in a local function that
    /// a loop calls (one level). Loops that also call `tf.keras.backend.clear_session()`
    /// (directly or in a function they call), such as hyper-parameter trials, and loops over a
    /// few literal items (`range(3)`, a list of up to three) are left alone.
    ///
    /// ## Why is this risky?
    /// "Separate tf.function objects are guaranteed not to share traces": every iteration
    /// traces and compiles the function again, and the graphs of the earlier iterations stay
    /// alive. Time per iteration grows, memory grows until the job runs out of it, and
    /// TensorFlow warns that retracing is caused by "creating @tf.function repeatedly in a
    /// loop".
    ///
    /// ## Example
    /// ```python
    /// import tensorflow as tf
    ///
    /// for batch in range(100):
    ///     step = tf.function(lambda x: x * 2)
    ///     step(tf.constant(batch))
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// import tensorflow as tf
    ///
    /// step = tf.function(lambda x: x * 2)
    /// for batch in range(100):
    ///     step(tf.constant(batch))
    /// ```
    ///
    /// ## References
    /// - TensorFlow guide "Better performance with tf.function", *Controlling retracing*:
    ///   <https://www.tensorflow.org/guide/function#controlling_retracing>
    /// - The retracing warning ("creating @tf.function repeatedly in a loop"),
    ///   tensorflow/tensorflow#46012: <https://github.com/tensorflow/tensorflow/issues/46012>
    pub static TF009 = {
        code: "TF009",
        name: "tf-function-in-loop",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Warning,
        summary: "tf.function created inside a loop",
        kinds: &[],
        needles: &["tensorflow", "tf_keras"],
        also_needles: &["function"],
        options: &[],
    };
}

pub struct TfFunctionInLoop;

impl Rule for TfFunctionInLoop {
    fn meta(&self) -> &'static RuleMeta {
        &TF009
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.python();
        if !m.imports_tensorflow() {
            return;
        }
        let tfn = m.tf_functions();
        for &site in &tfn.creations {
            // Directly in a loop, or in a function that a loop calls.
            let (lp, via) = match enclosing_loop(m, site) {
                Some(lp) => (lp, None),
                None => {
                    let Some(f) = m
                        .enclosing_function(site)
                        .filter(|_| unconditional_in_function(m, site))
                    else {
                        continue;
                    };
                    let graph = m.call_graph();
                    let caller_sites = graph
                        .edges
                        .iter()
                        .flatten()
                        .chain(graph.module.iter())
                        .filter(|(_, callee)| *callee == f)
                        .map(|(c, _)| *c);
                    let Some((lp, c)) = caller_sites
                        .filter_map(|c| enclosing_loop(m, c).map(|lp| (lp, c)))
                        .next()
                    else {
                        continue;
                    };
                    (lp, Some(c))
                }
            };
            let Some(body) = lp.field("body") else {
                continue;
            };
            if few_iterations(m, lp, 3)
                || find_call_in(m, body, |c| is_clear_session(m, c)).is_some()
            {
                continue;
            }
            let head = match lp.kind_name() {
                "for_statement" => "for",
                _ => "while",
            };
            let mut d = ctx
                .diagnostic(site, match via {
                    None => "`tf.function` is created inside a loop: every iteration traces and compiles a new function".to_string(),
                    Some(_) => "`tf.function` is created in a function that a loop calls: every iteration traces and compiles a new function".to_string(),
                })
                .primary_label("a new tf.function, with no shared traces, per iteration")
                .with_label(Span::of(&lp), format!("this `{head}` loop"));
            if let Some(c) = via {
                d = d.with_label(Span::of(&c), "called here, once per iteration");
            }
            ctx.report(
                d.note("separate tf.function objects never share traces: the graphs pile up and memory grows with every iteration")
                    .help("create the tf.function once, before the loop, and call it inside; pass changing values as tensors"),
            );
        }
    }
}
