//! DS001: entire dataset moved to the device, or an allocation larger than the GPU budget.

use crate::checker::Context;
use crate::declare_rule;
use crate::diagnostic::{Severity, Span};
use crate::lang::Lang;
use crate::rule::{Rule, RuleLang, RuleMeta};
use crate::semantic::named_children;
use crate::semantic::python::tf::{argument, normalize};
use crate::semantic::python::tf_function::enclosing_loop;
use crate::semantic::python::{string_literal, PythonModel, Value};
use tree_sitter::Node;

declare_rule! {
    /// ## What it does
    /// Finds two ways of putting more on the GPU than it holds:
    /// - a whole dataset moved to the device outside the batch loop: `x.cuda()` /
    ///   `x.to(device)` where `x` is bound to `torch.from_numpy(np.load(...))`,
    ///   `torch.tensor(np.load(...))` or `torch.load(...)`, and `jnp.asarray(x)` /
    ///   `jax.device_put(x)` of an array loaded with `np.load` or pandas (warning);
    /// - an allocation whose literal shape and dtype exceed the GPU-memory budget
    ///   (`--gpu-memory`, 8 GiB by default): `torch.zeros/ones/empty/rand/randn(...,
    ///   device="cuda")`, `tf.zeros/ones/fill/random.normal/random.uniform(...)`,
    ///   `jnp.zeros/ones/empty/full(...)` (error: it cannot fit).
    ///
    /// ## Why is this risky?
    /// The whole array has to fit in GPU memory next to the model, its gradients, the
    /// optimizer state and the activations; a dataset that fits in host RAM usually does not.
    /// The job dies with an out-of-memory error, or (JAX) fails when the array is transferred
    /// (markean/aimz#168). Stream batches instead and move each batch to the device in the
    /// training loop. Small datasets such as MNIST fit and are often kept on the GPU on
    /// purpose: the rule only reports data loaded from files, whose size it cannot bound, and
    /// literal allocations it can prove too large.
    ///
    /// ## Example
    /// ```python
    /// import numpy as np
    /// import torch
    ///
    /// features = torch.from_numpy(np.load("features.npy"))
    /// features_gpu = features.cuda()
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// import numpy as np
    /// import torch
    ///
    /// features = torch.from_numpy(np.load("features.npy"))
    /// loader = torch.utils.data.DataLoader(features, batch_size=256)
    /// for batch in loader:
    ///     batch = batch.cuda()
    /// ```
    ///
    /// ## References
    /// - TensorFlow guide "tf.data", *Consuming NumPy arrays*:
    ///   <https://www.tensorflow.org/guide/data#consuming_numpy_arrays>
    /// - keras-team/keras#16997 (whole dataset placed on the GPU by `fit`):
    ///   <https://github.com/keras-team/keras/issues/16997>
    /// - markean/aimz#168 (eager `jnp.asarray` of a whole dataset runs out of memory):
    ///   <https://github.com/markean/aimz/issues/168>
    pub static DS001 = {
        code: "DS001",
        name: "dataset-on-device",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Warning,
        summary: "Entire dataset moved to the GPU, or an allocation larger than the GPU budget",
        kinds: &[],
        needles: &["torch", "tensorflow", "jax"],
        options: &[],
    };
}

pub struct DatasetOnDevice;

/// Is `value` a whole data file: `np.load(...)`, pandas `.values`, `torch.load(...)`, or a
/// tensor made from one?
fn loaded_data<'t>(m: &PythonModel<'t>, value: Node<'t>, depth: u8) -> bool {
    if depth > 3 {
        return false;
    }
    match value.kind() {
        "call" => {
            let Some(q) = m.call_name(value) else {
                return false;
            };
            match q.as_str() {
                "numpy.load" | "numpy.fromfile" | "numpy.loadtxt" | "torch.load" => true,
                "torch.from_numpy" | "torch.tensor" | "torch.as_tensor" | "numpy.asarray"
                | "numpy.array" => argument(value, 0, "data", m)
                    .is_some_and(|a| loaded_data(m, resolve(m, a), depth + 1)),
                _ => false,
            }
        }
        "attribute" => {
            let attr = value
                .child_by_field_name("attribute")
                .map(|a| m.text(a))
                .unwrap_or("");
            matches!(attr, "values" | "to_numpy")
                && value
                    .child_by_field_name("object")
                    .filter(|o| o.kind() == "call")
                    .and_then(|o| m.call_name(o))
                    .is_some_and(|q| q.starts_with("pandas.read_"))
        }
        _ => false,
    }
}

fn resolve<'t>(m: &PythonModel<'t>, x: Node<'t>) -> Node<'t> {
    if x.kind() == "identifier" {
        m.value_of_name(x, m.text(x)).unwrap_or(x)
    } else {
        x
    }
}

