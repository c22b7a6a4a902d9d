//! Narrowing of 64-bit sizes to 32-bit integers in host code: `int n = x.numel()`,
//! `static_cast<int>(t.NumElements())`, `const int total = x.size(0) * x.size(1) * x.size(2)`.

pub mod stores;

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

/// Where the earliest-ending spelling of a 32-bit limit ([`INT32_LIMITS`]) that lies wholly in
/// `source[start..end]` ends (a byte offset of `source`). Text up to offset `at` checks the
/// limit exactly when this, asked for any `end` at or past `at`, is at most `at`: the first
/// occurrence of each spelling is the one that ends first. So one search of a whole function
/// answers for every offset in it (searching the text before each launch again grows with the
/// launches times the function's length).
pub fn limit_end(source: &str, start: usize, end: usize) -> Option<usize> {
    let text = source.get(start..end)?;
    INT32_LIMITS
        .iter()
        .filter_map(|t| memchr::memmem::find(text.as_bytes(), t.as_bytes()).map(|i| i + t.len()))
        .min()
        .map(|e| start + e)
}

/// Does `function` spell a 32-bit limit before byte offset `at`, by the answers of
/// [`limit_end`] for the whole function, kept in `ends` per function?
pub fn checks_int32_before(
    ends: &mut crate::hash::HashMap<usize, Option<usize>>,
    source: &str,
    function: Node<'_>,
    at: usize,
) -> bool {
    ends.entry(function.id())
        .or_insert_with(|| limit_end(source, function.start_byte(), function.end_byte()))
        .is_some_and(|e| e <= at)
}

/// Calls that return an element count.
pub const COUNT_CALLS: &[&str] = &["numel", "NumElements", "num_elements", "nelement"];

/// The cast or declaration that stores the value of `e` in a 32-bit type, and the type.
/// The value passes through `+`, `-`, `*` and parentheses, not through a division (a block
/// count `(n + 255) / 256` is small).
pub fn narrowing_of<'t>(m: &super::CudaModel<'t>, e: Node<'t>) -> Option<(Node<'t>, &'t str)> {
    let source = m.source;
    let mut cur = e;
    for _ in 0..16 {
        let p = m.parent(cur)?;
        match p.kind_name() {
            "parenthesized_expression" => {}
            "binary_expression" => {
                if !p
                    .field("operator")
                    .is_some_and(|o| matches!(o.kind_name(), "+" | "-" | "*"))
                {
                    return None;
                }
            }
            "argument_list" => {
                // Only a cast's own argument passes the value through.
                let call = m.parent(p)?;
                let f = call.field("function")?;
                if f.kind_name() != "template_function"
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
                if f.kind_name() != "template_function"
                    || text(f.field("name")?, source) != "static_cast"
                {
                    return None;
                }
                let ty = text(f.field("arguments")?.named_child(0)?, source).trim();
                return NARROW_TYPES.contains(&ty).then_some((p, ty));
            }
            "init_declarator" => {
                let decl = m.parent(p).filter(|d| d.kind_name() == "declaration")?;
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
    if f.kind_name() != "field_expression" {
        return None;
    }
    let field = f.field("field")?;
    let field = match field.kind_name() {
        "template_method" => field.field("name")?,
        _ => field,
    };
    Some(text(field, source))
}

/// A launch argument that carries a 64-bit count into a 32-bit kernel parameter: the
/// conversion at the call narrows it without a cast in sight.
#[derive(Debug, Clone)]
pub struct LaunchNarrowing<'t> {
    pub launch: Node<'t>,
    /// The kernel's parameter declaration.
    pub param: Node<'t>,
    /// The argument (or the host definition it names).
    pub arg: Node<'t>,
    /// The parameter's type.
    pub ty: &'t str,
    /// A full element count (`x.numel()`), not a product of sizes.
    pub count: bool,
}

impl<'t> super::CudaModel<'t> {
    /// Launch arguments in this file that pass a 64-bit element count (`x.numel()`, a
    /// product of `x.size(d)`, or a 64-bit local holding one) to a 32-bit parameter of a kernel
    /// defined here, in launching functions that do not check the 32-bit limit first.
    pub fn narrowed_launch_args(&self) -> Vec<LaunchNarrowing<'t>> {
        let mut out = Vec::new();
        let mut limits = crate::hash::HashMap::default();
        for l in &self.launches {
            let Some(k) = self.launched_kernel(l) else {
                continue;
            };
            let Some(func) = self.enclosing_function(l.node) else {
                continue;
            };
            if checks_int32_before(&mut limits, self.source, func.node, l.node.start_byte()) {
                continue;
            }
            for (p, arg) in k.params.iter().zip(&l.args) {
                if p.pointer {
                    continue;
                }
                let Some(ty) = p.node.field("type").map(|t| text(t, self.source).trim()) else {
                    continue;
                };
                if !matches!(self.resolved_width(ty), super::interval::Width::W32 { .. }) {
                    continue;
                }
                let a = super::kernel::peel(*arg);
                let found = match a.kind_name() {
                    "identifier" => match self.host_values_at(l, text(a, self.source)).as_slice() {
                        // A 64-bit local: `int64_t n = x.numel();` (a 32-bit one is the
                        // narrowing at its declaration, reported there).
                        [v] if !declared_narrow(self, *v) => {
                            count_value(*v, self.source).map(|c| (*v, c))
                        }
                        _ => None,
                    },
                    _ => count_value(a, self.source).map(|c| (a, c)),
                };
                if let Some((value, count)) = found {
                    out.push(LaunchNarrowing {
                        launch: l.node,
                        param: p.node,
                        arg: value,
                        ty,
                        count,
                    });
                }
            }
        }
        out
    }
}

