//! TF010: Python side effects or tensor leaks inside `tf.function`.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::{Severity, Span};
use gpulint_syntax::descendants;
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;
use std::collections::HashSet;

declare_rule! {
    /// ## What it does
    /// Inside a `tf.function` (decorated with `@tf.function` or wrapped by `tf.function(f)`),
    /// finds Python state changed from traced code:
    /// - `global` / `nonlocal` declarations (the function rebinds an outer name);
    /// - `.append(...)`, `.extend(...)` or `x[k] = ...` on a container the function does not
    ///   create itself (a module-level or enclosing list or dict);
    /// - `self.attr = ...` in a traced method other than `__init__` / `build`.
    ///
    /// Appending to a list created in the function and then `tf.stack`ed is fine and stays
    /// silent, and so is creating state once on the first trace (`self.w = tf.Variable(...)`,
    /// `self.built = True`, `global g` with `if g is None:`), which the guide recommends. An
    /// attribute that nothing in the file ever reads (`self.attr` is only assigned: a dead
    /// store) is left alone too: a value that is never used cannot be stale or leak.
    ///
    /// ## Why is this risky?
    /// Python side effects "only happen the first time you call a tf.function", while it is
    /// traced: later calls run the graph and skip them, so counters, logs and collected
    /// results are silently wrong. Tensors stored in outer containers or attributes are graph
    /// tensors that "leak" out of the function: using them later fails, and every retrace adds
    /// more of them, so memory grows. All outputs must be return values; accumulate with
    /// `tf.TensorArray` and keep state in `tf.Variable`s.
    ///
    /// ## Example
    /// ```python
    /// import tensorflow as tf
    ///
    /// history = []
    ///
    /// @tf.function
    /// def train_step(x):
    ///     loss = tf.reduce_mean(x)
    ///     history.append(loss)
    ///     return loss
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// import tensorflow as tf
    ///
    /// history = []
    ///
    /// @tf.function
    /// def train_step(x):
    ///     return tf.reduce_mean(x)
    ///
    /// history.append(train_step(tf.ones((2, 2))))
    /// ```
    ///
    /// ## References
    /// - TensorFlow guide "Better performance with tf.function" (*Executing Python side
    ///   effects*, *All outputs of a tf.function must be return values*, *Accumulating values
    ///   in a loop*): <https://www.tensorflow.org/guide/function>
    pub static TF010 = {
        code: "TF010",
        name: "tf-function-side-effect",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Warning,
        summary: "Python side effect or tensor leak inside tf.function",
        kinds: &[],
        needles: &["tensorflow", "tf_keras"],
        also_needles: &["function"],
        options: &[],
    };
}

pub struct TfFunctionSideEffect;

