//! DS001: entire dataset moved to the device, or an allocation larger than the GPU budget.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::{Severity, Span};
use gpulint_memory::alloc::literal_allocation;
use gpulint_semantic::python::pins;
use gpulint_semantic::python::tf::{argument, normalize, Init};
use gpulint_semantic::python::tf_function::enclosing_loop;
use gpulint_semantic::python::PythonModel;
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

declare_rule! {
    /// ## What it does
    /// Finds a whole dataset moved to the device outside the batch loop: `x.cuda()` /
    /// `x.to(device)` where `x` is bound to `torch.from_numpy(np.load(...))`,
    /// `torch.tensor(np.load(...))` or `torch.load(...)`, and `jnp.asarray(x)` /
    /// `jax.device_put(x)` of an array loaded with `np.load` or pandas. Single allocations
    /// whose literal shape alone is too large for the GPU-memory budget are MEM002's.
    ///
    /// Keras: `model.fit(...)` / `model.predict(...)` whose `x` is a whole in-memory NumPy
    /// array: `np.load(...)` (or `np.fromfile`, `np.loadtxt`, pandas `.values`), a name bound
    /// to one (also after `x = x / 255.0`, `.astype(...)`, `.reshape(...)`), or an array whose
    /// literal shape is at least 1 GiB. TensorFlow 2.6–2.10 converts such an input to one
    /// tensor on the GPU; when the project's manifests (`requirements*.txt`, `pyproject.toml`,
    /// `setup.py`, `environment.yml`, `Dockerfile`) pin TensorFlow outside 2.6–2.10 the call is
    /// left alone, and a file that imports only `keras` (Keras 3 unless pinned otherwise) is
    /// reported only when they pin a TensorFlow of 2.6–2.10. Small literal arrays, `tf.data` pipelines, generators and
    /// `keras.utils.Sequence` inputs stream batches and are not reported.
    ///
    /// ## Why is this risky?
    /// The whole array has to fit in GPU memory next to the model, its gradients, the
    /// optimizer state and the activations; a dataset that fits in host RAM usually does not.
    /// The job dies with an out-of-memory error, or (JAX) fails when the array is transferred
    /// (markean/aimz#168). Stream batches instead and move each batch to the device in the
    /// training loop. Small datasets such as MNIST fit and are often kept on the GPU on
    /// purpose: the rule only reports data loaded from files, whose size it cannot bound, or
    /// literal shapes of at least 1 GiB. With Keras on TensorFlow 2.6–2.10, `fit` and
    /// `predict` given NumPy arrays load "the whole dataset in the GPU, instead of just sending
    /// minibatches" (keras-team/keras#16997).
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
        needles: &["torch", "tensorflow", "jax", "keras", "flax"],
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
    match value.kind_name() {
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
                    .filter(|o| o.kind_name() == "call")
                    .and_then(|o| m.call_name(o))
                    .is_some_and(|q| q.starts_with("pandas.read_"))
        }
        _ => false,
    }
}

