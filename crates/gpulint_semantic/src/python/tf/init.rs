//! Which calls initialize the TensorFlow device runtime: ops, variables, datasets, Keras
//! layers, models and metrics, model methods, strategies, device queries and loads.

use super::{normalize, Init, TfFacts};
use crate::python::PythonModel;
use gpulint_syntax::named_children;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

const MODEL_METHODS: &[&str] = &[
    "compile",
    "fit",
    "fit_generator",
    "predict",
    "predict_generator",
    "predict_on_batch",
    "evaluate",
    "evaluate_generator",
    "train_on_batch",
    "test_on_batch",
    "build",
];

/// `tf.<name>` functions that create or compute tensors.
const TOP_OPS: &[&str] = &[
    "abs",
    "add",
    "add_n",
    "argmax",
    "argmin",
    "argsort",
    "boolean_mask",
    "broadcast_to",
    "cast",
    "clip_by_value",
    "concat",
    "constant",
    "convert_to_tensor",
    "cumsum",
    "divide",
    "einsum",
    "equal",
    "exp",
    "expand_dims",
    "eye",
    "fill",
    "gather",
    "gather_nd",
    "greater",
    "identity",
    "less",
    "linspace",
    "log",
    "logical_and",
    "logical_not",
    "logical_or",
    "matmul",
    "maximum",
    "meshgrid",
    "minimum",
    "multiply",
    "norm",
    "not_equal",
    "one_hot",
    "ones",
    "ones_like",
    "pad",
    "pow",
    "print",
    "random_normal",
    "random_uniform",
    "range",
    "reduce_all",
    "reduce_any",
    "reduce_max",
    "reduce_mean",
    "reduce_min",
    "reduce_prod",
    "reduce_sum",
    "repeat",
    "reshape",
    "reverse",
    "roll",
    "round",
    "scatter_nd",
    "sequence_mask",
    "sigmoid",
    "slice",
    "sort",
    "split",
    "sqrt",
    "square",
    "squeeze",
    "stack",
    "subtract",
    "tanh",
    "tensor_scatter_nd_update",
    "tensordot",
    "tile",
    "transpose",
    "truncated_normal",
    "unique",
    "unstack",
    "where",
    "zeros",
    "zeros_like",
];

/// `tf.<module>.<op>` modules whose lower-case functions are ops.
const OP_MODULES: &[&str] = &[
    "math", "linalg", "nn", "image", "signal", "sparse", "strings", "bitwise", "random",
];

const DATASET_SOURCES: &[&str] = &[
    "data.Dataset.from_tensor_slices",
    "data.Dataset.from_tensors",
    "data.Dataset.range",
    "data.Dataset.from_generator",
    "data.Dataset.zip",
    "data.Dataset.list_files",
    "data.TFRecordDataset",
    "data.TextLineDataset",
    "data.FixedLengthRecordDataset",
    "data.experimental.make_csv_dataset",
];

fn starts_upper(s: &str) -> bool {
    s.chars().next().is_some_and(|c| c.is_ascii_uppercase())
}

pub(super) fn last_segment(s: &str) -> &str {
    s.rsplit('.').next().unwrap_or(s)
}

/// Does the `tensorflow.<rest>` call initialize the runtime?
fn tf_init(rest: &str, graph_mode: bool) -> Option<Init> {
    let last = last_segment(rest);
    let kind = match rest {
        "config.list_logical_devices"
        | "config.experimental.list_logical_devices"
        | "config.experimental_connect_to_cluster"
        | "config.experimental_connect_to_host"
        | "tpu.experimental.initialize_tpu_system"
        | "config.experimental.get_memory_info"
        | "config.experimental.get_memory_usage" => return Some(Init::DeviceQuery),
        "test.is_gpu_available"
        | "test.gpu_device_name"
        | "python.client.device_lib.list_local_devices" => return Some(Init::DeviceList),
        _ if rest.starts_with("distribute.")
            && last.ends_with("Strategy")
            && starts_upper(last) =>
        {
            return Some(Init::Strategy)
        }
        "Variable" => Init::Variable,
        "saved_model.load" => Init::Load,
        "summary.create_file_writer" => Init::TensorOp,
        _ if DATASET_SOURCES.contains(&rest) => Init::Dataset,
        _ if !rest.contains('.') && TOP_OPS.contains(&rest) => Init::TensorOp,
        _ => {
            let (module, op) = rest.split_once('.')?;
            let op_ok = !op.contains('.') && op.starts_with(|c: char| c.is_ascii_lowercase());
            let math = OP_MODULES.contains(&module) && rest != "random.set_seed";
            let io = module == "io"
                && (op.starts_with("decode_") || op.starts_with("parse_") || op == "read_file");
            if !(op_ok && (math || io)) {
                return None;
            }
            Init::TensorOp
        }
    };
    // In graph mode, ops and variables only add graph nodes.
    (!graph_mode).then_some(kind)
}

