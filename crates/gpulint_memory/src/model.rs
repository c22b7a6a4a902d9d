//! The models a file builds, each traced layer by layer: output shapes per sample and
//! parameters, or the reason the trace stopped.

use super::interp::Interp;
use super::layer::{Params, Shape};
use super::value::{Args, Facts, Fw, ObjKind, Val};
pub use crate::step::{Step, INPUT};
use std::collections::{BTreeSet, HashMap, HashSet};

/// A model found in the file.
#[derive(Debug, Clone)]
pub struct Built {
    pub fw: Fw,
    /// `Sequential`, `functional`, `subclassed`, `nn.Module`, `nn.Sequential`.
    pub kind: &'static str,
    /// The variable it was first bound to.
    pub var: Option<String>,
    /// Where it is built.
    pub span: (usize, usize),
    /// The per-sample input shape, and whether it holds integers (token ids).
    pub input: Option<(Shape, bool)>,
    pub steps: Vec<Step>,
    /// All parameters (what `count_params()` / `parameters()` count), when known.
    pub params: Option<Params>,
    /// Why the trace is incomplete; `None` when every layer was inferred.
    pub unknown: Option<String>,
    pub facts: Facts,
    /// Some layer was frozen with `trainable=False`.
    pub frozen: bool,
    /// How the input was chosen when the file does not show it (library models).
    pub input_note: Option<String>,
}

impl Built {
    pub fn label(&self) -> String {
        match &self.var {
            Some(v) => format!("`{v}`"),
            None => "the model".into(),
        }
    }
}

/// The library a model comes from, for messages.
fn zoo_kind(label: &str) -> &'static str {
    match label.split('.').next().unwrap_or("") {
        "torchvision" => "torchvision",
        "keras" => "keras.applications",
        "transformers" => "transformers",
        _ => "timm",
    }
}

impl<'a, 't> Interp<'a, 't> {
    /// The top-level models (not parts of another model), one per place of creation.
    pub fn models(&mut self) -> Vec<Built> {
        let mut nested: HashSet<usize> = HashSet::new();
        for obj in &self.objs {
            let vals = obj.attrs.iter().map(|(_, v)| v).chain(match &obj.kind {
                ObjKind::Sequential { items, .. } | ObjKind::ModuleList { items } => items.iter(),
                _ => [].iter(),
            });
            for v in vals {
                if let Val::Obj(o) = v {
                    nested.insert(*o);
                }
            }
        }
        // Every trained model; of the untrained ones, one per creation site.
        let mut by_site: HashMap<(usize, usize), usize> = HashMap::new();
        let mut chosen: Vec<usize> = Vec::new();
        for (o, obj) in self.objs.iter().enumerate() {
            let is_model = match &obj.kind {
                ObjKind::Instance { fw, .. } => fw.is_some(),
                ObjKind::Sequential { .. } | ObjKind::Functional { .. } => true,
                ObjKind::ModuleList { .. } => false,
                ObjKind::Zoo(_) => true,
            };
            let bound = self.var_names.contains_key(&o)
                || obj.facts.example.is_some()
                || obj.facts.optimizer.is_some()
                || !obj.facts.fits.is_empty();
            if !is_model || nested.contains(&o) || !bound {
                continue;
            }
            let trained = |f: &Facts| f.optimizer.is_some() || !f.fits.is_empty();
            if trained(&obj.facts) {
                chosen.push(o);
                by_site.remove(&obj.span);
            } else if !chosen.iter().any(|c| self.objs[*c].span == obj.span) {
                by_site.insert(obj.span, o);
            }
        }
        chosen.extend(by_site.into_values());
        chosen.sort_by_key(|o| (self.objs[*o].span, *o));
        chosen.into_iter().map(|o| self.build(o)).collect()
    }