/// Is `value` the initialiser of a declaration of a 32-bit type?
fn declared_narrow(m: &super::CudaModel<'_>, value: Node<'_>) -> bool {
    m.parent(value)
        .filter(|p| p.kind_name() == "init_declarator")
        .and_then(|p| m.parent(p))
        .and_then(|d| d.field("type"))
        .is_some_and(|t| NARROW_TYPES.contains(&text(t, m.source).trim()))
}

/// `x.numel()` (a count: `Some(true)`) or a product of two or more `x.size(d)`
/// (`Some(false)`), not divided down.
fn count_value(e: Node<'_>, source: &str) -> Option<bool> {
    let e = super::kernel::peel(e);
    if e.kind_name() == "call_expression" {
        return method_name(e, source)
            .filter(|m| COUNT_CALLS.contains(m))
            .map(|_| true);
    }
    if e.kind_name() != "binary_expression" || e.field("operator")?.kind_name() != "*" {
        return None;
    }
    let mut sizes = 0;
    let mut stack = vec![e];
    while let Some(x) = stack.pop() {
        let x = super::kernel::peel(x);
        match x.kind_name() {
            "binary_expression" if x.field("operator").is_some_and(|o| o.kind_name() == "*") => {
                stack.extend(x.field("left"));
                stack.extend(x.field("right"));
            }
            "call_expression" => match method_name(x, source) {
                Some("size" | "dim_size" | "numel") => sizes += 1,
                _ => return None,
            },
            "number_literal" | "identifier" => {}
            _ => return None,
        }
    }
    (sizes >= 2).then_some(false)
}

impl<'t> super::CudaModel<'t> {
    /// In host functions that launch a kernel: single sizes narrowed to 32 bits
    /// (`int num_boxes1 = boxes1.size(0);`), harmless alone, multiplied with another one in 32
    /// bits (`num_boxes1 * num_boxes2`): an element count that wraps. Each as (the narrowing
    /// declaration, the product).
    pub fn narrowed_size_products(&self) -> Vec<(Node<'t>, Node<'t>)> {
        let mut out = Vec::new();
        for f in self
            .functions
            .iter()
            .filter(|f| !f.space.global && !f.space.device)
        {
            let Some(body) = f.node.field("body") else {
                continue;
            };
            let (fs, fe) = (f.node.start_byte(), f.node.end_byte());
            if !self.holds_launch(f.node) {
                continue;
            }
            if limit_end(self.source, fs, fe).is_some() {
                continue;
            }
            let text_before = &self.source[fs..fe];
            // Two sizes narrowed below need two `size` calls in the text.
            if memchr::memmem::find_iter(text_before.as_bytes(), b"size")
                .nth(1)
                .is_none()
            {
                continue;
            }
            let nodes: Vec<Node<'t>> = gpulint_syntax::descendants(body).take(20_000).collect();
            let mut narrowed: Vec<(&'t str, Node<'t>)> = Vec::new();
            for d in nodes.iter().filter(|n| n.kind_name() == "declaration") {
                let Some(ty) = d.field("type").map(|t| text(t, self.source).trim()) else {
                    continue;
                };
                if !NARROW_TYPES.contains(&ty) {
                    continue;
                }
                for init in gpulint_syntax::named_children(*d)
                    .filter(|c| c.kind_name() == "init_declarator")
                {
                    let (Some(name), Some(v)) = (init.field("declarator"), init.field("value"))
                    else {
                        continue;
                    };
                    let v = super::kernel::peel(v);
                    if v.kind_name() == "call_expression"
                        && matches!(method_name(v, self.source), Some("size" | "dim_size"))
                    {
                        narrowed.push((text(name, self.source), init));
                    }
                }
            }
            if narrowed.len() < 2 {
                continue;
            }
            for p in nodes.iter().filter(|n| {
                n.kind_name() == "binary_expression"
                    && n.field("operator").is_some_and(|o| o.kind_name() == "*")
            }) {
                let (Some(l), Some(r)) = (p.field("left"), p.field("right")) else {
                    continue;
                };
                let name_of = |x: Node<'t>| {
                    let x = super::kernel::peel(x);
                    (x.kind_name() == "identifier").then(|| text(x, self.source))
                };
                let (Some(a), Some(b)) = (name_of(l), name_of(r)) else {
                    continue;
                };
                let first = narrowed.iter().find(|(n, _)| *n == a);
                if first.is_some() && narrowed.iter().any(|(n, _)| *n == b) && a != b {
                    out.push((first.map(|(_, d)| *d).unwrap_or(*p), *p));
                    break;
                }
            }
        }
        out
    }
}

