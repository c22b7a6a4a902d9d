//! Values kept across loop iterations: graph-attached tensors accumulated (`acc += loss`) or
//! appended (`xs.append(out)`) into something that outlives an iteration, and targets bound
//! afresh in each one.

use super::{Flow, Loop, Training};
use crate::hash::HashSet;
use crate::python::PythonModel;
use gpulint_syntax::named_children;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

/// Does `expr` contain the name (or dotted target) `target`?
pub fn mentions(m: &PythonModel<'_>, expr: Node<'_>, target: &str) -> bool {
    gpulint_syntax::descendants(expr)
        .any(|n| matches!(n.kind_name(), "identifier" | "attribute") && m.text(n) == target)
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

    /// Is `target` (its text) bound afresh inside the loop body (a plain assignment that does
    /// not read it, a `for` target, or a `.clear()` / `del` of its contents)? The targets of a
    /// loop are found once, in one pass over its body: rules ask about every append and every
    /// accumulation of a loop, and a pass per question grows with the square of the body.
    pub fn rebound_in(&self, m: &PythonModel<'_>, lp: &Loop<'_>, target: &str) -> bool {
        let known = self.rebound.borrow().get(&lp.node.id()).cloned();
        let rebound = known.unwrap_or_else(|| {
            let found = std::rc::Rc::new(rebound_targets(m, lp));
            self.rebound
                .borrow_mut()
                .insert(lp.node.id(), std::rc::Rc::clone(&found));
            found
        });
        rebound.contains(target)
    }
}

/// The targets (their texts) bound afresh inside the body of `lp`: the target of a plain
/// assignment (or a name of its tuple target) whose value does not read it, a `for` target, an
/// object whose `.clear()` is called, and every name a `del` mentions.
fn rebound_targets(m: &PythonModel<'_>, lp: &Loop<'_>) -> HashSet<String> {
    let mut found = HashSet::default();
    let (s, e) = (lp.node.start_byte(), lp.node.end_byte());
    let Some(body) = lp.node.field("body") else {
        return found;
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
        let mut targets = vec![m.text(left)];
        if left.kind_name() == "pattern_list" || left.kind_name() == "tuple_pattern" {
            targets.extend(named_children(left).map(|c| m.text(c)));
        }
        for t in targets {
            if !found.contains(t) && !mentions(m, right, t) {
                found.insert(t.to_string());
            }
        }
    }
    for n in gpulint_syntax::descendants(body) {
        match n.kind_name() {
            "call" => {
                let cleared = n.field("function").filter(|f| {
                    f.kind_name() == "attribute"
                        && f.field("attribute").is_some_and(|a| m.text(a) == "clear")
                });
                if let Some(o) = cleared.and_then(|f| f.field("object")) {
                    found.insert(m.text(o).to_string());
                }
            }
            "delete_statement" => found.extend(
                gpulint_syntax::descendants(n)
                    .filter(|d| matches!(d.kind_name(), "identifier" | "attribute"))
                    .map(|d| m.text(d).to_string()),
            ),
            "for_statement" => {
                if let Some(l) = n.field("left") {
                    found.insert(m.text(l).to_string());
                }
            }
            _ => {}
        }
    }
    found
}

impl<'t> Training<'t> {
    /// Lightning's contract: what `training_step` returns holds the loss that Lightning
    /// backpropagates, so it carries the graph. When `value` (a name) sits in the
    /// `training_step` of a `LightningModule` subclass that returns it, the `return` statement.
    pub fn lightning_step_result(&self, m: &PythonModel<'t>, value: Node<'_>) -> Option<Node<'t>> {
        if value.kind_name() != "identifier" {
            return None;
        }
        let f = m.enclosing_function(value)?;
        let func = &m.functions[f];
        if func.name != "training_step" {
            return None;
        }
        let class = func.class.as_deref()?;
        let lightning = m.classes.iter().any(|c| {
            c.name == class
                && c.node.field("superclasses").is_some_and(|b| {
                    named_children(b).any(|x| {
                        let t = m.text(x);
                        t == "LightningModule" || t.ends_with(".LightningModule")
                    })
                })
        });
        if !lightning {
            return None;
        }
        let name = m.text(value);
        gpulint_syntax::descendants(func.node).find(|n| {
            n.kind_name() == "return_statement"
                && m.enclosing_function(*n) == Some(f)
                && n.named_child(0).is_some_and(|r| m.text(r) == name)
        })
    }
}

/// A value `training_step` returns besides the loss that Lightning keeps for
/// `training_epoch_end`: see [`Training::lightning_epoch_outputs`].
#[derive(Debug, Clone, Copy)]
pub struct EpochOutput<'t> {
    /// The `key: value` pair of the returned dict.
    pub pair: Node<'t>,
    /// The value, graph-attached.
    pub value: Node<'t>,
    /// Where the graph comes from.
    pub source: Node<'t>,
    /// The `training_epoch_end` method.
    pub epoch_end: Node<'t>,
}

impl<'t> Training<'t> {
    /// Lightning (before 2.0) keeps what every `training_step` returns in a list for the whole
    /// epoch when the module overrides `training_epoch_end(outputs)`. In a `LightningModule`
    /// subclass that defines both, the entries of a returned dict literal, other than the
    /// `"loss"` Lightning backpropagates (and detaches for the list), whose value is
    /// graph-attached: each is kept, with its graph and the step's activations, until the
    /// epoch ends.
    pub fn lightning_epoch_outputs(&self, m: &PythonModel<'t>) -> Vec<EpochOutput<'t>> {
        let mut out = Vec::new();
        for (f, func) in m.functions.iter().enumerate() {
            if func.name != "training_step" || func.parent.is_some() {
                continue;
            }
            let Some(class) = func.class.as_deref() else {
                continue;
            };
            if !is_lightning_module(m, class) {
                continue;
            }
            let Some(epoch_end) = m
                .functions
                .iter()
                .find(|g| g.name == "training_epoch_end" && g.class.as_deref() == Some(class))
            else {
                continue;
            };
            let backward: Vec<(Node<'t>, Option<Node<'t>>)> = self
                .backward
                .iter()
                .filter(|(b, _)| m.enclosing_function(*b) == Some(f))
                .copied()
                .collect();
            for ret in gpulint_syntax::descendants(func.node)
                .filter(|n| n.kind_name() == "return_statement")
                .filter(|n| m.enclosing_function(*n) == Some(f))
            {
                let Some(dict) = ret.named_child(0).filter(|d| d.kind_name() == "dictionary")
                else {
                    continue;
                };
                for pair in named_children(dict).filter(|p| p.kind_name() == "pair") {
                    let (Some(key), Some(value)) = (pair.field("key"), pair.field("value")) else {
                        continue;
                    };
                    let key = crate::python::string_literal(key, m.source);
                    if key.as_deref().is_none_or(|k| k == "loss" || k == "hiddens") {
                        continue;
                    }
                    if self.grad_free(value).is_some() {
                        continue;
                    }
                    if let Flow::Attached(source) = self.flow(m, value, &backward) {
                        out.push(EpochOutput {
                            pair,
                            value,
                            source,
                            epoch_end: epoch_end.node,
                        });
                    }
                }
            }
        }
        out
    }
}

/// Is `class` (defined in `m`) a direct `LightningModule` subclass?
fn is_lightning_module(m: &PythonModel<'_>, class: &str) -> bool {
    m.classes.iter().any(|c| {
        c.name == class
            && c.node.field("superclasses").is_some_and(|b| {
                named_children(b).any(|x| {
                    let t = m.text(x);
                    t == "LightningModule" || t.ends_with(".LightningModule")
                })
            })
    })
}
