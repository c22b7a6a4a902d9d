//! TF006: large NumPy or Python data materialized inside `tf.function`.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{OptionKind, Rule, RuleLang, RuleMeta, RuleOption};
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::python::call_sites::{parameter_values, parameters};
use gpulint_semantic::python::tf::argument;
use gpulint_semantic::python::tf_function::Traced;
use gpulint_semantic::python::{PythonModel, Value};
use gpulint_syntax::descendants;
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;
use std::collections::HashSet;
use tree_sitter::Node;

mod sizes;
use sizes::*;

declare_rule! {
    /// ## What it does
    /// Inside a `tf.function` (decorated with `@tf.function` or wrapped by `tf.function(f)`,
    /// nested functions included), finds NumPy data that tracing turns into graph constants:
    /// - `np.load(...)`, and `np.random.*` draws (frozen at trace time; a draw passed
    ///   straight to `tf.constant(...)` or `tf.Variable(...)` asks for one fixed value and is
    ///   left alone, its size being TF007's concern);
    /// - `np.zeros`/`ones`/`full`/`empty`/`arange`/`eye`/`array` whose literal size reaches
    ///   the threshold (10⁶ elements by default);
    /// - `np.zeros`/`ones`/`empty`/`full` whose shape is computed from a parameter of the
    ///   traced function (or of a function nested in it). When every call site in the file
    ///   passes a constant, the size is computed from them (the largest one is reported, e.g.
    ///   "`build(1000)` makes this a 8.0 GB constant") and the allocation stays silent when it
    ///   is below the threshold at every call site; when some call site passes a non-constant
    ///   or none is visible, the finding says that the size comes from the parameter, so each
    ///   new value retraces the function and bakes a new constant into the graph;
    /// - module-level names bound to such arrays (captured by the closure);
    /// - Python `for` loops over `range(N)` with a literal `N` of 1,000 or more, which tracing
    ///   unrolls.
    ///
    /// Also finds `x.numpy()` in the traced function's own body (an error: symbolic tensors
    /// have no value while tracing), unless the file turns on
    /// `tf.config.run_functions_eagerly(True)`.
    ///
    /// Small constant tables and `range()` over a few layers are fine and stay silent, and so
    /// is NumPy code in a lambda or nested function handed to `tf.numpy_function` /
    /// `tf.py_function` (it runs eagerly, at every call). A shape read from a tensor
    /// (`np.zeros(x.shape)`) or a function traced with an `input_signature` is not a Python
    /// value passed by the caller and is not reported as parameter-sized.
    ///
    /// ## Why is this risky?
    /// "tf.function works best with TensorFlow ops; NumPy and Python calls are converted to
    /// constants." A large array becomes a constant in every traced graph (one copy per
    /// trace), and can reach the 2 GB limit of the graph proto. Random NumPy draws are made
    /// once, while tracing, so every call reuses the same numbers. A Python loop over
    /// Python data "executes during tracing, adding a copy of your model to the tf.Graph for
    /// each iteration": graph size, tracing time and memory grow with the loop count.
    ///
    /// ## Example
    /// ```python
    /// import numpy as np
    /// import tensorflow as tf
    ///
    /// @tf.function
    /// def add_noise(x):
    ///     return x + np.random.normal(size=(1024,))
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// import tensorflow as tf
    ///
    /// @tf.function
    /// def add_noise(x):
    ///     return x + tf.random.normal((1024,))
    /// ```
    ///
    /// ## References
    /// - TensorFlow guide "Better performance with tf.function" ("NumPy and Python calls are
    ///   converted to constants"): <https://www.tensorflow.org/guide/function>
    /// - *Looping over Python data*: <https://www.tensorflow.org/guide/function#looping_over_python_data>
    pub static TF006 = {
        code: "TF006",
        name: "numpy-in-tf-function",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Warning,
        summary: "Large NumPy or Python data materialized inside tf.function",
        kinds: &[],
        needles: &["tensorflow", "tf_keras"],
        also_needles: &["function"],
        options: &[RuleOption {
            key: "min-elements",
            kind: OptionKind::Int,
            default: "1000000",
            doc: "Literal array sizes (in elements) from which a NumPy allocation counts as large.",
        }],
    };
}

