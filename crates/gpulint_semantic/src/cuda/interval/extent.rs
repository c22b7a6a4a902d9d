//! What a launch site says about a kernel's buffers and sizes: the value of each argument as a
//! polynomial over host values (constants, `x.numel()`, `x.size(0)`, parameters of the host
//! function), and the number of elements of the buffer passed for each pointer parameter, from
//! `cudaMalloc(&p, bytes)`, `torch::empty({a, b})`, `x.data_ptr<T>()` (`x.numel()` elements).

use super::poly::Poly;
use crate::cuda::guards::compact;
use crate::cuda::kernel::{peel, peel_pointer, Kernel};
use crate::cuda::narrow::method_name;
use crate::cuda::{last_name, sizeof_scalar, CudaModel, Launch};
use crate::hash::HashMap;
use gpulint_syntax::named_children;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

/// Host definitions followed from an argument.
const MAX_DEPTH: usize = 8;

/// Methods that keep a tensor's elements (`x.contiguous()`): its `numel()` is the same.
const SAME_ELEMENTS: &[&str] = &["contiguous", "to", "cuda", "detach", "view", "reshape"];
/// Calls that allocate a tensor from a list of sizes.
const ALLOC_CALLS: &[&str] = &["empty", "zeros", "ones", "full", "rand", "randn"];

impl<'t> CudaModel<'t> {
    /// The value of host expression `e` at `launch`, over host atoms.
    pub fn host_poly(&self, launch: &Launch<'t>, e: Node<'t>) -> Option<Poly> {
        self.host_poly_depth(launch, e, 0)
    }

    fn host_poly_depth(&self, launch: &Launch<'t>, e: Node<'t>, depth: usize) -> Option<Poly> {
        if depth > MAX_DEPTH {
            return None;
        }
        let d = depth + 1;
        let e = peel(e);
        if let Some(v) = self.eval(e) {
            return Some(Poly::constant(v));
        }
        match e.kind_name() {
            "identifier" => {
                let name = self.text(e);
                match self.host_values_at(launch, name).as_slice() {
                    [] => Some(Poly::atom(name)),
                    [v] => self.host_poly_depth(launch, *v, d),
                    _ => None,
                }
            }
            "binary_expression" => {
                let op = e.field("operator")?.kind_name();
                let l = self.host_poly_depth(launch, e.field("left")?, d)?;
                let r = self.host_poly_depth(launch, e.field("right")?, d)?;
                match op {
                    "+" => l.add(&r),
                    "-" => l.sub(&r),
                    "*" => l.mul(&r),
                    "/" => match (l.as_const(), r.as_const()?) {
                        (Some(a), b) if b != 0 => Some(Poly::constant(a / b)),
                        (_, b) => l.div_exact(b),
                    },
                    _ => None,
                }
            }
            "call_expression" => {
                let f = e.field("function")?;
                let args: Vec<Node<'t>> = named_children(e.field("arguments")?).collect();
                if let Some(method) = method_name(e, self.source) {
                    let obj = f.field("argument")?;
                    return match method {
                        "numel" | "NumElements" | "nelement" => {
                            Some(self.tensor_numel(launch, obj, d))
                        }
                        "size" | "dim_size" if args.len() == 1 => Some(Poly::atom(&format!(
                            "{}.size({})",
                            self.tensor_root(launch, obj, d, false),
                            compact(self.text(args[0]))
                        ))),
                        _ => None,
                    };
                }
                let name = last_name(self.text(f.field("name").unwrap_or(f)));
                match name {
                    "static_cast" | "int" | "int64_t" | "size_t" | "long" | "unsigned"
                    | "uint32_t" | "int32_t"
                        if args.len() == 1 =>
                    {
                        self.host_poly_depth(launch, args[0], d)
                    }
                    _ if args.len() == 2 => {
                        // `min(a, b)`, `max(a, b)`, `DIVUP(a, b)` of constants.
                        let a = self.host_poly_depth(launch, args[0], d)?.as_const()?;
                        let b = self.host_poly_depth(launch, args[1], d)?.as_const()?;
                        let v = match name {
                            "min" => a.min(b),
                            "max" => a.max(b),
                            _ if crate::cuda::launch::is_ceil_helper(name) && b > 0 => {
                                (a + b - 1).div_euclid(b)
                            }
                            _ => return None,
                        };
                        Some(Poly::constant(v))
                    }
                    _ => None,
                }
            }
            "field_expression" => Some(Poly::atom(&compact(self.text(e)))),
            _ => None,
        }
    }

