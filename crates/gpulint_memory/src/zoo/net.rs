//! A network written down layer by layer: each call appends the step a module (or tensor
//! operation) makes, with its per-sample output shape, its parameters and the steps it reads.
//! The architectures of [`super`] are built with it; shapes follow PyTorch (channels first) or
//! Keras (channels last) as the builder is told.

use crate::layer::{Params, Shape};
use crate::step::{Step, INPUT};

/// A tensor of the network: its per-sample shape and the step that made it.
#[derive(Debug, Clone)]
pub struct X {
    pub shape: Shape,
    pub from: usize,
}

impl X {
    pub fn input(shape: Shape) -> X {
        X { shape, from: INPUT }
    }

    /// Channels (first dimension in PyTorch, last in Keras).
    pub fn c(&self, keras: bool) -> u64 {
        if keras {
            *self.shape.last().unwrap_or(&0)
        } else {
            self.shape.first().copied().unwrap_or(0)
        }
    }

    pub fn last(&self) -> u64 {
        self.shape.last().copied().unwrap_or(0)
    }
}

/// Output size of a convolution or pooling window along one dimension.
pub fn out_dim(n: u64, k: u64, s: u64, p: u64, d: u64, ceil: bool) -> u64 {
    let eff = d * (k - 1) + 1;
    if n + 2 * p < eff {
        return 1;
    }
    let span = n + 2 * p - eff;
    let mut o = if ceil { span.div_ceil(s) } else { span / s } + 1;
    if ceil && (o - 1) * s >= n + p {
        o -= 1;
    }
    o
}

/// Keras `padding="same"`: ceil(n / s); `"valid"`: floor((n - k) / s) + 1.
pub fn keras_dim(n: u64, k: u64, s: u64, same: bool) -> u64 {
    if same {
        n.div_ceil(s)
    } else if n < k {
        1
    } else {
        (n - k) / s + 1
    }
}

/// A convolution: kernel, stride, padding and dilation per spatial dimension (height, width).
#[derive(Debug, Clone, Copy)]
pub struct Cv {
    pub k: (u64, u64),
    pub s: u64,
    /// PyTorch explicit padding; Keras: `same` when non-zero.
    pub p: (u64, u64),
    pub d: u64,
    pub groups: u64,
    pub bias: bool,
}

/// A square convolution: kernel `k`, stride `s`, padding `p`, no bias.
pub fn cv(k: u64, s: u64, p: u64) -> Cv {
    Cv {
        k: (k, k),
        s,
        p: (p, p),
        d: 1,
        groups: 1,
        bias: false,
    }
}

impl Cv {
    pub fn bias(mut self) -> Cv {
        self.bias = true;
        self
    }

    pub fn groups(mut self, g: u64) -> Cv {
        self.groups = g;
        self
    }

    /// Keras `padding="same"`.
    pub fn same(mut self) -> Cv {
        self.p = (1, 1);
        self
    }
}

#[derive(Debug, Default)]
pub struct Net {
    pub steps: Vec<Step>,
    pub params: Params,
    /// Keras: channels last, BatchNormalization keeps 4 numbers per channel.
    pub keras: bool,
    /// Parameters not owned by a called module (position embeddings, class tokens).
    pub loose: u64,
}

impl Net {
    pub fn new(keras: bool) -> Net {
        Net {
            keras,
            ..Net::default()
        }
    }

    /// Appends a step; `params` are counted once per module name.
    pub fn push(
        &mut self,
        name: &str,
        class: &str,
        inputs: &[&X],
        shape: Shape,
        params: Params,
    ) -> X {
        self.push_kind(name, class, inputs, shape, params, true, false)
    }

    #[allow(clippy::too_many_arguments)]
    pub fn push_kind(
        &mut self,
        name: &str,
        class: &str,
        inputs: &[&X],
        shape: Shape,
        params: Params,
        module: bool,
        view: bool,
    ) -> X {
        self.params.total += params.total;
        self.params.trainable += params.trainable;
        self.steps.push(Step {
            name: name.to_string(),
            class: class.to_string(),
            output: shape.clone(),
            params,
            module,
            view,
            int: false,
            inputs: inputs.iter().map(|x| x.from).collect(),
            heads: 0,
            workspace: 0,
        });
        X {
            shape,
            from: self.steps.len() - 1,
        }
    }

    /// A tensor operation that is not a module (`torch.flatten`, `+`, `torch.cat`).
    pub fn op(&mut self, class: &str, inputs: &[&X], shape: Shape, view: bool) -> X {
        self.push_kind(class, class, inputs, shape, Params::default(), false, view)
    }

    /// Parameters that belong to the model but to no module called on the way (PyTorch
    /// `nn.Parameter`s such as a class token or position embedding).
    pub fn parameter(&mut self, n: u64) {
        self.params.total += n;
        self.params.trainable += n;
        self.loose += n;
    }

    fn spatial(&self, x: &X) -> (Vec<u64>, u64) {
        let s = &x.shape;
        if self.keras {
            (s[..s.len() - 1].to_vec(), x.c(true))
        } else {
            (s[1..].to_vec(), x.c(false))
        }
    }

    fn join(&self, spatial: Vec<u64>, c: u64) -> Shape {
        if self.keras {
            let mut v = spatial;
            v.push(c);
            v
        } else {
            let mut v = vec![c];
            v.extend(spatial);
            v
        }
    }

