//! The width (32 or 64 bits, signed or not) in which an integer expression of a kernel is
//! evaluated: from declared types, `using`/`typedef` aliases, struct members, casts, literals
//! and the usual arithmetic conversions.

use crate::cuda::kernel::Kernel;
use crate::cuda::CudaModel;
use gpulint_syntax::named_children;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

/// The width of an integer expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Width {
    /// A literal or named constant: it takes the other operand's type.
    Constant,
    /// `int` and narrower (`signed`), `unsigned` (`!signed`).
    W32 {
        signed: bool,
    },
    W64,
    Unknown,
}

/// The width of a declared type.
pub fn type_width(ty: &str) -> Width {
    // Most types are one plain word (`int`, `int64_t`, `scalar_t`): no qualifier to drop and
    // no space to fold (every qualifier spells a `c` or a `v`).
    if ty
        .bytes()
        .all(|b| b.is_ascii_graphic() && b != b'c' && b != b'v')
    {
        return width_of(ty);
    }
    width_of(&unqualified(ty))
}

/// `ty` without `const`, `volatile` and `__restrict__`, its words one space apart.
fn unqualified(ty: &str) -> String {
    let t = ty
        .replace("const", "")
        .replace("volatile", "")
        .replace("__restrict__", "");
    let t: Vec<&str> = t.split_whitespace().collect();
    t.join(" ")
}

/// The width of a type spelled without qualifiers, its words one space apart.
fn width_of(t: &str) -> Width {
    match t {
        "int" | "int32_t" | "int32" | "signed" | "signed int" | "short" | "int16_t" | "int8_t"
        | "char" | "signed char" => Width::W32 { signed: true },
        "unsigned" | "unsigned int" | "uint32_t" | "uint32" | "uint" | "unsigned short"
        | "uint16_t" | "uint8_t" | "unsigned char" => Width::W32 { signed: false },
        "int64_t" | "long" | "long long" | "long int" | "int64" | "ptrdiff_t" | "ssize_t"
        | "size_t" | "uint64_t" | "unsigned long" | "unsigned long long" | "uint64"
        | "long long int" | "std::size_t" | "std::int64_t" | "index_t_64" => Width::W64,
        _ => Width::Unknown,
    }
}

fn combine(a: Width, b: Width) -> Width {
    match (a, b) {
        (Width::Unknown, _) | (_, Width::Unknown) => Width::Unknown,
        (Width::W64, _) | (_, Width::W64) => Width::W64,
        (Width::Constant, x) | (x, Width::Constant) => x,
        (Width::W32 { signed: s1 }, Width::W32 { signed: s2 }) => Width::W32 { signed: s1 && s2 },
    }
}

impl<'t> CudaModel<'t> {
    /// The width in which `e` is evaluated in kernel `k`.
    pub fn width(&self, k: &Kernel<'t>, e: Node<'t>) -> Width {
        self.width_depth(k, e, 0)
    }

