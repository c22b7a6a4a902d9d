//! The Python semantic model: imports and aliases resolved to qualified names, scopes, the
//! function table and call graph, and module-level constant folding.
//!
//! Facts that need more than the walk are computed lazily, once per file, on first request:
//! [`PythonModel::order`] (execution order), [`PythonModel::tf`] (TensorFlow GPU-init boundary
//! and memory configuration), [`PythonModel::env_writes`] and [`PythonModel::recursion`].
//!
//! The model is collected by [`PythonBuilder`] (in `builder`); names are resolved in `resolve`,
//! bindings and constant folding live in `bindings`, and folded values in `value`.

mod bindings;
mod builder;
pub mod call_sites;
pub mod cells;
pub mod env;
pub mod ext_calls;
pub mod extensions;
pub mod jit;
pub mod mixed_precision;
pub mod order;
pub mod pins;
pub mod project;
pub mod recursion;
mod resolve;
pub mod setup_py;
pub mod tf;
pub mod tf_function;
pub mod torch;
pub mod training;
mod value;

pub use bindings::Env;
pub use builder::{build, PythonBuilder};
pub use value::{fold_binary, string_literal, Value};

use crate::hash::{HashMap, HashSet};
use gpulint_syntax::text;
use std::cell::{OnceCell, RefCell};
use tree_sitter::Node;

/// How deep constant folding and alias resolution may go (bounded, so hostile input such as a
/// 100k-deep nested expression cannot exhaust the stack).
const MAX_FOLD_DEPTH: usize = 48;

/// A name bound by an import statement.
#[derive(Debug, Clone)]
pub struct Import {
    /// The local name (`tf` in `import tensorflow as tf`).
    pub name: String,
    /// What it stands for (`tensorflow`).
    pub qualified: String,
    /// Index of the enclosing function in [`PythonModel::functions`], `None` at module level.
    pub scope: Option<usize>,
    /// Byte range of the whole import statement.
    pub start_byte: usize,
    pub end_byte: usize,
}

/// A `def`, with where it sits.
#[derive(Debug, Clone)]
pub struct Function<'t> {
    pub node: Node<'t>,
    pub name: String,
    /// The class it is defined in, when it is a method.
    pub class: Option<String>,
    /// The enclosing function, for nested functions.
    pub parent: Option<usize>,
    /// The `decorated_definition` around it, if any.
    pub decorators: Vec<Node<'t>>,
}

/// A `class`, with where it sits.
#[derive(Debug, Clone)]
pub struct Class<'t> {
    pub node: Node<'t>,
    pub name: String,
    /// The enclosing function, for classes defined inside one.
    pub parent: Option<usize>,
}

/// A module-level name bound by a plain assignment.
#[derive(Debug, Clone, Copy)]
struct Binding<'t> {
    value: Node<'t>,
    /// How many times the name is bound at module level (assignments, loops, imports, defs).
    count: u32,
}

