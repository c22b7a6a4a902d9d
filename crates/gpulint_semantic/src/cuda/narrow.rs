//! Narrowing of 64-bit sizes to 32-bit integers in host code: `int n = x.numel()`,
//! `static_cast<int>(t.NumElements())`, `const int total = x.size(0) * x.size(1) * x.size(2)`.

use gpulint_syntax::text;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

/// 32-bit integer types.
pub const NARROW_TYPES: &[&str] = &[
    "int",
    "int32",
    "int32_t",
    "unsigned",
    "unsigned int",
    "uint32",
    "uint32_t",
    "uint",
];

/// Spellings of a 32-bit limit in a size check (`TORCH_CHECK(n <= INT_MAX)`,
/// `OP_REQUIRES(c, n <= tensorflow::kint32max, …)`, `canUse32BitIndexMath(x)`).
pub const INT32_LIMITS: &[&str] = &[
    "kint32max",
    "INT_MAX",
    "INT32_MAX",
    "UINT_MAX",
    "numeric_limits<int>",
    "numeric_limits<int32>",
    "numeric_limits<int32_t>",
    "numeric_limits<int",
    "canUse32BitIndexMath",
    "2147483647",
    "<< 31",
    "<<31",
];

/// Calls that return an element count.
pub const COUNT_CALLS: &[&str] = &["numel", "NumElements", "num_elements", "nelement"];

/// The cast or declaration that stores the value of `e` in a 32-bit type, and the type.
/// The value passes through `+`, `-`, `*` and parentheses, not through a division (a block
/// count `(n + 255) / 256` is small).
pub fn narrowing_of<'t>(e: Node<'t>, source: &'t str) -> Option<(Node<'t>, &'t str)> {
    let mut cur = e;
    for _ in 0..16 {
        let p = cur.parent()?;
        match p.kind() {
            "parenthesized_expression" => {}
            "binary_expression" => {
                if !p
                    .field("operator")
                    .is_some_and(|o| matches!(o.kind(), "+" | "-" | "*"))
                {
                    return None;
                }
            }
            "argument_list" => {
                // Only a cast's own argument passes the value through.
                let call = p.parent()?;
                let f = call.field("function")?;
                if f.kind() != "template_function"
                    || text(f.field("name")?, source) != "static_cast"
                {
                    return None;
                }
            }
            "cast_expression" => {
                let ty = text(p.field("type")?, source).trim();
                return NARROW_TYPES.contains(&ty).then_some((p, ty));
            }
            "call_expression" => {
                // `static_cast<int>(…)`
                let f = p.field("function")?;
                if f.kind() != "template_function"
                    || text(f.field("name")?, source) != "static_cast"
                {
                    return None;
                }
                let ty = text(f.field("arguments")?.named_child(0)?, source).trim();
                return NARROW_TYPES.contains(&ty).then_some((p, ty));
            }
            "init_declarator" => {
                let decl = p.parent().filter(|d| d.kind() == "declaration")?;
                let ty = text(decl.field("type")?, source).trim();
                return NARROW_TYPES.contains(&ty).then_some((p, ty));
            }
            _ => return None,
        }
        cur = p;
    }
    None
}

/// The method a call names (`x.numel()` → `numel`, `t->dim_size(1)` → `dim_size`).
pub fn method_name<'t>(call: Node<'t>, source: &'t str) -> Option<&'t str> {
    let f = call.field("function")?;
    if f.kind() != "field_expression" {
        return None;
    }
    let field = f.field("field")?;
    let field = match field.kind() {
        "template_method" => field.field("name")?,
        _ => field,
    };
    Some(text(field, source))
}
