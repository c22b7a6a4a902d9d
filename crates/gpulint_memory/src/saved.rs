//! What a PyTorch training step keeps alive between forward and backward: the tensors autograd
//! saves, step by step. A step's output stays when the step itself saves it (ReLU, sigmoid,
//! softmax) or when a step that reads it saves its input (convolutions, linear layers,
//! normalizations, GELU/SiLU, products, max pooling); views, sums, concatenations, average
//! pooling and dropout save nothing of their input. Some steps keep more than their output:
//! max pooling its int64 indices, dropout a one-byte mask, attention its score matrices (eager)
//! or a log-sum-exp row per head (fused), recurrent layers cuDNN's reserve space.
//!
//! Keras models are not read this way: TensorFlow's allocator is not calibrated here, and every
//! layer output counts.

use crate::model::{Step, INPUT};

/// cuDNN's reserve space for a recurrent layer, in hidden-sized vectors per time step, layer
/// and direction, fitted to the H100 measurements of an LSTM (2 layers) and a bidirectional GRU
/// (see the calibration test): gate pre-activations, cell states and the workspace together.
pub const RECURRENT_RESERVE: u64 = 14;

/// Bytes kept per sample by each step, split into what scales with the activation precision
/// (elements) and what does not (bytes: masks, indices, fp32 statistics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Kept {
    pub elems: u64,
    pub bytes: u64,
}

/// The attention terms, for the breakdown: score matrices kept by eager attention.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Terms {
    pub attention_scores: Kept,
    pub recurrent_reserve: Kept,
}

fn class_key(class: &str) -> String {
    class
        .trim_start_matches("F.")
        .trim_start_matches("torch.")
        .to_ascii_lowercase()
}

/// Does the step save its inputs for backward?
fn saves_input(c: &str) -> bool {
    c.starts_with("conv")
        || c.starts_with("batchnorm")
        || c.starts_with("instancenorm")
        || c.starts_with("groupnorm")
        || c.starts_with("layernorm")
        || c.starts_with("maxpool")
        || c.starts_with("adaptivemaxpool")
        || c.starts_with("max_pool")
        || c.starts_with("multiheadattention")
        || matches!(
            c,
            "linear"
                | "rmsnorm"
                | "gelu"
                | "silu"
                | "swish"
                | "mish"
                | "hardswish"
                | "hardsigmoid"
                | "leakyrelu"
                | "leaky_relu"
                | "prelu"
                | "softplus"
                | "mul"
                | "matmul"
                | "bmm"
                | "div"
                | "pow"
                | "normalize"
                | "layer_norm"
                | "batch_norm"
                | "group_norm"
                | "scaled_dot_product_attention"
                | "eager_attention"
                | "lstm"
                | "gru"
                | "rnn"
                | "linear_fn"
        )
}

/// Does the step save its own output?
fn saves_output(c: &str) -> bool {
    matches!(
        c,
        "relu"
            | "relu6"
            | "sigmoid"
            | "tanh"
            | "softmax"
            | "log_softmax"
            | "logsoftmax"
            | "elu"
            | "selu"
            | "celu"
            | "exp"
            | "sqrt"
            | "cross_entropy"
            | "hardtanh"
            | "stochasticdepth"
    )
}

/// Per step, what it keeps; and the named terms inside that total.
pub fn kept(steps: &[Step]) -> (Vec<Kept>, Terms) {
    let mut out = vec![Kept::default(); steps.len()];
    let mut retained = vec![false; steps.len()];
    let mut terms = Terms::default();
    let size = |s: &Step| s.output.iter().product::<u64>();
    for (i, s) in steps.iter().enumerate() {
        let c = class_key(&s.class);
        if saves_input(&c) {
            for &j in &s.inputs {
                // A view keeps the storage of what it views.
                let mut j = j;
                for _ in 0..64 {
                    if j == INPUT || j >= steps.len() || !steps[j].view {
                        break;
                    }
                    j = steps[j].inputs.first().copied().unwrap_or(INPUT);
                }
                if j != INPUT && j < steps.len() {
                    retained[j] = true;
                }
            }
        }
        if saves_output(&c) {
            retained[i] = true;
        }
        let n = size(s);
        let extra = &mut out[i];
        if c.starts_with("maxpool") || c.starts_with("max_pool") {
            extra.bytes += 8 * n;
        } else if c.starts_with("dropout") || c == "alphadropout" {
            extra.bytes += n;
        } else if c.starts_with("multiheadattention") || c == "eager_attention" {
            let seq = s.output.first().copied().unwrap_or(0);
            let width = s.output.last().copied().unwrap_or(0);
            let heads = s.heads.max(1);
            let fused = c.contains("fused");
            if c.starts_with("multiheadattention") {
                // The packed q/k/v projection and the attention output before `out_proj`.
                extra.elems += 4 * seq * width;
            }
            if !fused {
                // Softmax probabilities and their dropout (output and mask).
                let scores = heads * seq * seq;
                let k = Kept {
                    elems: 2 * scores,
                    bytes: scores,
                };
                extra.elems += k.elems;
                extra.bytes += k.bytes;
                terms.attention_scores.elems += k.elems;
                terms.attention_scores.bytes += k.bytes;
            } else {
                extra.bytes += 4 * heads * seq;
            }
        } else if c == "scaled_dot_product_attention" {
            let seq = s.output.first().copied().unwrap_or(0);
            extra.bytes += 4 * s.heads.max(1) * seq;
            retained[i] = true;
        } else if matches!(c.as_str(), "lstm" | "gru" | "rnn") {
            let seq = if s.output.len() >= 2 { s.output[0] } else { 1 };
            let width = s.output.last().copied().unwrap_or(0);
            let k = Kept {
                elems: RECURRENT_RESERVE * s.heads.max(1) * seq * width,
                bytes: 0,
            };
            extra.elems += k.elems;
            terms.recurrent_reserve.elems += k.elems;
            retained[i] = true;
        }
    }
    for (i, s) in steps.iter().enumerate() {
        if retained[i] && !s.view {
            if s.int {
                out[i].bytes += 8 * size(s);
            } else {
                out[i].elems += size(s);
            }
        }
    }
    (out, terms)
}
