//! KR005: `model.predict()` called per item inside a loop.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::python::tf::{argument, Init};
use gpulint_semantic::python::tf_function::enclosing_loop;
use gpulint_semantic::python::PythonModel;
use gpulint_syntax::named_children;
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

declare_rule! {
    /// ## What it does
    /// Finds `model.predict(x)` inside a `for` or `while` loop when `x` is a single item:
    /// `x[i]` or `x[i:i + 1]` indexed by the loop variable (also through a name bound to it in
    /// the loop: `batch = data[i]` or `generator.__getitem__(i)`, then `predict(batch)` or
    /// `predict(batch[0])`), `np.expand_dims(...)` /
    /// `tf.expand_dims(...)`, `x[None]` / `x[np.newaxis]`, `x.reshape(1, ...)` or
    /// `np.array([item])`. A loop that passes whole pre-batched chunks is left alone, and so
    /// is a module that imports Keras 3 (`import keras`) and selects the JAX, PyTorch or NumPy
    /// backend (`os.environ["KERAS_BACKEND"] = "jax"`): the per-call growth is TensorFlow's.
    ///
    /// ## Why is this risky?
    /// `predict` "is designed for batch processing of large numbers of inputs. It is not
    /// intended for use inside of loops": each call builds a data pipeline and may retrace,
    /// and memory grows with every call (tensorflow/tensorflow#44711) until a long video or
    /// evaluation loop runs out of memory. For one item, `model(x, training=False)` is the
    /// documented way.
    ///
    /// ## Example
    /// ```python
    /// import numpy as np
    /// import tensorflow as tf
    ///
    /// model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    /// for frame in np.zeros((1000, 8)):
    ///     score = model.predict(np.expand_dims(frame, 0))
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// import numpy as np
    /// import tensorflow as tf
    ///
    /// model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    /// for frame in np.zeros((1000, 8)):
    ///     score = model(np.expand_dims(frame, 0), training=False)
    /// ```
    ///
    /// ## References
    /// - Keras `Model.predict`: <https://keras.io/api/models/model_training_apis/#predict-method>
    /// - tensorflow/tensorflow#44711 (memory leak with `predict` in a loop):
    ///   <https://github.com/tensorflow/tensorflow/issues/44711>
    pub static KR005 = {
        code: "KR005",
        name: "predict-per-item-in-loop",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Warning,
        summary: "model.predict() called per item inside a loop",
        kinds: &[],
        needles: &["keras", "tensorflow"],
        also_needles: &["predict"],
        options: &[],
    };
}

pub struct PredictInLoop;

/// Is `x` one item of the data, in the loop with variables `vars`?
fn single_item(m: &PythonModel<'_>, x: Node<'_>, vars: &[&str]) -> bool {
    match x.kind_name() {
        "subscript" => {
            let Some(index) = x.field("subscript") else {
                return false;
            };
            let t = m.text(index);
            // `x[None]`, `x[np.newaxis]`, `x[None, ...]`.
            if t.starts_with("None") || t.contains("newaxis") {
                return true;
            }
            // `x[i]`, `x[i:i + 1]`.
            match index.kind_name() {
                "identifier" => vars.contains(&t),
                "slice" => {
                    let parts: Vec<&str> = t.split(':').map(str::trim).collect();
                    parts.len() == 2
                        && vars.contains(&parts[0])
                        && parts[1].replace(' ', "") == format!("{}+1", parts[0])
                }
                _ => false,
            }
        }
        "call" => {
            let Some(func) = x.field("function") else {
                return false;
            };
            let name = m.call_name(x).unwrap_or_default();
            if name.ends_with(".expand_dims") {
                return true;
            }
            if func.kind_name() == "attribute"
                && func.field("attribute").map(|a| m.text(a)) == Some("reshape")
            {
                return argument(x, 0, "shape", m).is_some_and(|a| {
                    m.text(a) == "1" || m.text(a).starts_with("(1,") || m.text(a).starts_with("[1,")
                });
            }
            if matches!(name.as_str(), "numpy.array" | "numpy.asarray") {
                return argument(x, 0, "object", m)
                    .is_some_and(|a| a.kind_name() == "list" && a.named_child_count() == 1);
            }
            false
        }
        _ => false,
    }
}

