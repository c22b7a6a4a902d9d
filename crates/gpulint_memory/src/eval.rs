//! Expressions of the interpreter: literals, names, operators and comprehensions; attributes
//! and subscripts in [`access`], calls of the file's own functions and classes in [`call`].

mod access;
mod call;

use super::interp::{Frame, Interp, MAX_NESTING, MAX_UNROLL};
use super::layer::Spec;
use super::value::Val;
use gpulint_semantic::python::{string_literal, Value};
use gpulint_syntax::named_children;
use gpulint_syntax::NodeExt;
use std::rc::Rc;
use tree_sitter::Node;

pub use crate::value::from_const;

impl<'a, 't> Interp<'a, 't> {
    pub fn eval(&mut self, frame: &mut Frame, e: Node<'_>) -> Val {
        if !self.tick() || self.nesting >= MAX_NESTING {
            return Val::Unknown(0);
        }
        self.nesting += 1;
        let v = self.eval_inner(frame, e);
        self.nesting -= 1;
        v
    }

    fn eval_inner(&mut self, frame: &mut Frame, e: Node<'_>) -> Val {
        match e.kind_name() {
            "integer" | "float" | "true" | "false" | "none" => self
                .pm
                .const_value(e)
                .map(|v| from_const(&v))
                .unwrap_or(Val::Unknown(0)),
            "string" | "concatenated_string" => match string_literal(e, self.src) {
                Some(s) => Val::Str(Rc::from(s.as_str())),
                None => self.unknown(e, "formatted string"),
            },
            "identifier" => {
                let name = self.text(e);
                self.lookup(frame, name, e)
            }
            "parenthesized_expression" => match e.named_child(0) {
                Some(inner) => self.eval(frame, inner),
                None => Val::Tuple(Rc::new(Vec::new())),
            },
            "tuple" | "expression_list" => {
                let items = self.items(frame, e);
                Val::Tuple(Rc::new(items))
            }
            "list" => {
                let items = self.items(frame, e);
                self.lists.push(items);
                Val::List(self.lists.len() - 1)
            }
            "list_comprehension" | "generator_expression" => {
                let items = self.comprehension(frame, e);
                match items {
                    Ok(items) => {
                        self.lists.push(items);
                        Val::List(self.lists.len() - 1)
                    }
                    Err(v) => v,
                }
            }
            "attribute" => self.attribute(frame, e),
            "subscript" => self.subscript(frame, e),
            "call" => self.call(frame, e),
            "binary_operator" => {
                let (Some(l), Some(r), Some(op)) =
                    (e.field("left"), e.field("right"), e.field("operator"))
                else {
                    return Val::Unknown(0);
                };
                let lv = self.eval(frame, l);
                let rv = self.eval(frame, r);
                let op = self.text(op);
                self.binary(frame, e, op, lv, rv)
            }
            "unary_operator" => {
                let v = e
                    .field("argument")
                    .map(|a| self.eval(frame, a))
                    .unwrap_or(Val::Unknown(0));
                let op = e.field("operator").map(|o| self.text(o)).unwrap_or("");
                match (op, v) {
                    ("-", Val::Int(i)) => Val::Int(-i),
                    ("-", Val::Float(f)) => Val::Float(-f),
                    ("+", v @ (Val::Int(_) | Val::Float(_))) => v,
                    (_, v) => v.unknown_or(0),
                }
            }
            "not_operator" => {
                let v = e
                    .field("argument")
                    .map(|a| self.eval(frame, a))
                    .unwrap_or(Val::Unknown(0));
                v.truthy().map(|b| Val::Bool(!b)).unwrap_or(Val::Unknown(0))
            }
            "boolean_operator" => {
                let (Some(l), Some(r)) = (e.field("left"), e.field("right")) else {
                    return Val::Unknown(0);
                };
                let is_and = e.field("operator").is_some_and(|o| self.text(o) == "and");
                let lv = self.eval(frame, l);
                match (lv.truthy(), is_and) {
                    (Some(false), true) | (Some(true), false) => lv,
                    (Some(_), _) => self.eval(frame, r),
                    (None, _) => Val::Unknown(0),
                }
            }
            "comparison_operator" => self.comparison(frame, e),
            "conditional_expression" => {
                let parts: Vec<Node> = named_children(e).collect();
                if parts.len() != 3 {
                    return Val::Unknown(0);
                }
                let cond = self.eval(frame, parts[1]);
                match cond.truthy() {
                    Some(true) => self.eval(frame, parts[0]),
                    Some(false) => self.eval(frame, parts[2]),
                    None => {
                        let a = self.eval(frame, parts[0]);
                        let b = self.eval(frame, parts[2]);
                        if a.same(&b) {
                            a
                        } else {
                            Val::Unknown(0)
                        }
                    }
                }
            }
            "assignment" => {
                // `a = b = v` parses as nested assignments.
                let (Some(l), Some(r)) = (e.field("left"), e.field("right")) else {
                    return Val::Unknown(0);
                };
                let v = self.eval(frame, r);
                self.assign(frame, l, v.clone());
                v
            }
            "named_expression" => {
                let (Some(n), Some(v)) = (e.field("name"), e.field("value")) else {
                    return Val::Unknown(0);
                };
                let v = self.eval(frame, v);
                self.assign(frame, n, v.clone());
                v
            }
            "keyword_argument" | "lambda" | "dictionary" | "set" | "await" => Val::Unknown(0),
            _ => Val::Unknown(0),
        }
    }

