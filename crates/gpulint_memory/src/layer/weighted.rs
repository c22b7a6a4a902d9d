//! Shape and parameter arithmetic of the layers with weights: convolutions, recurrent layers
//! and attention.

use super::dims::{conv_out, join, last, pick, split_channels};
use super::{fmt_shape, Attention, Cell, Conv, Inferred, Padding, Params, Recurrent, Shape};

impl Conv {
    pub(super) fn params(&self, in_ch: u64) -> Result<Params, String> {
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

    pub(super) fn infer(&self, input: &Shape) -> Inferred {
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

    pub(super) fn params(&self, input: u64) -> Params {
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

    pub(super) fn infer(&self, input: &Shape, copies: u64) -> Inferred {
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
    pub(super) fn torch_params(&self) -> Option<Params> {
        let (e, k, v) = self.torch_dims?;
        let b = if self.bias { 1 } else { 0 };
        Some(Params::trainable(
            e * e + e * k + e * v + 3 * e * b + e * e + e * b,
        ))
    }

    pub(super) fn infer(&self, inputs: &[Shape]) -> Inferred {
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
    use crate::layer::Spec;

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
