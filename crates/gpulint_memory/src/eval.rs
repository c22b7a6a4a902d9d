//! Expressions of the interpreter: literals, names, attributes, subscripts, operators,
//! comprehensions and calls of the file's own functions and classes.

use super::interp::{Frame, Interp, MAX_NESTING, MAX_UNROLL};
use super::layer::Spec;
use super::value::{Args, Fw, Obj, ObjKind, Val};
use gpulint_semantic::python::{string_literal, Value};
use gpulint_syntax::named_children;
use gpulint_syntax::NodeExt;
use std::rc::Rc;
use tree_sitter::Node;

/// A folded constant of the semantic model as an interpreter value.
pub fn from_const(v: &Value) -> Val {
    match v {
        Value::Int(i) => Val::Int(*i),
        Value::Float(f) => Val::Float(*f),
        Value::Str(s) => Val::Str(Rc::from(s.as_str())),
        Value::Bool(b) => Val::Bool(*b),
        Value::None => Val::None,
        Value::Tuple(t) => Val::Tuple(Rc::new(t.iter().map(from_const).collect())),
    }
}

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

    fn attribute(&mut self, frame: &mut Frame, e: Node<'_>) -> Val {
        let (Some(obj), Some(attr)) = (e.field("object"), e.field("attribute")) else {
            return Val::Unknown(0);
        };
        let name = self.text(attr);
        let owner = self.eval(frame, obj);
        match owner {
            Val::Obj(o) => {
                if let Some(v) = self.objs[o].attr(name) {
                    return v.clone();
                }
                if let ObjKind::Instance { class, .. } = self.objs[o].kind {
                    if let Some(f) = self.find_method(class, name) {
                        return Val::Method(o, f);
                    }
                    let v = self.class_attribute(class, name);
                    if !v.is_unknown() {
                        return v;
                    }
                }
                Val::BoundQ(Box::new(Val::Obj(o)), Rc::from(name))
            }
            Val::Q(q) => Val::Q(Rc::from(format!("{q}.{name}").as_str())),
            Val::Tensor(t) => match name {
                "shape" => Val::Dims(t),
                "ndim" => Val::Int(self.tensors[t].shape.len() as i128 + 1),
                "T" | "dtype" | "device" | "data" | "grad" => Val::Unknown(0),
                _ => Val::BoundQ(Box::new(Val::Tensor(t)), Rc::from(name)),
            },
            Val::Unknown(_) => {
                if let Some(v) = self.pm.const_value(e) {
                    return from_const(&v);
                }
                owner
            }
            Val::Class(c) => match self.find_method(c, name) {
                Some(f) => Val::Func(f),
                None => self.class_attribute(c, name),
            },
            other @ (Val::Layer(_)
            | Val::List(_)
            | Val::Super
            | Val::Dims(_)
            | Val::Optimizer(_)
            | Val::Str(_)) => {
                if let Val::Layer(l) = other {
                    if let Ok(Spec::Dense { units, .. }) = &self.layers[l].spec {
                        if name == "out_features" {
                            return Val::Int(*units as i128);
                        }
                    }
                }
                Val::BoundQ(Box::new(other), Rc::from(name))
            }
            _ => Val::Unknown(0),
        }
    }

    /// A class-level constant (`expansion = 4` in the class body), searching local bases.
    pub fn class_attribute(&mut self, class: usize, name: &str) -> Val {
        let mut c = Some(class);
        for _ in 0..8 {
            let Some(cls) = c else {
                break;
            };
            let body = self.classes[cls].node.field("body");
            let found = body.and_then(|b| {
                named_children(b)
                    .filter(|s| s.kind_name() == "expression_statement")
                    .find_map(|s| {
                        let a = s.named_child(0).filter(|a| a.kind_name() == "assignment")?;
                        let left = a.field("left")?;
                        (left.kind_name() == "identifier" && self.text(left) == name)
                            .then_some(a.field("right")?)
                    })
            });
            if let Some(value) = found {
                let mut module = Frame::default();
                return self.eval(&mut module, value);
            }
            c = self.classes[cls].bases.iter().find_map(|b| {
                if let Val::Class(j) = b {
                    Some(*j)
                } else {
                    None
                }
            });
        }
        Val::Unknown(0)
    }

    fn subscript(&mut self, frame: &mut Frame, e: Node<'_>) -> Val {
        let Some(value) = e.field("value") else {
            return Val::Unknown(0);
        };
        let v = self.eval(frame, value);
        let mut cursor = e.walk();
        let idx: Vec<Node> = e.children_by_field_name("subscript", &mut cursor).collect();
        if let Val::Tensor(t) = v {
            return self.index_tensor(frame, e, t, &idx);
        }
        if idx.len() != 1 {
            return Val::Unknown(0);
        }
        let items: Vec<Val> = match &v {
            Val::Tuple(t) => t.to_vec(),
            Val::List(l) => self.lists[*l].clone(),
            Val::Dims(t) => {
                let mut d = vec![Val::Batch];
                d.extend(self.tensors[*t].shape.iter().map(|x| Val::Int(*x as i128)));
                d
            }
            Val::Obj(o) => match &self.objs[*o].kind {
                ObjKind::Sequential { items, .. } | ObjKind::ModuleList { items } => items.clone(),
                _ => return Val::Unknown(0),
            },
            Val::Unknown(_) => {
                return self.pm.const_value(e).map(|c| from_const(&c)).unwrap_or(v);
            }
            _ => return Val::Unknown(0),
        };
        let i = idx[0];
        if i.kind_name() == "slice" {
            let parts: Vec<Option<i128>> = slice_parts(self, frame, i);
            let n = items.len() as i128;
            let norm = |x: i128| if x < 0 { (n + x).max(0) } else { x.min(n) };
            let start = parts.first().copied().flatten().map(norm).unwrap_or(0);
            let stop = parts.get(1).copied().flatten().map(norm).unwrap_or(n);
            let out: Vec<Val> = items
                .get(start as usize..stop.max(start) as usize)
                .map(|s| s.to_vec())
                .unwrap_or_default();
            return Val::Tuple(Rc::new(out));
        }
        let Some(k) = self.eval(frame, i).int() else {
            return Val::Unknown(0);
        };
        let n = items.len() as i128;
        let k = if k < 0 { n + k } else { k };
        items
            .get(k as usize)
            .cloned()
            .filter(|_| (0..n).contains(&k))
            .unwrap_or(Val::Unknown(0))
    }

    /// `x[:, -1, :]`: the batch axis kept whole, the others sliced or indexed.
    fn index_tensor(&mut self, frame: &mut Frame, e: Node<'_>, t: usize, idx: &[Node<'_>]) -> Val {
        let full = |n: &Node| n.kind_name() == "slice" && n.named_child_count() == 0;
        if idx.is_empty() || !full(&idx[0]) {
            return self.unknown(
                e,
                format!("indexing `{}` across the batch", self.snippet(e)),
            );
        }
        let mut cur = t;
        let mut dim = 0usize;
        for i in &idx[1..] {
            if full(i) {
                dim += 1;
                continue;
            }
            if i.kind_name() == "ellipsis" {
                return self.unknown(e, "`...` indexing");
            }
            let Some(k) = self.eval(frame, *i).int() else {
                return self.unknown(e, format!("index in `{}`", self.snippet(e)));
            };
            match self.op(
                e,
                "index",
                Spec::Select {
                    dim,
                    index: k as i64,
                },
                &[cur],
                true,
            ) {
                Val::Tensor(n) => cur = n,
                other => return other,
            }
        }
        Val::Tensor(cur)
    }

    fn call(&mut self, frame: &mut Frame, e: Node<'_>) -> Val {
        let Some(func) = e.field("function") else {
            return Val::Unknown(0);
        };
        let callee = self.eval(frame, func);
        let args = self.args(frame, e);
        if func.kind_name() == "attribute" && matches!(callee, Val::Unknown(_)) {
            // `ds.batch(64)`, `datagen.flow(x, y, batch_size=64)` on pipelines the interpreter
            // does not model.
            let method = func.field("attribute").map(|a| self.text(a)).unwrap_or("");
            match method {
                "batch" | "padded_batch" => {
                    self.batch_source(e, args.get(0, "batch_size"), None, "`Dataset.batch(...)`")
                }
                "flow" | "flow_from_directory" | "flow_from_dataframe" => self.batch_source(
                    e,
                    args.kw("batch_size"),
                    Some(32),
                    "`ImageDataGenerator.flow(...)`",
                ),
                _ => {}
            }
        }
        let reasons: Vec<Val> = args
            .pos
            .iter()
            .filter(|v| matches!(v, Val::Unknown(r) if *r > 0))
            .cloned()
            .collect();
        match self.call_value(callee, args, e) {
            // Keep the first reason an argument was unknown.
            Val::Unknown(0) => reasons.into_iter().next().unwrap_or(Val::Unknown(0)),
            v => v,
        }
    }

    /// Records a place that sets a batch size.
    pub fn batch_source(
        &mut self,
        call: Node<'_>,
        value: Option<&Val>,
        default: Option<u64>,
        what: &str,
    ) {
        let node = self.keyword_value(call, "batch_size").or_else(|| {
            call.field("arguments").and_then(|a| {
                named_children(a)
                    .find(|n| n.kind_name() != "keyword_argument" && n.kind_name() != "comment")
            })
        });
        let (value, span) = match value {
            None => (default, (call.start_byte(), call.end_byte())),
            Some(v) => (
                v.int().filter(|n| *n > 0).map(|n| n as u64),
                node.map(|n| (n.start_byte(), n.end_byte()))
                    .unwrap_or((call.start_byte(), call.end_byte())),
            ),
        };
        let left =
            gpulint_syntax::ancestor_of_kind(call, &["assignment"]).and_then(|a| a.field("left"));
        let train = left.is_some_and(|l| self.text(l).to_ascii_lowercase().contains("train"));
        let target = left
            .filter(|l| l.kind_name() == "identifier")
            .map(|l| self.text(l).to_string());
        self.batches.push(super::interp::BatchSource {
            value,
            span,
            what: what.to_string(),
            train,
            target,
        });
    }

    pub fn args(&mut self, frame: &mut Frame, call: Node<'_>) -> Args {
        let mut a = Args::default();
        let Some(list) = call.field("arguments") else {
            return a;
        };
        if list.kind_name() == "generator_expression" {
            let v = self.eval(frame, list);
            a.pos.push(v);
            return a;
        }
        for arg in named_children(list) {
            match arg.kind_name() {
                "keyword_argument" => {
                    let (Some(n), Some(v)) = (arg.field("name"), arg.field("value")) else {
                        continue;
                    };
                    let key = self.text(n).to_string();
                    let v = self.eval(frame, v);
                    a.kw.push((key, v));
                }
                "list_splat" => {
                    let v = arg
                        .named_child(0)
                        .map(|x| self.eval(frame, x))
                        .unwrap_or(Val::Unknown(0));
                    match self.iterate(&v) {
                        Some(items) => a.pos.extend(items),
                        None => a.pos.push(v.unknown_or(0)),
                    }
                }
                "dictionary_splat" => a.kw.push(("**".into(), Val::Unknown(0))),
                "comment" => {}
                _ => {
                    let v = self.eval(frame, arg);
                    a.pos.push(v);
                }
            }
        }
        a
    }

    pub fn call_value(&mut self, callee: Val, args: Args, at: Node<'_>) -> Val {
        match callee {
            Val::Func(f) => self.call_function(f, None, args),
            Val::Method(o, f) => self.call_function(f, Some(Val::Obj(o)), args),
            Val::Class(c) => self.instantiate(c, args, at),
            Val::Obj(o) => self.call_model(o, args, at),
            Val::Layer(l) => self.apply_layer(l, args, at),
            Val::Q(q) => self.framework_call(&q, args, at),
            Val::BoundQ(recv, name) => self.method_call(*recv, &name, args, at),
            Val::Unknown(_) => callee,
            _ => self.unknown(at, format!("`{}` is not understood", self.snippet(at))),
        }
    }

    fn instantiate(&mut self, c: usize, args: Args, at: Node<'_>) -> Val {
        let fw = self.class_fw(c);
        let span = (at.start_byte(), at.end_byte());
        self.objs.push(Obj {
            kind: ObjKind::Instance { class: c, fw },
            attrs: Vec::new(),
            span,
            facts: Default::default(),
            name: None,
        });
        let o = self.objs.len() - 1;
        if let Some(init) = self.find_method(c, "__init__") {
            self.call_function(init, Some(Val::Obj(o)), args);
        }
        Val::Obj(o)
    }

    /// `model(x)`: runs `forward` / `call` (or the layers of a Sequential).
    pub fn call_model(&mut self, o: usize, args: Args, at: Node<'_>) -> Val {
        if let Some(Val::Tensor(t)) = args.pos.first() {
            let t = *t;
            if self.tensors[t].producer.is_none() {
                let tensor = &self.tensors[t];
                self.objs[o].facts.example = Some((
                    tensor.shape.clone(),
                    tensor.int,
                    (at.start_byte(), at.end_byte()),
                ));
            }
        }
        match self.objs[o].kind.clone() {
            ObjKind::Instance { class, fw } => {
                let name = if fw == Some(Fw::Keras) {
                    "call"
                } else {
                    "forward"
                };
                match self.find_method(class, name) {
                    Some(f) => self.call_function(f, Some(Val::Obj(o)), args),
                    None => self.unknown(at, format!("the class has no `{name}` method")),
                }
            }
            ObjKind::Sequential { items, .. } => {
                let mut x = args.pos.into_iter().next().unwrap_or(Val::Unknown(0));
                for item in items {
                    if !matches!(x, Val::Tensor(_)) {
                        return x;
                    }
                    // A Keras `Input` listed in the Sequential: the input itself.
                    if matches!(item, Val::Tensor(t) if self.tensors[t].producer.is_none()) {
                        continue;
                    }
                    x = self.call_value(
                        item,
                        Args {
                            pos: vec![x],
                            kw: vec![],
                        },
                        at,
                    );
                }
                x
            }
            ObjKind::ModuleList { .. } => self.unknown(at, "a ModuleList is not callable"),
            ObjKind::Functional { .. } => self.unknown(at, "a functional model used as a layer"),
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

fn slice_parts(it: &mut Interp<'_, '_>, frame: &mut Frame, slice: Node<'_>) -> Vec<Option<i128>> {
    // `a:b:c` — children in order, with `:` tokens between; empty parts are missing.
    let mut parts = vec![None];
    let mut cursor = slice.walk();
    for c in slice.children(&mut cursor) {
        if c.kind_name() == ":" {
            parts.push(None);
        } else if c.is_named() {
            let v = it.eval(frame, c).int();
            if let Some(last) = parts.last_mut() {
                *last = v;
            }
        }
    }
    parts
}

fn to_const(v: &Val) -> Option<Value> {
    match v {
        Val::Int(i) => Some(Value::Int(*i)),
        Val::Float(f) => Some(Value::Float(*f)),
        Val::Bool(b) => Some(Value::Int(*b as i128)),
        _ => None,
    }
}
