use crate::declare_rule;
use crate::manifest_context::{certainty, related, ManifestContext};
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::Severity;
use gpulint_manifest::compat::tables;
use gpulint_manifest::env::{primary, tf_cuda_majors, Env};
use gpulint_manifest::versions::{nvidia_cuda_major, ranges, tag_cuda_major};
use gpulint_manifest::{Installer, Requirement};
use std::collections::BTreeSet;

declare_rule! {
    /// ## What it does
    /// Reports one environment that pins two or more of TensorFlow, PyTorch and JAX (or pip
    /// `nvidia-*-cuXX` wheels) whose CUDA majors differ: TensorFlow 2.14 (CUDA 11.8) beside a
    /// torch `cu121` wheel, `jax[cuda13]` beside torch `cu126`, `nvidia-cudnn-cu11` beside
    /// `nvidia-cublas-cu12`. The CUDA major of TensorFlow comes from its tested build
    /// configurations; of torch from a `+cuXYZ` pin, a PyTorch wheel index, conda's
    /// `pytorch-cuda`, or the documented default wheel of its release; of JAX from its
    /// `cudaNN` extra or local version.
    ///
    /// An error when the majors can never agree; a warning, naming the releases, when only some
    /// admitted releases disagree.
    /// A pin without a lower bound (`tensorflow<2.11`, or no version) stands for the newest
    /// release it admits, the one pip installs; a pin with one stands for every release it admits.
    ///
    /// ## Why is this risky?
    /// Both frameworks load their `libcudart` / `libcudnn` into one process. Whichever loads
    /// first wins, and the other fails with missing symbols, `CUDNN_STATUS_VERSION_MISMATCH`
    /// or aborts; JAX refuses libraries older than its build ("JAX now verifies that the CUDA
    /// libraries it finds are at least as new as the CUDA libraries that JAX was built
    /// against"). Frameworks used in separate processes or containers are fine: suppress the
    /// finding there.
    ///
    /// ## Example
    /// ```requirements
    /// --extra-index-url https://download.pytorch.org/whl/cu121
    /// tensorflow==2.14.1
    /// torch==2.2.2+cu121
    /// ```
    ///
    /// ## Use instead
    /// ```requirements
    /// --extra-index-url https://download.pytorch.org/whl/cu118
    /// tensorflow==2.14.1
    /// torch==2.2.2+cu118
    /// ```
    ///
    /// ## References
    /// - JAX CHANGELOG (jaxlib 0.4.18/0.4.19: library version verification):
    ///   <https://github.com/jax-ml/jax/blob/main/CHANGELOG.md>
    /// - JAX installation (cuDNN constraint, `JAX_SKIP_CUDA_CONSTRAINTS_CHECK`):
    ///   <https://docs.jax.dev/en/latest/installation.html>
    /// - TensorFlow tested build configurations: <https://www.tensorflow.org/install/source#gpu>
    pub static META = {
        code: "MF006",
        name: "mixed-cuda-majors",
        lang: RuleLang::Manifest,
        severity: Severity::Error,
        summary: "Frameworks in one environment built for different CUDA majors",
        kinds: &[],
        needles: &[],
        options: &[],
    };
}

pub struct MixedCudaMajors;

/// A framework (or wheel family) and the CUDA majors it may bring.
struct Source<'m> {
    what: String,
    req: &'m Requirement,
    majors: BTreeSet<u64>,
    /// For TensorFlow: release lines per major, to name the conflicting ones.
    tf: Option<Vec<(gpulint_manifest::compat::Minor, u64)>>,
    /// A pip `nvidia-*` wheel: compared only with other such wheels (MF004 compares them
    /// with the frameworks).
    nvidia: bool,
    /// `tensorflow`, `torch`, `jax`, `nvidia`: two pins of one framework are alternatives
    /// (per platform or Python version), not two libraries in one process.
    family: &'static str,
}

