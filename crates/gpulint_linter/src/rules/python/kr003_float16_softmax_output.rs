//! KR003: `mixed_float16` model whose softmax output layer is left in float16.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::python::mixed_precision::{float16_policy, policy_applies_to};
use gpulint_semantic::python::project::float16_policy_by_import;
use gpulint_semantic::python::tf::{argument, normalize};
use gpulint_semantic::python::{string_literal, PythonModel};
use gpulint_syntax::named_children;
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;
use std::cell::OnceCell;
use std::collections::HashMap;
use tree_sitter::Node;

declare_rule! {
    /// ## What it does
    /// Under a global `mixed_float16` policy, finds the output layer of a Keras model that
    /// applies softmax in float16: `Dense(..., activation="softmax")`, `Activation("softmax")`
    /// or `Softmax()` without `dtype="float32"`, when it is the last layer of a
    /// `Sequential([...])` list, the last `model.add(...)`, or the layer whose output is the
    /// `outputs` of `Model(inputs, outputs)` (the value bound last before that call: an
    /// `outputs` reassigned in between, for example to a float32 `Activation("softmax")`, no
    /// longer ends the model). Modules that never train (`compile`, `fit`,
    /// `GradientTape`) are left alone, and so are models built above a module-level policy
    /// call (an earlier notebook section, still in float32).
    ///
    /// The policy may be set by a module of the project: one that sets it when imported
    /// (`import precision_setup`), or a module-level function of it that the file calls
    /// (`from precision import enable_mixed; enable_mixed()`, or
    /// `precision.enable_mixed()`).
    ///
    /// ## Why is this risky?
    /// The mixed-precision guide: "A softmax activation at the end of the model should be
    /// float32 … if the intermediate tensor flowing from the softmax to the loss is float16
    /// or bfloat16, numeric issues may occur." Probabilities close to 0 or 1 lose precision
    /// and the cross-entropy becomes inaccurate or infinite, so training degrades or produces
    /// NaN.
    ///
    /// ## Example
    /// ```python
    /// import tensorflow as tf
    ///
    /// tf.keras.mixed_precision.set_global_policy("mixed_float16")
    /// model = tf.keras.Sequential([
    ///     tf.keras.layers.Dense(256, activation="relu"),
    ///     tf.keras.layers.Dense(10, activation="softmax"),
    /// ])
    /// model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// import tensorflow as tf
    ///
    /// tf.keras.mixed_precision.set_global_policy("mixed_float16")
    /// model = tf.keras.Sequential([
    ///     tf.keras.layers.Dense(256, activation="relu"),
    ///     tf.keras.layers.Dense(10),
    ///     tf.keras.layers.Activation("softmax", dtype="float32"),
    /// ])
    /// model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    /// ```
    ///
    /// ## References
    /// - TensorFlow guide "Mixed precision", *Building the model*:
    ///   <https://www.tensorflow.org/guide/mixed_precision#building_the_model>
    pub static KR003 = {
        code: "KR003",
        name: "float16-softmax-output",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Info,
        summary: "mixed_float16 model with its softmax output left in float16",
        kinds: &[],
        needles: &["mixed_float16", "oftmax"],
        options: &[],
    };
}

pub struct Float16SoftmaxOutput;

/// Is the call a Keras layer that applies softmax without `dtype="float32"`?
fn float16_softmax(m: &PythonModel<'_>, call: Node<'_>) -> bool {
    let Some(q) = m.call_name(call).map(|q| normalize(&q)) else {
        return false;
    };
    let is_softmax = |a: Option<Node<'_>>| {
        a.is_some_and(|a| {
            string_literal(a, m.source).as_deref() == Some("softmax")
                || m.qualified_name(a).is_some_and(|q| q.ends_with(".softmax"))
        })
    };
    let softmax = match q.as_str() {
        "keras.layers.Dense" => is_softmax(argument(call, 1, "activation", m)),
        "keras.layers.Activation" => is_softmax(argument(call, 0, "activation", m)),
        "keras.layers.Softmax" => true,
        _ => false,
    };
    softmax
        && argument(call, usize::MAX, "dtype", m)
            .is_none_or(|d| string_literal(d, m.source).is_some_and(|s| s != "float32"))
}

