//! The peak GPU memory of one training step, after the method of DNNMem (Gao et al., FSE 2020)
//! reduced to what a static reading can know:
//!
//! peak = CUDA context + weights + gradients + optimizer state (+ autocast weight copies)
//!      + batch × (tensors kept for backward + the largest activation's gradient + input)
//!      + the caching allocator's rounding of each kept tensor
//!
//! PyTorch: the kept tensors are what autograd saves ([`crate::saved`]), with attention score
//! matrices and recurrent reserve space named. Keras: every layer output.
//! The terms are calibrated against measurements on an H100 (see `tests/memory_calibration.rs`).

use super::layer::Params;
use super::model::Built;
use super::saved;
use super::training::Setup;
use super::value::Fw;
use gpulint_source::format_size;

/// The CUDA context, driver and library handles of a PyTorch process, measured on an H100
/// with CUDA 13 (619 MiB, `torch-h100.json`); other GPUs and CUDA versions differ by some
/// hundred MiB.
pub const CUDA_CONTEXT: u64 = 619 << 20;

/// Kept for callers that name the old constant: the context term.
pub const ALLOWANCE: u64 = CUDA_CONTEXT;

/// The estimator's stated margin of error: MEM001 is an error only above budget × (1 + margin).
pub const MARGIN: f64 = 0.2;

/// PyTorch's caching allocator hands out blocks in multiples of 512 bytes; requests above
/// 10 MiB get their own segment, rounded up to 2 MiB.
fn rounded(bytes: u64) -> u64 {
    if bytes > 10 << 20 {
        bytes.div_ceil(2 << 20) * (2 << 20)
    } else {
        bytes.div_ceil(512).max(1) * 512
    }
}

#[derive(Debug, Clone)]
pub struct Estimate {
    pub params: Params,
    pub weight_bytes: u64,
    pub gradient_bytes: u64,
    pub optimizer_bytes: u64,
    /// State tensors per parameter, when the optimizer is known.
    pub optimizer_slots: Option<u64>,
    /// Half-precision copies of the weights that autocast keeps during the forward pass.
    pub autocast_bytes: u64,
    pub activation_bytes_per_sample: u64,
    /// Inside the activations: eager attention's score matrices (softmax and dropout).
    pub attention_bytes_per_sample: u64,
    /// Inside the activations: cuDNN's reserve space for recurrent layers.
    pub recurrent_bytes_per_sample: u64,
    /// Gradient buffers alive at the peak of backward (Keras: the largest activation).
    pub backward_bytes_per_sample: u64,
    /// cuDNN/cuBLAS workspaces and allocator splitting (PyTorch, calibrated).
    pub overhead_bytes_per_sample: u64,
    pub input_bytes_per_sample: u64,
    /// CUDA context, driver and library handles.
    pub allowance: u64,
    pub batch: Option<u64>,
    /// The kept tensors, bytes per sample each (for the allocator's rounding).
    pub tensors: Vec<u64>,
}

impl Estimate {
    /// What does not grow with the batch.
    pub fn fixed(&self) -> u64 {
        self.weight_bytes
            + self.gradient_bytes
            + self.optimizer_bytes
            + self.autocast_bytes
            + self.allowance
    }

    pub fn per_sample(&self) -> u64 {
        self.activation_bytes_per_sample
            + self.backward_bytes_per_sample
            + self.input_bytes_per_sample
            + self.overhead_bytes_per_sample
    }

    /// The caching allocator's rounding of the kept tensors at `batch`.
    pub fn rounding_for(&self, batch: u64) -> u64 {
        self.tensors
            .iter()
            .map(|t| {
                let b = t.saturating_mul(batch);
                rounded(b) - b
            })
            .sum()
    }

    pub fn peak_for(&self, batch: u64) -> u64 {
        self.fixed()
            .saturating_add(batch.saturating_mul(self.per_sample()))
            .saturating_add(self.rounding_for(batch))
    }

    pub fn peak(&self) -> Option<u64> {
        self.batch.map(|b| self.peak_for(b))
    }

