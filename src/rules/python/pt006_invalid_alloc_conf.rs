//! PT006: invalid or late `PYTORCH_CUDA_ALLOC_CONF` / `PYTORCH_ALLOC_CONF`.

use crate::checker::Context;
use crate::declare_rule;
use crate::diagnostic::{Severity, Span};
use crate::lang::Lang;
use crate::rule::{Rule, RuleLang, RuleMeta};
use crate::semantic::named_children;
use crate::semantic::python::string_literal;
use crate::semantic::python::torch::{alloc_conf_problems, ConfProblem, Runtime};
use crate::semantic::NodeExt;
use tree_sitter::Node;

declare_rule! {
    /// ## What it does
    /// Checks the PyTorch CUDA caching-allocator configuration written from Python:
    /// `os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "..."` (also `PYTORCH_ALLOC_CONF`, `setdefault`,
    /// `update`, `putenv`) and `torch.cuda.memory._set_allocator_settings("...")`. The value is
    /// split into `key:value` options; unknown keys (`max_split_size:128`, a typo of
    /// `max_split_size_mb`) and malformed values (`expandable_segments:1`,
    /// `garbage_collection_threshold:1.5`, `backend:async`) are errors. An environment write
    /// that runs after PyTorch has initialized CUDA (a `.cuda()`, `.to("cuda")`,
    /// `device="cuda"` or `torch.cuda.*` call earlier in execution order) is a warning. Vendor
    /// variables (`PYTORCH_NPU_ALLOC_CONF`, ROCm's `PYTORCH_HIP_ALLOC_CONF`) are not checked.
    ///
    /// ## Why is this risky?
    /// The allocator parses the variable when CUDA is initialized, and an unknown option raises
    /// `RuntimeError: Unrecognized CachingAllocator option: <key>` at the first CUDA
    /// allocation: the run dies before its first step. A valid value written after CUDA was
    /// initialized is ignored, and the process keeps fragmenting or running out of memory
    /// exactly as before.
    ///
    /// ## Example
    /// ```python
    /// import os
    /// os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "max_split_size:128"
    /// import torch
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// import os
    /// os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "max_split_size_mb:128,expandable_segments:True"
    /// import torch
    /// ```
    ///
    /// ## References
    /// - PyTorch "CUDA semantics", *Optimizing memory usage with `PYTORCH_ALLOC_CONF`*
    ///   (`PYTORCH_CUDA_ALLOC_CONF` "is its alias and is provided only for backward
    ///   compatibility"): <https://pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf>
    /// - The option parser, `c10/cuda/CUDAAllocatorConfig.cpp` (newer:
    ///   `c10/core/AllocatorConfig.cpp`), "Unrecognized CachingAllocator option":
    ///   <https://github.com/pytorch/pytorch/blob/main/c10/cuda/CUDAAllocatorConfig.cpp>
    pub static PT006 = {
        code: "PT006",
        name: "invalid-alloc-conf",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Error,
        summary: "Invalid or late `PYTORCH_CUDA_ALLOC_CONF`",
        kinds: &[],
        needles: &["ALLOC_CONF", "_set_allocator_settings"],
        options: &[],
    };
}

pub struct InvalidAllocConf;

const VARS: &[&str] = &["PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"];

impl Rule for InvalidAllocConf {
    fn meta(&self) -> &'static RuleMeta {
        &PT006
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.python();
        let mut settings: Vec<(Node<'_>, String, bool)> = Vec::new();
        for w in m.env_writes() {
            if VARS.contains(&w.key.as_str()) {
                if let Some(v) = &w.value {
                    settings.push((w.node, v.clone(), true));
                }
            }
        }
        for &(call, _) in &m.calls {
            let is_setter = call
                .field("function")
                .and_then(|f| m.qualified_name(f))
                .is_some_and(|q| q.ends_with("cuda.memory._set_allocator_settings"));
            if !is_setter {
                continue;
            }
            let value = call
                .field("arguments")
                .and_then(|a| named_children(a).next())
                .and_then(|a| string_literal(a, m.source));
            if let Some(v) = value {
                settings.push((call, v, false));
            }
        }
        for (node, value, is_env) in settings {
            let problems = alloc_conf_problems(&value);
            if let Some(p) = problems.first() {
                let (msg, label) = match p {
                    ConfProblem::UnknownKey(k) => (
                        format!("unknown CUDA caching-allocator option `{k}` in `{value}`"),
                        format!("raises RuntimeError: Unrecognized CachingAllocator option: {k}"),
                    ),
                    ConfProblem::BadValue {
                        key,
                        value: v,
                        expected,
                    } => (
                        format!(
                            "invalid value `{v}` for allocator option `{key}`: expected {expected}"
                        ),
                        "the allocator rejects this at CUDA initialization".to_string(),
                    ),
                };
                let mut d = ctx.diagnostic(node, msg).primary_label(label);
                if let ConfProblem::UnknownKey(k) = p {
                    if let Some(s) = suggestion(k) {
                        d = d.help(format!("did you mean `{s}`?"));
                    } else {
                        d = d.help("use the documented options: backend, max_split_size_mb, roundup_power2_divisions, garbage_collection_threshold, expandable_segments, ...");
                    }
                } else {
                    d = d.help("fix the value; the options are documented in the PyTorch CUDA semantics notes");
                }
                ctx.report(d.note("the run fails at its first CUDA allocation"));
                continue;
            }
            if !is_env || !m.imports_torch() {
                continue;
            }
            if let Some(init) = m.torch().init_before(m.order(), node, Runtime::TorchCuda) {
                let d = ctx
                    .diagnostic(
                        node,
                        "the CUDA allocator configuration is set after PyTorch initialized CUDA, so it is ignored",
                    )
                    .severity(Severity::Warning)
                    .primary_label("too late: the caching allocator already read its configuration")
                    .with_label(Span::of(&init), "CUDA is initialized here")
                    .help("set the variable at the top of the script, before any tensor or model is moved to the GPU (or in the launcher's environment)");
                ctx.report(d);
            }
        }
    }
}

/// The documented key closest to a misspelled one.
fn suggestion(key: &str) -> Option<&'static str> {
    let k = key.to_ascii_lowercase();
    crate::semantic::python::torch::ALLOC_CONF_KEYS
        .iter()
        .copied()
        .find(|c| {
            *c == k
                || c.starts_with(&k)
                || k.starts_with(c)
                || c.replace('_', "") == k.replace('_', "")
        })
}
