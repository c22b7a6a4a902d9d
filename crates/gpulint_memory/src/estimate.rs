//! The peak GPU memory of one training step, after the method of DNNMem (Gao et al., FSE 2020)
//! reduced to what a static reading can know:
//!
//! peak = weights + gradients + optimizer state + allowance
//!      + batch × (activations kept for backward + the largest activation's gradient + input)
//!
//! Activations are every layer's output (views excluded); the allowance covers the CUDA
//! context and cuDNN/cuBLAS workspaces.

use super::layer::Params;
use super::model::Built;
use super::training::Setup;
use gpulint_source::format_size;

/// CUDA context and library workspaces, counted once.
pub const ALLOWANCE: u64 = 512 << 20;

/// The estimator's stated margin of error: MEM001 is an error only above budget × (1 + margin).
pub const MARGIN: f64 = 0.2;

#[derive(Debug, Clone)]
pub struct Estimate {
    pub params: Params,
    pub weight_bytes: u64,
    pub gradient_bytes: u64,
    pub optimizer_bytes: u64,
    /// State tensors per parameter, when the optimizer is known.
    pub optimizer_slots: Option<u64>,
    pub activation_bytes_per_sample: u64,
    /// The largest single activation: its gradient is alive during backward.
    pub backward_bytes_per_sample: u64,
    pub input_bytes_per_sample: u64,
    pub allowance: u64,
    pub batch: Option<u64>,
}

impl Estimate {
    /// What does not grow with the batch.
    pub fn fixed(&self) -> u64 {
        self.weight_bytes + self.gradient_bytes + self.optimizer_bytes + self.allowance
    }

    pub fn per_sample(&self) -> u64 {
        self.activation_bytes_per_sample
            + self.backward_bytes_per_sample
            + self.input_bytes_per_sample
    }

    pub fn peak_for(&self, batch: u64) -> u64 {
        self.fixed()
            .saturating_add(batch.saturating_mul(self.per_sample()))
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
        Some(budget.saturating_sub(self.fixed()) / per)
    }

    /// `weights 0.5 GiB, gradients 0.5 GiB, optimizer (Adam, 2 slots) 1.0 GiB, activations
    /// 11.2 GiB (64 × 175 MiB), input 9 MiB, allowance 512 MiB`.
    pub fn breakdown(&self, optimizer: &str) -> String {
        let b = self.batch.unwrap_or(1);
        let opt = match self.optimizer_slots {
            Some(s) => format!(
                "optimizer ({optimizer}, {s} slot{}) {}",
                if s == 1 { "" } else { "s" },
                format_size(self.optimizer_bytes)
            ),
            None => format!("optimizer ({optimizer}: state not counted) 0 B"),
        };
        format!(
            "weights {}, gradients {}, {opt}, activations {} ({b} × {}), backward buffer {}, input {}, allowance {}",
            format_size(self.weight_bytes),
            format_size(self.gradient_bytes),
            format_size(b * (self.activation_bytes_per_sample)),
            format_size(self.activation_bytes_per_sample),
            format_size(b * self.backward_bytes_per_sample),
            format_size(b * self.input_bytes_per_sample),
            format_size(self.allowance),
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
    for s in &model.steps {
        if s.view && !s.module {
            continue;
        }
        let bytes = if s.int { 8 } else { p.activations };
        let n: u64 = s.output.iter().product::<u64>().saturating_mul(bytes);
        activations = activations.saturating_add(n);
        largest = largest.max(n);
    }
    let (shape, int) = model.input.clone()?;
    let input = shape.iter().product::<u64>() * if int { 8 } else { 4 };
    let trainable = if setup.freezes { 0 } else { params.trainable };
    let slots = setup.optimizer.as_ref().and_then(|o| o.slots);
    Some(Estimate {
        params,
        weight_bytes: params.total * p.params,
        gradient_bytes: trainable * p.params,
        optimizer_bytes: trainable * p.params * slots.unwrap_or(0),
        optimizer_slots: slots,
        activation_bytes_per_sample: activations,
        backward_bytes_per_sample: largest,
        input_bytes_per_sample: input,
        allowance: ALLOWANCE,
        batch: setup.batch.as_ref().ok().map(|b| b.size),
    })
}
