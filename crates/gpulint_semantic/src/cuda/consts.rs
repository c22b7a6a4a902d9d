//! Integer constant folding: literals, `#define`, `constexpr`/`const`, `enum`, template
//! arguments known from the launches in the same file, `sizeof` of scalar types, arithmetic.

use super::{CudaModel, Function};
use crate::hash::HashMap;
use gpulint_syntax::text;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

/// How a named integer constant is defined.
#[derive(Debug, Clone, Copy)]
pub(super) enum ConstDef<'t> {
    /// A `#define` body, kept as text (it is not parsed as an expression by the grammar).
    Macro(&'t str),
    /// An initialiser expression.
    Expr(Node<'t>),
    /// A known value (enumerators without an initialiser).
    Value(i128),
}

/// Records the enumerators of an `enumerator_list`, counting on from literal values.
pub(super) fn record_enumerators<'t>(
    list: Node<'t>,
    source: &'t str,
    constants: &mut HashMap<&'t str, ConstDef<'t>>,
) {
    let mut next: Option<i128> = Some(0);
    for e in gpulint_syntax::named_children(list).filter(|c| c.kind_name() == "enumerator") {
        let Some(name) = e.field("name") else {
            continue;
        };
        let name = text(name, source);
        match e.field("value") {
            Some(v) => {
                constants.insert(name, ConstDef::Expr(v));
                // Following enumerators count on from a literal value only.
                next = parse_c_int(text(v, source)).map(|i| i + 1);
            }
            None => {
                if let Some(v) = next {
                    constants.insert(name, ConstDef::Value(v));
                    next = Some(v + 1);
                }
            }
        }
    }
}

impl<'t> CudaModel<'t> {
    /// The integer value of a name defined by `#define`, `constexpr`/`const` or `enum`.
    pub fn constant(&self, name: &str) -> Option<i128> {
        self.constant_depth(name, 0)
    }

    /// The integer value of `name` as seen inside `func`: its template parameters (when every
    /// launch of it in this file passes the same value, or from a default) come first.
    pub fn constant_in(&self, func: &Function<'t>, name: &str) -> Option<i128> {
        if let Some((_, v)) = func.template_params.iter().find(|(n, _)| *n == name) {
            return *v;
        }
        self.constant(name)
    }

    pub(super) fn constant_depth(&self, name: &str, depth: usize) -> Option<i128> {
        if depth > 32 {
            return None;
        }
        let def = *self.constants.get(name)?;
        if let Some(v) = self.constant_cache.borrow().get(name) {
            return *v;
        }
        let v = match def {
            ConstDef::Value(v) => Some(v),
            ConstDef::Expr(e) => self.eval_depth(e, depth + 1),
            ConstDef::Macro(body) => self.eval_text(body, depth + 1),
        };
        // Folded once per file: `#define` bodies are parsed to fold them.
        self.constant_cache.borrow_mut().insert(name.to_string(), v);
        v
    }

    /// Folds an integer expression: literals, named constants, `sizeof` of scalar types,
    /// arithmetic, shifts, casts and parentheses.
    pub fn eval(&self, expr: Node<'_>) -> Option<i128> {
        self.eval_depth(expr, 0)
    }

    fn eval_depth(&self, expr: Node<'_>, depth: usize) -> Option<i128> {
        self.eval_in(expr, self.source, depth)
    }

    /// Folds `expr`, a node of a tree over `source` (the file, or a parsed `#define` body);
    /// names resolve against this file's constants.
    fn eval_in(&self, expr: Node<'_>, source: &str, depth: usize) -> Option<i128> {
        if depth > 48 {
            return None;
        }
        let d = depth + 1;
        let field = |f: &str| expr.field(f);
        match expr.kind_name() {
            "number_literal" => parse_c_int(text(expr, source)),
            "identifier" => self.constant_depth(text(expr, source), d),
            "parenthesized_expression" => self.eval_in(expr.named_child(0)?, source, d),
            "cast_expression" => self.eval_in(field("value")?, source, d),
            "sizeof_expression" => sizeof_scalar(text(field("type")?, source)),
            "unary_expression" => {
                let v = self.eval_in(field("argument")?, source, d)?;
                match text(field("operator")?, source) {
                    "-" => v.checked_neg(),
                    "+" => Some(v),
                    "~" => Some(!v),
                    "!" => Some((v == 0) as i128),
                    _ => None,
                }
            }
            "binary_expression" => {
                let l = self.eval_in(field("left")?, source, d)?;
                let r = self.eval_in(field("right")?, source, d)?;
                c_binary(text(field("operator")?, source), l, r)
            }
            "conditional_expression" => {
                let c = self.eval_in(field("condition")?, source, d)?;
                let branch = if c != 0 { "consequence" } else { "alternative" };
                self.eval_in(field(branch)?, source, d)
            }
            "call_expression" => {
                // static_cast<T>(x) and friends.
                let f = field("function")?;
                let name = f.field("name").unwrap_or(f);
                if !matches!(
                    text(name, source),
                    "static_cast" | "int" | "size_t" | "int64_t" | "unsigned"
                ) {
                    return None;
                }
                self.eval_in(field("arguments")?.named_child(0)?, source, d)
            }
            _ => None,
        }
    }

