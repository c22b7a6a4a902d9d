//! TF011: recursive `tf.function`.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::python::recursion::has_base_case;
use gpulint_syntax::Lang;

declare_rule! {
    /// ## What it does
    /// Finds a `tf.function` (decorated with `@tf.function` or wrapped by `tf.function(f)`)
    /// that calls itself, directly or through other `tf.function`s of the same module (a
    /// cycle in the call graph whose members are all traced). When the recursive call sits
    /// under a condition (a Python-static depth argument, for example), the finding is a
    /// warning: it may end, but it still traces once per level.
    ///
    /// ## Why is this risky?
    /// The guide is explicit: "Recursive tf.functions are not supported and could cause
    /// infinite loops". Tracing calls the Python function again for every level, so an
    /// unconditional recursion never finishes tracing and ends in `RecursionError`, and a
    /// conditional one traces the function many times and builds a graph per level, which
    /// costs memory and also uses up the Python recursion budget.
    ///
    /// ## Example
    /// ```python
    /// import tensorflow as tf
    ///
    /// @tf.function
    /// def collatz(n):
    ///     return collatz(n // 2)
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// import tensorflow as tf
    ///
    /// @tf.function
    /// def collatz(n):
    ///     steps = tf.constant(0)
    ///     while n > 1:
    ///         n = n // 2
    ///         steps += 1
    ///     return steps
    /// ```
    ///
    /// ## References
    /// - TensorFlow guide "Better performance with tf.function", *Recursive tf.functions are
    ///   not supported*: <https://www.tensorflow.org/guide/function#recursive_tffunctions_are_not_supported>
    pub static TF011 = {
        code: "TF011",
        name: "recursive-tf-function",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Error,
        summary: "Recursive tf.function",
        kinds: &[],
        needles: &["tensorflow", "tf_keras"],
        also_needles: &["function"],
        options: &[],
    };
}

pub struct RecursiveTfFunction;

impl Rule for RecursiveTfFunction {
    fn meta(&self) -> &'static RuleMeta {
        &TF011
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.python();
        if !m.imports_tensorflow() {
            return;
        }
        let tfn = m.tf_functions();
        if tfn.traced.iter().all(|t| t.is_none()) {
            return;
        }
        for cycle in &m.recursion().cycles {
            if !cycle.functions.iter().all(|f| tfn.traced[*f].is_some()) {
                continue;
            }
            let Some(&(call, caller, callee)) = cycle.calls.first() else {
                continue;
            };
            let name = &m.functions[callee].name;
            let guarded = cycle.calls.iter().any(|(c, f, _)| has_base_case(m, *f, *c));
            let site = tfn.traced[callee].map(|t| t.site);
            let mut d = ctx
                .diagnostic(call, format!("`tf.function` `{}` calls `{name}` recursively: recursive tf.functions are not supported", m.functions[caller].name))
                .primary_label("recursive call, traced again at every level");
            if let Some(site) = site {
                d = d.with_label(
                    Span::of(&site),
                    format!("`{name}` is traced by `tf.function` here"),
                );
            }
            if guarded {
                d = d
                    .severity(Severity::Warning)
                    .note("the recursion is conditional, so tracing may end, but it traces the function once per level and builds a graph for each");
            } else {
                d = d.note("with no condition around the call, tracing never ends and fails with RecursionError");
            }
            ctx.report(d.help("rewrite the recursion as a loop over tensors (`tf.while_loop`, or a Python `while` on a tensor condition that AutoGraph converts)"));
        }
    }
}
