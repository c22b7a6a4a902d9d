//! TF006's sizes: how many elements and bytes a NumPy allocation inside a traced function
//! materializes, from literal shapes or from the values its parameters receive.

use super::*;

pub(super) const ALLOCS: &[&str] = &[
    "zeros", "ones", "full", "empty", "arange", "eye", "array", "asarray",
];

/// Elements of a literal shape: `1000`, `(1000, 1000)`.
pub(super) fn elements(m: &PythonModel<'_>, shape: Node<'_>) -> Option<i128> {
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
pub(super) fn fixed_on_purpose(m: &PythonModel<'_>, call: Node<'_>) -> bool {
    // The ancestors found going down from the root: `Node::parent` costs the node's depth
    // in tree-sitter's own recursion, which a deep enough expression overflows.
    let up = m.ancestors(call);
    let Some(&wrapper) = up
        .first()
        .filter(|p| p.kind_name() == "argument_list")
        .and(up.get(1))
        .filter(|c| c.kind_name() == "call")
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
pub(super) fn numpy_data(m: &PythonModel<'_>, call: Node<'_>, min: i128) -> Option<String> {
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
pub(super) fn parameter_sized(
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

pub(super) fn first_line(s: &str) -> String {
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
pub(super) fn shape_parameters<'t>(
    m: &PythonModel<'_>,
    e: Node<'t>,
    f: usize,
    out: &mut Vec<(usize, Node<'t>)>,
    depth: usize,
) -> Option<()> {
    if depth > 16 {
        return None;
    }
    match e.kind_name() {
        "integer" => Some(()),
        "parenthesized_expression" | "tuple" | "list" => {
            for c in gpulint_syntax::named_children(e) {
                if c.kind_name() != "comment" {
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
pub(super) fn shape_elements(v: &Value) -> Option<i128> {
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
pub(super) fn dtype_bytes(m: &PythonModel<'_>, d: Node<'_>) -> Option<i128> {
    let q = match d.kind_name() {
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
pub(super) fn human_bytes(b: i128) -> String {
    let b = b as f64;
    if b >= 1e9 {
        format!("{:.1} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.1} MB", b / 1e6)
    } else {
        format!("{:.1} KB", b / 1e3)
    }
}
