//! Release lines and versions: which `major.minor` lines of a framework, Python, CUDA or
//! cuDNN a specifier admits, how they read in messages, and the CUDA variant tags of wheels.

use super::compat::{minor_str, Minor};
use super::pep508::Spec;
use pep440_rs::Version;

/// Known Python release lines.
pub fn python_minors() -> Vec<Minor> {
    let mut v = vec![(2, 7)];
    v.extend((0..=15).map(|m| (3, m)));
    v
}

/// Known CUDA release lines (for specifiers of toolkits).
pub fn cuda_minors() -> Vec<Minor> {
    let mut v = vec![(8, 0), (9, 0), (9, 1), (9, 2), (10, 0), (10, 1), (10, 2)];
    v.extend((0..=8).map(|m| (11, m)));
    v.extend((0..=9).map(|m| (12, m)));
    v.extend((0..=2).map(|m| (13, m)));
    v
}

/// Known cuDNN release lines.
pub fn cudnn_minors() -> Vec<Minor> {
    let mut v: Vec<Minor> = vec![(5, 1), (6, 0)];
    v.extend((0..=6).map(|m| (7, m)));
    v.extend((0..=9).map(|m| (8, m)));
    v.extend((0..=20).map(|m| (9, m)));
    v
}

/// The release lines of `known` that a spec admits (any patch release `x.y.0`–`x.y.40`, and
/// four-part versions such as cuDNN's `8.6.0.163`). `None` when the spec is not understood.
pub fn admitted_minors(spec: &Spec, known: &[Minor]) -> Option<Vec<Minor>> {
    match spec {
        Spec::Unknown => None,
        Spec::Any => Some(known.to_vec()),
        Spec::Versions(s) => {
            // Candidates: x.y.0–x.y.40, and the versions the spec itself names (`==8.6.0.163`).
            let named: Vec<&Version> = s.iter().map(|c| c.version()).collect();
            Some(
                known
                    .iter()
                    .copied()
                    .filter(|&(a, b)| {
                        (0..=40u64).any(|p| spec.admits(&Version::new([a, b, p])) == Some(true))
                            || named.iter().any(|v| {
                                let r = v.release();
                                r.first() == Some(&a)
                                    && r.get(1).copied().unwrap_or(0) == b
                                    && spec.admits(v) == Some(true)
                            })
                    })
                    .collect(),
            )
        }
    }
}

/// The release lines a framework pin stands for: every line it admits when it has a lower
/// bound (`>=2.10,<2.12`: both), else only the newest (`<2.11`, or no version at all: pip
/// installs the newest release it may, not a release from years ago).
pub fn pinned_minors(spec: &Spec, known: &[Minor]) -> Option<Vec<Minor>> {
    let mut minors = admitted_minors(spec, known)?;
    if !spec.bounded_below() && minors.len() > 1 {
        minors.drain(..minors.len() - 1);
    }
    Some(minors)
}

/// `[(2,16),(2,17),(2,18),(2,20)]` over the known lines → `2.16–2.18, 2.20`.
pub fn ranges(minors: &[Minor], known: &[Minor]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < minors.len() {
        let start = minors[i];
        let mut end = start;
        let mut k = known.iter().position(|&m| m == start);
        while i + 1 < minors.len() {
            let next_known = k.and_then(|k| known.get(k + 1)).copied();
            if next_known == Some(minors[i + 1]) {
                i += 1;
                end = minors[i];
                k = k.map(|k| k + 1);
            } else {
                break;
            }
        }
        parts.push(if start == end {
            minor_str(start)
        } else {
            format!("{}–{}", minor_str(start), minor_str(end))
        });
        i += 1;
    }
    parts.join(", ")
}

/// `cu118` → 11, `cu92` → 9, `cu130` → 13.
pub fn tag_cuda_major(tag: &str) -> Option<u64> {
    let d = tag.strip_prefix("cu")?;
    if !d.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    match d.len() {
        2 => d[..1].parse().ok(),
        3 => d[..2].parse().ok(),
        _ => None,
    }
}

/// `cuda11.7` / `11.8` → `cu117` / `cu118`.
pub fn cuda_to_tag(v: &str) -> Option<String> {
    let v = v.trim_start_matches("cuda");
    let mut it = v.split('.');
    let a: u64 = it.next()?.parse().ok()?;
    let b: u64 = it.next().unwrap_or("0").parse().ok()?;
    Some(format!("cu{a}{b}"))
}

/// `nvidia-cudnn-cu12` → 12.
pub fn nvidia_cuda_major(name: &str) -> Option<u64> {
    let rest = name.strip_prefix("nvidia-")?;
    let (_, suffix) = rest.rsplit_once("-cu")?;
    suffix.parse().ok()
}

impl Spec {
    /// `==3.10.*`, `~=3.10`: bounded above by the `==`/`~=` itself.
    pub fn bounded_above_exactly(&self) -> bool {
        use pep440_rs::Operator::*;
        match self {
            Spec::Versions(s) => s
                .iter()
                .any(|c| matches!(c.operator(), Equal | EqualStar | ExactEqual | TildeEqual)),
            _ => false,
        }
    }
}

/// The single version a spec pins (`==11.8`, `==11.8.*` → `11.8`), if it pins one.
pub fn pinned(spec: &Spec) -> Option<Version> {
    use pep440_rs::Operator::*;
    match spec {
        Spec::Versions(s) => s
            .iter()
            .find(|c| matches!(c.operator(), Equal | EqualStar | ExactEqual))
            .map(|c| c.version().clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compat;
    use crate::pep508::parse_specifiers;

    #[test]
    fn admitted() {
        let known = compat::tables().tf_minors();
        let (s, _) = parse_specifiers(">=2.10,<2.12");
        assert_eq!(admitted_minors(&s, &known).unwrap(), vec![(2, 10), (2, 11)]);
        let (s, _) = parse_specifiers("==2.15.0");
        assert_eq!(admitted_minors(&s, &known).unwrap(), vec![(2, 15)]);
        let (s, _) = parse_specifiers("~=2.15");
        assert_eq!(admitted_minors(&s, &known).unwrap().first(), Some(&(2, 15)));
        let (s, _) = parse_specifiers("==8.6.0.163");
        assert_eq!(admitted_minors(&s, &cudnn_minors()).unwrap(), vec![(8, 6)]);
        assert_eq!(
            ranges(&[(2, 11), (2, 12), (2, 13), (2, 16)], &known),
            "2.11–2.13, 2.16"
        );
    }

    #[test]
    fn tags() {
        assert_eq!(tag_cuda_major("cu118"), Some(11));
        assert_eq!(tag_cuda_major("cu92"), Some(9));
        assert_eq!(tag_cuda_major("cu130"), Some(13));
        assert_eq!(tag_cuda_major("rocm6.1"), None);
        assert_eq!(cuda_to_tag("cuda11.7").as_deref(), Some("cu117"));
        assert_eq!(nvidia_cuda_major("nvidia-cudnn-cu12"), Some(12));
        assert_eq!(nvidia_cuda_major("nvidia-cuda-runtime-cu11"), Some(11));
        assert_eq!(nvidia_cuda_major("nvidia-dali-cuda110"), None);
    }
}
