//! Modules of the project a file imports: where an import resolves (next to the file, or in a
//! distribution the project holds in a subfolder), what a module does when imported, and
//! summaries of its classes' methods. Read only when a rule is about to report, and cached for
//! the whole run by path.

use super::{nearest, per_dir, read_small, MAX_DIR_ENTRIES};
use crate::python::PythonModel;
use gpulint_syntax::{parse, Lang};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

mod facts;
mod resolved;
use facts::module_facts;
pub use facts::ModuleFacts;
#[cfg(test)]
use facts::{default_evaluated_at_import, facts_of_model, MODULE_FACT_WORDS};
use resolved::ResolvedCache;

/// Local modules larger than this are not read.
const MAX_MODULE_SIZE: u64 = 1 << 20;

/// Files that make a directory a distribution `pip install -e` can install.
const DISTRIBUTION_FILES: &[&str] = &["setup.py", "pyproject.toml", "setup.cfg"];

/// The distributions of the project found in a directory: its subdirectories that hold a
/// `setup.py`, `pyproject.toml` or `setup.cfg`, each as the folders its modules are imported
/// from (the subdirectory itself and its `src/`, for the flat and the src layouts).
#[derive(Debug, Default)]
struct DirDistributions {
    roots: Vec<PathBuf>,
    read: Vec<PathBuf>,
}

static DISTRIBUTIONS: super::DirCache<DirDistributions> = LazyLock::new(Default::default);

fn read_distributions(dir: &Path) -> DirDistributions {
    let mut facts = DirDistributions::default();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return facts;
    };
    let mut subdirs: Vec<PathBuf> = entries
        .take(MAX_DIR_ENTRIES)
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .collect();
    subdirs.sort();
    for sub in subdirs {
        if let Some(f) = DISTRIBUTION_FILES
            .iter()
            .map(|f| sub.join(f))
            .find(|f| f.is_file())
        {
            facts.read.push(f);
            let src = sub.join("src");
            facts.roots.push(sub);
            if src.is_dir() {
                facts.roots.push(src);
            }
        }
    }
    facts
}

/// `dotted` as a module under `dir`: `<dir>/a/b.py` or `<dir>/a/b/__init__.py` for `a.b`, the
/// longest prefix of the components that names a module. Returns the path and the number of
/// leading components of `dotted` that name the module (the rest are attributes).
fn module_under(dir: &Path, parts: &[&str]) -> Option<(PathBuf, usize)> {
    for n in (1..=parts.len()).rev() {
        let mut p = dir.to_path_buf();
        for part in &parts[..n] {
            p.push(part);
        }
        let as_file = p.with_extension("py");
        if as_file.is_file() {
            return Some((as_file, n));
        }
        let as_pkg = p.join("__init__.py");
        if as_pkg.is_file() {
            return Some((as_pkg, n));
        }
    }
    None
}

/// The file a dotted import refers to, if it is a module of the project: a local module next
/// to `file` (`gpu_setup` → `<dir>/gpu_setup.py` or `<dir>/gpu_setup/__init__.py`), else a
/// module of a distribution the project holds in a subdirectory of `file`'s directory or of an
/// ancestor up to the repository root (`util/setup.py` with `util/gpu_setup.py`, installed
/// with `pip install -e util`); the nearest wins. An absolute import of the package the file
/// sits in (`runners.misc` from `runners/train.py`) is resolved from the package's parent. Relative imports are looked up next to
/// `file` only. Returns the path and the number of leading components of `dotted` that name
/// the module (the rest are attributes).
fn local_module(file: &Path, root: &Path, dotted: &str) -> Option<(PathBuf, usize)> {
    // The answer depends on the file's folder only, and the files of a folder are checked
    // one after another and import mostly the same modules: each question is answered once
    // per folder (a dozen file-system lookups), for the folders checked last.
    let dir = file.parent()?;
    if let Some((found, noted)) = RESOLVED.lock().ok().and_then(|m| m.get(dir, root, dotted)) {
        for d in noted.iter() {
            gpulint_source::note_dependency(d);
        }
        return found;
    }
    let (found, noted) = gpulint_source::deps::noting(|| find_local_module(file, root, dotted));
    if let Ok(mut m) = RESOLVED.lock() {
        m.insert(dir, root, dotted, (found.clone(), Arc::new(noted)));
    }
    found
}

static RESOLVED: LazyLock<Mutex<ResolvedCache>> = LazyLock::new(Default::default);

