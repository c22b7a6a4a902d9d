//! PT005: out-of-memory recovery attempted inside the `except` clause.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::python::PythonModel;
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;
use gpulint_syntax::{descendants, named_children};
use tree_sitter::Node;

declare_rule! {
    /// ## What it does
    /// Finds a `try` whose `except` clause handles a CUDA out-of-memory error and retries the
    /// work inside the clause: the handler catches `torch.cuda.OutOfMemoryError` /
    /// `torch.OutOfMemoryError` (or `RuntimeError`, `Exception` or a bare `except` and checks
    /// for `"out of memory"` in the message), and calls again a function that the `try` body
    /// called (the model, the training step, with a smaller batch or after `empty_cache()`).
    /// A handler that only logs, cleans up or re-raises is fine. Applies to files that import
    /// `torch`.
    ///
    /// ## Why is this risky?
    /// The PyTorch FAQ: "The python exception object holds a reference to the stack frame
    /// where the error was raised. Which prevents the original tensor objects from being
    /// freed. The solution is to move you OOM recovery code outside of the `except` clause."
    /// While the handler runs, the activations of the failed attempt are still alive, so the
    /// retry runs out of memory again, even with a smaller batch.
    ///
    /// ## Example
    /// ```python
    /// import torch
    ///
    /// def forward_with_fallback(model, batch):
    ///     try:
    ///         return model(batch)
    ///     except torch.cuda.OutOfMemoryError:
    ///         torch.cuda.empty_cache()
    ///         return model(batch[: len(batch) // 2])
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// import torch
    ///
    /// def forward_with_fallback(model, batch):
    ///     oom = False
    ///     try:
    ///         return model(batch)
    ///     except torch.cuda.OutOfMemoryError:
    ///         oom = True
    ///     if oom:
    ///         torch.cuda.empty_cache()
    ///         return model(batch[: len(batch) // 2])
    /// ```
    ///
    /// ## References
    /// - PyTorch FAQ, *My out of memory exception handler can't allocate memory*:
    ///   <https://pytorch.org/docs/stable/notes/faq.html#my-out-of-memory-exception-handler-can-t-allocate-memory>
    pub static PT005 = {
        code: "PT005",
        name: "oom-retry-in-except",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Warning,
        summary: "Out-of-memory recovery attempted inside the `except` clause",
        kinds: &["except_clause"],
        needles: &["torch"],
        also_needles: &["except"],
        options: &[],
    };
}

pub struct OomRetryInExcept;

/// Calls in a handler that are bookkeeping, not a retry.
const HARMLESS: &[&str] = &[
    "print",
    "str",
    "repr",
    "len",
    "isinstance",
    "format",
    "empty_cache",
    "collect",
    "synchronize",
    "zero_grad",
    "warning",
    "warn",
    "info",
    "error",
    "debug",
    "exception",
    "append",
    "reset",
];

impl Rule for OomRetryInExcept {
    fn meta(&self) -> &'static RuleMeta {
        &PT005
    }

    fn check(&self, handler: Node<'_>, ctx: &mut Context<'_>) {
        let m = ctx.python();
        if !m.imports_torch() {
            return;
        }
        let Some(try_stmt) = m
            .parent(handler)
            .filter(|p| p.kind_name() == "try_statement")
        else {
            return;
        };
        let Some(body) = try_stmt.field("body") else {
            return;
        };
        let Some(block) = named_children(handler)
            .filter(|c| c.kind_name() == "block")
            .last()
        else {
            return;
        };
        if !handles_oom(m, handler, block) {
            return;
        }
        let tried: Vec<&str> = calls_in(body)
            .filter_map(|c| c.field("function").map(|f| m.text(f)))
            .filter(|t| !is_harmless(t))
            .collect();
        let Some(retry) = calls_in(block).find(|c| {
            c.field("function")
                .is_some_and(|f| tried.contains(&m.text(f)))
        }) else {
            return;
        };
        let callee = retry.field("function").map(|f| m.text(f)).unwrap_or("");
        ctx.report(
            ctx.diagnostic(retry, format!("`{callee}(...)` is retried inside the `except` clause that caught the out-of-memory error"))
                .primary_label("the failed attempt's tensors are still alive here")
                .with_label(Span::of(&handler), "the exception keeps the failed frame, and its GPU memory, referenced")
                .note("the retry runs out of memory again, even with a smaller batch")
                .help("only set a flag in the `except` clause, and retry after it (outside the clause), once the exception is gone"),
        );
    }
}

/// Does the handler catch a CUDA out-of-memory error?
fn handles_oom(m: &PythonModel<'_>, handler: Node<'_>, block: Node<'_>) -> bool {
    let types: Vec<Node<'_>> = named_children(handler)
        .filter(|c| c.kind_name() != "block" && c.kind_name() != "comment")
        .collect();
    let mut broad = types.is_empty();
    for t in &types {
        for n in descendants(*t).filter(|n| matches!(n.kind_name(), "identifier" | "attribute")) {
            let q = m.qualified_name(n).unwrap_or_else(|| m.text(n).to_string());
            if q.ends_with("OutOfMemoryError") && q.starts_with("torch") {
                return true;
            }
            if matches!(m.text(n), "RuntimeError" | "Exception" | "BaseException") {
                broad = true;
            }
        }
    }
    broad
        && descendants(block).any(|n| {
            n.kind_name() == "string_content"
                && m.text(n).to_ascii_lowercase().contains("out of memory")
        })
}

fn is_harmless(callee: &str) -> bool {
    let last = callee.rsplit('.').next().unwrap_or(callee);
    HARMLESS.contains(&last) || callee.starts_with("log")
}

/// Calls under `node`, not in nested functions or lambdas: one walk that does not go into
/// them (asking each call for its enclosing function climbs with `Node::parent`, quadratic in
/// the depth).
fn calls_in(node: Node<'_>) -> impl Iterator<Item = Node<'_>> {
    let mut out = Vec::new();
    let nested = |n: Node<'_>| matches!(n.kind_name(), "function_definition" | "lambda");
    if !nested(node) {
        let mut cursor = node.walk();
        'walk: loop {
            let n = cursor.node();
            if n.kind_name() == "call" {
                out.push(n);
            }
            if !nested(n) && cursor.goto_first_child() {
                continue;
            }
            while !cursor.goto_next_sibling() {
                if !cursor.goto_parent() || cursor.node().id() == node.id() {
                    break 'walk;
                }
            }
        }
    }
    out.into_iter()
}
