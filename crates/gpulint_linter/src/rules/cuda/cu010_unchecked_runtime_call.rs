//! CU010: a CUDA runtime call whose `cudaError_t` result is dropped.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{OptionKind, Rule, RuleLang, RuleMeta, RuleOption};
use gpulint_diagnostics::Severity;
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

declare_rule! {
    /// ## What it does
    /// Finds statements that are a bare call to a CUDA runtime function whose `cudaError_t`
    /// result matters: `cudaMalloc`, `cudaMallocManaged`, `cudaMallocHost`, `cudaMallocAsync`,
    /// `cudaMemcpy*`, `cudaMemset*`, `cudaFree`, `cudaFreeHost`, `cudaStreamSynchronize`,
    /// `cudaDeviceSynchronize`, `cudaSetDevice`, `cudaFuncSetAttribute` and
    /// `cudaDeviceSetLimit`. A call wrapped in any checking macro or function
    /// (`C10_CUDA_CHECK(…)`, `AT_CUDA_CHECK(…)`, `CUDA_CHECK(…)`, `checkCudaErrors(…)`,
    /// `gpuErrchk(…)`), assigned (`err = cudaMalloc(…)`), tested, or explicitly discarded with
    /// `(void)` is not a bare call and is not reported. A dropped `cudaMalloc*` is an error.
    ///
    /// A bare call followed, within the next three statements of its block (before any
    /// `return`, `break`, `continue` or `goto`, and before any kernel launch, which would consume
    /// the result first), by a statement that retrieves the last error is checked too:
    /// `cudaGetLastError()` / `cudaPeekAtLastError()` (also inside a wrapper, as in
    /// `CUDA_CHECK(cudaGetLastError())`), `getLastCudaError(…)`, `cudaCheckError()`,
    /// `C10_CUDA_KERNEL_LAUNCH_CHECK()`, a function-like macro defined in the same file whose
    /// body calls `cudaGetLastError` or `cudaPeekAtLastError`, or a name in the `check-macros`
    /// option. The `runtime-calls` option adds runtime functions whose result must be checked
    /// (exact names, or prefixes ending in `*`, e.g. `"cudaStreamCreate*"`).
    ///
    /// ## Why is this risky?
    /// Every runtime call returns a `cudaError_t`, and it may also carry an error from an
    /// earlier asynchronous launch. A failed `cudaMalloc` leaves a dangling or null pointer that
    /// the next kernel dereferences (an illegal address); a failed copy leaves stale data; a
    /// sticky error dropped here is reported later by an unrelated call, far from its cause.
    ///
    /// ## Example
    /// ```cuda
    /// void upload(const float* host, float** dev, size_t n) {
    ///     cudaMalloc(dev, n * sizeof(float));
    ///     cudaMemcpy(*dev, host, n * sizeof(float), cudaMemcpyHostToDevice);
    /// }
    /// ```
    ///
    /// ## Use instead
    /// ```cuda
    /// void upload(const float* host, float** dev, size_t n) {
    ///     CUDA_CHECK(cudaMalloc(dev, n * sizeof(float)));
    ///     CUDA_CHECK(cudaMemcpy(*dev, host, n * sizeof(float), cudaMemcpyHostToDevice));
    /// }
    /// ```
    /// In framework code, prefer the framework's allocator (`at::empty`, `allocate_output`).
    ///
    /// ## References
    /// - CUDA Runtime API, *Error Handling*:
    ///   <https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__ERROR.html>
    /// - CUDA C++ Programming Guide, *Error Checking*:
    ///   <https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#error-checking>
    pub static CU010 = {
        code: "CU010",
        name: "unchecked-runtime-call",
        lang: RuleLang::Source(Lang::Cuda),
        severity: Severity::Warning,
        summary: "CUDA runtime call whose error code is ignored",
        kinds: &["expression_statement"],
        needles: &[
            "cudaMalloc",
            "cudaMemcpy",
            "cudaMemset",
            "cudaFree",
            "cudaStreamSynchronize",
            "cudaDeviceSynchronize",
            "cudaSetDevice",
            "cudaFuncSetAttribute",
            "cudaDeviceSetLimit",
        ],
        options: &[
            RuleOption {
                key: "check-macros",
                kind: OptionKind::StringList,
                default: "[]",
                doc: "Names of calls or macros that retrieve the last CUDA error (like `cudaGetLastError`); a runtime call followed by one of them within its next three statements is checked. Added to cudaGetLastError, cudaPeekAtLastError, getLastCudaError, cudaCheckError, C10_CUDA_KERNEL_LAUNCH_CHECK and the macros of the same file that call cudaGetLastError.",
            },
            RuleOption {
                key: "runtime-calls",
                kind: OptionKind::StringList,
                default: "[]",
                doc: "Further runtime functions whose returned error code must be checked, as exact names or prefixes ending in `*` (e.g. `cudaStreamCreate*`, `cudaEventSynchronize`), in addition to cudaMalloc*, cudaMemcpy*, cudaMemset*, cudaFree*, cudaStreamSynchronize, cudaDeviceSynchronize, cudaSetDevice, cudaFuncSetAttribute and cudaDeviceSetLimit.",
            },
        ],
    };
}

