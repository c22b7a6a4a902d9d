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
    reports(pm, training::file_facts(pm))
}

/// The models of the file that may be trained with nothing keeping a static estimate from
/// applying: [`analyze`]'s reports, without running the file where its facts already rule out
/// every one of them (see [`training::FileFacts::may_train_unblocked`]). Each report given is
/// one of [`analyze`]'s; those left out have `trained` false or a blocker.
pub fn analyze_trainable(pm: &PythonModel<'_>) -> Vec<ModelReport> {
    let file = training::file_facts(pm);
    if !file.may_train_unblocked(pm) {
        return Vec::new();
    }
    reports(pm, file)
}

fn reports(pm: &PythonModel<'_>, file: training::FileFacts) -> Vec<ModelReport> {
    let mut it = interp::Interp::new(pm);
    it.run_file();
    let models = it.models();
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

#[cfg(test)]
mod tests {
    use super::*;
    use gpulint_semantic::with_python_model;

    /// The reports a budget check can use: trained, with no blocker.
    fn usable(reports: Vec<ModelReport>) -> Vec<String> {
        reports
            .into_iter()
            .filter(|r| r.setup.trained && r.setup.blockers.is_empty())
            .map(|r| format!("{r:?}"))
            .collect()
    }

    fn both(src: &str) -> (Vec<String>, Vec<String>, usize) {
        with_python_model(src, |pm| {
            let all = analyze(pm);
            let n = all.len();
            (usable(all), usable(analyze_trainable(pm)), n)
        })
        .unwrap()
    }

    #[test]
    fn trainable_reports_are_every_usable_report() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut files = Vec::new();
        for dir in ["tests/memory_models", "fixtures/python"] {
            for e in std::fs::read_dir(root.join(dir)).unwrap() {
                let p = e.unwrap().path();
                if p.extension().is_some_and(|x| x == "py") {
                    files.push(p);
                }
            }
        }
        assert!(files.len() > 100, "{}", files.len());
        let mut usable_files = 0;
        for p in files {
            let Ok(src) = std::fs::read_to_string(&p) else {
                continue;
            };
            let (all, trainable, _) = both(&src);
            assert_eq!(all, trainable, "{}", p.display());
            usable_files += usize::from(!all.is_empty());
        }
        // The comparison covers files with something to report, not only empty lists.
        assert!(usable_files > 30, "{usable_files}");
    }

    #[test]
    fn files_that_cannot_train_unblocked_are_not_run() {
        let keras = "from tensorflow import keras\nfrom tensorflow.keras import layers\nmodel = keras.Sequential([keras.Input(shape=(32,)), layers.Dense(10)])\nmodel.compile(optimizer='adam', loss='mse')\n";
        // Built, never trained: the interpreter finds the model, nothing can be reported.
        let (usable, trainable, models) = both(keras);
        assert_eq!((usable.len(), trainable.len()), (0, 0));
        assert!(models > 0);
        // `fit` reached through a name still counts.
        let aliased = format!("{keras}train = model.fit\ntrain(x, y, batch_size=64)\n");
        let (usable, trainable, _) = both(&aliased);
        assert_eq!(usable.len(), 1);
        assert_eq!(usable, trainable);
        // Several GPUs block every model.
        let spread = format!("{keras}import tensorflow as tf\ns = tf.distribute.MirroredStrategy()\nmodel.fit(x, y, batch_size=64)\n");
        let (usable, trainable, models) = both(&spread);
        assert_eq!((usable.len(), trainable.len()), (0, 0));
        assert!(models > 0);
    }
}
