//! TF005: unknown key in `tf.config.optimizer.set_experimental_options`.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::python::string_literal;
use gpulint_semantic::python::tf::{argument, normalize};
use gpulint_syntax::named_children;
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;

declare_rule! {
    /// ## What it does
    /// Finds `tf.config.optimizer.set_experimental_options({...})` (also through
    /// `tf.compat.v1`) whose dictionary, written in the call or bound to a name just before,
    /// has a string key that the grappler configuration does not read. The valid keys are
    /// those `context.py` looks up: `layout_optimizer`, `constant_folding`,
    /// `shape_optimization`, `remapping`, `arithmetic_optimization`, `dependency_optimization`,
    /// `loop_optimization`, `function_optimization`, `debug_stripper`,
    /// `disable_model_pruning`, `scoped_allocator_optimization`, `pin_to_host_optimization`,
    /// `implementation_selector`, `auto_mixed_precision`, `use_plugin_optimizers`,
    /// `disable_meta_optimizer`, `auto_mixed_precision_onednn_bfloat16`,
    /// `auto_mixed_precision_mkl`, `min_graph_nodes` and `auto_parallel`. Keys that newer
    /// releases add can be allowed with the `extra-keys` option. Also finds the options
    /// passed as keyword arguments (`set_experimental_options(auto_mixed_precision=True)`):
    /// the function takes a single dict, so that call raises `TypeError` (an error).
    ///
    /// ## Why is this risky?
    /// The options are merged into a dictionary and only the known keys are looked up: an
    /// unknown key, such as `enable_mixed_precision_training` from a widely copied snippet, is
    /// **silently ignored**. The script believes mixed precision or a memory optimization is
    /// on when nothing changed, and a batch size chosen for it runs out of GPU memory.
    ///
    /// ## Example
    /// ```python
    /// import tensorflow as tf
    ///
    /// tf.config.optimizer.set_experimental_options({"enable_mixed_precision_training": True})
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// import tensorflow as tf
    ///
    /// tf.config.optimizer.set_experimental_options({"auto_mixed_precision": True})
    /// ```
    ///
    /// ## References
    /// - `tf.config.optimizer.set_experimental_options` (Args → valid keys):
    ///   <https://www.tensorflow.org/api_docs/python/tf/config/optimizer/set_experimental_options>
    /// - `Context.config` in `tensorflow/python/eager/context.py` (the `rewriter_toggle` and
    ///   `rewriter_bool` look-ups):
    ///   <https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/eager/context.py>
    pub static TF005 = {
        code: "TF005",
        name: "unknown-optimizer-option",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Warning,
        summary: "Unknown key in tf.config.optimizer.set_experimental_options is silently ignored",
        kinds: &[],
        needles: &["tensorflow", "tf_keras"],
        also_needles: &["set_experimental_options"],
        options: &[RuleOption {
            key: "extra-keys",
            kind: OptionKind::StringList,
            default: "[]",
            doc: "Further option keys to accept (keys added by newer TensorFlow releases).",
        }],
    };
}

use crate::rule::{OptionKind, RuleOption};

pub struct UnknownOptimizerOption;

const VALID: &[&str] = &[
    "layout_optimizer",
    "constant_folding",
    "shape_optimization",
    "remapping",
    "arithmetic_optimization",
    "dependency_optimization",
    "loop_optimization",
    "function_optimization",
    "debug_stripper",
    "disable_model_pruning",
    "scoped_allocator_optimization",
    "pin_to_host_optimization",
    "implementation_selector",
    "auto_mixed_precision",
    "use_plugin_optimizers",
    "disable_meta_optimizer",
    "auto_mixed_precision_onednn_bfloat16",
    "auto_mixed_precision_mkl",
    "min_graph_nodes",
    "auto_parallel",
];

/// The valid key closest to `key` (shared words), for the help line.
fn closest(key: &str) -> Option<&'static str> {
    let words: Vec<&str> = key.split('_').filter(|w| w.len() > 2).collect();
    VALID
        .iter()
        .map(|v| (v.split('_').filter(|w| words.contains(w)).count(), *v))
        .filter(|(n, _)| *n > 0)
        .max_by_key(|(n, v)| (*n, std::cmp::Reverse(v.len())))
        .map(|(_, v)| v)
}

impl Rule for UnknownOptimizerOption {
    fn meta(&self) -> &'static RuleMeta {
        &TF005
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.python();
        if !m.imports_tensorflow() {
            return;
        }
        let extra = ctx.option_strings("extra-keys");
        for &(call, _) in &m.calls {
            let Some(q) = m.call_name(call) else {
                continue;
            };
            if normalize(&q) != "tensorflow.config.optimizer.set_experimental_options" {
                continue;
            }
            // `set_experimental_options(enable_mixed_precision_training=True)`: the function
            // takes one dict, `options`; any other keyword raises a TypeError.
            let keywords = call.field("arguments").into_iter().flat_map(named_children);
            for kw in keywords.filter(|a| a.kind_name() == "keyword_argument") {
                let Some(name) = kw.field("name").map(|n| ctx.text(n)) else {
                    continue;
                };
                if name == "options" {
                    continue;
                }
                let callee = call
                    .field("function")
                    .map(|f| ctx.text(f))
                    .unwrap_or("set_experimental_options");
                ctx.report(
                    ctx.diagnostic(kw, format!("`{callee}` takes one dict of options, not keyword arguments: `{name}=` raises TypeError"))
                        .severity(Severity::Error)
                        .primary_label("TypeError: set_experimental_options() got an unexpected keyword argument")
                        .help(format!("pass a dict: `{callee}({{\"{name}\": ...}})` with a key grappler reads (for mixed precision in TF2, `tf.keras.mixed_precision.set_global_policy('mixed_float16')`)")),
                );
            }
            let Some(arg) = argument(call, 0, "options", m) else {
                continue;
            };
            let dict = match arg.kind_name() {
                "dictionary" => Some(arg),
                "identifier" => m
                    .value_of_name(arg, m.text(arg))
                    .filter(|v| v.kind_name() == "dictionary"),
                _ => None,
            };
            let Some(dict) = dict else {
                continue;
            };
            for pair in named_children(dict).filter(|p| p.kind_name() == "pair") {
                let Some(k) = pair.field("key") else {
                    continue;
                };
                let Some(key) = string_literal(k, m.source) else {
                    continue;
                };
                if VALID.contains(&key.as_str()) || extra.contains(&key) {
                    continue;
                }
                let callee = call
                    .field("function")
                    .map(|f| ctx.text(f))
                    .unwrap_or("set_experimental_options");
                let help = match closest(&key) {
                    Some(v) => format!("use a valid key (did you mean `{v}`?); for mixed precision in TF2 prefer `tf.keras.mixed_precision.set_global_policy('mixed_float16')`"),
                    None => format!("use one of the valid keys: {}", VALID.join(", ")),
                };
                let mut d = ctx
                    .diagnostic(k, format!("`{key}` is not an option of `{callee}`: TensorFlow silently ignores it"))
                    .primary_label("unknown key, ignored without an error");
                if arg.id() != dict.id() {
                    d = d.with_label(Span::of(&arg), "the options are passed here");
                }
                ctx.report(
                    d.note("only the keys that grappler's configuration reads take effect; the setting the script relies on is not applied")
                        .help(help),
                );
            }
        }
    }
}
