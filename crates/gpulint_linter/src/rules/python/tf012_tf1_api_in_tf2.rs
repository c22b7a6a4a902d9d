//! TF012: TF1 session and graph APIs mixed into TF2 code.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::python::tf::normalize;
use gpulint_semantic::python::PythonModel;
use gpulint_syntax::named_children;
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;
use std::collections::HashMap;
use tree_sitter::Node;

declare_rule! {
    /// ## What it does
    /// Finds TF1 session and graph APIs in a module that is TF2 code: one that defines a
    /// `tf.function`, or spells the TF1 call through `tf.compat.v1` (so it runs on TF2) and
    /// also trains eagerly (`tf.GradientTape`, a Keras model). The APIs are `Session`,
    /// `InteractiveSession`, `disable_eager_execution`, `reset_default_graph`, `placeholder`
    /// and `global_variables_initializer`. Modules that call `disable_v2_behavior()` (TF1
    /// semantics on purpose), that import the whole TF1 API (`import tensorflow.compat.v1 as
    /// tf`), that use TF1-only namespaces such as `tf.contrib`, and calls
    /// inside `with graph.as_default():` are left alone.
    ///
    /// It also finds a `ConfigProto` or `GPUOptions` that sets GPU memory options
    /// (`allow_growth`, `per_process_gpu_memory_fraction`, `gpu_options`) and is bound to a name
    /// that nothing else uses: it never reaches a `Session(config=...)`, `set_session` or a
    /// `RunConfig`, so the setting has no effect.
    ///
    /// ## Why is this risky?
    /// Sessions and graphs are "false friend" APIs in TF2: they switch parts of the program to
    /// TF1 semantics with global collections and graphs that only grow, `reset_default_graph`
    /// does not release eager or Keras state, and `disable_eager_execution` turns every
    /// `tf.function` and Keras model into graph code. A `ConfigProto` that never reaches a
    /// session has no effect in eager TF2: the memory-growth setting is silently lost and
    /// TensorFlow maps nearly all GPU memory.
    ///
    /// ## Example
    /// ```python
    /// import tensorflow as tf
    ///
    /// config = tf.compat.v1.ConfigProto()
    /// config.gpu_options.allow_growth = True
    /// model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// import tensorflow as tf
    ///
    /// for gpu in tf.config.list_physical_devices("GPU"):
    ///     tf.config.experimental.set_memory_growth(gpu, True)
    /// model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    /// ```
    ///
    /// ## References
    /// - TensorFlow guide "TF1.x vs TF2" (*False friend APIs*, *No more globals*, *Functions,
    ///   not sessions*): <https://www.tensorflow.org/guide/migrate/tf1_vs_tf2>
    /// - TensorFlow guide "Use a GPU", *Limiting GPU memory growth*:
    ///   <https://www.tensorflow.org/guide/gpu#limiting_gpu_memory_growth>
    /// - JAX, *GPU memory allocation* (`allow_growth` "in a `tf.ConfigProto` passed to
    ///   `tf.Session`"): <https://docs.jax.dev/en/latest/gpu_memory_allocation.html>
    pub static TF012 = {
        code: "TF012",
        name: "tf1-api-in-tf2",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Warning,
        summary: "TF1 session or graph API mixed into TF2 code, or a ConfigProto that never reaches a session",
        kinds: &[],
        needles: &["tensorflow", "tf_keras"],
        options: &[],
    };
}

pub struct Tf1ApiInTf2;

const TF1_APIS: &[(&str, &str)] = &[
    ("Session", "use `tf.function`s and call them directly instead of running a session"),
    ("InteractiveSession", "use eager execution instead of an interactive session"),
    ("disable_eager_execution", "remove it: it turns every `tf.function` and Keras model of the program into TF1 graph code"),
    ("reset_default_graph", "use `tf.keras.backend.clear_session()` to release Keras state between models"),
    ("placeholder", "pass tensors as arguments of a `tf.function` (with an `input_signature` if needed)"),
    ("global_variables_initializer", "TF2 variables are initialized when created; drop the initializer"),
];

