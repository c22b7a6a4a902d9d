//! KR004: removed or legacy mixed-precision APIs.

use crate::checker::Context;
use crate::declare_rule;
use crate::diagnostic::Severity;
use crate::lang::Lang;
use crate::rule::{Rule, RuleLang, RuleMeta};
use crate::semantic::named_children;
use crate::semantic::python::tf::normalize;
use crate::semantic::python::PythonModel;
use crate::semantic::NodeExt;
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
    /// (sessions, placeholders, `tf.contrib`), where it is the supported API.
    ///
    /// ## Why is this risky?
    /// The `experimental` namespace is deprecated from TF 2.4 ("A deprecated dtype policy";
    /// `set_policy` became `set_global_policy`) and later removed, so the script dies with an
    /// `AttributeError` at start-up on a current TensorFlow. Worse, a half-migrated
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
    /// - legacyai/tf-transformers#43 (`AttributeError` after TF 2.4):
    ///   <https://github.com/legacyai/tf-transformers/issues/43>
    pub static KR004 = {
        code: "KR004",
        name: "legacy-mixed-precision-api",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Info,
        summary: "Removed or legacy mixed-precision API",
        kinds: &[],
        needles: &["mixed_precision"],
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
        let Some(p) = cur.parent() else { return false };
        match p.kind() {
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
                    .filter(|c| c.kind() == "except_clause")
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
        for &(call, _) in &m.calls {
            let Some(raw) = m.call_name(call) else {
                continue;
            };
            let q = normalize(&raw);
            let Some(fix) = replacement(&q) else {
                continue;
            };
            if version_handled(m, call) {
                continue;
            }
            // The graph rewrite is the right tool in TF1 graph code (pinned to TF 1.14/1.15).
            if q.starts_with("tensorflow.train.") && m.tf().graph_mode {
                continue;
            }
            let callee = call.field("function").map(|f| ctx.text(f)).unwrap_or("");
            let (msg, label) = if q.starts_with("tensorflow.train.") {
                (
                    format!("`{callee}` is the TF1 mixed-precision graph rewrite, deprecated and removed from the TF2 API"),
                    "legacy graph rewrite: AttributeError on TF2, or mixed precision silently not applied",
                )
            } else {
                (
                    format!("`{callee}` is the experimental mixed-precision API, deprecated since TF 2.4 and removed later"),
                    "raises AttributeError on current TensorFlow",
                )
            };
            ctx.report(
                ctx.diagnostic(call, msg)
                    .primary_label(label)
                    .note("when the fallback drops mixed precision, the batch size chosen for float16 no longer fits in GPU memory")
                    .help(format!("use {fix}")),
            );
        }
    }
}
