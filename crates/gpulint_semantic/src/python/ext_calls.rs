//! Calls from Python into native extension modules, with what the Python side guarantees about
//! each tensor it passes.
//!
//! A call `ext.fn(a, b)` (or `fn(a, b)` after `from ext import fn`) whose callee resolves
//! through an import to a module that is not the standard library or a well-known framework,
//! and a call through a module returned by `torch.utils.cpp_extension.load(name="ext", …)` are
//! recorded with, per positional argument, the
//! properties the Python code establishes (see [`guarantee`]): contiguity (`x.contiguous()`, a
//! fresh allocation, `if not x.is_contiguous(): x = x.contiguous()`, `assert
//! x.is_contiguous()`), dtype (`x.float()`, `x.to(torch.half)`, a dtype comparison that guards
//! the call or raises) and device (`x.cuda()`, `assert x.is_cuda`). Tensors saved in
//! `forward` of a `torch.autograd.Function` (`ctx.save_for_backward`, `ctx.attr = (…)`) keep
//! what they had there when `backward` reads them back. Whether a call is made in `backward`
//! is recorded too: autograd runs it on the gradients' device.
//!
//! The op-glue facts match these calls with the functions a C++ file binds (`m.def`), through
//! the extension builds that name the file (see `cuda::glue_python`, which maps these
//! properties to its own).

mod conditions;
mod guarantee;

use super::PythonModel;
use gpulint_syntax::{named_children, NodeExt};
use serde::{Deserialize, Serialize};
use tree_sitter::Node;

/// The argument is contiguous.
pub const CONTIG: u8 = 1;
/// The argument's dtype is checked or converted.
pub const DTYPE: u8 = 2;
/// The argument is on a CUDA device (`.cuda()`, `assert x.is_cuda`).
pub const DEVICE: u8 = 4;

/// One call into a native extension.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtCall {
    /// The module, dotted as imported (`fused_index_mul_2d`, `apex._C`).
    pub module: String,
    /// The function called (`float_forward`).
    pub function: String,
    /// 1-based line of the call (in a notebook: of the joined cells).
    pub line: usize,
    /// Per positional argument: what the Python side guarantees ([`CONTIG`], [`DTYPE`],
    /// [`DEVICE`]).
    pub args: Vec<u8>,
    /// Keyword, `*args` or `**kwargs` arguments follow: parameters past `args` are unknown.
    pub open: bool,
    /// Made in `backward` of a `torch.autograd.Function`.
    pub backward: bool,
}

/// Roots of modules that are never native extensions of the project: the standard library's
/// most used modules and the frameworks (calls into them are not recorded).
const NOT_EXTENSIONS: &[&str] = &[
    "abc",
    "argparse",
    "collections",
    "contextlib",
    "copy",
    "dataclasses",
    "datetime",
    "functools",
    "glob",
    "inspect",
    "io",
    "itertools",
    "jax",
    "json",
    "keras",
    "logging",
    "math",
    "matplotlib",
    "multiprocessing",
    "numpy",
    "os",
    "pandas",
    "pathlib",
    "pickle",
    "random",
    "re",
    "scipy",
    "shutil",
    "subprocess",
    "sys",
    "tensorflow",
    "threading",
    "time",
    "torchvision",
    "tqdm",
    "typing",
    "warnings",
];

/// The calls into native extensions in `m`, in document order.
pub fn collect(m: &PythonModel<'_>) -> Vec<ExtCall> {
    let mut out = Vec::new();
    // `ext.fn` is looked up as a module built by a call of `torch.utils.cpp_extension.load`
    // only in a file that makes such a call (asked once, when a callee first needs it).
    let mut loads: Option<bool> = None;
    for &(call, _) in &m.calls {
        let Some(func) = call.field("function") else {
            continue;
        };
        if !matches!(func.kind_name(), "attribute" | "identifier") {
            continue;
        }
        let Some(qualified) = m.qualified_name(func).or_else(|| {
            let loads = *loads.get_or_insert_with(|| {
                m.calls
                    .iter()
                    .any(|&(c, _)| m.call_name(c).is_some_and(|n| is_loader(&n)))
            });
            loads.then(|| loaded(m, func)).flatten()
        }) else {
            continue;
        };
        let Some((module, function)) = qualified.rsplit_once('.') else {
            continue;
        };
        if !is_candidate(module) {
            continue;
        }
        let Some(list) = call.field("arguments") else {
            continue;
        };
        let mut args = Vec::new();
        let mut open = false;
        for a in named_children(list) {
            match a.kind_name() {
                "keyword_argument" | "list_splat" | "dictionary_splat" => open = true,
                "comment" => {}
                _ if !open => args.push(guarantee::of_expr(m, a, call, 0)),
                _ => {}
            }
        }
        if args.is_empty() && !open {
            continue;
        }
        out.push(ExtCall {
            module: module.to_string(),
            function: function.to_string(),
            line: call.start_position().row + 1,
            args,
            open,
            backward: in_backward(m, call),
        });
    }
    out
}

/// Could calls into `module` reach a native extension?
fn is_candidate(module: &str) -> bool {
    let root = module.split('.').next().unwrap_or("");
    // `torch.ops.<namespace>.fn` reaches a registered op, but which C++ file registers that
    // namespace is not known before the C++ files are read (a shard could not keep them
    // together): such calls are not recorded.
    root != "torch" && !root.is_empty() && !root.starts_with('_') && !NOT_EXTENSIONS.contains(&root)
}

/// Does a call of `qualified` build an extension module from sources (`load`, `load_inline`)?
fn is_loader(qualified: &str) -> bool {
    qualified.starts_with("torch.utils.cpp_extension.load")
}

/// `ext.fn` where `ext = load(name="ext", …)` (`torch.utils.cpp_extension.load`): `ext.fn`.
fn loaded(m: &PythonModel<'_>, func: Node<'_>) -> Option<String> {
    let object = func.field("object")?;
    if object.kind_name() != "identifier" || func.kind_name() != "attribute" {
        return None;
    }
    let value = m.value_of_name(func, m.text(object))?;
    if value.kind_name() != "call" {
        return None;
    }
    if !m.call_name(value).is_some_and(|b| is_loader(&b)) {
        return None;
    }
    let name = named_children(value.field("arguments")?).find_map(|a| {
        (a.kind_name() == "keyword_argument"
            && a.field("name").is_some_and(|n| m.text(n) == "name"))
        .then(|| super::string_literal(a.field("value")?, m.source))
        .flatten()
    })?;
    Some(format!("{name}.{}", m.text(func.field("attribute")?)))
}

/// Is `node` in the `backward` method of a `torch.autograd.Function` subclass?
fn in_backward(m: &PythonModel<'_>, node: Node<'_>) -> bool {
    let Some(f) = m.enclosing_function(node) else {
        return false;
    };
    m.functions[f].name == "backward" && guarantee::autograd_class(m, f).is_some()
}

#[cfg(test)]
mod tests;
