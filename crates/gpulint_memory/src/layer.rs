//! Layer specifications shared by Keras and PyTorch, and their shape and parameter arithmetic.
//!
//! Shapes are per sample: the batch dimension is left out. Keras layers see channels-last
//! tensors (`(H, W, C)`), PyTorch modules channels-first (`(C, H, W)`); a spec records which.

/// A per-sample shape (the batch dimension left out).
pub type Shape = Vec<u64>;

/// Parameters of a layer: all of them (what `count_params()` / `parameters()` count) and the
/// trainable ones.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Params {
    pub total: u64,
    pub trainable: u64,
}

impl Params {
    pub fn trainable(n: u64) -> Params {
        Params {
            total: n,
            trainable: n,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Padding {
    Valid,
    Same,
    Causal,
    /// Symmetric zero padding per spatial dimension (PyTorch `padding=`).
    Explicit(Vec<u64>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolKind {
    Max,
    Avg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NormKind {
    Batch,
    Layer,
    Group,
    Instance,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cell {
    Lstm,
    Gru,
    Rnn,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Merge {
    Add,
    Sub,
    Mul,
    Avg,
    Max,
    Min,
}

/// What a layer (or a parameter-free tensor operation) computes.
#[derive(Debug, Clone, PartialEq)]
pub enum Spec {
    /// Keras `Dense` (`in_features` inferred) / PyTorch `Linear` (`in_features` given).
    Dense {
        units: u64,
        in_features: Option<u64>,
        bias: bool,
    },
    Conv(Conv),
    Pool {
        rank: usize,
        kind: PoolKind,
        pool: Vec<u64>,
        stride: Vec<u64>,
        padding: Padding,
        dilation: Vec<u64>,
        ceil_mode: bool,
        channels_last: bool,
    },
    /// PyTorch `AdaptiveAvgPool2d((h, w))`; `None` keeps the input size.
    AdaptivePool {
        rank: usize,
        output: Vec<Option<u64>>,
    },
    GlobalPool {
        rank: usize,
        channels_last: bool,
        keepdims: bool,
    },
    /// Merges per-sample dimensions `start..=end` (negative `end` counts from the back).
    Flatten {
        start: usize,
        end: i64,
    },
    /// Per-sample target shape; one entry may be -1.
    Reshape {
        target: Vec<i64>,
    },
    /// A permutation of the per-sample dimensions.
    Permute {
        dims: Vec<usize>,
    },
    /// Keeps per-sample dimension `dim` at `index` and drops it (tensor indexing `x[:, -1]`).
    Select {
        dim: usize,
        index: i64,
    },
    /// Reduces the per-sample dimensions `dims` (`x.mean(dim=(2, 3))`).
    Reduce {
        dims: Vec<usize>,
        keepdim: bool,
    },
    Norm {
        kind: NormKind,
        /// Channels given to the constructor (PyTorch); Keras infers them.
        channels: Option<u64>,
        /// Parameters per channel: Keras BatchNormalization keeps 4 (2 trainable).
        per_channel: u64,
        trainable_per_channel: u64,
        /// PyTorch LayerNorm's `normalized_shape`.
        normalized: Vec<u64>,
        channels_last: bool,
    },
    Embedding {
        vocab: u64,
        dim: u64,
    },
    /// Shape-preserving, parameter-free: activations, dropout, noise.
    Identity,
    /// PyTorch `PReLU(num_parameters)`.
    PRelu {
        count: u64,
    },
    Recurrent(Recurrent),
    /// Keras `Bidirectional(layer)`: two copies of a recurrent layer, outputs concatenated.
    Bidirectional(Recurrent),
    Merge(Merge),
    /// Concatenation along a per-sample axis (negative counts from the back).
    Concat {
        axis: i64,
    },
    Attention(Attention),
    /// Keras `Attention()`: dot-product attention without parameters.
    DotAttention,
    ZeroPad {
        rank: usize,
        pads: Vec<(u64, u64)>,
        channels_last: bool,
    },
    UpSample {
        rank: usize,
        size: Vec<u64>,
        channels_last: bool,
    },
    /// PyTorch `Upsample(size=...)` / `F.interpolate(size=...)`.
    Resize {
        rank: usize,
        size: Vec<u64>,
        channels_last: bool,
    },
    /// Keras `RepeatVector(n)`.
    Repeat {
        n: u64,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Conv {
    pub rank: usize,
    /// Output channels (Keras `filters`); for Keras `DepthwiseConv2D`, the depth multiplier
    /// decides them instead.
    pub filters: Option<u64>,
    pub in_channels: Option<u64>,
    pub kernel: Vec<u64>,
    pub stride: Vec<u64>,
    pub padding: Padding,
    pub dilation: Vec<u64>,
    pub groups: u64,
    pub bias: bool,
    pub channels_last: bool,
    pub transpose: bool,
    pub output_padding: Vec<u64>,
    /// Keras `DepthwiseConv2D` / `SeparableConv2D`: `Some(depth_multiplier)`.
    pub depthwise: Option<u64>,
    /// Keras `SeparableConv2D`: depthwise followed by a 1×1 pointwise convolution.
    pub separable: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Recurrent {
    pub cell: Cell,
    pub units: u64,
    pub input_size: Option<u64>,
    pub layers: u64,
    pub bidirectional: bool,
    pub return_sequences: bool,
    pub bias: bool,
    /// PyTorch keeps two bias vectors per gate; Keras one (GRU with `reset_after`: two).
    pub torch: bool,
    pub reset_after: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Attention {
    pub heads: u64,
    /// Keras: `key_dim`; PyTorch: `embed_dim / num_heads`.
    pub key_dim: Option<u64>,
    pub value_dim: Option<u64>,
    pub output_dim: Option<u64>,
    pub bias: bool,
    /// PyTorch `nn.MultiheadAttention(embed_dim, ...)`, with `kdim`/`vdim`.
    pub torch_dims: Option<(u64, u64, u64)>,
}

type Inferred = Result<(Shape, Params), String>;

fn conv_out(n: u64, k: u64, s: u64, d: u64, padding: &Padding, i: usize) -> Result<u64, String> {
    let eff = d * (k - 1) + 1;
    let s = s.max(1);
    match padding {
        Padding::Same | Padding::Causal => Ok(n.div_ceil(s)),
        Padding::Valid => {
            if n < eff {
                return Err(format!("kernel {k} is larger than the input ({n})"));
            }
            Ok((n - eff) / s + 1)
        }
        Padding::Explicit(p) => {
            let p = p.get(i).or(p.first()).copied().unwrap_or(0);
            if n + 2 * p < eff {
                return Err(format!(
                    "kernel {k} is larger than the padded input ({})",
                    n + 2 * p
                ));
            }
            Ok((n + 2 * p - eff) / s + 1)
        }
    }
}

fn pick(v: &[u64], i: usize, default: u64) -> u64 {
    v.get(i).or(v.first()).copied().unwrap_or(default)
}

/// Splits a per-sample shape into (spatial dims, channels).
fn split_channels(
    input: &Shape,
    rank: usize,
    channels_last: bool,
    what: &str,
) -> Result<(Vec<u64>, u64), String> {
    if input.len() != rank + 1 {
        return Err(format!(
            "{what} expects a rank-{} input per sample, got {}",
            rank + 1,
            fmt_shape(input)
        ));
    }
    Ok(if channels_last {
        (input[..rank].to_vec(), input[rank])
    } else {
        (input[1..].to_vec(), input[0])
    })
}

fn join(spatial: Vec<u64>, channels: u64, channels_last: bool) -> Shape {
    if channels_last {
        let mut s = spatial;
        s.push(channels);
        s
    } else {
        let mut s = vec![channels];
        s.extend(spatial);
        s
    }
}

/// `(30, 30, 32)`.
pub fn fmt_shape(s: &[u64]) -> String {
    let inner: Vec<String> = s.iter().map(|d| d.to_string()).collect();
    if inner.len() == 1 {
        format!("({},)", inner[0])
    } else {
        format!("({})", inner.join(", "))
    }
}

fn last(input: &Shape) -> Result<u64, String> {
    input
        .last()
        .copied()
        .ok_or_else(|| "needs at least one feature dimension".to_string())
}

fn axis(axis: i64, rank: usize) -> Result<usize, String> {
    let a = if axis < 0 { rank as i64 + axis } else { axis };
    if a < 0 || a as usize >= rank {
        return Err(format!(
            "axis {axis} is out of range for a rank-{rank} input"
        ));
    }
    Ok(a as usize)
}

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
                Ok((
                    out,
                    Params::trainable(n * units + if *bias { *units } else { 0 }),
                ))
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
                let (spatial, ch) = split_channels(first, *rank, false, "adaptive pooling")?;
                let out = spatial
                    .iter()
                    .enumerate()
                    .map(|(i, n)| {
                        output
                            .get(i)
                            .or(output.first())
                            .copied()
                            .flatten()
                            .unwrap_or(*n)
                    })
                    .collect();
                Ok((join(out, ch, false), Params::default()))
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
                    Params {
                        total: features * per_channel,
                        trainable: features * trainable_per_channel,
                    },
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
            } => {
                let (spatial, ch) = split_channels(first, *rank, *channels_last, "padding")?;
                let out = spatial
                    .iter()
                    .enumerate()
                    .map(|(i, n)| {
                        let (a, b) = pads.get(i).or(pads.first()).copied().unwrap_or((0, 0));
                        n + a + b
                    })
                    .collect();
                Ok((join(out, ch, *channels_last), Params::default()))
            }
            Spec::UpSample {
                rank,
                size,
                channels_last,
            } => {
                let (spatial, ch) = split_channels(first, *rank, *channels_last, "upsampling")?;
                let out = spatial
                    .iter()
                    .enumerate()
                    .map(|(i, n)| n * pick(size, i, 2))
                    .collect();
                Ok((join(out, ch, *channels_last), Params::default()))
            }
            Spec::Resize {
                rank,
                size,
                channels_last,
            } => {
                let (_, ch) = split_channels(first, *rank, *channels_last, "resizing")?;
                let out = (0..*rank).map(|i| pick(size, i, 1)).collect();
                Ok((join(out, ch, *channels_last), Params::default()))
            }
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
            } => Some(Params::trainable(
                n * units + if *bias { *units } else { 0 },
            )),
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
                Some(Params {
                    total: f * per_channel,
                    trainable: f * trainable_per_channel,
                })
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

fn reshape(input: &Shape, target: &[i64]) -> Result<Shape, String> {
    let total: u64 = input.iter().product();
    let known: u64 = target
        .iter()
        .filter(|d| **d > 0)
        .map(|d| *d as u64)
        .product();
    let wild = target.iter().filter(|d| **d < 0).count();
    if wild > 1 || target.contains(&0) {
        return Err(format!("cannot reshape to {target:?}"));
    }
    let fill = if wild == 1 {
        if known == 0 || total % known != 0 {
            return Err(format!("cannot reshape {} to {target:?}", fmt_shape(input)));
        }
        total / known
    } else {
        0
    };
    let out: Shape = target
        .iter()
        .map(|d| if *d < 0 { fill } else { *d as u64 })
        .collect();
    if out.iter().product::<u64>() != total {
        return Err(format!(
            "cannot reshape {} ({total} values) to {}",
            fmt_shape(input),
            fmt_shape(&out)
        ));
    }
    Ok(out)
}

impl Conv {
    fn params(&self, in_ch: u64) -> Result<Params, String> {
        let k: u64 = (0..self.rank).map(|i| pick(&self.kernel, i, 1)).product();
        let bias = |n: u64| if self.bias { n } else { 0 };
        if let Some(dm) = self.depthwise {
            let depth = k * in_ch * dm;
            return Ok(Params::trainable(if self.separable {
                let f = self.filters.ok_or("no filters")?;
                depth + in_ch * dm * f + bias(f)
            } else {
                depth + bias(in_ch * dm)
            }));
        }
        let f = self.filters.ok_or("no filters")?;
        let g = self.groups.max(1);
        if in_ch % g != 0 || f % g != 0 {
            return Err(format!(
                "groups={g} does not divide {in_ch} input and {f} output channels"
            ));
        }
        Ok(Params::trainable(k * (in_ch / g) * f + bias(f)))
    }

    fn infer(&self, input: &Shape) -> Inferred {
        let (spatial, in_ch) = split_channels(input, self.rank, self.channels_last, "convolution")?;
        if let Some(want) = self.in_channels {
            if want != in_ch {
                return Err(format!("expects {want} input channels, got {in_ch}"));
            }
        }
        let mut out = Vec::new();
        for (i, n) in spatial.iter().enumerate() {
            let k = pick(&self.kernel, i, 1);
            let s = pick(&self.stride, i, 1).max(1);
            let d = pick(&self.dilation, i, 1).max(1);
            let o = if self.transpose {
                let eff = d * (k - 1) + 1;
                match &self.padding {
                    Padding::Explicit(p) => {
                        let p = pick(p, i, 0);
                        let op = pick(&self.output_padding, i, 0);
                        ((n - 1) * s + eff + op)
                            .checked_sub(2 * p)
                            .ok_or("negative output size")?
                    }
                    Padding::Same => n * s,
                    _ => n * s + eff.saturating_sub(s),
                }
            } else {
                conv_out(*n, k, s, d, &self.padding, i)?
            };
            out.push(o);
        }
        let out_ch = match self.depthwise {
            Some(dm) if !self.separable => in_ch * dm,
            _ => self.filters.ok_or("no filters")?,
        };
        Ok((join(out, out_ch, self.channels_last), self.params(in_ch)?))
    }
}

impl Recurrent {
    fn gates(&self) -> u64 {
        match self.cell {
            Cell::Lstm => 4,
            Cell::Gru => 3,
            Cell::Rnn => 1,
        }
    }

    fn params(&self, input: u64) -> Params {
        let (g, h) = (self.gates(), self.units);
        let dirs = if self.bidirectional { 2 } else { 1 };
        let biases = match (self.bias, self.torch, self.cell) {
            (false, ..) => 0,
            (true, true, _) => 2,
            (true, false, Cell::Gru) if self.reset_after => 2,
            (true, false, _) => 1,
        };
        let mut total = 0;
        let mut inp = input;
        for _ in 0..self.layers.max(1) {
            total += dirs * g * (inp * h + h * h + biases * h);
            inp = h * dirs;
        }
        Params::trainable(total)
    }

    fn infer(&self, input: &Shape, copies: u64) -> Inferred {
        if input.len() != 2 {
            return Err(format!(
                "expects (timesteps, features) per sample, got {}",
                fmt_shape(input)
            ));
        }
        if let Some(want) = self.input_size {
            if want != input[1] {
                return Err(format!("expects input_size {want}, got {}", input[1]));
            }
        }
        let dirs = if self.bidirectional { 2 } else { 1 };
        let width = self.units * dirs * copies;
        let out = if self.return_sequences {
            vec![input[0], width]
        } else {
            vec![width]
        };
        let p = self.params(input[1]);
        Ok((out, Params::trainable(p.total * copies)))
    }
}

impl Attention {
    fn torch_params(&self) -> Option<Params> {
        let (e, k, v) = self.torch_dims?;
        let b = if self.bias { 1 } else { 0 };
        Some(Params::trainable(
            e * e + e * k + e * v + 3 * e * b + e * e + e * b,
        ))
    }

    fn infer(&self, inputs: &[Shape]) -> Inferred {
        let q = &inputs[0];
        let v = inputs.get(1).unwrap_or(q);
        let k = inputs.get(2).unwrap_or(v);
        if let Some((e, kd, vd)) = self.torch_dims {
            if last(q)? != e || last(k)? != kd || last(v)? != vd {
                return Err("query/key/value sizes do not match embed_dim, kdim, vdim".into());
            }
            return Ok((q.clone(), self.torch_params().ok_or("no dims")?));
        }
        let h = self.heads;
        let kd = self.key_dim.ok_or("no key_dim")?;
        let vd = self.value_dim.unwrap_or(kd);
        let (qd, kdim, vdim) = (last(q)?, last(k)?, last(v)?);
        let out_dim = self.output_dim.unwrap_or(qd);
        let b = |n: u64| if self.bias { n } else { 0 };
        let params = qd * h * kd
            + b(h * kd)
            + kdim * h * kd
            + b(h * kd)
            + vdim * h * vd
            + b(h * vd)
            + h * vd * out_dim
            + b(out_dim);
        let mut out = q.clone();
        *out.last_mut().ok_or("empty shape")? = out_dim;
        Ok((out, Params::trainable(params)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conv2d(
        filters: u64,
        k: u64,
        s: u64,
        padding: Padding,
        channels_last: bool,
        in_ch: Option<u64>,
    ) -> Spec {
        Spec::Conv(Conv {
            rank: 2,
            filters: Some(filters),
            in_channels: in_ch,
            kernel: vec![k],
            stride: vec![s],
            padding,
            dilation: vec![1],
            groups: 1,
            bias: true,
            channels_last,
            transpose: false,
            output_padding: vec![],
            depthwise: None,
            separable: false,
        })
    }

    #[test]
    fn conv_shapes_and_params() {
        let (s, p) = conv2d(32, 3, 1, Padding::Valid, true, None)
            .infer(&[vec![28, 28, 1]])
            .unwrap();
        assert_eq!((s, p.total), (vec![26, 26, 32], 320));
        let (s, _) = conv2d(32, 3, 2, Padding::Same, true, None)
            .infer(&[vec![28, 28, 1]])
            .unwrap();
        assert_eq!(s, vec![14, 14, 32]);
        let (s, p) = conv2d(64, 3, 1, Padding::Explicit(vec![1]), false, Some(3))
            .infer(&[vec![3, 32, 32]])
            .unwrap();
        assert_eq!((s, p.total), (vec![64, 32, 32], 1792));
        assert!(conv2d(64, 3, 1, Padding::Valid, false, Some(4))
            .infer(&[vec![3, 32, 32]])
            .is_err());
    }

    #[test]
    fn recurrent_params() {
        let lstm = Recurrent {
            cell: Cell::Lstm,
            units: 64,
            input_size: None,
            layers: 1,
            bidirectional: false,
            return_sequences: false,
            bias: true,
            torch: false,
            reset_after: true,
        };
        assert_eq!(
            Spec::Recurrent(lstm.clone())
                .infer(&[vec![10, 32]])
                .unwrap()
                .1
                .total,
            4 * (32 * 64 + 64 * 64 + 64)
        );
        let torch = Recurrent {
            torch: true,
            layers: 2,
            bidirectional: true,
            ..lstm
        };
        // PyTorch: two bias vectors per gate; layer 2 reads both directions.
        let l1 = 2 * 4 * (32 * 64 + 64 * 64 + 128);
        let l2 = 2 * 4 * (128 * 64 + 64 * 64 + 128);
        assert_eq!(torch.params(32).total, l1 + l2);
    }
}
