//! JX001: JAX and another GPU framework preallocating in one process.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::{Diagnostic, Severity, Span};
use gpulint_semantic::python::project;
use gpulint_semantic::python::torch::Runtime;
use gpulint_semantic::python::{string_literal, PythonModel};
use gpulint_syntax::named_children;
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

declare_rule! {
    /// ## What it does
    /// Finds modules that run JAX computations (`jnp.*`, `jax.random.*`, `jax.device_put`,
    /// `jax.devices()`, ...) and also import TensorFlow, or use PyTorch on CUDA, without
    /// anything that stops the frameworks from fighting over GPU memory. Only code that runs
    /// when the module runs (module level, `if __name__ == "__main__":` and the local functions
    /// they call) is considered: a library's functions run in a process configured elsewhere.
    /// What counts as configuration:
    /// `XLA_PYTHON_CLIENT_PREALLOCATE=false`, `XLA_PYTHON_CLIENT_MEM_FRACTION=...`,
    /// `XLA_PYTHON_CLIENT_ALLOCATOR=platform` (written in the file or set by a launcher script
    /// or Dockerfile next to it), TensorFlow hidden from the GPUs
    /// (`tf.config.set_visible_devices([], "GPU")`), or TensorFlow memory growth / a limit.
    ///
    /// Scripts that target TPUs are left alone: there is no GPU to share. The evidence is code
    /// (`jax.devices("tpu")`, `jax.local_devices(backend="tpu")`, `jax.tools.colab_tpu`,
    /// `JAX_PLATFORMS=tpu`, TensorFlow's `TPUStrategy`/`TPUClusterResolver`/`tf.tpu.*`) or the
    /// file's own header (its leading comments or module docstring) naming a TPU as the machine
    /// to run on and never a GPU.
    ///
    /// ## Why is this risky?
    /// "JAX will preallocate 75% of the total GPU memory when the first JAX operation is run"
    /// (90% before jaxlib 0.4.14). The JAX docs list "Running JAX and GPU TensorFlow
    /// concurrently" as a common cause of OOM: "TensorFlow also preallocates by default", so
    /// whichever framework starts second runs out of memory. PyTorch's caching allocator is left
    /// with the remaining quarter in the same way. TensorFlow imported only for `tf.data` still
    /// grabs the GPU unless it is hidden from it.
    ///
    /// ## Example
    /// ```python
    /// import jax.numpy as jnp
    /// import tensorflow as tf
    ///
    /// ds = tf.data.Dataset.range(10).batch(2)
    /// for batch in ds:
    ///     y = jnp.asarray(batch.numpy()) * 2
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// import jax.numpy as jnp
    /// import tensorflow as tf
    ///
    /// tf.config.set_visible_devices([], "GPU")
    /// ds = tf.data.Dataset.range(10).batch(2)
    /// for batch in ds:
    ///     y = jnp.asarray(batch.numpy()) * 2
    /// ```
    ///
    /// ## References
    /// - JAX, *GPU memory allocation* → *Common causes of OOM failures*:
    ///   <https://docs.jax.dev/en/latest/gpu_memory_allocation.html>
    /// - TensorFlow guide "Use a GPU", *Limiting GPU memory growth*:
    ///   <https://www.tensorflow.org/guide/gpu#limiting_gpu_memory_growth>
    pub static JX001 = {
        code: "JX001",
        name: "jax-preallocation-conflict",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Warning,
        summary: "JAX preallocates GPU memory in a process that also runs TensorFlow or PyTorch on the GPU",
        kinds: &[],
        needles: &["jax", "flax"],
        options: &[],
    };
}

pub struct JaxPreallocationConflict;

const JAX_VARS: &[&str] = &[
    "XLA_PYTHON_CLIENT_PREALLOCATE",
    "XLA_PYTHON_CLIENT_MEM_FRACTION",
    "XLA_PYTHON_CLIENT_ALLOCATOR",
];

