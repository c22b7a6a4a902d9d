//! PT006: invalid or late `PYTORCH_CUDA_ALLOC_CONF` / `PYTORCH_ALLOC_CONF`.

use crate::context::Context;
use crate::declare_rule;
use crate::manifest_context::ManifestContext;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::{Diagnostic, Severity, Span};
use gpulint_semantic::alloc_conf::{self, Minor, Problem};
use gpulint_semantic::python::project;
use gpulint_semantic::python::string_literal;
use gpulint_semantic::python::torch::Runtime;
use gpulint_syntax::named_children;
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;
use std::path::Path;
use tree_sitter::Node;

declare_rule! {
    /// ## What it does
    /// Checks the PyTorch CUDA caching-allocator configuration wherever the project writes it:
    /// from Python (`os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "..."`, also `PYTORCH_ALLOC_CONF`,
    /// `setdefault`, `update`, `putenv`, and `torch.cuda.memory._set_allocator_settings("...")`),
    /// in a Dockerfile (`ENV PYTORCH_CUDA_ALLOC_CONF=...`), a conda environment's `variables:`,
    /// and launcher scripts and `.env` files (`export PYTORCH_CUDA_ALLOC_CONF=...`,
    /// `PYTORCH_CUDA_ALLOC_CONF=... python train.py`, `set ...` in a `.bat`). The value is split
    /// into `key:value` options and the finding points at the offending key:
    ///
    /// - unknown keys (`max_split_size:128`, a typo of `max_split_size_mb`) and malformed values
    ///   (`expandable_segments:1`, `garbage_collection_threshold:1.5`, `backend:async`) are
    ///   errors;
    /// - a key newer than the torch the repository pins is an error: `expandable_segments`
    ///   needs torch 2.1. The pin is read from the checked Dockerfile itself or from the
    ///   nearest requirements file, `pyproject.toml`, conda environment or Dockerfile between
    ///   the file and the repository root; when the pin admits any release that knows the key,
    ///   or no pin is found, nothing is reported;
    /// - `max_split_size_mb`, `roundup_power2_divisions` or `garbage_collection_threshold`
    ///   together with `backend:cudaMallocAsync` is a warning: that backend ignores them;
    /// - an environment write from Python that runs after PyTorch has initialized CUDA (a
    ///   `.cuda()`, `.to("cuda")`, `device="cuda"` or `torch.cuda.*` call earlier in execution
    ///   order) is a warning.
    ///
    /// Values assembled from other variables (`$EXTRA`, `%CONF%`) are not judged, and vendor
    /// variables (`PYTORCH_NPU_ALLOC_CONF`, ROCm's `PYTORCH_HIP_ALLOC_CONF`) are not checked.
    ///
    /// ## Why is this risky?
    /// The allocator parses the variable when CUDA is initialized, and an unknown option raises
    /// `RuntimeError: Unrecognized CachingAllocator option: <key>` at the first CUDA
    /// allocation: the run dies before its first step. A release older than an option rejects
    /// it the same way, so a configuration copied from a newer guide kills a job on an older
    /// pinned torch. Under `backend:cudaMallocAsync` the native allocator's tuning options are
    /// ignored, and a valid value written after CUDA was initialized is ignored too: the
    /// process keeps fragmenting or running out of memory exactly as before.
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
    /// - `expandable_segments` first accepted in torch 2.1 (secondary sources; older releases
    ///   reject it as unrecognized)
    pub static PT006 = {
        code: "PT006",
        name: "invalid-alloc-conf",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Error,
        summary: "Invalid or late `PYTORCH_CUDA_ALLOC_CONF`",
        kinds: &[],
        needles: &["ALLOC_CONF", "_set_allocator_settings", "environ", "putenv"],
        options: &[],
    };
}

pub struct InvalidAllocConf;

const VARS: &[&str] = &["PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"];

/// The torch release lines the configuration is judged against, and how to cite them.
struct TorchContext {
    minors: Vec<Minor>,
    /// `` `torch==1.13.1` in requirements.txt ``.
    cite: String,
    /// The pin's span when it is in the checked file itself.
    span: Option<Span>,
}

fn project_torch(file: &Path, root: &Path) -> Option<TorchContext> {
    let pin = project::project_torch(file, root)?;
    let shown = std::env::current_dir()
        .ok()
        .and_then(|cwd| pin.path.strip_prefix(cwd).ok().map(Path::to_path_buf))
        .unwrap_or_else(|| pin.path.clone());
    Some(TorchContext {
        minors: pin.minors,
        cite: format!("`{}` in {}", pin.text, shown.display()),
        span: None,
    })
}

/// The torch `value` is judged against. The pinned torch matters only for keys some releases
/// lack: the project's manifests are read only then, once, into `torch`.
fn torch_for<'a>(
    value: &str,
    torch: &'a mut Option<Option<TorchContext>>,
    file: &Path,
    root: &Path,
) -> Option<&'a TorchContext> {
    let versioned = alloc_conf::check(value, Some(&[(0, 0)]))
        .iter()
        .any(|f| matches!(f.problem, Problem::TooNew { .. }));
    if !versioned {
        return None;
    }
    torch
        .get_or_insert_with(|| project_torch(file, root))
        .as_ref()
}

