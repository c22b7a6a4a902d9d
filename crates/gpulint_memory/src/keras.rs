//! Keras / tf.keras layer constructors → layer specs (channels-last unless
//! `data_format="channels_first"`).

use super::layer::{Attention, Cell, Conv, Merge, NormKind, Padding, PoolKind, Recurrent, Spec};
use super::value::{Args, Val};

/// Is this qualified name inside Keras (standalone, `tf.keras`, `tf_keras`)?
pub fn keras_path(q: &str) -> Option<&str> {
    for prefix in [
        "keras.",
        "tensorflow.keras.",
        "tf_keras.",
        "tensorflow.python.keras.",
        "keras.src.",
    ] {
        if let Some(rest) = q.strip_prefix(prefix) {
            return Some(rest);
        }
    }
    None
}

/// The class name a Keras name stands for, aliases resolved (`MaxPool2D` → `MaxPooling2D`).
pub fn canonical(name: &str) -> &str {
    match name {
        "Convolution1D" => "Conv1D",
        "Convolution2D" => "Conv2D",
        "Convolution3D" => "Conv3D",
        "Convolution2DTranspose" => "Conv2DTranspose",
        "SeparableConvolution2D" => "SeparableConv2D",
        "MaxPool1D" => "MaxPooling1D",
        "MaxPool2D" => "MaxPooling2D",
        "MaxPool3D" => "MaxPooling3D",
        "AvgPool1D" => "AveragePooling1D",
        "AvgPool2D" => "AveragePooling2D",
        "AvgPool3D" => "AveragePooling3D",
        "GlobalAvgPool1D" => "GlobalAveragePooling1D",
        "GlobalAvgPool2D" => "GlobalAveragePooling2D",
        "GlobalAvgPool3D" => "GlobalAveragePooling3D",
        "GlobalMaxPool1D" => "GlobalMaxPooling1D",
        "GlobalMaxPool2D" => "GlobalMaxPooling2D",
        "GlobalMaxPool3D" => "GlobalMaxPooling3D",
        other => other,
    }
}

/// Keras' automatic layer name: `Conv2D` → `conv2d`, `BatchNormalization` →
/// `batch_normalization`, `LeakyReLU` → `leaky_re_lu`.
pub fn snake_case(name: &str) -> String {
    let c: Vec<char> = name
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    // Pass 1: `(.)([A-Z][a-z]+)` → `\1_\2`.
    let mut a: Vec<char> = Vec::with_capacity(c.len() + 8);
    for (i, ch) in c.iter().enumerate() {
        if i > 0 && ch.is_ascii_uppercase() && c.get(i + 1).is_some_and(|n| n.is_ascii_lowercase())
        {
            a.push('_');
        }
        a.push(*ch);
    }
    // Pass 2: `([a-z])([A-Z])` → `\1_\2`.
    let mut out = String::with_capacity(a.len() + 8);
    for (i, ch) in a.iter().enumerate() {
        if i > 0 && ch.is_ascii_uppercase() && a[i - 1].is_ascii_lowercase() {
            out.push('_');
        }
        out.push(ch.to_ascii_lowercase());
    }
    out
}

fn rank_of(class: &str) -> usize {
    if class.contains("1D") {
        1
    } else if class.contains("3D") {
        3
    } else {
        2
    }
}

fn channels_last(a: &Args) -> Result<bool, String> {
    Ok(a.string(usize::MAX, "data_format")?.as_deref() != Some("channels_first"))
}

fn padding(a: &Args, i: usize) -> Result<Padding, String> {
    match a
        .string(i, "padding")?
        .map(|s| s.to_ascii_lowercase())
        .as_deref()
    {
        None | Some("valid") => Ok(Padding::Valid),
        Some("same") => Ok(Padding::Same),
        Some("causal") => Ok(Padding::Causal),
        Some(other) => Err(format!("unknown padding `{other}`")),
    }
}

