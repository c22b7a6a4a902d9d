//! The CUDA/C++ semantic model: the function table with execution spaces, integer constants,
//! kernel launches, and per kernel the thread-index derivation of its variables, its accesses
//! to global memory and the guards that dominate each of them.
//!
//! Everything is collected from the enter/leave events of the checker's one walk; `finish`
//! then computes the per-kernel facts once, so a rule never walks a kernel again.

mod arrays;
mod builder;
mod consts;
pub mod glue;
pub mod glue_project;
pub mod glue_python;
pub mod guards;
pub mod headers;
pub mod interval;
pub mod kernel;
pub mod launch;
pub mod narrow;
mod nesting;
pub mod race;
mod rounded;
pub mod steps;
pub mod tf_op;

pub use arrays::{ArrayDecl, ArraySpace, DeviceCall};
pub use builder::CudaBuilder;
pub use consts::{parse_c_int, sizeof_scalar};
pub use guards::{Bound, Guard, GuardKind};
pub use kernel::{Access, Flags, Kernel, Param};
pub use launch::GridKind;
pub use rounded::RoundedOverread;

use crate::hash::HashMap;
use consts::ConstDef;
use gpulint_source::Span;
use gpulint_syntax::text;
use gpulint_syntax::NodeExt;
use std::cell::RefCell;
use tree_sitter::Node;

/// Where a function runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExecSpace {
    pub global: bool,
    pub device: bool,
    pub host: bool,
}

/// A function definition (never a loop macro that the grammar misread as one).
#[derive(Debug, Clone)]
pub struct Function<'t> {
    pub node: Node<'t>,
    pub name: String,
    pub space: ExecSpace,
    /// Template parameters with their value where known: from every launch in this file
    /// agreeing, or from the default.
    pub template_params: Vec<(&'t str, Option<i128>)>,
}

/// A kernel launch `name<<<grid, block, smem, stream>>>(args)`.
#[derive(Debug, Clone)]
pub struct Launch<'t> {
    pub node: Node<'t>,
    /// The kernel's name without namespace or template arguments.
    pub kernel: &'t str,
    pub template_args: Vec<Node<'t>>,
    /// The `<<<…>>>` arguments: grid, block, shared bytes, stream.
    pub config: Vec<Node<'t>>,
    pub args: Vec<Node<'t>>,
}

/// Grid-stride loop macros known out of the box (extended by CU001's `loop-macros`). Their
/// arguments are `(var, bound)`, `(var, bound, type)` or `(var, bound, var2, bound2)`.
pub const LOOP_MACROS: &[&str] = &[
    "CUDA_1D_KERNEL_LOOP",
    "CUDA_1D_KERNEL_LOOP_T",
    "CUDA_KERNEL_LOOP",
    "CUDA_KERNEL_LOOP_TYPE",
    "CUDA_2D_KERNEL_LOOP",
    "GPU_1D_KERNEL_LOOP",
    "GPU_KERNEL_LOOP",
    "HIP_1D_KERNEL_LOOP",
    "HIP_KERNEL_LOOP",
    "MUSA_1D_KERNEL_LOOP",
    "MUSA_2D_KERNEL_LOOP",
    "KERNEL_LOOP",
    "CUDA_GRID_STRIDE_LOOP",
];

/// A block-wide barrier in a kernel, with the innermost guard that holds there.
#[derive(Debug, Clone, Copy)]
pub struct Barrier<'t> {
    /// Index into [`CudaModel::kernels`].
    pub kernel: usize,
    pub node: Node<'t>,
    pub guard: Option<u32>,
}