    /// A 2-D convolution with `out` filters.
    pub fn conv(&mut self, name: &str, x: &X, out: u64, c: Cv) -> X {
        let (sp, cin) = self.spatial(x);
        let dims: Vec<u64> = sp
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let k = if i == 0 { c.k.0 } else { c.k.1 };
                let p = if i == 0 { c.p.0 } else { c.p.1 };
                if self.keras {
                    keras_dim(*n, k, c.s, p > 0)
                } else {
                    out_dim(*n, k, c.s, p, c.d, false)
                }
            })
            .collect();
        let w = cin / c.groups * out * c.k.0 * c.k.1 + if c.bias { out } else { 0 };
        let class = if self.keras {
            if c.groups > 1 && c.groups == cin {
                "DepthwiseConv2D"
            } else {
                "Conv2D"
            }
        } else {
            "Conv2d"
        };
        let shape = self.join(dims, out);
        self.push(name, class, &[x], shape, Params::trainable(w))
    }

    /// Batch normalization over the channels.
    pub fn bn(&mut self, name: &str, x: &X) -> X {
        let c = x.c(self.keras);
        let (p, class) = if self.keras {
            (
                Params {
                    total: 4 * c,
                    trainable: 2 * c,
                },
                "BatchNormalization",
            )
        } else {
            (Params::trainable(2 * c), "BatchNorm2d")
        };
        self.push(name, class, &[x], x.shape.clone(), p)
    }

    /// A parameter-free module that keeps the shape (activation, dropout, identity).
    pub fn act(&mut self, name: &str, class: &str, x: &X) -> X {
        self.push(name, class, &[x], x.shape.clone(), Params::default())
    }

    /// Element-wise sum of two tensors (a residual connection).
    pub fn add(&mut self, a: &X, b: &X) -> X {
        self.op("add", &[a, b], a.shape.clone(), false)
    }

    /// A linear layer over the last dimension.
    pub fn linear(&mut self, name: &str, x: &X, out: u64, bias: bool) -> X {
        let n = x.last();
        let mut shape = x.shape.clone();
        *shape.last_mut().expect("a shape") = out;
        let class = if self.keras { "Dense" } else { "Linear" };
        let p = n * out + if bias { out } else { 0 };
        self.push(name, class, &[x], shape, Params::trainable(p))
    }

    /// Max or average pooling with a square window.
    #[allow(clippy::too_many_arguments)]
    pub fn pool(
        &mut self,
        name: &str,
        class: &str,
        x: &X,
        k: u64,
        s: u64,
        p: u64,
        ceil: bool,
    ) -> X {
        let (sp, c) = self.spatial(x);
        let keras = self.keras;
        let dims = sp
            .iter()
            .map(|n| {
                if keras {
                    keras_dim(*n, k, s, p > 0)
                } else {
                    out_dim(*n, k, s, p, 1, ceil)
                }
            })
            .collect();
        let shape = self.join(dims, c);
        self.push(name, class, &[x], shape, Params::default())
    }

    /// Adaptive pooling to `out × out` (1: global pooling that keeps the dimensions).
    pub fn adaptive(&mut self, name: &str, class: &str, x: &X, out: u64) -> X {
        let (sp, c) = self.spatial(x);
        let shape = self.join(vec![out; sp.len()], c);
        self.push(name, class, &[x], shape, Params::default())
    }

    /// Global pooling to one vector per sample.
    pub fn global_pool(&mut self, name: &str, class: &str, x: &X) -> X {
        let c = x.c(self.keras);
        self.push(name, class, &[x], vec![c], Params::default())
    }

    /// Flattens everything to one vector per sample (a view).
    pub fn flatten(&mut self, name: Option<&str>, x: &X) -> X {
        let n = x.shape.iter().product();
        match name {
            Some(name) => self.push_kind(
                name,
                "Flatten",
                &[x],
                vec![n],
                Params::default(),
                true,
                true,
            ),
            None => self.op("flatten", &[x], vec![n], true),
        }
    }

    /// Layer normalization over the last dimension.
    pub fn layer_norm(&mut self, name: &str, x: &X, bias: bool) -> X {
        let d = x.last();
        let class = if self.keras {
            "LayerNormalization"
        } else {
            "LayerNorm"
        };
        let p = if bias { 2 * d } else { d };
        self.push(name, class, &[x], x.shape.clone(), Params::trainable(p))
    }

    /// Concatenation along the channels.
    pub fn cat(&mut self, xs: &[&X]) -> X {
        let keras = self.keras;
        let c: u64 = xs.iter().map(|x| x.c(keras)).sum();
        let (sp, _) = self.spatial(xs[0]);
        let shape = self.join(sp, c);
        let name = if keras { "concatenate" } else { "cat" };
        self.op(name, xs, shape, false)
    }

    /// Element-wise product with a per-channel scale (squeeze-and-excitation).
    pub fn scale(&mut self, x: &X, s: &X) -> X {
        self.op("mul", &[x, s], x.shape.clone(), false)
    }

    /// Every parameter, and the steps.
    pub fn finish(self) -> (Vec<Step>, Params) {
        (self.steps, self.params)
    }
}
