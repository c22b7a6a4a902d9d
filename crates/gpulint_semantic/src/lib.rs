//! What rules ask about code. Built once per file, during the single walk, then read-only:
//! the Python model (imports and aliases, folding, scopes, call graph, execution order,
//! training-loop, TensorFlow, JAX and extension-build facts, version pins, `setup.py`'s
//! `install_requires`) and the CUDA model (kernels, launches, index ranges, guards, op glue).
//!
//! Options come in as plain data ([`Options`]); this crate must not know rules, diagnostics
//! beyond spans, configuration files or the settings type.

pub mod alloc_conf;
pub mod cuda;
pub mod hash;
pub mod python;
#[cfg(test)]
mod test_fixtures;

use gpulint_syntax::Lang;
use python::PythonModel;
use tree_sitter::{Node, Tree};

/// The semantic model of one file (one per file, never moved around: the size gap between the
/// variants costs nothing).
#[allow(clippy::large_enum_variant)]
pub enum Model<'t> {
    /// Boxed: the Python model (with its lazily computed facts) is much larger than the CUDA one.
    Python(Box<python::PythonModel<'t>>),
    Cuda(cuda::CudaModel<'t>),
}

/// Builds a [`Model`] from the enter/leave events of the checker's walk. One per file.
#[allow(clippy::large_enum_variant)]
pub enum Builder<'t> {
    Python(Box<python::PythonBuilder<'t>>),
    Cuda(cuda::CudaBuilder<'t>),
}

impl<'t> Builder<'t> {
    pub fn new(lang: Lang, source: &'t str, options: &Options) -> Builder<'t> {
        match lang {
            // Manifests are not parsed with tree-sitter and never reach the checker's walk.
            Lang::Python | Lang::Manifest => {
                Builder::Python(Box::new(python::PythonBuilder::new(source)))
            }
            Lang::Cuda => Builder::Cuda(cuda::CudaBuilder::new(source, options)),
        }
    }

    #[inline]
    pub fn enter(&mut self, node: Node<'t>) {
        match self {
            Builder::Python(b) => b.enter(node),
            Builder::Cuda(b) => b.enter(node),
        }
    }

    #[inline]
    pub fn leave(&mut self, node: Node<'t>) {
        match self {
            Builder::Python(b) => b.leave(node),
            Builder::Cuda(b) => b.leave(node),
        }
    }

    /// The model of a file parsed as one tree, or as one tree per notebook cell (in order).
    pub fn finish(self, trees: &'t [Tree]) -> Model<'t> {
        match self {
            Builder::Python(b) => {
                let mut m = b.finish(&trees[0]);
                m.roots = trees.iter().map(Tree::root_node).collect();
                Model::Python(Box::new(m))
            }
            Builder::Cuda(b) => Model::Cuda(b.finish(&trees[0])),
        }
    }
}

/// Parses `src` and builds its semantic model with the checker's walk.
pub fn with_python_model<R>(src: &str, f: impl FnOnce(&PythonModel<'_>) -> R) -> Option<R> {
    let (tree, _) = gpulint_syntax::parse_recovering(gpulint_syntax::Lang::Python, src)?;
    with_trees(src, &[tree], f)
}

/// The same for the code cells of a notebook, each parsed on its own, run in order.
pub fn with_notebook_model<R>(json: &str, f: impl FnOnce(&PythonModel<'_>) -> R) -> Option<R> {
    let nb = gpulint_source::notebook::parse(json).ok()?;
    let trees: Option<Vec<tree_sitter::Tree>> = nb
        .cells
        .iter()
        .map(|c| {
            gpulint_syntax::parse_range_recovering(
                gpulint_syntax::Lang::Python,
                &nb.source,
                c.start,
                c.end,
            )
            .map(|(tree, _)| tree)
        })
        .collect();
    let trees = trees.filter(|t| !t.is_empty())?;
    with_trees(&nb.source, &trees, f)
}

/// For each notebook cell (aligned with `trees`, one per code cell, and with `magics`, the
/// cells' cell magics): does a per-backend cell magic keep it from running (see
/// [`python::cells`])? The cells' model is built only when some magic names a backend.
pub fn gated_off_cells(source: &str, trees: &[Tree], magics: &[Option<&str>]) -> Vec<bool> {
    if trees.is_empty() || !python::cells::may_gate(magics) {
        return vec![false; trees.len()];
    }
    with_trees(source, trees, |m| python::cells::gated_off(m, magics))
        .unwrap_or_else(|| vec![false; trees.len()])
}

fn with_trees<R>(
    src: &str,
    trees: &[tree_sitter::Tree],
    f: impl FnOnce(&PythonModel<'_>) -> R,
) -> Option<R> {
    let options = crate::Options::default();
    let mut builder = crate::Builder::new(gpulint_syntax::Lang::Python, src, &options);
    for tree in trees {
        gpulint_syntax::walk(tree, |node, entering| {
            if entering {
                builder.enter(node);
            } else {
                builder.leave(node);
            }
        });
    }
    match builder.finish(trees) {
        crate::Model::Python(m) => Some(f(&m)),
        _ => None,
    }
}

/// Options of the semantic models, as plain data: the linter fills them from configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// Grid-stride loop macros beyond the built-in list (`[rules.CU001] loop-macros`).
    pub loop_macros: Vec<String>,
    /// Type-dispatch macros beyond the built-in list (`[rules.OP003] dispatch-macros`).
    pub dispatch_macros: Vec<String>,
}
