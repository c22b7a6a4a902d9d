//! JX003: `jax.jit` applied to a fresh function inside a loop, or called with unhashable or
//! per-iteration static arguments.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::python::jit::{static_jits, StaticJit};
use gpulint_semantic::python::tf::argument;
use gpulint_semantic::python::training::{mentions, Loop};
use gpulint_semantic::python::PythonModel;
use gpulint_syntax::Lang;
use gpulint_syntax::{named_children, NodeExt};
use std::collections::HashMap;
use tree_sitter::Node;

declare_rule! {
    /// ## What it does
    /// Finds two ways a jitted JAX function compiles again and again:
    ///
    /// - `jax.jit` (also `jax.pmap`) applied, inside the body of a `for` or `while` loop, to a
    ///   function object that is new in every iteration: a `lambda`, a
    ///   `functools.partial(...)`, or a function defined inside the loop body, also when
    ///   wrapped in `jax.grad`, `jax.value_and_grad`, `jax.vmap` or `jax.checkpoint`. When the
    ///   jit's own options change with the loop (`out_shardings=shardings[name]` per layer
    ///   group), each iteration needs its own compilation anyway and nothing is reported.
    /// - a function jitted with `static_argnums` / `static_argnames` (`jax.jit(f,
    ///   static_argnums=...)` bound to a name, or `@partial(jax.jit, static_argnames=...)`)
    ///   called with a value at a static position that cannot be hashed (a list, dict, set or
    ///   array, literal or bound to a name: an error, the call raises), or, inside a loop, with
    ///   a value that changes every iteration: the counter of a `range` / `enumerate` loop or
    ///   something computed from it, a value the body updates from itself
    ///   (`temperature = temperature * 0.95`), or a new object of a local class that hashes by
    ///   identity. A value merely computed in the body (a shape) may repeat and is not judged.
    ///
    /// Loops over a literal list or tuple, over `range` of a small constant (at most 8), or
    /// over the model's structure (an iterable that names layers, blocks, stages, groups,
    /// sizes, configs, models, devices, shards or experts) are left alone: a few compilations
    /// are expected, e.g. one per model size or layer group. So are static
    /// values with a few possible states: comparisons, `not`, `bool(...)`, `i % 2`, and
    /// conditional expressions between constants.
    ///
    /// Outside loops, `jax.jit(inner)(x)` in a function that defines `inner` itself is a new
    /// function object, so a new compilation, on every call of that function. A jit with
    /// options (`out_shardings=...`), of a lambda, or inside a jitted function is left alone.
    ///
    /// ## Why is this risky?
    /// JAX caches compiled code per function object and per value of the static arguments. A
    /// new lambda or `partial` each iteration misses the cache, so every iteration traces and
    /// compiles again: the JAX docs warn that this "will compile every time", and "if any of
    /// [the static arguments] change, recompilation occurs". Compiled executables pile up in
    /// the cache, consuming host and device memory and time, until the run slows to a crawl
    /// or runs out of memory. Static arguments are hashed into the cache key, so a list or an
    /// array there fails at once with `ValueError: Non-hashable static arguments are not
    /// supported`.
    ///
    /// ## Example
    /// ```python
    /// import jax
    /// import jax.numpy as jnp
    ///
    /// def run(xs, scale):
    ///     out = []
    ///     for x in xs:
    ///         out.append(jax.jit(lambda v: v * scale)(x))
    ///     return out
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// import jax
    /// import jax.numpy as jnp
    ///
    /// def run(xs, scale):
    ///     scaled = jax.jit(lambda v: v * scale)
    ///     out = []
    ///     for x in xs:
    ///         out.append(scaled(x))
    ///     return out
    /// ```
    ///
    /// ## References
    /// - JAX, *Just-in-time compilation* → *JIT and caching*:
    ///   <https://docs.jax.dev/en/latest/jit-compilation.html#jit-and-caching>
    pub static JX003 = {
        code: "JX003",
        name: "jit-in-loop",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Warning,
        summary: "`jax.jit` of a new function object in every loop iteration, or with unstable static arguments",
        kinds: &[],
        needles: &["jax", "flax"],
        also_needles: &["jit", "pmap"],
        options: &[],
    };
}

pub struct JitInLoop;

