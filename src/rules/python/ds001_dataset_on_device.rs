//! DS001: entire dataset moved to the device, or an allocation larger than the GPU budget.

use crate::checker::Context;
use crate::declare_rule;
use crate::diagnostic::{Severity, Span};
use crate::lang::Lang;
use crate::rule::{Rule, RuleLang, RuleMeta};
use crate::semantic::python::tf::{argument, normalize};
use crate::semantic::python::tf_function::enclosing_loop;
use crate::semantic::python::PythonModel;
use crate::semantic::NodeExt;
use tree_sitter::Node;

declare_rule! {
    /// ## What it does
    /// Finds a whole dataset moved to the device outside the batch loop: `x.cuda()` /
    /// `x.to(device)` where `x` is bound to `torch.from_numpy(np.load(...))`,
    /// `torch.tensor(np.load(...))` or `torch.load(...)`, and `jnp.asarray(x)` /
    /// `jax.device_put(x)` of an array loaded with `np.load` or pandas. Single allocations
    /// whose literal shape alone is too large for the GPU-memory budget are MEM002's.
    ///
    /// ## Why is this risky?
    /// The whole array has to fit in GPU memory next to the model, its gradients, the
    /// optimizer state and the activations; a dataset that fits in host RAM usually does not.
    /// The job dies with an out-of-memory error, or (JAX) fails when the array is transferred
    /// (markean/aimz#168). Stream batches instead and move each batch to the device in the
    /// training loop. Small datasets such as MNIST fit and are often kept on the GPU on
    /// purpose: the rule only reports data loaded from files, whose size it cannot bound.
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
        summary: "Entire dataset loaded from files moved to the GPU at once",
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
            let attr = value.field("attribute").map(|a| m.text(a)).unwrap_or("");
            matches!(attr, "values" | "to_numpy")
                && value
                    .field("object")
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

impl Rule for DatasetOnDevice {
    fn meta(&self) -> &'static RuleMeta {
        &DS001
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.python();
        if !m.imports_gpu_framework() {
            return;
        }
        for &(call, _) in &m.calls {
            let Some(func) = call.field("function") else {
                continue;
            };
            let q = m.call_name(call).map(|q| normalize(&q));
            // A whole dataset moved to the device outside the batch loop.
            let target = match q.as_deref() {
                Some("jax.numpy.asarray" | "jax.numpy.array" | "jax.device_put") => {
                    argument(call, 0, "x", m)
                }
                None if func.kind() == "attribute" => {
                    let method = func.field("attribute").map(|a| m.text(a));
                    let to_gpu = match method {
                        Some("cuda") => true,
                        Some("to") => argument(call, 0, "device", m).is_some_and(|d| {
                            let t = m.text(d);
                            t.contains("cuda") || t.contains("device")
                        }),
                        _ => false,
                    };
                    to_gpu.then(|| func.field("object")).flatten()
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