/// Runtime calls whose result must be checked (exact names, or prefixes ending in `*`).
const CHECKED: &[&str] = &[
    "cudaMalloc",
    "cudaMallocManaged",
    "cudaMallocHost",
    "cudaMallocAsync",
    "cudaMallocPitch",
    "cudaMemcpy*",
    "cudaMemset*",
    "cudaFree",
    "cudaFreeHost",
    "cudaFreeAsync",
    "cudaStreamSynchronize",
    "cudaDeviceSynchronize",
    "cudaSetDevice",
    "cudaFuncSetAttribute",
    "cudaDeviceSetLimit",
];

pub struct UncheckedRuntimeCall;

impl Rule for UncheckedRuntimeCall {
    fn meta(&self) -> &'static RuleMeta {
        &CU010
    }

    fn check(&self, node: Node<'_>, ctx: &mut Context<'_>) {
        let Some(call) = node
            .named_child(0)
            .filter(|c| c.kind_name() == "call_expression")
        else {
            return;
        };
        let Some(f) = call.field("function") else {
            return;
        };
        let name = ctx.text(f).trim_start_matches("::").to_string();
        let matches = |c: &str| match c.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => name == c,
        };
        let listed = CHECKED.iter().any(|c| matches(c))
            || ctx
                .option_strings("runtime-calls")
                .iter()
                .any(|c| matches(c));
        if !listed {
            return;
        }
        if followed_by_error_check(ctx, node) {
            return;
        }
        let alloc = name.starts_with("cudaMalloc");
        let mut d = ctx
            .diagnostic(
                call,
                format!("the `cudaError_t` returned by `{name}` is ignored"),
            )
            .primary_label("result dropped");
        d = if alloc {
            d.severity(Severity::Error).note("if the allocation fails, the pointer stays invalid and the next kernel that uses it fails with an illegal address")
        } else {
            d.note("runtime calls also return errors from earlier asynchronous launches; dropped here, they surface later in an unrelated call")
        };
        d = d.help(format!(
            "wrap it in your error-check macro, e.g. `CUDA_CHECK({name}(…))` or `C10_CUDA_CHECK({name}(…))`{}; confirm at run time with `compute-sanitizer --tool memcheck ./your_app`",
            if alloc { ", or allocate through the framework (`at::empty`)" } else { "" }
        ));
        ctx.report(d);
    }
}

/// Calls that retrieve (and so check) the last runtime error.
const RETRIEVES_ERROR: &[&str] = &[
    "cudaGetLastError",
    "cudaPeekAtLastError",
    "getLastCudaError",
    "cudaCheckError",
    "C10_CUDA_KERNEL_LAUNCH_CHECK",
];

