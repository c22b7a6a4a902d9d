//! How a model is trained: batch size, optimizer, precision, and what makes a static estimate
//! meaningless (several GPUs, gradient checkpointing).

use super::interp::BatchSource;
use super::model::Built;
use super::value::{Fw, Optimizer};
use gpulint_semantic::python::{string_literal, PythonModel};
use gpulint_syntax::NodeExt;

/// Facts about the whole file.
#[derive(Debug, Clone, Default)]
pub struct FileFacts {
    /// Keras `mixed_float16`/`mixed_bfloat16`, or PyTorch autocast: 2-byte activations.
    pub mixed: Option<String>,
    /// Keras `set_floatx(...)` / `torch.set_default_dtype(...)`: bytes of every float.
    pub floatx: Option<u64>,
    /// Data or model parallelism: the batch is split across devices we cannot count.
    pub distributed: Option<String>,
    /// Gradient checkpointing trades activations for recomputation.
    pub checkpointing: bool,
    /// Some parameters are frozen (`requires_grad = False`, `trainable = False`).
    pub freezes: bool,
    /// `loss.backward()` or a Lightning `Trainer.fit`.
    pub backward: bool,
    /// `tf.data`, generators or `Sequence`s: `fit` takes its batch from them.
    pub keras_pipeline: bool,
    /// A custom TensorFlow training loop (`tf.GradientTape`).
    pub tape: bool,
}

pub fn file_facts(pm: &PythonModel<'_>) -> FileFacts {
    let mut f = FileFacts::default();
    let src = pm.source;
    for (call, _) in &pm.calls {
        let Some(q) = pm.call_name(*call) else {
            continue;
        };
        let first_str = call
            .field("arguments")
            .and_then(|a| a.named_child(0))
            .and_then(|a| string_literal(a, src));
        let last = q.rsplit('.').next().unwrap_or(&q);
        match last {
            "set_global_policy" | "set_policy" | "Policy" if q.contains("mixed_precision") => {
                if let Some(p) = first_str.filter(|p| p.starts_with("mixed_")) {
                    f.mixed = Some(format!("`{p}` policy"));
                }
            }
            "set_floatx" => {
                f.floatx = match first_str.as_deref() {
                    Some("float16") | Some("bfloat16") => Some(2),
                    Some("float64") => Some(8),
                    _ => f.floatx,
                }
            }
            "autocast" if q.starts_with("torch.") && !q.starts_with("torch.cpu") => {
                let text = pm.text(*call);
                if !text.contains("enabled=False") && !text.contains("float32") {
                    f.mixed = Some("`torch.autocast`".into());
                }
            }
            "set_default_dtype" if q.starts_with("torch.") => {
                let text = pm.text(*call);
                if text.contains("float64") || text.contains("double") {
                    f.floatx = Some(8);
                }
            }
            _ => {}
        }
        let distributed = [
            "torch.nn.DataParallel",
            "torch.nn.parallel.DataParallel",
            "torch.nn.parallel.DistributedDataParallel",
            "torch.nn.parallel.distributed.DistributedDataParallel",
            "torch.distributed.",
            "tensorflow.distribute.",
            "deepspeed.",
            "horovod.",
            "accelerate.Accelerator",
            "keras.distribution.",
            "jax.pmap",
        ];
        if f.distributed.is_none()
            && distributed
                .iter()
                .any(|d| q.starts_with(d) && !q.ends_with("OneDeviceStrategy"))
        {
            f.distributed = Some(format!("`{q}`"));
        }
        if q.starts_with("torch.utils.checkpoint.")
            || last == "recompute_grad"
            || last == "gradient_checkpointing_enable"
        {
            f.checkpointing = true;
        }
        if last == "gradient_checkpointing_enable" || last == "checkpoint_sequential" {
            f.checkpointing = true;
        }
        if (last == "fit" && q.contains("Trainer"))
            || (q.starts_with("pytorch_lightning") || q.starts_with("lightning"))
                && last == "Trainer"
        {
            f.backward = true;
        }
    }
    f.backward |=
        src.contains(".backward(") || src.contains("manual_backward(") || src.contains("Trainer(");
    f.tape = src.contains("GradientTape");
    f.freezes = [
        "requires_grad = False",
        "requires_grad=False",
        "requires_grad_(False)",
        "trainable = False",
        "trainable=False",
    ]
    .iter()
    .any(|p| src.contains(p));
    f.checkpointing |= src.contains("gradient_checkpointing");
    f.keras_pipeline = [
        "tf.data",
        ".batch(",
        "from_generator",
        ".flow(",
        "flow_from_",
        "Sequence",
        "PyDataset",
        "_dataset_from_",
        "generator",
        "DataLoader",
    ]
    .iter()
    .any(|p| src.contains(p));
    f
}

