//! TF013: GPU-selecting environment variables set after TensorFlow, PyTorch or JAX initialized
//! CUDA.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::python::tf::normalize;
use gpulint_semantic::python::torch::Runtime;
use gpulint_semantic::python::PythonModel;
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;
use std::collections::{HashMap, HashSet};
use tree_sitter::Node;

declare_rule! {
    /// ## What it does
    /// Finds writes of `CUDA_VISIBLE_DEVICES`, `TF_FORCE_GPU_ALLOW_GROWTH` or
    /// `TF_GPU_ALLOCATOR` (`os.environ[...] = ...`, `os.environ.setdefault`, `os.environ.update`,
    /// `os.putenv`) that run after the GPU runtime has started, in execution order (module code,
    /// `if __name__ == "__main__":` and the local functions they call):
    /// - all three after TensorFlow's GPU-init boundary: the first tensor, variable, Keras layer
    ///   or model, `compile`/`fit`/`predict`, or distribution strategy;
    /// - `CUDA_VISIBLE_DEVICES` also after `tf.config.list_physical_devices("GPU")`, which
    ///   already enumerates the GPUs, after PyTorch initialized CUDA (`.cuda()`,
    ///   `.to("cuda")`, `device="cuda"`, `torch.cuda.set_device`, ...) or probed it with
    ///   `torch.cuda.is_available()` (which runs `cudaGetDeviceCount` and so `cuInit`, unless
    ///   `PYTORCH_NVML_BASED_CUDA_CHECK=1`), and after the first JAX computation: the
    ///   variable is read once per process, when the CUDA driver is initialized. The `TF_*` variables only matter to TensorFlow, so a PyTorch or JAX start
    ///   does not make them late.
    ///
    /// The allocator variables of the other frameworks have rules of their own, so no line is
    /// reported twice: `PYTORCH_CUDA_ALLOC_CONF` / `PYTORCH_ALLOC_CONF` set after PyTorch
    /// initialized CUDA is PT006, and `XLA_PYTHON_CLIENT_PREALLOCATE` / `_MEM_FRACTION` /
    /// `_ALLOCATOR` set after the first JAX computation is JX002.
    ///
    /// Writes before the framework import, or after it but before the first GPU use, are fine,
    /// and so is a write followed by starting a child process (`subprocess`, `multiprocessing`,
    /// `os.system`), which inherits the new value.
    ///
    /// ## Why is this risky?
    /// These variables are read once: `CUDA_VISIBLE_DEVICES` when the CUDA driver is
    /// initialized in the process, the `TF_*` ones when TensorFlow creates its GPU devices and
    /// allocator. A later assignment is ignored without any message: the process keeps every
    /// GPU and TensorFlow maps nearly all of their memory, and the job, or the other jobs on the
    /// machine, fail with out-of-memory errors.
    ///
    /// ## Example
    /// ```python
    /// import os
    /// import tensorflow as tf
    ///
    /// model = tf.keras.Sequential([tf.keras.layers.Dense(10)])
    /// os.environ["CUDA_VISIBLE_DEVICES"] = "1"
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// import os
    ///
    /// os.environ["CUDA_VISIBLE_DEVICES"] = "1"
    /// import tensorflow as tf
    ///
    /// model = tf.keras.Sequential([tf.keras.layers.Dense(10)])
    /// ```
    ///
    /// ## References
    /// - TensorFlow guide "Use a GPU" (`TF_FORCE_GPU_ALLOW_GROWTH`, "platform specific"):
    ///   <https://www.tensorflow.org/guide/gpu#limiting_gpu_memory_growth>
    /// - CUDA C++ Programming Guide, *CUDA Environment Variables*:
    ///   <https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#cuda-environment-variables>
    /// - JAX, *GPU memory allocation* (preallocation happens "when the first JAX operation is
    ///   run"): <https://docs.jax.dev/en/latest/gpu_memory_allocation.html>
    /// - `torch.cuda.is_available` (fork-safe only with `PYTORCH_NVML_BASED_CUDA_CHECK=1`):
    ///   <https://pytorch.org/docs/stable/generated/torch.cuda.is_available.html>
    /// - PyTorch, *CUDA semantics*:
    ///   <https://pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-alloc-conf>
    pub static TF013 = {
        code: "TF013",
        name: "gpu-env-after-init",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Warning,
        summary: "GPU environment variable set after a framework initialized the GPU",
        kinds: &[],
        needles: &[
            "tensorflow",
            "tf_keras",
            "torch",
            "jax",
            "flax",
        ],
        options: &[],
    };
}

