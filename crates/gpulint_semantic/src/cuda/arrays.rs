//! Arrays declared in device code (`__shared__ float tile[32][33]`, `float acc[8]`) with their
//! extents folded where they are constants, and the calls made from device code (the device
//! call graph).

use super::{last_name, CudaModel, Function};
use gpulint_syntax::NodeExt;
use gpulint_syntax::{named_children, text};
use tree_sitter::Node;

/// Where an array declared in a device function lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArraySpace {
    /// An automatic array: registers, or per-thread local memory.
    Local,
    /// `__shared__`: one copy per block.
    Shared,
    /// `extern __shared__ T buf[]`: the dynamic shared memory of the launch.
    DynamicShared,
    /// `static`, `__constant__` or `__device__` storage: not per thread.
    Static,
}

/// An array declared inside a `__global__` or `__device__` function.
#[derive(Debug, Clone)]
pub struct ArrayDecl<'t> {
    /// Index into [`CudaModel::functions`].
    pub function: usize,
    /// The `declaration`.
    pub decl: Node<'t>,
    /// The `array_declarator` (its outermost one for several dimensions).
    pub declarator: Node<'t>,
    pub name: &'t str,
    /// The element type as written (`float`, `scalar_t`, `float4`).
    pub elem_type: &'t str,
    /// The extent expressions, outermost first; `None` for `[]`.
    pub extents: Vec<Option<Node<'t>>>,
    pub space: ArraySpace,
}

/// A call made from a device or kernel function: the device call graph.
#[derive(Debug, Clone, Copy)]
pub struct DeviceCall<'t> {
    /// The calling function, an index into [`CudaModel::functions`].
    pub caller: usize,
    /// The callee's name without namespace or template arguments.
    pub callee: &'t str,
    pub node: Node<'t>,
    /// The innermost guard that holds at the call.
    pub guard: Option<u32>,
}

/// The array declarators of a `declaration`, and `declaration`s that are not arrays give none.
pub(super) fn record_arrays<'t>(
    function: usize,
    decl: Node<'t>,
    source: &'t str,
    out: &mut Vec<ArrayDecl<'t>>,
) {
    let Some(ty) = decl.field("type") else {
        return;
    };
    let mut shared = false;
    let mut is_static = false;
    let mut is_extern = false;
    for c in named_children(decl) {
        if c.id() == ty.id() {
            continue;
        }
        if matches!(
            c.kind_name(),
            "storage_class_specifier" | "type_qualifier" | "attribute_specifier" | "identifier"
        ) || c.kind_name().ends_with("qualifier")
            || c.kind_name().ends_with("specifier")
        {
            for word in text(c, source).split(|ch: char| !(ch.is_alphanumeric() || ch == '_')) {
                match word {
                    "__shared__" => shared = true,
                    "static" | "__constant__" | "__device__" | "__managed__" | "thread_local" => {
                        is_static = true
                    }
                    "extern" => is_extern = true,
                    _ => {}
                }
            }
        }
    }
    let space = match (shared, is_extern, is_static) {
        (true, true, _) => ArraySpace::DynamicShared,
        (true, false, _) => ArraySpace::Shared,
        (false, _, true) | (false, true, _) => ArraySpace::Static,
        _ => ArraySpace::Local,
    };
    for d in named_children(decl) {
        let d = if d.kind_name() == "init_declarator" {
            match d.field("declarator") {
                Some(inner) => inner,
                None => continue,
            }
        } else {
            d
        };
        if d.kind_name() != "array_declarator" {
            continue;
        }
        // `float a[2][3]` nests as array_declarator(array_declarator(a, 2), 3).
        let mut extents = Vec::new();
        let mut cur = d;
        let mut name = None;
        for _ in 0..8 {
            extents.push(cur.field("size"));
            match cur.field("declarator") {
                Some(inner) if inner.kind_name() == "array_declarator" => cur = inner,
                Some(inner) if inner.kind_name() == "identifier" => {
                    name = Some(text(inner, source));
                    break;
                }
                _ => break,
            }
        }
        let Some(name) = name else {
            continue;
        };
        extents.reverse();
        out.push(ArrayDecl {
            function,
            decl,
            declarator: d,
            name,
            elem_type: text(ty, source),
            extents,
            space,
        });
    }
}

