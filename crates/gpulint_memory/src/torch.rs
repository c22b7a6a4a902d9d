//! PyTorch `torch.nn` module constructors → layer specs (channels-first).

use super::layer::{Attention, Cell, Conv, NormKind, Padding, PoolKind, Recurrent, Spec};
use super::value::{ints_of, Args, Val};

/// `torch.nn.Conv2d` / `torch.nn.modules.conv.Conv2d` → `Conv2d`.
pub fn nn_class(q: &str) -> Option<&str> {
    let rest = q.strip_prefix("torch.nn.")?;
    if rest.starts_with("functional.") || rest.starts_with("init.") || rest.starts_with("utils.") {
        return None;
    }
    Some(rest.rsplit('.').next().unwrap_or(rest))
}

fn rank_of(class: &str) -> usize {
    if class.ends_with("1d") {
        1
    } else if class.ends_with("3d") {
        3
    } else {
        2
    }
}

fn padding(a: &Args, i: usize, rank: usize) -> Result<Padding, String> {
    match a.get(i, "padding") {
        None => Ok(Padding::Explicit(vec![0; rank])),
        Some(Val::Str(s)) if &**s == "same" => Ok(Padding::Same),
        Some(Val::Str(s)) if &**s == "valid" => Ok(Padding::Valid),
        Some(v) => ints_of(v, rank)
            .map(Padding::Explicit)
            .ok_or_else(|| "`padding` is not a constant".to_string()),
    }
}

/// Modules whose call returns a tuple `(output, state)`.
pub fn returns_tuple(class: &str) -> bool {
    matches!(class, "LSTM" | "GRU" | "RNN" | "MultiheadAttention")
}

