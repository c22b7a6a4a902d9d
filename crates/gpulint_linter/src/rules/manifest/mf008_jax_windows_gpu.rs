use crate::declare_rule;
use crate::manifest_context::{row_note, ManifestContext};
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::Severity;
use gpulint_manifest::compat::tables;
use gpulint_manifest::Platform;

declare_rule! {
    /// ## What it does
    /// Reports a JAX GPU install — `jax[cuda12]`, `jax[cuda13]`, `jax[cuda12-local]`,
    /// `jax[cuda12_pip]`, a `jaxlib` with a `+cuda` local version, `jax-cuda12-plugin` — in an
    /// environment that targets native Windows (see MF002 for how Windows is recognised; a file
    /// that mentions WSL is not taken as native Windows).
    ///
    /// ## Why is this risky?
    /// JAX's installation table lists NVIDIA GPUs on native Windows x86_64 as "no" (WSL2:
    /// "experimental"), for every release. The install fails, or JAX silently runs on the CPU:
    /// "These pip installations do not work with Windows, and may fail silently".
    ///
    /// ## Example
    /// ```requirements
    /// jax[cuda12]==0.4.31; sys_platform == "win32"
    /// ```
    ///
    /// ## Use instead
    /// ```requirements
    /// jax==0.4.31; sys_platform == "win32"
    /// jax[cuda12]==0.4.31; sys_platform == "linux"
    /// ```
    ///
    /// ## References
    /// - JAX supported platforms: <https://docs.jax.dev/en/latest/installation.html#supported-platforms>
    pub static META = {
        code: "MF008",
        name: "jax-windows-gpu",
        lang: RuleLang::Manifest,
        severity: Severity::Error,
        summary: "JAX CUDA install in an environment that targets native Windows",
        kinds: &[],
        needles: &[],
        options: &[],
    };
}

pub struct JaxWindowsGpu;

impl Rule for JaxWindowsGpu {
    fn meta(&self) -> &'static RuleMeta {
        &META
    }

    fn check_manifest(&self, ctx: &mut ManifestContext<'_>) {
        let newest = tables().jax.last();
        for env in ctx.envs.iter().filter(|e| e.platform == Platform::Windows) {
            let Some((evidence_span, evidence)) = env.windows_evidence() else {
                continue;
            };
            for j in env.jax() {
                if j.req.origin.is_some() {
                    continue;
                }
                let mut d = ctx
                    .diagnostic(
                        j.req.span,
                        format!(
                            "{} installs JAX for CUDA {}, which has no GPU support on native Windows",
                            j.req.cite(),
                            j.cuda_major
                        ),
                    )
                    .primary_label("NVIDIA GPU on native Windows: \"no\"");
                match evidence_span {
                    Some(s) if s != j.req.span => {
                        d = d.with_label(s, format!("targets native Windows: {evidence}"))
                    }
                    _ => {
                        d = d.note(format!(
                            "this environment targets native Windows: {evidence}"
                        ))
                    }
                }
                if let Some(r) = newest {
                    d = d.note(row_note(
                        &format!(
                            "JAX {}: NVIDIA GPU on native Windows: no (WSL2 experimental)",
                            r.label
                        ),
                        "https://docs.jax.dev/en/latest/installation.html#supported-platforms",
                    ));
                }
                d = d.note("\"These pip installations do not work with Windows, and may fail silently\": the run trains on the CPU");
                ctx.report(d.help(
                    "install JAX with CUDA in WSL2 (or Linux), and use plain `jax` (CPU) on native Windows",
                ));
            }
        }
    }
}