impl FileFacts {
    /// Why a static estimate does not apply to any model of the file (several GPUs, gradient
    /// checkpointing): every model's [`Setup::blockers`].
    pub fn blockers(&self) -> Vec<String> {
        let mut blockers = Vec::new();
        if let Some(d) = &self.distributed {
            blockers.push(format!(
                "the file uses {d}: the batch may be split across GPUs"
            ));
        }
        if self.checkpointing {
            blockers.push("the file uses gradient checkpointing".into());
        }
        blockers
    }

    /// Can a model of the file be trained (see [`setup`]) with no blocker? `false` only where
    /// none can: the file has a blocker (every model has it), or it neither calls `backward()`
    /// (what a PyTorch model needs) nor uses a `GradientTape` nor names a `fit`/`fit_generator`
    /// attribute (what a Keras model needs: the interpreter records a `fit` only from such an
    /// attribute).
    pub fn may_train_unblocked(&self, pm: &PythonModel<'_>) -> bool {
        self.blockers().is_empty() && (self.backward || self.tape || names_fit(pm))
    }
}

/// Does the file name an attribute that trains a Keras model (`model.fit`, see
/// [`FIT_METHODS`](crate::calls::FIT_METHODS))?
fn names_fit(pm: &PythonModel<'_>) -> bool {
    pm.attributes.iter().any(|a| {
        a.field("attribute")
            .is_some_and(|n| crate::calls::FIT_METHODS.contains(&pm.text(n)))
    })
}

/// The batch size a model trains with, and where it comes from.
#[derive(Debug, Clone)]
pub struct Batch {
    pub size: u64,
    pub span: (usize, usize),
    /// `fit(batch_size=64)`, `the Keras default of fit()`, `DataLoader(batch_size=...)`.
    pub source: String,
    /// The `fit(...)` call that trains with it (Keras).
    pub call: Option<(usize, usize)>,
}

/// Bytes per element of each kind of tensor.
#[derive(Debug, Clone)]
pub struct Precision {
    pub params: u64,
    pub activations: u64,
    /// What decided it, for messages (`float32`, `mixed_float16 policy`).
    pub label: String,
}

/// Everything beside the architecture that the estimate needs.
#[derive(Debug, Clone)]
pub struct Setup {
    pub batch: Result<Batch, String>,
    pub optimizer: Option<Optimizer>,
    pub precision: Precision,
    /// Reasons the static estimate does not apply (several GPUs, checkpointing).
    pub blockers: Vec<String>,
    /// The file trains this model (`fit`, or an optimizer and `backward()`).
    pub trained: bool,
    /// Some parameters may be frozen: gradients and optimizer state are not counted.
    pub freezes: bool,
    /// PyTorch autocast: half-precision weight copies live through the forward pass.
    pub autocast: bool,
}