    fn node_at(&self, span: (usize, usize)) -> tree_sitter::Node<'t> {
        super::node_at(self.pm, span).unwrap_or(self.pm.root)
    }

    fn build(&mut self, o: usize) -> Built {
        let obj = self.objs[o].clone();
        let at = self.node_at(obj.span);
        let (fw, kind) = match &obj.kind {
            ObjKind::Instance { fw, .. } => {
                let fw = fw.unwrap_or(Fw::Torch);
                (
                    fw,
                    if fw == Fw::Keras {
                        "subclassed"
                    } else {
                        "nn.Module"
                    },
                )
            }
            ObjKind::Sequential { fw, .. } => (
                *fw,
                if *fw == Fw::Keras {
                    "Sequential"
                } else {
                    "nn.Sequential"
                },
            ),
            ObjKind::Functional { .. } => (Fw::Keras, "functional"),
            ObjKind::ModuleList { .. } => (Fw::Torch, "nn.ModuleList"),
            ObjKind::Zoo(arch) => (arch.fw, zoo_kind(&arch.label)),
        };
        let mut built = Built {
            fw,
            kind,
            var: self.var_names.get(&o).cloned(),
            span: obj.span,
            input: None,
            steps: Vec::new(),
            params: None,
            unknown: None,
            facts: obj.facts.clone(),
            frozen: false,
            input_note: None,
        };
        if let ObjKind::Zoo(arch) = &obj.kind {
            let arch = self.zoo_arch(o).unwrap_or_else(|| (**arch).clone());
            self.build_zoo(&arch, &mut built);
            return built;
        }
        // The input and a run of the forward pass.
        let (inputs, outputs): (Vec<usize>, Val) = match &obj.kind {
            ObjKind::Functional { inputs, outputs } => (
                inputs.clone(),
                Val::Tuple(std::rc::Rc::new(
                    outputs.iter().map(|t| Val::Tensor(*t)).collect(),
                )),
            ),
            ObjKind::Sequential {
                fw: Fw::Keras,
                items,
            } => {
                let mut items = items.clone();
                let mut shape = obj.facts.input_shape.clone();
                let mut int = false;
                if let Some(Val::Tensor(t)) = items.first() {
                    if self.tensors[*t].producer.is_none() {
                        shape = shape.or_else(|| Some(self.tensors[*t].shape.clone()));
                        int = self.tensors[*t].int;
                        items.remove(0);
                    }
                }
                if let Some(Val::Layer(l)) = items.first() {
                    shape = shape.or_else(|| self.layers[*l].input_shape.clone());
                }
                let Some(shape) = shape else {
                    built.unknown = Some(
                        "the input shape is not known: give the model an `Input(shape=...)` or call `build()`".into(),
                    );
                    return built;
                };
                let t = self.new_tensor(shape.clone(), int, None);
                built.input = Some((shape, int));
                let x = self.run_in_sequence(items, Val::Tensor(t), at);
                (vec![t], x)
            }
            _ => {
                let example = match (fw, &obj.facts.input_shape, &obj.facts.example) {
                    (Fw::Keras, Some(s), _) => Some((s.clone(), false)),
                    (_, _, Some((s, int, _))) => Some((s.clone(), *int)),
                    _ => None,
                };
                let Some((shape, int)) = example else {
                    built.unknown = Some(match fw {
                        Fw::Keras => "the input shape is not known: call `build()` or call the model on an `Input`".into(),
                        Fw::Torch => "the input shape is not known: no example input (`model(torch.randn(...))` or `summary(model, ...)`) in the file".into(),
                    });
                    return built;
                };
                let t = self.new_tensor(shape.clone(), int, None);
                built.input = Some((shape, int));
                let first_app = self.apps.len();
                let out = self.call_model(
                    o,
                    Args {
                        pos: vec![Val::Tensor(t)],
                        kw: vec![],
                    },
                    at,
                );
                let _ = first_app;
                (vec![t], out)
            }
        };
        if let ObjKind::Functional { inputs, .. } = &obj.kind {
            if let Some(t) = inputs.first() {
                built.input = Some((self.tensors[*t].shape.clone(), self.tensors[*t].int));
            }
        }
        let outs: Vec<usize> = match &outputs {
            Val::Tensor(t) => vec![*t],
            Val::Tuple(_) | Val::List(_) => self
                .iterate(&outputs)
                .unwrap_or_default()
                .iter()
                .filter_map(|v| {
                    if let Val::Tensor(t) = v {
                        Some(*t)
                    } else {
                        None
                    }
                })
                .collect(),
            _ => vec![],
        };
        if outs.is_empty() {
            let why = self.reason(&outputs);
            built.unknown = Some(if why.is_empty() || why == "not known statically" {
                "the output of the forward pass is not known".into()
            } else {
                why
            });
            return built;
        }
        // The applications between the inputs and the outputs, in order.
        let mut apps: BTreeSet<usize> = BTreeSet::new();
        let mut stack: Vec<usize> = outs.clone();
        let mut seen: HashSet<usize> = HashSet::new();
        while let Some(t) = stack.pop() {
            if !seen.insert(t) {
                continue;
            }
            if let Some(a) = self.tensors[t].producer {
                apps.insert(a);
                stack.extend(self.apps[a].inputs.iter().copied());
            } else if !inputs.contains(&t) {
                built.unknown = Some(
                    "the forward pass uses a tensor that is not derived from the input".into(),
                );
            }
        }
        let paths = if fw == Fw::Torch {
            self.torch_paths(o)
        } else {
            Vec::new()
        };
        let path_of: HashMap<usize, &str> =
            paths.iter().rev().map(|(p, l)| (*l, p.as_str())).collect();
        let mut seen_layers: HashSet<usize> = HashSet::new();
        let mut step_of_app: HashMap<usize, usize> = HashMap::new();
        let mut zoo_params = Params::default();
        for a in apps {
            let app = self.apps[a].clone();
            if let Some(z) = app.zoo {
                let input = app.inputs.first().map(|t| {
                    self.tensors[*t]
                        .producer
                        .and_then(|p| step_of_app.get(&p).copied())
                        .unwrap_or(INPUT)
                });
                let shape = app.inputs.first().map(|t| self.tensors[*t].shape.clone());
                let ObjKind::Zoo(arch) = &self.objs[z].kind else {
                    continue;
                };
                let first = seen_layers.insert(usize::MAX - z);
                match shape.map(|s| arch.build(&s)) {
                    Some(Ok(net)) => {
                        if first {
                            zoo_params.total += net.params.total;
                            zoo_params.trainable += net.params.trainable;
                        }
                        let offset = built.steps.len();
                        let prefix = self
                            .var_names
                            .get(&z)
                            .cloned()
                            .unwrap_or_else(|| arch.label.clone());
                        let mut last = offset;
                        for (i, mut st) in net.steps.into_iter().enumerate() {
                            for inp in st.inputs.iter_mut() {
                                *inp = if *inp == INPUT {
                                    input.unwrap_or(INPUT)
                                } else {
                                    *inp + offset
                                };
                            }
                            st.name = format!("{prefix}.{}", st.name);
                            if !first {
                                st.params = Params::default();
                            }
                            if st.class != "cross_entropy" {
                                last = offset + i;
                            }
                            built.steps.push(st);
                        }
                        step_of_app.insert(a, last);
                    }
                    Some(Err(why)) => built.unknown = Some(why),
                    None => {}
                }
                continue;
            }
            let out = &self.tensors[app.output];
            let (name, module, params) = match app.layer {
                Some(l) => {
                    let first = seen_layers.insert(l);
                    let def = &self.layers[l];
                    let mut p = if first {
                        def.params.unwrap_or_default()
                    } else {
                        Params::default()
                    };
                    if def.frozen {
                        p.trainable = 0;
                        built.frozen = true;
                    }
                    match fw {
                        Fw::Keras => (def.name.clone(), true, p),
                        Fw::Torch => match path_of.get(&l) {
                            Some(path) => (path.to_string(), true, p),
                            None => (format!("{} (not registered)", def.class), false, p),
                        },
                    }
                }
                None => (app.op.to_string(), false, Params::default()),
            };
            let inputs = app
                .inputs
                .iter()
                .map(|t| {
                    self.tensors[*t]
                        .producer
                        .and_then(|p| step_of_app.get(&p).copied())
                        .unwrap_or(INPUT)
                })
                .collect();
            step_of_app.insert(a, built.steps.len());
            let workspace = match app.layer.map(|l| &self.layers[l].spec) {
                Some(Ok(super::layer::Spec::Conv(c)))
                    if fw == Fw::Torch && c.dilation.iter().any(|d| *d > 1) && !c.transpose =>
                {
                    let cin = c.in_channels.unwrap_or(0) / c.groups.max(1);
                    let k: u64 = c.kernel.iter().product();
                    let spatial: u64 = out.shape.iter().skip(1).product();
                    cin * k * spatial
                }
                _ => 0,
            };
            let heads = match app.layer.map(|l| &self.layers[l].spec) {
                Some(Ok(super::layer::Spec::Attention(att))) => att.heads,
                Some(Ok(super::layer::Spec::Recurrent(r))) => r.layers,
                _ => 0,
            };
            built.steps.push(Step {
                name,
                class: app.op.to_string(),
                output: out.shape.clone(),
                params,
                module,
                view: app.view,
                int: out.int,
                inputs,
                heads,
                workspace,
            });
        }
        built.params = match fw {
            Fw::Keras => Some(built.steps.iter().fold(Params::default(), |acc, s| Params {
                total: acc.total + s.params.total,
                trainable: acc.trainable + s.params.trainable,
            })),
            Fw::Torch => self.torch_params(&paths).map(|p| Params {
                total: p.total + zoo_params.total,
                trainable: p.trainable + zoo_params.trainable,
            }),
        };
        if built.params.is_none() && built.unknown.is_none() {
            built.unknown = Some("the parameters of a registered module are not known".into());
        }
        built
    }

    /// A library model with the classifier the file gave it: `model.fc = nn.Linear(2048, 10)`,
    /// timm's `model.reset_classifier(10)`.
    pub fn zoo_arch(&self, o: usize) -> Option<crate::zoo::Arch> {
        let ObjKind::Zoo(arch) = &self.objs[o].kind else {
            return None;
        };
        let obj = &self.objs[o];
        if let Some(n) = obj.attr("__num_classes__").and_then(|v| v.int()) {
            return Some(arch.with_classes(n as u64));
        }
        let (head, _) = arch.head()?;
        match obj.attr(head) {
            Some(Val::Layer(l)) => match &self.layers[*l].spec {
                Ok(super::layer::Spec::Dense { units, .. }) => Some(arch.with_classes(*units)),
                _ => None,
            },
            _ => None,
        }
    }

    /// A library model: its network fed the example input, or the input it is published for.
    fn build_zoo(&self, arch: &crate::zoo::Arch, built: &mut Built) {
        let given = match arch.fw {
            Fw::Keras => built.facts.input_shape.clone().map(|s| (s, false)),
            Fw::Torch => built
                .facts
                .example
                .as_ref()
                .map(|(s, i, _)| (s.clone(), *i)),
        };
        let (shape, int) = match given {
            Some(g) => g,
            None => {
                built.input_note = Some(arch.input_note.clone());
                (arch.input.clone(), arch.int)
            }
        };
        built.input = Some((shape.clone(), int));
        match arch.build(&shape) {
            Ok(net) => {
                built.params = Some(net.params);
                built.steps = net.steps;
            }
            Err(why) => built.unknown = Some(why),
        }
    }

    /// Registered modules of a PyTorch model, depth first in registration order, with paths.
    pub fn torch_paths(&self, o: usize) -> Vec<(String, usize)> {
        let mut out = Vec::new();
        let mut visited = HashSet::new();
        self.walk_modules(&Val::Obj(o), String::new(), 0, &mut out, &mut visited);
        out
    }

    fn walk_modules(
        &self,
        v: &Val,
        prefix: String,
        depth: usize,
        out: &mut Vec<(String, usize)>,
        visited: &mut HashSet<usize>,
    ) {
        if depth > 16 {
            return;
        }
        match v {
            Val::Layer(l) => out.push((prefix, *l)),
            Val::Obj(o) => {
                if !visited.insert(*o) {
                    return;
                }
                let obj = &self.objs[*o];
                let dot = |name: &str| {
                    if prefix.is_empty() {
                        name.to_string()
                    } else {
                        format!("{prefix}.{name}")
                    }
                };
                match &obj.kind {
                    ObjKind::Sequential { items, .. } | ObjKind::ModuleList { items } => {
                        for (i, item) in items.iter().enumerate() {
                            self.walk_modules(item, dot(&i.to_string()), depth + 1, out, visited);
                        }
                    }
                    ObjKind::Instance { .. } => {
                        for (name, item) in &obj.attrs {
                            if matches!(item, Val::Layer(_) | Val::Obj(_)) {
                                self.walk_modules(item, dot(name), depth + 1, out, visited);
                            }
                        }
                    }
                    ObjKind::Functional { .. } | ObjKind::Zoo(_) => {}
                }
            }
            _ => {}
        }
    }

    fn torch_params(&self, paths: &[(String, usize)]) -> Option<Params> {
        let mut seen = HashSet::new();
        let mut total = Params::default();
        for (_, l) in paths {
            if !seen.insert(*l) {
                continue;
            }
            let def = &self.layers[*l];
            let spec = def.spec.as_ref().ok()?;
            let p = spec.static_params().or(def.params)?;
            total.total += p.total;
            total.trainable += p.trainable;
        }
        Some(total)
    }
}
