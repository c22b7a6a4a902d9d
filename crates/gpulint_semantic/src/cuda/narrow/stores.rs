//! 64-bit batch strides stored in struct members declared 32-bit: `params.q_batch_stride =
//! q.stride(0);` with `index_t q_batch_stride;` and `using index_t = uint32_t;`. The kernels that
//! read the member compute `b * params.q_batch_stride` from a value that already wrapped.
//!
//! The fix is the member's type, so the finding belongs to the file that declares it. The
//! stores are read from that file itself and, for a header, from the C/C++/CUDA files next to
//! it that include it (see `glue_project::member_stores`). Element counts (`numel()`) stored
//! in members are reported at the store by `narrowed_count_fields`; single dimensions
//! (`x.size(1)`) are small and not reported.

use super::{member_of, method_name};
use crate::cuda::interval::Width;
use crate::hash::HashMap;
use gpulint_syntax::{text, NodeExt};
use std::path::PathBuf;
use tree_sitter::Node;

/// One store of a tensor stride in a struct member, in host code with no check of the 32-bit
/// limit before it in its function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StrideStore {
    /// The file (`None`: the checked file).
    pub path: Option<PathBuf>,
    /// The member written.
    pub field: String,
    /// 1-based line of the assignment.
    pub line: usize,
    /// The assignment, shortened.
    pub text: String,
}

/// 32-bit struct members of this file that hold strides stored elsewhere or here, grouped by
/// where their width is decided.
#[derive(Debug, Clone)]
pub struct NarrowedStrideMembers<'t> {
    /// The alias declaration the members take their type from (`using index_t = uint32_t;`),
    /// or the type of the first member's declaration.
    pub at: Node<'t>,
    /// The alias, when `at` declares one.
    pub alias: Option<&'t str>,
    /// The 32-bit type.
    pub ty: &'t str,
    /// The members, in order of declaration.
    pub members: Vec<&'t str>,
    /// The stores, in order of file and line.
    pub stores: Vec<StrideStore>,
}

/// The tensor whose outermost stride `e` is (`x.stride(0)`, `x.strides()[0]`).
fn outer_stride<'t>(e: Node<'t>, source: &'t str) -> Option<&'t str> {
    let (call, index) = match e.kind_name() {
        "call_expression" if method_name(e, source) == Some("stride") => {
            (e, e.field("arguments")?.named_child(0)?)
        }
        "subscript_expression" => {
            let call = e
                .field("argument")
                .filter(|a| a.kind_name() == "call_expression")?;
            if method_name(call, source) != Some("strides") {
                return None;
            }
            (call, e.field("indices")?.named_child(0)?)
        }
        _ => return None,
    };
    if text(index, source).trim() != "0" {
        return None;
    }
    Some(text(call.field("function")?.field("argument")?, source).trim())
}

/// The tensor whose outermost stride the value `e` carries (through parentheses, casts, `?:`
/// branches, `+ - *`).
fn carried_stride<'t>(e: Node<'t>, source: &'t str) -> Option<&'t str> {
    let mut stack = vec![e];
    let mut steps = 0;
    while let Some(x) = stack.pop() {
        steps += 1;
        if steps > 64 {
            return None;
        }
        if let Some(t) = outer_stride(x, source) {
            return Some(t);
        }
        match x.kind_name() {
            "parenthesized_expression" => stack.extend(x.named_child(0)),
            "cast_expression" => stack.extend(x.field("value")),
            "conditional_expression" => {
                stack.extend(x.field("consequence"));
                stack.extend(x.field("alternative"));
            }
            "binary_expression"
                if x.field("operator")
                    .is_some_and(|o| matches!(o.kind_name(), "+" | "-" | "*")) =>
            {
                stack.extend(x.field("left"));
                stack.extend(x.field("right"));
            }
            "call_expression" => {
                // `static_cast<int>(x.stride(0))`
                let cast = x.field("function").is_some_and(|f| {
                    f.kind_name() == "template_function"
                        && f.field("name")
                            .is_some_and(|n| text(n, source) == "static_cast")
                });
                if cast {
                    stack.extend(x.field("arguments").and_then(|a| a.named_child(0)));
                }
            }
            _ => {}
        }
    }
    None
}

