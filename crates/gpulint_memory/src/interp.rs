//! A small abstract interpreter over the file: it runs module code and the functions it calls,
//! with constants, symbolic tensors, layers and model objects as values, to learn which models
//! the file builds and how they are trained. Everything is bounded (statements, call depth,
//! loop iterations), and whatever it cannot follow becomes `Unknown` with a reason.
//!
//! This module holds the interpreter's state, name look-up and binding; statements are in
//! [`statements`], branches under unknown conditions in [`branches`], the file's classes in
//! [`classes`], calls of its functions in [`functions`].

mod branches;
mod classes;
mod functions;
mod statements;

pub use classes::{is_torch_module, ClassDef};
pub use statements::Flow;

use super::value::{App, LayerDef, Obj, Optimizer, Tensor, Val};
use gpulint_semantic::hash::HashMap;
use gpulint_semantic::python::PythonModel;
use std::rc::Rc;
use tree_sitter::Node;

/// Statements and expressions evaluated per file, at most.
const MAX_STEPS: usize = 30_000;
/// Nested calls of the file's own functions, at most.
const MAX_DEPTH: usize = 12;
/// Nesting of expressions, statements and calls together, at most: no input, however deep,
/// can take the interpreter deeper than this.
pub const MAX_NESTING: usize = 64;
/// Iterations of one unrolled loop, at most.
pub const MAX_UNROLL: usize = 256;

/// Writes to names, with what they replaced: (global, frame id, name, previous value).
type Journal = Vec<(bool, usize, String, Option<Val>)>;

/// One activation record.
#[derive(Debug, Clone, Default)]
pub struct Frame {
    pub locals: HashMap<String, Val>,
    /// `None` at module level (names go to the globals).
    pub func: Option<usize>,
    pub self_obj: Option<usize>,
    pub class: Option<usize>,
    /// A `return` taken under a condition whose value is unknown.
    pub pending: Option<Val>,
    /// Identifies the frame in the undo journals.
    pub id: usize,
}

pub struct Interp<'a, 't> {
    pub pm: &'a PythonModel<'t>,
    pub src: &'t str,
    pub reasons: Vec<String>,
    pub lists: Vec<Vec<Val>>,
    pub tensors: Vec<Tensor>,
    pub apps: Vec<App>,
    pub layers: Vec<LayerDef>,
    pub objs: Vec<Obj>,
    pub optimizers: Vec<Optimizer>,
    pub classes: Vec<ClassDef<'t>>,
    pub globals: HashMap<String, Val>,
    /// The first variable each model object was bound to.
    pub var_names: HashMap<usize, String>,
    pub keras_names: HashMap<String, u32>,
    steps: usize,
    pub depth: usize,
    /// Current nesting of `eval`/`block`/`assign` (bounded by `MAX_NESTING`).
    pub nesting: usize,
    /// Undo journals of the branches being run under unknown conditions: (global, frame id,
    /// name, previous value).
    journals: Vec<Journal>,
    frame_ids: usize,
    /// (scope, local name) → qualified name, from the import statements.
    imports: HashMap<(Option<usize>, String), Rc<str>>,
    /// > 0 while running a branch whose condition is unknown.
    pub uncertain: usize,
    /// Functions entered, to run the uncalled ones afterwards.
    pub entered: Vec<bool>,
    /// Where batch sizes are set: `DataLoader(batch_size=...)`, `Dataset.batch(n)`, ...
    pub batches: Vec<BatchSource>,
}

/// A place that sets the batch size of a data pipeline.
#[derive(Debug, Clone)]
pub struct BatchSource {
    /// The batch size, when constant.
    pub value: Option<u64>,
    /// The value's span (or the call's, for a default).
    pub span: (usize, usize),
    /// How the user wrote it: `DataLoader(batch_size=...)`.
    pub what: String,
    /// Bound to a name that says `train`.
    pub train: bool,
    /// The name the pipeline is assigned to (`train_ds = ds.batch(64)`).
    pub target: Option<String>,
}

impl<'a, 't> Interp<'a, 't> {
    pub fn new(pm: &'a PythonModel<'t>) -> Self {
        let mut it = Interp {
            pm,
            src: pm.source,
            reasons: vec!["not known statically".into()],
            lists: Vec::new(),
            tensors: Vec::new(),
            apps: Vec::new(),
            layers: Vec::new(),
            objs: Vec::new(),
            optimizers: Vec::new(),
            classes: Vec::new(),
            globals: HashMap::default(),
            var_names: HashMap::default(),
            keras_names: HashMap::default(),
            steps: 0,
            depth: 0,
            nesting: 0,
            journals: Vec::new(),
            frame_ids: 0,
            imports: pm
                .imports
                .iter()
                .map(|i| ((i.scope, i.name.clone()), Rc::from(i.qualified.as_str())))
                .collect(),
            uncertain: 0,
            entered: vec![false; pm.functions.len()],
            batches: Vec::new(),
        };
        it.collect_classes();
        it
    }