    /// The tensor a host expression names, through `auto y = x.contiguous();`-style locals.
    fn tensor_root(&self, launch: &Launch<'t>, obj: Node<'t>, depth: usize, numel: bool) -> String {
        let obj = peel(obj);
        if depth <= MAX_DEPTH {
            if obj.kind_name() == "identifier" {
                if let [v] = self.host_values_at(launch, self.text(obj)).as_slice() {
                    let v = peel(*v);
                    if v.kind_name() == "identifier" {
                        return self.tensor_root(launch, v, depth + 1, numel);
                    }
                    if let Some(m) = method_name(v, self.source) {
                        let keeps = m == "contiguous" || (numel && SAME_ELEMENTS.contains(&m));
                        if let (true, Some(o)) =
                            (keeps, v.field("function").and_then(|f| f.field("argument")))
                        {
                            return self.tensor_root(launch, o, depth + 1, numel);
                        }
                    }
                }
            }
            if let Some(m) = method_name(obj, self.source) {
                let keeps = m == "contiguous" || (numel && SAME_ELEMENTS.contains(&m));
                if let (true, Some(o)) = (
                    keeps,
                    obj.field("function").and_then(|f| f.field("argument")),
                ) {
                    return self.tensor_root(launch, o, depth + 1, numel);
                }
            }
        }
        compact(self.text(obj))
    }

    /// The number of elements of a tensor: the product of the sizes it was allocated with,
    /// or the atom `x.numel()`.
    fn tensor_numel(&self, launch: &Launch<'t>, obj: Node<'t>, depth: usize) -> Poly {
        let root = self.tensor_root(launch, obj, depth, true);
        let fallback = || Poly::atom(&format!("{root}.numel()"));
        let alloc = (|| {
            // `x = torch::empty_like(x)` leads back to itself: the chain of `_like` allocations
            // is followed as far as the other host values.
            if depth > MAX_DEPTH {
                return None;
            }
            let obj = peel(obj);
            if obj.kind_name() != "identifier" {
                return None;
            }
            let values = self.host_values_at(launch, self.text(obj));
            let [v] = values.as_slice() else {
                return None;
            };
            let v = peel(*v);
            if v.kind_name() != "call_expression" {
                return None;
            }
            let f = v.field("function")?;
            let name = last_name(self.text(f.field("name").unwrap_or(f)));
            let args: Vec<Node<'t>> = named_children(v.field("arguments")?).collect();
            let first = *args.first()?;
            if let Some(base) = name.strip_suffix("_like") {
                return ALLOC_CALLS
                    .contains(&base)
                    .then(|| self.tensor_numel(launch, first, depth + 1));
            }
            if !ALLOC_CALLS.contains(&name) || method_name(v, self.source).is_some() {
                return None;
            }
            match first.kind_name() {
                "initializer_list" => {
                    let mut p = Poly::constant(1);
                    for s in named_children(first) {
                        p = p.mul(&self.host_poly_depth(launch, s, depth + 1)?)?;
                    }
                    Some(p)
                }
                _ => self.host_poly_depth(launch, first, depth + 1),
            }
        })();
        alloc.unwrap_or_else(fallback)
    }

    /// The number of elements of the buffer `launch` passes for pointer parameter `param` of
    /// kernel `k`, when the launching function shows it.
    pub fn launch_extent(&self, launch: &Launch<'t>, k: &Kernel<'t>, param: usize) -> Option<Poly> {
        let p = k.params.get(param)?;
        if !p.pointer {
            return None;
        }
        let arg = *launch.args.get(param)?;
        let elem = p
            .node
            .field("type")
            .map(|t| self.text(t))
            .and_then(sizeof_scalar);
        self.buffer_extent(launch, arg, elem, 0)
    }

    fn buffer_extent(
        &self,
        launch: &Launch<'t>,
        arg: Node<'t>,
        elem: Option<i128>,
        depth: usize,
    ) -> Option<Poly> {
        if depth > MAX_DEPTH {
            return None;
        }
        let a = peel_pointer(arg, self.source);
        if let Some(m) = method_name(a, self.source) {
            if !matches!(
                m,
                "data_ptr" | "data" | "mutable_data_ptr" | "const_data_ptr"
            ) {
                return None;
            }
            let obj = a.field("function")?.field("argument")?;
            return Some(self.tensor_numel(launch, obj, depth + 1));
        }
        if a.kind_name() != "identifier" {
            return None;
        }
        let name = self.text(a);
        if let [v] = self.host_values_at(launch, name).as_slice() {
            return self.buffer_extent(launch, *v, elem, depth + 1);
        }
        // `cudaMalloc(&p, bytes)` in the launching function, before the launch.
        let func = self.enclosing_function(launch.node)?;
        let (fs, at) = (func.node.start_byte(), launch.node.start_byte());
        let mut found = None;
        for c in &self.allocations_within(fs, at) {
            let f = c.field("function")?;
            if !matches!(
                self.text(f),
                "cudaMalloc" | "cudaMallocManaged" | "cudaMallocAsync"
            ) {
                continue;
            }
            let args: Vec<Node<'t>> = named_children(c.field("arguments")?).collect();
            let target = compact(self.text(*args.first()?));
            if !(target.ends_with(&format!("&{name}")) || target.ends_with(&format!("&{name})"))) {
                continue;
            }
            if found.is_some() {
                return None;
            }
            let bytes = self.host_poly_depth(launch, *args.get(1)?, depth + 1)?;
            found = Some(bytes.div_exact(elem?)?);
        }
        found
    }

