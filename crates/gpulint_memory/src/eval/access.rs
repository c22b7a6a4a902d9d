//! Attribute and subscript expressions: attributes of objects, tensors and classes,
//! class-level constants, indexing and slicing of sequences and tensors.

use super::from_const;
use crate::interp::{Frame, Interp};
use crate::layer::Spec;
use crate::value::{ObjKind, Val};
use gpulint_syntax::named_children;
use gpulint_syntax::NodeExt;
use std::rc::Rc;
use tree_sitter::Node;

impl<'a, 't> Interp<'a, 't> {
    pub(super) fn attribute(&mut self, frame: &mut Frame, e: Node<'_>) -> Val {
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
                if let ObjKind::Zoo(arch) = &self.objs[o].kind {
                    // `model.fc` of a library model, for `model.fc.in_features`.
                    if arch.head().is_some_and(|(head, _)| head == name) {
                        return Val::BoundQ(Box::new(Val::Obj(o)), Rc::from(name));
                    }
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
            Val::BoundQ(recv, head) if name == "in_features" => match *recv {
                Val::Obj(o) => match &self.objs[o].kind {
                    ObjKind::Zoo(arch) => match arch.head() {
                        Some((h, n)) if *h == *head => Val::Int(n as i128),
                        _ => Val::Unknown(0),
                    },
                    _ => Val::Unknown(0),
                },
                _ => Val::Unknown(0),
            },
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

    pub(super) fn subscript(&mut self, frame: &mut Frame, e: Node<'_>) -> Val {
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
