//! What follows a call in its function: a launch-error check, the function's end, or another
//! statement. Callers in other files need it to tell whether the errors of the kernels a
//! function launches last are retrieved by someone.

use crate::cuda::CudaModel;
use crate::hash::HashSet;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

/// Calls that retrieve launch errors (or check them through a well-known macro).
pub const LAUNCH_CHECKS: &[&str] = &[
    "C10_CUDA_KERNEL_LAUNCH_CHECK",
    "cudaGetLastError",
    "cudaPeekAtLastError",
    "AT_CUDA_CHECK",
    "C10_CUDA_CHECK",
    "CUDA_CHECK",
    "checkCudaErrors",
    "gpuErrchk",
    "getLastCudaError",
    "CUDA_POST_KERNEL_CHECK",
    "CUDA_KERNEL_LOOP_CHECK",
    "cudaCheckError",
    "CHECK_CUDA_ERROR",
    "TF_CHECK_OK",
    "GPU_LAUNCH_KERNEL",
    "hipGetLastError",
    "cudaDeviceSynchronize",
];

/// The longest statement text kept for [`CallTail::Other`].
const MAX_TEXT: usize = 512;
/// Enclosing statements walked out of.
const MAX_UP: usize = 12;
/// Expression levels walked up from a call to the statement that holds it.
const MAX_DEPTH: usize = 64;

/// What follows a call, in the function that makes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum CallTail {
    /// Nothing: the call ends its function (or is followed by a `return`), so the caller's
    /// caller may check.
    #[default]
    End,
    /// A launch-error check follows the call, or holds it (`CUDA_CHECK(launch_foo(…))`); also
    /// where the statement around the call cannot be told (no question goes through it).
    Checked,
    /// Another statement follows (its text, cut at a character boundary).
    Other(Box<str>),
}

/// Does the text name a known check, one of `helpers`, or a macro or function whose name
/// says it checks CUDA errors (`CHECK_CUDA_KERNEL_LAUNCH()`, `cudaCheckError()`)? The headers
/// of a caller in another file are not read, so its own helpers are known by name only; a
/// name that may be a check counts as one (the question is then left unanswered).
pub fn names_check(text: &str, helpers: &HashSet<&str>) -> bool {
    // Every known check and every check-like name holds one of these: most statements hold
    // none, and their names are not read.
    let maybe = gpulint_source::contains_any(
        text.as_bytes(),
        &[
            "heck",
            "HECK",
            "rror",
            "RROR",
            "rrchk",
            "ynchronize",
            "LAUNCH_KERNEL",
        ],
    );
    if maybe && LAUNCH_CHECKS.iter().any(|c| text.contains(c)) {
        return true;
    }
    (maybe || !helpers.is_empty())
        && crate::cuda::guards::name_tokens(text)
            .iter()
            .any(|t| helpers.contains(t) || (maybe && check_like(t)))
}

fn check_like(name: &str) -> bool {
    (name.contains("heck") || name.contains("HECK"))
        && [
            "CUDA", "Cuda", "cuda", "LAUNCH", "Launch", "KERNEL", "Kernel", "ERR", "Err", "HIP",
        ]
        .iter()
        .any(|w| name.contains(w))
}

fn statement_like(kind: &str) -> bool {
    (kind.ends_with("_statement") && kind != "compound_statement")
        || kind == "declaration"
        || kind.starts_with("preproc_")
}