/// The callee of a call from device code, unless it is a launch or a builtin-looking name.
pub(super) fn device_callee<'t>(call: Node<'t>, source: &'t str) -> Option<&'t str> {
    if named_children(call).any(|c| c.kind_name() == "kernel_call_syntax") {
        return None;
    }
    let f = call.field("function")?;
    let name = match f.kind_name() {
        "identifier" | "qualified_identifier" => text(f, source),
        "template_function" => text(f.field("name")?, source),
        _ => return None,
    };
    Some(last_name(name))
}

impl<'t> CudaModel<'t> {
    /// Folds an integer expression inside `func`: template parameters known from the launches
    /// in this file count as constants. `None` when any part is unknown.
    pub fn eval_in_function(&self, func: &Function<'t>, expr: Node<'_>) -> Option<i128> {
        self.eval_fn_depth(func, expr, 0)
    }

    fn eval_fn_depth(&self, func: &Function<'t>, expr: Node<'_>, depth: usize) -> Option<i128> {
        if depth > 32 {
            return None;
        }
        let field = |f: &str| expr.field(f);
        match expr.kind_name() {
            "identifier" => self.constant_in(func, self.text(expr)),
            "parenthesized_expression" => self.eval_fn_depth(func, expr.named_child(0)?, depth + 1),
            "binary_expression" => {
                let l = self.eval_fn_depth(func, field("left")?, depth + 1)?;
                let r = self.eval_fn_depth(func, field("right")?, depth + 1)?;
                super::consts::c_binary(self.text(field("operator")?), l, r)
            }
            _ => self.eval(expr),
        }
    }

    /// The number of elements of a declared array, when every extent folds.
    pub fn array_elements(&self, a: &ArrayDecl<'t>) -> Option<i128> {
        let func = &self.functions[a.function];
        let mut n: i128 = 1;
        for e in &a.extents {
            let v = self.eval_in_function(func, (*e)?)?;
            if v <= 0 {
                return None;
            }
            n = n.checked_mul(v)?;
        }
        Some(n)
    }

    /// The size in bytes of a declared array, when its extents fold and its element type is a
    /// known scalar or vector type.
    pub fn array_bytes(&self, a: &ArrayDecl<'t>) -> Option<i128> {
        let elem = super::sizeof_scalar(a.elem_type)?;
        self.array_elements(a)?.checked_mul(elem)
    }

    /// Functions called by `name`'s definitions in this file (device code only).
    pub fn calls_from(&self, caller: usize) -> impl Iterator<Item = &DeviceCall<'t>> {
        self.lookups
            .calls_from
            .get(&caller)
            .into_iter()
            .flatten()
            .map(|&i| &self.device_calls[i])
    }

    /// The device-side (`__device__` or `__global__`) functions called `name`.
    pub fn device_functions_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = usize> + 'a {
        self.lookups
            .device_functions
            .get(name)
            .into_iter()
            .flatten()
            .copied()
    }
}

/// Ancestors searched for the loop that declares a counter.
const MAX_UP: usize = 64;

impl<'t> CudaModel<'t> {
    /// The range `[lo, hi]` an index expression can take at `expr`, from folded constants and
    /// the counters of enclosing `for` loops (`for (int k = 0; k < N; ++k)`). `None` when any
    /// part is unknown, when a counter is also changed in its loop body, or when a condition
    /// between the loop and the use mentions the counter (it may narrow the range).
    pub fn index_range(&self, func: &Function<'t>, expr: Node<'t>) -> Option<(i128, i128)> {
        self.range_depth(func, expr, 0)
    }

