//! Calls into the frameworks: layer constructors and applications, model containers,
//! optimizers, example inputs, tensor functions and methods.

use super::interp::Interp;
use super::layer::{Merge, Spec};
use super::value::{ints_of, App, Args, Fit, Fw, LayerDef, Obj, ObjKind, Optimizer, Tensor, Val};
use super::{keras, torch};
use crate::semantic::named_children;
use std::rc::Rc;
use tree_sitter::Node;

fn span(n: Node<'_>) -> (usize, usize) {
    (n.start_byte(), n.end_byte())
}

/// Identity-shaped tensor functions (activations, dropout, element-wise maths).
const ELEMENTWISE: &[&str] = &[
    "relu",
    "relu6",
    "gelu",
    "silu",
    "swish",
    "sigmoid",
    "tanh",
    "leaky_relu",
    "elu",
    "selu",
    "celu",
    "softmax",
    "log_softmax",
    "dropout",
    "dropout1d",
    "dropout2d",
    "dropout3d",
    "hardswish",
    "hardsigmoid",
    "mish",
    "softplus",
    "normalize",
    "exp",
    "abs",
    "sqrt",
    "square",
    "neg",
    "clamp",
    "clip",
];

impl<'a, 't> Interp<'a, 't> {
    pub fn new_tensor(&mut self, shape: Vec<u64>, int: bool, producer: Option<usize>) -> usize {
        self.tensors.push(Tensor {
            shape,
            int,
            producer,
        });
        self.tensors.len() - 1
    }

    /// Applies a parameter-free operation.
    pub fn op(
        &mut self,
        at: Node<'_>,
        name: &str,
        spec: Spec,
        inputs: &[usize],
        view: bool,
    ) -> Val {
        let shapes: Vec<Vec<u64>> = inputs
            .iter()
            .map(|t| self.tensors[*t].shape.clone())
            .collect();
        match spec.infer(&shapes) {
            Ok((shape, _)) => {
                let int = inputs.first().is_some_and(|t| self.tensors[*t].int)
                    && matches!(
                        spec,
                        Spec::Reshape { .. }
                            | Spec::Select { .. }
                            | Spec::Flatten { .. }
                            | Spec::Permute { .. }
                    );
                let out = self.new_tensor(shape, int, Some(self.apps.len()));
                self.apps.push(App {
                    layer: None,
                    op: Rc::from(name),
                    inputs: inputs.to_vec(),
                    output: out,
                    params: Default::default(),
                    view,
                });
                Val::Tensor(out)
            }
            Err(e) => self.unknown(at, format!("`{}`: {e}", self.snippet(at))),
        }
    }

