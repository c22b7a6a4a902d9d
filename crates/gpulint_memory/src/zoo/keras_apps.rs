//! `keras.applications` networks (ResNet50/101/152, VGG16/19, MobileNetV2, EfficientNetB0–B7)
//! with Keras' own layer names, channels last. `include_top=False` stops before the
//! classifier; `pooling="avg"`/`"max"` then adds a global pooling.

use super::net::{cv, Cv, Net, X};
use super::torchvision::divisible;
use super::Opts;
use crate::layer::Params;

#[derive(Debug, Clone, PartialEq)]
pub enum KerasNet {
    ResNet([u64; 4]),
    Vgg(u64),
    MobileNetV2,
    EfficientNet(f64, f64),
}

#[derive(Debug, Clone, PartialEq)]
pub struct App {
    pub net: KerasNet,
    pub top: bool,
    /// `pooling=` without the top: `Some(true)` average, `Some(false)` max.
    pub pooling: Option<bool>,
}

/// `keras.applications.<Name>(...)`: the network and its default input side.
pub fn app(name: &str, a: &Opts) -> Option<Result<(App, u64), String>> {
    let (net, size) = match name {
        "ResNet50" => (KerasNet::ResNet([3, 4, 6, 3]), 224),
        "ResNet101" => (KerasNet::ResNet([3, 4, 23, 3]), 224),
        "ResNet152" => (KerasNet::ResNet([3, 8, 36, 3]), 224),
        "VGG16" => (KerasNet::Vgg(16), 224),
        "VGG19" => (KerasNet::Vgg(19), 224),
        "MobileNetV2" => (KerasNet::MobileNetV2, 224),
        _ => {
            let v: u32 = name.strip_prefix("EfficientNetB")?.parse().ok()?;
            let (w, d) = super::torchvision::efficientnet_scale(v)?;
            let size = [224, 240, 260, 300, 380, 456, 528, 600][v as usize];
            (KerasNet::EfficientNet(w, d), size)
        }
    };
    Some((|| {
        if let Some(alpha) = a.kw("alpha") {
            if alpha.float() != Some(1.0) {
                return Err("`alpha` other than 1.0 is not supported".to_string());
            }
        }
        let top = a.boolean(usize::MAX, "include_top", true)?;
        let pooling = match a.string(usize::MAX, "pooling")?.as_deref() {
            None => None,
            Some("avg") => Some(true),
            Some("max") => Some(false),
            Some(p) => return Err(format!("`pooling=\"{p}\"` is not known")),
        };
        Ok((App { net, top, pooling }, size))
    })())
}

fn k(n: u64, s: u64) -> Cv {
    cv(n, s, 0)
}

fn conv(n: &mut Net, name: &str, x: &X, out: u64, c: Cv) -> X {
    n.conv(name, x, out, c)
}

fn pad(n: &mut Net, name: &str, x: &X, before: u64, after: u64) -> X {
    let s = &x.shape;
    let shape = vec![s[0] + before + after, s[1] + before + after, s[2]];
    n.push(name, "ZeroPadding2D", &[x], shape, Params::default())
}

/// `correct_pad`: the padding before a stride-2 valid convolution of kernel `k`.
fn correct_pad(x: &X, k: u64) -> (u64, u64) {
    let adjust = 1 - x.shape[0] % 2;
    (k / 2 - adjust, k / 2)
}

fn add(n: &mut Net, name: &str, a: &X, b: &X) -> X {
    n.push(name, "Add", &[a, b], a.shape.clone(), Params::default())
}

pub fn build(app: &App, x: X, classes: u64) -> Result<Net, String> {
    let mut n = Net::new(true);
    let y = match &app.net {
        KerasNet::ResNet(blocks) => resnet(&mut n, x, blocks),
        KerasNet::Vgg(depth) => vgg(&mut n, x, *depth, app.top, classes),
        KerasNet::MobileNetV2 => mobilenet_v2(&mut n, x),
        KerasNet::EfficientNet(w, d) => efficientnet(&mut n, x, *w, *d),
    };
    if matches!(app.net, KerasNet::Vgg(_)) {
        if !app.top {
            pool_only(&mut n, &y, app.pooling);
        }
        return Ok(n);
    }
    if app.top {
        let (pool, drop) = match app.net {
            KerasNet::ResNet(_) => ("avg_pool", None),
            KerasNet::MobileNetV2 => ("global_average_pooling2d", None),
            _ => ("avg_pool", Some("top_dropout")),
        };
        let mut y = n.global_pool(pool, "GlobalAveragePooling2D", &y);
        if let Some(d) = drop {
            y = n.act(d, "Dropout", &y);
        }
        n.linear("predictions", &y, classes, true);
    } else {
        pool_only(&mut n, &y, app.pooling);
    }
    Ok(n)
}