    fn items(&mut self, frame: &mut Frame, e: Node<'_>) -> Vec<Val> {
        let mut out = Vec::new();
        for c in named_children(e) {
            match c.kind_name() {
                "comment" => {}
                "list_splat" => {
                    let v = c
                        .named_child(0)
                        .map(|x| self.eval(frame, x))
                        .unwrap_or(Val::Unknown(0));
                    match self.iterate(&v) {
                        Some(items) => out.extend(items),
                        None => out.push(Val::Unknown(0)),
                    }
                }
                _ => out.push(self.eval(frame, c)),
            }
        }
        out
    }

    fn comprehension(&mut self, frame: &mut Frame, e: Node<'_>) -> Result<Vec<Val>, Val> {
        let body = e.field("body").ok_or(Val::Unknown(0))?;
        let clauses: Vec<Node> = named_children(e)
            .filter(|c| c.kind_name() == "for_in_clause" || c.kind_name() == "if_clause")
            .collect();
        let fors = clauses
            .iter()
            .filter(|c| c.kind_name() == "for_in_clause")
            .count();
        if fors != 1 || clauses.first().map(|c| c.kind_name()) != Some("for_in_clause") {
            return Err(self.unknown(e, "nested comprehension"));
        }
        let clause = clauses[0];
        let (Some(left), Some(right)) = (clause.field("left"), clause.field("right")) else {
            return Err(Val::Unknown(0));
        };
        let iterable = self.eval(frame, right);
        let items = self
            .iterate(&iterable)
            .ok_or_else(|| iterable.clone().unknown_or(0))?;
        let mut scope = frame.clone();
        scope.func = scope.func.or(Some(usize::MAX));
        scope.id = self.fresh_frame_id();
        let mut out = Vec::new();
        for item in items {
            self.assign(&mut scope, left, item);
            let mut keep = true;
            for cond in clauses.iter().skip(1) {
                let c = cond
                    .named_child(0)
                    .map(|c| self.eval(&mut scope, c))
                    .unwrap_or(Val::Unknown(0));
                match c.truthy() {
                    Some(b) => keep &= b,
                    None => return Err(Val::Unknown(0)),
                }
            }
            if keep {
                out.push(self.eval(&mut scope, body));
            }
        }
        Ok(out)
    }