/// A 64-bit element count stored in a 32-bit struct member in host code
/// (`tl.sizes[t] = tensor.numel();` with `int sizes[N];`): the kernel that reads the member gets
/// the wrapped count.
#[derive(Debug, Clone)]
pub struct FieldNarrowing<'t> {
    /// The assignment.
    pub assignment: Node<'t>,
    /// The member's name.
    pub field: &'t str,
    /// The member's declared 32-bit type.
    pub ty: String,
    /// The member's declaration, when it is in this file.
    pub declaration: Option<Node<'t>>,
}

impl<'t> super::CudaModel<'t> {
    /// Element counts (`numel()`, `NumElements()`) assigned to struct members declared 32-bit
    /// (in this file or its project headers, every declaration of that name 32-bit), in host
    /// functions that do not check the 32-bit limit before the assignment.
    pub fn narrowed_count_fields(&self) -> Vec<FieldNarrowing<'t>> {
        let mut out: Vec<FieldNarrowing<'t>> = Vec::new();
        if !gpulint_source::contains_any(self.source.as_bytes(), COUNT_CALLS) {
            return out;
        }
        let mut limits = crate::hash::HashMap::default();
        for f in &self.functions {
            if f.space.global || (f.space.device && !f.space.host) {
                continue;
            }
            let Some(body) = f.node.field("body") else {
                continue;
            };
            for call in
                gpulint_syntax::descendants(body).filter(|n| n.kind_name() == "call_expression")
            {
                if !method_name(call, self.source).is_some_and(|m| COUNT_CALLS.contains(&m)) {
                    continue;
                }
                let Some(assign) = count_assignment(self, call) else {
                    continue;
                };
                let Some(field) = assign.field("left").and_then(member_of) else {
                    continue;
                };
                let name = text(field, self.source);
                let types = self.field_types(name);
                let Some(ty) = types.first().copied() else {
                    continue;
                };
                let narrow = types
                    .iter()
                    .all(|t| matches!(self.resolved_width(t), super::interval::Width::W32 { .. }));
                if !narrow || out.iter().any(|o| o.field == name) {
                    continue;
                }
                if checks_int32_before(&mut limits, self.source, f.node, assign.start_byte()) {
                    continue;
                }
                out.push(FieldNarrowing {
                    assignment: assign,
                    field: name,
                    ty: ty.to_string(),
                    declaration: self.field_declaration(name),
                });
            }
        }
        out
    }

    /// The declaration of the struct member `name` in this file (the first).
    pub(crate) fn field_declaration(&self, name: &str) -> Option<Node<'t>> {
        gpulint_syntax::descendants(self.root)
            .filter(|n| n.kind_name() == "field_declaration")
            .find(|n| {
                gpulint_syntax::named_children(*n)
                    .filter_map(member_declarator)
                    .any(|d| text(d, self.source) == name)
            })
    }
}

/// The `field_identifier` a member declarator declares (`sizes` in `int sizes[N]`).
pub fn member_declarator(d: Node<'_>) -> Option<Node<'_>> {
    let mut d = d;
    for _ in 0..4 {
        match d.kind_name() {
            "field_identifier" => return Some(d),
            "array_declarator" => d = d.field("declarator")?,
            _ => return None,
        }
    }
    None
}

/// The assignment whose right side is `call`, through parentheses, `+`/`-`/`*` and casts:
/// `s.n = x.numel();`, `s.n = (int)x.numel();`.
fn count_assignment<'t>(m: &super::CudaModel<'t>, call: Node<'t>) -> Option<Node<'t>> {
    let mut cur = call;
    for _ in 0..8 {
        let p = m.parent(cur)?;
        match p.kind_name() {
            "parenthesized_expression" | "cast_expression" => {}
            "binary_expression"
                if p.field("operator")
                    .is_some_and(|o| matches!(o.kind_name(), "+" | "-" | "*")) => {}
            "assignment_expression" => {
                let plain = p.field("operator").is_some_and(|o| o.kind_name() == "=");
                let right = p.field("right").is_some_and(|r| r.id() == cur.id());
                return (plain && right).then_some(p);
            }
            _ => return None,
        }
        cur = p;
    }
    None
}

/// The member a left side writes: `s.n`, `s->n`, `s.sizes[i]`.
fn member_of(left: Node<'_>) -> Option<Node<'_>> {
    let mut e = left;
    while e.kind_name() == "subscript_expression" {
        e = e.field("argument")?;
    }
    if e.kind_name() != "field_expression" {
        return None;
    }
    e.field("field")
        .filter(|f| f.kind_name() == "field_identifier")
}
