//! Values kept beyond one training step by the objects they are passed to, and methods that
//! run once per training step.
//!
//! - **Accumulating methods**: a method that adds a parameter into state on `self`
//!   (`self.sum += val * n`, `self._sum[idx] += v` for `v` in the parameter,
//!   `self.history.append(value)`): a running-average meter's `update`. Its summary is the
//!   positions of those parameters, computed in the file or in the project module the class is
//!   imported from.
//! - **Receiver classes**: the class every binding of a receiver instantiates: `meter =
//!   Meter()` in the function (or at module level), or `self.losses = Meter(...)` in the
//!   methods of the receiver's own class (`None` bindings aside).
//! - **Per-step methods**: a method that backpropagates and that a loop calls on `self` once
//!   per iteration, in a method of its own class or of a base class imported from a module of
//!   the project (`BaseRunner.train` looping over the loader and calling
//!   `self.train_step(batch)`, overridden in the subclass).

use super::{accumulation, enclosing_loops, mentions, Training};
use crate::python::PythonModel;
use gpulint_syntax::named_children;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

/// A method that backpropagates and runs once per iteration of a loop: see the module
/// documentation.
#[derive(Debug, Clone)]
pub struct StepMethod<'t> {
    /// Index of the method in [`PythonModel::functions`].
    pub function: usize,
    /// Its own `backward()` calls, with their losses.
    pub backward: Vec<(Node<'t>, Option<Node<'t>>)>,
    /// The method whose loop calls it (`BaseRunner.train`).
    pub caller: String,
}

/// Positions (after `self`) of the parameters method `f` accumulates into state on `self`:
/// `self.x += p`, `self.x = self.x + p`, `self.x[i] += v` for `v` bound by a `for` over `p`,
/// `self.x.append(p)` / `extend` / `insert`.
pub fn accumulated_params(m: &PythonModel<'_>, f: usize) -> Vec<usize> {
    let params = crate::python::call_sites::parameters(m, f);
    let mut positional: Vec<&str> = params
        .iter()
        .filter(|p| !p.keyword_only)
        .map(|p| p.name)
        .collect();
    if positional.first() != Some(&"self") {
        return Vec::new();
    }
    positional.remove(0);
    if positional.is_empty() {
        return Vec::new();
    }
    let node = m.functions[f].node;
    let (s, e) = (node.start_byte(), node.end_byte());
    // Names derived from each parameter: itself and the targets of `for` loops over it.
    let mut derived: Vec<Vec<&str>> = positional.iter().map(|p| vec![*p]).collect();
    let lo = m.loops.partition_point(|l| l.start_byte() < s);
    for &l in m.loops[lo..].iter().take_while(|l| l.start_byte() < e) {
        if l.kind_name() != "for_statement" || m.enclosing_function(l) != Some(f) {
            continue;
        }
        let (Some(left), Some(right)) = (l.field("left"), l.field("right")) else {
            continue;
        };
        for (i, p) in positional.iter().enumerate() {
            if mentions(m, right, p) {
                for n in gpulint_syntax::descendants(left) {
                    if n.kind_name() == "identifier" {
                        derived[i].push(m.text(n));
                    }
                }
            }
        }
    }
    let on_self = |n: Node<'_>| m.text(n).starts_with("self.");
    let mut out = Vec::new();
    let note = |value: Node<'_>, out: &mut Vec<usize>| {
        for (i, names) in derived.iter().enumerate() {
            if !out.contains(&i) && names.iter().any(|n| kept_whole(m, value, n)) {
                out.push(i);
            }
        }
    };
    let lo = m.assignments.partition_point(|a| a.start_byte() < s);
    for &a in m.assignments[lo..]
        .iter()
        .take_while(|a| a.start_byte() < e)
    {
        if m.enclosing_function(a) != Some(f) {
            continue;
        }
        if let Some((target, added)) = accumulation(m, a) {
            if on_self(target) {
                note(added, &mut out);
            }
        }
    }
    let lo = m.calls.partition_point(|c| c.0.start_byte() < s);
    for &(c, scope) in m.calls[lo..].iter().take_while(|c| c.0.start_byte() < e) {
        if scope != Some(f) {
            continue;
        }
        let Some(func) = c.field("function").filter(|f| f.kind_name() == "attribute") else {
            continue;
        };
        let (Some(obj), Some(attr)) = (func.field("object"), func.field("attribute")) else {
            continue;
        };
        if !matches!(m.text(attr), "append" | "extend" | "insert") || !on_self(obj) {
            continue;
        }
        if let Some(args) = c.field("arguments") {
            for v in named_children(args).filter(|a| a.kind_name() != "keyword_argument") {
                note(v, &mut out);
            }
        }
    }
    out.sort_unstable();
    out
}

/// Calls whose result no longer holds the tensor they are given (a number, a detached copy).
const DETACHING: &[&str] = &[
    "float", "int", "bool", "str", "len", "round", "item", "detach", "tolist", "cpu", "numpy",
];