/// The spec of a Keras layer class built with `a`; `None` if the class is not a layer this
/// estimator knows.
pub fn layer(class: &str, a: &Args) -> Option<Result<Spec, String>> {
    let class = canonical(class);
    let rank = rank_of(class);
    Some(match class {
        "Dense" => (|| {
            Ok(Spec::Dense {
                units: a.int(0, "units", None)?,
                in_features: None,
                bias: a.boolean(2, "use_bias", true)?,
            })
        })(),
        "Conv1D" | "Conv2D" | "Conv3D" | "Conv1DTranspose" | "Conv2DTranspose"
        | "Conv3DTranspose" => (|| {
            let transpose = class.ends_with("Transpose");
            // Conv*Transpose has `output_padding` before `data_format`.
            let shift = usize::from(transpose);
            let out_pad = if transpose {
                a.get(4, "output_padding").cloned()
            } else {
                None
            };
            if out_pad.as_ref().is_some_and(|v| !matches!(v, Val::None)) {
                return Err("`output_padding` is not supported".into());
            }
            Ok(Spec::Conv(Conv {
                rank,
                filters: Some(a.int(0, "filters", None)?),
                in_channels: None,
                kernel: a.ints(1, "kernel_size", rank, None)?,
                stride: a.ints(2, "strides", rank, Some(1))?,
                padding: padding(a, 3)?,
                dilation: a.ints(5 + shift, "dilation_rate", rank, Some(1))?,
                groups: if transpose {
                    1
                } else {
                    a.int(6, "groups", Some(1))?
                },
                bias: a.boolean(8, "use_bias", true)?,
                channels_last: channels_last(a)?,
                transpose,
                output_padding: vec![],
                depthwise: None,
                separable: false,
            }))
        })(),
        "DepthwiseConv1D" | "DepthwiseConv2D" => depthwise_conv(a, rank, false),
        "SeparableConv1D" | "SeparableConv2D" => depthwise_conv(a, rank, true),
        "MaxPooling1D" | "MaxPooling2D" | "MaxPooling3D" | "AveragePooling1D"
        | "AveragePooling2D" | "AveragePooling3D" => (|| {
            let pool = a.ints(0, "pool_size", rank, Some(2))?;
            let stride = match a.get(1, "strides") {
                None | Some(Val::None) => pool.clone(),
                Some(_) => a.ints(1, "strides", rank, None)?,
            };
            Ok(Spec::Pool {
                rank,
                kind: if class.starts_with("Max") {
                    PoolKind::Max
                } else {
                    PoolKind::Avg
                },
                pool,
                stride,
                padding: padding(a, 2)?,
                dilation: vec![1],
                ceil_mode: false,
                channels_last: channels_last(a)?,
            })
        })(),
        "GlobalAveragePooling1D"
        | "GlobalAveragePooling2D"
        | "GlobalAveragePooling3D"
        | "GlobalMaxPooling1D"
        | "GlobalMaxPooling2D"
        | "GlobalMaxPooling3D" => (|| {
            Ok(Spec::GlobalPool {
                rank,
                channels_last: channels_last(a)?,
                keepdims: a.boolean(usize::MAX, "keepdims", false)?,
            })
        })(),
        "Flatten" => Ok(Spec::Flatten { start: 0, end: -1 }),
        "Reshape" => (|| {
            let v = a
                .get(0, "target_shape")
                .ok_or("`target_shape` is missing")?;
            let Val::Tuple(t) = v else {
                return Err("`target_shape` is not a constant tuple".into());
            };
            let target: Option<Vec<i64>> = t.iter().map(|x| x.int().map(|n| n as i64)).collect();
            Ok(Spec::Reshape {
                target: target.ok_or("`target_shape` is not constant")?,
            })
        })(),
        "Permute" => (|| {
            let dims = a.ints(0, "dims", 0, None)?;
            Ok(Spec::Permute {
                dims: dims.iter().map(|d| d.saturating_sub(1) as usize).collect(),
            })
        })(),
        "RepeatVector" => a.int(0, "n", None).map(|n| Spec::Repeat { n }),
        "BatchNormalization" | "LayerNormalization" | "GroupNormalization" => (|| {
            let axis = a.get(if class == "GroupNormalization" { 1 } else { 0 }, "axis");
            if axis.is_some_and(|v| v.int() != Some(-1)) {
                return Err("only `axis=-1` is supported".into());
            }
            let center = a.boolean(usize::MAX, "center", true)? as u64;
            let scale = a.boolean(usize::MAX, "scale", true)? as u64;
            let (kind, extra) = match class {
                "BatchNormalization" => (NormKind::Batch, 2),
                "LayerNormalization" => (NormKind::Layer, 0),
                _ => (NormKind::Group, 0),
            };
            Ok(Spec::Norm {
                kind,
                channels: None,
                per_channel: center + scale + extra,
                trainable_per_channel: center + scale,
                normalized: vec![],
                channels_last: true,
            })
        })(),
        "Embedding" => (|| {
            Ok(Spec::Embedding {
                vocab: a.int(0, "input_dim", None)?,
                dim: a.int(1, "output_dim", None)?,
            })
        })(),
        "Dropout"
        | "SpatialDropout1D"
        | "SpatialDropout2D"
        | "SpatialDropout3D"
        | "GaussianNoise"
        | "GaussianDropout"
        | "AlphaDropout"
        | "ActivityRegularization"
        | "Activation"
        | "ReLU"
        | "LeakyReLU"
        | "ELU"
        | "Softmax"
        | "ThresholdedReLU"
        | "Rescaling"
        | "Masking"
        | "Identity"
        | "UnitNormalization" => Ok(Spec::Identity),
        "LSTM" | "GRU" | "SimpleRNN" => recurrent(class, a),
        "Add" | "Subtract" | "Multiply" | "Average" | "Maximum" | "Minimum" => {
            Ok(Spec::Merge(match class {
                "Add" => Merge::Add,
                "Subtract" => Merge::Sub,
                "Multiply" => Merge::Mul,
                "Average" => Merge::Avg,
                "Maximum" => Merge::Max,
                _ => Merge::Min,
            }))
        }
        "Concatenate" => a
            .get(0, "axis")
            .map_or(Ok(-1), |v| {
                v.int().ok_or_else(|| "`axis` is not constant".to_string())
            })
            .and_then(|ax| {
                if ax == 0 {
                    return Err("concatenation along the batch axis".into());
                }
                Ok(Spec::Concat {
                    axis: if ax > 0 { ax as i64 - 1 } else { ax as i64 },
                })
            }),
        "MultiHeadAttention" => (|| {
            Ok(Spec::Attention(Attention {
                heads: a.int(0, "num_heads", None)?,
                key_dim: Some(a.int(1, "key_dim", None)?),
                value_dim: a.opt_int(2, "value_dim")?,
                output_dim: match a.get(5, "output_shape") {
                    None | Some(Val::None) => None,
                    Some(_) => return Err("`output_shape` is not supported".into()),
                },
                bias: a.boolean(4, "use_bias", true)?,
                torch_dims: None,
            }))
        })(),
        "Attention" | "AdditiveAttention" if class == "Attention" => Ok(Spec::DotAttention),
        "ZeroPadding1D" | "ZeroPadding2D" | "ZeroPadding3D" => (|| {
            let pads = match a.get(0, "padding") {
                None => vec![(1, 1); rank],
                Some(Val::Tuple(t)) if t.iter().all(|x| matches!(x, Val::Tuple(_))) => {
                    let mut v = Vec::new();
                    for x in t.iter() {
                        let p = super::value::ints_of(x, 2).ok_or("`padding` is not constant")?;
                        v.push((p[0], p[1]));
                    }
                    v
                }
                Some(v) => super::value::ints_of(v, rank)
                    .ok_or("`padding` is not constant")?
                    .into_iter()
                    .map(|p| (p, p))
                    .collect(),
            };
            Ok(Spec::ZeroPad {
                rank,
                pads,
                channels_last: channels_last(a)?,
            })
        })(),
        "UpSampling1D" | "UpSampling2D" | "UpSampling3D" => (|| {
            Ok(Spec::UpSample {
                rank,
                size: a.ints(0, "size", rank, Some(2))?,
                channels_last: channels_last(a)?,
            })
        })(),
        "Bidirectional" => match a.get(0, "layer") {
            Some(Val::Layer(_)) => Err("Bidirectional: resolved by the interpreter".into()),
            _ => Err("`layer` of Bidirectional is not a known recurrent layer".into()),
        },
        _ => return None,
    })
}

