//! TF001: GPU device configured after the TensorFlow runtime is initialized.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::python::project;
use gpulint_semantic::python::tf::{ConfigFn, Init};
use gpulint_semantic::python::PythonModel;
use gpulint_syntax::named_children;
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;
use std::collections::HashSet;
use tree_sitter::Node;

declare_rule! {
    /// ## What it does
    /// Finds device configuration calls (`tf.config.experimental.set_memory_growth`,
    /// `tf.config.set_visible_devices`, `tf.config.set_logical_device_configuration` and their
    /// `experimental` spellings) that run after TensorFlow has initialized its device runtime:
    /// after the first call that creates a tensor or a variable, builds a Keras layer or model,
    /// calls `compile`/`fit`/`predict`, creates a `tf.distribute` strategy or lists the logical
    /// devices. Execution order follows module-level code, `if __name__ == "__main__":` blocks
    /// and the local functions they call; `list_physical_devices` does not initialize anything.
    ///
    /// When the late call sits in a `try` whose `except` only passes, prints or logs, the error
    /// is swallowed: the finding is a warning, since nothing crashes but the configuration is
    /// silently lost. The guide's own example, which wraps the call the same way *before* any
    /// initialization, is fine.
    ///
    /// Module-level configuration that follows the import of a local module (next to the
    /// file, or in a distribution the project holds in a subfolder, such as `util/setup.py`
    /// installed with `pip install -e util`) whose own module-level code initializes the
    /// runtime (builds a layer, creates a tensor, or evaluates such a call as the default value
    /// of a parameter of a function or method defined at import) is reported too; code under
    /// that module's `if __name__ == "__main__":` does not run at import and does not count.
    ///
    /// ## Why is this risky?
    /// Once the runtime is initialized, `set_memory_growth` and the other calls raise
    /// `RuntimeError: Physical devices cannot be modified after being initialized`. The guide
    /// says to "use the following code prior to allocating any tensors or executing any ops".
    /// When the error is caught and ignored, TensorFlow keeps its default of mapping nearly all
    /// GPU memory, and other processes on the GPU fail with out-of-memory errors.
    ///
    /// ## Example
    /// ```python
    /// import tensorflow as tf
    ///
    /// model = tf.keras.Sequential([tf.keras.layers.Dense(10)])
    /// for gpu in tf.config.list_physical_devices("GPU"):
    ///     tf.config.experimental.set_memory_growth(gpu, True)
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// import tensorflow as tf
    ///
    /// for gpu in tf.config.list_physical_devices("GPU"):
    ///     tf.config.experimental.set_memory_growth(gpu, True)
    /// model = tf.keras.Sequential([tf.keras.layers.Dense(10)])
    /// ```
    ///
    /// ## References
    /// - TensorFlow guide "Use a GPU", *Limiting GPU memory growth*:
    ///   <https://www.tensorflow.org/guide/gpu#limiting_gpu_memory_growth>
    /// - `tf.config.experimental.set_memory_growth` (Raises `RuntimeError`):
    ///   <https://www.tensorflow.org/api_docs/python/tf/config/experimental/set_memory_growth>
    /// - `Context.set_memory_growth` in `tensorflow/python/eager/context.py`:
    ///   <https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/eager/context.py>
    pub static TF001 = {
        code: "TF001",
        name: "memory-config-after-init",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Error,
        summary: "GPU device configured after the TensorFlow runtime is initialized",
        kinds: &[],
        needles: &["tensorflow", "keras"],
        options: &[],
    };
}

pub struct MemoryConfigAfterInit;

