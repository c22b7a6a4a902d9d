//! Two more things a host function's calls can be: a place its tensors reach a kernel without a
//! `<<<…>>>` of its own (a launch macro, a launching helper of the file), and a check that can
//! never fail (a tensor's size compared with itself).

use super::checks::{is_ident, occurrences, Macro};
use super::syntax::peel;
use crate::hash::HashMap;
use gpulint_syntax::{named_children, text, NodeExt};
use tree_sitter::Node;

/// How a [`LaunchSite`] reaches its kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via<'t> {
    /// A function-like macro whose body launches (`KERNEL_RUN(kernel, n, args…)`).
    Macro(&'t str),
    /// A function of the file that launches and takes no tensors itself
    /// (`im2col_cuda(stream, x.data_ptr<float>(), …)`).
    Helper,
}

/// A call that hands its arguments to a kernel launched elsewhere.
#[derive(Debug, Clone)]
pub struct LaunchSite<'t> {
    pub node: Node<'t>,
    pub args: Vec<Node<'t>>,
    /// The kernel (the macro's kernel argument, when it has one) or the helper called.
    pub target: &'t str,
    pub via: Via<'t>,
}

/// A check whose condition compares a tensor's property with itself, directly or through a
/// local holding the same expression (`const auto D = p2.size(2); TORCH_CHECK(p2.size(2) == D)`):
/// it cannot fail, so whatever it was meant to compare is not checked.
#[derive(Debug, Clone)]
pub struct VacuousCheck<'t> {
    pub call: Node<'t>,
    /// The side that is spelled out and the one that repeats it.
    pub left: Node<'t>,
    pub right: Node<'t>,
    /// The tensor parameter (index) it names.
    pub param: usize,
}

/// For a launch macro (a `<<<` in its body): the position of the parameter that names the
/// kernel (the name right before `<<<`, or before the template arguments preceding it), if a
/// parameter does. `None` when the body does not launch.
pub(super) fn launch_macro_kernel(m: &Macro<'_>) -> Option<Option<usize>> {
    let at = m.body.find("<<<")?;
    let mut head = m.body[..at].trim_end();
    if head.ends_with('>') {
        let bytes = head.as_bytes();
        let mut depth = 0usize;
        let mut i = bytes.len();
        while i > 0 {
            i -= 1;
            match bytes[i] {
                b'>' => depth += 1,
                b'<' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
        }
        head = head[..i].trim_end();
    }
    let start = head
        .bytes()
        .rposition(|b| !is_ident(b))
        .map_or(0, |p| p + 1);
    let name = &head[start..];
    Some(m.params.iter().position(|p| *p == name))
}

/// The argument nodes of a call, comments left out.
pub(super) fn call_args(call: Node<'_>) -> Vec<Node<'_>> {
    call.field("arguments")
        .map(|a| {
            named_children(a)
                .filter(|a| a.kind_name() != "comment")
                .collect()
        })
        .unwrap_or_default()
}

/// Text without white space, for comparing two spellings of one expression.
fn squash(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

/// Is the check `call`'s condition a comparison of a tensor's property with itself?
pub(super) fn vacuous<'t>(
    call: Node<'t>,
    source: &'t str,
    params: &[(&'t str, bool)],
    locals: &HashMap<&'t str, Vec<Node<'t>>>,
) -> Option<VacuousCheck<'t>> {
    let cond = peel(*call_args(call).first()?);
    if cond.kind_name() != "binary_expression" {
        return None;
    }
    let op = cond.field("operator").map(|o| text(o, source))?;
    if !matches!(op, "==" | "<=" | ">=") {
        return None;
    }
    let (left, right) = (peel(cond.field("left")?), peel(cond.field("right")?));
    // A local defined once, before the check, stands for its value.
    let spelled = |n: Node<'t>| -> String {
        let t = text(n, source);
        if n.kind_name() == "identifier" {
            if let Some([only]) = locals.get(t).map(Vec::as_slice) {
                if only.end_byte() <= call.start_byte() {
                    return squash(text(*only, source));
                }
            }
        }
        squash(t)
    };
    let l = spelled(left);
    if l.is_empty() || l != spelled(right) {
        return None;
    }
    // A property of a tensor parameter (`p2.size(2)`), not a plain value.
    let param = params
        .iter()
        .position(|(p, t)| *t && occurrences(&l, p).any(|i| l[i + p.len()..].starts_with('.')))?;
    let (left, right) = if left.kind_name() == "identifier" {
        (right, left)
    } else {
        (left, right)
    };
    Some(VacuousCheck {
        call,
        left,
        right,
        param,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launch_macro_kernel_parameter() {
        let m = Macro {
            params: vec!["NAME", "DIMS", "N", "..."],
            body: "[&] { NAME<scalar_t, 1><<<BLOCKS(N), THREADS>>>(__VA_ARGS__, N); }()",
        };
        assert_eq!(launch_macro_kernel(&m), Some(Some(0)));
        let fixed = Macro {
            params: vec!["N"],
            body: "my_kernel<<<N, 256>>>(N)",
        };
        assert_eq!(launch_macro_kernel(&fixed), Some(None));
        let none = Macro {
            params: vec!["x"],
            body: "TORCH_CHECK(x.is_cuda())",
        };
        assert_eq!(launch_macro_kernel(&none), None);
    }
}
