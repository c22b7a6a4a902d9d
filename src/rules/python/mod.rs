//! Rules for Python training code.

pub mod mem001_training_step_over_budget;
pub mod mem002_huge_tensor_allocation;
pub mod py001_unbounded_recursion;
pub mod tf001_memory_config_after_init;
pub mod tf002_missing_memory_growth;
