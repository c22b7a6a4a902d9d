//! Hostile inputs met on the command line: each run must end within a time bound, exit with a
//! status below 2, and say what it did with the file (findings, or GL002 with the reason).

mod common;

use common::{code, stderr, stdout, write};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

const KERNEL: &str = "__global__ void relu(const float* x, float* y, int n) {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    y[i] = x[i] > 0.f ? x[i] : 0.f;\n}\n";

const TRAIN: &str = "import torch\n\ndef train(model, loader, opt, criterion):\n    total = 0\n    for x, y in loader:\n        loss = criterion(model(x), y)\n        loss.backward()\n        opt.step()\n        total += loss\n    return total\n";

/// Runs gpulint with JSON output and fails the test if it takes longer than `limit`.
fn run_bounded(dir: &Path, args: &[&str], limit: Duration) -> std::process::Output {
    let mut all = vec!["--isolated", "--no-cache", "--output-format", "json"];
    all.extend_from_slice(args);
    let child = common::command(dir, &all)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read the pipes while waiting (a large report must not block the child).
    let out = std::thread::spawn(move || child.wait_with_output().unwrap());
    let start = Instant::now();
    while !out.is_finished() {
        assert!(
            start.elapsed() < limit,
            "gpulint {args:?} did not finish within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = out.join().unwrap();
    assert!(code(&o) < 2, "{args:?}: {}", stderr(&o));
    o
}

/// The codes of a JSON report.
fn codes(o: &std::process::Output) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_str(&stdout(o)).expect("JSON output");
    v.as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap().to_string())
        .collect()
}

const LIMIT: Duration = Duration::from_secs(60);

#[cfg(unix)]
#[test]
fn symlink_loops_end_the_walk() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(d, "p/k.cu", KERNEL);
    std::os::unix::fs::symlink("..", d.join("p/up")).unwrap();
    std::os::unix::fs::symlink("self", d.join("p/self")).unwrap();
    std::os::unix::fs::symlink("b.py", d.join("p/a.py")).unwrap();
    std::os::unix::fs::symlink("a.py", d.join("p/b.py")).unwrap();
    let o = run_bounded(d, &["p"], LIMIT);
    let c = codes(&o);
    assert_eq!(
        c.iter().filter(|c| c.as_str() == "CU001").count(),
        1,
        "{c:?}"
    );
}

#[test]
fn a_hundred_thousand_nested_blocks_and_brackets() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let depth = 100_000;
    // In a folder of the temporary directory: CU001 looks for launches of a kernel in the
    // folder above its file, which must not be the shared temporary directory.
    write(
        d,
        "n/deep.cu",
        format!(
            "__global__ void k(float* x, int n) {{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n{}x[i] = 1;{}\n}}\n",
            "{".repeat(depth),
            "}".repeat(depth)
        ),
    );
    write(
        d,
        "n/deep.py",
        format!("{TRAIN}x = {}1{}\n", "[".repeat(depth), "]".repeat(depth)),
    );
    write(
        d,
        "n/open.py",
        format!("{TRAIN}x = {}\n", "(".repeat(depth)),
    );
    let o = run_bounded(
        d,
        &["--verbose", "n/deep.cu", "n/deep.py", "n/open.py"],
        LIMIT,
    );
    let c = codes(&o);
    assert!(c.contains(&"CU001".to_string()), "{c:?}");
    // The training function before the brackets is still checked.
    assert!(c.contains(&"PT001".to_string()), "{c:?}");
    // Brackets never closed: the file is said to be partly parsed.
    assert!(c.contains(&"GL003".to_string()), "{c:?}");
}

#[test]
fn a_huge_single_line() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // 8 MB on one line, under the 10 MiB limit, after a finding.
    let line = format!("x = [{}0]\n", "1, ".repeat(2 << 20));
    write(d, "long.py", format!("{TRAIN}{line}"));
    write(
        d,
        "long.cu",
        format!("{KERNEL}// {}\n", "a".repeat(8 << 20)),
    );
    let o = run_bounded(d, &["long.py", "long.cu"], LIMIT);
    let c = codes(&o);
    assert!(c.contains(&"PT001".to_string()), "{c:?}");
    assert!(c.contains(&"CU001".to_string()), "{c:?}");
}