/// [`local_module`], uncached.
fn find_local_module(file: &Path, root: &Path, dotted: &str) -> Option<(PathBuf, usize)> {
    let dir = file.parent()?;
    // `.x` is relative to this package; `..x` would leave the directory: not followed.
    let (dotted, relative) = match dotted.strip_prefix('.') {
        Some(rest) if rest.starts_with('.') => return None,
        Some(rest) => (rest, true),
        None => (dotted, false),
    };
    let parts: Vec<&str> = dotted.split('.').filter(|p| !p.is_empty()).collect();
    if parts.is_empty() {
        return None;
    }
    if let Some(found) = module_under(dir, &parts) {
        return Some(found);
    }
    if relative {
        return None;
    }
    // `from runners.misc import AverageMeter` in `runners/train_runner.py`: an absolute
    // import of the file's own package (a folder around the file, up to the repository root,
    // named as the import's first component) is resolved from that package's parent folder.
    for d in super::search_dirs(file, root) {
        if d.file_name().and_then(|n| n.to_str()) == Some(parts[0]) {
            if let Some(found) = d.parent().and_then(|p| module_under(p, &parts)) {
                return Some(found);
            }
        }
    }
    nearest(
        file,
        root,
        |d| per_dir(&DISTRIBUTIONS, d, read_distributions),
        |f| &f.read,
        |f| f.roots.iter().find_map(|r| module_under(r, &parts)),
    )
}

