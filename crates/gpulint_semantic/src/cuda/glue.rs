//! Torch op glue: what host functions taking `at::Tensor` / `torch::Tensor` parameters do with
//! them. Raw pointers taken from tensors (`data_ptr`, accessors), where each tensor comes from
//! (a parameter, its `.contiguous()` copy, a fresh allocation), the checks that validate a
//! parameter's device, dtype, shape or contiguity (also through `#define`d check macros of the
//! file), `AT_DISPATCH_*` regions, CUDA device guards, bindings to Python (`m.def`, `.impl`) and
//! the calls between functions, so a check in a caller covers its callee.
//!
//! The nodes are collected by [`super::CudaBuilder`] during the checker's one walk; `build`
//! turns them into facts once. The owned part ([`FileFacts`]) is what callers in other files
//! need (see `glue_project`).

mod checks;
mod syntax;

use super::{last_name, CudaModel};
pub use checks::{classify, is_dispatch, Props, ALL, CONTIG, DEVICE, DTYPE, SHAPE};
use checks::{
    expand, is_ident, occurrences, referenced_names, split_args, substitute, Macro, ATEN_CHECKS,
    CHECK_CALLS,
};
use gpulint_syntax::{named_children, text, NodeExt};
use std::collections::{HashMap, HashSet};
use syntax::{bound_name, callee, declarator_name, is_guard_type, method_call, parameters, peel};
use tree_sitter::Node;

/// Dispatch macros known out of the box (extended by OP003's `dispatch-macros`); a trailing
/// `*` matches by prefix.
pub const DISPATCH_MACROS: &[&str] = &[
    "AT_DISPATCH_*",
    "DISPATCH_FLOAT_AND_HALF",
    "DISPATCH_DOUBLE_FLOAT_AND_HALF",
    "DISPATCH_FLOAT_HALF_AND_BFLOAT",
    "DISPATCH_HALF_AND_BFLOAT",
    "DISPATCH_DOUBLE_AND_FLOAT",
];

/// Methods that take a raw pointer or an accessor from a tensor.
const POINTER_METHODS: &[&str] = &[
    "data_ptr",
    "mutable_data_ptr",
    "const_data_ptr",
    "data",
    "packed_accessor32",
    "packed_accessor64",
    "packed_accessor",
    "generic_packed_accessor",
    "accessor",
];

/// Functions that allocate a fresh (contiguous) tensor.
const ALLOC_FUNCTIONS: &[&str] = &[
    "empty",
    "empty_like",
    "zeros",
    "zeros_like",
    "ones",
    "ones_like",
    "full",
    "full_like",
    "rand",
    "randn",
    "arange",
    "new_empty",
    "new_zeros",
    "new_ones",
    "new_full",
];

/// Where a tensor expression comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Parameter `index` of the function, made contiguous on the way or not.
    Param { index: usize, contiguous: bool },
    /// A fresh allocation.
    Fresh,
    /// Anything else (a view, an op's result, a member).
    Other,
}

/// A raw pointer or accessor taken from a tensor: `x.data_ptr<float>()`, `x.packed_accessor32<…>()`.
#[derive(Debug, Clone)]
pub struct PtrUse<'t> {
    pub node: Node<'t>,
    /// The receiver expression (`x`, `x.contiguous()`).
    pub receiver: Node<'t>,
    pub origin: Origin,
    pub method: &'t str,
    /// The template argument (`float`, `scalar_t`), if any.
    pub type_arg: Option<&'t str>,
    pub accessor: bool,
    /// A pointer cast around the call: the cast node and the pointer type.
    pub cast: Option<(Node<'t>, &'t str)>,
    /// The innermost dispatch region (index into [`Glue::dispatches`]) it lies in.
    pub dispatch: Option<usize>,
    /// The variable (or member) it is stored in.
    pub var: Option<&'t str>,
}

/// An `AT_DISPATCH_*` (or configured) dispatch call.
#[derive(Debug, Clone)]
pub struct Dispatch<'t> {
    pub node: Node<'t>,
    pub name: &'t str,
    /// The tensor whose dtype is dispatched on (`x` in `x.scalar_type()`).
    pub tensor: Option<&'t str>,
    /// The body of its lambda.
    pub body: Option<Node<'t>>,
}

