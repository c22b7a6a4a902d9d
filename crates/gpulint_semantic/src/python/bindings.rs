//! What names are bound to: local and module-level bindings, the value a name holds where it
//! is used, and constant folding through them (literals, arithmetic, names bound once,
//! argparse defaults).

use super::builder::identifiers_in_target;
use super::value::parse_int;
use super::{fold_binary, string_literal, PythonModel, Value, MAX_FOLD_DEPTH};
use crate::hash::{HashMap, HashSet};
use gpulint_syntax::named_children;
use gpulint_syntax::NodeExt;
use std::cell::OnceCell;
use tree_sitter::Node;

/// Values for some identifiers, consulted first when folding (see
/// [`PythonModel::const_value_with`]).
pub type Env<'a> = &'a dyn Fn(Node<'_>) -> Option<Value>;

/// See [`PythonModel::name_index`].
#[derive(Debug, Default)]
pub(crate) struct NameIndex<'t> {
    /// Plain `name = ...` assignments per name, in document order.
    assignments: HashMap<&'t str, Vec<Node<'t>>>,
    /// Start bytes of the identifiers that bind each name, sorted: read from the file's
    /// identifiers and their parents only when a name bound several times is folded (most
    /// files never ask).
    binders: OnceCell<HashMap<&'t str, Vec<usize>>>,
    /// Assignments and augmented assignments to each plain name, in document order.
    targets: HashMap<&'t str, Vec<Node<'t>>>,
    /// Calls of a method of each plain name (`name.append(...)`), in document order.
    receivers: HashMap<&'t str, Vec<Node<'t>>>,
    /// The last import of each name in each scope, as an index into `imports`.
    imports: HashMap<Option<usize>, HashMap<String, usize>>,
}

