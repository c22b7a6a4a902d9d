//! Folding a source-list expression to its items: lists and tuples, both arms of a
//! conditional, concatenation, and names followed through their bindings (`=`, `+=`,
//! `.append`, `.extend`), within the file's folding budget. Single strings and paths are
//! folded in `path`, globs in `glob`, comprehensions in `comprehension`.

use super::{argument, unresolved, Env, Folder, Item, Val, MAX_DEPTH};
use crate::python::PythonModel;
use gpulint_source::Span;
use gpulint_syntax::{descendants, named_children, NodeExt};
use tree_sitter::Node;

impl<'m> Folder<'_, 'm> {
    /// Spends one step of the file's folding budget: false once it is spent (names that refer
    /// to each other many times over could otherwise take exponential time).
    pub(super) fn step(&self) -> bool {
        let left = self.budget.get();
        self.budget.set(left.saturating_sub(1));
        left > 0
    }

    /// The items of a source list expression, in order.
    pub(super) fn items(&self, expr: Node<'_>, env: &Env<'_>, out: &mut Vec<Item>, depth: usize) {
        if depth > MAX_DEPTH || !self.step() {
            out.push(Err(unresolved(expr, "nested too deeply")));
            return;
        }
        let d = depth + 1;
        match expr.kind_name() {
            "list" | "tuple" | "set" => {
                for c in named_children(expr) {
                    if c.kind_name() != "comment" {
                        self.items(c, env, out, d);
                    }
                }
                return;
            }
            "list_splat" | "parenthesized_expression" => {
                if let Some(c) = expr.named_child(0) {
                    self.items(c, env, out, d);
                }
                return;
            }
            // `cuda_srcs if with_cuda else []`: what the build may compile is both.
            "conditional_expression" if self.string(expr, env, d).is_none() => {
                for c in named_children(expr).step_by(2) {
                    self.items(c, env, out, d);
                }
                return;
            }
            "binary_operator"
                if expr.field("operator").map(|o| self.text(o)) == Some("+")
                    && self.string(expr, env, d).is_none() =>
            {
                // List concatenation, unless a side is a string (`name + ".cu"`).
                if let (Some(l), Some(r)) = (expr.field("left"), expr.field("right")) {
                    if self.string(l, env, d).is_none() && self.string(r, env, d).is_none() {
                        self.items(l, env, out, d);
                        self.items(r, env, out, d);
                        return;
                    }
                }
            }
            "list_comprehension" if self.comprehension(expr, env, out, d) => return,
            "identifier" if self.text(expr) != "__file__" => {
                let name = self.text(expr);
                let value = match env.iter().rev().find(|(n, _)| *n == name) {
                    Some((_, v)) => Some(v.clone()),
                    None => self.name_value(expr, name, d),
                };
                match value {
                    Some(Val::List(items)) => out.extend(items),
                    Some(Val::Str(s)) => out.push(Ok((s, Span::of(&expr)))),
                    None => out.push(Err(unresolved(
                        expr,
                        format!("`{name}` is not a constant (list)"),
                    ))),
                }
                return;
            }
            "call"
                if self.call_items(expr, env, out, d) || self.returned_items(expr, env, out, d) =>
            {
                return
            }
            _ => {}
        }
        match self.string(expr, env, d) {
            Some(s) => out.push(Ok((s, Span::of(&expr)))),
            None => out.push(Err(unresolved(expr, "not a constant path"))),
        }
    }

    /// The value of an expression: the string it folds to, or else the items of a list.
    pub(super) fn value(&self, expr: Node<'_>, env: &Env<'_>, depth: usize) -> Val {
        match self.string(expr, env, depth) {
            Some(s) => Val::Str(s),
            None => {
                let mut items = Vec::new();
                self.items(expr, env, &mut items, depth);
                Val::List(items)
            }
        }
    }

    /// The statements that give `name` its value where `at` uses it, in document order: plain
    /// assignments, `+=`, `.append()` and `.extend()` in the scope that binds it (in the same
    /// scope as the use, only those before it). `None` when something else changes it.
    fn binders(&self, at: Node<'_>, name: &str) -> Option<Vec<Node<'m>>> {
        let use_scope = self.m.enclosing_function(at);
        let scope = use_scope.filter(|&f| self.m.function_binds(f, name));
        let limit = if scope == use_scope {
            at.start_byte()
        } else {
            usize::MAX
        };
        let mut out = Vec::new();
        for &a in self.m.assignments_to(name) {
            if a.start_byte() >= limit {
                break;
            }
            if a.end_byte() > limit || self.m.enclosing_function(a) != scope {
                continue;
            }
            match a.kind_name() {
                "assignment" => out.push(a),
                _ if a.field("operator").map(|o| self.text(o)) == Some("+=") => out.push(a),
                _ => return None,
            }
        }
        for &call in self.m.method_calls_on(name) {
            if call.start_byte() >= limit {
                break;
            }
            let Some(func) = call
                .field("function")
                .filter(|f| f.kind_name() == "attribute")
            else {
                continue;
            };
            let (Some(obj), Some(attr)) = (func.field("object"), func.field("attribute")) else {
                continue;
            };
            if obj.kind_name() != "identifier"
                || self.text(obj) != name
                || call.end_byte() > limit
                || self.m.enclosing_function(call) != scope
            {
                continue;
            }
            match self.text(attr) {
                "append" | "extend" => out.push(call),
                "insert" | "remove" | "pop" | "clear" | "sort" | "reverse" => return None,
                _ => {}
            }
        }
        out.sort_by_key(|n| n.start_byte());
        (out.first()?.kind_name() == "assignment").then_some(out)
    }

    /// What a name holds where `at` uses it, following its bindings in order: a plain
    /// assignment replaces the value (it may use the old one: `srcs = [join(d, s) for s in
    /// srcs]`), except one in another branch of the same `if`, which adds its list; `+=`,
    /// `.append()` and `.extend()` add to the list.
    pub(super) fn name_value(&self, at: Node<'_>, name: &str, depth: usize) -> Option<Val> {
        if depth > MAX_DEPTH || !self.step() {
            return None;
        }
        let d = depth + 1;
        let mut current: Option<Val> = None;
        let mut last_plain: Option<Node<'_>> = None;
        for s in self.binders(at, name)? {
            let env: Vec<(&str, Val)> = current.iter().map(|v| (name, v.clone())).collect();
            match s.kind_name() {
                "assignment" => {
                    let rhs = s.field("right")?;
                    let new = self.value(rhs, &env, d);
                    // Under its own condition, and not a rewrite of the old value: the build
                    // may compile either.
                    let rewrite = descendants(rhs)
                        .any(|n| n.kind_name() == "identifier" && self.text(n) == name);
                    let alternative =
                        !rewrite && last_plain.is_some_and(|p| conditional(self.m, p, s));
                    current = match current {
                        // A list of what either gives (a string is no single string any more).
                        Some(old) if alternative => {
                            let as_list = |v: Val, at: Node<'_>| match v {
                                Val::List(l) => l,
                                Val::Str(s) => vec![Ok((s, Span::of(&at)))],
                            };
                            let old_rhs = last_plain.and_then(|p| p.field("right")).unwrap_or(rhs);
                            let mut list = as_list(old, old_rhs);
                            list.extend(as_list(new, rhs));
                            Some(Val::List(list))
                        }
                        _ => Some(new),
                    };
                    last_plain = Some(s);
                }
                kind => {
                    let Some(Val::List(mut list)) = current else {
                        return None;
                    };
                    let arg = if kind == "call" {
                        argument(s, 0, "", self.m.source)?
                    } else {
                        s.field("right")?
                    };
                    let append = kind == "call"
                        && s.field("function")
                            .and_then(|f| f.field("attribute"))
                            .is_some_and(|a| self.text(a) == "append");
                    match (append, self.string(arg, &env, d)) {
                        (true, Some(v)) => list.push(Ok((v, Span::of(&arg)))),
                        (true, None) => list.push(Err(unresolved(arg, "not a constant path"))),
                        (false, _) => self.items(arg, &env, &mut list, d),
                    }
                    current = Some(Val::List(list));
                }
            }
        }
        current
    }
}

/// Does `later` run only under a condition that `earlier` does not share (another branch of
/// an `if`, a loop, a `try`)? Then it may or may not replace what `earlier` bound.
fn conditional(m: &PythonModel<'_>, earlier: Node<'_>, later: Node<'_>) -> bool {
    let within = |outer: Node<'_>, n: Node<'_>| {
        outer.start_byte() <= n.start_byte() && n.end_byte() <= outer.end_byte()
    };
    let mut cur = m.parent(later);
    let mut guarded = false;
    for _ in 0..64 {
        let Some(p) = cur else {
            return guarded;
        };
        if within(p, earlier) {
            return guarded;
        }
        guarded |= matches!(
            p.kind_name(),
            "if_statement"
                | "elif_clause"
                | "else_clause"
                | "for_statement"
                | "while_statement"
                | "try_statement"
                | "except_clause"
                | "case_clause"
        );
        cur = m.parent(p);
    }
    guarded
}