/// Everything rules ask about a C/C++/CUDA file.
pub struct CudaModel<'t> {
    pub source: &'t str,
    pub root: Node<'t>,
    pub functions: Vec<Function<'t>>,
    pub kernels: Vec<Kernel<'t>>,
    /// `__device__` functions with a body (not `__host__ __device__`): the same facts as a
    /// kernel's, for the checks of index arithmetic. Never launched; barriers not recorded.
    pub helpers: Vec<Kernel<'t>>,
    pub launches: Vec<Launch<'t>>,
    /// Every guard of every kernel; a guard's `prev` links to the one enclosing it.
    pub guards: Vec<Guard<'t>>,
    /// `TORCH_CHECK(n % 256 == 0)`-style checks: the launch grid may be exact.
    pub divisibility_checks: Vec<Node<'t>>,
    /// Allocations: `cudaMalloc`, `malloc`, `torch::empty`, `new_zeros`, …
    pub allocations: Vec<Node<'t>>,
    /// Arrays declared in `__global__` / `__device__` functions.
    pub arrays: Vec<ArrayDecl<'t>>,
    /// Calls made from `__global__` / `__device__` functions.
    pub device_calls: Vec<DeviceCall<'t>>,
    /// Subscripts `a[i]` in `__global__` / `__device__` functions: (function, node).
    pub subscripts: Vec<(usize, Node<'t>)>,
    /// Block-wide barriers (`__syncthreads()`) in kernels.
    pub barriers: Vec<Barrier<'t>>,
    constants: HashMap<&'t str, ConstDef<'t>>,
    /// `using index_t = uint32_t;`, `typedef int64_t idx_t;`: alias → type.
    aliases: HashMap<&'t str, &'t str>,
    /// Struct and class members: name → the types declared for it.
    fields: HashMap<&'t str, Vec<&'t str>>,
    /// Values of named constants already folded (`None`: not an integer constant).
    constant_cache: RefCell<HashMap<String, Option<i128>>>,
    loop_macros: Vec<String>,
    /// Definitions in host functions: (function, name) → values (`None`: declared without one).
    host_defs: HashMap<(usize, &'t str), Vec<HostDef<'t>>>,
    /// Torch op glue: tensor parameters, raw pointers, checks, dispatches, guards, bindings.
    pub glue: glue::Glue<'t>,
    /// The project headers this file includes: read the first time a rule asks about them,
    /// from the path [`CudaModel::read_headers`] gave (none: no headers).
    headers: std::cell::OnceCell<headers::Headers>,
    header_path: Option<std::path::PathBuf>,
    /// The byte ranges of `functions`, nested: finding the functions around a node costs
    /// their nesting, not the number of functions in the file.
    function_nesting: nesting::Nesting,
    /// Indexes into `launches` by kernel name, in order: the launches of one kernel without a
    /// scan of every launch of the file.
    launches_by_kernel: HashMap<&'t str, Vec<usize>>,
    /// Index into `kernels` of the first kernel with a function's name, and of the kernel of a
    /// function node (by node id).
    kernel_by_name: HashMap<String, usize>,
    kernel_by_node: HashMap<usize, usize>,
    /// The file's look-ups by name and by function, so that a question about one function or
    /// call costs what that function has, not a scan of the whole file (see [`Lookups`]).
    lookups: Lookups<'t>,
    /// Indexes into `guards` sorted by the condition's start byte: the guards inside one
    /// kernel without a scan of every guard of the file.
    guard_order: Vec<u32>,
    /// Indexes into `allocations` sorted by start byte.
    allocation_order: Vec<u32>,
    /// What the whole file shows about the size of its tensors, computed once.
    evidence: interval::FileEvidence,
    /// Byte offsets of the line ends, for line numbers in messages (built on first use).
    line_ends: std::cell::OnceCell<Vec<usize>>,
    /// The byte ranges of the launches, sorted (built on first use).
    launch_spans: std::cell::OnceCell<Vec<(usize, usize, usize)>>,
    /// Function-like macros of this file whose body retrieves the last error (built on first
    /// use).
    error_macros: std::cell::OnceCell<crate::hash::HashSet<String>>,
    /// The parent of each node of the tree (filled by the builder's walk).
    parents: std::cell::OnceCell<gpulint_syntax::Parents<'t>>,
    /// The statement-by-statement walks of device functions (see [`steps`]), done on demand.
    steps: RefCell<steps::StepCache>,
    /// The named children of blocks asked about, by the block's node id (see
    /// [`CudaModel::statements`]).
    statements: RefCell<gpulint_syntax::NamedSiblings<'t>>,
}

/// Indexes of the model's lists by name and by function (built by [`CudaModel::index`]).
#[derive(Default)]
struct Lookups<'t> {
    /// Indexes into `functions` of the device-side (`__device__` or `__global__`) functions
    /// of each name, in order.
    device_functions: HashMap<String, Vec<usize>>,
    /// Per function index: the first kernel and the first helper made of it (indexes into
    /// `kernels` and `helpers`).
    code: HashMap<usize, (Option<usize>, Option<usize>)>,
    /// Indexes into `device_calls` by callee name and by calling function, in order.
    calls_to: HashMap<&'t str, Vec<usize>>,
    calls_from: HashMap<usize, Vec<usize>>,
    /// Indexes into `arrays` by function, in order.
    arrays: HashMap<usize, Vec<usize>>,
}

