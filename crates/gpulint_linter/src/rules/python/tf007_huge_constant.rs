//! TF007: huge constant or tensor proto (> 2 GB) built from NumPy.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::python::tf::{argument, normalize};
use gpulint_semantic::python::{PythonModel, Value};
use gpulint_syntax::named_children;
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

declare_rule! {
    /// ## What it does
    /// Finds `tf.constant(x)`, `tf.convert_to_tensor(x)` and
    /// `tf.data.Dataset.from_tensor_slices(x)` (also `(x, y)`) that embed a NumPy array in a
    /// graph: inside a `tf.function`, or in a module that runs in TF1 graph mode (sessions,
    /// placeholders, `disable_eager_execution`). `x` is reported when it is bound to a whole
    /// data file (`np.load`, `np.memmap`, `np.fromfile`, `pd.read_*(...).values`,
    /// `np.concatenate(...)`) or when its literal shape times its dtype size reaches 2 GiB
    /// (then the finding is an error, since the size is proven). Plain eager use is left
    /// alone: it does not build a tensor proto.
    ///
    /// ## Why is this risky?
    /// A graph stores constants in `TensorProto`s, and `make_tensor_proto` raises
    /// `ValueError: Cannot create a tensor proto whose content is larger than 2GB.` The
    /// tf.data guide warns that `from_tensor_slices` on NumPy arrays "will embed the features
    /// and labels arrays in your TensorFlow graph as tf.constant() operations … and can run
    /// into the 2GB limit for the tf.GraphDef protocol buffer". Below the limit, the data is
    /// still copied into every graph and wastes memory.
    ///
    /// ## Example
    /// ```python
    /// import numpy as np
    /// import tensorflow as tf
    ///
    /// features = np.load("features.npy")
    ///
    /// @tf.function
    /// def lookup(ids):
    ///     return tf.gather(tf.constant(features), ids)
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// import numpy as np
    /// import tensorflow as tf
    ///
    /// features = tf.Variable(np.load("features.npy"), trainable=False)
    ///
    /// @tf.function
    /// def lookup(ids):
    ///     return tf.gather(features, ids)
    /// ```
    ///
    /// ## References
    /// - `make_tensor_proto` in `tensorflow/python/framework/tensor_util.py`:
    ///   <https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/framework/tensor_util.py>
    /// - TensorFlow guide "tf.data", *Consuming NumPy arrays*:
    ///   <https://www.tensorflow.org/guide/data#consuming_numpy_arrays>
    /// - SavedModel guide ("proto sizes cannot exceed 2GB"): <https://www.tensorflow.org/guide/saved_model>
    pub static TF007 = {
        code: "TF007",
        name: "huge-constant-from-numpy",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Warning,
        summary: "NumPy data embedded as a graph constant that can exceed the 2 GB proto limit",
        kinds: &[],
        needles: &["tensorflow", "tf_keras"],
        options: &[],
    };
}

pub struct HugeConstantFromNumpy;

const LIMIT: i128 = 1 << 31;

fn itemsize(m: &PythonModel<'_>, call: Node<'_>) -> i128 {
    let Some(d) = argument(call, usize::MAX, "dtype", m) else {
        return 8;
    };
    let t = m.text(d);
    for (k, n) in [
        ("16", 2),
        ("32", 4),
        ("64", 8),
        ("int8", 1),
        ("uint8", 1),
        ("bool", 1),
    ] {
        if t.ends_with(k) {
            return n;
        }
    }
    8
}