fn resolve<'t>(m: &PythonModel<'t>, x: Node<'t>) -> Node<'t> {
    if x.kind_name() == "identifier" {
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
                None if func.kind_name() == "attribute" => {
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
            if enclosing_loop(m, call).is_some() {
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
        if m.imports_tensorflow() || m.imports_keras() {
            keras_inputs(ctx);
        }
    }
}

/// Literal NumPy arrays at least this large are reported when handed to `fit`/`predict`.
const LARGE_ARRAY_BYTES: u128 = 1 << 30;

/// Where a whole in-memory array comes from.
enum Source<'t> {
    /// Loaded from a file, here.
    Loaded(Node<'t>),
    /// A literal-shape NumPy allocation of this many bytes.
    Large(Node<'t>, u128, String),
}

/// The whole array `expr` evaluates to, following names (through `x = x / 255.0`,
/// `.astype(...)`, `.reshape(...)`) a few steps back. `at` is where `expr` is evaluated.
fn array_source<'t>(m: &PythonModel<'t>, expr: Node<'t>, at: Node<'t>) -> Option<Source<'t>> {
    let (mut cur, mut at) = (expr, at);
    for _ in 0..8 {
        match cur.kind_name() {
            "parenthesized_expression" => cur = cur.named_child(0)?,
            "binary_operator" => cur = cur.field("left")?,
            "identifier" => {
                let name = m.text(cur);
                let scope = m.enclosing_function(at);
                let value = m.value_of_name(at, name).or_else(|| {
                    let v = m.last_assigned_before(name, at)?;
                    let assign = m.parent(v)?;
                    let same = m.enclosing_function(assign) == scope
                        || (m.enclosing_function(assign).is_none()
                            && scope.is_none_or(|f| !m.function_binds(f, name)));
                    same.then_some(v)
                })?;
                at = m.parent(value).unwrap_or(value);
                cur = value;
            }
            "call" if loaded_data(m, cur, 0) => return Some(Source::Loaded(cur)),
            "call" => {
                if let Some(a) = literal_allocation(m, cur) {
                    let numpy = m.call_name(cur).is_some_and(|q| q.starts_with("numpy."));
                    return (numpy && a.bytes >= LARGE_ARRAY_BYTES)
                        .then(|| Source::Large(cur, a.bytes, a.describe()));
                }
                let func = cur.field("function")?;
                let method = func.field("attribute").map(|a| m.text(a));
                if func.kind_name() == "attribute"
                    && matches!(method, Some("astype" | "reshape" | "copy" | "squeeze"))
                {
                    cur = func.field("object")?;
                } else if matches!(
                    m.call_name(cur).as_deref(),
                    Some("numpy.asarray" | "numpy.array" | "numpy.float32" | "numpy.expand_dims")
                ) {
                    cur = argument(cur, 0, "a", m)?;
                } else {
                    return None;
                }
            }
            "attribute" if loaded_data(m, cur, 0) => return Some(Source::Loaded(cur)),
            _ => return None,
        }
    }
    None
}

/// Keras `fit`/`predict` handed a whole in-memory array (TensorFlow 2.6–2.10).
fn keras_inputs(ctx: &mut Context<'_>) {
    let m = ctx.python();
    let mut pins_checked = false;
    for &(call, _) in &m.calls {
        let Some(method) = call
            .field("function")
            .and_then(|f| f.field("attribute"))
            .map(|a| m.text(a))
        else {
            continue;
        };
        if !matches!(method, "fit" | "predict") {
            continue;
        }
        let Some(x) = argument(call, 0, "x", m) else {
            continue;
        };
        // The file's TensorFlow facts are built at the first `fit`/`predict` call only.
        if m.tf().init_kind(call) != Some(Init::ModelMethod) {
            continue;
        }
        let Some(source) = array_source(m, x, call) else {
            continue;
        };
        // Only now read the project's manifests: TensorFlow pinned outside 2.6–2.10 is fine.
        // A file importing only `keras` runs on Keras 3 today unless the project pins a
        // TensorFlow (and with it a Keras) of 2.6–2.10.
        if !pins_checked {
            pins_checked = true;
            let pins = pins::tensorflow(&ctx.file.path, &ctx.settings.root);
            let affected = |p: &pins::TfPins| p.any(|v| ((2, 6)..=(2, 10)).contains(&v));
            let silent = match &pins {
                Some(p) => !affected(p),
                None => !m.imports_tensorflow(),
            };
            if silent {
                return;
            }
        }
        let (origin, what) = match &source {
            Source::Loaded(n) => (
                *n,
                "the data is loaded from a file here, all of it".to_string(),
            ),
            Source::Large(n, bytes, shape) => (
                *n,
                format!(
                    "a {shape} array: {:.1} GiB",
                    *bytes as f64 / (1u64 << 30) as f64
                ),
            ),
        };
        let mut d = ctx
            .diagnostic(x, format!("`{method}` gets a whole in-memory NumPy array: on TensorFlow 2.6–2.10 Keras converts all of it to one tensor on the GPU instead of sending batches"))
            .primary_label("the entire array becomes a GPU tensor");
        if origin.id() != x.id() {
            d = d.with_label(Span::of(&origin), what);
        }
        let d = d
            .note("keras-team/keras#16997: with NumPy inputs `fit` and `predict` place the whole dataset in GPU memory next to the model")
            .help("stream batches instead: a `tf.data` pipeline over the files, `tf.data.Dataset.from_generator(...)` or a `keras.utils.Sequence`");
        ctx.report(d);
    }
}
