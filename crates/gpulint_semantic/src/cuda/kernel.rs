//! Per-kernel facts: parameters, local variables and how they derive from `threadIdx`,
//! `blockIdx`, `blockDim` and `gridDim`, pointers into global memory, and the accesses made
//! through them.

mod flags;

pub use flags::Flags;

use super::{CudaModel, GuardKind};
use gpulint_syntax::NodeExt;
use gpulint_syntax::{named_children, text};
use std::collections::HashMap;
use tree_sitter::Node;

/// A kernel parameter.
#[derive(Debug, Clone)]
pub struct Param<'t> {
    pub name: &'t str,
    /// A raw pointer or array parameter: it points into global memory.
    pub pointer: bool,
    /// A scalar that can carry a size: an integer, or a struct passed by value.
    pub size_like: bool,
    pub node: Node<'t>,
}

/// A read or write through a pointer: `p[i]`, `*p`, `*(p + i)`, `atomicAdd(p + i, v)`.
#[derive(Debug, Clone)]
pub struct Access<'t> {
    /// The access expression (the subscript, the dereference, the `p + i` argument).
    pub node: Node<'t>,
    /// The pointer's name.
    pub base: &'t str,
    /// The index or offset expression, if any.
    pub index: Option<Node<'t>>,
    /// The innermost guard that holds here (see [`CudaModel::guard_chain`]).
    pub guard: Option<u32>,
    /// The pointer is a kernel parameter or a local pointer derived from one.
    pub global: bool,
    /// Offsets of the local pointer this access goes through (`q = p + i; q[0]` → `i`).
    pub alias_offsets: Vec<Node<'t>>,
}

/// What is known about one kernel, computed once per file.
#[derive(Debug)]
pub struct Kernel<'t> {
    /// Index into [`CudaModel::functions`].
    pub function: usize,
    pub node: Node<'t>,
    pub params: Vec<Param<'t>>,
    /// Local variables (and assigned names) in order of first definition.
    pub locals: Vec<&'t str>,
    local_index: HashMap<&'t str, usize>,
    /// Per local: its definitions (initialisers and assigned values).
    pub defs: Vec<Vec<Node<'t>>>,
    /// Per local: how it derives from the thread coordinates.
    pub flags: Vec<Flags>,
    /// Per local: the locals it is computed from, transitively, itself included.
    closure: Vec<Vec<u64>>,
    /// Per local: computed from `blockIdx` (through any clamping).
    block_dependent: Vec<bool>,
    /// Per local: it points into global memory, and the offsets it was built with.
    pointer_offsets: Vec<Option<Vec<Node<'t>>>>,
    pub accesses: Vec<Access<'t>>,
    /// The kernel is too large to analyse (thousands of locals): rules skip it.
    pub too_large: bool,
}

/// Kernels with more locals than this are not analysed (the closures are quadratic).
const MAX_LOCALS: usize = 2048;

/// A set of locals.
pub type LocalSet = Vec<u64>;

/// Collects one kernel's facts during the walk.
pub(super) struct KernelBuild<'t> {
    function: usize,
    node: Node<'t>,
    source: &'t str,
    params: Vec<Param<'t>>,
    defs: Vec<(&'t str, Node<'t>, Option<u32>)>,
    accesses: Vec<(Node<'t>, &'t str, Option<Node<'t>>, Option<u32>)>,
}

impl<'t> KernelBuild<'t> {
    pub(super) fn new(function: usize, node: Node<'t>, source: &'t str) -> Self {
        let mut params = Vec::new();
        let list = node
            .field("declarator")
            .and_then(|d| find_function_declarator(d))
            .and_then(|d| d.field("parameters"));
        if let Some(list) = list {
            for p in named_children(list).filter(|p| p.kind_name() == "parameter_declaration") {
                let Some(decl) = p.field("declarator") else {
                    continue;
                };
                let (name, pointer) = declarator_name(decl);
                if let Some(name) = name {
                    let ty = p.field("type").map(|t| text(t, source)).unwrap_or("");
                    let size_like = !pointer
                        && !matches!(
                            ty,
                            "float"
                                | "double"
                                | "half"
                                | "__half"
                                | "bool"
                                | "float2"
                                | "float4"
                                | "half2"
                                | "__half2"
                                | "__nv_bfloat16"
                                | "cudaTextureObject_t"
                                | "cudaSurfaceObject_t"
                        );
                    params.push(Param {
                        name: text(name, source),
                        pointer,
                        size_like,
                        node: p,
                    });
                }
            }
        }
        KernelBuild {
            function,
            node,
            source,
            params,
            defs: Vec::new(),
            accesses: Vec::new(),
        }
    }

