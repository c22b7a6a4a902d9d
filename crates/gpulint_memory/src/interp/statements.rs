//! Statements: blocks, assignments and unpacking, `if` chains, unrolled `for` loops, `with`,
//! `try` and nested definitions.

use super::{Frame, Interp, MAX_NESTING, MAX_UNROLL};
use crate::value::{ObjKind, Val};
use gpulint_syntax::named_children;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

/// How a statement ended.
pub enum Flow {
    Normal,
    Return(Val),
    Break,
    Continue,
}

impl<'a, 't> Interp<'a, 't> {
    /// Binds an assignment target.
    pub fn assign(&mut self, frame: &mut Frame, target: Node<'_>, v: Val) {
        if self.nesting >= MAX_NESTING {
            return;
        }
        self.nesting += 1;
        self.assign_inner(frame, target, v);
        self.nesting -= 1;
    }

    fn assign_inner(&mut self, frame: &mut Frame, target: Node<'_>, v: Val) {
        match target.kind_name() {
            "identifier" => {
                let name = self.text(target);
                self.bind(frame, name, v);
            }
            "pattern_list" | "tuple_pattern" | "list_pattern" | "tuple" | "list"
            | "expression_list" => {
                let targets: Vec<Node> = named_children(target)
                    .filter(|n| n.kind_name() != "comment")
                    .collect();
                let items = self.unpack(&v, targets.len());
                for (t, item) in targets.into_iter().zip(items) {
                    self.assign(frame, t, item);
                }
            }
            "parenthesized_expression" => {
                if let Some(inner) = target.named_child(0) {
                    self.assign(frame, inner, v);
                }
            }
            "attribute" => {
                let (Some(obj), Some(attr)) = (target.field("object"), target.field("attribute"))
                else {
                    return;
                };
                let attr = self.text(attr).to_string();
                let owner = self.eval(frame, obj);
                let v = if self.uncertain > 0 {
                    self.unknown(
                        target,
                        format!(
                            "`{}` is assigned under a condition that depends on run-time values",
                            self.text(target)
                        ),
                    )
                } else {
                    v
                };
                match owner {
                    Val::Obj(o) => self.objs[o].set_attr(&attr, v),
                    Val::Layer(l) if attr == "trainable" && v.truthy() == Some(false) => {
                        self.layers[l].frozen = true;
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }

    /// `a, b = v`.
    pub fn unpack(&mut self, v: &Val, n: usize) -> Vec<Val> {
        let items: Option<Vec<Val>> = match v {
            Val::Tuple(t) => Some(t.to_vec()),
            Val::List(l) => Some(self.lists[*l].clone()),
            Val::Dims(t) => {
                let mut d = vec![Val::Batch];
                d.extend(self.tensors[*t].shape.iter().map(|x| Val::Int(*x as i128)));
                Some(d)
            }
            _ => None,
        };
        match items {
            Some(items) if items.len() == n => items,
            _ => vec![v.clone().unknown_or(0); n],
        }
    }

    /// Runs a block of statements (a module or a function body).
    pub fn block(&mut self, block: Node<'_>, frame: &mut Frame) -> Flow {
        if self.nesting >= MAX_NESTING {
            return Flow::Return(Val::Unknown(0));
        }
        self.nesting += 1;
        let flow = self.block_inner(block, frame);
        self.nesting -= 1;
        flow
    }

    fn block_inner(&mut self, block: Node<'_>, frame: &mut Frame) -> Flow {
        for stmt in named_children(block) {
            if !self.tick() {
                return Flow::Return(Val::Unknown(0));
            }
            match self.statement(stmt, frame) {
                Flow::Normal => {}
                other => return other,
            }
        }
        Flow::Normal
    }

    fn statement(&mut self, stmt: Node<'_>, frame: &mut Frame) -> Flow {
        match stmt.kind_name() {
            "expression_statement" => {
                for e in named_children(stmt) {
                    match e.kind_name() {
                        "assignment" => self.assignment(e, frame),
                        "augmented_assignment" => {
                            if let (Some(l), Some(r)) = (e.field("left"), e.field("right")) {
                                let op = e
                                    .field("operator")
                                    .map(|o| self.text(o).trim_end_matches('='))
                                    .unwrap_or("");
                                let lv = self.eval(frame, l);
                                let rv = self.eval(frame, r);
                                let v = self.binary(frame, e, op, lv, rv);
                                self.assign(frame, l, v);
                            }
                        }
                        _ => {
                            self.eval(frame, e);
                        }
                    }
                }
                Flow::Normal
            }
            "return_statement" => {
                let v = match stmt.named_child(0) {
                    Some(e) => self.eval(frame, e),
                    None => Val::None,
                };
                Flow::Return(v)
            }
            "if_statement" => self.if_statement(stmt, frame),
            "for_statement" => self.for_statement(stmt, frame),
            "while_statement" => {
                if let Some(body) = stmt.field("body") {
                    self.opaque_loop(body, frame, None);
                }
                Flow::Normal
            }
            "with_statement" => {
                let clause = named_children(stmt).find(|n| n.kind_name() == "with_clause");
                for item in clause
                    .into_iter()
                    .flat_map(named_children)
                    .filter(|n| n.kind_name() == "with_item")
                {
                    if let Some(v) = item.field("value") {
                        if v.kind_name() == "as_pattern" {
                            if let (Some(e), Some(t)) = (v.named_child(0), v.field("alias")) {
                                let val = self.eval(frame, e);
                                let t = t.named_child(0).unwrap_or(t);
                                self.assign(frame, t, val);
                            }
                        } else {
                            self.eval(frame, v);
                        }
                    }
                }
                match stmt.field("body") {
                    Some(body) => self.block(body, frame),
                    None => Flow::Normal,
                }
            }
            "try_statement" => {
                let flow = match stmt.field("body") {
                    Some(body) => self.block(body, frame),
                    None => Flow::Normal,
                };
                for clause in named_children(stmt) {
                    if matches!(clause.kind_name(), "else_clause" | "finally_clause") {
                        if let Some(body) = clause.field("body").or_else(|| {
                            clause.named_child(clause.named_child_count().saturating_sub(1) as u32)
                        }) {
                            if let Flow::Return(v) = self.block(body, frame) {
                                return Flow::Return(v);
                            }
                        }
                    }
                }
                flow
            }
            "function_definition" | "decorated_definition" if frame.func.is_some() => {
                let def = if stmt.kind_name() == "decorated_definition" {
                    stmt.field("definition")
                } else {
                    Some(stmt)
                };
                if let Some(def) = def.filter(|d| d.kind_name() == "function_definition") {
                    if let Some(f) = self
                        .pm
                        .functions
                        .iter()
                        .position(|f| f.node.id() == def.id())
                    {
                        let name = self.pm.functions[f].name.clone();
                        self.bind(frame, &name, Val::Func(f));
                    }
                }
                Flow::Normal
            }
            "break_statement" => Flow::Break,
            "continue_statement" => Flow::Continue,
            "delete_statement" => Flow::Normal,
            _ => Flow::Normal,
        }
    }

    fn assignment(&mut self, e: Node<'_>, frame: &mut Frame) {
        let Some(left) = e.field("left") else {
            return;
        };
        let Some(right) = e.field("right") else {
            return;
        };
        let v = self.eval(frame, right);
        // `a = b = v`: the right side is itself an assignment.
        self.assign(frame, left, v);
    }

    fn if_statement(&mut self, stmt: Node<'_>, frame: &mut Frame) -> Flow {
        // Build the chain: (condition, body) ..., else body.
        let mut arms: Vec<(Option<Node>, Node)> = Vec::new();
        if let (Some(c), Some(b)) = (stmt.field("condition"), stmt.field("consequence")) {
            arms.push((Some(c), b));
        }
        for alt in named_children(stmt) {
            match alt.kind_name() {
                "elif_clause" => {
                    if let (Some(c), Some(b)) = (alt.field("condition"), alt.field("consequence")) {
                        arms.push((Some(c), b));
                    }
                }
                "else_clause" => {
                    if let Some(b) = alt.field("body") {
                        arms.push((None, b));
                    }
                }
                _ => {}
            }
        }
        for (i, (cond, body)) in arms.iter().enumerate() {
            let truth = match cond {
                Some(c) => {
                    let v = self.eval(frame, *c);
                    v.truthy()
                }
                None => Some(true),
            };
            match truth {
                Some(true) => return self.block(*body, frame),
                Some(false) => continue,
                None => {
                    // Unknown: run every remaining arm on a copy, then merge.
                    let rest: Vec<Node> = arms[i..].iter().map(|(_, b)| *b).collect();
                    let has_else = arms.last().is_some_and(|(c, _)| c.is_none());
                    return self.uncertain_arms(&rest, has_else, frame);
                }
            }
        }
        Flow::Normal
    }

    fn for_statement(&mut self, stmt: Node<'_>, frame: &mut Frame) -> Flow {
        let (Some(left), Some(right), Some(body)) =
            (stmt.field("left"), stmt.field("right"), stmt.field("body"))
        else {
            return Flow::Normal;
        };
        let iterable = self.eval(frame, right);
        let Some(items) = self.iterate(&iterable) else {
            self.opaque_loop(body, frame, Some(left));
            return Flow::Normal;
        };
        for item in items {
            self.assign(frame, left, item);
            match self.block(body, frame) {
                Flow::Break => break,
                Flow::Return(v) => return Flow::Return(v),
                _ => {}
            }
        }
        Flow::Normal
    }

    /// The items of an iterable value, when known and few enough to unroll.
    pub fn iterate(&self, v: &Val) -> Option<Vec<Val>> {
        let items = match v {
            Val::Tuple(t) => t.to_vec(),
            Val::List(l) => self.lists[*l].clone(),
            Val::Obj(o) => match &self.objs[*o].kind {
                ObjKind::Sequential { items, .. } | ObjKind::ModuleList { items } => items.clone(),
                _ => return None,
            },
            _ => return None,
        };
        (items.len() <= MAX_UNROLL).then_some(items)
    }
}
