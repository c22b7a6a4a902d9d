//! PyTorch training-loop facts, shared by the PT rules.
//!
//! - **Loops** (`for` / `while`) with the `backward()` and optimizer `step()` calls their bodies
//!   make (not counting nested functions): a loop holding either is a *training loop*.
//! - **Gradient-free regions**: `with torch.no_grad():`, `with torch.inference_mode():`,
//!   `with torch.set_grad_enabled(False):` bodies and functions decorated with
//!   `@torch.no_grad()` / `@torch.inference_mode()` (resolved through imports and aliases).
//! - **Graph-attached values**: whether an expression in a loop holds a tensor that still
//!   carries its autograd graph: a loss (a criterion or loss-function call, or the receiver of
//!   `.backward()`), a model output, or arithmetic on them, followed through local assignments.
//!   `.item()`, `.detach()`, `.tolist()`, `.cpu()`, `.numpy()`, `.data`, `float(...)` and values
//!   computed under a gradient-free region are detached.

//!
//! The dataflow lives in `flow`, values kept across iterations in `leaks`, and DataLoader and
//! dataset helpers in `data`.

mod data;
mod flow;
mod leaks;
mod meters;

pub use data::{
    dataset_class, is_dataloader, is_dataset_class, loader_dataset_class, loader_dataset_lambda,
    under_main_guard, worker_count, worker_loaders,
};
pub use flow::{is_loss_name, is_model_name, root_name, Flow};
pub use leaks::{accumulation, mentions, EpochOutput};
pub use meters::{accumulated_params, self_calls_in_loops, StepMethod};

use super::PythonModel;
use crate::hash::HashMap;
use gpulint_syntax::named_children;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

/// A `for` or `while` loop.
#[derive(Debug, Clone)]
pub struct Loop<'t> {
    pub node: Node<'t>,
    /// `backward()` calls in the body (nested functions excluded), with the loss expression.
    pub backward: Vec<(Node<'t>, Option<Node<'t>>)>,
    /// Optimizer `step()` calls in the body.
    pub steps: Vec<Node<'t>>,
    /// A `backward()` or `step()` call sits in this loop's body, not in an inner loop: the loop
    /// runs once per training step.
    pub per_step: bool,
}

impl<'t> Loop<'t> {
    /// The part of the loop to point at: the iterable of a `for`, the condition of a `while`.
    pub fn header(&self) -> Node<'t> {
        self.node
            .field("right")
            .or_else(|| self.node.field("condition"))
            .unwrap_or(self.node)
    }

    /// Does the body call `backward()` or an optimizer's `step()`?
    pub fn is_training(&self) -> bool {
        !self.backward.is_empty() || !self.steps.is_empty()
    }
}

/// See the module documentation.
#[derive(Debug, Default)]
pub struct Training<'t> {
    /// Every loop of the file, in document order.
    pub loops: Vec<Loop<'t>>,
    loop_index: HashMap<usize, usize>,
    /// Every `backward()` call with its loss expression, in document order.
    pub backward: Vec<(Node<'t>, Option<Node<'t>>)>,
    /// Byte ranges where autograd is off, with the call that turns it off.
    grad_free: Vec<(usize, usize, Node<'t>)>,
    /// Summaries of local functions: does the function return a graph-attached value (the
    /// evidence)? Filled on demand by [`Training::returns_attached`].
    returns: std::cell::RefCell<HashMap<usize, Option<Node<'t>>>>,
    /// Indexes into `backward` per function they sit in (`None`: module level).
    backward_by_scope: HashMap<Option<usize>, Vec<usize>>,
    /// Every `assignment` (not augmented) per function it sits in, in document order.
    assignments_by_scope: HashMap<Option<usize>, Vec<Node<'t>>>,
    /// The same assignments by function and the text of their target (`x`, `self.meter`).
    assignments_by_target: HashMap<Option<usize>, HashMap<&'t str, Vec<Node<'t>>>>,
    /// The checked file and the project root, once a rule has set them
    /// ([`Training::set_project`]): summaries of methods of classes imported from the project's
    /// own modules are looked up there.
    project: std::cell::RefCell<Option<(std::path::PathBuf, std::path::PathBuf)>>,
    /// Per-step methods ([`Training::step_method`]), by function, filled on demand.
    step_methods: std::cell::RefCell<HashMap<usize, Option<StepMethod<'t>>>>,
    /// Per loop (by node id), the targets bound afresh in its body ([`Training::rebound_in`]),
    /// found in one pass over the body the first time a rule asks about the loop.
    rebound: std::cell::RefCell<HashMap<usize, std::rc::Rc<crate::hash::HashSet<String>>>>,
}

