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

/// Keywords that name builtin types, never an alias.
const TYPE_KEYWORDS: &[&str] = &[
    "auto", "bool", "char", "const", "double", "float", "int", "long", "short", "signed",
    "unsigned", "void", "volatile",
];

/// Can `name` be the name of a `using`/`typedef` alias: an identifier, not a keyword?
pub fn may_name_alias(name: &str) -> bool {
    name.bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !TYPE_KEYWORDS.contains(&name)
}

#[cfg(test)]
mod tests {
    use super::may_name_alias;

    #[test]
    fn aliases_are_named_by_identifiers_that_are_not_keywords() {
        for name in ["index_t", "T", "_idx2", "scalar_t"] {
            assert!(may_name_alias(name), "{name}");
        }
        for name in [
            "int",
            "unsigned",
            "const int",
            "std::size_t",
            "int*",
            "",
            "2d",
            "a-b",
        ] {
            assert!(!may_name_alias(name), "{name}");
        }
    }
}