    /// `p` (over the kernel's atoms) as seen at `launch`: parameters replaced by the values the
    /// launch passes, block and grid sizes by the launch configuration.
    pub fn to_host(&self, launch: &Launch<'t>, k: &Kernel<'t>, p: &Poly) -> Option<Poly> {
        let mut cache: HashMap<String, Poly> = HashMap::default();
        for atom in p.atoms() {
            if cache.contains_key(atom) {
                continue;
            }
            let v = if let Some(i) = k.params.iter().position(|q| q.name == atom) {
                self.host_poly(launch, *launch.args.get(i)?)?
            } else if let Some(axis) = atom.strip_prefix("blockDim.") {
                self.config_axis(launch, 1, axis)?
            } else if let Some(axis) = atom.strip_prefix("gridDim.") {
                self.config_axis(launch, 0, axis)?
            } else {
                return None;
            };
            cache.insert(atom.to_string(), v);
        }
        p.substitute(&|a| cache.get(a).cloned())
    }

    /// One axis of a launch's grid (`which` = 0) or block (1).
    fn config_axis(&self, launch: &Launch<'t>, which: usize, axis: &str) -> Option<Poly> {
        let i = match axis {
            "x" => 0,
            "y" => 1,
            _ => 2,
        };
        if let Some(d) = self.launch_dims(launch, which) {
            return Some(Poly::constant(d[i]));
        }
        let e = peel(*launch.config.get(which)?);
        (i == 0 && !matches!(e.kind_name(), "call_expression" | "initializer_list"))
            .then(|| self.host_poly(launch, e))
            .flatten()
    }

    /// [`CudaModel::launch_ranges_of`] of `k`, computed once per kernel.
    pub fn param_launch_ranges(&self, k: &Kernel<'t>) -> std::sync::Arc<ParamRanges<'t>> {
        k.launch_ranges
            .get_or_init(|| std::sync::Arc::new(self.launch_ranges_of(k)))
            .clone()
    }

    /// The numeric range of each scalar parameter of `k`: the constants its launches in this
    /// file pass (when every launch passes one), else the range of its type.
    fn launch_ranges_of(&self, k: &Kernel<'t>) -> ParamRanges<'t> {
        let function = &self.functions[k.function];
        let launches: Vec<&Launch<'t>> = self.launches_of(&function.name).collect();
        let mut out = HashMap::default();
        let mut known = Vec::new();
        for (i, p) in k.params.iter().enumerate() {
            if p.pointer {
                continue;
            }
            let mut r: Option<(i128, i128)> = None;
            for l in &launches {
                match l
                    .args
                    .get(i)
                    .and_then(|a| self.host_poly(l, *a)?.as_const())
                {
                    Some(v) => {
                        let e = r.get_or_insert((v, v));
                        *e = (e.0.min(v), e.1.max(v));
                    }
                    None => {
                        r = None;
                        break;
                    }
                }
            }
            if r.is_some() {
                known.push(p.name);
            }
            let ty = p.node.field("type").map(|t| self.text(t)).unwrap_or("");
            let ty = self.type_alias(ty.trim()).unwrap_or(ty);
            if let Some(r) = r.or_else(|| type_range(ty)) {
                out.insert(p.name, r);
            }
        }
        ParamRanges { ranges: out, known }
    }
}

/// The ranges of a kernel's scalar parameters (see [`CudaModel::param_launch_ranges`]).
#[derive(Debug, Default)]
pub struct ParamRanges<'t> {
    /// By parameter name: the constants its launches pass, else its type's range.
    pub ranges: HashMap<&'t str, (i128, i128)>,
    /// Parameters whose values the launches in this file give.
    pub known: Vec<&'t str>,
}

/// The values of an integer type.
pub fn type_range(ty: &str) -> Option<(i128, i128)> {
    let t = ty.trim().trim_start_matches("const ").trim();
    Some(match t {
        "int" | "int32_t" | "int32" | "signed" | "signed int" => {
            (i32::MIN as i128, i32::MAX as i128)
        }
        "unsigned" | "unsigned int" | "uint32_t" | "uint32" | "uint" => (0, u32::MAX as i128),
        "short" | "int16_t" => (i16::MIN as i128, i16::MAX as i128),
        "unsigned short" | "uint16_t" => (0, u16::MAX as i128),
        "int8_t" | "char" | "signed char" => (i8::MIN as i128, i8::MAX as i128),
        "uint8_t" | "unsigned char" => (0, u8::MAX as i128),
        "int64_t" | "long" | "long long" | "int64" | "ptrdiff_t" | "ssize_t" => {
            (i64::MIN as i128, i64::MAX as i128)
        }
        "size_t" | "uint64_t" | "unsigned long" | "unsigned long long" | "uint64" => {
            (0, u64::MAX as i128)
        }
        _ => return None,
    })
}
