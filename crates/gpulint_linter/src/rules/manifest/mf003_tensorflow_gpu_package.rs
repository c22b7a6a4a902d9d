use crate::declare_rule;
use crate::manifest_context::{row_note, ManifestContext};
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::Severity;
use gpulint_manifest::compat::{tables, Minor, TfPlatform};
use gpulint_manifest::versions::{admitted_minors, ranges};
use gpulint_manifest::Installer;

declare_rule! {
    /// ## What it does
    /// Reports a pip requirement on `tensorflow-gpu` (or `tensorflow_gpu`), in any manifest
    /// and in `pip install` lines of Dockerfiles. Conda's `tensorflow-gpu` is a different
    /// package and is not reported.
    ///
    /// An error when the requirement admits the last `tensorflow-gpu` "release" (2.12.0, an
    /// empty package that fails to install) or no release at all — which is what an unpinned
    /// or `>=` requirement gets; a warning for a pin to an old real release, which installs but
    /// drags in that release's CUDA and cuDNN.
    ///
    /// ## Why is this risky?
    /// "tensorflow and tensorflow-gpu have been the same package since TensorFlow 2.1 … As of
    /// December 2022, tensorflow-gpu has been removed and has been replaced with this new,
    /// empty package that generates an error upon installation." The install stops with
    /// `Exception: The "tensorflow-gpu" package has been removed!`. An old exact pin installs,
    /// but ties the project to the CUDA and cuDNN of that release (see MF004). A frozen legacy
    /// image with TensorFlow 1.x, where `tensorflow-gpu` was the GPU package, can suppress it.
    ///
    /// ## Example
    /// ```requirements
    /// tensorflow-gpu>=2.4
    /// ```
    ///
    /// ## Use instead
    /// ```requirements
    /// tensorflow[and-cuda]>=2.15
    /// ```
    ///
    /// ## References
    /// - The `tensorflow-gpu` project page on PyPI: <https://pypi.org/project/tensorflow-gpu/>
    /// - The install error, as reported in tensorflow/serving#2096:
    ///   <https://github.com/tensorflow/serving/issues/2096>
    /// - TensorFlow pip packages: <https://www.tensorflow.org/install/pip#package_location>
    pub static META = {
        code: "MF003",
        name: "tensorflow-gpu-package",
        lang: RuleLang::Manifest,
        severity: Severity::Error,
        summary: "`tensorflow-gpu` requirement: removed from PyPI, replaced by a package that fails to install",
        kinds: &[],
        needles: &[],
        options: &[],
    };
}

pub struct TensorflowGpuPackage;

/// The empty package that raises on installation.
const STUB: Minor = (2, 12);

impl Rule for TensorflowGpuPackage {
    fn meta(&self) -> &'static RuleMeta {
        &META
    }

    fn check_manifest(&self, ctx: &mut ManifestContext<'_>) {
        let t = tables();
        // Real tensorflow-gpu releases: every release line up to 2.11, then the stub.
        let mut known: Vec<Minor> = t.tf_minors().into_iter().filter(|m| *m < STUB).collect();
        known.push(STUB);
        for r in ctx.manifest.requirements.iter() {
            if r.name != "tensorflow-gpu" || r.installer != Installer::Pip || r.origin.is_some() {
                continue;
            }
            let Some(admitted) = admitted_minors(&r.spec, &known) else {
                continue;
            };
            let stub = admitted.is_empty() || admitted.contains(&STUB);
            let mut d = if stub {
                ctx.diagnostic(
                    r.span,
                    format!(
                        "`{}` installs the empty `tensorflow-gpu` package that fails with `The \"tensorflow-gpu\" package has been removed!`",
                        r.text
                    ),
                )
                .severity(Severity::Error)
                .primary_label(if admitted.is_empty() {
                    "no installable tensorflow-gpu release matches this".to_string()
                } else {
                    "pip picks the newest admitted release, 2.12.0: the error-raising stub".to_string()
                })
            } else {
                let mut d = ctx
                    .diagnostic(
                        r.span,
                        format!(
                            "`tensorflow-gpu` is removed from PyPI; `{}` pins an old release (TensorFlow {}) and its CUDA/cuDNN",
                            r.text,
                            ranges(&admitted, &known)
                        ),
                    )
                    .severity(Severity::Warning)
                    .primary_label("deprecated package");
                if let Some(row) = admitted.last().and_then(|&m| t.tf(TfPlatform::Linux, m)) {
                    d = d.note(row_note(&row.describe(), &row.source));
                }
                d
            };
            d = d.note("\"tensorflow and tensorflow-gpu have been the same package since TensorFlow 2.1 … As of December 2022, tensorflow-gpu has been removed and has been replaced with this new, empty package that generates an error upon installation\" (https://pypi.org/project/tensorflow-gpu/)");
            d = d.help(
                "depend on `tensorflow` instead: `tensorflow[and-cuda]` on Linux and WSL2 (TensorFlow ≥ 2.14 brings its CUDA and cuDNN as pip wheels), or `tensorflow<2.11` for the GPU on native Windows",
            );
            ctx.report(d);
        }
    }
}
