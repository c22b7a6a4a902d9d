//! KR002: `mixed_float16` with a custom training loop but no `LossScaleOptimizer`.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::python::mixed_precision::{float16_policy, policy_applies_to, scales_loss};
use gpulint_semantic::python::tf::normalize;
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;

declare_rule! {
    /// ## What it does
    /// Finds modules that set the Keras `mixed_float16` policy
    /// (`tf.keras.mixed_precision.set_global_policy('mixed_float16')`, or the legacy
    /// `set_policy`) and train with a custom loop (`tf.GradientTape` plus
    /// `optimizer.apply_gradients(...)`), but never scale the loss: no
    /// `tf.keras.mixed_precision.LossScaleOptimizer`, no `get_scaled_loss` /
    /// `get_unscaled_gradients`, no Keras 3 `optimizer.scale_loss`, and no hand-written
    /// `loss_scale`. `mixed_bfloat16` needs no loss scaling and is not reported; `model.fit`
    /// scales the loss itself.
    ///
    /// ## Why is this risky?
    /// Small float16 gradients underflow to zero. `fit` applies loss scaling automatically,
    /// but "if you use a custom training loop, you must explicitly use the special optimizer
    /// wrapper `tf.keras.mixed_precision.LossScaleOptimizer`". Without it training stalls or
    /// turns into NaN after hours of GPU time.
    ///
    /// ## Example
    /// ```python
    /// import tensorflow as tf
    ///
    /// tf.keras.mixed_precision.set_global_policy("mixed_float16")
    /// optimizer = tf.keras.optimizers.Adam()
    ///
    /// def train_step(model, x, y):
    ///     with tf.GradientTape() as tape:
    ///         loss = tf.reduce_mean(tf.square(model(x) - y))
    ///     grads = tape.gradient(loss, model.trainable_variables)
    ///     optimizer.apply_gradients(zip(grads, model.trainable_variables))
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// import tensorflow as tf
    ///
    /// tf.keras.mixed_precision.set_global_policy("mixed_float16")
    /// optimizer = tf.keras.mixed_precision.LossScaleOptimizer(tf.keras.optimizers.Adam())
    ///
    /// def train_step(model, x, y):
    ///     with tf.GradientTape() as tape:
    ///         loss = tf.reduce_mean(tf.square(model(x) - y))
    ///         scaled = optimizer.get_scaled_loss(loss)
    ///     grads = optimizer.get_unscaled_gradients(tape.gradient(scaled, model.trainable_variables))
    ///     optimizer.apply_gradients(zip(grads, model.trainable_variables))
    /// ```
    ///
    /// ## References
    /// - TensorFlow guide "Mixed precision", *Loss scaling* and *Training the model with a
    ///   custom training loop*: <https://www.tensorflow.org/guide/mixed_precision>
    /// - `tf.config.optimizer.set_experimental_options` (`auto_mixed_precision` without loss
    ///   scaling "can cause numerical underflow"):
    ///   <https://www.tensorflow.org/api_docs/python/tf/config/optimizer/set_experimental_options>
    pub static KR002 = {
        code: "KR002",
        name: "mixed-float16-without-loss-scale",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Warning,
        summary: "mixed_float16 with a custom training loop but no loss scaling",
        kinds: &[],
        needles: &["mixed_float16"],
        options: &[],
    };
}

pub struct MixedFloat16WithoutLossScale;

impl Rule for MixedFloat16WithoutLossScale {
    fn meta(&self) -> &'static RuleMeta {
        &KR002
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.python();
        let Some(policy) = float16_policy(m) else {
            return;
        };
        if scales_loss(m) {
            return;
        }
        let tape = m.calls.iter().any(|(c, _)| {
            m.call_name(*c)
                .is_some_and(|q| normalize(&q) == "tensorflow.GradientTape")
        });
        if !tape {
            return;
        }
        let Some((apply, _)) = m.calls.iter().find(|(c, _)| {
            policy_applies_to(m, policy, *c)
                && c.field("function").is_some_and(|f| {
                    f.kind_name() == "attribute"
                        && f.field("attribute")
                            .is_some_and(|a| m.text(a) == "apply_gradients")
                })
        }) else {
            return;
        };
        ctx.report(
            ctx.diagnostic(*apply, "custom training step under the `mixed_float16` policy applies gradients without loss scaling: small float16 gradients underflow to zero")
                .primary_label("unscaled float16 gradients applied here")
                .with_label(Span::of(&policy), "the `mixed_float16` policy is set here")
                .note("`model.fit` scales the loss itself; a custom loop with GradientTape must use `LossScaleOptimizer`")
                .help("wrap the optimizer: `optimizer = tf.keras.mixed_precision.LossScaleOptimizer(optimizer)`, and use `optimizer.get_scaled_loss(loss)` and `optimizer.get_unscaled_gradients(grads)` in the step (Keras 3: `optimizer.scale_loss(loss)`), or use `mixed_bfloat16`"),
        );
    }
}
