//! Facts about the functions of the file that the walk asks for by name: which helpers
//! synchronise the block through the helpers they call, and which functions hand out a shared
//! array (`SharedMemory<T>::getPointer()` returning an `extern __shared__` array).

use super::Ctx;
use crate::cuda::kernel::peel_pointer;
use crate::cuda::{last_name, CudaModel};
use crate::hash::{HashMap, HashSet};
use gpulint_syntax::{descendants, named_children, NodeExt};
use tree_sitter::Node;

/// Text of a block barrier in a function body.
const BARRIER_WORDS: &[&str] = &["__syncthreads", ".sync()", "bar.sync", "barrier.sync"];
/// Rounds of propagation through calls (the depth of helper chains followed).
const MAX_ROUNDS: usize = 16;
/// Nodes of a function body looked at for its `__shared__` arrays and returns.
const MAX_NODES: usize = 2048;

/// Does the text hold a block barrier?
pub(super) fn has_barrier_text(t: &str) -> bool {
    BARRIER_WORDS.iter().any(|w| t.contains(w))
}

/// The name a call is made by: `f`, `ns::f`, `f<T>`, `obj.f`, `obj->f`.
pub(super) fn call_name<'t>(m: &CudaModel<'t>, call: Node<'t>) -> Option<&'t str> {
    let f = call.field("function")?;
    let n = match f.kind_name() {
        "template_function" => f.field("name")?,
        "field_expression" => f.field("field")?,
        "identifier" | "qualified_identifier" => f,
        _ => return None,
    };
    Some(last_name(m.text(n)))
}

impl<'t> Ctx<'_, 't> {
    /// Does the function (an index into [`CudaModel::functions`]) call, directly or through
    /// other helpers of the file, a helper whose body holds a block barrier?
    pub fn synchronises_through_calls(&mut self, function: usize) -> bool {
        if self.syncing.is_none() {
            self.syncing = Some(self.synchronising());
        }
        self.syncing.as_ref().is_some_and(|s| s.contains(&function))
    }

    /// The functions that hold a barrier or call, transitively, a helper that does; a call
    /// resolves as [`Ctx::summary`] resolves it (the first helper of the name).
    fn synchronising(&self) -> HashSet<usize> {
        let m = self.m;
        let mut set: HashSet<usize> = m
            .helpers
            .iter()
            .filter(|h| {
                m.functions[h.function]
                    .node
                    .field("body")
                    .is_some_and(|b| has_barrier_text(m.text(b)))
            })
            .map(|h| h.function)
            .collect();
        for _ in 0..MAX_ROUNDS {
            let mut grew = false;
            for c in &m.device_calls {
                if set.contains(&c.caller) {
                    continue;
                }
                let syncs = self
                    .helper_by_name
                    .get(c.callee)
                    .is_some_and(|&h| set.contains(&m.helpers[h].function));
                if syncs {
                    set.insert(c.caller);
                    grew = true;
                }
            }
            if !grew {
                break;
            }
        }
        set
    }

    /// Is `v` (an initialiser, casts peeled) a call of a function of the file every definition
    /// of which returns the address of one of its `__shared__` arrays?
    pub fn returns_shared(&mut self, v: Node<'t>) -> bool {
        let m = self.m;
        let v = peel_pointer(v, m.source);
        if v.kind_name() != "call_expression" {
            return false;
        }
        let Some(name) = call_name(m, v) else {
            return false;
        };
        if self.shared_getters.is_none() {
            self.shared_getters = Some(shared_getters(m));
        }
        self.shared_getters
            .as_ref()
            .is_some_and(|g| g.contains(name))
    }
}

/// The names of the functions whose every definition returns one of its `__shared__` arrays.
fn shared_getters(m: &CudaModel<'_>) -> HashSet<String> {
    let mut all: HashMap<String, bool> = HashMap::default();
    for f in &m.functions {
        let Some(body) = f.node.field("body") else {
            continue;
        };
        let t = m.text(body);
        let yes = t.contains("__shared__") && t.contains("return") && returns_shared_array(m, body);
        *all.entry(last_name(&f.name).to_string()).or_insert(true) &= yes;
    }
    all.into_iter()
        .filter(|&(_, v)| v)
        .map(|(k, _)| k)
        .collect()
}

/// Does every `return` with a value in `body` return (a cast of) a `__shared__` array the
/// body declares, and is there one?
fn returns_shared_array<'t>(m: &CudaModel<'t>, body: Node<'t>) -> bool {
    let mut shared = HashSet::default();
    let mut returns = Vec::new();
    for n in descendants(body).take(MAX_NODES) {
        match n.kind_name() {
            "declaration" if m.text(n).contains("__shared__") => {
                for c in named_children(n) {
                    let d = match c.kind_name() {
                        "init_declarator" => c.field("declarator"),
                        "array_declarator" | "identifier" | "pointer_declarator" => Some(c),
                        _ => None,
                    };
                    if let Some(name) = d.and_then(|d| crate::cuda::kernel::declarator_name(d).0) {
                        shared.insert(m.text(name));
                    }
                }
            }
            "return_statement" => returns.extend(n.named_child(0)),
            "lambda_expression" | "function_definition" if n.id() != body.id() => return false,
            _ => {}
        }
    }
    !returns.is_empty()
        && returns.iter().all(|r| {
            let r = peel_pointer(*r, m.source);
            r.kind_name() == "identifier" && shared.contains(m.text(r))
        })
}
