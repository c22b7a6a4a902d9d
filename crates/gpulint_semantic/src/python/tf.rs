//! TensorFlow facts: which calls initialize the device runtime (the GPU-init boundary), which
//! configure devices, and whether GPU memory growth or a memory limit is configured.
//!
//! The boundary is computed once per file, per sequence of the execution order, and shared:
//! TF001 (configuration after it), TF002 (`TF_FORCE_GPU_ALLOW_GROWTH` only counts before it),
//! TF004 (only configuration before it takes effect and can collide) and TF013 (environment
//! variables after it are ignored) all ask [`TfFacts::first_init_before`] /
//! [`TfFacts::runs_before_boundary`].
//!
//! Names are resolved through imports and normalized first: `tf.compat.v1.X` is `tf.X`, and
//! `tf.keras.X`, `tensorflow.python.keras.X`, `tf_keras.X` and Keras 3's `keras.X` are all `keras.X`.
//!
//! Which calls initialize the runtime is decided in `init`; device and memory configuration
//! calls are read in `config`.

mod config;
mod init;

use super::order::{Event, ExecOrder};
use super::PythonModel;
use crate::hash::HashMap;
use config::folds_false;
use gpulint_syntax::named_children;
use gpulint_syntax::NodeExt;
use init::{last_segment, plain_receiver};
use tree_sitter::Node;

/// Why a call initializes the TensorFlow device runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Init {
    TensorOp,
    Variable,
    Dataset,
    KerasLayer,
    KerasModel,
    KerasMetric,
    /// `compile`, `fit`, `predict`, ... on a model.
    ModelMethod,
    Strategy,
    /// `list_logical_devices`, connecting to a TPU cluster, memory statistics.
    DeviceQuery,
    /// `tf.test.is_gpu_available`, `device_lib.list_local_devices`: create the GPU devices with
    /// the default settings (later configuration raises or is ignored).
    DeviceList,
    /// `tf.saved_model.load`.
    Load,
}

impl Init {
    /// What the call does, for a label: "`Dense(...)` builds a Keras layer".
    pub fn describe(self) -> &'static str {
        match self {
            Init::TensorOp => "runs a TensorFlow op",
            Init::Variable => "creates a variable",
            Init::Dataset => "creates a dataset from tensors",
            Init::KerasLayer => "builds a Keras layer",
            Init::KerasModel => "builds a Keras model",
            Init::KerasMetric => "creates a Keras metric and its variables",
            Init::ModelMethod => "runs a Keras model method",
            Init::Strategy => "creates a distribution strategy",
            Init::DeviceQuery => "queries the initialized devices",
            Init::DeviceList => "creates the GPU devices with the default settings",
            Init::Load => "loads a saved model",
        }
    }
}

/// A device configuration call that must run before the runtime is initialized (TF001).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigFn {
    MemoryGrowth,
    VisibleDevices,
    LogicalDevices,
}

/// What kind of memory configuration a piece of evidence is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryConfig {
    /// `set_memory_growth(gpu, True)`, or a helper named after it.
    Growth,
    /// A logical/virtual device configuration with `memory_limit=`.
    Limit,
    /// `TF_FORCE_GPU_ALLOW_GROWTH=true` in the environment (only counts before the boundary).
    Env,
    /// TF1 `gpu_options.allow_growth` / `per_process_gpu_memory_fraction`.
    Tf1,
}

