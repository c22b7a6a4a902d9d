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

use super::PythonModel;
use gpulint_syntax::named_children;
use gpulint_syntax::NodeExt;
use std::collections::HashMap;
use tree_sitter::Node;

/// How many assignments deep the graph-attached dataflow follows a name.
const MAX_FLOW_DEPTH: usize = 8;

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

/// Where a value comes from, as far as autograd is concerned.
#[derive(Debug, Clone, Copy)]
pub enum Flow<'t> {
    /// Carries the graph; the node is the evidence (the loss or model call, or `backward()`).
    Attached(Node<'t>),
    /// Explicitly detached (`.item()`, `float(...)`, computed under `no_grad`, ...).
    Detached,
    Unknown,
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
}

/// Qualified names of the context managers / decorators that turn autograd off.
const GRAD_OFF: &[&str] = &[
    "torch.no_grad",
    "torch.inference_mode",
    "torch.autograd.no_grad",
    "torch.autograd.grad_mode.no_grad",
    "torch.autograd.grad_mode.inference_mode",
    "torch.autograd.inference_mode",
];

/// Method calls that leave a tensor without its graph.
const DETACHING_METHODS: &[&str] = &[
    "item", "detach", "detach_", "tolist", "cpu", "numpy", "data",
];

/// Method calls that keep the graph of their receiver.
const PASSTHROUGH_METHODS: &[&str] = &[
    "mean",
    "sum",
    "float",
    "double",
    "half",
    "bfloat16",
    "clone",
    "view",
    "reshape",
    "squeeze",
    "unsqueeze",
    "to",
    "cuda",
    "contiguous",
    "abs",
    "sqrt",
    "exp",
    "log",
    "mul",
    "div",
    "add",
    "sub",
    "flatten",
];

