//! Rules for Python training code.

pub mod mem001_training_step_over_budget;
pub mod mem002_huge_tensor_allocation;