/// Inside `with <x>.as_default():` (an explicit graph, on purpose)?
fn in_explicit_graph(m: &PythonModel<'_>, node: Node<'_>) -> bool {
    let mut cur = node;
    for _ in 0..64 {
        let Some(p) = m.parent(cur) else { return false };
        match p.kind_name() {
            "with_statement"
                if named_children(p)
                    .filter(|c| c.kind_name() == "with_clause")
                    .any(|c| m.text(c).contains("as_default()")) =>
            {
                return true;
            }
            "module" => return false,
            _ => {}
        }
        cur = p;
    }
    false
}

/// Where each name is used other than by `name.x.y = ...` writes (start bytes, in document
/// order), from the file's identifiers and their parents: looking for the uses of one
/// `ConfigProto` variable by walking its whole scope costs the scope's size per variable.
fn uses_by_name<'t>(m: &PythonModel<'t>) -> HashMap<&'t str, Vec<usize>> {
    let mut uses: HashMap<&'t str, Vec<usize>> = HashMap::new();
    let parents = m.parents();
    for &n in &m.identifiers {
        // `name.gpu_options.allow_growth = True`: configuring it is not using it. `top` is
        // the outermost of the attributes `n` heads, `above` what holds that.
        let mut top = None;
        let mut above = parents.parent(n);
        while let Some(a) = above.filter(|a| a.kind_name() == "attribute") {
            top = Some(a);
            above = parents.parent(a);
        }
        let written = top.is_some_and(|top| {
            above.is_some_and(|p| {
                p.kind_name() == "assignment" && p.field("left").map(|l| l.id()) == Some(top.id())
            })
        });
        if !written {
            uses.entry(m.text(n)).or_default().push(n.start_byte());
        }
    }
    for v in uses.values_mut() {
        v.sort_unstable();
    }
    uses
}

/// Is `name` used in `scope` other than by `def` (the binding) and `name.x.y = ...` writes?
fn name_used(uses: &HashMap<&str, Vec<usize>>, scope: Node<'_>, def: Node<'_>, name: &str) -> bool {
    let Some(at) = uses.get(name) else {
        return false;
    };
    let count = |range: std::ops::Range<usize>| {
        at.partition_point(|&b| b < range.end) - at.partition_point(|&b| b < range.start)
    };
    // The uses inside `def` itself are `def`'s own identifier: not a use.
    count(scope.byte_range()) > count(def.byte_range())
}

