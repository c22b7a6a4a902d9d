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

/// Is the draw passed straight to `tf.constant(...)` or `tf.Variable(...)`, which ask for one
/// fixed value (a constant, or a variable's initial value)? Its size is TF007's business.
fn fixed_on_purpose(m: &PythonModel<'_>, call: Node<'_>) -> bool {
    // The ancestors found going down from the root: `Node::parent` costs the node's depth
    // in tree-sitter's own recursion, which a deep enough expression overflows.
    let up = m.ancestors(call);
    let Some(&wrapper) = up
        .first()
        .filter(|p| p.kind() == "argument_list")
        .and(up.get(1))
        .filter(|c| c.kind() == "call")
    else {
        return false;
    };
    let is_value = argument(wrapper, 0, "value", m).is_some_and(|v| v.id() == call.id())
        || argument(wrapper, 0, "initial_value", m).is_some_and(|v| v.id() == call.id());
    is_value
        && m.call_name(wrapper).is_some_and(|q| {
            matches!(
                gpulint_semantic::python::tf::normalize(&q).as_str(),
                "tensorflow.constant" | "tensorflow.Variable"
            )
        })
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
        ) || fixed_on_purpose(m, call)
        {
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

/// `np.zeros`/`ones`/`empty`/`full` whose shape is computed from parameters of the traced
/// function `f` (or of a function nested in it): with the size its visible call sites give
/// when they all pass constants (silent when every one is below `min` elements), else a
/// warning that each new value retraces and bakes a new constant.
fn parameter_sized(
    m: &PythonModel<'_>,
    call: Node<'_>,
    f: usize,
    traced: &Traced<'_>,
    min: i128,
) -> Option<String> {
    let q = m.call_name(call)?;
    let kind = q.strip_prefix("numpy.")?;
    if !matches!(kind, "zeros" | "ones" | "empty" | "full") {
        return None;
    }
    let shape = argument(call, 0, "shape", m)?;
    let mut params = Vec::new();
    shape_parameters(m, shape, f, &mut params, 0)?;
    let (g, _) = *params.first()?;
    if g == f && traced.stable_signature {
        // With an `input_signature` the parameter is a symbolic tensor, not a Python value.
        return None;
    }
    let mut names: Vec<&str> = params.iter().map(|(_, p)| m.text(*p)).collect();
    names.dedup();
    let names_text = names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let owner = &m.functions[g].name;
    let what = if names.len() == 1 {
        "parameter"
    } else {
        "parameters"
    };
    let sized = format!("sizes its array by {what} {names_text} of `{owner}`");
    // One function's parameters: evaluate the shape per call site and keep the largest.
    let one_function = params.iter().all(|(h, _)| *h == g);
    let values = parameter_values(m, g);
    let mut largest: Option<(i128, Option<Node<'_>>)> = None;
    let mut known = !values.sites.is_empty();
    if one_function {
        for site in &values.sites {
            let env = |id: Node<'_>| -> Option<Value> {
                let (_, p) = params.iter().find(|(_, p)| p.id() == id.id())?;
                let i = values.index(m.text(*p))?;
                let vs = site.values.get(i)?.as_ref()?;
                let best = vs.iter().filter_map(Value::as_int).max()?;
                Some(Value::Int(best))
            };
            match m
                .const_value_with(shape, &env)
                .and_then(|v| shape_elements(&v))
            {
                Some(n) if largest.is_none_or(|(b, _)| n > b) => {
                    largest = Some((n, Some(site.call)))
                }
                Some(_) => {}
                None => known = false,
            }
        }
    } else {
        let env = |id: Node<'_>| -> Option<Value> {
            let (h, p) = params.iter().find(|(_, p)| p.id() == id.id())?;
            parameter_values(m, *h)
                .largest_int(m.text(*p))
                .map(Value::Int)
        };
        match m
            .const_value_with(shape, &env)
            .and_then(|v| shape_elements(&v))
        {
            Some(n) => largest = Some((n, None)),
            None => known = false,
        }
    }
    if known {
        let (n, site) = largest?;
        if n < min {
            return None;
        }
        let dtype_arg = match kind {
            "full" => argument(call, 2, "dtype", m),
            _ => argument(call, 1, "dtype", m),
        };
        let size = match dtype_arg {
            None => format!(
                "a {} constant ({n} float64 elements)",
                human_bytes(n.saturating_mul(8))
            ),
            Some(d) => match dtype_bytes(m, d) {
                Some(b) => format!(
                    "a {} constant ({n} elements)",
                    human_bytes(n.saturating_mul(b))
                ),
                None => format!("a {n}-element constant"),
            },
        };
        let by = match site {
            Some(c) => format!("`{}` makes this", first_line(m.text(c))),
            None => "the call sites make this".to_string(),
        };
        return Some(format!("{sized}: {by} {size}, embedded in the graph"));
    }
    Some(format!(
        "{sized}, which the call sites in this file do not give as a constant: each new value retraces `{owner}` and bakes a new constant of that size into the graph"
    ))
}

