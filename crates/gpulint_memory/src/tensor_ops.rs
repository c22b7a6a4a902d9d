//! Tensor operations the interpreter follows: Python builtins over constants, and tensor
//! functions and methods (`F.relu(x)`, `torch.cat`, `x.view(...)`, `x.mean(dim=1)`, ...).

use super::interp::Interp;
use super::layer::{Merge, Spec};
use super::torch;
use super::value::{Args, Val};
use std::rc::Rc;
use tree_sitter::Node;

/// Identity-shaped tensor functions (activations, dropout, element-wise maths).
const ELEMENTWISE: &[&str] = &[
    "relu",
    "relu6",
    "gelu",
    "silu",
    "swish",
    "sigmoid",
    "tanh",
    "leaky_relu",
    "elu",
    "selu",
    "celu",
    "softmax",
    "log_softmax",
    "dropout",
    "dropout1d",
    "dropout2d",
    "dropout3d",
    "hardswish",
    "hardsigmoid",
    "mish",
    "softplus",
    "normalize",
    "exp",
    "abs",
    "sqrt",
    "square",
    "neg",
    "clamp",
    "clip",
];

impl<'a, 't> Interp<'a, 't> {
    pub(super) fn builtin(&mut self, name: &str, args: Args, at: Node<'_>) -> Val {
        let ints: Vec<Option<i128>> = args.pos.iter().map(|v| v.int()).collect();
        match name {
            "range" => {
                let (a, b, c) = match ints.as_slice() {
                    [Some(b)] => (0, *b, 1),
                    [Some(a), Some(b)] => (*a, *b, 1),
                    [Some(a), Some(b), Some(c)] if *c != 0 => (*a, *b, *c),
                    _ => return self.unknown(at, "`range` of unknown length"),
                };
                let n = if c > 0 {
                    (b - a + c - 1).max(0) / c
                } else {
                    (a - b - c - 1).max(0) / -c
                };
                if n as usize > super::interp::MAX_UNROLL {
                    return self.unknown(at, "a loop too long to unroll");
                }
                Val::Tuple(Rc::new((0..n).map(|i| Val::Int(a + i * c)).collect()))
            }
            "len" => match args.pos.first() {
                Some(Val::Tensor(_)) => Val::Batch,
                Some(v) => self
                    .iterate(v)
                    .map(|i| Val::Int(i.len() as i128))
                    .unwrap_or(Val::Unknown(0)),
                None => Val::Unknown(0),
            },
            "int" => args
                .pos
                .first()
                .and_then(|v| v.float())
                .map(|f| Val::Int(f.trunc() as i128))
                .unwrap_or(Val::Unknown(0)),
            "float" => args
                .pos
                .first()
                .and_then(|v| v.float())
                .map(Val::Float)
                .unwrap_or(Val::Unknown(0)),
            "min" | "max" => {
                let vals: Vec<i128> = match ints.as_slice() {
                    [_] => args
                        .pos
                        .first()
                        .and_then(|v| self.iterate(v))
                        .map(|i| i.iter().filter_map(|x| x.int()).collect())
                        .unwrap_or_default(),
                    _ => ints.iter().flatten().copied().collect(),
                };
                if vals.is_empty() || (ints.len() > 1 && vals.len() != ints.len()) {
                    return Val::Unknown(0);
                }
                Val::Int(if name == "min" {
                    *vals.iter().min().unwrap_or(&0)
                } else {
                    *vals.iter().max().unwrap_or(&0)
                })
            }
            "list" | "tuple" | "reversed" => {
                let Some(mut items) = args.pos.first().and_then(|v| self.iterate(v)) else {
                    return Val::Unknown(0);
                };
                if name == "reversed" {
                    items.reverse();
                }
                if name == "tuple" {
                    return Val::Tuple(Rc::new(items));
                }
                self.lists.push(items);
                Val::List(self.lists.len() - 1)
            }
            "enumerate" => match args.pos.first().and_then(|v| self.iterate(v)) {
                Some(items) => Val::Tuple(Rc::new(
                    items
                        .into_iter()
                        .enumerate()
                        .map(|(i, v)| Val::Tuple(Rc::new(vec![Val::Int(i as i128), v])))
                        .collect(),
                )),
                None => Val::Unknown(0),
            },
            "zip" => {
                let lists: Option<Vec<Vec<Val>>> =
                    args.pos.iter().map(|v| self.iterate(v)).collect();
                match lists {
                    Some(lists) if !lists.is_empty() => {
                        let n = lists.iter().map(Vec::len).min().unwrap_or(0);
                        Val::Tuple(Rc::new(
                            (0..n)
                                .map(|i| {
                                    Val::Tuple(Rc::new(
                                        lists.iter().map(|l| l[i].clone()).collect(),
                                    ))
                                })
                                .collect(),
                        ))
                    }
                    _ => Val::Unknown(0),
                }
            }
            "sum" => match args.pos.first().and_then(|v| self.iterate(v)) {
                Some(items) => items
                    .iter()
                    .map(|v| v.int())
                    .sum::<Option<i128>>()
                    .map(Val::Int)
                    .unwrap_or(Val::Unknown(0)),
                None => Val::Unknown(0),
            },
            "super" => Val::Super,
            "print" => Val::None,
            _ => Val::Unknown(0),
        }
    }

