use crate::declare_rule;
use crate::manifest_context::{certainty, related, row_note, ManifestContext};
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::Severity;
use gpulint_manifest::compat::{minor_str, tables, Minor, TfPlatform};
use gpulint_manifest::versions::ranges;
use gpulint_manifest::Platform;

declare_rule! {
    /// ## What it does
    /// Reports a TensorFlow pin that admits releases 2.11 or newer in an environment that
    /// targets native Windows and asks for the GPU. Windows is recognised by a Windows-only
    /// marker (`platform_system == "Windows"`, `sys_platform == "win32"`), a conda environment
    /// exported from a `C:\…` prefix or solved only for `win-64`, Windows-only packages
    /// (`pywin32`, `vc`, `ucrt`, …) or a Windows base image; GPU intent by `cudatoolkit`,
    /// `cudnn`, `nvidia-*` wheels, `tensorflow[and-cuda]` or `tensorflow-gpu`. A file that
    /// mentions WSL is not taken as native Windows, and `tensorflow-directml-plugin` is the
    /// supported GPU route there.
    ///
    /// An error when every admitted release is 2.11 or newer; a warning, naming them, when
    /// only some are.
    /// A pin without a lower bound (`tensorflow<2.11`, or no version) stands for the newest
    /// release it admits, the one pip installs; a pin with one stands for every release it admits.
    ///
    /// ## Why is this risky?
    /// "TensorFlow 2.10 was the last TensorFlow release that supported GPU on native-Windows.
    /// Starting with TensorFlow 2.11, you will need to install TensorFlow in WSL2." The run
    /// silently trains on the CPU: host-RAM out-of-memory and apparent hangs. Users then try to
    /// add CUDA DLLs by hand, and mismatched DLLs abort with `0xC0000409`.
    ///
    /// ## Example
    /// ```yaml
    /// name: train
    /// prefix: C:\Users\me\miniconda3\envs\train
    /// dependencies:
    ///   - python=3.10
    ///   - cudatoolkit=11.2
    ///   - cudnn=8.1.0
    ///   - pip:
    ///     - tensorflow==2.15.0
    /// ```
    ///
    /// ## Use instead
    /// ```yaml
    /// name: train
    /// prefix: C:\Users\me\miniconda3\envs\train
    /// dependencies:
    ///   - python=3.10
    ///   - cudatoolkit=11.2
    ///   - cudnn=8.1.0
    ///   - pip:
    ///     - tensorflow==2.10.1
    /// ```
    ///
    /// Or install TensorFlow in WSL2, where `tensorflow[and-cuda]` works.
    ///
    /// ## References
    /// - TensorFlow pip install, Windows native:
    ///   <https://www.tensorflow.org/install/pip#windows-native>
    /// - Tested GPU builds for Windows (last row 2.10):
    ///   <https://www.tensorflow.org/install/source_windows#gpu>
    pub static META = {
        code: "MF002",
        name: "tensorflow-windows-gpu",
        lang: RuleLang::Manifest,
        severity: Severity::Error,
        summary: "TensorFlow >= 2.11 with GPU intent on native Windows, where it has no GPU support",
        kinds: &[],
        needles: &[],
        options: &[],
    };
}

pub struct TensorflowWindowsGpu;

impl Rule for TensorflowWindowsGpu {
    fn meta(&self) -> &'static RuleMeta {
        &META
    }

    fn check_manifest(&self, ctx: &mut ManifestContext<'_>) {
        let t = tables();
        let known = t.tf_minors();
        let last_gpu = t
            .tensorflow
            .iter()
            .filter(|r| r.platform == TfPlatform::WindowsNative && r.native_gpu)
            .max_by_key(|r| r.minor);
        for env in ctx.envs.iter().filter(|e| e.platform == Platform::Windows) {
            let Some((evidence_span, evidence)) = env.windows_evidence() else {
                continue;
            };
            if env.has("tensorflow-directml-plugin") {
                continue;
            }
            let Some(intent) = env.gpu_intent() else {
                continue;
            };
            for tf in env.tensorflow().into_iter().filter(|tf| tf.gpu) {
                let rows: Vec<_> = tf.minors.iter().filter_map(|&m| env.tf_row(m)).collect();
                let bad: Vec<Minor> = rows
                    .iter()
                    .filter(|r| env.tf_gpu_row(r.minor).is_none())
                    .map(|r| r.minor)
                    .collect();
                if bad.is_empty() {
                    continue;
                }
                let span = if tf.req.origin.is_none() {
                    tf.req.span
                } else if intent.origin.is_none() {
                    intent.span
                } else {
                    continue;
                };
                let all = bad.len() == rows.len();
                let message = if all {
                    format!(
                        "TensorFlow {} has no GPU support on native Windows, but this environment targets Windows and asks for the GPU",
                        ranges(&bad, &known)
                    )
                } else {
                    format!(
                        "{} admits TensorFlow {}, which has no GPU support on native Windows, and pip installs the newest",
                        tf.req.cite(),
                        ranges(&bad, &known)
                    )
                };
                let mut d = ctx
                    .diagnostic(span, message)
                    .severity(certainty(all))
                    .primary_label("TensorFlow ≥ 2.11 runs on the CPU on native Windows");
                if let Some(s) = evidence_span.filter(|s| *s != span) {
                    d = d.with_label(s, format!("targets native Windows: {evidence}"));
                } else {
                    d = d.note(format!(
                        "this environment targets native Windows: {evidence}"
                    ));
                }
                d = related(d, span, intent, "asks for the GPU");
                d = related(d, span, tf.req, "TensorFlow pinned here");
                if let Some(r) = bad
                    .iter()
                    .filter_map(|&m| env.tf_row(m))
                    .find(|r| r.platform == TfPlatform::WindowsNative)
                {
                    d = d.note(row_note(&r.describe(), &r.source));
                }
                d = d.note("\"TensorFlow 2.10 was the last TensorFlow release that supported GPU on native-Windows. Starting with TensorFlow 2.11, you will need to install TensorFlow in WSL2\" (https://www.tensorflow.org/install/pip#windows-native); the run silently falls back to the CPU");
                d = d.help(match last_gpu {
                    Some(r) => format!(
                        "pin `tensorflow<2.11` for the GPU on native Windows ({} {}: CUDA {}, cuDNN {}, Python {}–{}), or install TensorFlow in WSL2",
                        r.package.replace('_', "-"),
                        r.version,
                        r.cuda.as_ref().map(|v| v.to_string()).unwrap_or_default(),
                        r.cudnn.as_ref().map(|v| v.to_string()).unwrap_or_default(),
                        minor_str(r.python_min),
                        minor_str(r.python_max)
                    ),
                    None => "pin `tensorflow<2.11`, or install TensorFlow in WSL2".to_string(),
                });
                ctx.report(d);
            }
        }
    }
}
