//! Graph-attached dataflow: whether an expression in a loop holds a tensor that still carries
//! its autograd graph (a loss, a model output, arithmetic on them), followed through local
//! assignments, and the names that usually hold losses and models.

use super::Training;
use crate::python::PythonModel;
use gpulint_syntax::named_children;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

/// How many assignments deep the graph-attached dataflow follows a name.
const MAX_FLOW_DEPTH: usize = 8;

/// Where a value comes from, as far as autograd is concerned.
#[derive(Debug, Clone, Copy)]
pub enum Flow<'t> {
    /// Carries the graph; the node is the evidence (the loss or model call, or `backward()`).
    Attached(Node<'t>),
    /// Explicitly detached (`.item()`, `float(...)`, computed under `no_grad`, ...).
    Detached,
    Unknown,
}

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
    "items",
    "values",
];

/// Builtins whose result is a Python number or string.
const DETACHING_BUILTINS: &[&str] = &["float", "int", "bool", "str", "len", "round"];

impl<'t> Training<'t> {
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
            // `[coarse_loss * 1000, refine_loss * 1000]`: a literal holding a graph-attached
            // item keeps that item's graph.
            "list" | "tuple" => named_children(expr)
                .filter(|i| i.kind_name() != "comment")
                .map(|i| self.flow_depth(m, i, backward, d + 1))
                .find(|f| matches!(f, Flow::Attached(_)))
                .unwrap_or(Flow::Unknown),
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
                            self.callee_flow(m, expr, d)
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
                        self.callee_flow(m, expr, d)
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
                    // `for name, value in losses.items():` over a graph-attached container.
                    None => self.loop_target_flow(m, expr, name, backward, d),
                    // `loss, logits = criterion(...)`, `out, hidden = model(x)`: an item of a
                    // graph-attached result carries the graph when its name says it is a loss
                    // or an output (a sample count or a logging dict next to it need not).
                    // `a, b, total = losses`: the items of a container named for losses are
                    // losses, whatever the names they are unpacked into.
                    Some((a, false))
                        if !is_loss_name(name)
                            && !is_output_name(name)
                            && !a.field("right").is_some_and(|r| {
                                r.kind_name() == "identifier" && is_loss_name(m.text(r))
                            }) =>
                    {
                        Flow::Unknown
                    }
                    Some((a, false)) => match a.field("right") {
                        Some(r) => match self.flow_depth(m, r, backward, d + 1) {
                            f @ Flow::Attached(_) => f,
                            // `total, _, part_loss = run(x); total.backward()`: the call
                            // returns what the step backpropagates from, so the other losses
                            // unpacked from it carry the graph too.
                            _ => a
                                .field("left")
                                .and_then(|left| {
                                    backward.iter().find(|(_, loss)| {
                                        loss.and_then(|l| root_name(m, l)).is_some_and(|n| {
                                            n != name
                                                && named_children(left).any(|c| {
                                                    c.kind_name() == "identifier" && m.text(c) == n
                                                })
                                        })
                                    })
                                })
                                .map_or(Flow::Unknown, |b| Flow::Attached(b.0)),
                        },
                        None => Flow::Unknown,
                    },
                };
                match flow {
                    Flow::Unknown => match backward
                        .iter()
                        .find(|(_, loss)| loss.is_some_and(|l| root_name(m, l) == Some(name)))
                    {
                        // `out["loss"].backward(); out["loss"] = out["loss"].detach()`: the
                        // entry that held the graph was replaced by a detached copy.
                        Some(b) if self.entry_detached(m, name, b.0, expr, backward, d) => {
                            Flow::Detached
                        }
                        Some(b) => Flow::Attached(b.0),
                        None => Flow::Unknown,
                    },
                    f => f,
                }
            }
            _ => Flow::Unknown,
        }
    }

    /// A call of a local function (or method of the same class) that returns a graph-attached
    /// value: the function's summary, computed once per function.
    fn callee_flow(&self, m: &PythonModel<'t>, call: Node<'t>, d: usize) -> Flow<'t> {
        match m.local_callee(call) {
            Some(f) => match self.returns_attached(m, f, d) {
                Some(_) => Flow::Attached(call),
                None => Flow::Unknown,
            },
            None if self.instance_method_returns_attached(m, call, d) => Flow::Attached(call),
            None => Flow::Unknown,
        }
    }

    /// `trainer.train_step(x)` where every binding of `trainer` (in the calling function, or
    /// at module level when the function does not bind it) is an instance of one class
    /// (`trainer = Trainer(model, optimizer)`): does that class's method return a
    /// graph-attached value? The class is looked up in the file, then, once a rule has set the
    /// project ([`Training::set_project`]), in the project module it is imported from
    /// (`from trainer import Trainer`).
    fn instance_method_returns_attached(
        &self,
        m: &PythonModel<'t>,
        call: Node<'t>,
        d: usize,
    ) -> bool {
        let Some(func) = call
            .field("function")
            .filter(|f| f.kind_name() == "attribute")
        else {
            return false;
        };
        let (Some(object), Some(method)) = (func.field("object"), func.field("attribute")) else {
            return false;
        };
        if object.kind_name() != "identifier" || matches!(m.text(object), "self" | "cls") {
            return false;
        }
        let Some(class) = self.instance_class(m, object) else {
            return false;
        };
        let method = m.text(method);
        if m.classes.iter().any(|c| c.name == class) {
            return m
                .functions
                .iter()
                .position(|f| {
                    f.name == method && f.parent.is_none() && f.class.as_deref() == Some(class)
                })
                .is_some_and(|f| self.returns_attached(m, f, d).is_some());
        }
        let Some((file, root)) = self.project.borrow().clone() else {
            return false;
        };
        let Some(import) = m
            .imports
            .iter()
            .find(|i| i.scope.is_none() && i.name == class)
        else {
            return false;
        };
        crate::python::project::method_returns_attached(&file, &root, &import.qualified, method)
    }

    /// The class every binding of `name` instantiates, if there is one: the bindings in the
    /// function around `name` when it binds it, else those at module level.
    pub(super) fn instance_class(&self, m: &PythonModel<'t>, name: Node<'t>) -> Option<&'t str> {
        let text = m.text(name);
        let scope = m.enclosing_function(name);
        let binds = |s: Option<usize>| -> Vec<Node<'t>> { self.assignments_to(s, text).to_vec() };
        let mut bindings = binds(scope);
        if bindings.is_empty() && scope.is_some() {
            if m.function_binds(scope?, text) {
                return None;
            }
            bindings = binds(None);
        }
        let mut class = None;
        for a in bindings {
            let right = a.field("right")?;
            let callee = right
                .field("function")
                .filter(|_| right.kind_name() == "call")?;
            if callee.kind_name() != "identifier" {
                return None;
            }
            let c = m.text(callee);
            if !c.starts_with(|ch: char| ch.is_ascii_uppercase()) || class.is_some_and(|k| k != c) {
                return None;
            }
            class = Some(c);
        }
        class
    }

    /// Does local function `f` return a graph-attached value (judged with its own `backward()`
    /// calls)? The `return` expression that does.
    pub fn returns_attached(&self, m: &PythonModel<'t>, f: usize, d: usize) -> Option<Node<'t>> {
        if let Some(known) = self.returns.borrow().get(&f) {
            return *known;
        }
        // Recursion through the call graph reads "not attached".
        self.returns.borrow_mut().insert(f, None);
        let backward: Vec<(Node<'t>, Option<Node<'t>>)> = self
            .backward
            .iter()
            .filter(|(b, _)| m.enclosing_function(*b) == Some(f))
            .copied()
            .collect();
        let found = m.functions[f].node.field("body").and_then(|body| {
            gpulint_syntax::descendants(body)
                .filter(|n| n.kind_name() == "return_statement")
                .filter(|n| m.enclosing_function(*n) == Some(f))
                .filter_map(|n| n.named_child(0))
                .find(|v| {
                    let items: Vec<Node<'t>> = match v.kind_name() {
                        "expression_list" | "tuple" => named_children(*v).collect(),
                        _ => vec![*v],
                    };
                    items.iter().any(|&i| {
                        matches!(self.flow_depth(m, i, &backward, d + 1), Flow::Attached(_))
                    })
                })
        });
        self.returns.borrow_mut().insert(f, found);
        found
    }

    /// `name` bound as the target of an enclosing `for` loop (in the same function) whose
    /// iterable holds graph-attached values: `for k, v in out.items():`.
    fn loop_target_flow(
        &self,
        m: &PythonModel<'t>,
        at: Node<'t>,
        name: &str,
        backward: &[(Node<'t>, Option<Node<'t>>)],
        d: usize,
    ) -> Flow<'t> {
        for lp in self.loops_around(m, at) {
            let (Some(left), Some(right)) = (lp.node.field("left"), lp.node.field("right")) else {
                continue;
            };
            let binds = gpulint_syntax::descendants(left)
                .any(|n| n.kind_name() == "identifier" && m.text(n) == name);
            if !binds {
                continue;
            }
            return match self.flow_depth(m, right, backward, d + 1) {
                f @ Flow::Attached(_) => f,
                _ => Flow::Unknown,
            };
        }
        Flow::Unknown
    }

    /// Is an item of `name` (`name[k] = ...`) assigned a detached value after `from` and before
    /// `to`, in the same function?
    fn entry_detached(
        &self,
        m: &PythonModel<'t>,
        name: &str,
        from: Node<'_>,
        to: Node<'_>,
        backward: &[(Node<'t>, Option<Node<'t>>)],
        d: usize,
    ) -> bool {
        let scope = m.enclosing_function(to);
        let lo = m
            .assignments
            .partition_point(|a| a.start_byte() < from.end_byte());
        m.assignments[lo..]
            .iter()
            .take_while(|a| a.end_byte() <= to.start_byte())
            .any(|&a| {
                a.kind_name() == "assignment"
                    && m.enclosing_function(a) == scope
                    && a.field("left").is_some_and(|l| {
                        l.kind_name() == "subscript"
                            && l.field("value").is_some_and(|v| m.text(v) == name)
                    })
                    && a.field("right").is_some_and(|r| {
                        matches!(self.flow_depth(m, r, backward, d + 1), Flow::Detached)
                    })
            })
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
        let own = self.assignments_in(scope);
        let hi = own.partition_point(|a| a.start_byte() < at.start_byte());
        for &a in own[..hi].iter().rev() {
            if a.end_byte() > at.start_byte() {
                continue;
            }
            let Some(left) = a.field("left") else {
                continue;
            };
            let plain = left.kind_name() == "identifier" && m.text(left) == name;
            let unpack = matches!(left.kind_name(), "pattern_list" | "tuple_pattern")
                && named_children(left).any(|c| c.kind_name() == "identifier" && m.text(c) == name);
            if plain || unpack {
                return Some((a, plain));
            }
        }
        None
    }
}