/// Builtins whose result is a Python number or string.
const DETACHING_BUILTINS: &[&str] = &["float", "int", "bool", "str", "len", "round"];

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
            } else if is_optimizer_step(m, call) {
                t.mark_per_step(m, call);
                for l in enclosing_loops(m, call) {
                    if let Some(&i) = t.loop_index.get(&l.id()) {
                        t.loops[i].steps.push(call);
                    }
                }
            }
            // `with torch.no_grad():`
            // (`grad_off` first: `Node::parent` costs the node's depth.)
            if grad_off(m, call) && call.parent().is_some_and(|p| p.kind_name() == "with_item") {
                if let Some(with) = gpulint_syntax::ancestor_of_kind(call, &["with_statement"]) {
                    if let Some(body) = with.field("body") {
                        t.grad_free.push((body.start_byte(), body.end_byte(), call));
                    }
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

    /// Is `name` (an identifier or a dotted target such as `self.total`) the loss that a
    /// `backward()` call in function `scope` backpropagates from?
    pub fn is_backward_receiver(
        &self,
        m: &PythonModel<'_>,
        scope: Option<usize>,
        name: &str,
    ) -> Option<Node<'t>> {
        self.backward
            .iter()
            .find(|(call, loss)| {
                loss.is_some_and(|l| root_name(m, l) == Some(name))
                    && m.enclosing_function(*call) == scope
            })
            .map(|b| b.0)
    }

    /// Is `target` (its text) bound afresh inside the loop body (a plain assignment that does
    /// not read it, a `for` target, or a `.clear()` / `del` of its contents)?
    pub fn rebound_in(&self, m: &PythonModel<'_>, lp: &Loop<'_>, target: &str) -> bool {
        let (s, e) = (lp.node.start_byte(), lp.node.end_byte());
        let Some(body) = lp.node.field("body") else {
            return false;
        };
        let inside = |n: Node<'_>| body.start_byte() <= n.start_byte() && n.end_byte() <= e;
        let lo = m.assignments.partition_point(|a| a.start_byte() < s);
        for &a in &m.assignments[lo..] {
            if a.start_byte() >= e {
                break;
            }
            if a.kind_name() != "assignment" || !inside(a) {
                continue;
            }
            let (Some(left), Some(right)) = (a.field("left"), a.field("right")) else {
                continue;
            };
            let binds = m.text(left) == target
                || (left.kind_name() == "pattern_list" || left.kind_name() == "tuple_pattern")
                    && named_children(left).any(|c| m.text(c) == target);
            if binds && !mentions(m, right, target) {
                return true;
            }
        }
        gpulint_syntax::descendants(body).any(|n| match n.kind_name() {
            "call" => n.field("function").is_some_and(|f| {
                f.kind_name() == "attribute"
                    && f.field("attribute").is_some_and(|a| m.text(a) == "clear")
                    && f.field("object").is_some_and(|o| m.text(o) == target)
            }),
            "delete_statement" => mentions(m, n, target),
            "for_statement" => n.field("left").is_some_and(|l| m.text(l) == target),
            _ => false,
        })
    }

    /// Does `expr` hold a graph-attached tensor? `backward` are the `backward()` calls of the
    /// surrounding training step (a name they backpropagate from is attached). See [`Flow`].
    pub fn flow(
        &self,
        m: &PythonModel<'t>,
        expr: Node<'t>,
        backward: &[(Node<'t>, Option<Node<'t>>)],
    ) -> Flow<'t> {
        self.flow_depth(m, expr, backward, 0)
    }

    fn flow_depth(
        &self,
        m: &PythonModel<'t>,
        expr: Node<'t>,
        backward: &[(Node<'t>, Option<Node<'t>>)],
        d: usize,
    ) -> Flow<'t> {
        if d > MAX_FLOW_DEPTH {
            return Flow::Unknown;
        }
        if self.grad_free(expr).is_some() {
            return Flow::Detached;
        }
        match expr.kind_name() {
            "parenthesized_expression" => match expr.named_child(0) {
                Some(e) => self.flow_depth(m, e, backward, d + 1),
                None => Flow::Unknown,
            },
            "binary_operator" => {
                let op = expr.field("operator").map(|o| m.text(o)).unwrap_or("");
                if !matches!(op, "+" | "-" | "*" | "/") {
                    return Flow::Unknown;
                }
                let l = expr
                    .field("left")
                    .map(|e| self.flow_depth(m, e, backward, d + 1));
                if let Some(f @ Flow::Attached(_)) = l {
                    return f;
                }
                match expr.field("right") {
                    Some(r) => match self.flow_depth(m, r, backward, d + 1) {
                        f @ Flow::Attached(_) => f,
                        _ => Flow::Unknown,
                    },
                    None => Flow::Unknown,
                }
            }
            "unary_operator" => match expr.field("argument") {
                Some(a) => self.flow_depth(m, a, backward, d + 1),
                None => Flow::Unknown,
            },
            "call" => {
                let Some(func) = expr.field("function") else {
                    return Flow::Unknown;
                };
                match func.kind_name() {
                    "identifier" => {
                        let name = m.text(func);
                        if DETACHING_BUILTINS.contains(&name) && m.qualified_name(func).is_none() {
                            Flow::Detached
                        } else if is_loss_name(name) || is_model_name(name) {
                            Flow::Attached(expr)
                        } else {
                            Flow::Unknown
                        }
                    }
                    "attribute" => {
                        let attr = func.field("attribute").map(|a| m.text(a)).unwrap_or("");
                        if DETACHING_METHODS.contains(&attr) {
                            return Flow::Detached;
                        }
                        if PASSTHROUGH_METHODS.contains(&attr) {
                            return match func.field("object") {
                                Some(o) => self.flow_depth(m, o, backward, d + 1),
                                None => Flow::Unknown,
                            };
                        }
                        if is_loss_name(attr) || is_model_name(attr) {
                            return Flow::Attached(expr);
                        }
                        Flow::Unknown
                    }
                    _ => Flow::Unknown,
                }
            }
            "attribute" => {
                let attr = expr.field("attribute").map(|a| m.text(a)).unwrap_or("");
                if attr == "data" {
                    return Flow::Detached;
                }
                if !matches!(attr, "loss" | "logits" | "last_hidden_state") {
                    return Flow::Unknown;
                }
                match expr.field("object") {
                    Some(o) => match self.flow_depth(m, o, backward, d + 1) {
                        Flow::Attached(_) => Flow::Attached(expr),
                        f => f,
                    },
                    None => Flow::Unknown,
                }
            }
            "subscript" => match expr.field("value") {
                Some(v) => match self.flow_depth(m, v, backward, d + 1) {
                    Flow::Attached(_) => Flow::Attached(expr),
                    f => f,
                },
                None => Flow::Unknown,
            },
            "identifier" => {
                let name = m.text(expr);
                let scope = m.enclosing_function(expr);
                let flow = match self.reaching_assignment(m, expr, name, scope) {
                    Some((a, true)) => {
                        if self.grad_free(a).is_some() {
                            return Flow::Detached;
                        }
                        match a.field("right") {
                            Some(r) => self.flow_depth(m, r, backward, d + 1),
                            None => Flow::Unknown,
                        }
                    }
                    Some((a, false)) if self.grad_free(a).is_some() => return Flow::Detached,
                    _ => Flow::Unknown,
                };
                match flow {
                    Flow::Unknown => backward
                        .iter()
                        .find(|(_, loss)| loss.is_some_and(|l| root_name(m, l) == Some(name)))
                        .map(|b| Flow::Attached(b.0))
                        .unwrap_or(Flow::Unknown),
                    f => f,
                }
            }
            _ => Flow::Unknown,
        }
    }

    /// The last assignment before `at` in the same function that binds `name`; the flag says
    /// whether it binds it alone (`name = ...`) rather than by unpacking.
    fn reaching_assignment(
        &self,
        m: &PythonModel<'t>,
        at: Node<'_>,
        name: &str,
        scope: Option<usize>,
    ) -> Option<(Node<'t>, bool)> {
        let hi = m
            .assignments
            .partition_point(|a| a.start_byte() < at.start_byte());
        for &a in m.assignments[..hi].iter().rev() {
            if a.kind_name() != "assignment" || a.end_byte() > at.start_byte() {
                continue;
            }
            let Some(left) = a.field("left") else {
                continue;
            };
            let plain = left.kind_name() == "identifier" && m.text(left) == name;
            let unpack = matches!(left.kind_name(), "pattern_list" | "tuple_pattern")
                && named_children(left).any(|c| c.kind_name() == "identifier" && m.text(c) == name);
            if (plain || unpack) && m.enclosing_function(a) == scope {
                return Some((a, plain));
            }
        }
        None
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
    let before = m.loops.partition_point(|l| l.start_byte() <= start);
    let scope = m.enclosing_function(node);
    let mut out: Vec<Node<'t>> = m.loops[..before]
        .iter()
        .copied()
        .filter(|l| {
            l.id() != node.id()
                && l.field("body")
                    .is_some_and(|b| b.start_byte() <= start && end <= b.end_byte())
                && m.enclosing_function(*l) == scope
        })
        .collect();
    out.reverse();
    out
}