pub struct GpuEnvAfterInit;

const KEYS: &[&str] = &[
    "CUDA_VISIBLE_DEVICES",
    "TF_FORCE_GPU_ALLOW_GROWTH",
    "TF_GPU_ALLOCATOR",
];

/// Does the call start a child process (which inherits the environment)?
fn spawns(m: &PythonModel<'_>, call: Node<'_>) -> bool {
    let Some(q) = m.call_name(call) else {
        return false;
    };
    q.starts_with("subprocess.")
        || q.starts_with("multiprocessing.")
        || q.starts_with("torch.multiprocessing.")
        || q.starts_with("os.exec")
        || q.starts_with("os.spawn")
        || matches!(q.as_str(), "os.system" | "os.popen")
}

/// `torch.cuda.is_available()`, which (unless `PYTORCH_NVML_BASED_CUDA_CHECK=1`) asks the CUDA
/// runtime for the device count and so initializes the driver, which reads
/// `CUDA_VISIBLE_DEVICES`.
fn probes_cuda(m: &PythonModel<'_>, call: Node<'_>) -> bool {
    m.call_name(call).as_deref() == Some("torch.cuda.is_available")
}

fn lists_gpus(m: &PythonModel<'_>, call: Node<'_>) -> bool {
    m.call_name(call).is_some_and(|q| {
        matches!(
            normalize(&q).as_str(),
            "tensorflow.config.list_physical_devices"
                | "tensorflow.config.experimental.list_physical_devices"
        )
    })
}

/// What started the GPU runtime before a write.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Start {
    /// A TensorFlow init call (the GPU-init boundary).
    Tf,
    /// `tf.config.list_physical_devices("GPU")`.
    TfListing,
    /// PyTorch initialized CUDA.
    Torch,
    /// `torch.cuda.is_available()`: `cudaGetDeviceCount`, which runs `cuInit`.
    TorchProbe,
    /// The first JAX computation.
    Jax,
}