/// The TensorFlow facts of one file.
#[derive(Debug, Default)]
pub struct TfFacts<'t> {
    /// The module runs in TF1 graph mode (`disable_eager_execution`, `Session`, `placeholder`,
    /// TF1-only namespaces such as `tf.contrib` and `tf.app`): plain ops only build a graph and
    /// do not initialize the runtime.
    pub graph_mode: bool,
    /// The module is written for a TF 1.x release: it calls names that only TF 1.x has at the
    /// top level (`tf.Session`, `tf.placeholder`, `tf.contrib`, `tf.app`, `tf.get_variable`,
    /// `tf.enable_eager_execution`, `tf.enable_v2_behavior`, `tensorflow.compat.v2`'s
    /// `enable_v2_behavior`), not through `tf.compat.v1`, so it fails on TensorFlow 2.
    pub targets_tf1: bool,
    /// The module targets TPUs (`TPUStrategy`, `TPUClusterResolver`, `tf.tpu.*`, `TPUEstimator`).
    pub uses_tpu: bool,
    inits: HashMap<usize, Init>,
    configs: HashMap<usize, ConfigFn>,
    /// Calls to the TF001 configuration functions, in document order.
    pub config_calls: Vec<(Node<'t>, ConfigFn)>,
    /// GPU memory growth or limit configuration, in document order.
    pub memory_config: Vec<(Node<'t>, MemoryConfig)>,
    /// Evidence that the script hides all GPUs (`set_visible_devices([], 'GPU')`,
    /// `CUDA_VISIBLE_DEVICES=-1` before the boundary).
    pub cpu_only: Vec<Node<'t>>,
    /// Training entry points: `.fit(`, `apply_gradients`, `minimize`, an Estimator's
    /// `.train(input_fn=...)`, `tf.estimator.train_and_evaluate`, and `tf.GradientTape()` when
    /// the module applies the gradients it computes (see [`applies_gradients`]): a tape whose
    /// gradients are only inspected is not training.
    pub training: Vec<Node<'t>>,
    /// Per sequence of the execution order: positions of the init events. Laid out at the
    /// first question that needs them (see [`TfFacts::positions`]): most files never ask, and
    /// then the execution order is not built for them.
    init_positions: std::cell::OnceCell<Vec<Vec<usize>>>,
}

/// Modules whose estimators also have a `.fit`.
const FIT_LOOKALIKES: &[&str] = &["sklearn", "xgboost", "lightgbm", "catboost", "statsmodels"];

/// Is `q` (a qualified name as written) a name only TF 1.x has?
fn tf1_only(q: &str) -> bool {
    q.starts_with("tensorflow.contrib.")
        || q.starts_with("tensorflow.app.")
        || matches!(
            q,
            "tensorflow.Session"
                | "tensorflow.InteractiveSession"
                | "tensorflow.placeholder"
                | "tensorflow.get_variable"
                | "tensorflow.variable_scope"
                | "tensorflow.get_collection"
                | "tensorflow.enable_eager_execution"
                | "tensorflow.enable_v2_behavior"
                | "tensorflow.compat.v2.enable_v2_behavior"
        )
}

/// `tensorflow.compat.v1.X` → `tensorflow.X`; the Keras spellings → `keras.X`.
pub fn normalize(q: &str) -> String {
    let mut s = q.to_string();
    for compat in ["tensorflow.compat.v1.", "tensorflow.compat.v2."] {
        if let Some(rest) = s.strip_prefix(compat) {
            s = format!("tensorflow.{rest}");
        }
    }
    for prefix in [
        "tensorflow.python.keras.",
        "tensorflow.keras.",
        "tf_keras.",
        "keras.src.",
    ] {
        if let Some(rest) = s.strip_prefix(prefix) {
            return format!("keras.{rest}");
        }
    }
    s
}

/// Methods that update variables or step an optimizer with the values they are given.
const UPDATES: &[&str] = &[
    "assign",
    "assign_add",
    "assign_sub",
    "scatter_add",
    "scatter_sub",
    "scatter_update",
    "scatter_nd_add",
    "scatter_nd_sub",
    "scatter_nd_update",
    "apply",
    "update_step",
];

/// Does the module apply the gradients it computes? Yes when it calls `apply_gradients` or
/// `minimize` (an optimizer step), or when a value computed from a `.gradient(...)` result
/// (through assignments, `for` loops and comprehensions over it, or the result of a local
/// function that computes one) is passed to a variable update (`assign_sub`, `assign_add`,
/// `assign`, `scatter_*`) or an optimizer's `apply`/`update_step`.
fn applies_gradients(m: &PythonModel<'_>) -> bool {
    let method = |call: Node<'_>| -> Option<&str> {
        let f = call.field("function")?;
        match f.kind_name() {
            "attribute" => f.field("attribute").map(|a| m.text(a)),
            _ => None,
        }
    };
    if m.calls
        .iter()
        .any(|&(c, _)| matches!(method(c), Some("apply_gradients" | "minimize")))
    {
        return true;
    }
    // Local functions that compute gradients: their results carry them.
    let grad_calls: Vec<&(Node<'_>, Option<usize>)> = m
        .calls
        .iter()
        .filter(|&&(c, _)| method(c) == Some("gradient"))
        .collect();
    if grad_calls.is_empty() {
        return false;
    }
    let grad_functions: Vec<usize> = grad_calls.iter().filter_map(|&&(_, f)| f).collect();
    let is_source = |n: Node<'_>| -> bool {
        n.kind_name() == "call"
            && (method(n) == Some("gradient")
                || m.local_callee(n)
                    .is_some_and(|f| grad_functions.contains(&f)))
    };
    // (targets, value) of every binding site.
    let mut bindings: Vec<(Node<'_>, Node<'_>)> = Vec::new();
    for &root in &m.roots {
        for n in gpulint_syntax::descendants(root) {
            if matches!(
                n.kind_name(),
                "assignment" | "for_statement" | "for_in_clause"
            ) {
                if let (Some(l), Some(r)) = (n.field("left"), n.field("right")) {
                    bindings.push((l, r));
                }
            }
        }
    }
    let mut tainted: Vec<&str> = Vec::new();
    let carries = |n: Node<'_>, tainted: &[&str]| -> bool {
        gpulint_syntax::descendants(n).any(|d| {
            is_source(d) || (d.kind_name() == "identifier" && tainted.contains(&m.text(d)))
        })
    };
    // A few rounds reach every chain a training loop writes (`grads` → `zip(grads, vars)` → `g`).
    for _ in 0..6 {
        let before = tainted.len();
        for &(l, r) in &bindings {
            if carries(r, &tainted) {
                for d in gpulint_syntax::descendants(l) {
                    if d.kind_name() == "identifier" && !tainted.contains(&m.text(d)) {
                        tainted.push(m.text(d));
                    }
                }
            }
        }
        if tainted.len() == before {
            break;
        }
    }
    m.calls.iter().any(|&(c, _)| {
        method(c).is_some_and(|name| UPDATES.contains(&name))
            && c.field("arguments").is_some_and(|a| carries(a, &tainted))
    })
}