/// Does the `keras.<rest>` call initialize the runtime?
fn keras_init(rest: &str) -> Option<Init> {
    let last = last_segment(rest);
    match rest {
        "Input" | "layers.Input" => Some(Init::KerasLayer),
        "Model"
        | "Sequential"
        | "models.Model"
        | "models.Sequential"
        | "models.load_model"
        | "models.clone_model"
        | "models.model_from_json"
        | "saving.load_model" => Some(Init::KerasModel),
        _ if rest.starts_with("layers.") && starts_upper(last) => Some(Init::KerasLayer),
        _ if rest.starts_with("applications.") && starts_upper(last) => Some(Init::KerasModel),
        _ if rest.starts_with("metrics.")
            && starts_upper(last)
            && rest.matches('.').count() == 1 =>
        {
            Some(Init::KerasMetric)
        }
        _ if (rest.starts_with("ops.") || rest.starts_with("random."))
            && last.starts_with(|c: char| c.is_ascii_lowercase()) =>
        {
            Some(Init::TensorOp)
        }
        "backend.variable"
        | "backend.constant"
        | "backend.zeros"
        | "backend.ones"
        | "backend.random_normal"
        | "backend.random_uniform" => Some(Init::TensorOp),
        _ => None,
    }
}

/// `model`, `self.model`, `self.net.head`: a plain receiver a Keras model can be bound to.
pub(super) fn plain_receiver(m: &PythonModel<'_>, object: Node<'_>) -> bool {
    let mut cur = object;
    for _ in 0..8 {
        match cur.kind_name() {
            "identifier" => return m.qualified_name(object).is_none(),
            "attribute" => match cur.field("object") {
                Some(o) => cur = o,
                None => return false,
            },
            _ => return false,
        }
    }
    false
}

/// Does local class `c` derive (directly or through local classes) from a Keras `Model`/`Layer`
/// or `tf.Module`?
fn keras_class(m: &PythonModel<'_>, c: usize) -> bool {
    let mut stack = vec![(c, 0)];
    while let Some((c, depth)) = stack.pop() {
        let Some(bases) = m.classes[c].node.field("superclasses") else {
            continue;
        };
        for base in named_children(bases) {
            if !matches!(base.kind_name(), "identifier" | "attribute") {
                continue;
            }
            match m.qualified_name(base).map(|q| normalize(&q)) {
                Some(q)
                    if matches!(
                        q.as_str(),
                        "keras.Model"
                            | "keras.models.Model"
                            | "keras.Sequential"
                            | "keras.layers.Layer"
                            | "keras.Layer"
                            | "tensorflow.Module"
                    ) =>
                {
                    return true;
                }
                Some(_) => {}
                None if base.kind_name() == "identifier" && depth < 8 => {
                    if let Some(b) = m.local_class(m.classes[c].node, m.text(base)) {
                        if b != c {
                            stack.push((b, depth + 1));
                        }
                    }
                }
                None => {}
            }
        }
    }
    false
}

impl<'t> TfFacts<'t> {
    pub(super) fn classify_init(
        &self,
        m: &PythonModel<'t>,
        call: Node<'t>,
        q: Option<&str>,
        fit_lookalikes: bool,
    ) -> Option<Init> {
        if let Some(q) = q {
            if let Some(rest) = q.strip_prefix("tensorflow.") {
                return tf_init(rest, self.graph_mode);
            }
            if let Some(rest) = q.strip_prefix("keras.") {
                return if self.graph_mode {
                    None
                } else {
                    keras_init(rest)
                };
            }
            return None;
        }
        if self.graph_mode {
            return None;
        }
        let func = call.field("function")?;
        match func.kind_name() {
            "identifier" => {
                let c = m.local_class(call, m.text(func))?;
                keras_class(m, c).then_some(Init::KerasModel)
            }
            // The module's own method (`self.evaluate()` in a trainer class) is not Keras's.
            "attribute" if m.local_callee(call).is_some() => None,
            "attribute" => {
                let method = m.text(func.field("attribute")?);
                let object = func.field("object")?;
                if !MODEL_METHODS.contains(&method) || !plain_receiver(m, object) {
                    return None;
                }
                let looks_like_model = m.text(object).to_ascii_lowercase().contains("model");
                if (method == "build" || fit_lookalikes) && !looks_like_model {
                    return None;
                }
                Some(Init::ModelMethod)
            }
            _ => None,
        }
    }
}
