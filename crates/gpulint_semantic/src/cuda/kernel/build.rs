//! Collects one kernel's facts during the checker's walk (parameters, definitions, accesses)
//! and turns them into a [`Kernel`] once the walk is over.

use super::syntax::{declarator_name, peel, peel_pointer};
use super::{Access, Flags, Kernel, Param};
use crate::cuda::CudaModel;
use crate::hash::HashMap;
use gpulint_syntax::NodeExt;
use gpulint_syntax::{named_children, text};
use tree_sitter::Node;

/// Kernels with more locals than this are not analysed (the closures are quadratic).
const MAX_LOCALS: usize = 2048;

/// Collects one kernel's facts during the walk.
pub(in crate::cuda) struct KernelBuild<'t> {
    function: usize,
    node: Node<'t>,
    source: &'t str,
    pub(in crate::cuda) params: Vec<Param<'t>>,
    /// (name, value, guard, operator: `=` for declarations and plain assignments).
    defs: Vec<(&'t str, Node<'t>, Option<u32>, &'t str)>,
    /// `i++`, `--i`: (name, the update expression).
    updates: Vec<(&'t str, Node<'t>)>,
    /// Declared types of locals, first declaration of each name.
    types: HashMap<&'t str, &'t str>,
    accesses: Vec<(Node<'t>, &'t str, Option<Node<'t>>, Option<u32>)>,
    /// A `__device__` helper, not a kernel.
    pub(in crate::cuda) helper: bool,
    /// A kernel's index in [`CudaModel::kernels`].
    pub(in crate::cuda) slot: usize,
    /// Nodes recorded so far (the kernel's own node first, in document order).
    recorded: usize,
    /// `x += …` / `x -= …` among the first [`ADVANCE_NODES`] nodes (see [`Kernel::advances`]).
    advances: Vec<Node<'t>>,
}

/// Nodes of a kernel, in document order, searched for in-place pointer advances.
const ADVANCE_NODES: usize = 1 << 14;

impl<'t> KernelBuild<'t> {
    pub(in crate::cuda) fn new(function: usize, node: Node<'t>, source: &'t str) -> Self {
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
                        accessor: false,
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
            updates: Vec::new(),
            types: HashMap::default(),
            accesses: Vec::new(),
            helper: false,
            slot: 0,
            recorded: 0,
            advances: Vec::new(),
        }
    }

    /// A punctuation or keyword token of the kernel: counted among its nodes, nothing else
    /// (what [`KernelBuild::record`] does with one).
    pub(in crate::cuda) fn count_token(&mut self) {
        self.recorded += 1;
    }

    /// Records definitions and accesses; `guard` is the innermost guard holding at `node`.
    pub(in crate::cuda) fn record(&mut self, node: Node<'t>, guard: Option<u32>, call_arg: bool) {
        let field = |f: &str| node.field(f);
        self.recorded += 1;
        if call_arg {
            self.record_pointer_arith(node, node, guard, false);
        }
        match node.kind_name() {
            "init_declarator" => {
                if let (Some(decl), Some(value)) = (field("declarator"), field("value")) {
                    if let (Some(name), _) = declarator_name(decl) {
                        self.defs
                            .push((text(name, self.source), value, guard, "init"));
                    }
                }
            }
            "declaration" => {
                let ty = field("type").map(|t| text(t, self.source)).unwrap_or("");
                for d in named_children(node) {
                    if !matches!(d.kind_name(), "init_declarator" | "identifier") {
                        continue;
                    }
                    if let (Some(name), false) = declarator_name(d) {
                        self.types.entry(text(name, self.source)).or_insert(ty);
                    }
                }
            }
            "assignment_expression" => {
                if self.recorded <= ADVANCE_NODES
                    && field("operator").is_some_and(|o| matches!(o.kind_name(), "+=" | "-="))
                {
                    self.advances.push(node);
                }
                if let (Some(left), Some(right)) = (field("left"), field("right")) {
                    let left = peel(left);
                    if left.kind_name() == "identifier" {
                        let op = field("operator")
                            .map(|o| text(o, self.source))
                            .unwrap_or("=");
                        self.defs.push((text(left, self.source), right, guard, op));
                    }
                }
            }
            "update_expression" => {
                if let Some(arg) = field("argument").map(peel) {
                    if arg.kind_name() == "identifier" {
                        self.updates.push((text(arg, self.source), node));
                    }
                }
            }
            "for_range_loop" => {
                if let (Some(decl), Some(range)) = (field("declarator"), field("right")) {
                    if let (Some(name), _) = declarator_name(decl) {
                        self.defs
                            .push((text(name, self.source), range, guard, "in"));
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
                } else if base.kind_name() == "subscript_expression" {
                    // An inner dimension of a tensor accessor: `acc[n][c][h]` records `h`.
                    let mut root = base;
                    while root.kind_name() == "subscript_expression" {
                        match root.field("argument") {
                            Some(a) => root = peel(a),
                            None => return,
                        }
                    }
                    let name = text(root, self.source);
                    if root.kind_name() == "identifier"
                        && self.params.iter().any(|p| p.accessor && p.name == name)
                    {
                        self.accesses
                            .push((node, name, indices.named_child(0), guard));
                    }
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

    pub(in crate::cuda) fn finish(self, model: &CudaModel<'t>) -> Kernel<'t> {
        let mut locals: Vec<&'t str> = Vec::new();
        let mut local_index: HashMap<&'t str, usize> = HashMap::default();
        let mut defs: Vec<Vec<Node<'t>>> = Vec::new();
        let mut def_guards: Vec<Vec<Option<u32>>> = Vec::new();
        let mut def_ops: Vec<Vec<&'t str>> = Vec::new();
        for (name, value, guard, op) in &self.defs {
            let i = *local_index.entry(name).or_insert_with(|| {
                locals.push(name);
                defs.push(Vec::new());
                def_guards.push(Vec::new());
                def_ops.push(Vec::new());
                locals.len() - 1
            });
            defs[i].push(*value);
            def_guards[i].push(*guard);
            def_ops[i].push(*op);
        }
        let mut updates: Vec<Vec<Node<'t>>> = vec![Vec::new(); locals.len()];
        for (name, node) in &self.updates {
            if let Some(&i) = local_index.get(name) {
                updates[i].push(*node);
            }
        }
        let too_large = locals.len() > MAX_LOCALS;
        if too_large {
            locals.clear();
            local_index.clear();
            defs.clear();
            def_guards.clear();
            def_ops.clear();
            updates.clear();
        }
        let n = locals.len();
        let mut kernel = Kernel {
            function: self.function,
            node: self.node,
            params: self.params,
            locals,
            local_index,
            defs,
            def_guards: Vec::new(),
            def_ops,
            updates,
            types: self.types,
            flags: vec![Flags::default(); n],
            closure: vec![vec![0; n.div_ceil(64)]; n],
            block_dependent: vec![false; n],
            pointer_offsets: vec![None; n],
            accesses: Vec::new(),
            too_large,
            launch_ranges: Default::default(),
            advances: self.advances,
        };
        kernel.compute_flags(model);
        kernel.compute_closures(model, &def_guards);
        kernel.def_guards = def_guards;
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
                let accessor = !kernel.local_index.contains_key(base)
                    && kernel.params.iter().any(|p| p.accessor && p.name == base);
                let node = if accessor {
                    outermost_subscript(model, node)
                } else {
                    node
                };
                Access {
                    node,
                    base,
                    index,
                    guard,
                    global,
                    alias_offsets,
                    accessor,
                }
            })
            .collect();
        kernel
    }
}

/// The whole subscript chain `node` is part of (`acc[n][c]` for `acc[n]`).
fn outermost_subscript<'t>(model: &CudaModel<'t>, mut node: Node<'t>) -> Node<'t> {
    while let Some(p) = model.parent(node) {
        let inner = p.kind_name() == "subscript_expression"
            && p.field("argument")
                .is_some_and(|a| peel(a).id() == node.id());
        if !inner {
            break;
        }
        node = p;
    }
    node
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
