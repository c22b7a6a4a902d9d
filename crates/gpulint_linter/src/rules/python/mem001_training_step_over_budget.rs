//! MEM001: a training step whose estimated peak GPU memory exceeds the budget.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::{Severity, Span};
use gpulint_memory::{self as memory, estimate::MARGIN, value::Fw};
use gpulint_source::format_size;
use gpulint_syntax::Lang;

declare_rule! {
    /// ## What it does
    /// Estimates the peak GPU memory of one training step of a model whose architecture is
    /// known from the source — a Keras `Sequential`, functional or simple subclassed model, a
    /// PyTorch `nn.Sequential` or `nn.Module` whose layers are built in `__init__` and applied in
    /// `forward`, or a library model: `torchvision.models.*` (ResNet, VGG, MobileNet V2/V3,
    /// EfficientNet, DenseNet, ViT, …), `timm.create_model("<name>")`,
    /// `keras.applications.*` (ResNet50/101/152, VGG16/19, MobileNetV2, EfficientNetB0–B7) and
    /// Hugging Face transformers (BERT, RoBERTa, GPT-2, T5, Llama/Mistral/Qwen2-style decoders,
    /// ViT; from a `...Config(...)` or `from_pretrained("<known checkpoint>")`) — and reports it
    /// when it exceeds the GPU-memory budget. The estimate adds the CUDA context (619 MiB, as
    /// measured on an H100), the weights, their gradients, the optimizer state (Adam/AdamW 2
    /// slots, SGD with momentum 1, RMSprop 1, 8-bit optimizers 1 byte per slot, Adafactor
    /// factored), and per sample what the step keeps: for PyTorch the tensors autograd saves
    /// for backward (attention score matrices of eager attention and cuDNN's reserve space for
    /// recurrent layers included), the gradient buffers at the peak of backward and a
    /// calibrated share for workspaces and the caching allocator; for Keras every layer's
    /// output. Mixed precision halves the activations. The batch size comes from
    /// `fit(batch_size=...)` (32 when absent), `Dataset.batch(n)` (also in a custom
    /// `GradientTape` loop), `DataLoader(batch_size=...)` or
    /// `TrainingArguments(per_device_train_batch_size=...)`, folded through constants and
    /// argparse defaults. A library model fed nothing the file shows gets the input it is
    /// published for (224 × 224 images; the model's longest sequence, at most 2048 tokens).
    ///
    /// The budget is `--gpu-memory SIZE`, `--gpu NAME` (a table of common cards), or
    /// `gpu-memory` / `gpu` in the configuration; 8 GiB by default. The finding is an error when
    /// the estimate exceeds the budget by more than the estimator's margin (20%), a warning from
    /// 90% of the budget. It says which budget it used and the largest batch that fits.
    ///
    /// Nothing is reported when any layer, the input shape or the batch size is unknown, when
    /// the file spreads training over several GPUs (`DataParallel`, `DistributedDataParallel`,
    /// `tf.distribute` strategies, DeepSpeed, Horovod) or uses gradient checkpointing. Run
    /// `gpulint estimate FILE` to see the per-layer table and where inference stopped. Applies
    /// to files that import Keras/TensorFlow or PyTorch.
    ///
    /// ## Why is this risky?
    /// "It works with batch 32 and dies with batch 64": activations grow linearly with the batch
    /// and with the image size, and once weights, gradients, optimizer state and activations
    /// outgrow the card the step aborts with `ResourceExhaustedError` / `CUDA out of memory` (on
    /// Windows sometimes only with an exit code), often after minutes of data loading.
    ///
    /// ## Example
    /// ```python
    /// from tensorflow import keras
    /// from tensorflow.keras import layers
    ///
    /// model = keras.Sequential([
    ///     keras.Input(shape=(224, 224, 3)),
    ///     layers.Conv2D(64, 3, padding="same", activation="relu"),
    ///     layers.Conv2D(64, 3, padding="same", activation="relu"),
    ///     layers.MaxPooling2D(),
    ///     layers.Conv2D(128, 3, padding="same", activation="relu"),
    ///     layers.GlobalAveragePooling2D(),
    ///     layers.Dense(10, activation="softmax"),
    /// ])
    /// model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    /// model.fit(x_train, y_train, batch_size=256, epochs=10)
    /// ```
    ///
    /// ## Use instead
    /// A batch that fits the card (the finding names the largest), or mixed precision,
    /// gradient accumulation or gradient checkpointing:
    /// ```python
    /// from tensorflow import keras
    /// from tensorflow.keras import layers
    ///
    /// model = keras.Sequential([
    ///     keras.Input(shape=(224, 224, 3)),
    ///     layers.Conv2D(64, 3, padding="same", activation="relu"),
    ///     layers.Conv2D(64, 3, padding="same", activation="relu"),
    ///     layers.MaxPooling2D(),
    ///     layers.Conv2D(128, 3, padding="same", activation="relu"),
    ///     layers.GlobalAveragePooling2D(),
    ///     layers.Dense(10, activation="softmax"),
    /// ])
    /// model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    /// model.fit(x_train, y_train, batch_size=64, epochs=10)
    /// ```
    ///
    /// ## References
    /// - TensorFlow guide, "Use a GPU" (limiting GPU memory growth):
    ///   <https://www.tensorflow.org/guide/gpu#limiting_gpu_memory_growth>
    /// - PyTorch, "CUDA semantics" → memory management:
    ///   <https://pytorch.org/docs/stable/notes/cuda.html#memory-management>
    /// - Keras `Model.fit` (`batch_size` defaults to 32):
    ///   <https://keras.io/api/models/model_training_apis/#fit-method>
    /// - Gao et al., "Estimating GPU Memory Consumption of Deep Learning Models" (DNNMem),
    ///   ESEC/FSE 2020: <https://doi.org/10.1145/3368089.3417050>
    pub static MEM001 = {
        code: "MEM001",
        name: "training-step-over-budget",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Error,
        summary: "Training step estimated to exceed the GPU-memory budget",
        kinds: &[],
        needles: &["keras", "torch", "transformers", "timm"],
        also_needles: &["fit", "GradientTape", "backward", "Trainer"],
        options: &[],
    };
}

