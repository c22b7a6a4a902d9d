//! Source lists returned by functions and methods: `sources=get_sources()` for a function of
//! this file or of a sibling module, and `self.sources()` inside a class (the methods of the
//! class and its bases; see `subclasses` for the subclasses that override them).

use super::{
    absolute, argument, is_var, unresolved, Env, Folder, Item, SelfCtx, Str, Unresolved, Val,
    MAX_SIBLING_SIZE,
};
use crate::python::PythonModel;
use gpulint_source::Span;
use gpulint_syntax::{descendants, named_children, NodeExt};
use gpulint_syntax::{parse, Lang};
use std::path::Path;
use tree_sitter::Node;

/// Return statements folded per function.
const MAX_RETURNS: usize = 16;
/// Classes followed up a chain of bases, or down to subclasses.
pub(super) const MAX_CLASSES: usize = 64;

/// The names of a class's bases (last segment of dotted names).
pub(super) fn bases<'t>(m: &PythonModel<'t>, class: Node<'t>) -> Vec<&'t str> {
    let Some(args) = class.field("superclasses") else {
        return Vec::new();
    };
    named_children(args)
        .filter_map(|b| match b.kind_name() {
            "identifier" => Some(m.text(b)),
            "attribute" => b.field("attribute").map(|a| m.text(a)),
            _ => None,
        })
        .collect()
}

/// The method `name` defined directly in class `class` of `m`.
pub(super) fn method(m: &PythonModel<'_>, class: &str, name: &str) -> Option<usize> {
    m.functions
        .iter()
        .position(|f| f.name == name && f.class.as_deref() == Some(class))
}

/// `class` and its bases defined in `m`, most derived first.
pub(super) fn chain(m: &PythonModel<'_>, class: &str) -> Vec<String> {
    let mut out = vec![class.to_string()];
    let mut i = 0;
    while i < out.len() && out.len() < MAX_CLASSES {
        if let Some(c) = m.classes.iter().find(|c| c.name == out[i]) {
            for b in bases(m, c.node) {
                if !out.iter().any(|o| o == b) && m.classes.iter().any(|c| c.name == b) {
                    out.push(b.to_string());
                }
            }
        }
        i += 1;
    }
    out
}

/// The 1-based line of byte `offset` in `text` (a sibling module's), to say where an
/// unresolved part lies.
pub(super) fn line_at(text: &str, offset: usize) -> usize {
    text.get(..offset).map_or(0, |t| t.matches('\n').count()) + 1
}