fn first_line(s: &str) -> String {
    let line = s.lines().next().unwrap_or(s);
    if line.len() < s.len() {
        format!("{line} ...")
    } else {
        line.to_string()
    }
}

/// Collects the parameter identifiers a shape is computed from. `None` when a part of the shape
/// is neither an integer constant, nor a parameter (of `f` or of a function nested in it, not
/// rebound), nor arithmetic, a tuple or a list of those: `x.shape`, `len(x)`, a local.
fn shape_parameters<'t>(
    m: &PythonModel<'_>,
    e: Node<'t>,
    f: usize,
    out: &mut Vec<(usize, Node<'t>)>,
    depth: usize,
) -> Option<()> {
    if depth > 16 {
        return None;
    }
    match e.kind() {
        "integer" => Some(()),
        "parenthesized_expression" | "tuple" | "list" => {
            for c in gpulint_syntax::named_children(e) {
                if c.kind() != "comment" {
                    shape_parameters(m, c, f, out, depth + 1)?;
                }
            }
            Some(())
        }
        "binary_operator" => {
            shape_parameters(m, e.field("left")?, f, out, depth + 1)?;
            shape_parameters(m, e.field("right")?, f, out, depth + 1)
        }
        "unary_operator" => shape_parameters(m, e.field("argument")?, f, out, depth + 1),
        "identifier" => {
            if m.const_value(e).is_some() {
                return Some(());
            }
            let name = m.text(e);
            let mut g = m.enclosing_function(e)?;
            loop {
                if m.function_binds(g, name) {
                    let is_param = parameters(m, g).iter().any(|p| p.name == name);
                    // A parameter reassigned in the body (`n = tf.shape(x)[0]`) is not the
                    // caller's value.
                    if !is_param || m.value_of_name(e, name).is_some() {
                        return None;
                    }
                    out.push((g, e));
                    return Some(());
                }
                if g == f {
                    return None;
                }
                g = m.functions[g].parent?;
            }
        }
        _ => None,
    }
}

/// Elements of a folded shape (`1000` or `(n, n, n)`), when every dimension is a non-negative
/// integer.
fn shape_elements(v: &Value) -> Option<i128> {
    match v {
        Value::Tuple(items) => items.iter().try_fold(1i128, |acc, i| {
            i.as_int()
                .filter(|n| *n >= 0)
                .map(|n| acc.saturating_mul(n))
        }),
        other => other.as_int().filter(|n| *n >= 0),
    }
}

/// Bytes per element of a NumPy dtype argument (`np.float32`, `"float16"`, `float`).
fn dtype_bytes(m: &PythonModel<'_>, d: Node<'_>) -> Option<i128> {
    let q = match d.kind() {
        "string" => gpulint_semantic::python::string_literal(d, m.source)?,
        _ => m.qualified_name(d).unwrap_or_else(|| m.text(d).to_string()),
    };
    let last = q.rsplit('.').next().unwrap_or(&q);
    Some(match last {
        "bool" | "bool_" | "int8" | "uint8" | "i1" | "u1" => 1,
        "float16" | "half" | "int16" | "uint16" | "f2" | "i2" | "u2" => 2,
        "float32" | "single" | "int32" | "uint32" | "f4" | "i4" | "u4" => 4,
        "float" | "float64" | "double" | "float_" | "int" | "int64" | "uint64" | "int_"
        | "complex64" | "f8" | "i8" | "u8" => 8,
        "complex" | "complex128" => 16,
        _ => return None,
    })
}

/// `8_000_000_000` → `8.0 GB` (decimal units).
fn human_bytes(b: i128) -> String {
    let b = b as f64;
    if b >= 1e9 {
        format!("{:.1} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.1} MB", b / 1e6)
    } else {
        format!("{:.1} KB", b / 1e3)
    }
}

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
                    let x = if x.kind() == "keyword_argument" {
                        x.field("value")
                    } else {
                        Some(x)
                    };
                    if let Some(x) = x.filter(|x| x.kind() == "identifier") {
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
        in_lambda |= p.kind() == "lambda";
        if in_lambda && p.kind() == "call" && is_eager_wrapper(p) {
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
                match n.kind() {
                    "attribute" => field_names.extend(n.field("attribute").map(|a| a.id())),
                    "keyword_argument" => field_names.extend(n.field("name").map(|a| a.id())),
                    _ => {}
                }
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
    for p in m.ancestors(call) {
        if p.id() == def.id() {
            return true;
        }
        if p.kind() == "lambda" {
            return false;
        }
    }
    false
}