/// Bytes of a literal-shape allocation, from its shape arguments and dtype.
fn literal_bytes(m: &PythonModel<'_>, call: Node<'_>, torch_style: bool) -> Option<i128> {
    let args = call.child_by_field_name("arguments")?;
    let positional: Vec<Node<'_>> = named_children(args)
        .filter(|a| !matches!(a.kind(), "keyword_argument" | "comment"))
        .collect();
    let shape: Vec<Value> = if torch_style && positional.len() > 1 {
        positional
            .iter()
            .map(|a| m.const_value(*a))
            .collect::<Option<Vec<_>>>()?
    } else {
        match m.const_value(*positional.first()?)? {
            Value::Tuple(items) => items,
            v => vec![v],
        }
    };
    let n = shape
        .iter()
        .try_fold(1i128, |a, v| v.as_int().map(|n| a.saturating_mul(n)))?;
    let dtype = argument(call, usize::MAX, "dtype", m)
        .map(|d| m.text(d))
        .unwrap_or("");
    let size = if dtype.ends_with("64") || dtype.ends_with("double") {
        8
    } else if dtype.ends_with("16") || dtype.ends_with("half") {
        2
    } else if dtype.ends_with("int8") || dtype.ends_with("bool") {
        1
    } else {
        4
    };
    Some(n.saturating_mul(size))
}

impl Rule for DatasetOnDevice {
    fn meta(&self) -> &'static RuleMeta {
        &DS001
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.python();
        if !m.imports_gpu_framework() {
            return;
        }
        let budget = ctx.settings.gpu_memory as i128;
        let gib = |b: i128| b as f64 / (1u64 << 30) as f64;
        for &(call, _) in &m.calls {
            let Some(func) = call.child_by_field_name("function") else {
                continue;
            };
            let q = m.call_name(call).map(|q| normalize(&q));
            // Oversized literal allocations.
            let alloc = match q.as_deref() {
                Some(
                    "torch.zeros" | "torch.ones" | "torch.empty" | "torch.rand" | "torch.randn"
                    | "torch.full",
                ) => argument(call, usize::MAX, "device", m)
                    .and_then(|d| string_literal(d, m.source))
                    .is_some_and(|d| d.starts_with("cuda"))
                    .then_some(true),
                Some(
                    "tensorflow.zeros"
                    | "tensorflow.ones"
                    | "tensorflow.fill"
                    | "tensorflow.random.normal"
                    | "tensorflow.random.uniform"
                    | "jax.numpy.zeros"
                    | "jax.numpy.ones"
                    | "jax.numpy.empty"
                    | "jax.numpy.full",
                ) => Some(false),
                _ => None,
            };
            if let Some(torch_style) = alloc {
                if let Some(bytes) = literal_bytes(m, call, torch_style).filter(|b| *b > budget) {
                    ctx.report(
                        ctx.diagnostic(call, format!("`{}(...)` allocates {:.1} GiB on the GPU, more than the {:.1} GiB budget: it cannot fit", ctx.text(func), gib(bytes), gib(budget)))
                            .primary_label(format!("{:.1} GiB from the literal shape and dtype", gib(bytes)))
                            .severity(Severity::Error)
                            .note("the budget comes from `--gpu-memory` or `gpu-memory` in the configuration (default 8 GiB)")
                            .help("allocate in chunks or batches, use a smaller dtype, or keep the array on the host"),
                    );
                }
                continue;
            }
            // A whole dataset moved to the device outside the batch loop.
            let target = match q.as_deref() {
                Some("jax.numpy.asarray" | "jax.numpy.array" | "jax.device_put") => {
                    argument(call, 0, "x", m)
                }
                None if func.kind() == "attribute" => {
                    let method = func.child_by_field_name("attribute").map(|a| m.text(a));
                    let to_gpu = match method {
                        Some("cuda") => true,
                        Some("to") => argument(call, 0, "device", m).is_some_and(|d| {
                            let t = m.text(d);
                            t.contains("cuda") || t.contains("device")
                        }),
                        _ => false,
                    };
                    to_gpu.then(|| func.child_by_field_name("object")).flatten()
                }
                _ => None,
            };
            let Some(x) = target else { continue };
            if enclosing_loop(call).is_some() {
                continue;
            }
            let value = resolve(m, x);
            if !loaded_data(m, value, 0) {
                continue;
            }
            let mut d = ctx
                .diagnostic(call, format!("`{}` moves a whole dataset loaded from a file to the GPU: it must fit in GPU memory next to the model and activations", ctx.text(call)))
                .primary_label("the entire array is copied to the device here");
            if value.id() != x.id() {
                d = d.with_label(Span::of(&value), "the data is loaded here, all of it");
            }
            ctx.report(d.help("keep the dataset on the host and move one batch at a time inside the training loop (a `DataLoader`, `tf.data` or a batch iterator)"));
        }
    }
}
