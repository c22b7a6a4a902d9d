//! What the MF rules ask about a manifest: the environments it describes (per platform and
//! per scope: the base, an optional-dependency group, a Docker stage), and in each the pinned
//! frameworks with the releases their specifiers admit, the CUDA and cuDNN they bring, the
//! declared Python, and the evidence for native Windows.

use super::compat::{self, Minor, TfPlatform, TfRow};
use super::pep508::MarkerEnv;
use super::versions::{
    admitted_minors, cuda_minors, cuda_to_tag, cudnn_minors, nvidia_cuda_major, pinned,
    pinned_minors, python_minors,
};
use super::{Index, IndexKind, Installer, Manifest, Platform, PythonDecl, Requirement};
use gpulint_source::Span;
use pep440_rs::Version;
use std::collections::BTreeSet;

/// One environment a manifest describes.
pub struct Env<'m> {
    pub manifest: &'m Manifest,
    pub platform: Platform,
    pub scope: usize,
    pub reqs: Vec<&'m Requirement>,
    pub pythons: Vec<&'m PythonDecl>,
}

/// The environments of a manifest: every scope on Linux, and on native Windows when the file
/// says it targets Windows (a Windows-only marker, package, prefix or image) and does not
/// mention WSL.
pub fn environments(m: &Manifest) -> Vec<Env<'_>> {
    let marker_windows = m.requirements.iter().any(|r| {
        r.marker
            .as_ref()
            .is_some_and(|mk| mk.names_windows() && windows_only(mk))
    });
    let platforms: &[Platform] = if m.wsl {
        &[Platform::Linux]
    } else if !m.windows.is_empty() {
        &[Platform::Windows]
    } else if marker_windows {
        &[Platform::Linux, Platform::Windows]
    } else {
        &[Platform::Linux]
    };
    let mut out = Vec::new();
    for &platform in platforms {
        for scope in 0..m.scopes.len() {
            let chain = scope_chain(m, scope);
            let menv = MarkerEnv {
                platform,
                python: None,
            };
            let reqs = m
                .requirements
                .iter()
                .filter(|r| chain.contains(&r.scope))
                .filter(|r| {
                    r.marker
                        .as_ref()
                        .is_none_or(|mk| mk.eval(&menv) != Some(false))
                })
                .collect();
            let pythons = m
                .pythons
                .iter()
                .filter(|p| chain.contains(&p.scope))
                .collect();
            out.push(Env {
                manifest: m,
                platform,
                scope,
                reqs,
                pythons,
            });
        }
    }
    out
}

/// True when a marker holds on Windows (or may) and not on Linux.
fn windows_only(mk: &super::pep508::Marker) -> bool {
    let on = |platform| {
        mk.eval(&MarkerEnv {
            platform,
            python: None,
        })
    };
    on(Platform::Windows) != Some(false) && on(Platform::Linux) == Some(false)
}

fn scope_chain(m: &Manifest, scope: usize) -> Vec<usize> {
    let mut chain = vec![scope];
    let mut cur = m.scopes.get(scope).and_then(|s| s.parent);
    while let Some(p) = cur {
        if chain.contains(&p) || chain.len() > 32 {
            break;
        }
        chain.push(p);
        cur = m.scopes.get(p).and_then(|s| s.parent);
    }
    chain
}

/// A TensorFlow pin.
pub struct TfPin<'m> {
    pub req: &'m Requirement,
    /// Release lines the pin admits that the tables know.
    pub minors: Vec<Minor>,
    /// A GPU build (not `tensorflow-cpu`).
    pub gpu: bool,
    /// `tensorflow[and-cuda]`: CUDA comes as pip wheels, not from the system.
    pub bundled: bool,
}

/// A PyTorch pin, with the CUDA variant it asks for.
pub struct TorchPin<'m> {
    pub req: &'m Requirement,
    pub minors: Vec<Minor>,
    /// `cu118`, `rocm6.1`, `cpu`, and where it comes from.
    pub tag: Option<(String, TagFrom<'m>)>,
}

/// Where a PyTorch CUDA variant is chosen.
#[derive(Clone, Copy)]
pub enum TagFrom<'m> {
    /// `torch==2.1.0+cu118`.
    Local,
    /// `--index-url https://download.pytorch.org/whl/cu118` and friends.
    Index(&'m Index),
    /// conda `pytorch-cuda=11.8`, a conda build string, or a `pytorch/pytorch` image tag.
    Declared(&'m Requirement),
}

/// A JAX pin with the CUDA major of its GPU variant.
pub struct JaxPin<'m> {
    pub req: &'m Requirement,
    pub cuda_major: u64,
    /// `cuda12-local`: uses the system CUDA/cuDNN rather than pip wheels.
    pub local_libs: bool,
}