    /// `F.relu(x)`, `torch.flatten(x, 1)`, `torch.cat([a, b], dim=1)`, `tf.reshape(x, ...)`.
    pub fn tensor_function(&mut self, name: &str, args: Args, at: Node<'_>) -> Val {
        if matches!(name, "cat" | "concat" | "concatenate") {
            let Some(ts) = self.tensor_list(args.pos.first()) else {
                return self.opaque(args, at);
            };
            let axis = args
                .get(1, "dim")
                .or_else(|| args.kw("axis"))
                .and_then(|v| v.int());
            let axis = match (axis, name) {
                (Some(a), _) => a,
                (None, "concatenate") => -1,
                _ => 0,
            };
            if axis == 0 {
                return self.unknown(at, "concatenation along the batch dimension");
            }
            let axis = if axis > 0 {
                axis as i64 - 1
            } else {
                axis as i64
            };
            return self.op(at, name, Spec::Concat { axis }, &ts, false);
        }
        let Some(Val::Tensor(t)) = args.pos.first().cloned() else {
            return self.opaque(args, at);
        };
        let rest = Args {
            pos: args.pos[1..].to_vec(),
            kw: args.kw,
        };
        self.tensor_method(t, name, rest, at, true)
    }

    /// `x.view(...)`, `x.flatten(1)`, `x.mean(dim=1)`; `function` for `torch.flatten(x, ...)`.
    pub fn tensor_method(
        &mut self,
        t: usize,
        name: &str,
        a: Args,
        at: Node<'_>,
        function: bool,
    ) -> Val {
        let rank = self.tensors[t].shape.len() as i128 + 1;
        let dim = |d: i128| if d < 0 { d + rank } else { d };
        match name {
            _ if ELEMENTWISE.contains(&name) => self.op(at, name, Spec::Identity, &[t], false),
            "contiguous" | "float" | "to" | "cuda" | "cpu" | "clone" | "detach" | "half"
            | "bfloat16" | "type" | "requires_grad_" => Val::Tensor(t),
            "size" => match a.get(0, "dim").and_then(|v| v.int()) {
                None => Val::Dims(t),
                Some(d) if dim(d) == 0 => Val::Batch,
                Some(d) => self.tensors[t]
                    .shape
                    .get(dim(d) as usize - 1)
                    .map(|n| Val::Int(*n as i128))
                    .unwrap_or(Val::Unknown(0)),
            },
            "dim" => Val::Int(rank),
            "view" | "reshape" => {
                let dims: Vec<Val> = match a.pos.as_slice() {
                    [one @ (Val::Tuple(_) | Val::List(_) | Val::Dims(_))] => self.unpack_all(one),
                    many => many.to_vec(),
                };
                let dims = if dims.is_empty() {
                    a.get(0, "shape")
                        .map(|v| self.unpack_all(v))
                        .unwrap_or_default()
                } else {
                    dims
                };
                let target: Option<Vec<i64>> = match dims.split_first() {
                    Some((Val::Batch, rest)) => {
                        rest.iter().map(|v| v.int().map(|n| n as i64)).collect()
                    }
                    Some((first, rest))
                        if first.int() == Some(-1)
                            && rest.iter().all(|v| v.int().is_some_and(|n| n > 0)) =>
                    {
                        rest.iter().map(|v| v.int().map(|n| n as i64)).collect()
                    }
                    _ => None,
                };
                match target {
                    Some(target) => self.op(at, name, Spec::Reshape { target }, &[t], true),
                    None => self.unknown(
                        at,
                        format!(
                            "`{}`: the new shape is not known per sample",
                            self.snippet(at)
                        ),
                    ),
                }
            }
            "flatten" => {
                let start = a.get(0, "start_dim").and_then(|v| v.int()).unwrap_or(0);
                let end = a.get(1, "end_dim").and_then(|v| v.int()).unwrap_or(-1);
                if dim(start) < 1 {
                    return self.unknown(at, "flattening the batch dimension");
                }
                let end = if end < 0 { end as i64 } else { end as i64 - 1 };
                self.op(
                    at,
                    "flatten",
                    Spec::Flatten {
                        start: (dim(start) - 1) as usize,
                        end,
                    },
                    &[t],
                    true,
                )
            }
            "permute" => {
                let dims: Vec<Val> = match a.pos.as_slice() {
                    [one @ (Val::Tuple(_) | Val::List(_))] => self.unpack_all(one),
                    many => many.to_vec(),
                };
                let dims: Option<Vec<i128>> = dims.iter().map(|v| v.int().map(dim)).collect();
                match dims {
                    Some(d) if d.first() == Some(&0) && d[1..].iter().all(|x| *x >= 1) => {
                        let dims = d[1..].iter().map(|x| (*x - 1) as usize).collect();
                        self.op(at, "permute", Spec::Permute { dims }, &[t], true)
                    }
                    _ => self.unknown(at, "a permutation that moves the batch dimension"),
                }
            }
            "transpose" if !function || a.pos.len() >= 2 => {
                let (Some(x), Some(y)) = (
                    a.pos.first().and_then(|v| v.int()),
                    a.pos.get(1).and_then(|v| v.int()),
                ) else {
                    return self.unknown(at, "transpose of unknown dimensions");
                };
                let (x, y) = (dim(x), dim(y));
                if x < 1 || y < 1 {
                    return self.unknown(at, "a transpose that moves the batch dimension");
                }
                let mut dims: Vec<usize> = (0..(rank - 1) as usize).collect();
                dims.swap((x - 1) as usize, (y - 1) as usize);
                self.op(at, "transpose", Spec::Permute { dims }, &[t], true)
            }
            "mean" | "sum" | "amax" | "reduce_mean" | "reduce_sum" => {
                let d = a.get(0, "dim").or_else(|| a.kw("axis"));
                let dims: Option<Vec<i128>> = d.and_then(|v| match v {
                    Val::Tuple(_) | Val::List(_) => self
                        .iterate(v)
                        .and_then(|i| i.iter().map(|x| x.int().map(dim)).collect()),
                    v => v.int().map(|x| vec![dim(x)]),
                });
                let keep = a
                    .get(1, "keepdim")
                    .or_else(|| a.kw("keepdims"))
                    .and_then(|v| v.truthy())
                    .unwrap_or(false);
                match dims {
                    Some(d) if d.iter().all(|x| *x >= 1) => {
                        let dims = d.iter().map(|x| (*x - 1) as usize).collect();
                        self.op(
                            at,
                            name,
                            Spec::Reduce {
                                dims,
                                keepdim: keep,
                            },
                            &[t],
                            false,
                        )
                    }
                    _ => self.unknown(
                        at,
                        format!(
                            "`{}` over the batch or unknown dimensions",
                            self.snippet(at)
                        ),
                    ),
                }
            }
            "unsqueeze" | "squeeze" | "expand_dims" => {
                let Some(d) = a
                    .get(0, "dim")
                    .or_else(|| a.kw("axis"))
                    .and_then(|v| v.int())
                else {
                    return self.unknown(at, "squeeze of unknown dimensions");
                };
                let mut shape: Vec<i64> = self.tensors[t].shape.iter().map(|x| *x as i64).collect();
                let full = if name == "squeeze" { rank } else { rank + 1 };
                let d = if d < 0 { d + full } else { d };
                if d < 1 || d as usize > shape.len() + usize::from(name != "squeeze") {
                    return self.unknown(at, "a squeeze of the batch dimension");
                }
                if name == "squeeze" {
                    if shape[d as usize - 1] != 1 {
                        return Val::Tensor(t);
                    }
                    shape.remove(d as usize - 1);
                } else {
                    shape.insert(d as usize - 1, 1);
                }
                self.op(at, name, Spec::Reshape { target: shape }, &[t], true)
            }
            "max_pool1d" | "max_pool2d" | "max_pool3d" | "avg_pool1d" | "avg_pool2d"
            | "avg_pool3d" => {
                let r: usize = if name.contains("1d") {
                    1
                } else if name.contains("3d") {
                    3
                } else {
                    2
                };
                let max = name.starts_with("max");
                let spec = (|| -> Result<Spec, String> {
                    let pool = a.ints(0, "kernel_size", r, None)?;
                    let stride = match a.get(1, "stride") {
                        None | Some(Val::None) => pool.clone(),
                        Some(_) => a.ints(1, "stride", r, None)?,
                    };
                    Ok(Spec::Pool {
                        rank: r,
                        kind: if max {
                            super::layer::PoolKind::Max
                        } else {
                            super::layer::PoolKind::Avg
                        },
                        pool,
                        stride,
                        padding: super::layer::Padding::Explicit(a.ints(
                            2,
                            "padding",
                            r,
                            Some(0),
                        )?),
                        dilation: if max {
                            a.ints(3, "dilation", r, Some(1))?
                        } else {
                            vec![1]
                        },
                        ceil_mode: a.boolean(if max { 4 } else { 3 }, "ceil_mode", false)?,
                        channels_last: false,
                    })
                })();
                match spec {
                    Ok(s) => self.op(at, name, s, &[t], false),
                    Err(e) => self.unknown(at, e),
                }
            }
            "adaptive_avg_pool1d"
            | "adaptive_avg_pool2d"
            | "adaptive_max_pool2d"
            | "adaptive_avg_pool3d" => {
                let r: usize = if name.contains("1d") {
                    1
                } else if name.contains("3d") {
                    3
                } else {
                    2
                };
                match torch::adaptive(a.get(0, "output_size"), r) {
                    Ok(s) => self.op(at, name, s, &[t], false),
                    Err(e) => self.unknown(at, e),
                }
            }
            "interpolate" | "upsample" => match a.get(1, "scale_factor").and_then(|v| v.int()) {
                Some(f) if f > 0 && self.tensors[t].shape.len() == 3 => self.op(
                    at,
                    name,
                    Spec::UpSample {
                        rank: 2,
                        size: vec![f as u64],
                        channels_last: false,
                    },
                    &[t],
                    false,
                ),
                _ => self.unknown(at, "interpolation to an unknown size"),
            },
            "add" | "mul" | "multiply" | "subtract" => match a.pos.first() {
                Some(Val::Tensor(u)) => {
                    let u = *u;
                    self.op(at, name, Spec::Merge(Merge::Add), &[t, u], false)
                }
                _ => self.op(at, name, Spec::Identity, &[t], false),
            },
            _ => self.unknown(at, format!("`{}` is not understood", self.snippet(at))),
        }
    }

    pub(super) fn unpack_all(&mut self, v: &Val) -> Vec<Val> {
        match v {
            Val::Dims(t) => {
                let n = self.tensors[*t].shape.len() + 1;
                self.unpack(v, n)
            }
            _ => self.iterate(v).unwrap_or_default(),
        }
    }
}