pub struct TrainingStepOverBudget;

impl Rule for TrainingStepOverBudget {
    fn meta(&self) -> &'static RuleMeta {
        &MEM001
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let pm = ctx.python();
        if !memory::imports_framework(pm) {
            return;
        }
        let budget = ctx.settings.gpu_memory;
        // One finding per place: several models trained with one pipeline keep the largest.
        let mut found: Vec<(Span, u64, gpulint_diagnostics::Diagnostic)> = Vec::new();
        for report in memory::analyze_trainable(pm) {
            let (Some(e), Ok(batch)) = (&report.estimate, &report.setup.batch) else {
                continue;
            };
            if !report.setup.trained || !report.setup.blockers.is_empty() {
                continue;
            }
            let peak = e.peak_for(batch.size);
            if (peak as f64) <= 0.9 * budget as f64 {
                continue;
            }
            let over = peak as f64 > budget as f64 * (1.0 + MARGIN);
            let m = &report.model;
            // The batch size inside the `fit(...)` call, or the call with a label on where
            // the pipeline sets it.
            let inside = batch
                .call
                .is_none_or(|c| c.0 <= batch.span.0 && batch.span.1 <= c.1);
            let primary = if inside {
                batch.span
            } else {
                batch.call.unwrap_or(batch.span)
            };
            let Some(at) = memory::node_at(pm, primary) else {
                continue;
            };
            let budget_text = format!(
                "{} ({})",
                format_size(budget),
                ctx.settings.gpu_memory_origin.describe()
            );
            let message = if peak > budget {
                format!(
                    "training step of {} needs an estimated {} of GPU memory at batch size {}, more than the {} budget",
                    m.label(),
                    format_size(peak),
                    batch.size,
                    format_size(budget)
                )
            } else {
                format!(
                    "training step of {} needs an estimated {} of GPU memory at batch size {}, {:.0}% of the {} budget",
                    m.label(),
                    format_size(peak),
                    batch.size,
                    100.0 * peak as f64 / budget as f64,
                    format_size(budget)
                )
            };
            let opt = report
                .setup
                .optimizer
                .as_ref()
                .map(|o| o.name.clone())
                .unwrap_or_else(|| "none found".into());
            let framework = if m.fw == Fw::Keras {
                "Keras"
            } else {
                "PyTorch"
            };
            let mut d = ctx
                .diagnostic(at, message)
                .severity(if over { Severity::Error } else { Severity::Warning })
                .primary_label(format!("batch size {} from {}", batch.size, batch.source))
                .with_label(
                    first_line(ctx.source(), m.span),
                    format!(
                        "{framework} {} model with {} parameters and {} of activations per sample",
                        m.kind,
                        thousands(e.params.total),
                        format_size(e.activation_bytes_per_sample)
                    ),
                )
                .note(format!("estimate: {}", e.breakdown(&opt)))
                .note(format!(
                    "budget: {budget_text}; precision: {}; the estimate's margin of error is about {:.0}%",
                    report.setup.precision.label,
                    MARGIN * 100.0
                ));
            if report.setup.freezes {
                d = d.note("some parameters are frozen: their gradients and optimizer state are not counted");
            }
            let help = match e.max_batch(budget) {
                Some(0) | None => format!(
                    "even batch size 1 does not fit: weights, gradients and optimizer state alone need {}; use a smaller model, mixed precision, or a larger GPU",
                    format_size(e.fixed())
                ),
                Some(n) => format!(
                    "the largest batch size that fits is about {n}; lower the batch size, or use mixed precision, gradient accumulation or gradient checkpointing (`gpulint estimate` shows the per-layer table)"
                ),
            };
            if !inside {
                d = d.with_label(
                    Span::new(batch.span.0, batch.span.1),
                    format!("batch size {} set here", batch.size),
                );
            }
            let d = d.help(help);
            let key = Span::new(primary.0, primary.1);
            match found.iter_mut().find(|f| f.0 == key) {
                Some(f) if f.1 >= peak => {}
                Some(f) => *f = (key, peak, d),
                None => found.push((key, peak, d)),
            }
        }
        for (_, _, d) in found {
            ctx.report(d);
        }
    }
}

/// The first line of a span (a model built over many lines is labelled where it starts).
fn first_line(src: &str, span: (usize, usize)) -> Span {
    let end = src
        .get(span.0..span.1)
        .and_then(|t| t.find('\n'))
        .map_or(span.1, |n| span.0 + n);
    Span::new(span.0, end)
}

/// `275640` → `275,640`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}
