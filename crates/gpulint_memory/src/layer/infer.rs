//! What each spec computes: its output shape for given inputs and its parameters, and the
//! parameters known without an input.

use super::dims::{axis, conv_out, join, last, pick, reshape, split_channels};
use super::{fmt_shape, Inferred, NormKind, Padding, Params, PoolKind, Shape, Spec};

impl Spec {
    /// The output shape and parameters of the layer applied to `inputs`.
    pub fn infer(&self, inputs: &[Shape]) -> Inferred {
        let first = inputs.first().ok_or("no input")?;
        match self {
            Spec::Dense {
                units,
                in_features,
                bias,
            } => {
                let n = last(first)?;
                if let Some(want) = in_features {
                    if *want != n {
                        return Err(format!("expects {want} input features, got {n}"));
                    }
                }
                let mut out = first.clone();
                *out.last_mut().ok_or("empty shape")? = *units;
                Ok((out, dense_params(n, *units, *bias)))
            }
            Spec::Conv(c) => c.infer(first),
            Spec::Pool {
                rank,
                kind,
                pool,
                stride,
                padding,
                dilation,
                ceil_mode,
                channels_last,
            } => {
                let (spatial, ch) = split_channels(first, *rank, *channels_last, "pooling")?;
                let mut out = Vec::new();
                for (i, n) in spatial.iter().enumerate() {
                    let k = pick(pool, i, 2);
                    let s = pick(stride, i, k).max(1);
                    let d = if *kind == PoolKind::Max {
                        pick(dilation, i, 1)
                    } else {
                        1
                    };
                    let o = match padding {
                        Padding::Explicit(p) if *ceil_mode => {
                            let p = pick(p, i, 0);
                            let eff = d * (k - 1) + 1;
                            if n + 2 * p < eff {
                                return Err("pooling window larger than the input".into());
                            }
                            let mut o = (n + 2 * p - eff).div_ceil(s) + 1;
                            // The last window must start inside the input or the left padding.
                            if (o - 1) * s >= n + p {
                                o -= 1;
                            }
                            o
                        }
                        _ => conv_out(*n, k, s, d, padding, i)?,
                    };
                    out.push(o);
                }
                Ok((join(out, ch, *channels_last), Params::default()))
            }
            Spec::AdaptivePool { rank, output } => {
                map_spatial(first, *rank, false, "adaptive pooling", |i, n| {
                    output
                        .get(i)
                        .or(output.first())
                        .copied()
                        .flatten()
                        .unwrap_or(n)
                })
            }
            Spec::GlobalPool {
                rank,
                channels_last,
                keepdims,
            } => {
                let (_, ch) = split_channels(first, *rank, *channels_last, "global pooling")?;
                let out = if *keepdims {
                    join(vec![1; *rank], ch, *channels_last)
                } else {
                    vec![ch]
                };
                Ok((out, Params::default()))
            }
            Spec::Flatten { start, end } => {
                let end = axis(*end, first.len())?;
                if *start > end {
                    return Ok((first.clone(), Params::default()));
                }
                let mut out = first[..*start].to_vec();
                out.push(first[*start..=end].iter().product());
                out.extend_from_slice(&first[end + 1..]);
                Ok((out, Params::default()))
            }
            Spec::Reshape { target } => reshape(first, target).map(|s| (s, Params::default())),
            Spec::Permute { dims } => {
                if dims.len() != first.len() || dims.iter().any(|d| *d >= first.len()) {
                    return Err(format!("cannot permute {} with {dims:?}", fmt_shape(first)));
                }
                Ok((dims.iter().map(|d| first[*d]).collect(), Params::default()))
            }
            Spec::Select { dim, index } => {
                let n = *first.get(*dim).ok_or("index out of range")? as i64;
                if *index >= n || *index < -n {
                    return Err(format!("index {index} out of range for size {n}"));
                }
                let mut out = first.clone();
                out.remove(*dim);
                Ok((out, Params::default()))
            }
            Spec::Reduce { dims, keepdim } => {
                let mut out = Vec::new();
                for (i, d) in first.iter().enumerate() {
                    if dims.contains(&i) {
                        if *keepdim {
                            out.push(1);
                        }
                    } else {
                        out.push(*d);
                    }
                }
                Ok((out, Params::default()))
            }
            Spec::Norm {
                kind,
                channels,
                per_channel,
                trainable_per_channel,
                normalized,
                channels_last,
            } => {
                let features: u64 = match kind {
                    NormKind::Layer if !normalized.is_empty() => {
                        let n = normalized.len();
                        if first.len() < n || first[first.len() - n..] != normalized[..] {
                            return Err(format!(
                                "normalized shape {} does not match the input {}",
                                fmt_shape(normalized),
                                fmt_shape(first)
                            ));
                        }
                        normalized.iter().product()
                    }
                    _ => {
                        let c = if *channels_last {
                            last(first)?
                        } else {
                            *first.first().ok_or("empty shape")?
                        };
                        if let Some(want) = channels {
                            if *want != c {
                                return Err(format!("expects {want} channels, got {c}"));
                            }
                        }
                        c
                    }
                };
                Ok((
                    first.clone(),
                    norm_params(features, *per_channel, *trainable_per_channel),
                ))
            }
            Spec::Embedding { vocab, dim } => {
                let mut out = first.clone();
                out.push(*dim);
                Ok((out, Params::trainable(vocab * dim)))
            }
            Spec::Identity => Ok((first.clone(), Params::default())),
            Spec::PRelu { count } => Ok((first.clone(), Params::trainable(*count))),
            Spec::Recurrent(r) => r.infer(first, 1),
            Spec::Bidirectional(r) => r.infer(first, 2),
            Spec::Merge(_) => {
                if inputs.iter().any(|s| s != first) {
                    let shapes: Vec<String> = inputs.iter().map(|s| fmt_shape(s)).collect();
                    return Err(format!(
                        "merges inputs of different shapes {}",
                        shapes.join(", ")
                    ));
                }
                Ok((first.clone(), Params::default()))
            }
            Spec::Concat { axis: a } => {
                let ax = axis(*a, first.len())?;
                let mut out = first.clone();
                out[ax] = 0;
                for s in inputs {
                    if s.len() != first.len()
                        || s.iter().enumerate().any(|(i, d)| i != ax && *d != first[i])
                    {
                        return Err("concatenates inputs of incompatible shapes".into());
                    }
                    out[ax] += s[ax];
                }
                Ok((out, Params::default()))
            }
            Spec::Attention(a) => a.infer(inputs),
            Spec::DotAttention => {
                let value = inputs.get(1).unwrap_or(first);
                let mut out = first.clone();
                *out.last_mut().ok_or("empty shape")? = last(value)?;
                Ok((out, Params::default()))
            }
            Spec::ZeroPad {
                rank,
                pads,
                channels_last,
            } => map_spatial(first, *rank, *channels_last, "padding", |i, n| {
                let (a, b) = pads.get(i).or(pads.first()).copied().unwrap_or((0, 0));
                n + a + b
            }),
            Spec::UpSample {
                rank,
                size,
                channels_last,
            } => map_spatial(first, *rank, *channels_last, "upsampling", |i, n| {
                n * pick(size, i, 2)
            }),
            Spec::Resize {
                rank,
                size,
                channels_last,
            } => map_spatial(first, *rank, *channels_last, "resizing", |i, _| {
                pick(size, i, 1)
            }),
            Spec::Repeat { n } => {
                if first.len() != 1 {
                    return Err("RepeatVector expects a vector per sample".into());
                }
                Ok((vec![*n, first[0]], Params::default()))
            }
        }
    }