    /// Runs the module, then every module-level function it did not call (with unknown
    /// arguments, defaults applied), so that `main()` behind a CLI framework is seen too.
    pub fn run_file(&mut self) {
        let mut frame = Frame::default();
        // A notebook has one root per code cell, in execution order.
        for root in self.pm.roots.clone() {
            self.block(root, &mut frame);
        }
        for f in 0..self.pm.functions.len() {
            let func = &self.pm.functions[f];
            if func.parent.is_none() && func.class.is_none() && !self.entered[f] {
                self.call_function(f, None, super::value::Args::default());
            }
        }
    }

    pub fn line(&self, node: Node<'_>) -> usize {
        node.start_position().row + 1
    }

    pub fn text(&self, node: Node<'_>) -> &'t str {
        self.pm.text(node)
    }

    /// The start of a node's text, for messages: its first line, at most 48 characters.
    pub fn snippet(&self, node: Node<'_>) -> String {
        let text = self.text(node);
        let line = text.lines().next().unwrap_or("");
        if line.chars().count() > 48 || line.len() < text.len() {
            format!("{}…", line.chars().take(47).collect::<String>())
        } else {
            line.to_string()
        }
    }

    /// What an imported name stands for in function `func` (or at module level): the import
    /// in the innermost enclosing scope that has one.
    fn import_of(&self, func: Option<usize>, name: &str) -> Option<Rc<str>> {
        let mut scope = func.filter(|f| *f < self.pm.functions.len());
        for _ in 0..64 {
            if let Some(q) = self.imports.get(&(scope, name.to_string())) {
                return Some(q.clone());
            }
            scope = self.pm.functions[scope?].parent;
        }
        None
    }

    /// An unknown value with a reason.
    pub fn unknown(&mut self, at: Node<'_>, why: impl Into<String>) -> Val {
        self.reasons
            .push(format!("line {}: {}", self.line(at), why.into()));
        Val::Unknown((self.reasons.len() - 1) as u32)
    }

    pub fn reason(&self, v: &Val) -> String {
        match v {
            Val::Unknown(i) => self.reasons.get(*i as usize).cloned().unwrap_or_default(),
            _ => String::new(),
        }
    }

    /// Counts one step; false once the budget is spent.
    pub fn tick(&mut self) -> bool {
        self.steps += 1;
        // The file's work budget too (see `gpulint_source::budget`).
        self.steps <= MAX_STEPS && gpulint_source::budget::spend(1)
    }

    pub fn lookup(&mut self, frame: &Frame, name: &str, at: Node<'_>) -> Val {
        if let Some(v) = frame.locals.get(name) {
            return v.clone();
        }
        if let Some(v) = self.globals.get(name) {
            return v.clone();
        }
        if name == "__name__" {
            return Val::Str(Rc::from("__main__"));
        }
        if let Some(i) = self.classes.iter().position(|c| c.name == name) {
            return Val::Class(i);
        }
        if let Some(f) = self.pm.functions_named(name).iter().copied().find(|&f| {
            self.pm.functions[f].parent.is_none() && self.pm.functions[f].class.is_none()
        }) {
            return Val::Func(f);
        }
        if let Some(q) = self.import_of(frame.func, name) {
            return Val::Q(q);
        }
        // Module constants are in the globals once the module ran; folding inside a function
        // would rescan its body for every name.
        if frame.func.is_none() {
            if let Some(v) = self.pm.const_value(at) {
                return super::value::from_const(&v);
            }
        }
        match name {
            "range" | "len" | "int" | "float" | "min" | "max" | "list" | "tuple" | "enumerate"
            | "zip" | "print" | "sum" | "reversed" | "isinstance" | "round" | "abs" | "super"
            | "str" | "bool" => Val::Q(Rc::from(format!("builtins.{name}").as_str())),
            _ => self.unknown(at, format!("`{name}` is not known")),
        }
    }

    pub fn bind(&mut self, frame: &mut Frame, name: &str, v: Val) {
        if let Val::Obj(o) = v {
            self.var_names.entry(o).or_insert_with(|| name.to_string());
        }
        self.set_name(frame, frame.func.is_none(), name, v);
    }

    pub fn fresh_frame_id(&mut self) -> usize {
        self.frame_ids += 1;
        self.frame_ids
    }
}

impl Val {
    /// Keeps an unknown's reason; any other value becomes `Unknown(default)`.
    pub fn unknown_or(self, default: u32) -> Val {
        match self {
            Val::Unknown(r) => Val::Unknown(r),
            _ => Val::Unknown(default),
        }
    }
}
