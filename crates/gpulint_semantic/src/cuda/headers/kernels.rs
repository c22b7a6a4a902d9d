//! Kernels defined in a project header: op glue in a `.cu` file often launches a kernel that
//! a header next to it (`foo_cuda_kernel.cuh`) defines. What the glue rules need of such a
//! kernel is kept per parameter: whether it is a pointer indexed with a computed index
//! (`p[i]`: the kernel walks it linearly), and whether rows of an accessor are taken as raw
//! pointers (`acc[b][i].data()`). The header's model is built once, when its facts are read.

use crate::cuda::{last_name, CudaBuilder, CudaModel};
use crate::Options;
use std::path::Path;

/// A `__global__` kernel of a project header.
#[derive(Debug, Clone)]
pub struct HeaderKernel {
    /// Its name without namespace or template arguments.
    pub name: String,
    pub params: Vec<HeaderParam>,
}

/// One parameter of a [`HeaderKernel`].
#[derive(Debug, Clone)]
pub struct HeaderParam {
    pub name: String,
    pub pointer: bool,
    pub accessor: bool,
    /// 1-based line of its first access with a computed index (`p[i]`), if any.
    pub linear: Option<usize>,
    /// 1-based line of its first row pointer (`acc[b][i].data()`), if any.
    pub row_pointer: Option<usize>,
}

/// A kernel a checked file can see in one of its project headers, with that header's path.
#[derive(Debug, Clone, Copy)]
pub struct SeenKernel<'a> {
    pub kernel: &'a HeaderKernel,
    pub path: &'a Path,
}

/// The kernels `source` (a header, parsed as `tree`) defines, read from `model` (the tree's
/// model with the default options) when given, else from a model built here.
pub(super) fn kernels_of(
    source: &str,
    tree: &tree_sitter::Tree,
    model: Option<&CudaModel<'_>>,
) -> Vec<HeaderKernel> {
    if memchr::memmem::find(source.as_bytes(), b"__global__").is_none() {
        return Vec::new();
    }
    match model {
        Some(model) => kernels_in(model),
        None => kernels_in(&CudaBuilder::model_of(source, tree, &Options::default())),
    }
}

fn kernels_in(model: &CudaModel<'_>) -> Vec<HeaderKernel> {
    let line = |n: tree_sitter::Node<'_>| n.start_position().row + 1;
    model
        .kernels
        .iter()
        .filter(|k| !k.too_large)
        .map(|k| HeaderKernel {
            name: last_name(&model.functions[k.function].name).to_string(),
            params: k
                .params
                .iter()
                .map(|p| HeaderParam {
                    name: p.name.to_string(),
                    pointer: p.pointer,
                    accessor: p.accessor,
                    linear: p
                        .pointer
                        .then(|| model.indexed_accesses(k, p.name).next())
                        .flatten()
                        .map(|a| line(a.node)),
                    row_pointer: model.row_pointer(k, p.name).map(|a| line(a.node)),
                })
                .collect(),
        })
        .collect()
}