    /// Records definitions and accesses; `guard` is the innermost guard holding at `node`.
    pub(super) fn record(&mut self, node: Node<'t>, guard: Option<u32>, call_arg: bool) {
        let field = |f: &str| node.field(f);
        if call_arg {
            self.record_pointer_arith(node, node, guard, false);
        }
        match node.kind_name() {
            "init_declarator" => {
                if let (Some(decl), Some(value)) = (field("declarator"), field("value")) {
                    if let (Some(name), _) = declarator_name(decl) {
                        self.defs.push((text(name, self.source), value, guard));
                    }
                }
            }
            "assignment_expression" => {
                if let (Some(left), Some(right)) = (field("left"), field("right")) {
                    let left = peel(left);
                    if left.kind_name() == "identifier" {
                        self.defs.push((text(left, self.source), right, guard));
                    }
                }
            }
            "for_range_loop" => {
                if let (Some(decl), Some(range)) = (field("declarator"), field("right")) {
                    if let (Some(name), _) = declarator_name(decl) {
                        self.defs.push((text(name, self.source), range, guard));
                    }
                }
            }
            "subscript_expression" => {
                let (Some(base), Some(indices)) = (field("argument"), field("indices")) else {
                    return;
                };
                let base = peel_pointer(base, self.source);
                if base.kind_name() == "identifier" {
                    let index = indices.named_child(0);
                    self.accesses
                        .push((node, text(base, self.source), index, guard));
                }
            }
            "pointer_expression" if field("operator").is_some_and(|o| o.kind_name() == "*") => {
                if let Some(arg) = field("argument") {
                    self.record_pointer_arith(node, arg, guard, true);
                }
            }
            _ => {}
        }
    }

    /// `*p`, `*(p + i)`, and `p + i` passed to a call (`atomicAdd(p + i, v)`).
    fn record_pointer_arith(
        &mut self,
        access: Node<'t>,
        expr: Node<'t>,
        guard: Option<u32>,
        deref: bool,
    ) {
        let e = peel(expr);
        match e.kind_name() {
            "identifier" if deref => {
                self.accesses
                    .push((access, text(e, self.source), None, guard))
            }
            "binary_expression" => {
                if e.field("operator").is_none_or(|o| o.kind_name() != "+") {
                    return;
                }
                let (Some(l), Some(r)) = (e.field("left"), e.field("right")) else {
                    return;
                };
                let (pl, pr) = (peel_pointer(l, self.source), peel_pointer(r, self.source));
                // The pointer is whichever side is a plain name; the rule checks it is one.
                if pl.kind_name() == "identifier" {
                    self.accesses
                        .push((access, text(pl, self.source), Some(r), guard));
                } else if pr.kind_name() == "identifier" {
                    self.accesses
                        .push((access, text(pr, self.source), Some(l), guard));
                }
            }
            _ => {}
        }
    }

    pub(super) fn finish(self, model: &CudaModel<'t>) -> Kernel<'t> {
        let mut locals: Vec<&'t str> = Vec::new();
        let mut local_index: HashMap<&'t str, usize> = HashMap::new();
        let mut defs: Vec<Vec<Node<'t>>> = Vec::new();
        let mut def_guards: Vec<Vec<Option<u32>>> = Vec::new();
        for (name, value, guard) in &self.defs {
            let i = *local_index.entry(name).or_insert_with(|| {
                locals.push(name);
                defs.push(Vec::new());
                def_guards.push(Vec::new());
                locals.len() - 1
            });
            defs[i].push(*value);
            def_guards[i].push(*guard);
        }
        let too_large = locals.len() > MAX_LOCALS;
        if too_large {
            locals.clear();
            local_index.clear();
            defs.clear();
            def_guards.clear();
        }
        let n = locals.len();
        let mut kernel = Kernel {
            function: self.function,
            node: self.node,
            params: self.params,
            locals,
            local_index,
            defs,
            flags: vec![Flags::default(); n],
            closure: vec![vec![0; n.div_ceil(64)]; n],
            block_dependent: vec![false; n],
            pointer_offsets: vec![None; n],
            accesses: Vec::new(),
            too_large,
        };
        kernel.compute_flags(model);
        kernel.compute_closures(model, &def_guards);
        kernel.compute_pointers(model.source);
        kernel.accesses = self
            .accesses
            .into_iter()
            .map(|(node, base, index, guard)| {
                let (global, alias_offsets) = match kernel.local_index.get(base) {
                    Some(&i) => match &kernel.pointer_offsets[i] {
                        Some(offsets) => (true, offsets.clone()),
                        None => (false, Vec::new()),
                    },
                    None => (
                        kernel.params.iter().any(|p| p.pointer && p.name == base),
                        Vec::new(),
                    ),
                };
                Access {
                    node,
                    base,
                    index,
                    guard,
                    global,
                    alias_offsets,
                }
            })
            .collect();
        kernel
    }
}

impl<'t> Kernel<'t> {
    /// The local called `name`.
    pub fn local(&self, name: &str) -> Option<usize> {
        self.local_index.get(name).copied()
    }