/// Does `expr` use `name` other than through a detaching call (`float(v)`, `v.item()`)?
///
/// One walk down from `expr` that knows whether a detaching call or a `.data` lies between
/// `expr` and the node it is at (climbing from each identifier to `expr` was quadratic in the
/// nesting of the expression).
fn kept_whole(m: &PythonModel<'_>, expr: Node<'_>, name: &str) -> bool {
    let detaching = |p: Node<'_>| match p.kind_name() {
        "call" => p
            .field("function")
            .map(|f| match f.kind_name() {
                "attribute" => f.field("attribute").map_or("", |a| m.text(a)),
                _ => m.text(f),
            })
            .is_some_and(|c| DETACHING.contains(&c)),
        // `v.data`
        "attribute" => p.field("attribute").is_some_and(|a| m.text(a) == "data"),
        _ => false,
    };
    // Per node on the cursor's path: does it or a node above it (up to `expr`) detach?
    let mut detached: Vec<bool> = Vec::new();
    let mut cursor = expr.walk();
    loop {
        if !gpulint_source::budget::spend(1) {
            gpulint_source::budget::stopped_at(cursor.node().start_byte());
            return false;
        }
        let n = cursor.node();
        let above = detached.last().copied().unwrap_or(false);
        if n.kind_name() == "identifier" && m.text(n) == name && !above {
            return true;
        }
        detached.push(above || detaching(n));
        if cursor.goto_first_child() {
            continue;
        }
        loop {
            detached.pop();
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                return false;
            }
        }
    }
}

/// The methods that loops in the methods of class `class` call on `self`: (called method,
/// calling method).
pub fn self_calls_in_loops(m: &PythonModel<'_>, class: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for &(c, scope) in &m.calls {
        let Some(f) = scope else {
            continue;
        };
        let func = &m.functions[f];
        if func.class.as_deref() != Some(class) || func.parent.is_some() {
            continue;
        }
        let Some(callee) = c.field("function").filter(|f| f.kind_name() == "attribute") else {
            continue;
        };
        let (Some(obj), Some(attr)) = (callee.field("object"), callee.field("attribute")) else {
            continue;
        };
        if m.text(obj) != "self" || enclosing_loops(m, c).is_empty() {
            continue;
        }
        let pair = (m.text(attr).to_string(), func.name.clone());
        if !out.contains(&pair) {
            out.push(pair);
        }
    }
    out
}