fn pool_only(n: &mut Net, y: &X, pooling: Option<bool>) {
    match pooling {
        Some(true) => {
            n.global_pool("global_average_pooling2d", "GlobalAveragePooling2D", y);
        }
        Some(false) => {
            n.global_pool("global_max_pooling2d", "GlobalMaxPooling2D", y);
        }
        None => {}
    }
}

fn resnet(n: &mut Net, x: X, blocks: &[u64; 4]) -> X {
    let y = pad(n, "conv1_pad", &x, 3, 3);
    let y = conv(n, "conv1_conv", &y, 64, k(7, 2).bias());
    let y = n.bn("conv1_bn", &y);
    let y = n.act("conv1_relu", "Activation", &y);
    let y = pad(n, "pool1_pad", &y, 1, 1);
    let mut y = n.pool("pool1_pool", "MaxPooling2D", &y, 3, 2, 0, false);
    for (s, reps) in blocks.iter().enumerate() {
        let f = 64 << s;
        for b in 0..*reps {
            let p = format!("conv{}_block{}", s + 2, b + 1);
            let stride = if b == 0 && s > 0 { 2 } else { 1 };
            let short = if b == 0 {
                let z = conv(n, &format!("{p}_0_conv"), &y, 4 * f, k(1, stride).bias());
                n.bn(&format!("{p}_0_bn"), &z)
            } else {
                y.clone()
            };
            let z = conv(n, &format!("{p}_1_conv"), &y, f, k(1, stride).bias());
            let z = n.bn(&format!("{p}_1_bn"), &z);
            let z = n.act(&format!("{p}_1_relu"), "Activation", &z);
            let z = conv(n, &format!("{p}_2_conv"), &z, f, k(3, 1).bias().same());
            let z = n.bn(&format!("{p}_2_bn"), &z);
            let z = n.act(&format!("{p}_2_relu"), "Activation", &z);
            let z = conv(n, &format!("{p}_3_conv"), &z, 4 * f, k(1, 1).bias());
            let z = n.bn(&format!("{p}_3_bn"), &z);
            let z = add(n, &format!("{p}_add"), &short, &z);
            y = n.act(&format!("{p}_out"), "Activation", &z);
        }
    }
    y
}

fn vgg(n: &mut Net, x: X, depth: u64, top: bool, classes: u64) -> X {
    let convs: [(u64, u64); 5] = if depth == 16 {
        [(64, 2), (128, 2), (256, 3), (512, 3), (512, 3)]
    } else {
        [(64, 2), (128, 2), (256, 4), (512, 4), (512, 4)]
    };
    let mut y = x;
    for (b, (f, reps)) in convs.iter().enumerate() {
        for r in 0..*reps {
            let name = format!("block{}_conv{}", b + 1, r + 1);
            y = conv(n, &name, &y, *f, k(3, 1).bias().same());
        }
        y = n.pool(
            &format!("block{}_pool", b + 1),
            "MaxPooling2D",
            &y,
            2,
            2,
            0,
            false,
        );
    }
    if top {
        let z = n.flatten(Some("flatten"), &y);
        let z = n.linear("fc1", &z, 4096, true);
        let z = n.linear("fc2", &z, 4096, true);
        y = n.linear("predictions", &z, classes, true);
    }
    y
}

fn mobilenet_v2(n: &mut Net, x: X) -> X {
    let y = conv(n, "Conv1", &x, 32, k(3, 2).same());
    let y = n.bn("bn_Conv1", &y);
    let mut y = n.act("Conv1_relu", "ReLU", &y);
    let blocks: [(u64, u64, u64); 17] = [
        (16, 1, 1),
        (24, 2, 6),
        (24, 1, 6),
        (32, 2, 6),
        (32, 1, 6),
        (32, 1, 6),
        (64, 2, 6),
        (64, 1, 6),
        (64, 1, 6),
        (64, 1, 6),
        (96, 1, 6),
        (96, 1, 6),
        (96, 1, 6),
        (160, 2, 6),
        (160, 1, 6),
        (160, 1, 6),
        (320, 1, 6),
    ];
    for (id, &(filters, stride, t)) in blocks.iter().enumerate() {
        let cin = y.c(true);
        let pw = divisible(filters as f64, 8);
        let p = if id == 0 {
            "expanded_conv_".to_string()
        } else {
            format!("block_{id}_")
        };
        let mut z = y.clone();
        if id > 0 {
            z = conv(n, &format!("{p}expand"), &z, t * cin, k(1, 1));
            z = n.bn(&format!("{p}expand_BN"), &z);
            z = n.act(&format!("{p}expand_relu"), "ReLU", &z);
        }
        let c = z.c(true);
        let dw = if stride == 2 {
            let (a, b) = correct_pad(&z, 3);
            z = pad(n, &format!("{p}pad"), &z, a, b);
            k(3, 2).groups(c)
        } else {
            k(3, 1).groups(c).same()
        };
        z = conv(n, &format!("{p}depthwise"), &z, c, dw);
        z = n.bn(&format!("{p}depthwise_BN"), &z);
        z = n.act(&format!("{p}depthwise_relu"), "ReLU", &z);
        z = conv(n, &format!("{p}project"), &z, pw, k(1, 1));
        z = n.bn(&format!("{p}project_BN"), &z);
        y = if cin == pw && stride == 1 {
            add(n, &format!("{p}add"), &y, &z)
        } else {
            z
        };
    }
    let y = conv(n, "Conv_1", &y, 1280, k(1, 1));
    let y = n.bn("Conv_1_bn", &y);
    n.act("out_relu", "ReLU", &y)
}