impl Rule for PredictInLoop {
    fn meta(&self) -> &'static RuleMeta {
        &KR005
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.python();
        if !m.imports_keras() && !m.imports_tensorflow() {
            return;
        }
        // Keras 3 models on the JAX, PyTorch or NumPy backend do not build a tf.data pipeline
        // per `predict` call: the growth this rule is about is TensorFlow's.
        if m.imports_module("keras")
            && m.keras_backend()
                .is_some_and(|b| matches!(b.as_str(), "jax" | "torch" | "numpy"))
        {
            return;
        }
        let tf = m.tf();
        for &(call, _) in &m.calls {
            let Some(attr) = call
                .field("function")
                .filter(|f| f.kind_name() == "attribute")
                .and_then(|f| f.field("attribute"))
            else {
                continue;
            };
            if m.text(attr) != "predict" || tf.init_kind(call) != Some(Init::ModelMethod) {
                continue;
            }
            let Some(lp) = enclosing_loop(m, call) else {
                continue;
            };
            let vars: Vec<&str> = match lp.kind_name() {
                "for_statement" => lp
                    .field("left")
                    .map(|l| {
                        gpulint_syntax::descendants(l)
                            .filter(|n| n.kind_name() == "identifier")
                            .map(|n| m.text(n))
                            .collect()
                    })
                    .unwrap_or_default(),
                _ => Vec::new(),
            };
            let Some(x) = argument(call, 0, "x", m) else {
                continue;
            };
            if !single_item(m, x, &vars) && !loop_indexed(m, x, lp, &vars) {
                continue;
            }
            let recv = call
                .field("function")
                .and_then(|f| f.field("object"))
                .map(|o| ctx.text(o))
                .unwrap_or("model");
            let head = if lp.kind_name() == "for_statement" {
                "for"
            } else {
                "while"
            };
            ctx.report(
                ctx.diagnostic(call, format!("`{recv}.predict(...)` is called on one item per loop iteration: memory grows with every call"))
                    .primary_label("one item per `predict` call")
                    .with_label(Span::of(&lp), format!("this `{head}` loop"))
                    .note("`predict` builds a data pipeline on every call and is not intended for use inside loops")
                    .help(format!("call the model directly, `{recv}(x, training=False)`, or collect the items and call `{recv}.predict` once on the whole batch")),
            );
        }
    }
}

/// `batch = data[i]` / `batch = generator.__getitem__(i)` in the loop (indexed by a loop
/// target), then `predict(batch)` or `predict(batch[0])`: one item or batch per iteration,
/// followed through the name's single binding in the function.
fn loop_indexed(m: &PythonModel<'_>, x: Node<'_>, lp: Node<'_>, vars: &[&str]) -> bool {
    let name = match x.kind_name() {
        "identifier" => x,
        // `batch[0]`: the inputs of an `(x, y)` batch.
        "subscript"
            if x.field("subscript")
                .is_some_and(|i| m.const_value(i).and_then(|c| c.as_int()).is_some()) =>
        {
            match x.field("value") {
                Some(v) if v.kind_name() == "identifier" => v,
                _ => return false,
            }
        }
        _ => return false,
    };
    let Some(value) = m.value_of_name(name, m.text(name)) else {
        return false;
    };
    if value.start_byte() < lp.start_byte() || value.end_byte() > lp.end_byte() {
        return false;
    }
    let index = match value.kind_name() {
        "subscript" => value.field("subscript"),
        "call" => value
            .field("function")
            .filter(|f| {
                f.kind_name() == "attribute"
                    && f.field("attribute").map(|a| m.text(a)) == Some("__getitem__")
            })
            .and_then(|_| value.field("arguments"))
            .and_then(|a| named_children(a).next()),
        _ => None,
    };
    index.is_some_and(|i| i.kind_name() == "identifier" && vars.contains(&m.text(i)))
}