/// JAX transformations that return a new function wrapping their argument.
const WRAPPERS: &[&str] = &[
    "jax.grad",
    "jax.value_and_grad",
    "jax.vmap",
    "jax.checkpoint",
    "jax.remat",
    "jax.jacfwd",
    "jax.jacrev",
    "jax.hessian",
];

/// Loops with at most this many iterations (a literal `range(n)`) may compile each time.
const FEW_ITERATIONS: i128 = 8;

/// Words in a loop's iterable that say it walks the model's structure (a few iterations).
const STRUCTURE_WORDS: &[&str] = &[
    "layer", "block", "stage", "group", "size", "config", "model", "device", "shard", "expert",
];

impl Rule for JitInLoop {
    fn meta(&self) -> &'static RuleMeta {
        &JX003
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.python();
        if !m.imports_jax() {
            return;
        }
        let t = m.training();
        for &(call, _) in &m.calls {
            let is_jit = call
                .field("function")
                .and_then(|f| m.qualified_name(f))
                .is_some_and(|q| matches!(q.as_str(), "jax.jit" | "jax.pmap"));
            if !is_jit {
                continue;
            }
            let Some(lp) = t.loop_of(m, call) else {
                self.check_per_call(ctx, call);
                continue;
            };
            if few_iterations(m, lp.node) {
                continue;
            }
            let Some(fun) = argument(call, 0, "fun", m) else {
                continue;
            };
            let Some(what) = fresh_function(m, fun, lp.node) else {
                continue;
            };
            // `jax.jit(f, out_shardings=shardings[name])` per layer group: the options change
            // with the loop, so every iteration needs its own compilation anyway.
            let varying = loop_varying(m, lp);
            let options_vary = named_children(call.field("arguments").unwrap_or(call))
                .filter(|a| a.kind_name() == "keyword_argument")
                .any(|a| varying.iter().any(|v| mentions(m, a, v)));
            if options_vary {
                continue;
            }
            ctx.report(
                ctx.diagnostic(call, format!("`jax.jit` of {what} inside a loop compiles again in every iteration"))
                    .primary_label("a new function object each iteration misses JAX's compilation cache")
                    .with_label(Span::of(&lp.header()), "the loop")
                    .note("every iteration traces and compiles again; the compiled executables accumulate in host and device memory")
                    .help("jit once, before the loop, and pass changing values as arguments (mark true constants with `static_argnums`)"),
            );
        }
        self.check_static_arguments(ctx);
    }
}

impl JitInLoop {
    /// `jax.jit(inner)(x)` in a function `outer`, with `inner` a function defined in `outer`:
    /// a new function object, so a new compilation, on every call of `outer`.
    fn check_per_call(&self, ctx: &mut Context<'_>, call: Node<'_>) {
        let m = ctx.python();
        let invoked = m.parent(call).is_some_and(|p| {
            p.kind_name() == "call" && p.field("function").is_some_and(|f| f.id() == call.id())
        });
        if !invoked {
            return;
        }
        let Some(outer) = m.enclosing_function(call) else {
            return;
        };
        // Inside a traced function the inner jit is traced once with it.
        let mut scope = Some(outer);
        while let Some(f) = scope {
            if m.functions[f]
                .decorators
                .iter()
                .any(|d| m.text(*d).contains("jit"))
            {
                return;
            }
            scope = m.functions[f].parent;
        }
        let Some(fun) = argument(call, 0, "fun", m) else {
            return;
        };
        // A one-off with compile options (`out_shardings=...` in setup code) is left alone; so
        // is a lambda, the usual spelling of such one-offs.
        let options = call
            .field("arguments")
            .is_some_and(|a| named_children(a).any(|x| x.kind_name() == "keyword_argument"));
        if options || fun.kind_name() != "identifier" {
            return;
        }
        let name = m.text(fun);
        let nested = m.functions_named(name).iter().any(|&f| {
            m.functions[f].parent == Some(outer)
                && m.functions[f].node.start_byte() < call.start_byte()
        });
        if !nested {
            return;
        }
        let what = "a function defined in the calling function";
        let outer_name = &m.functions[outer].name;
        let name_node = m.functions[outer].node.field("name").unwrap_or(call);
        ctx.report(
            ctx.diagnostic(call, format!("`jax.jit` of {what} compiles again on every call of `{outer_name}`"))
                .primary_label("a new function object per call misses JAX's compilation cache")
                .with_label(Span::of(&name_node), format!("each call of `{outer_name}` defines it anew"))
                .note("every call traces and compiles again; the compiled executables accumulate in host and device memory")
                .help("define the function at module level and jit it once (pass closed-over values as arguments, marking true constants with `static_argnames`)"),
        );
    }

