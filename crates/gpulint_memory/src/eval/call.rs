//! Call expressions: argument lists, dispatch on the callee, instances of the file's classes,
//! models called on tensors, and the places that set a batch size.

use crate::interp::{Frame, Interp};
use crate::value::{Args, Fw, Obj, ObjKind, Val};
use gpulint_syntax::named_children;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

impl<'a, 't> Interp<'a, 't> {
    pub(super) fn call(&mut self, frame: &mut Frame, e: Node<'_>) -> Val {
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
        // The ancestors found once (climbing with `Node::parent` is quadratic in the depth).
        let left = self
            .pm
            .ancestors(call)
            .into_iter()
            .find(|a| a.kind_name() == "assignment")
            .and_then(|a| a.field("left"));
        let train = left.is_some_and(|l| self.text(l).to_ascii_lowercase().contains("train"));
        let target = left
            .filter(|l| l.kind_name() == "identifier")
            .map(|l| self.text(l).to_string());
        self.batches.push(crate::interp::BatchSource {
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
                let x = args.pos.into_iter().next().unwrap_or(Val::Unknown(0));
                // A Keras `Input` listed in the Sequential: the input itself.
                let items = items
                    .into_iter()
                    .filter(|item| {
                        !matches!(item, Val::Tensor(t) if self.tensors[*t].producer.is_none())
                    })
                    .collect();
                self.run_in_sequence(items, x, at)
            }
            ObjKind::ModuleList { .. } => self.unknown(at, "a ModuleList is not callable"),
            ObjKind::Functional { .. } => self.unknown(at, "a functional model used as a layer"),
            ObjKind::Zoo(arch) => {
                let arch = self.zoo_arch(o).unwrap_or_else(|| (*arch).clone());
                self.call_zoo(o, &arch, args, at)
            }
        }
    }

    /// Feeds `x` through `items` (the layers of a Sequential) in order, each called on the
    /// output of the one before; stops once that output is not a tensor.
    pub fn run_in_sequence(&mut self, items: Vec<Val>, mut x: Val, at: Node<'_>) -> Val {
        for item in items {
            if !matches!(x, Val::Tensor(_)) {
                break;
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
}