/// The spec of a `torch.nn` module built with `a`; `None` if unknown to the estimator.
pub fn module(class: &str, a: &Args) -> Option<Result<Spec, String>> {
    let rank = rank_of(class);
    Some(match class {
        "Linear" => (|| {
            Ok(Spec::Dense {
                in_features: Some(a.int(0, "in_features", None)?),
                units: a.int(1, "out_features", None)?,
                bias: a.boolean(2, "bias", true)?,
            })
        })(),
        "Conv1d" | "Conv2d" | "Conv3d" => (|| {
            if a.string(8, "padding_mode")?.is_some_and(|m| {
                m != "zeros" && m != "reflect" && m != "replicate" && m != "circular"
            }) {
                return Err("unknown `padding_mode`".into());
            }
            Ok(Spec::Conv(Conv {
                rank,
                in_channels: Some(a.int(0, "in_channels", None)?),
                filters: Some(a.int(1, "out_channels", None)?),
                kernel: a.ints(2, "kernel_size", rank, None)?,
                stride: a.ints(3, "stride", rank, Some(1))?,
                padding: padding(a, 4, rank)?,
                dilation: a.ints(5, "dilation", rank, Some(1))?,
                groups: a.int(6, "groups", Some(1))?,
                bias: a.boolean(7, "bias", true)?,
                channels_last: false,
                transpose: false,
                output_padding: vec![],
                depthwise: None,
                separable: false,
            }))
        })(),
        "ConvTranspose1d" | "ConvTranspose2d" | "ConvTranspose3d" => (|| {
            let in_ch = a.int(0, "in_channels", None)?;
            let out = a.int(1, "out_channels", None)?;
            let groups = a.int(6, "groups", Some(1))?;
            if groups != 1 {
                return Err("grouped transposed convolution".into());
            }
            Ok(Spec::Conv(Conv {
                rank,
                in_channels: Some(in_ch),
                filters: Some(out),
                kernel: a.ints(2, "kernel_size", rank, None)?,
                stride: a.ints(3, "stride", rank, Some(1))?,
                padding: Padding::Explicit(a.ints(4, "padding", rank, Some(0))?),
                output_padding: a.ints(5, "output_padding", rank, Some(0))?,
                groups: 1,
                bias: a.boolean(7, "bias", true)?,
                dilation: a.ints(8, "dilation", rank, Some(1))?,
                channels_last: false,
                transpose: true,
                depthwise: None,
                separable: false,
            }))
        })(),
        "MaxPool1d" | "MaxPool2d" | "MaxPool3d" | "AvgPool1d" | "AvgPool2d" | "AvgPool3d" => {
            (|| {
                let max = class.starts_with("Max");
                let pool = a.ints(0, "kernel_size", rank, None)?;
                let stride = match a.get(1, "stride") {
                    None | Some(Val::None) => pool.clone(),
                    Some(_) => a.ints(1, "stride", rank, None)?,
                };
                Ok(Spec::Pool {
                    rank,
                    kind: if max { PoolKind::Max } else { PoolKind::Avg },
                    pool,
                    stride,
                    padding: Padding::Explicit(a.ints(2, "padding", rank, Some(0))?),
                    dilation: if max {
                        a.ints(3, "dilation", rank, Some(1))?
                    } else {
                        vec![1]
                    },
                    ceil_mode: a.boolean(if max { 5 } else { 3 }, "ceil_mode", false)?,
                    channels_last: false,
                })
            })()
        }
        "AdaptiveAvgPool1d" | "AdaptiveAvgPool2d" | "AdaptiveAvgPool3d" | "AdaptiveMaxPool1d"
        | "AdaptiveMaxPool2d" | "AdaptiveMaxPool3d" => adaptive(a.get(0, "output_size"), rank),
        "Flatten" => (|| {
            let start = a
                .get(0, "start_dim")
                .map(|v| v.int().ok_or("`start_dim` is not constant"))
                .transpose()?
                .unwrap_or(1);
            let end = a
                .get(1, "end_dim")
                .map(|v| v.int().ok_or("`end_dim` is not constant"))
                .transpose()?
                .unwrap_or(-1);
            if start < 1 || end == 0 {
                return Err("flattens the batch dimension".into());
            }
            Ok(Spec::Flatten {
                start: (start - 1) as usize,
                end: if end < 0 { end as i64 } else { end as i64 - 1 },
            })
        })(),
        "Unflatten" => Err("`Unflatten` is not supported".into()),
        "BatchNorm1d" | "BatchNorm2d" | "BatchNorm3d" | "InstanceNorm1d" | "InstanceNorm2d"
        | "InstanceNorm3d" => (|| {
            let batch = class.starts_with("Batch");
            let affine = a.boolean(3, "affine", batch)? as u64;
            Ok(Spec::Norm {
                kind: if batch {
                    NormKind::Batch
                } else {
                    NormKind::Instance
                },
                channels: Some(a.int(0, "num_features", None)?),
                per_channel: 2 * affine,
                trainable_per_channel: 2 * affine,
                normalized: vec![],
                channels_last: false,
            })
        })(),
        "LayerNorm" => (|| {
            let shape = a
                .get(0, "normalized_shape")
                .ok_or("`normalized_shape` is missing")?;
            let normalized = ints_of(shape, 0).ok_or("`normalized_shape` is not constant")?;
            let affine = a.boolean(2, "elementwise_affine", true)? as u64;
            let bias = a.boolean(3, "bias", true)? as u64;
            Ok(Spec::Norm {
                kind: NormKind::Layer,
                channels: None,
                per_channel: affine * (1 + bias),
                trainable_per_channel: affine * (1 + bias),
                normalized,
                channels_last: true,
            })
        })(),
        "GroupNorm" => (|| {
            let affine = a.boolean(3, "affine", true)? as u64;
            Ok(Spec::Norm {
                kind: NormKind::Group,
                channels: Some(a.int(1, "num_channels", None)?),
                per_channel: 2 * affine,
                trainable_per_channel: 2 * affine,
                normalized: vec![],
                channels_last: false,
            })
        })(),
        "Embedding" => (|| {
            Ok(Spec::Embedding {
                vocab: a.int(0, "num_embeddings", None)?,
                dim: a.int(1, "embedding_dim", None)?,
            })
        })(),
        "Dropout" | "Dropout1d" | "Dropout2d" | "Dropout3d" | "AlphaDropout" | "ReLU" | "ReLU6"
        | "GELU" | "SiLU" | "Sigmoid" | "Tanh" | "LeakyReLU" | "ELU" | "SELU" | "CELU"
        | "Softmax" | "LogSoftmax" | "Identity" | "Hardswish" | "Hardsigmoid" | "Hardtanh"
        | "Mish" | "Softplus" | "Softsign" | "Tanhshrink" => Ok(Spec::Identity),
        "PReLU" => a
            .int(0, "num_parameters", Some(1))
            .map(|count| Spec::PRelu { count }),
        "LSTM" | "GRU" | "RNN" => (|| {
            if !a.boolean(usize::MAX, "batch_first", false)? {
                return Err("`batch_first=False`: the batch is not the first dimension".into());
            }
            if a.int(usize::MAX, "proj_size", Some(0))? != 0 {
                return Err("`proj_size` is not supported".into());
            }
            Ok(Spec::Recurrent(Recurrent {
                cell: match class {
                    "LSTM" => Cell::Lstm,
                    "GRU" => Cell::Gru,
                    _ => Cell::Rnn,
                },
                input_size: Some(a.int(0, "input_size", None)?),
                units: a.int(1, "hidden_size", None)?,
                layers: a.int(2, "num_layers", Some(1))?,
                bias: a.boolean(usize::MAX, "bias", true)?,
                bidirectional: a.boolean(usize::MAX, "bidirectional", false)?,
                return_sequences: true,
                torch: true,
                reset_after: true,
            }))
        })(),
        "MultiheadAttention" => (|| {
            if !a.boolean(8, "batch_first", false)? {
                return Err("`batch_first=False`: the batch is not the first dimension".into());
            }
            if a.boolean(4, "add_bias_kv", false)? {
                return Err("`add_bias_kv` is not supported".into());
            }
            let e = a.int(0, "embed_dim", None)?;
            let heads = a.int(1, "num_heads", None)?;
            let k = a.opt_int(6, "kdim")?.unwrap_or(e);
            let v = a.opt_int(7, "vdim")?.unwrap_or(e);
            Ok(Spec::Attention(Attention {
                heads,
                key_dim: None,
                value_dim: None,
                output_dim: None,
                bias: a.boolean(3, "bias", true)?,
                torch_dims: Some((e, k, v)),
            }))
        })(),
        "Upsample" | "UpsamplingNearest2d" | "UpsamplingBilinear2d" => (|| {
            if let Some(size) = a.get(0, "size").filter(|v| !matches!(v, Val::None)) {
                let _ = size;
                return Err("`Upsample(size=...)` needs the input rank".into());
            }
            let f = a
                .get(1, "scale_factor")
                .ok_or("`scale_factor` is missing")?;
            let f = f
                .int()
                .filter(|n| *n > 0)
                .ok_or("`scale_factor` is not a constant integer")?;
            Ok(Spec::UpSample {
                rank: 2,
                size: vec![f as u64],
                channels_last: false,
            })
        })(),
        "ZeroPad1d" | "ZeroPad2d" | "ConstantPad2d" | "ReflectionPad2d" | "ReplicationPad2d" => {
            (|| {
                let p = a.get(0, "padding").ok_or("`padding` is missing")?;
                let pads = match ints_of(p, 0) {
                    Some(v) if v.len() == 1 => vec![(v[0], v[0]); rank],
                    // (left, right, top, bottom): the last dimension first.
                    Some(v) if v.len() == 2 * rank => {
                        (0..rank).rev().map(|d| (v[2 * d], v[2 * d + 1])).collect()
                    }
                    _ => return Err("`padding` is not a constant".into()),
                };
                Ok(Spec::ZeroPad {
                    rank,
                    pads,
                    channels_last: false,
                })
            })()
        }
        _ => return None,
    })
}

/// `AdaptiveAvgPool2d(output_size)` / `F.adaptive_avg_pool2d(x, output_size)`.
pub fn adaptive(v: Option<&Val>, rank: usize) -> Result<Spec, String> {
    let output = match v {
        Some(Val::Tuple(t)) => t
            .iter()
            .map(|x| match x {
                Val::None => Ok(None),
                x => x
                    .int()
                    .map(|n| Some(n as u64))
                    .ok_or("`output_size` is not constant"),
            })
            .collect::<Result<Vec<_>, _>>()?,
        Some(x) => vec![Some(x.int().ok_or("`output_size` is not constant")? as u64); rank],
        None => return Err("`output_size` is missing".into()),
    };
    Ok(Spec::AdaptivePool { rank, output })
}
