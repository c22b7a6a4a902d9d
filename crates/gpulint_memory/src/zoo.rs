//! The models people train without writing them: `torchvision.models.resnet50()`,
//! `timm.create_model("vit_base_patch16_224")`, `tf.keras.applications.ResNet50(...)` and
//! Hugging Face transformers (`GPT2LMHeadModel(GPT2Config())`,
//! `AutoModelForCausalLM.from_pretrained("gpt2")`). Each name maps to its published
//! architecture, written down layer by layer in [`torchvision`], [`timm`], [`keras_apps`] and
//! [`hf`] with [`net::Net`], so the input size, sequence length, batch and precision all change
//! the answer and the parameter count is the library's own.

pub mod hf;
pub mod keras_apps;
pub mod net;
pub mod timm;
pub mod torchvision;

use crate::layer::Shape;
pub use crate::step::Fw;
use net::{Net, X};

/// A library model: which network, and what it is fed when the file does not say.
#[derive(Debug, Clone)]
pub struct Arch {
    /// How the file named it: `torchvision.models.resnet50`.
    pub label: String,
    pub fw: Fw,
    pub net: Kind,
    pub classes: u64,
    /// The per-sample input when the file gives no example: the resolution the network is
    /// published at, or the model's longest sequence.
    pub input: Shape,
    /// Token ids rather than pixels.
    pub int: bool,
    /// Why that input, for messages.
    pub input_note: String,
}