/// A positional argument (`index`) or keyword argument (`name`) of a call.
pub fn argument<'t>(
    call: Node<'t>,
    index: usize,
    name: &str,
    m: &PythonModel<'_>,
) -> Option<Node<'t>> {
    let args = call.field("arguments")?;
    let mut pos = 0;
    for a in named_children(args) {
        match a.kind_name() {
            "keyword_argument" => {
                if a.field("name").map(|n| m.text(n)) == Some(name) {
                    return a.field("value");
                }
            }
            "comment" | "list_splat" | "dictionary_splat" => {}
            _ => {
                if pos == index {
                    return Some(a);
                }
                pos += 1;
            }
        }
    }
    None
}

impl<'t> TfFacts<'t> {
    pub(super) fn build(m: &PythonModel<'t>) -> TfFacts<'t> {
        let mut facts = TfFacts::default();
        if !m.imports_tensorflow() && !m.imports_keras() {
            return facts;
        }
        let raw: Vec<Option<String>> = m.calls.iter().map(|(c, _)| m.call_name(*c)).collect();
        // TF1 namespaces (gone from TF2 unless spelled `tf.compat.v1`) mean graph mode.
        facts.graph_mode = raw.iter().flatten().any(|q| {
            q.starts_with("tensorflow.contrib.")
                || q.starts_with("tensorflow.app.")
                || matches!(
                    q.as_str(),
                    "tensorflow.get_collection"
                        | "tensorflow.get_variable"
                        | "tensorflow.variable_scope"
                )
        });
        facts.targets_tf1 = raw.iter().flatten().any(|q| tf1_only(q));
        let names: Vec<Option<String>> = raw.iter().map(|q| q.as_deref().map(normalize)).collect();
        for q in names.iter().flatten() {
            match q.as_str() {
                "tensorflow.disable_eager_execution"
                | "tensorflow.disable_v2_behavior"
                | "tensorflow.Session"
                | "tensorflow.InteractiveSession"
                | "tensorflow.placeholder" => facts.graph_mode = true,
                _ => {}
            }
            if q.starts_with("tensorflow.tpu.")
                || q.starts_with("tensorflow.contrib.tpu.")
                || q.starts_with("tensorflow.contrib.cluster_resolver.TPU")
                || ["TPUStrategy", "TPUClusterResolver", "TPUEstimator"].contains(&last_segment(q))
            {
                facts.uses_tpu = true;
            }
        }
        let fit_lookalikes = FIT_LOOKALIKES.iter().any(|l| m.imports_module(l));
        for (i, &(call, _)) in m.calls.iter().enumerate() {
            let q = names[i].as_deref();
            if let Some(init) = facts.classify_init(m, call, q, fit_lookalikes) {
                facts.inits.insert(call.id(), init);
            }
            facts.classify_config(m, call, q);
            facts.classify_training(m, call, q, fit_lookalikes);
        }
        let is_tape = |c: Node<'t>| {
            m.call_name(c).as_deref().map(normalize).as_deref() == Some("tensorflow.GradientTape")
        };
        if facts.training.iter().any(|&c| is_tape(c)) && !applies_gradients(m) {
            facts.training.retain(|&c| !is_tape(c));
        }
        for &a in &m.attribute_assignments {
            let Some(left) = a.field("left") else {
                continue;
            };
            let name = left.field("attribute").map(|n| m.text(n));
            if matches!(
                name,
                Some("allow_growth" | "per_process_gpu_memory_fraction")
            ) && !folds_false(m, a.field("right"))
            {
                facts.memory_config.push((a, MemoryConfig::Tf1));
            }
        }
        for w in m.env_writes() {
            if w.key == "TF_FORCE_GPU_ALLOW_GROWTH" && w.value_is("true") {
                facts.memory_config.push((w.node, MemoryConfig::Env));
            }
            if w.key == "CUDA_VISIBLE_DEVICES"
                && (w.value_is("-1") || w.value_is(""))
                && facts.runs_before_boundary(m.order(), w.node)
            {
                facts.cpu_only.push(w.node);
            }
        }
        facts.memory_config.sort_by_key(|(n, _)| n.start_byte());
        facts
    }

