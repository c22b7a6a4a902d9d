//! The Python semantic model: imports and aliases resolved to qualified names, scopes, the
//! function table and call graph, and module-level constant folding.
//!
//! Facts that need more than the walk are computed lazily, once per file, on first request:
//! [`PythonModel::order`] (execution order), [`PythonModel::tf`] (TensorFlow GPU-init boundary
//! and memory configuration), [`PythonModel::env_writes`] and [`PythonModel::recursion`].

pub mod env;
pub mod extensions;
pub mod jit;
pub mod mixed_precision;
pub mod order;
pub mod pins;
pub mod project;
pub mod recursion;
pub mod setup_py;
pub mod tf;
pub mod tf_function;
pub mod torch;
pub mod training;

use gpulint_syntax::NodeExt;
use gpulint_syntax::{descendants, named_children, text};
use std::cell::OnceCell;
use std::collections::{HashMap, HashSet};
use tree_sitter::{Node, Tree};

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

/// A folded constant.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Int(i128),
    Float(f64),
    Str(String),
    Bool(bool),
    None,
    Tuple(Vec<Value>),
}

impl Value {
    pub fn as_int(&self) -> Option<i128> {
        match self {
            Value::Int(i) => Some(*i),
            Value::Bool(b) => Some(*b as i128),
            Value::Float(f) if f.fract() == 0.0 && f.abs() < 1e30 => Some(*f as i128),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Float(f) => Some(*f),
            Value::Bool(b) => Some(*b as i64 as f64),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn truthy(&self) -> bool {
        match self {
            Value::Int(i) => *i != 0,
            Value::Float(f) => *f != 0.0,
            Value::Str(s) => !s.is_empty(),
            Value::Bool(b) => *b,
            Value::None => false,
            Value::Tuple(t) => !t.is_empty(),
        }
    }
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
    /// Per function: the names it binds itself (parameters, assignments, nested defs).
    locals: OnceCell<Vec<HashSet<&'t str>>>,
    order: OnceCell<order::ExecOrder<'t>>,
    tf: OnceCell<tf::TfFacts<'t>>,
    env_writes: OnceCell<Vec<env::EnvWrite<'t>>>,
    recursion: OnceCell<recursion::Recursion<'t>>,
    training: OnceCell<training::Training<'t>>,
    torch: OnceCell<torch::TorchFacts<'t>>,
    tf_functions: OnceCell<tf_function::TfFunctions<'t>>,
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
}

/// Collects the model during the checker's walk.
pub struct PythonBuilder<'t> {
    source: &'t str,
    model_imports: Vec<Import>,
    functions: Vec<Function<'t>>,
    classes: Vec<Class<'t>>,
    calls: Vec<(Node<'t>, Option<usize>)>,
    subscript_assignments: Vec<Node<'t>>,
    attribute_assignments: Vec<Node<'t>>,
    assignments: Vec<Node<'t>>,
    loops: Vec<Node<'t>>,
    exec_events: Vec<(Node<'t>, Option<Node<'t>>)>,
    binding_sites: Vec<(usize, Node<'t>)>,
    /// One entry per node the walk is inside of, innermost last.
    open: Vec<Open<'t>>,
    scope_stack: Vec<usize>,
    class_stack: Vec<(usize, String)>,
    module_bindings: HashMap<&'t str, Binding<'t>>,
    local_aliases: HashMap<(usize, &'t str), Node<'t>>,
    argparse_defaults: HashMap<String, Node<'t>>,
}

impl<'t> PythonBuilder<'t> {
    pub fn new(source: &'t str) -> Self {
        PythonBuilder {
            source,
            model_imports: Vec::new(),
            functions: Vec::new(),
            classes: Vec::new(),
            calls: Vec::new(),
            subscript_assignments: Vec::new(),
            attribute_assignments: Vec::new(),
            assignments: Vec::new(),
            loops: Vec::new(),
            exec_events: Vec::new(),
            binding_sites: Vec::new(),
            open: Vec::new(),
            scope_stack: Vec::new(),
            class_stack: Vec::new(),
            module_bindings: HashMap::new(),
            local_aliases: HashMap::new(),
            argparse_defaults: HashMap::new(),
        }
    }

    fn scope(&self) -> Option<usize> {
        self.scope_stack.last().copied()
    }

    pub fn enter(&mut self, node: Node<'t>) {
        let kind = node.kind_name();
        let parent = self.open.last();
        // The function whose own body holds this node (the body itself included).
        let local_to = parent.and_then(|p| match p.body {
            Some((body, f)) if body == node.id() => Some(f),
            _ => p.local_to_children,
        });
        let barrier = parent.and_then(|p| p.barrier);
        match kind {
            "assignment" | "augmented_assignment" => self.assignments.push(node),
            "for_statement" | "while_statement" => self.loops.push(node),
            _ => {}
        }
        if matches!(kind, "call" | "assignment" | "augmented_assignment") {
            self.exec_events.push((node, barrier));
        }
        if let Some(f) = local_to {
            if matches!(
                kind,
                "function_definition"
                    | "class_definition"
                    | "assignment"
                    | "augmented_assignment"
                    | "for_statement"
                    | "named_expression"
                    | "as_pattern_target"
            ) {
                self.binding_sites.push((f, node));
            }
        }
        self.enter_kind(node, kind);
        let definition = matches!(kind, "function_definition" | "class_definition" | "lambda");
        self.open.push(Open {
            local_to_children: if definition { None } else { local_to },
            body: (kind == "function_definition")
                .then(|| {
                    node.field("body")
                        .map(|b| (b.id(), self.functions.len() - 1))
                })
                .flatten(),
            barrier: if definition || kind == "decorated_definition" {
                Some(node)
            } else {
                barrier
            },
        });
    }

    fn enter_kind(&mut self, node: Node<'t>, kind: &str) {
        match kind {
            "import_statement" => self.import(node, None),
            "import_from_statement" => {
                let module = node
                    .field("module_name")
                    .map(|m| text(m, self.source).to_string());
                if let Some(module) = module {
                    self.import(node, Some(module));
                }
            }
            "function_definition" => {
                let name = node
                    .field("name")
                    .map(|n| text(n, self.source).to_string())
                    .unwrap_or_default();
                let class = self
                    .class_stack
                    .last()
                    .filter(|(depth, _)| *depth == self.scope_stack.len())
                    .map(|(_, c)| c.clone());
                let decorators = node
                    .parent()
                    .filter(|p| p.kind_name() == "decorated_definition")
                    .map(|p| {
                        named_children(p)
                            .filter(|c| c.kind_name() == "decorator")
                            .collect()
                    })
                    .unwrap_or_default();
                if self.scope_stack.is_empty() && class.is_none() {
                    self.bind_module_name(node, name.clone(), None);
                }
                self.functions.push(Function {
                    node,
                    name,
                    class,
                    parent: self.scope(),
                    decorators,
                });
                self.scope_stack.push(self.functions.len() - 1);
            }
            "class_definition" => {
                let name = node
                    .field("name")
                    .map(|n| text(n, self.source).to_string())
                    .unwrap_or_default();
                self.classes.push(Class {
                    node,
                    name: name.clone(),
                    parent: self.scope(),
                });
                self.class_stack.push((self.scope_stack.len(), name));
            }
            "call" => {
                self.calls.push((node, self.scope()));
                self.argparse(node);
            }
            "assignment" => self.assignment(node),
            "augmented_assignment" | "for_statement" | "with_item" | "named_expression"
                if self.scope_stack.is_empty() && self.class_stack.is_empty() =>
            {
                let target = node
                    .field("left")
                    .or_else(|| node.field("name"))
                    .or_else(|| node.field("value"));
                if let Some(target) = target {
                    for id in identifiers_in_target(target) {
                        let name = text(id, self.source);
                        self.module_bindings
                            .entry(name)
                            .and_modify(|b| b.count += 2)
                            .or_insert(Binding {
                                value: node,
                                count: 2,
                            });
                    }
                }
            }
            _ => {}
        }
    }

    pub fn leave(&mut self, node: Node<'t>) {
        self.open.pop();
        match node.kind_name() {
            "function_definition" => {
                self.scope_stack.pop();
            }
            "class_definition" => {
                self.class_stack.pop();
            }
            _ => {}
        }
    }

    fn bind_module_name(&mut self, value: Node<'t>, name: String, _q: Option<()>) {
        let Some(name) = self
            .source
            .get(value.start_byte()..value.end_byte())
            .and_then(|_| {
                // Keep a borrowed &'t str for the name: find it in the source.
                find_name(self.source, value, &name)
            })
        else {
            return;
        };
        self.module_bindings
            .entry(name)
            .and_modify(|b| b.count += 1)
            .or_insert(Binding { value, count: 1 });
    }

    fn import(&mut self, node: Node<'t>, from_module: Option<String>) {
        let module_node = node.field("module_name");
        for child in named_children(node) {
            if Some(child) == module_node {
                continue;
            }
            let (path, alias) = match child.kind_name() {
                "dotted_name" => (text(child, self.source).to_string(), None),
                "aliased_import" => {
                    let path = child
                        .field("name")
                        .map(|n| text(n, self.source).to_string())
                        .unwrap_or_default();
                    let alias = child
                        .field("alias")
                        .map(|n| text(n, self.source).to_string());
                    (path, alias)
                }
                _ => continue,
            };
            let path = compact_dotted(&path);
            let (name, qualified) = match (&from_module, alias) {
                (None, Some(alias)) => (alias, path),
                // `import a.b.c` binds `a`.
                (None, None) => {
                    let head = path.split('.').next().unwrap_or("").to_string();
                    (head.clone(), head)
                }
                (Some(module), alias) => {
                    let module = compact_dotted(module);
                    let qualified = if module.ends_with('.') {
                        format!("{module}{path}")
                    } else {
                        format!("{module}.{path}")
                    };
                    (alias.unwrap_or(path), qualified)
                }
            };
            if self.scope_stack.is_empty() {
                if let Some(n) = find_name(self.source, child, &name) {
                    self.module_bindings
                        .entry(n)
                        .and_modify(|b| b.count += 1)
                        .or_insert(Binding {
                            value: child,
                            count: 1,
                        });
                }
            }
            self.model_imports.push(Import {
                name,
                qualified,
                scope: self.scope(),
                start_byte: node.start_byte(),
                end_byte: node.end_byte(),
            });
        }
    }

    fn assignment(&mut self, node: Node<'t>) {
        let (Some(left), right) = (node.field("left"), node.field("right")) else {
            return;
        };
        match left.kind_name() {
            "subscript" => self.subscript_assignments.push(node),
            "attribute" => self.attribute_assignments.push(node),
            _ => {}
        }
        let in_class_body = self
            .class_stack
            .last()
            .is_some_and(|(depth, _)| *depth == self.scope_stack.len());
        if in_class_body {
            return;
        }
        match self.scope() {
            None => {
                let ids = identifiers_in_target(left);
                let simple = left.kind_name() == "identifier";
                for id in ids {
                    let name = text(id, self.source);
                    let value = match (simple, right) {
                        (true, Some(r)) => r,
                        _ => node,
                    };
                    let extra = if simple && right.is_some() { 1 } else { 2 };
                    self.module_bindings
                        .entry(name)
                        .and_modify(|b| b.count += extra)
                        .or_insert(Binding {
                            value,
                            count: extra,
                        });
                }
            }
            Some(f) => {
                if left.kind_name() == "identifier" {
                    if let Some(r) =
                        right.filter(|r| matches!(r.kind_name(), "attribute" | "identifier"))
                    {
                        self.local_aliases.insert((f, text(left, self.source)), r);
                    }
                }
            }
        }
    }

    /// `parser.add_argument("--batch-size", type=int, default=64)` → `batch_size` ↦ `64`.
    fn argparse(&mut self, call: Node<'t>) {
        let Some(func) = call.field("function") else {
            return;
        };
        if func.kind_name() != "attribute"
            || func.field("attribute").map(|a| text(a, self.source)) != Some("add_argument")
        {
            return;
        }
        let Some(args) = call.field("arguments") else {
            return;
        };
        let mut dest: Option<String> = None;
        let mut long: Option<String> = None;
        let mut default = None;
        for arg in named_children(args) {
            match arg.kind_name() {
                "string" => {
                    let s = string_literal(arg, self.source).unwrap_or_default();
                    if let Some(flag) = s.strip_prefix("--") {
                        long.get_or_insert_with(|| flag.replace('-', "_"));
                    } else if !s.starts_with('-') && dest.is_none() {
                        dest = Some(s);
                    }
                }
                "keyword_argument" => {
                    let key = arg.field("name").map(|n| text(n, self.source));
                    let value = arg.field("value");
                    match key {
                        Some("default") => default = value,
                        Some("dest") => {
                            dest = value.and_then(|v| string_literal(v, self.source));
                        }
                        _ => {}
                    }
                }
                _ => {}
            }
        }
        if let (Some(name), Some(value)) = (dest.or(long), default) {
            self.argparse_defaults.insert(name, value);
        }
    }

    pub fn finish(self, tree: &'t Tree) -> PythonModel<'t> {
        let mut functions_by_name: HashMap<&'t str, Vec<usize>> = HashMap::new();
        let mut function_index = HashMap::with_capacity(self.functions.len());
        for (i, f) in self.functions.iter().enumerate() {
            if let Some(n) = f.node.field("name") {
                functions_by_name
                    .entry(text(n, self.source))
                    .or_default()
                    .push(i);
            }
            function_index.insert(f.node.id(), i);
        }
        let class_names = self.classes.iter().map(|c| c.name.clone()).collect();
        PythonModel {
            source: self.source,
            root: tree.root_node(),
            roots: vec![tree.root_node()],
            imports: self.model_imports,
            functions: self.functions,
            classes: self.classes,
            calls: self.calls,
            subscript_assignments: self.subscript_assignments,
            attribute_assignments: self.attribute_assignments,
            assignments: self.assignments,
            loops: self.loops,
            exec_events: self.exec_events,
            binding_sites: self.binding_sites,
            module_bindings: self.module_bindings,
            local_aliases: self.local_aliases,
            argparse_defaults: self.argparse_defaults,
            functions_by_name,
            function_index,
            class_names,
            call_graph: OnceCell::new(),
            locals: OnceCell::new(),
            order: OnceCell::new(),
            tf: OnceCell::new(),
            env_writes: OnceCell::new(),
            recursion: OnceCell::new(),
            training: OnceCell::new(),
            torch: OnceCell::new(),
            tf_functions: OnceCell::new(),
        }
    }
}

/// What the builder keeps about a node the walk is inside of.
struct Open<'t> {
    /// The function whose own body holds this node's children: not the children of a nested
    /// `def`, class or lambda (except a `def`'s body, which is its own function's).
    local_to_children: Option<usize>,
    /// For a `def`: its body's node id and the function's index.
    body: Option<(usize, usize)>,
    /// The innermost lambda, `def`, class or decorated definition around this node's children
    /// (this node included).
    barrier: Option<Node<'t>>,
}

/// Builds the model of a parsed file with the same enter/leave walk the checker does (for
/// files read on the side, such as a sibling setup module, and for tests).
pub fn build<'t>(tree: &'t Tree, source: &'t str) -> PythonModel<'t> {
    let mut b = PythonBuilder::new(source);
    gpulint_syntax::walk(tree, |node, entering| {
        if entering {
            b.enter(node)
        } else {
            b.leave(node)
        }
    });
    b.finish(tree)
}

/// `a . b` (with spaces or line continuations) → `a.b`.
fn compact_dotted(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_whitespace() && *c != '\\')
        .collect()
}

fn find_name<'t>(source: &'t str, node: Node<'_>, name: &str) -> Option<&'t str> {
    let region = source.get(node.start_byte()..node.end_byte())?;
    let at = region.rfind(name)?;
    source.get(node.start_byte() + at..node.start_byte() + at + name.len())
}

/// The identifiers a target binds (`a`, `a, b`, `(a, [b, c])`); attribute and subscript
/// targets bind nothing.
fn identifiers_in_target(target: Node<'_>) -> Vec<Node<'_>> {
    let mut out = Vec::new();
    let mut stack = vec![target];
    while let Some(n) = stack.pop() {
        match n.kind_name() {
            "identifier" => out.push(n),
            "pattern_list"
            | "tuple_pattern"
            | "list_pattern"
            | "tuple"
            | "list"
            | "expression_list"
            | "parenthesized_expression"
            | "list_splat_pattern"
            | "as_pattern_target" => stack.extend(named_children(n)),
            _ => {}
        }
    }
    out
}

/// The value of a plain string literal (no f-string interpolation), quotes removed.
pub fn string_literal(node: Node<'_>, source: &str) -> Option<String> {
    if node.kind_name() == "concatenated_string" {
        let mut s = String::new();
        for part in named_children(node) {
            s.push_str(&string_literal(part, source)?);
        }
        return Some(s);
    }
    if node.kind_name() != "string" {
        return None;
    }
    let mut out = String::new();
    for part in named_children(node) {
        match part.kind_name() {
            "string_content" => out.push_str(text(part, source)),
            "interpolation" => return None,
            "escape_sequence" => out.push_str(&unescape(text(part, source))),
            _ => {}
        }
    }
    Some(out)
}

fn unescape(esc: &str) -> String {
    match esc {
        "\\n" => "\n".into(),
        "\\t" => "\t".into(),
        "\\\\" => "\\".into(),
        "\\'" => "'".into(),
        "\\\"" => "\"".into(),
        other => other.to_string(),
    }
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

    /// The index of a `function_definition` node in [`PythonModel::functions`].
    pub fn function_of_node(&self, def: Node<'_>) -> Option<usize> {
        self.function_index.get(&def.id()).copied()
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

    /// The local call graph (computed once).
    pub fn call_graph(&self) -> &CallGraph<'t> {
        self.call_graph.get_or_init(|| {
            let mut g = CallGraph {
                edges: vec![Vec::new(); self.functions.len()],
                module: Vec::new(),
                callers: vec![0; self.functions.len()],
            };
            for &(call, scope) in &self.calls {
                let Some(callee) = self.local_callee(call) else {
                    continue;
                };
                g.callers[callee] += 1;
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
                    && c.node
                        .parent()
                        .and_then(|p| {
                            gpulint_syntax::ancestor_of_kind(
                                p,
                                &["class_definition", "function_definition"],
                            )
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
            let parent = def
                .parent()
                .filter(|p| p.kind_name() != "decorated_definition")
                .or_else(|| def.parent()?.parent());
            parent.is_some_and(|p| p.id() == body.id())
        })
    }

    /// The qualified name an expression stands for, through imports and aliases:
    /// `tf.config.experimental.set_memory_growth`, `K.clear_session` → `keras.backend.clear_session`.
    /// `None` when the head of the name is not bound to an import.
    pub fn qualified_name(&self, expr: Node<'_>) -> Option<String> {
        self.qualified_name_depth(expr, 0)
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
            if let Some(imp) = self
                .imports
                .iter()
                .rev()
                .find(|i| i.scope == scope && i.name == name)
            {
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
        self.imports.iter().any(|i| {
            i.qualified == module
                || i.qualified
                    .strip_prefix(module)
                    .is_some_and(|rest| rest.starts_with('.'))
        })
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
    pub fn local_callee(&self, call: Node<'_>) -> Option<usize> {
        let func = call.field("function")?;
        let caller = self.enclosing_function(func);
        match func.kind_name() {
            "identifier" => {
                let name = self.text(func);
                let candidates = self.functions_named(name);
                if candidates.is_empty() || self.qualified_name(func).is_some() {
                    return None;
                }
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
                let class = self.functions[caller?].class.as_ref()?;
                self.functions_named(name)
                    .iter()
                    .copied()
                    .find(|&c| self.functions[c].class.as_ref() == Some(class))
            }
            _ => None,
        }
    }

    /// Local functions called from the body of function `f` (not from functions nested in it).
    pub fn callees(&self, f: usize) -> Vec<(Node<'t>, usize)> {
        self.call_graph().edges.get(f).cloned().unwrap_or_default()
    }

    /// The value of a module-level name bound several times, where module-level code at `at`
    /// uses it: the last plain `name = <value>` statement before `at` at the top level of the
    /// same module or notebook cell (module code runs top to bottom; cells run in any order, so
    /// other cells do not count), provided nothing between them binds the name again. `None`
    /// when that is not certain: a use inside a function, an assignment under `if`/`for`/`try`,
    /// or a rebinding in between.
    pub fn module_value_at(&self, name: &str, at: Node<'_>) -> Option<Node<'t>> {
        if self.enclosing_function(at).is_some() {
            return None;
        }
        let hi = self
            .assignments
            .partition_point(|a| a.start_byte() < at.start_byte());
        let assign = *self.assignments[..hi].iter().rev().find(|a| {
            a.kind_name() == "assignment"
                && a.end_byte() <= at.start_byte()
                && a.field("left")
                    .is_some_and(|l| l.kind_name() == "identifier" && self.text(l) == name)
        })?;
        // A top-level statement of the cell (or module) that holds the use.
        let stmt = assign
            .parent()
            .filter(|p| p.kind_name() == "expression_statement")?;
        let root = stmt.parent().filter(|r| r.parent().is_none())?;
        let mut top = at;
        for _ in 0..4096 {
            match top.parent() {
                Some(p) if p.id() == root.id() => break,
                Some(p) => top = p,
                None => return None,
            }
        }
        if top.parent().map(|p| p.id()) != Some(root.id()) {
            return None;
        }
        // Nothing in between rebinds the name.
        let between = named_children(root)
            .filter(|c| c.start_byte() >= stmt.end_byte() && c.start_byte() <= top.start_byte());
        for c in between {
            for n in descendants(c) {
                if n.start_byte() >= at.start_byte() {
                    break;
                }
                if n.kind_name() == "identifier" && self.text(n) == name && binds(n) {
                    return None;
                }
            }
        }
        assign.field("right")
    }

    /// The value node of a module-level name bound exactly once (`REQUIRED = [...]`).
    pub fn module_value(&self, name: &str) -> Option<Node<'t>> {
        self.module_bindings
            .get(name)
            .filter(|b| b.count == 1)
            .map(|b| b.value)
    }

    /// The folded value of a constant expression: literals, tuples, arithmetic, module-level
    /// names bound once, and argparse defaults (`args.batch_size`).
    pub fn const_value(&self, expr: Node<'_>) -> Option<Value> {
        self.fold(expr, 0)
    }

    fn fold(&self, expr: Node<'_>, depth: usize) -> Option<Value> {
        if depth > MAX_FOLD_DEPTH {
            return None;
        }
        let d = depth + 1;
        match expr.kind_name() {
            "integer" => parse_int(self.text(expr)).map(Value::Int),
            "float" => self
                .text(expr)
                .replace('_', "")
                .parse::<f64>()
                .ok()
                .map(Value::Float),
            "true" => Some(Value::Bool(true)),
            "false" => Some(Value::Bool(false)),
            "none" => Some(Value::None),
            "string" | "concatenated_string" => string_literal(expr, self.source).map(Value::Str),
            "parenthesized_expression" => self.fold(expr.named_child(0)?, d),
            "tuple" | "list" => {
                let mut items = Vec::new();
                for c in named_children(expr) {
                    if c.kind_name() == "comment" {
                        continue;
                    }
                    items.push(self.fold(c, d)?);
                }
                Some(Value::Tuple(items))
            }
            "unary_operator" => {
                let v = self.fold(expr.field("argument")?, d)?;
                let op = self.text(expr.field("operator")?);
                match (op, v) {
                    ("-", Value::Int(i)) => Some(Value::Int(-i)),
                    ("-", Value::Float(f)) => Some(Value::Float(-f)),
                    ("+", v @ (Value::Int(_) | Value::Float(_))) => Some(v),
                    _ => None,
                }
            }
            "binary_operator" => {
                let l = self.fold(expr.field("left")?, d)?;
                let r = self.fold(expr.field("right")?, d)?;
                let op = self.text(expr.field("operator")?);
                fold_binary(op, l, r)
            }
            "identifier" => {
                let name = self.text(expr);
                // A local variable shadows the module constant: only fold at module level or
                // when the function does not bind the name itself.
                if let Some(f) = self.enclosing_function(expr) {
                    if self.function_binds(f, name) {
                        return None;
                    }
                }
                let b = self.module_bindings.get(name)?;
                if b.count != 1 {
                    return self.fold(self.module_value_at(name, expr)?, d);
                }
                if b.value.id() == expr.id() {
                    return None;
                }
                self.fold(b.value, d)
            }
            "attribute" => {
                // `args.batch_size` where `args` comes from `parse_args()`.
                let attr = self.text(expr.field("attribute")?);
                let object = expr.field("object")?;
                if object.kind_name() == "identifier" && !self.argparse_defaults.is_empty() {
                    if let Some(v) = self.argparse_defaults.get(attr) {
                        return self.fold(*v, d);
                    }
                }
                None
            }
            _ => None,
        }
    }

    /// The right-hand side of the last plain `name = <value>` before `at` in the file (in
    /// source order, whatever the scope): a cheap "what was it set to" for flow-insensitive
    /// facts.
    pub fn last_assigned_before(&self, name: &str, at: Node<'_>) -> Option<Node<'t>> {
        let hi = self
            .assignments
            .partition_point(|a| a.start_byte() < at.start_byte());
        self.assignments[..hi]
            .iter()
            .rev()
            .find(|a| {
                a.kind_name() == "assignment" && a.field("left").map(|l| self.text(l)) == Some(name)
            })?
            .field("right")
    }

    /// The value a plain name is bound to where it is used: the single `name = <value>` in the
    /// enclosing function's own body, else the module-level binding when the name is bound once
    /// there and not by the function. `None` when it is bound several times or not at all.
    pub fn value_of_name(&self, at: Node<'_>, name: &str) -> Option<Node<'t>> {
        if let Some(f) = self.enclosing_function(at) {
            if self.function_binds(f, name) {
                let body = self.functions[f].node.field("body")?;
                let mut found = None;
                for n in self.assignments_within(body) {
                    if n.kind_name() != "assignment" {
                        continue;
                    }
                    if self.enclosing_function(n) != Some(f) {
                        continue;
                    }
                    let Some(left) = n.field("left") else {
                        continue;
                    };
                    if left.kind_name() == "identifier" && self.text(left) == name {
                        if found.is_some() {
                            return None;
                        }
                        found = n.field("right");
                    }
                }
                return found;
            }
        }
        let b = self.module_bindings.get(name)?;
        if b.count != 1 {
            return self.module_value_at(name, at);
        }
        (b.value.kind_name() != "assignment" && b.value.id() != at.id()).then_some(b.value)
    }

    /// The assignments and augmented assignments under `node` (itself included), in document
    /// order: read from the walk's list by byte range (an assignment never has the range of
    /// one of its descendants, so one of `node`'s range is `node` or under it).
    pub fn assignments_within(&self, node: Node<'_>) -> impl Iterator<Item = Node<'t>> + '_ {
        let (start, end) = (node.start_byte(), node.end_byte());
        let first = self.assignments.partition_point(|a| a.start_byte() < start);
        self.assignments[first..]
            .iter()
            .take_while(move |a| a.start_byte() < end)
            .filter(move |a| a.end_byte() <= end)
            .copied()
    }

    /// Does function `f` bind `name` as a parameter or by assignment in its own body (including
    /// `global x; x = ...`, which rebinds the module's `x`)?
    pub fn function_binds(&self, f: usize, name: &str) -> bool {
        self.locals
            .get_or_init(|| self.compute_locals())
            .get(f)
            .is_some_and(|l| l.contains(name))
    }

    /// The names each function binds: its parameters, and the binding sites the walk found in
    /// its own body.
    fn compute_locals(&self) -> Vec<HashSet<&'t str>> {
        let mut out: Vec<HashSet<&'t str>> = self
            .functions
            .iter()
            .map(|f| {
                let mut names = HashSet::new();
                if let Some(params) = f.node.field("parameters") {
                    for p in named_children(params) {
                        let id = match p.kind_name() {
                            "identifier" => Some(p),
                            "default_parameter" | "typed_default_parameter" => p.field("name"),
                            _ => named_children(p).find(|c| c.kind_name() == "identifier"),
                        };
                        if let Some(id) = id {
                            names.insert(self.text(id));
                        }
                    }
                }
                names
            })
            .collect();
        for &(f, n) in &self.binding_sites {
            let names = &mut out[f];
            match n.kind_name() {
                "function_definition" | "class_definition" | "named_expression" => {
                    if let Some(name) = n.field("name") {
                        names.insert(self.text(name));
                    }
                }
                "assignment" | "augmented_assignment" | "for_statement" => {
                    if let Some(left) = n.field("left") {
                        names.extend(identifiers_in_target(left).iter().map(|i| self.text(*i)));
                    }
                }
                "as_pattern_target" => {
                    names.extend(identifiers_in_target(n).iter().map(|i| self.text(*i)));
                }
                _ => {}
            }
        }
        out
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

fn parse_int(s: &str) -> Option<i128> {
    let s = s.replace('_', "");
    let lower = s.to_ascii_lowercase();
    let lower = lower.trim_end_matches('l');
    if let Some(h) = lower.strip_prefix("0x") {
        i128::from_str_radix(h, 16).ok()
    } else if let Some(o) = lower.strip_prefix("0o") {
        i128::from_str_radix(o, 8).ok()
    } else if let Some(b) = lower.strip_prefix("0b") {
        i128::from_str_radix(b, 2).ok()
    } else {
        lower.parse().ok()
    }
}

/// Python's binary operators on folded constants (`None` where the result is not a constant
/// worth keeping: overflow, division by zero, unsupported operand types).
/// Does this occurrence of an identifier bind it (an assignment target, a loop variable, an
/// import, a definition, `global`, `del`)?
fn binds(n: Node<'_>) -> bool {
    let Some(p) = n.parent() else {
        return false;
    };
    let is = |f: &str| p.field(f).is_some_and(|x| x.id() == n.id());
    match p.kind_name() {
        "assignment" | "augmented_assignment" => p
            .field("left")
            .is_some_and(|l| l.byte_range().contains(&n.start_byte())),
        "pattern_list" | "tuple_pattern" | "list_pattern" | "list_splat_pattern"
        | "as_pattern_target" | "aliased_import" | "dotted_name" | "global_statement"
        | "nonlocal_statement" | "delete_statement" => true,
        "for_statement" => is("left"),
        "named_expression" => is("name"),
        "function_definition" | "class_definition" => is("name"),
        _ => false,
    }
}

pub fn fold_binary(op: &str, l: Value, r: Value) -> Option<Value> {
    use Value::{Float, Int, Str, Tuple};
    match (l, r) {
        (Int(a), Int(b)) => match op {
            "+" => a.checked_add(b).map(Int),
            "-" => a.checked_sub(b).map(Int),
            "*" => a.checked_mul(b).map(Int),
            "//" if b != 0 => Some(Int(a.div_euclid(b))),
            "%" if b != 0 => Some(Int(a.rem_euclid(b))),
            "/" if b != 0 => Some(Float(a as f64 / b as f64)),
            "**" if (0..=127).contains(&b) => a.checked_pow(b as u32).map(Int),
            "<<" if (0..=126).contains(&b) => a.checked_shl(b as u32).map(Int),
            ">>" if (0..=127).contains(&b) => Some(Int(a >> b)),
            _ => None,
        },
        (a @ (Int(_) | Float(_)), b @ (Int(_) | Float(_))) => {
            let (x, y) = (a.as_f64()?, b.as_f64()?);
            let v = match op {
                "+" => x + y,
                "-" => x - y,
                "*" => x * y,
                "/" if y != 0.0 => x / y,
                "//" if y != 0.0 => (x / y).floor(),
                "**" => x.powf(y),
                _ => return None,
            };
            v.is_finite().then_some(Float(v))
        }
        (Str(a), Str(b)) if op == "+" => Some(Str(a + &b)),
        (Tuple(a), Tuple(b)) if op == "+" => Some(Tuple([a, b].concat())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpulint_syntax::{parse, Lang};

    fn model_of(src: &str, f: impl FnOnce(&PythonModel<'_>, Node<'_>)) {
        let tree = parse(Lang::Python, src).unwrap();
        let m = build(&tree, src);
        f(&m, tree.root_node());
    }

    #[test]
    fn name_bound_twice_folds_to_the_last_top_level_assignment_before_the_use() {
        // The use in `range(k)` sees the second `k = 4`; `range(n)` sees nothing certain (an
        // `if` assigns it); `range(j)` has a loop rebinding `j` in between.
        let src = "k = 10\nk = 4\nfor i in range(k):\n    pass\nk = 99\nn = 1\nif c:\n    n = 50\nfor i in range(n):\n    pass\nj = 2\nfor j in x:\n    pass\nfor i in range(j):\n    pass\n";
        model_of(src, |m, root| {
            let arg = |call: &str| {
                let c = find(root, src, "call", call);
                m.const_value(c.field("arguments").unwrap().named_child(0).unwrap())
                    .and_then(|v| v.as_int())
            };
            assert_eq!(arg("range(k)"), Some(4));
            assert_eq!(arg("range(n)"), None);
            assert_eq!(arg("range(j)"), None);
        });
    }

    fn find<'t>(root: Node<'t>, src: &str, kind: &str, snippet: &str) -> Node<'t> {
        gpulint_syntax::descendants(root)
            .find(|n| n.kind_name() == kind && text(*n, src) == snippet)
            .unwrap_or_else(|| panic!("no {kind} `{snippet}`"))
    }

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
    fn folds_constants_and_argparse_defaults() {
        let src = "N = 4\nM = N * 256 + 1\nS = (N, 2 ** 10)\nX = 1\nX = 2\nparser.add_argument('--batch-size', type=int, default=M)\nargs = parser.parse_args()\nuse(M, S, X, args.batch_size)\n";
        model_of(src, |m, root| {
            let v = |s| m.const_value(find(root, src, "identifier", s));
            assert_eq!(v("M"), Some(Value::Int(1025)));
            assert_eq!(
                v("S"),
                Some(Value::Tuple(vec![Value::Int(4), Value::Int(1024)]))
            );
            assert_eq!(v("X"), None, "bound twice");
            let a = find(root, src, "attribute", "args.batch_size");
            assert_eq!(m.const_value(a), Some(Value::Int(1025)));
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
}
