//! TF006: large NumPy or Python data materialized inside `tf.function`.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{OptionKind, Rule, RuleLang, RuleMeta, RuleOption};
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::python::tf::argument;
use gpulint_semantic::python::PythonModel;
use gpulint_syntax::descendants;
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;
use std::collections::HashSet;
use tree_sitter::Node;

declare_rule! {
    /// ## What it does
    /// Inside a `tf.function` (decorated with `@tf.function` or wrapped by `tf.function(f)`,
    /// nested functions included), finds NumPy data that tracing turns into graph constants:
    /// - `np.load(...)`, and `np.random.*` draws (frozen at trace time);
    /// - `np.zeros`/`ones`/`full`/`empty`/`arange`/`eye`/`array` whose literal size reaches
    ///   the threshold (10⁶ elements by default);
    /// - module-level names bound to such arrays (captured by the closure);
    /// - Python `for` loops over `range(N)` with a literal `N` of 1,000 or more, which tracing
    ///   unrolls.
    ///
    /// Also finds `x.numpy()` in the traced function's own body (an error: symbolic tensors
    /// have no value while tracing), unless the file turns on
    /// `tf.config.run_functions_eagerly(True)`.
    ///
    /// Small constant tables and `range()` over a few layers are fine and stay silent.
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
        needles: &["function"],
        options: &[RuleOption {
            key: "min-elements",
            kind: OptionKind::Int,
            default: "1000000",
            doc: "Literal array sizes (in elements) from which a NumPy allocation counts as large.",
        }],
    };
}

pub struct NumpyInTfFunction;

const ALLOCS: &[&str] = &[
    "zeros", "ones", "full", "empty", "arange", "eye", "array", "asarray",
];

/// Elements of a literal shape: `1000`, `(1000, 1000)`.
fn elements(m: &PythonModel<'_>, shape: Node<'_>) -> Option<i128> {
    let v = m.const_value(shape)?;
    match v {
        gpulint_semantic::python::Value::Tuple(items) => items
            .iter()
            .try_fold(1i128, |acc, i| i.as_int().map(|n| acc.saturating_mul(n))),
        other => other.as_int(),
    }
}

/// Why a call materializes NumPy data as a constant, if it does.
fn numpy_data(m: &PythonModel<'_>, call: Node<'_>, min: i128) -> Option<String> {
    let q = m.call_name(call)?;
    let rest = q.strip_prefix("numpy.")?;
    if rest == "load" || rest == "loadtxt" || rest == "fromfile" {
        return Some("loads a file into a NumPy array, embedded in the graph as a constant".into());
    }
    if let Some(f) = rest.strip_prefix("random.") {
        if matches!(
            f,
            "seed" | "RandomState" | "default_rng" | "get_state" | "set_state"
        ) {
            return None;
        }
        return Some("draws random numbers once, while tracing: every call reuses the same values, stored as a graph constant".into());
    }
    if !ALLOCS.contains(&rest) {
        return None;
    }
    let n = match rest {
        "eye" => elements(m, argument(call, 0, "N", m)?).map(|n| n.saturating_mul(n))?,
        "arange" => elements(m, argument(call, 0, "start", m)?)?,
        "array" | "asarray" => {
            // `np.array([[0] * 1000] * 1000)`-style literals are rare; only sizes we can fold.
            return None;
        }
        _ => elements(m, argument(call, 0, "shape", m)?)?,
    };
    (n >= min).then(|| format!("creates a {n}-element array, embedded in the graph as a constant"))
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
            for n in descendants(body) {
                if n.kind() == "call" && tensor_numpy(m, n, f) && !runs_eagerly() {
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
                let (node, why) = match n.kind() {
                    "call" => match numpy_data(m, n, min) {
                        Some(w) => (
                            n,
                            format!("`{}` {w}", ctx.text(n.field("function").unwrap_or(n))),
                        ),
                        None => continue,
                    },
                    "identifier" => {
                        let field_name = n.parent().is_some_and(|p| {
                            (p.kind() == "attribute"
                                && p.field("attribute").map(|a| a.id()) == Some(n.id()))
                                || (p.kind() == "keyword_argument"
                                    && p.field("name").map(|a| a.id()) == Some(n.id()))
                        });
                        if field_name {
                            continue;
                        }
                        let Some(v) = m
                            .value_of_name(n, m.text(n))
                            .filter(|v| v.kind() == "call" && m.enclosing_function(*v).is_none())
                        else {
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
                            it.kind() == "call"
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
    if func.kind() != "attribute"
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
    let mut cur = call.parent();
    while let Some(p) = cur {
        if p.id() == def.id() {
            return true;
        }
        if p.kind() == "lambda" {
            return false;
        }
        cur = p.parent();
    }
    false
}
