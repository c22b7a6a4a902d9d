//! Name resolution: imports and aliases to qualified names, the frameworks a module imports,
//! local classes, methods and callees, and the module's local call graph.

use super::{CallGraph, PythonModel, MAX_FOLD_DEPTH};
use crate::hash::HashSet;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

impl<'t> PythonModel<'t> {
    /// The local call graph (computed once).
    pub fn call_graph(&self) -> &CallGraph<'t> {
        self.call_graph.get_or_init(|| {
            let mut g = CallGraph {
                edges: vec![Vec::new(); self.functions.len()],
                module: Vec::new(),
                callers: vec![0; self.functions.len()],
                sites: vec![Vec::new(); self.functions.len()],
            };
            for &(call, scope) in &self.calls {
                let Some(callee) = self.local_callee(call) else {
                    continue;
                };
                g.callers[callee] += 1;
                g.sites[callee].push((call, scope));
                match scope {
                    Some(f) => g.edges[f].push((call, callee)),
                    None => g.module.push((call, callee)),
                }
            }
            g
        })
    }

    /// Does the module import TensorFlow (`tensorflow`, `tensorflow.keras`, `tf_keras`)?
    pub fn imports_tensorflow(&self) -> bool {
        self.imports_module("tensorflow") || self.imports_module("tf_keras")
    }

    /// Does the module import Keras, standalone or through TensorFlow?
    pub fn imports_keras(&self) -> bool {
        self.imports_module("keras")
            || self.imports_module("tensorflow.keras")
            || self.imports_module("tf_keras")
    }

    /// The Keras 3 backend the module selects: the value every module-level write of
    /// `KERAS_BACKEND` gives (`os.environ["KERAS_BACKEND"] = "jax"`), lowercased; `None` when
    /// the module writes none, a non-literal, or disagreeing values. Keras 3 reads the variable
    /// when it is first imported, so standalone `keras` models then run on that backend.
    pub fn keras_backend(&self) -> Option<String> {
        let mut found: Option<String> = None;
        for w in self.env_writes() {
            if w.key != "KERAS_BACKEND" || self.enclosing_function(w.node).is_some() {
                continue;
            }
            let v = w.value.as_deref()?.trim().to_ascii_lowercase();
            match &found {
                Some(f) if *f != v => return None,
                _ => found = Some(v),
            }
        }
        found
    }

    /// Does the module import PyTorch?
    pub fn imports_torch(&self) -> bool {
        self.imports_module("torch")
    }

    /// Does the module import JAX (or Flax, which runs on it)?
    pub fn imports_jax(&self) -> bool {
        self.imports_module("jax") || self.imports_module("flax") || self.imports_module("jaxlib")
    }

    /// Does the module import any GPU framework (TensorFlow, Keras, PyTorch, JAX, Flax)?
    pub fn imports_gpu_framework(&self) -> bool {
        self.imports_tensorflow()
            || self.imports_keras()
            || self.imports_torch()
            || self.imports_jax()
    }

    /// The local class a name refers to at `at` (a class defined in an enclosing function, then a
    /// module-level one).
    pub fn local_class(&self, at: Node<'_>, name: &str) -> Option<usize> {
        if !self.class_names.contains(name) {
            return None;
        }
        let mut scope = self.enclosing_function(at);
        loop {
            // A class defined at this level of nesting (not one nested in another class).
            let found = self.classes.iter().rposition(|c| {
                c.parent == scope
                    && c.name == name
                    && self
                        .parents()
                        .ancestors(c.node)
                        .find(|a| {
                            matches!(a.kind_name(), "class_definition" | "function_definition")
                        })
                        .is_none_or(|a| a.kind_name() == "function_definition")
            });
            if found.is_some() {
                return found;
            }
            scope = self.functions[scope?].parent;
        }
    }

    /// The method `name` defined directly in class `c`.
    pub fn method_of(&self, c: usize, name: &str) -> Option<usize> {
        let class = &self.classes[c];
        let body = class.node.field("body")?;
        self.functions_named(name).iter().copied().find(|&f| {
            let def = self.functions[f].node;
            let parent = self
                .parent(def)
                .filter(|p| p.kind_name() != "decorated_definition")
                .or_else(|| self.parent(self.parent(def)?));
            parent.is_some_and(|p| p.id() == body.id())
        })
    }

    /// The qualified name an expression stands for, through imports and aliases:
    /// `tf.config.experimental.set_memory_growth`, `K.clear_session` → `keras.backend.clear_session`.
    /// `None` when the head of the name is not bound to an import.
    /// Answered once per expression (see `PythonModel::qualified_names`).
    pub fn qualified_name(&self, expr: Node<'_>) -> Option<String> {
        let key = super::node_key(expr);
        if let Some(known) = self.qualified_names.borrow().get(&key) {
            return known.clone();
        }
        let name = self.qualified_name_depth(expr, 0);
        self.qualified_names.borrow_mut().insert(key, name.clone());
        name
    }

    fn qualified_name_depth(&self, expr: Node<'_>, depth: usize) -> Option<String> {
        if depth > MAX_FOLD_DEPTH {
            return None;
        }
        let mut parts: Vec<&str> = Vec::new();
        let mut cur = expr;
        loop {
            match cur.kind_name() {
                "attribute" => {
                    parts.push(self.text(cur.field("attribute")?));
                    cur = cur.field("object")?;
                }
                "identifier" => break,
                "call" if depth == 0 && parts.is_empty() => {
                    cur = cur.field("function")?;
                }
                "parenthesized_expression" => cur = cur.named_child(0)?,
                _ => return None,
            }
            if parts.len() > 64 {
                return None;
            }
        }
        let head = self.text(cur);
        let base = self.resolve_identifier(cur, head, depth)?;
        let mut out = base;
        for p in parts.iter().rev() {
            out.push('.');
            out.push_str(p);
        }
        Some(out)
    }

    fn resolve_identifier(&self, at: Node<'_>, name: &str, depth: usize) -> Option<String> {
        let mut scope = self.enclosing_function(at);
        loop {
            // Innermost binding wins: an import in this scope, or a local alias assignment.
            if let Some(imp) = self.import_of(scope, name) {
                return Some(imp.qualified.clone());
            }
            match scope {
                Some(f) => {
                    if let Some(v) = self.local_aliases.get(&(f, name)) {
                        if v.kind_name() != "identifier" || self.text(*v) != name {
                            return self.qualified_name_depth(*v, depth + 1);
                        }
                    }
                    scope = self.functions[f].parent;
                }
                None => break,
            }
        }
        // A module-level alias: `config = tf.config.experimental`.
        let b = self.module_bindings.get(name)?;
        if b.count == 1 && matches!(b.value.kind_name(), "attribute" | "identifier") {
            if b.value.kind_name() == "identifier" && self.text(b.value) == name {
                return None;
            }
            return self.qualified_name_depth(b.value, depth + 1);
        }
        None
    }

    /// Does any import bring in `module` (or one of its submodules)?
    pub fn imports_module(&self, module: &str) -> bool {
        self.imported_modules
            .get_or_init(|| {
                let mut modules = HashSet::default();
                for i in &self.imports {
                    let q = i.qualified.as_str();
                    modules.extend(q.match_indices('.').map(|(at, _)| q[..at].to_string()));
                    modules.insert(q.to_string());
                }
                modules
            })
            .contains(module)
    }

    /// The qualified name of the function a call invokes.
    pub fn call_name(&self, call: Node<'_>) -> Option<String> {
        self.qualified_name(call.field("function")?)
    }

    /// Functions defined under a name (module functions, methods and nested functions alike).
    pub fn functions_named(&self, name: &str) -> &[usize] {
        self.functions_by_name
            .get(name)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// The local function a call invokes: `f(...)` for a module-level or enclosing `def f`,
    /// `self.f(...)` / `cls.f(...)` for a method of the same class.
    /// Answered once per call (see `PythonModel::local_callees`).
    pub fn local_callee(&self, call: Node<'_>) -> Option<usize> {
        let key = super::node_key(call);
        if let Some(&known) = self.local_callees.borrow().get(&key) {
            return known;
        }
        let callee = self.find_local_callee(call);
        self.local_callees.borrow_mut().insert(key, callee);
        callee
    }

    fn find_local_callee(&self, call: Node<'_>) -> Option<usize> {
        let func = call.field("function")?;
        // Only asked once the name could be a local function's (most calls are not).
        let caller = || self.enclosing_function(func);
        match func.kind_name() {
            "identifier" => {
                let name = self.text(func);
                let candidates = self.functions_named(name);
                if candidates.is_empty() {
                    // No local function of that name: only a builtin that calls a dunder.
                    return self.protocol_callee(call, name, caller);
                }
                if self.qualified_name(func).is_some() {
                    return None;
                }
                let caller = caller();
                // `global pager; pager = getpager(); pager(text)`: the caller rebinds the name,
                // so the call goes to whatever was bound, not to the function of that name
                // (unless that function is nested in the caller, which also binds it).
                if let Some(c) = caller {
                    let nested_here = candidates
                        .iter()
                        .any(|&f| self.functions[f].parent == Some(c));
                    if !nested_here && self.function_binds(c, name) {
                        return None;
                    }
                }
                // Prefer a function nested in the caller's chain, then a module-level one.
                let mut scope = caller;
                while let Some(s) = scope {
                    if let Some(&c) = candidates
                        .iter()
                        .find(|&&c| self.functions[c].parent == Some(s))
                    {
                        return Some(c);
                    }
                    scope = self.functions[s].parent;
                }
                candidates.iter().copied().find(|&c| {
                    self.functions[c].parent.is_none() && self.functions[c].class.is_none()
                })
            }
            "attribute" => {
                let object = func.field("object")?;
                let recv = self.text(object);
                if recv != "self" && recv != "cls" {
                    return None;
                }
                let name = self.text(func.field("attribute")?);
                if self.functions_named(name).is_empty() {
                    return None;
                }
                let class = self.functions[caller()?].class.as_ref()?;
                self.functions_named(name)
                    .iter()
                    .copied()
                    .find(|&c| self.functions[c].class.as_ref() == Some(class))
            }
            _ => None,
        }
    }

    /// `len(self)`, `iter(self)`, `str(self)` ... in a method: the builtin calls the class's own
    /// dunder method (`__len__`, `__iter__`, `__str__`), when the class defines it and the
    /// builtin's name is not rebound in the module.
    fn protocol_callee(
        &self,
        call: Node<'_>,
        name: &str,
        caller: impl FnOnce() -> Option<usize>,
    ) -> Option<usize> {
        let dunder = match name {
            "len" => "__len__",
            "iter" => "__iter__",
            "next" => "__next__",
            "str" => "__str__",
            "repr" => "__repr__",
            "hash" => "__hash__",
            "bool" => "__bool__",
            "abs" => "__abs__",
            "reversed" => "__reversed__",
            _ => return None,
        };
        if !self.functions_named(name).is_empty()
            || self.qualified_name(call.field("function")?).is_some()
        {
            return None;
        }
        let mut args = gpulint_syntax::named_children(call.field("arguments")?)
            .filter(|a| a.kind_name() != "comment");
        let arg = args.next()?;
        if args.next().is_some() || self.text(arg) != "self" {
            return None;
        }
        let class = self.functions[caller()?].class.as_ref()?;
        self.functions_named(dunder)
            .iter()
            .copied()
            .find(|&c| self.functions[c].class.as_ref() == Some(class))
    }

    /// Local functions called from the body of function `f` (not from functions nested in it).
    pub fn callees(&self, f: usize) -> Vec<(Node<'t>, usize)> {
        self.call_graph().edges.get(f).cloned().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{find, model_of};

    #[test]
    fn resolves_imports_and_aliases() {
        let src = "import tensorflow as tf\nfrom tensorflow import keras\nfrom tensorflow.keras import layers as L\nimport keras.backend\ncfg = tf.config.experimental\ndef f():\n    import torch as T\n    T.cuda.empty_cache()\n    cfg.set_memory_growth(1, True)\n    L.Dense(3)\n    keras.backend.clear_session()\n";
        model_of(src, |m, root| {
            let q = |s| m.qualified_name(find(root, src, "attribute", s));
            assert_eq!(
                q("T.cuda.empty_cache").as_deref(),
                Some("torch.cuda.empty_cache")
            );
            assert_eq!(
                q("cfg.set_memory_growth").as_deref(),
                Some("tensorflow.config.experimental.set_memory_growth")
            );
            assert_eq!(
                q("L.Dense").as_deref(),
                Some("tensorflow.keras.layers.Dense")
            );
            assert_eq!(
                q("keras.backend.clear_session").as_deref(),
                Some("keras.backend.clear_session")
            );
        });
    }

    #[test]
    fn call_graph() {
        let src = "class A:\n    def a(self):\n        self.b()\n    def b(self):\n        helper()\ndef helper():\n    pass\n";
        model_of(src, |m, _| {
            let a = m.functions_named("a")[0];
            let b = m.functions_named("b")[0];
            let h = m.functions_named("helper")[0];
            assert_eq!(
                m.callees(a).iter().map(|c| c.1).collect::<Vec<_>>(),
                vec![b]
            );
            assert_eq!(
                m.callees(b).iter().map(|c| c.1).collect::<Vec<_>>(),
                vec![h]
            );
        });
    }

    #[test]
    fn a_module_is_imported_with_its_parent_packages_and_nothing_else() {
        let src = "import torch.nn.functional as F\nfrom tensorflow import keras\nimport jaxlib\ndef f():\n    import numpy.linalg\n";
        model_of(src, |m, _| {
            for module in [
                "torch",
                "torch.nn",
                "torch.nn.functional",
                "tensorflow",
                "tensorflow.keras",
                "jaxlib",
                "numpy",
            ] {
                assert!(m.imports_module(module), "{module}");
            }
            for module in [
                "torch.n",
                "torch.nn.functional.relu",
                "jax",
                "keras",
                "tensor",
                "",
            ] {
                assert!(!m.imports_module(module), "{module}");
            }
        });
    }
}
