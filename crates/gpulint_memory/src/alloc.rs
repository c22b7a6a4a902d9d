//! Single tensor allocations with a literal shape (`torch.randn(50000, 50000, device="cuda")`,
//! `tf.zeros((20000, 20000))`, `jnp.ones(...)`), their size and where they live. Used by MEM002
//! and DS001.

use gpulint_semantic::python::{string_literal, PythonModel};
use gpulint_syntax::named_children;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

/// Where an allocation lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Device {
    Gpu,
    Cpu,
}

#[derive(Debug, Clone)]
pub struct Allocation<'t> {
    pub shape: Vec<u64>,
    pub dtype: &'static str,
    pub dtype_bytes: u64,
    pub bytes: u128,
    pub device: Device,
    /// The call that moves it to the GPU (`.cuda()`, `.to(device)`, `jnp.asarray(...)`), if
    /// that is not the allocation itself.
    pub moved_by: Option<Node<'t>>,
}

impl Allocation<'_> {
    /// `50000 × 50000 float32`.
    pub fn describe(&self) -> String {
        let dims: Vec<String> = self.shape.iter().map(|d| d.to_string()).collect();
        format!("{} {}", dims.join(" × "), self.dtype)
    }
}

fn dtype_of(name: &str) -> Option<(&'static str, u64)> {
    let last = name
        .rsplit('.')
        .next()
        .unwrap_or(name)
        .trim_matches(|c| c == '"' || c == '\'');
    Some(match last {
        "float16" | "half" => ("float16", 2),
        "bfloat16" => ("bfloat16", 2),
        "float32" | "float" | "single" => ("float32", 4),
        "float64" | "double" => ("float64", 8),
        "int64" | "long" => ("int64", 8),
        "int32" | "int" => ("int32", 4),
        "int16" | "short" => ("int16", 2),
        "int8" => ("int8", 1),
        "uint8" => ("uint8", 1),
        "bool" => ("bool", 1),
        "complex64" => ("complex64", 8),
        _ => return None,
    })
}

/// Creation functions: (qualified name, index of the shape argument, varargs shape, default dtype).
const CREATORS: &[(&str, usize, bool, &str)] = &[
    ("torch.zeros", 0, true, "float32"),
    ("torch.ones", 0, true, "float32"),
    ("torch.empty", 0, true, "float32"),
    ("torch.rand", 0, true, "float32"),
    ("torch.randn", 0, true, "float32"),
    ("torch.full", 0, false, "float32"),
    ("tensorflow.zeros", 0, false, "float32"),
    ("tensorflow.ones", 0, false, "float32"),
    ("tensorflow.fill", 0, false, "float32"),
    ("tensorflow.random.normal", 0, false, "float32"),
    ("tensorflow.random.uniform", 0, false, "float32"),
    ("tensorflow.random.truncated_normal", 0, false, "float32"),
    ("jax.numpy.zeros", 0, false, "float32"),
    ("jax.numpy.ones", 0, false, "float32"),
    ("jax.numpy.empty", 0, false, "float32"),
    ("jax.numpy.full", 0, false, "float32"),
    ("jax.random.normal", 1, false, "float32"),
    ("jax.random.uniform", 1, false, "float32"),
    ("numpy.zeros", 0, false, "float64"),
    ("numpy.ones", 0, false, "float64"),
    ("numpy.empty", 0, false, "float64"),
    ("numpy.full", 0, false, "float64"),
    ("numpy.random.rand", 0, true, "float64"),
    ("numpy.random.randn", 0, true, "float64"),
    ("numpy.random.random", 0, false, "float64"),
];

/// The last segment of each name of [`CREATORS`] (the test below keeps the two in step).
const CREATOR_METHODS: &[&str] = &[
    "zeros",
    "ones",
    "empty",
    "rand",
    "randn",
    "full",
    "fill",
    "normal",
    "uniform",
    "truncated_normal",
    "random",
];

