//! The steps of a model's forward pass, as the estimator reads them: what both the
//! interpreter ([`crate::model`]) and the library models ([`crate::zoo`]) produce.

use crate::layer::{Params, Shape};

/// Which framework a layer or model belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fw {
    Keras,
    Torch,
}

/// One layer application (or tensor operation) of a model's forward pass.
#[derive(Debug, Clone)]
pub struct Step {
    /// Keras: the layer name (`conv2d_1`); PyTorch: the module path (`features.0`); for
    /// operations, their name (`view`, `F.relu`).
    pub name: String,
    /// The layer class (`Conv2D`, `Linear`) or operation.
    pub class: String,
    pub output: Shape,
    /// Parameters, on the first application of each layer.
    pub params: Params,
    /// A layer/module (as the framework lists it), not a tensor operation.
    pub module: bool,
    /// Shares storage with its input (a view).
    pub view: bool,
    pub int: bool,
    /// The steps whose outputs it reads ([`INPUT`]: the model's input).
    pub inputs: Vec<usize>,
    /// Attention heads (attention layers; 0 otherwise): the score matrices are per head.
    /// Recurrent layers: their stacked layers.
    pub heads: u64,
    /// Elements of a transient buffer its backward needs (dilated convolutions: cuDNN's
    /// im2col workspace), 0 for most steps.
    pub workspace: u64,
}

/// A step input that is the model's input rather than another step's output.
pub const INPUT: usize = usize::MAX;
