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

mod depth;
mod descent;

pub use depth::{counter, Counter};
pub use descent::{descent, Descent};

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
    // The nodes between the definition and the call, found going down from the definition
    // (walking up with `Node::parent` is quadratic in the depth).
    let between = gpulint_syntax::ancestors_of(def, call);
    if between
        .iter()
        .skip(1)
        .any(|n| CONDITIONAL.contains(&n.kind_name()) || n.kind_name() == "function_definition")
    {
        return true;
    }
    let Some(body) = def.field("body") else {
        return true;
    };
    for n in own_nodes(body) {
        match n.kind_name() {
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
pub(super) fn own_nodes(body: Node<'_>) -> impl Iterator<Item = Node<'_>> {
    let mut skip_until = 0usize;
    descendants(body).filter(move |n| {
        if n.start_byte() < skip_until {
            return false;
        }
        if matches!(
            n.kind_name(),
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
        .filter_map(|p| match p.kind_name() {
            "identifier" => Some((m.text(p), None)),
            "typed_parameter" => named_children(p)
                .find(|c| c.kind_name() == "identifier")
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
pub(super) fn argument_for<'t>(
    m: &PythonModel<'_>,
    call: Node<'t>,
    index: usize,
    name: &str,
    bound: bool,
) -> Option<Node<'t>> {
    let args = call.field("arguments")?;
    let mut pos = usize::from(bound);
    for a in named_children(args) {
        match a.kind_name() {
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
pub(super) fn is_bound_call(m: &PythonModel<'_>, call: Node<'_>) -> bool {
    call.field("function")
        .filter(|f| f.kind_name() == "attribute")
        .and_then(|f| f.field("object"))
        .is_some_and(|o| matches!(m.text(o), "self" | "cls"))
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
            .filter(|a| a.kind_name() == "identifier")
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
    let target = if expr.kind_name() == "call" {
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

    pub(super) fn with_model(src: &str, f: impl FnOnce(&PythonModel<'_>)) {
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
    fn jit_reachability() {
        let src = "import jax\nfrom functools import partial\n@partial(jax.jit, static_argnums=1)\ndef step(x, n):\n    return helper(x)\ndef helper(x):\n    return x\ndef other(x):\n    return x\nf = jax.jit(other)\ndef alone():\n    pass\n";
        with_model(src, |m| {
            assert_eq!(jit_reachable(m), [true, true, true, false]);
        });
    }
}
