//! Recursion driven by an integer argument stepped by a constant, and the depth the callers'
//! folded arguments (or the base case's bound) give it.

use super::{argument_for, is_bound_call, own_nodes, parameters, Cycle};
use crate::python::PythonModel;
use gpulint_syntax::{named_children, NodeExt};
use tree_sitter::Node;

/// A recursion driven by an integer parameter stepped by a constant.
#[derive(Debug, Clone, Copy)]
pub struct Counter<'t> {
    /// How many calls deep the recursion goes, from the folded values.
    pub depth: i128,
    /// The expression the depth comes from: a caller's argument, a default value, or the bound
    /// in the base case.
    pub evidence: Node<'t>,
}

/// If the recursive `call` (in `f`, to `callee`) passes `p - k` or `p + k` for a parameter `p`
/// of the callee, the depth the recursion reaches from the folded values, if known.
pub fn counter<'t>(
    m: &PythonModel<'t>,
    f: usize,
    callee: usize,
    call: Node<'t>,
    cycle: &Cycle<'t>,
) -> Option<Counter<'t>> {
    let params = parameters(m, callee);
    let bound = is_bound_call(m, call);
    let caller_params: Vec<&str> = parameters(m, f).into_iter().map(|(p, _)| p).collect();
    for (i, (name, default)) in params.iter().enumerate() {
        let Some(arg) = argument_for(m, call, i, name, bound && i > 0) else {
            continue;
        };
        let Some(step) = step_of(m, arg, &caller_params) else {
            continue;
        };
        if step < 0 {
            // Counting down: the callers' start value is the depth.
            let (start, evidence) = start_value(m, callee, i, name, *default, cycle)?;
            return Some(Counter {
                depth: start / -step,
                evidence,
            });
        }
        // Counting up to a bound in the base case.
        let (limit, evidence) = upper_bound(m, callee, name)?;
        let start = start_value(m, callee, i, name, *default, cycle)
            .map(|(s, _)| s)
            .unwrap_or(0);
        return Some(Counter {
            depth: (limit - start) / step,
            evidence,
        });
    }
    None
}

/// `p - k` / `p + k` with `p` a parameter and `k` a positive folded integer → `-k` / `k`.
fn step_of(m: &PythonModel<'_>, arg: Node<'_>, params: &[&str]) -> Option<i128> {
    if arg.kind_name() != "binary_operator" {
        return None;
    }
    let left = arg.field("left")?;
    let right = arg.field("right")?;
    let op = m.text(arg.field("operator")?);
    if left.kind_name() != "identifier" || !params.contains(&m.text(left)) {
        return None;
    }
    let k = m.const_value(right)?.as_int().filter(|k| *k > 0)?;
    match op {
        "-" => Some(-k),
        "+" => Some(k),
        _ => None,
    }
}

/// The largest folded value callers outside the cycle pass for parameter `i`, or its default.
fn start_value<'t>(
    m: &PythonModel<'t>,
    callee: usize,
    i: usize,
    name: &str,
    default: Option<Node<'t>>,
    cycle: &Cycle<'t>,
) -> Option<(i128, Node<'t>)> {
    let g = m.call_graph();
    let mut best: Option<(i128, Node<'t>)> = None;
    let mut consider = |v: Option<i128>, node: Node<'t>| {
        if let Some(v) = v {
            if best.is_none_or(|(b, _)| v > b) {
                best = Some((v, node));
            }
        }
    };
    let outside = g
        .module
        .iter()
        .map(|(c, callee)| (*c, *callee, None))
        .chain(
            g.edges
                .iter()
                .enumerate()
                .flat_map(|(f, e)| e.iter().map(move |(c, callee)| (*c, *callee, Some(f)))),
        );
    for (call, target, caller) in outside {
        if target != callee || caller.is_some_and(|c| cycle.functions.contains(&c)) {
            continue;
        }
        let bound = is_bound_call(m, call);
        match argument_for(m, call, i, name, bound && i > 0) {
            Some(arg) => consider(m.const_value(arg).and_then(|v| v.as_int()), arg),
            None => {
                if let Some(d) = default {
                    consider(m.const_value(d).and_then(|v| v.as_int()), d);
                }
            }
        }
    }
    best
}

/// The bound `B` in a base case `if p >= B` / `if p > B` / `if p == B` (or `B <= p`, ...).
fn upper_bound<'t>(m: &PythonModel<'t>, f: usize, name: &str) -> Option<(i128, Node<'t>)> {
    let body = m.functions[f].node.field("body")?;
    for n in own_nodes(body) {
        if n.kind_name() != "comparison_operator" {
            continue;
        }
        let parts: Vec<Node<'t>> = named_children(n).collect();
        if parts.len() != 2 {
            continue;
        }
        let op = m
            .text(n)
            .get(parts[0].end_byte() - n.start_byte()..parts[1].start_byte() - n.start_byte())?
            .trim();
        // The parameter on either side: `level >= MAX` or `MAX <= level`.
        let bound = if parts[0].kind_name() == "identifier" && m.text(parts[0]) == name {
            parts[1]
        } else if parts[1].kind_name() == "identifier" && m.text(parts[1]) == name {
            parts[0]
        } else {
            continue;
        };
        if !matches!(op, ">=" | ">" | "==" | "<" | "<=") {
            continue;
        }
        if let Some(b) = m.const_value(bound).and_then(|v| v.as_int()) {
            return Some((b, bound));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::tests::with_model;
    use super::*;

    #[test]
    fn counter_depth_from_callers_and_bounds() {
        let src = "DEPTH = 3000\ndef build(n):\n    if n == 0:\n        return leaf()\n    return node(build(n - 1))\ntree = build(DEPTH)\nsmall = build(12)\nLIMIT = 50\ndef grow(level=0):\n    if level >= LIMIT:\n        return\n    grow(level + 1)\n";
        with_model(src, |m| {
            let r = m.recursion();
            let c = &r.cycles[0];
            let (call, f, callee) = c.calls[0];
            let k = counter(m, f, callee, call, c).unwrap();
            assert_eq!(k.depth, 3000);
            assert_eq!(m.text(k.evidence), "DEPTH");
            let c = &r.cycles[1];
            let (call, f, callee) = c.calls[0];
            assert_eq!(counter(m, f, callee, call, c).unwrap().depth, 50);
        });
    }
}