impl Rule for TfFunctionSideEffect {
    fn meta(&self) -> &'static RuleMeta {
        &TF010
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.python();
        if !m.imports_tensorflow() {
            return;
        }
        let tfn = m.tf_functions();
        let attributes = std::cell::OnceCell::new();
        for (f, traced) in tfn.traced.iter().enumerate() {
            let Some(traced) = traced else { continue };
            let func = &m.functions[f];
            let Some(body) = func.node.field("body") else {
                continue;
            };
            let name = &func.name;
            for n in descendants(body) {
                // Only the function's own statements (nested defs bind their own names).
                if m.enclosing_function(n) != Some(f) {
                    continue;
                }
                let finding = match n.kind_name() {
                    "global_statement" | "nonlocal_statement" => {
                        // `global g` + `if g is None: g = ...`: create-once, the documented
                        // way to make a generator or variable on the first trace.
                        let fn_text = m.text(func.node);
                        let lazy = gpulint_syntax::named_children(n)
                            .filter(|c| c.kind_name() == "identifier")
                            .any(|c| fn_text.contains(&format!("{} is None", m.text(c))));
                        (!lazy).then(|| {
                            (
                                n,
                                format!("`{}` in `tf.function` `{name}`: the outer name is rebound only while tracing", ctx.text(n)),
                            )
                        })
                    }
                    "call" => {
                        let Some(func_node) =
                            n.field("function").filter(|f| f.kind_name() == "attribute")
                        else {
                            continue;
                        };
                        let method = func_node.field("attribute").map(|a| m.text(a));
                        let Some(obj) = func_node
                            .field("object")
                            .filter(|o| o.kind_name() == "identifier")
                        else {
                            continue;
                        };
                        let outer = !m.function_binds(f, m.text(obj))
                            && m.qualified_name(obj).is_none()
                            && obj_is_container(m, obj);
                        (matches!(method, Some("append" | "extend")) && outer).then(|| {
                            (
                                n,
                                format!("`{}` adds to the outer container `{}` from `tf.function` `{name}`: it runs only while tracing, and stores graph tensors", ctx.text(func_node), m.text(obj)),
                            )
                        })
                    }
                    "assignment" => {
                        let Some(left) = n.field("left") else {
                            continue;
                        };
                        match left.kind_name() {
                            "subscript" => {
                                let Some(obj) = left
                                    .field("value")
                                    .filter(|o| o.kind_name() == "identifier")
                                else {
                                    continue;
                                };
                                let outer = !m.function_binds(f, m.text(obj))
                                    && m.qualified_name(obj).is_none()
                                    && obj_is_container(m, obj);
                                outer.then(|| {
                                    (
                                        n,
                                        format!("`{}` writes into the outer container `{}` from `tf.function` `{name}`: it runs only while tracing, and stores graph tensors", ctx.text(left), m.text(obj)),
                                    )
                                })
                            }
                            "attribute" => {
                                let is_self =
                                    left.field("object").is_some_and(|o| m.text(o) == "self");
                                let setup = matches!(name.as_str(), "__init__" | "build");
                                // Lazy building on the first trace (`if not self.built:
                                // self.w = tf.Variable(...)`; `self.built = True`) is the
                                // documented way to create variables in a tf.function.
                                let right = n.field("right");
                                let lazy_build = right.is_some_and(|r| {
                                    matches!(r.kind_name(), "true" | "false" | "none" | "integer")
                                        || (r.kind_name() == "call"
                                            && m.call_name(r).is_some_and(|q| {
                                                q.ends_with(".Variable")
                                                    || q.ends_with("Generator.from_seed")
                                            }))
                                });
                                let read = || {
                                    left.field("attribute").is_some_and(|a| {
                                        attributes
                                            .get_or_init(|| attributes_read(m))
                                            .contains(m.text(a))
                                    })
                                };
                                (is_self && func.class.is_some() && !setup && !lazy_build && read()).then(|| {
                                    (
                                        n,
                                        format!("`{}` sets a Python attribute from `tf.function` `{name}`: it runs only while tracing, and the stored tensor leaks out of the graph", ctx.text(left)),
                                    )
                                })
                            }
                            _ => None,
                        }
                    }
                    _ => None,
                };
                let Some((node, msg)) = finding else { continue };
                ctx.report(
                    ctx.diagnostic(node, msg)
                        .primary_label("Python side effect in traced code")
                        .with_label(Span::of(&traced.site), format!("`{name}` is traced by `tf.function` here"))
                        .note("side effects in a tf.function happen only while it is traced; later calls run the graph and skip them")
                        .help("return the value from the tf.function and collect it outside, accumulate with `tf.TensorArray`, or keep state in a `tf.Variable` (`v.assign(...)`)"),
                );
            }
        }
    }
}

/// The attribute names any code of the file reads (`obj.name` anywhere but as the target of a
/// plain assignment, or `getattr(obj, "name")` / `hasattr`), from the model's lists of
/// assignments, attributes and calls, made the first time a finding is about to be reported.
fn attributes_read(m: &gpulint_semantic::python::PythonModel<'_>) -> HashSet<String> {
    let targets: HashSet<usize> = m
        .assignments
        .iter()
        .filter(|a| a.kind_name() == "assignment")
        .filter_map(|a| a.field("left").map(|l| l.id()))
        .collect();
    let mut read: HashSet<String> = m
        .attributes
        .iter()
        .filter(|n| !targets.contains(&n.id()))
        .filter_map(|n| n.field("attribute").map(|a| m.text(a).to_string()))
        .collect();
    for &(n, _) in &m.calls {
        let accessor = n
            .field("function")
            .is_some_and(|f| matches!(m.text(f), "getattr" | "hasattr"));
        if accessor {
            let key = n
                .field("arguments")
                .and_then(|a| gpulint_syntax::named_children(a).nth(1))
                .and_then(|k| gpulint_semantic::python::string_literal(k, m.source));
            read.extend(key);
        }
    }
    read
}

/// Is the outer name bound to a list, dict or set (module level or an enclosing function)?
fn obj_is_container(
    m: &gpulint_semantic::python::PythonModel<'_>,
    obj: tree_sitter::Node<'_>,
) -> bool {
    let Some(f) = m.enclosing_function(obj) else {
        return false;
    };
    // Look the name up where the traced function is defined.
    let at = m.functions[f].node;
    m.value_of_name(at, m.text(obj)).is_some_and(|v| {
        matches!(
            v.kind_name(),
            "list" | "dictionary" | "set" | "list_comprehension" | "dictionary_comprehension"
        ) || (v.kind_name() == "call"
            && v.field("function").is_some_and(|c| {
                matches!(
                    m.text(c),
                    "list" | "dict" | "set" | "defaultdict" | "collections.defaultdict"
                )
            }))
    })
}
