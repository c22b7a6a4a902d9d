//! Library models: `torchvision.models.<name>()`, `timm.create_model(...)`,
//! `keras.applications.<Name>(...)` and Hugging Face configurations and models become
//! [`ObjKind::Zoo`] objects; calling one on a tensor applies its whole network.

use super::span;
use crate::interp::Interp;
use crate::keras;
use crate::value::{ints_of, App, Args, Fw, Obj, ObjKind, Optimizer, Val};
use crate::zoo::{self, hf, Arch, Kind, Opt, Opts};
use std::rc::Rc;
use tree_sitter::Node;

impl<'a, 't> Interp<'a, 't> {
    /// A call that builds a library model or configuration; `None` for anything else.
    pub(super) fn zoo_call(&mut self, q: &str, args: &Args, at: Node<'_>) -> Option<Val> {
        let arch: Result<Arch, String> = if let Some(name) = q.strip_prefix("torchvision.models.") {
            let name = name.rsplit('.').next().unwrap_or(name);
            zoo::torchvision_model(name, &opts(args))?
        } else if matches!(q, "timm.create_model" | "timm.models.create_model") {
            zoo::timm_model(&opts(args))?
        } else if let Some(rest) = keras::keras_path(q).filter(|r| r.starts_with("applications.")) {
            let name = rest.rsplit('.').next().unwrap_or(rest);
            keras_app(name, args)?
        } else if let Some(rest) = q.strip_prefix("transformers.") {
            return self.transformers(rest, args, at);
        } else {
            return None;
        };
        Some(match arch {
            Ok(arch) => self.new_zoo(arch, at),
            Err(why) => self.unknown(at, why),
        })
    }

    fn new_zoo(&mut self, arch: Arch, at: Node<'_>) -> Val {
        self.objs.push(Obj {
            kind: ObjKind::Zoo(Rc::new(arch)),
            attrs: Vec::new(),
            span: span(at),
            facts: Default::default(),
            name: None,
        });
        Val::Obj(self.objs.len() - 1)
    }

    fn transformers(&mut self, rest: &str, args: &Args, at: Node<'_>) -> Option<Val> {
        let mut parts = rest.split('.');
        let class = parts.next()?;
        let method = parts.next();
        if class == "TrainingArguments" {
            self.batch_source(
                at,
                args.kw("per_device_train_batch_size"),
                Some(8),
                "`TrainingArguments(per_device_train_batch_size=...)`",
            );
            return Some(Val::Unknown(0));
        }
        if class == "Trainer" {
            if let Some(Val::Obj(o)) = args.get(0, "model") {
                if self.objs[*o].facts.optimizer.is_none() {
                    self.objs[*o].facts.optimizer = Some(Optimizer {
                        name: "AdamW (the `Trainer` default)".into(),
                        slots: Some(2),
                        slot_bytes: None,
                        span: span(at),
                    });
                }
            }
            return Some(Val::Unknown(0));
        }
        // Configurations: `GPT2Config(...)`, `AutoConfig.from_pretrained("gpt2")`.
        if class.ends_with("Config") {
            let cfg = match (class, method) {
                ("AutoConfig", Some("from_pretrained")) | (_, Some("from_pretrained")) => {
                    pretrained_config(args)
                }
                (_, None) => hf::config(class, &opts(args))?,
                _ => return None,
            };
            return Some(match cfg {
                Ok(c) => Val::HfConfig(Rc::new(c)),
                Err(why) => self.unknown(at, why),
            });
        }
        let auto = class.starts_with("AutoModel");
        let config: Result<hf::Config, String> = match method {
            Some("from_pretrained") => pretrained_config(args),
            Some("from_config") | None => match args.get(0, "config") {
                Some(Val::HfConfig(c)) => Ok((**c).clone()),
                Some(v @ Val::Unknown(_)) if !self.reason(v).is_empty() => Err(self.reason(v)),
                _ => Err("the model's configuration is not known".into()),
            },
            _ => return None,
        };
        let mut config = match config {
            Ok(c) => c,
            Err(why) => return Some(self.unknown(at, why)),
        };
        let head_class = if auto {
            class.replacen("AutoModel", "Model", 1)
        } else {
            class.to_string()
        };
        let Some(head) = hf::head_of(&head_class, config.family) else {
            return Some(self.unknown(
                at,
                format!("`{class}`: the estimator does not know this model head"),
            ));
        };
        if !auto && hf::family_of(class).is_some_and(|f| f != config.family) {
            return Some(self.unknown(
                at,
                format!("`{class}` built from another model's configuration"),
            ));
        }
        let labels = match config.head {
            hf::Head::SeqCls(n) | hf::Head::ImageCls(n) => Some(n),
            _ => None,
        };
        config.head = match (head, labels) {
            (hf::Head::SeqCls(_), Some(n)) => hf::Head::SeqCls(n),
            (hf::Head::ImageCls(_), Some(n)) => hf::Head::ImageCls(n),
            (h, _) => h,
        };
        if let Err(why) = hf::apply(&mut config, &opts(&only_model_keys(args))) {
            return Some(self.unknown(at, why));
        }
        let vit = config.family == hf::Family::Vit;
        let arch = Arch {
            label: format!("transformers.{rest}"),
            fw: Fw::Torch,
            classes: 0,
            input: if vit {
                vec![3, config.image, config.image]
            } else {
                vec![config.default_seq()]
            },
            int: !vit,
            input_note: if vit {
                format!("{0} × {0} images", config.image)
            } else {
                format!(
                    "sequences of {} tokens (the model's longest, at most 2048)",
                    config.default_seq()
                )
            },
            net: Kind::Hf(config),
        };
        Some(self.new_zoo(arch, at))
    }

