//! Method calls: on models (device and dtype moves, `fit`, `compile`, `build`, `add`), on
//! lists and layers; tensor methods go to the tensor operations.

use super::optimizer_slots;
use super::span;
use crate::interp::Interp;
use crate::value::{ints_of, Args, Fit, ObjKind, Optimizer, Val};
use gpulint_syntax::named_children;
use gpulint_syntax::NodeExt;
use std::rc::Rc;
use tree_sitter::Node;

/// The methods that train a Keras model and are recorded as its fits ([`Fit`]).
pub(crate) const FIT_METHODS: &[&str] = &["fit", "fit_generator"];

impl<'a, 't> Interp<'a, 't> {
    /// `recv.name(args)`: methods of models, tensors, lists and layers.
    pub fn method_call(&mut self, recv: Val, name: &str, args: Args, at: Node<'_>) -> Val {
        match recv {
            Val::Tensor(t) => self.tensor_method(t, name, args, at, false),
            Val::Obj(o) => self.model_method(o, name, args, at),
            Val::List(l) => {
                match name {
                    "append" => {
                        if let Some(v) = args.pos.into_iter().next() {
                            self.lists[l].push(v);
                        }
                    }
                    "extend" => {
                        let items = args.pos.first().and_then(|v| self.iterate(v));
                        match items {
                            Some(items) => self.lists[l].extend(items),
                            None => self.lists[l].push(Val::Unknown(0)),
                        }
                    }
                    _ => {}
                }
                Val::None
            }
            Val::Layer(l) => match name {
                "to" | "cuda" | "train" | "eval" => Val::Layer(l),
                _ => Val::Unknown(0),
            },
            Val::Super => Val::None,
            _ => Val::Unknown(0),
        }
    }

    fn model_method(&mut self, o: usize, name: &str, args: Args, at: Node<'_>) -> Val {
        match name {
            "to" | "cuda" | "cpu" | "train" | "eval" | "float" | "requires_grad_" => {
                if name == "to" {
                    for v in args.pos.iter().chain(args.kw.iter().map(|(_, v)| v)) {
                        if let Val::Q(q) = v {
                            if let Some(b) = dtype_bytes(q) {
                                self.objs[o].facts.param_bytes = Some(b);
                            }
                        }
                    }
                }
                Val::Obj(o)
            }
            "half" | "bfloat16" => {
                self.objs[o].facts.param_bytes = Some(2);
                Val::Obj(o)
            }
            "double" => {
                self.objs[o].facts.param_bytes = Some(8);
                Val::Obj(o)
            }
            "parameters" | "named_parameters" => Val::Params(o),
            name if FIT_METHODS.contains(&name) => {
                let x_node = self.keyword_value(at, "x").or_else(|| {
                    at.field("arguments").and_then(|a| {
                        named_children(a)
                            .find(|n| !matches!(n.kind_name(), "keyword_argument" | "comment"))
                    })
                });
                let mut fit = Fit {
                    batch: None,
                    batch_unknown: false,
                    span: span(at),
                    x_name: x_node
                        .filter(|n| n.kind_name() == "identifier")
                        .map(|n| self.text(n).to_string()),
                    x_rows: x_node
                        .filter(|n| n.kind_name() == "call")
                        .and_then(|n| crate::alloc::literal_allocation(self.pm, n))
                        .and_then(|a| a.shape.first().copied()),
                };
                if let Some(v) = args.get(2, "batch_size") {
                    let node = self.keyword_value(at, "batch_size");
                    match (v.int(), node) {
                        (Some(n), Some(node)) if n > 0 => fit.batch = Some((n as u64, span(node))),
                        (Some(n), None) if n > 0 => fit.batch = Some((n as u64, span(at))),
                        (_, _) if matches!(v, Val::None) => {}
                        _ => fit.batch_unknown = true,
                    }
                }
                if name == "fit_generator" {
                    fit.batch_unknown = true;
                }
                self.objs[o].facts.fits.push(fit);
                Val::Unknown(0)
            }
            "compile" => {
                let opt = match args.get(0, "optimizer") {
                    None => Some(Optimizer {
                        name: "RMSprop".into(),
                        slots: Some(1),
                        slot_bytes: None,
                        span: span(at),
                    }),
                    Some(Val::Str(s)) => Some(Optimizer {
                        name: s.to_string(),
                        slots: optimizer_slots(s, &Args::default(), false),
                        slot_bytes: None,
                        span: span(at),
                    }),
                    Some(Val::Optimizer(i)) => Some(self.optimizers[*i].clone()),
                    Some(_) => Some(Optimizer {
                        name: "an unknown optimizer".into(),
                        slots: None,
                        slot_bytes: None,
                        span: span(at),
                    }),
                };
                let f = &mut self.objs[o].facts;
                f.optimizer = opt;
                f.compiled = true;
                Val::None
            }
            "build" => {
                if let Some(Val::Tuple(t)) = args.get(0, "input_shape") {
                    if t.len() > 1 {
                        self.objs[o].facts.input_shape =
                            ints_of(&Val::Tuple(Rc::new(t[1..].to_vec())), 0);
                    }
                }
                Val::None
            }
            "add" | "append" => {
                if let Some(v) = args.pos.into_iter().next() {
                    match &mut self.objs[o].kind {
                        ObjKind::Sequential { items, .. } | ObjKind::ModuleList { items } => {
                            items.push(v)
                        }
                        _ => {}
                    }
                }
                Val::None
            }
            "forward" | "call" | "__call__" => self.call_model(o, args, at),
            "summary" => Val::None,
            "reset_classifier" => {
                if let Some(n) = args.get(0, "num_classes").and_then(|v| v.int()) {
                    self.objs[o].set_attr("__num_classes__", Val::Int(n));
                }
                Val::None
            }
            _ => Val::Unknown(0),
        }
    }
}

/// Bytes per element of a dtype name (`torch.float16` → 2).
pub fn dtype_bytes(q: &str) -> Option<u64> {
    let last = q.rsplit('.').next().unwrap_or(q);
    match last {
        "float16" | "half" | "bfloat16" => Some(2),
        "float32" | "float" => Some(4),
        "float64" | "double" => Some(8),
        _ => None,
    }
}