/// What `read` makes of the model of the project module at `path`: `None` when the module is
/// not a regular file of at most [`MAX_MODULE_SIZE`] bytes, or cannot be decoded or parsed.
fn with_module<R>(path: &Path, read: impl FnOnce(&PythonModel<'_>) -> Option<R>) -> Option<R> {
    model_of(&module_text(path)?, read)
}

/// The text of the project module at `path`: `None` when it is not a regular file of at most
/// [`MAX_MODULE_SIZE`] bytes, or cannot be decoded.
pub(super) fn module_text(path: &Path) -> Option<String> {
    gpulint_source::decode(read_small(path, MAX_MODULE_SIZE)?).ok()
}

/// What `read` makes of the model of the module of text `text`: `None` when it cannot be
/// parsed.
fn model_of<R>(text: &str, read: impl FnOnce(&PythonModel<'_>) -> Option<R>) -> Option<R> {
    let tree = parse(Lang::Python, text)?;
    read(&crate::python::build(&tree, text))
}

/// Does a local module imported by `m` (the module at `file`) configure TensorFlow GPU memory,
/// either when imported or through a function of it that `m` calls? Returns the module's path.
pub fn tf_memory_configured_by_import(
    m: &PythonModel<'_>,
    file: &Path,
    root: &Path,
) -> Option<PathBuf> {
    let mut checked: HashMap<PathBuf, Option<Arc<ModuleFacts>>> = HashMap::new();
    let mut facts_of = |dotted: &str| -> Option<(PathBuf, usize, Arc<ModuleFacts>)> {
        let (path, n) = local_module(file, root, dotted)?;
        gpulint_source::note_dependency(&path);
        let f = checked
            .entry(path.clone())
            .or_insert_with(|| module_facts(&path))
            .clone()?;
        Some((path, n, f))
    };
    for imp in &m.imports {
        if let Some((path, n, f)) = facts_of(&imp.qualified) {
            let parts = imp
                .qualified
                .trim_start_matches('.')
                .split('.')
                .filter(|p| !p.is_empty())
                .count();
            let imported_fn = (n < parts).then(|| imp.qualified.rsplit('.').next().unwrap_or(""));
            if f.tf_memory_at_import {
                return Some(path);
            }
            // `from gpu_setup import enable_growth` and a call of it.
            if let Some(name) = imported_fn {
                if f.tf_memory_functions.iter().any(|x| x == name) {
                    let called = m
                        .calls
                        .iter()
                        .any(|(c, _)| m.call_name(*c).as_deref() == Some(imp.qualified.as_str()));
                    if called {
                        return Some(path);
                    }
                }
            }
        }
    }
    // `import gpu_setup` and a call `gpu_setup.enable_growth()`.
    for (c, _) in &m.calls {
        let Some(q) = m.call_name(*c) else {
            continue;
        };
        let Some((module, name)) = q.rsplit_once('.') else {
            continue;
        };
        if let Some((path, _, f)) = facts_of(module) {
            if f.tf_memory_functions.iter().any(|x| x == name) {
                return Some(path);
            }
        }
    }
    None
}

/// Where a module of the project sets the `mixed_float16` global policy for `m` (the module at
/// `file`): the import of a module that sets it when imported, or a call of a module-level
/// function of such a module that sets it (`from precision import enable_mixed;
/// enable_mixed()`, `import precision; precision.enable_mixed()`). Returns that node and the
/// module's path.
pub fn float16_policy_by_import<'t>(
    m: &PythonModel<'t>,
    file: &Path,
    root: &Path,
) -> Option<(tree_sitter::Node<'t>, PathBuf)> {
    let mut checked: HashMap<String, Option<(PathBuf, usize, Arc<ModuleFacts>)>> = HashMap::new();
    let mut facts_of = |dotted: &str| -> Option<(PathBuf, usize, Arc<ModuleFacts>)> {
        checked
            .entry(dotted.to_string())
            .or_insert_with(|| {
                let (path, n) = local_module(file, root, dotted)?;
                gpulint_source::note_dependency(&path);
                let f = module_facts(&path)?;
                Some((path, n, f))
            })
            .clone()
    };
    let mut found: Option<(tree_sitter::Node<'t>, PathBuf)> = None;
    let mut keep = |node: tree_sitter::Node<'t>, path: PathBuf| {
        if found
            .as_ref()
            .is_none_or(|(n, _)| node.start_byte() < n.start_byte())
        {
            found = Some((node, path));
        }
    };
    for imp in &m.imports {
        let Some((path, _, f)) = facts_of(&imp.qualified) else {
            continue;
        };
        if f.float16_policy_at_import {
            if let Some(node) = m
                .root
                .descendant_for_byte_range(imp.start_byte, imp.end_byte)
            {
                keep(node, path);
            }
        }
    }
    // A call of a function that sets it: `enable_mixed()` (imported by name) or
    // `precision.enable_mixed()`.
    for &(c, _) in &m.calls {
        let Some(q) = m.call_name(c) else {
            continue;
        };
        let Some((module, name)) = q.rsplit_once('.') else {
            continue;
        };
        if let Some((path, _, f)) = facts_of(module) {
            if f.float16_policy_functions.iter().any(|x| x == name) {
                keep(c, path);
            }
        }
    }
    found
}

/// The module file and class name that `qualified` (`trainer.Trainer`, `.models.Net`) names
/// when its module is one of the project's ([`local_module`] for `file`) and the name ends
/// with exactly one class after the module. The module becomes a dependency of the result.
fn local_class(file: &Path, root: &Path, qualified: &str) -> Option<(PathBuf, String)> {
    let (path, n) = local_module(file, root, qualified)?;
    let parts: Vec<&str> = qualified
        .trim_start_matches('.')
        .split('.')
        .filter(|p| !p.is_empty())
        .collect();
    if parts.len() != n + 1 {
        return None;
    }
    gpulint_source::note_dependency(&path);
    Some((path, parts[n].to_string()))
}

/// A method of a class of a module: (module path, class, method).
type MethodKey = (PathBuf, String, String);

static METHOD_SUMMARIES: LazyLock<Mutex<HashMap<MethodKey, bool>>> =
    LazyLock::new(Default::default);

/// Does method `method` of the class `qualified` names (`trainer.Trainer`, imported from a
/// module of the project as [`local_module`] finds it for `file`) return a graph-attached
/// value, judged in that module with its own `backward()` calls? Cached for the run; the
/// module's own imports are not followed further.
pub fn method_returns_attached(file: &Path, root: &Path, qualified: &str, method: &str) -> bool {
    let Some((path, class)) = local_class(file, root, qualified) else {
        return false;
    };
    let class = class.as_str();
    let key = (path.clone(), class.to_string(), method.to_string());
    if let Some(&known) = METHOD_SUMMARIES
        .lock()
        .ok()
        .and_then(|s| s.get(&key).copied())
        .as_ref()
    {
        return known;
    }
    let found = with_module(&path, |m| {
        if !m.imports_torch() {
            return Some(false);
        }
        let f = m.functions.iter().position(|f| {
            f.name == method && f.parent.is_none() && f.class.as_deref() == Some(class)
        })?;
        Some(m.training().returns_attached(m, f, 0).is_some())
    })
    .unwrap_or(false);
    if let Ok(mut s) = METHOD_SUMMARIES.lock() {
        s.insert(key, found);
    }
    found
}

/// What the methods of a class of a project module do that matters to its users and
/// subclasses.
#[derive(Debug, Default)]
struct ClassSummary {
    /// Method → positions (after `self`) of the parameters it accumulates into state on `self`
    /// ([`crate::python::training::accumulated_params`]).
    accumulated: HashMap<String, Vec<usize>>,
    /// (method called on `self` in a loop, the method holding the loop).
    loop_calls: Vec<(String, String)>,
}

/// A class of a module: (module path, class).
type ClassKey = (PathBuf, String);

static CLASS_SUMMARIES: LazyLock<Mutex<HashMap<ClassKey, Option<Arc<ClassSummary>>>>> =
    LazyLock::new(Default::default);

/// The summary of the class `qualified` names, imported from a module of the project as
/// [`local_module`] finds it for `file`. Cached for the run; the module's own imports are not
/// followed further.
fn class_summary(file: &Path, root: &Path, qualified: &str) -> Option<Arc<ClassSummary>> {
    let (path, class) = local_class(file, root, qualified)?;
    let class = class.as_str();
    let key = (path.clone(), class.to_string());
    if let Some(known) = CLASS_SUMMARIES
        .lock()
        .ok()
        .and_then(|s| s.get(&key).cloned())
    {
        return known;
    }
    let found = with_module(&path, |m| {
        if !m
            .classes
            .iter()
            .any(|c| c.name == class && c.parent.is_none())
        {
            return None;
        }
        let mut summary = ClassSummary::default();
        for (i, f) in m.functions.iter().enumerate() {
            if f.parent.is_none() && f.class.as_deref() == Some(class) {
                let params = crate::python::training::accumulated_params(m, i);
                if !params.is_empty() {
                    summary.accumulated.insert(f.name.clone(), params);
                }
            }
        }
        summary.loop_calls = crate::python::training::self_calls_in_loops(m, class);
        Some(Arc::new(summary))
    });
    if let Ok(mut s) = CLASS_SUMMARIES.lock() {
        s.insert(key, found.clone());
    }
    found
}

/// Positions (after `self`) of the parameters that method `method` of the class `qualified`
/// names (imported from a module of the project) accumulates into its object's state.
pub fn method_accumulated_params(
    file: &Path,
    root: &Path,
    qualified: &str,
    method: &str,
) -> Vec<usize> {
    class_summary(file, root, qualified)
        .and_then(|s| s.accumulated.get(method).cloned())
        .unwrap_or_default()
}

/// The methods that loops in the methods of the class `qualified` names (imported from a
/// module of the project) call on `self`: (called method, calling method).
pub fn self_calls_in_loops_of(file: &Path, root: &Path, qualified: &str) -> Vec<(String, String)> {
    class_summary(file, root, qualified)
        .map(|s| s.loop_calls.clone())
        .unwrap_or_default()
}

/// A local module imported at module level before byte `before` of `m` (the module at `file`)
/// whose own module-level code initializes the TensorFlow runtime when imported. Returns the
/// import statement's byte range, the module's path and the initializing callee's text.
pub fn tf_initialized_by_import(
    m: &PythonModel<'_>,
    file: &Path,
    root: &Path,
    before: usize,
) -> Option<((usize, usize), PathBuf, String)> {
    let mut seen: Vec<PathBuf> = Vec::new();
    for imp in &m.imports {
        if imp.scope.is_some() || imp.start_byte >= before {
            continue;
        }
        let Some((path, _)) = local_module(file, root, &imp.qualified) else {
            continue;
        };
        if seen.contains(&path) {
            continue;
        }
        gpulint_source::note_dependency(&path);
        let facts = module_facts(&path);
        seen.push(path.clone());
        if let Some(init) = facts.and_then(|f| f.tf_init_at_import.clone()) {
            return Some(((imp.start_byte, imp.end_byte), path, init));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distributions_and_method_summaries() {
        let root = tempfile::tempdir().unwrap();
        let repo = root.path().join("repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(repo.join("app")).unwrap();
        std::fs::create_dir_all(repo.join("util")).unwrap();
        std::fs::create_dir_all(repo.join("scripts")).unwrap();
        std::fs::write(
            repo.join("util/setup.py"),
            "from setuptools import setup\nsetup(name='u', py_modules=['nets'])\n",
        )
        .unwrap();
        std::fs::write(repo.join("util/nets.py"), "import tensorflow as tf\n").unwrap();
        // Not a distribution: no setup.py next to it.
        std::fs::write(repo.join("scripts/tools.py"), "x = 1\n").unwrap();
        std::fs::write(
            repo.join("app/trainer.py"),
            "import torch\n\nclass Trainer:\n    def train_step(self, x):\n        loss = self.model(x).sum()\n        loss.backward()\n        return loss\n\n    def eval_step(self, x):\n        return self.model(x).sum().item()\n",
        )
        .unwrap();
        let main = repo.join("app/main.py");
        let none = Path::new("/nonexistent-root");
        assert_eq!(
            local_module(&main, none, "nets.Head"),
            Some((repo.join("util/nets.py"), 1))
        );
        assert_eq!(local_module(&main, none, "tools"), None);
        // Relative imports stay next to the file.
        assert_eq!(local_module(&main, none, ".nets"), None);
        // An absolute import of the file's own package resolves from the package's parent;
        // one of another top-level name does not.
        assert_eq!(
            local_module(&main, none, "app.trainer.Trainer"),
            Some((repo.join("app/trainer.py"), 2))
        );
        assert_eq!(local_module(&main, none, "scripts.tools"), None);
        assert_eq!(
            self_calls_in_loops_of(&main, none, "app.trainer.Trainer"),
            Vec::<(String, String)>::new()
        );
        assert!(method_returns_attached(
            &main,
            none,
            "trainer.Trainer",
            "train_step"
        ));
        assert!(!method_returns_attached(
            &main,
            none,
            "trainer.Trainer",
            "eval_step"
        ));
        assert!(!method_returns_attached(
            &main,
            none,
            "trainer.Other",
            "train_step"
        ));
        assert!(!method_returns_attached(
            &main,
            none,
            "trainer",
            "train_step"
        ));
    }

    #[test]
    fn defaults_evaluated_at_import() {
        let src = "import tensorflow as tf\n\nclass L:\n    def call(self, n=tf.constant(1)):\n        def inner(k=tf.constant(2)):\n            return k\n        return n\n\nif __name__ == '__main__':\n    def demo(d=tf.constant(3)):\n        return d\n";
        let tree = parse(Lang::Python, src).unwrap();
        let m = crate::python::build(&tree, src);
        let at_import: Vec<bool> = m
            .calls
            .iter()
            .filter(|(c, _)| m.text(*c).starts_with("tf.constant"))
            .map(|(c, _)| default_evaluated_at_import(&m, *c))
            .collect();
        assert_eq!(at_import, vec![true, false, false]);
    }

    /// A module without [`MODULE_FACT_WORDS`] is not parsed for its facts: on every Python
    /// fixture, a module with facts spells one of them, and some fixtures have facts.
    #[test]
    fn a_module_has_facts_only_where_its_text_spells_a_fact_word() {
        let mut with_facts = 0;
        for (path, text) in crate::test_fixtures::texts(&["."], &["py"]) {
            let facts = model_of(&text, facts_of_model).unwrap();
            if *facts != ModuleFacts::default() {
                with_facts += 1;
                assert!(
                    gpulint_source::contains_any(text.as_bytes(), MODULE_FACT_WORDS),
                    "{}: {facts:?}",
                    path.display()
                );
            }
        }
        assert!(with_facts >= 5, "{with_facts} fixtures with module facts");
        // Modules that reach TensorFlow only through Keras have facts too.
        for text in [
            "import keras\nkeras.mixed_precision.set_global_policy('mixed_float16')\n",
            "from keras import mixed_precision\n\ndef enable():\n    mixed_precision.set_global_policy('mixed_float16')\n",
            "import tf_keras\nlayer = tf_keras.layers.Dense(4)\n",
        ] {
            let facts = model_of(text, facts_of_model).unwrap();
            assert_ne!(*facts, ModuleFacts::default(), "{text}");
            assert!(
                gpulint_source::contains_any(text.as_bytes(), MODULE_FACT_WORDS),
                "{text}"
            );
        }
        // The environment variable configures TensorFlow only in a module that imports it.
        let env = "import os\nos.environ['TF_FORCE_GPU_ALLOW_GROWTH'] = 'true'\n";
        assert_eq!(
            *model_of(env, facts_of_model).unwrap(),
            ModuleFacts::default()
        );
        let tf = format!("import tensorflow as tf\n{env}");
        assert!(model_of(&tf, facts_of_model).unwrap().tf_memory_at_import);
    }

    /// Only the body of `if __name__ == "__main__":` is kept from an import: its `else:`
    /// branch runs when the module is imported.
    #[test]
    fn the_else_branch_of_the_main_guard_runs_at_import() {
        let facts = |body: &str| {
            let text = format!(
                "from keras import mixed_precision\n\nif __name__ == \"__main__\":\n{body}"
            );
            model_of(&text, facts_of_model).unwrap()
        };
        let set = "mixed_precision.set_global_policy('mixed_float16')";
        assert!(!facts(&format!("    {set}\n")).float16_policy_at_import);
        assert!(facts(&format!("    pass\nelse:\n    {set}\n")).float16_policy_at_import);
    }
}