    /// `model(x)` for a library model: one application that stands for its whole network.
    pub fn call_zoo(&mut self, o: usize, arch: &Arch, args: Args, at: Node<'_>) -> Val {
        let x = args
            .pos
            .first()
            .or_else(|| args.kw("input_ids"))
            .or_else(|| args.kw("pixel_values"))
            .or_else(|| args.kw("inputs"))
            .or_else(|| args.kw("x"));
        let Some(Val::Tensor(t)) = x else {
            return Val::Unknown(0);
        };
        let t = *t;
        if self.tensors[t].producer.is_none() && self.objs[o].facts.example.is_none() {
            let tensor = &self.tensors[t];
            self.objs[o].facts.example = Some((tensor.shape.clone(), tensor.int, span(at)));
        }
        let shape = self.tensors[t].shape.clone();
        match arch.build(&shape) {
            Ok(net) => {
                let out = net
                    .steps
                    .iter()
                    .rev()
                    .find(|s| s.class != "cross_entropy")
                    .map(|s| s.output.clone())
                    .unwrap_or(shape);
                let y = self.new_tensor(out, false, Some(self.apps.len()));
                self.apps.push(App {
                    layer: None,
                    op: Rc::from(arch.label.as_str()),
                    inputs: vec![t],
                    output: y,
                    params: Default::default(),
                    view: false,
                    zoo: Some(o),
                });
                Val::Tensor(y)
            }
            Err(why) => self.unknown(at, why),
        }
    }
}

/// `from_pretrained(name, ...)`: the published configuration of a known checkpoint.
fn pretrained_config(args: &Args) -> Result<hf::Config, String> {
    let name = match args.get(0, "pretrained_model_name_or_path") {
        Some(Val::Str(s)) => s.to_string(),
        _ => return Err("the checkpoint name is not a constant".into()),
    };
    let mut c = hf::checkpoint(&name).ok_or_else(|| {
        format!("`{name}`: the estimator does not know this checkpoint's configuration")
    })?;
    hf::apply(&mut c, &opts(&only_model_keys(args)))?;
    Ok(c)
}

/// The keyword arguments that change the architecture (not `torch_dtype=`, `device_map=`).
fn only_model_keys(args: &Args) -> Args {
    Args {
        pos: vec![],
        kw: args
            .kw
            .iter()
            .filter(|(k, _)| {
                matches!(
                    k.as_str(),
                    "num_labels" | "attn_implementation" | "vocab_size" | "tie_word_embeddings"
                )
            })
            .cloned()
            .collect(),
    }
}

/// `keras.applications.ResNet50(weights=None, input_shape=(224, 224, 3), classes=10)`.
fn keras_app(name: &str, args: &Args) -> Option<Result<Arch, String>> {
    let (app, size) = match zoo::keras_apps::app(name, &opts(args))? {
        Ok(x) => x,
        Err(e) => return Some(Err(e)),
    };
    Some((|| {
        let classes = args.int(usize::MAX, "classes", Some(1000))?;
        let mut arch = Arch {
            label: format!("keras.applications.{name}"),
            fw: Fw::Keras,
            net: Kind::Keras(app),
            classes,
            input: vec![size, size, 3],
            int: false,
            input_note: format!("{size} × {size} RGB images, the resolution it is published at"),
        };
        if let Some(shape) = args.kw("input_shape").and_then(|v| ints_of(v, 3)) {
            arch.input = shape;
            arch.input_note = "`input_shape=`".into();
        }
        Ok(arch)
    })())
}

/// A value as a library model's constructor argument.
fn opt(v: &Val) -> Opt {
    match v {
        Val::Int(i) => Opt::Int(*i),
        Val::Float(f) => Opt::Float(*f),
        Val::Bool(b) => Opt::Bool(*b),
        Val::Str(s) => Opt::Str(s.to_string()),
        Val::None => Opt::None,
        _ => Opt::Unknown,
    }
}

/// The arguments of a call, for [`zoo`].
fn opts(args: &Args) -> Opts {
    Opts {
        first: args.pos.first().map(opt),
        kw: args.kw.iter().map(|(k, v)| (k.clone(), opt(v))).collect(),
    }
}
