//! Recursion: cycles in the module's local call graph, and what bounds their depth.
//!
//! - [`Recursion::cycles`]: strongly connected components of the call graph that recurse
//!   (a function calling itself, or mutual recursion), with the call sites that close them.
//! - [`has_base_case`]: can the function return before reaching the recursive call?
//! - [`descent`]: does the call recurse into a part of its argument (a child, an item, the
//!   rest of a list), and what kind of structure is that?
//! - [`counter`]: is the recursion driven by an integer argument stepped by a constant, and
//!   what depth do the callers' folded arguments give it?
//! - [`jit_reachable`]: functions reachable from a `tf.function`, `jax.jit` or `torch.compile`.

use super::tf::normalize;
use super::PythonModel;
use gpulint_syntax::NodeExt;
use gpulint_syntax::{descendants, named_children};
use tree_sitter::Node;

/// A set of functions that recurse through each other.
#[derive(Debug, Clone)]
pub struct Cycle<'t> {
    /// The member functions, in document order.
    pub functions: Vec<usize>,
    /// The calls between members: `(call, caller, callee)`, in document order.
    pub calls: Vec<(Node<'t>, usize, usize)>,
}

/// The recursive functions of a file.
#[derive(Debug, Default)]
pub struct Recursion<'t> {
    pub cycles: Vec<Cycle<'t>>,
}

