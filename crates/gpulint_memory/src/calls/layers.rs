//! Layers: creating them from constructor calls (with Keras' automatic names), applying them
//! to tensors, and parameter-free operations on tensors.

use super::span;
use crate::interp::Interp;
use crate::keras;
use crate::layer::Spec;
use crate::torch;
use crate::value::{ints_of, App, Args, Fw, LayerDef, Tensor, Val};
use std::rc::Rc;
use tree_sitter::Node;

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
                    zoo: None,
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
        let op = if def.inplace {
            Rc::from(format!("{} (in place)", def.class).as_str())
        } else {
            def.class.clone()
        };
        self.apps.push(App {
            layer: Some(l),
            op,
            inputs,
            output: out,
            params,
            // PyTorch's `Flatten` returns a view of its input.
            view: def.fw == Fw::Torch && &*def.class == "Flatten",
            zoo: None,
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

    pub(super) fn new_layer(
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
        // `nn.ReLU(inplace=True)`, `nn.LeakyReLU(0.2, True)`.
        let inplace_at = if class == "LeakyReLU" || class == "ELU" {
            1
        } else {
            0
        };
        let inplace = fw == Fw::Torch
            && matches!(spec, Ok(Spec::Identity))
            && args
                .get(inplace_at, "inplace")
                .is_some_and(|v| matches!(v, Val::Bool(true)));
        self.layers.push(LayerDef {
            fw,
            class: Rc::from(class),
            spec,
            name,
            span: span(at),
            params: None,
            frozen,
            inplace,
            input_shape,
        });
        let _ = params;
        Val::Layer(self.layers.len() - 1)
    }
}
