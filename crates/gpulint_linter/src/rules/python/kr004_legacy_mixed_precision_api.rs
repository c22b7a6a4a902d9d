//! KR004: removed or legacy mixed-precision APIs.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::Severity;
use gpulint_semantic::python::pins::{self, TfPins};
use gpulint_semantic::python::tf::{argument, normalize};
use gpulint_semantic::python::PythonModel;
use gpulint_syntax::named_children;
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;
use std::sync::Arc;
use tree_sitter::Node;

declare_rule! {
    /// ## What it does
    /// Finds calls to the experimental mixed-precision API of TF 2.1–2.3
    /// (`tf.keras.mixed_precision.experimental.set_policy`, `.Policy`, `.global_policy`,
    /// `.LossScaleOptimizer`, however it was imported) and to the graph rewrite
    /// `tf.train.experimental.enable_mixed_precision_graph_rewrite`. Calls under a version
    /// check (`if ... version ...`, `hasattr(...)`) or in a `try` whose `except
    /// AttributeError`/`ImportError` falls back to something else are left alone: that code
    /// supports old releases on purpose, and so is the graph rewrite in TF1 graph code
    /// (sessions, placeholders, `tf.contrib`), where it is the supported API. Code written for
    /// a TF 1.x release (it calls top-level names that only TF 1.x has, such as `tf.Session`,
    /// `tf.placeholder`, `tf.contrib`, or turns on `tf.enable_v2_behavior()` /
    /// `tf.enable_eager_execution()`, which TF 2 removed) is left alone entirely: these APIs
    /// are the current ones there.
    ///
    /// The rule reads the TensorFlow pin of the project (the nearest `requirements*.txt`,
    /// `pyproject.toml`, `setup.py`, `environment.yml` or `Dockerfile` declaring it; a
    /// Dockerfile declares it with `pip install` or with its base image, including NVIDIA's
    /// NGC containers `nvcr.io/nvidia/tensorflow:<YY.MM>-tf1-py3` / `-tf2-py3`, whose
    /// TensorFlow is taken from NVIDIA's release notes):
    /// - pinned below 2.4, where the experimental API is the current one: silent;
    /// - pinned at or above the release that removed the call (2.9 for
    ///   `tf.keras.mixed_precision.experimental`, 2.6 for
    ///   `tf.train.experimental.enable_mixed_precision_graph_rewrite`): the message says so,
    ///   as a warning, since the script then fails at start-up;
    /// - otherwise (2.4 up to the removal, or no pin found): info, the API is deprecated.
    ///
    /// ## Why is this risky?
    /// The `experimental` namespace is deprecated from TF 2.4 ("A deprecated dtype policy";
    /// `set_policy` became `set_global_policy`) and removed in TF 2.9, so the script dies with
    /// an `AttributeError` at start-up on a current TensorFlow. The graph rewrite
    /// `tf.train.experimental.enable_mixed_precision_graph_rewrite` was removed in TF 2.6
    /// (only `tf.compat.v1.mixed_precision.enable_mixed_precision_graph_rewrite` remains). Worse, a half-migrated
    /// configuration or a fallback that silently drops mixed precision runs with a batch size
    /// chosen for float16 and runs out of GPU memory. The graph rewrite is TF1 machinery that
    /// is removed from the TF2 API.
    ///
    /// ## Example
    /// ```python
    /// import tensorflow as tf
    ///
    /// tf.keras.mixed_precision.experimental.set_policy("mixed_float16")
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// import tensorflow as tf
    ///
    /// tf.keras.mixed_precision.set_global_policy("mixed_float16")
    /// ```
    ///
    /// ## References
    /// - `tf.keras.mixed_precision.experimental` (TF 2.7, "A deprecated dtype policy"):
    ///   <https://www.tensorflow.org/versions/r2.7/api_docs/python/tf/keras/mixed_precision/experimental>
    /// - TensorFlow guide "Mixed precision": <https://www.tensorflow.org/guide/mixed_precision>
    /// - TensorFlow 2.9.0 release notes ("The `tf.keras.mixed_precision.experimental` API has
    ///   been removed") and 2.6.0 release notes (`enable_mixed_precision_graph_rewrite`
    ///   removed from `tf.train.experimental`):
    ///   <https://github.com/tensorflow/tensorflow/releases/tag/v2.9.0>,
    ///   <https://github.com/tensorflow/tensorflow/releases/tag/v2.6.0>
    /// - legacyai/tf-transformers#43 (`AttributeError` after TF 2.4):
    ///   <https://github.com/legacyai/tf-transformers/issues/43>
    pub static KR004 = {
        code: "KR004",
        name: "legacy-mixed-precision-api",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Info,
        summary: "Removed or legacy mixed-precision API",
        kinds: &[],
        needles: &["tensorflow", "keras"],
        also_needles: &["mixed_precision"],
        options: &[],
    };
}

pub struct LegacyMixedPrecisionApi;

/// The replacement for a legacy API, by its normalized qualified name.
fn replacement(q: &str) -> Option<&'static str> {
    Some(match q {
        "keras.mixed_precision.experimental.set_policy" => {
            "`tf.keras.mixed_precision.set_global_policy('mixed_float16')`"
        }
        "keras.mixed_precision.experimental.Policy" => "`tf.keras.mixed_precision.Policy`",
        "keras.mixed_precision.experimental.global_policy" => {
            "`tf.keras.mixed_precision.global_policy()`"
        }
        "keras.mixed_precision.experimental.LossScaleOptimizer" => {
            "`tf.keras.mixed_precision.LossScaleOptimizer(optimizer)` (its arguments changed: `dynamic=`, `initial_scale=`)"
        }
        "tensorflow.train.experimental.enable_mixed_precision_graph_rewrite"
        | "tensorflow.train.experimental.enable_mixed_precision_graph_rewrite_v1" => {
            "`tf.keras.mixed_precision.set_global_policy('mixed_float16')` and, in a custom loop, `tf.keras.mixed_precision.LossScaleOptimizer`"
        }
        _ => return None,
    })
}

