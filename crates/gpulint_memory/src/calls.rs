//! Calls into the frameworks: layer constructors and applications, model containers,
//! optimizers, example inputs, tensor functions and methods.

use super::interp::Interp;
use super::layer::Spec;
use super::value::{ints_of, App, Args, Fit, Fw, LayerDef, Obj, ObjKind, Optimizer, Tensor, Val};
use super::{keras, torch};
use gpulint_syntax::named_children;
use gpulint_syntax::NodeExt;
use std::rc::Rc;
use tree_sitter::Node;

fn span(n: Node<'_>) -> (usize, usize) {
    (n.start_byte(), n.end_byte())
}

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
                Val::Tuple(_) | Val::List(_) => it.tensor_list(Some(v)),
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
