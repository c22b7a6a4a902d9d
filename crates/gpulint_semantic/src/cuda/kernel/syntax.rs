//! Syntax helpers of the kernel facts: peeling parentheses and casts, declared names.

use gpulint_syntax::text;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

/// Peels parentheses and value casts.
pub fn peel(mut e: Node<'_>) -> Node<'_> {
    for _ in 0..16 {
        match e.kind_name() {
            "parenthesized_expression" => match e.named_child(0) {
                Some(c) => e = c,
                None => break,
            },
            "cast_expression" => match e.field("value") {
                Some(c) => e = c,
                None => break,
            },
            _ => break,
        }
    }
    e
}

/// Peels parentheses, casts and `reinterpret_cast<T*>(p)`-style calls around a pointer.
pub fn peel_pointer<'n>(mut e: Node<'n>, source: &str) -> Node<'n> {
    for _ in 0..16 {
        e = peel(e);
        if e.kind_name() != "call_expression" {
            break;
        }
        let Some(f) = e.field("function") else {
            break;
        };
        let name = f.field("name").unwrap_or(f);
        if !matches!(
            text(name, source),
            "reinterpret_cast" | "static_cast" | "const_cast"
        ) {
            break;
        }
        match e.field("arguments").and_then(|a| a.named_child(0)) {
            Some(a) => e = a,
            None => break,
        }
    }
    e
}

/// The declared name of a declarator, and whether it declares a pointer or array.
pub fn declarator_name(mut decl: Node<'_>) -> (Option<Node<'_>>, bool) {
    let mut pointer = false;
    for _ in 0..16 {
        match decl.kind_name() {
            "identifier" => return (Some(decl), pointer),
            "pointer_declarator" | "array_declarator" => pointer = true,
            "reference_declarator"
            | "parenthesized_declarator"
            | "init_declarator"
            | "attributed_declarator" => {}
            _ => return (None, pointer),
        }
        decl = match decl.field("declarator").or_else(|| decl.named_child(0)) {
            Some(d) => d,
            None => return (None, pointer),
        };
        // `T* __restrict__ p`: skip qualifiers in front of the name.
        while decl.kind_name() == "type_qualifier" {
            match decl.next_named_sibling() {
                Some(s) => decl = s,
                None => return (None, pointer),
            }
        }
    }
    (None, pointer)
}