impl Rule for JaxPreallocationConflict {
    fn meta(&self) -> &'static RuleMeta {
        &JX001
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.python();
        if !m.imports_jax() {
            return;
        }
        if targets_tpu(m) {
            return;
        }
        let facts = m.torch();
        let tf_import = m
            .imports
            .iter()
            .find(|i| i.qualified == "tensorflow" || i.qualified.starts_with("tensorflow."));
        // Nothing to report without a JAX operation and a TensorFlow import or a PyTorch CUDA
        // operation: the order of execution is built only when the file has both.
        let inits = |rt: Runtime| facts.init_calls.iter().any(|&(_, k)| k == rt);
        if !inits(Runtime::Jax) || (tf_import.is_none() && !inits(Runtime::TorchCuda)) {
            return;
        }
        // Only where the module runs as a script (a library's functions run in whatever
        // process imports them, which configures the GPU itself).
        let Some(jax_call) = m
            .order()
            .module()
            .iter()
            .find(|e| facts.initializes(e.node, Runtime::Jax))
            .map(|e| e.node)
        else {
            return;
        };
        let torch_cuda = facts.first_init(m.order(), Runtime::TorchCuda);
        let tf_import = tf_import.filter(|_| {
            let tf = m.tf();
            tf.cpu_only.is_empty() && tf.memory_configured(m).is_none()
        });
        if tf_import.is_none() && torch_cuda.is_none() {
            return;
        }
        if m.env_writes()
            .iter()
            .any(|w| configures(&w.key, w.value.as_deref()))
        {
            return;
        }
        let path = &ctx.file.path;
        if JAX_VARS.iter().any(|v| {
            project::launcher_setting(path, &ctx.settings.root, v)
                .is_some_and(|(_, value)| configures(v, Some(&value)))
        }) {
            return;
        }
        let (other, span) = match (tf_import, torch_cuda) {
            (Some(i), _) => ("TensorFlow", Span::new(i.start_byte, i.end_byte)),
            (None, Some(c)) => ("PyTorch", Span::of(&c)),
            (None, None) => return,
        };
        let d = Diagnostic::new(
            &JX001,
            Span::of(&jax_call),
            format!("JAX preallocates 75% of GPU memory here, in a process that also uses {other} on the GPU"),
        )
        .primary_label("the first JAX operation preallocates GPU memory")
        .with_label(
            span,
            match other {
                "TensorFlow" => "TensorFlow also maps nearly all GPU memory by default",
                _ => "PyTorch allocates from the same GPU",
            },
        )
        .note("whichever framework allocates second runs out of GPU memory")
        .help("set `XLA_PYTHON_CLIENT_PREALLOCATE=false` (or `XLA_PYTHON_CLIENT_MEM_FRACTION`) before `import jax`; hide TensorFlow from the GPU with `tf.config.set_visible_devices([], \"GPU\")` when it only feeds data");
        ctx.report(d);
    }
}

/// Does the module target TPUs (see the rule's documentation)?
fn targets_tpu(m: &PythonModel<'_>) -> bool {
    if m.tf().uses_tpu {
        return true;
    }
    let tpu_arg = |call: Node<'_>| {
        call.field("arguments").is_some_and(|a| {
            named_children(a).any(|x| {
                let v = if x.kind_name() == "keyword_argument" {
                    x.field("value")
                } else {
                    Some(x)
                };
                v.and_then(|v| string_literal(v, m.source))
                    .is_some_and(|s| s.eq_ignore_ascii_case("tpu"))
            })
        })
    };
    let code = m.calls.iter().any(|&(c, _)| {
        m.call_name(c).is_some_and(|q| {
            q.starts_with("jax.tools.colab_tpu.")
                || (matches!(q.as_str(), "jax.devices" | "jax.local_devices") && tpu_arg(c))
        })
    });
    let env = m.env_writes().iter().any(|w| {
        matches!(w.key.as_str(), "JAX_PLATFORMS" | "JAX_PLATFORM_NAME")
            && w.value.as_deref().is_some_and(|v| {
                let parts: Vec<&str> = v.split(',').map(str::trim).collect();
                parts.contains(&"tpu") && parts.iter().all(|p| matches!(*p, "tpu" | "cpu"))
            })
    });
    code || env || header_says_tpu(m)
}

/// Do the file's leading comments and module docstring name a TPU and never a GPU?
fn header_says_tpu(m: &PythonModel<'_>) -> bool {
    let Some(root) = m.roots.first() else {
        return false;
    };
    let mut header = String::new();
    let mut docstring = false;
    for c in named_children(*root) {
        match c.kind_name() {
            "comment" => header.push_str(m.text(c)),
            "expression_statement" if !docstring => {
                docstring = true;
                match c.named_child(0).filter(|s| s.kind_name() == "string") {
                    Some(s) => header.push_str(m.text(s)),
                    None => break,
                }
            }
            _ => break,
        }
        header.push('\n');
    }
    let words = |w: &str| {
        header
            .split(|c: char| !c.is_ascii_alphanumeric())
            .any(|t| t == w || t == format!("{w}s"))
    };
    words("TPU") && !words("GPU")
}

/// Does this write of `key` keep JAX from taking most of the GPU?
fn configures(key: &str, value: Option<&str>) -> bool {
    let v = value.unwrap_or("").trim().to_ascii_lowercase();
    match key {
        "XLA_PYTHON_CLIENT_PREALLOCATE" => v == "false" || v == "0",
        "XLA_PYTHON_CLIENT_MEM_FRACTION" => true,
        "XLA_PYTHON_CLIENT_ALLOCATOR" => v == "platform" || v == "cuda_async",
        _ => false,
    }
}