/// A host function with at least one tensor parameter.
#[derive(Debug, Clone)]
pub struct GlueFn<'t> {
    /// Index into [`CudaModel::functions`].
    pub func: usize,
    /// Index into [`FileFacts::fns`].
    pub facts: usize,
    /// Every parameter in order: its name and whether it is a tensor.
    pub params: Vec<(&'t str, bool)>,
    pub uses: Vec<PtrUse<'t>>,
    /// Launches in its body (indices into [`CudaModel::launches`]).
    pub launches: Vec<usize>,
    /// It calls a function of this file that launches a kernel.
    pub calls_launcher: bool,
    pub guard: Option<Node<'t>>,
    /// `TensorIterator` does the indexing: strides are honoured.
    pub tensor_iterator: bool,
    /// Local definitions: name → values.
    locals: HashMap<&'t str, Vec<Node<'t>>>,
}

/// A call from one function to another, with the caller's parameter behind each argument.
#[derive(Debug, Clone, Default)]
pub struct CallFacts {
    pub callee: String,
    /// Per argument: the caller's parameter it is (and what the argument itself guarantees,
    /// e.g. `x.contiguous()`), or `None` for anything else.
    pub args: Vec<Option<(usize, Props)>>,
}

/// What callers in other files need to know about one function.
#[derive(Debug, Clone, Default)]
pub struct FnFacts {
    pub name: String,
    /// Per parameter: its checked properties (in its own body), or 0 when not a tensor.
    pub covered: Vec<Props>,
    pub tensor: Vec<bool>,
    pub guarded: bool,
    pub calls: Vec<CallFacts>,
}

/// The owned facts of one file.
#[derive(Debug, Clone, Default)]
pub struct FileFacts {
    pub fns: Vec<FnFacts>,
    /// Functions bound to Python or registered as torch ops (`m.def`, `m.impl`, `.op`).
    pub bound: HashSet<String>,
    /// Identifiers that occur other than as a call or a definition (a function pointer handed
    /// to a registration macro): their callers cannot be seen.
    pub referenced: HashSet<String>,
}

/// Nodes the builder collects for the glue facts.
#[derive(Default)]
pub struct GlueNodes<'t> {
    /// Calls, with the host function they are in.
    pub calls: Vec<(Option<usize>, Node<'t>)>,
    /// Declarations and assignments in host functions.
    pub defs: Vec<(usize, Node<'t>)>,
    /// Conditions of `if` / `switch` / `while` / `?:` in host functions.
    pub conds: Vec<(usize, Node<'t>)>,
    /// `#define NAME(params) value`.
    pub macros: Vec<Node<'t>>,
}

/// The glue facts of a file.
#[derive(Default)]
pub struct Glue<'t> {
    pub fns: Vec<GlueFn<'t>>,
    pub dispatches: Vec<Dispatch<'t>>,
    pub facts: FileFacts,
}

/// Parameter `index` (called `name`), given the values it is reassigned in the body:
/// `x = x.contiguous()` keeps it the parameter, made contiguous; any other reassignment
/// (`x = x.cuda().contiguous()`, `x = x.transpose(0, 1)`) makes it something else.
fn reassigned_param(index: usize, name: &str, defs: &[Node<'_>], source: &str) -> Origin {
    let same_contiguous = format!("{name}.contiguous()");
    if defs.is_empty() {
        Origin::Param {
            index,
            contiguous: false,
        }
    } else if defs.iter().all(|d| {
        let t: String = text(*d, source).split_whitespace().collect();
        t == same_contiguous
    }) {
        Origin::Param {
            index,
            contiguous: true,
        }
    } else {
        Origin::Other
    }
}

struct Ctx<'a, 't> {
    source: &'t str,
    params: &'a [(&'t str, bool)],
    locals: &'a HashMap<&'t str, Vec<Node<'t>>>,
}