/// Where the calls that build a model sit, by scope and text, as sorted start bytes: found
/// once per file, so that judging each softmax layer does not scan the file's calls.
#[derive(Default)]
struct Builds<'t> {
    /// `obj.add(...)` calls, by (scope, `obj`).
    adds: HashMap<(Option<usize>, &'t str), Vec<usize>>,
    /// `keras.Model(inputs, outputs)` calls, by (scope, `outputs`).
    models: HashMap<(Option<usize>, &'t str), Vec<usize>>,
    /// Assignments to a plain name, by (scope, name).
    binds: HashMap<(Option<usize>, &'t str), Vec<usize>>,
}

impl<'t> Builds<'t> {
    fn new(m: &PythonModel<'t>) -> Self {
        let mut b = Builds::default();
        for &(c, s) in &m.calls {
            let Some(f) = c.field("function") else {
                continue;
            };
            if f.kind_name() == "attribute"
                && f.field("attribute").map(|a| m.text(a)) == Some("add")
            {
                if let Some(o) = f.field("object") {
                    b.adds
                        .entry((s, m.text(o)))
                        .or_default()
                        .push(c.start_byte());
                }
            }
            let model = m.call_name(c).is_some_and(|q| {
                matches!(normalize(&q).as_str(), "keras.Model" | "keras.models.Model")
            });
            if model {
                if let Some(o) = argument(c, 1, "outputs", m) {
                    b.models
                        .entry((s, m.text(o)))
                        .or_default()
                        .push(c.start_byte());
                }
            }
        }
        for &a in &m.assignments {
            if let Some(l) = a.field("left").filter(|l| l.kind_name() == "identifier") {
                b.binds
                    .entry((m.enclosing_function(a), m.text(l)))
                    .or_default()
                    .push(a.start_byte());
            }
        }
        for v in b
            .adds
            .values_mut()
            .chain(b.models.values_mut())
            .chain(b.binds.values_mut())
        {
            v.sort_unstable();
        }
        b
    }
}

/// Is the layer call the model's output layer?
fn is_output<'t>(m: &PythonModel<'t>, builds: &OnceCell<Builds<'t>>, layer: Node<'_>) -> bool {
    let Some(p) = m.parent(layer) else {
        return false;
    };
    // Last element of `Sequential([...])`.
    if p.kind_name() == "list" {
        let last = named_children(p)
            .filter(|c| c.kind_name() != "comment")
            .last();
        let seq = m
            .parent(p)
            .and_then(|a| m.parent(a))
            .filter(|c| c.kind_name() == "call")
            .and_then(|c| m.call_name(c))
            .is_some_and(|q| normalize(&q).ends_with("Sequential"));
        return seq && last.map(|l| l.id()) == Some(layer.id());
    }
    // The last `model.add(layer)`.
    if p.kind_name() == "argument_list" {
        let Some(add) = m.parent(p).filter(|c| c.kind_name() == "call") else {
            return false;
        };
        let Some(func) = add
            .field("function")
            .filter(|f| f.kind_name() == "attribute")
        else {
            return false;
        };
        if func.field("attribute").map(|a| m.text(a)) != Some("add") {
            return false;
        }
        let Some(object) = func.field("object").map(|o| m.text(o)) else {
            return true;
        };
        let scope = m.enclosing_function(add);
        let b = builds.get_or_init(|| Builds::new(m));
        return b
            .adds
            .get(&(scope, object))
            .and_then(|v| v.last())
            .is_none_or(|&last| last <= add.end_byte());
    }
    // `outputs = Dense(..., activation="softmax")(x)` then `Model(inputs, outputs)`.
    if p.kind_name() == "call" && p.field("function").map(|f| f.id()) == Some(layer.id()) {
        let Some(name) = m
            .parent(p)
            .filter(|a| a.kind_name() == "assignment")
            .and_then(|a| a.field("left"))
            .filter(|l| l.kind_name() == "identifier")
            .map(|l| m.text(l))
        else {
            return false;
        };
        let scope = m.enclosing_function(p);
        let assigned = p.end_byte();
        // The value the model is built from is the last one bound to the name before the
        // `Model(...)` call (notebook cells run in order): a reassignment in between, such as
        // `outputs = Activation("softmax", dtype="float32")(x)`, replaces this layer's output.
        let b = builds.get_or_init(|| Builds::new(m));
        let after = |v: Option<&Vec<usize>>| {
            v.and_then(|v| v.get(v.partition_point(|&x| x <= assigned)).copied())
        };
        let Some(model) = after(b.models.get(&(scope, name))) else {
            return false;
        };
        return after(b.binds.get(&(scope, name))).is_none_or(|rebound| rebound >= model);
    }
    false
}

impl Rule for Float16SoftmaxOutput {
    fn meta(&self) -> &'static RuleMeta {
        &KR003
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.python();
        let local = float16_policy(m);
        let builds = OnceCell::new();
        // Only a file that builds a float16 softmax output can use a policy set elsewhere
        // (the layer's own name first: resolving every call's name costs).
        let softmax_layer = |c: Node<'_>| {
            c.field("function").is_some_and(|f| {
                let name = m.text(f).rsplit('.').next().unwrap_or("");
                matches!(name, "Dense" | "Activation" | "Softmax")
            }) && float16_softmax(m, c)
                && is_output(m, &builds, c)
        };
        if local.is_none()
            && (!m.source.contains("oftmax") || !m.calls.iter().any(|&(c, _)| softmax_layer(c)))
        {
            return;
        }
        let trains = m.calls.iter().any(|(c, _)| {
            c.field("function").is_some_and(|f| {
                let t = m.text(f);
                t.ends_with(".compile") || t.ends_with(".fit") || t.ends_with("GradientTape")
            })
        });
        if !trains {
            return;
        }
        // (the policy node, the project module that sets it, if not this file)
        let (policy, module) = match local {
            Some(p) => (p, None),
            None => match float16_policy_by_import(m, &ctx.file.path, &ctx.settings.root) {
                Some((node, path)) => (node, Some(path)),
                None => return,
            },
        };
        let policy_label = match &module {
            None => "the `mixed_float16` policy is set here".to_string(),
            Some(path) => format!(
                "the `mixed_float16` policy is set in `{}`, through `{}`",
                path.file_name().unwrap_or_default().to_string_lossy(),
                m.text(policy).lines().next().unwrap_or("")
            ),
        };
        for &(call, _) in &m.calls {
            if !float16_softmax(m, call)
                || !is_output(m, &builds, call)
                || !policy_applies_to(m, policy, call)
            {
                continue;
            }
            ctx.report(
                ctx.diagnostic(call, "the model's softmax output runs in float16 under the `mixed_float16` policy: the probabilities fed to the loss lose precision")
                    .primary_label("softmax computed in float16")
                    .with_label(Span::of(&policy), policy_label.clone())
                    .note("\"A softmax activation at the end of the model should be float32\" (TensorFlow mixed-precision guide)")
                    .help("keep the last Dense linear and add `tf.keras.layers.Activation('softmax', dtype='float32')`, or pass `dtype='float32'` to the output layer"),
            );
        }
    }
}