impl<'t> Recursion<'t> {
    pub(super) fn build(m: &PythonModel<'t>) -> Recursion<'t> {
        let g = m.call_graph();
        let n = m.functions.len();
        let succ: Vec<Vec<usize>> = g
            .edges
            .iter()
            .map(|e| e.iter().map(|(_, c)| *c).collect())
            .collect();
        let mut cycles = Vec::new();
        for comp in tarjan(n, &succ) {
            let recursive = comp.len() > 1 || succ[comp[0]].contains(&comp[0]);
            if !recursive {
                continue;
            }
            let mut functions = comp.clone();
            functions.sort_by_key(|&f| m.functions[f].node.start_byte());
            let mut calls: Vec<(Node<'t>, usize, usize)> = functions
                .iter()
                .flat_map(|&f| {
                    g.edges[f]
                        .iter()
                        .filter(|(_, c)| comp.contains(c))
                        .map(move |(call, c)| (*call, f, *c))
                })
                .collect();
            calls.sort_by_key(|(c, _, _)| c.start_byte());
            cycles.push(Cycle { functions, calls });
        }
        cycles.sort_by_key(|c| c.calls.first().map(|(n, _, _)| n.start_byte()));
        Recursion { cycles }
    }
}

/// Iterative Tarjan: the strongly connected components of a graph.
fn tarjan(n: usize, succ: &[Vec<usize>]) -> Vec<Vec<usize>> {
    const UNSEEN: usize = usize::MAX;
    let mut index = vec![UNSEEN; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut out = Vec::new();
    let mut next = 0;
    for start in 0..n {
        if index[start] != UNSEEN {
            continue;
        }
        // (node, next successor to look at)
        let mut work = vec![(start, 0usize)];
        index[start] = next;
        low[start] = next;
        next += 1;
        stack.push(start);
        on_stack[start] = true;
        while let Some(&mut (v, ref mut i)) = work.last_mut() {
            if let Some(&w) = succ[v].get(*i) {
                *i += 1;
                if index[w] == UNSEEN {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut comp = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    comp.push(w);
                    if w == v {
                        break;
                    }
                }
                out.push(comp);
            }
        }
    }
    out
}

/// Kinds of syntax under which a call may not run every time its function runs.
const CONDITIONAL: &[&str] = &[
    "if_statement",
    "elif_clause",
    "else_clause",
    "conditional_expression",
    "boolean_operator",
    "for_statement",
    "while_statement",
    "try_statement",
    "except_clause",
    "list_comprehension",
    "dictionary_comprehension",
    "set_comprehension",
    "generator_expression",
    "lambda",
    "case_clause",
    "match_statement",
];

/// Can function `f` finish without reaching `call` (a recursive call in its body)? True when
/// the call sits under a condition, a loop or a `try`, when a `return`/`raise` comes before it,
/// or when `f` is a generator (which runs lazily).
pub fn has_base_case(m: &PythonModel<'_>, f: usize, call: Node<'_>) -> bool {
    let def = m.functions[f].node;
    let mut cur = call.parent();
    while let Some(n) = cur {
        if n.id() == def.id() {
            break;
        }
        if CONDITIONAL.contains(&n.kind()) || n.kind() == "function_definition" {
            return true;
        }
        cur = n.parent();
    }
    let Some(body) = def.field("body") else {
        return true;
    };
    for n in own_nodes(body) {
        match n.kind() {
            "return_statement" | "raise_statement" if n.end_byte() <= call.start_byte() => {
                return true
            }
            "yield" => return true,
            _ => {}
        }
    }
    false
}

/// The nodes of a function body, not looking into nested functions, classes and lambdas.
fn own_nodes(body: Node<'_>) -> impl Iterator<Item = Node<'_>> {
    let mut skip_until = 0usize;
    descendants(body).filter(move |n| {
        if n.start_byte() < skip_until {
            return false;
        }
        if matches!(
            n.kind(),
            "function_definition" | "class_definition" | "lambda"
        ) {
            skip_until = n.end_byte();
            return false;
        }
        true
    })
}

/// The names of a function's parameters, in order (`self`/`cls` included).
pub fn parameters<'t>(m: &PythonModel<'t>, f: usize) -> Vec<(&'t str, Option<Node<'t>>)> {
    let Some(params) = m.functions[f].node.field("parameters") else {
        return Vec::new();
    };
    named_children(params)
        .filter_map(|p| match p.kind() {
            "identifier" => Some((m.text(p), None)),
            "typed_parameter" => named_children(p)
                .find(|c| c.kind() == "identifier")
                .map(|c| (m.text(c), None)),
            "default_parameter" | "typed_default_parameter" => {
                Some((m.text(p.field("name")?), p.field("value")))
            }
            _ => None,
        })
        .collect()
}

/// The argument of `call` that binds parameter `index` / `name` of the callee, given whether
/// the callee is a method called through `self.`/`cls.` (which binds `self` implicitly).
fn argument_for<'t>(
    m: &PythonModel<'_>,
    call: Node<'t>,
    index: usize,
    name: &str,
    bound: bool,
) -> Option<Node<'t>> {
    let args = call.field("arguments")?;
    let mut pos = usize::from(bound);
    for a in named_children(args) {
        match a.kind() {
            "keyword_argument" => {
                if a.field("name").map(|n| m.text(n)) == Some(name) {
                    return a.field("value");
                }
            }
            "comment" => {}
            "list_splat" | "dictionary_splat" => return None,
            _ => {
                if pos == index {
                    return Some(a);
                }
                pos += 1;
            }
        }
    }
    None
}

/// Is `call` a method call through `self.`/`cls.`?
fn is_bound_call(m: &PythonModel<'_>, call: Node<'_>) -> bool {
    call.field("function")
        .filter(|f| f.kind() == "attribute")
        .and_then(|f| f.field("object"))
        .is_some_and(|o| matches!(m.text(o), "self" | "cls"))
}

/// What a recursive call descends into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Descent {
    /// A linked or graph structure: `node.left`, `node.next`, `for c in node.children:`,
    /// `for n in graph[node]:`. Depth is the length of the longest path in the data.
    Linked,
    /// The rest of a sequence: `f(xs[1:])`. Depth is the length of the sequence.
    Rest,
    /// A module tree: `for c in module.children():`, `model.layers`. Depth is the model's
    /// nesting, small by construction.
    ModuleTree,
    /// Items of a nested container: `for v in d.values():`, `for x in batch:` (pytrees, JSON,
    /// batches of tensors). Depth is the nesting of the container.
    Container,
}