/// A definition in host code: `dim3 grid(…)`, `grid.x = …`, or `dim3 grid;` (no value).
#[derive(Debug, Clone, Copy)]
struct HostDef<'t> {
    value: Option<Node<'t>>,
    /// The block it is visible in.
    scope: Span,
}

/// Does an argument list size something by twice an extent (`2 * n`, `n * 2`, `n << 1`)?
fn is_doubled(args: &str) -> bool {
    let compact: String = args.chars().filter(|c| !c.is_whitespace()).collect();
    let b = compact.as_bytes();
    compact.contains("<<1")
        || compact
            .match_indices("*2")
            .any(|(i, _)| !b.get(i + 2).is_some_and(u8::is_ascii_digit))
        || compact.match_indices("2*").any(|(i, _)| {
            i == 0 || !b[i - 1].is_ascii_alphanumeric() && b[i - 1] != b'_' && b[i - 1] != b'.'
        })
}

/// The arguments of a call (or a launch), in order; comments between them are named nodes too,
/// and are left out.
pub fn call_arguments<'t>(call: Node<'t>) -> Vec<Node<'t>> {
    call.field("arguments")
        .map(|a| {
            gpulint_syntax::named_children(a)
                .filter(|c| c.kind_name() != "comment")
                .collect()
        })
        .unwrap_or_default()
}

/// `ns::name` → `name`.
pub fn last_name(s: &str) -> &str {
    s.rsplit("::").next().unwrap_or(s).trim()
}

/// The `__global__` / `__device__` / `__host__` qualifiers of a function definition, also when
/// spelled through a specifier macro (`CUTLASS_DEVICE`, `C10_HOST_DEVICE`, `DS_D_INLINE`).
pub fn exec_space(func: Node<'_>, source: &str) -> ExecSpace {
    let mut space = ExecSpace::default();
    let mut cursor = func.walk();
    // `static void CUTLASS_DEVICE f(…) {`: the parser closes the specifiers as a declaration of
    // their own (with a missing `;`) and the definition starts at the name.
    let split = func
        .prev_sibling()
        .filter(|p| {
            func.field("type").is_none()
                && matches!(p.kind_name(), "field_declaration" | "declaration")
                && p.has_error()
                && source
                    .get(p.end_byte()..func.start_byte())
                    .is_some_and(|gap| gap.trim().is_empty())
        })
        .into_iter();
    for c in split.chain(func.children(&mut cursor)) {
        if c.kind_name() == "function_declarator" || c.kind_name() == "compound_statement" {
            break;
        }
        // A specifier macro rewritten for the second parse (`CUTLASS_DEVICE` read as
        // `__device__` padded with spaces) gives a node over the first bytes of the macro only:
        // the word is read to its end in the source.
        let bytes = source.as_bytes();
        let mut end = c.end_byte();
        while end < bytes.len() && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_') {
            end += 1;
        }
        let t = source.get(c.start_byte()..end).unwrap_or("");
        for word in t.split(|ch: char| !(ch.is_alphanumeric() || ch == '_')) {
            match word {
                "__global__" => space.global = true,
                "__device__" => space.device = true,
                "__host__" => space.host = true,
                _ => {
                    if let Some((g, d, h)) = gpulint_syntax::cuda_retry::specifier_macro_space(word)
                    {
                        space.global |= g;
                        space.device |= d;
                        space.host |= h;
                    }
                }
            }
        }
    }
    space
}

