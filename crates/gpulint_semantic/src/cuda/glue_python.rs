//! The Python callers of bound functions: what the checked Python files pass to each function
//! a C++ file binds, and whether they call it only from `backward`.
//!
//! A run checks its Python files first. Each records its calls into extension modules
//! ([`ExtCall`], with what the Python side guarantees about every argument), and the builds it
//! declares name the module each C/C++ source is compiled into (`CUDAExtension(name="ext",
//! sources=[…])`, `load(name="ext", …)`). The run then installs one [`PythonCallers`] for the
//! C/C++ files it checks next. A function bound with `m.def("fn", &f)` in a source of module
//! `ext` is called from Python wherever `ext.fn(…)` is. When no such call was seen, the answer
//! is "unknown" and the rules keep their findings; so it is for ops registered in
//! `TORCH_LIBRARY(ns, m)`, whose callers (`torch.ops.ns.fn(…)`) are not matched.

use super::glue::{Binding, Props, CONTIG, DEVICE, DTYPE};
use crate::hash::HashMap;
use crate::python::ext_calls;
use crate::python::ext_calls::ExtCall;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, RwLock};

/// The Python calls of a run, by the module and function they call.
#[derive(Debug, Default)]
pub struct PythonCallers {
    /// Per C/C++ source (canonical path): the name of each extension module whose build
    /// compiles it (`fused_adam`, `maskrcnn_benchmark._C`).
    modules: HashMap<PathBuf, Vec<String>>,
    /// Calls by function, with the file (as shown) they are in: only those into a module that
    /// a build names.
    calls: HashMap<String, Vec<(String, ExtCall)>>,
    /// A hash of the calls of the extension modules of the run (for the result cache).
    hash: u64,
}

/// What the visible Python calls of one bound function give one of its parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// The properties every call guarantees for the parameter.
    pub props: Props,
    /// Every call is made in `backward` of an autograd function.
    pub backward_only: bool,
    /// The calls, as `file:line`, with what each guarantees for the parameter (up to 8).
    pub sites: Vec<(String, Props)>,
}

/// The op-glue properties of what the Python side guarantees.
fn glue_props(python: u8) -> Props {
    let mut p = 0;
    for (from, to) in [
        (ext_calls::CONTIG, CONTIG),
        (ext_calls::DTYPE, DTYPE),
        (ext_calls::DEVICE, DEVICE),
    ] {
        if python & from != 0 {
            p |= to;
        }
    }
    p
}

/// Does a call into `module` (as imported) reach the extension built as `built`? The same
/// dotted name, or one is the other inside a package (`from pkg import _C` is `pkg._C`; a
/// relative `from . import _C` is `_C`).
pub fn same_module(module: &str, built: &str) -> bool {
    let module = module.trim_start_matches('.');
    module == built
        || built.strip_suffix(module).is_some_and(|p| p.ends_with('.'))
        || module.strip_suffix(built).is_some_and(|p| p.ends_with('.'))
}

