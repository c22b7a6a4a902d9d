//! Rules for Python training code.

pub mod jx001_jax_preallocation_conflict;
pub mod jx002_late_jax_allocator_env;
pub mod jx003_jit_in_loop;
pub mod mem001_training_step_over_budget;
pub mod mem002_huge_tensor_allocation;
pub mod pt001_accumulated_loss_graph;
pub mod pt002_stored_graph_tensor;
pub mod pt003_eval_without_no_grad;
pub mod pt004_retain_graph_in_loop;
pub mod pt005_oom_retry_in_except;
pub mod pt006_invalid_alloc_conf;
pub mod pt007_empty_cache_in_loop;
pub mod pt008_dataloader_without_main_guard;
pub mod pt009_cuda_in_dataloader_worker;
pub mod pt010_cudnn_benchmark_variable_shapes;
pub mod pt011_fp16_autocast_without_scaler;
pub mod pt012_dataloader_host_memory;
pub mod py001_unbounded_recursion;
pub mod tf001_memory_config_after_init;
pub mod tf002_missing_memory_growth;
