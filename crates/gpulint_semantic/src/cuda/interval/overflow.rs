//! 32-bit index arithmetic that can overflow: products of two sizes evaluated in `int` (or
//! `unsigned`) that become an index or a pointer offset (`int idx = row * cols + col;
//! img[idx]`), element counts computed as a 32-bit product in a guard (`if (i < B * T * V)`),
//! and 64-bit sizes narrowed to 32 bits inside a kernel (`const int num_pixels = C * H * W` with
//! `int64_t` dimensions).
//!
//! A product overflows *provably* when the launches in this file give every size it depends on
//! and its largest value passes the type's limit; it *can* overflow when both factors range
//! over data sizes (parameters, indices over the grid, not `threadIdx` or `blockDim`) and
//! something shows that the data is large: the kernel works on framework tensors, whose element
//! counts reach 2³¹; or, in any file, the product is part of an element count that multiplies
//! three or more sizes (`if (i < B * T * V)`), or one factor is a helper parameter to which a
//! call narrows a 64-bit value (the caller kept it 64-bit), or the product is in an offset into a
//! tensor of four or more dimensions that another kernel of the file computes in 64 bits.

use super::eval::{Point, RangeCx};
use super::evidence::{arithmetic_root, Evidence};
use super::width::Width;
use crate::cuda::guards::compact;
use crate::cuda::kernel::{identifiers, peel, Kernel};
use crate::cuda::{CudaModel, GuardKind};
use gpulint_syntax::NodeExt;
use gpulint_syntax::{descendants, named_children};
use tree_sitter::Node;

/// A factor is a data size when it can reach this.
pub(super) const LARGE: i128 = 1 << 15;

/// Where 32-bit arithmetic can overflow.
#[derive(Debug, Clone)]
pub struct Overflow<'t> {
    /// The product (or the narrowing declaration).
    pub node: Node<'t>,
    pub kind: OverflowKind,
    /// The largest value, when the launches give every size.
    pub proven: Option<i128>,
    /// The 32-bit type it is evaluated in.
    pub ty: &'static str,
    /// The access or guard that uses it.
    pub used_at: Option<Node<'t>>,
    /// A factor has no upper bound in this file (read from memory, an unknown member): it
    /// counts as a data size, a weaker finding than one whose ranges are all bounded.
    pub unbounded: bool,
    /// Why the sizes can reach the limit when the launches do not prove it.
    pub evidence: Evidence,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverflowKind {
    /// A product that becomes an index or a pointer offset.
    IndexProduct,
    /// A product that bounds a global index (an element count).
    BoundProduct,
    /// A 64-bit product narrowed to a 32-bit local.
    Narrowed,
}

/// Framework headers: the kernel indexes tensors, whose element counts reach 2³¹.
const FRAMEWORK: &[&str] = &[
    "<torch/",
    "<ATen/",
    "<c10/",
    "\"tensorflow/",
    "<tensorflow/",
    "<cutlass/",
    "<cute/",
];

/// Is `n` a product (`a * b`)? Only a product is asked whether it overflows.
fn is_product(n: Node<'_>) -> bool {
    n.kind_name() == "binary_expression"
        && n.field("operator").is_some_and(|o| o.kind_name() == "*")
}

/// Does `source` include a framework header?
fn includes_framework(source: &str) -> bool {
    gpulint_source::contains_any(source.as_bytes(), FRAMEWORK)
}