/// Does a call into `module` reach one of the extensions `built`?
pub fn builds_module(built: &[String], module: &str) -> bool {
    built.iter().any(|b| same_module(module, b))
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

impl PythonCallers {
    /// From the builds of the run (the module's name and the sources it compiles, as paths the
    /// working directory resolves) and the calls each Python file makes (as shown). Only the
    /// calls of modules that a build names are kept.
    pub fn new(
        builds: impl IntoIterator<Item = (String, Vec<PathBuf>)>,
        calls: impl IntoIterator<Item = (String, Vec<ExtCall>)>,
    ) -> PythonCallers {
        let mut out = PythonCallers::default();
        let mut names = crate::hash::HashSet::default();
        for (module, sources) in builds {
            for s in sources {
                let list = out.modules.entry(canonical(&s)).or_default();
                if !list.contains(&module) {
                    list.push(module.clone());
                }
            }
            names.insert(module);
        }
        let mut hashed = Vec::new();
        for (file, list) in calls {
            for c in list {
                if !names.iter().any(|n| same_module(&c.module, n)) {
                    continue;
                }
                hashed.push(format!("{file}\0{c:?}"));
                out.calls
                    .entry(c.function.clone())
                    .or_default()
                    .push((file.clone(), c));
            }
        }
        hashed.sort_unstable();
        out.hash = fnv(&hashed.join("\n"));
        out
    }

    /// A hash of the calls kept: a C/C++ file's findings depend on them.
    pub fn hash(&self) -> u64 {
        self.hash
    }

    /// What the Python calls of `function`, bound by `bindings` in the file at `path`, give
    /// its parameter `param`; `None` when no call of it was seen.
    pub fn seen(
        &self,
        path: &Path,
        bindings: &[Binding],
        function: &str,
        param: usize,
    ) -> Option<Seen> {
        let mut modules: Option<Vec<String>> = None;
        let mut seen: Option<Seen> = None;
        let mut unseen = false;
        for b in bindings.iter().filter(|b| b.function == function) {
            if b.namespace.is_some() {
                unseen = true;
                continue;
            }
            let list = self.calls.get(&b.python).map_or(&[][..], Vec::as_slice);
            // The file's modules are looked up (its path resolved on disk) only once a call
            // of the function is known: most functions bound have none.
            let keys: &[String] = if list.is_empty() {
                &[]
            } else {
                modules.get_or_insert_with(|| {
                    self.modules
                        .get(&canonical(path))
                        .cloned()
                        .unwrap_or_default()
                })
            };
            let mut any = false;
            for (file, c) in list {
                if !keys.iter().any(|k| same_module(&c.module, k)) {
                    continue;
                }
                any = true;
                let props = glue_props(c.args.get(param).copied().unwrap_or(0));
                let s = seen.get_or_insert_with(|| Seen {
                    props,
                    backward_only: true,
                    sites: Vec::new(),
                });
                s.props &= props;
                s.backward_only &= c.backward;
                if s.sites.len() < 8 {
                    s.sites.push((format!("{file}:{}", c.line), props));
                }
            }
            unseen |= !any;
        }
        if unseen {
            // Another name of the same function is called from where we cannot see.
            if let Some(s) = seen.as_mut() {
                s.props = 0;
                s.backward_only = false;
            }
        }
        seen
    }
}

fn fnv(s: &str) -> u64 {
    // FNV-1a: stable across runs and platforms (the cache compares it between runs).
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

static CURRENT: LazyLock<RwLock<Option<Arc<PythonCallers>>>> = LazyLock::new(Default::default);

/// Makes `callers` the Python callers the op-glue questions of this process see (`None`:
/// none are known).
pub fn install(callers: Option<Arc<PythonCallers>>) {
    if let Ok(mut c) = CURRENT.write() {
        *c = callers;
    }
}

/// The Python callers installed by the run, if any.
pub fn current() -> Option<Arc<PythonCallers>> {
    CURRENT.read().ok().and_then(|c| c.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(module: &str, function: &str, args: Vec<u8>, backward: bool) -> ExtCall {
        ExtCall {
            module: module.into(),
            function: function.into(),
            line: 1,
            args,
            open: false,
            backward,
        }
    }

    fn binding(python: &str, function: &str) -> Binding {
        Binding {
            python: python.into(),
            function: function.into(),
            namespace: None,
        }
    }

    #[test]
    fn modules_match_by_dotted_name() {
        assert!(same_module("pkg._C", "pkg._C"));
        assert!(same_module("_C", "pkg._C"));
        assert!(same_module("..ext", "pkg.ext"));
        assert!(same_module("pkg.fused", "fused"));
        assert!(!same_module("other._C", "pkg._C"));
        assert!(!same_module("my_C", "pkg._C"));
    }

    #[test]
    fn every_call_of_every_name_counts() {
        let src = PathBuf::from("/nonexistent/ops.cpp");
        let callers = PythonCallers::new(
            [("pkg._C".to_string(), vec![src.clone()])],
            [(
                "ops.py".to_string(),
                vec![
                    call("pkg._C", "run", vec![ext_calls::CONTIG], true),
                    call(
                        "pkg._C",
                        "run",
                        vec![ext_calls::CONTIG | ext_calls::DTYPE],
                        true,
                    ),
                    // Another extension's function of the same name: not this one's caller.
                    call("other._C", "run", vec![0], false),
                ],
            )],
        );
        let one = [binding("run", "run_cuda")];
        let seen = callers.seen(&src, &one, "run_cuda", 0).unwrap();
        assert_eq!(seen.props, CONTIG);
        assert!(seen.backward_only);
        assert_eq!(seen.sites.len(), 2);
        // A parameter past the arguments passed: nothing guaranteed.
        assert_eq!(callers.seen(&src, &one, "run_cuda", 1).unwrap().props, 0);
        // A second name for the same function that no visible code calls.
        let two = [binding("run", "run_cuda"), binding("run_v2", "run_cuda")];
        let seen = callers.seen(&src, &two, "run_cuda", 0).unwrap();
        assert_eq!((seen.props, seen.backward_only), (0, false));
        // A file that no build names: no caller is known.
        let elsewhere = Path::new("/nonexistent/other.cpp");
        assert_eq!(callers.seen(elsewhere, &one, "run_cuda", 0), None);
    }
}
