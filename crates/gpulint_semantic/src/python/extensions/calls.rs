//! Source lists returned by functions and methods: `sources=get_sources()`, and op builders
//! whose base class builds `CUDAExtension(sources=self.sources())` while each subclass (in
//! the same file or a sibling module) returns its own list. Each such subclass is its own
//! build entry (`FusedAdamBuilder.sources`). Also comprehension filters that only drop
//! entries (`if len(x) > 0`, `if f.endswith(".cu")`) and `os.listdir` under such a filter.

use super::{
    argument, unresolved, BuildKind, Env, ExtensionBuild, Folder, Item, Str, Val, Via,
    MAX_GLOB_MATCHES,
};
use crate::python::PythonModel;
use gpulint_source::Span;
use gpulint_syntax::{descendants, named_children, NodeExt};
use gpulint_syntax::{parse, Lang};
use std::path::{Path, PathBuf};
use tree_sitter::Node;

/// Return statements folded per function.
const MAX_RETURNS: usize = 16;
/// Classes followed up a chain of bases, or down to subclasses.
const MAX_CLASSES: usize = 64;
/// Sibling modules read for subclasses.
const MAX_SIBLINGS: usize = 256;
/// Sibling modules larger than this are not read.
const MAX_SIBLING_SIZE: u64 = 1 << 20;

/// What `self` is while folding a build call inside a method.
#[derive(Debug, Default)]
pub(super) struct SelfCtx {
    /// Classes of this file to look methods up in, most derived first.
    chain: Vec<String>,
    /// Methods of a subclass in another file, already folded there.
    overrides: Vec<(String, Vec<Item>)>,
    /// Methods called on `self` while folding.
    consulted: Vec<String>,
    /// Folding in a module read for another file: its own imports are not followed.
    foreign: bool,
}

/// The names of a class's bases (last segment of dotted names).
fn bases<'t>(m: &PythonModel<'t>, class: Node<'t>) -> Vec<&'t str> {
    let Some(args) = class.field("superclasses") else {
        return Vec::new();
    };
    named_children(args)
        .filter_map(|b| match b.kind() {
            "identifier" => Some(m.text(b)),
            "attribute" => b.field("attribute").map(|a| m.text(a)),
            _ => None,
        })
        .collect()
}

/// The method `name` defined directly in class `class` of `m`.
fn method(m: &PythonModel<'_>, class: &str, name: &str) -> Option<usize> {
    m.functions
        .iter()
        .position(|f| f.name == name && f.class.as_deref() == Some(class))
}