    /// Applies a layer to its arguments.
    pub fn apply_layer(&mut self, l: usize, args: Args, at: Node<'_>) -> Val {
        let def = self.layers[l].clone();
        let spec = match &def.spec {
            Ok(s) => s.clone(),
            Err(e) => {
                return self.unknown(at, format!("{} {}: {e}", def.class, self.layer_label(l)))
            }
        };
        let tensors = |v: &Val, it: &Interp| -> Option<Vec<usize>> {
            match v {
                Val::Tensor(t) => Some(vec![*t]),
                Val::Tuple(_) | Val::List(_) => it
                    .iterate(v)?
                    .iter()
                    .map(|x| {
                        if let Val::Tensor(t) = x {
                            Some(*t)
                        } else {
                            None
                        }
                    })
                    .collect(),
                _ => None,
            }
        };
        let inputs: Option<Vec<usize>> = match &spec {
            Spec::Attention(a) if a.torch_dims.is_some() => {
                // PyTorch: (query, key, value) → [query, value, key].
                let q = args.get(0, "query").and_then(|v| tensors(v, self));
                let k = args.get(1, "key").and_then(|v| tensors(v, self));
                let v = args.get(2, "value").and_then(|v| tensors(v, self));
                match (q, k, v) {
                    (Some(q), Some(k), Some(v)) => Some(vec![q[0], v[0], k[0]]),
                    _ => None,
                }
            }
            Spec::Attention(_) => {
                let q = args.get(0, "query").and_then(|v| tensors(v, self));
                let v = args.get(1, "value").and_then(|v| tensors(v, self));
                let k = args.get(2, "key").and_then(|v| tensors(v, self));
                match (q, v) {
                    (Some(q), Some(v)) => Some([q, v, k.unwrap_or_default()].concat()),
                    _ => None,
                }
            }
            _ => args.pos.first().and_then(|v| tensors(v, self)),
        };
        let Some(inputs) = inputs.filter(|i| !i.is_empty()) else {
            if let Some(u @ Val::Unknown(_)) = args.pos.first() {
                return u.clone();
            }
            return self.unknown(
                at,
                format!(
                    "the input of {} {} is not known",
                    def.class,
                    self.layer_label(l)
                ),
            );
        };
        let shapes: Vec<Vec<u64>> = inputs
            .iter()
            .map(|t| self.tensors[*t].shape.clone())
            .collect();
        let (shape, params) = match spec.infer(&shapes) {
            Ok(r) => r,
            Err(e) => {
                return self.unknown(at, format!("{} {}: {e}", def.class, self.layer_label(l)))
            }
        };
        let first = self.layers[l].params.is_none();
        if first && def.fw == Fw::Keras && &*def.class == "MultiHeadAttention" {
            // Keras builds its own Softmax and Dropout on the first call: they take the next
            // automatic names.
            for base in ["softmax", "dropout"] {
                *self.keras_names.entry(base.to_string()).or_insert(0) += 1;
            }
        }
        let params = if first {
            let p = spec.static_params().unwrap_or(params);
            self.layers[l].params = Some(p);
            p
        } else {
            Default::default()
        };
        let int = matches!(spec, Spec::Identity) && self.tensors[inputs[0]].int;
        let out = self.new_tensor(shape, int, Some(self.apps.len()));
        self.apps.push(App {
            layer: Some(l),
            op: def.class.clone(),
            inputs,
            output: out,
            params,
            view: false,
        });
        if def.fw == Fw::Torch && torch::returns_tuple(&def.class) {
            return Val::Tuple(Rc::new(vec![Val::Tensor(out), Val::Unknown(0)]));
        }
        Val::Tensor(out)
    }

    fn layer_label(&self, l: usize) -> String {
        let d = &self.layers[l];
        let line = self
            .src
            .get(..d.span.0)
            .map(|s| s.matches('\n').count() + 1)
            .unwrap_or(0);
        if d.fw == Fw::Keras {
            format!("`{}` (created at line {line})", d.name)
        } else {
            format!("(created at line {line})")
        }
    }

    fn new_layer(
        &mut self,
        fw: Fw,
        class: &str,
        spec: Result<Spec, String>,
        args: &Args,
        at: Node<'_>,
    ) -> Val {
        let mut name = String::new();
        let mut input_shape = None;
        let mut frozen = false;
        let mut spec = spec;
        if fw == Fw::Keras {
            name = match args.kw("name").and_then(|v| v.str()) {
                Some(n) => n.to_string(),
                None => {
                    let base = keras::snake_case(class);
                    let n = self.keras_names.entry(base.clone()).or_insert(0);
                    let out = if *n == 0 { base } else { format!("{base}_{n}") };
                    *n += 1;
                    out
                }
            };
            if let Some(v) = args.kw("input_shape") {
                input_shape = ints_of(v, 0);
                if input_shape.is_none() {
                    spec = Err("`input_shape` is not constant".into());
                }
            } else if let Some(v) = args.kw("batch_input_shape") {
                input_shape = match v {
                    Val::Tuple(t) if t.len() > 1 => {
                        ints_of(&Val::Tuple(Rc::new(t[1..].to_vec())), 0)
                    }
                    _ => None,
                };
            } else if let Some(n) = args.kw("input_dim").and_then(|v| v.int()) {
                input_shape = Some(vec![n as u64]);
            }
            frozen = args.kw("trainable").and_then(|v| v.truthy()) == Some(false);
        }
        let params = if fw == Fw::Torch {
            spec.as_ref().ok().and_then(|s| s.static_params())
        } else {
            None
        };
        self.layers.push(LayerDef {
            fw,
            class: Rc::from(class),
            spec,
            name,
            span: span(at),
            params: None,
            frozen,
            input_shape,
        });
        let _ = params;
        Val::Layer(self.layers.len() - 1)
    }

