//! `timm.create_model(...)` networks. timm's ResNet and EfficientNet have torchvision's layers
//! and parameters (under other module names); its ViT projects queries, keys and values with
//! one linear layer and runs fused attention; ConvNeXt is timm's own.

use super::net::{cv, Net, X};
use super::torchvision;
use crate::layer::Params;

pub fn resnet(x: X, layers: [u64; 4], bottleneck: bool, classes: u64) -> Net {
    torchvision::resnet(x, layers, bottleneck, 1, 64, classes)
}

pub fn efficientnet(x: X, width: f64, depth: f64, classes: u64) -> Net {
    torchvision::efficientnet(x, width, depth, classes)
}

/// timm `VisionTransformer`: patch embedding, class token and position embedding, pre-norm
/// blocks with a packed `qkv` projection and fused scaled-dot-product attention.
pub fn vit(x: X, patch: u64, layers: u64, d: u64, heads: u64, mlp: u64, classes: u64) -> Net {
    let mut n = Net::new(false);
    let y = n.conv("patch_embed.proj", &x, d, cv(patch, patch, 0).bias());
    let tokens: u64 = y.shape[1..].iter().product();
    let y = n.op("flatten", &[&y], vec![d, tokens], true);
    let y = n.op("transpose", &[&y], vec![tokens, d], true);
    let seq = tokens + 1;
    n.parameter(d + seq * d);
    let y = n.op("cat", &[&y], vec![seq, d], false);
    let y = n.op("add", &[&y], vec![seq, d], false);
    let mut y = n.act("pos_drop", "Dropout", &y);
    for l in 0..layers {
        let p = format!("blocks.{l}");
        let h = n.layer_norm(&format!("{p}.norm1"), &y, true);
        let qkv = n.linear(&format!("{p}.attn.qkv"), &h, 3 * d, true);
        let a = n.push_kind(
            "scaled_dot_product_attention",
            "scaled_dot_product_attention",
            &[&qkv],
            vec![seq, d],
            Params::default(),
            false,
            false,
        );
        n.steps.last_mut().expect("a step").heads = heads;
        let a = n.linear(&format!("{p}.attn.proj"), &a, d, true);
        let a = n.act(&format!("{p}.attn.proj_drop"), "Dropout", &a);
        let y1 = n.add(&y, &a);
        let h = n.layer_norm(&format!("{p}.norm2"), &y1, true);
        let h = n.linear(&format!("{p}.mlp.fc1"), &h, mlp, true);
        let h = n.act(&format!("{p}.mlp.act"), "GELU", &h);
        let h = n.act(&format!("{p}.mlp.drop1"), "Dropout", &h);
        let h = n.linear(&format!("{p}.mlp.fc2"), &h, d, true);
        let h = n.act(&format!("{p}.mlp.drop2"), "Dropout", &h);
        y = n.add(&y1, &h);
    }
    let y = n.layer_norm("norm", &y, true);
    let y = n.op("select", &[&y], vec![d], true);
    let y = n.act("head_drop", "Dropout", &y);
    n.linear("head", &y, classes, true);
    n
}

/// `LayerNorm2d`: layer norm over the channels of a channels-first map.
fn norm2d(n: &mut Net, name: &str, x: &X) -> X {
    let c = x.c(false);
    n.push(
        name,
        "LayerNorm2d",
        &[x],
        x.shape.clone(),
        Params::trainable(2 * c),
    )
}

/// ConvNeXt: a 4×4 patchify stem, stages of depthwise 7×7 blocks with an inverted MLP and
/// layer scale, 2×2 downsampling between stages.
pub fn convnext(x: X, depths: &[u64; 4], dims: &[u64; 4], classes: u64) -> Net {
    let mut n = Net::new(false);
    let y = n.conv("stem.0", &x, dims[0], cv(4, 4, 0).bias());
    let mut y = norm2d(&mut n, "stem.1", &y);
    for (s, (&depth, &d)) in depths.iter().zip(dims).enumerate() {
        if s > 0 {
            let z = norm2d(&mut n, &format!("stages.{s}.downsample.0"), &y);
            y = n.conv(
                &format!("stages.{s}.downsample.1"),
                &z,
                d,
                cv(2, 2, 0).bias(),
            );
        }
        for b in 0..depth {
            let p = format!("stages.{s}.blocks.{b}");
            let z = n.conv(&format!("{p}.conv_dw"), &y, d, cv(7, 1, 3).groups(d).bias());
            let (h, w) = (z.shape[1], z.shape[2]);
            let z = n.op("permute", &[&z], vec![h, w, d], true);
            let z = n.layer_norm(&format!("{p}.norm"), &z, true);
            let z = n.linear(&format!("{p}.mlp.fc1"), &z, 4 * d, true);
            let z = n.act(&format!("{p}.mlp.act"), "GELU", &z);
            let z = n.act(&format!("{p}.mlp.drop1"), "Dropout", &z);
            let z = n.linear(&format!("{p}.mlp.fc2"), &z, d, true);
            let z = n.act(&format!("{p}.mlp.drop2"), "Dropout", &z);
            // Layer scale: one learned factor per channel.
            n.parameter(d);
            let z = n.op("mul", &[&z], z.shape.clone(), false);
            let z = n.op("permute", &[&z], vec![d, h, w], true);
            y = n.add(&z, &y);
        }
    }
    let c = dims[3];
    let y = n.adaptive("head.global_pool.pool", "AdaptiveAvgPool2d", &y, 1);
    let y = norm2d(&mut n, "head.norm", &y);
    let y = n.flatten(Some("head.flatten"), &y);
    let y = n.act("head.drop", "Dropout", &y);
    let _ = c;
    n.linear("head.fc", &y, classes, true);
    n
}