/// Code that handles old and new releases on purpose: under a version check, or in a `try`
/// whose `AttributeError`/`ImportError` handler does something else.
fn version_handled(m: &PythonModel<'_>, call: Node<'_>) -> bool {
    let mut cur = call;
    for _ in 0..64 {
        let Some(p) = m.parent(cur) else { return false };
        match p.kind_name() {
            "if_statement" | "elif_clause" | "conditional_expression" => {
                let cond = p
                    .field("condition")
                    .map(|c| m.text(c))
                    .unwrap_or_else(|| m.text(p));
                if cond.contains("version") || cond.contains("hasattr") || cond.contains("VERSION")
                {
                    return true;
                }
            }
            "try_statement" => {
                let fallback = named_children(p)
                    .filter(|c| c.kind_name() == "except_clause")
                    .any(|h| {
                        let t = m.text(h);
                        let head = t.split(':').next().unwrap_or("");
                        (head.contains("AttributeError") || head.contains("ImportError"))
                            && !t.trim_end().ends_with("pass")
                    });
                if fallback {
                    return true;
                }
            }
            "function_definition" | "module" => return false,
            _ => {}
        }
        cur = p;
    }
    false
}

impl Rule for LegacyMixedPrecisionApi {
    fn meta(&self) -> &'static RuleMeta {
        &KR004
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.python();
        if !m.imports_tensorflow() && !m.imports_keras() {
            return;
        }
        let mut pins_cache: Option<Option<Arc<TfPins>>> = None;
        for &(call, _) in &m.calls {
            let Some(raw) = m.call_name(call) else {
                continue;
            };
            let q = normalize(&raw);
            let Some(fix) = replacement(&q) else {
                continue;
            };
            // `set_policy("float32")`, `set_policy(policy)`: the replacement keeps the
            // argument the code passes.
            let fix = match argument(call, 0, "policy", m).map(|a| m.text(a)) {
                Some(arg)
                    if q == "keras.mixed_precision.experimental.set_policy"
                        && arg.len() <= 60
                        && !arg.contains('\n') =>
                {
                    format!("`tf.keras.mixed_precision.set_global_policy({arg})`")
                }
                _ => fix.to_string(),
            };
            if version_handled(m, call) {
                continue;
            }
            // The graph rewrite is the right tool in TF1 graph code (pinned to TF 1.14/1.15),
            // and code written for TF 1.x has no newer API to move to.
            if (q.starts_with("tensorflow.train.") && m.tf().graph_mode) || m.tf().targets_tf1 {
                continue;
            }
            // The project's TensorFlow pin, read once, only when something is to be reported.
            let pins = pins_cache
                .get_or_insert_with(|| pins::tensorflow(&ctx.file.path, &ctx.settings.root))
                .clone();
            // Before TF 2.4 the experimental API is the current one.
            if pins.as_ref().is_some_and(|p| p.all(|v| v < (2, 4))) {
                continue;
            }
            let graph_rewrite = q.starts_with("tensorflow.train.");
            // The compat.v1 spelling of the rewrite outlived the TF2 one.
            let removed_in = match (graph_rewrite, raw.starts_with("tensorflow.compat.")) {
                (false, _) => Some((2, 9)),
                (true, false) => Some((2, 6)),
                (true, true) => None,
            };
            let callee = call.field("function").map(|f| ctx.text(f)).unwrap_or("");
            if let Some((p, removed)) = removed_in.and_then(|r| {
                let p: Arc<TfPins> = pins.clone()?;
                p.all(|v| v >= r).then_some((p, r))
            }) {
                ctx.report(
                    ctx.diagnostic(
                        call,
                        format!(
                            "`{callee}` was removed in TensorFlow {}.{}, and the project installs TensorFlow {} ({}): AttributeError at start-up",
                            removed.0,
                            removed.1,
                            p.describe(),
                            p.cite
                        ),
                    )
                    .severity(Severity::Warning)
                    .primary_label("does not exist in the pinned TensorFlow")
                    .help(format!("use {fix}")),
                );
                continue;
            }
            let (msg, label) = if graph_rewrite && removed_in.is_none() {
                (
                    format!("`{callee}` is the TF1 mixed-precision graph rewrite, deprecated: only its `tf.compat.v1` spellings are left in TF2"),
                    "legacy graph rewrite, superseded by the Keras mixed-precision API",
                )
            } else if graph_rewrite {
                (
                    format!("`{callee}` is the TF1 mixed-precision graph rewrite, deprecated and removed from the TF2 API in 2.6"),
                    "legacy graph rewrite: AttributeError on TF2, or mixed precision silently not applied",
                )
            } else {
                (
                    format!("`{callee}` is the experimental mixed-precision API, deprecated since TF 2.4 and removed in 2.9"),
                    "raises AttributeError on current TensorFlow",
                )
            };
            let msg = match &pins {
                Some(p) => format!(
                    "{msg} (the project allows TensorFlow {}: {})",
                    p.describe(),
                    p.cite
                ),
                None => msg,
            };
            ctx.report(
                ctx.diagnostic(call, msg)
                    .primary_label(label)
                    .note("where the API is missing the script stops at start-up; a fallback that drops mixed precision runs the batch size chosen for float16 in float32, which may no longer fit in GPU memory")
                    .help(format!("use {fix}")),
            );
        }
    }
}