    /// Folds the text of a `#define` body by parsing it as an expression.
    fn eval_text(&self, body: &str, depth: usize) -> Option<i128> {
        if let Some(v) = parse_c_int(body.trim_matches(|c| c == '(' || c == ')')) {
            return Some(v);
        }
        if body.len() > 200 {
            return None;
        }
        let wrapped = format!("int __gpulint_v = ({body});");
        let tree = gpulint_syntax::parse(gpulint_syntax::Lang::Cuda, &wrapped)?;
        let root = tree.root_node();
        if root.has_error() {
            return None;
        }
        let value = gpulint_syntax::descendants(root)
            .find(|n| n.kind_name() == "init_declarator")?
            .field("value")?;
        self.eval_in(value, &wrapped, depth)
    }
}

/// A C integer literal: decimal, hex, octal, binary, with `u`/`l` suffixes and `'` separators.
pub fn parse_c_int(s: &str) -> Option<i128> {
    let s = s.trim().replace('\'', "");
    let s = s.trim_end_matches(['u', 'U', 'l', 'L', 'z', 'Z']);
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        i128::from_str_radix(h, 16).ok()
    } else if let Some(b) = s.strip_prefix("0b").or_else(|| s.strip_prefix("0B")) {
        i128::from_str_radix(b, 2).ok()
    } else if s.len() > 1 && s.starts_with('0') && s.bytes().all(|b| b.is_ascii_digit()) {
        i128::from_str_radix(&s[1..], 8).ok()
    } else {
        s.parse().ok()
    }
}

/// `sizeof` of a scalar type name, for constant folding of byte sizes.
pub fn sizeof_scalar(t: &str) -> Option<i128> {
    let t = t.trim();
    Some(match t {
        "char" | "signed char" | "unsigned char" | "int8_t" | "uint8_t" | "bool" => 1,
        "short" | "unsigned short" | "int16_t" | "uint16_t" | "half" | "__half" | "at::Half"
        | "__nv_bfloat16" | "at::BFloat16" | "c10::Half" | "c10::BFloat16" => 2,
        "int" | "unsigned" | "unsigned int" | "float" | "int32_t" | "uint32_t" | "half2"
        | "__half2" => 4,
        "long" | "long long" | "unsigned long" | "unsigned long long" | "double" | "int64_t"
        | "uint64_t" | "size_t" | "float2" | "int2" => 8,
        "float4" | "int4" | "double2" => 16,
        _ => return None,
    })
}

pub(super) fn c_binary(op: &str, l: i128, r: i128) -> Option<i128> {
    match op {
        "+" => l.checked_add(r),
        "-" => l.checked_sub(r),
        "*" => l.checked_mul(r),
        "/" if r != 0 => l.checked_div(r),
        "%" if r != 0 => l.checked_rem(r),
        "<<" if (0..127).contains(&r) => l.checked_shl(r as u32).filter(|v| v >> r == l),
        ">>" if (0..127).contains(&r) => Some(l >> r),
        "&" => Some(l & r),
        "|" => Some(l | r),
        "^" => Some(l ^ r),
        "<" => Some((l < r) as i128),
        ">" => Some((l > r) as i128),
        "<=" => Some((l <= r) as i128),
        ">=" => Some((l >= r) as i128),
        "==" => Some((l == r) as i128),
        "!=" => Some((l != r) as i128),
        "&&" => Some((l != 0 && r != 0) as i128),
        "||" => Some((l != 0 || r != 0) as i128),
        _ => None,
    }
}
