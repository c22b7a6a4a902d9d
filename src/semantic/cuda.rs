//! The CUDA/C++ semantic model: the function table with execution-space qualifiers and
//! integer constants from `#define`, `constexpr`, `const` and `enum`.

use super::{named_children, text};
use crate::settings::Settings;
use std::collections::HashMap;
use tree_sitter::{Node, Tree};

/// Where a function runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExecSpace {
    pub global: bool,
    pub device: bool,
    pub host: bool,
}

/// A function definition.
#[derive(Debug, Clone)]
pub struct Function<'t> {
    pub node: Node<'t>,
    pub name: String,
    pub space: ExecSpace,
}

/// Everything rules ask about a C/C++/CUDA file.
pub struct CudaModel<'t> {
    pub source: &'t str,
    pub root: Node<'t>,
    pub functions: Vec<Function<'t>>,
    /// Object-like `#define NAME <expr>` bodies and `constexpr`/`const`/`enum` initialisers.
    constants: HashMap<&'t str, ConstDef<'t>>,
}

#[derive(Debug, Clone, Copy)]
enum ConstDef<'t> {
    /// A `#define` body, kept as text (it is not parsed as an expression by the grammar).
    Macro(&'t str),
    /// An initialiser expression.
    Expr(Node<'t>),
    /// A known value (enumerators without an initialiser).
    Value(i128),
}

/// Collects the model during the checker's walk.
pub struct CudaBuilder<'t> {
    source: &'t str,
    functions: Vec<Function<'t>>,
    constants: HashMap<&'t str, ConstDef<'t>>,
}

impl<'t> CudaBuilder<'t> {
    pub fn new(source: &'t str, _settings: &Settings) -> Self {
        CudaBuilder {
            source,
            functions: Vec::new(),
            constants: HashMap::new(),
        }
    }

    pub fn enter(&mut self, node: Node<'t>) {
        match node.kind() {
            "function_definition" => {
                let space = exec_space(node, self.source);
                let name = function_name(node, self.source)
                    .unwrap_or_default()
                    .to_string();
                self.functions.push(Function { node, name, space });
            }
            "preproc_def" => {
                if let (Some(name), Some(value)) = (
                    node.child_by_field_name("name"),
                    node.child_by_field_name("value"),
                ) {
                    self.constants.insert(
                        text(name, self.source),
                        ConstDef::Macro(text(value, self.source).trim()),
                    );
                }
            }
            "declaration" => {
                let t = text(node, self.source);
                let is_const = named_children(node).any(|c| {
                    c.kind() == "type_qualifier"
                        && matches!(text(c, self.source), "const" | "constexpr")
                }) || t.starts_with("constexpr")
                    || t.starts_with("static constexpr");
                if !is_const {
                    return;
                }
                for d in named_children(node).filter(|c| c.kind() == "init_declarator") {
                    if let (Some(name), Some(value)) = (
                        d.child_by_field_name("declarator"),
                        d.child_by_field_name("value"),
                    ) {
                        if name.kind() == "identifier" {
                            self.constants
                                .insert(text(name, self.source), ConstDef::Expr(value));
                        }
                    }
                }
            }
            "enumerator_list" => {
                let mut next: i128 = 0;
                for e in named_children(node).filter(|c| c.kind() == "enumerator") {
                    let Some(name) = e.child_by_field_name("name") else {
                        continue;
                    };
                    let name = text(name, self.source);
                    match e.child_by_field_name("value") {
                        Some(v) => {
                            self.constants.insert(name, ConstDef::Expr(v));
                            // Following enumerators count on from a literal value only.
                            match parse_c_int(text(v, self.source)) {
                                Some(i) => next = i + 1,
                                None => next = i128::MIN,
                            }
                        }
                        None if next != i128::MIN => {
                            self.constants.insert(name, ConstDef::Value(next));
                            next += 1;
                        }
                        None => {}
                    }
                }
            }
            _ => {}
        }
    }