/// Lower bounds on the rank of the tensors a function reads sizes or strides of (`x.size(3)`:
/// 4, `x.stride(-3)`: 3, `x.sizes()[2]`: 3, `x.dim() == 4`: 4).
pub(crate) fn ranks<'t>(func: Node<'t>, source: &'t str) -> HashMap<&'t str, i64> {
    let mut out: HashMap<&'t str, i64> = HashMap::default();
    let literal = |n: Node<'_>| text(n, source).trim().parse::<i64>().ok();
    let receiver = |call: Node<'t>| {
        call.field("function")
            .and_then(|f| f.field("argument"))
            .map(|r| text(r, source).trim())
    };
    for n in gpulint_syntax::descendants(func).take(100_000) {
        let (call, index) = match n.kind_name() {
            "call_expression" if matches!(method_name(n, source), Some("size" | "stride")) => (
                n,
                n.field("arguments")
                    .and_then(|a| a.named_child(0))
                    .and_then(literal),
            ),
            "subscript_expression" => match n.field("argument") {
                Some(c)
                    if c.kind_name() == "call_expression"
                        && matches!(method_name(c, source), Some("sizes" | "strides")) =>
                {
                    (
                        c,
                        n.field("indices")
                            .and_then(|a| a.named_child(0))
                            .and_then(literal),
                    )
                }
                _ => continue,
            },
            "binary_expression" if n.field("operator").is_some_and(|o| o.kind_name() == "==") => {
                let (Some(l), Some(r)) = (n.field("left"), n.field("right")) else {
                    continue;
                };
                let (c, v) = if l.kind_name() == "call_expression" {
                    (l, r)
                } else {
                    (r, l)
                };
                if c.kind_name() != "call_expression"
                    || !matches!(method_name(c, source), Some("dim" | "ndimension"))
                {
                    continue;
                }
                if let (Some(t), Some(v)) = (receiver(c), literal(v)) {
                    let e = out.entry(t).or_default();
                    *e = (*e).max(v);
                }
                continue;
            }
            _ => continue,
        };
        let (Some(t), Some(i)) = (receiver(call), index) else {
            continue;
        };
        let bound = if i >= 0 { i + 1 } else { -i };
        let e = out.entry(t).or_default();
        *e = (*e).max(bound);
    }
    out
}

/// Rank from which the outermost stride spans two or more sizes (a batch stride, `S * H * D`
/// of a `[B, S, H, D]` tensor): an element-count class quantity. The outermost stride of a
/// matrix is one row's length.
const MIN_RANK: i64 = 3;

/// The member `assign` (a plain `=`) stores the outermost stride of a tensor of rank three or
/// more in, if it does (`ranks`: of the function around it).
pub(crate) fn stride_store<'t>(
    assign: Node<'t>,
    source: &'t str,
    ranks: &mut dyn FnMut() -> HashMap<&'t str, i64>,
) -> Option<&'t str> {
    if assign.kind_name() != "assignment_expression"
        || assign
            .field("operator")
            .is_none_or(|o| o.kind_name() != "=")
    {
        return None;
    }
    let field = member_of(assign.field("left")?)?;
    let tensor = carried_stride(assign.field("right")?, source)?;
    (ranks().get(tensor).copied().unwrap_or(0) >= MIN_RANK).then(|| text(field, source))
}

/// Is the text before `at` in its function free of a 32-bit limit check?
pub(crate) fn unchecked(function_start: usize, at: usize, source: &str) -> bool {
    super::limit_end(source, function_start, at).is_none()
}

/// The assignment's text on one line, shortened.
pub(crate) fn short_text(assign: Node<'_>, source: &str) -> String {
    let t: String = text(assign, source)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    if t.chars().count() > 60 {
        t.chars().take(57).collect::<String>() + "..."
    } else {
        t
    }
}

