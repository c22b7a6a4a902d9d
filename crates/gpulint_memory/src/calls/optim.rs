//! Optimizers: construction, and the state tensors each keeps per parameter.

use super::span;
use crate::interp::Interp;
use crate::value::{Args, Optimizer, Val};
use tree_sitter::Node;

impl<'a, 't> Interp<'a, 't> {
    pub(super) fn optimizer(&mut self, name: &str, args: &Args, at: Node<'_>, torch: bool) -> Val {
        let slots = optimizer_slots(name, args, torch);
        self.optimizers.push(Optimizer {
            name: name.to_string(),
            slots,
            slot_bytes: name.to_ascii_lowercase().contains("8bit").then_some(1),
            span: span(at),
        });
        let id = self.optimizers.len() - 1;
        if torch {
            if let Some(Val::Params(o)) = args.get(0, "params") {
                let opt = self.optimizers[id].clone();
                self.objs[*o].facts.optimizer = Some(opt);
            }
        }
        Val::Optimizer(id)
    }
}

/// State tensors per parameter: Adam/AdamW 2, SGD with momentum 1 (0 without), RMSprop 1.
pub fn optimizer_slots(name: &str, args: &Args, torch: bool) -> Option<u64> {
    let momentum = |pos: usize| -> Option<bool> {
        match args.get(pos, "momentum") {
            None => Some(false),
            Some(v) => v.float().map(|m| m > 0.0),
        }
    };
    let flag = |pos: usize, key: &str| -> Option<bool> {
        match args.get(pos, key) {
            None => Some(false),
            Some(v) => v.truthy(),
        }
    };
    let lower = name.to_ascii_lowercase();
    // bitsandbytes: `Adam8bit`, `AdamW8bit`, `PagedAdamW8bit`, `Lion8bit` (1 byte per state).
    let lower = lower
        .trim_start_matches("paged")
        .trim_end_matches("8bit")
        .trim_end_matches("32bit");
    match lower {
        // Factored second moments: rows + columns per matrix, negligible; `beta1` adds momentum.
        "adafactor" => Some(match args.kw("beta1") {
            None | Some(Val::None) => 0,
            Some(_) => 1,
        }),
        "adam" | "adamw" => Some(2 + flag(if torch { 5 } else { usize::MAX }, "amsgrad")? as u64),
        "nadam" | "radam" | "adamax" | "adadelta" | "ftrl" | "lamb" => Some(2),
        "sgd" => Some(momentum(if torch { 2 } else { 1 })? as u64),
        "rmsprop" => Some(
            1 + momentum(if torch { 5 } else { 2 })? as u64
                + flag(if torch { 6 } else { usize::MAX }, "centered")? as u64,
        ),
        "adagrad" | "lion" => Some(1),
        _ => None,
    }
}
