//! CU009: a kernel launch not followed by an error check.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{OptionKind, Rule, RuleLang, RuleMeta, RuleOption};
use gpulint_diagnostics::Severity;
use gpulint_semantic::cuda::glue_project::{describe_callers, Resolver, UncheckedPath};
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;
use std::collections::HashMap;
use tree_sitter::Node;

declare_rule! {
    /// ## What it does
    /// Finds kernel launches `kernel<<<grid, block, smem, stream>>>(…);` whose next statement
    /// (after any further launches in a row) does not check for launch errors:
    /// `C10_CUDA_KERNEL_LAUNCH_CHECK()`, `AT_CUDA_CHECK(cudaGetLastError())`,
    /// `cudaGetLastError()` / `cudaPeekAtLastError()` (checked by a macro such as `CUDA_CHECK`,
    /// `checkCudaErrors` or `gpuErrchk`), or one of the names in the `check-macros` option.
    /// When the launch is the last statement of a lambda (an `AT_DISPATCH_*` body) or of a
    /// `switch` case, the statement after the dispatch or the `switch` counts. A launch that
    /// ends its function leaves the check to the callers: it is reported only when the callers
    /// are seen (in the C/C++/CUDA files of its directory, its parent and the parent's other
    /// subdirectories, such as a `pybind/` folder) and one path from a function bound to
    /// Python reaches it with no check after any call on the way (a `return` after the call
    /// passes the question on to that function's callers). The project's own helpers count
    /// as checks too: a macro or function, in this file or in a header it includes with
    /// `#include "…"`, whose body calls `cudaGetLastError`, `cudaPeekAtLastError` or
    /// `C10_CUDA_KERNEL_LAUNCH_CHECK` (`#define CHECK_LAUNCH() …`, `void finish(…)`).
    ///
    /// ## Why is this risky?
    /// "Kernel launches do not return any error code, so `cudaPeekAtLastError()` or
    /// `cudaGetLastError()` must be called just after the kernel launch to retrieve any
    /// pre-launch errors." Without the check, an invalid configuration (too many threads, too
    /// much shared memory) means the kernel silently never runs and later code consumes garbage,
    /// and asynchronous faults are reported by some unrelated later call.
    ///
    /// ## Example
    /// ```cuda
    /// __global__ void fill(float* y, float v, int n) {
    ///     int i = blockIdx.x * blockDim.x + threadIdx.x;
    ///     if (i < n) y[i] = v;
    /// }
    ///
    /// torch::Tensor ones_like(torch::Tensor x) {
    ///     auto y = torch::empty_like(x);
    ///     const int n = x.numel();
    ///     fill<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
    ///         y.data_ptr<float>(), 1.f, n);
    ///     return y;
    /// }
    /// ```
    ///
    /// ## Use instead
    /// ```cuda
    /// __global__ void fill(float* y, float v, int n) {
    ///     int i = blockIdx.x * blockDim.x + threadIdx.x;
    ///     if (i < n) y[i] = v;
    /// }
    ///
    /// torch::Tensor ones_like(torch::Tensor x) {
    ///     auto y = torch::empty_like(x);
    ///     const int n = x.numel();
    ///     fill<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
    ///         y.data_ptr<float>(), 1.f, n);
    ///     C10_CUDA_KERNEL_LAUNCH_CHECK();
    ///     return y;
    /// }
    /// ```
    ///
    /// ## References
    /// - CUDA C++ Programming Guide, *Error Checking*:
    ///   <https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#error-checking>
    /// - PyTorch's launch checker, `torch/testing/_internal/check_kernel_launches.py`:
    ///   <https://github.com/pytorch/pytorch/blob/main/torch/testing/_internal/check_kernel_launches.py>
    /// - NVIDIA CUDA C++ guideline CUDA-1.4 (Axivion):
    ///   <https://doc.qt.io/axivion/reference/analysis_configuration/CUDA-1.4.html>
    pub static CU009 = {
        code: "CU009",
        name: "unchecked-kernel-launch",
        lang: RuleLang::Source(Lang::Cuda),
        severity: Severity::Warning,
        summary: "Kernel launch without an error check",
        kinds: &[],
        needles: &["<<<"],
        options: &[RuleOption {
            key: "check-macros",
            kind: OptionKind::StringList,
            default: "[]",
            doc: "Names of calls or macros that check for launch errors, in addition to C10_CUDA_KERNEL_LAUNCH_CHECK, cudaGetLastError, cudaPeekAtLastError, AT_CUDA_CHECK, CUDA_CHECK, checkCudaErrors, gpuErrchk and friends.",
        }],
    };
}

/// Calls that check for launch errors.
pub use gpulint_semantic::cuda::glue::LAUNCH_CHECKS;

/// Statements searched after the launch's block ends (lambda bodies, dispatch macros).
const MAX_UP: usize = 12;

pub struct UncheckedKernelLaunch;