pub struct NumpyInTfFunction;

/// Is `call` inside a lambda or nested function that is handed to `tf.numpy_function` /
/// `tf.py_function` (which run it eagerly, at every call, outside the graph)?
fn in_eager_callback(
    m: &PythonModel<'_>,
    call: Node<'_>,
    f: usize,
    passed_to_eager: &std::cell::OnceCell<HashSet<String>>,
) -> bool {
    let is_eager_wrapper = |c: Node<'_>| {
        m.call_name(c).is_some_and(|q| {
            matches!(
                q.rsplit('.').next(),
                Some("numpy_function" | "py_function" | "py_func")
            ) && q.starts_with("tensorflow.")
        })
    };
    // A nested `def` passed by name. The names passed to the wrappers are collected once per
    // file (a scan of every call for every NumPy call would grow with their product).
    let mut g = m.enclosing_function(call);
    while let Some(i) = g {
        if i == f {
            break;
        }
        let passed = passed_to_eager.get_or_init(|| {
            let mut names = HashSet::new();
            for &(c, _) in &m.calls {
                if !is_eager_wrapper(c) {
                    continue;
                }
                let Some(a) = c.field("arguments") else {
                    continue;
                };
                for x in gpulint_syntax::named_children(a) {
                    let x = if x.kind_name() == "keyword_argument" {
                        x.field("value")
                    } else {
                        Some(x)
                    };
                    if let Some(x) = x.filter(|x| x.kind_name() == "identifier") {
                        names.insert(m.text(x).to_string());
                    }
                }
            }
            names
        });
        if passed.contains(m.functions[i].name.as_str()) {
            return true;
        }
        g = m.functions[i].parent;
    }
    // A lambda written in the wrapper's arguments.
    let def = m.functions[f].node;
    let mut in_lambda = false;
    for p in m.ancestors(call) {
        if p.id() == def.id() {
            break;
        }
        in_lambda |= p.kind_name() == "lambda";
        if in_lambda && p.kind_name() == "call" && is_eager_wrapper(p) {
            return true;
        }
    }
    false
}

