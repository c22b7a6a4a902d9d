//! Syntax helpers of the glue facts: tensor parameters, declarators, method calls and
//! callees, bindings, guard types.

use super::super::last_name;
use gpulint_syntax::{named_children, text, NodeExt};
use tree_sitter::Node;

/// Is the declared type a tensor (`at::Tensor`, `const torch::Tensor&`, `Tensor`)?
fn is_tensor_type(t: &str) -> bool {
    let t = t.trim_start_matches("const ").trim();
    last_name(t) == "Tensor"
}

/// The name a declarator declares (`x`, `&x`, `*x`, `x[4]`).
pub(super) fn declarator_name<'t>(mut d: Node<'t>, source: &'t str) -> Option<&'t str> {
    for _ in 0..6 {
        match d.kind_name() {
            "identifier" | "field_identifier" => return Some(text(d, source)),
            "init_declarator"
            | "pointer_declarator"
            | "reference_declarator"
            | "array_declarator" => d = d.field("declarator").or_else(|| d.named_child(0))?,
            _ => return None,
        }
    }
    None
}

/// The receiver and method of a call `recv.method<T>(…)`.
pub(super) fn method_call<'t>(
    call: Node<'t>,
    source: &'t str,
) -> Option<(Node<'t>, &'t str, Option<&'t str>)> {
    let f = call.field("function")?;
    if f.kind_name() != "field_expression" {
        return None;
    }
    let recv = f.field("argument")?;
    let field = f.field("field")?;
    match field.kind_name() {
        "template_method" => {
            let name = text(field.field("name")?, source);
            let targ = field.field("arguments").map(|a| {
                text(a, source)
                    .trim_start_matches('<')
                    .trim_end_matches('>')
                    .trim()
            });
            Some((recv, name, targ))
        }
        _ => Some((recv, text(field, source), None)),
    }
}

/// The callee's name of a plain call (`foo(…)`, `ns::foo<T>(…)`); `None` for a method call.
pub(super) fn callee<'t>(call: Node<'t>, source: &'t str) -> Option<&'t str> {
    let f = call.field("function")?;
    let f = match f.kind_name() {
        "template_function" => f.field("name")?,
        "identifier" | "qualified_identifier" => f,
        _ => return None,
    };
    Some(last_name(text(f, source)))
}

pub(super) fn peel(mut n: Node<'_>) -> Node<'_> {
    for _ in 0..8 {
        match n.kind_name() {
            "parenthesized_expression" | "pointer_expression" => match n.named_child(0) {
                Some(c) => n = c,
                None => break,
            },
            _ => break,
        }
    }
    n
}

/// The function a binding argument names: `&foo`, `foo`, `&ns::foo`, `TORCH_FN(foo)`,
/// `py::overload_cast<…>(&foo)`.
pub(super) fn bound_name<'t>(a: Node<'t>, source: &'t str) -> Option<&'t str> {
    let mut a = peel(a);
    for _ in 0..3 {
        match a.kind_name() {
            "identifier" | "qualified_identifier" => return Some(last_name(text(a, source))),
            // `&foo<float>`: the template's name.
            "template_function" => return a.field("name").map(|n| last_name(text(n, source))),
            "call_expression" => {
                a = peel(a.field("arguments").and_then(|x| x.named_child(0))?);
            }
            _ => return None,
        }
    }
    None
}

pub(super) fn is_guard_type(ty: &str) -> bool {
    ["DeviceGuard", "CUDAGuard", "HIPGuard", "StreamGuard"]
        .iter()
        .any(|g| ty.contains(g))
}

/// The parameters of a function: names and whether each is a tensor.
pub(super) fn parameters<'t>(func: Node<'t>, source: &'t str) -> Vec<(&'t str, bool)> {
    let mut decl = func.field("declarator");
    for _ in 0..8 {
        match decl {
            Some(d) if d.kind_name() == "function_declarator" => break,
            Some(d) => decl = d.field("declarator").or_else(|| d.named_child(0)),
            None => break,
        }
    }
    let Some(list) = decl.and_then(|d| d.field("parameters")) else {
        return Vec::new();
    };
    named_children(list)
        .filter(|p| p.kind_name().ends_with("parameter_declaration"))
        .map(|p| {
            let ty = p.field("type").map_or("", |t| text(t, source));
            let name = p
                .field("declarator")
                .and_then(|d| declarator_name(d, source))
                .unwrap_or("");
            (name, !name.is_empty() && is_tensor_type(ty))
        })
        .collect()
}
