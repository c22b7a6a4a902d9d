//! PY002: raising `sys.setrecursionlimit` high without enlarging the thread stack.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{OptionKind, Rule, RuleLang, RuleMeta, RuleOption};
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::python::tf::argument;
use gpulint_semantic::python::PythonModel;
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

declare_rule! {
    /// ## What it does
    /// Finds `sys.setrecursionlimit(n)` with `n` at or above a threshold (10,000 by default;
    /// folded through constants, so `10**6` and `sys.maxsize` count) in a module that imports a
    /// GPU framework, when the module never calls `threading.stack_size(...)` to give the deep
    /// recursion a bigger stack in a new thread. It also finds `threading.stack_size(...)`
    /// called after the worker thread it is meant for was started: the size only applies to
    /// threads created later.
    ///
    /// ## Why is this risky?
    /// The recursion limit exists to stop deep recursion before it overflows the C stack, and
    /// the documentation warns that "a too-high limit can lead to a crash". Python frames use C
    /// stack (every nested call before 3.12, C-implemented paths still after). Linux gives the
    /// main thread 8 MB, release `python.exe` on Windows only about 2 MB: with the limit
    /// raised, deep data overflows the native stack and the process dies with a segmentation
    /// fault or `0xC00000FD` (stack overflow) instead of a `RecursionError`, losing the
    /// training run without a traceback.
    ///
    /// ## Example
    /// ```python
    /// import sys
    /// import torch
    ///
    /// sys.setrecursionlimit(100000)
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// import sys
    /// import threading
    /// import torch
    ///
    /// def main():
    ///     pass
    ///
    /// sys.setrecursionlimit(100000)
    /// threading.stack_size(512 * 1024 * 1024)
    /// worker = threading.Thread(target=main)
    /// worker.start()
    /// worker.join()
    /// ```
    ///
    /// ## References
    /// - `sys.setrecursionlimit`: <https://docs.python.org/3/library/sys.html#sys.setrecursionlimit>
    /// - What's new in Python 3.12 (sys, the recursion limit and C stack):
    ///   <https://docs.python.org/3/whatsnew/3.12.html>
    /// - `threading.stack_size`: <https://docs.python.org/3/library/threading.html#threading.stack_size>
    /// - Windows stack reserve of `python.exe` (`StackReserveSize`):
    ///   <https://github.com/python/cpython/blob/main/PCbuild/python.vcxproj>
    pub static PY002 = {
        code: "PY002",
        name: "recursion-limit-without-stack",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Warning,
        summary: "Recursion limit raised high without enlarging the thread stack",
        kinds: &[],
        needles: &["torch", "tensorflow", "keras", "jax", "flax"],
        also_needles: &["setrecursionlimit", "stack_size"],
        options: &[RuleOption {
            key: "threshold",
            kind: OptionKind::Int,
            default: "10000",
            doc: "Recursion limits at or above this value need a bigger thread stack.",
        }],
    };
}

pub struct RecursionLimitWithoutStack;

/// The folded limit; `None` when it cannot be told. `sys.maxsize` is effectively unbounded.
fn limit(m: &PythonModel<'_>, arg: Node<'_>) -> Option<i128> {
    if m.text(arg).contains("maxsize") {
        return Some(i64::MAX as i128);
    }
    m.const_value(arg).and_then(|v| v.as_int())
}

/// `x.start()` where `x` is bound to `threading.Thread(...)` in the same scope.
fn starts_thread(m: &PythonModel<'_>, call: Node<'_>) -> bool {
    let Some(func) = call
        .field("function")
        .filter(|f| f.kind_name() == "attribute")
    else {
        return false;
    };
    if func.field("attribute").map(|a| m.text(a)) != Some("start") {
        return false;
    }
    let Some(obj) = func.field("object") else {
        return false;
    };
    let value = match obj.kind_name() {
        "identifier" => m.value_of_name(obj, m.text(obj)),
        "call" => Some(obj),
        _ => None,
    };
    value.is_some_and(|v| {
        v.kind_name() == "call" && m.call_name(v).as_deref() == Some("threading.Thread")
    })
}

impl Rule for RecursionLimitWithoutStack {
    fn meta(&self) -> &'static RuleMeta {
        &PY002
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.python();
        if !m.imports_gpu_framework() {
            return;
        }
        let threshold = ctx.option_int("threshold").unwrap_or(10_000) as i128;
        let named = |q: &str| {
            m.calls
                .iter()
                .filter(|(c, _)| m.call_name(*c).as_deref() == Some(q))
                .map(|(c, s)| (*c, *s))
                .collect::<Vec<_>>()
        };
        let stack_sizes = named("threading.stack_size");
        for (call, _) in named("sys.setrecursionlimit") {
            if !stack_sizes.is_empty() {
                break;
            }
            let Some(arg) = argument(call, 0, "limit", m) else {
                continue;
            };
            let Some(n) = limit(m, arg) else {
                continue;
            };
            if n < threshold {
                continue;
            }
            let shown = if n >= i64::MAX as i128 {
                "effectively unlimited".to_string()
            } else {
                format!("{n}")
            };
            ctx.report(
                ctx.diagnostic(call, format!("`{}` raises the recursion limit to {shown} without a bigger thread stack: deep recursion overflows the C stack and crashes the process instead of raising RecursionError", ctx.text(call)))
                    .primary_label("limit raised, stack size unchanged (8 MB main thread on Linux, about 2 MB on Windows)")
                    .help("run the deep recursion in a thread with a large stack: `threading.stack_size(512 * 1024 * 1024)` then `t = threading.Thread(target=main); t.start(); t.join()`, or make the recursion iterative"),
            );
        }
        // `threading.stack_size(...)` after the thread it is meant for was started.
        for (size_call, scope) in &stack_sizes {
            if argument(*size_call, 0, "size", m).is_none() {
                continue;
            }
            let same_scope = m.calls.iter().filter(|(_, s)| s == scope);
            let started = same_scope
                .clone()
                .find(|(c, _)| c.start_byte() < size_call.start_byte() && starts_thread(m, *c));
            let created_after = same_scope.clone().any(|(c, _)| {
                c.start_byte() > size_call.end_byte()
                    && m.call_name(*c).as_deref() == Some("threading.Thread")
            });
            let Some((start, _)) = started else {
                continue;
            };
            if created_after {
                continue;
            }
            ctx.report(
                ctx.diagnostic(*size_call, "`threading.stack_size(...)` runs after the worker thread was started: it only applies to threads created later")
                    .primary_label("too late for the running thread")
                    .with_label(Span::of(start), "the thread starts here, with the default stack")
                    .help("call `threading.stack_size(...)` before creating the `threading.Thread`"),
            );
        }
    }
}
