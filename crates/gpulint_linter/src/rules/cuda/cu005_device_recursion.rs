//! CU005: recursion in device code, direct or through other device functions.

use super::SANITIZER;
use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::cuda::CudaModel;
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;

declare_rule! {
    /// ## What it does
    /// Builds the call graph of the `__global__` and `__device__` functions defined in the file
    /// (templates by name) and reports every cycle, direct (`f` calls `f`) or indirect (`f` calls
    /// `g`, which calls `f`), once, at the call that closes it.
    ///
    /// Names defined more than once (overloads such as `op(float2)` calling `op(float)`), calls
    /// with another number of arguments or with casts in them, calls through a namespace
    /// (`::min(a, b)`), functions with no branch that could end a recursion (wrappers that
    /// forward to a builtin of the same name), `constexpr` functions and calls with explicit
    /// template arguments (`sum<N - 1>(x)`, which recurse at compile time) are not reported.
    ///
    /// ## Why is this risky?
    /// With recursion, ptxas and nvlink cannot compute the kernel's stack size ("Stack size for
    /// entry function … cannot be statically determined"), so the kernel runs with the default
    /// per-thread stack (`cudaLimitStackSize`, typically 1 KB). A deep enough recursion overflows
    /// it: the kernel fails with an illegal address or an unspecified launch failure, with no
    /// message that points at the recursion.
    ///
    /// ## Example
    /// ```cuda
    /// __device__ int depth(const int* parent, int node) {
    ///     if (parent[node] < 0) return 0;
    ///     return 1 + depth(parent, parent[node]);
    /// }
    /// ```
    ///
    /// ## Use instead
    /// ```cuda
    /// __device__ int depth(const int* parent, int node) {
    ///     int d = 0;
    ///     while (parent[node] >= 0) {
    ///         node = parent[node];
    ///         ++d;
    ///     }
    ///     return d;
    /// }
    /// ```
    ///
    /// ## References
    /// - NVIDIA/cccl#7561 (a recursive call leaves ptxas and nvlink unable to compute the stack
    ///   size): <https://github.com/NVIDIA/cccl/issues/7561>
    /// - llvm/llvm-project#87428 (recursion in the call graph prevents computing a kernel's
    ///   stack size): <https://github.com/llvm/llvm-project/issues/87428>
    /// - Rust-CUDA guide, tips ("Don't use recursion"):
    ///   <https://rust-gpu.github.io/Rust-CUDA/guide/tips.html>
    /// - CUDA Runtime API, `cudaDeviceSetLimit` / `cudaLimitStackSize`:
    ///   <https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__DEVICE.html>
    pub static CU005 = {
        code: "CU005",
        name: "device-recursion",
        lang: RuleLang::Source(Lang::Cuda),
        severity: Severity::Warning,
        summary: "Recursion in device code: the kernel's stack size cannot be computed",
        kinds: &[],
        needles: &["__device__", "__global__", "DEVICE", "GLOBAL"],
        options: &[],
    };
}

/// Cycles longer than this are not searched.
const MAX_VISIT: usize = 4096;

pub struct DeviceRecursion;