/// The name of a function definition (`foo`, `ns::foo` → `foo`, template-id → its name).
pub fn function_name<'s>(func: Node<'_>, source: &'s str) -> Option<&'s str> {
    let mut decl = func.field("declarator")?;
    // Peel pointer/reference declarators down to the function declarator.
    for _ in 0..8 {
        if decl.kind_name() == "function_declarator" {
            break;
        }
        decl = decl.field("declarator").or_else(|| decl.named_child(0))?;
    }
    let mut name = decl.field("declarator")?;
    for _ in 0..8 {
        match name.kind_name() {
            "qualified_identifier" => name = name.field("name")?,
            "template_function" => name = name.field("name")?,
            _ => break,
        }
    }
    Some(text(name, source))
}

impl<'t> CudaModel<'t> {
    pub fn text(&self, node: Node<'_>) -> &'t str {
        text(node, self.source)
    }

    /// Kernels (`__global__` functions).
    /// The parent of `node`, as `Node::parent` gives it, from a table built once per file:
    /// `Node::parent` descends from the root on every call (see [`gpulint_syntax::Parents`]).
    pub fn parent(&self, node: Node<'_>) -> Option<Node<'t>> {
        self.parents().parent(node)
    }

    /// The parent table of the tree (recorded by the builder during the walk that builds the
    /// model).
    pub fn parents(&self) -> &gpulint_syntax::Parents<'t> {
        self.parents
            .get_or_init(|| gpulint_syntax::Parents::of([self.root]))
    }

    /// The named children of `block` (the statements of a `{ … }`), listed the first time
    /// they are asked for: a question about the statements before one of them then costs a
    /// binary search, not a walk of the block from its start (which, asked for every
    /// statement of a long block, grows with the square of its length).
    pub(crate) fn statements(&self, block: Node<'t>) -> std::rc::Rc<[Node<'t>]> {
        self.statements.borrow_mut().of(block)
    }

    pub fn kernel_functions(&self) -> impl Iterator<Item = &Function<'t>> {
        self.functions.iter().filter(|f| f.space.global)
    }