impl<'m> Folder<'_, 'm> {
    /// The items returned by a call to a function of this file (`get_sources()`), or by a
    /// method called on `self` inside a class (`self.sources()`): every `return` contributes.
    pub(super) fn returned_items(
        &self,
        call: Node<'_>,
        env: &Env<'_>,
        out: &mut Vec<Item>,
        depth: usize,
    ) -> bool {
        let Some(f) = self.callee(call, out) else {
            return self.imported_items(call, env, out, depth);
        };
        let Some(f) = f else {
            return true;
        };
        let env2 = self.bind_parameters(f, call, env, depth);
        let mut any = false;
        for value in self.return_values(f) {
            any = true;
            self.items(value, &env2, out, depth + 1);
        }
        if !any {
            out.push(Err(unresolved(
                call,
                format!("`{}` returns no list that can be read", self.text(call)),
            )));
        }
        true
    }

    /// The items returned by a function of a sibling module (`from .ext_utils import
    /// get_sources` or `import ext_utils`, a `.py` file next to this one), with positional
    /// arguments that fold bound to its parameters. Only one module deep.
    fn imported_items(
        &self,
        call: Node<'_>,
        env: &Env<'_>,
        out: &mut Vec<Item>,
        depth: usize,
    ) -> bool {
        if self.ctx.borrow().foreign {
            return false;
        }
        let Some(q) = call
            .field("function")
            .and_then(|f| self.m.qualified_name(f))
        else {
            return false;
        };
        let q = q.strip_prefix('.').unwrap_or(&q);
        let Some((module, name)) = q.rsplit_once('.') else {
            return false;
        };
        if module.is_empty() || module.contains('.') || q.starts_with('.') {
            return false;
        }
        let path = self.dir().join(format!("{module}.py"));
        gpulint_source::note_dependency(&path);
        if !std::fs::metadata(&path).is_ok_and(|md| md.is_file() && md.len() <= MAX_SIBLING_SIZE) {
            return false;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            return false;
        };
        let Some(tree) = parse(Lang::Python, &text) else {
            return false;
        };
        let sm = crate::python::build(&tree, &text);
        let mut defs = sm
            .functions
            .iter()
            .enumerate()
            .filter(|(_, f)| f.name == name && f.class.is_none() && f.parent.is_none());
        let (Some((f, _)), None) = (defs.next(), defs.next()) else {
            return false;
        };
        // Positional arguments, folded here.
        let mut args = Vec::new();
        if let Some(list) = call.field("arguments") {
            for a in named_children(list).filter(|a| a.kind_name() != "comment") {
                if matches!(
                    a.kind_name(),
                    "keyword_argument" | "list_splat" | "dictionary_splat"
                ) {
                    break;
                }
                args.push(Some(self.value(a, env, depth + 1)));
            }
        }
        let folder = Folder {
            m: &sm,
            file: &path,
            absolute: absolute(&path),
            budget: std::cell::Cell::new(self.budget.get()),
            siblings: Default::default(),
            ctx: std::cell::RefCell::new(SelfCtx {
                foreign: true,
                ..Default::default()
            }),
        };
        let mut env2: Vec<(&str, Val)> = Vec::new();
        if let Some(params) = sm.functions[f].node.field("parameters") {
            let mut args = args.into_iter();
            for p in named_children(params) {
                // The argument, or else the default (folded there).
                let v = args.next().flatten().or_else(|| {
                    let d = p
                        .field("value")
                        .filter(|_| p.kind_name().ends_with("default_parameter"))?;
                    Some(folder.value(d, &[], depth + 1))
                });
                let n = match p.kind_name() {
                    "identifier" => Some(p),
                    "default_parameter" | "typed_parameter" | "typed_default_parameter" => {
                        p.field("name").or_else(|| p.named_child(0))
                    }
                    _ => None,
                };
                if let (Some(n), Some(v)) = (n.filter(|n| n.kind_name() == "identifier"), v) {
                    env2.push((sm.text(n), v));
                }
            }
        }
        let values = folder.return_values(f);
        let mut items = Vec::new();
        for v in &values {
            folder.items(*v, &env2, &mut items, depth + 1);
        }
        self.budget.set(folder.budget.get());
        if values.is_empty() {
            out.push(Err(unresolved(
                call,
                format!("`{}` returns no list that can be read", self.text(call)),
            )));
            return true;
        }
        let span = Span::of(&call);
        let shown = format!("{module}.py");
        for i in items {
            out.push(match i {
                Ok((s, _)) => Ok((s, span)),
                Err(u) => {
                    let line = line_at(&text, u.span.start);
                    Err(Unresolved {
                        span,
                        reason: format!("{shown}:{line}: {}", u.reason),
                    })
                }
            });
        }
        true
    }

    /// The string returned by a call to a function or `self` method of this file, when every
    /// `return` gives the same one.
    pub(super) fn returned_string(
        &self,
        call: Node<'_>,
        env: &Env<'_>,
        depth: usize,
    ) -> Option<Str> {
        let mut ignored = Vec::new();
        let f = self.callee(call, &mut ignored)??;
        if !ignored.is_empty() {
            return None;
        }
        let env2 = self.bind_parameters(f, call, env, depth);
        let mut value: Option<Str> = None;
        for v in self.return_values(f) {
            if !self.reachable(v, &env2, depth) {
                continue;
            }
            let s = self.string(v, &env2, depth + 1)?;
            match &value {
                Some(old) if old.value != s.value => return None,
                _ => value = Some(s),
            }
        }
        value
    }

    /// The function a call invokes: `Some(Some(f))` for a function of this file,
    /// `Some(None)` when the items came from a subclass in another file (already pushed),
    /// `None` when the callee is unknown.
    fn callee(&self, call: Node<'_>, out: &mut Vec<Item>) -> Option<Option<usize>> {
        let func = call.field("function")?;
        let m = self.m;
        match func.kind_name() {
            "identifier" => {
                let name = self.text(func);
                let scope = m.enclosing_function(call);
                if scope.is_some_and(|s| m.function_binds(s, name)) {
                    return None;
                }
                let mut found = m
                    .functions
                    .iter()
                    .enumerate()
                    .filter(|(_, f)| f.name == name && f.class.is_none() && f.parent.is_none());
                let first = found.next()?.0;
                found.next().is_none().then_some(Some(first))
            }
            "attribute" => {
                let obj = func.field("object")?;
                if !is_var(m, obj, "self") {
                    return None;
                }
                let name = self.text(func.field("attribute")?);
                let mut ctx = self.ctx.borrow_mut();
                if ctx.chain.is_empty() {
                    return None;
                }
                if !ctx.consulted.iter().any(|c| c == name) {
                    ctx.consulted.push(name.to_string());
                }
                if let Some((_, items)) = ctx.overrides.iter().find(|(n, _)| n == name) {
                    let span = Span::of(&call);
                    out.extend(items.iter().map(|i| match i {
                        Ok((s, _)) => Ok((s.clone(), span)),
                        Err(u) => Err(Unresolved {
                            span,
                            reason: u.reason.clone(),
                        }),
                    }));
                    return Some(None);
                }
                let f = ctx.chain.iter().find_map(|c| method(m, c, name))?;
                Some(Some(f))
            }
            _ => None,
        }
    }

    /// The values of the `return` statements of function `f` (not of functions nested in it).
    pub(super) fn return_values(&self, f: usize) -> Vec<Node<'m>> {
        let Some(body) = self.m.functions[f].node.field("body") else {
            return Vec::new();
        };
        descendants(body)
            .filter(|r| r.kind_name() == "return_statement")
            .filter(|r| self.m.enclosing_function(*r) == Some(f))
            .filter_map(|r| r.named_child(0))
            .filter(|v| v.kind_name() != "none")
            .take(MAX_RETURNS)
            .collect()
    }

    /// False when `n` sits in a branch of an `if os.path.isabs(p):` (or its `else`) that the
    /// folded value of `p` rules out.
    fn reachable(&self, n: Node<'_>, env: &Env<'_>, depth: usize) -> bool {
        let mut child = n;
        let mut cur = self.m.parent(n);
        for _ in 0..64 {
            let Some(p) = cur else { return true };
            if p.kind_name() == "function_definition" {
                return true;
            }
            let branch = match p.kind_name() {
                "if_statement" if p.field("consequence").is_some_and(|c| c.id() == child.id()) => {
                    Some((p, true))
                }
                "else_clause" => self.m.parent(p).map(|i| (i, false)),
                _ => None,
            };
            if let Some((stmt, taken)) = branch {
                let holds = stmt
                    .field("condition")
                    .and_then(|c| self.isabs(c, env, depth));
                if holds.is_some_and(|h| h != taken) {
                    return false;
                }
            }
            child = p;
            cur = self.m.parent(p);
        }
        true
    }

    /// `os.path.isabs(p)` / `not os.path.isabs(p)` with `p` folding to a string.
    fn isabs(&self, cond: Node<'_>, env: &Env<'_>, depth: usize) -> Option<bool> {
        if cond.kind_name() == "not_operator" {
            return self.isabs(cond.field("argument")?, env, depth).map(|b| !b);
        }
        if cond.kind_name() != "call"
            || self.m.qualified_name(cond.field("function")?).as_deref() != Some("os.path.isabs")
        {
            return None;
        }
        let s = self.string(argument(cond, 0, "s", self.m.source)?, env, depth + 1)?;
        Some(Path::new(&s.value).is_absolute())
    }

    /// Parameters of `f` bound to the call's arguments that fold (`self` skipped for methods).
    fn bind_parameters(
        &self,
        f: usize,
        call: Node<'_>,
        env: &Env<'_>,
        depth: usize,
    ) -> Vec<(&'m str, Val)> {
        let mut out = Vec::new();
        let Some(params) = self.m.functions[f].node.field("parameters") else {
            return out;
        };
        let skip = usize::from(self.m.functions[f].class.is_some());
        for (i, p) in named_children(params).skip(skip).enumerate() {
            let name = match p.kind_name() {
                "identifier" => p,
                "default_parameter" | "typed_parameter" | "typed_default_parameter" => {
                    match p.field("name").or_else(|| p.named_child(0)) {
                        Some(n) if n.kind_name() == "identifier" => n,
                        _ => continue,
                    }
                }
                _ => break,
            };
            let name = self.text(name);
            let arg = argument(call, i, name, self.m.source).or_else(|| p.field("value"));
            let Some(arg) = arg else { continue };
            out.push((name, self.value(arg, env, depth + 1)));
        }
        out
    }
}