/// Methods named for one training step (`trainer.train_step(batch)`): a loop calling one on
/// any object is a training loop.
const STEP_METHODS: &[&str] = &["train_step", "training_step"];

/// Qualified names of the context managers / decorators that turn autograd off.
const GRAD_OFF: &[&str] = &[
    "torch.no_grad",
    "torch.inference_mode",
    "torch.autograd.no_grad",
    "torch.autograd.grad_mode.no_grad",
    "torch.autograd.grad_mode.inference_mode",
    "torch.autograd.inference_mode",
];

impl<'t> Training<'t> {
    pub(super) fn build(m: &PythonModel<'t>) -> Training<'t> {
        let mut t = Training::default();
        for &l in &m.loops {
            t.loop_index.insert(l.id(), t.loops.len());
            t.loops.push(Loop {
                node: l,
                backward: Vec::new(),
                steps: Vec::new(),
                per_step: false,
            });
        }
        for &(call, _) in &m.calls {
            if let Some(loss) = backward_call(m, call) {
                t.backward.push((call, loss));
                t.mark_per_step(m, call);
                for l in enclosing_loops(m, call) {
                    if let Some(&i) = t.loop_index.get(&l.id()) {
                        t.loops[i].backward.push((call, loss));
                    }
                }
            } else if is_optimizer_step(m, call) || is_step_method(m, call) {
                t.mark_per_step(m, call);
                for l in enclosing_loops(m, call) {
                    if let Some(&i) = t.loop_index.get(&l.id()) {
                        t.loops[i].steps.push(call);
                    }
                }
            }
            // `with torch.no_grad():`
            if grad_off(m, call) && m.parent(call).is_some_and(|p| p.kind_name() == "with_item") {
                // The innermost `with` statement around the call.
                let mut up = m.statement_of(call);
                while let Some(s) = up.filter(|s| s.kind_name() != "with_statement") {
                    up = m.statement_of(s);
                }
                if let Some(body) = up.and_then(|with| with.field("body")) {
                    t.grad_free.push((body.start_byte(), body.end_byte(), call));
                }
            }
        }
        for (i, (call, _)) in t.backward.iter().enumerate() {
            t.backward_by_scope
                .entry(m.enclosing_function(*call))
                .or_default()
                .push(i);
        }
        for &a in &m.assignments {
            if a.kind_name() == "assignment" {
                let scope = m.enclosing_function(a);
                t.assignments_by_scope.entry(scope).or_default().push(a);
                if let Some(left) = a.field("left") {
                    t.assignments_by_target
                        .entry(scope)
                        .or_default()
                        .entry(m.text(left))
                        .or_default()
                        .push(a);
                }
            }
        }
        // One call level: a loop that calls a local function which backpropagates or steps
        // the optimizer is a training loop too.
        let mut trains = vec![false; m.functions.len()];
        for (call, _) in t.backward.iter() {
            if let Some(f) = m.enclosing_function(*call) {
                trains[f] = true;
            }
        }
        for l in &t.loops {
            for s in &l.steps {
                if let Some(f) = m.enclosing_function(*s) {
                    trains[f] = true;
                }
            }
        }
        let g = m.call_graph();
        let helper_calls: Vec<Node<'t>> = g
            .edges
            .iter()
            .flatten()
            .chain(g.module.iter())
            .filter(|(_, callee)| trains.get(*callee).copied().unwrap_or(false))
            .map(|(c, _)| *c)
            .collect();
        for call in helper_calls {
            t.mark_per_step(m, call);
            for l in enclosing_loops(m, call) {
                if let Some(&i) = t.loop_index.get(&l.id()) {
                    t.loops[i].steps.push(call);
                }
            }
        }
        for f in &m.functions {
            for d in &f.decorators {
                let Some(expr) = named_children(*d).find(|c| c.kind_name() != "comment") else {
                    continue;
                };
                if grad_off(m, expr) {
                    t.grad_free
                        .push((f.node.start_byte(), f.node.end_byte(), expr));
                }
            }
        }
        t
    }

    /// Lets the summaries of methods of classes imported from the project's own modules (next
    /// to `file`, or in a distribution of the project) be used: rules that can report across
    /// modules call this before asking about a value. The first call wins.
    pub fn set_project(&self, file: &std::path::Path, root: &std::path::Path) {
        let mut p = self.project.borrow_mut();
        if p.is_none() {
            *p = Some((file.to_path_buf(), root.to_path_buf()));
        }
    }

    fn mark_per_step(&mut self, m: &PythonModel<'t>, call: Node<'_>) {
        if let Some(l) = enclosing_loops(m, call).first() {
            if let Some(&i) = self.loop_index.get(&l.id()) {
                self.loops[i].per_step = true;
            }
        }
    }

    /// The call that turns autograd off around `node`, if any.
    pub fn grad_free(&self, node: Node<'_>) -> Option<Node<'t>> {
        let at = node.start_byte();
        self.grad_free
            .iter()
            .find(|(s, e, _)| *s <= at && at < *e)
            .map(|g| g.2)
    }

    /// The innermost loop whose body holds `node`, in the same function.
    pub fn loop_of(&self, m: &PythonModel<'t>, node: Node<'_>) -> Option<&Loop<'t>> {
        let l = enclosing_loops(m, node).into_iter().next()?;
        self.loops.get(*self.loop_index.get(&l.id())?)
    }

    /// All loops around `node` in the same function, innermost first.
    pub fn loops_around(&self, m: &PythonModel<'t>, node: Node<'_>) -> Vec<&Loop<'t>> {
        enclosing_loops(m, node)
            .into_iter()
            .filter_map(|l| self.loops.get(*self.loop_index.get(&l.id())?))
            .collect()
    }