#[test]
fn many_launches_in_one_host_function_stay_within_the_work_budget() {
    // 150 launches in one function, each passing a count narrowed from `numel()` through
    // locals assigned before it: the values reaching each launch were each walked again for
    // every launch, and the file's work budget ran out in CU003 (GL003) with a quarter of
    // its rule runs undone (3 s); now each value is read once for the file.
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let mut src = String::from(
        "#include <torch/extension.h>\n__global__ void k(const float* x, float* y, int n) {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) y[i] = x[i];\n}\nvoid run(torch::Tensor x, torch::Tensor y) {\n",
    );
    for j in 0..150 {
        src.push_str(&format!(
            "    int n = x.numel() + {j};\n    int blocks = (n + 255) / 256;\n    k<<<blocks, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n + blocks * {j});\n"
        ));
    }
    src.push_str("}\n");
    write(d, "launches.cu", src);
    let o = run_bounded(d, &["launches.cu"], LIMIT);
    let c = codes(&o);
    assert!(!c.contains(&"GL003".to_string()), "{c:?}");
    assert_eq!(c.iter().filter(|c| *c == "CU003").count(), 150, "{c:?}");
}

#[test]
fn binary_content_under_a_source_name_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let bytes: Vec<u8> = (0..65_536u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(d.join("model.py"), &bytes).unwrap();
    std::fs::write(d.join("kernel.cu"), &bytes).unwrap();
    std::fs::write(d.join("notebook.ipynb"), &bytes).unwrap();
    std::fs::write(d.join("requirements.txt"), &bytes).unwrap();
    let o = run_bounded(d, &["."], LIMIT);
    let c = codes(&o);
    assert_eq!(
        c.iter().filter(|c| c.as_str() == "GL002").count(),
        4,
        "{c:?}"
    );
}

#[test]
fn lone_cr_python_is_read_as_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(d, "lf/train.py", TRAIN);
    write(d, "cr/train.py", TRAIN.replace('\n', "\r"));
    let position = |dir: &str| {
        let o = run_bounded(d, &[dir], LIMIT);
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .map(|f| (f["code"].clone(), f["line"].clone(), f["column"].clone()))
            .collect::<Vec<_>>()
    };
    let lf = position("lf");
    assert!(!lf.is_empty());
    assert_eq!(position("cr"), lf);
}

/// Long chains of nested expressions and blocks around a call the rules look up from: a
/// TensorFlow allocation (MEM002 looks for a `with tf.device` around it), a recursive call
/// (PY001 looks for a condition around it), a kernel launch (CU009 looks for the statement
/// after it). Walking up with `Node::parent` made each quadratic in the depth (40,000 levels:
/// 25 s and more); the bound is far below that even in a debug build.
#[test]
fn calls_deep_in_long_chains_are_checked_in_linear_time() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let chain = "+".repeat(40_000);
    write(
        d,
        "alloc.py",
        format!("import tensorflow as tf\ny = {chain}tf.ones((2, 2))\n"),
    );
    write(
        d,
        "recurse.py",
        format!("def f(x):\n    return {chain}f(x)\n"),
    );
    // Identifiers and NumPy calls deep in a traced function: TF006 asked each for its parent,
    // and tree-sitter's parent look-up recurses through the nesting (a stack overflow at
    // 150,000 unary `+` left without an operand).
    write(
        d,
        "traced.py",
        format!("import numpy as np\nimport tensorflow as tf\n\n@tf.function\ndef step(x, epoch):\n    w = tf.minimum(1.0, tf.cast(epoch, tf.float32) / 5.0{})\n    y = np.random.randn(3) * x.shape\n    return w\n", "+".repeat(150_000)),
    );
    let open = "{".repeat(20_000);
    let close = "}".repeat(20_000);
    write(
        d,
        "launch.cu",
        format!("{KERNEL}void run(float* x, float* y, int n) {{ {open} relu<<<1, 32>>>(x, y, n); n = 0; {close} }}\n"),
    );
    for f in ["alloc.py", "recurse.py", "traced.py", "launch.cu"] {
        run_bounded(d, &[f], Duration::from_secs(20));
    }
}

/// A tensor allocated like itself (`auto y = torch::empty_like(y);`, a typo that compiles):
/// the extent of the launch's buffer followed the `_like` chain without end, a stack overflow.
#[test]
fn a_tensor_allocated_like_itself_ends() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(
        d,
        "like.cu",
        "#include <torch/extension.h>\n__global__ void fill(float* y, int n) {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) y[i] = 0.f;\n}\nvoid run(torch::Tensor x) {\n    auto y = torch::empty_like(y);\n    fill<<<(y.numel() + 255) / 256, 256>>>(y.data_ptr<float>(), y.numel());\n}\n",
    );
    run_bounded(d, &["like.cu"], LIMIT);
}