impl<'t> Ctx<'_, 't> {
    /// Where the tensor expression `e` comes from.
    fn origin(&self, e: Node<'t>, depth: usize) -> Origin {
        let e = peel(e);
        if depth > 4 {
            return Origin::Other;
        }
        match e.kind_name() {
            "identifier" => {
                let name = text(e, self.source);
                if let Some(index) = self.params.iter().position(|p| p.0 == name && p.1) {
                    let defs = self.locals.get(name).map_or(&[][..], Vec::as_slice);
                    return reassigned_param(index, name, defs, self.source);
                }
                match self.locals.get(name).map(Vec::as_slice) {
                    Some([only]) => self.origin(*only, depth + 1),
                    _ => Origin::Other,
                }
            }
            "call_expression" => {
                if let Some((recv, method, _)) = method_call(e, self.source) {
                    if method == "contiguous" {
                        return match self.origin(recv, depth + 1) {
                            Origin::Param { index, .. } => Origin::Param {
                                index,
                                contiguous: true,
                            },
                            o => o,
                        };
                    }
                    if ALLOC_FUNCTIONS.contains(&method) {
                        return Origin::Fresh;
                    }
                    return Origin::Other;
                }
                match callee(e, self.source) {
                    Some(name) if ALLOC_FUNCTIONS.contains(&name) => Origin::Fresh,
                    _ => Origin::Other,
                }
            }
            _ => Origin::Other,
        }
    }
}

/// Can the text hold op glue: tensors, or bindings of functions defined elsewhere
/// (`m.def("op", &op_cuda)` in a file that never names a tensor type)?
pub fn is_glue_text(source: &str) -> bool {
    source.contains("Tensor")
        || source.contains(".def(")
        || source.contains(".impl(")
        || source.contains(".op(")
}