    /// The `backward()` calls in function `scope` (`None`: module level), in document order.
    pub fn backward_in(
        &self,
        scope: Option<usize>,
    ) -> impl Iterator<Item = &(Node<'t>, Option<Node<'t>>)> + '_ {
        self.backward_by_scope
            .get(&scope)
            .into_iter()
            .flatten()
            .map(|&i| &self.backward[i])
    }

    /// The plain assignments (`x = ...`, not `x += ...`) in function `scope` (`None`: module
    /// level), in document order.
    pub(crate) fn assignments_in(&self, scope: Option<usize>) -> &[Node<'t>] {
        self.assignments_by_scope
            .get(&scope)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// The plain assignments in function `scope` (`None`: module level) whose target is
    /// written `target`, in document order.
    pub fn assignments_to(&self, scope: Option<usize>, target: &str) -> &[Node<'t>] {
        self.assignments_by_target
            .get(&scope)
            .and_then(|by| by.get(target))
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// Is `name` (an identifier or a dotted target such as `self.total`) the loss that a
    /// `backward()` call in function `scope` backpropagates from?
    pub fn is_backward_receiver(
        &self,
        m: &PythonModel<'_>,
        scope: Option<usize>,
        name: &str,
    ) -> Option<Node<'t>> {
        self.backward_in(scope)
            .find(|(_, loss)| loss.is_some_and(|l| root_name(m, l) == Some(name)))
            .map(|b| b.0)
    }
}

/// Is this a `backward()` call? Returns the loss expression it backpropagates from, when known:
/// `loss.backward()`, `(loss / k).backward()`, `scaler.scale(loss).backward()`,
/// `torch.autograd.backward(loss)`, `accelerator.backward(loss)`, `self.manual_backward(loss)`.
fn backward_call<'t>(m: &PythonModel<'_>, call: Node<'t>) -> Option<Option<Node<'t>>> {
    let func = call.field("function")?;
    let first_arg = || {
        call.field("arguments").and_then(|a| {
            named_children(a).find(|c| !matches!(c.kind_name(), "keyword_argument" | "comment"))
        })
    };
    if func.kind_name() != "attribute" {
        return None;
    }
    let attr = m.text(func.field("attribute")?);
    let object = func.field("object")?;
    if attr == "manual_backward" {
        return Some(first_arg());
    }
    if attr != "backward" {
        return None;
    }
    if m.qualified_name(func).as_deref() == Some("torch.autograd.backward") {
        return Some(first_arg());
    }
    let recv = m.text(object).to_ascii_lowercase();
    if recv.ends_with("accelerator") || recv.ends_with("fabric") || recv.ends_with("engine") {
        return Some(first_arg());
    }
    // `scaler.scale(loss).backward()`
    if object.kind_name() == "call" {
        let inner = object.field("function");
        if inner
            .and_then(|f| f.field("attribute"))
            .is_some_and(|a| m.text(a) == "scale")
        {
            let arg = object
                .field("arguments")
                .and_then(|a| named_children(a).next());
            return Some(arg);
        }
    }
    Some(Some(object))
}