/// The allocation a creation call makes, when its shape is a constant.
pub fn literal_allocation<'t>(pm: &PythonModel<'t>, call: Node<'_>) -> Option<Allocation<'t>> {
    // The qualified name of `a.b.zeros(...)` ends in `.zeros` whatever `a` is bound to: a
    // method no creator ends in needs no resolving (most calls of a file).
    if let Some(function) = call
        .field("function")
        .filter(|f| f.kind_name() == "attribute")
    {
        let last = pm.text(function.field("attribute")?);
        if !CREATOR_METHODS.contains(&last) {
            return None;
        }
    }
    let q = pm.call_name(call)?;
    let (_, shape_arg, varargs, default_dtype) = *CREATORS.iter().find(|c| c.0 == q)?;
    let args = call.field("arguments")?;
    let positional: Vec<Node> = named_children(args)
        .filter(|a| !matches!(a.kind_name(), "keyword_argument" | "comment"))
        .collect();
    let keyword = |key: &str| {
        named_children(args)
            .find(|a| {
                a.kind_name() == "keyword_argument"
                    && a.field("name").is_some_and(|n| pm.text(n) == key)
            })
            .and_then(|a| a.field("value"))
    };
    let mut dims: Vec<u64> = Vec::new();
    let one = |n: Node| {
        pm.const_value(n)
            .and_then(|v| v.as_int())
            .filter(|d| *d > 0)
            .map(|d| d as u64)
    };
    let shape_node = keyword("size")
        .or(keyword("shape"))
        .or(positional.get(shape_arg).copied())?;
    match pm.const_value(shape_node)? {
        gpulint_semantic::python::Value::Tuple(t) => {
            for d in t {
                dims.push(d.as_int().filter(|d| *d > 0)? as u64);
            }
        }
        v if varargs => {
            dims.push(v.as_int().filter(|d| *d > 0)? as u64);
            for n in positional.iter().skip(shape_arg + 1) {
                dims.push(one(*n)?);
            }
        }
        v => dims.push(v.as_int().filter(|d| *d > 0)? as u64),
    }
    if dims.is_empty() {
        return None;
    }
    let (mut dtype, mut bytes) = dtype_of(default_dtype)?;
    if let Some(d) = keyword("dtype") {
        let name = string_literal(d, pm.source).unwrap_or_else(|| pm.text(d).to_string());
        (dtype, bytes) = dtype_of(&name)?;
    }
    let (device, moved_by) = placement(pm, call, &q, keyword("device"));
    let (dtype, bytes) = match moved_by
        .and_then(|m| m.field("function"))
        .and_then(|f| f.field("attribute"))
    {
        Some(a) if pm.text(a) == "half" => ("float16", 2),
        _ => (dtype, bytes),
    };
    let elements: u128 = dims.iter().map(|d| *d as u128).product();
    Some(Allocation {
        shape: dims,
        dtype,
        dtype_bytes: bytes,
        bytes: elements * bytes as u128,
        device,
        moved_by,
    })
}

/// Is `device` a GPU device expression? Strings are read; `torch.device("cpu")` too; other
/// names (`device`, `dev`) are taken as the GPU the script trains on.
fn device_is_gpu(pm: &PythonModel<'_>, device: Node<'_>) -> bool {
    let text = string_literal(device, pm.source)
        .unwrap_or_else(|| pm.text(device).to_string())
        .to_ascii_lowercase();
    !(text.contains("cpu") || text.contains("mps") || text == "none")
}