/// What follows `call` in its function (`helpers`: the file's own error-checking helpers).
pub fn call_tail<'t>(model: &CudaModel<'t>, call: Node<'t>, helpers: &HashSet<&str>) -> CallTail {
    let parents = model.parents();
    // The statement that holds the call: a check around the call checks it.
    let mut node = call;
    let mut hops = 0;
    while !statement_like(node.kind_name()) {
        hops += 1;
        if hops > MAX_DEPTH {
            // Nested too deep to tell: no question is asked through this call.
            return CallTail::Checked;
        }
        match parents.parent(node) {
            Some(p) if p.kind_name() != "function_definition" => node = p,
            _ => return CallTail::End,
        }
    }
    // `CUDA_CHECK(launch_foo(…));`, `auto e = launch_foo(…);` (a statement that holds a
    // block is not read whole).
    if matches!(
        node.kind_name(),
        "expression_statement" | "declaration" | "return_statement"
    ) && names_check(model.text(node), helpers)
    {
        return CallTail::Checked;
    }
    for _ in 0..MAX_UP {
        let Some(parent) = parents.parent(node) else {
            return CallTail::End;
        };
        if parent.kind_name() == "function_definition" {
            return CallTail::End;
        }
        if statement_like(node.kind_name())
            && matches!(parent.kind_name(), "compound_statement" | "case_statement")
        {
            let mut next = node.next_named_sibling();
            while let Some(n) = next.filter(|n| n.kind_name() == "comment") {
                next = n.next_named_sibling();
            }
            if let Some(n) = next {
                let t = model.text(n);
                if names_check(t, helpers) {
                    return CallTail::Checked;
                }
                match n.kind_name() {
                    "return_statement" => return CallTail::End,
                    // `case …: foo(); break;`: what follows the `switch`.
                    "break_statement" => {
                        let switch = parents
                            .ancestors(n)
                            .take(MAX_DEPTH)
                            .take_while(|a| a.kind_name() != "function_definition")
                            .find(|a| a.kind_name() == "switch_statement");
                        match switch {
                            Some(s) => {
                                node = s;
                                continue;
                            }
                            None => return CallTail::End,
                        }
                    }
                    _ => {}
                }
                let mut cut = t.len().min(MAX_TEXT);
                while !t.is_char_boundary(cut) {
                    cut -= 1;
                }
                return CallTail::Other(t[..cut].into());
            }
        }
        node = parent;
    }
    CallTail::End
}

#[cfg(test)]
mod tests {
    use super::CallTail;
    use crate::cuda::CudaBuilder;
    use crate::Options;
    use gpulint_syntax::{parse, Lang};

    /// The tail of each call of `launch_x` in `src`, in order.
    fn tails(src: &str) -> Vec<CallTail> {
        let tree = parse(Lang::Cuda, src).unwrap();
        let facts = CudaBuilder::glue_facts_of(src, &tree, &Options::default());
        facts
            .fns
            .iter()
            .flat_map(|f| f.calls.iter())
            .filter(|c| c.callee == "launch_x")
            .map(|c| c.tail.clone())
            .collect()
    }

    #[test]
    fn what_follows_a_call() {
        let src = r#"
#define FINISH() do { cudaError_t e = cudaGetLastError(); } while (0)
void launch_x(float* y, int n);
at::Tensor ends(at::Tensor t) { launch_x(t.data_ptr<float>(), 1); }
at::Tensor returns(at::Tensor t) { launch_x(t.data_ptr<float>(), 1); return t; }
at::Tensor checked(at::Tensor t) { launch_x(t.data_ptr<float>(), 1); C10_CUDA_KERNEL_LAUNCH_CHECK(); return t; }
at::Tensor helper(at::Tensor t) { launch_x(t.data_ptr<float>(), 1); /* done */ FINISH(); return t; }
at::Tensor nested(at::Tensor t) { if (t.numel()) { launch_x(t.data_ptr<float>(), 1); } t.zero_(); return t; }
at::Tensor wrapped(at::Tensor t) { AT_CUDA_CHECK(launch_x(t.data_ptr<float>(), 1)); return t; }
at::Tensor cased(at::Tensor t, int m) {
    switch (m) { case 0: launch_x(t.data_ptr<float>(), 1); break; }
    AT_CUDA_CHECK(cudaGetLastError());
    return t;
}
"#;
        let got = tails(src);
        assert_eq!(
            got,
            vec![
                CallTail::End,
                CallTail::End,
                CallTail::Checked,
                CallTail::Checked,
                CallTail::Other("t.zero_();".into()),
                CallTail::Checked,
                CallTail::Checked,
            ]
        );
    }

    #[test]
    fn check_like_names() {
        let none = Default::default();
        assert!(super::names_check("CHECK_CUDA_KERNEL_LAUNCH();", &none));
        assert!(super::names_check("cudaCheckError();", &none));
        let finish = ["finish"].into_iter().collect();
        assert!(super::names_check("finish();", &finish));
        assert!(!super::names_check("y.zero_();", &none));
        assert!(!super::names_check("TORCH_CHECK(n > 0);", &none));
    }
}