/// `(evidence, description, proven_over_limit)` for the array expression.
fn describe<'t>(m: &PythonModel<'t>, x: Node<'t>) -> Option<(Node<'t>, String, bool)> {
    let value = match x.kind_name() {
        "identifier" => m.value_of_name(x, m.text(x))?,
        "call" | "attribute" => x,
        _ => return None,
    };
    // `pd.read_csv(...).values`
    if value.kind_name() == "attribute" {
        let obj = value.field("object")?;
        let attr = m.text(value.field("attribute")?);
        if obj.kind_name() == "call"
            && matches!(attr, "values" | "to_numpy")
            && m.call_name(obj)
                .is_some_and(|q| q.starts_with("pandas.read_"))
        {
            return Some((value, "a whole table read with pandas".into(), false));
        }
        return None;
    }
    if value.kind_name() != "call" {
        return None;
    }
    let q = m.call_name(value)?;
    let rest = q.strip_prefix("numpy.")?;
    match rest {
        "load" | "memmap" | "fromfile" | "loadtxt" | "genfromtxt" => {
            Some((value, format!("a whole data file (`np.{rest}`)"), false))
        }
        "concatenate" | "vstack" | "hstack" => Some((
            value,
            format!("a concatenated dataset (`np.{rest}`)"),
            false,
        )),
        "zeros" | "ones" | "empty" | "full" => {
            let shape = m.const_value(argument(value, 0, "shape", m)?)?;
            let n = match shape {
                Value::Tuple(items) => items
                    .iter()
                    .try_fold(1i128, |a, i| i.as_int().map(|n| a.saturating_mul(n)))?,
                v => v.as_int()?,
            };
            let bytes = n.saturating_mul(itemsize(m, value));
            (bytes >= LIMIT).then(|| {
                (
                    value,
                    format!("{:.1} GiB of data", bytes as f64 / (1u64 << 30) as f64),
                    true,
                )
            })
        }
        _ => None,
    }
}

impl Rule for HugeConstantFromNumpy {
    fn meta(&self) -> &'static RuleMeta {
        &TF007
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.python();
        if !m.imports_tensorflow() || !m.imports_module("numpy") && !m.imports_module("pandas") {
            return;
        }
        let graph_mode = m.tf().graph_mode;
        let tfn = m.tf_functions();
        for &(call, _) in &m.calls {
            let Some(q) = m.call_name(call).map(|q| normalize(&q)) else {
                continue;
            };
            if !matches!(
                q.as_str(),
                "tensorflow.constant"
                    | "tensorflow.convert_to_tensor"
                    | "tensorflow.data.Dataset.from_tensor_slices"
                    | "tensorflow.data.Dataset.from_tensors"
            ) {
                continue;
            }
            let traced = tfn.traced_function(m, call);
            if traced.is_none() && !graph_mode {
                continue;
            }
            let Some(arg) =
                argument(call, 0, "value", m).or_else(|| argument(call, 0, "tensors", m))
            else {
                continue;
            };
            let parts: Vec<Node<'_>> = match arg.kind_name() {
                "tuple" | "list" if q.contains("Dataset") => named_children(arg).collect(),
                _ => vec![arg],
            };
            let Some((evidence, what, proven)) = parts.iter().find_map(|p| describe(m, *p)) else {
                continue;
            };
            let callee = call
                .field("function")
                .map(|f| ctx.text(f))
                .unwrap_or("tf.constant");
            let context = match traced {
                Some(f) => format!("inside `tf.function` `{}`", m.functions[f].name),
                None => "in TF1 graph mode".to_string(),
            };
            let mut d = ctx
                .diagnostic(call, format!("`{callee}(...)` embeds {what} in the graph as a constant, {context}: tensor protos are limited to 2 GB"))
                .primary_label("the array is copied into a graph constant here");
            if evidence.id() != call.id() {
                d = d.with_label(Span::of(&evidence), "the array comes from here");
            }
            if proven {
                d = d.severity(Severity::Error);
            }
            ctx.report(
                d.note("`make_tensor_proto` raises `ValueError: Cannot create a tensor proto whose content is larger than 2GB.`")
                    .help("keep the data out of the graph: hold it in a `tf.Variable`, pass it as a tensor argument, or stream it with `tf.data` (TFRecord files, or `from_generator`)"),
            );
        }
    }
}