    pub fn param(&self, name: &str) -> Option<&Param<'t>> {
        self.params.iter().find(|p| p.name == name)
    }

    fn compute_closures(&mut self, model: &CudaModel<'t>, def_guards: &[Vec<Option<u32>>]) {
        let source = model.source;
        let n = self.locals.len();
        let mut direct: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut add = |i: usize, names: Vec<&str>, this: &Self| {
            for name in names {
                if let Some(j) = this.local(name) {
                    if !direct[i].contains(&j) {
                        direct[i].push(j);
                    }
                }
            }
        };
        for (i, defs) in self.defs.iter().enumerate() {
            for (d, guard) in defs.iter().zip(&def_guards[i]) {
                add(i, identifiers(*d, source), self);
                // Control dependence: `if (x >= n) valid = false;` makes `valid` depend on `x`.
                for g in model.guard_chain(*guard).take(4) {
                    if !matches!(
                        g.kind,
                        GuardKind::RangeLoop | GuardKind::LoopMacro | GuardKind::Macro
                    ) {
                        add(i, identifiers(g.cond, source), self);
                    }
                }
            }
        }
        for (i, set) in self.closure.iter_mut().enumerate() {
            let mut stack = vec![i];
            while let Some(v) = stack.pop() {
                if set[v / 64] & (1 << (v % 64)) != 0 {
                    continue;
                }
                set[v / 64] |= 1 << (v % 64);
                stack.extend(direct[v].iter().copied());
            }
        }
        let reads_block: Vec<bool> = self
            .defs
            .iter()
            .map(|defs| {
                defs.iter()
                    .any(|d| identifiers(*d, source).contains(&"blockIdx"))
            })
            .collect();
        let mut reads: LocalSet = vec![0; n.div_ceil(64)];
        for (j, r) in reads_block.iter().enumerate() {
            if *r {
                reads[j / 64] |= 1 << (j % 64);
            }
        }
        for i in 0..n {
            self.block_dependent[i] = intersects(&self.closure[i], &reads);
        }
    }

    fn compute_pointers(&mut self, source: &str) {
        // A local points into global memory if it is built from a pointer parameter or from
        // another such local; iterate to a fixpoint over definition order.
        for _ in 0..8 {
            let mut changed = false;
            for i in 0..self.locals.len() {
                if self.pointer_offsets[i].is_some() {
                    continue;
                }
                for d in self.defs[i].clone() {
                    if let Some(offsets) = self.global_pointer_expr(d, source, 0) {
                        self.pointer_offsets[i] = Some(offsets);
                        changed = true;
                        break;
                    }
                }
            }
            if !changed {
                break;
            }
        }
    }

