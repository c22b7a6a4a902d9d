//! Static estimation of a training step's peak GPU memory.
//!
//! - [`layer`]: layer specs and their shape/parameter arithmetic (Keras and PyTorch);
//! - [`keras`], [`torch`]: constructor calls → specs;
//! - [`interp`], [`eval`], [`calls`], [`value`]: a small bounded abstract interpreter that runs
//!   the file to learn which models it builds, with symbolic per-sample tensors;
//! - [`model`]: per-model layer traces;
//! - [`training`]: batch size, optimizer, precision;
//! - [`estimate`]: the peak and the largest batch that fits;
//! - [`budget`]: GPU names → memory; [`alloc`]: single literal-shape allocations.

pub mod alloc;
pub mod budget;
pub mod calls;
pub mod estimate;
pub mod eval;
pub mod interp;
pub mod keras;
pub mod layer;
pub mod model;
pub mod saved;
pub mod step;
pub mod tensor_ops;
pub mod torch;
pub mod training;
pub mod value;
pub mod zoo;

pub use estimate::Estimate;
use gpulint_semantic::python::PythonModel;
pub use model::{Built, Step};
pub use training::Setup;

/// One model of a file, with how it is trained and its estimate.
#[derive(Debug, Clone)]
pub struct ModelReport {
    pub model: Built,
    pub setup: Setup,
    /// `None` when the architecture is not fully known.
    pub estimate: Option<Estimate>,
}

/// Every model the file builds.
pub fn analyze(pm: &PythonModel<'_>) -> Vec<ModelReport> {
    let mut it = interp::Interp::new(pm);
    it.run_file();
    let models = it.models();
    let file = training::file_facts(pm);
    models
        .into_iter()
        .map(|model| {
            let setup = training::setup(&model, &file, &it.batches, &it.optimizers);
            let estimate = estimate::estimate(&model, &setup);
            ModelReport {
                model,
                setup,
                estimate,
            }
        })
        .collect()
}

/// The smallest node covering `span`, in whichever root (notebook cell) holds it.
pub fn node_at<'t>(pm: &PythonModel<'t>, span: (usize, usize)) -> Option<tree_sitter::Node<'t>> {
    pm.roots
        .iter()
        .find(|r| r.start_byte() <= span.0 && span.1 <= r.end_byte())
        .and_then(|r| r.descendant_for_byte_range(span.0, span.1))
}

/// Does the file import a framework whose models the estimator reads?
pub fn imports_framework(pm: &PythonModel<'_>) -> bool {
    [
        "torch",
        "tensorflow",
        "keras",
        "tf_keras",
        "transformers",
        "timm",
        "torchvision",
    ]
    .iter()
    .any(|m| pm.imports_module(m))
}