/// Methods that list a framework module's submodules (`module.children()`).
const MODULE_TREE_CALLS: &[&str] = &[
    "children",
    "named_children",
    "modules",
    "named_modules",
    "_flatten_layers",
];
/// Attributes that hold a framework module's submodules (`model.layers`).
const MODULE_TREE_ATTRS: &[&str] = &["_modules", "submodules", "layers", "_layers"];

/// Is this attribute a framework module's submodule list (`m.children()`, `m._modules`)?
fn module_tree_attribute(m: &PythonModel<'_>, attr: Node<'_>) -> bool {
    let Some(name) = attr.field("attribute").map(|a| m.text(a)) else {
        return false;
    };
    let called = attr.parent().is_some_and(|p| {
        p.kind() == "call" && p.field("function").is_some_and(|f| f.id() == attr.id())
    });
    MODULE_TREE_ATTRS.contains(&name) || (called && MODULE_TREE_CALLS.contains(&name))
}

/// Does the recursive call descend into a part of one of the caller's parameters? Returns the
/// kind of structure and the expression that selects the part.
pub fn descent<'t>(m: &PythonModel<'t>, f: usize, call: Node<'t>) -> Option<(Descent, Node<'t>)> {
    let params: Vec<&str> = parameters(m, f)
        .into_iter()
        .map(|(p, _)| p)
        .filter(|p| !matches!(*p, "self" | "cls"))
        .collect();
    if params.is_empty() {
        return None;
    }
    let args = call.field("arguments")?;
    let mut best: Option<(Descent, Node<'t>)> = None;
    for a in named_children(args) {
        let expr = if a.kind() == "keyword_argument" {
            a.field("value")?
        } else {
            a
        };
        if let Some(d) = descent_of(m, f, call, expr, &params) {
            // Prefer the riskiest reading.
            if best.is_none_or(|(b, _)| rank(d.0) > rank(b)) {
                best = Some(d);
            }
        }
    }
    best
}

fn rank(d: Descent) -> u8 {
    match d {
        Descent::Container => 0,
        Descent::ModuleTree => 1,
        Descent::Rest => 2,
        Descent::Linked => 3,
    }
}

/// The parameter an expression is rooted at (`node` in `node.left[0].x`), with the chain.
fn rooted_at<'t>(m: &PythonModel<'t>, expr: Node<'t>, params: &[&str]) -> Option<&'t str> {
    let mut cur = expr;
    for _ in 0..16 {
        match cur.kind() {
            "identifier" => {
                let name = m.text(cur);
                return params.contains(&name).then_some(name);
            }
            "attribute" => cur = cur.field("object")?,
            "subscript" => cur = cur.field("value")?,
            "call" => cur = cur.field("function")?,
            "parenthesized_expression" => cur = cur.named_child(0)?,
            _ => return None,
        }
    }
    None
}

fn descent_of<'t>(
    m: &PythonModel<'t>,
    f: usize,
    call: Node<'t>,
    expr: Node<'t>,
    params: &[&str],
) -> Option<(Descent, Node<'t>)> {
    match expr.kind() {
        "attribute" | "subscript" => {
            rooted_at(m, expr, params)?;
            Some((classify_part(m, f, expr), expr))
        }
        "identifier" => {
            let name = m.text(expr);
            // A loop or comprehension variable over a part of a parameter.
            let mut cur = call.parent();
            let def = m.functions[f].node;
            while let Some(n) = cur {
                if n.id() == def.id() {
                    break;
                }
                let (target, iter) = match n.kind() {
                    "for_statement" => (n.field("left"), n.field("right")),
                    "list_comprehension"
                    | "generator_expression"
                    | "set_comprehension"
                    | "dictionary_comprehension" => {
                        let clause = named_children(n).find(|c| c.kind() == "for_in_clause");
                        (
                            clause.and_then(|c| c.field("left")),
                            clause.and_then(|c| c.field("right")),
                        )
                    }
                    _ => (None, None),
                };
                if let (Some(t), Some(it)) = (target, iter) {
                    let binds =
                        descendants(t).any(|i| i.kind() == "identifier" && m.text(i) == name);
                    if binds {
                        let root = iterable_root(it);
                        if rooted_at(m, root, params).is_some() || graph_lookup(m, root, params) {
                            return Some((classify_iter(m, f, it, params), it));
                        }
                        return None;
                    }
                }
                cur = n.parent();
            }
            // A local bound from a part of a parameter: `child = node.left`.
            let body = def.field("body")?;
            for n in own_nodes(body) {
                if n.start_byte() >= call.start_byte() {
                    break;
                }
                if n.kind() == "assignment"
                    && n.field("left")
                        .is_some_and(|l| l.kind() == "identifier" && m.text(l) == name)
                {
                    let right = n.field("right")?;
                    if matches!(right.kind(), "attribute" | "subscript")
                        && rooted_at(m, right, params).is_some()
                    {
                        return Some((classify_part(m, f, right), right));
                    }
                }
            }
            None
        }
        _ => None,
    }
}