impl Rule for UncheckedKernelLaunch {
    fn meta(&self) -> &'static RuleMeta {
        &CU009
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let extra = ctx.option_strings("check-macros");
        let m = ctx.cuda();
        if m.launches.is_empty() {
            return;
        }
        // The project's helpers (they read the included headers) are looked for only when a
        // statement is no known check. The statement's names are read once and looked up
        // among the helpers (reading them again for each helper grows with the helpers times
        // the statement).
        let helpers: std::cell::OnceCell<gpulint_semantic::hash::HashSet<&str>> =
            Default::default();
        let is_check_text = |t: &str| {
            LAUNCH_CHECKS.iter().any(|c| t.contains(c))
                || extra.iter().any(|c| t.contains(c.as_str()))
                || {
                    let helpers = helpers.get_or_init(|| m.check_helpers());
                    !helpers.is_empty()
                        && gpulint_semantic::cuda::guards::name_tokens(t)
                            .iter()
                            .any(|tok| helpers.contains(tok))
                }
        };
        let is_check = |n: Node<'_>| is_check_text(m.text(n));
        // Launches that end their function: asked of the callers, once per function.
        let mut resolver: Option<Resolver<'static>> = None;
        let mut asked: HashMap<String, Option<UncheckedPath>> = HashMap::new();
        // The statements after each launch, read once per block, and per statement the first
        // one from it on that is not a further launch.
        let mut siblings = gpulint_syntax::NamedSiblings::default();
        let mut kept_from: gpulint_semantic::hash::HashMap<usize, Option<Node<'_>>> =
            Default::default();
        for l in &m.launches {
            if l.node.has_error() {
                continue;
            }
            // The statements around the launch, found once going down from the root: walking
            // up with `Node::parent` starts again from the root at every step.
            let mut path = gpulint_syntax::ancestors_of(m.root, l.node);
            if path.is_empty() {
                // Not found by byte offsets going down (a zero-width launch): the model's
                // parent table.
                path = m.parents().ancestors(l.node).collect();
                path.reverse();
            }
            let Some(&stmt) = path
                .last()
                .filter(|p| p.kind_name() == "expression_statement")
            else {
                continue;
            };
            // `cur` is `path[at]`; its parent is `path[at - 1]`.
            let mut at = path.len() - 1;
            let mut cur = stmt;
            let mut checked = false;
            let mut decided = false;
            for _ in 0..MAX_UP {
                // Skip further launches in a row.
                let skipped = |n: Node<'_>| {
                    n.kind_name() == "comment" || (m.text(n).contains("<<<") && !is_check(n))
                };
                let next = match at.checked_sub(1).and_then(|p| siblings.after(path[p], cur)) {
                    // The answer is kept for each statement passed: a block of many launches
                    // asks it for every launch after each of them.
                    Some(after) => {
                        let mut passed = Vec::new();
                        let mut found = None;
                        for &n in after {
                            if let Some(&known) = kept_from.get(&n.id()) {
                                found = known;
                                break;
                            }
                            if !skipped(n) {
                                found = Some(n);
                                break;
                            }
                            passed.push(n.id());
                        }
                        if let Some(n) = found {
                            kept_from.insert(n.id(), found);
                        }
                        for id in passed {
                            kept_from.insert(id, found);
                        }
                        found
                    }
                    None => {
                        let mut next = cur.next_named_sibling();
                        while let Some(n) = next.filter(|&n| skipped(n)) {
                            next = n.next_named_sibling();
                        }
                        next
                    }
                };
                // `case …: launch; break;`: the check may follow the `switch`.
                if let Some(_n) = next.filter(|n| n.kind_name() == "break_statement") {
                    // The break is `cur`'s sibling: its ancestors are `cur`'s.
                    match (0..at)
                        .rev()
                        .find(|&i| path[i].kind_name() == "switch_statement")
                    {
                        Some(i) => {
                            at = i;
                            cur = path[i];
                            continue;
                        }
                        None => break,
                    }
                }
                if let Some(n) = next {
                    checked = is_check(n);
                    decided = true;
                    break;
                }
                // Last statement of its block: go out to the enclosing statement
                // (a lambda passed to AT_DISPATCH_*, an `if` body).
                let mut up = None;
                for i in (0..at).rev() {
                    let u = path[i];
                    if u.kind_name() == "function_definition" {
                        break;
                    }
                    if u.kind_name().ends_with("_statement")
                        && u.kind_name() != "compound_statement"
                    {
                        up = Some(i);
                        break;
                    }
                }
                match up {
                    Some(i) => {
                        at = i;
                        cur = path[i];
                    }
                    None => break,
                }
            }
            if checked {
                continue;
            }
            // The end of the function: a caller may check. Reported when a path from a
            // binding reaches the function with no check on the way.
            let mut ends = None;
            if !decided {
                let Some(f) = m.enclosing_function(l.node).filter(|f| !f.space.global) else {
                    continue;
                };
                let name = gpulint_semantic::cuda::last_name(&f.name);
                let chain = asked.entry(name.to_string()).or_insert_with(|| {
                    resolver
                        .get_or_insert_with(|| {
                            Resolver::for_launch_errors(
                                &m.glue.facts,
                                &ctx.file.path,
                                &ctx.settings.semantic_options(),
                            )
                        })
                        .unchecked_launch_errors(name, &is_check_text)
                });
                let Some(chain) = chain.as_ref() else {
                    continue;
                };
                let callers = describe_callers(&chain.callers);
                ends = Some(match (&chain.bound, chain.callers.is_empty()) {
                    (_, true) => format!(
                        "the launch ends `{name}`, which is called from Python: nothing retrieves its errors"
                    ),
                    (Some(b), false) => format!(
                        "the launch ends `{name}`, and no check follows its call in {callers}; `{b}` is called from Python"
                    ),
                    (None, false) => format!(
                        "the launch ends `{name}`, and no check follows its call in {callers}"
                    ),
                });
            }
            let mut d = ctx
                .diagnostic(l.node, format!("launch of `{}` is not followed by an error check", l.kernel))
                .primary_label("launch errors are not retrieved")
                .note("a launch returns no error code: an invalid configuration means the kernel never runs, and faults surface later in unrelated calls");
            if let Some(n) = ends {
                d = d.note(n);
            }
            let d = d.help("add `C10_CUDA_KERNEL_LAUNCH_CHECK();` (PyTorch) or `CUDA_CHECK(cudaGetLastError());` right after the launch; confirm at run time with `compute-sanitizer --tool memcheck ./your_app`");
            ctx.report(d);
        }
    }
}
