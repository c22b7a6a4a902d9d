//! What a module of the project does when imported, as the modules importing it see it:
//! read once per run by path.

use super::{model_of, module_text};
use crate::python::training::under_main_guard;
use crate::python::PythonModel;
use gpulint_syntax::NodeExt;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

/// The facts of each project module read in this run, by path (`None`: not read or not
/// parsed).
static MODULES: LazyLock<Mutex<HashMap<PathBuf, Option<Arc<ModuleFacts>>>>> =
    LazyLock::new(Default::default);

/// What a local module does that matters to the modules importing it.
#[derive(Debug, Default, PartialEq)]
pub struct ModuleFacts {
    /// Configures TensorFlow GPU memory growth or a limit when imported.
    pub tf_memory_at_import: bool,
    /// Its module-level functions that configure TensorFlow GPU memory growth or a limit.
    pub tf_memory_functions: Vec<String>,
    /// The module-level call that initializes the TensorFlow runtime when it is imported
    /// (builds a layer or tensor, lists logical devices, ...): its callee's text.
    pub tf_init_at_import: Option<String>,
    /// Sets the `mixed_float16` global policy when imported.
    pub float16_policy_at_import: bool,
    /// Its module-level functions that set the `mixed_float16` global policy.
    pub float16_policy_functions: Vec<String>,
}

/// A module has [`ModuleFacts`] only if its text spells one of these: each fact needs
/// TensorFlow or Keras imported (`tensorflow`, `keras`, `tf_keras`) or the `mixed_float16`
/// policy named.
pub(super) const MODULE_FACT_WORDS: &[&str] = &["tensorflow", "keras", "mixed_float16"];

/// The facts of the project module at `path`, worked out once per run.
pub(super) fn module_facts(path: &Path) -> Option<Arc<ModuleFacts>> {
    if let Some(f) = MODULES.lock().ok().and_then(|m| m.get(path).cloned()) {
        return f;
    }
    let text = module_text(path);
    let facts = text.as_deref().and_then(|text| {
        if !gpulint_source::contains_any(text.as_bytes(), MODULE_FACT_WORDS) {
            // None to find: not parsed.
            return Some(Arc::new(ModuleFacts::default()));
        }
        model_of(text, facts_of_model)
    });
    if let Ok(mut m) = MODULES.lock() {
        m.insert(path.to_path_buf(), facts.clone());
    }
    facts
}

/// The facts of the model `m` of a project module.
pub(super) fn facts_of_model(m: &PythonModel<'_>) -> Option<Arc<ModuleFacts>> {
    let tf = m.tf();
    // A call at module level (not under `if __name__ == "__main__":`) that initializes the
    // runtime.
    let tf_init_at_import = if m.imports_tensorflow() {
        m.order()
            .module()
            .iter()
            .find(|e| {
                tf.init_kind(e.node).is_some()
                    && m.enclosing_function(e.node).is_none()
                    && !under_main_guard(m, e.node)
            })
            .map(|e| e.node)
            // `def call(self, x, n=tf.constant(1)):` in a class of the module: a default
            // value is evaluated when the `def` runs, at import.
            .or_else(|| {
                m.calls
                    .iter()
                    .map(|&(c, _)| c)
                    .find(|&c| tf.init_kind(c).is_some() && default_evaluated_at_import(m, c))
            })
            .and_then(|c| c.field("function"))
            .map(|f| m.text(f).to_string())
    } else {
        None
    };
    let mut float16_policy_at_import = false;
    let mut float16_policy_functions: Vec<String> = Vec::new();
    for call in crate::python::mixed_precision::float16_policy_calls(m) {
        match m.enclosing_function(call) {
            None => float16_policy_at_import |= !under_main_guard(m, call),
            Some(f) => {
                let f = &m.functions[f];
                if f.parent.is_none()
                    && f.class.is_none()
                    && !float16_policy_functions.contains(&f.name)
                {
                    float16_policy_functions.push(f.name.clone());
                }
            }
        }
    }
    Some(Arc::new(ModuleFacts {
        tf_memory_at_import: tf.memory_configured_at_import(m),
        tf_memory_functions: tf.memory_config_functions(m),
        tf_init_at_import,
        float16_policy_at_import,
        float16_policy_functions,
    }))
}

/// Is `node` inside the default value of a parameter of a `def` that runs when the module is
/// imported (at module level or in the body of a class there, not in a function or under the
/// `__main__` guard)?
pub(super) fn default_evaluated_at_import(
    m: &PythonModel<'_>,
    node: tree_sitter::Node<'_>,
) -> bool {
    // The ancestors found once, innermost first (climbing with `Node::parent` is quadratic in
    // the depth).
    let ancestors = m.ancestors(node);
    let mut cur = node;
    let mut def_at = None;
    for (i, p) in ancestors.iter().enumerate() {
        if matches!(
            p.kind_name(),
            "default_parameter" | "typed_default_parameter"
        ) && p.field("value").is_some_and(|v| v.id() == cur.id())
            && ancestors
                .get(i + 1)
                .is_some_and(|ps| ps.kind_name() == "parameters")
        {
            def_at = Some(i + 2);
            break;
        }
        if matches!(
            p.kind_name(),
            "function_definition" | "lambda" | "class_definition"
        ) {
            return false;
        }
        cur = *p;
    }
    let Some(def_at) = def_at.filter(|&d| {
        ancestors
            .get(d)
            .is_some_and(|d| d.kind_name() == "function_definition")
    }) else {
        return false;
    };
    !ancestors[def_at + 1..].iter().any(|p| match p.kind_name() {
        "function_definition" | "lambda" => true,
        "if_statement" => p
            .field("condition")
            .is_some_and(|c| crate::python::order::is_main_guard(c, m)),
        _ => false,
    })
}
