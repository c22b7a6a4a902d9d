//! JX003: `jax.jit` applied to a fresh function inside a loop.

use crate::checker::Context;
use crate::declare_rule;
use crate::diagnostic::{Severity, Span};
use crate::lang::Lang;
use crate::rule::{Rule, RuleLang, RuleMeta};
use crate::semantic::python::tf::argument;
use crate::semantic::python::PythonModel;
use crate::semantic::NodeExt;
use tree_sitter::Node;

declare_rule! {
    /// ## What it does
    /// Finds `jax.jit` (also `jax.pmap`) applied, inside the body of a `for` or `while` loop,
    /// to a function object that is new in every iteration: a `lambda`, a
    /// `functools.partial(...)`, or a function defined inside the loop body, also when wrapped
    /// in `jax.grad`, `jax.value_and_grad`, `jax.vmap` or `jax.checkpoint`. Loops over a
    /// literal list or tuple, or over `range` of a small constant (at most 8), are left alone:
    /// a few compilations are expected, e.g. one per model size.
    ///
    /// ## Why is this risky?
    /// JAX caches compiled code per function object. A new lambda or `partial` each iteration
    /// misses the cache, so every iteration traces and compiles again: the JAX docs warn that
    /// this "will compile every time". Compiled executables pile up in the cache, consuming
    /// host and device memory and time, until the run slows to a crawl or runs out of memory.
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
        summary: "`jax.jit` applied to a new function object in every loop iteration",
        kinds: &[],
        needles: &["jit", "pmap"],
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
            ctx.report(
                ctx.diagnostic(call, format!("`jax.jit` of {what} inside a loop compiles again in every iteration"))
                    .primary_label("a new function object each iteration misses JAX's compilation cache")
                    .with_label(Span::of(&lp.header()), "the loop")
                    .note("every iteration traces and compiles again; the compiled executables accumulate in host and device memory")
                    .help("jit once, before the loop, and pass changing values as arguments (mark true constants with `static_argnums`)"),
            );
        }
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
    match fun.kind() {
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
    match iter.kind() {
        "list" | "tuple" => true,
        "call" => {
            let is_range = iter.field("function").is_some_and(|f| m.text(f) == "range");
            is_range
                && iter
                    .field("arguments")
                    .and_then(|a| crate::semantic::named_children(a).last())
                    .and_then(|n| m.const_value(n))
                    .and_then(|v| v.as_int())
                    .is_some_and(|n| n <= FEW_ITERATIONS)
        }
        _ => false,
    }
}