    fn comparison(&mut self, frame: &mut Frame, e: Node<'_>) -> Val {
        let operands: Vec<Node> = named_children(e).collect();
        if operands.len() != 2 {
            return Val::Unknown(0);
        }
        let op = e.field("operators").map(|o| o.kind_name()).unwrap_or("");
        let a = self.eval(frame, operands[0]);
        let b = self.eval(frame, operands[1]);
        let known = |v: &Val| !matches!(v, Val::Unknown(_) | Val::Tensor(_) | Val::Batch);
        if !known(&a) || !known(&b) {
            return Val::Unknown(0);
        }
        let res = match op {
            "==" | "is" => Some(a.same(&b) || num_eq(&a, &b)),
            "!=" | "is not" => Some(!(a.same(&b) || num_eq(&a, &b))),
            "<" | "<=" | ">" | ">=" => match (a.float(), b.float()) {
                (Some(x), Some(y)) => Some(match op {
                    "<" => x < y,
                    "<=" => x <= y,
                    ">" => x > y,
                    _ => x >= y,
                }),
                _ => None,
            },
            "in" | "not in" => {
                let items = self.iterate(&b);
                items.map(|items| items.iter().any(|i| i.same(&a)) == (op == "in"))
            }
            _ => None,
        };
        res.map(Val::Bool).unwrap_or(Val::Unknown(0))
    }

    pub fn binary(&mut self, _frame: &mut Frame, at: Node<'_>, op: &str, l: Val, r: Val) -> Val {
        match (&l, &r) {
            (
                Val::Int(_) | Val::Float(_) | Val::Bool(_),
                Val::Int(_) | Val::Float(_) | Val::Bool(_),
            ) => {
                let (Some(lc), Some(rc)) = (to_const(&l), to_const(&r)) else {
                    return Val::Unknown(0);
                };
                gpulint_semantic::python::fold_binary(op, lc, rc)
                    .map(|v| from_const(&v))
                    .unwrap_or(Val::Unknown(0))
            }
            (Val::Str(a), Val::Str(b)) if op == "+" => {
                Val::Str(Rc::from(format!("{a}{b}").as_str()))
            }
            (Val::Tuple(a), Val::Tuple(b)) if op == "+" => {
                Val::Tuple(Rc::new([a.to_vec(), b.to_vec()].concat()))
            }
            (Val::List(a), Val::List(b)) if op == "+" => {
                let v = [self.lists[*a].clone(), self.lists[*b].clone()].concat();
                self.lists.push(v);
                Val::List(self.lists.len() - 1)
            }
            (Val::List(a), Val::Int(n)) | (Val::Int(n), Val::List(a))
                if op == "*" && *n >= 0 && (*n as usize) <= MAX_UNROLL =>
            {
                let v: Vec<Val> = (0..*n).flat_map(|_| self.lists[*a].clone()).collect();
                self.lists.push(v);
                Val::List(self.lists.len() - 1)
            }
            (Val::Tensor(a), Val::Tensor(b)) if matches!(op, "+" | "-" | "*" | "/") => {
                let merge = match op {
                    "+" => super::layer::Merge::Add,
                    "-" => super::layer::Merge::Sub,
                    _ => super::layer::Merge::Mul,
                };
                let (a, b) = (*a, *b);
                self.op(at, op_name(op), Spec::Merge(merge), &[a, b], false)
            }
            (Val::Tensor(t), Val::Int(_) | Val::Float(_))
            | (Val::Int(_) | Val::Float(_), Val::Tensor(t))
                if matches!(op, "+" | "-" | "*" | "/" | "**") =>
            {
                let t = *t;
                self.op(at, op_name(op), Spec::Identity, &[t], false)
            }
            (Val::Unknown(_), _) => l,
            (_, Val::Unknown(_)) => r,
            _ => self.unknown(at, format!("`{}` is not understood", self.snippet(at))),
        }
    }
}

fn num_eq(a: &Val, b: &Val) -> bool {
    matches!((a.float(), b.float()), (Some(x), Some(y)) if x == y)
}

fn op_name(op: &str) -> &'static str {
    match op {
        "+" => "add",
        "-" => "sub",
        "*" => "mul",
        "/" => "div",
        _ => "pow",
    }
}

fn to_const(v: &Val) -> Option<Value> {
    match v {
        Val::Int(i) => Some(Value::Int(*i)),
        Val::Float(f) => Some(Value::Float(*f)),
        Val::Bool(b) => Some(Value::Int(*b as i128)),
        _ => None,
    }
}