fn sources<'m>(env: &Env<'m>) -> Vec<Source<'m>> {
    let t = tables();
    let mut out = Vec::new();
    for tf in env.tensorflow().into_iter().filter(|t| t.gpu) {
        let per: Vec<_> = tf
            .minors
            .iter()
            .filter_map(|&m| Some((m, env.tf_gpu_row(m)?.cuda_major()?)))
            .collect();
        let majors = tf_cuda_majors(env, &tf.minors);
        if !majors.is_empty() {
            out.push(Source {
                what: format!("TensorFlow {}", ranges(&tf.minors, &t.tf_minors())),
                req: tf.req,
                majors,
                tf: Some(per),
                nvidia: false,
                family: "tensorflow",
            });
        }
    }
    for pin in env.torch() {
        let majors: BTreeSet<u64> = match &pin.tag {
            Some((tag, _)) => tag_cuda_major(tag).into_iter().collect(),
            None => {
                let defaults: Vec<Option<u64>> = pin
                    .minors
                    .iter()
                    .map(|&m| {
                        t.torch(m)
                            .and_then(|r| r.pypi_default.as_deref())
                            .and_then(tag_cuda_major)
                    })
                    .collect();
                if pin.req.installer != Installer::Pip || defaults.iter().any(Option::is_none) {
                    continue;
                }
                defaults.into_iter().flatten().collect()
            }
        };
        if !majors.is_empty() {
            let tag = pin
                .tag
                .as_ref()
                .map(|(t, _)| format!(" ({t})"))
                .unwrap_or_default();
            out.push(Source {
                what: format!("torch{tag}"),
                req: pin.req,
                majors,
                tf: None,
                nvidia: false,
                family: "torch",
            });
        }
    }
    for j in env.jax() {
        out.push(Source {
            what: format!("JAX (CUDA {})", j.cuda_major),
            req: j.req,
            majors: [j.cuda_major].into(),
            tf: None,
            nvidia: false,
            family: "jax",
        });
    }
    // pip NVIDIA wheels: the first of each CUDA major.
    let mut seen = BTreeSet::new();
    for r in env.reqs.iter().copied() {
        if r.installer != Installer::Pip {
            continue;
        }
        if let Some(major) = nvidia_cuda_major(&r.name) {
            if seen.insert(major) {
                out.push(Source {
                    what: format!("`{}` (CUDA {major})", r.name),
                    req: r,
                    majors: [major].into(),
                    tf: None,
                    nvidia: true,
                    family: "nvidia",
                });
            }
        }
    }
    out
}

impl Rule for MixedCudaMajors {
    fn meta(&self) -> &'static RuleMeta {
        &META
    }

    fn check_manifest(&self, ctx: &mut ManifestContext<'_>) {
        let known = tables().tf_minors();
        for env in ctx.envs {
            let srcs = sources(env);
            let mut reported: Vec<(usize, usize)> = Vec::new();
            for (i, a) in srcs.iter().enumerate() {
                for b in srcs.iter().skip(i + 1) {
                    let same_family = a.family == b.family && !a.nvidia;
                    if a.req.span == b.req.span
                        || same_family
                        || a.nvidia != b.nvidia
                        || (a.majors == b.majors && a.majors.len() == 1)
                    {
                        continue;
                    }
                    let common: BTreeSet<u64> = a.majors.intersection(&b.majors).copied().collect();
                    let all = common.is_empty();
                    if !all && a.tf.is_none() && b.tf.is_none() {
                        continue;
                    }
                    let Some((at, other)) = primary(a.req, b.req) else {
                        continue;
                    };
                    let key = (at.span.start, other.span.start);
                    if reported.contains(&key) {
                        continue;
                    }
                    reported.push(key);
                    let (here, there) = if at.span == a.req.span {
                        (a, b)
                    } else {
                        (b, a)
                    };
                    let majors = |s: &Source<'_>| {
                        s.majors
                            .iter()
                            .map(|m| m.to_string())
                            .collect::<Vec<_>>()
                            .join(" or ")
                    };
                    let message = if all {
                        format!(
                            "{} is built for CUDA {}, but {} in the same environment is built for CUDA {}",
                            here.what,
                            majors(here),
                            there.what,
                            majors(there)
                        )
                    } else {
                        let tf = if a.tf.is_some() { a } else { b };
                        let other_src = if a.tf.is_some() { b } else { a };
                        let bad: Vec<_> = tf
                            .tf
                            .iter()
                            .flatten()
                            .filter(|(_, m)| !other_src.majors.contains(m))
                            .map(|(v, _)| *v)
                            .collect();
                        format!(
                            "{} admits TensorFlow {}, built for another CUDA major than {} (CUDA {})",
                            tf.req.cite(),
                            ranges(&bad, &known),
                            other_src.what,
                            majors(other_src)
                        )
                    };
                    let mut d = ctx
                        .diagnostic(at.span, message)
                        .severity(certainty(all))
                        .primary_label(format!("CUDA {}", majors(here)));
                    d = related(d, at.span, other, &format!("CUDA {} here", majors(there)));
                    d = d.note("both frameworks load their own libcudart/libcudnn into one process: whichever loads first wins, and the other fails with missing symbols, CUDNN_STATUS_VERSION_MISMATCH or an abort");
                    ctx.report(d.help(
                        "pick releases built for one CUDA major (for torch, the matching `--index-url https://download.pytorch.org/whl/cuXYZ`), or run the frameworks in separate environments",
                    ));
                }
            }
        }
    }
}