/// Builds the glue facts from the collected nodes.
pub fn build<'t>(model: &CudaModel<'t>, nodes: GlueNodes<'t>, dispatch: &[String]) -> Glue<'t> {
    let source = model.source;
    let mut glue = Glue::default();
    // No tensor type and no binding anywhere: not op glue.
    if !is_glue_text(source) {
        return glue;
    }
    let macros: HashMap<&str, Macro<'_>> = nodes
        .macros
        .iter()
        .filter_map(|m| {
            let name = text(m.field("name")?, source);
            let params = named_children(m.field("parameters")?)
                .map(|p| text(p, source))
                .collect();
            let body = m.field("value").map_or("", |v| text(v, source));
            Some((name, Macro { params, body }))
        })
        .collect();
    // Dispatch regions and bindings.
    for (_, call) in &nodes.calls {
        if let Some(name) = callee(*call, source) {
            if is_dispatch(name, dispatch) {
                let args: Vec<Node<'t>> = call
                    .field("arguments")
                    .map(|a| named_children(a).collect())
                    .unwrap_or_default();
                let tensor = args.first().and_then(|a| {
                    let t = text(*a, source);
                    let end = t.find(['.', '-'])?;
                    Some(t[..end].trim()).filter(|s| s.bytes().all(is_ident))
                });
                // The lambda, also inside `AT_WRAP([&] { … })` (AT_DISPATCH_V2).
                let body = args
                    .iter()
                    .find_map(|a| match a.kind_name() {
                        "lambda_expression" => Some(*a),
                        "call_expression" => a.field("arguments").and_then(|x| {
                            named_children(x).find(|l| l.kind_name() == "lambda_expression")
                        }),
                        _ => None,
                    })
                    .and_then(|l| l.field("body"));
                glue.dispatches.push(Dispatch {
                    node: *call,
                    name,
                    tensor,
                    body,
                });
            }
        }
        if let Some(f) = call.field("function") {
            let binder = match f.kind_name() {
                "field_expression" => f.field("field").is_some_and(|n| {
                    matches!(text(n, source), "def" | "impl" | "op" | "def_static")
                }),
                _ => false,
            };
            if binder {
                for a in call.field("arguments").into_iter().flat_map(named_children) {
                    if let Some(n) = bound_name(a, source) {
                        glue.facts.bound.insert(n.to_string());
                    }
                }
            }
        }
    }
    glue.facts.referenced = referenced_names(source);

    // Per host function.
    type Nodes<'t> = Vec<Node<'t>>;
    let mut by_fn: HashMap<usize, (Nodes<'t>, Nodes<'t>, Nodes<'t>)> = HashMap::new();
    for (f, c) in &nodes.calls {
        if let Some(f) = f {
            by_fn.entry(*f).or_default().0.push(*c);
        }
    }
    for (f, d) in &nodes.defs {
        by_fn.entry(*f).or_default().1.push(*d);
    }
    for (f, c) in &nodes.conds {
        by_fn.entry(*f).or_default().2.push(*c);
    }
    let launcher_fns: HashSet<usize> = model
        .launches
        .iter()
        .filter_map(|l| model.enclosing_function(l.node).map(|f| f.node.id()))
        .collect();
    let launcher_names: HashSet<&str> = model
        .functions
        .iter()
        .filter(|f| launcher_fns.contains(&f.node.id()))
        .map(|f| f.name.as_str())
        .collect();
    let defined: HashSet<&str> = model.functions.iter().map(|f| f.name.as_str()).collect();
    for (fi, func) in model.functions.iter().enumerate() {
        if (func.space.global || func.space.device) && !func.space.host {
            continue;
        }
        let Some(body) = func.node.field("body") else {
            continue;
        };
        let params = parameters(func.node, source);
        let (calls, defs, conds) = by_fn.remove(&fi).unwrap_or_default();
        let mut locals: HashMap<&str, Vec<Node<'t>>> = HashMap::new();
        let mut tensor_args: HashMap<&str, &str> = HashMap::new();
        for d in &defs {
            match d.kind_name() {
                "declaration" => {
                    let ty = d.field("type").map_or("", |t| text(t, source));
                    for decl in named_children(*d) {
                        let value = match decl.kind_name() {
                            "init_declarator" => decl.field("value"),
                            _ => None,
                        };
                        let (Some(name), Some(value)) = (declarator_name(decl, source), value)
                        else {
                            continue;
                        };
                        if ty.contains("TensorArg") {
                            let v = text(value, source);
                            if let Some(p) =
                                params.iter().find(|p| occurrences(v, p.0).next().is_some())
                            {
                                tensor_args.insert(name, p.0);
                            }
                        }
                        let value = if value.kind_name() == "initializer_list"
                            || value.kind_name() == "argument_list"
                        {
                            match value.named_child(0) {
                                Some(v) if value.named_child_count() == 1 => v,
                                _ => continue,
                            }
                        } else {
                            value
                        };
                        locals.entry(name).or_default().push(value);
                    }
                }
                "assignment_expression" => {
                    if let (Some(l), Some(r)) = (d.field("left"), d.field("right")) {
                        if l.kind_name() == "identifier" {
                            locals.entry(text(l, source)).or_default().push(r);
                        }
                    }
                }
                _ => {}
            }
        }
        let cx = Ctx {
            source,
            params: &params,
            locals: &locals,
        };
        // Checks.
        let mut covered: Vec<Props> = vec![0; params.len()];
        let mut guard = None;
        let mut tensor_iterator = false;
        let mut fn_calls = Vec::new();
        let mut uses = Vec::new();
        let mut calls_launcher = false;
        let cover = |covered: &mut Vec<Props>, s: &str, bare: bool| {
            for (i, (p, is_t)) in params.iter().enumerate() {
                if *is_t {
                    covered[i] |= classify(s, p, bare);
                }
            }
            for (alias, p) in &tensor_args {
                if let Some(i) = params.iter().position(|q| q.0 == *p) {
                    covered[i] |= classify(s, alias, bare);
                }
            }
        };
        for c in &conds {
            cover(&mut covered, text(*c, source), false);
        }
        for d in &defs {
            if d.kind_name() == "declaration" {
                let ty = d.field("type").map_or("", |t| text(t, source));
                if is_guard_type(ty) {
                    guard.get_or_insert(*d);
                }
                if ty.contains("TensorIterator") {
                    tensor_iterator = true;
                }
            }
        }
        for c in &calls {
            let ctext = text(*c, source);
            if let Some((recv, method, targ)) = method_call(*c, source) {
                if POINTER_METHODS.contains(&method) && (method != "data" || targ.is_some()) {
                    uses.push(pointer_use(*c, recv, method, targ, &cx, &glue.dispatches));
                }
                continue;
            }
            let Some(name) = callee(*c, source) else {
                continue;
            };
            if launcher_names.contains(name) && name != func.name {
                calls_launcher = true;
            }
            // `cudaSetDevice`, `c10::cuda::MaybeSetDevice`, `c10::cuda::set_device`, …
            if name.ends_with("SetDevice") || name == "set_device" || name.contains("GUARD") {
                guard.get_or_insert(*c);
            }
            if name.contains("TensorIterator") {
                tensor_iterator = true;
            }
            if is_dispatch(name, dispatch) {
                // `AT_DISPATCH_…(x.scalar_type(), …)`: the dtype of `x` is handled.
                let first = c
                    .field("arguments")
                    .and_then(|a| a.named_child(0))
                    .map_or("", |a| text(a, source));
                let mut tmp = vec![0; params.len()];
                cover(&mut tmp, first, false);
                for (i, t) in tmp.iter().enumerate() {
                    covered[i] |= t & DTYPE;
                }
                continue;
            }
            if let Some((_, p)) = ATEN_CHECKS.iter().find(|(n, _)| *n == name) {
                let args = c.field("arguments").map_or("", |a| text(a, source));
                let mut tmp = vec![0; params.len()];
                cover(&mut tmp, args, true);
                for (i, t) in tmp.iter().enumerate() {
                    if *t != 0 {
                        covered[i] |= p;
                    }
                }
                continue;
            }
            if let Some(m) = macros.get(name) {
                let args = c.field("arguments").map_or("", |a| text(a, source));
                let expanded = expand(&substitute(m, &split_args(args)), &macros);
                cover(&mut covered, &expanded, true);
                continue;
            }
            if CHECK_CALLS.contains(&name) {
                cover(&mut covered, ctext, true);
                continue;
            }
            let upper = name.to_ascii_uppercase();
            let defined_here = defined.contains(name);
            if !defined_here && (upper.contains("CHECK") || upper.contains("ASSERT")) {
                cover(&mut covered, ctext, true);
                continue;
            }
            let args = c
                .field("arguments")
                .map(|a| {
                    named_children(a)
                        .filter(|a| a.kind_name() != "comment")
                        .map(|a| match cx.origin(a, 0) {
                            Origin::Param { index, contiguous } => {
                                Some((index, if contiguous { CONTIG } else { 0 }))
                            }
                            _ => None,
                        })
                        .collect()
                })
                .unwrap_or_default();
            fn_calls.push(CallFacts {
                callee: name.to_string(),
                args,
            });
        }
        if !params.iter().any(|p| p.1) && guard.is_none() && fn_calls.is_empty() {
            glue.facts.fns.push(FnFacts {
                name: func.name.clone(),
                covered,
                tensor: params.iter().map(|p| p.1).collect(),
                guarded: false,
                calls: Vec::new(),
            });
            continue;
        }
        let launches = model
            .launches
            .iter()
            .enumerate()
            .filter(|(_, l)| {
                l.node.start_byte() >= body.start_byte() && l.node.end_byte() <= body.end_byte()
            })
            .map(|(i, _)| i)
            .collect();
        glue.facts.fns.push(FnFacts {
            name: func.name.clone(),
            covered,
            tensor: params.iter().map(|p| p.1).collect(),
            guarded: guard.is_some(),
            calls: fn_calls,
        });
        if params.iter().any(|p| p.1) {
            glue.fns.push(GlueFn {
                func: fi,
                facts: glue.facts.fns.len() - 1,
                params,
                uses,
                launches,
                calls_launcher,
                guard,
                tensor_iterator,
                locals,
            });
        }
    }
    // Checks done by a same-file helper (`check_inputs(a, b)`) cover the caller's tensors.
    let own: HashMap<String, Vec<Props>> = glue
        .facts
        .fns
        .iter()
        .map(|f| (f.name.clone(), f.covered.clone()))
        .collect();
    for f in glue.facts.fns.iter_mut() {
        for c in &f.calls {
            let Some(callee_cov) = own.get(&c.callee) else {
                continue;
            };
            for (j, a) in c.args.iter().enumerate() {
                if let (Some((i, _)), Some(p)) = (a, callee_cov.get(j)) {
                    if let Some(slot) = f.covered.get_mut(*i) {
                        *slot |= p;
                    }
                }
            }
        }
    }
    glue
}

fn pointer_use<'t>(
    call: Node<'t>,
    recv: Node<'t>,
    method: &'t str,
    type_arg: Option<&'t str>,
    cx: &Ctx<'_, 't>,
    dispatches: &[Dispatch<'t>],
) -> PtrUse<'t> {
    let source = cx.source;
    // A cast around it: `(float*)x.data_ptr()`, `reinterpret_cast<half*>(x.data_ptr())`.
    let mut up = call;
    let mut cast = None;
    let mut var = None;
    for _ in 0..6 {
        let Some(p) = up.parent() else { break };
        match p.kind_name() {
            "parenthesized_expression" => up = p,
            "cast_expression" => {
                let ty = p.field("type").map_or("", |t| text(t, source));
                cast = Some((p, ty));
                up = p;
            }
            "argument_list" => {
                let Some(c) = p.parent() else { break };
                let f = c.field("function");
                match f.filter(|f| f.kind_name() == "template_function") {
                    Some(tf)
                        if matches!(
                            last_name(tf.field("name").map_or("", |n| text(n, source))),
                            "reinterpret_cast" | "static_cast"
                        ) =>
                    {
                        let ty = tf.field("arguments").map_or("", |a| {
                            text(a, source)
                                .trim_start_matches('<')
                                .trim_end_matches('>')
                        });
                        cast = Some((c, ty));
                        up = c;
                    }
                    _ => break,
                }
            }
            "init_declarator" => {
                var = p
                    .field("declarator")
                    .and_then(|d| declarator_name(d, source));
                break;
            }
            "assignment_expression" => {
                var = p.field("left").map(|l| text(l, source));
                break;
            }
            _ => break,
        }
    }
    let dispatch = dispatches
        .iter()
        .enumerate()
        .filter(|(_, d)| {
            d.node.start_byte() <= call.start_byte() && call.end_byte() <= d.node.end_byte()
        })
        .min_by_key(|(_, d)| d.node.end_byte() - d.node.start_byte())
        .map(|(i, _)| i);
    PtrUse {
        node: call,
        receiver: recv,
        origin: cx.origin(recv, 0),
        method,
        type_arg,
        accessor: method.contains("accessor"),
        cast,
        dispatch,
        var,
    }
}