/// `DepthwiseConv*D`, or with `separable` `SeparableConv*D`: a depthwise convolution, for the
/// separable one followed by a 1×1 pointwise one. `SeparableConv*D` takes `filters` first, which
/// moves `kernel_size`, `strides`, `padding` and `use_bias` one place on, and its
/// `depth_multiplier` comes after `dilation_rate` (before `data_format` in `DepthwiseConv*D`).
fn depthwise_conv(a: &Args, rank: usize, separable: bool) -> Result<Spec, String> {
    let shift = usize::from(separable);
    Ok(Spec::Conv(Conv {
        rank,
        filters: if separable {
            Some(a.int(0, "filters", None)?)
        } else {
            None
        },
        in_channels: None,
        kernel: a.ints(shift, "kernel_size", rank, None)?,
        stride: a.ints(1 + shift, "strides", rank, Some(1))?,
        padding: padding(a, 2 + shift)?,
        dilation: a.ints(5, "dilation_rate", rank, Some(1))?,
        groups: 1,
        bias: a.boolean(7 + shift, "use_bias", true)?,
        channels_last: channels_last(a)?,
        transpose: false,
        output_padding: vec![],
        depthwise: Some(a.int(if separable { 6 } else { 3 }, "depth_multiplier", Some(1))?),
        separable,
    }))
}

/// A Keras recurrent layer.
pub fn recurrent(class: &str, a: &Args) -> Result<Spec, String> {
    if a.boolean(usize::MAX, "return_state", false)? {
        return Err("`return_state=True` is not supported".into());
    }
    Ok(Spec::Recurrent(Recurrent {
        cell: match class {
            "LSTM" => Cell::Lstm,
            "GRU" => Cell::Gru,
            _ => Cell::Rnn,
        },
        units: a.int(0, "units", None)?,
        input_size: None,
        layers: 1,
        bidirectional: false,
        return_sequences: a.boolean(usize::MAX, "return_sequences", false)?,
        bias: a.boolean(usize::MAX, "use_bias", true)?,
        torch: false,
        reset_after: a.boolean(usize::MAX, "reset_after", true)?,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn automatic_names() {
        for (class, name) in [
            ("Conv2D", "conv2d"),
            ("BatchNormalization", "batch_normalization"),
            ("GlobalAveragePooling2D", "global_average_pooling2d"),
            ("MultiHeadAttention", "multi_head_attention"),
            ("LSTM", "lstm"),
            ("Conv2DTranspose", "conv2d_transpose"),
            ("LeakyReLU", "leaky_re_lu"),
            ("UpSampling2D", "up_sampling2d"),
            ("PReLU", "p_re_lu"),
            ("SeparableConv2D", "separable_conv2d"),
        ] {
            assert_eq!(snake_case(class), name);
        }
    }
}
