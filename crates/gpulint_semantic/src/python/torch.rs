//! PyTorch and JAX device facts: which calls initialize PyTorch's CUDA runtime (and with it the
//! caching allocator, which reads `PYTORCH_CUDA_ALLOC_CONF` once), which calls run the first JAX
//! computation (when JAX creates its GPU client and preallocates). The allocator configuration
//! syntax is in `crate::alloc_conf`.

use super::order::ExecOrder;
use super::{string_literal, PythonModel};
use crate::hash::HashMap;
use gpulint_syntax::named_children;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

/// `torch.cuda.*` functions that initialize CUDA (and the caching allocator).
const TORCH_CUDA_INIT: &[&str] = &[
    "init",
    "set_device",
    "synchronize",
    "empty_cache",
    "mem_get_info",
    "get_device_properties",
    "get_device_name",
    "FloatTensor",
    "HalfTensor",
    "LongTensor",
    "IntTensor",
    "ByteTensor",
    "set_per_process_memory_fraction",
];

/// `jax.*` functions that create the backend (and preallocate GPU memory).
const JAX_INIT: &[&str] = &[
    "devices",
    "local_devices",
    "device_count",
    "local_device_count",
    "device_put",
    "device_put_replicated",
    "device_put_sharded",
    "block_until_ready",
];

/// `jax.numpy` functions that do not compute anything.
const JNP_NON_OPS: &[&str] = &[
    "dtype",
    "issubdtype",
    "result_type",
    "promote_types",
    "finfo",
    "iinfo",
    "ndim",
    "shape",
    "size",
];

/// What initializes a runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    TorchCuda,
    Jax,
}

/// See the module documentation.
#[derive(Debug, Default)]
pub struct TorchFacts<'t> {
    inits: HashMap<usize, Runtime>,
    /// The init calls, in document order.
    pub init_calls: Vec<(Node<'t>, Runtime)>,
}

impl<'t> TorchFacts<'t> {
    pub(super) fn build(m: &PythonModel<'t>) -> TorchFacts<'t> {
        let mut f = TorchFacts::default();
        let torch = m.imports_torch();
        let jax = m.imports_jax();
        if !torch && !jax {
            return f;
        }
        for &(call, _) in &m.calls {
            let kind = if torch && torch_cuda_init(m, call) {
                Some(Runtime::TorchCuda)
            } else if jax && jax_init(m, call) {
                Some(Runtime::Jax)
            } else {
                None
            };
            if let Some(k) = kind {
                f.inits.insert(call.id(), k);
                f.init_calls.push((call, k));
            }
        }
        f
    }

    /// Does `call` initialize `rt`?
    pub fn initializes(&self, call: Node<'_>, rt: Runtime) -> bool {
        self.inits.get(&call.id()) == Some(&rt)
    }

    /// The first call that initializes `rt` when the module runs, else the first in the file.
    pub fn first_init(&self, order: &ExecOrder<'t>, rt: Runtime) -> Option<Node<'t>> {
        order
            .module()
            .iter()
            .find(|e| self.initializes(e.node, rt))
            .map(|e| e.node)
            .or_else(|| self.init_calls.iter().find(|(_, k)| *k == rt).map(|c| c.0))
    }

    /// The first event that initializes `rt` and runs before `node` (an event) in some sequence
    /// of the execution order (not in an exclusive branch).
    pub fn init_before(
        &self,
        order: &ExecOrder<'t>,
        node: Node<'_>,
        rt: Runtime,
    ) -> Option<Node<'t>> {
        if self.init_calls.iter().all(|(_, k)| *k != rt) {
            return None;
        }
        for seq in 0..order.sequences().len() {
            let events = order.events(seq);
            let Some(at) = events.iter().position(|e| e.node.id() == node.id()) else {
                continue;
            };
            let target = &events[at];
            if let Some(init) = events[..at]
                .iter()
                .find(|e| self.initializes(e.node, rt) && !order.exclusive(e, target))
            {
                return Some(init.node);
            }
        }
        None
    }
}

/// `.cuda()`, `.to("cuda")`, `torch.*(..., device="cuda")`, `torch.cuda.init()`, ...
fn torch_cuda_init(m: &PythonModel<'_>, call: Node<'_>) -> bool {
    let Some(func) = call.field("function") else {
        return false;
    };
    if func.kind_name() == "attribute" {
        let attr = func.field("attribute").map(|a| m.text(a)).unwrap_or("");
        if attr == "cuda" && m.qualified_name(func).is_none() {
            return true;
        }
        if attr == "to" {
            let first = call
                .field("arguments")
                .and_then(|a| named_children(a).find(|c| c.kind_name() != "comment"));
            let dev = match first {
                Some(a) if a.kind_name() == "keyword_argument" => {
                    if a.field("name").map(|n| m.text(n)) == Some("device") {
                        a.field("value")
                    } else {
                        None
                    }
                }
                a => a,
            };
            if dev.is_some_and(|d| is_cuda_device(m, d, 0)) {
                return true;
            }
        }
    }
    let Some(q) = m.qualified_name(func) else {
        return false;
    };
    if let Some(rest) = q.strip_prefix("torch.cuda.") {
        return TORCH_CUDA_INIT.contains(&rest);
    }
    if q.starts_with("torch.") && q != "torch.device" {
        if let Some(args) = call.field("arguments") {
            return named_children(args).any(|a| {
                a.kind_name() == "keyword_argument"
                    && a.field("name").map(|n| m.text(n)) == Some("device")
                    && a.field("value").is_some_and(|v| is_cuda_device(m, v, 0))
            });
        }
    }
    false
}

/// `"cuda"`, `"cuda:0"`, `torch.device("cuda")`, or a name assigned one of them.
fn is_cuda_device(m: &PythonModel<'_>, expr: Node<'_>, depth: usize) -> bool {
    if depth > 4 {
        return false;
    }
    match expr.kind_name() {
        "string" => string_literal(expr, m.source).is_some_and(|s| s.starts_with("cuda")),
        "call" => {
            let is_device = expr
                .field("function")
                .and_then(|f| m.qualified_name(f))
                .as_deref()
                == Some("torch.device");
            is_device
                && expr
                    .field("arguments")
                    .and_then(|a| named_children(a).next())
                    .is_some_and(|a| is_cuda_device(m, a, depth + 1))
        }
        "identifier" => m
            .last_assigned_before(m.text(expr), expr)
            .is_some_and(|r| is_cuda_device(m, r, depth + 1)),
        _ => false,
    }
}

/// `jnp.zeros(...)`, `jax.random.PRNGKey(0)`, `jax.devices()`, ...
fn jax_init(m: &PythonModel<'_>, call: Node<'_>) -> bool {
    let Some(q) = call.field("function").and_then(|f| m.qualified_name(f)) else {
        return false;
    };
    if let Some(rest) = q.strip_prefix("jax.numpy.") {
        return !rest.contains('.') && !JNP_NON_OPS.contains(&rest);
    }
    if let Some(rest) = q.strip_prefix("jax.random.") {
        return !rest.contains('.');
    }
    if let Some(rest) = q.strip_prefix("jax.") {
        return JAX_INIT.contains(&rest);
    }
    false
}
