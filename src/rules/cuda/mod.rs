//! Rules for CUDA kernels and C++ op glue.
