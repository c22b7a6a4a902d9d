//! Torch op glue: what host functions taking `at::Tensor` / `torch::Tensor` parameters do with
//! them. Raw pointers taken from tensors (`data_ptr`, accessors), where each tensor comes from
//! (a parameter, its `.contiguous()` copy, a fresh allocation), the checks that validate a
//! parameter's device, dtype, shape or contiguity (also through `#define`d check macros of the
//! file), `AT_DISPATCH_*` regions, CUDA device guards, bindings to Python (`m.def`, `.impl`) and
//! the calls between functions, so a check in a caller covers its callee.
//!
//! The nodes are collected by [`super::CudaBuilder`] during the checker's one walk; `build`
//! turns them into facts once. The owned part ([`FileFacts`]) is what callers in other files
//! need (see `glue_project`).

mod build;
mod checks;
mod origin;
mod pointers;
mod sites;
mod syntax;
mod tail;

use super::{CudaModel, Launch};
use crate::hash::{HashMap, HashSet};
pub use build::build;
pub use checks::{classify, is_dispatch, Props, ALL, CONTIG, DEVICE, DTYPE, SHAPE};
use checks::{is_ident, occurrences};
use gpulint_syntax::NodeExt;
use origin::{reassigned_param, Ctx};
pub use sites::{LaunchSite, VacuousCheck, Via};
pub use tail::{call_tail, names_check, CallTail, LAUNCH_CHECKS};
use tree_sitter::Node;

/// Dispatch macros known out of the box (extended by OP003's `dispatch-macros`); a trailing
/// `*` matches by prefix.
pub const DISPATCH_MACROS: &[&str] = &[
    "AT_DISPATCH_*",
    "DISPATCH_FLOAT_AND_HALF",
    "DISPATCH_DOUBLE_FLOAT_AND_HALF",
    "DISPATCH_FLOAT_HALF_AND_BFLOAT",
    "DISPATCH_HALF_AND_BFLOAT",
    "DISPATCH_DOUBLE_AND_FLOAT",
];

/// Where a tensor expression comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Parameter `index` of the function, made contiguous on the way or not.
    Param { index: usize, contiguous: bool },
    /// A fresh allocation.
    Fresh,
    /// Anything else (a view, an op's result, a member).
    Other,
}

/// A raw pointer or accessor taken from a tensor: `x.data_ptr<float>()`, `x.packed_accessor32<…>()`.
#[derive(Debug, Clone)]
pub struct PtrUse<'t> {
    pub node: Node<'t>,
    /// The receiver expression (`x`, `x.contiguous()`).
    pub receiver: Node<'t>,
    pub origin: Origin,
    pub method: &'t str,
    /// The template argument (`float`, `scalar_t`), if any.
    pub type_arg: Option<&'t str>,
    pub accessor: bool,
    /// A pointer cast around the call: the cast node and the pointer type.
    pub cast: Option<(Node<'t>, &'t str)>,
    /// The innermost dispatch region (index into [`Glue::dispatches`]) it lies in.
    pub dispatch: Option<usize>,
    /// The variable (or member) it is stored in.
    pub var: Option<&'t str>,
}

/// An `AT_DISPATCH_*` (or configured) dispatch call.
#[derive(Debug, Clone)]
pub struct Dispatch<'t> {
    pub node: Node<'t>,
    pub name: &'t str,
    /// The tensor whose dtype is dispatched on (`x` in `x.scalar_type()`).
    pub tensor: Option<&'t str>,
    /// The body of its lambda.
    pub body: Option<Node<'t>>,
}

/// A host function with at least one tensor parameter.
#[derive(Debug, Clone)]
pub struct GlueFn<'t> {
    /// Index into [`CudaModel::functions`].
    pub func: usize,
    /// Index into [`FileFacts::fns`].
    pub facts: usize,
    /// Every parameter in order: its name and whether it is a tensor.
    pub params: Vec<(&'t str, bool)>,
    pub uses: Vec<PtrUse<'t>>,
    /// Launches in its body (indices into [`CudaModel::launches`]).
    pub launches: Vec<usize>,
    /// It calls a function of this file that launches a kernel.
    pub calls_launcher: bool,
    /// Calls that hand their arguments to kernels launched elsewhere: launch macros, and
    /// launching helpers of this file that take no tensors and hold no guard.
    pub sites: Vec<LaunchSite<'t>>,
    /// The call node of each entry of its [`FnFacts::calls`], in the same order.
    pub calls: Vec<Node<'t>>,
    /// Checks that compare a tensor's property with itself.
    pub vacuous: Vec<VacuousCheck<'t>>,
    pub guard: Option<Node<'t>>,
    /// `TensorIterator` does the indexing: strides are honoured.
    pub tensor_iterator: bool,
    /// Local definitions: name → values.
    locals: HashMap<&'t str, Vec<Node<'t>>>,
}