#[derive(Debug, Clone)]
pub enum Kind {
    ResNet {
        layers: [u64; 4],
        bottleneck: bool,
        groups: u64,
        width: u64,
        timm: bool,
    },
    Vgg(&'static [u64], bool),
    AlexNet,
    MobileNetV2,
    MobileNetV3(bool),
    EfficientNet {
        width: f64,
        depth: f64,
        timm: bool,
    },
    DenseNet(u64, &'static [u64], u64),
    Vit {
        patch: u64,
        layers: u64,
        d: u64,
        heads: u64,
        mlp: u64,
        timm: bool,
    },
    ConvNext {
        depths: [u64; 4],
        dims: [u64; 4],
    },
    Keras(keras_apps::App),
    Hf(hf::Config),
}

impl Arch {
    fn image(label: &str, fw: Fw, net: Kind, classes: u64, size: u64) -> Arch {
        let input = if fw == Fw::Keras {
            vec![size, size, 3]
        } else {
            vec![3, size, size]
        };
        Arch {
            label: label.to_string(),
            fw,
            net,
            classes,
            input,
            int: false,
            input_note: format!("{size} × {size} RGB images, the resolution it is published at"),
        }
    }

    /// The attribute holding the final linear layer users replace
    /// (`model.fc = nn.Linear(model.fc.in_features, 10)`), and its input features.
    pub fn head(&self) -> Option<(&'static str, u64)> {
        let name = match &self.net {
            Kind::ResNet { .. } => "fc",
            Kind::DenseNet(..) => "classifier",
            Kind::Vit { timm: true, .. } => "head",
            _ => return None,
        };
        let net = self.build(&self.input).ok()?;
        let step = net.steps.iter().find(|s| s.name == name)?;
        let from = *step.inputs.first()?;
        let features = net.steps.get(from)?.output.last().copied()?;
        Some((name, features))
    }

    /// The same network with another number of classes.
    pub fn with_classes(&self, classes: u64) -> Arch {
        Arch {
            classes,
            ..self.clone()
        }
    }

    /// The network fed `input` per sample.
    pub fn build(&self, input: &Shape) -> Result<Net, String> {
        let x = X::input(input.clone());
        let c = self.classes;
        let rank = if self.int { 1 } else { 3 };
        if input.len() != rank {
            return Err(format!(
                "{} takes {} per sample, not {}",
                self.label,
                if self.int {
                    "a sequence of token ids"
                } else {
                    "a 3-dimensional image"
                },
                crate::layer::fmt_shape(input)
            ));
        }
        Ok(match &self.net {
            Kind::ResNet {
                layers,
                bottleneck,
                groups,
                width,
                timm: false,
            } => torchvision::resnet(x, *layers, *bottleneck, *groups, *width, c),
            Kind::ResNet {
                layers,
                bottleneck,
                timm: true,
                ..
            } => timm::resnet(x, *layers, *bottleneck, c),
            Kind::Vgg(cfg, bn) => torchvision::vgg(x, cfg, *bn, c),
            Kind::AlexNet => torchvision::alexnet(x, c),
            Kind::MobileNetV2 => torchvision::mobilenet_v2(x, c),
            Kind::MobileNetV3(large) => torchvision::mobilenet_v3(x, *large, c),
            Kind::EfficientNet {
                width,
                depth,
                timm: false,
            } => torchvision::efficientnet(x, *width, *depth, c),
            Kind::EfficientNet {
                width,
                depth,
                timm: true,
            } => timm::efficientnet(x, *width, *depth, c),
            Kind::DenseNet(g, blocks, init) => torchvision::densenet(x, *g, blocks, *init, c),
            Kind::Vit {
                patch,
                layers,
                d,
                heads,
                mlp,
                timm,
            } => {
                if input[1] % patch != 0 || input[2] % patch != 0 {
                    return Err(format!(
                        "the image size {}×{} is not a multiple of the patch size {patch}",
                        input[1], input[2]
                    ));
                }
                if *timm {
                    timm::vit(x, *patch, *layers, *d, *heads, *mlp, c)
                } else {
                    torchvision::vit(x, *patch, *layers, *d, *heads, *mlp, c)
                }
            }
            Kind::ConvNext { depths, dims } => timm::convnext(x, depths, dims, c),
            Kind::Keras(app) => keras_apps::build(app, x, c)?,
            Kind::Hf(cfg) => hf::build(cfg, x)?,
        })
    }
}

fn classes(a: &Opts, default: u64) -> Result<u64, String> {
    a.int(usize::MAX, "num_classes", Some(default))
}

/// `torchvision.models.<name>(...)`.
pub fn torchvision_model(name: &str, a: &Opts) -> Option<Result<Arch, String>> {
    let net = torch_image_kind(name, false)?;
    let label = format!("torchvision.models.{name}");
    let size = published_size(name);
    Some(classes(a, 1000).map(|c| Arch::image(&label, Fw::Torch, net, c, size)))
}

/// The networks torchvision and timm share by name.
fn torch_image_kind(name: &str, timm: bool) -> Option<Kind> {
    let resnet = |layers: [u64; 4], bottleneck: bool, groups: u64, width: u64| Kind::ResNet {
        layers,
        bottleneck,
        groups,
        width,
        timm,
    };
    let vit = |patch, layers, d, heads, mlp| Kind::Vit {
        patch,
        layers,
        d,
        heads,
        mlp,
        timm,
    };
    Some(match name {
        "resnet18" => resnet([2, 2, 2, 2], false, 1, 64),
        "resnet34" => resnet([3, 4, 6, 3], false, 1, 64),
        "resnet50" => resnet([3, 4, 6, 3], true, 1, 64),
        "resnet101" => resnet([3, 4, 23, 3], true, 1, 64),
        "resnet152" => resnet([3, 8, 36, 3], true, 1, 64),
        "resnext50_32x4d" if !timm => resnet([3, 4, 6, 3], true, 32, 4),
        "resnext101_32x8d" if !timm => resnet([3, 4, 23, 3], true, 32, 8),
        "wide_resnet50_2" if !timm => resnet([3, 4, 6, 3], true, 1, 128),
        "wide_resnet101_2" if !timm => resnet([3, 4, 23, 3], true, 1, 128),
        "vgg11" if !timm => Kind::Vgg(torchvision::VGG11, false),
        "vgg13" if !timm => Kind::Vgg(torchvision::VGG13, false),
        "vgg16" if !timm => Kind::Vgg(torchvision::VGG16, false),
        "vgg19" if !timm => Kind::Vgg(torchvision::VGG19, false),
        "vgg11_bn" if !timm => Kind::Vgg(torchvision::VGG11, true),
        "vgg13_bn" if !timm => Kind::Vgg(torchvision::VGG13, true),
        "vgg16_bn" if !timm => Kind::Vgg(torchvision::VGG16, true),
        "vgg19_bn" if !timm => Kind::Vgg(torchvision::VGG19, true),
        "alexnet" if !timm => Kind::AlexNet,
        "mobilenet_v2" if !timm => Kind::MobileNetV2,
        "mobilenet_v3_large" if !timm => Kind::MobileNetV3(true),
        "mobilenet_v3_small" if !timm => Kind::MobileNetV3(false),
        "densenet121" if !timm => Kind::DenseNet(32, &[6, 12, 24, 16], 64),
        "densenet161" if !timm => Kind::DenseNet(48, &[6, 12, 36, 24], 96),
        "densenet169" if !timm => Kind::DenseNet(32, &[6, 12, 32, 32], 64),
        "densenet201" if !timm => Kind::DenseNet(32, &[6, 12, 48, 32], 64),
        "vit_b_16" if !timm => vit(16, 12, 768, 12, 3072),
        "vit_b_32" if !timm => vit(32, 12, 768, 12, 3072),
        "vit_l_16" if !timm => vit(16, 24, 1024, 16, 4096),
        "vit_l_32" if !timm => vit(32, 24, 1024, 16, 4096),
        "vit_tiny_patch16_224" if timm => vit(16, 12, 192, 3, 768),
        "vit_small_patch16_224" if timm => vit(16, 12, 384, 6, 1536),
        "vit_base_patch16_224" if timm => vit(16, 12, 768, 12, 3072),
        "vit_base_patch32_224" if timm => vit(32, 12, 768, 12, 3072),
        "vit_large_patch16_224" if timm => vit(16, 24, 1024, 16, 4096),
        "convnext_tiny" if timm => Kind::ConvNext {
            depths: [3, 3, 9, 3],
            dims: [96, 192, 384, 768],
        },
        "convnext_small" if timm => Kind::ConvNext {
            depths: [3, 3, 27, 3],
            dims: [96, 192, 384, 768],
        },
        "convnext_base" if timm => Kind::ConvNext {
            depths: [3, 3, 27, 3],
            dims: [128, 256, 512, 1024],
        },
        _ => {
            let v = name.strip_prefix("efficientnet_b")?;
            let (width, depth) = torchvision::efficientnet_scale(v.parse().ok()?)?;
            Kind::EfficientNet { width, depth, timm }
        }
    })
}

/// The image side a network is published at: 224, EfficientNet B1–B7 their own.
fn published_size(name: &str) -> u64 {
    match name {
        "efficientnet_b1" => 240,
        "efficientnet_b2" => 260,
        "efficientnet_b3" => 300,
        "efficientnet_b4" => 380,
        "efficientnet_b5" => 456,
        "efficientnet_b6" => 528,
        "efficientnet_b7" => 600,
        _ => 224,
    }
}

/// `timm.create_model("<name>", ...)`.
pub fn timm_model(a: &Opts) -> Option<Result<Arch, String>> {
    let name = a.get(0, "model_name")?.str()?.to_string();
    // `timm.create_model("hf_hub:timm/resnet50.a1_in1k")`: the architecture before the tag.
    let base = name
        .trim_start_matches("hf_hub:")
        .trim_start_matches("timm/");
    let base = base.split('.').next().unwrap_or(base);
    let Some(net) = torch_image_kind(base, true) else {
        return Some(Err(format!(
            "`timm.create_model(\"{name}\")`: the estimator does not know this architecture"
        )));
    };
    if a.kw("features_only")
        .is_some_and(|v| v.truthy() != Some(false))
    {
        return Some(Err("`features_only=True` is not supported".into()));
    }
    let size = published_size(base);
    let label = format!("timm.create_model(\"{name}\")");
    Some(classes(a, 1000).map(|c| Arch::image(&label, Fw::Torch, net, c, size)))
}

/// A constructor argument of a library model, as far as the interpreter knows it.
#[derive(Debug, Clone, PartialEq)]
pub enum Opt {
    Int(i128),
    Float(f64),
    Bool(bool),
    Str(String),
    None,
    Unknown,
}

impl Opt {
    pub fn int(&self) -> Option<i128> {
        match self {
            Opt::Int(i) => Some(*i),
            Opt::Bool(b) => Some(*b as i128),
            Opt::Float(f) if f.fract() == 0.0 => Some(*f as i128),
            _ => None,
        }
    }

    pub fn float(&self) -> Option<f64> {
        match self {
            Opt::Int(i) => Some(*i as f64),
            Opt::Float(f) => Some(*f),
            _ => None,
        }
    }

    pub fn str(&self) -> Option<&str> {
        match self {
            Opt::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn truthy(&self) -> Option<bool> {
        match self {
            Opt::Bool(b) => Some(*b),
            Opt::Int(i) => Some(*i != 0),
            Opt::None => Some(false),
            _ => None,
        }
    }
}

/// The arguments of a library model's constructor: the first positional one and the keywords.
#[derive(Debug, Clone, Default)]
pub struct Opts {
    pub first: Option<Opt>,
    pub kw: Vec<(String, Opt)>,
}

impl Opts {
    /// The first positional argument (`i == 0`) or keyword `name`.
    pub fn get(&self, i: usize, name: &str) -> Option<&Opt> {
        self.kw(name)
            .or(if i == 0 { self.first.as_ref() } else { None })
    }

    pub fn kw(&self, name: &str) -> Option<&Opt> {
        self.kw.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }

    pub fn int(&self, i: usize, name: &str, default: Option<u64>) -> Result<u64, String> {
        match self.get(i, name) {
            None | Some(Opt::None) => default.ok_or_else(|| format!("`{name}` is missing")),
            Some(v) => v
                .int()
                .filter(|n| *n >= 0)
                .map(|n| n as u64)
                .ok_or_else(|| format!("`{name}` is not a constant")),
        }
    }

    pub fn boolean(&self, i: usize, name: &str, default: bool) -> Result<bool, String> {
        match self.get(i, name) {
            None => Ok(default),
            Some(v) => v
                .truthy()
                .ok_or_else(|| format!("`{name}` is not a constant")),
        }
    }

    pub fn string(&self, i: usize, name: &str) -> Result<Option<String>, String> {
        match self.get(i, name) {
            None | Some(Opt::None) => Ok(None),
            Some(Opt::Str(s)) => Ok(Some(s.clone())),
            Some(_) => Err(format!("`{name}` is not a constant string")),
        }
    }
}