/// `trainer.train_step(...)` on an object other than `self` (a method of the same class is
/// followed as a local call).
fn is_step_method(m: &PythonModel<'_>, call: Node<'_>) -> bool {
    call.field("function").is_some_and(|f| {
        f.kind_name() == "attribute"
            && f.field("attribute")
                .is_some_and(|a| STEP_METHODS.contains(&m.text(a)))
            && f.field("object")
                .is_some_and(|o| !matches!(m.text(o), "self" | "cls"))
    })
}

/// `optimizer.step()`, `opt.step()`, `scaler.step(optimizer)`.
fn is_optimizer_step(m: &PythonModel<'_>, call: Node<'_>) -> bool {
    let Some(func) = call.field("function") else {
        return false;
    };
    if func.kind_name() != "attribute"
        || func.field("attribute").is_none_or(|a| m.text(a) != "step")
    {
        return false;
    }
    let Some(object) = func.field("object") else {
        return false;
    };
    let recv = m.text(object).to_ascii_lowercase();
    let last = recv.rsplit('.').next().unwrap_or("");
    last.contains("optim") || last == "opt" || last.starts_with("opt_") || last.contains("scaler")
}

/// Does `expr` (a call or a decorator expression) turn autograd off?
fn grad_off(m: &PythonModel<'_>, expr: Node<'_>) -> bool {
    let (func, call) = match expr.kind_name() {
        "call" => match expr.field("function") {
            Some(f) => (f, Some(expr)),
            None => return false,
        },
        "attribute" | "identifier" => (expr, None),
        _ => return false,
    };
    let Some(q) = m.qualified_name(func) else {
        return false;
    };
    let first = call
        .and_then(|c| c.field("arguments"))
        .and_then(|a| named_children(a).find(|c| c.kind_name() != "comment"));
    let folds_false = first
        .and_then(|a| {
            let a = if a.kind_name() == "keyword_argument" {
                a.field("value")?
            } else {
                a
            };
            m.const_value(a)
        })
        .is_some_and(|v| !v.truthy());
    if q == "torch.set_grad_enabled" || q == "torch.autograd.set_grad_enabled" {
        return folds_false;
    }
    GRAD_OFF.contains(&q.as_str()) && !folds_false
}

/// The loops around `node` in the same function whose body (not header) holds it, innermost
/// first. Found from byte ranges (no parent walks: `Node::parent` costs the node's depth).
fn enclosing_loops<'t>(m: &PythonModel<'t>, node: Node<'_>) -> Vec<Node<'t>> {
    let (start, end) = (node.start_byte(), node.end_byte());
    // Every loop that holds `node` starts before it, so it holds the last loop that does (or is
    // that loop): walking up from there through the loops' nesting meets them all, innermost
    // first, and costs the nesting depth rather than the number of loops in the file.
    let before = m.loops.partition_point(|l| l.start_byte() <= start);
    let parents = m.loop_parents();
    let scope = m.enclosing_function(node);
    let mut out: Vec<Node<'t>> = Vec::new();
    let mut cur = before.checked_sub(1);
    while let Some(i) = cur {
        let l = m.loops[i];
        if l.id() != node.id()
            && l.field("body")
                .is_some_and(|b| b.start_byte() <= start && end <= b.end_byte())
            && m.enclosing_function(l) == scope
        {
            out.push(l);
        }
        cur = parents[i];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::build;
    use super::*;
    use gpulint_syntax::{parse, Lang};

    #[test]
    fn loops_backward_and_grad_free() {
        let src = "import torch as T\nfrom torch import no_grad\nfor x, y in loader:\n    out = model(x)\n    loss = crit(out, y)\n    loss.backward()\n    opt.step()\n    total += loss\n    with no_grad():\n        v = model(x)\n    with T.set_grad_enabled(False):\n        w = model(x)\n@T.inference_mode()\ndef ev():\n    pass\n";
        let tree = parse(Lang::Python, src).unwrap();
        let m = build(&tree, src);
        let t = m.training();
        assert_eq!(t.loops.len(), 1);
        assert!(t.loops[0].is_training());
        assert_eq!(t.loops[0].steps.len(), 1);
        assert_eq!(t.grad_free.len(), 3);
        let aug = *m
            .assignments
            .iter()
            .find(|a| a.kind_name() == "augmented_assignment")
            .unwrap();
        let lp = t.loop_of(&m, aug).unwrap();
        let rhs = aug.field("right").unwrap();
        assert!(matches!(t.flow(&m, rhs, &lp.backward), Flow::Attached(_)));
        assert!(!t.rebound_in(&m, lp, "total"));
        assert!(t.rebound_in(&m, lp, "out"));
    }
}