impl<'t> CudaModel<'t> {
    /// The places in kernel `k` where 32-bit arithmetic can overflow.
    pub fn int32_overflows(&self, k: &Kernel<'t>) -> Vec<Overflow<'t>> {
        let mut out = Vec::new();
        if k.too_large || k.parse_damaged() {
            return out;
        }
        let cx = RangeCx::new(self, k);
        // The file's text is searched once, not once per kernel.
        let tensors = *self
            .evidence
            .framework
            .get_or_init(|| includes_framework(self.source))
            || self.launches_of(&self.functions[k.function].name).any(|l| {
                l.args.iter().any(|a| {
                    let t = self.text(*a);
                    t.contains("numel()") || t.contains(".size(") || t.contains("NumElements")
                })
            });
        let mut seen: Vec<String> = Vec::new();
        // Index roots: the index of each access, the offsets of the pointer it goes through,
        // and the definitions of the 32-bit locals they read (a few steps back).
        // Each root is kept with where it is evaluated (the guard around it and its position)
        // and the access it serves.
        let mut roots: Vec<(Node<'t>, Option<u32>, usize, Node<'t>)> = Vec::new();
        for a in &k.accesses {
            if !a.global {
                continue;
            }
            for r in a.index.iter().chain(&a.alias_offsets) {
                roots.push((*r, a.guard, a.node.start_byte(), a.node));
            }
        }
        // 64-bit locals (offsets, `index_t` row offsets) computed from 32-bit arithmetic: a
        // product there overflows before it is widened.
        // Pointer locals built as `base + offset` (`float* u = (float*)params.u_ptr + off`)
        // likewise: the offset is a pointer offset whatever the base.
        for (v, defs) in k.defs.iter().enumerate() {
            let name = k.locals[v];
            let wide = k.types.get(name).map(|t| self.resolved_width(t)) == Some(Width::W64);
            for (d, g) in defs.iter().zip(&k.def_guards[v]) {
                if wide || declared_pointer(self, *d) {
                    roots.push((*d, *g, d.start_byte(), *d));
                }
            }
        }
        // Offsets added to pointers in place: `src += first_batch * element_count;` on a pointer
        // parameter, `g += chunk_idx * chunk_size;` on a pointer local.
        for (n, r) in self.pointer_advances(k) {
            roots.push((r, None, n.start_byte(), n));
        }
        let mut expanded: Vec<usize> = Vec::new();
        let mut i = 0;
        while i < roots.len() && roots.len() < 512 {
            let (root, _, _, used) = roots[i];
            i += 1;
            for id in descendants(root)
                .filter(|n| n.kind_name() == "identifier")
                .take(257)
            {
                let name = self.text(id);
                let Some(v) = k.local(name) else {
                    continue;
                };
                if expanded.contains(&v)
                    || !matches!(
                        k.types.get(name).map(|t| self.resolved_width(t)),
                        Some(Width::W32 { .. })
                    )
                {
                    continue;
                }
                expanded.push(v);
                for (d, g) in k.defs[v].iter().zip(&k.def_guards[v]) {
                    roots.push((*d, *g, d.start_byte(), used));
                }
            }
        }
        for (root, guard, pos, used) in &roots {
            // The point reads every guard around it: it is built at the root's first product.
            let mut at = None;
            for p in std::iter::once(*root).chain(descendants(*root).take(512)) {
                if !is_product(p) {
                    continue;
                }
                let at = at.get_or_insert_with(|| cx.point(*guard, *pos));
                if let Some(o) = self.product_overflow(&cx, k, p, at, tensors, false) {
                    let key = compact(self.text(p));
                    if !seen.contains(&key) {
                        seen.push(key);
                        out.push(Overflow {
                            used_at: Some(*used),
                            ..o
                        });
                    }
                }
            }
        }
        // Element counts in guards on global indices: `if (i < B * T * V)`.
        for gi in self.guards_in(k) {
            let g = &self.guards[gi];
            if !matches!(
                g.kind,
                GuardKind::If | GuardKind::EarlyExit | GuardKind::Loop
            ) {
                continue;
            }
            for b in &g.bounds {
                let (Some(t), Some(l)) = (b.term_node, b.limit_node) else {
                    continue;
                };
                if !k.flags(self, t).is_global_index() {
                    continue;
                }
                let mut at = None;
                for p in std::iter::once(l).chain(descendants(l).take(256)) {
                    if !is_product(p) {
                        continue;
                    }
                    let at =
                        at.get_or_insert_with(|| cx.point(Some(gi as u32), g.cond.start_byte()));
                    if let Some(o) = self.product_overflow(&cx, k, p, at, tensors, true) {
                        let key = compact(self.text(p));
                        if !seen.contains(&key) {
                            seen.push(key);
                            out.push(Overflow {
                                kind: OverflowKind::BoundProduct,
                                used_at: Some(g.cond),
                                ..o
                            });
                        }
                    }
                }
            }
        }
        // 64-bit products narrowed to a 32-bit local: `const int n = C * H * W;`.
        for (v, defs) in k.defs.iter().enumerate() {
            let name = k.locals[v];
            let Some(Width::W32 { signed }) = k.types.get(name).map(|t| self.resolved_width(t))
            else {
                continue;
            };
            for (d, op) in defs.iter().zip(&k.def_ops[v]) {
                if *op != "init" || self.width(k, *d) != Width::W64 {
                    continue;
                }
                let factors = product_factors(peel(*d));
                let sized = factors
                    .iter()
                    .filter(|f| self.width(k, **f) == Width::W64)
                    .count();
                if factors.len() >= 2
                    && sized >= 1
                    && factors.iter().all(|f| !self.is_constant(k, *f))
                {
                    out.push(Overflow {
                        node: self.parent(*d).unwrap_or(*d),
                        kind: OverflowKind::Narrowed,
                        proven: None,
                        ty: if signed { "int" } else { "unsigned" },
                        used_at: None,
                        unbounded: false,
                        evidence: Evidence::Framework,
                    });
                }
            }
        }
        out
    }

    /// Does `e` fold to a constant in kernel `k` (its parameters and locals shadow constants of
    /// the same name elsewhere in the file)?
    pub(super) fn is_constant(&self, k: &Kernel<'t>, e: Node<'t>) -> bool {
        let shadowed = identifiers(e, self.source)
            .iter()
            .any(|n| k.param(n).is_some() || k.local(n).is_some());
        !shadowed && self.eval(e).is_some()
    }

    /// Is `e` a compile-time constant whose value this file does not give: a template
    /// parameter, a member of a traits class (`Ktraits::kNRows`), a `constexpr` local
    /// initialised from one (`constexpr int kBlockM = Kernel_traits::kBlockM;`)? A tile or row
    /// count per block, not a data size.
    pub(super) fn compile_time(&self, k: &Kernel<'t>, e: Node<'t>, depth: usize) -> bool {
        let e = peel(e);
        match e.kind_name() {
            "number_literal" => true,
            "qualified_identifier" => true,
            "identifier" => {
                let name = self.text(e);
                if k.param(name).is_some() {
                    return false;
                }
                if self.functions[k.function]
                    .template_params
                    .iter()
                    .any(|(p, _)| *p == name)
                {
                    return true;
                }
                let Some(v) = k.local(name) else {
                    // `static constexpr int kStride = …;` in the method's class.
                    return self.implicit_member(k, name).is_some_and(|m| m.constant);
                };
                let defs = &k.defs[v];
                depth < 4
                    && defs.len() == 1
                    && self
                        .parent(defs[0])
                        .and_then(|d| self.parent(d))
                        .is_some_and(|decl| {
                            decl.kind_name() == "declaration"
                                && named_children(decl).any(|c| {
                                    matches!(
                                        c.kind_name(),
                                        "type_qualifier" | "storage_class_specifier"
                                    ) && self.text(c) == "constexpr"
                                })
                        })
                    && self.compile_time(k, defs[0], depth + 1)
            }
            "binary_expression" => match (e.field("left"), e.field("right")) {
                (Some(l), Some(r)) => {
                    depth < 4
                        && self.compile_time(k, l, depth + 1)
                        && self.compile_time(k, r, depth + 1)
                }
                _ => false,
            },
            _ => self.is_constant(k, e),
        }
    }

    /// Is `p` the operand (or inside the operand) of a cast to a 64-bit type, within its
    /// expression statement?
    fn inside_wide_cast(&self, k: &Kernel<'t>, p: Node<'t>) -> bool {
        let mut cur = self.parent(p);
        for _ in 0..12 {
            let Some(c) = cur else { return false };
            match c.kind_name() {
                "cast_expression"
                    if c.field("type")
                        .is_some_and(|t| self.resolved_width(self.text(t)) == Width::W64) =>
                {
                    return true;
                }
                "call_expression" => {
                    // `static_cast<int64_t>(…)`, and functional casts (`int64_t(…)`): a
                    // call of a type name.
                    let wide = self.width(k, c) == Width::W64
                        && c.field("function").is_some_and(|f| {
                            matches!(
                                f.kind_name(),
                                "template_function" | "identifier" | "primitive_type"
                            )
                        });
                    if wide {
                        return true;
                    }
                }
                "expression_statement" | "declaration" | "compound_statement" => return false,
                _ => {}
            }
            cur = self.parent(c);
        }
        false
    }

    /// Does the width of `p` rest on a struct member known only from a borrowed include
    /// context (see [`CudaModel::borrowed_member`])?
    fn borrowed_width(&self, p: Node<'t>) -> bool {
        std::iter::once(p)
            .chain(descendants(p))
            .filter(|n| n.kind_name() == "field_expression")
            .filter_map(|n| n.field("field"))
            .any(|f| self.borrowed_member(self.text(f)))
    }

    /// `a * b` evaluated in 32 bits whose value can pass the limit; `count`: it is part of an
    /// element count that bounds a global index.
    fn product_overflow(
        &self,
        cx: &RangeCx<'_, 't>,
        k: &Kernel<'t>,
        p: Node<'t>,
        at: &Point<'t>,
        tensors: bool,
        count: bool,
    ) -> Option<Overflow<'t>> {
        if !is_product(p) || p.has_error() || is_divisor(self, p) {
            return None;
        }
        let (l, r) = (p.field("left")?, p.field("right")?);
        if self.is_constant(k, l)
            || self.is_constant(k, r)
            || self.compile_time(k, l, 0)
            || self.compile_time(k, r, 0)
        {
            return None;
        }
        let Width::W32 { signed } = self.width(k, p) else {
            return None;
        };
        // Inside an explicit 64-bit cast (`(int64_t)(batch_id * dim + d) * n`): the author
        // widened at that point and bounds what is inside.
        if self.inside_wide_cast(k, p) {
            return None;
        }
        // Launch geometry only (`gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z)`) in
        // unsigned arithmetic: a count of launched threads or blocks, which stays below 2³².
        if !signed && only_builtins(self, p) {
            return None;
        }
        let limit: i128 = if signed {
            i32::MAX as i128
        } else {
            u32::MAX as i128
        };
        let range = cx.range(p, at);
        let unbounded = range.hi.is_none();
        let ranges = |a: &str| cx.atom_range(a);
        let ty = if signed { "int" } else { "unsigned" };
        // No upper bound: a factor read from memory (`tl.sizes[t]`, `offsets[b]`), bounded by
        // its type only; it counts as a data size below.
        if let Some(hi) = range.hi.map(|h| h.poly) {
            let (_, max) = hi.interval(&ranges);
            if max <= limit {
                return None;
            }
            // Every size known at the launches: provable.
            if hi.atoms().all(|a| cx.atom_known(a)) {
                return Some(Overflow {
                    node: p,
                    kind: OverflowKind::IndexProduct,
                    proven: Some(max),
                    ty,
                    used_at: None,
                    unbounded: false,
                    evidence: Evidence::Proven,
                });
            }
        }
        let large = |f: Node<'t>| {
            let r = cx.range(f, at);
            match r.hi {
                Some(h) => h.poly.interval(&ranges).1 >= LARGE,
                None => true,
            }
        };
        if !(large(l) && large(r)) {
            return None;
        }
        // Without framework headers, the arithmetic itself must show a large tensor: an element
        // count that multiplies three sizes (`if (i < B * T * V)`), or a factor that a call
        // narrows from the 64-bit value its caller kept. (Offsets that multiply three sizes are
        // not enough: kernel windows, sampling points and voxel grids multiply as many, unless
        // the file computes offsets of that shape in 64 bits elsewhere, see
        // [`CudaModel::wide_layout`].)
        // A member width borrowed from the files that include this header is weaker: the
        // header may be compiled in other contexts. The product must then be a per-block offset
        // (it reads a block or thread coordinate) whose largest term multiplies three or more
        // data sizes besides the coordinates: an offset into a tensor of four or more
        // dimensions (batch, heads, rows, features). Offsets over three (`(b * H + h) * T`, the
        // per-row statistics of attention) reach 2³¹ only when the tensors they summarise
        // are 2³¹ times a feature size, and lower-order strides (`h * D`) never do. A helper
        // that applies the batch stride counts too (see [`CudaModel::strided_term`]).
        if self.borrowed_width(p) {
            let root = arithmetic_root(self, p);
            let offset = descendants(root)
                .chain(std::iter::once(root))
                .any(|n| n.kind_name() == "identifier" && k.flags(self, n).thread_dependent());
            if !offset
                || (self.size_degree(cx, k, root, at) < 3 && !self.strided_term(cx, k, root, p, at))
            {
                return None;
            }
        }
        let evidence = if tensors {
            Evidence::Framework
        } else if self.narrowed_factor(k, l, r) {
            Evidence::NarrowedCall
        } else {
            let (degree, coordinate) = self.degrees(cx, k, arithmetic_root(self, p), at, 0);
            if count && degree >= 3 {
                Evidence::Dimensions
            } else if !count && coordinate >= Some(3) && self.wide_layout() {
                Evidence::WideLayout
            } else {
                return None;
            }
        };
        Some(Overflow {
            node: p,
            kind: OverflowKind::IndexProduct,
            proven: None,
            ty,
            used_at: None,
            unbounded,
            evidence,
        })
    }
}