/// `class` and its bases defined in `m`, most derived first.
fn chain(m: &PythonModel<'_>, class: &str) -> Vec<String> {
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

/// Is `n` the name `var` (an identifier)?
fn is_var(m: &PythonModel<'_>, n: Node<'_>, var: &str) -> bool {
    n.kind() == "identifier" && m.text(n) == var
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
            for a in named_children(list).filter(|a| a.kind() != "comment") {
                if matches!(
                    a.kind(),
                    "keyword_argument" | "list_splat" | "dictionary_splat"
                ) {
                    break;
                }
                args.push(match self.string(a, env, depth + 1) {
                    Some(s) => Some(Val::Str(s)),
                    None => {
                        let mut items = Vec::new();
                        self.items(a, env, &mut items, depth + 1);
                        Some(Val::List(items))
                    }
                });
            }
        }
        let folder = Folder {
            m: &sm,
            file: &path,
            absolute: super::absolute(&path),
            budget: std::cell::Cell::new(self.budget.get()),
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
                        .filter(|_| p.kind().ends_with("default_parameter"))?;
                    Some(match folder.string(d, &[], depth + 1) {
                        Some(s) => Val::Str(s),
                        None => {
                            let mut items = Vec::new();
                            folder.items(d, &[], &mut items, depth + 1);
                            Val::List(items)
                        }
                    })
                });
                let n = match p.kind() {
                    "identifier" => Some(p),
                    "default_parameter" | "typed_parameter" | "typed_default_parameter" => {
                        p.field("name").or_else(|| p.named_child(0))
                    }
                    _ => None,
                };
                if let (Some(n), Some(v)) = (n.filter(|n| n.kind() == "identifier"), v) {
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
                    let line = text
                        .get(..u.span.start)
                        .map_or(0, |t| t.matches('\n').count())
                        + 1;
                    Err(super::Unresolved {
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
        match func.kind() {
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
                        Err(u) => Err(super::Unresolved {
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
    fn return_values(&self, f: usize) -> Vec<Node<'m>> {
        let Some(body) = self.m.functions[f].node.field("body") else {
            return Vec::new();
        };
        descendants(body)
            .filter(|r| r.kind() == "return_statement")
            .filter(|r| self.m.enclosing_function(*r) == Some(f))
            .filter_map(|r| r.named_child(0))
            .filter(|v| v.kind() != "none")
            .take(MAX_RETURNS)
            .collect()
    }

    /// False when `n` sits in a branch of an `if os.path.isabs(p):` (or its `else`) that the
    /// folded value of `p` rules out.
    fn reachable(&self, n: Node<'_>, env: &Env<'_>, depth: usize) -> bool {
        let mut child = n;
        let mut cur = n.parent();
        for _ in 0..64 {
            let Some(p) = cur else { return true };
            if p.kind() == "function_definition" {
                return true;
            }
            let branch = match p.kind() {
                "if_statement" if p.field("consequence").is_some_and(|c| c.id() == child.id()) => {
                    Some((p, true))
                }
                "else_clause" => p.parent().map(|i| (i, false)),
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
            cur = p.parent();
        }
        true
    }

    /// `os.path.isabs(p)` / `not os.path.isabs(p)` with `p` folding to a string.
    fn isabs(&self, cond: Node<'_>, env: &Env<'_>, depth: usize) -> Option<bool> {
        if cond.kind() == "not_operator" {
            return self.isabs(cond.field("argument")?, env, depth).map(|b| !b);
        }
        if cond.kind() != "call"
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
            let name = match p.kind() {
                "identifier" => p,
                "default_parameter" | "typed_parameter" | "typed_default_parameter" => {
                    match p.field("name").or_else(|| p.named_child(0)) {
                        Some(n) if n.kind() == "identifier" => n,
                        _ => continue,
                    }
                }
                _ => break,
            };
            let name = self.text(name);
            let arg = argument(call, i, name, self.m.source).or_else(|| p.field("value"));
            let Some(arg) = arg else { continue };
            let value = match self.string(arg, env, depth + 1) {
                Some(s) => Val::Str(s),
                None => {
                    let mut items = Vec::new();
                    self.items(arg, env, &mut items, depth + 1);
                    Val::List(items)
                }
            };
            out.push((name, value));
        }
        out
    }

    /// A comprehension's `if` clause that only drops entries: `len(x) > 0`, `x`, `x != ""`
    /// (empty strings) or `x.endswith(".cu")` / `x.endswith((".cu", ".cpp"))`. Some(keep) for
    /// the value `v` of the variable `var`, None for any other condition.
    pub(super) fn filter_keeps(&self, cond: Node<'_>, var: &str, v: &str) -> Option<bool> {
        let m = self.m;
        let cond = match cond.kind() {
            "if_clause" => cond.named_child(0)?,
            _ => cond,
        };
        match cond.kind() {
            "identifier" if is_var(m, cond, var) => Some(!v.is_empty()),
            "comparison_operator" => {
                let parts: Vec<Node<'_>> = named_children(cond).collect();
                let op = cond.child(1).map(|o| self.text(o))?;
                let [l, r] = parts.as_slice() else {
                    return None;
                };
                let len_of_var = l.kind() == "call"
                    && l.field("function").is_some_and(|f| is_var(m, f, "len"))
                    && argument(*l, 0, "", m.source).is_some_and(|a| is_var(m, a, var));
                if len_of_var && self.text(*r) == "0" && matches!(op, ">" | "!=") {
                    return Some(!v.is_empty());
                }
                let empty =
                    crate::python::string_literal(*r, m.source).is_some_and(|s| s.is_empty());
                (is_var(m, *l, var) && empty && op == "!=").then_some(!v.is_empty())
            }
            "call" => {
                let func = cond.field("function")?;
                let obj = func.field("object")?;
                if func.kind() != "attribute"
                    || !is_var(m, obj, var)
                    || self.text(func.field("attribute")?) != "endswith"
                {
                    return None;
                }
                let arg = argument(cond, 0, "", m.source)?;
                let suffixes: Vec<String> = match arg.kind() {
                    "tuple" => named_children(arg)
                        .map(|s| crate::python::string_literal(s, m.source))
                        .collect::<Option<_>>()?,
                    _ => vec![crate::python::string_literal(arg, m.source)?],
                };
                Some(suffixes.iter().any(|s| v.ends_with(s.as_str())))
            }
            _ => None,
        }
    }

    /// `os.listdir(d)`: the sorted names in folder `d` (bounded), as the loop of a filtered
    /// comprehension gives them. None when `iter` is not such a call or `d` does not fold.
    pub(super) fn listdir(&self, iter: Node<'_>, env: &Env<'_>, depth: usize) -> Option<Vec<Item>> {
        if iter.kind() != "call" {
            return None;
        }
        let func = iter.field("function")?;
        if self.m.qualified_name(func).as_deref() != Some("os.listdir") {
            return None;
        }
        let dir = match argument(iter, 0, "path", self.m.source) {
            Some(a) => self.string(a, env, depth)?,
            None => Str {
                value: ".".into(),
                anchored: false,
            },
        };
        let path = self.resolve(&dir);
        gpulint_source::note_dependency(&path);
        let mut names: Vec<String> = std::fs::read_dir(&path)
            .ok()?
            .filter_map(|e| e.ok())
            .take(MAX_GLOB_MATCHES)
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .collect();
        names.sort();
        let span = Span::of(&iter);
        Some(
            names
                .into_iter()
                .map(|value| {
                    Ok((
                        Str {
                            value,
                            anchored: false,
                        },
                        span,
                    ))
                })
                .collect(),
        )
    }

    /// The builds of one build call: inside a method of a class whose subclasses (in this file
    /// or a sibling module) override the methods it calls on `self`, one build per such
    /// subclass; otherwise the call's own build.
    pub(super) fn builds_for(&self, call: Node<'_>, kind: BuildKind) -> Vec<ExtensionBuild> {
        let m = self.m;
        let class = m
            .enclosing_function(call)
            .and_then(|f| m.functions[f].class.clone());
        let Some(class) = class else {
            return vec![self.build(call, kind)];
        };
        *self.ctx.borrow_mut() = SelfCtx {
            chain: chain(m, &class),
            ..Default::default()
        };
        let own = self.build(call, kind);
        let mut consulted = std::mem::take(&mut self.ctx.borrow_mut().consulted);
        // Methods that only give the extension's name (`name=self.absolute_name()`) do not
        // make a subclass an entry; `sources` names the entry when it is among the others.
        let name_arg = argument(call, 0, "name", m.source);
        consulted.retain(|c| {
            !name_arg.is_some_and(|a| {
                descendants(a).any(|n| {
                    n.kind() == "call"
                        && n.field("function").is_some_and(|f| {
                            f.kind() == "attribute"
                                && f.field("object").is_some_and(|o| is_var(m, o, "self"))
                                && f.field("attribute").is_some_and(|x| self.text(x) == c)
                        })
                })
            })
        });
        consulted.sort_by_key(|c| c != "sources");
        if consulted.is_empty() {
            *self.ctx.borrow_mut() = SelfCtx::default();
            return vec![own];
        }
        let mut out = Vec::new();
        // Subclasses in this file.
        let mut family = vec![class.clone()];
        let mut i = 0;
        while i < family.len() && family.len() < MAX_CLASSES {
            for c in &m.classes {
                if !family.contains(&c.name) && bases(m, c.node).contains(&family[i].as_str()) {
                    family.push(c.name.clone());
                }
            }
            i += 1;
        }
        for sub in family.iter().skip(1) {
            let Some((name, f)) = consulted
                .iter()
                .find_map(|n| method(m, sub, n).map(|f| (n, f)))
            else {
                continue;
            };
            *self.ctx.borrow_mut() = SelfCtx {
                chain: chain(m, sub),
                ..Default::default()
            };
            let mut b = self.build(call, kind);
            b.via = Some(Via {
                what: format!("{sub}.{name}"),
                file: None,
                at: Span::of(&m.functions[f].node),
            });
            out.push(b);
        }
        // Subclasses in sibling modules.
        for (file, sub, name, line, overrides) in self.sibling_subclasses(&family, &consulted) {
            *self.ctx.borrow_mut() = SelfCtx {
                chain: chain(m, &class),
                overrides,
                ..Default::default()
            };
            let mut b = self.build(call, kind);
            // Spans point into this file: a missing source is not reported here.
            let (exist, missing): (Vec<_>, Vec<_>) = b.sources.drain(..).partition(|s| s.exists);
            b.sources = exist;
            for s in missing {
                b.unresolved.push(super::Unresolved {
                    span: s.span,
                    reason: format!("`{}` does not exist", s.path.display()),
                });
            }
            b.via = Some(Via {
                what: format!("{sub}.{name}"),
                file: Some((file, line)),
                at: Span::of(&call),
            });
            out.push(b);
        }
        *self.ctx.borrow_mut() = SelfCtx::default();
        // The base's own list is abstract when subclasses give theirs.
        if out.is_empty() || !own.sources.is_empty() {
            out.insert(0, own);
        }
        out
    }

    /// Classes in the `.py` files next to this one that derive (through any chain of classes
    /// there) from one of `family` and define one of `methods`: (file, class, method, 1-based
    /// line of its `def`, the zero-argument methods of `methods` it defines, folded there).
    #[allow(clippy::type_complexity)]
    fn sibling_subclasses(
        &self,
        family: &[String],
        methods: &[String],
    ) -> Vec<(PathBuf, String, String, usize, Vec<(String, Vec<Item>)>)> {
        let dir = self.dir();
        gpulint_source::note_dependency(&dir);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return Vec::new();
        };
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "py") && *p != self.absolute)
            .filter(|p| {
                std::fs::metadata(p).is_ok_and(|md| md.is_file() && md.len() <= MAX_SIBLING_SIZE)
            })
            .collect();
        files.sort();
        files.truncate(MAX_SIBLINGS);
        // Read each once: (file, text, [(class, bases)]).
        let mut read: Vec<(PathBuf, String, Vec<(String, Vec<String>)>)> = Vec::new();
        for f in files {
            let Ok(text) = std::fs::read_to_string(&f) else {
                continue;
            };
            if !text.contains("class ") {
                continue;
            }
            let Some(tree) = parse(Lang::Python, &text) else {
                continue;
            };
            let sm = crate::python::build(&tree, &text);
            let classes = sm
                .classes
                .iter()
                .filter(|c| c.parent.is_none())
                .map(|c| {
                    let b = bases(&sm, c.node).into_iter().map(str::to_string).collect();
                    (c.name.clone(), b)
                })
                .collect();
            read.push((f, text, classes));
        }
        let mut family: Vec<String> = family.to_vec();
        let mut members: Vec<(usize, String)> = Vec::new();
        loop {
            let before = members.len();
            for (i, (_, _, classes)) in read.iter().enumerate() {
                for (c, b) in classes {
                    if members.iter().any(|(j, n)| *j == i && n == c) || family.len() >= MAX_CLASSES
                    {
                        continue;
                    }
                    if b.iter().any(|b| family.contains(b)) {
                        members.push((i, c.clone()));
                        family.push(c.clone());
                    }
                }
            }
            if members.len() == before {
                break;
            }
        }
        members.sort();
        let mut out = Vec::new();
        for (i, class) in members {
            let (file, text, _) = &read[i];
            gpulint_source::note_dependency(file);
            let Some(tree) = parse(Lang::Python, text) else {
                continue;
            };
            let sm = crate::python::build(&tree, text);
            let folder = Folder {
                m: &sm,
                file,
                absolute: super::absolute(file),
                budget: std::cell::Cell::new(self.budget.get()),
                // `self` there is the subclass (methods of its file only).
                ctx: std::cell::RefCell::new(SelfCtx {
                    chain: chain(&sm, &class),
                    foreign: true,
                    ..Default::default()
                }),
            };
            let mut overrides = Vec::new();
            let mut first: Option<(String, usize)> = None;
            for name in methods {
                let Some(f) = method(&sm, &class, name) else {
                    continue;
                };
                let takes_args = sm.functions[f]
                    .node
                    .field("parameters")
                    .is_some_and(|p| named_children(p).count() > 1);
                if takes_args {
                    continue;
                }
                if first.is_none() {
                    let line = sm.functions[f].node.start_position().row + 1;
                    first = Some((name.clone(), line));
                }
                let mut items = Vec::new();
                let values = folder.return_values(f);
                if values.is_empty() {
                    continue;
                }
                for v in values {
                    folder.items(v, &[], &mut items, 1);
                }
                // Unresolved parts are shown at the call in this file: say where they are.
                let shown = file.file_name().map(|n| n.to_string_lossy().into_owned());
                for i in &mut items {
                    if let Err(u) = i {
                        let line = text
                            .get(..u.span.start)
                            .map_or(0, |t| t.matches('\n').count())
                            + 1;
                        u.reason =
                            format!("{}:{line}: {}", shown.as_deref().unwrap_or(""), u.reason);
                    }
                }
                overrides.push((name.clone(), items));
            }
            self.budget.set(folder.budget.get());
            if let Some((name, line)) = first.filter(|_| !overrides.is_empty()) {
                out.push((file.clone(), class, name, line, overrides));
            }
        }
        out
    }
}

/// A relative source that is not next to the file: the nearest ancestor folder (up to the
/// repository root, a folder holding `.git`, or 4 levels up) under which it exists.
pub(super) fn in_ancestor(dir: &Path, relative: &str) -> Option<PathBuf> {
    let mut cur = dir.to_path_buf();
    for _ in 0..4 {
        if cur.join(".git").exists() {
            return None;
        }
        cur = cur.parent()?.to_path_buf();
        let p = super::normalize(&cur.join(relative));
        gpulint_source::note_dependency(&p);
        if p.is_file() {
            return Some(p);
        }
    }
    None
}

/// TensorFlow custom-op layout: `_foo_ops.so` built from `cc/kernels/foo_kernels.cc` and
/// `cc/ops/foo_ops.cc`. Looks for a folder named `cc` or `kernels` in the library's folder or
/// up to two folders above, and in it and its direct subfolders for sources named after the
/// op; the nearest folder with any wins.
pub(super) fn tf_op_sources(lib_dir: &Path, stem: &str) -> Vec<PathBuf> {
    let stem = stem.trim_start_matches('_').trim_start_matches("lib");
    let base = stem
        .strip_suffix("_ops")
        .or_else(|| stem.strip_suffix("_op"))
        .unwrap_or(stem);
    if base.is_empty() {
        return Vec::new();
    }
    let mut names = Vec::new();
    for suffix in ["", "_ops", "_op", "_kernels", "_kernel"] {
        for ext in ["cc", "cu.cc", "cu", "cpp"] {
            names.push(format!("{base}{suffix}.{ext}"));
        }
    }
    let mut dir = Some(lib_dir);
    for _ in 0..3 {
        let Some(d) = dir else { break };
        let mut found = Vec::new();
        for root in ["cc", "kernels"] {
            let root = d.join(root);
            if !root.is_dir() {
                continue;
            }
            let mut folders = vec![root.clone()];
            gpulint_source::note_dependency(&root);
            if let Ok(entries) = std::fs::read_dir(&root) {
                let mut subs: Vec<PathBuf> = entries
                    .filter_map(|e| e.ok())
                    .take(MAX_GLOB_MATCHES)
                    .map(|e| e.path())
                    .filter(|p| p.is_dir())
                    .collect();
                subs.sort();
                folders.extend(subs);
            }
            for f in folders {
                gpulint_source::note_dependency(&f);
                for n in &names {
                    let p = f.join(n);
                    if p.is_file() && !found.contains(&p) {
                        found.push(p);
                    }
                }
            }
        }
        if !found.is_empty() {
            found.sort();
            return found;
        }
        dir = d.parent();
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::super::{collect, ExtensionBuild};
    use super::*;

    fn builds(src: &str, file: &Path) -> Vec<ExtensionBuild> {
        let tree = parse(Lang::Python, src).unwrap();
        let m = crate::python::build(&tree, src);
        collect(&m, file)
    }

    fn tree(files: &[&str]) -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        for f in files {
            let p = tmp.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "").unwrap();
        }
        tmp
    }

    fn names(b: &ExtensionBuild) -> Vec<String> {
        b.sources
            .iter()
            .map(|s| s.path.file_name().unwrap().to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn helper_functions_with_parameters_and_branches() {
        let tmp = tree(&["csrc/a.cu", "csrc/b.cu", "csrc/c.cpp"]);
        let src = r#"
import os
from torch.utils.cpp_extension import CUDAExtension
def under(d, names=["a.cu", "b.cu"]):
    return [os.path.join(d, f) for f in names]
def root(p):
    if os.path.isabs(p):
        return p
    return os.path.join(os.path.dirname(__file__), p)
def pick(cuda):
    if cuda:
        return ["csrc/a.cu"]
    return ["csrc/c.cpp"]
CUDAExtension("one", under("csrc") + [root("csrc/c.cpp")])
CUDAExtension("two", pick(True))
CUDAExtension("three", missing_helper())
"#;
        let b = builds(src, &tmp.path().join("setup.py"));
        assert_eq!(names(&b[0]), ["a.cu", "b.cu", "c.cpp"]);
        assert!(b[0].unresolved.is_empty(), "{:?}", b[0].unresolved);
        // Every return contributes, as a name bound in two branches does.
        assert_eq!(names(&b[1]), ["a.cu", "c.cpp"]);
        assert!(b[2].sources.is_empty() && b[2].unresolved.len() == 1);
    }

    #[test]
    fn subclasses_in_the_same_file_are_entries() {
        let tmp = tree(&["csrc/x.cu", "csrc/y.cu", "ops/.keep"]);
        let src = r#"
from torch.utils.cpp_extension import load
class Base:
    def sources(self):
        raise NotImplementedError
    def name(self):
        return "base"
    def load(self):
        return load(name=self.name(), sources=[s for s in self.sources() if s])
class X(Base):
    def sources(self):
        return ["csrc/x.cu", ""]
class Y(X):
    def sources(self):
        return ["csrc/y.cu"]
class Z(X):
    pass
"#;
        let b = builds(src, &tmp.path().join("ops/build.py"));
        let what: Vec<String> = b.iter().map(|b| b.describe()).collect();
        assert_eq!(what, ["X.sources", "Y.sources"]);
        // Relative to the repository root above the file.
        assert_eq!(names(&b[0]), ["x.cu"]);
        assert_eq!(names(&b[1]), ["y.cu"]);
        assert!(b.iter().all(|b| b.unresolved.is_empty()), "{b:?}");
        assert_eq!(
            b[0].via.as_ref().unwrap().at.start,
            src.find("def sources(self):\n        return [\"csrc/x")
                .unwrap()
        );
    }

    #[test]
    fn listdir_only_under_a_filter_that_drops_entries() {
        let tmp = tree(&["k/b.cu", "k/a.cu", "k/c.cpp", "k/notes.txt"]);
        let src = r#"
import os
from torch.utils.cpp_extension import CUDAExtension
K = os.path.join(os.path.dirname(__file__), "k")
CUDAExtension("cu", [os.path.join(K, f) for f in os.listdir(K) if f.endswith((".cu", ".cpp"))])
CUDAExtension("all", [os.path.join(K, f) for f in os.listdir(K)])
CUDAExtension("odd", [os.path.join(K, f) for f in os.listdir(K) if "a" in f])
"#;
        let b = builds(src, &tmp.path().join("setup.py"));
        assert_eq!(names(&b[0]), ["a.cu", "b.cu", "c.cpp"]);
        assert!(b[1].sources.is_empty() && !b[1].unresolved.is_empty());
        assert!(b[2].sources.is_empty() && !b[2].unresolved.is_empty());
    }

    #[test]
    fn functions_of_a_sibling_module() {
        let tmp = tree(&["csrc/a.cu", "csrc/b.cu", "other.py"]);
        let d = tmp.path();
        std::fs::write(
            d.join("ext_utils.py"),
            "import os\nfrom other import more\ndef get_sources(root, names=['a.cu']):\n    return [os.path.join(root, n) for n in names] + ['csrc/b.cu']\ndef chained():\n    return more()\n",
        )
        .unwrap();
        let src = r#"
from torch.utils.cpp_extension import CUDAExtension
from .ext_utils import get_sources
import ext_utils as eu
CUDAExtension("one", get_sources("csrc"))
CUDAExtension("two", eu.get_sources("csrc", ["b.cu"]))
CUDAExtension("three", eu.chained())
CUDAExtension("four", eu.missing())
"#;
        let b = builds(src, &d.join("setup.py"));
        assert_eq!(names(&b[0]), ["a.cu", "b.cu"]);
        assert!(b[0].unresolved.is_empty(), "{:?}", b[0].unresolved);
        assert_eq!(names(&b[1]), ["b.cu"]);
        // Its own imports are not followed: unresolved, saying where.
        assert!(b[2].sources.is_empty());
        assert!(
            b[2].unresolved[0].reason.starts_with("ext_utils.py:6:"),
            "{:?}",
            b[2].unresolved
        );
        assert!(b[3].sources.is_empty() && b[3].unresolved.len() == 1);
    }

    #[test]
    fn recursive_helpers_stay_bounded() {
        let src = "from torch.utils.cpp_extension import load\ndef a():\n    return b() + b()\ndef b():\n    return a() + a()\nclass C:\n    def sources(self):\n        return self.sources() + self.sources()\n    def go(self):\n        return load('c', self.sources())\nload('e', a())\n";
        let started = std::time::Instant::now();
        let b = builds(src, Path::new("/nonexistent/setup.py"));
        assert_eq!(b.len(), 2);
        assert!(started.elapsed().as_secs() < 20);
        assert!(b
            .iter()
            .all(|b| b.sources.is_empty() && !b.unresolved.is_empty()));
    }

    #[test]
    fn ancestors_stop_at_the_repository_root() {
        let tmp = tree(&["csrc/r.cu", "repo/.git/HEAD", "repo/a/b/x.py"]);
        let d = tmp.path();
        assert_eq!(in_ancestor(&d.join("repo/a/b"), "csrc/r.cu"), None);
        std::fs::create_dir_all(d.join("repo/csrc")).unwrap();
        std::fs::write(d.join("repo/csrc/r.cu"), "").unwrap();
        assert_eq!(
            in_ancestor(&d.join("repo/a/b"), "csrc/r.cu"),
            Some(d.join("repo/csrc/r.cu"))
        );
    }

    #[test]
    fn tf_op_sources_nearest_folder_wins() {
        let tmp = tree(&[
            "op/cc/kernels/foo_kernels.cu.cc",
            "op/cc/ops/foo_ops.cc",
            "op/cc/kernels/bar_kernels.cc",
            "op/python/ops/kernels/foo.cc",
        ]);
        let d = tmp.path();
        let rel = |v: Vec<PathBuf>| -> Vec<String> {
            v.iter()
                .map(|p| p.strip_prefix(d).unwrap().display().to_string())
                .collect()
        };
        assert_eq!(
            rel(tf_op_sources(&d.join("op/python/ops"), "_foo_ops")),
            ["op/python/ops/kernels/foo.cc"]
        );
        assert_eq!(
            rel(tf_op_sources(&d.join("op/python"), "_foo_ops")),
            ["op/cc/kernels/foo_kernels.cu.cc", "op/cc/ops/foo_ops.cc"]
        );
        assert!(tf_op_sources(&d.join("op/python"), "_baz_ops").is_empty());
    }
}