    /// Calls of a jitted function with values at static positions that cannot be hashed, or
    /// that change in every iteration of the loop around the call.
    fn check_static_arguments(&self, ctx: &mut Context<'_>) {
        let m = ctx.python();
        let t = m.training();
        let jits = static_jits(m);
        if jits.is_empty() {
            return;
        }
        // The jitted bindings of each name in each scope, in file order. A call sees one of
        // them: the innermost scope's binding, the last one before the call (a name bound
        // again, as in a file that repeats a definition, is not every binding at once).
        let mut bound: HashMap<(&str, Option<usize>), Vec<&StaticJit<'_>>> = HashMap::new();
        for sj in &jits {
            bound
                .entry((sj.name.as_str(), sj.scope))
                .or_default()
                .push(sj);
        }
        for list in bound.values_mut() {
            list.sort_by_key(|sj| sj.site.start_byte());
        }
        for &(call, scope) in &m.calls {
            let Some(f) = call.field("function") else {
                continue;
            };
            if f.kind_name() != "identifier" {
                continue;
            }
            let Some(sj) = reaching(m, &bound, m.text(f), scope, call) else {
                continue;
            };
            for arg in sj.static_args(m, call) {
                if let Some(what) = unhashable(m, arg, call) {
                    ctx.report(
                        ctx.diagnostic(arg, format!("{what} passed as a static argument of jitted `{}`", sj.name))
                            .severity(Severity::Error)
                            .primary_label("raises ValueError: Non-hashable static arguments are not supported")
                            .with_label(Span::of(&sj.site), "static arguments declared here")
                            .note("JAX hashes static arguments into the compilation-cache key; lists, dicts, sets and arrays have no hash")
                            .help("pass a tuple (or another hashable value), or make the argument non-static and pass it as an array"),
                    );
                    continue;
                }
                let Some(lp) = t.loop_of(m, call) else {
                    continue;
                };
                if few_iterations(m, lp.node) {
                    continue;
                }
                let Some(why) = changes_per_iteration(m, arg, lp) else {
                    continue;
                };
                ctx.report(
                    ctx.diagnostic(arg, format!("static argument of jitted `{}` {why}, so it compiles again in every iteration", sj.name))
                        .primary_label("a new static value is a new compilation-cache key")
                        .with_label(Span::of(&lp.header()), "the loop")
                        .with_label(Span::of(&sj.site), "static arguments declared here")
                        .note("\"If any of [the static arguments] change, recompilation occurs\"; the compiled executables accumulate in host and device memory")
                        .help("pass the changing value as a traced (non-static) argument, or keep static arguments to a few distinct values"),
                );
            }
        }
    }
}

/// The jitted binding of `name` that a call in scope `at` sees: the one of the innermost
/// enclosing scope (the call's own function, an enclosing one, or module level) that binds
/// it, and there the last binding before the call (the first one when all come after: a
/// function that runs after the module finished binding it).
fn reaching<'a, 't>(
    m: &PythonModel<'_>,
    bound: &HashMap<(&str, Option<usize>), Vec<&'a StaticJit<'t>>>,
    name: &str,
    at: Option<usize>,
    call: Node<'_>,
) -> Option<&'a StaticJit<'t>> {
    let mut cur = at;
    for _ in 0..32 {
        if let Some(list) = bound.get(&(name, cur)) {
            let i = list.partition_point(|sj| sj.site.start_byte() < call.start_byte());
            return Some(list[i.saturating_sub(1)]);
        }
        cur = m.functions[cur?].parent;
    }
    None
}

