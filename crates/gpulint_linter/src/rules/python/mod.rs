//! Rules for Python training code.

pub mod ds001_dataset_on_device;
pub mod jx001_jax_preallocation_conflict;
pub mod jx002_late_jax_allocator_env;
pub mod jx003_jit_in_loop;
pub mod kr001_models_in_loop;
pub mod kr002_mixed_float16_without_loss_scale;
pub mod kr003_float16_softmax_output;
pub mod kr004_legacy_mixed_precision_api;
pub mod kr005_predict_in_loop;
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
pub mod py002_recursion_limit_without_stack;
pub mod tf001_memory_config_after_init;
pub mod tf002_missing_memory_growth;
pub mod tf003_memory_growth_not_uniform;
pub mod tf004_memory_growth_with_virtual_devices;
pub mod tf005_unknown_optimizer_option;
pub mod tf006_numpy_in_tf_function;
pub mod tf007_huge_constant;
pub mod tf008_retracing_python_values;
pub mod tf009_tf_function_in_loop;
pub mod tf010_tf_function_side_effect;
pub mod tf011_recursive_tf_function;
pub mod tf012_tf1_api_in_tf2;
pub mod tf013_gpu_env_after_init;

use gpulint_diagnostics::{Diagnostic, Span};
use tree_sitter::Node;

/// What PT001 and PT002 add to a finding on a value that keeps its autograd graph alive: a
/// label on where the graph comes from (when that is not the value itself) and the note on
/// memory growth.
pub(crate) fn graph_kept_alive(mut d: Diagnostic, value: Node<'_>, source: Node<'_>) -> Diagnostic {
    if source.id() != value.id() {
        d = d.with_label(
            Span::of(&source),
            "the value comes from here, with its graph",
        );
    }
    d.note("GPU memory grows with every iteration until CUDA runs out of memory")
}

/// Source text as the receiver of a method call in a suggestion: in parentheses unless it is
/// a name or a dotted path.
pub(crate) fn paren(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_alphanumeric() || c == '_' || c == '.')
    {
        s.to_string()
    } else {
        format!("({s})")
    }
}