    pub fn leave(&mut self, _node: Node<'t>) {}

    pub fn finish(self, tree: &'t Tree) -> CudaModel<'t> {
        CudaModel {
            source: self.source,
            root: tree.root_node(),
            functions: self.functions,
            constants: self.constants,
        }
    }
}

/// The `__global__` / `__device__` / `__host__` qualifiers of a function definition.
pub fn exec_space(func: Node<'_>, source: &str) -> ExecSpace {
    let mut space = ExecSpace::default();
    let mut cursor = func.walk();
    for c in func.children(&mut cursor) {
        if c.kind() == "function_declarator" || c.kind() == "compound_statement" {
            break;
        }
        let t = text(c, source);
        for word in t.split(|ch: char| !(ch.is_alphanumeric() || ch == '_')) {
            match word {
                "__global__" => space.global = true,
                "__device__" => space.device = true,
                "__host__" => space.host = true,
                _ => {}
            }
        }
    }
    space
}

/// The name of a function definition (`foo`, `ns::foo` → `foo`, template-id → its name).
pub fn function_name<'s>(func: Node<'_>, source: &'s str) -> Option<&'s str> {
    let mut decl = func.child_by_field_name("declarator")?;
    // Peel pointer/reference declarators down to the function declarator.
    for _ in 0..8 {
        if decl.kind() == "function_declarator" {
            break;
        }
        decl = decl
            .child_by_field_name("declarator")
            .or_else(|| decl.named_child(0))?;
    }
    let mut name = decl.child_by_field_name("declarator")?;
    for _ in 0..8 {
        match name.kind() {
            "qualified_identifier" => name = name.child_by_field_name("name")?,
            "template_function" => name = name.child_by_field_name("name")?,
            _ => break,
        }
    }
    Some(text(name, source))
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

impl<'t> CudaModel<'t> {
    pub fn text(&self, node: Node<'_>) -> &'t str {
        text(node, self.source)
    }

    /// Kernels (`__global__` functions).
    pub fn kernels(&self) -> impl Iterator<Item = &Function<'t>> {
        self.functions.iter().filter(|f| f.space.global)
    }

    /// The function definition that contains `node`.
    pub fn enclosing_function(&self, node: Node<'_>) -> Option<&Function<'t>> {
        let mut cur = node.parent();
        while let Some(n) = cur {
            if n.kind() == "function_definition" {
                return self.functions.iter().find(|f| f.node.id() == n.id());
            }
            cur = n.parent();
        }
        None
    }

    /// The integer value of a name defined by `#define`, `constexpr`/`const` or `enum`.
    pub fn constant(&self, name: &str) -> Option<i128> {
        self.constant_depth(name, 0)
    }

    fn constant_depth(&self, name: &str, depth: usize) -> Option<i128> {
        if depth > 32 {
            return None;
        }
        match *self.constants.get(name)? {
            ConstDef::Value(v) => Some(v),
            ConstDef::Expr(e) => self.eval_depth(e, depth + 1),
            ConstDef::Macro(body) => self.eval_text(body, depth + 1),
        }
    }

    /// Folds an integer expression: literals, named constants, `sizeof` of scalar types,
    /// arithmetic, shifts, casts and parentheses.
    pub fn eval(&self, expr: Node<'_>) -> Option<i128> {
        self.eval_depth(expr, 0)
    }

    fn eval_depth(&self, expr: Node<'_>, depth: usize) -> Option<i128> {
        if depth > 48 {
            return None;
        }
        let d = depth + 1;
        match expr.kind() {
            "number_literal" => parse_c_int(self.text(expr)),
            "identifier" => self.constant_depth(self.text(expr), d),
            "parenthesized_expression" => self.eval_depth(expr.named_child(0)?, d),
            "cast_expression" => self.eval_depth(expr.child_by_field_name("value")?, d),
            "sizeof_expression" => {
                let t = expr.child_by_field_name("type").map(|t| self.text(t))?;
                sizeof_scalar(t)
            }
            "unary_expression" => {
                let v = self.eval_depth(expr.child_by_field_name("argument")?, d)?;
                match self.text(expr.child_by_field_name("operator")?) {
                    "-" => Some(-v),
                    "+" => Some(v),
                    "~" => Some(!v),
                    "!" => Some((v == 0) as i128),
                    _ => None,
                }
            }
            "binary_expression" => {
                let l = self.eval_depth(expr.child_by_field_name("left")?, d)?;
                let r = self.eval_depth(expr.child_by_field_name("right")?, d)?;
                c_binary(self.text(expr.child_by_field_name("operator")?), l, r)
            }
            "conditional_expression" => {
                let c = self.eval_depth(expr.child_by_field_name("condition")?, d)?;
                let branch = if c != 0 { "consequence" } else { "alternative" };
                self.eval_depth(expr.child_by_field_name(branch)?, d)
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
        // Wrap the body so the grammar sees an expression, then fold it against this model.
        let wrapped = format!("int __gpulint_v = ({body});");
        let tree = crate::lang::parse(crate::lang::Lang::Cuda, &wrapped)?;
        let root = tree.root_node();
        if root.has_error() {
            return None;
        }
        let value = super::descendants(root)
            .find(|n| n.kind() == "init_declarator")?
            .child_by_field_name("value")?;
        let sub = CudaModel {
            source: &wrapped,
            root,
            functions: Vec::new(),
            constants: HashMap::new(),
        };
        sub.eval_with(value, depth, self)
    }

    fn eval_with(&self, expr: Node<'_>, depth: usize, outer: &CudaModel<'_>) -> Option<i128> {
        // Names inside a macro body resolve against the outer file's constants.
        if depth > 48 {
            return None;
        }
        let d = depth + 1;
        match expr.kind() {
            "identifier" => outer.constant_depth(self.text(expr), d),
            "parenthesized_expression" => self.eval_with(expr.named_child(0)?, d, outer),
            "cast_expression" => self.eval_with(expr.child_by_field_name("value")?, d, outer),
            "binary_expression" => {
                let l = self.eval_with(expr.child_by_field_name("left")?, d, outer)?;
                let r = self.eval_with(expr.child_by_field_name("right")?, d, outer)?;
                c_binary(self.text(expr.child_by_field_name("operator")?), l, r)
            }
            "unary_expression" => {
                let v = self.eval_with(expr.child_by_field_name("argument")?, d, outer)?;
                match self.text(expr.child_by_field_name("operator")?) {
                    "-" => Some(-v),
                    "+" => Some(v),
                    "~" => Some(!v),
                    _ => None,
                }
            }
            _ => self.eval_depth(expr, d),
        }
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

fn c_binary(op: &str, l: i128, r: i128) -> Option<i128> {
    match op {
        "+" => l.checked_add(r),
        "-" => l.checked_sub(r),
        "*" => l.checked_mul(r),
        "/" if r != 0 => Some(l / r),
        "%" if r != 0 => Some(l % r),
        "<<" if (0..127).contains(&r) => l.checked_shl(r as u32),
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