/// How many statements after a runtime call may come before the check that retrieves its
/// error (`cudaMemcpy(…); n_blocks = …; CUDA_CHECK(cudaGetLastError());`): the last error stays
/// set until it is retrieved.
const CHECK_WITHIN: usize = 3;

/// Is one of the next [`CHECK_WITHIN`] statements after `stmt` (before any jump out of the
/// block, and before any kernel launch) an error check that retrieves the last error: a call to
/// `cudaGetLastError()` (in any wrapper), a known checking macro, one from `check-macros`, or a
/// macro of this file whose body retrieves the last error?
fn followed_by_error_check(ctx: &Context<'_>, stmt: Node<'_>) -> bool {
    let mut next = stmt.next_named_sibling();
    let mut seen = 0;
    while let Some(n) = next {
        if n.kind_name() != "comment" {
            if seen == CHECK_WITHIN
                || matches!(
                    n.kind_name(),
                    "return_statement"
                        | "break_statement"
                        | "continue_statement"
                        | "goto_statement"
                )
            {
                return false;
            }
            seen += 1;
            if is_error_check(ctx, n) {
                return true;
            }
            // A kernel launch in between consumes what the call produced before the check,
            // which then reports the launch.
            if ctx.cuda().holds_launch(n) {
                return false;
            }
        }
        next = n.next_named_sibling();
    }
    false
}

/// Does statement `next` retrieve the last error?
fn is_error_check(ctx: &Context<'_>, next: Node<'_>) -> bool {
    let t = ctx.text(next);
    if RETRIEVES_ERROR.iter().any(|c| t.contains(c)) {
        return true;
    }
    let names = gpulint_semantic::cuda::guards::name_tokens(t);
    if ctx
        .option_strings("check-macros")
        .iter()
        .any(|m| names.contains(&m.as_str()))
    {
        return true;
    }
    // `#define CHECK_LAST() do { cudaError_t e = cudaGetLastError(); … } while (0)`
    let Some(first) = names.first() else {
        return false;
    };
    ctx.cuda().macro_retrieves_error(first)
}

#[cfg(test)]
mod tests {
    use crate::settings::Settings;
    use std::path::Path;

    fn codes(src: &str, options: &[(&str, &str)]) -> Vec<usize> {
        let mut settings = Settings::default();
        let mut table = toml::Table::new();
        for (key, value) in options {
            table.insert(
                (*key).into(),
                toml::Value::Array(vec![toml::Value::String((*value).into())]),
            );
        }
        settings.rule_options.insert("CU010".into(), table);
        crate::check_source(Path::new("ops.cu"), src, &settings)
            .iter()
            .filter(|d| d.code == "CU010")
            .map(|d| src[..d.span.start].lines().count())
            .collect()
    }

    #[test]
    fn configured_runtime_calls_and_check_macros() {
        let src = "void f(cudaStream_t* s, cudaEvent_t e) {\n  cudaStreamCreate(s);\n  cudaEventSynchronize(e);\n  MY_SYNC_CHECK();\n  cudaDeviceSynchronize();\n  MY_SYNC_CHECK();\n}\n";
        assert_eq!(
            codes(src, &[]),
            vec![5],
            "only the built-in call, unchecked"
        );
        assert_eq!(
            codes(src, &[("runtime-calls", "cudaStreamCreate*")]),
            vec![2, 5],
            "a configured call is reported"
        );
        assert_eq!(
            codes(src, &[("check-macros", "MY_SYNC_CHECK")]),
            Vec::<usize>::new(),
            "a configured check after the call"
        );
        // The configured call alone makes the file worth parsing.
        let only = "void g(cudaStream_t* s) {\n  cudaStreamCreate(s);\n}\n";
        assert_eq!(
            codes(only, &[("runtime-calls", "cudaStreamCreate")]),
            vec![2]
        );
    }
}