/// A declared CUDA toolkit or cuDNN (conda package, pip `nvidia-*` wheel, base image).
pub struct Library<'m> {
    pub req: &'m Requirement,
    /// CUDA or cuDNN release lines it admits.
    pub minors: Vec<Minor>,
    /// Provided by the system (conda, image) rather than by pip wheels.
    pub system: bool,
}

impl<'m> Env<'m> {
    pub fn has(&self, name: &str) -> bool {
        self.reqs.iter().any(|r| r.name == name)
    }

    /// Why this environment is taken to run on native Windows: a span in the checked file when
    /// there is one, and words for the note.
    pub fn windows_evidence(&self) -> Option<(Option<Span>, String)> {
        if self.platform != Platform::Windows {
            return None;
        }
        if let Some(e) = self.manifest.windows.first() {
            return Some((Some(e.span), e.what.clone()));
        }
        let r = self.reqs.iter().find(|r| {
            r.marker
                .as_ref()
                .is_some_and(|m| m.names_windows() && windows_only(m))
        })?;
        Some((
            r.origin.is_none().then_some(r.span),
            format!("{} is installed only on Windows", r.cite()),
        ))
    }

    /// Something that asks for the GPU: CUDA/cuDNN packages, `nvidia-*` wheels,
    /// `tensorflow[and-cuda]`, `tensorflow-gpu`, a CUDA image.
    pub fn gpu_intent(&self) -> Option<&'m Requirement> {
        self.reqs.iter().copied().find(|r| {
            matches!(
                r.name.as_str(),
                "cudatoolkit"
                    | "cuda-toolkit"
                    | "cudnn"
                    | "cuda-runtime"
                    | "cuda-version"
                    | "cuda"
                    | "tensorflow-gpu"
            ) || r.name.starts_with("nvidia-")
                || (r.name == "tensorflow" && r.extras.iter().any(|e| e == "and-cuda"))
        })
    }

    /// The TensorFlow pins. A base image's TensorFlow counts only when nothing installs
    /// another one over it.
    pub fn tensorflow(&self) -> Vec<TfPin<'m>> {
        let known = compat::tables().tf_minors();
        let is_tf = |r: &Requirement| {
            matches!(
                r.name.as_str(),
                "tensorflow" | "tensorflow-gpu" | "tensorflow-cpu"
            )
        };
        let installed = self
            .reqs
            .iter()
            .any(|r| is_tf(r) && r.installer != Installer::Image);
        self.reqs
            .iter()
            .copied()
            .filter(|r| is_tf(r) && (r.installer != Installer::Image || !installed))
            .filter_map(|r| {
                // The real `tensorflow-gpu` releases end at 2.11 (2.12 is an empty package).
                let minors = if r.name == "tensorflow-gpu" && r.installer == Installer::Pip {
                    let gpu: Vec<Minor> = known.iter().copied().filter(|m| *m <= (2, 11)).collect();
                    pinned_minors(&r.spec, &gpu)?
                } else {
                    pinned_minors(&r.spec, &known)?
                };
                (!minors.is_empty()).then(|| TfPin {
                    req: r,
                    minors,
                    gpu: r.name != "tensorflow-cpu",
                    bundled: r.extras.iter().any(|e| e == "and-cuda"),
                })
            })
            .collect()
    }

    /// The TensorFlow row of a release line for this environment's platform (native Windows
    /// rows on Windows where the table has one, else Linux).
    pub fn tf_row(&self, minor: Minor) -> Option<&'static TfRow> {
        let t = compat::tables();
        match self.platform {
            Platform::Windows => t
                .tf(TfPlatform::WindowsNative, minor)
                .or_else(|| t.tf(TfPlatform::Linux, minor)),
            Platform::MacOs => t
                .tf(TfPlatform::MacOs, minor)
                .or_else(|| t.tf(TfPlatform::Linux, minor)),
            Platform::Linux => t.tf(TfPlatform::Linux, minor),
        }
    }

    /// The row of a release line when that release has a GPU build on this platform
    /// (TensorFlow ≥ 2.11 has none on native Windows, listed or not).
    pub fn tf_gpu_row(&self, minor: Minor) -> Option<&'static TfRow> {
        let t = compat::tables();
        let platform = match self.platform {
            Platform::Windows => TfPlatform::WindowsNative,
            Platform::MacOs => TfPlatform::MacOs,
            Platform::Linux => TfPlatform::Linux,
        };
        t.tf(platform, minor).filter(|r| r.native_gpu)
    }

    /// The PyTorch pins (pip `torch`, conda `pytorch`, a `pytorch/pytorch` image).
    pub fn torch(&self) -> Vec<TorchPin<'m>> {
        let known = compat::tables().torch_minors();
        let installed = self.reqs.iter().any(|r| {
            matches!(r.name.as_str(), "torch" | "pytorch") && r.installer != Installer::Image
        });
        let conda_cuda = self.reqs.iter().copied().find(|r| r.name == "pytorch-cuda");
        self.reqs
            .iter()
            .copied()
            .filter(|r| matches!(r.name.as_str(), "torch" | "pytorch"))
            .filter(|r| r.installer != Installer::Image || !installed)
            .filter_map(|r| {
                let minors = pinned_minors(&r.spec, &known)?;
                if minors.is_empty() {
                    return None;
                }
                let tag = if let Some(l) = r
                    .local
                    .as_ref()
                    .filter(|l| l.starts_with("cu") || l.starts_with("rocm"))
                {
                    Some((
                        l.clone(),
                        if r.installer == Installer::Image {
                            TagFrom::Declared(r)
                        } else {
                            TagFrom::Local
                        },
                    ))
                } else if let Some(b) = r
                    .build
                    .as_ref()
                    .and_then(|b| b.split('_').find(|p| p.starts_with("cuda")))
                {
                    cuda_to_tag(b).map(|t| (t, TagFrom::Declared(r)))
                } else if r.installer == Installer::Conda {
                    conda_cuda.and_then(|c| {
                        let tag = cuda_to_tag(&pinned(&c.spec)?.to_string())?;
                        Some((tag, TagFrom::Declared(c)))
                    })
                } else {
                    r.indexes
                        .iter()
                        .filter_map(|&i| self.manifest.indexes.get(i))
                        .find_map(|ix| ix.torch_tag().map(|t| (t, TagFrom::Index(ix))))
                };
                Some(TorchPin {
                    req: r,
                    minors,
                    tag,
                })
            })
            .collect()
    }

    /// The JAX pins that select a CUDA variant (`jax[cuda12]`, `jaxlib==…+cuda11.cudnn82`,
    /// `jax-cuda12-plugin`).
    pub fn jax(&self) -> Vec<JaxPin<'m>> {
        let mut out = Vec::new();
        for r in self.reqs.iter().copied() {
            let (major, local_libs) = match r.name.as_str() {
                "jax" => {
                    let Some(e) = r.extras.iter().find(|e| e.starts_with("cuda")) else {
                        continue;
                    };
                    let digits: String = e[4..].chars().take_while(char::is_ascii_digit).collect();
                    let Ok(major) = digits.parse() else {
                        continue;
                    };
                    (major, e.ends_with("-local"))
                }
                "jaxlib" => {
                    let Some(l) = r.local.as_ref().and_then(|l| l.strip_prefix("cuda")) else {
                        continue;
                    };
                    let digits: String = l.chars().take_while(char::is_ascii_digit).collect();
                    let Ok(major) = digits.parse() else {
                        continue;
                    };
                    (major, true)
                }
                n if n.starts_with("jax-cuda")
                    && (n.ends_with("-plugin") || n.ends_with("-pjrt")) =>
                {
                    let digits: String = n["jax-cuda".len()..]
                        .chars()
                        .take_while(char::is_ascii_digit)
                        .collect();
                    let Ok(major) = digits.parse() else {
                        continue;
                    };
                    (major, false)
                }
                _ => continue,
            };
            out.push(JaxPin {
                req: r,
                cuda_major: major,
                local_libs,
            });
        }
        out
    }

    /// JAX releases a pin stands for (sampled `0.4.0`–`0.9.40`; only the newest when the
    /// pin has no lower bound, as for [`pinned_minors`]).
    pub fn jax_versions(req: &Requirement) -> Vec<Version> {
        let mut out = Vec::new();
        for minor in 4..=9u64 {
            for patch in 0..=40u64 {
                let v = Version::new([0, minor, patch]);
                if req.spec.admits(&v) == Some(true) {
                    out.push(v);
                }
            }
        }
        if !req.spec.bounded_below() && out.len() > 1 {
            out.drain(..out.len() - 1);
        }
        out
    }

    /// Declared CUDA toolkits: conda `cudatoolkit` / `cuda-toolkit` / `cuda-version`, a CUDA
    /// base image, and pip `nvidia-cuda-runtime-cuXX` (its version is the CUDA version) or any
    /// other `nvidia-*-cuXX` wheel (only its CUDA major is known).
    pub fn cuda_toolkits(&self) -> Vec<Library<'m>> {
        let known = cuda_minors();
        self.reqs
            .iter()
            .copied()
            .filter_map(|r| {
                let system = match (r.installer, r.name.as_str()) {
                    (
                        Installer::Conda,
                        "cudatoolkit" | "cuda-toolkit" | "cuda-version" | "cuda-runtime"
                        | "cuda-cudart",
                    ) => true,
                    (Installer::Image, "cuda") => true,
                    (Installer::Pip, n)
                        if n.starts_with("nvidia-") && nvidia_cuda_major(n).is_some() =>
                    {
                        false
                    }
                    _ => return None,
                };
                let minors = if !system && !r.name.starts_with("nvidia-cuda-runtime-") {
                    let major = nvidia_cuda_major(&r.name)?;
                    known.iter().copied().filter(|m| m.0 == major).collect()
                } else {
                    let mut m = admitted_minors(&r.spec, &known)?;
                    if let Some(major) = nvidia_cuda_major(&r.name) {
                        m.retain(|x| x.0 == major);
                    }
                    m
                };
                (!minors.is_empty()).then_some(Library {
                    req: r,
                    minors,
                    system,
                })
            })
            .collect()
    }

    /// Declared cuDNN: conda `cudnn`, a `-cudnnN` image, pip `nvidia-cudnn-cuXX`.
    pub fn cudnns(&self) -> Vec<Library<'m>> {
        let known = cudnn_minors();
        self.reqs
            .iter()
            .copied()
            .filter_map(|r| {
                let system = match (r.installer, r.name.as_str()) {
                    (Installer::Conda | Installer::Image, "cudnn") => true,
                    (Installer::Pip, n) if n.starts_with("nvidia-cudnn-cu") => false,
                    _ => return None,
                };
                let minors = admitted_minors(&r.spec, &known)?;
                (!minors.is_empty() && minors.len() < known.len()).then_some(Library {
                    req: r,
                    minors,
                    system,
                })
            })
            .collect()
    }

    /// The Python release lines this environment may run, from every Python declaration in
    /// it (all must hold). An open end is closed at `clamp` (the range the framework's
    /// releases span), so `requires-python = ">=3.8"` is not read as a promise to run on
    /// Python 3.15. Returns the lines and the most specific declaration.
    pub fn python(&self, clamp: (Minor, Minor)) -> Option<(Vec<Minor>, &'m PythonDecl)> {
        if self.pythons.is_empty() {
            return None;
        }
        let known = python_minors();
        let mut set: Option<Vec<Minor>> = None;
        let mut best: Option<(&PythonDecl, usize)> = None;
        for p in &self.pythons {
            let mut m = admitted_minors(&p.spec, &known)?;
            let (Some(&lowest), Some(&highest)) = (m.first(), m.last()) else {
                return None;
            };
            if !p.spec.bounded_below() {
                let floor = clamp.0.min(highest);
                m.retain(|&x| x >= floor);
            }
            let open_above = p
                .spec
                .upper_bound()
                .is_none_or(|v| v.release().first().copied().unwrap_or(0) >= 4);
            if open_above && !p.spec.bounded_above_exactly() {
                let ceiling = clamp.1.max(lowest);
                m.retain(|&x| x <= ceiling);
            }
            if best.is_none_or(|(_, n)| m.len() < n) {
                best = Some((p, m.len()));
            }
            set = Some(match set {
                None => m,
                Some(prev) => prev.into_iter().filter(|x| m.contains(x)).collect(),
            });
        }
        let set = set?;
        (!set.is_empty()).then_some((set, best?.0))
    }
}

