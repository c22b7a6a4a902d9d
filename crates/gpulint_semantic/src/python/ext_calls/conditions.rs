//! What a condition says about a tensor when it holds or fails: `x.is_contiguous()`,
//! `x.dtype == torch.half`, `x.dtype in (…)`, `x.is_cuda`, `x.device == …`, through `not`,
//! `and`, `or` and parentheses.

use super::super::PythonModel;
use super::{CONTIG, DEVICE, DTYPE};
use gpulint_syntax::{named_children, NodeExt};
use tree_sitter::Node;

/// What is known about `name` when `cond` evaluates to `truth`.
pub(super) fn checks(m: &PythonModel<'_>, cond: Node<'_>, name: &str, truth: bool) -> u8 {
    match cond.kind_name() {
        "parenthesized_expression" => cond.named_child(0).map_or(0, |c| checks(m, c, name, truth)),
        "not_operator" => cond
            .field("argument")
            .map_or(0, |c| checks(m, c, name, !truth)),
        "boolean_operator" => {
            let (Some(l), Some(r), Some(op)) = (
                cond.field("left"),
                cond.field("right"),
                cond.field("operator"),
            ) else {
                return 0;
            };
            let (a, b) = (checks(m, l, name, truth), checks(m, r, name, truth));
            let and = m.text(op) == "and";
            if and == truth {
                a | b
            } else {
                a & b
            }
        }
        "call" => {
            let func = cond.field("function");
            let on_name = func.and_then(|f| f.field("object")).map(|o| m.text(o)) == Some(name);
            let method = func.and_then(|f| f.field("attribute")).map(|a| m.text(a));
            if truth && on_name && method == Some("is_contiguous") {
                CONTIG
            } else {
                0
            }
        }
        "attribute" => {
            let on_name = cond.field("object").map(|o| m.text(o)) == Some(name);
            let attr = cond.field("attribute").map(|a| m.text(a));
            if truth && on_name && attr == Some("is_cuda") {
                DEVICE
            } else {
                0
            }
        }
        "comparison_operator" => comparison(m, cond, name, truth),
        _ => 0,
    }
}

/// `x.dtype == …`, `x.dtype != …`, `x.dtype in (…)`, `x.device == …`, `x.is_cuda == True`.
fn comparison(m: &PythonModel<'_>, cond: Node<'_>, name: &str, truth: bool) -> u8 {
    let operands: Vec<Node<'_>> = named_children(cond).collect();
    if operands.len() != 2 {
        return 0;
    }
    let mut ops = Vec::new();
    let mut cursor = cond.walk();
    for c in cond.children(&mut cursor) {
        if !c.is_named() {
            ops.push(m.text(c));
        }
    }
    let positive = match ops.as_slice() {
        ["=="] | ["in"] | ["is"] => true,
        ["!="] | ["not", "in"] | ["not in"] | ["is", "not"] | ["is not"] => false,
        _ => return 0,
    };
    if positive != truth {
        return 0;
    }
    let mut p = 0;
    for o in &operands {
        if o.kind_name() != "attribute" || o.field("object").map(|x| m.text(x)) != Some(name) {
            continue;
        }
        match o.field("attribute").map(|a| m.text(a)) {
            Some("dtype") => p |= DTYPE,
            Some("device") | Some("is_cuda") => p |= DEVICE,
            _ => {}
        }
    }
    p
}
