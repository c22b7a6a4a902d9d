//! `torchvision.models` classification networks, written down from their published
//! architectures (module names as `named_modules()` gives them, so that each layer can be
//! compared with the library): ResNet/ResNeXt/Wide ResNet, VGG, MobileNet V2/V3, EfficientNet
//! B0–B7, DenseNet, ViT and AlexNet.

use super::net::{cv, Cv, Net, X};
use crate::layer::Params;

fn at(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

/// `Conv2dNormActivation`: `prefix.0` convolution, `prefix.1` batch norm, `prefix.2` activation.
fn cna(n: &mut Net, prefix: &str, x: &X, out: u64, c: Cv, act: Option<&str>) -> X {
    let y = n.conv(&at(prefix, "0"), x, out, c);
    let y = n.bn(&at(prefix, "1"), &y);
    match act {
        Some(a) => n.act(&at(prefix, "2"), a, &y),
        None => y,
    }
}

/// `_make_divisible(v, 8)` of the MobileNet/EfficientNet papers' reference code.
pub fn divisible(v: f64, d: u64) -> u64 {
    let d = d as f64;
    let mut new = ((v + d / 2.0) / d).floor() * d;
    new = new.max(d);
    if new < 0.9 * v {
        new += d;
    }
    new as u64
}

fn classifier_head(n: &mut Net, x: &X, name: &str, classes: u64) -> X {
    let y = n.adaptive("avgpool", "AdaptiveAvgPool2d", x, 1);
    let y = n.flatten(None, &y);
    n.linear(name, &y, classes, true)
}

/// ResNet: `layers` blocks per stage, bottleneck or basic blocks, `groups` and
/// `width_per_group` (ResNeXt, Wide ResNet).
pub fn resnet(
    x: X,
    layers: [u64; 4],
    bottleneck: bool,
    groups: u64,
    width: u64,
    classes: u64,
) -> Net {
    let mut n = Net::new(false);
    let y = n.conv("conv1", &x, 64, cv(7, 2, 3));
    let y = n.bn("bn1", &y);
    let y = n.act("relu", "ReLU", &y);
    let mut y = n.pool("maxpool", "MaxPool2d", &y, 3, 2, 1, false);
    let exp = if bottleneck { 4 } else { 1 };
    let mut inplanes = 64;
    for (i, blocks) in layers.iter().enumerate() {
        let planes = 64 << i;
        for b in 0..*blocks {
            let stride = if b == 0 && i > 0 { 2 } else { 1 };
            let p = format!("layer{}.{b}", i + 1);
            let identity = y.clone();
            let out = if bottleneck {
                let w = planes * width / 64 * groups;
                let z = n.conv(&at(&p, "conv1"), &y, w, cv(1, 1, 0));
                let z = n.bn(&at(&p, "bn1"), &z);
                let z = n.act(&at(&p, "relu"), "ReLU", &z);
                let z = n.conv(&at(&p, "conv2"), &z, w, cv(3, stride, 1).groups(groups));
                let z = n.bn(&at(&p, "bn2"), &z);
                let z = n.act(&at(&p, "relu"), "ReLU", &z);
                let z = n.conv(&at(&p, "conv3"), &z, planes * exp, cv(1, 1, 0));
                n.bn(&at(&p, "bn3"), &z)
            } else {
                let z = n.conv(&at(&p, "conv1"), &y, planes, cv(3, stride, 1));
                let z = n.bn(&at(&p, "bn1"), &z);
                let z = n.act(&at(&p, "relu"), "ReLU", &z);
                let z = n.conv(&at(&p, "conv2"), &z, planes, cv(3, 1, 1));
                n.bn(&at(&p, "bn2"), &z)
            };
            let short = if stride != 1 || inplanes != planes * exp {
                let d = n.conv(
                    &at(&p, "downsample.0"),
                    &identity,
                    planes * exp,
                    cv(1, stride, 0),
                );
                n.bn(&at(&p, "downsample.1"), &d)
            } else {
                identity
            };
            let s = n.add(&out, &short);
            y = n.act(&at(&p, "relu"), "ReLU", &s);
            inplanes = planes * exp;
        }
    }
    classifier_head(&mut n, &y, "fc", classes);
    n
}

/// VGG with configuration `cfg` (0: max pooling), with or without batch norm.
pub fn vgg(x: X, cfg: &[u64], bn: bool, classes: u64) -> Net {
    let mut n = Net::new(false);
    let mut y = x;
    let mut i = 0;
    for &c in cfg {
        if c == 0 {
            y = n.pool(&format!("features.{i}"), "MaxPool2d", &y, 2, 2, 0, false);
            i += 1;
            continue;
        }
        y = n.conv(&format!("features.{i}"), &y, c, cv(3, 1, 1).bias());
        i += 1;
        if bn {
            y = n.bn(&format!("features.{i}"), &y);
            i += 1;
        }
        y = n.act(&format!("features.{i}"), "ReLU", &y);
        i += 1;
    }
    let y = n.adaptive("avgpool", "AdaptiveAvgPool2d", &y, 7);
    let y = n.flatten(None, &y);
    let y = n.linear("classifier.0", &y, 4096, true);
    let y = n.act("classifier.1", "ReLU", &y);
    let y = n.act("classifier.2", "Dropout", &y);
    let y = n.linear("classifier.3", &y, 4096, true);
    let y = n.act("classifier.4", "ReLU", &y);
    let y = n.act("classifier.5", "Dropout", &y);
    n.linear("classifier.6", &y, classes, true);
    n
}

pub const VGG11: &[u64] = &[64, 0, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0];
pub const VGG13: &[u64] = &[
    64, 64, 0, 128, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0,
];
pub const VGG16: &[u64] = &[
    64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0,
];
pub const VGG19: &[u64] = &[
    64, 64, 0, 128, 128, 0, 256, 256, 256, 256, 0, 512, 512, 512, 512, 0, 512, 512, 512, 512, 0,
];

pub fn alexnet(x: X, classes: u64) -> Net {
    let mut n = Net::new(false);
    let y = n.conv("features.0", &x, 64, cv(11, 4, 2).bias());
    let y = n.act("features.1", "ReLU", &y);
    let y = n.pool("features.2", "MaxPool2d", &y, 3, 2, 0, false);
    let y = n.conv("features.3", &y, 192, cv(5, 1, 2).bias());
    let y = n.act("features.4", "ReLU", &y);
    let y = n.pool("features.5", "MaxPool2d", &y, 3, 2, 0, false);
    let y = n.conv("features.6", &y, 384, cv(3, 1, 1).bias());
    let y = n.act("features.7", "ReLU", &y);
    let y = n.conv("features.8", &y, 256, cv(3, 1, 1).bias());
    let y = n.act("features.9", "ReLU", &y);
    let y = n.conv("features.10", &y, 256, cv(3, 1, 1).bias());
    let y = n.act("features.11", "ReLU", &y);
    let y = n.pool("features.12", "MaxPool2d", &y, 3, 2, 0, false);
    let y = n.adaptive("avgpool", "AdaptiveAvgPool2d", &y, 6);
    let y = n.flatten(None, &y);
    let y = n.act("classifier.0", "Dropout", &y);
    let y = n.linear("classifier.1", &y, 4096, true);
    let y = n.act("classifier.2", "ReLU", &y);
    let y = n.act("classifier.3", "Dropout", &y);
    let y = n.linear("classifier.4", &y, 4096, true);
    let y = n.act("classifier.5", "ReLU", &y);
    n.linear("classifier.6", &y, classes, true);
    n
}

pub fn mobilenet_v2(x: X, classes: u64) -> Net {
    let mut n = Net::new(false);
    let mut y = cna(&mut n, "features.0", &x, 32, cv(3, 2, 1), Some("ReLU6"));
    let mut inp = 32;
    let mut f = 1;
    for (t, c, reps, s) in [
        (1, 16, 1, 1),
        (6, 24, 2, 2),
        (6, 32, 3, 2),
        (6, 64, 4, 2),
        (6, 96, 3, 1),
        (6, 160, 3, 2),
        (6, 320, 1, 1),
    ] {
        for r in 0..reps {
            let stride = if r == 0 { s } else { 1 };
            let p = format!("features.{f}.conv");
            let hidden = inp * t;
            let mut i = 0;
            let mut z = y.clone();
            if t != 1 {
                z = cna(&mut n, &at(&p, "0"), &z, hidden, cv(1, 1, 0), Some("ReLU6"));
                i = 1;
            }
            let dw = cv(3, stride, 1).groups(hidden);
            z = cna(
                &mut n,
                &at(&p, &i.to_string()),
                &z,
                hidden,
                dw,
                Some("ReLU6"),
            );
            z = n.conv(&at(&p, &(i + 1).to_string()), &z, c, cv(1, 1, 0));
            z = n.bn(&at(&p, &(i + 2).to_string()), &z);
            y = if stride == 1 && inp == c {
                n.add(&y, &z)
            } else {
                z
            };
            inp = c;
            f += 1;
        }
    }
    let y = cna(
        &mut n,
        &format!("features.{f}"),
        &y,
        1280,
        cv(1, 1, 0),
        Some("ReLU6"),
    );
    let y = n.op("adaptive_avg_pool2d", &[&y], vec![1280, 1, 1], false);
    let y = n.flatten(None, &y);
    let y = n.act("classifier.0", "Dropout", &y);
    n.linear("classifier.1", &y, classes, true);
    n
}

/// Squeeze-and-excitation: `avgpool`, `fc1`, `activation`, `fc2`, `scale_activation`, then the
/// input scaled.
fn squeeze_excite(n: &mut Net, p: &str, x: &X, squeeze: u64, act: &str, gate: &str) -> X {
    let c = x.c(false);
    let s = n.adaptive(&at(p, "avgpool"), "AdaptiveAvgPool2d", x, 1);
    let s = n.conv(&at(p, "fc1"), &s, squeeze, cv(1, 1, 0).bias());
    let s = n.act(&at(p, "activation"), act, &s);
    let s = n.conv(&at(p, "fc2"), &s, c, cv(1, 1, 0).bias());
    let s = n.act(&at(p, "scale_activation"), gate, &s);
    n.scale(x, &s)
}

/// MobileNet V3: (input, kernel, expanded, output, squeeze-excite, hard-swish, stride).
type V3 = (u64, u64, u64, u64, bool, bool, u64);

const V3_LARGE: &[V3] = &[
    (16, 3, 16, 16, false, false, 1),
    (16, 3, 64, 24, false, false, 2),
    (24, 3, 72, 24, false, false, 1),
    (24, 5, 72, 40, true, false, 2),
    (40, 5, 120, 40, true, false, 1),
    (40, 5, 120, 40, true, false, 1),
    (40, 3, 240, 80, false, true, 2),
    (80, 3, 200, 80, false, true, 1),
    (80, 3, 184, 80, false, true, 1),
    (80, 3, 184, 80, false, true, 1),
    (80, 3, 480, 112, true, true, 1),
    (112, 3, 672, 112, true, true, 1),
    (112, 5, 672, 160, true, true, 2),
    (160, 5, 960, 160, true, true, 1),
    (160, 5, 960, 160, true, true, 1),
];

const V3_SMALL: &[V3] = &[
    (16, 3, 16, 16, true, false, 2),
    (16, 3, 72, 24, false, false, 2),
    (24, 3, 88, 24, false, false, 1),
    (24, 5, 96, 40, true, true, 2),
    (40, 5, 240, 40, true, true, 1),
    (40, 5, 240, 40, true, true, 1),
    (40, 5, 120, 48, true, true, 1),
    (48, 5, 144, 48, true, true, 1),
    (48, 5, 288, 96, true, true, 2),
    (96, 5, 576, 96, true, true, 1),
    (96, 5, 576, 96, true, true, 1),
];

pub fn mobilenet_v3(x: X, large: bool, classes: u64) -> Net {
    let mut n = Net::new(false);
    let mut y = cna(&mut n, "features.0", &x, 16, cv(3, 2, 1), Some("Hardswish"));
    let cfg = if large { V3_LARGE } else { V3_SMALL };
    for (i, &(inp, k, e, out, se, hs, s)) in cfg.iter().enumerate() {
        let p = format!("features.{}.block", i + 1);
        let act = if hs { "Hardswish" } else { "ReLU" };
        let mut z = y.clone();
        let mut j = 0;
        if e != inp {
            z = cna(&mut n, &at(&p, "0"), &z, e, cv(1, 1, 0), Some(act));
            j = 1;
        }
        let dw = cv(k, s, (k - 1) / 2).groups(e);
        z = cna(&mut n, &at(&p, &j.to_string()), &z, e, dw, Some(act));
        j += 1;
        if se {
            let sq = divisible(e as f64 / 4.0, 8);
            z = squeeze_excite(
                &mut n,
                &at(&p, &j.to_string()),
                &z,
                sq,
                "ReLU",
                "Hardsigmoid",
            );
            j += 1;
        }
        z = cna(&mut n, &at(&p, &j.to_string()), &z, out, cv(1, 1, 0), None);
        y = if s == 1 && inp == out {
            n.add(&z, &y)
        } else {
            z
        };
    }
    let last_in = cfg.last().map(|c| c.3).unwrap_or(0);
    let f = format!("features.{}", cfg.len() + 1);
    let y = cna(&mut n, &f, &y, 6 * last_in, cv(1, 1, 0), Some("Hardswish"));
    let y = n.adaptive("avgpool", "AdaptiveAvgPool2d", &y, 1);
    let y = n.flatten(None, &y);
    let hidden = if large { 1280 } else { 1024 };
    let y = n.linear("classifier.0", &y, hidden, true);
    let y = n.act("classifier.1", "Hardswish", &y);
    let y = n.act("classifier.2", "Dropout", &y);
    n.linear("classifier.3", &y, classes, true);
    n
}

/// EfficientNet B0–B7: (width, depth) multipliers.
pub fn efficientnet(x: X, width: f64, depth: f64, classes: u64) -> Net {
    let mut n = Net::new(false);
    let ch = |c: u64| divisible(c as f64 * width, 8);
    let mut y = cna(&mut n, "features.0", &x, ch(32), cv(3, 2, 1), Some("SiLU"));
    let stages: [(u64, u64, u64, u64, u64, u64); 7] = [
        (1, 3, 1, 32, 16, 1),
        (6, 3, 2, 16, 24, 2),
        (6, 5, 2, 24, 40, 2),
        (6, 3, 2, 40, 80, 3),
        (6, 5, 1, 80, 112, 3),
        (6, 5, 2, 112, 192, 4),
        (6, 3, 1, 192, 320, 1),
    ];
    for (si, &(e, k, s, cin, cout, reps)) in stages.iter().enumerate() {
        let reps = (reps as f64 * depth).ceil() as u64;
        for r in 0..reps {
            let inp = if r == 0 { ch(cin) } else { ch(cout) };
            let out = ch(cout);
            let stride = if r == 0 { s } else { 1 };
            let p = format!("features.{}.{r}", si + 1);
            let b = at(&p, "block");
            let hidden = divisible(inp as f64 * e as f64, 8);
            let mut z = y.clone();
            let mut j = 0;
            if hidden != inp {
                z = cna(&mut n, &at(&b, "0"), &z, hidden, cv(1, 1, 0), Some("SiLU"));
                j = 1;
            }
            let dw = cv(k, stride, (k - 1) / 2).groups(hidden);
            z = cna(
                &mut n,
                &at(&b, &j.to_string()),
                &z,
                hidden,
                dw,
                Some("SiLU"),
            );
            let sq = (inp / 4).max(1);
            z = squeeze_excite(
                &mut n,
                &at(&b, &(j + 1).to_string()),
                &z,
                sq,
                "SiLU",
                "Sigmoid",
            );
            z = cna(
                &mut n,
                &at(&b, &(j + 2).to_string()),
                &z,
                out,
                cv(1, 1, 0),
                None,
            );
            y = if stride == 1 && inp == out {
                let z = n.act(&at(&p, "stochastic_depth"), "StochasticDepth", &z);
                n.add(&z, &y)
            } else {
                z
            };
        }
    }
    let last = 4 * ch(320);
    let y = cna(&mut n, "features.8", &y, last, cv(1, 1, 0), Some("SiLU"));
    let y = n.adaptive("avgpool", "AdaptiveAvgPool2d", &y, 1);
    let y = n.flatten(None, &y);
    let y = n.act("classifier.0", "Dropout", &y);
    n.linear("classifier.1", &y, classes, true);
    n
}

/// The (width, depth) multipliers of EfficientNet `b0`..`b7`.
pub fn efficientnet_scale(variant: u32) -> Option<(f64, f64)> {
    Some(match variant {
        0 => (1.0, 1.0),
        1 => (1.0, 1.1),
        2 => (1.1, 1.2),
        3 => (1.2, 1.4),
        4 => (1.4, 1.8),
        5 => (1.6, 2.2),
        6 => (1.8, 2.6),
        7 => (2.0, 3.1),
        _ => return None,
    })
}

/// DenseNet: growth rate, blocks, initial features.
pub fn densenet(x: X, growth: u64, blocks: &[u64], init: u64, classes: u64) -> Net {
    let mut n = Net::new(false);
    let y = n.conv("features.conv0", &x, init, cv(7, 2, 3));
    let y = n.bn("features.norm0", &y);
    let y = n.act("features.relu0", "ReLU", &y);
    let mut y = n.pool("features.pool0", "MaxPool2d", &y, 3, 2, 1, false);
    let mut c = init;
    for (bi, layers) in blocks.iter().enumerate() {
        let mut feats = vec![y.clone()];
        for l in 0..*layers {
            let p = format!("features.denseblock{}.denselayer{}", bi + 1, l + 1);
            let refs: Vec<&X> = feats.iter().collect();
            let cat = if feats.len() == 1 {
                feats[0].clone()
            } else {
                n.cat(&refs)
            };
            let z = n.bn(&at(&p, "norm1"), &cat);
            let z = n.act(&at(&p, "relu1"), "ReLU", &z);
            let z = n.conv(&at(&p, "conv1"), &z, 4 * growth, cv(1, 1, 0));
            let z = n.bn(&at(&p, "norm2"), &z);
            let z = n.act(&at(&p, "relu2"), "ReLU", &z);
            let z = n.conv(&at(&p, "conv2"), &z, growth, cv(3, 1, 1));
            feats.push(z);
        }
        let refs: Vec<&X> = feats.iter().collect();
        y = n.cat(&refs);
        c += layers * growth;
        if bi + 1 < blocks.len() {
            let p = format!("features.transition{}", bi + 1);
            let z = n.bn(&at(&p, "norm"), &y);
            let z = n.act(&at(&p, "relu"), "ReLU", &z);
            let z = n.conv(&at(&p, "conv"), &z, c / 2, cv(1, 1, 0));
            y = n.pool(&at(&p, "pool"), "AvgPool2d", &z, 2, 2, 0, false);
            c /= 2;
        }
    }
    let y = n.bn("features.norm5", &y);
    let y = n.op("relu", &[&y], y.shape.clone(), false);
    let y = n.op("adaptive_avg_pool2d", &[&y], vec![c, 1, 1], false);
    let y = n.flatten(None, &y);
    n.linear("classifier", &y, classes, true);
    n
}

/// Vision transformer: patch, layers, width, heads, MLP width.
pub fn vit(x: X, patch: u64, layers: u64, d: u64, heads: u64, mlp: u64, classes: u64) -> Net {
    let mut n = Net::new(false);
    let y = n.conv("conv_proj", &x, d, cv(patch, patch, 0).bias());
    let tokens: u64 = y.shape[1..].iter().product();
    let y = n.op("reshape", &[&y], vec![d, tokens], true);
    let y = n.op("permute", &[&y], vec![tokens, d], true);
    let seq = tokens + 1;
    n.parameter(d);
    let y = n.op("cat", &[&y], vec![seq, d], false);
    n.parameter(seq * d);
    let y = n.op("add", &[&y], vec![seq, d], false);
    let mut y = n.act("encoder.dropout", "Dropout", &y);
    for l in 0..layers {
        let p = format!("encoder.layers.encoder_layer_{l}");
        let h = n.layer_norm(&at(&p, "ln_1"), &y, true);
        let a = attention(&mut n, &at(&p, "self_attention"), &h, heads, true);
        let a = n.act(&at(&p, "dropout"), "Dropout", &a);
        let y1 = n.add(&a, &y);
        let h = n.layer_norm(&at(&p, "ln_2"), &y1, true);
        let h = n.linear(&at(&p, "mlp.0"), &h, mlp, true);
        let h = n.act(&at(&p, "mlp.1"), "GELU", &h);
        let h = n.act(&at(&p, "mlp.2"), "Dropout", &h);
        let h = n.linear(&at(&p, "mlp.3"), &h, d, true);
        let h = n.act(&at(&p, "mlp.4"), "Dropout", &h);
        y = n.add(&y1, &h);
    }
    let y = n.layer_norm("encoder.ln", &y, true);
    let y = n.op("select", &[&y], vec![d], true);
    n.linear("heads.head", &y, classes, true);
    n
}

/// `nn.MultiheadAttention(d, heads, batch_first=True)` over `(seq, d)`: one module step whose
/// parameters are the packed input projection and the output projection. `fused`: called
/// with `need_weights=False`, so PyTorch runs scaled-dot-product attention without keeping the
/// score matrix.
pub fn attention(n: &mut Net, name: &str, x: &X, heads: u64, fused: bool) -> X {
    let d = x.last();
    let p = Params::trainable(3 * d * d + 3 * d + d * d + d);
    let class = if fused {
        "MultiheadAttention(fused)"
    } else {
        "MultiheadAttention"
    };
    let y = n.push(name, class, &[x], x.shape.clone(), p);
    n.steps.last_mut().expect("a step").heads = heads;
    y
}