fn placement<'t>(
    pm: &PythonModel<'t>,
    call: Node<'_>,
    q: &str,
    device: Option<Node<'_>>,
) -> (Device, Option<Node<'t>>) {
    // A method chained on the result: `.cuda()`, `.to(device)`, `.half().cuda()`.
    let mut cur = call;
    for _ in 0..4 {
        let Some(attr) = pm.parent(cur).filter(|p| p.kind_name() == "attribute") else {
            break;
        };
        let Some(method_call) = pm.parent(attr).filter(|p| p.kind_name() == "call") else {
            break;
        };
        let name = attr.field("attribute").map(|a| pm.text(a)).unwrap_or("");
        match name {
            "cuda" => return (Device::Gpu, Some(method_call)),
            "to" => {
                let arg = method_call
                    .field("arguments")
                    .and_then(|a| a.named_child(0));
                let gpu = arg.is_some_and(|a| {
                    a.kind_name() != "keyword_argument"
                        && device_is_gpu(pm, a)
                        && !pm.text(a).starts_with("torch.float")
                        && !pm.text(a).starts_with("torch.half")
                });
                if gpu {
                    return (Device::Gpu, Some(method_call));
                }
            }
            "cpu" | "numpy" => return (Device::Cpu, None),
            _ => {}
        }
        cur = method_call;
    }
    if q.starts_with("torch.") {
        return match device {
            Some(d) if device_is_gpu(pm, d) => (Device::Gpu, None),
            _ => match wrapped_on_gpu(pm, call) {
                Some(w) => (Device::Gpu, Some(w)),
                None => (Device::Cpu, None),
            },
        };
    }
    if q.starts_with("numpy.") {
        return match wrapped_on_gpu(pm, call) {
            Some(w) => (Device::Gpu, Some(w)),
            None => (Device::Cpu, None),
        };
    }
    if q.starts_with("tensorflow.") {
        // The default GPU, unless inside `with tf.device("/CPU:0"):`. The statements around
        // the call are found going down from the root (walking up is quadratic in the depth).
        let around = pm
            .roots
            .iter()
            .find(|r| r.start_byte() <= call.start_byte() && call.end_byte() <= r.end_byte())
            .map(|r| gpulint_syntax::ancestors_of(*r, call))
            .unwrap_or_default();
        for n in around {
            if n.kind_name() == "with_statement" {
                let header = named_children(n)
                    .find(|c| c.kind_name() == "with_clause")
                    .map(|c| pm.text(c).to_ascii_lowercase());
                if header.is_some_and(|h| h.contains("device(") && h.contains("cpu")) {
                    return (Device::Cpu, None);
                }
            }
        }
        return (Device::Gpu, None);
    }
    // JAX: the default device, unless the file pins JAX to the CPU.
    if pm.jax_on_cpu() {
        return (Device::Cpu, None);
    }
    (Device::Gpu, None)
}

/// A NumPy (or CPU torch) array passed straight to something that puts it on the GPU:
/// `torch.from_numpy(a).cuda()`, `torch.tensor(a, device="cuda")`, `jnp.asarray(a)`,
/// `jax.device_put(a)`, `tf.constant(a)`.
fn wrapped_on_gpu<'t>(pm: &PythonModel<'t>, call: Node<'_>) -> Option<Node<'t>> {
    let args = pm
        .parent(call)
        .filter(|p| p.kind_name() == "argument_list")?;
    let outer = pm.parent(args).filter(|p| p.kind_name() == "call")?;
    if args.named_child(0).map(|a| a.id()) != Some(call.id()) {
        return None;
    }
    let q = pm.call_name(outer)?;
    match q.as_str() {
        "jax.numpy.asarray"
        | "jax.numpy.array"
        | "jax.device_put"
        | "tensorflow.constant"
        | "tensorflow.convert_to_tensor"
        | "tensorflow.Variable" => Some(outer),
        "torch.from_numpy" | "torch.tensor" | "torch.as_tensor" => {
            let (device, moved) = placement(pm, outer, "torch.x", keyword_of(pm, outer, "device"));
            (device == Device::Gpu).then(|| moved.unwrap_or(outer))
        }
        _ => None,
    }
}

fn keyword_of<'n>(pm: &PythonModel<'_>, call: Node<'n>, key: &str) -> Option<Node<'n>> {
    let args = call.field("arguments")?;
    named_children(args)
        .find(|a| {
            a.kind_name() == "keyword_argument"
                && a.field("name").is_some_and(|n| pm.text(n) == key)
        })
        .and_then(|a| a.field("value"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`CREATOR_METHODS`] holds exactly the last segments of the creators' names.
    #[test]
    fn creator_methods_are_the_creators_last_segments() {
        let mut from_creators: Vec<&str> = CREATORS
            .iter()
            .map(|c| c.0.rsplit('.').next().unwrap())
            .collect();
        from_creators.sort_unstable();
        from_creators.dedup();
        let mut methods = CREATOR_METHODS.to_vec();
        methods.sort_unstable();
        assert_eq!(methods, from_creators);
    }
}