impl Rule for Tf1ApiInTf2 {
    fn meta(&self) -> &'static RuleMeta {
        &TF012
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.python();
        if !m.imports_tensorflow() {
            return;
        }
        let names: Vec<(Node<'_>, String, String)> = m
            .calls
            .iter()
            .filter_map(|(c, _)| {
                let raw = m.call_name(*c)?;
                Some((*c, normalize(&raw), raw))
            })
            .collect();
        let tf_function = names.iter().any(|(_, q, _)| q == "tensorflow.function")
            || m.functions.iter().any(|f| {
                f.decorators.iter().any(|d| {
                    d.named_child(0)
                        .and_then(|e| m.qualified_name(e))
                        .is_some_and(|q| normalize(&q) == "tensorflow.function")
                })
            });
        let eager_training = names.iter().any(|(_, q, _)| q == "tensorflow.GradientTape")
            || names.iter().any(|(c, _, _)| {
                matches!(
                    m.tf().init_kind(*c),
                    Some(gpulint_semantic::python::tf::Init::KerasModel)
                )
            });
        let tf1_on_purpose = names.iter().any(|(_, q, raw)| {
            q == "tensorflow.disable_v2_behavior" || raw.starts_with("tensorflow.contrib.")
        }) || m
            .imports
            .iter()
            .any(|i| i.qualified.starts_with("tensorflow.contrib"))
            || m.source.contains("tf.contrib.");
        // `import tensorflow.compat.v1 as tf`: the whole program is written against TF1.
        let tf1_module = m
            .imports
            .iter()
            .any(|i| i.qualified == "tensorflow.compat.v1" && i.name == "tf");
        if !tf1_on_purpose && !tf1_module {
            for (call, q, raw) in &names {
                let Some(rest) = q.strip_prefix("tensorflow.") else {
                    continue;
                };
                let Some((api, help)) = TF1_APIS.iter().find(|(a, _)| *a == rest) else {
                    continue;
                };
                let compat = raw.starts_with("tensorflow.compat.v1.");
                if !(tf_function || (compat && eager_training)) || in_explicit_graph(m, *call) {
                    continue;
                }
                let callee = call.field("function").map(|f| ctx.text(f)).unwrap_or(api);
                let why = if tf_function {
                    "this module also defines `tf.function`s"
                } else {
                    "this module also trains eagerly (GradientTape or Keras)"
                };
                let d = ctx
                    .diagnostic(*call, format!("TF1 API `{callee}` in TF2 code: {why}, and `{api}` switches to TF1 graph semantics"))
                    .primary_label("TF1 session/graph API")
                    .note("sessions, placeholders and the default graph are \"false friend\" APIs in TF2: global graph state grows and is not released with the eager or Keras state")
                    .help(*help);
                ctx.report(d);
            }
        }
        // A ConfigProto / GPUOptions that never reaches a session.
        // `name.gpu_options.… = …`, `name.allow_growth = …`: where each name's GPU memory
        // options are set (start bytes of the assignments, in document order).
        let mut memory_writes: HashMap<&str, Vec<usize>> = HashMap::new();
        for a in &m.attribute_assignments {
            let Some(t) = a.field("left").map(|l| m.text(l)) else {
                continue;
            };
            let Some(dot) = t.find('.') else {
                continue;
            };
            let rest = &t[dot..];
            if rest.starts_with(".gpu_options.")
                || rest == ".allow_growth"
                || rest == ".per_process_gpu_memory_fraction"
            {
                memory_writes
                    .entry(&t[..dot])
                    .or_default()
                    .push(a.start_byte());
            }
        }
        let mut uses = None;
        for (call, q, _) in &names {
            if !matches!(
                q.as_str(),
                "tensorflow.ConfigProto" | "tensorflow.GPUOptions"
            ) {
                continue;
            }
            let Some(assign) = m.parent(*call).filter(|p| p.kind_name() == "assignment") else {
                continue;
            };
            let Some(left) = assign
                .field("left")
                .filter(|l| l.kind_name() == "identifier")
            else {
                continue;
            };
            if assign.field("right").map(|r| r.id()) != Some(call.id()) {
                continue;
            }
            let name = m.text(left);
            let scope = match m.enclosing_function(*call) {
                Some(f) => m.functions[f].node,
                None => m.root,
            };
            let memory_kw = call.field("arguments").is_some_and(|a| {
                named_children(a).any(|k| {
                    k.kind_name() == "keyword_argument"
                        && k.field("name").is_some_and(|n| {
                            matches!(
                                m.text(n),
                                "gpu_options" | "allow_growth" | "per_process_gpu_memory_fraction"
                            )
                        })
                })
            });
            let memory_attr = memory_writes.get(name).is_some_and(|at| {
                let i = at.partition_point(|&b| b < scope.start_byte());
                at.get(i).is_some_and(|&b| b < scope.end_byte())
            });
            if !(memory_kw || memory_attr) {
                continue;
            }
            let uses = uses.get_or_insert_with(|| uses_by_name(m));
            if name_used(uses, scope, left, name) {
                continue;
            }
            let callee = call
                .field("function")
                .map(|f| ctx.text(f))
                .unwrap_or("ConfigProto");
            let d = ctx
                .diagnostic(*call, format!("`{name} = {callee}(...)` sets GPU memory options, but `{name}` never reaches a session: the setting has no effect"))
                .primary_label("configured here, never passed to `Session(config=...)`, `set_session` or a `RunConfig`")
                .with_label(Span::of(&left), format!("`{name}` is not used after this"))
                .note("in eager TF2 a ConfigProto only takes effect through a session; TensorFlow keeps mapping nearly all GPU memory")
                .help("in TF2 use `for gpu in tf.config.list_physical_devices('GPU'): tf.config.experimental.set_memory_growth(gpu, True)`; in TF1 code pass it: `tf.compat.v1.Session(config=config)`");
            ctx.report(d);
        }
    }
}