/// `enumerate(x)`, `zip(x, y)`, `reversed(x)`, `sorted(x)`, `list(x)` → `x`.
fn iterable_root(it: Node<'_>) -> Node<'_> {
    let mut cur = it;
    for _ in 0..4 {
        if cur.kind() != "call" {
            break;
        }
        let is_wrapper = cur
            .field("function")
            .is_some_and(|f| f.kind() == "identifier");
        if !is_wrapper {
            break;
        }
        match cur.field("arguments").and_then(|a| a.named_child(0)) {
            Some(first) => cur = first,
            None => break,
        }
    }
    cur
}

/// `graph[node]`, `adj.get(node)`, `g.successors(node)`: neighbours of a parameter looked up in
/// a map or graph.
fn graph_lookup(m: &PythonModel<'_>, expr: Node<'_>, params: &[&str]) -> bool {
    let key = match expr.kind() {
        "subscript" => expr.field("subscript"),
        "call" => expr
            .field("function")
            .filter(|f| {
                f.kind() == "attribute"
                    && f.field("attribute")
                        .is_some_and(|a| m.text(a) == "get" || GRAPH_ATTRS.contains(&m.text(a)))
            })
            .and_then(|_| expr.field("arguments")?.named_child(0)),
        _ => None,
    };
    key.is_some_and(|k| k.kind() == "identifier" && params.contains(&m.text(k)))
}

/// Fields that link one node of a linked structure or tree to the next.
const LINK_ATTRS: &[&str] = &[
    "next",
    "prev",
    "previous",
    "left",
    "right",
    "parent",
    "tail",
    "child",
    "next_node",
    "prev_node",
    "parent_node",
];
/// Fields (or methods) that list a node's neighbours in a tree or graph.
const GRAPH_ATTRS: &[&str] = &[
    "children",
    "_children",
    "inputs",
    "_inputs",
    "input_nodes",
    "_prev",
    "parents",
    "predecessors",
    "successors",
    "neighbors",
    "neighbours",
    "edges",
    "in_edges",
    "out_edges",
    "deps",
    "dependencies",
    "next_functions",
    "users",
    "subtrees",
    "kids",
];

fn attribute_name<'t>(m: &PythonModel<'t>, attr: Node<'_>) -> &'t str {
    attr.field("attribute").map(|a| m.text(a)).unwrap_or("")
}

/// The kind of a part selected directly: `node.left`, `xs[1:]`, `node.children[0]`.
fn classify_part(m: &PythonModel<'_>, f: usize, expr: Node<'_>) -> Descent {
    if descendants(expr).any(|n| n.kind() == "attribute" && module_tree_attribute(m, n))
        || in_module_method(m, f)
    {
        return Descent::ModuleTree;
    }
    match expr.kind() {
        "subscript" => {
            if let Some(slice) = expr.field("subscript").filter(|s| s.kind() == "slice") {
                return if drops_constant(m, slice) && takes_head(m, f, expr) {
                    Descent::Rest
                } else {
                    Descent::Container
                };
            }
            // `node.children[0]` is a link; `d[k]`, `x[0]` are items of a container.
            match expr.field("value").filter(|v| v.kind() == "attribute") {
                Some(v) if GRAPH_ATTRS.contains(&attribute_name(m, v)) => Descent::Linked,
                _ => Descent::Container,
            }
        }
        "attribute" => {
            let name = attribute_name(m, expr);
            if LINK_ATTRS.contains(&name) || GRAPH_ATTRS.contains(&name) {
                Descent::Linked
            } else {
                // `model.module`, `cell._cell`: unwrapping a wrapper, a few levels at most.
                Descent::Container
            }
        }
        _ => Descent::Container,
    }
}

/// `xs[1:]`, `xs[:-1]`: the rest of a sequence after dropping a constant number of items (a
/// halving slice such as `xs[:mid]` gives a logarithmic depth and does not count).
fn drops_constant(m: &PythonModel<'_>, slice: Node<'_>) -> bool {
    let parts: Vec<Node<'_>> = named_children(slice).collect();
    let text = m.text(slice);
    let colon = text.find(':').unwrap_or(0) + slice.start_byte();
    let start = parts.iter().find(|p| p.end_byte() <= colon);
    let stop = parts.iter().find(|p| p.start_byte() > colon);
    let int = |n: &Node<'_>| m.const_value(*n).and_then(|v| v.as_int());
    match (start, stop) {
        (Some(a), None) => int(a).is_some_and(|v| v > 0),
        (None, Some(b)) => int(b).is_some_and(|v| v < 0),
        _ => false,
    }
}

/// Head-and-rest list processing: besides `xs[1:]` the function reads an item `xs[0]` of the
/// same sequence. (Stripping a suffix off a string, `word[:-2]`, without reading items, is
/// bounded by the length of a word.)
fn takes_head(m: &PythonModel<'_>, f: usize, rest: Node<'_>) -> bool {
    let Some(seq) = rest.field("value").map(|v| m.text(v)) else {
        return false;
    };
    let Some(body) = m.functions[f].node.field("body") else {
        return false;
    };
    own_nodes(body).any(|n| {
        n.kind() == "subscript"
            && n.field("value").is_some_and(|v| m.text(v) == seq)
            && n.field("subscript")
                .is_some_and(|i| m.const_value(i).and_then(|v| v.as_int()).is_some())
    })
}

/// The kind of structure a loop iterates over: `node.children`, `graph[v]`, `module.children()`,
/// `d.items()`.
fn classify_iter(m: &PythonModel<'_>, f: usize, it: Node<'_>, params: &[&str]) -> Descent {
    let root = iterable_root(it);
    if descendants(root).any(|n| n.kind() == "attribute" && module_tree_attribute(m, n))
        || in_module_method(m, f)
    {
        return Descent::ModuleTree;
    }
    if graph_lookup(m, root, params) {
        return Descent::Linked;
    }
    classify_part(m, f, root)
}

/// Is `f` a method of a class deriving from a framework module (`nn.Module`, Keras `Layer`)?
fn in_module_method(m: &PythonModel<'_>, f: usize) -> bool {
    let Some(class) = m.functions[f].class.as_deref() else {
        return false;
    };
    let Some(c) = m.classes.iter().position(|c| c.name == class) else {
        return false;
    };
    let Some(bases) = m.classes[c].node.field("superclasses") else {
        return false;
    };
    named_children(bases).any(|b| {
        m.qualified_name(b).map(|q| normalize(&q)).is_some_and(|q| {
            matches!(
                q.as_str(),
                "torch.nn.Module"
                    | "keras.layers.Layer"
                    | "keras.Layer"
                    | "keras.Model"
                    | "flax.linen.Module"
            )
        })
    })
}

/// A recursion driven by an integer parameter stepped by a constant.
#[derive(Debug, Clone, Copy)]
pub struct Counter<'t> {
    /// How many calls deep the recursion goes, from the folded values.
    pub depth: i128,
    /// The expression the depth comes from: a caller's argument, a default value, or the bound
    /// in the base case.
    pub evidence: Node<'t>,
}

