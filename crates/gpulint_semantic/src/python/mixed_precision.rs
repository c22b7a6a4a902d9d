//! Mixed-precision facts: where a Keras `mixed_float16` policy is set, and whether loss
//! scaling is present.

use super::tf::{argument, normalize};
use super::{string_literal, PythonModel};
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

/// The first call that makes `mixed_float16` the global policy (`set_global_policy`,
/// the legacy `set_policy`, both with a string or a `Policy('mixed_float16')`), or passes
/// `dtype='mixed_float16'` to a layer. `mixed_bfloat16` needs no loss scaling and is not
/// reported.
pub fn float16_policy<'t>(m: &PythonModel<'t>) -> Option<Node<'t>> {
    float16_policy_calls(m).into_iter().next()
}

/// Every call that makes `mixed_float16` the global policy (see [`float16_policy`]), in
/// document order.
pub fn float16_policy_calls<'t>(m: &PythonModel<'t>) -> Vec<Node<'t>> {
    let mut out = Vec::new();
    if !m.source.contains("mixed_float16") {
        return out;
    }
    for &(call, _) in &m.calls {
        let Some(q) = m.call_name(call).map(|q| normalize(&q)) else {
            continue;
        };
        let is_mixed16 = |arg: Option<Node<'_>>| {
            arg.is_some_and(|a| {
                string_literal(a, m.source).as_deref() == Some("mixed_float16")
                    || (a.kind_name() == "call"
                        && m.call_name(a).is_some_and(|p| p.ends_with("Policy"))
                        && argument(a, 0, "name", m)
                            .and_then(|s| string_literal(s, m.source))
                            .as_deref()
                            == Some("mixed_float16"))
                    || (a.kind_name() == "identifier"
                        && m.value_of_name(a, m.text(a)).is_some_and(|v| {
                            v.kind_name() == "call"
                                && argument(v, 0, "name", m)
                                    .and_then(|s| string_literal(s, m.source))
                                    .as_deref()
                                    == Some("mixed_float16")
                        }))
            })
        };
        let setter = matches!(
            q.as_str(),
            "keras.mixed_precision.set_global_policy"
                | "keras.mixed_precision.experimental.set_policy"
                | "keras.config.set_dtype_policy"
        );
        if setter && is_mixed16(argument(call, 0, "policy", m)) {
            out.push(call);
        }
    }
    out
}

/// Does the module scale the loss: a `LossScaleOptimizer`, `get_scaled_loss` /
/// `get_unscaled_gradients`, Keras 3's `scale_loss`, or a hand-written `loss_scale`?
pub fn scales_loss(m: &PythonModel<'_>) -> bool {
    m.source.contains("LossScaleOptimizer")
        || m.source.contains("get_scaled_loss")
        || m.source.contains("scale_loss")
        || m.source.contains("loss_scale")
}

/// Does the policy set by `policy` apply to the code at `node`? A policy set by module-level
/// code (or a notebook cell) after `node` in document order does not: models built above it
/// (an earlier section of a notebook) use the default float32 policy. A policy set inside a
/// function is assumed to run first (`main()` sets it, then builds the model).
pub fn policy_applies_to(m: &PythonModel<'_>, policy: Node<'_>, node: Node<'_>) -> bool {
    policy.start_byte() < node.start_byte() || m.enclosing_function(policy).is_some()
}
