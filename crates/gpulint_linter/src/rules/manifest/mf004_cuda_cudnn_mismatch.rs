use crate::declare_rule;
use crate::manifest_context::{certainty, related, row_note, ManifestContext};
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::Severity;
use gpulint_manifest::compat::{minor_str, tables, Minor, TfRow};
use gpulint_manifest::env::{primary, Env, Library, TagFrom};
use gpulint_manifest::versions::{ranges, tag_cuda_major};
use gpulint_manifest::{Installer, Requirement};

declare_rule! {
    /// ## What it does
    /// Compares the CUDA toolkit and cuDNN an environment declares — conda `cudatoolkit`,
    /// `cuda-version`, `cudnn`; pip `nvidia-cudnn-cuXX`, `nvidia-cuda-runtime-cuXX` and other
    /// `nvidia-*-cuXX` wheels; a `FROM nvidia/cuda:<X.Y>-cudnn<N>-…` base image — with the
    /// framework pinned beside it:
    ///
    /// - TensorFlow: the CUDA major must be the one the release was built with, and cuDNN must
    ///   have the same major and at least the minor of the build (TensorFlow checks this at
    ///   start-up). Only pip `nvidia-*` wheels are compared for `tensorflow[and-cuda]`, which
    ///   brings its own libraries;
    /// - JAX `cuda12` variants: cuDNN at least 8.9.4 (jaxlib ≥ 0.4.17), 9.1 (≥ 0.4.31), 9.8
    ///   (≥ 0.6.0). System libraries count only for `cuda12-local`;
    /// - PyTorch `cuXYZ` wheels whose CUDA major is newer than the CUDA of the base image (the
    ///   hosts that image is meant for may have a driver too old for the wheel; a warning).
    ///
    /// Minor versions of the CUDA toolkit within one major are compatible and not reported. An
    /// error when every admitted framework release conflicts; a warning, naming them, when only
    /// some do.
    /// A pin without a lower bound (`tensorflow<2.11`, or no version) stands for the newest
    /// release it admits, the one pip installs; a pin with one stands for every release it admits.
    ///
    /// ## Why is this risky?
    /// Libraries built for another CUDA or cuDNN fail to load or fail at the first convolution:
    /// `DNN library is not found`, `Loaded runtime CuDNN library: 8.1.0 but source was compiled
    /// with: 8.6.0`, `CUDNN_STATUS_*` errors and `Check failed` aborts. On Windows the abort
    /// surfaces only as exit code `-1073740791` (`0xC0000409`), as in
    /// tensorflow/tensorflow#47934, #46990 and #51483.
    ///
    /// ## Example
    /// ```dockerfile
    /// FROM nvidia/cuda:11.8.0-cudnn8-runtime-ubuntu22.04
    /// RUN pip install tensorflow==2.15.0
    /// ```
    ///
    /// ## Use instead
    /// ```dockerfile
    /// FROM nvidia/cuda:12.2.2-cudnn8-runtime-ubuntu22.04
    /// RUN pip install tensorflow==2.15.0
    /// ```
    ///
    /// ## References
    /// - TensorFlow tested build configurations: <https://www.tensorflow.org/install/source#gpu>
    /// - TensorFlow software requirements: <https://www.tensorflow.org/install/pip#software_requirements>
    /// - JAX installation, NVIDIA GPU: <https://docs.jax.dev/en/latest/installation.html#nvidia-gpu>
    /// - PyTorch release compatibility matrix:
    ///   <https://github.com/pytorch/pytorch/blob/main/RELEASE.md#release-compatibility-matrix>
    pub static META = {
        code: "MF004",
        name: "cuda-cudnn-mismatch",
        lang: RuleLang::Manifest,
        severity: Severity::Error,
        summary: "Declared CUDA or cuDNN does not match what the pinned framework was built with",
        kinds: &[],
        needles: &[],
        options: &[],
    };
}

pub struct CudaCudnnMismatch;

fn lines(minors: &[Minor]) -> String {
    let majors: std::collections::BTreeSet<u64> = minors.iter().map(|m| m.0).collect();
    if minors.len() == 1 {
        minor_str(minors[0])
    } else if majors.len() == 1 {
        format!("{}.x", minors[0].0)
    } else {
        majors
            .iter()
            .map(|m| format!("{m}.x"))
            .collect::<Vec<_>>()
            .join(" or ")
    }
}

fn cudnn_ok(row: &TfRow, lib: &Library<'_>) -> bool {
    let Some(build) = row.cudnn.as_ref() else {
        return true;
    };
    let r = build.release();
    let need = (
        r.first().copied().unwrap_or(0),
        r.get(1).copied().unwrap_or(0),
    );
    lib.minors.iter().any(|&m| m.0 == need.0 && m >= need)
}

