//! Per-kernel facts: parameters, local variables and how they derive from `threadIdx`,
//! `blockIdx`, `blockDim` and `gridDim`, pointers into global memory, and the accesses made
//! through them.

mod build;
mod dataflow;
mod flags;
mod syntax;

pub(super) use build::KernelBuild;
pub use flags::Flags;
pub use syntax::{declarator_name, may_name_alias, peel, peel_pointer};

use super::CudaModel;
use crate::hash::HashMap;
use gpulint_syntax::text;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

/// ERROR/MISSING nodes tolerated in a kernel by [`Kernel::parse_damaged`].
const MAX_PARSE_ERRORS: usize = 3;
/// The largest ERROR node tolerated.
const MAX_ERROR_BYTES: usize = 160;

/// A kernel parameter.
#[derive(Debug, Clone)]
pub struct Param<'t> {
    pub name: &'t str,
    /// A raw pointer or array parameter: it points into global memory.
    pub pointer: bool,
    /// A scalar that can carry a size: an integer, or a struct passed by value.
    pub size_like: bool,
    /// A PyTorch tensor accessor (`PackedTensorAccessor32<T, N>`, `TensorAccessor`, also
    /// through a `#define` or type alias): indexed per dimension, `acc[n][c][h][w]`.
    pub accessor: bool,
    pub node: Node<'t>,
}

/// A read or write through a pointer: `p[i]`, `*p`, `*(p + i)`, `atomicAdd(p + i, v)`.
#[derive(Debug, Clone)]
pub struct Access<'t> {
    /// The access expression (the subscript, the dereference, the `p + i` argument).
    pub node: Node<'t>,
    /// The pointer's name.
    pub base: &'t str,
    /// The index or offset expression, if any.
    pub index: Option<Node<'t>>,
    /// The innermost guard that holds here (see [`CudaModel::guard_chain`]).
    pub guard: Option<u32>,
    /// The pointer is a kernel parameter or a local pointer derived from one.
    pub global: bool,
    /// Offsets of the local pointer this access goes through (`q = p + i; q[0]` → `i`).
    pub alias_offsets: Vec<Node<'t>>,
    /// One dimension's subscript of a tensor-accessor parameter (`acc[n][c][h][w]` gives one
    /// access per index, each with its own `index`; `node` is the whole subscript chain).
    /// Such accesses are not `global`: their extents are per dimension, not a buffer length.
    pub accessor: bool,
}

/// What is known about one kernel, computed once per file.
#[derive(Debug)]
pub struct Kernel<'t> {
    /// Index into [`CudaModel::functions`].
    pub function: usize,
    /// The ranges of its scalar parameters from its launches (see
    /// [`CudaModel::param_launch_ranges`]), computed on first use.
    pub(crate) launch_ranges: std::cell::OnceCell<std::sync::Arc<super::interval::ParamRanges<'t>>>,
    pub node: Node<'t>,
    pub params: Vec<Param<'t>>,
    /// Its `x += …` and `x -= …` assignments, in document order, among its first 16,384
    /// syntax nodes (the in-place pointer advances are found among them).
    pub(crate) advances: Vec<Node<'t>>,
    /// Local variables (and assigned names) in order of first definition.
    pub locals: Vec<&'t str>,
    local_index: HashMap<&'t str, usize>,
    /// Per local: its definitions (initialisers and assigned values).
    pub defs: Vec<Vec<Node<'t>>>,
    /// Per local and definition: the innermost guard holding at it.
    pub def_guards: Vec<Vec<Option<u32>>>,
    /// Per local and definition: `init` for an initialiser, the operator of an assignment
    /// (`=`, `+=`, `-=`, …), `in` for a range-based `for`.
    pub def_ops: Vec<Vec<&'t str>>,
    /// Per local: its `++`/`--` updates.
    pub updates: Vec<Vec<Node<'t>>>,
    /// The declared type of each local name (its first declaration).
    pub types: HashMap<&'t str, &'t str>,
    /// Per local: how it derives from the thread coordinates.
    pub flags: Vec<Flags>,
    /// Per local: the locals it is computed from, transitively, itself included.
    closure: Vec<Vec<u64>>,
    /// Per local: computed from `blockIdx` (through any clamping).
    block_dependent: Vec<bool>,
    /// Per local: it points into global memory, and the offsets it was built with.
    pointer_offsets: Vec<Option<Vec<Node<'t>>>>,
    pub accesses: Vec<Access<'t>>,
    /// The kernel is too large to analyse (thousands of locals): rules skip it.
    pub too_large: bool,
}

/// A set of locals.
pub type LocalSet = Vec<u64>;

impl<'t> Kernel<'t> {
    /// The local called `name`.
    pub fn local(&self, name: &str) -> Option<usize> {
        self.local_index.get(name).copied()
    }

