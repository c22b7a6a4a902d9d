//! Helpers shared by the unit tests of the op-glue rules: one rule's findings in a small op,
//! with a string-list option set.

use crate::settings::Settings;
use std::path::Path;

/// A torch op that negates a tensor with no check and no device guard, unbound.
const NEG_OP: &str = r#"#include <torch/extension.h>
__global__ void neg_kernel(const float* x, float* y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = -x[i];
}
torch::Tensor neg(torch::Tensor x) {
  auto y = torch::empty_like(x);
  int64_t n = x.numel();
  neg_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}
"#;

/// [`NEG_OP`] followed by `binding` (the line that binds it to Python or registers it).
pub(crate) fn neg_op(binding: &str) -> String {
    format!("{NEG_OP}{binding}\n")
}

/// The number of findings of rule `code` in `src`, checked as `neg_op.cu`.
pub(crate) fn count(code: &str, src: &str, settings: &Settings) -> usize {
    crate::check_source(Path::new("neg_op.cu"), src, settings)
        .iter()
        .filter(|d| d.code == code)
        .count()
}

/// Default settings with the string-list option `key` of rule `code` set to `values`.
pub(crate) fn with_list(code: &str, key: &str, values: &[&str]) -> Settings {
    let mut settings = Settings::default();
    let mut table = toml::Table::new();
    table.insert(
        key.into(),
        toml::Value::Array(values.iter().map(|v| (*v).into()).collect()),
    );
    settings.rule_options.insert(code.into(), table);
    settings
}
