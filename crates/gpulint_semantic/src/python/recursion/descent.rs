//! What a recursive call descends into (a linked structure, the rest of a sequence, a module
//! tree, the items of a container), read from the argument it passes.

use super::{own_nodes, parameters};
use crate::python::tf::normalize;
use crate::python::PythonModel;
use gpulint_syntax::{descendants, named_children, NodeExt};
use tree_sitter::Node;

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
    let called = m.parent(attr).is_some_and(|p| {
        p.kind_name() == "call" && p.field("function").is_some_and(|f| f.id() == attr.id())
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
        let expr = if a.kind_name() == "keyword_argument" {
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
        match cur.kind_name() {
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
    match expr.kind_name() {
        "attribute" | "subscript" => {
            rooted_at(m, expr, params)?;
            Some((classify_part(m, f, expr), expr))
        }
        "identifier" => {
            let name = m.text(expr);
            // A loop or comprehension variable over a part of a parameter.
            let def = m.functions[f].node;
            // The ancestors found once (climbing with `Node::parent` is quadratic in the depth).
            for n in m.ancestors(call) {
                if n.id() == def.id() {
                    break;
                }
                let (target, iter) = match n.kind_name() {
                    "for_statement" => (n.field("left"), n.field("right")),
                    "list_comprehension"
                    | "generator_expression"
                    | "set_comprehension"
                    | "dictionary_comprehension" => {
                        let clause = named_children(n).find(|c| c.kind_name() == "for_in_clause");
                        (
                            clause.and_then(|c| c.field("left")),
                            clause.and_then(|c| c.field("right")),
                        )
                    }
                    _ => (None, None),
                };
                if let (Some(t), Some(it)) = (target, iter) {
                    let binds =
                        descendants(t).any(|i| i.kind_name() == "identifier" && m.text(i) == name);
                    if binds {
                        let root = iterable_root(it);
                        if rooted_at(m, root, params).is_some() || graph_lookup(m, root, params) {
                            return Some((classify_iter(m, f, it, params), it));
                        }
                        return None;
                    }
                }
            }
            // A local bound from a part of a parameter: `child = node.left`.
            let body = def.field("body")?;
            for n in own_nodes(body) {
                if n.start_byte() >= call.start_byte() {
                    break;
                }
                if n.kind_name() == "assignment"
                    && n.field("left")
                        .is_some_and(|l| l.kind_name() == "identifier" && m.text(l) == name)
                {
                    let right = n.field("right")?;
                    if matches!(right.kind_name(), "attribute" | "subscript")
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
        if cur.kind_name() != "call" {
            break;
        }
        let is_wrapper = cur
            .field("function")
            .is_some_and(|f| f.kind_name() == "identifier");
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
    let key = match expr.kind_name() {
        "subscript" => expr.field("subscript"),
        "call" => expr
            .field("function")
            .filter(|f| {
                f.kind_name() == "attribute"
                    && f.field("attribute")
                        .is_some_and(|a| m.text(a) == "get" || GRAPH_ATTRS.contains(&m.text(a)))
            })
            .and_then(|_| expr.field("arguments")?.named_child(0)),
        _ => None,
    };
    key.is_some_and(|k| k.kind_name() == "identifier" && params.contains(&m.text(k)))
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
    if descendants(expr).any(|n| n.kind_name() == "attribute" && module_tree_attribute(m, n))
        || in_module_method(m, f)
    {
        return Descent::ModuleTree;
    }
    match expr.kind_name() {
        "subscript" => {
            if let Some(slice) = expr.field("subscript").filter(|s| s.kind_name() == "slice") {
                return if drops_constant(m, slice) && takes_head(m, f, expr) {
                    Descent::Rest
                } else {
                    Descent::Container
                };
            }
            // `node.children[0]` is a link; `d[k]`, `x[0]` are items of a container.
            match expr.field("value").filter(|v| v.kind_name() == "attribute") {
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
        n.kind_name() == "subscript"
            && n.field("value").is_some_and(|v| m.text(v) == seq)
            && n.field("subscript")
                .is_some_and(|i| m.const_value(i).and_then(|v| v.as_int()).is_some())
    })
}

/// The kind of structure a loop iterates over: `node.children`, `graph[v]`, `module.children()`,
/// `d.items()`.
fn classify_iter(m: &PythonModel<'_>, f: usize, it: Node<'_>, params: &[&str]) -> Descent {
    let root = iterable_root(it);
    if descendants(root).any(|n| n.kind_name() == "attribute" && module_tree_attribute(m, n))
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

#[cfg(test)]
mod tests {
    use super::super::tests::with_model;
    use super::*;

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
}
