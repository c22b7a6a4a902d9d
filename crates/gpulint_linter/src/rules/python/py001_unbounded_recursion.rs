//! PY001: unbounded or data-dependent recursion in training-path code.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{OptionKind, Rule, RuleLang, RuleMeta, RuleOption};
use gpulint_diagnostics::{Diagnostic, Severity, Span};
use gpulint_semantic::python::recursion::{
    counter, descent, has_base_case, jit_reachable, Cycle, Descent,
};
use gpulint_semantic::python::PythonModel;
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;

declare_rule! {
    /// ## What it does
    /// Finds recursive functions (a function calling itself, `self.method()` calling the same
    /// method, or functions calling each other) whose depth nothing keeps small:
    ///
    /// - a recursion with no base case: the recursive call runs on every path, so the function
    ///   recurses until `RecursionError` (an error);
    /// - a recursion whose depth is set by the data: it descends into a part of its argument
    ///   (`node.left`, `node.next`, `for c in node.children:`, `for n in graph[v]:`, `xs[1:]`),
    ///   so a long chain or a deep tree means as many frames;
    /// - a recursion driven by a counter (`build(n - 1)`) that a caller starts with a folded
    ///   constant larger than the recursion limit (option `recursion-limit`, default 1000, or the
    ///   module's own `sys.setrecursionlimit(...)` when higher).
    ///
    /// `super().forward(x)` and `self.child.forward(x)` call other code and are not recursion.
    /// `len(self)`, `str(self)`, `iter(self)` (and `repr`, `hash`, `bool`, `next`, `abs`,
    /// `reversed`) in a method call the class's own dunder method: `return len(self)` in
    /// `__len__` recurses.
    /// Recursion over a framework's module tree (`module.children()`, `model.layers`) and over
    /// the items of nested containers (`d.items()`, a batch of tensors) is bounded by the
    /// model's or the container's nesting and is not reported, nor is a counter bounded by a
    /// small constant. The finding is raised to an error when the function can be reached from
    /// a `tf.function`, `jax.jit` or `torch.compile` function, whose tracing adds frames of its own.
    ///
    /// The rule checks Python files that import a GPU framework (PyTorch, TensorFlow, Keras,
    /// JAX or Flax).
    ///
    /// ## Why is this risky?
    /// Python limits the depth of its interpreter stack: `sys.getrecursionlimit()` is 1000 by
    /// default, and the limit exists to keep "infinite recursion from causing an overflow of
    /// the C stack and crashing Python". A recursion deeper than that raises `RecursionError` and
    /// kills the training run, typically after hours, on the first input that is deep enough (a
    /// long autograd graph, a deep parse tree, a long linked list).
    ///
    /// ## Example
    /// ```python
    /// import torch
    ///
    /// def depth(node):
    ///     if node is None:
    ///         return 0
    ///     return 1 + max(depth(node.left), depth(node.right))
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// import torch
    ///
    /// def depth(root):
    ///     best, stack = 0, [(root, 1)]
    ///     while stack:
    ///         node, d = stack.pop()
    ///         if node is not None:
    ///             best = max(best, d)
    ///             stack.append((node.left, d + 1))
    ///             stack.append((node.right, d + 1))
    ///     return best
    /// ```
    ///
    /// ## References
    /// - Python `sys.getrecursionlimit` / `sys.setrecursionlimit`:
    ///   <https://docs.python.org/3/library/sys.html#sys.getrecursionlimit>
    /// - CPython's default limit, `Py_DEFAULT_RECURSION_LIMIT 1000`:
    ///   <https://github.com/python/cpython/blob/main/Include/internal/pycore_ceval.h>
    /// - TensorFlow, recursive `tf.function`s are not supported:
    ///   <https://www.tensorflow.org/guide/function#recursive_tffunctions_are_not_supported>
    pub static PY001 = {
        code: "PY001",
        name: "unbounded-recursion",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Warning,
        summary: "Recursion without a base case, or with a depth set by the data",
        kinds: &[],
        needles: &["torch", "tensorflow", "keras", "jax", "flax"],
        options: &[RuleOption {
            key: "recursion-limit",
            kind: OptionKind::Int,
            default: "1000",
            doc: "The recursion limit to compare folded recursion depths with (Python's default is 1000).",
        }],
    };
}

pub struct UnboundedRecursion;