    fn classify_training(
        &mut self,
        m: &PythonModel<'t>,
        call: Node<'t>,
        q: Option<&str>,
        fit_lookalikes: bool,
    ) {
        if matches!(
            q,
            Some("tensorflow.GradientTape" | "tensorflow.estimator.train_and_evaluate")
        ) {
            self.training.push(call);
            return;
        }
        if q.is_some() {
            return;
        }
        let Some(func) = call
            .field("function")
            .filter(|f| f.kind_name() == "attribute")
        else {
            return;
        };
        let (Some(attr), Some(object)) = (func.field("attribute"), func.field("object")) else {
            return;
        };
        if m.local_callee(call).is_some() {
            return;
        }
        let method = m.text(attr);
        // `estimator.train(input_fn=...)`: an Estimator's training loop.
        let estimator = method == "train" && argument(call, usize::MAX, "input_fn", m).is_some();
        if !estimator
            && !matches!(
                method,
                "fit" | "fit_generator" | "train_on_batch" | "apply_gradients" | "minimize"
            )
        {
            return;
        }
        if !plain_receiver(m, object) {
            return;
        }
        if method.starts_with("fit")
            && fit_lookalikes
            && !m.text(object).to_ascii_lowercase().contains("model")
        {
            return;
        }
        // Flax's `TrainState.apply_gradients` and optax-style `minimize` are JAX training.
        if matches!(method, "apply_gradients" | "minimize") && m.imports_jax() {
            return;
        }
        self.training.push(call);
    }