    fn range_depth(&self, func: &Function<'t>, e: Node<'t>, depth: usize) -> Option<(i128, i128)> {
        if depth > 16 {
            return None;
        }
        let field = |f: &str| e.field(f);
        match e.kind_name() {
            "parenthesized_expression" => self.range_depth(func, e.named_child(0)?, depth + 1),
            "identifier" => {
                if let Some(v) = self.eval_in_function(func, e) {
                    return Some((v, v));
                }
                self.counter_range(func, e)
                    .or_else(|| self.thread_local_range(func, e, depth))
            }
            // `threadIdx.x` and `blockDim.x`, from the block sizes of the launches.
            "field_expression" => {
                let axis = match self.text(field("field")?) {
                    "x" => 0,
                    "y" => 1,
                    "z" => 2,
                    _ => return None,
                };
                let block = self.block_range(func)?;
                match self.text(field("argument")?) {
                    "threadIdx" => Some((0, block.hi[axis] - 1)),
                    "blockDim" => Some((block.lo[axis], block.hi[axis])),
                    _ => None,
                }
            }
            "binary_expression" => {
                let op = self.text(field("operator")?);
                let (l0, l1) = self.range_depth(func, field("left")?, depth + 1)?;
                let (r0, r1) = self.range_depth(func, field("right")?, depth + 1)?;
                match op {
                    "+" => Some((l0.checked_add(r0)?, l1.checked_add(r1)?)),
                    "-" => Some((l0.checked_sub(r1)?, l1.checked_sub(r0)?)),
                    "*" if l0 >= 0 && r0 >= 0 => Some((l0.checked_mul(r0)?, l1.checked_mul(r1)?)),
                    "/" if l0 >= 0 && r0 > 0 => Some((l0 / r1, l1 / r0)),
                    "%" if l0 >= 0 && r0 > 0 => Some((0, l1.min(r1 - 1))),
                    ">>" if l0 >= 0 && r0 == r1 && (0..64).contains(&r0) => {
                        Some((l0 >> r0, l1 >> r0))
                    }
                    "&" if l0 >= 0 && r0 == r1 && r0 >= 0 => Some((0, l1.min(r0))),
                    _ => None,
                }
            }
            _ => self.eval_in_function(func, e).map(|v| (v, v)),
        }
    }

    /// The range of a loop counter at a use inside its loop.
    fn counter_range(&self, func: &Function<'t>, id: Node<'t>) -> Option<(i128, i128)> {
        let name = self.text(id);
        let mut cur = id;
        for _ in 0..MAX_UP {
            let parent = self.parent(cur)?;
            match parent.kind_name() {
                "if_statement"
                | "conditional_expression"
                | "while_statement"
                | "do_statement"
                | "switch_statement" => {
                    let cond = parent.field("condition")?;
                    if cond.id() != cur.id() && mentions(cond, name, self.source) {
                        return None;
                    }
                }
                "binary_expression" => {
                    // `k < 8 && a[k]`
                    let left = parent.field("left")?;
                    if left.id() != cur.id() && mentions(left, name, self.source) {
                        return None;
                    }
                }
                "for_statement" => {
                    let body = parent.field("body")?;
                    if body.id() == cur.id() {
                        if let Some(r) = self.loop_range(func, parent, name) {
                            return Some(r);
                        }
                    }
                    let cond = parent.field("condition");
                    if cond.is_some_and(|c| mentions(c, name, self.source)) {
                        return None;
                    }
                }
                "function_definition" | "lambda_expression" => return None,
                _ => {}
            }
            cur = parent;
        }
        None
    }