/// A call from one function to another, with the caller's parameter behind each argument.
#[derive(Debug, Clone, Default)]
pub struct CallFacts {
    pub callee: String,
    /// Per argument: the caller's parameter it is (and what the argument itself guarantees,
    /// e.g. `x.contiguous()`), or `None` for anything else.
    pub args: Vec<Option<(usize, Props)>>,
    /// What follows the call in the caller (a launch-error check, the end, …).
    pub tail: CallTail,
}

/// What callers in other files need to know about one function.
#[derive(Debug, Clone, Default)]
pub struct FnFacts {
    pub name: String,
    /// Per parameter: its checked properties (in its own body), or 0 when not a tensor.
    pub covered: Vec<Props>,
    pub tensor: Vec<bool>,
    pub guarded: bool,
    pub calls: Vec<CallFacts>,
    /// Without a guard of its own, it hands the memory of this tensor parameter to a kernel
    /// (see [`GlueFn::launch_hit`]).
    pub launches: Option<usize>,
}

/// A function bound to Python under a name: `m.def("relu", &relu_forward)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    /// The name Python calls (`relu`; an op's name without its schema).
    pub python: String,
    /// The C++ function (`relu_forward`).
    pub function: String,
    /// The op namespace of a `TORCH_LIBRARY(ns, m)` block (`torch.ops.ns.relu`); `None` in a
    /// `PYBIND11_MODULE`, whose module is named by the build.
    pub namespace: Option<String>,
}

/// The owned facts of one file.
#[derive(Debug, Clone, Default)]
pub struct FileFacts {
    pub fns: Vec<FnFacts>,
    /// Functions bound to Python or registered as torch ops (`m.def`, `m.impl`, `.op`).
    pub bound: HashSet<String>,
    /// The bindings that name the function Python calls, in order.
    pub bindings: Vec<Binding>,
    /// Identifiers that occur other than as a call or a definition (a function pointer handed
    /// to a registration macro): their callers cannot be seen.
    pub referenced: HashSet<String>,
}

/// Nodes the builder collects for the glue facts.
#[derive(Default)]
pub struct GlueNodes<'t> {
    /// Calls, with the host function they are in.
    pub calls: Vec<(Option<usize>, Node<'t>)>,
    /// Declarations and assignments in host functions.
    pub defs: Vec<(usize, Node<'t>)>,
    /// Conditions of `if` / `switch` / `while` / `?:` in host functions.
    pub conds: Vec<(usize, Node<'t>)>,
    /// `#define NAME(params) value`.
    pub macros: Vec<Node<'t>>,
}

/// The glue facts of a file.
#[derive(Default)]
pub struct Glue<'t> {
    pub fns: Vec<GlueFn<'t>>,
    pub dispatches: Vec<Dispatch<'t>>,
    pub facts: FileFacts,
}

/// Can the text hold op glue: tensors, or bindings of functions defined elsewhere
/// (`m.def("op", &op_cuda)` in a file that never names a tensor type)?
pub fn is_glue_text(source: &str) -> bool {
    gpulint_source::contains_any(source.as_bytes(), &["Tensor", ".def(", ".impl(", ".op("])
}

impl<'t> PtrUse<'t> {
    /// The position of the launch argument that passes this pointer: the argument that contains
    /// the call, or that is the variable it is stored in.
    pub fn arg_position(&self, model: &CudaModel<'t>, launch: &Launch<'t>) -> Option<usize> {
        launch.args.iter().position(|a| {
            (a.start_byte() <= self.node.start_byte() && self.node.end_byte() <= a.end_byte())
                || self.var.is_some_and(|v| model.text(*a).trim() == v)
        })
    }
}

/// The first place a host function hands a tensor parameter's memory to a kernel.
#[derive(Debug, Clone, Copy)]
pub struct LaunchHit<'t> {
    /// The launch, the launch macro's call or the launching helper's call.
    pub node: Node<'t>,
    /// The kernel (or the helper) it reaches.
    pub target: &'t str,
    /// `None` for a `<<<…>>>` of its own.
    pub via: Option<Via<'t>>,
    /// The tensor parameter, and the argument that takes its memory.
    pub param: usize,
    pub arg: Node<'t>,
}