    /// The largest batch whose peak fits `budget` (0: not even one sample).
    pub fn max_batch(&self, budget: u64) -> Option<u64> {
        let per = self.per_sample();
        if per == 0 {
            return None;
        }
        // Without rounding this is exact; rounding only lowers it.
        let mut hi = budget.saturating_sub(self.fixed()) / per;
        let mut lo = 0;
        if hi == 0 || self.peak_for(hi) <= budget {
            return Some(hi);
        }
        while lo + 1 < hi {
            let mid = lo + (hi - lo) / 2;
            if self.peak_for(mid) <= budget {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Some(lo)
    }

    /// `context 619 MiB, weights 97.5 MiB, gradients 97.5 MiB, optimizer (SGD, 1 slot)
    /// 97.5 MiB, activations 11.2 GiB (64 × 175 MiB, of which attention scores ...), backward
    /// buffer ..., input ..., allocator rounding ...`.
    pub fn breakdown(&self, optimizer: &str) -> String {
        let b = self.batch.unwrap_or(1);
        self.breakdown_at(optimizer, b)
    }

    pub fn breakdown_at(&self, optimizer: &str, b: u64) -> String {
        let opt = match self.optimizer_slots {
            Some(s) => format!(
                "optimizer ({optimizer}, {s} slot{}) {}",
                if s == 1 { "" } else { "s" },
                format_size(self.optimizer_bytes)
            ),
            None => format!("optimizer ({optimizer}: state not counted) 0 B"),
        };
        let mut inside = Vec::new();
        if self.attention_bytes_per_sample > 0 {
            inside.push(format!(
                "attention scores {}",
                format_size(b * self.attention_bytes_per_sample)
            ));
        }
        if self.recurrent_bytes_per_sample > 0 {
            inside.push(format!(
                "recurrent reserve {}",
                format_size(b * self.recurrent_bytes_per_sample)
            ));
        }
        let inside = if inside.is_empty() {
            String::new()
        } else {
            format!(", of which {}", inside.join(", "))
        };
        let autocast = if self.autocast_bytes > 0 {
            format!(
                ", autocast weight copies {}",
                format_size(self.autocast_bytes)
            )
        } else {
            String::new()
        };
        let rounding = self.rounding_for(b);
        let rounding = if rounding > 0 {
            format!(", allocator rounding {}", format_size(rounding))
        } else {
            String::new()
        };
        let overhead = if self.overhead_bytes_per_sample > 0 {
            format!(
                ", workspaces and allocator splitting {}",
                format_size(b * self.overhead_bytes_per_sample)
            )
        } else {
            String::new()
        };
        format!(
            "CUDA context {}, weights {}, gradients {}, {opt}{autocast}, activations {} ({b} × {}{inside}), backward buffer {}, input {}{overhead}{rounding}",
            format_size(self.allowance),
            format_size(self.weight_bytes),
            format_size(self.gradient_bytes),
            format_size(b * self.activation_bytes_per_sample),
            format_size(self.activation_bytes_per_sample),
            format_size(b * self.backward_bytes_per_sample),
            format_size(b * self.input_bytes_per_sample),
        )
    }
}

/// The estimate for a fully inferred model; `None` when any layer is unknown.
pub fn estimate(model: &Built, setup: &Setup) -> Option<Estimate> {
    if model.unknown.is_some() {
        return None;
    }
    let params = model.params?;
    let p = &setup.precision;
    let mut activations: u64 = 0;
    let mut largest: u64 = 0;
    let mut tensors = Vec::new();
    let (mut attention, mut recurrent) = (0, 0);
    let bytes_of = |k: saved::Kept| k.elems.saturating_mul(p.activations) + k.bytes;
    if model.fw == Fw::Torch {
        let (kept, terms) = saved::kept(&model.steps);
        for k in kept {
            let n = bytes_of(k);
            if n > 0 {
                tensors.push(n);
            }
            activations = activations.saturating_add(n);
        }
        attention = bytes_of(terms.attention_scores);
        recurrent = bytes_of(terms.recurrent_reserve);
        largest = saved::backward_extra(&model.steps, p.activations);
    }
    for s in &model.steps {
        if s.view && !s.module {
            continue;
        }
        let bytes = if s.int { 8 } else { p.activations };
        let n: u64 = s.output.iter().product::<u64>().saturating_mul(bytes);
        if model.fw == Fw::Keras {
            activations = activations.saturating_add(n);
        }
        if model.fw == Fw::Keras {
            largest = largest.max(n);
        }
    }
    let (shape, int) = model.input.clone()?;
    let input = shape.iter().product::<u64>() * if int { 8 } else { 4 };
    let trainable = if setup.freezes { 0 } else { params.trainable };
    let opt = setup.optimizer.as_ref();
    let slots = opt.and_then(|o| o.slots);
    let slot_bytes = opt.and_then(|o| o.slot_bytes).unwrap_or(p.params);
    let autocast = if setup.autocast && model.fw == Fw::Torch && p.params > 2 {
        params.total * 2
    } else {
        0
    };
    let overhead = if model.fw == Fw::Torch {
        (activations + largest + input) * saved::OVERHEAD_PERCENT / 100
    } else {
        0
    };
    Some(Estimate {
        overhead_bytes_per_sample: overhead,
        params,
        weight_bytes: params.total * p.params,
        gradient_bytes: trainable * p.params,
        optimizer_bytes: trainable * slot_bytes * slots.unwrap_or(0),
        optimizer_slots: slots,
        autocast_bytes: autocast,
        activation_bytes_per_sample: activations,
        attention_bytes_per_sample: attention,
        recurrent_bytes_per_sample: recurrent,
        backward_bytes_per_sample: largest,
        input_bytes_per_sample: input,
        allowance: CUDA_CONTEXT,
        batch: setup.batch.as_ref().ok().map(|b| b.size),
        tensors,
    })
}