fn cuda_ok(row: &TfRow, lib: &Library<'_>) -> bool {
    row.cuda_major()
        .is_none_or(|major| lib.minors.iter().any(|m| m.0 == major))
}

impl Rule for CudaCudnnMismatch {
    fn meta(&self) -> &'static RuleMeta {
        &META
    }

    fn check_manifest(&self, ctx: &mut ManifestContext<'_>) {
        for env in ctx.envs {
            tensorflow(ctx, env);
            jax(ctx, env);
            torch(ctx, env);
        }
    }
}

fn tensorflow(ctx: &mut ManifestContext<'_>, env: &Env<'_>) {
    let known = tables().tf_minors();
    let toolkits = env.cuda_toolkits();
    let cudnns = env.cudnns();
    for tf in env.tensorflow().into_iter().filter(|t| t.gpu) {
        let rows: Vec<&TfRow> = tf
            .minors
            .iter()
            .filter_map(|&m| env.tf_gpu_row(m))
            .collect();
        if rows.is_empty() {
            continue;
        }
        // One finding per library kind: the first conflicting declaration, system libraries
        // and the runtime/cuDNN wheels before the other `nvidia-*` wheels.
        let order = |l: &&Library<'_>| {
            let main = l.req.name.starts_with("nvidia-cuda-runtime")
                || l.req.name.starts_with("nvidia-cudnn");
            (!l.system, !main, l.req.span.start)
        };
        let mut cuda_libs: Vec<&Library<'_>> = toolkits.iter().collect();
        cuda_libs.sort_by_key(order);
        let mut cudnn_libs: Vec<&Library<'_>> = cudnns.iter().collect();
        cudnn_libs.sort_by_key(order);
        let mut reported: Vec<&str> = Vec::new();
        let checks = cuda_libs
            .into_iter()
            .map(|l| (l, "CUDA", cuda_ok as fn(&TfRow, &Library<'_>) -> bool))
            .chain(
                cudnn_libs
                    .into_iter()
                    .map(|l| (l, "cuDNN", cudnn_ok as fn(&TfRow, &Library<'_>) -> bool)),
            );
        for (lib, what, ok) in checks {
            if (tf.bundled && lib.system)
                || reported.contains(&what)
                || reported.contains(&lib.req.name.as_str())
            {
                continue;
            }
            let bad: Vec<&TfRow> = rows.iter().copied().filter(|r| !ok(r, lib)).collect();
            if bad.is_empty() {
                continue;
            }
            let Some((at, other)) = library_first(lib.req, tf.req) else {
                continue;
            };
            let all = bad.len() == rows.len();
            let bad_minors: Vec<Minor> = bad.iter().map(|r| r.minor).collect();
            let built = |r: &TfRow| {
                if what == "CUDA" {
                    r.cuda.as_ref().map(|v| v.to_string()).unwrap_or_default()
                } else {
                    r.cudnn.as_ref().map(|v| v.to_string()).unwrap_or_default()
                }
            };
            let source = if lib.req.installer == Installer::Image {
                format!("the base image `{}`", lib.req.text)
            } else {
                lib.req.cite()
            };
            let message = if bad.len() == 1 {
                format!(
                    "{source} provides {what} {}, but TensorFlow {} was built with {what} {}",
                    lines(&lib.minors),
                    bad[0].version,
                    built(bad[0])
                )
            } else {
                format!(
                    "{source} provides {what} {}, but TensorFlow {} ({} admits) were built with other {what} versions",
                    lines(&lib.minors),
                    ranges(&bad_minors, &known),
                    tf.req.cite()
                )
            };
            let mut d = ctx.diagnostic(at.span, message).severity(certainty(all));
            d = if at.name == lib.req.name {
                d.primary_label(format!("{what} {}", lines(&lib.minors)))
            } else {
                d.primary_label(format!("TensorFlow {}", ranges(&tf.minors, &known)))
            };
            d = related(
                d,
                at.span,
                other,
                if other.name == lib.req.name {
                    "declares the library"
                } else {
                    "pins TensorFlow"
                },
            );
            for r in bad.iter().rev().take(2) {
                d = d.note(row_note(&r.describe(), &r.source));
            }
            d = d.note(if what == "cuDNN" {
                "TensorFlow needs the cuDNN major it was built with and at least its minor; otherwise it fails at start-up or at the first convolution (`Loaded runtime CuDNN library … but source was compiled with …`), on Windows with exit code 0xC0000409"
            } else {
                "TensorFlow loads the CUDA libraries of the major it was built with; with another major it cannot use the GPU or aborts (`DNN library is not found`), on Windows with exit code 0xC0000409"
            });
            let newest = bad.last().copied().unwrap_or(rows[0]);
            let mut help = format!(
                "TensorFlow {} was built with CUDA {} and cuDNN {}: declare those",
                newest.version,
                built_cuda(newest),
                newest
                    .cudnn
                    .as_ref()
                    .map(|v| v.to_string())
                    .unwrap_or_default()
            );
            if newest.minor >= (2, 14) {
                help.push_str(&format!(
                    ", or use `tensorflow[and-cuda]=={}` to get matching pip wheels",
                    newest.version
                ));
            }
            ctx.report(d.help(help));
            reported.push(what);
            reported.push(&lib.req.name);
        }
    }
}

/// The finding points at the library declaration when it is in the checked file (it is what
/// disagrees with the build), else at the framework pin.
fn library_first<'a>(
    lib: &'a Requirement,
    framework: &'a Requirement,
) -> Option<(&'a Requirement, &'a Requirement)> {
    if lib.origin.is_none() {
        Some((lib, framework))
    } else {
        primary(framework, lib)
    }
}

fn built_cuda(r: &TfRow) -> String {
    r.cuda.as_ref().map(|v| v.to_string()).unwrap_or_default()
}

fn jax(ctx: &mut ManifestContext<'_>, env: &Env<'_>) {
    let t = tables();
    let cudnns = env.cudnns();
    for j in env.jax().into_iter().filter(|j| j.cuda_major == 12) {
        let versions = Env::jax_versions(j.req);
        if versions.is_empty() {
            continue;
        }
        for lib in cudnns.iter().filter(|l| !l.system || j.local_libs) {
            let mut bad = Vec::new();
            let mut considered = 0;
            for v in &versions {
                let Some((row, min)) = t.jax_cudnn_min(v) else {
                    considered += 1;
                    continue;
                };
                considered += 1;
                let r = min.release();
                let need = (
                    r.first().copied().unwrap_or(0),
                    r.get(1).copied().unwrap_or(0),
                );
                if !lib.minors.iter().any(|&m| m >= need && m.0 < 10) {
                    bad.push((row, min));
                }
            }
            if bad.is_empty() {
                continue;
            }
            let Some((at, other)) = library_first(lib.req, j.req) else {
                continue;
            };
            let all = bad.len() == considered;
            let (row, min) = bad[bad.len() - 1];
            let mut d = ctx
                .diagnostic(
                    at.span,
                    format!(
                        "{} provides cuDNN {}, but {} {}needs cuDNN ≥ {min} (from {})",
                        lib.req.cite(),
                        lines(&lib.minors),
                        j.req.cite(),
                        if all { "" } else { "may pick a release that " },
                        row.label
                    ),
                )
                .severity(certainty(all))
                .primary_label("cuDNN too old for this JAX");
            d = related(d, at.span, other, "pins JAX");
            d = d.note(row_note(
                &format!("{}: CUDA 12 wheels need cuDNN ≥ {min}", row.label),
                &row.source,
            ));
            d = d.note("JAX verifies that the CUDA libraries it finds are at least as new as those it was built against, and refuses to start on the GPU otherwise");
            ctx.report(d.help(format!(
                "declare cuDNN ≥ {min} (below 10), or pin an older JAX"
            )));
        }
    }
}

fn torch(ctx: &mut ManifestContext<'_>, env: &Env<'_>) {
    let images: Vec<Library<'_>> = env
        .cuda_toolkits()
        .into_iter()
        .filter(|l| l.req.installer == Installer::Image)
        .collect();
    for pin in env.torch() {
        let Some((tag, from)) = &pin.tag else {
            continue;
        };
        if matches!(from, TagFrom::Declared(r) if r.installer == Installer::Image) {
            continue;
        }
        let Some(major) = tag_cuda_major(tag) else {
            continue;
        };
        for img in &images {
            let img_major = img.minors.iter().map(|m| m.0).max().unwrap_or(0);
            if major <= img_major {
                continue;
            }
            let Some((at, other)) = primary(pin.req, img.req) else {
                continue;
            };
            let driver = match major {
                12 => " (CUDA 12 needs driver ≥ 525 on Linux)",
                13 => " (CUDA 13 needs driver ≥ 580 on Linux)",
                _ => "",
            };
            let mut d = ctx
                .diagnostic(
                    at.span,
                    format!(
                        "{} installs a CUDA {major} build of torch ({tag}) on the base image `{}`, made for CUDA {} hosts",
                        pin.req.cite(),
                        img.req.text,
                        lines(&img.minors)
                    ),
                )
                .severity(Severity::Warning)
                .primary_label(format!("torch built for CUDA {major}"));
            d = related(d, at.span, other, "base image");
            d = d.note(format!(
                "a host whose driver only supports the image's CUDA fails with `CUDA driver version is insufficient`{driver}"
            ));
            ctx.report(d.help(format!(
                "use a base image for CUDA {major}, or torch wheels for CUDA {} (`--index-url https://download.pytorch.org/whl/cu…`)",
                img_major
            )));
        }
    }
}