impl<'t> PythonModel<'t> {
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
        let index = self.name_index();
        let start = at.start_byte();
        let own = index.assignments.get(name)?;
        let hi = own.partition_point(|a| a.start_byte() < start);
        let assign = *own[..hi].iter().rev().find(|a| a.end_byte() <= start)?;
        // A top-level statement of the cell (or module) that holds the use.
        let stmt = self
            .parent(assign)
            .filter(|p| p.kind_name() == "expression_statement")?;
        let root = self.parent(stmt).filter(|r| self.parent(*r).is_none())?;
        if at.id() == root.id() || start < root.start_byte() || at.end_byte() > root.end_byte() {
            return None;
        }
        // Nothing in between rebinds the name: no identifier that binds it starts after the
        // assignment's statement and before the use.
        let binders = self
            .binders(index)
            .get(name)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        let first = binders.partition_point(|&b| b < stmt.end_byte());
        if binders.get(first).is_some_and(|&b| b < start) {
            return None;
        }
        assign.field("right")
    }

    /// Assignments and augmented assignments to the plain name `name`, in document order.
    pub(crate) fn assignments_to(&self, name: &str) -> &[Node<'t>] {
        self.name_index()
            .targets
            .get(name)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// Calls of a method of the plain name `name` (`name.append(x)`), in document order.
    pub(crate) fn method_calls_on(&self, name: &str) -> &[Node<'t>] {
        self.name_index()
            .receivers
            .get(name)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// The last import that binds `name` in function `scope` (`None`: module level).
    pub(crate) fn import_of(&self, scope: Option<usize>, name: &str) -> Option<&super::Import> {
        self.name_index()
            .imports
            .get(&scope)?
            .get(name)
            .map(|&i| &self.imports[i])
    }

    /// Per name: its plain `name = ...` assignments, its method calls and its imports per
    /// scope, from the lists the builder made (no walk of the tree: every qualified name asks
    /// for the imports). Where identifiers that bind a name start comes later, from the file's
    /// identifiers on first need, so that asking where a name was last bound costs a binary
    /// search and not a scan of the file.
    fn name_index(&self) -> &NameIndex<'t> {
        self.name_index.get_or_init(|| {
            let mut index = NameIndex::default();
            for &a in &self.assignments {
                if let Some(l) = a.field("left").filter(|l| l.kind_name() == "identifier") {
                    let name = self.text(l);
                    if a.kind_name() == "assignment" {
                        index.assignments.entry(name).or_default().push(a);
                    }
                    index.targets.entry(name).or_default().push(a);
                }
            }
            for &(call, _) in &self.calls {
                let Some(func) = call
                    .field("function")
                    .filter(|f| f.kind_name() == "attribute")
                else {
                    continue;
                };
                if let Some(obj) = func
                    .field("object")
                    .filter(|o| o.kind_name() == "identifier")
                {
                    index
                        .receivers
                        .entry(self.text(obj))
                        .or_default()
                        .push(call);
                }
            }
            for (i, imp) in self.imports.iter().enumerate() {
                index
                    .imports
                    .entry(imp.scope)
                    .or_default()
                    .insert(imp.name.clone(), i);
            }
            index
        })
    }

    /// Where identifiers that bind each name start (see [`NameIndex::binders`]).
    fn binders<'i>(&self, index: &'i NameIndex<'t>) -> &'i HashMap<&'t str, Vec<usize>> {
        index.binders.get_or_init(|| {
            let mut binders: HashMap<&'t str, Vec<usize>> = HashMap::default();
            let parents = self.parents();
            for &n in &self.identifiers {
                if parents.parent(n).is_some_and(|p| binds_in(n, p)) {
                    binders
                        .entry(self.text(n))
                        .or_default()
                        .push(n.start_byte());
                }
            }
            for v in binders.values_mut() {
                v.sort_unstable();
            }
            binders
        })
    }

    /// The value node of a module-level name bound exactly once (`REQUIRED = [...]`).
    pub fn module_value(&self, name: &str) -> Option<Node<'t>> {
        self.module_bindings
            .get(name)
            .filter(|b| b.count == 1)
            .map(|b| b.value)
    }

    /// [`PythonModel::const_value`], with `env` giving the value of some identifiers first (a
    /// parameter bound to what a call site passes): `None` from `env` falls back to the usual
    /// folding of the name.
    pub fn const_value_with(&self, expr: Node<'_>, env: Env<'_>) -> Option<Value> {
        self.fold(expr, 0, Some(env))
    }

    /// The folded value of a constant expression: literals, tuples, arithmetic, module-level
    /// names bound once, and argparse defaults (`args.batch_size`).
    pub fn const_value(&self, expr: Node<'_>) -> Option<Value> {
        self.fold(expr, 0, None)
    }

    fn fold(&self, expr: Node<'_>, depth: usize, env: Option<Env<'_>>) -> Option<Value> {
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
            "parenthesized_expression" => self.fold(expr.named_child(0)?, d, env),
            "tuple" | "list" => {
                let mut items = Vec::new();
                for c in named_children(expr) {
                    if c.kind_name() == "comment" {
                        continue;
                    }
                    items.push(self.fold(c, d, env)?);
                }
                Some(Value::Tuple(items))
            }
            "unary_operator" => {
                let v = self.fold(expr.field("argument")?, d, env)?;
                let op = self.text(expr.field("operator")?);
                match (op, v) {
                    ("-", Value::Int(i)) => Some(Value::Int(-i)),
                    ("-", Value::Float(f)) => Some(Value::Float(-f)),
                    ("+", v @ (Value::Int(_) | Value::Float(_))) => Some(v),
                    _ => None,
                }
            }
            "binary_operator" => {
                let l = self.fold(expr.field("left")?, d, env)?;
                let r = self.fold(expr.field("right")?, d, env)?;
                let op = self.text(expr.field("operator")?);
                fold_binary(op, l, r)
            }
            "identifier" => {
                let name = self.text(expr);
                if let Some(v) = env.and_then(|e| e(expr)) {
                    return Some(v);
                }
                // A local variable shadows the module constant: only fold at module level or
                // when the function does not bind the name itself.
                if let Some(f) = self.enclosing_function(expr) {
                    if self.function_binds(f, name) {
                        return None;
                    }
                }
                let b = self.module_bindings.get(name)?;
                if b.count != 1 {
                    return self.fold(self.module_value_at(name, expr)?, d, env);
                }
                if b.value.id() == expr.id() {
                    return None;
                }
                self.fold(b.value, d, env)
            }
            "attribute" => {
                // `args.batch_size` where `args` comes from `parse_args()`.
                let attr = self.text(expr.field("attribute")?);
                let object = expr.field("object")?;
                if object.kind_name() == "identifier" && !self.argparse_defaults.is_empty() {
                    if let Some(v) = self.argparse_defaults.get(attr) {
                        return self.fold(*v, d, env);
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
    ///
    /// Looked up in the per-name index (a binary search among the name's own assignments):
    /// scanning back through every assignment of the file costs the file's size per question.
    pub fn last_assigned_before(&self, name: &str, at: Node<'_>) -> Option<Node<'t>> {
        let own = self.name_index().assignments.get(name)?;
        let hi = own.partition_point(|a| a.start_byte() < at.start_byte());
        own[..hi].last()?.field("right")
    }

    /// The value a plain name is bound to where it is used: the single `name = <value>` in the
    /// enclosing function's own body, else the module-level binding when the name is bound once
    /// there and not by the function. `None` when it is bound several times or not at all.
    pub fn value_of_name(&self, at: Node<'_>, name: &str) -> Option<Node<'t>> {
        if let Some(f) = self.enclosing_function(at) {
            if self.function_binds(f, name) {
                let body = self.functions[f].node.field("body")?;
                let (start, end) = (body.start_byte(), body.end_byte());
                // The plain `name = ...` assignments of the file (from the name index, in
                // document order), kept to those in the body outside nested functions:
                // scanning every assignment of the body for each name asked about cost the
                // names times the assignments of a long function. The body's own are found by
                // a binary search: a name assigned in every function of a file (`loss`) would
                // otherwise cost the functions times the functions.
                let all = self
                    .name_index()
                    .assignments
                    .get(name)
                    .map(Vec::as_slice)
                    .unwrap_or(&[]);
                let from = all.partition_point(|n| n.start_byte() < start);
                let mut found = None;
                for &n in &all[from..] {
                    let (s, e) = (n.start_byte(), n.end_byte());
                    if s >= end {
                        break;
                    }
                    if e > end {
                        continue;
                    }
                    if self.enclosing_function(n) != Some(f) {
                        continue;
                    }
                    if found.is_some() {
                        return None;
                    }
                    found = n.field("right");
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
                let mut names = HashSet::default();
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
}

/// Does identifier `n`, a child of `p`, bind its name?
fn binds_in(n: Node<'_>, p: Node<'_>) -> bool {
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

#[cfg(test)]
mod tests {
    use super::super::tests::{find, model_of};
    use super::*;

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
}
