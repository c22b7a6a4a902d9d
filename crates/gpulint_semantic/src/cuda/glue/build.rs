//! Builds a file's glue facts from the nodes the builder collected: dispatch regions,
//! bindings, and per host function its locals, checks, guards, raw pointers and calls.

use super::checks::{
    classify, expand, is_dispatch, is_ident, occurrences, referenced_names, split_args, substitute,
    Macro, Props, ATEN_CHECKS, CHECK_CALLS, CONTIG, DTYPE,
};
use super::origin::Ctx;
use super::pointers::{pointer_use, POINTER_METHODS};
use super::sites::{call_args, launch_macro_kernel, vacuous, LaunchSite, Via};
use super::syntax::{bound_name, callee, declarator_name, is_guard_type, method_call, parameters};
use super::{is_glue_text, Binding, CallFacts, Dispatch, FnFacts, Glue, GlueFn, GlueNodes, Origin};
use crate::cuda::{last_name, CudaModel};
use crate::hash::{HashMap, HashSet};
use gpulint_syntax::{named_children, text, NodeExt};
use tree_sitter::Node;

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
    // Launch macros (a `<<<` in the body): the position of the kernel parameter, if any.
    let launch_macros: HashMap<&str, Option<usize>> = macros
        .iter()
        .filter_map(|(name, m)| launch_macro_kernel(m).map(|k| (*name, k)))
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
                let args: Vec<Node<'t>> = call
                    .field("arguments")
                    .into_iter()
                    .flat_map(named_children)
                    .collect();
                let mut functions = Vec::new();
                for a in &args {
                    if let Some(n) = bound_name(*a, source) {
                        glue.facts.bound.insert(n.to_string());
                        functions.push(n);
                    }
                }
                if let (Some(python), [function]) = (
                    args.first().and_then(|a| python_name(*a, source)),
                    functions.as_slice(),
                ) {
                    glue.facts.bindings.push(Binding {
                        python,
                        function: function.to_string(),
                        namespace: op_namespace(model, *call),
                    });
                }
            }
        }
    }
    glue.facts.referenced = referenced_names(source);

    // Per host function.
    type Nodes<'t> = Vec<Node<'t>>;
    let mut by_fn: HashMap<usize, (Nodes<'t>, Nodes<'t>, Nodes<'t>)> = HashMap::default();
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
    // The file's error-checking helpers, read when a call is first recorded.
    let check_helpers: std::cell::OnceCell<crate::hash::HashSet<&str>> = Default::default();
    // The dispatch regions nested, so that the one around a pointer use is found without a
    // scan of every dispatch of the file.
    let dispatch_nesting = crate::cuda::nesting::Nesting::new(
        glue.dispatches
            .iter()
            .map(|d| (d.node.start_byte(), d.node.end_byte()))
            .collect(),
    );
    for (fi, func) in model.functions.iter().enumerate() {
        if (func.space.global || func.space.device) && !func.space.host {
            continue;
        }
        let Some(body) = func.node.field("body") else {
            continue;
        };
        let params = parameters(func.node, source);
        let (calls, defs, conds) = by_fn.remove(&fi).unwrap_or_default();
        let mut locals: HashMap<&str, Vec<Node<'t>>> = HashMap::default();
        let mut tensor_args: HashMap<&str, &str> = HashMap::default();
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
        let mut call_nodes = Vec::new();
        let mut uses = Vec::new();
        let mut calls_launcher = false;
        let mut sites = Vec::new();
        let mut vacuous_checks = Vec::new();
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
                    uses.push(pointer_use(
                        *c,
                        recv,
                        method,
                        targ,
                        &cx,
                        &dispatch_nesting,
                        model,
                    ));
                }
                continue;
            }
            let Some(name) = callee(*c, source) else {
                continue;
            };
            if launcher_names.contains(name) && name != func.name {
                calls_launcher = true;
                sites.push(LaunchSite {
                    node: *c,
                    args: call_args(*c),
                    target: name,
                    via: Via::Helper,
                });
            }
            if let Some(&kernel) = launch_macros.get(name) {
                let args = call_args(*c);
                let target = kernel
                    .and_then(|k| args.get(k))
                    .map_or(name, |a| last_name(text(*a, source).trim()));
                sites.push(LaunchSite {
                    node: *c,
                    args,
                    target,
                    via: Via::Macro(name),
                });
            }
            let upper = name.to_ascii_uppercase();
            let check_like = CHECK_CALLS.contains(&name)
                || (!defined.contains(name)
                    && (upper.contains("CHECK") || upper.contains("ASSERT")));
            if check_like {
                if let Some(v) = vacuous(*c, source, &params, &locals) {
                    vacuous_checks.push(v);
                    continue;
                }
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
            // A launch calls a kernel, not a host function of the same name (a `__global__
            // void op_forward` launched by `op_cuda_forward`, bound as `op_forward`).
            if named_children(*c).any(|n| n.kind_name() == "kernel_call_syntax") {
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
            let helpers = check_helpers.get_or_init(|| model.check_helpers());
            fn_calls.push(CallFacts {
                callee: name.to_string(),
                args,
                tail: super::tail::call_tail(model, *c, helpers),
            });
            call_nodes.push(*c);
        }
        if !params.iter().any(|p| p.1) && guard.is_none() && fn_calls.is_empty() {
            glue.facts.fns.push(FnFacts {
                name: func.name.clone(),
                covered,
                tensor: params.iter().map(|p| p.1).collect(),
                guarded: false,
                calls: Vec::new(),
                launches: None,
            });
            continue;
        }
        let mut launches: Vec<usize> = model.launches_within(body).collect();
        launches.sort_unstable();
        glue.facts.fns.push(FnFacts {
            name: func.name.clone(),
            covered,
            tensor: params.iter().map(|p| p.1).collect(),
            guarded: guard.is_some(),
            calls: fn_calls,
            launches: None,
        });
        if params.iter().any(|p| p.1) {
            glue.fns.push(GlueFn {
                func: fi,
                facts: glue.facts.fns.len() - 1,
                params,
                uses,
                launches,
                calls_launcher,
                sites,
                calls: call_nodes,
                vacuous: vacuous_checks,
                guard,
                tensor_iterator,
                locals,
            });
        }
    }
    // Launching helpers count as launch sites when they take no tensors (a launcher taking
    // tensors is judged itself) and hold no guard of their own.
    let helpers: HashMap<&str, bool> = glue
        .facts
        .fns
        .iter()
        .map(|f| (f.name.as_str(), f.guarded || f.tensor.iter().any(|t| *t)))
        .collect();
    for g in glue.fns.iter_mut() {
        g.sites
            .retain(|s| s.via != Via::Helper || helpers.get(s.target) == Some(&false));
    }
    // For callers in other files: the tensor parameter whose memory an unguarded function
    // hands to a kernel.
    for g in &glue.fns {
        if g.guard.is_none() {
            if let Some(hit) = g.launch_hit(model) {
                glue.facts.fns[g.facts].launches = Some(hit.param);
            }
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

/// The Python name a binding gives: `"relu"` in `m.def("relu", &relu)`, `"neg"` in
/// `m.def("neg(Tensor x) -> Tensor", …)` and `m.impl("neg", …)`.
fn python_name(a: Node<'_>, source: &str) -> Option<String> {
    if a.kind_name() != "string_literal" {
        return None;
    }
    let s = text(a, source).trim_matches('"');
    let end = s.find(['(', '.']).unwrap_or(s.len());
    let name = s[..end].trim();
    (!name.is_empty() && name.bytes().all(is_ident)).then(|| name.to_string())
}

/// The namespace of the `TORCH_LIBRARY(ns, m)` / `TORCH_LIBRARY_IMPL(ns, CUDA, m)` block a
/// binding is in (`None` in a `PYBIND11_MODULE`).
fn op_namespace(model: &CudaModel<'_>, call: Node<'_>) -> Option<String> {
    let source = model.source;
    for n in model.parents().ancestors(call) {
        if n.kind_name() == "function_definition" {
            let decl = text(n.field("declarator")?, source).trim_start();
            let rest = decl.strip_prefix("TORCH_LIBRARY")?;
            let rest = rest
                .strip_prefix("_IMPL")
                .unwrap_or(rest)
                .strip_prefix("_FRAGMENT")
                .unwrap_or(rest);
            let ns = rest
                .trim_start()
                .strip_prefix('(')?
                .split(',')
                .next()?
                .trim();
            return (!ns.is_empty() && ns.bytes().all(is_ident)).then(|| ns.to_string());
        }
    }
    None
}
