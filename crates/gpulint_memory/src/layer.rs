//! Layer specifications shared by Keras and PyTorch, and their shape and parameter arithmetic.
//!
//! Shapes are per sample: the batch dimension is left out. Keras layers see channels-last
//! tensors (`(H, W, C)`), PyTorch modules channels-first (`(C, H, W)`); a spec records which.
//!
//! This module holds the specs; what a spec computes is in [`infer`], the arithmetic of the
//! layers with weights (convolutions, recurrent layers, attention) in [`weighted`], and the
//! per-sample dimension helpers both use in [`dims`].

mod dims;
mod infer;
mod weighted;

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

/// `(30, 30, 32)`.
pub fn fmt_shape(s: &[u64]) -> String {
    let inner: Vec<String> = s.iter().map(|d| d.to_string()).collect();
    if inner.len() == 1 {
        format!("({},)", inner[0])
    } else {
        format!("({})", inner.join(", "))
    }
}