/// The name an expression is rooted at: `loss` for `loss`, `(loss / k)`, `loss * w`;
/// `self.total` for an attribute chain of plain names.
pub fn root_name<'t>(m: &PythonModel<'t>, expr: Node<'_>) -> Option<&'t str> {
    let mut cur = expr;
    for _ in 0..MAX_FLOW_DEPTH {
        match cur.kind_name() {
            "identifier" | "attribute" => return Some(m.text(cur)),
            "parenthesized_expression" => cur = cur.named_child(0)?,
            "binary_operator" => cur = cur.field("left")?,
            _ => return None,
        }
    }
    None
}

/// Does `expr` contain the name (or dotted target) `target`?
pub fn mentions(m: &PythonModel<'_>, expr: Node<'_>, target: &str) -> bool {
    gpulint_syntax::descendants(expr)
        .any(|n| matches!(n.kind_name(), "identifier" | "attribute") && m.text(n) == target)
}

/// A function name that computes a loss: `criterion`, `loss_fn`, `compute_loss`,
/// `F.cross_entropy`, `nll_loss`.
pub fn is_loss_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    (n.contains("loss") && !n.contains("scale") && !n.contains("meter") && !n.contains("log"))
        || n.contains("criterion")
        || n.ends_with("cross_entropy")
}

/// A name that usually holds a model: calling it runs a forward pass.
pub fn is_model_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    matches!(
        n.as_str(),
        "model"
            | "net"
            | "network"
            | "forward"
            | "ddp_model"
            | "generator"
            | "discriminator"
            | "netg"
            | "netd"
            | "encoder"
            | "decoder"
            | "unet"
            | "policy"
            | "critic"
            | "actor"
            | "classifier"
    )
}

/// `DataLoader(...)` from `torch.utils.data` (through imports and aliases).
pub fn is_dataloader(m: &PythonModel<'_>, call: Node<'_>) -> bool {
    call.field("function")
        .and_then(|f| m.qualified_name(f))
        .is_some_and(|q| {
            q == "torch.utils.data.DataLoader" || q == "torch.utils.data.dataloader.DataLoader"
        })
}

/// The `num_workers=` of a DataLoader call, when it may start worker processes: the value
/// node, unless it folds to zero. `None` when absent (the default is 0) or zero.
pub fn worker_count<'t>(m: &PythonModel<'_>, call: Node<'t>) -> Option<Node<'t>> {
    let v = super::tf::argument(call, 5, "num_workers", m)?;
    match m.const_value(v) {
        Some(c) if c.as_int() == Some(0) => None,
        Some(super::Value::None) => None,
        _ => Some(v),
    }
}

/// The DataLoader calls of the file that may start worker processes, in document order, with
/// their `num_workers=` value (see [`worker_count`]).
pub fn worker_loaders<'t>(m: &PythonModel<'t>) -> Vec<(Node<'t>, Node<'t>)> {
    m.calls
        .iter()
        .filter(|(c, _)| is_dataloader(m, *c))
        .filter_map(|&(c, _)| Some((c, worker_count(m, c)?)))
        .collect()
}

