//! Per-sample dimension helpers: sliding-window output sizes, per-dimension picks, splitting
//! and joining the channel axis, axis normalisation, reshape targets.

use super::{fmt_shape, Padding, Shape};

pub(super) fn conv_out(
    n: u64,
    k: u64,
    s: u64,
    d: u64,
    padding: &Padding,
    i: usize,
) -> Result<u64, String> {
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

pub(super) fn pick(v: &[u64], i: usize, default: u64) -> u64 {
    v.get(i).or(v.first()).copied().unwrap_or(default)
}

/// Splits a per-sample shape into (spatial dims, channels).
pub(super) fn split_channels(
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

pub(super) fn join(spatial: Vec<u64>, channels: u64, channels_last: bool) -> Shape {
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

pub(super) fn last(input: &Shape) -> Result<u64, String> {
    input
        .last()
        .copied()
        .ok_or_else(|| "needs at least one feature dimension".to_string())
}

pub(super) fn axis(axis: i64, rank: usize) -> Result<usize, String> {
    let a = if axis < 0 { rank as i64 + axis } else { axis };
    if a < 0 || a as usize >= rank {
        return Err(format!(
            "axis {axis} is out of range for a rank-{rank} input"
        ));
    }
    Ok(a as usize)
}

pub(super) fn reshape(input: &Shape, target: &[i64]) -> Result<Shape, String> {
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