/// If the recursive `call` (in `f`, to `callee`) passes `p - k` or `p + k` for a parameter `p`
/// of the callee, the depth the recursion reaches from the folded values, if known.
pub fn counter<'t>(
    m: &PythonModel<'t>,
    f: usize,
    callee: usize,
    call: Node<'t>,
    cycle: &Cycle<'t>,
) -> Option<Counter<'t>> {
    let params = parameters(m, callee);
    let bound = is_bound_call(m, call);
    let caller_params: Vec<&str> = parameters(m, f).into_iter().map(|(p, _)| p).collect();
    for (i, (name, default)) in params.iter().enumerate() {
        let Some(arg) = argument_for(m, call, i, name, bound && i > 0) else {
            continue;
        };
        let Some(step) = step_of(m, arg, &caller_params) else {
            continue;
        };
        if step < 0 {
            // Counting down: the callers' start value is the depth.
            let (start, evidence) = start_value(m, callee, i, name, *default, cycle)?;
            return Some(Counter {
                depth: start / -step,
                evidence,
            });
        }
        // Counting up to a bound in the base case.
        let (limit, evidence) = upper_bound(m, callee, name)?;
        let start = start_value(m, callee, i, name, *default, cycle)
            .map(|(s, _)| s)
            .unwrap_or(0);
        return Some(Counter {
            depth: (limit - start) / step,
            evidence,
        });
    }
    None
}