impl<'t> Training<'t> {
    /// The class every binding of `recv` instantiates: a name (see `instance_class`), or
    /// `self.x` bound in the methods of the class around `recv` (`self.x = Meter(...)`;
    /// bindings to `None` aside).
    pub fn receiver_class(&self, m: &PythonModel<'t>, recv: Node<'t>) -> Option<&'t str> {
        match recv.kind_name() {
            "identifier" if !matches!(m.text(recv), "self" | "cls") => self.instance_class(m, recv),
            "attribute" => {
                if recv.field("object").is_none_or(|o| m.text(o) != "self") {
                    return None;
                }
                let target = m.text(recv);
                let class = m.functions[m.enclosing_function(recv)?].class.as_deref()?;
                let mut found = None;
                for &a in &m.attribute_assignments {
                    if a.kind_name() != "assignment"
                        || a.field("left").is_none_or(|l| m.text(l) != target)
                    {
                        continue;
                    }
                    let Some(f) = m.enclosing_function(a) else {
                        continue;
                    };
                    if m.functions[f].class.as_deref() != Some(class) {
                        continue;
                    }
                    let right = a.field("right")?;
                    if right.kind_name() == "none" {
                        continue;
                    }
                    let callee = right
                        .field("function")
                        .filter(|c| right.kind_name() == "call" && c.kind_name() == "identifier")?;
                    let c = m.text(callee);
                    if !c.starts_with(|ch: char| ch.is_ascii_uppercase())
                        || found.is_some_and(|k| k != c)
                    {
                        return None;
                    }
                    found = Some(c);
                }
                found
            }
            _ => None,
        }
    }

    /// The arguments of `call` (`meter.update(loss)`, `self.losses.update([a, b])`) that the
    /// method called accumulates into its object's state, when the receiver's class is known
    /// and defined in the file or in the project module it is imported from.
    pub fn stored_arguments(&self, m: &PythonModel<'t>, call: Node<'t>) -> Vec<Node<'t>> {
        let Some(func) = call
            .field("function")
            .filter(|f| f.kind_name() == "attribute")
        else {
            return Vec::new();
        };
        let (Some(recv), Some(method), Some(args)) = (
            func.field("object"),
            func.field("attribute"),
            call.field("arguments"),
        ) else {
            return Vec::new();
        };
        let positional: Vec<Node<'t>> = named_children(args)
            .filter(|a| !matches!(a.kind_name(), "comment" | "keyword_argument"))
            .collect();
        if positional.is_empty()
            || positional
                .iter()
                .any(|a| matches!(a.kind_name(), "list_splat" | "dictionary_splat"))
        {
            return Vec::new();
        }
        let Some(class) = self.receiver_class(m, recv) else {
            return Vec::new();
        };
        let method = m.text(method);
        let indexes = if m.classes.iter().any(|c| c.name == class) {
            m.functions
                .iter()
                .position(|f| {
                    f.name == method && f.parent.is_none() && f.class.as_deref() == Some(class)
                })
                .map(|f| accumulated_params(m, f))
                .unwrap_or_default()
        } else {
            let Some((file, root)) = self.project.borrow().clone() else {
                return Vec::new();
            };
            let Some(import) = m
                .imports
                .iter()
                .find(|i| i.scope.is_none() && i.name == class)
            else {
                return Vec::new();
            };
            crate::python::project::method_accumulated_params(
                &file,
                &root,
                &import.qualified,
                method,
            )
        };
        indexes
            .into_iter()
            .filter_map(|i| positional.get(i).copied())
            .collect()
    }

    /// The method around `node` when it is a per-step method (see the module documentation).
    pub fn step_method(&self, m: &PythonModel<'t>, node: Node<'_>) -> Option<StepMethod<'t>> {
        let f = m.enclosing_function(node)?;
        if let Some(known) = self.step_methods.borrow().get(&f) {
            return known.clone();
        }
        let found = self.compute_step_method(m, f);
        self.step_methods.borrow_mut().insert(f, found.clone());
        found
    }

    fn compute_step_method(&self, m: &PythonModel<'t>, f: usize) -> Option<StepMethod<'t>> {
        let func = &m.functions[f];
        let class = func.class.as_deref().filter(|_| func.parent.is_none())?;
        let backward: Vec<(Node<'t>, Option<Node<'t>>)> =
            self.backward_in(Some(f)).copied().collect();
        if backward.is_empty() {
            return None;
        }
        let local = m.calls_invoking(f).find(|&&(c, scope)| {
            scope.is_some_and(|s| m.functions[s].class.as_deref() == Some(class))
                && m.local_callee(c) == Some(f)
                && !enclosing_loops(m, c).is_empty()
        });
        if let Some(&(_, Some(s))) = local {
            return Some(StepMethod {
                function: f,
                backward,
                caller: format!("{class}.{}", m.functions[s].name),
            });
        }
        let (file, root) = self.project.borrow().clone()?;
        let class_node = m
            .classes
            .iter()
            .find(|c| c.name == class && c.parent.is_none())?
            .node;
        let bases = class_node.field("superclasses")?;
        for base in named_children(bases).filter(|b| b.kind_name() == "identifier") {
            let base = m.text(base);
            let Some(import) = m
                .imports
                .iter()
                .find(|i| i.scope.is_none() && i.name == base)
            else {
                continue;
            };
            let calls =
                crate::python::project::self_calls_in_loops_of(&file, &root, &import.qualified);
            if let Some((_, caller)) = calls.iter().find(|(called, _)| *called == func.name) {
                return Some(StepMethod {
                    function: f,
                    backward,
                    caller: format!("{base}.{caller}"),
                });
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::build;
    use super::*;
    use gpulint_syntax::{parse, Lang};

    fn summary(src: &str, method: &str) -> Vec<usize> {
        let tree = parse(Lang::Python, src).unwrap();
        let m = build(&tree, src);
        let f = m.functions.iter().position(|f| f.name == method).unwrap();
        accumulated_params(&m, f)
    }

    #[test]
    fn accumulating_parameters() {
        let meter = "class M:\n    def update(self, val, n=1):\n        self.val = val\n        self.sum += val * n\n        self.count += 1\n";
        assert_eq!(summary(meter, "update"), vec![0, 1]);
        let items = "class M:\n    def update(self, key, values):\n        for i, v in enumerate(values):\n            self._sum[i] += v\n";
        assert_eq!(summary(items, "update"), vec![1]);
        let setitem = "class C:\n    def __setitem__(self, key, value):\n        self.stats[key].append(value)\n";
        assert_eq!(summary(setitem, "__setitem__"), vec![1]);
        let floats = "class M:\n    def update(self, val):\n        self.sum += float(val)\n        self.total = self.total + val.item()\n";
        assert!(summary(floats, "update").is_empty());
        let last = "class M:\n    def update(self, val):\n        self.val = val\n        total = 0\n        total += val\n";
        assert!(summary(last, "update").is_empty());
        let plain = "def update(acc, val):\n    acc.sum += val\n";
        assert!(summary(plain, "update").is_empty());
    }

    #[test]
    fn loops_calling_methods_on_self() {
        let src = "class Base:\n    def train(self):\n        for b in self.loader:\n            self.train_step(b)\n        self.finish()\n";
        let tree = parse(Lang::Python, src).unwrap();
        let m = build(&tree, src);
        assert_eq!(
            self_calls_in_loops(&m, "Base"),
            vec![("train_step".to_string(), "train".to_string())]
        );
        assert!(self_calls_in_loops(&m, "Other").is_empty());
    }
}