/// Is `value` the initialiser of a pointer declaration (`float* u = base + off`)?
pub(super) fn declared_pointer(m: &CudaModel<'_>, value: Node<'_>) -> bool {
    m.parent(value).is_some_and(|p| {
        p.kind_name() == "init_declarator"
            && p.field("declarator")
                .is_some_and(|x| x.kind_name() == "pointer_declarator")
    })
}

/// The factors of a product `a * b * c` (through parentheses and casts).
pub(super) fn product_factors(e: Node<'_>) -> Vec<Node<'_>> {
    let mut out = Vec::new();
    let mut stack = vec![e];
    while let Some(x) = stack.pop() {
        let x = peel(x);
        let is_mul = x.kind_name() == "binary_expression"
            && x.field("operator").is_some_and(|o| o.kind_name() == "*");
        if is_mul && out.len() + stack.len() < 16 {
            if let (Some(l), Some(r)) = (x.field("left"), x.field("right")) {
                stack.push(r);
                stack.push(l);
                continue;
            }
        }
        out.push(x);
    }
    out
}

/// Is `e` built from `threadIdx`/`blockIdx`/`blockDim`/`gridDim` and literals only?
fn only_builtins(m: &CudaModel<'_>, e: Node<'_>) -> bool {
    let source = m.source;
    let mut any = false;
    for n in std::iter::once(e).chain(descendants(e)) {
        match n.kind_name() {
            "field_expression" => {
                let arg = n.field("argument").map(|a| gpulint_syntax::text(a, source));
                if !matches!(arg, Some("threadIdx" | "blockIdx" | "blockDim" | "gridDim")) {
                    return false;
                }
                any = true;
            }
            "identifier" => {
                let in_builtin = m
                    .parent(n)
                    .is_some_and(|p| p.kind_name() == "field_expression");
                if !in_builtin {
                    return false;
                }
            }
            "call_expression" => return false,
            _ => {}
        }
    }
    any
}

/// Is `p` the right side of a division or remainder (`i / (H * W)`)? A divisor scales an
/// index down; it is not an index or an offset itself.
fn is_divisor(m: &CudaModel<'_>, p: Node<'_>) -> bool {
    let mut cur = p;
    while let Some(parent) = m.parent(cur) {
        if parent.kind_name() != "parenthesized_expression" {
            return parent.kind_name() == "binary_expression"
                && parent
                    .field("operator")
                    .is_some_and(|o| matches!(o.kind_name(), "/" | "%"))
                && parent.field("right").is_some_and(|r| r.id() == cur.id());
        }
        cur = parent;
    }
    false
}
