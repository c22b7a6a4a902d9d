//! Calls into the frameworks: which framework function or class a qualified name calls, model
//! containers, example inputs and data pipelines here; layers and parameter-free operations in
//! [`layers`], methods of models, tensors and lists in [`methods`], optimizers in [`optim`].

mod layers;
mod methods;
pub(crate) use methods::FIT_METHODS;
mod optim;
mod zoo;

pub use methods::dtype_bytes;
pub use optim::optimizer_slots;

use super::interp::Interp;
use super::layer::Spec;
use super::value::{ints_of, Args, Fw, Obj, ObjKind, Val};
use super::{keras, torch};
use gpulint_syntax::named_children;
use gpulint_syntax::NodeExt;
use std::rc::Rc;
use tree_sitter::Node;

fn span(n: Node<'_>) -> (usize, usize) {
    (n.start_byte(), n.end_byte())
}

impl<'a, 't> Interp<'a, 't> {
    pub(super) fn tensor_list(&self, v: Option<&Val>) -> Option<Vec<usize>> {
        let items = self.iterate(v?)?;
        items
            .iter()
            .map(|x| {
                if let Val::Tensor(t) = x {
                    Some(*t)
                } else {
                    None
                }
            })
            .collect()
    }

    pub fn framework_call(&mut self, q: &str, args: Args, at: Node<'_>) -> Val {
        if let Some(b) = q.strip_prefix("builtins.") {
            return self.builtin(b, args, at);
        }
        if let Some(v) = self.zoo_call(q, &args, at) {
            return v;
        }
        if let Some(rest) = keras::keras_path(q) {
            let last = rest.rsplit('.').next().unwrap_or(rest);
            match last {
                "Input" => {
                    let shape = args.get(0, "shape").and_then(|v| ints_of(v, 0));
                    let int = args
                        .kw("dtype")
                        .and_then(|v| v.str())
                        .is_some_and(|d| d.starts_with("int"));
                    return match shape {
                        Some(s) => Val::Tensor(self.new_tensor(s, int, None)),
                        None => self.unknown(at, "the `Input` shape is not fully known"),
                    };
                }
                "InputLayer" => {
                    let shape = args
                        .kw("input_shape")
                        .or(args.kw("shape"))
                        .and_then(|v| ints_of(v, 0));
                    return match shape {
                        Some(s) => Val::Tensor(self.new_tensor(s, false, None)),
                        None => self.unknown(at, "the `InputLayer` shape is not fully known"),
                    };
                }
                "Sequential" => {
                    let items = args
                        .get(0, "layers")
                        .and_then(|v| self.iterate(v))
                        .unwrap_or_default();
                    let name = args.kw("name").and_then(|v| v.str()).map(str::to_string);
                    return self.new_obj(
                        ObjKind::Sequential {
                            fw: Fw::Keras,
                            items,
                        },
                        at,
                        name,
                    );
                }
                "Model" | "Functional"
                    if matches!(rest, "Model" | "models.Model" | "Functional") =>
                {
                    let inputs = args.get(0, "inputs");
                    let outputs = args.get(1, "outputs");
                    let ins = match inputs {
                        Some(Val::Tensor(t)) => Some(vec![*t]),
                        v => self.tensor_list(v),
                    };
                    let outs = match outputs {
                        Some(Val::Tensor(t)) => Some(vec![*t]),
                        v => self.tensor_list(v),
                    };
                    return match (ins, outs) {
                        (Some(inputs), Some(outputs)) => {
                            let name = args.kw("name").and_then(|v| v.str()).map(str::to_string);
                            self.new_obj(ObjKind::Functional { inputs, outputs }, at, name)
                        }
                        _ => match outputs.or(inputs) {
                            Some(u @ Val::Unknown(_)) => u.clone(),
                            _ => self.unknown(at, "the model's inputs or outputs are not known"),
                        },
                    };
                }
                _ => {}
            }
            if last.ends_with("_dataset_from_directory") || last == "timeseries_dataset_from_array"
            {
                self.batch_source(
                    at,
                    args.kw("batch_size"),
                    Some(32),
                    &format!("`{last}(batch_size=...)`"),
                );
                return Val::Unknown(0);
            }
            if rest.starts_with("optimizers.") {
                return self.optimizer(last, &args, at, false);
            }
            if last == "Bidirectional" {
                let spec = match args.get(0, "layer") {
                    Some(Val::Layer(l)) => match &self.layers[*l].spec {
                        Ok(Spec::Recurrent(r))
                            if args
                                .kw("merge_mode")
                                .is_none_or(|m| m.str() == Some("concat")) =>
                        {
                            Ok(Spec::Bidirectional(r.clone()))
                        }
                        _ => Err(
                            "only a recurrent layer with `merge_mode=\"concat\"` is supported"
                                .to_string(),
                        ),
                    },
                    _ => Err("the wrapped layer is not known".to_string()),
                };
                return self.new_layer(Fw::Keras, "Bidirectional", spec, &args, at);
            }
            // `layers.add([x, y])`, `layers.concatenate([a, b], axis=-1)`: a merge layer
            // created and applied at once.
            let merge = match last {
                "add" => Some("Add"),
                "subtract" => Some("Subtract"),
                "multiply" => Some("Multiply"),
                "average" => Some("Average"),
                "maximum" => Some("Maximum"),
                "minimum" => Some("Minimum"),
                "concatenate" => Some("Concatenate"),
                _ => None,
            };
            if let (Some(class), true) = (merge, rest.starts_with("layers.")) {
                let mut args = args;
                let inputs = if args.pos.is_empty() {
                    args.kw
                        .iter()
                        .position(|(k, _)| k == "inputs")
                        .map(|i| args.kw.remove(i).1)
                } else {
                    Some(args.pos.remove(0))
                };
                let Some(spec) = keras::layer(class, &args) else {
                    return self.opaque(args, at);
                };
                let Val::Layer(l) = self.new_layer(Fw::Keras, class, spec, &args, at) else {
                    return Val::Unknown(0);
                };
                let inputs = inputs.unwrap_or(Val::Unknown(0));
                return self.apply_layer(
                    l,
                    Args {
                        pos: vec![inputs],
                        kw: vec![],
                    },
                    at,
                );
            }
            if let Some(spec) = keras::layer(last, &args) {
                return self.new_layer(Fw::Keras, keras::canonical(last), spec, &args, at);
            }
            if rest.starts_with("layers.") && last.starts_with(char::is_uppercase) {
                let spec = Err(format!("`{last}` is not supported by the estimator"));
                return self.new_layer(Fw::Keras, last, spec, &args, at);
            }
            if rest.starts_with("ops.")
                || rest.starts_with("activations.")
                || rest.starts_with("backend.")
            {
                return self.tensor_function(last, args, at);
            }
            return self.opaque(args, at);
        }
        if let Some(class) = torch::nn_class(q) {
            match class {
                "Sequential" if args.pos.is_empty() && args.kw.is_empty() => {
                    // An empty `nn.Sequential()` is an identity leaf module.
                    return self.new_layer(Fw::Torch, "Sequential", Ok(Spec::Identity), &args, at);
                }
                "Sequential" => {
                    if args
                        .pos
                        .iter()
                        .any(|v| !matches!(v, Val::Layer(_) | Val::Obj(_)))
                    {
                        return self
                            .unknown(at, "an `nn.Sequential` whose modules are not all known");
                    }
                    return self.new_obj(
                        ObjKind::Sequential {
                            fw: Fw::Torch,
                            items: args.pos,
                        },
                        at,
                        None,
                    );
                }
                "ModuleList" => {
                    let items = args
                        .get(0, "modules")
                        .and_then(|v| self.iterate(v))
                        .unwrap_or_default();
                    return self.new_obj(ObjKind::ModuleList { items }, at, None);
                }
                _ => {}
            }
            let spec = match torch::module(class, &args) {
                Some(s) => s,
                None if class.starts_with(char::is_uppercase) => {
                    Err(format!("`nn.{class}` is not supported by the estimator"))
                }
                None => return self.opaque(args, at),
            };
            return self.new_layer(Fw::Torch, class, spec, &args, at);
        }
        // bitsandbytes' 8-bit optimizers, Hugging Face's Adafactor.
        for prefix in [
            "bitsandbytes.optim.",
            "transformers.optimization.",
            "transformers.",
        ] {
            if let Some(name) = q.strip_prefix(prefix) {
                let known = name.contains("8bit") || name == "Adafactor" || name == "AdamW";
                if !name.contains('.') && known {
                    return self.optimizer(name, &args, at, true);
                }
            }
        }
        if let Some(name) = q.strip_prefix("torch.optim.") {
            if !name.contains('.') {
                return self.optimizer(name, &args, at, true);
            }
        }
        match q {
            "torch.randn"
            | "torch.rand"
            | "torch.zeros"
            | "torch.ones"
            | "torch.empty"
            | "torch.randint"
            | "torch.full"
            | "numpy.zeros"
            | "numpy.ones"
            | "numpy.random.rand"
            | "numpy.random.randn"
            | "numpy.random.random"
            | "tensorflow.zeros"
            | "tensorflow.ones"
            | "tensorflow.random.normal"
            | "tensorflow.random.uniform" => {
                return self.example_tensor(q, &args, at);
            }
            "torch.utils.data.DataLoader" | "torch.utils.data.dataloader.DataLoader" => {
                if args.kw("batch_sampler").is_none() {
                    self.batch_source(
                        at,
                        args.get(1, "batch_size"),
                        Some(1),
                        "`DataLoader(batch_size=...)`",
                    );
                }
                return Val::Unknown(0);
            }
            "torchsummary.summary" | "torchinfo.summary" => {
                if let Some(Val::Obj(o)) = args.pos.first() {
                    let shape = args.get(1, "input_size").and_then(|v| ints_of(v, 0));
                    let shape = match (q, shape) {
                        ("torchinfo.summary", Some(s)) if s.len() > 1 => Some(s[1..].to_vec()),
                        ("torchsummary.summary", s) => s,
                        _ => None,
                    };
                    if let Some(s) = shape {
                        self.objs[*o].facts.example = Some((s, false, span(at)));
                    }
                }
                return Val::None;
            }
            _ => {}
        }
        let short = q.rsplit('.').next().unwrap_or(q);
        if q.starts_with("torch.nn.functional.")
            || q.starts_with("tensorflow.nn.")
            || q.starts_with("tensorflow.math.")
            || (q.starts_with("torch.") && q.matches('.').count() == 1)
            || (q.starts_with("tensorflow.") && q.matches('.').count() == 1)
        {
            return self.tensor_function(short, args, at);
        }
        self.opaque(args, at)
    }