/// Calls of the APIs the Python rules look at, one every 50 levels of an expression nested
/// `depth` deep that ends in an operand left out (a zero-width MISSING identifier at the bottom), in a training loop under
/// `torch.no_grad()` and at module level.
fn nested_api_calls(depth: usize) -> String {
    const APIS: &[&str] = &[
        "torch.cuda.empty_cache(",
        "tf.function(",
        "jax.jit(",
        "keras.Sequential(",
        "np.zeros(",
        "torch.zeros(",
        "float(",
        "model.predict(",
        "tf.config.experimental.set_memory_growth(",
        "tf.compat.v1.Session(",
        "torch.autocast(",
        "tf.keras.mixed_precision.experimental.set_policy(",
    ];
    // A call every 50 levels, a unary minus in parentheses between them.
    let calls: String = (0..depth)
        .map(|i| match i % 50 {
            0 => APIS[(i / 50) % APIS.len()],
            _ => "-(",
        })
        .collect();
    let nest = format!("{calls}x + {}", ")".repeat(depth));
    format!(
        "import torch\nimport numpy as np\nimport tensorflow as tf\nimport jax\nfrom tensorflow import keras\n\n\
         def train(model, loader, opt, criterion):\n    for x, y in loader:\n        with torch.no_grad():\n\
         \x20           loss = criterion(model(x), y)\n            loss.backward()\n            opt.step()\n\
         \x20           z = {nest}\n            try:\n                y = x  # noqa: PT001\n\
         \x20           except RuntimeError:\n                pass\n\nz = {nest}\n"
    )
}

/// C++ with zero-width MISSING nodes deep in it: casts in the host function nested `depth`
/// deep with a `;` left out; products in a kernel's index and `if`s around a barrier, nested
/// `depth / 4` deep, with an operand left out.
fn nested_kernel_code(depth: usize) -> [(&'static str, String); 3] {
    let kernel = "#include <torch/extension.h>\n__global__ void k(float* x, const float* y, int n, int64_t m) {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n";
    let (host_depth, depth) = (depth, depth / 4);
    let close = ")".repeat(depth);
    let host_close = ")".repeat(host_depth);
    [
        (
            "products.cu",
            format!(
                "{kernel}    x[i] = y[{}i * {close}];\n    int c = {}n * {close};\n    x[c] = 1.f;\n}}\n",
                "(i * m + ".repeat(depth),
                "(threadIdx.x * m + ".repeat(depth)
            ),
        ),
        (
            "host.cu",
            format!(
                "{kernel}    if (i < n) x[i] = y[i];\n}}\nvoid run(torch::Tensor t, torch::Tensor u) {{\n    int n = {}t.numel(){host_close}\n    auto p = {}t.data_ptr(){host_close};\n    k<<<(n + 255) / 256, 256>>>(p, u.data_ptr<float>(), n, t.numel());\n}}\n",
                "static_cast<int>(".repeat(host_depth),
                "reinterpret_cast<float*>(".repeat(host_depth)
            ),
        ),
        (
            "barrier.cu",
            format!(
                "{kernel}{}__syncthreads(); x[i] = 1;{}\n}}\n",
                (0..depth)
                    .map(|d| format!("if (threadIdx.x < n + {} + ) {{", d % 10))
                    .collect::<String>(),
                "}".repeat(depth)
            ),
        ),
    ]
}

/// Nesting a hundred thousand levels deep with zero-width MISSING nodes in it. tree-sitter's
/// `Node::parent` descends from the root at every call and, for a zero-width node, recurses
/// once per level: the rules that asked it for parents (PT007's climb to the loop, the
/// `no_grad` and `tf.function` checks, the placement of allocations, TF003/TF004/TF012/KR004's
/// climbs, JX003, CU003's narrowing, the int32 overflow culprit, OP001's pointer casts, CU008's
/// per-thread conditions, CU009) took minutes (5,000 nested calls: more than 100 s) or could
/// overflow the stack. They now ask the file's parent table, built by one walk.
#[test]
fn parent_lookups_deep_in_broken_nesting_are_bounded() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let depth = 100_000;
    write(d, "deep/calls.py", nested_api_calls(depth));
    let mut files = vec!["deep/calls.py".to_string()];
    for (name, text) in nested_kernel_code(depth) {
        write(d, &format!("deep/{name}"), text);
        files.push(format!("deep/{name}"));
    }
    // Far above the seconds a release build takes, far below what the climbs took.
    let limit = Duration::from_secs(180);
    for f in &files {
        let o = run_bounded(d, &["--verbose", f], limit);
        // Each file is read and said to be partly parsed (the MISSING nodes).
        let c = codes(&o);
        assert!(c.contains(&"GL003".to_string()), "{f}: {c:?}");
    }
    // The comment writer and the suppressions look at the lines in the nesting too.
    run_bounded(d, &["--add-noqa", "deep"], limit);
}