/// `p - k` / `p + k` with `p` a parameter and `k` a positive folded integer → `-k` / `k`.
fn step_of(m: &PythonModel<'_>, arg: Node<'_>, params: &[&str]) -> Option<i128> {
    if arg.kind() != "binary_operator" {
        return None;
    }
    let left = arg.field("left")?;
    let right = arg.field("right")?;
    let op = m.text(arg.field("operator")?);
    if left.kind() != "identifier" || !params.contains(&m.text(left)) {
        return None;
    }
    let k = m.const_value(right)?.as_int().filter(|k| *k > 0)?;
    match op {
        "-" => Some(-k),
        "+" => Some(k),
        _ => None,
    }
}

/// The largest folded value callers outside the cycle pass for parameter `i`, or its default.
fn start_value<'t>(
    m: &PythonModel<'t>,
    callee: usize,
    i: usize,
    name: &str,
    default: Option<Node<'t>>,
    cycle: &Cycle<'t>,
) -> Option<(i128, Node<'t>)> {
    let g = m.call_graph();
    let mut best: Option<(i128, Node<'t>)> = None;
    let mut consider = |v: Option<i128>, node: Node<'t>| {
        if let Some(v) = v {
            if best.is_none_or(|(b, _)| v > b) {
                best = Some((v, node));
            }
        }
    };
    let outside = g
        .module
        .iter()
        .map(|(c, callee)| (*c, *callee, None))
        .chain(
            g.edges
                .iter()
                .enumerate()
                .flat_map(|(f, e)| e.iter().map(move |(c, callee)| (*c, *callee, Some(f)))),
        );
    for (call, target, caller) in outside {
        if target != callee || caller.is_some_and(|c| cycle.functions.contains(&c)) {
            continue;
        }
        let bound = is_bound_call(m, call);
        match argument_for(m, call, i, name, bound && i > 0) {
            Some(arg) => consider(m.const_value(arg).and_then(|v| v.as_int()), arg),
            None => {
                if let Some(d) = default {
                    consider(m.const_value(d).and_then(|v| v.as_int()), d);
                }
            }
        }
    }
    best
}