    fn width_depth(&self, k: &Kernel<'t>, e: Node<'t>, depth: usize) -> Width {
        if depth > 24 {
            return Width::Unknown;
        }
        let d = depth + 1;
        let e = match e.kind_name() {
            "parenthesized_expression" => {
                return self.width_depth(k, e.named_child(0).unwrap_or(e), d)
            }
            _ => e,
        };
        match e.kind_name() {
            "number_literal" => {
                let t = self.text(e).to_ascii_lowercase();
                if t.ends_with('l') || t.ends_with("lu") || t.ends_with("ul") {
                    Width::W64
                } else {
                    Width::Constant
                }
            }
            "sizeof_expression" => Width::W64,
            "identifier" => {
                let name = self.text(e);
                if let Some(p) = k.param(name) {
                    if p.pointer {
                        return Width::Unknown;
                    }
                    return p
                        .node
                        .field("type")
                        .map(|t| self.resolved_width(self.text(t)))
                        .unwrap_or(Width::Unknown);
                }
                if let Some(ty) = k.types.get(name) {
                    let w = self.resolved_width(ty);
                    if w != Width::Unknown || *ty != "auto" {
                        return w;
                    }
                    // `auto x = …`: the type of its one initialiser.
                    return match k.local(name).map(|i| k.defs[i].as_slice()) {
                        Some([v]) => self.width_depth(k, *v, d),
                        _ => Width::Unknown,
                    };
                }
                if name == "warpSize" || self.constant(name).is_some() {
                    return Width::Constant;
                }
                let f = &self.functions[k.function];
                if f.template_params.iter().any(|(p, _)| *p == name) {
                    return Width::Constant;
                }
                // A member of the enclosing class, read without `this->`.
                self.implicit_member_width(k, name)
            }
            "field_expression" => {
                let arg = e.field("argument").map(|a| self.text(a)).unwrap_or("");
                if matches!(arg, "threadIdx" | "blockIdx" | "blockDim" | "gridDim") {
                    return Width::W32 { signed: false };
                }
                match e.field("field").map(|f| self.text(f)) {
                    Some(f) => self.member_width(f),
                    None => Width::Unknown,
                }
            }
            "cast_expression" => e
                .field("type")
                .map(|t| self.resolved_width(self.text(t)))
                .unwrap_or(Width::Unknown),
            "unary_expression" => match e.field("argument") {
                Some(a) => self.width_depth(k, a, d),
                None => Width::Unknown,
            },
            "binary_expression" => {
                let op = e.field("operator").map(|o| o.kind_name()).unwrap_or("");
                let (Some(l), Some(r)) = (e.field("left"), e.field("right")) else {
                    return Width::Unknown;
                };
                match op {
                    "+" | "-" | "*" | "/" | "%" | "&" | "|" | "^" => {
                        combine(self.width_depth(k, l, d), self.width_depth(k, r, d))
                    }
                    // A shift has the type of its left side.
                    "<<" | ">>" => self.width_depth(k, l, d),
                    _ => Width::W32 { signed: true },
                }
            }
            "conditional_expression" => match (e.field("consequence"), e.field("alternative")) {
                (Some(a), Some(b)) => combine(self.width_depth(k, a, d), self.width_depth(k, b, d)),
                _ => Width::Unknown,
            },
            "call_expression" => {
                let Some(f) = e.field("function") else {
                    return Width::Unknown;
                };
                let args: Vec<Node<'t>> = e
                    .field("arguments")
                    .map(|a| named_children(a).collect())
                    .unwrap_or_default();
                if f.kind_name() == "template_function" {
                    let name = f.field("name").map(|n| self.text(n)).unwrap_or("");
                    if matches!(name, "static_cast" | "reinterpret_cast") {
                        return f
                            .field("arguments")
                            .and_then(|a| a.named_child(0))
                            .map(|t| self.resolved_width(self.text(t)))
                            .unwrap_or(Width::Unknown);
                    }
                    return Width::Unknown;
                }
                match crate::cuda::last_name(self.text(f)) {
                    "min" | "max" | "umin" | "umax" if args.len() == 2 => combine(
                        self.width_depth(k, args[0], d),
                        self.width_depth(k, args[1], d),
                    ),
                    "__mul24" | "__umul24" => Width::W32 { signed: true },
                    name => self.resolved_width(name),
                }
            }
            _ => Width::Unknown,
        }
    }

    /// The width of a type name, through `using`/`typedef` aliases seen in this file.
    pub(crate) fn resolved_width(&self, ty: &str) -> Width {
        let w = type_width(ty);
        if w != Width::Unknown {
            return w;
        }
        match self.type_alias(crate::cuda::last_name(ty.trim())) {
            Some(t) => type_width(t),
            None => Width::Unknown,
        }
    }

    /// The width of a struct member, when every declaration of that name agrees.
    fn member_width(&self, field: &str) -> Width {
        let mut w: Option<Width> = None;
        for t in self.field_types(field) {
            let x = self.resolved_width(t);
            match w {
                None => w = Some(x),
                Some(prev) if prev != x => return Width::Unknown,
                _ => {}
            }
        }
        w.unwrap_or(Width::Unknown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one-word shortcut answers as the spelled-out reading does.
    #[test]
    fn plain_words_read_as_qualified_types_do() {
        for ty in [
            "int",
            "int64_t",
            "uint32_t",
            "size_t",
            "std::size_t",
            "long",
            "float",
            "scalar_t",
            "char",
            "const int",
            "int const",
            "const\tint",
            "volatile unsigned",
            "constexpr",
            "int*",
            "long  long",
            "__restrict__",
            "unsigned\u{b}int",
            "index_t_64",
            "",
        ] {
            assert_eq!(type_width(ty), width_of(&unqualified(ty)), "{ty:?}");
        }
        assert_eq!(type_width("int"), Width::W32 { signed: true });
        assert_eq!(type_width("const  std::size_t"), Width::W64);
        assert_eq!(type_width("scalar_t"), Width::Unknown);
    }
}