impl Rule for MemoryConfigAfterInit {
    fn meta(&self) -> &'static RuleMeta {
        &TF001
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.python();
        if !m.imports_tensorflow() {
            return;
        }
        let tf = m.tf();
        if tf.config_calls.is_empty() {
            return;
        }
        let order = m.order();
        let mut reported = HashSet::new();
        for seq in 0..order.sequences().len() {
            let events = order.events(seq);
            for (i, ev) in events.iter().enumerate() {
                let Some(config) = tf.config_fn(ev.node) else {
                    continue;
                };
                if reported.contains(&ev.node.id()) {
                    continue;
                }
                let Some(j) = tf.first_init_before(order, seq, i) else {
                    continue;
                };
                reported.insert(ev.node.id());
                let init = &events[j];
                let callee = ev.node.field("function").map(|f| ctx.text(f)).unwrap_or("");
                let init_name = init
                    .node
                    .field("function")
                    .map(|f| ctx.text(f))
                    .unwrap_or("");
                let what = tf
                    .init_kind(init.node)
                    .map(|k| k.describe())
                    .unwrap_or("initializes the runtime");
                let swallowed = swallowing_handler(m, ev.node);
                let primary = if tf.init_kind(init.node) == Some(Init::DeviceList) {
                    "too late: the GPU devices already exist, so this raises RuntimeError or has no effect"
                } else {
                    "raises RuntimeError: Physical devices cannot be modified after being initialized"
                };
                let msg = match swallowed {
                    Some(_) => format!("`{callee}` runs after the TensorFlow runtime is initialized, and the `except` swallows its RuntimeError: the configuration is silently not applied"),
                    None => format!("`{callee}` runs after the TensorFlow runtime is initialized"),
                };
                let mut d = ctx
                    .diagnostic(ev.node, msg)
                    .primary_label(primary)
                    .with_label(
                        Span::of(&init.node),
                        format!("the runtime is initialized here: `{init_name}(...)` {what}"),
                    );
                let sites = order.call_sites(ev);
                let init_sites = order.call_sites(init);
                if let Some(site) = sites
                    .first()
                    .filter(|s| !init_sites.iter().any(|i| i.id() == s.id()))
                {
                    d = d.with_label(
                        Span::of(site),
                        "the configuration runs from this call, which comes too late",
                    );
                }
                if let Some(handler) = swallowed {
                    d = d
                        .severity(Severity::Warning)
                        .with_label(Span::of(&handler), "the error is caught and ignored here")
                        .note("TensorFlow then keeps its default and maps nearly all GPU memory");
                }
                ctx.report(d.help(help(config)));
            }
        }
        // Configuration at module level after importing a local module whose own module-level
        // code already initialized the runtime (project lookups only for such calls).
        for ev in order.module() {
            let Some(config) = tf.config_fn(ev.node) else {
                continue;
            };
            if reported.contains(&ev.node.id()) || m.enclosing_function(ev.node).is_some() {
                continue;
            }
            let Some(((start, end), module, init)) = project::tf_initialized_by_import(
                m,
                &ctx.file.path,
                &ctx.settings.root,
                ev.node.start_byte(),
            ) else {
                continue;
            };
            reported.insert(ev.node.id());
            let callee = ev.node.field("function").map(|f| ctx.text(f)).unwrap_or("");
            let module = module
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let d = ctx
                .diagnostic(
                    ev.node,
                    format!("`{callee}` runs after an import that initialized the TensorFlow runtime"),
                )
                .primary_label("raises RuntimeError: Physical devices cannot be modified after being initialized")
                .with_label(
                    Span { start, end },
                    format!("importing this runs `{module}`, whose import-time `{init}(...)` initializes the runtime"),
                );
            ctx.report(d.help(help(config)));
        }
    }
}

fn help(config: ConfigFn) -> &'static str {
    match config {
        ConfigFn::MemoryGrowth => "configure the GPUs first, at the top of the script: `for gpu in tf.config.list_physical_devices('GPU'): tf.config.experimental.set_memory_growth(gpu, True)`, before any tensor, layer, model or strategy is created",
        ConfigFn::VisibleDevices => "call `tf.config.set_visible_devices(...)` at the top of the script, before any tensor, layer, model or strategy is created",
        ConfigFn::LogicalDevices => "call `tf.config.set_logical_device_configuration(...)` at the top of the script, before any tensor, layer, model or strategy is created",
    }
}

/// The `except` clause that swallows a failure of `call`: the call sits in the body of a `try`
/// whose handlers only `pass`, print or log.
fn swallowing_handler<'t>(m: &PythonModel<'t>, call: Node<'t>) -> Option<Node<'t>> {
    // The ancestors, innermost first, found once (climbing with `Node::parent` is quadratic in
    // the depth).
    let up = m.ancestors(call);
    let mut i = 0;
    let try_stmt = loop {
        let parent = *up.get(i)?;
        match parent.kind_name() {
            "function_definition" | "class_definition" | "lambda" => return None,
            // Inside a handler, not the protected body.
            "except_clause" | "finally_clause" | "else_clause"
                if up.get(i + 1)?.kind_name() == "try_statement" =>
            {
                i += 2;
                continue;
            }
            "try_statement" => break parent,
            _ => i += 1,
        }
    };
    let handlers: Vec<Node<'t>> = named_children(try_stmt)
        .filter(|c| matches!(c.kind_name(), "except_clause" | "except_group_clause"))
        .collect();
    if handlers.is_empty() {
        return None;
    }
    handlers
        .iter()
        .all(|h| swallows(m, *h))
        .then(|| handlers[0])
}

/// Does the handler only `pass`, print or log?
fn swallows(m: &PythonModel<'_>, handler: Node<'_>) -> bool {
    let Some(block) = named_children(handler)
        .filter(|c| c.kind_name() == "block")
        .last()
    else {
        return false;
    };
    named_children(block).all(|stmt| match stmt.kind_name() {
        "pass_statement" | "comment" => true,
        "expression_statement" => named_children(stmt).all(|e| match e.kind_name() {
            "string" | "ellipsis" => true,
            "call" => e.field("function").is_some_and(|f| {
                let text = m.text(f);
                let head = text.split('.').next().unwrap_or("");
                text == "print"
                    || matches!(
                        head,
                        "logging" | "logger" | "log" | "LOGGER" | "_logger" | "absl_logging"
                    )
                    || text.starts_with("tf.get_logger()")
                    || text.starts_with("tf.compat.v1.logging.")
                    || text.starts_with("tf.logging.")
                    || text == "warnings.warn"
            }),
            _ => false,
        }),
        _ => false,
    })
}