/// The bound `B` in a base case `if p >= B` / `if p > B` / `if p == B` (or `B <= p`, ...).
fn upper_bound<'t>(m: &PythonModel<'t>, f: usize, name: &str) -> Option<(i128, Node<'t>)> {
    let body = m.functions[f].node.field("body")?;
    for n in own_nodes(body) {
        if n.kind() != "comparison_operator" {
            continue;
        }
        let parts: Vec<Node<'t>> = named_children(n).collect();
        if parts.len() != 2 {
            continue;
        }
        let op = m
            .text(n)
            .get(parts[0].end_byte() - n.start_byte()..parts[1].start_byte() - n.start_byte())?
            .trim();
        // The parameter on either side: `level >= MAX` or `MAX <= level`.
        let bound = if parts[0].kind() == "identifier" && m.text(parts[0]) == name {
            parts[1]
        } else if parts[1].kind() == "identifier" && m.text(parts[1]) == name {
            parts[0]
        } else {
            continue;
        };
        if !matches!(op, ">=" | ">" | "==" | "<" | "<=") {
            continue;
        }
        if let Some(b) = m.const_value(bound).and_then(|v| v.as_int()) {
            return Some((b, bound));
        }
    }
    None
}

/// For each function: can it be reached from a `tf.function`, `jax.jit` or `torch.compile`
/// function (decorated, or wrapped by a call such as `jax.jit(step)`)?
pub fn jit_reachable(m: &PythonModel<'_>) -> Vec<bool> {
    let mut reach = vec![false; m.functions.len()];
    let mut stack = Vec::new();
    for (i, f) in m.functions.iter().enumerate() {
        if f.decorators
            .iter()
            .any(|d| named_children(*d).any(|e| is_jit(m, e)))
        {
            stack.push(i);
        }
    }
    for &(call, _) in &m.calls {
        let Some(func) = call.field("function") else {
            continue;
        };
        if !is_jit(m, func) {
            continue;
        }
        let Some(target) = call
            .field("arguments")
            .and_then(|a| a.named_child(0))
            .filter(|a| a.kind() == "identifier")
        else {
            continue;
        };
        let name = m.text(target);
        if let Some(&f) = m
            .functions_named(name)
            .iter()
            .find(|&&f| m.functions[f].class.is_none())
        {
            stack.push(f);
        }
    }
    let g = m.call_graph();
    while let Some(f) = stack.pop() {
        if std::mem::replace(&mut reach[f], true) {
            continue;
        }
        stack.extend(g.edges[f].iter().map(|(_, c)| *c).filter(|c| !reach[*c]));
    }
    reach
}

/// `tf.function`, `tf.function(...)`, `jax.jit`, `partial(jax.jit, ...)`, `torch.compile(...)`.
fn is_jit(m: &PythonModel<'_>, expr: Node<'_>) -> bool {
    let target = if expr.kind() == "call" {
        let Some(func) = expr.field("function") else {
            return false;
        };
        if m.qualified_name(func).as_deref() == Some("functools.partial") {
            match expr.field("arguments").and_then(|a| a.named_child(0)) {
                Some(first) => first,
                None => return false,
            }
        } else {
            func
        }
    } else {
        expr
    };
    m.qualified_name(target)
        .map(|q| normalize(&q))
        .is_some_and(|q| {
            matches!(
                q.as_str(),
                "tensorflow.function"
                    | "jax.jit"
                    | "jax.pmap"
                    | "torch.compile"
                    | "flax.linen.jit"
                    | "flax.nnx.jit"
            )
        })
}