    /// `for (int k = a; k < b; ++k)` (or `<=`, `k += c` with c > 0) declaring `name`.
    fn loop_range(&self, func: &Function<'t>, f: Node<'t>, name: &str) -> Option<(i128, i128)> {
        let (var, start) = loop_start(f)?;
        if self.text(var) != name {
            return None;
        }
        let lo = self.eval_in_function(func, start)?;
        let cond = f.field("condition")?;
        if cond.kind_name() != "binary_expression" || self.text(cond.field("left")?) != name {
            return None;
        }
        let bound = self.eval_in_function(func, cond.field("right")?)?;
        let hi = match self.text(cond.field("operator")?) {
            "<" => bound - 1,
            "<=" => bound,
            _ => return None,
        };
        let update = crate::cuda::guards::compact(self.text(f.field("update")?));
        let step = if update == format!("++{name}") || update == format!("{name}++") {
            1
        } else {
            update
                .strip_prefix(&format!("{name}+="))
                .and_then(|c| super::parse_c_int(c).or_else(|| self.constant_in(func, c)))
                .filter(|c| *c > 0)?
        };
        if lo > hi {
            return None;
        }
        // The last value the counter takes: `for (j = 0; j < 8; j += 4)` ends at 4.
        let hi = lo + (hi - lo) / step * step;
        // Changed in the body, or left early (`if (k == N) break;`): unknown.
        if self.body_leaves_or_assigns(f.field("body")?, &[name]) {
            return None;
        }
        Some((lo, hi))
    }

    /// Whether a loop body may leave its loop or skip the rest of an iteration (`break`,
    /// `continue`, `return`, `goto`), or assigns one of `names`: then the values a counter
    /// takes are not those its header shows.
    pub(super) fn body_leaves_or_assigns(&self, body: Node<'t>, names: &[&str]) -> bool {
        gpulint_syntax::descendants(body).any(|n| {
            if matches!(
                n.kind_name(),
                "break_statement" | "continue_statement" | "return_statement" | "goto_statement"
            ) {
                return true;
            }
            let target = match n.kind_name() {
                "assignment_expression" => n.field("left"),
                "update_expression" => n.field("argument"),
                _ => None,
            };
            target.is_some_and(|t| names.contains(&self.text(t)))
        })
    }
}

/// The counter of a `for` loop and its start, from the initializer: `int k = s` or `k = s`.
pub(super) fn loop_start(f: Node<'_>) -> Option<(Node<'_>, Node<'_>)> {
    let init = f.field("initializer")?;
    let d = gpulint_syntax::descendants(init)
        .find(|n| matches!(n.kind_name(), "init_declarator" | "assignment_expression"))?;
    match d.kind_name() {
        "init_declarator" => Some((d.field("declarator")?, d.field("value")?)),
        _ => Some((d.field("left")?, d.field("right")?)),
    }
}

/// The block sizes a kernel runs with, per axis: from every launch of it in this file when all
/// fold (`from_launch`), else from `__launch_bounds__(N)` (an upper bound only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockRange {
    pub lo: [i128; 3],
    pub hi: [i128; 3],
    pub from_launch: bool,
}

impl<'t> CudaModel<'t> {
    /// The block sizes `func` (a kernel) is launched with; `None` when not known.
    pub fn block_range(&self, func: &Function<'t>) -> Option<BlockRange> {
        if !func.space.global {
            return None;
        }
        let mut out: Option<BlockRange> = None;
        for l in self.launches_of(&func.name) {
            let dims = self.launch_dims(l, 1)?;
            if dims.iter().any(|d| *d <= 0) {
                return None;
            }
            let r = out.get_or_insert(BlockRange {
                lo: dims,
                hi: dims,
                from_launch: true,
            });
            for (a, d) in dims.iter().enumerate() {
                r.lo[a] = r.lo[a].min(*d);
                r.hi[a] = r.hi[a].max(*d);
            }
        }
        if out.is_some() {
            return out;
        }
        // `__global__ void __launch_bounds__(256) k(…)`
        let body = func.node.field("body")?;
        let head = &self.source[func.node.start_byte()..body.start_byte()];
        let args = &head[head.find("__launch_bounds__(")? + "__launch_bounds__(".len()..];
        let first = args.split([',', ')']).next()?.trim();
        let n = super::parse_c_int(first).or_else(|| self.constant_in(func, first))?;
        (n > 0).then_some(BlockRange {
            lo: [1; 3],
            hi: [n; 3],
            from_launch: false,
        })
    }

