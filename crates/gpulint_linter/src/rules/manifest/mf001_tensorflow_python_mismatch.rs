use crate::declare_rule;
use crate::manifest_context::{certainty, row_note, ManifestContext};
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::Severity;
use gpulint_manifest::compat::{minor_str, Minor, TfRow};
use gpulint_manifest::versions::{python_minors, ranges};

declare_rule! {
    /// ## What it does
    /// Checks the TensorFlow pin of a manifest (`tensorflow`, `tensorflow-cpu`,
    /// `tensorflow-gpu`) against the Python version the same environment declares:
    /// `requires-python` or Poetry's `python` in `pyproject.toml`, `python_requires` in
    /// `setup.py`, `python=3.X` in a conda environment, `FROM python:3.X` in a Dockerfile, or a
    /// `.python-version` / `runtime.txt` beside a requirements file. It reports a Python version
    /// that no TensorFlow release the pin admits was built and tested for.
    ///
    /// An error when no admitted TensorFlow release supports any of the declared Python versions;
    /// a warning, naming them, when only some declared Python versions are left without one. An
    /// open-ended Python range (`>=3.8`) is read up to the newest Python the admitted releases
    /// support, not as a promise to run on every future Python.
    /// A pin without a lower bound (`tensorflow<2.11`, or no version) stands for the newest
    /// release it admits, the one pip installs; a pin with one stands for every release it admits.
    ///
    /// ## Why is this risky?
    /// TensorFlow publishes wheels only for the Python versions of its tested build
    /// configurations. Without a wheel, `pip` fails, or backtracks to an old TensorFlow built
    /// against other CUDA and cuDNN versions, and mismatched native builds crash at import
    /// (`0xC0000005` on Windows, tensorflow/tensorflow#26853). Patch releases occasionally add
    /// a Python version; the table lists the `x.y.0` of each release line.
    ///
    /// ## Example
    /// ```yaml
    /// name: train
    /// dependencies:
    ///   - python=3.12
    ///   - pip:
    ///     - tensorflow==2.15.0
    /// ```
    ///
    /// ## Use instead
    /// ```yaml
    /// name: train
    /// dependencies:
    ///   - python=3.11
    ///   - pip:
    ///     - tensorflow==2.15.0
    /// ```
    ///
    /// ## References
    /// - TensorFlow tested build configurations (Linux):
    ///   <https://www.tensorflow.org/install/source#tested_build_configurations>
    /// - TensorFlow tested build configurations (Windows):
    ///   <https://www.tensorflow.org/install/source_windows#tested_build_configurations>
    pub static META = {
        code: "MF001",
        name: "tensorflow-python-mismatch",
        lang: RuleLang::Manifest,
        severity: Severity::Error,
        summary: "TensorFlow pin has no build for the declared Python version",
        kinds: &[],
        needles: &[],
        options: &[],
    };
}

pub struct TensorflowPythonMismatch;

fn supports(row: &TfRow, p: Minor) -> bool {
    row.python_min <= p && p <= row.python_max
}

impl Rule for TensorflowPythonMismatch {
    fn meta(&self) -> &'static RuleMeta {
        &META
    }

    fn check_manifest(&self, ctx: &mut ManifestContext<'_>) {
        let known_py = python_minors();
        for env in ctx.envs {
            for tf in env.tensorflow() {
                if tf
                    .req
                    .marker
                    .as_ref()
                    .is_some_and(|m| m.mentions("python_version"))
                {
                    continue;
                }
                let rows: Vec<&TfRow> = tf.minors.iter().filter_map(|&m| env.tf_row(m)).collect();
                let (Some(lo), Some(hi)) = (
                    rows.iter().map(|r| r.python_min).min(),
                    rows.iter().map(|r| r.python_max).max(),
                ) else {
                    continue;
                };
                let Some((pythons, decl)) = env.python((lo, hi)) else {
                    continue;
                };
                let bad: Vec<Minor> = pythons
                    .iter()
                    .copied()
                    .filter(|&p| !rows.iter().any(|r| supports(r, p)))
                    .collect();
                if bad.is_empty() {
                    continue;
                }
                let span = match (&tf.req.origin, &decl.origin) {
                    (None, _) => tf.req.span,
                    (Some(_), None) => decl.span,
                    (Some(a), Some(b)) if a.file != b.file => tf.req.span,
                    _ => continue,
                };
                let all = bad.len() == pythons.len();
                let which = if rows.len() == 1 {
                    format!("TensorFlow {}", rows[0].version)
                } else {
                    format!("no TensorFlow release that {} admits", tf.req.cite())
                };
                let message = if rows.len() == 1 {
                    format!(
                        "{which} has no build for Python {}, which {} {}",
                        ranges(&bad, &known_py),
                        decl_name(decl),
                        if all { "selects" } else { "admits" }
                    )
                } else {
                    format!(
                        "{which} supports Python {}, which {} {}",
                        ranges(&bad, &known_py),
                        decl_name(decl),
                        if all { "selects" } else { "admits" }
                    )
                };
                let mut d = ctx
                    .diagnostic(span, message)
                    .severity(certainty(all))
                    .primary_label(format!(
                        "TensorFlow {} is tested with Python {}–{}",
                        ranges(&tf.minors, &gpulint_manifest::compat::tables().tf_minors()),
                        minor_str(lo),
                        minor_str(hi)
                    ));
                if decl.origin.is_none() && decl.span != span {
                    d = d.with_label(
                        decl.span,
                        format!("Python {} declared here", ranges(&pythons, &known_py)),
                    );
                } else if let Some(o) = &decl.origin {
                    d = d.note(format!(
                        "the Python version comes from {o} (`{}`)",
                        decl.text
                    ));
                }
                if tf.req.origin.is_some() && tf.req.span != span {
                    d = d.with_label(
                        tf.req.span,
                        format!("TensorFlow pinned in {}", tf.req.cite()),
                    );
                }
                for r in rows.iter().rev().take(2) {
                    d = d.note(row_note(&r.describe(), &r.source));
                }
                d = d.note(
                    "without a wheel for that Python, pip fails or backtracks to an older TensorFlow built for other CUDA/cuDNN versions; mismatched native builds crash at import",
                );
                d = d.help(help(env, bad[0], lo, hi));
                ctx.report(d);
            }
        }
    }
}

fn decl_name(decl: &gpulint_manifest::PythonDecl) -> String {
    format!("`{}`", decl.text)
}

/// The newest TensorFlow tested with Python `p`, or the Python range to use instead.
fn help(env: &gpulint_manifest::env::Env<'_>, p: Minor, lo: Minor, hi: Minor) -> String {
    let t = gpulint_manifest::compat::tables();
    let best = t
        .tf_minors()
        .into_iter()
        .rev()
        .filter_map(|m| env.tf_row(m))
        .find(|r| supports(r, p));
    match best {
        Some(r) => format!(
            "use a Python in {}–{} for this TensorFlow, or for Python {} pin TensorFlow {} (tested with Python {}–{})",
            minor_str(lo),
            minor_str(hi),
            minor_str(p),
            r.version,
            minor_str(r.python_min),
            minor_str(r.python_max)
        ),
        None => format!("use a Python in {}–{} for this TensorFlow", minor_str(lo), minor_str(hi)),
    }
}