/// Is the requirement declared in the checked file (not in an included one)?
pub fn is_local(r: &Requirement) -> bool {
    r.origin.is_none()
}

/// Which of two related requirements a finding should point at: the later local one; if only
/// one is local, that one; if neither is, the later one unless both come from the same
/// included file (which reports it itself). `None` then.
pub fn primary<'a>(
    a: &'a Requirement,
    b: &'a Requirement,
) -> Option<(&'a Requirement, &'a Requirement)> {
    match (is_local(a), is_local(b)) {
        (true, true) | (false, false) => {
            if !is_local(a)
                && a.origin.as_ref().map(|o| &o.file) == b.origin.as_ref().map(|o| &o.file)
            {
                return None;
            }
            if b.span.start >= a.span.start {
                Some((b, a))
            } else {
                Some((a, b))
            }
        }
        (true, false) => Some((a, b)),
        (false, true) => Some((b, a)),
    }
}

/// The set of CUDA majors of a set of TensorFlow release lines.
pub fn tf_cuda_majors(env: &Env<'_>, minors: &[Minor]) -> BTreeSet<u64> {
    minors
        .iter()
        .filter_map(|&m| env.tf_gpu_row(m).and_then(TfRow::cuda_major))
        .collect()
}

/// Index kinds a torch pin's tag comes through.
pub fn index_kind(from: &TagFrom<'_>) -> Option<IndexKind> {
    match from {
        TagFrom::Index(i) => Some(i.kind),
        _ => None,
    }
}