    /// If `expr` is a pointer into global memory, the offsets added to its base.
    fn global_pointer_expr(
        &self,
        expr: Node<'t>,
        source: &str,
        depth: usize,
    ) -> Option<Vec<Node<'t>>> {
        if depth > 16 {
            return None;
        }
        let e = peel_pointer(expr, source);
        match e.kind_name() {
            "identifier" => {
                let name = text(e, source);
                match self.local(name) {
                    Some(i) => self.pointer_offsets[i].clone(),
                    None => self
                        .params
                        .iter()
                        .any(|p| p.pointer && p.name == name)
                        .then(Vec::new),
                }
            }
            "binary_expression" if e.field("operator").is_some_and(|o| o.kind_name() == "+") => {
                let (l, r) = (e.field("left")?, e.field("right")?);
                if let Some(mut offs) = self.global_pointer_expr(l, source, depth + 1) {
                    offs.push(r);
                    Some(offs)
                } else {
                    let mut offs = self.global_pointer_expr(r, source, depth + 1)?;
                    offs.push(l);
                    Some(offs)
                }
            }
            "pointer_expression" if e.field("operator").is_some_and(|o| o.kind_name() == "&") => {
                let sub = peel(e.field("argument")?);
                if sub.kind_name() != "subscript_expression" {
                    return None;
                }
                let mut offs =
                    self.global_pointer_expr(sub.field("argument")?, source, depth + 1)?;
                offs.extend(sub.field("indices").and_then(|i| i.named_child(0)));
                Some(offs)
            }
            "conditional_expression" => self
                .global_pointer_expr(e.field("consequence")?, source, depth + 1)
                .or_else(|| self.global_pointer_expr(e.field("alternative")?, source, depth + 1)),
            _ => None,
        }
    }

    /// Is `expr` computed from `blockIdx`, directly or through locals (clamped or not)?
    pub fn block_dependent(&self, expr: Node<'_>, source: &str) -> bool {
        let names = identifiers(expr, source);
        names.contains(&"blockIdx")
            || names
                .iter()
                .any(|n| self.local(n).is_some_and(|i| self.block_dependent[i]))
    }

    /// The locals `expr` is computed from, transitively, with the locals it names.
    pub fn closure_of(&self, expr: Node<'_>, source: &str) -> LocalSet {
        self.closure_of_names(identifiers(expr, source))
    }

    /// The transitive closure of the named locals.
    pub fn closure_of_names<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> LocalSet {
        let mut set = vec![0u64; self.locals.len().div_ceil(64)];
        for name in names {
            if let Some(i) = self.local(name) {
                for (s, c) in set.iter_mut().zip(&self.closure[i]) {
                    *s |= c;
                }
            }
        }
        set
    }

    /// The axes of `blockIdx` that `exprs` read, directly or through the definitions of the
    /// locals they are computed from.
    pub fn block_axes(&self, exprs: &[Node<'t>], source: &str) -> [bool; 3] {
        let mut set = vec![0u64; self.locals.len().div_ceil(64)];
        for e in exprs {
            for (s, c) in set.iter_mut().zip(self.closure_of(*e, source)) {
                *s |= c;
            }
        }
        let mut roots: Vec<Node<'t>> = exprs.to_vec();
        for (i, defs) in self.defs.iter().enumerate() {
            if set[i / 64] & (1 << (i % 64)) != 0 {
                roots.extend(defs.iter().copied());
            }
        }
        let mut axes = [false; 3];
        for r in roots {
            for n in gpulint_syntax::descendants(r).take(4096) {
                let is_block_idx = n.kind_name() == "field_expression"
                    && n.field("argument")
                        .is_some_and(|a| text(a, source) == "blockIdx");
                if !is_block_idx {
                    continue;
                }
                match n.field("field").map(|f| text(f, source)) {
                    Some("x") => axes[0] = true,
                    Some("y") => axes[1] = true,
                    Some("z") => axes[2] = true,
                    _ => {}
                }
            }
        }
        axes
    }

    /// The locals of `set` that are global linear indices.
    pub fn global_locals(&self, set: &LocalSet) -> LocalSet {
        let mut out = set.clone();
        for (i, f) in self.flags.iter().enumerate() {
            if !f.is_global_index() {
                out[i / 64] &= !(1 << (i % 64));
            }
        }
        out
    }

    /// The first local of `set` in definition order.
    pub fn first_of(&self, set: &LocalSet) -> Option<usize> {
        (0..self.locals.len()).find(|&i| set[i / 64] & (1 << (i % 64)) != 0)
    }
}

/// Two sets share a local.
pub fn intersects(a: &LocalSet, b: &LocalSet) -> bool {
    a.iter().zip(b).any(|(x, y)| x & y != 0)
}

/// The identifiers read in `expr` (members after `.`/`->` excluded), in order.
pub fn identifiers<'s>(expr: Node<'_>, source: &'s str) -> Vec<&'s str> {
    let mut out = Vec::new();
    for n in gpulint_syntax::descendants(expr) {
        if n.kind_name() == "identifier" {
            out.push(text(n, source));
            if out.len() > 256 {
                break;
            }
        }
    }
    out
}

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

fn find_function_declarator(mut d: Node<'_>) -> Option<Node<'_>> {
    for _ in 0..8 {
        if d.kind_name() == "function_declarator" {
            return Some(d);
        }
        d = d.field("declarator").or_else(|| d.named_child(0))?;
    }
    None
}