    /// The first training entry point that runs when the module runs as a script (at module
    /// level, under `if __name__ == "__main__":`, or in local functions called from there).
    pub fn training_in_module(&self, order: &ExecOrder<'t>) -> Option<Node<'t>> {
        order
            .module()
            .iter()
            .find(|e| self.training.iter().any(|t| t.id() == e.node.id()))
            .map(|e| e.node)
    }

    /// Per sequence of `order` (the file's execution order): the positions of the events that
    /// initialize the runtime.
    fn positions(&self, order: &ExecOrder<'t>) -> &[Vec<usize>] {
        self.init_positions.get_or_init(|| {
            (0..order.sequences().len())
                .map(|s| {
                    order
                        .events(s)
                        .iter()
                        .enumerate()
                        .filter(|(_, e)| self.inits.contains_key(&e.node.id()))
                        .map(|(i, _)| i)
                        .collect()
                })
                .collect()
        })
    }

    /// Why the call initializes the runtime, if it does.
    pub fn init_kind(&self, call: Node<'_>) -> Option<Init> {
        self.inits.get(&call.id()).copied()
    }

    /// Which TF001 configuration function the call is, if any.
    pub fn config_fn(&self, call: Node<'_>) -> Option<ConfigFn> {
        self.configs.get(&call.id()).copied()
    }

    /// The position (in sequence `seq`) of the first event before position `idx` that
    /// initializes the runtime and could run before it (not in an exclusive branch).
    pub fn first_init_before(
        &self,
        order: &ExecOrder<'t>,
        seq: usize,
        idx: usize,
    ) -> Option<usize> {
        let events = order.events(seq);
        let target = events.get(idx)?;
        self.positions(order)
            .get(seq)?
            .iter()
            .copied()
            .take_while(|&i| i < idx)
            .find(|&i| !order.exclusive(&events[i], target))
    }

    /// The GPU-init boundary of sequence `seq`: its first event that initializes the runtime.
    pub fn boundary<'o>(&self, order: &'o ExecOrder<'t>, seq: usize) -> Option<&'o Event<'t>> {
        let i = *self.positions(order).get(seq)?.first()?;
        order.events(seq).get(i)
    }

    /// Does `node` (an event) run before the GPU-init boundary wherever it runs? Nodes that are
    /// not laid out in any sequence count as running before.
    pub fn runs_before_boundary(&self, order: &ExecOrder<'t>, node: Node<'_>) -> bool {
        for seq in 0..order.sequences().len() {
            for (i, e) in order.events(seq).iter().enumerate() {
                if e.node.id() == node.id() && self.first_init_before(order, seq, i).is_some() {
                    return false;
                }
            }
        }
        true
    }

    /// The first piece of evidence that GPU memory growth or a limit is configured (an
    /// environment variable only when it is set before the boundary).
    pub fn memory_configured(&self, m: &PythonModel<'t>) -> Option<(Node<'t>, MemoryConfig)> {
        self.memory_config.iter().copied().find(|(n, kind)| {
            *kind != MemoryConfig::Env || self.runs_before_boundary(m.order(), *n)
        })
    }

    /// Memory configuration that runs when the module is imported (at module level, or in a
    /// function that module-level code calls).
    pub fn memory_configured_at_import(&self, m: &PythonModel<'t>) -> bool {
        let order = m.order();
        self.memory_config
            .iter()
            .any(|(n, _)| order.module().iter().any(|e| e.node.id() == n.id()))
    }

