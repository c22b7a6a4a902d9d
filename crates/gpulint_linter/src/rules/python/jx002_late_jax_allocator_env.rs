//! JX002: JAX allocator environment variables set too late, or with invalid values.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::python::torch::Runtime;
use gpulint_syntax::Lang;

declare_rule! {
    /// ## What it does
    /// Checks writes of `XLA_PYTHON_CLIENT_PREALLOCATE`, `XLA_PYTHON_CLIENT_MEM_FRACTION` and
    /// `XLA_PYTHON_CLIENT_ALLOCATOR` from Python (`os.environ[...] = ...`, `setdefault`,
    /// `update`, `putenv`):
    /// - set after the first JAX computation in execution order (a `jnp.*` or `jax.random.*`
    ///   call, `jax.devices()`, `jax.device_put`, ...), when JAX has already created its GPU
    ///   client and preallocated;
    /// - `MEM_FRACTION` that is not a number in (0, 1];
    /// - `ALLOCATOR` other than `default`, `platform`, `bfc`, `cuda_async` (or `vmm`);
    /// - `PREALLOCATE` other than `true`/`false`/`1`/`0` (anything else leaves preallocation on).
    ///
    /// Setting them before `import jax`, or after the import but before the first computation,
    /// is fine.
    ///
    /// ## Why is this risky?
    /// JAX "will preallocate 75% of the total GPU memory when the first JAX operation is run".
    /// The variables are read once, when the GPU backend is created: a later write is ignored,
    /// and a second process or framework on the GPU runs out of memory. An unknown allocator
    /// name or a fraction that is not a number raises `ValueError` when the backend starts;
    /// `XLA_PYTHON_CLIENT_PREALLOCATE=no` is not recognized as false, so the memory is
    /// preallocated anyway. Since jaxlib 0.4.1, `MEM_FRACTION` is a fraction of total memory.
    ///
    /// ## Example
    /// ```python
    /// import os
    /// import jax.numpy as jnp
    ///
    /// x = jnp.ones((1024, 1024))
    /// os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// import os
    /// os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    /// import jax.numpy as jnp
    ///
    /// x = jnp.ones((1024, 1024))
    /// ```
    ///
    /// ## References
    /// - JAX, *GPU memory allocation*:
    ///   <https://docs.jax.dev/en/latest/gpu_memory_allocation.html>
    /// - JAX changelog, jaxlib 0.4.1 (`XLA_PYTHON_CLIENT_MEM_FRACTION` relative to total
    ///   memory): <https://docs.jax.dev/en/latest/changelog.html>
    pub static JX002 = {
        code: "JX002",
        name: "late-jax-allocator-env",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Warning,
        summary: "JAX allocator environment variable set too late or with an invalid value",
        kinds: &[],
        needles: &["XLA_PYTHON_CLIENT_", "environ", "putenv"],
        options: &[],
    };
}

pub struct LateJaxAllocatorEnv;

impl Rule for LateJaxAllocatorEnv {
    fn meta(&self) -> &'static RuleMeta {
        &JX002
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.python();
        for w in m.env_writes() {
            let problem = match (w.key.as_str(), w.value.as_deref()) {
                ("XLA_PYTHON_CLIENT_MEM_FRACTION", Some(v)) => match v.trim().parse::<f64>() {
                    Ok(f) if f > 0.0 && f <= 1.0 => None,
                    Ok(_) => Some((
                        format!("`XLA_PYTHON_CLIENT_MEM_FRACTION={v}` is outside (0, 1]"),
                        "the fraction of total GPU memory to preallocate must be in (0, 1]",
                        true,
                    )),
                    Err(_) => Some((
                        format!("`XLA_PYTHON_CLIENT_MEM_FRACTION={v}` is not a number"),
                        "JAX raises ValueError when it creates the GPU backend",
                        true,
                    )),
                },
                ("XLA_PYTHON_CLIENT_ALLOCATOR", Some(v)) => {
                    let l = v.trim().to_ascii_lowercase();
                    (!matches!(l.as_str(), "default" | "platform" | "bfc" | "cuda_async" | "vmm"))
                        .then(|| (format!("`XLA_PYTHON_CLIENT_ALLOCATOR={v}` is not an allocator JAX knows"), "JAX raises ValueError: XLA_PYTHON_CLIENT_ALLOCATOR env var must be \"default\", \"platform\", \"bfc\", or \"cuda_async\"", true))
                }
                ("XLA_PYTHON_CLIENT_PREALLOCATE", Some(v)) => {
                    let l = v.trim().to_ascii_lowercase();
                    (!matches!(l.as_str(), "true" | "false" | "0" | "1")).then(|| {
                        (
                            format!("`XLA_PYTHON_CLIENT_PREALLOCATE={v}` is not recognized"),
                            "only `false` or `0` turn preallocation off; this value leaves it on",
                            false,
                        )
                    })
                }
                _ => None,
            };
            if let Some((msg, label, fatal)) = problem {
                let severity = if fatal {
                    Severity::Error
                } else {
                    Severity::Warning
                };
                ctx.report(
                    ctx.diagnostic(w.node, msg)
                        .severity(severity)
                        .primary_label(label)
                        .help("use `XLA_PYTHON_CLIENT_PREALLOCATE=false`, `XLA_PYTHON_CLIENT_MEM_FRACTION=.50` or `XLA_PYTHON_CLIENT_ALLOCATOR=platform`"),
                );
                continue;
            }
            if !matches!(
                w.key.as_str(),
                "XLA_PYTHON_CLIENT_PREALLOCATE"
                    | "XLA_PYTHON_CLIENT_MEM_FRACTION"
                    | "XLA_PYTHON_CLIENT_ALLOCATOR"
            ) || !m.imports_jax()
            {
                continue;
            }
            if let Some(init) = m.torch().init_before(m.order(), w.node, Runtime::Jax) {
                let d = ctx
                    .diagnostic(
                        w.node,
                        format!(
                            "`{}` is set after the first JAX computation, so it is ignored",
                            w.key
                        ),
                    )
                    .primary_label("too late: JAX already created its GPU client and preallocated")
                    .with_label(Span::of(&init), "the first JAX computation runs here")
                    .note("JAX preallocates 75% of GPU memory when the first JAX operation runs")
                    .help(
                        "set the variable before `import jax` (or in the launcher's environment)",
                    );
                ctx.report(d);
            }
        }
    }
}