impl Rule for NumpyInTfFunction {
    fn meta(&self) -> &'static RuleMeta {
        &TF006
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.python();
        if !m.imports_tensorflow()
            || !m.imports_module("numpy")
                && !m.source.contains("range(")
                && !m.source.contains(".numpy()")
        {
            return;
        }
        // `tf.config.run_functions_eagerly(True)`: tf.functions run as plain Python.
        // Looked up once, and only when a `.numpy()` call is found in a traced body.
        let mut eager: Option<bool> = None;
        let mut runs_eagerly = || {
            *eager.get_or_insert_with(|| {
                m.calls.iter().any(|&(c, _)| {
                    m.call_name(c)
                        .is_some_and(|q| q.ends_with("run_functions_eagerly"))
                        && argument(c, 0, "run_eagerly", m)
                            .and_then(|a| m.const_value(a))
                            .is_some_and(|v| v.truthy())
                })
            })
        };
        let min = ctx.option_int("min-elements").unwrap_or(1_000_000) as i128;
        let passed_to_eager = std::cell::OnceCell::new();
        let tfn = m.tf_functions();
        let mut seen = HashSet::new();
        for (f, traced) in tfn.traced.iter().enumerate() {
            let Some(traced) = traced else { continue };
            if m.functions[f]
                .parent
                .is_some_and(|p| tfn.traced[p].is_some())
            {
                continue; // reported with its traced parent
            }
            let Some(body) = m.functions[f].node.field("body") else {
                continue;
            };
            let name = &m.functions[f].name;
            // Identifiers that name an attribute (`x.shape`) or a keyword (`f(dtype=...)`):
            // marked when their parent is visited, which the walk does first.
            let mut field_names: HashSet<usize> = HashSet::new();
            for n in descendants(body) {
                match n.kind_name() {
                    "attribute" => field_names.extend(n.field("attribute").map(|a| a.id())),
                    "keyword_argument" => field_names.extend(n.field("name").map(|a| a.id())),
                    _ => {}
                }
                if n.kind_name() == "call" && tensor_numpy(m, n, f) && !runs_eagerly() {
                    ctx.report(
                        ctx.diagnostic(n, format!("`.numpy()` inside `tf.function` `{name}`: while tracing, tensors are symbolic and have no value"))
                            .severity(Severity::Error)
                            .primary_label("fails when traced: symbolic tensors cannot be converted to NumPy")
                            .with_label(Span::of(&traced.site), format!("`{name}` is traced by `tf.function` here"))
                            .note("in graph mode a tensor is a placeholder for a value computed later, so `.numpy()` raises (AttributeError or NotImplementedError)")
                            .help("keep the computation in TensorFlow ops, wrap the NumPy code in `tf.numpy_function`, or call `.numpy()` on the function's result outside it"),
                    );
                    continue;
                }
                let (node, why) = match n.kind_name() {
                    "call" => {
                        let callee = ctx.text(n.field("function").unwrap_or(n));
                        let why = match numpy_data(m, n, min) {
                            Some(w) => format!("`{callee}` {w}"),
                            None => match parameter_sized(m, n, f, traced, min) {
                                Some(w) => format!("`{callee}` {w}"),
                                None => continue,
                            },
                        };
                        if in_eager_callback(m, n, f, &passed_to_eager) {
                            continue;
                        }
                        (n, why)
                    }
                    "identifier" => {
                        if field_names.contains(&n.id()) {
                            continue;
                        }
                        let Some(v) = m.value_of_name(n, m.text(n)).filter(|v| {
                            v.kind_name() == "call" && m.enclosing_function(*v).is_none()
                        }) else {
                            continue;
                        };
                        let Some(w) = numpy_data(m, v, min) else {
                            continue;
                        };
                        if !seen.insert(n.start_byte()) {
                            continue;
                        }
                        (
                            n,
                            format!(
                                "`{}` is captured from module level, where `{}` {w}",
                                m.text(n),
                                ctx.text(v.field("function").unwrap_or(v))
                            ),
                        )
                    }
                    "for_statement" => {
                        let Some(it) = n.field("right").filter(|it| {
                            it.kind_name() == "call"
                                && it.field("function").map(|f| m.text(f)) == Some("range")
                        }) else {
                            continue;
                        };
                        let count = it
                            .field("arguments")
                            .and_then(|a| {
                                a.named_child(a.named_child_count().saturating_sub(1).min(1) as u32)
                            })
                            .and_then(|a| m.const_value(a))
                            .and_then(|v| v.as_int());
                        match count {
                            Some(c) if c >= 1000 => (it, format!("the Python loop over `{}` is unrolled while tracing: {c} copies of its body in the graph", ctx.text(it))),
                            _ => continue,
                        }
                    }
                    _ => continue,
                };
                ctx.report(
                    ctx.diagnostic(node, format!("{why}, inside `tf.function` `{name}`"))
                        .primary_label("evaluated once, while tracing, and stored in the graph")
                        .with_label(Span::of(&traced.site), format!("`{name}` is traced by `tf.function` here"))
                        .note("NumPy and Python calls in a tf.function are converted to constants; large constants grow every traced graph and can reach the 2 GB graph limit")
                        .help("use TensorFlow ops (`tf.zeros`, `tf.random.normal`, `tf.range`), pass the data as a tensor argument, or read it with `tf.data`"),
                );
            }
        }
    }
}

/// `x.numpy()` (no arguments) in the traced function `f`'s own body: not in a nested function
/// or lambda, which may be a `tf.py_function` / `tf.numpy_function` callback that runs eagerly.
fn tensor_numpy(m: &PythonModel<'_>, call: Node<'_>, f: usize) -> bool {
    let Some(func) = call.field("function") else {
        return false;
    };
    if func.kind_name() != "attribute"
        || func.field("attribute").map(|a| m.text(a)) != Some("numpy")
        || call
            .field("arguments")
            .is_some_and(|a| a.named_child_count() > 0)
    {
        return false;
    }
    if m.enclosing_function(call) != Some(f) {
        return false;
    }
    let def = m.functions[f].node;
    for p in m.ancestors(call) {
        if p.id() == def.id() {
            return true;
        }
        if p.kind_name() == "lambda" {
            return false;
        }
    }
    false
}