    /// Parameters that do not depend on the input (PyTorch modules declare their sizes).
    pub fn static_params(&self) -> Option<Params> {
        match self {
            Spec::Dense {
                units,
                in_features: Some(n),
                bias,
            } => Some(dense_params(*n, *units, *bias)),
            Spec::Conv(c) if c.in_channels.is_some() => c.params(c.in_channels?).ok(),
            Spec::Norm {
                kind,
                channels,
                per_channel,
                trainable_per_channel,
                normalized,
                ..
            } => {
                let f = if *kind == NormKind::Layer && !normalized.is_empty() {
                    normalized.iter().product()
                } else {
                    (*channels)?
                };
                Some(norm_params(f, *per_channel, *trainable_per_channel))
            }
            Spec::Embedding { vocab, dim } => Some(Params::trainable(vocab * dim)),
            Spec::PRelu { count } => Some(Params::trainable(*count)),
            Spec::Recurrent(r) if r.input_size.is_some() => Some(r.params(r.input_size?)),
            Spec::Attention(a) if a.torch_dims.is_some() => a.torch_params(),
            Spec::Dense { .. }
            | Spec::Conv(_)
            | Spec::Recurrent(_)
            | Spec::Bidirectional(_)
            | Spec::Attention(_) => None,
            _ => Some(Params::default()),
        }
    }
}

/// A `Dense` / `Linear` layer's weights and bias.
fn dense_params(in_features: u64, units: u64, bias: bool) -> Params {
    Params::trainable(in_features * units + if bias { units } else { 0 })
}

/// A normalization layer's parameters over `features` normalized values.
fn norm_params(features: u64, per_channel: u64, trainable_per_channel: u64) -> Params {
    Params {
        total: features * per_channel,
        trainable: features * trainable_per_channel,
    }
}

/// A parameter-free layer that maps each spatial dimension (its index and size) to a new size
/// and keeps the channels.
fn map_spatial(
    input: &Shape,
    rank: usize,
    channels_last: bool,
    what: &str,
    size: impl Fn(usize, u64) -> u64,
) -> Inferred {
    let (spatial, ch) = split_channels(input, rank, channels_last, what)?;
    let out = spatial
        .iter()
        .enumerate()
        .map(|(i, n)| size(i, *n))
        .collect();
    Ok((join(out, ch, channels_last), Params::default()))
}
