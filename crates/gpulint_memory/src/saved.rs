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

/// cuDNN's reserve space for a recurrent layer, in tenths of an output-sized vector per time
/// step and stacked layer: gate pre-activations, cell states and the workspace together,
/// fitted to the H100 measurements of a 2-layer LSTM (`torch_lstm_classifier.py`) and a
/// bidirectional 2-layer GRU (`torch_bigru_tagger.py`) with [`OVERHEAD_PERCENT`] applied. A
/// plain `nn.RNN` is given the LSTM's figure (not measured).
pub const RECURRENT_RESERVE_TENTHS: (u64, u64) = (105, 175);

/// What the GPU holds beyond the tensors a step keeps and its gradient buffers, in percent of
/// them: cuDNN/cuBLAS workspaces and the caching allocator's splitting of its segments. Fitted
/// on 9 of the 18 non-recurrent H100 measurements (the others held out; see
/// `tests/memory_calibration.rs`).
pub const OVERHEAD_PERCENT: u64 = 28;

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
        .trim_end_matches(" (in place)")
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
                | "newgeluactivation"
                | "silu"
                | "swish"
                | "mish"
                | "hardswish"
                | "hardsigmoid"
                | "leakyrelu"
                | "leaky_relu"
                | "relu6"
                | "hardtanh"
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
    let (k, t, _) = kept_until(steps);
    (k, t)
}

/// [`kept`], with the step whose backward releases each step's kept tensors.
fn kept_until(steps: &[Step]) -> (Vec<Kept>, Terms, Vec<usize>) {
    let mut out = vec![Kept::default(); steps.len()];
    let mut retained = vec![false; steps.len()];
    // Backward runs from the last step to the first: a tensor is released after the
    // backward of the earliest step that saved it.
    let mut until: Vec<usize> = vec![usize::MAX; steps.len()];
    // Views and in-place steps share their input's storage: what keeps them keeps that.
    // (In-place `ReLU6` still saves its input and a separate result, as PyTorch does.)
    let shares = |j: usize| {
        steps[j].view
            || (steps[j].class.ends_with(" (in place)") && !steps[j].class.starts_with("ReLU6"))
    };
    let root = |mut j: usize| {
        for _ in 0..64 {
            if j == INPUT || j >= steps.len() || !shares(j) {
                break;
            }
            j = steps[j].inputs.first().copied().unwrap_or(INPUT);
        }
        j
    };
    let mut terms = Terms::default();
    let size = |s: &Step| s.output.iter().product::<u64>();
    for (i, s) in steps.iter().enumerate() {
        let c = class_key(&s.class);
        if saves_input(&c) {
            for &j in &s.inputs {
                let j = root(j);
                if j != INPUT && j < steps.len() {
                    retained[j] = true;
                    until[j] = until[j].min(i);
                }
            }
        }
        if saves_output(&c) || (shares(i) && !s.view && saves_input(&c)) {
            let r = root(i);
            if r != INPUT && r < steps.len() {
                retained[r] = true;
                until[r] = until[r].min(i);
            }
        }
        let n = size(s);
        let extra = &mut out[i];
        if c.starts_with("maxpool") || c.starts_with("max_pool") {
            extra.bytes += 8 * n;
        } else if c == "newgeluactivation" {
            // GPT-2's tanh GELU written as element-wise operations: its input, the `tanh`
            // output, `0.5 * x` and `1 + tanh(...)` are all saved.
            extra.elems += 3 * n;
        } else if c.starts_with("dropout") || c == "alphadropout" {
            extra.bytes += n;
        } else if c.starts_with("multiheadattention") || c == "eager_attention" {
            let seq = s.output.first().copied().unwrap_or(0);
            let width = s.output.last().copied().unwrap_or(0);
            let heads = s.heads.max(1);
            let fused = c.contains("fused");
            if c.starts_with("multiheadattention") {
                // The packed q/k/v projection and the attention output's contiguous copy
                // before `out_proj`; eager attention also its output before the copy.
                extra.elems += if fused { 4 } else { 5 } * seq * width;
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
            let tenths = if c == "gru" {
                RECURRENT_RESERVE_TENTHS.1
            } else {
                RECURRENT_RESERVE_TENTHS.0
            };
            let k = Kept {
                elems: tenths * s.heads.max(1) * seq * width / 10,
                bytes: 0,
            };
            extra.elems += k.elems;
            terms.recurrent_reserve.elems += k.elems;
            retained[i] = true;
        }
    }
    for (i, s) in steps.iter().enumerate() {
        if retained[i] && !shares(i) {
            if s.int {
                out[i].bytes += 8 * size(s);
            } else {
                out[i].elems += size(s);
            }
        }
    }
    (out, terms, until)
}

/// The gradient buffers alive at the peak of backward, bytes per sample (`act`: bytes per
/// activation element), beyond the kept tensors: walking the steps backwards, each step's
/// output gradient and the gradients it produces for its inputs are alive together with the
/// kept tensors not yet released and the gradients still waiting for their step.
pub fn backward_extra(steps: &[Step], act: u64) -> u64 {
    let (kept, _, until) = kept_until(steps);
    let n = steps.len();
    let bytes = |k: &Kept| k.elems * act + k.bytes;
    let size = |s: &Step| s.output.iter().product::<u64>() * if s.int { 8 } else { act };
    let total: u64 = kept.iter().map(bytes).sum();
    let mut release = vec![0u64; n];
    for (j, k) in kept.iter().enumerate() {
        // Released after the backward of the earliest step that saved it.
        let at = if until[j] == usize::MAX { j } else { until[j] };
        release[at.min(n - 1)] += bytes(k);
    }
    let mut live_kept = total;
    let mut grad = vec![0u64; n];
    let mut live_grads = 0u64;
    if let Some(last) = steps.last() {
        grad[n - 1] = size(last);
        live_grads = grad[n - 1];
    }
    // The loss's own temporaries at the start of backward (its difference and gradient for a
    // regression loss; the language-model heads carry theirs as a `cross_entropy` step).
    let loss = match steps.last() {
        Some(last) if last.class != "cross_entropy" => size(last),
        _ => 0,
    };
    let mut peak = total + live_grads + loss;
    for i in (0..n).rev() {
        let s = &steps[i];
        let (mut new, mut temp, mut moved) = (0, 0, false);
        if grad[i] > 0 {
            for &j in &s.inputs {
                if j == INPUT || j >= n || steps[j].int {
                    continue;
                }
                let g = size(&steps[j]);
                if grad[j] > 0 {
                    // Accumulated into the gradient already there.
                    temp += g;
                } else if s.view && !moved {
                    // A view's gradient is a view of its output's: handed on, not copied.
                    grad[j] = g;
                    moved = true;
                } else {
                    grad[j] = g;
                    new += g;
                }
            }
        }
        let workspace = s.workspace * act;
        peak = peak.max(live_kept + live_grads + new + temp + workspace);
        live_grads += new;
        if !moved {
            live_grads -= grad[i].min(live_grads);
        }
        grad[i] = 0;
        live_kept -= release[i].min(live_kept);
    }
    peak.saturating_sub(total)
}
