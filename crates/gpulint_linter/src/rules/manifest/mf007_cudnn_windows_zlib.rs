use crate::declare_rule;
use crate::manifest_context::{certainty, ManifestContext};
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::Severity;
use gpulint_manifest::compat::{minor_str, Minor};
use gpulint_manifest::{Installer, Platform};

declare_rule! {
    /// ## What it does
    /// Reports cuDNN 8.3–8.9 — a conda `cudnn` pin or a pip `nvidia-cudnn-cuXX` pin — in an
    /// environment that targets native Windows (see MF002 for how Windows is recognised) when
    /// nothing in the file provides zlib for it (`zlib-wapi`, `zlibwapi.dll`).
    ///
    /// An error when every cuDNN version the pin admits needs zlib; a warning when only some
    /// do. cuDNN 9 and cuDNN before 8.3 do not need it, and Linux is not affected.
    ///
    /// ## Why is this risky?
    /// From cuDNN 8.3 on, NVIDIA's Windows install guide requires zlib ("Install zlib
    /// (Windows)"). Without it the process prints `Could not locate zlibwapi.dll. Please make
    /// sure it is in your library path!` at the first convolution and exits through `abort()`,
    /// which Windows reports only as exit code `-1073740791` (`0xC0000409`). Python 3.8+
    /// restricts the DLL search path, so adding a `PATH` entry may not be enough.
    ///
    /// ## Example
    /// ```yaml
    /// name: train
    /// platforms:
    ///   - win-64
    /// dependencies:
    ///   - python=3.10
    ///   - cudatoolkit=11.8
    ///   - cudnn=8.9.2
    /// ```
    ///
    /// ## Use instead
    /// ```yaml
    /// name: train
    /// platforms:
    ///   - win-64
    /// dependencies:
    ///   - python=3.10
    ///   - cudatoolkit=11.8
    ///   - cudnn=8.9.2
    ///   - zlib-wapi
    /// ```
    ///
    /// ## References
    /// - cupy/cupy#6226, linking NVIDIA's cuDNN install guide ("Install zlib (Windows)"):
    ///   <https://github.com/cupy/cupy/issues/6226>
    /// - microsoft/onnxruntime#17510: <https://github.com/microsoft/onnxruntime/issues/17510>
    /// - PaddlePaddle/FastDeploy#362 (the abort in `cudnn64_8.dll`):
    ///   <https://github.com/PaddlePaddle/FastDeploy/issues/362>
    pub static META = {
        code: "MF007",
        name: "cudnn-windows-zlib",
        lang: RuleLang::Manifest,
        severity: Severity::Error,
        summary: "cuDNN 8.3–8.9 on native Windows without zlib (`zlibwapi.dll`)",
        kinds: &[],
        needles: &[],
        options: &[],
    };
}

pub struct CudnnWindowsZlib;

const NEEDS_ZLIB: (Minor, Minor) = ((8, 3), (8, 9));

impl Rule for CudnnWindowsZlib {
    fn meta(&self) -> &'static RuleMeta {
        &META
    }

    fn check_manifest(&self, ctx: &mut ManifestContext<'_>) {
        if ctx.manifest.zlib_provisioned {
            return;
        }
        for env in ctx.envs.iter().filter(|e| e.platform == Platform::Windows) {
            let Some((evidence_span, evidence)) = env.windows_evidence() else {
                continue;
            };
            for lib in env.cudnns() {
                if lib.req.installer == Installer::Image || lib.req.origin.is_some() {
                    continue;
                }
                let bad: Vec<Minor> = lib
                    .minors
                    .iter()
                    .copied()
                    .filter(|m| NEEDS_ZLIB.0 <= *m && *m <= NEEDS_ZLIB.1)
                    .collect();
                if bad.is_empty() {
                    continue;
                }
                let all = bad.len() == lib.minors.len();
                let versions = if bad.len() == 1 {
                    minor_str(bad[0])
                } else {
                    format!("{}–{}", minor_str(bad[0]), minor_str(bad[bad.len() - 1]))
                };
                let mut d = ctx
                    .diagnostic(
                        lib.req.span,
                        format!(
                            "{} {} cuDNN {versions} on native Windows, which needs `zlibwapi.dll`, and nothing here provides it",
                            lib.req.cite(),
                            if all { "installs" } else { "admits" }
                        ),
                    )
                    .severity(certainty(all))
                    .primary_label("cuDNN 8.3–8.9 loads zlibwapi.dll");
                match evidence_span {
                    Some(s) if s != lib.req.span => {
                        d = d.with_label(s, format!("targets native Windows: {evidence}"))
                    }
                    _ => {
                        d = d.note(format!(
                            "this environment targets native Windows: {evidence}"
                        ))
                    }
                }
                d = d.note("without it the first convolution prints `Could not locate zlibwapi.dll. Please make sure it is in your library path!` and aborts: exit code -1073740791 (0xC0000409)");
                ctx.report(d.help(
                    "add `zlib-wapi` (conda-forge), or ship `zlibwapi.dll` next to the cuDNN DLLs (`os.add_dll_directory` on Python ≥ 3.8); cuDNN 9 does not need it",
                ));
            }
        }
    }
}
