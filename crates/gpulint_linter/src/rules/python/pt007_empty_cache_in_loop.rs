//! PT007: `torch.cuda.empty_cache()` inside the training loop.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::{Severity, Span};
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;

declare_rule! {
    /// ## What it does
    /// Finds `torch.cuda.empty_cache()` (through any import or alias) called in the body of a
    /// training loop: a loop that calls `backward()` or an optimizer's `step()`, so the call
    /// runs every step. Calls once per epoch, outside the step loop, calls under a periodic
    /// condition (`if step % 100 == 0:`), in an `except` clause (the error path), and calls
    /// right after `del` of a large object (a validation pipeline dropped to give its memory
    /// back) are left alone. A loop counts as a training loop also when it calls a local
    /// function that backpropagates or steps the optimizer. Applies to files
    /// that import `torch`.
    ///
    /// ## Why is this risky?
    /// `empty_cache` "releases all **unused** cached memory from PyTorch so that those can be
    /// used by other GPU applications. However, the occupied GPU memory by tensors will not be
    /// freed so it can not increase the amount of GPU memory available for PyTorch." Called
    /// every step it does not fix an out-of-memory error: it hides a leak (a loss or output kept
    /// across steps, see PT001 and PT002), synchronizes the device, and makes the allocator
    /// call `cudaMalloc` again for every step, which is slow and fragments memory. It is useful
    /// only when the memory is meant for another process on the same GPU.
    ///
    /// ## Example
    /// ```python
    /// import torch
    ///
    /// def train(model, loader, optimizer):
    ///     for x, y in loader:
    ///         loss = torch.nn.functional.mse_loss(model(x), y)
    ///         loss.backward()
    ///         optimizer.step()
    ///         torch.cuda.empty_cache()
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// import torch
    ///
    /// def train(model, loader, optimizer):
    ///     for x, y in loader:
    ///         loss = torch.nn.functional.mse_loss(model(x), y)
    ///         loss.backward()
    ///         optimizer.step()
    /// ```
    ///
    /// ## References
    /// - PyTorch "CUDA semantics", *Memory management*:
    ///   <https://pytorch.org/docs/stable/notes/cuda.html#memory-management>
    /// - `torch.cuda.empty_cache`:
    ///   <https://pytorch.org/docs/stable/generated/torch.cuda.empty_cache.html>
    pub static PT007 = {
        code: "PT007",
        name: "empty-cache-in-loop",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Info,
        summary: "`torch.cuda.empty_cache()` called every training step",
        kinds: &[],
        needles: &["torch"],
        also_needles: &["empty_cache"],
        options: &[],
    };
}

pub struct EmptyCacheInLoop;

impl Rule for EmptyCacheInLoop {
    fn meta(&self) -> &'static RuleMeta {
        &PT007
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.python();
        if !m.imports_torch() {
            return;
        }
        let t = m.training();
        for &(call, _) in &m.calls {
            let is_empty_cache = call
                .field("function")
                .and_then(|f| m.qualified_name(f))
                .is_some_and(|q| {
                    q == "torch.cuda.empty_cache" || q == "torch.cuda.memory.empty_cache"
                });
            if !is_empty_cache {
                continue;
            }
            let Some(lp) = t.loop_of(m, call) else {
                continue;
            };
            if !lp.per_step || periodic_or_after_del(m, call, lp.node) {
                continue;
            }
            ctx.report(
                ctx.diagnostic(call, "`torch.cuda.empty_cache()` runs every training step")
                    .primary_label("frees only cached blocks no tensor uses; live tensors stay")
                    .with_label(Span::of(&lp.header()), "the training loop")
                    .note("it cannot give PyTorch more memory: it hides leaks, synchronizes the GPU and makes the allocator call cudaMalloc again every step")
                    .help("remove it; if memory grows per step, look for tensors kept across steps (`loss` accumulated or stored without `.item()` / `.detach()`)"),
            );
        }
    }
}

/// Is the call under an `if` with a periodic condition (`step % n == 0`), in an `except`
/// clause, or preceded by a `del` statement in its block (memory handed back after dropping an
/// object)?
fn periodic_or_after_del(
    m: &gpulint_semantic::python::PythonModel<'_>,
    call: tree_sitter::Node<'_>,
    lp: tree_sitter::Node<'_>,
) -> bool {
    // Only statements, clauses and blocks can be what is looked for: the climb goes from
    // one to the next, past the expressions around the call.
    let mut cur = m.statement_of(call);
    while let Some(p) = cur {
        if p.id() == lp.id() {
            break;
        }
        let periodic = matches!(p.kind_name(), "if_statement" | "elif_clause")
            && p.field("condition")
                .is_some_and(|c| m.text(c).contains('%'));
        let after_del = p.kind_name() == "block"
            && gpulint_syntax::named_children(p)
                .any(|s| s.kind_name() == "delete_statement" && s.start_byte() < call.start_byte());
        if periodic || after_del || p.kind_name() == "except_clause" {
            return true;
        }
        cur = m.statement_of(p);
    }
    false
}