impl<'t> GlueFn<'t> {
    /// The first launch (a `<<<…>>>`, a launch macro or a launching helper of the file) that
    /// takes a tensor parameter's memory.
    pub fn launch_hit(&self, model: &CudaModel<'t>) -> Option<LaunchHit<'t>> {
        let direct = self.launches.iter().filter_map(|&l| {
            let l = model.launches.get(l)?;
            Some((l.node, l.args.as_slice(), l.kernel, None))
        });
        let indirect = self
            .sites
            .iter()
            .map(|s| (s.node, s.args.as_slice(), s.target, Some(s.via)));
        direct
            .chain(indirect)
            .find_map(|(node, args, target, via)| {
                self.tensor_in_args(model, args)
                    .map(|(param, arg)| LaunchHit {
                        node,
                        target,
                        via,
                        param,
                        arg,
                    })
            })
    }

    /// Does the launch's argument list take this use (directly, or through its variable)?
    pub fn use_reaches(&self, model: &CudaModel<'t>, u: &PtrUse<'t>, launch: usize) -> bool {
        model
            .launches
            .get(launch)
            .is_some_and(|l| self.use_in_args(model, u, &l.args))
    }

    /// The first tensor parameter whose memory `args` hand to a kernel, and the node that
    /// does: a raw pointer taken from it (directly, or through the variable it is stored in),
    /// or the tensor itself passed to a converter (`getTensorInfo<float, int>(x)`: a kernel
    /// cannot take a tensor, so what the call makes of it points into its memory).
    pub fn tensor_in_args(
        &self,
        model: &CudaModel<'t>,
        args: &[Node<'t>],
    ) -> Option<(usize, Node<'t>)> {
        for u in &self.uses {
            if let Origin::Param { index, .. } = u.origin {
                if self.use_in_args(model, u, args) {
                    return Some((index, u.node));
                }
            }
        }
        args.iter().find_map(|a| {
            let a = syntax::peel(*a);
            let f = a
                .field("function")
                .filter(|_| a.kind_name() == "call_expression")?;
            if f.kind_name() == "field_expression" {
                return None;
            }
            sites::call_args(a).into_iter().find_map(|x| {
                let name = model.text(x);
                (x.kind_name() == "identifier")
                    .then(|| self.params.iter().position(|p| p.1 && p.0 == name))
                    .flatten()
                    .map(|i| (i, a))
            })
        })
    }

    fn use_in_args(&self, model: &CudaModel<'t>, u: &PtrUse<'t>, args: &[Node<'t>]) -> bool {
        args.iter().any(|a| {
            (a.start_byte() <= u.node.start_byte() && u.node.end_byte() <= a.end_byte())
                || u.var.is_some_and(|v| {
                    v.bytes().all(is_ident) && occurrences(model.text(*a), v).next().is_some()
                })
        })
    }

    /// The tensor parameter a local name is derived from, through `.contiguous()` copies.
    pub fn param_of(&self, source: &'t str, e: Node<'t>) -> Origin {
        Ctx {
            source,
            params: &self.params,
            locals: &self.locals,
        }
        .origin(e, 0)
    }

    /// Where the tensor called `name` (a parameter or a local) comes from.
    pub fn origin_of_name(&self, source: &'t str, name: &str) -> Origin {
        if let Some(index) = self.params.iter().position(|p| p.0 == name && p.1) {
            return reassigned_param(index, name, self.local_values(name), source);
        }
        match self.local_values(name) {
            [only] => self.param_of(source, *only),
            _ => Origin::Other,
        }
    }

    /// The values a local name was given.
    pub fn local_values(&self, name: &str) -> &[Node<'t>] {
        self.locals.get(name).map_or(&[], Vec::as_slice)
    }
}