impl<'t> GlueFn<'t> {
    /// Does the launch's argument list take this use (directly, or through its variable)?
    pub fn use_reaches(&self, model: &CudaModel<'t>, u: &PtrUse<'t>, launch: usize) -> bool {
        let Some(l) = model.launches.get(launch) else {
            return false;
        };
        l.args.iter().any(|a| {
            (a.start_byte() <= u.node.start_byte() && u.node.end_byte() <= a.end_byte())
                || u.var.is_some_and(|v| {
                    v.bytes().all(is_ident) && occurrences(model.text(*a), v).next().is_some()
                })
        })
    }

    /// The tensor parameter a local name is derived from, through `.contiguous()` copies.
    pub fn param_of(&self, source: &'t str, e: Node<'t>) -> Origin {
        Ctx {
            source,
            params: &self.params,
            locals: &self.locals,
        }
        .origin(e, 0)
    }

    /// Where the tensor called `name` (a parameter or a local) comes from.
    pub fn origin_of_name(&self, source: &'t str, name: &str) -> Origin {
        if let Some(index) = self.params.iter().position(|p| p.0 == name && p.1) {
            return reassigned_param(index, name, self.local_values(name), source);
        }
        match self.local_values(name) {
            [only] => self.param_of(source, *only),
            _ => Origin::Other,
        }
    }

    /// The values a local name was given.
    pub fn local_values(&self, name: &str) -> &[Node<'t>] {
        self.locals.get(name).map_or(&[], Vec::as_slice)
    }
}