/// Is `node` inside the body of an `if __name__ == "__main__":` block?
pub fn under_main_guard(m: &PythonModel<'_>, node: Node<'_>) -> bool {
    let mut child = node;
    let mut cur = node.parent();
    while let Some(p) = cur {
        if p.kind_name() == "if_statement" {
            let in_body = p.field("consequence").is_some_and(|c| c.id() == child.id());
            if in_body
                && p.field("condition")
                    .is_some_and(|c| super::order::is_main_guard(c, m))
            {
                return true;
            }
        }
        child = p;
        cur = p.parent();
    }
    false
}

/// Is class `c` a `torch.utils.data` dataset (`Dataset`, `IterableDataset`, through imports)?
pub fn is_dataset_class(m: &PythonModel<'_>, c: usize) -> bool {
    let Some(supers) = m.classes[c].node.field("superclasses") else {
        return false;
    };
    named_children(supers).any(|s| {
        m.qualified_name(s).is_some_and(|q| {
            q.starts_with("torch.utils.data")
                && (q.ends_with("Dataset") || q.ends_with("IterableDataset"))
        })
    })
}

/// The local class of a dataset expression: `Points()`, or a name assigned `Points(...)`.
pub fn dataset_class(m: &PythonModel<'_>, expr: Node<'_>) -> Option<usize> {
    let value = match expr.kind_name() {
        "call" => expr,
        "identifier" => m.last_assigned_before(m.text(expr), expr)?,
        _ => return None,
    };
    if value.kind_name() != "call" {
        return None;
    }
    let func = value.field("function")?;
    if func.kind_name() != "identifier" {
        return None;
    }
    m.local_class(func, m.text(func))
}

/// The local class of the dataset a DataLoader call loads (its first argument or `dataset=`),
/// see [`dataset_class`].
pub fn loader_dataset_class(m: &PythonModel<'_>, loader: Node<'_>) -> Option<usize> {
    super::tf::argument(loader, 0, "dataset", m).and_then(|d| dataset_class(m, d))
}

/// `acc += value` or `acc = acc + value`: the accumulator target and the added value.
pub fn accumulation<'t>(m: &PythonModel<'t>, a: Node<'t>) -> Option<(Node<'t>, Node<'t>)> {
    let left = a.field("left")?;
    let right = a.field("right")?;
    if !matches!(left.kind_name(), "identifier" | "attribute" | "subscript") {
        return None;
    }
    if a.kind_name() == "augmented_assignment" {
        let op = m.text(a.field("operator")?);
        return (op == "+=").then_some((left, right));
    }
    if right.kind_name() != "binary_operator" || m.text(right.field("operator")?) != "+" {
        return None;
    }
    let (l, r) = (right.field("left")?, right.field("right")?);
    let acc = m.text(left);
    if m.text(l) == acc && !mentions(m, r, acc) {
        Some((left, r))
    } else if m.text(r) == acc && !mentions(m, l, acc) {
        Some((left, l))
    } else {
        None
    }
}

impl<'t> Training<'t> {
    /// A graph-attached value accumulated (`acc += loss`) or appended (`xs.append(out)`) into
    /// something that outlives an iteration of `lp`, outside gradient-free regions: the
    /// statement that keeps it.
    pub fn leak_in_loop(&self, m: &PythonModel<'t>, lp: &Loop<'t>) -> Option<Node<'t>> {
        let (s, e) = (lp.node.start_byte(), lp.node.end_byte());
        let lo = m.assignments.partition_point(|a| a.start_byte() < s);
        for &a in &m.assignments[lo..] {
            if a.start_byte() >= e {
                break;
            }
            let Some((target, value)) = accumulation(m, a) else {
                continue;
            };
            if self.loop_of(m, a).map(|l| l.node.id()) != Some(lp.node.id())
                || self.grad_free(a).is_some()
                || self.rebound_in(m, lp, m.text(target))
            {
                continue;
            }
            if matches!(self.flow(m, value, &lp.backward), Flow::Attached(_)) {
                return Some(a);
            }
        }
        let lo = m.calls.partition_point(|c| c.0.start_byte() < s);
        for &(c, _) in &m.calls[lo..] {
            if c.start_byte() >= e {
                break;
            }
            let Some(func) = c.field("function") else {
                continue;
            };
            if func.kind_name() != "attribute"
                || func
                    .field("attribute")
                    .is_none_or(|a| m.text(a) != "append")
            {
                continue;
            }
            let (Some(obj), Some(value)) = (
                func.field("object"),
                c.field("arguments").and_then(|a| named_children(a).next()),
            ) else {
                continue;
            };
            if self.loop_of(m, c).map(|l| l.node.id()) != Some(lp.node.id())
                || self.grad_free(c).is_some()
                || self.rebound_in(m, lp, m.text(obj))
            {
                continue;
            }
            if matches!(self.flow(m, value, &lp.backward), Flow::Attached(_)) {
                return Some(c);
            }
        }
        None
    }
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
