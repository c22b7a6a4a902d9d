use crate::declare_rule;
use crate::manifest_context::{certainty, row_note, ManifestContext};
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::Severity;
use gpulint_manifest::compat::{minor_str, tables, Minor, TorchRow};
use gpulint_manifest::env::TagFrom;
use gpulint_manifest::versions::ranges;
use gpulint_manifest::{IndexKind, Installer};

declare_rule! {
    /// ## What it does
    /// Checks the CUDA variant a `torch` pin asks for — a `+cuXYZ` local version
    /// (`torch==2.1.0+cu118`) or a PyTorch wheel index (`--index-url` / `--extra-index-url
    /// https://download.pytorch.org/whl/cuXYZ`, a Poetry source, a uv index) — against the wheel
    /// variants PyTorch published for the releases the pin admits.
    ///
    /// - `+cuXYZ`: an error when no admitted release has that variant, a warning naming the
    ///   releases that lack it otherwise;
    /// - `--index-url` (and Poetry/uv indexes): an error when no admitted release exists on that
    ///   index (pip picks the newest one that does, so a partial overlap is fine);
    /// - `--extra-index-url` / `--find-links`: an error when no admitted release exists there,
    ///   a warning when the newest admitted release does not (pip then takes it from PyPI).
    ///
    /// Nightly and test indexes (`whl/nightly/cu…`) and release lines whose wheel list is not
    /// published yet are not checked.
    ///
    /// ## Why is this risky?
    /// Pip falls back to another build — typically the default PyPI wheel, with another CUDA —
    /// or fails to resolve. On Windows the fallback is a CPU-only torch, so the "GPU" run trains
    /// on the CPU and runs out of host memory. Mismatched `torchvision`/`torchaudio` variants
    /// crash at import with undefined symbols.
    ///
    /// ## Example
    /// ```requirements
    /// --extra-index-url https://download.pytorch.org/whl/cu126
    /// torch==2.4.1
    /// ```
    ///
    /// ## Use instead
    /// ```requirements
    /// --extra-index-url https://download.pytorch.org/whl/cu124
    /// torch==2.4.1
    /// ```
    ///
    /// ## References
    /// - PyTorch previous versions (wheel commands per release):
    ///   <https://pytorch.org/get-started/previous-versions/>
    /// - PyTorch release compatibility matrix:
    ///   <https://github.com/pytorch/pytorch/blob/main/RELEASE.md#release-compatibility-matrix>
    pub static META = {
        code: "MF005",
        name: "torch-wheel-missing",
        lang: RuleLang::Manifest,
        severity: Severity::Error,
        summary: "torch CUDA wheel tag or index that does not exist for the pinned version",
        kinds: &[],
        needles: &[],
        options: &[],
    };
}

pub struct TorchWheelMissing;

impl Rule for TorchWheelMissing {
    fn meta(&self) -> &'static RuleMeta {
        &META
    }

    fn check_manifest(&self, ctx: &mut ManifestContext<'_>) {
        let t = tables();
        let known = t.torch_minors();
        for env in ctx.envs {
            for pin in env.torch() {
                if pin.req.installer != Installer::Pip {
                    continue;
                }
                let Some((tag, from)) = &pin.tag else {
                    continue;
                };
                if tag == "cpu" {
                    continue;
                }
                let rows: Vec<&TorchRow> = pin.minors.iter().filter_map(|&m| t.torch(m)).collect();
                if rows.is_empty() || rows.iter().all(|r| !r.tags_certain) {
                    continue;
                }
                let unknown = rows.iter().any(|r| !r.tags_certain);
                let missing: Vec<&TorchRow> = rows
                    .iter()
                    .copied()
                    .filter(|r| r.tags_certain && !r.wheel_tags.iter().any(|w| w == tag))
                    .collect();
                if missing.is_empty() {
                    continue;
                }
                let none_has = missing.len() == rows.len() && !unknown;
                let newest = rows.last().copied();
                let newest_missing = newest
                    .is_some_and(|n| n.tags_certain && missing.iter().any(|m| m.minor == n.minor));
                let (all, index) = match from {
                    TagFrom::Local => (none_has, None),
                    TagFrom::Index(ix) => match ix.kind {
                        IndexKind::Primary if !none_has => continue,
                        IndexKind::Primary => (true, Some(*ix)),
                        _ if none_has => (true, Some(*ix)),
                        _ if newest_missing => (false, Some(*ix)),
                        _ => continue,
                    },
                    TagFrom::Declared(_) => continue,
                };
                let missing_minors: Vec<Minor> = missing.iter().map(|r| r.minor).collect();
                let span = if pin.req.origin.is_none() {
                    pin.req.span
                } else if let Some(ix) = index.filter(|ix| ix.origin.is_none()) {
                    ix.span
                } else {
                    continue;
                };
                let message = if all {
                    format!(
                        "there is no {tag} wheel of torch {}: {} cannot install the CUDA build it asks for",
                        ranges(&missing_minors, &known),
                        pin.req.cite()
                    )
                } else {
                    format!(
                        "{} admits torch {}, which has no {tag} wheels; pip installs {} from PyPI with another CUDA",
                        pin.req.cite(),
                        ranges(&missing_minors, &known),
                        newest.map(|n| minor_str(n.minor)).unwrap_or_default()
                    )
                };
                let mut d = ctx
                    .diagnostic(span, message)
                    .severity(certainty(all))
                    .primary_label(format!("no {tag} build"));
                if let Some(ix) = index {
                    if ix.span != span {
                        d = d.with_label(
                            ix.span,
                            match &ix.origin {
                                Some(o) => format!("{tag} index (declared in {o})"),
                                None => format!("{tag} index"),
                            },
                        );
                    }
                }
                for r in missing.iter().rev().take(2) {
                    d = d.note(row_note(
                        &format!(
                            "torch {}: wheels {}",
                            minor_str(r.minor),
                            r.wheel_tags.join(", ")
                        ),
                        r.source(),
                    ));
                }
                d = d.note("pip falls back to another build (usually PyPI's default CUDA wheel, CPU-only on Windows) or fails to resolve; mismatched torchvision/torchaudio builds crash at import");
                let with_tag: Vec<Minor> = t
                    .pytorch
                    .iter()
                    .filter(|r| r.tags_certain && r.wheel_tags.iter().any(|w| w == tag))
                    .map(|r| r.minor)
                    .collect();
                let mut sorted = with_tag.clone();
                sorted.sort_unstable();
                let target = missing.last().map(|r| {
                    r.wheel_tags
                        .iter()
                        .filter(|w| w.starts_with("cu"))
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                });
                d = d.help(match (sorted.is_empty(), target) {
                    (false, Some(tags)) => format!(
                        "{tag} wheels exist for torch {}; torch {} has {tags}",
                        ranges(&sorted, &known),
                        missing
                            .last()
                            .map(|r| minor_str(r.minor))
                            .unwrap_or_default()
                    ),
                    (_, Some(tags)) => format!(
                        "torch {} has {tags}",
                        missing
                            .last()
                            .map(|r| minor_str(r.minor))
                            .unwrap_or_default()
                    ),
                    _ => "pick a CUDA variant that exists for this release".to_string(),
                });
                ctx.report(d);
            }
        }
    }
}
