//! Rules over dependency manifests (MF): framework pins versus CUDA, cuDNN, Python and
//! platform, checked against the compatibility tables in `data/compat/`.

pub mod mf001_tensorflow_python_mismatch;
pub mod mf002_tensorflow_windows_gpu;
pub mod mf003_tensorflow_gpu_package;
pub mod mf004_cuda_cudnn_mismatch;
pub mod mf005_torch_wheel_missing;
pub mod mf006_mixed_cuda_majors;
pub mod mf007_cudnn_windows_zlib;
pub mod mf008_jax_windows_gpu;
