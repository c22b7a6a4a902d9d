//! What CUDA findings say: the range an index takes, the guard that fails to cover it, where the
//! buffer's size comes from (or that it is assumed), and a fix on the right variables.

use gpulint::settings::Settings;
use std::path::Path;

fn findings(src: &str) -> Vec<gpulint::diagnostic::Diagnostic> {
    gpulint::check_source(Path::new("k.cu"), src, &Settings::default())
}

fn one(src: &str, code: &str) -> gpulint::diagnostic::Diagnostic {
    let mut found: Vec<_> = findings(src)
        .into_iter()
        .filter(|d| d.code == code)
        .collect();
    assert_eq!(found.len(), 1, "one {code} finding in {src}");
    found.remove(0)
}

#[test]
fn a_missing_column_guard_suggests_the_column_bound() {
    let d = one(
        "__global__ void add_bias(float* m, const float* bias, int rows, int cols) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < rows)
        m[row * cols + col] += bias[col];
}
",
        "CU001",
    );
    let help = d.help.unwrap();
    assert!(help.contains("if (col >= cols) return;"), "{help}");
}

#[test]
fn an_inclusive_guard_names_the_range_and_the_assumed_size() {
    let d = one(
        "__global__ void scale(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) y[i] = 2.f * x[i];
}
",
        "CU001",
    );
    assert!(
        d.message.contains("`if (i <= n)` admits `i` up to n"),
        "{}",
        d.message
    );
    assert_eq!(d.label.as_deref(), Some("index ranges over 0..=n"));
    assert!(
        d.notes
            .iter()
            .any(|n| n.contains("assuming `y` holds `n` elements")),
        "{:?}",
        d.notes
    );
    assert!(d.help.unwrap().contains("if (i < n)"));
}

#[test]
fn a_launch_that_shows_the_size_is_named() {
    let d = one(
        "#define CUDA_CHECK(x) (x)
__global__ void next(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i + 1];
}
int main() {
    const int n = 1000;
    float *x, *y;
    CUDA_CHECK(cudaMalloc(&x, n * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&y, n * sizeof(float)));
    next<<<(n + 255) / 256, 256>>>(x, y, n);
    CUDA_CHECK(cudaGetLastError());
}
",
        "CU002",
    );
    assert!(
        d.message
            .contains("reaches 1000 while `x` holds 1000 elements"),
        "{}",
        d.message
    );
    assert!(
        d.notes
            .iter()
            .any(|n| n.contains("the launch at line 11 passes a buffer of 1000 elements")),
        "{:?}",
        d.notes
    );
}

#[test]
fn an_offset_table_bound_is_reported_at_the_launch_with_the_fix() {
    let src = "#include <torch/extension.h>
__global__ void ptr2ind(const int64_t* ptr, int64_t* out, int64_t numel) {
    int64_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < numel) {
        for (int64_t e = ptr[i]; e < ptr[i + 1]; e++) out[e] = i;
    }
}
torch::Tensor run(torch::Tensor ptr, int64_t edges) {
    auto out = torch::empty(edges, ptr.options());
    auto stream = at::cuda::getCurrentCUDAStream();
    ptr2ind<<<(ptr.numel() + 255) / 256, 256, 0, stream>>>(
        ptr.data_ptr<int64_t>(), out.data_ptr<int64_t>(), ptr.numel());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
";
    let d = one(src, "CU002");
    assert_eq!(d.span.start, src.find("ptr.numel());").unwrap(), "{d:?}");
    assert!(
        d.message
            .contains("passes `ptr.numel()` as `numel`, the bound of `i`"),
        "{}",
        d.message
    );
    assert!(
        d.help
            .as_deref()
            .is_some_and(|h| h.contains("(`ptr.numel() - 1`)")),
        "{:?}",
        d.help
    );
}