    /// Names of the module-level functions that configure memory growth or a limit (directly
    /// or through a local function they call).
    pub fn memory_config_functions(&self, m: &PythonModel<'t>) -> Vec<String> {
        let direct: Vec<bool> = m
            .functions
            .iter()
            .map(|f| {
                let r = f.node.byte_range();
                self.memory_config
                    .iter()
                    .any(|(n, _)| r.contains(&n.start_byte()))
            })
            .collect();
        let graph = m.call_graph();
        m.functions
            .iter()
            .enumerate()
            .filter(|(i, f)| {
                f.parent.is_none()
                    && f.class.is_none()
                    && (direct[*i] || graph.edges[*i].iter().any(|(_, c)| direct[*c]))
            })
            .map(|(_, f)| f.name.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::build;
    use super::*;
    use gpulint_syntax::{parse, Lang};

    /// The function text of the first init call of the module sequence.
    fn boundary(src: &str) -> Option<String> {
        let tree = parse(Lang::Python, src).unwrap();
        let m = build(&tree, src);
        let b = m.tf().boundary(m.order(), 0)?;
        Some(m.text(b.node.field("function")?).to_string())
    }

    #[test]
    fn boundary_resolves_keras_spellings() {
        let cases = [
            ("import tensorflow as tf\ntf.config.list_physical_devices('GPU')\nx = tf.keras.layers.Dense(3)\n", "tf.keras.layers.Dense"),
            ("from tensorflow import keras\nkeras.layers.Dense(3)\n", "keras.layers.Dense"),
            ("from tensorflow.keras import layers\nlayers.Dense(3)\n", "layers.Dense"),
            ("import keras\nkeras.Sequential([])\n", "keras.Sequential"),
            ("import tensorflow.compat.v1 as tf\ntf.constant(1)\n", "tf.constant"),
            ("import tensorflow as tf\ntf.compat.v1.keras.layers.Dense(1)\n", "tf.compat.v1.keras.layers.Dense"),
            ("import tensorflow as tf\nm = get()\nm.compile('adam')\n", "m.compile"),
            ("import tensorflow as tf\ns = tf.distribute.MirroredStrategy()\n", "tf.distribute.MirroredStrategy"),
            ("import tensorflow as tf\ntf.config.list_logical_devices('GPU')\n", "tf.config.list_logical_devices"),
            ("import tensorflow as tf\nclass Net(tf.keras.Model):\n    pass\nclass Big(Net):\n    pass\nBig()\n", "Big"),
        ];
        for (src, want) in cases {
            assert_eq!(boundary(src).as_deref(), Some(want), "{src}");
        }
        for src in [
            "import tensorflow as tf\ntf.config.list_physical_devices('GPU')\ntf.config.experimental.list_physical_devices('GPU')\n",
            "import tensorflow as tf\nimport re\nre.compile('x')\ntf.random.set_seed(1)\ntf.get_logger()\n",
            "import tensorflow as tf\nfrom sklearn.svm import SVC\nclf = SVC()\nclf.fit(x, y)\n",
            "import tensorflow as tf\ntf.compat.v1.disable_eager_execution()\nx = tf.constant(1)\n",
        ] {
            assert_eq!(boundary(src), None, "{src}");
        }
    }

    #[test]
    fn memory_configuration_facts() {
        let src = "import os\nimport tensorflow as tf\nos.environ['CUDA_VISIBLE_DEVICES'] = '-1'\nfor g in tf.config.list_physical_devices('GPU'):\n    tf.config.experimental.set_memory_growth(g, True)\ntf.config.experimental.set_memory_growth(g, False)\ntf.config.set_logical_device_configuration(g, [tf.config.LogicalDeviceConfiguration(memory_limit=1024)])\ntf.config.set_visible_devices([], 'GPU')\ncfg = tf.compat.v1.ConfigProto()\ncfg.gpu_options.allow_growth = True\nm = tf.keras.Sequential()\nos.environ['TF_FORCE_GPU_ALLOW_GROWTH'] = 'true'\nwith tf.GradientTape() as t:\n    pass\n";
        let tree = parse(Lang::Python, src).unwrap();
        let m = build(&tree, src);
        let f = m.tf();
        let kinds: Vec<MemoryConfig> = f.memory_config.iter().map(|(_, k)| *k).collect();
        assert_eq!(
            kinds,
            [
                MemoryConfig::Growth,
                MemoryConfig::Limit,
                MemoryConfig::Tf1,
                MemoryConfig::Env
            ]
        );
        assert_eq!(f.config_calls.len(), 4);
        assert_eq!(f.cpu_only.len(), 2);
        // The tape computes no gradients that are applied: not training.
        assert!(f.training.is_empty());
        // The environment variable is set after the model is built: it does not count.
        let env = f.memory_config[3].0;
        assert!(!f.runs_before_boundary(m.order(), env));
        assert!(f.memory_configured_at_import(&m));
    }
}