impl Rule for UnboundedRecursion {
    fn meta(&self) -> &'static RuleMeta {
        &PY001
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.python();
        if !m.imports_gpu_framework() || m.recursion().cycles.is_empty() {
            return;
        }
        let limit = recursion_limit(m, ctx.option_int("recursion-limit").unwrap_or(1000) as i128);
        let jit = jit_reachable(m);
        for cycle in &m.recursion().cycles {
            let traced = cycle.functions.iter().any(|&f| jit[f]);
            if let Some(d) = check_cycle(ctx, m, cycle, limit) {
                let d = if traced {
                    d.severity(Severity::Error)
                        .note("it can be reached from a `tf.function`, `jax.jit` or `torch.compile` function: tracing runs the recursion in Python and adds frames of its own")
                } else {
                    d
                };
                ctx.report(d);
            }
        }
    }
}

/// The module's own `sys.setrecursionlimit(N)`, when it raises the limit.
fn recursion_limit(m: &PythonModel<'_>, default: i128) -> i128 {
    m.calls
        .iter()
        .filter(|(c, _)| m.call_name(*c).as_deref() == Some("sys.setrecursionlimit"))
        .filter_map(|(c, _)| {
            m.const_value(c.field("arguments")?.named_child(0)?)?
                .as_int()
        })
        .fold(default, i128::max)
}

fn names(m: &PythonModel<'_>, cycle: &Cycle<'_>) -> String {
    let n: Vec<String> = cycle
        .functions
        .iter()
        .map(|&f| format!("`{}`", m.functions[f].name))
        .collect();
    n.join(" and ")
}

fn check_cycle<'t>(
    ctx: &Context<'_>,
    m: &PythonModel<'t>,
    cycle: &Cycle<'t>,
    limit: i128,
) -> Option<Diagnostic> {
    let (first_call, first_fn, _) = *cycle.calls.first()?;
    let def_name = |f: usize| m.functions[f].node.field("name");
    let mutual = cycle.functions.len() > 1;

    // (a) No base case anywhere in the cycle: every call recurses.
    let infinite = cycle.functions.iter().all(|&f| {
        cycle
            .calls
            .iter()
            .any(|(c, caller, _)| *caller == f && !has_base_case(m, f, *c))
    });
    if infinite {
        let name = &m.functions[first_fn].name;
        let what = if mutual {
            format!("{} call each other on every path", names(m, cycle))
        } else {
            format!("`{name}` calls itself on every path")
        };
        let mut d = ctx
            .diagnostic(
                first_call,
                format!("{what}: there is no base case, so the recursion never stops"),
            )
            .severity(Severity::Error)
            .primary_label("recursive call with no condition or `return` before it")
            .note(
                "every call recurses until Python raises RecursionError (or the C stack overflows)",
            );
        if let Some(n) = def_name(first_fn) {
            d = d.with_label(Span::of(&n), "no `if`/`return` in here stops the recursion");
        }
        let method = m.functions[first_fn].class.is_some() && !mutual;
        return Some(d.help(if method {
            format!("to run the parent class's implementation, call `super().{name}(...)`; otherwise return before the recursive call in a base case")
        } else {
            "add a base case that returns before the recursive call".to_string()
        }));
    }

    // (c) A counter: bounded unless a caller starts it above the limit.
    let mut counted = false;
    for &(call, f, callee) in &cycle.calls {
        let Some(k) = counter(m, f, callee, call, cycle) else {
            continue;
        };
        counted = true;
        if k.depth > limit {
            let name = &m.functions[callee].name;
            return Some(
                ctx.diagnostic(
                    k.evidence,
                    format!("`{name}` recurses {} levels deep, more than the recursion limit of {limit}", k.depth),
                )
                .primary_label(format!("depth {} comes from here", k.depth))
                .with_label(Span::of(&call), "one frame per level")
                .note("Python raises RecursionError once the interpreter stack is deeper than the recursion limit")
                .help("build it with a loop instead of recursion; raising `sys.setrecursionlimit` alone risks overflowing the C stack (PY002)"),
            );
        }
    }
    if counted {
        return None;
    }

    // (b) Depth set by the data.
    for &(call, f, _) in &cycle.calls {
        let Some((kind, part)) = descent(m, f, call) else {
            continue;
        };
        let why = match kind {
            Descent::Linked => "one frame per level of a linked structure or graph",
            Descent::Rest => "one frame per element of the sequence",
            Descent::ModuleTree | Descent::Container => continue,
        };
        let name = &m.functions[f].name;
        let subject = if mutual {
            names(m, cycle)
        } else {
            format!("`{name}`")
        };
        return Some(
            ctx.diagnostic(
                call,
                format!(
                    "{subject} recurses into `{}`: the recursion depth is set by the data, and more than {limit} levels raise RecursionError",
                    ctx.text(part)
                ),
            )
            .primary_label(why)
            .with_label(Span::of(&part), "the depth follows this structure")
            .help("walk the structure with an explicit stack or queue (`stack = [root]; while stack: ...`), or bound the depth"),
        );
    }
    None
}