impl<'t> crate::cuda::CudaModel<'t> {
    /// The 32-bit struct members declared in this file (every declaration of the name here
    /// 32-bit) that host code stores tensor strides in, with no check of the 32-bit limit
    /// before: in this file, or for a header in the files next to it that include it.
    pub fn narrowed_stride_members(&self) -> Vec<NarrowedStrideMembers<'t>> {
        // Cheap gates first: a 32-bit member, and a file that speaks of strides.
        if self.fields.is_empty()
            || memchr::memmem::find(self.source.as_bytes(), b"stride").is_none()
        {
            return Vec::new();
        }
        let narrow: Vec<&'t str> = {
            let mut v: Vec<&'t str> = self
                .fields
                .iter()
                .filter(|(_, types)| {
                    types
                        .iter()
                        .all(|t| matches!(self.resolved_width(t), Width::W32 { .. }))
                })
                .map(|(n, _)| *n)
                .collect();
            v.sort_unstable();
            v
        };
        if narrow.is_empty() {
            return Vec::new();
        }
        let mut stores: Vec<StrideStore> = Vec::new();
        let src = self.source.as_bytes();
        let calls_stride = memchr::memmem::find(src, b"stride(").is_some()
            || memchr::memmem::find(src, b"strides(").is_some();
        let host = self
            .functions
            .iter()
            .filter(|f| calls_stride && !f.space.global && (!f.space.device || f.space.host));
        for f in host {
            let Some(body) = f.node.field("body") else {
                continue;
            };
            let assigns = gpulint_syntax::descendants(body)
                .take(50_000)
                .filter(|n| n.kind_name() == "assignment_expression");
            let mut known: Option<HashMap<&'t str, i64>> = None;
            let (func, source) = (f.node, self.source);
            let mut ranks_here = || known.get_or_insert_with(|| ranks(func, source)).clone();
            for node in assigns {
                let Some(field) = stride_store(node, self.source, &mut ranks_here) else {
                    continue;
                };
                let Ok(i) = narrow.binary_search(&field) else {
                    continue;
                };
                if unchecked(f.node.start_byte(), node.start_byte(), self.source) {
                    stores.push(StrideStore {
                        path: None,
                        field: narrow[i].to_string(),
                        line: self.line_of(node.start_byte()),
                        text: short_text(node, self.source),
                    });
                }
            }
        }
        if let Some(path) = self.header_path.as_deref() {
            stores.extend(
                crate::cuda::glue_project::member_stores::sibling_stride_stores(path, &narrow),
            );
        }
        if stores.is_empty() {
            return Vec::new();
        }
        self.group_stride_members(&stores)
    }

    /// Groups the stores by where the members' width is decided: one alias declared in this
    /// file, or else the struct that declares them.
    fn group_stride_members(&self, stores: &[StrideStore]) -> Vec<NarrowedStrideMembers<'t>> {
        let mut out: Vec<(usize, NarrowedStrideMembers<'t>)> = Vec::new();
        let mut aliases: Vec<(&'t str, Option<Node<'t>>)> = Vec::new();
        let decls =
            gpulint_syntax::descendants(self.root).filter(|n| n.kind_name() == "field_declaration");
        for decl in decls {
            let Some(ty_node) = decl.field("type") else {
                continue;
            };
            let ty = text(ty_node, self.source).trim();
            for d in gpulint_syntax::named_children(decl).filter_map(super::member_declarator) {
                let name = text(d, self.source);
                let mine: Vec<&StrideStore> = stores.iter().filter(|s| s.field == name).collect();
                if mine.is_empty() {
                    continue;
                }
                let alias = match aliases.iter().find(|(t, _)| *t == ty) {
                    Some((_, a)) => *a,
                    None => {
                        let a = self.alias_declaration(ty);
                        aliases.push((ty, a));
                        a
                    }
                };
                let key = match alias {
                    Some(a) => a.id(),
                    None => struct_of(self, decl).map_or(decl.id(), |s| s.id()),
                };
                let group = match out.iter().position(|(k, _)| *k == key) {
                    Some(i) => &mut out[i].1,
                    None => {
                        let (at, alias_name, resolved) = match alias {
                            Some(a) => {
                                let t = a.field("type").map_or(ty, |t| text(t, self.source).trim());
                                (a, Some(ty), t)
                            }
                            None => (ty_node, None, ty),
                        };
                        out.push((
                            key,
                            NarrowedStrideMembers {
                                at,
                                alias: alias_name,
                                ty: resolved,
                                members: Vec::new(),
                                stores: Vec::new(),
                            },
                        ));
                        &mut out.last_mut().expect("just pushed").1
                    }
                };
                if !group.members.contains(&name) {
                    group.members.push(name);
                    group.stores.extend(mine.into_iter().cloned());
                }
            }
        }
        let mut out: Vec<NarrowedStrideMembers<'t>> = out.into_iter().map(|(_, g)| g).collect();
        for g in &mut out {
            g.stores
                .sort_by(|a, b| (&a.path, a.line).cmp(&(&b.path, b.line)));
            g.stores.dedup();
        }
        out.sort_by_key(|g| g.at.start_byte());
        out
    }

    /// The `using`/`typedef` declaration of alias `name` in this file naming a 32-bit type
    /// (the first).
    fn alias_declaration(&self, name: &str) -> Option<Node<'t>> {
        if !matches!(self.aliases.get(name), Some(t) if matches!(self.resolved_width(t), Width::W32 { .. }))
        {
            return None;
        }
        gpulint_syntax::descendants(self.root).find(|n| match n.kind_name() {
            "alias_declaration" => n
                .field("name")
                .is_some_and(|x| text(x, self.source) == name),
            "type_definition" => gpulint_syntax::named_children(*n)
                .any(|d| d.kind_name() == "type_identifier" && text(d, self.source) == name),
            _ => false,
        })
    }
}

/// The struct or class whose body holds the member declaration `decl`.
fn struct_of<'t>(m: &crate::cuda::CudaModel<'t>, decl: Node<'t>) -> Option<Node<'t>> {
    let list = m
        .parent(decl)
        .filter(|l| l.kind_name() == "field_declaration_list")?;
    m.parent(list).filter(|s| {
        matches!(
            s.kind_name(),
            "struct_specifier" | "class_specifier" | "union_specifier"
        )
    })
}
