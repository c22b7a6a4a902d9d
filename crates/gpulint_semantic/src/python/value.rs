//! Folded constants: the [`Value`] type, Python string literals, integer literals and binary
//! operators on constants.

use gpulint_syntax::NodeExt;
use gpulint_syntax::{named_children, text};
use tree_sitter::Node;

/// A folded constant.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Int(i128),
    Float(f64),
    Str(String),
    Bool(bool),
    None,
    Tuple(Vec<Value>),
}

impl Value {
    pub fn as_int(&self) -> Option<i128> {
        match self {
            Value::Int(i) => Some(*i),
            Value::Bool(b) => Some(*b as i128),
            Value::Float(f) if f.fract() == 0.0 && f.abs() < 1e30 => Some(*f as i128),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Float(f) => Some(*f),
            Value::Bool(b) => Some(*b as i64 as f64),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn truthy(&self) -> bool {
        match self {
            Value::Int(i) => *i != 0,
            Value::Float(f) => *f != 0.0,
            Value::Str(s) => !s.is_empty(),
            Value::Bool(b) => *b,
            Value::None => false,
            Value::Tuple(t) => !t.is_empty(),
        }
    }
}

/// The value of a plain string literal (no f-string interpolation), quotes removed.
pub fn string_literal(node: Node<'_>, source: &str) -> Option<String> {
    if node.kind_name() == "concatenated_string" {
        let mut s = String::new();
        for part in named_children(node) {
            s.push_str(&string_literal(part, source)?);
        }
        return Some(s);
    }
    if node.kind_name() != "string" {
        return None;
    }
    let mut out = String::new();
    for part in named_children(node) {
        match part.kind_name() {
            "string_content" => out.push_str(text(part, source)),
            "interpolation" => return None,
            "escape_sequence" => out.push_str(&unescape(text(part, source))),
            _ => {}
        }
    }
    Some(out)
}

fn unescape(esc: &str) -> String {
    match esc {
        "\\n" => "\n".into(),
        "\\t" => "\t".into(),
        "\\\\" => "\\".into(),
        "\\'" => "'".into(),
        "\\\"" => "\"".into(),
        other => other.to_string(),
    }
}

pub(super) fn parse_int(s: &str) -> Option<i128> {
    let s = s.replace('_', "");
    let lower = s.to_ascii_lowercase();
    let lower = lower.trim_end_matches('l');
    if let Some(h) = lower.strip_prefix("0x") {
        i128::from_str_radix(h, 16).ok()
    } else if let Some(o) = lower.strip_prefix("0o") {
        i128::from_str_radix(o, 8).ok()
    } else if let Some(b) = lower.strip_prefix("0b") {
        i128::from_str_radix(b, 2).ok()
    } else {
        lower.parse().ok()
    }
}

/// Python's binary operators on folded constants (`None` where the result is not a constant
/// worth keeping: overflow, division by zero, unsupported operand types).
pub fn fold_binary(op: &str, l: Value, r: Value) -> Option<Value> {
    use Value::{Float, Int, Str, Tuple};
    match (l, r) {
        (Int(a), Int(b)) => match op {
            "+" => a.checked_add(b).map(Int),
            "-" => a.checked_sub(b).map(Int),
            "*" => a.checked_mul(b).map(Int),
            "//" if b != 0 => Some(Int(a.div_euclid(b))),
            "%" if b != 0 => Some(Int(a.rem_euclid(b))),
            "/" if b != 0 => Some(Float(a as f64 / b as f64)),
            "**" if (0..=127).contains(&b) => a.checked_pow(b as u32).map(Int),
            "<<" if (0..=126).contains(&b) => a.checked_shl(b as u32).map(Int),
            ">>" if (0..=127).contains(&b) => Some(Int(a >> b)),
            _ => None,
        },
        (a @ (Int(_) | Float(_)), b @ (Int(_) | Float(_))) => {
            let (x, y) = (a.as_f64()?, b.as_f64()?);
            let v = match op {
                "+" => x + y,
                "-" => x - y,
                "*" => x * y,
                "/" if y != 0.0 => x / y,
                "//" if y != 0.0 => (x / y).floor(),
                "**" => x.powf(y),
                _ => return None,
            };
            v.is_finite().then_some(Float(v))
        }
        (Str(a), Str(b)) if op == "+" => Some(Str(a + &b)),
        (Tuple(a), Tuple(b)) if op == "+" => Some(Tuple([a, b].concat())),
        _ => None,
    }
}
