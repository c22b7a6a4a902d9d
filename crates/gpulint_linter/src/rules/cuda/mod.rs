//! Rules for CUDA kernels and C++ op glue.

mod bounds;
pub mod cu001_unguarded_thread_index;
pub mod cu002_guard_index_mismatch;
mod cu003_glue;
pub mod cu003_int32_index;
mod cu003_member;
mod cu003_short;
mod cu003_strides;
pub mod cu004_large_local_array;
pub mod cu005_device_recursion;
pub mod cu006_shared_memory_limit;
pub mod cu007_launch_config_limits;
pub mod cu008_divergent_barrier;
pub mod cu009_unchecked_launch;
pub mod cu010_unchecked_runtime_call;
pub mod cu011_default_stream_in_op;
pub mod cu012_array_index_out_of_extent;
mod cu012_rounded;
mod grid_counts;
pub mod op001_unvalidated_tensor_pointer;
pub mod op002_non_contiguous_data_ptr;
pub mod op003_unchecked_dtype_cast;
pub mod op004_missing_device_guard;
pub mod op005_tf_op_missing_validation;
mod op_glue;
#[cfg(test)]
mod op_tests;

/// The command that confirms a CU finding at run time.
pub const SANITIZER: &str = "compute-sanitizer --tool memcheck ./your_app";

/// Source text on one line (whitespace runs folded), shortened to 60 characters for a message.
pub(crate) fn short(s: &str) -> String {
    let one: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.chars().count() > 60 {
        format!("{}…", one.chars().take(59).collect::<String>())
    } else {
        one
    }
}
