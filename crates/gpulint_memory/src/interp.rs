//! A small abstract interpreter over the file: it runs module code and the functions it calls,
//! with constants, symbolic tensors, layers and model objects as values, to learn which models
//! the file builds and how they are trained. Everything is bounded (statements, call depth,
//! loop iterations), and whatever it cannot follow becomes `Unknown` with a reason.

use super::value::{App, Fw, LayerDef, Obj, Optimizer, Tensor, Val};
use gpulint_semantic::python::PythonModel;
use gpulint_syntax::named_children;
use gpulint_syntax::NodeExt;
use std::collections::HashMap;
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
/// Names written by a branch, (global, name), with their final values.
type Writes = HashMap<(bool, String), Val>;

/// A class of the file.
#[derive(Debug, Clone)]
pub struct ClassDef<'t> {
    pub name: String,
    pub node: Node<'t>,
    pub bases: Vec<Val>,
    /// Method name → index into `PythonModel::functions`.
    pub methods: HashMap<String, usize>,
}

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

/// How a statement ended.
pub enum Flow {
    Normal,
    Return(Val),
    Break,
    Continue,
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
            globals: HashMap::new(),
            var_names: HashMap::new(),
            keras_names: HashMap::new(),
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
        self.steps <= MAX_STEPS
    }

    fn collect_classes(&mut self) {
        let mut defs = Vec::new();
        for child in self.pm.roots.iter().flat_map(|r| named_children(*r)) {
            let node = if child.kind_name() == "decorated_definition" {
                child.field("definition").unwrap_or(child)
            } else {
                child
            };
            if node.kind_name() == "class_definition" {
                defs.push(node);
            }
        }
        for node in defs {
            let name = node
                .field("name")
                .map(|n| self.text(n).to_string())
                .unwrap_or_default();
            let mut methods = HashMap::new();
            for (i, f) in self.pm.functions.iter().enumerate() {
                if f.class.as_deref() == Some(name.as_str())
                    && f.parent.is_none()
                    && f.node
                        .parent()
                        .and_then(|b| b.parent())
                        .is_some_and(|c| c.id() == node.id() || is_decorated_in(f.node, node))
                {
                    methods.insert(f.name.clone(), i);
                }
            }
            self.classes.push(ClassDef {
                name,
                node,
                bases: Vec::new(),
                methods,
            });
        }
        // Bases: framework names or earlier classes of the file.
        for i in 0..self.classes.len() {
            let node = self.classes[i].node;
            let mut bases = Vec::new();
            if let Some(sup) = node.field("superclasses") {
                for b in named_children(sup) {
                    if b.kind_name() == "keyword_argument" {
                        continue;
                    }
                    let t = self.text(b);
                    if let Some(j) = self.classes.iter().position(|c| c.name == t) {
                        bases.push(Val::Class(j));
                    } else if let Some(q) = self.pm.qualified_name(b) {
                        bases.push(Val::Q(Rc::from(q.as_str())));
                    } else {
                        bases.push(Val::Unknown(0));
                    }
                }
            }
            self.classes[i].bases = bases;
        }
    }

    /// The framework a class of the file derives from.
    pub fn class_fw(&self, class: usize) -> Option<Fw> {
        let mut stack = vec![(class, 0)];
        while let Some((c, depth)) = stack.pop() {
            if depth > 8 {
                continue;
            }
            for b in &self.classes[c].bases {
                match b {
                    Val::Class(j) => stack.push((*j, depth + 1)),
                    Val::Q(q) => {
                        if is_torch_module(q) {
                            return Some(Fw::Torch);
                        }
                        if let Some(rest) = super::keras::keras_path(q) {
                            if matches!(
                                rest,
                                "Model"
                                    | "models.Model"
                                    | "layers.Layer"
                                    | "Layer"
                                    | "engine.training.Model"
                            ) {
                                return Some(Fw::Keras);
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        None
    }

    /// A method of a class of the file, searching its local bases.
    pub fn find_method(&self, class: usize, name: &str) -> Option<usize> {
        let mut stack = vec![(class, 0)];
        while let Some((c, depth)) = stack.pop() {
            if let Some(f) = self.classes[c].methods.get(name) {
                return Some(*f);
            }
            if depth < 8 {
                for b in self.classes[c].bases.iter().rev() {
                    if let Val::Class(j) = b {
                        stack.push((*j, depth + 1));
                    }
                }
            }
        }
        None
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
                return super::eval::from_const(&v);
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

    /// Binds an assignment target.
    pub fn assign(&mut self, frame: &mut Frame, target: Node<'_>, v: Val) {
        if self.nesting >= MAX_NESTING {
            return;
        }
        self.nesting += 1;
        self.assign_inner(frame, target, v);
        self.nesting -= 1;
    }

    fn assign_inner(&mut self, frame: &mut Frame, target: Node<'_>, v: Val) {
        match target.kind_name() {
            "identifier" => {
                let name = self.text(target);
                self.bind(frame, name, v);
            }
            "pattern_list" | "tuple_pattern" | "list_pattern" | "tuple" | "list"
            | "expression_list" => {
                let targets: Vec<Node> = named_children(target)
                    .filter(|n| n.kind_name() != "comment")
                    .collect();
                let items = self.unpack(&v, targets.len());
                for (t, item) in targets.into_iter().zip(items) {
                    self.assign(frame, t, item);
                }
            }
            "parenthesized_expression" => {
                if let Some(inner) = target.named_child(0) {
                    self.assign(frame, inner, v);
                }
            }
            "attribute" => {
                let (Some(obj), Some(attr)) = (target.field("object"), target.field("attribute"))
                else {
                    return;
                };
                let attr = self.text(attr).to_string();
                let owner = self.eval(frame, obj);
                let v = if self.uncertain > 0 {
                    self.unknown(
                        target,
                        format!(
                            "`{}` is assigned under a condition that depends on run-time values",
                            self.text(target)
                        ),
                    )
                } else {
                    v
                };
                match owner {
                    Val::Obj(o) => self.objs[o].set_attr(&attr, v),
                    Val::Layer(l) if attr == "trainable" && v.truthy() == Some(false) => {
                        self.layers[l].frozen = true;
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }

    /// `a, b = v`.
    pub fn unpack(&mut self, v: &Val, n: usize) -> Vec<Val> {
        let items: Option<Vec<Val>> = match v {
            Val::Tuple(t) => Some(t.to_vec()),
            Val::List(l) => Some(self.lists[*l].clone()),
            Val::Dims(t) => {
                let mut d = vec![Val::Batch];
                d.extend(self.tensors[*t].shape.iter().map(|x| Val::Int(*x as i128)));
                Some(d)
            }
            _ => None,
        };
        match items {
            Some(items) if items.len() == n => items,
            _ => vec![v.clone().unknown_or(0); n],
        }
    }

    /// Runs a block of statements (a module or a function body).
    pub fn block(&mut self, block: Node<'_>, frame: &mut Frame) -> Flow {
        if self.nesting >= MAX_NESTING {
            return Flow::Return(Val::Unknown(0));
        }
        self.nesting += 1;
        let flow = self.block_inner(block, frame);
        self.nesting -= 1;
        flow
    }

    fn block_inner(&mut self, block: Node<'_>, frame: &mut Frame) -> Flow {
        for stmt in named_children(block) {
            if !self.tick() {
                return Flow::Return(Val::Unknown(0));
            }
            match self.statement(stmt, frame) {
                Flow::Normal => {}
                other => return other,
            }
        }
        Flow::Normal
    }

    fn statement(&mut self, stmt: Node<'_>, frame: &mut Frame) -> Flow {
        match stmt.kind_name() {
            "expression_statement" => {
                for e in named_children(stmt) {
                    match e.kind_name() {
                        "assignment" => self.assignment(e, frame),
                        "augmented_assignment" => {
                            if let (Some(l), Some(r)) = (e.field("left"), e.field("right")) {
                                let op = e
                                    .field("operator")
                                    .map(|o| self.text(o).trim_end_matches('='))
                                    .unwrap_or("");
                                let lv = self.eval(frame, l);
                                let rv = self.eval(frame, r);
                                let v = self.binary(frame, e, op, lv, rv);
                                self.assign(frame, l, v);
                            }
                        }
                        _ => {
                            self.eval(frame, e);
                        }
                    }
                }
                Flow::Normal
            }
            "return_statement" => {
                let v = match stmt.named_child(0) {
                    Some(e) => self.eval(frame, e),
                    None => Val::None,
                };
                Flow::Return(v)
            }
            "if_statement" => self.if_statement(stmt, frame),
            "for_statement" => self.for_statement(stmt, frame),
            "while_statement" => {
                if let Some(body) = stmt.field("body") {
                    self.opaque_loop(body, frame, None);
                }
                Flow::Normal
            }
            "with_statement" => {
                let clause = named_children(stmt).find(|n| n.kind_name() == "with_clause");
                for item in clause
                    .into_iter()
                    .flat_map(named_children)
                    .filter(|n| n.kind_name() == "with_item")
                {
                    if let Some(v) = item.field("value") {
                        if v.kind_name() == "as_pattern" {
                            if let (Some(e), Some(t)) = (v.named_child(0), v.field("alias")) {
                                let val = self.eval(frame, e);
                                let t = t.named_child(0).unwrap_or(t);
                                self.assign(frame, t, val);
                            }
                        } else {
                            self.eval(frame, v);
                        }
                    }
                }
                match stmt.field("body") {
                    Some(body) => self.block(body, frame),
                    None => Flow::Normal,
                }
            }
            "try_statement" => {
                let flow = match stmt.field("body") {
                    Some(body) => self.block(body, frame),
                    None => Flow::Normal,
                };
                for clause in named_children(stmt) {
                    if matches!(clause.kind_name(), "else_clause" | "finally_clause") {
                        if let Some(body) = clause.field("body").or_else(|| {
                            clause.named_child(clause.named_child_count().saturating_sub(1) as u32)
                        }) {
                            if let Flow::Return(v) = self.block(body, frame) {
                                return Flow::Return(v);
                            }
                        }
                    }
                }
                flow
            }
            "function_definition" | "decorated_definition" if frame.func.is_some() => {
                let def = if stmt.kind_name() == "decorated_definition" {
                    stmt.field("definition")
                } else {
                    Some(stmt)
                };
                if let Some(def) = def.filter(|d| d.kind_name() == "function_definition") {
                    if let Some(f) = self
                        .pm
                        .functions
                        .iter()
                        .position(|f| f.node.id() == def.id())
                    {
                        let name = self.pm.functions[f].name.clone();
                        self.bind(frame, &name, Val::Func(f));
                    }
                }
                Flow::Normal
            }
            "break_statement" => Flow::Break,
            "continue_statement" => Flow::Continue,
            "delete_statement" => Flow::Normal,
            _ => Flow::Normal,
        }
    }

    fn assignment(&mut self, e: Node<'_>, frame: &mut Frame) {
        let Some(left) = e.field("left") else {
            return;
        };
        let Some(right) = e.field("right") else {
            return;
        };
        let v = self.eval(frame, right);
        // `a = b = v`: the right side is itself an assignment.
        self.assign(frame, left, v);
    }

    fn if_statement(&mut self, stmt: Node<'_>, frame: &mut Frame) -> Flow {
        // Build the chain: (condition, body) ..., else body.
        let mut arms: Vec<(Option<Node>, Node)> = Vec::new();
        if let (Some(c), Some(b)) = (stmt.field("condition"), stmt.field("consequence")) {
            arms.push((Some(c), b));
        }
        for alt in named_children(stmt) {
            match alt.kind_name() {
                "elif_clause" => {
                    if let (Some(c), Some(b)) = (alt.field("condition"), alt.field("consequence")) {
                        arms.push((Some(c), b));
                    }
                }
                "else_clause" => {
                    if let Some(b) = alt.field("body") {
                        arms.push((None, b));
                    }
                }
                _ => {}
            }
        }
        for (i, (cond, body)) in arms.iter().enumerate() {
            let truth = match cond {
                Some(c) => {
                    let v = self.eval(frame, *c);
                    v.truthy()
                }
                None => Some(true),
            };
            match truth {
                Some(true) => return self.block(*body, frame),
                Some(false) => continue,
                None => {
                    // Unknown: run every remaining arm on a copy, then merge.
                    let rest: Vec<Node> = arms[i..].iter().map(|(_, b)| *b).collect();
                    let has_else = arms.last().is_some_and(|(c, _)| c.is_none());
                    return self.uncertain_arms(&rest, has_else, frame);
                }
            }
        }
        Flow::Normal
    }

    fn uncertain_arms(&mut self, bodies: &[Node<'_>], has_else: bool, frame: &mut Frame) -> Flow {
        self.uncertain += 1;
        let pending_before = frame.pending.clone();
        let mut may_return = false;
        // Per arm: the names it wrote with their final values, and its return value.
        let mut outcomes: Vec<(Writes, Option<Val>)> = Vec::new();
        for body in bodies {
            self.journals.push(Vec::new());
            let ret = match self.block(*body, frame) {
                Flow::Return(v) => Some(v),
                _ => None,
            };
            let journal = self.journals.pop().unwrap_or_default();
            let writes = self.undo(journal, frame);
            if !frame
                .pending
                .as_ref()
                .is_some_and(|p| pending_before.as_ref().is_some_and(|b| b.same(p)))
                && frame.pending.is_some()
            {
                may_return = true;
            }
            frame.pending = pending_before.clone();
            outcomes.push((writes, ret));
        }
        if !has_else {
            outcomes.push((HashMap::new(), None));
        }
        self.uncertain -= 1;
        let rets: Vec<&Val> = outcomes.iter().filter_map(|o| o.1.as_ref()).collect();
        let merged_ret = merge_all(&rets);
        let falls: Vec<&HashMap<(bool, String), Val>> = outcomes
            .iter()
            .filter(|o| o.1.is_none())
            .map(|o| &o.0)
            .collect();
        if falls.is_empty() {
            return Flow::Return(merged_ret.unwrap_or(Val::Unknown(0)));
        }
        // Names whose values differ between the arms that fall through become unknown.
        let mut keys: Vec<&(bool, String)> = falls.iter().flat_map(|w| w.keys()).collect();
        keys.sort();
        keys.dedup();
        let mut merged = Vec::new();
        for key in keys {
            let current = self.current(key.0, &key.1, frame);
            let mut vals = falls.iter().map(|w| {
                w.get(key)
                    .cloned()
                    .or_else(|| current.clone())
                    .unwrap_or(Val::Unknown(0))
            });
            let first = vals.next().unwrap_or(Val::Unknown(0));
            let same = vals.all(|v| v.same(&first));
            merged.push((key.clone(), if same { first } else { Val::Unknown(0) }));
        }
        for ((global, name), v) in merged {
            self.set_name(frame, global, &name, v);
        }
        if may_return || merged_ret.is_some() {
            let r = merged_ret.unwrap_or(Val::Unknown(0));
            frame.pending = Some(match frame.pending.take() {
                Some(p) if p.same(&r) && !may_return => p,
                Some(_) => Val::Unknown(0),
                None if may_return => Val::Unknown(0),
                None => r,
            });
        }
        Flow::Normal
    }

    fn current(&self, global: bool, name: &str, frame: &Frame) -> Option<Val> {
        if global {
            self.globals.get(name).cloned()
        } else {
            frame.locals.get(name).cloned()
        }
    }

    /// Undoes the writes of a journal to `frame` and the globals; returns the names written
    /// with the values they had before the undo.
    fn undo(&mut self, journal: Journal, frame: &mut Frame) -> HashMap<(bool, String), Val> {
        let mut writes = HashMap::new();
        for (global, fid, name, _) in &journal {
            if *global || *fid == frame.id {
                let v = self
                    .current(*global, name, frame)
                    .unwrap_or(Val::Unknown(0));
                writes.insert((*global, name.clone()), v);
            }
        }
        for (global, fid, name, prev) in journal.into_iter().rev() {
            if !global && fid != frame.id {
                continue;
            }
            let map = if global {
                &mut self.globals
            } else {
                &mut frame.locals
            };
            match prev {
                Some(p) => {
                    map.insert(name, p);
                }
                None => {
                    map.remove(&name);
                }
            }
        }
        writes
    }

    /// Sets a name, recording the write in the innermost journal.
    fn set_name(&mut self, frame: &mut Frame, global: bool, name: &str, v: Val) {
        let prev = if global {
            self.globals.insert(name.to_string(), v)
        } else {
            frame.locals.insert(name.to_string(), v)
        };
        if let Some(j) = self.journals.last_mut() {
            j.push((global, frame.id, name.to_string(), prev));
        }
    }

    pub fn fresh_frame_id(&mut self) -> usize {
        self.frame_ids += 1;
        self.frame_ids
    }

    fn for_statement(&mut self, stmt: Node<'_>, frame: &mut Frame) -> Flow {
        let (Some(left), Some(right), Some(body)) =
            (stmt.field("left"), stmt.field("right"), stmt.field("body"))
        else {
            return Flow::Normal;
        };
        let iterable = self.eval(frame, right);
        let Some(items) = self.iterate(&iterable) else {
            self.opaque_loop(body, frame, Some(left));
            return Flow::Normal;
        };
        for item in items {
            self.assign(frame, left, item);
            match self.block(body, frame) {
                Flow::Break => break,
                Flow::Return(v) => return Flow::Return(v),
                _ => {}
            }
        }
        Flow::Normal
    }

    /// The items of an iterable value, when known and few enough to unroll.
    pub fn iterate(&self, v: &Val) -> Option<Vec<Val>> {
        let items = match v {
            Val::Tuple(t) => t.to_vec(),
            Val::List(l) => self.lists[*l].clone(),
            Val::Obj(o) => match &self.objs[*o].kind {
                super::value::ObjKind::Sequential { items, .. }
                | super::value::ObjKind::ModuleList { items } => items.clone(),
                _ => return None,
            },
            _ => return None,
        };
        (items.len() <= MAX_UNROLL).then_some(items)
    }

    /// A loop that cannot be unrolled: run its body once to see what it calls, then forget
    /// what it assigned.
    fn opaque_loop(&mut self, body: Node<'_>, frame: &mut Frame, target: Option<Node<'_>>) {
        if let Some(t) = target {
            let v = self.unknown(t, "loop variable");
            self.assign(frame, t, v);
        }
        self.journals.push(Vec::new());
        self.uncertain += 1;
        let flow = self.block(body, frame);
        self.uncertain -= 1;
        let journal = self.journals.pop().unwrap_or_default();
        if let Flow::Return(v) = flow {
            frame.pending = Some(v.unknown_or(0));
        }
        // What the body changed is only known for one iteration: forget it.
        let mut first: HashMap<(bool, String), Option<Val>> = HashMap::new();
        for (global, fid, name, prev) in journal {
            if global || fid == frame.id {
                first.entry((global, name)).or_insert(prev);
            }
        }
        for ((global, name), prev) in first {
            let now = self.current(global, &name, frame);
            let unchanged = matches!((&prev, &now), (Some(a), Some(b)) if a.same(b));
            if !unchanged {
                self.set_name(frame, global, &name, Val::Unknown(0));
            }
        }
    }

    /// Calls a function of the file.
    pub fn call_function(
        &mut self,
        f: usize,
        self_val: Option<Val>,
        args: super::value::Args,
    ) -> Val {
        let Some(func) = self.pm.functions.get(f) else {
            return Val::Unknown(0);
        };
        let node = func.node;
        if self.depth >= MAX_DEPTH {
            return self.unknown(node, "calls nest too deeply to follow");
        }
        self.entered[f] = true;
        let id = self.fresh_frame_id();
        let mut frame = Frame {
            func: Some(f),
            id,
            ..Frame::default()
        };
        if let Some(Val::Obj(o)) = &self_val {
            frame.self_obj = Some(*o);
        }
        self.bind_params(node, &mut frame, self_val, args);
        let Some(body) = node.field("body") else {
            return Val::None;
        };
        // What a call builds is certain relative to the call, even under an unknown branch.
        let uncertain = std::mem::take(&mut self.uncertain);
        let journals = std::mem::take(&mut self.journals);
        self.depth += 1;
        let flow = self.block(body, &mut frame);
        self.depth -= 1;
        self.uncertain = uncertain;
        self.journals = journals;
        let ret = match flow {
            Flow::Return(v) => v,
            _ => Val::None,
        };
        match frame.pending {
            Some(p) if !p.same(&ret) => Val::Unknown(0),
            _ => ret,
        }
    }

    fn bind_params(
        &mut self,
        def: Node<'_>,
        frame: &mut Frame,
        self_val: Option<Val>,
        args: super::value::Args,
    ) {
        let Some(params) = def.field("parameters") else {
            return;
        };
        let mut pos = args.pos.into_iter();
        let kw = args.kw;
        let mut first = true;
        for p in named_children(params) {
            let (name_node, default) = match p.kind_name() {
                "identifier" => (Some(p), None),
                "typed_parameter" => (
                    p.named_child(0).filter(|n| n.kind_name() == "identifier"),
                    None,
                ),
                "default_parameter" | "typed_default_parameter" => {
                    (p.field("name"), p.field("value"))
                }
                "list_splat_pattern" => {
                    let rest: Vec<Val> = pos.by_ref().collect();
                    if let Some(n) = p.named_child(0) {
                        let name = self.text(n).to_string();
                        frame.locals.insert(name, Val::Tuple(Rc::new(rest)));
                    }
                    continue;
                }
                "dictionary_splat_pattern" => {
                    if let Some(n) = p.named_child(0) {
                        let v = self.unknown(n, "`**kwargs`");
                        frame.locals.insert(self.text(n).to_string(), v);
                    }
                    continue;
                }
                _ => continue,
            };
            let Some(name_node) = name_node else {
                continue;
            };
            let name = self.text(name_node).to_string();
            if first {
                first = false;
                if let Some(s) = self_val.clone() {
                    frame.locals.insert(name, s);
                    continue;
                }
            }
            let v = if let Some((_, v)) = kw.iter().find(|(k, _)| *k == name) {
                v.clone()
            } else if let Some(v) = pos.next() {
                v
            } else if let Some(d) = default {
                let mut module = Frame::default();
                self.eval(&mut module, d)
            } else {
                self.unknown(name_node, format!("argument `{name}` is not known"))
            };
            frame.locals.insert(name, v);
        }
    }
}

fn is_decorated_in(func: Node<'_>, class: Node<'_>) -> bool {
    // def inside a decorated_definition inside the class body.
    func.parent()
        .filter(|p| p.kind_name() == "decorated_definition")
        .and_then(|p| p.parent())
        .and_then(|b| b.parent())
        .is_some_and(|c| c.id() == class.id())
}

/// `torch.nn.Module` and the Lightning module classes.
pub fn is_torch_module(q: &str) -> bool {
    matches!(
        q,
        "torch.nn.Module"
            | "torch.nn.modules.module.Module"
            | "pytorch_lightning.LightningModule"
            | "lightning.LightningModule"
            | "lightning.pytorch.LightningModule"
    )
}

fn merge_all(vals: &[&Val]) -> Option<Val> {
    let first = (*vals.first()?).clone();
    if vals.iter().all(|v| v.same(&first)) {
        Some(first)
    } else {
        Some(Val::Unknown(0))
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