/// The diagnostics for one configuration value written at `span` (`raw` is the source text
/// there); `None` when it is fine.
fn findings(
    value: &str,
    span: Span,
    raw: &str,
    torch: Option<&TorchContext>,
) -> Option<Diagnostic> {
    let found = alloc_conf::check(value, torch.map(|t| t.minors.as_slice()));
    // The first fatal problem, else the first ignored option.
    let f = found
        .iter()
        .find(|f| f.is_fatal())
        .or_else(|| found.first())?;
    // Point at the key itself when the value is written verbatim.
    let at = alloc_conf::offset_in(raw, value)
        .map(|o| Span::new(span.start + o + f.range.start, span.start + o + f.range.end))
        .unwrap_or(span);
    let key = &f.key;
    let d = match &f.problem {
        Problem::UnknownKey => {
            let d = Diagnostic::new(
                &PT006,
                at,
                format!("unknown CUDA caching-allocator option `{key}` in `{value}`"),
            )
            .primary_label(format!(
                "raises RuntimeError: Unrecognized CachingAllocator option: {key}"
            ));
            match alloc_conf::suggestion(key) {
                Some(s) => d.help(format!("did you mean `{s}`?")),
                None => d.help("use the documented options: backend, max_split_size_mb, roundup_power2_divisions, garbage_collection_threshold, expandable_segments, ..."),
            }
        }
        Problem::BadValue { expected } => Diagnostic::new(
            &PT006,
            at,
            format!(
                "invalid value `{}` for allocator option `{key}`: expected {expected}",
                f.value
            ),
        )
        .primary_label("the allocator rejects this at CUDA initialization")
        .help("fix the value; the options are documented in the PyTorch CUDA semantics notes"),
        Problem::TooNew { since, newest } => {
            let t = torch?;
            let mut d = Diagnostic::new(
                &PT006,
                at,
                format!(
                    "allocator option `{key}` needs torch >= {}.{}, but the project pins {} (newest admitted: {}.{})",
                    since.0, since.1, t.cite, newest.0, newest.1
                ),
            )
            .primary_label(format!(
                "torch {}.{} raises RuntimeError: Unrecognized CachingAllocator option: {key}",
                newest.0, newest.1
            ))
            .help(format!(
                "upgrade torch to {}.{} or newer, or remove `{key}` from the configuration",
                since.0, since.1
            ));
            if let Some(s) = t.span {
                d = d.with_label(s, "torch pinned here");
            }
            d
        }
        Problem::IgnoredUnderAsync => {
            return Some(
                Diagnostic::new(
                    &PT006,
                    at,
                    format!("allocator option `{key}` is ignored with `backend:cudaMallocAsync`"),
                )
                .severity(Severity::Warning)
                .primary_label("has no effect: cudaMallocAsync does its own splitting and caching")
                .note("`max_split_size_mb`, `roundup_power2_divisions` and `garbage_collection_threshold` are options of the native caching allocator only")
                .help(format!("remove `{key}`, or drop `backend:cudaMallocAsync` to keep the native allocator")),
            )
        }
    };
    Some(d.note("the run fails at its first CUDA allocation"))
}

impl Rule for InvalidAllocConf {
    fn meta(&self) -> &'static RuleMeta {
        &PT006
    }

    fn reads_manifests(&self) -> bool {
        true
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
        if settings.is_empty() {
            return;
        }
        let mut torch: Option<Option<TorchContext>> = None;
        for (node, value, is_env) in settings {
            let t = torch_for(&value, &mut torch, &ctx.file.path, &ctx.settings.root);
            if let Some(d) = findings(&value, Span::of(&node), ctx.text(node), t) {
                let fatal = d.severity == Severity::Error;
                ctx.report(d);
                if fatal {
                    continue;
                }
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

    /// `ENV PYTORCH_CUDA_ALLOC_CONF=…` in a Dockerfile, conda `variables:`, and `export …` /
    /// `set …` in launcher scripts and `.env` files.
    fn check_manifest(&self, ctx: &mut ManifestContext<'_>) {
        let vars: Vec<&(String, String, Span)> = ctx
            .manifest
            .env_vars
            .iter()
            .filter(|(k, _, _)| VARS.contains(&k.as_str()))
            .collect();
        if vars.is_empty() {
            return;
        }
        // The torch of the file itself (a Dockerfile's `pip install torch==…`), else the
        // project's.
        let own = ctx
            .envs
            .iter()
            .flat_map(|e| e.torch())
            .fold(None::<TorchContext>, |acc, pin| match acc {
                Some(mut t) => {
                    t.minors.extend(pin.minors.iter().copied());
                    Some(t)
                }
                None => Some(TorchContext {
                    minors: pin.minors.clone(),
                    cite: pin.req.cite(),
                    span: pin.req.origin.is_none().then_some(pin.req.span),
                }),
            });
        let mut torch = own.map(Some);
        for (_, value, span) in vars {
            let t = torch_for(value, &mut torch, &ctx.file.path, &ctx.settings.root);
            let raw = ctx.file.text.get(span.start..span.end).unwrap_or("");
            if let Some(d) = findings(value, *span, raw, t) {
                ctx.report(d);
            }
        }
    }
}