    /// The range of a kernel local defined once from thread coordinates (`int tid =
    /// threadIdx.x;`), when the kernel's block size is known and nothing else changes it.
    fn thread_local_range(
        &self,
        func: &Function<'t>,
        id: Node<'t>,
        depth: usize,
    ) -> Option<(i128, i128)> {
        self.block_range(func)?;
        let k = self.kernel_of(func)?;
        let name = self.text(id);
        let i = k.local(name)?;
        let [def] = k.defs[i].as_slice() else {
            return None;
        };
        if self.parent(*def)?.kind_name() != "init_declarator" || def.start_byte() > id.start_byte()
        {
            return None;
        }
        // `tid++`, `++tid`: changed without an assignment.
        let body = func.node.field("body")?;
        let updated = gpulint_syntax::descendants(body).any(|n| {
            n.kind_name() == "update_expression"
                && n.field("argument").is_some_and(|a| self.text(a) == name)
        });
        if updated {
            return None;
        }
        self.range_depth(func, *def, depth + 1)
    }

    /// The names through which an index reads `threadIdx` or `blockDim`: those two and the
    /// kernel locals defined from them (`const int tid = threadIdx.x;`), following definitions
    /// (not the conditions they sit under). Empty when the index does not read them.
    pub fn thread_names(&self, func: &Function<'t>, index: Node<'t>) -> Vec<&'t str> {
        let k = self.kernel_of(func);
        let mut names: Vec<&'t str> = Vec::new();
        let mut reads = false;
        let mut stack: Vec<(Node<'t>, usize)> = vec![(index, 0)];
        let mut seen: Vec<usize> = Vec::new();
        while let Some((e, depth)) = stack.pop() {
            for id in super::kernel::identifiers(e, self.source) {
                if matches!(id, "threadIdx" | "blockDim") {
                    reads = true;
                    continue;
                }
                let Some((k, i)) = k.and_then(|k| Some((k, k.local(id)?))) else {
                    continue;
                };
                if seen.contains(&i) || depth >= 8 {
                    continue;
                }
                seen.push(i);
                if k.flags[i].has(super::Flags::TID | super::Flags::BDIM) {
                    names.push(k.locals[i]);
                    stack.extend(k.defs[i].iter().map(|d| (*d, depth + 1)));
                }
            }
        }
        if !reads {
            return Vec::new();
        }
        names.extend(["threadIdx", "blockDim"]);
        names
    }

    /// Is a subscript under a guard or an early exit that mentions one of `names` (from
    /// [`Self::thread_names`]: `if (threadIdx.x < 256)`, `if (tid >= 256) return;`)? `base` is
    /// the innermost subscript of `a[i][j]`.
    pub fn thread_index_guarded(
        &self,
        func: &Function<'t>,
        base: Node<'t>,
        names: &[&str],
    ) -> bool {
        let Some(k) = self.kernel_of(func) else {
            return true;
        };
        let Some(access) = k.accesses.iter().find(|a| a.node.id() == base.id()) else {
            return true;
        };
        self.guard_chain(access.guard).take(256).any(|g| {
            let tokens = super::guards::name_tokens(self.text(g.cond));
            names.iter().any(|n| tokens.contains(n))
        })
    }
}

/// Does `expr` mention the identifier `name`?
fn mentions(expr: Node<'_>, name: &str, source: &str) -> bool {
    gpulint_syntax::descendants(expr)
        .any(|n| n.kind_name() == "identifier" && text(n, source) == name)
}