/// Everything rules ask about a Python file.
pub struct PythonModel<'t> {
    pub source: &'t str,
    /// The module: the first tree's root.
    pub root: Node<'t>,
    /// Every root in execution order: one for a `.py` file, one per code cell in a notebook.
    pub roots: Vec<Node<'t>>,
    pub imports: Vec<Import>,
    pub functions: Vec<Function<'t>>,
    pub classes: Vec<Class<'t>>,
    /// Every call in the file, in document order, with its enclosing function.
    pub calls: Vec<(Node<'t>, Option<usize>)>,
    /// Assignments whose target is a subscript (`os.environ["X"] = ...`), in document order.
    pub subscript_assignments: Vec<Node<'t>>,
    /// Assignments whose target is an attribute (`config.gpu_options.allow_growth = True`).
    pub attribute_assignments: Vec<Node<'t>>,
    /// Every `assignment` and `augmented_assignment`, in document order.
    pub assignments: Vec<Node<'t>>,
    /// Every `for_statement` and `while_statement`, in document order.
    pub loops: Vec<Node<'t>>,
    /// Every `identifier`, in document order: what a question about every name of the file
    /// reads instead of walking the whole tree again.
    pub identifiers: Vec<Node<'t>>,
    /// Every `attribute` (`a.b`), in document order.
    pub attributes: Vec<Node<'t>>,
    /// Every call, assignment and augmented assignment in walk order (so by start byte), with
    /// the innermost lambda, `def`, class or decorated definition around it.
    exec_events: Vec<(Node<'t>, Option<Node<'t>>)>,
    /// The nodes that can bind a local name of a function, with that function: those its own
    /// body holds outside nested definitions and lambdas (see [`PythonModel::function_binds`]).
    binding_sites: Vec<(usize, Node<'t>)>,
    module_bindings: HashMap<&'t str, Binding<'t>>,
    /// Per function: local names bound by a plain `name = <dotted name>` assignment (aliases).
    local_aliases: HashMap<(usize, &'t str), Node<'t>>,
    /// `--flag` destinations of argparse `add_argument(..., default=...)`.
    argparse_defaults: HashMap<String, Node<'t>>,
    functions_by_name: HashMap<&'t str, Vec<usize>>,
    /// `function_definition` node id → index in `functions`.
    function_index: HashMap<usize, usize>,
    class_names: HashSet<String>,
    call_graph: OnceCell<CallGraph<'t>>,
    /// Per loop of `loops`: the innermost other loop whose byte range holds it.
    loop_parents: OnceCell<Vec<Option<usize>>>,
    name_index: OnceCell<bindings::NameIndex<'t>>,
    /// Per function: the names it binds itself (parameters, assignments, nested defs).
    locals: OnceCell<Vec<HashSet<&'t str>>>,
    order: OnceCell<order::ExecOrder<'t>>,
    tf: OnceCell<tf::TfFacts<'t>>,
    env_writes: OnceCell<Vec<env::EnvWrite<'t>>>,
    recursion: OnceCell<recursion::Recursion<'t>>,
    training: OnceCell<training::Training<'t>>,
    torch: OnceCell<torch::TorchFacts<'t>>,
    tf_functions: OnceCell<tf_function::TfFunctions<'t>>,
    /// Per local function: the indices in `calls` of the calls that invoke it (computed once;
    /// see [`call_sites`]).
    calls_to: OnceCell<HashMap<usize, Vec<usize>>>,
    jax_on_cpu: OnceCell<bool>,
    /// The parent of each node of the file's trees (filled by the builder's walk).
    parents: OnceCell<gpulint_syntax::Parents<'t>>,
    /// [`PythonModel::statement_of`] of the nodes already climbed through.
    statements: RefCell<HashMap<usize, Option<Node<'t>>>>,
    /// Every module the file imports, with each of its parent packages (`torch.nn.functional`
    /// gives `torch`, `torch.nn` and itself): [`PythonModel::imports_module`] without a scan
    /// of the imports (rules ask it for every call, and a file can import thousands of names).
    imported_modules: OnceCell<HashSet<String>>,
    /// The named children of the blocks asked about, by the block's node id (see
    /// [`PythonModel::block_statements`]).
    block_statements: RefCell<gpulint_syntax::NamedSiblings<'t>>,
    /// [`PythonModel::qualified_name`] of each expression asked about (by [`NodeKey`]): many
    /// rules and facts ask about the same calls, and each answer costs field look-ups up the
    /// expression and a scope search.
    qualified_names:
        RefCell<std::collections::HashMap<NodeKey, Option<String>, foldhash::fast::FixedState>>,
    /// [`PythonModel::local_callee`] of each call asked about: the execution order, the call
    /// graph, the TensorFlow facts and rules ask about the same calls, and each answer costs
    /// field look-ups and name searches.
    local_callees:
        RefCell<std::collections::HashMap<NodeKey, Option<usize>, foldhash::fast::FixedState>>,
}

/// A node of the model's trees as a hash key: its id (unique among the nodes of trees alive
/// together), with its kind and range.
type NodeKey = (usize, u16, usize, usize);

fn node_key(node: Node<'_>) -> NodeKey {
    (
        node.id(),
        node.kind_id(),
        node.start_byte(),
        node.end_byte(),
    )
}

/// The module's local call graph: for each function, the calls in its own body that invoke a
/// local function, and the same for module-level code.
#[derive(Debug, Default)]
pub struct CallGraph<'t> {
    /// `edges[f]`: `(call, callee)` for calls in the body of function `f`.
    pub edges: Vec<Vec<(Node<'t>, usize)>>,
    /// Calls at module level (outside any function) that invoke a local function.
    pub module: Vec<(Node<'t>, usize)>,
    /// `callers[f]`: how many call sites anywhere in the file invoke `f`.
    pub callers: Vec<u32>,
    /// `sites[f]`: the calls anywhere in the file that invoke `f`, with the function they sit
    /// in, in document order.
    pub sites: Vec<Vec<(Node<'t>, Option<usize>)>>,
}

impl<'t> PythonModel<'t> {
    pub fn text(&self, node: Node<'_>) -> &'t str {
        text(node, self.source)
    }

    /// Index of the innermost function whose body contains `node`.
    ///
    /// Found from byte ranges, not by walking up the tree: `Node::parent` descends from the
    /// root each time, so a parent walk costs depth² per node. Functions are recorded in
    /// document order and nest properly, so the innermost function containing `node` is the last
    /// one starting before it, or one of that function's ancestors.
    pub fn enclosing_function(&self, node: Node<'_>) -> Option<usize> {
        let (start, end) = (node.start_byte(), node.end_byte());
        let after = self
            .functions
            .partition_point(|f| f.node.start_byte() <= start);
        let mut cur = after.checked_sub(1);
        while let Some(i) = cur {
            let f = self.functions[i].node;
            if f.id() != node.id() && f.start_byte() <= start && end <= f.end_byte() {
                return Some(i);
            }
            cur = self.functions[i].parent;
        }
        None
    }

    /// The calls whose innermost function is `f`, in document order: only the calls inside
    /// `f`'s byte range are looked at, so asking for every function costs the calls times the
    /// nesting of functions, not the calls times the functions.
    pub fn calls_in(&self, f: usize) -> impl Iterator<Item = &(Node<'t>, Option<usize>)> + '_ {
        let node = self.functions[f].node;
        let (start, end) = (node.start_byte(), node.end_byte());
        let lo = self.calls.partition_point(|c| c.0.start_byte() < start);
        self.calls[lo..]
            .iter()
            .take_while(move |c| c.0.start_byte() < end)
            .filter(move |c| c.1 == Some(f))
    }

    /// Per loop of [`PythonModel::loops`], the innermost other loop whose byte range holds it
    /// (computed once; loops nest, so their ranges never cross).
    pub fn loop_parents(&self) -> &[Option<usize>] {
        self.loop_parents.get_or_init(|| {
            let mut parents = Vec::with_capacity(self.loops.len());
            let mut open: Vec<usize> = Vec::new();
            for (i, l) in self.loops.iter().enumerate() {
                while let Some(&top) = open.last() {
                    let t = self.loops[top];
                    if t.start_byte() <= l.start_byte() && l.end_byte() <= t.end_byte() {
                        break;
                    }
                    open.pop();
                }
                parents.push(open.last().copied());
                open.push(i);
            }
            parents
        })
    }

    /// The ancestors of `node`, innermost first, up to the root of its tree (module or notebook
    /// cell). Found once going down from the root: climbing with `Node::parent` descends from
    /// the root at every step, which is quadratic in the depth (a 200,000-deep expression).
    pub fn ancestors(&self, node: Node<'_>) -> Vec<Node<'t>> {
        let Some(root) = self
            .roots
            .iter()
            .find(|r| r.start_byte() <= node.start_byte() && node.end_byte() <= r.end_byte())
        else {
            return Vec::new();
        };
        let mut path = gpulint_syntax::ancestors_of(*root, node);
        path.reverse();
        path
    }

    /// The parent of `node`, as `Node::parent` gives it, from a table built once per file:
    /// `Node::parent` descends from the root on every call (see [`gpulint_syntax::Parents`]).
    pub fn parent(&self, node: Node<'_>) -> Option<Node<'t>> {
        self.parents()
            .parent(node)
            .or_else(|| self.token_parent(node))
    }

    /// The parent of a token the builder's walk does not record (see
    /// [`gpulint_syntax::is_plain_token`]): found going down from the root that holds it.
    /// Rules and facts climb from named nodes, so this is rarely asked.
    #[cold]
    fn token_parent(&self, node: Node<'_>) -> Option<Node<'t>> {
        if !gpulint_syntax::is_plain_token(node) {
            return None;
        }
        self.roots
            .iter()
            .filter(|r| r.start_byte() <= node.start_byte() && node.end_byte() <= r.end_byte())
            .find_map(|r| gpulint_syntax::ancestors_of(*r, node).last().copied())
    }

    /// The parent table of the file's trees (recorded by the builder during the walk that
    /// builds the model).
    pub fn parents(&self) -> &gpulint_syntax::Parents<'t> {
        self.parents
            .get_or_init(|| gpulint_syntax::Parents::of(self.roots.iter().copied()))
    }

    /// The named children of `block` (its statements and comments), listed the first time they
    /// are asked for: the statements before one of them are then found by a binary search, not
    /// by a walk of the block from its start (which, asked for every statement of a long
    /// block, grows with the square of its length).
    pub(crate) fn block_statements(&self, block: Node<'t>) -> std::rc::Rc<[Node<'t>]> {
        self.block_statements.borrow_mut().of(block)
    }

    /// The innermost ancestor of `node` that is a statement, a clause, a block or a module
    /// (an expression can be nested a hundred thousand levels deep; statements, each indented
    /// further, a few thousand at most in a file of the size limit). Climbs share their work:
    /// every expression node climbed through keeps the answer, so asking for every node of a
    /// deep expression costs its size, not its size times its depth.
    pub fn statement_of(&self, node: Node<'_>) -> Option<Node<'t>> {
        let mut known = self.statements.borrow_mut();
        let mut climbed = Vec::new();
        let mut cur = self.parent(node);
        let found = loop {
            let Some(p) = cur else { break None };
            if is_statement_level(gpulint_syntax::NodeExt::kind_name(&p)) {
                break Some(p);
            }
            if let Some(&answer) = known.get(&p.id()) {
                break answer;
            }
            climbed.push(p.id());
            cur = self.parent(p);
        };
        for id in climbed {
            known.insert(id, found);
        }
        found
    }

    /// The index of a `function_definition` node in [`PythonModel::functions`].
    pub fn function_of_node(&self, def: Node<'_>) -> Option<usize> {
        self.function_index.get(&def.id()).copied()
    }

    /// Does the file pin JAX to the CPU: does its text name `JAX_PLATFORMS` or
    /// `jax_platform_name` and `cpu`? Read once per file.
    pub fn jax_on_cpu(&self) -> bool {
        *self.jax_on_cpu.get_or_init(|| {
            let src = self.source;
            (src.contains("JAX_PLATFORMS") || src.contains("jax_platform_name"))
                && src.contains("cpu")
        })
    }

    /// Execution order of the module and of functions nobody in the file calls (computed once).
    pub fn order(&self) -> &order::ExecOrder<'t> {
        self.order.get_or_init(|| order::ExecOrder::build(self))
    }

    /// TensorFlow facts: GPU-init boundary, device configuration, memory limits (computed once).
    pub fn tf(&self) -> &tf::TfFacts<'t> {
        self.tf.get_or_init(|| tf::TfFacts::build(self))
    }

    /// Writes to the process environment (`os.environ[...] = ...`, `setdefault`, `putenv`).
    pub fn env_writes(&self) -> &[env::EnvWrite<'t>] {
        self.env_writes.get_or_init(|| env::collect(self))
    }

    /// Which local functions `tf.function` traces, and where `tf.function`s are created
    /// (computed once).
    pub fn tf_functions(&self) -> &tf_function::TfFunctions<'t> {
        self.tf_functions
            .get_or_init(|| tf_function::TfFunctions::build(self))
    }

    /// Recursive functions: cycles in the local call graph (computed once).
    pub fn recursion(&self) -> &recursion::Recursion<'t> {
        self.recursion
            .get_or_init(|| recursion::Recursion::build(self))
    }

    /// PyTorch training-loop facts: loops, `backward()`/`step()` positions, gradient-free
    /// regions, graph-attached values (computed once).
    pub fn training(&self) -> &training::Training<'t> {
        self.training
            .get_or_init(|| training::Training::build(self))
    }

    /// PyTorch and JAX device facts: CUDA / JAX initialization in execution order (computed once).
    pub fn torch(&self) -> &torch::TorchFacts<'t> {
        self.torch.get_or_init(|| torch::TorchFacts::build(self))
    }

    /// The calls and assignments under `node` (itself included), in document order, not looking
    /// into code that does not run there (function and class definitions, lambdas).
    ///
    /// Read from the list the walk recorded rather than by walking the subtree: a node of the
    /// list lies under `node` when its range does (a call or assignment never has the range of
    /// one of its descendants), and is left out when its innermost definition or lambda lies
    /// under `node` and is not `node` itself (such a node starts with its keyword or decorator,
    /// so a node of the same range is either itself or an ancestor of it).
    pub fn events_under(&self, node: Node<'_>) -> Vec<Node<'t>> {
        let (start, end) = (node.start_byte(), node.end_byte());
        let first = self
            .exec_events
            .partition_point(|(e, _)| e.start_byte() < start);
        self.exec_events[first..]
            .iter()
            .take_while(|(e, _)| e.start_byte() < end)
            .filter(|(e, barrier)| {
                e.end_byte() <= end
                    && barrier.is_none_or(|b| {
                        b.id() == node.id() || b.start_byte() < start || end < b.end_byte()
                    })
            })
            .map(|(e, _)| *e)
            .collect()
    }
}

/// Statements, clauses, blocks and modules: the nodes [`PythonModel::statement_of`] stops at.
fn is_statement_level(kind: &str) -> bool {
    kind.ends_with("_statement")
        || kind.ends_with("_clause")
        || matches!(
            kind,
            "block"
                | "module"
                | "function_definition"
                | "class_definition"
                | "decorated_definition"
        )
}

/// Helpers for the model's unit tests (in `bindings` and `resolve`).
#[cfg(test)]
mod tests {
    use super::*;
    use gpulint_syntax::{parse, Lang, NodeExt};

    /// Builds the model of `src` and hands it over with the tree's root.
    pub(super) fn model_of(src: &str, f: impl FnOnce(&PythonModel<'_>, Node<'_>)) {
        let tree = parse(Lang::Python, src).unwrap();
        let m = build(&tree, src);
        f(&m, tree.root_node());
    }

    /// The node of `kind` whose text is `snippet`.
    pub(super) fn find<'t>(root: Node<'t>, src: &str, kind: &str, snippet: &str) -> Node<'t> {
        gpulint_syntax::descendants(root)
            .find(|n| n.kind_name() == kind && text(*n, src) == snippet)
            .unwrap_or_else(|| panic!("no {kind} `{snippet}`"))
    }
}