    fn tensor_list(&self, v: Option<&Val>) -> Option<Vec<usize>> {
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
    fn opaque(&mut self, args: Args, at: Node<'_>) -> Val {
        if args
            .pos
            .iter()
            .chain(args.kw.iter().map(|(_, v)| v))
            .any(|v| matches!(v, Val::Tensor(_)))
        {
            let callee = at
                .child_by_field_name("function")
                .map(|f| self.text(f))
                .unwrap_or("");
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

    fn optimizer(&mut self, name: &str, args: &Args, at: Node<'_>, torch: bool) -> Val {
        let slots = optimizer_slots(name, args, torch);
        self.optimizers.push(Optimizer {
            name: name.to_string(),
            slots,
            span: span(at),
        });
        let id = self.optimizers.len() - 1;
        if torch {
            if let Some(Val::Params(o)) = args.get(0, "params") {
                let opt = self.optimizers[id].clone();
                self.objs[*o].facts.optimizer = Some(opt);
            }
        }
        Val::Optimizer(id)
    }

    fn builtin(&mut self, name: &str, args: Args, at: Node<'_>) -> Val {
        let ints: Vec<Option<i128>> = args.pos.iter().map(|v| v.int()).collect();
        match name {
            "range" => {
                let (a, b, c) = match ints.as_slice() {
                    [Some(b)] => (0, *b, 1),
                    [Some(a), Some(b)] => (*a, *b, 1),
                    [Some(a), Some(b), Some(c)] if *c != 0 => (*a, *b, *c),
                    _ => return self.unknown(at, "`range` of unknown length"),
                };
                let n = if c > 0 {
                    (b - a + c - 1).max(0) / c
                } else {
                    (a - b - c - 1).max(0) / -c
                };
                if n as usize > super::interp::MAX_UNROLL {
                    return self.unknown(at, "a loop too long to unroll");
                }
                Val::Tuple(Rc::new((0..n).map(|i| Val::Int(a + i * c)).collect()))
            }
            "len" => match args.pos.first() {
                Some(Val::Tensor(_)) => Val::Batch,
                Some(v) => self
                    .iterate(v)
                    .map(|i| Val::Int(i.len() as i128))
                    .unwrap_or(Val::Unknown(0)),
                None => Val::Unknown(0),
            },
            "int" => args
                .pos
                .first()
                .and_then(|v| v.float())
                .map(|f| Val::Int(f.trunc() as i128))
                .unwrap_or(Val::Unknown(0)),
            "float" => args
                .pos
                .first()
                .and_then(|v| v.float())
                .map(Val::Float)
                .unwrap_or(Val::Unknown(0)),
            "min" | "max" => {
                let vals: Vec<i128> = match ints.as_slice() {
                    [_] => args
                        .pos
                        .first()
                        .and_then(|v| self.iterate(v))
                        .map(|i| i.iter().filter_map(|x| x.int()).collect())
                        .unwrap_or_default(),
                    _ => ints.iter().flatten().copied().collect(),
                };
                if vals.is_empty() || (ints.len() > 1 && vals.len() != ints.len()) {
                    return Val::Unknown(0);
                }
                Val::Int(if name == "min" {
                    *vals.iter().min().unwrap_or(&0)
                } else {
                    *vals.iter().max().unwrap_or(&0)
                })
            }
            "list" | "tuple" | "reversed" => {
                let Some(mut items) = args.pos.first().and_then(|v| self.iterate(v)) else {
                    return Val::Unknown(0);
                };
                if name == "reversed" {
                    items.reverse();
                }
                if name == "tuple" {
                    return Val::Tuple(Rc::new(items));
                }
                self.lists.push(items);
                Val::List(self.lists.len() - 1)
            }
            "enumerate" => match args.pos.first().and_then(|v| self.iterate(v)) {
                Some(items) => Val::Tuple(Rc::new(
                    items
                        .into_iter()
                        .enumerate()
                        .map(|(i, v)| Val::Tuple(Rc::new(vec![Val::Int(i as i128), v])))
                        .collect(),
                )),
                None => Val::Unknown(0),
            },
            "zip" => {
                let lists: Option<Vec<Vec<Val>>> =
                    args.pos.iter().map(|v| self.iterate(v)).collect();
                match lists {
                    Some(lists) if !lists.is_empty() => {
                        let n = lists.iter().map(Vec::len).min().unwrap_or(0);
                        Val::Tuple(Rc::new(
                            (0..n)
                                .map(|i| {
                                    Val::Tuple(Rc::new(
                                        lists.iter().map(|l| l[i].clone()).collect(),
                                    ))
                                })
                                .collect(),
                        ))
                    }
                    _ => Val::Unknown(0),
                }
            }
            "sum" => match args.pos.first().and_then(|v| self.iterate(v)) {
                Some(items) => items
                    .iter()
                    .map(|v| v.int())
                    .sum::<Option<i128>>()
                    .map(Val::Int)
                    .unwrap_or(Val::Unknown(0)),
                None => Val::Unknown(0),
            },
            "super" => Val::Super,
            "print" => Val::None,
            _ => Val::Unknown(0),
        }
    }

    /// `F.relu(x)`, `torch.flatten(x, 1)`, `torch.cat([a, b], dim=1)`, `tf.reshape(x, ...)`.
    pub fn tensor_function(&mut self, name: &str, args: Args, at: Node<'_>) -> Val {
        if matches!(name, "cat" | "concat" | "concatenate") {
            let Some(ts) = self.tensor_list(args.pos.first()) else {
                return self.opaque(args, at);
            };
            let axis = args
                .get(1, "dim")
                .or_else(|| args.kw("axis"))
                .and_then(|v| v.int());
            let axis = match (axis, name) {
                (Some(a), _) => a,
                (None, "concatenate") => -1,
                _ => 0,
            };
            if axis == 0 {
                return self.unknown(at, "concatenation along the batch dimension");
            }
            let axis = if axis > 0 {
                axis as i64 - 1
            } else {
                axis as i64
            };
            return self.op(at, name, Spec::Concat { axis }, &ts, false);
        }
        let Some(Val::Tensor(t)) = args.pos.first().cloned() else {
            return self.opaque(args, at);
        };
        let rest = Args {
            pos: args.pos[1..].to_vec(),
            kw: args.kw,
        };
        self.tensor_method(t, name, rest, at, true)
    }

    /// `x.view(...)`, `x.flatten(1)`, `x.mean(dim=1)`; `function` for `torch.flatten(x, ...)`.
    pub fn tensor_method(
        &mut self,
        t: usize,
        name: &str,
        a: Args,
        at: Node<'_>,
        function: bool,
    ) -> Val {
        let rank = self.tensors[t].shape.len() as i128 + 1;
        let dim = |d: i128| if d < 0 { d + rank } else { d };
        match name {
            _ if ELEMENTWISE.contains(&name) => self.op(at, name, Spec::Identity, &[t], false),
            "contiguous" | "float" | "to" | "cuda" | "cpu" | "clone" | "detach" | "half"
            | "bfloat16" | "type" | "requires_grad_" => Val::Tensor(t),
            "size" => match a.get(0, "dim").and_then(|v| v.int()) {
                None => Val::Dims(t),
                Some(d) if dim(d) == 0 => Val::Batch,
                Some(d) => self.tensors[t]
                    .shape
                    .get(dim(d) as usize - 1)
                    .map(|n| Val::Int(*n as i128))
                    .unwrap_or(Val::Unknown(0)),
            },
            "dim" => Val::Int(rank),
            "view" | "reshape" => {
                let dims: Vec<Val> = match a.pos.as_slice() {
                    [one @ (Val::Tuple(_) | Val::List(_) | Val::Dims(_))] => self.unpack_all(one),
                    many => many.to_vec(),
                };
                let dims = if dims.is_empty() {
                    a.get(0, "shape")
                        .map(|v| self.unpack_all(v))
                        .unwrap_or_default()
                } else {
                    dims
                };
                let target: Option<Vec<i64>> = match dims.split_first() {
                    Some((Val::Batch, rest)) => {
                        rest.iter().map(|v| v.int().map(|n| n as i64)).collect()
                    }
                    Some((first, rest))
                        if first.int() == Some(-1)
                            && rest.iter().all(|v| v.int().is_some_and(|n| n > 0)) =>
                    {
                        rest.iter().map(|v| v.int().map(|n| n as i64)).collect()
                    }
                    _ => None,
                };
                match target {
                    Some(target) => self.op(at, name, Spec::Reshape { target }, &[t], true),
                    None => self.unknown(
                        at,
                        format!(
                            "`{}`: the new shape is not known per sample",
                            self.snippet(at)
                        ),
                    ),
                }
            }
            "flatten" => {
                let start = a.get(0, "start_dim").and_then(|v| v.int()).unwrap_or(0);
                let end = a.get(1, "end_dim").and_then(|v| v.int()).unwrap_or(-1);
                if dim(start) < 1 {
                    return self.unknown(at, "flattening the batch dimension");
                }
                let end = if end < 0 { end as i64 } else { end as i64 - 1 };
                self.op(
                    at,
                    "flatten",
                    Spec::Flatten {
                        start: (dim(start) - 1) as usize,
                        end,
                    },
                    &[t],
                    true,
                )
            }
            "permute" => {
                let dims: Vec<Val> = match a.pos.as_slice() {
                    [one @ (Val::Tuple(_) | Val::List(_))] => self.unpack_all(one),
                    many => many.to_vec(),
                };
                let dims: Option<Vec<i128>> = dims.iter().map(|v| v.int().map(dim)).collect();
                match dims {
                    Some(d) if d.first() == Some(&0) && d[1..].iter().all(|x| *x >= 1) => {
                        let dims = d[1..].iter().map(|x| (*x - 1) as usize).collect();
                        self.op(at, "permute", Spec::Permute { dims }, &[t], true)
                    }
                    _ => self.unknown(at, "a permutation that moves the batch dimension"),
                }
            }
            "transpose" if !function || a.pos.len() >= 2 => {
                let (Some(x), Some(y)) = (
                    a.pos.first().and_then(|v| v.int()),
                    a.pos.get(1).and_then(|v| v.int()),
                ) else {
                    return self.unknown(at, "transpose of unknown dimensions");
                };
                let (x, y) = (dim(x), dim(y));
                if x < 1 || y < 1 {
                    return self.unknown(at, "a transpose that moves the batch dimension");
                }
                let mut dims: Vec<usize> = (0..(rank - 1) as usize).collect();
                dims.swap((x - 1) as usize, (y - 1) as usize);
                self.op(at, "transpose", Spec::Permute { dims }, &[t], true)
            }
            "mean" | "sum" | "amax" | "reduce_mean" | "reduce_sum" => {
                let d = a.get(0, "dim").or_else(|| a.kw("axis"));
                let dims: Option<Vec<i128>> = d.and_then(|v| match v {
                    Val::Tuple(_) | Val::List(_) => self
                        .iterate(v)
                        .and_then(|i| i.iter().map(|x| x.int().map(dim)).collect()),
                    v => v.int().map(|x| vec![dim(x)]),
                });
                let keep = a
                    .get(1, "keepdim")
                    .or_else(|| a.kw("keepdims"))
                    .and_then(|v| v.truthy())
                    .unwrap_or(false);
                match dims {
                    Some(d) if d.iter().all(|x| *x >= 1) => {
                        let dims = d.iter().map(|x| (*x - 1) as usize).collect();
                        self.op(
                            at,
                            name,
                            Spec::Reduce {
                                dims,
                                keepdim: keep,
                            },
                            &[t],
                            false,
                        )
                    }
                    _ => self.unknown(
                        at,
                        format!(
                            "`{}` over the batch or unknown dimensions",
                            self.snippet(at)
                        ),
                    ),
                }
            }
            "unsqueeze" | "squeeze" | "expand_dims" => {
                let Some(d) = a
                    .get(0, "dim")
                    .or_else(|| a.kw("axis"))
                    .and_then(|v| v.int())
                else {
                    return self.unknown(at, "squeeze of unknown dimensions");
                };
                let mut shape: Vec<i64> = self.tensors[t].shape.iter().map(|x| *x as i64).collect();
                let full = if name == "squeeze" { rank } else { rank + 1 };
                let d = if d < 0 { d + full } else { d };
                if d < 1 || d as usize > shape.len() + usize::from(name != "squeeze") {
                    return self.unknown(at, "a squeeze of the batch dimension");
                }
                if name == "squeeze" {
                    if shape[d as usize - 1] != 1 {
                        return Val::Tensor(t);
                    }
                    shape.remove(d as usize - 1);
                } else {
                    shape.insert(d as usize - 1, 1);
                }
                self.op(at, name, Spec::Reshape { target: shape }, &[t], true)
            }
            "max_pool1d" | "max_pool2d" | "max_pool3d" | "avg_pool1d" | "avg_pool2d"
            | "avg_pool3d" => {
                let r: usize = if name.contains("1d") {
                    1
                } else if name.contains("3d") {
                    3
                } else {
                    2
                };
                let max = name.starts_with("max");
                let spec = (|| -> Result<Spec, String> {
                    let pool = a.ints(0, "kernel_size", r, None)?;
                    let stride = match a.get(1, "stride") {
                        None | Some(Val::None) => pool.clone(),
                        Some(_) => a.ints(1, "stride", r, None)?,
                    };
                    Ok(Spec::Pool {
                        rank: r,
                        kind: if max {
                            super::layer::PoolKind::Max
                        } else {
                            super::layer::PoolKind::Avg
                        },
                        pool,
                        stride,
                        padding: super::layer::Padding::Explicit(a.ints(
                            2,
                            "padding",
                            r,
                            Some(0),
                        )?),
                        dilation: if max {
                            a.ints(3, "dilation", r, Some(1))?
                        } else {
                            vec![1]
                        },
                        ceil_mode: a.boolean(if max { 4 } else { 3 }, "ceil_mode", false)?,
                        channels_last: false,
                    })
                })();
                match spec {
                    Ok(s) => self.op(at, name, s, &[t], false),
                    Err(e) => self.unknown(at, e),
                }
            }
            "adaptive_avg_pool1d"
            | "adaptive_avg_pool2d"
            | "adaptive_max_pool2d"
            | "adaptive_avg_pool3d" => {
                let r: usize = if name.contains("1d") {
                    1
                } else if name.contains("3d") {
                    3
                } else {
                    2
                };
                match torch::adaptive(a.get(0, "output_size"), r) {
                    Ok(s) => self.op(at, name, s, &[t], false),
                    Err(e) => self.unknown(at, e),
                }
            }
            "interpolate" | "upsample" => match a.get(1, "scale_factor").and_then(|v| v.int()) {
                Some(f) if f > 0 && self.tensors[t].shape.len() == 3 => self.op(
                    at,
                    name,
                    Spec::UpSample {
                        rank: 2,
                        size: vec![f as u64],
                        channels_last: false,
                    },
                    &[t],
                    false,
                ),
                _ => self.unknown(at, "interpolation to an unknown size"),
            },
            "add" | "mul" | "multiply" | "subtract" => match a.pos.first() {
                Some(Val::Tensor(u)) => {
                    let u = *u;
                    self.op(at, name, Spec::Merge(Merge::Add), &[t, u], false)
                }
                _ => self.op(at, name, Spec::Identity, &[t], false),
            },
            _ => self.unknown(at, format!("`{}` is not understood", self.snippet(at))),
        }
    }

    /// The value node of keyword argument `key` in a call.
    pub fn keyword_value<'n>(&self, call: Node<'n>, key: &str) -> Option<Node<'n>> {
        let args = call.child_by_field_name("arguments")?;
        named_children(args)
            .find(|a| {
                a.kind() == "keyword_argument"
                    && a.child_by_field_name("name")
                        .is_some_and(|n| self.text(n) == key)
            })
            .and_then(|a| a.child_by_field_name("value"))
    }

    fn unpack_all(&mut self, v: &Val) -> Vec<Val> {
        match v {
            Val::Dims(t) => {
                let n = self.tensors[*t].shape.len() + 1;
                self.unpack(v, n)
            }
            _ => self.iterate(v).unwrap_or_default(),
        }
    }

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
            "fit" | "fit_generator" => {
                let x_node = self.keyword_value(at, "x").or_else(|| {
                    at.child_by_field_name("arguments").and_then(|a| {
                        named_children(a)
                            .find(|n| !matches!(n.kind(), "keyword_argument" | "comment"))
                    })
                });
                let mut fit = Fit {
                    batch: None,
                    batch_unknown: false,
                    span: span(at),
                    x_name: x_node
                        .filter(|n| n.kind() == "identifier")
                        .map(|n| self.text(n).to_string()),
                    x_rows: x_node
                        .filter(|n| n.kind() == "call")
                        .and_then(|n| super::alloc::literal_allocation(self.pm, n))
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
                        span: span(at),
                    }),
                    Some(Val::Str(s)) => Some(Optimizer {
                        name: s.to_string(),
                        slots: optimizer_slots(s, &Args::default(), false),
                        span: span(at),
                    }),
                    Some(Val::Optimizer(i)) => Some(self.optimizers[*i].clone()),
                    Some(_) => Some(Optimizer {
                        name: "an unknown optimizer".into(),
                        slots: None,
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

/// State tensors per parameter: Adam/AdamW 2, SGD with momentum 1 (0 without), RMSprop 1.
pub fn optimizer_slots(name: &str, args: &Args, torch: bool) -> Option<u64> {
    let momentum = |pos: usize| -> Option<bool> {
        match args.get(pos, "momentum") {
            None => Some(false),
            Some(v) => v.float().map(|m| m > 0.0),
        }
    };
    let flag = |pos: usize, key: &str| -> Option<bool> {
        match args.get(pos, key) {
            None => Some(false),
            Some(v) => v.truthy(),
        }
    };
    match name.to_ascii_lowercase().as_str() {
        "adam" | "adamw" => Some(2 + flag(if torch { 5 } else { usize::MAX }, "amsgrad")? as u64),
        "nadam" | "radam" | "adamax" | "adadelta" | "ftrl" | "lamb" => Some(2),
        "sgd" => Some(momentum(if torch { 2 } else { 1 })? as u64),
        "rmsprop" => Some(
            1 + momentum(if torch { 5 } else { 2 })? as u64
                + flag(if torch { 6 } else { usize::MAX }, "centered")? as u64,
        ),
        "adagrad" | "lion" => Some(1),
        _ => None,
    }
}
