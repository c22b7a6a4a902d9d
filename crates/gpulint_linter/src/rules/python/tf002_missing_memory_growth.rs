//! TF002: GPU training script with no memory-growth or limit configuration.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::{Diagnostic, Severity, Span};
use gpulint_semantic::python::project;
use gpulint_syntax::Lang;

declare_rule! {
    /// ## What it does
    /// Finds TensorFlow training scripts (a module that imports `tensorflow` and, when run, calls
    /// `.fit(`, runs a custom loop with `apply_gradients`/`minimize`, or uses `tf.GradientTape`
    /// and applies the gradients (a variable update such as `var.assign_sub(lr * grad)` or an
    /// optimizer's `apply(grads, ...)` fed by `tape.gradient(...)`; a tape whose gradients are
    /// only inspected is not training),
    /// at module level or from `if __name__ == "__main__":` and the local functions called
    /// from there; library modules are left to the script that uses them) that never
    /// limit GPU memory: no `tf.config.experimental.set_memory_growth(gpu, True)`, no logical
    /// device configuration with `memory_limit=`, no TF1 `gpu_options.allow_growth` /
    /// `per_process_gpu_memory_fraction`, and no `TF_FORCE_GPU_ALLOW_GROWTH=true` set before the
    /// first GPU use.
    ///
    /// It stays silent for scripts that hide the GPUs (`tf.config.set_visible_devices([], 'GPU')`,
    /// or `CUDA_VISIBLE_DEVICES` set to `-1` or empty before the first GPU use), for TPU scripts,
    /// when a launcher next to the script (a `.sh`/`.bat` script, `Dockerfile`,
    /// `docker-compose*.yml` or `.env` file in its directory or an ancestor up to the repository
    /// root) sets `TF_FORCE_GPU_ALLOW_GROWTH=true`, and when a local module it imports (such as a
    /// `gpu_setup.py` next to it) configures memory growth on import or in a function it calls.
    ///
    /// The finding is a warning, not advice, when the module also imports PyTorch or JAX, or
    /// imports Keras and selects JAX or PyTorch as its Keras 3 backend
    /// (`os.environ["KERAS_BACKEND"] = "jax"`, TensorFlow then only feeding data): both
    /// frameworks then compete for the same GPU memory in one process. In a notebook that
    /// selects its Keras backend (`os.environ["KERAS_BACKEND"] = "jax"`) and marks
    /// framework-specific cells with a cell magic it defines to run a cell only under one
    /// backend (`%%backend tensorflow`), the cells gated to other backends never run and are not
    /// checked, by this rule or any other.
    ///
    /// ## Why is this risky?
    /// "By default, TensorFlow maps nearly all of the GPU memory of all GPUs (subject to
    /// `CUDA_VISIBLE_DEVICES`) visible to the process." Any second process on the same GPU (a
    /// second training job, an evaluation script, a notebook, PyTorch or JAX in the same
    /// process) then fails with out-of-memory errors or cannot create its CUDA context. On a
    /// dedicated GPU running a single job this is intended and can be ignored.
    ///
    /// ## Example
    /// ```python
    /// import tensorflow as tf
    ///
    /// model = tf.keras.Sequential([tf.keras.layers.Dense(10)])
    /// model.compile(optimizer="adam", loss="mse")
    /// model.fit(x_train, y_train, epochs=5)
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// import tensorflow as tf
    ///
    /// for gpu in tf.config.list_physical_devices("GPU"):
    ///     tf.config.experimental.set_memory_growth(gpu, True)
    /// model = tf.keras.Sequential([tf.keras.layers.Dense(10)])
    /// model.compile(optimizer="adam", loss="mse")
    /// model.fit(x_train, y_train, epochs=5)
    /// ```
    ///
    /// ## References
    /// - TensorFlow guide "Use a GPU", *Limiting GPU memory growth* (also the
    ///   `TF_FORCE_GPU_ALLOW_GROWTH` variable): <https://www.tensorflow.org/guide/gpu#limiting_gpu_memory_growth>
    /// - JAX, running JAX and GPU TensorFlow in one process:
    ///   <https://docs.jax.dev/en/latest/gpu_memory_allocation.html>
    pub static TF002 = {
        code: "TF002",
        name: "missing-memory-growth",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Info,
        summary: "TensorFlow training script with no GPU memory growth or limit",
        kinds: &[],
        needles: &["tensorflow", "keras"],
        options: &[],
    };
}

pub struct MissingMemoryGrowth;

impl Rule for MissingMemoryGrowth {
    fn meta(&self) -> &'static RuleMeta {
        &TF002
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.python();
        if !m.imports_tensorflow() {
            return;
        }
        let tf = m.tf();
        // A script: training runs when the module runs (a library's `train()` is configured by
        // whichever script calls it).
        let Some(training) = tf.training_in_module(m.order()) else {
            return;
        };
        if tf.uses_tpu || !tf.cpu_only.is_empty() || tf.memory_configured(m).is_some() {
            return;
        }
        // Project lookups, only now that everything in the file says "report".
        let path = &ctx.file.path;
        if project::launcher_setting(path, &ctx.settings.root, "TF_FORCE_GPU_ALLOW_GROWTH")
            .is_some_and(|(_, v)| v.eq_ignore_ascii_case("true"))
        {
            return;
        }
        if project::tf_memory_configured_by_import(m, path, &ctx.settings.root).is_some() {
            return;
        }
        let Some(import) = m
            .imports
            .iter()
            .find(|i| {
                i.scope.is_none()
                    && (i.qualified == "tensorflow" || i.qualified.starts_with("tensorflow."))
            })
            .or_else(|| {
                m.imports
                    .iter()
                    .find(|i| i.qualified.starts_with("tensorflow"))
            })
        else {
            return;
        };
        // Keras 3 on another backend (`KERAS_BACKEND=jax`) runs its models on that framework,
        // which allocates from the same GPU as TensorFlow feeding it.
        let backend = m.keras_backend().filter(|_| m.imports_keras());
        let backend_is = |name: &str| backend.as_deref() == Some(name);
        let others: Vec<&str> = [
            (m.imports_torch(), "imports PyTorch"),
            (
                !m.imports_torch() && backend_is("torch"),
                "runs Keras on PyTorch (KERAS_BACKEND=torch)",
            ),
            (m.imports_jax(), "imports JAX"),
            (
                !m.imports_jax() && backend_is("jax"),
                "runs Keras on JAX (KERAS_BACKEND=jax)",
            ),
        ]
        .into_iter()
        .filter_map(|(yes, what)| yes.then_some(what))
        .collect();
        let mut d = Diagnostic::new(
            &TF002,
            Span::new(import.start_byte, import.end_byte),
            "TensorFlow training script never limits GPU memory: TensorFlow maps nearly all memory of every visible GPU",
        )
        .primary_label("TensorFlow is imported here")
        .with_label(Span::of(&training), "training starts here");
        if let Some(b) = tf
            .boundary(m.order(), 0)
            .filter(|b| b.node.id() != training.id())
        {
            d = d.with_label(
                Span::of(&b.node),
                "the GPU memory is mapped from here, the first GPU use",
            );
        }
        if !others.is_empty() {
            d = d.severity(Severity::Warning).note(format!(
                "this module also {}: both frameworks allocate from the same GPU, and the second one runs out of memory",
                others.join(" and ")
            ));
        }
        ctx.report(d.help(
            "before the first TensorFlow op, add `for gpu in tf.config.list_physical_devices('GPU'): tf.config.experimental.set_memory_growth(gpu, True)`, or set TF_FORCE_GPU_ALLOW_GROWTH=true in the launcher",
        ));
    }
}