fn pick_source(sources: &[BatchSource]) -> Result<Batch, String> {
    let known: Vec<&BatchSource> = sources.iter().filter(|s| s.value.is_some()).collect();
    if known.len() != sources.len() || known.is_empty() {
        return Err("the batch size is not a constant".into());
    }
    let train: Vec<&&BatchSource> = known.iter().filter(|s| s.train).collect();
    let pick = if let Some(t) = train.iter().min_by_key(|s| s.value) {
        **t
    } else {
        // Without a training loader, take the smallest: it is the one that surely runs.
        *known
            .iter()
            .min_by_key(|s| s.value)
            .ok_or("no batch size")?
    };
    Ok(Batch {
        size: pick.value.unwrap_or(1),
        span: pick.span,
        source: pick.what.clone(),
        call: None,
    })
}

/// The training setup of a model.
pub fn setup(
    model: &Built,
    file: &FileFacts,
    sources: &[BatchSource],
    optimizers: &[Optimizer],
) -> Setup {
    let facts = &model.facts;
    // A custom loop's optimizer is not attached to the model: the file's only one is.
    let optimizer = facts.optimizer.clone().or_else(|| match optimizers {
        [only] if file.tape => Some(only.clone()),
        _ => None,
    });
    let batch = match model.fw {
        Fw::Keras if facts.fits.is_empty() && file.tape && !sources.is_empty() => {
            pick_source(sources)
        }
        Fw::Keras => match facts.fits.last() {
            None => Err("the model is never trained with `fit()`".into()),
            Some(fit) if fit.batch_unknown => {
                Err("the `batch_size` of `fit()` is not a constant".into())
            }
            Some(fit) => {
                // `fit(train_ds)` where `train_ds = ds.batch(64)`.
                let pipeline = fit.x_name.as_ref().and_then(|x| {
                    sources
                        .iter()
                        .rev()
                        .find(|s| s.span.0 < fit.span.0 && s.target.as_deref() == Some(x.as_str()))
                });
                match (fit.batch, pipeline) {
                    (Some((n, span)), _) => Ok(Batch {
                        size: n,
                        span,
                        source: "`fit(batch_size=...)`".into(),
                        call: Some(fit.span),
                    }),
                    (None, Some(s)) => pick_source(std::slice::from_ref(s)).map(|b| Batch {
                        call: Some(fit.span),
                        ..b
                    }),
                    (None, None) if file.keras_pipeline => Err(
                        "the batch size comes from a data pipeline that is not understood".into(),
                    ),
                    (None, None) => Ok(Batch {
                        size: 32,
                        span: fit.span,
                        source: "the default of `fit()` (32)".into(),
                        call: Some(fit.span),
                    }),
                }
                .map(|b| match fit.x_rows {
                    Some(rows) if rows < b.size => Batch {
                        size: rows.max(1),
                        source: format!("{} capped by the {rows} rows of the data", b.source),
                        ..b
                    },
                    _ => b,
                })
            }
        },
        Fw::Torch if sources.is_empty() => {
            Err("no `DataLoader(batch_size=...)` in the file".into())
        }
        Fw::Torch => pick_source(sources),
    };
    let trained = match model.fw {
        Fw::Keras => !facts.fits.is_empty() || (file.tape && optimizer.is_some()),
        Fw::Torch => facts.optimizer.is_some() && file.backward,
    };
    let mut precision = Precision {
        params: 4,
        activations: 4,
        label: "float32".into(),
    };
    if let Some(b) = file.floatx {
        precision = Precision {
            params: b,
            activations: b,
            label: format!("{}-byte floats", b),
        };
    }
    if let Some(b) = facts.param_bytes {
        precision = Precision {
            params: b,
            activations: b,
            label: format!("{}-bit parameters", b * 8),
        };
    }
    if let Some(m) = &file.mixed {
        precision.activations = precision.activations.min(2);
        precision.label = format!("mixed precision ({m})");
    }
    let blockers = file.blockers();
    Setup {
        batch,
        optimizer,
        precision,
        blockers,
        trained,
        freezes: file.freezes || model.frozen,
        autocast: file.mixed.as_deref() == Some("`torch.autocast`"),
    }
}