/// What makes a value unhashable: a list, dict or set (literal or comprehension), or an
/// array; a name bound to one.
fn unhashable(m: &PythonModel<'_>, arg: Node<'_>, at: Node<'_>) -> Option<&'static str> {
    let direct = |n: Node<'_>| -> Option<&'static str> {
        match n.kind_name() {
            "list" | "list_comprehension" => Some("a list"),
            "dictionary" | "dictionary_comprehension" => Some("a dict"),
            "set" | "set_comprehension" => Some("a set"),
            "call" => {
                let q = n.field("function").and_then(|f| m.qualified_name(f))?;
                let (module, func) = q.rsplit_once('.')?;
                let array_module = matches!(module, "numpy" | "jax.numpy");
                let creates = matches!(
                    func,
                    "array"
                        | "asarray"
                        | "zeros"
                        | "ones"
                        | "full"
                        | "arange"
                        | "empty"
                        | "linspace"
                );
                (array_module && creates).then_some("an array")
            }
            _ => None,
        }
    };
    if arg.kind_name() == "identifier" {
        return direct(m.value_of_name(at, m.text(arg))?);
    }
    direct(arg)
}

/// Names whose value changes from one iteration of `lp` to the next: the loop's targets and
/// the names the body assigns from something that is not a constant.
fn loop_varying<'t>(m: &PythonModel<'t>, lp: &Loop<'t>) -> Vec<&'t str> {
    let mut out: Vec<&'t str> = Vec::new();
    if let Some(left) = lp.node.field("left") {
        out.extend(
            gpulint_syntax::descendants(left)
                .filter(|n| n.kind_name() == "identifier")
                .map(|n| m.text(n)),
        );
    }
    for (_, left, right) in body_assignments(m, lp) {
        if left.kind_name() == "identifier" && m.const_value(right).is_none() {
            out.push(m.text(left));
        }
    }
    out
}

/// The assignments inside the body of `lp`, in document order, with their `left` and `right`.
fn body_assignments<'a, 't>(
    m: &'a PythonModel<'t>,
    lp: &Loop<'t>,
) -> impl Iterator<Item = (Node<'t>, Node<'t>, Node<'t>)> + 'a {
    let within = lp.node.field("body").map_or(&[][..], |body| {
        let lo = m
            .assignments
            .partition_point(|a| a.start_byte() < body.start_byte());
        let hi = m
            .assignments
            .partition_point(|a| a.start_byte() < body.end_byte());
        &m.assignments[lo..hi.max(lo)]
    });
    within
        .iter()
        .filter_map(|&a| Some((a, a.field("left")?, a.field("right")?)))
}

/// Does `expr` read the variable `name` (not an attribute or keyword of that name)?
fn reads(m: &PythonModel<'_>, expr: Node<'_>, name: &str) -> bool {
    gpulint_syntax::descendants(expr).any(|n| {
        n.kind_name() == "identifier"
            && m.text(n) == name
            && m.parent(n).is_none_or(|p| {
                let field_of = |f: &str| p.field(f).is_some_and(|c| c.id() == n.id());
                !(p.kind_name() == "attribute" && field_of("attribute")
                    || p.kind_name() == "keyword_argument" && field_of("name"))
            })
    })
}

/// Names that take a new value in every iteration of `lp`: the counter of a `for` over
/// `range(...)` or `enumerate(...)`, and names the body updates from themselves (`t += 1`,
/// `temperature = temperature * 0.95`). A value merely computed in the body (a shape) may
/// repeat across iterations and is not one.
fn stepped_names<'t>(m: &PythonModel<'t>, lp: &Loop<'t>) -> Vec<&'t str> {
    let mut out: Vec<&'t str> = Vec::new();
    if let (Some(left), Some(right)) = (lp.node.field("left"), lp.node.field("right")) {
        let counter = right.kind_name() == "call"
            && right
                .field("function")
                .is_some_and(|f| matches!(m.text(f), "range" | "enumerate"));
        if counter {
            let first = if m.text(right).starts_with("enumerate") {
                named_children(left).next()
            } else {
                Some(left)
            };
            out.extend(
                first
                    .filter(|n| n.kind_name() == "identifier")
                    .map(|n| m.text(n)),
            );
        }
    }
    for (a, left, right) in body_assignments(m, lp) {
        if left.kind_name() != "identifier" {
            continue;
        }
        let name = m.text(left);
        if a.kind_name() == "augmented_assignment" || reads(m, right, name) {
            out.push(name);
        }
    }
    out
}

/// Why `arg` takes a new value in every iteration of `lp`, if it does: it is (or is computed
/// from) the loop variable or a value the body updates, or a new object of a local class that
/// hashes by identity. Values with few distinct states (comparisons, `not`, `i % 2`) are not.
fn changes_per_iteration<'t>(m: &PythonModel<'t>, arg: Node<'_>, lp: &Loop<'t>) -> Option<String> {
    if few_values(m, arg) {
        return None;
    }
    if arg.kind_name() == "call" {
        let f = arg.field("function")?;
        if f.kind_name() == "identifier" {
            let c = m.local_class(arg, m.text(f))?;
            let class = m.classes[c].node;
            let decorated = m
                .parent(class)
                .is_some_and(|p| p.kind_name() == "decorated_definition");
            let hashes_by_value = ["__hash__", "__eq__"]
                .iter()
                .any(|h| m.method_of(c, h).is_some());
            if !decorated && !hashes_by_value {
                return Some(format!(
                    "is a new `{}` object (hashed by identity)",
                    m.text(f)
                ));
            }
        }
        return None;
    }
    let varying = stepped_names(m, lp);
    let name = varying.iter().find(|v| reads(m, arg, v))?;
    // `is_last = step == n - 1` in the body, passed by name: still few values.
    if arg.kind_name() == "identifier" {
        if let Some(v) = m.last_assigned_before(name, arg) {
            let inside =
                lp.node.start_byte() <= v.start_byte() && v.end_byte() <= lp.node.end_byte();
            if inside && few_values(m, v) {
                return None;
            }
        }
    }
    Some(format!(
        "depends on `{name}`, which changes every iteration"
    ))
}

/// An expression with only a few possible values.
fn few_values(m: &PythonModel<'_>, e: Node<'_>) -> bool {
    match e.kind_name() {
        "comparison_operator"
        | "boolean_operator"
        | "not_operator"
        | "true"
        | "false"
        | "none"
        | "string"
        | "integer"
        | "float" => true,
        "conditional_expression" => named_children(e)
            .step_by(2)
            .all(|b| m.const_value(b).is_some()),
        "binary_operator" => {
            e.field("operator").is_some_and(|o| m.text(o) == "%")
                && e.field("right")
                    .and_then(|r| m.const_value(r))
                    .and_then(|v| v.as_int())
                    .is_some_and(|k| k <= FEW_ITERATIONS)
        }
        "call" => e.field("function").is_some_and(|f| m.text(f) == "bool"),
        _ => false,
    }
}

/// Is `fun` a function object created anew in each iteration of `lp`?
fn fresh_function(m: &PythonModel<'_>, fun: Node<'_>, lp: Node<'_>) -> Option<&'static str> {
    fresh_depth(m, fun, lp, 0)
}

fn fresh_depth(
    m: &PythonModel<'_>,
    fun: Node<'_>,
    lp: Node<'_>,
    depth: usize,
) -> Option<&'static str> {
    if depth > 4 {
        return None;
    }
    match fun.kind_name() {
        "lambda" => Some("a lambda"),
        "call" => {
            let q = fun.field("function").and_then(|f| m.qualified_name(f))?;
            if q == "functools.partial" {
                return Some("a `functools.partial`");
            }
            // `jax.grad(f)`, `jax.vmap(f)`, ...: as fresh as the function they wrap.
            if WRAPPERS.contains(&q.as_str()) {
                return fresh_depth(m, argument(fun, 0, "fun", m)?, lp, depth + 1);
            }
            None
        }
        "identifier" => {
            let name = m.text(fun);
            let body = lp.field("body")?;
            m.functions_named(name)
                .iter()
                .any(|&f| {
                    let n = m.functions[f].node;
                    body.start_byte() <= n.start_byte() && n.end_byte() <= body.end_byte()
                })
                .then_some("a function defined in the loop body")
        }
        _ => None,
    }
}

/// A loop over a literal list/tuple or over `range(n)` with a small constant `n`.
fn few_iterations(m: &PythonModel<'_>, lp: Node<'_>) -> bool {
    let Some(iter) = lp.field("right") else {
        return false;
    };
    // `for name, n in layer_groups`, `range(num_layers)`, `for size in model_sizes`: bounded by
    // the model's structure, not by data or training steps.
    let text = m.text(iter).to_ascii_lowercase();
    if STRUCTURE_WORDS.iter().any(|w| text.contains(w)) {
        return true;
    }
    match iter.kind_name() {
        "list" | "tuple" => true,
        "call" => {
            let is_range = iter.field("function").is_some_and(|f| m.text(f) == "range");
            is_range
                && iter
                    .field("arguments")
                    .and_then(|a| gpulint_syntax::named_children(a).last())
                    .and_then(|n| m.const_value(n))
                    .and_then(|v| v.as_int())
                    .is_some_and(|n| n <= FEW_ITERATIONS)
        }
        _ => false,
    }
}