    /// The function of a kernel.
    pub fn function(&self, kernel: &Kernel<'t>) -> &Function<'t> {
        &self.functions[kernel.function]
    }

    /// The function definition that contains `node` (a loop macro's block belongs to the
    /// function around it).
    pub fn enclosing_function(&self, node: Node<'_>) -> Option<&Function<'t>> {
        // The smallest holder; among holders of one size, the first in `functions`.
        self.function_nesting
            .innermost(node.start_byte(), node.end_byte())
            .map(|i| &self.functions[i])
    }

    /// Indexes of the functions whose byte range holds `node`, innermost first.
    pub fn functions_around(&self, node: Node<'_>) -> impl Iterator<Item = usize> + use<'_, 't> {
        self.function_nesting
            .holders(node.start_byte(), node.end_byte())
    }

    /// Launches of the kernel called `name` in this file.
    pub fn launches_of<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Launch<'t>> + 'a {
        self.launches_by_kernel
            .get(name)
            .into_iter()
            .flatten()
            .map(|&i| &self.launches[i])
    }

    /// The kernel a launch starts: the first kernel of this file with its name.
    pub fn launched_kernel(&self, launch: &Launch<'t>) -> Option<&Kernel<'t>> {
        self.kernel_by_name
            .get(launch.kernel)
            .map(|&i| &self.kernels[i])
    }

    /// The kernel of a function (the first kernel whose node is the function's).
    pub fn kernel_of(&self, func: &Function<'t>) -> Option<&Kernel<'t>> {
        self.kernel_by_node
            .get(&func.node.id())
            .map(|&i| &self.kernels[i])
    }

    /// The first kernel made of function `function` (an index into `functions`).
    pub fn kernel_of_function(&self, function: usize) -> Option<&Kernel<'t>> {
        let (k, _) = self.lookups.code.get(&function)?;
        k.map(|k| &self.kernels[k])
    }

    /// The first helper (a `__device__` function with a body) made of function `function`.
    pub fn helper_of_function(&self, function: usize) -> Option<&Kernel<'t>> {
        let (_, h) = self.lookups.code.get(&function)?;
        h.map(|h| &self.helpers[h])
    }

    /// The facts of function `function`: its kernel, or else its helper.
    pub fn code_of_function(&self, function: usize) -> Option<&Kernel<'t>> {
        self.kernel_of_function(function)
            .or_else(|| self.helper_of_function(function))
    }

    /// The device calls of callee `name` (without namespace or template arguments), in the
    /// order of `device_calls`.
    pub fn calls_to<'a>(&'a self, name: &str) -> impl Iterator<Item = &'a DeviceCall<'t>> + 'a {
        self.lookups
            .calls_to
            .get(name)
            .into_iter()
            .flatten()
            .map(|&i| &self.device_calls[i])
    }

    /// The arrays declared in function `function`, in the order of `arrays`.
    pub fn arrays_of(&self, function: usize) -> impl Iterator<Item = &ArrayDecl<'t>> + '_ {
        self.lookups
            .arrays
            .get(&function)
            .into_iter()
            .flatten()
            .map(|&i| &self.arrays[i])
    }

    /// Indexes of the guards whose condition lies inside kernel `k`'s bytes, in the order of
    /// `guards`.
    pub fn guards_in(&self, k: &Kernel<'t>) -> Vec<usize> {
        let (ks, ke) = (k.node.start_byte(), k.node.end_byte());
        let from = self
            .guard_order
            .partition_point(|&g| self.guards[g as usize].cond.start_byte() < ks);
        let mut out: Vec<usize> = self.guard_order[from..]
            .iter()
            .map(|&g| g as usize)
            .take_while(|&g| self.guards[g].cond.start_byte() <= ke)
            .filter(|&g| self.guards[g].cond.end_byte() <= ke)
            .collect();
        out.sort_unstable();
        out
    }

    /// The allocations that lie within bytes `from..to`, in the order of `allocations`.
    pub fn allocations_within(&self, from: usize, to: usize) -> Vec<Node<'t>> {
        let first = self
            .allocation_order
            .partition_point(|&a| self.allocations[a as usize].start_byte() < from);
        let mut out: Vec<usize> = self.allocation_order[first..]
            .iter()
            .map(|&a| a as usize)
            .take_while(|&a| self.allocations[a].start_byte() <= to)
            .filter(|&a| self.allocations[a].end_byte() <= to)
            .collect();
        out.sort_unstable();
        out.into_iter().map(|a| self.allocations[a]).collect()
    }

    /// The 1-based line of byte `offset`.
    pub fn line_of(&self, offset: usize) -> usize {
        let ends = self.line_ends.get_or_init(|| {
            self.source
                .bytes()
                .enumerate()
                .filter(|(_, b)| *b == b'\n')
                .map(|(i, _)| i)
                .collect()
        });
        ends.partition_point(|&e| e < offset) + 1
    }

    /// Builds the look-up indexes of launches, kernels and guards (after `kernels` is set).
    pub(crate) fn index(&mut self) {
        self.launches_by_kernel.clear();
        for (i, l) in self.launches.iter().enumerate() {
            self.launches_by_kernel.entry(l.kernel).or_default().push(i);
        }
        self.kernel_by_name.clear();
        self.kernel_by_node.clear();
        for (i, k) in self.kernels.iter().enumerate() {
            self.kernel_by_name
                .entry(self.functions[k.function].name.clone())
                .or_insert(i);
            self.kernel_by_node.entry(k.node.id()).or_insert(i);
        }
        let mut l = Lookups::default();
        for (i, f) in self.functions.iter().enumerate() {
            if f.space.device || f.space.global {
                l.device_functions
                    .entry(f.name.clone())
                    .or_default()
                    .push(i);
            }
        }
        for (i, k) in self.kernels.iter().enumerate() {
            l.code.entry(k.function).or_default().0.get_or_insert(i);
        }
        for (i, h) in self.helpers.iter().enumerate() {
            l.code.entry(h.function).or_default().1.get_or_insert(i);
        }
        for (i, c) in self.device_calls.iter().enumerate() {
            l.calls_to.entry(c.callee).or_default().push(i);
            l.calls_from.entry(c.caller).or_default().push(i);
        }
        for (i, a) in self.arrays.iter().enumerate() {
            l.arrays.entry(a.function).or_default().push(i);
        }
        self.lookups = l;
        let mut order: Vec<u32> = (0..self.guards.len() as u32).collect();
        order.sort_by_key(|&g| (self.guards[g as usize].cond.start_byte(), g));
        self.guard_order = order;
        let mut order: Vec<u32> = (0..self.allocations.len() as u32).collect();
        order.sort_by_key(|&a| (self.allocations[a as usize].start_byte(), a));
        self.allocation_order = order;
    }

    /// The guards that hold at an access whose innermost guard is `top`, innermost first.
    pub fn guard_chain(&self, top: Option<u32>) -> impl Iterator<Item = &Guard<'t>> {
        let mut next = top;
        std::iter::from_fn(move || {
            let g = self.guards.get(next? as usize)?;
            next = g.prev;
            Some(g)
        })
    }

    /// Allocations sized by a doubled extent (`empty({2 * n})`, `n * 2`): concatenation buffers.
    pub fn doubled_allocations(&self) -> impl Iterator<Item = Node<'t>> + '_ {
        self.allocations.iter().copied().filter(|a| {
            a.field("arguments")
                .is_some_and(|args| is_doubled(self.text(args)))
        })
    }

    /// Is a buffer allocated with a size computed from this launch's grid (`grid.x * block.x`)?
    /// Then it holds one element per thread.
    pub fn allocation_sized_by_grid(&self, launch: &Launch<'t>) -> bool {
        let Some(grid) = launch.config.first() else {
            return false;
        };
        let name_of = |e: Node<'t>| {
            let e = kernel::peel(e);
            match e.kind_name() {
                "identifier" => Some(self.text(e)),
                "field_expression" => e.field("argument").map(|a| self.text(a)),
                _ => None,
            }
        };
        let (Some(grid), Some(block)) = (
            name_of(*grid),
            launch.config.get(1).and_then(|b| name_of(*b)),
        ) else {
            return false;
        };
        self.allocations.iter().any(|a| {
            a.field("arguments").is_some_and(|args| {
                let names = guards::name_tokens(self.text(args));
                names.contains(&grid) && names.contains(&block)
            })
        })
    }

    /// Is `name` a grid-stride loop macro (built in, or from CU001's `loop-macros`)?
    pub fn is_loop_macro(&self, name: &str) -> bool {
        self.loop_macros.iter().any(|m| m == name)
    }

    fn resolve_template_values(&mut self) {
        for i in 0..self.functions.len() {
            if self.functions[i].template_params.is_empty() {
                continue;
            }
            let name = self.functions[i].name.clone();
            let params = self.functions[i].template_params.clone();
            let launches: Vec<Vec<Node<'t>>> = self
                .launches_of(&name)
                .filter(|l| !l.template_args.is_empty())
                .map(|l| l.template_args.clone())
                .collect();
            let resolved = params
                .iter()
                .enumerate()
                .map(|(pos, (pname, default))| {
                    let mut value: Option<Option<i128>> = None;
                    for args in &launches {
                        let v = args.get(pos).and_then(|a| self.eval(*a)).or(*default);
                        match value {
                            None => value = Some(v),
                            Some(prev) if prev != v => value = Some(None),
                            _ => {}
                        }
                    }
                    (*pname, value.unwrap_or(*default))
                })
                .collect();
            self.functions[i].template_params = resolved;
        }
    }
}

#[cfg(test)]
mod tests;