/// The name an expression is rooted at: `loss` for `loss`, `(loss / k)`, `loss * w`,
/// `out["loss"]`; `self.total` for an attribute chain of plain names.
pub fn root_name<'t>(m: &PythonModel<'t>, expr: Node<'_>) -> Option<&'t str> {
    let mut cur = expr;
    for _ in 0..MAX_FLOW_DEPTH {
        match cur.kind_name() {
            "identifier" | "attribute" => return Some(m.text(cur)),
            "parenthesized_expression" => cur = cur.named_child(0)?,
            // `out["loss"]`: the container that holds the loss.
            "subscript" => cur = cur.field("value")?,
            "binary_operator" => cur = cur.field("left")?,
            _ => return None,
        }
    }
    None
}

/// A function name that computes a loss: `criterion`, `loss_fn`, `compute_loss`,
/// `F.cross_entropy`, `nll_loss`.
pub fn is_loss_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    (n.contains("loss") && !n.contains("scale") && !n.contains("meter") && !n.contains("log"))
        || n.contains("criterion")
        || n.ends_with("cross_entropy")
}

/// A name that usually holds a model's output.
fn is_output_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    matches!(
        n.as_str(),
        "out"
            | "output"
            | "outputs"
            | "logits"
            | "pred"
            | "preds"
            | "y_pred"
            | "hidden"
            | "features"
    )
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