impl Rule for DeviceRecursion {
    fn meta(&self) -> &'static RuleMeta {
        &CU005
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.cuda();
        let n = m.functions.len();
        // Edges: caller → (callee, call node); only to names with one device definition.
        let mut edges: Vec<Vec<(usize, tree_sitter::Node<'_>)>> = vec![Vec::new(); n];
        // Whether each function is left alone, decided once (a function makes many calls).
        let mut skip: Vec<Option<bool>> = vec![None; n];
        let mut skipped = |f: usize| *skip[f].get_or_insert_with(|| skip_function(m, f));
        for c in &m.device_calls {
            if skipped(c.caller) || c.node.has_error() {
                continue;
            }
            // `sum<N - 1>(x)` recurses at compile time; `::min(a, b)` / `ns::f(x)` names
            // another namespace's function.
            if c.node.field("function").is_some_and(|f| {
                matches!(f.kind_name(), "template_function" | "qualified_identifier")
            }) {
                continue;
            }
            // A cast in the arguments forwards to another overload (`__ldg((const __half*)p)`).
            let args = c.node.field("arguments").map(|a| m.text(a)).unwrap_or("");
            if args.contains("_cast<") || args.contains(".operator") {
                continue;
            }
            let mut targets = m.device_functions_named(c.callee);
            let (Some(t), None) = (targets.next(), targets.next()) else {
                continue;
            };
            // A different number of arguments calls another overload (a builtin one).
            let argc = c
                .node
                .field("arguments")
                .map(|a| gpulint_syntax::named_children(a).count());
            if !skipped(t) && argc == param_count(m, t) {
                edges[c.caller].push((t, c.node));
            }
        }
        let mut reported = vec![false; n];
        for start in 0..n {
            if edges[start].is_empty() || reported[start] {
                continue;
            }
            let Some(path) = cycle_from(&edges, start) else {
                continue;
            };
            // Report each cycle once: at its first function in the file.
            if path.iter().any(|(f, _)| *f < start || reported[*f]) {
                continue;
            }
            for (f, _) in &path {
                reported[*f] = true;
            }
            let (_, closing) = path[path.len() - 1];
            let name = &m.functions[start].name;
            let msg = if path.len() == 1 {
                format!("device function `{name}` calls itself: the kernel's stack size cannot be computed at compile time")
            } else {
                let names: Vec<&str> = path
                    .iter()
                    .map(|(f, _)| m.functions[*f].name.as_str())
                    .collect();
                format!(
                    "device functions call each other in a cycle ({} → {name}): the kernel's stack size cannot be computed at compile time",
                    names.join(" → ")
                )
            };
            let mut d = ctx
                .diagnostic(closing, msg)
                .primary_label("this call recurses")
                .note("the kernel then runs with the default per-thread stack (`cudaLimitStackSize`, typically 1 KB); deep recursion overflows it and the kernel fails with an illegal address");
            if let Some(decl) = m.functions[start].node.field("declarator") {
                d = d.with_label(Span::of(&decl), "recursive device function");
            }
            d = d.help(format!(
                "rewrite the recursion as a loop with an explicit bounded stack, or raise the limit with `cudaDeviceSetLimit(cudaLimitStackSize, bytes)`; confirm at run time with `{SANITIZER}`"
            ));
            ctx.report(d);
        }
    }
}

/// The number of parameters of a function definition.
fn param_count(m: &CudaModel<'_>, f: usize) -> Option<usize> {
    let mut d = m.functions[f].node.field("declarator")?;
    for _ in 0..8 {
        if d.kind_name() == "function_declarator" {
            let params = d.field("parameters")?;
            return Some(
                gpulint_syntax::named_children(params)
                    .filter(|p| p.kind_name().contains("parameter_declaration"))
                    .count(),
            );
        }
        d = d.field("declarator").or_else(|| d.named_child(0))?;
    }
    None
}

/// Has the function a branch (`if`, `?:`, a loop) that can end a recursion? Without one a
/// self-call is a wrapper forwarding to a builtin overload of the same name.
fn has_branch(m: &CudaModel<'_>, f: usize) -> bool {
    m.functions[f].node.field("body").is_some_and(|b| {
        gpulint_syntax::descendants(b).any(|n| {
            matches!(
                n.kind_name(),
                "if_statement"
                    | "conditional_expression"
                    | "while_statement"
                    | "for_statement"
                    | "switch_statement"
            )
        })
    })
}

/// `constexpr` functions and functions with parse errors are left alone.
fn skip_function(m: &CudaModel<'_>, f: usize) -> bool {
    let node = m.functions[f].node;
    if node.has_error() || !has_branch(m, f) {
        return true;
    }
    let head_end = node
        .field("body")
        .map(|b| b.start_byte())
        .unwrap_or(node.end_byte());
    let head = &m.source[node.start_byte()..head_end];
    head.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .any(|w| w == "constexpr" || w == "consteval")
}

/// A cycle through `start`: the functions on it from `start`, each with the call it makes to
/// the next (the last call returns to `start`). Depth-first with an explicit stack.
fn cycle_from<'n>(
    edges: &[Vec<(usize, tree_sitter::Node<'n>)>],
    start: usize,
) -> Option<Vec<(usize, tree_sitter::Node<'n>)>> {
    // The functions reached (a set, not one flag per function of the file: a search from
    // every function that calls one would then cost the file's functions each time).
    let mut seen: gpulint_semantic::hash::HashSet<usize> = Default::default();
    // (function, next edge to try); the path is the stack.
    let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
    seen.insert(start);
    let mut visits = 0;
    while let Some(&(f, next)) = stack.last() {
        visits += 1;
        if visits > MAX_VISIT {
            return None;
        }
        let Some(&(to, _)) = edges[f].get(next) else {
            stack.pop();
            continue;
        };
        if let Some(top) = stack.last_mut() {
            top.1 += 1;
        }
        if to == start {
            return Some(stack.iter().map(|&(g, e)| (g, edges[g][e - 1].1)).collect());
        }
        if seen.insert(to) {
            stack.push((to, 0));
        }
    }
    None
}