#[cfg(test)]
mod tests {
    use super::super::build;
    use super::*;
    use gpulint_syntax::{parse, Lang};

    fn with_model(src: &str, f: impl FnOnce(&PythonModel<'_>)) {
        let tree = parse(Lang::Python, src).unwrap();
        let m = build(&tree, src);
        f(&m);
    }

    #[test]
    fn finds_self_and_mutual_recursion_but_not_super_or_other_objects() {
        let src = "class A(Base):\n    def forward(self, x):\n        return super().forward(x)\n    def walk(self, x):\n        return self.child.walk(x)\n    def again(self, x):\n        return self.again(x)\ndef even(n):\n    return n == 0 or odd(n - 1)\ndef odd(n):\n    return n != 0 and even(n - 1)\n";
        with_model(src, |m| {
            let cycles = &m.recursion().cycles;
            let names: Vec<Vec<&str>> = cycles
                .iter()
                .map(|c| {
                    c.functions
                        .iter()
                        .map(|&f| m.functions[f].name.as_str())
                        .collect()
                })
                .collect();
            assert_eq!(names, vec![vec!["again"], vec!["even", "odd"]]);
            let (call, f, _) = cycles[0].calls[0];
            assert!(!has_base_case(m, f, call));
            let (call, f, _) = cycles[1].calls[0];
            assert!(has_base_case(m, f, call));
        });
    }

    #[test]
    fn classifies_descent() {
        let src = "def depth(node):\n    if node is None:\n        return 0\n    return 1 + max(depth(node.left), depth(node.right))\ndef total(xs):\n    if not xs:\n        return 0\n    return xs[0] + total(xs[1:])\ndef freeze(module):\n    for c in module.children():\n        freeze(c)\ndef flat(d):\n    for k, v in d.items():\n        if isinstance(v, dict):\n            flat(v)\ndef topo(v):\n    for p in v._prev:\n        topo(p)\ndef count(t):\n    return 1 + sum(count(c) for c in t.children)\n";
        with_model(src, |m| {
            let kinds: Vec<Descent> = m
                .recursion()
                .cycles
                .iter()
                .map(|c| {
                    let (call, f, _) = c.calls[0];
                    descent(m, f, call).unwrap().0
                })
                .collect();
            assert_eq!(
                kinds,
                [
                    Descent::Linked,
                    Descent::Rest,
                    Descent::ModuleTree,
                    Descent::Container,
                    Descent::Linked,
                    Descent::Linked
                ]
            );
        });
    }

    #[test]
    fn counter_depth_from_callers_and_bounds() {
        let src = "DEPTH = 3000\ndef build(n):\n    if n == 0:\n        return leaf()\n    return node(build(n - 1))\ntree = build(DEPTH)\nsmall = build(12)\nLIMIT = 50\ndef grow(level=0):\n    if level >= LIMIT:\n        return\n    grow(level + 1)\n";
        with_model(src, |m| {
            let r = m.recursion();
            let c = &r.cycles[0];
            let (call, f, callee) = c.calls[0];
            let k = counter(m, f, callee, call, c).unwrap();
            assert_eq!(k.depth, 3000);
            assert_eq!(m.text(k.evidence), "DEPTH");
            let c = &r.cycles[1];
            let (call, f, callee) = c.calls[0];
            assert_eq!(counter(m, f, callee, call, c).unwrap().depth, 50);
        });
    }

    #[test]
    fn jit_reachability() {
        let src = "import jax\nfrom functools import partial\n@partial(jax.jit, static_argnums=1)\ndef step(x, n):\n    return helper(x)\ndef helper(x):\n    return x\ndef other(x):\n    return x\nf = jax.jit(other)\ndef alone():\n    pass\n";
        with_model(src, |m| {
            assert_eq!(jit_reachable(m), [true, true, true, false]);
        });
    }
}