fn efficientnet(n: &mut Net, x: X, width: f64, depth: f64) -> X {
    let ch = |c: u64| divisible(c as f64 * width, 8);
    let y = n.act("rescaling", "Rescaling", &x);
    let y = n.push(
        "normalization",
        "Normalization",
        &[&y],
        y.shape.clone(),
        Params {
            total: 7,
            trainable: 0,
        },
    );
    let (a, b) = correct_pad(&y, 3);
    let y = pad(n, "stem_conv_pad", &y, a, b);
    let y = conv(n, "stem_conv", &y, ch(32), k(3, 2));
    let y = n.bn("stem_bn", &y);
    let mut y = n.act("stem_activation", "Activation", &y);
    let stages: [(u64, u64, u64, u64, u64, u64); 7] = [
        (3, 1, 1, 32, 16, 1),
        (3, 2, 6, 16, 24, 2),
        (5, 2, 6, 24, 40, 2),
        (3, 2, 6, 40, 80, 3),
        (5, 1, 6, 80, 112, 3),
        (5, 2, 6, 112, 192, 4),
        (3, 1, 6, 192, 320, 1),
    ];
    let total: u64 = stages
        .iter()
        .map(|s| (s.5 as f64 * depth).ceil() as u64)
        .sum();
    let mut b = 0;
    for (i, &(kk, s, e, cin, cout, reps)) in stages.iter().enumerate() {
        let reps = (reps as f64 * depth).ceil() as u64;
        for j in 0..reps {
            let p = format!("block{}{}_", i + 1, (b'a' + j as u8) as char);
            let fin = if j == 0 { ch(cin) } else { ch(cout) };
            let fout = ch(cout);
            let stride = if j == 0 { s } else { 1 };
            let mut z = y.clone();
            let hidden = fin * e;
            if e != 1 {
                z = conv(n, &format!("{p}expand_conv"), &z, hidden, k(1, 1).same());
                z = n.bn(&format!("{p}expand_bn"), &z);
                z = n.act(&format!("{p}expand_activation"), "Activation", &z);
            }
            let dw = if stride == 2 {
                let (a, b2) = correct_pad(&z, kk);
                z = pad(n, &format!("{p}dwconv_pad"), &z, a, b2);
                k(kk, 2).groups(hidden)
            } else {
                k(kk, 1).groups(hidden).same()
            };
            z = conv(n, &format!("{p}dwconv"), &z, hidden, dw);
            z = n.bn(&format!("{p}bn"), &z);
            z = n.act(&format!("{p}activation"), "Activation", &z);
            let se = (fin / 4).max(1);
            let s1 = n.global_pool(&format!("{p}se_squeeze"), "GlobalAveragePooling2D", &z);
            let s1 = n.push(
                &format!("{p}se_reshape"),
                "Reshape",
                &[&s1],
                vec![1, 1, hidden],
                Params::default(),
            );
            let s1 = conv(n, &format!("{p}se_reduce"), &s1, se, k(1, 1).bias().same());
            let s1 = conv(
                n,
                &format!("{p}se_expand"),
                &s1,
                hidden,
                k(1, 1).bias().same(),
            );
            z = n.push(
                &format!("{p}se_excite"),
                "Multiply",
                &[&z, &s1],
                z.shape.clone(),
                Params::default(),
            );
            z = conv(n, &format!("{p}project_conv"), &z, fout, k(1, 1).same());
            z = n.bn(&format!("{p}project_bn"), &z);
            if stride == 1 && fin == fout {
                if b > 0 {
                    z = n.act(&format!("{p}drop"), "Dropout", &z);
                }
                z = add(n, &format!("{p}add"), &z, &y);
            }
            y = z;
            b += 1;
        }
    }
    let _ = total;
    let y = conv(n, "top_conv", &y, ch(1280), k(1, 1).same());
    let y = n.bn("top_bn", &y);
    n.act("top_activation", "Activation", &y)
}