    /// Is the kernel's parse too damaged to reason about its arithmetic? A few small ERROR
    /// or MISSING nodes (an unknown macro, a dependent-name call the grammar misreads) leave
    /// the rest of the body intact; the parts they cover are skipped by the analyses
    /// ([`gpulint_syntax::NodeExt::has_error`] on the node at hand).
    pub fn parse_damaged(&self) -> bool {
        if !self.node.has_error() {
            return false;
        }
        let mut errors = 0;
        for n in gpulint_syntax::descendants(self.node) {
            if n.is_error() || n.is_missing() {
                errors += 1;
                if errors > MAX_PARSE_ERRORS || n.end_byte() - n.start_byte() > MAX_ERROR_BYTES {
                    return true;
                }
            }
        }
        false
    }

    pub fn param(&self, name: &str) -> Option<&Param<'t>> {
        self.params.iter().find(|p| p.name == name)
    }

    /// Is `expr` computed from `blockIdx`, directly or through locals (clamped or not)?
    pub fn block_dependent(&self, expr: Node<'_>, source: &str) -> bool {
        let names = identifiers(expr, source);
        names.contains(&"blockIdx")
            || names
                .iter()
                .any(|n| self.local(n).is_some_and(|i| self.block_dependent[i]))
    }

    /// The locals `expr` is computed from, transitively, with the locals it names.
    pub fn closure_of(&self, expr: Node<'_>, source: &str) -> LocalSet {
        self.closure_of_names(identifiers(expr, source))
    }

    /// The transitive closure of the named locals.
    pub fn closure_of_names<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> LocalSet {
        let mut set = vec![0u64; self.locals.len().div_ceil(64)];
        for name in names {
            if let Some(i) = self.local(name) {
                for (s, c) in set.iter_mut().zip(&self.closure[i]) {
                    *s |= c;
                }
            }
        }
        set
    }

    /// The axes of `blockIdx` that `exprs` read, directly or through the definitions of the
    /// locals they are computed from.
    pub fn block_axes(&self, exprs: &[Node<'t>], source: &str) -> [bool; 3] {
        let mut set = vec![0u64; self.locals.len().div_ceil(64)];
        for e in exprs {
            for (s, c) in set.iter_mut().zip(self.closure_of(*e, source)) {
                *s |= c;
            }
        }
        let mut roots: Vec<Node<'t>> = exprs.to_vec();
        for (i, defs) in self.defs.iter().enumerate() {
            if set[i / 64] & (1 << (i % 64)) != 0 {
                roots.extend(defs.iter().copied());
            }
        }
        let mut axes = [false; 3];
        for r in roots {
            for n in gpulint_syntax::descendants(r).take(4096) {
                let is_block_idx = n.kind_name() == "field_expression"
                    && n.field("argument")
                        .is_some_and(|a| text(a, source) == "blockIdx");
                if !is_block_idx {
                    continue;
                }
                match n.field("field").map(|f| text(f, source)) {
                    Some("x") => axes[0] = true,
                    Some("y") => axes[1] = true,
                    Some("z") => axes[2] = true,
                    _ => {}
                }
            }
        }
        axes
    }

    /// The locals of `set` that are global linear indices.
    pub fn global_locals(&self, set: &LocalSet) -> LocalSet {
        let mut out = set.clone();
        for (i, f) in self.flags.iter().enumerate() {
            if !f.is_global_index() {
                out[i / 64] &= !(1 << (i % 64));
            }
        }
        out
    }

    /// The first local of `set` in definition order.
    pub fn first_of(&self, set: &LocalSet) -> Option<usize> {
        (0..self.locals.len()).find(|&i| set[i / 64] & (1 << (i % 64)) != 0)
    }
}

impl<'t> CudaModel<'t> {
    /// The accesses of kernel `k` through pointer `base` at an index that is not a constant
    /// (`p[0]` reads one element, whatever the count or the strides).
    pub fn indexed_accesses<'a>(
        &'a self,
        k: &'a Kernel<'t>,
        base: &'a str,
    ) -> impl Iterator<Item = &'a Access<'t>> + 'a {
        k.accesses
            .iter()
            .filter(move |a| a.base == base && a.index.is_some_and(|i| self.eval(i).is_none()))
    }

    /// The first place kernel `k` takes a raw pointer to a row of accessor parameter `base`
    /// (`acc[b][i].data()`): the row is then walked as if its last dimension had stride 1.
    pub fn row_pointer<'a>(&'a self, k: &'a Kernel<'t>, base: &str) -> Option<&'a Access<'t>> {
        k.accesses.iter().find(|a| {
            a.base == base
                && a.accessor
                && self.parent(a.node).is_some_and(|f| {
                    f.kind_name() == "field_expression"
                        && f.field("field")
                            .is_some_and(|n| text(n, self.source) == "data")
                        && self
                            .parent(f)
                            .is_some_and(|c| c.kind_name() == "call_expression")
                })
        })
    }
}

/// Two sets share a local.
pub fn intersects(a: &LocalSet, b: &LocalSet) -> bool {
    a.iter().zip(b).any(|(x, y)| x & y != 0)
}

/// The identifiers read in `expr` (members after `.`/`->` excluded), in order.
pub fn identifiers<'s>(expr: Node<'_>, source: &'s str) -> Vec<&'s str> {
    let mut out = Vec::new();
    for n in gpulint_syntax::descendants(expr) {
        if n.kind_name() == "identifier" {
            out.push(text(n, source));
            if out.len() > 256 {
                break;
            }
        }
    }
    out
}