    /// A call the estimator does not follow: unknown, with a reason when it swallows a tensor.
    pub(super) fn opaque(&mut self, args: Args, at: Node<'_>) -> Val {
        if args
            .pos
            .iter()
            .chain(args.kw.iter().map(|(_, v)| v))
            .any(|v| matches!(v, Val::Tensor(_)))
        {
            let callee = at.field("function").map(|f| self.text(f)).unwrap_or("");
            return self.unknown(at, format!("`{callee}(...)` is not understood"));
        }
        Val::Unknown(0)
    }

    fn new_obj(&mut self, kind: ObjKind, at: Node<'_>, name: Option<String>) -> Val {
        self.objs.push(Obj {
            kind,
            attrs: Vec::new(),
            span: span(at),
            facts: Default::default(),
            name,
        });
        Val::Obj(self.objs.len() - 1)
    }

    fn example_tensor(&mut self, q: &str, args: &Args, at: Node<'_>) -> Val {
        let shape: Option<Vec<u64>> = match q {
            "torch.randint" => {
                let size = args.kw("size").or_else(|| {
                    args.pos
                        .iter()
                        .rev()
                        .find(|v| matches!(v, Val::Tuple(_) | Val::List(_)))
                });
                size.and_then(|v| ints_of(v, 0))
            }
            "torch.full" => args.get(0, "size").and_then(|v| ints_of(v, 0)),
            _ if q.starts_with("torch.") || q.starts_with("numpy.random.") => {
                match args.pos.as_slice() {
                    [one @ (Val::Tuple(_) | Val::List(_))] => self
                        .iterate(one)
                        .and_then(|v| ints_of(&Val::Tuple(Rc::new(v)), 0)),
                    many if !many.is_empty() => ints_of(&Val::Tuple(Rc::new(many.to_vec())), 0),
                    _ => args.kw("size").and_then(|v| ints_of(v, 0)),
                }
            }
            _ => args
                .get(0, "shape")
                .and_then(|v| self.iterate(v))
                .and_then(|v| ints_of(&Val::Tuple(Rc::new(v)), 0)),
        };
        let int = q == "torch.randint"
            || args.kw("dtype").is_some_and(
                |d| matches!(d, Val::Q(n) if n.contains("int") || n.ends_with("long")),
            );
        match shape {
            Some(s) if s.len() >= 2 => Val::Tensor(self.new_tensor(s[1..].to_vec(), int, None)),
            _ => self.unknown(at, "an example tensor without a known batch dimension"),
        }
    }

    /// The value node of keyword argument `key` in a call.
    pub fn keyword_value<'n>(&self, call: Node<'n>, key: &str) -> Option<Node<'n>> {
        let args = call.field("arguments")?;
        named_children(args)
            .find(|a| {
                a.kind_name() == "keyword_argument"
                    && a.field("name").is_some_and(|n| self.text(n) == key)
            })
            .and_then(|a| a.field("value"))
    }
}
