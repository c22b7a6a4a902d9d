//! Rendered output as users see it, pinned with snapshots (`cargo insta review` to update).

mod common;

use common::{gpulint, write};
use std::path::Path;

fn project() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(
        d,
        "ops/add.cu",
        "__global__ void add(const float* a, const float* b, float* out, int n) {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    out[i] = a[i] + b[i];\n}\n\n__global__ void concat(const float* a, float* out, int size) {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < size) {\n        out[i + size] = a[i];\n    }\n}\n",
    );
    write(
        d,
        "train.py",
        "import tensorflow as tf\n\nmodel = tf.keras.Sequential([tf.keras.layers.Dense(10)])\nfor gpu in tf.config.list_physical_devices(\"GPU\"):\n    tf.config.experimental.set_memory_growth(gpu, True)\nmodel.compile(\"adam\", \"mse\")\nmodel.fit(x, y, epochs=3)\n",
    );
    write(
        d,
        "tree.py",
        "import torch\n\n\ndef depth(node):\n    return 1 + max(depth(c) for c in node.children)\n",
    );
    tmp
}

fn run(dir: &Path, format: &str) -> String {
    let o = gpulint(
        dir,
        &["--isolated", "--no-cache", "--output-format", format],
    );
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn full() {
    let p = project();
    insta::assert_snapshot!(run(p.path(), "full"));
}

#[test]
fn concise() {
    let p = project();
    insta::assert_snapshot!(run(p.path(), "concise"));
}

#[test]
fn github() {
    let p = project();
    insta::assert_snapshot!(run(p.path(), "github"));
}