impl Rule for GpuEnvAfterInit {
    fn meta(&self) -> &'static RuleMeta {
        &TF013
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.python();
        if !m.imports_tensorflow() && !m.imports_torch() && !m.imports_jax() {
            return;
        }
        let writes: HashMap<usize, &str> = m
            .env_writes()
            .iter()
            .filter_map(|w| {
                KEYS.iter()
                    .find(|k| **k == w.key)
                    .map(|k| (w.node.id(), *k))
            })
            .collect();
        if writes.is_empty() {
            return;
        }
        let tf = m.tf();
        let torch = m.torch();
        // With this set, `torch.cuda.is_available()` asks NVML and leaves CUDA alone.
        let nvml_check = m
            .env_writes()
            .iter()
            .any(|w| w.key == "PYTORCH_NVML_BASED_CUDA_CHECK");
        let order = m.order();
        let mut reported = HashSet::new();
        for seq in 0..order.sequences().len() {
            let events = order.events(seq);
            let here: Vec<(usize, &str)> = events
                .iter()
                .enumerate()
                .filter_map(|(i, e)| writes.get(&e.node.id()).map(|&k| (i, k)))
                .collect();
            if here.is_empty() {
                continue;
            }
            // The positions of the calls that start a runtime, and of the last call that
            // spawns a process, found in one pass per sequence (not a scan of the events
            // before, or after, each write).
            let visibility_here = here.iter().any(|&(_, k)| k == "CUDA_VISIBLE_DEVICES");
            let calls_where = |pred: &dyn Fn(Node<'_>) -> bool| -> Vec<usize> {
                if !visibility_here {
                    return Vec::new();
                }
                (0..events.len())
                    .filter(|&j| events[j].node.kind_name() == "call" && pred(events[j].node))
                    .collect()
            };
            let listing = calls_where(&|n| lists_gpus(m, n));
            let torch_init = calls_where(&|n| torch.initializes(n, Runtime::TorchCuda));
            let jax_init = calls_where(&|n| torch.initializes(n, Runtime::Jax));
            let probes = if nvml_check {
                Vec::new()
            } else {
                calls_where(&|n| probes_cuda(m, n))
            };
            let last_spawn = events
                .iter()
                .rposition(|e| e.node.kind_name() == "call" && spawns(m, e.node));
            for &(i, key) in &here {
                let ev = &events[i];
                if reported.contains(&ev.node.id()) {
                    continue;
                }
                let earlier = |j: usize| !order.exclusive(&events[j], ev);
                let visibility = key == "CUDA_VISIBLE_DEVICES";
                // TF_* variables only matter to TensorFlow; CUDA_VISIBLE_DEVICES is read once
                // per process, by whichever framework initializes CUDA first.
                let first_call = |positions: &[usize]| {
                    positions
                        .iter()
                        .copied()
                        .take_while(|&j| j < i)
                        .find(|&j| earlier(j))
                };
                let candidates = [
                    tf.first_init_before(order, seq, i).map(|j| (j, Start::Tf)),
                    visibility
                        .then(|| first_call(&listing))
                        .flatten()
                        .map(|j| (j, Start::TfListing)),
                    visibility
                        .then(|| first_call(&torch_init))
                        .flatten()
                        .map(|j| (j, Start::Torch)),
                    visibility
                        .then(|| first_call(&jax_init))
                        .flatten()
                        .map(|j| (j, Start::Jax)),
                    visibility
                        .then(|| first_call(&probes))
                        .flatten()
                        .map(|j| (j, Start::TorchProbe)),
                ];
                let Some((j, start)) = candidates.into_iter().flatten().min() else {
                    continue;
                };
                if last_spawn.is_some_and(|l| l > i) {
                    continue;
                }
                reported.insert(ev.node.id());
                let first = events[j].node;
                let first_name = first.field("function").map(|f| ctx.text(f)).unwrap_or("");
                let (who, what) = match start {
                    Start::Tf => (
                        "TensorFlow",
                        tf.init_kind(first)
                            .map(|k| k.describe())
                            .unwrap_or("initializes the runtime"),
                    ),
                    Start::TfListing => (
                        "TensorFlow",
                        "enumerates the GPUs and creates the CUDA context",
                    ),
                    Start::Torch => ("PyTorch", "initializes CUDA"),
                    Start::TorchProbe => (
                        "PyTorch",
                        "calls `cudaGetDeviceCount`, which initializes the CUDA driver (`cuInit`)",
                    ),
                    Start::Jax => (
                        "JAX",
                        "runs the first JAX computation, which creates the GPU client",
                    ),
                };
                let effect = match key {
                    "CUDA_VISIBLE_DEVICES" => "the process keeps every GPU it saw at start-up",
                    "TF_FORCE_GPU_ALLOW_GROWTH" => "TensorFlow keeps mapping nearly all GPU memory",
                    _ => "TensorFlow keeps its default GPU allocator",
                };
                let import = match start {
                    Start::Tf | Start::TfListing => "tensorflow",
                    Start::Torch | Start::TorchProbe => "torch",
                    Start::Jax => "jax",
                };
                let d = ctx
                    .diagnostic(
                        ev.node,
                        format!("`{key}` is set after {who} initialized the GPU: the new value is ignored and {effect}"),
                    )
                    .primary_label("too late: read once, when the GPU runtime starts")
                    .with_label(
                        Span::of(&first),
                        format!("the GPU runtime starts here: `{first_name}(...)` {what}"),
                    )
                    .help(format!(
                        "set `{key}` at the very top of the script (before `import {import}`), or in the launcher: `{key}=... python train.py`"
                    ));
                ctx.report(d);
            }
        }
    }
}
