//! Rules for Python training code.

pub mod ds001_dataset_on_device;
pub mod kr001_models_in_loop;
pub mod kr002_mixed_float16_without_loss_scale;
pub mod kr003_float16_softmax_output;
pub mod kr004_legacy_mixed_precision_api;
pub mod kr005_predict_in_loop;
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
