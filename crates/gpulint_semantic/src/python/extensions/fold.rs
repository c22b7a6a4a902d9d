//! Folding a source-list expression to paths: strings, names followed through their
//! bindings, path calls (`os.path.join`, `Path(...).parent / ...`), list operations and globs
//! expanded against the file system. Everything is bounded (depth, glob matches).

use super::{
    argument, unresolved, Env, Folder, Item, Str, Unresolved, Val, MAX_DEPTH, MAX_GLOB_DEPTH,
    MAX_GLOB_MATCHES,
};
use gpulint_source::Span;
use gpulint_syntax::{descendants, named_children, NodeExt};
use std::path::{Component, Path, PathBuf};
use tree_sitter::Node;

impl<'m> Folder<'_, 'm> {
    /// Spends one step of the file's folding budget: false once it is spent (names that refer
    /// to each other many times over could otherwise take exponential time).
    fn step(&self) -> bool {
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
        match expr.kind() {
            "list" | "tuple" | "set" => {
                for c in named_children(expr) {
                    if c.kind() != "comment" {
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
        for &a in &self.m.assignments {
            if a.start_byte() >= limit {
                break;
            }
            let is_target = a
                .field("left")
                .is_some_and(|l| l.kind() == "identifier" && self.text(l) == name);
            if !is_target || a.end_byte() > limit || self.m.enclosing_function(a) != scope {
                continue;
            }
            match a.kind() {
                "assignment" => out.push(a),
                _ if a.field("operator").map(|o| self.text(o)) == Some("+=") => out.push(a),
                _ => return None,
            }
        }
        for &(call, _) in &self.m.calls {
            if call.start_byte() >= limit {
                break;
            }
            let Some(func) = call.field("function").filter(|f| f.kind() == "attribute") else {
                continue;
            };
            let (Some(obj), Some(attr)) = (func.field("object"), func.field("attribute")) else {
                continue;
            };
            if obj.kind() != "identifier"
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
        (out.first()?.kind() == "assignment").then_some(out)
    }

    /// What a name holds where `at` uses it, following its bindings in order: a plain
    /// assignment replaces the value (it may use the old one: `srcs = [join(d, s) for s in
    /// srcs]`), except one in another branch of the same `if`, which adds its list; `+=`,
    /// `.append()` and `.extend()` add to the list.
    fn name_value(&self, at: Node<'_>, name: &str, depth: usize) -> Option<Val> {
        if depth > MAX_DEPTH || !self.step() {
            return None;
        }
        let d = depth + 1;
        let mut current: Option<Val> = None;
        let mut last_plain: Option<Node<'_>> = None;
        for s in self.binders(at, name)? {
            let env: Vec<(&str, Val)> = current.iter().map(|v| (name, v.clone())).collect();
            match s.kind() {
                "assignment" => {
                    let rhs = s.field("right")?;
                    let new = match self.string(rhs, &env, d) {
                        Some(v) => Val::Str(v),
                        None => {
                            let mut items = Vec::new();
                            self.items(rhs, &env, &mut items, d);
                            Val::List(items)
                        }
                    };
                    // Under its own condition, and not a rewrite of the old value: the build
                    // may compile either.
                    let rewrite =
                        descendants(rhs).any(|n| n.kind() == "identifier" && self.text(n) == name);
                    let alternative = !rewrite && last_plain.is_some_and(|p| conditional(p, s));
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

    /// `[os.path.join(d, f) for f in [...]]` with one `for` and at most one `if` that only
    /// drops entries (`if f.endswith(".cu")`, `if len(f) > 0`); under such a filter the loop
    /// may run over `os.listdir(d)`.
    fn comprehension(
        &self,
        expr: Node<'_>,
        env: &Env<'_>,
        out: &mut Vec<Item>,
        depth: usize,
    ) -> bool {
        let clauses: Vec<Node<'_>> = named_children(expr)
            .skip(1)
            .filter(|c| c.kind() != "comment")
            .collect();
        let (Some(body), Some(clause)) = (expr.field("body"), clauses.first()) else {
            return false;
        };
        let filter = match clauses.as_slice() {
            [_] => None,
            [_, f] if f.kind() == "if_clause" => Some(*f),
            _ => return false,
        };
        if clause.kind() != "for_in_clause" {
            return false;
        }
        let (Some(var), Some(iter)) = (clause.field("left"), clause.field("right")) else {
            return false;
        };
        if var.kind() != "identifier" {
            return false;
        }
        let name = self.text(var);
        // Every filter value must be understood before anything is kept.
        if filter.is_some_and(|f| self.filter_keeps(f, name, "").is_none()) {
            return false;
        }
        let mut values = match filter.and_then(|_| self.listdir(iter, env, depth)) {
            Some(listed) => listed,
            None => {
                let mut values = Vec::new();
                self.items(iter, env, &mut values, depth);
                values
            }
        };
        if let Some(f) = filter {
            values.retain(|v| match v {
                Ok((s, _)) => self.filter_keeps(f, name, &s.value) == Some(true),
                Err(_) => true,
            });
        }
        for v in values {
            match v {
                Ok((s, span)) => {
                    let mut env2: Vec<(&str, Val)> = env.to_vec();
                    env2.push((self.text(var), Val::Str(s)));
                    match self.string(body, &env2, depth) {
                        Some(s) => out.push(Ok((s, span))),
                        None => out.push(Err(unresolved(body, "not a constant path"))),
                    }
                }
                Err(u) => out.push(Err(u)),
            }
        }
        true
    }

    /// `glob.glob(p)`, `Path(d).glob(p)`, `sorted(x)`, `list(x)`: true when handled.
    fn call_items(&self, call: Node<'_>, env: &Env<'_>, out: &mut Vec<Item>, depth: usize) -> bool {
        let src = self.m.source;
        let Some(func) = call.field("function") else {
            return false;
        };
        let q = self.m.qualified_name(func);
        if let Some("glob.glob" | "glob.iglob") = q.as_deref() {
            let Some(p) = argument(call, 0, "pathname", src) else {
                return false;
            };
            let recursive = argument(call, usize::MAX, "recursive", src)
                .is_some_and(|r| self.text(r) == "True");
            match self.string(p, env, depth) {
                Some(s) => self.glob(&self.resolve(&s), &s, recursive, Span::of(&p), out),
                None => out.push(Err(unresolved(p, "the glob pattern is not a constant"))),
            }
            return true;
        }
        if func.kind() == "identifier"
            && matches!(self.text(func), "sorted" | "list")
            && q.is_none()
        {
            if let Some(a) = argument(call, 0, "", src) {
                self.items(a, env, out, depth);
                return true;
            }
        }
        // `Path(d).glob("*.cu")`, `here.rglob("*.cu")`.
        if func.kind() == "attribute" {
            let attr = func.field("attribute").map(|a| self.text(a));
            if let (Some(a @ ("glob" | "rglob")), Some(obj)) = (attr, func.field("object")) {
                let (Some(base), Some(p)) = (
                    self.string(obj, env, depth),
                    argument(call, 0, "pattern", src),
                ) else {
                    return false;
                };
                let Some(pat) = self.string(p, env, depth) else {
                    out.push(Err(unresolved(p, "the glob pattern is not a constant")));
                    return true;
                };
                let pat = if a == "rglob" {
                    format!("**/{}", pat.value)
                } else {
                    pat.value
                };
                let full = self.resolve(&base).join(&pat);
                self.glob(&full, &base, true, Span::of(&call), out);
                return true;
            }
        }
        false
    }

    /// Expands a glob pattern (already relative to the working directory) the way Python's
    /// `glob` does, sorted. `**` spans folders only when `recursive`.
    pub(super) fn glob(
        &self,
        pattern: &Path,
        s: &Str,
        recursive: bool,
        span: Span,
        out: &mut Vec<Item>,
    ) {
        let mut current: Vec<PathBuf> = vec![PathBuf::new()];
        let comps: Vec<Component<'_>> = pattern.components().collect();
        for (i, c) in comps.iter().enumerate() {
            let last = i + 1 == comps.len();
            let part = c.as_os_str().to_string_lossy();
            let is_pattern = part.contains(['*', '?', '[']);
            let mut next = Vec::new();
            for base in &current {
                if !is_pattern {
                    let p = base.join(c.as_os_str());
                    if last || p.is_dir() {
                        next.push(p);
                    }
                    continue;
                }
                if part == "**" && recursive {
                    // Zero or more folders; links to folders are not followed (no loops).
                    let mut stack = vec![(base.clone(), 0)];
                    while let Some((d, depth)) = stack.pop() {
                        if next.len() >= MAX_GLOB_MATCHES {
                            break;
                        }
                        next.push(d.clone());
                        if depth >= MAX_GLOB_DEPTH {
                            continue;
                        }
                        for (p, is_dir) in list(&d) {
                            let link = std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_symlink());
                            if is_dir && !link && !hidden(&p) {
                                stack.push((p, depth + 1));
                            }
                        }
                    }
                    continue;
                }
                let Ok(matcher) = globset::GlobBuilder::new(&part.replace("**", "*"))
                    .literal_separator(true)
                    .backslash_escape(true)
                    .build()
                    .map(|g| g.compile_matcher())
                else {
                    out.push(Err(Unresolved {
                        span,
                        reason: format!("invalid glob pattern `{}`", s.value),
                    }));
                    return;
                };
                for (p, is_dir) in list(base) {
                    let Some(name) = p.file_name() else { continue };
                    if hidden(&p) && !part.starts_with('.') {
                        continue;
                    }
                    if matcher.is_match(name) && (last || is_dir) {
                        next.push(p);
                    }
                }
            }
            next.sort();
            next.dedup();
            next.truncate(MAX_GLOB_MATCHES);
            current = next;
        }
        let mut found: Vec<PathBuf> = current
            .into_iter()
            .filter(|p| p.is_file())
            .map(|p| normalize(&p))
            .collect();
        found.sort();
        // Python's glob answers in the pattern's terms: relative for a relative pattern.
        let relative = !s.anchored && !Path::new(&s.value).is_absolute();
        let dir = self.dir();
        for p in found {
            let value = match p.strip_prefix(&dir) {
                Ok(rel) if relative => rel.to_string_lossy().into_owned(),
                _ => p.to_string_lossy().into_owned(),
            };
            out.push(Ok((
                Str {
                    value,
                    anchored: !relative,
                },
                span,
            )));
        }
    }

    /// The constant string or path an expression stands for.
    pub(super) fn string(&self, expr: Node<'_>, env: &Env<'_>, depth: usize) -> Option<Str> {
        if depth > MAX_DEPTH || !self.step() {
            return None;
        }
        let d = depth + 1;
        let plain = |value: String| Str {
            value,
            anchored: false,
        };
        match expr.kind() {
            "string" => self.fstring(expr, env, d),
            "concatenated_string" => {
                let mut acc = plain(String::new());
                for part in named_children(expr) {
                    let s = self.fstring(part, env, d)?;
                    acc.value.push_str(&s.value);
                    acc.anchored |= s.anchored;
                }
                Some(acc)
            }
            "parenthesized_expression" => self.string(expr.named_child(0)?, env, d),
            "identifier" => {
                let name = self.text(expr);
                let value = match env.iter().rev().find(|(n, _)| *n == name) {
                    Some((_, v)) => Some(v.clone()),
                    None if name == "__file__" => {
                        return Some(Str {
                            value: self.absolute.to_string_lossy().into_owned(),
                            anchored: true,
                        })
                    }
                    None => self.name_value(expr, name, d),
                };
                match value? {
                    Val::Str(s) => Some(s),
                    Val::List(_) => None,
                }
            }
            "binary_operator" => {
                let op = self.text(expr.field("operator")?);
                let l = self.string(expr.field("left")?, env, d)?;
                let r = self.string(expr.field("right")?, env, d)?;
                match op {
                    "+" => Some(Str {
                        value: l.value + &r.value,
                        anchored: l.anchored || r.anchored,
                    }),
                    "/" => Some(join(l, r)),
                    _ => None,
                }
            }
            "attribute" => {
                if let Some("os.curdir" | "os.path.curdir") = self.m.qualified_name(expr).as_deref()
                {
                    return Some(plain(".".into()));
                }
                // `Path(__file__).parent`, `p.parent.parent`
                let attr = self.text(expr.field("attribute")?);
                if attr != "parent" {
                    return None;
                }
                Some(parent(self.string(expr.field("object")?, env, d)?))
            }
            "call" => self.call_string(expr, env, d),
            _ => None,
        }
    }

    fn call_string(&self, call: Node<'_>, env: &Env<'_>, depth: usize) -> Option<Str> {
        let func = call.field("function")?;
        let args: Vec<Node<'_>> = named_children(call.field("arguments")?)
            .filter(|a| a.kind() != "comment")
            .collect();
        let first = || args.first().copied();
        if let Some(q) = self.m.qualified_name(func) {
            match q.as_str() {
                "os.path.join" | "posixpath.join" => {
                    let mut acc: Option<Str> = None;
                    for a in &args {
                        if a.kind() == "keyword_argument" {
                            return None;
                        }
                        let s = self.string(*a, env, depth)?;
                        acc = Some(match acc {
                            None => s,
                            Some(l) => join(l, s),
                        });
                    }
                    return acc;
                }
                "os.path.dirname" => return Some(parent(self.string(first()?, env, depth)?)),
                "os.path.abspath" | "os.path.realpath" => {
                    let s = self.string(first()?, env, depth)?;
                    return Some(self.absolutize(s));
                }
                "os.path.normpath" | "os.fspath" | "pathlib.Path" | "pathlib.PurePath"
                | "pathlib.PosixPath" => {
                    if args.len() != 1 {
                        return None;
                    }
                    return self.string(first()?, env, depth);
                }
                q if q.ends_with("resource_loader.get_path_to_datafile") => {
                    // TensorFlow: relative to the calling file's folder.
                    let s = self.string(first()?, env, depth)?;
                    let dir = parent(Str {
                        value: self.absolute.to_string_lossy().into_owned(),
                        anchored: true,
                    });
                    return Some(join(dir, s));
                }
                _ => return None,
            }
        }
        match func.kind() {
            "identifier" if self.text(func) == "str" && args.len() == 1 => {
                self.string(first()?, env, depth)
            }
            "attribute" => {
                let attr = self.text(func.field("attribute")?);
                let obj = func.field("object")?;
                match attr {
                    "resolve" | "absolute" if args.is_empty() => {
                        Some(self.absolutize(self.string(obj, env, depth)?))
                    }
                    "joinpath" => {
                        let mut acc = self.string(obj, env, depth)?;
                        for a in &args {
                            acc = join(acc, self.string(*a, env, depth)?);
                        }
                        Some(acc)
                    }
                    _ => self.returned_string(call, env, depth),
                }
            }
            _ => self.returned_string(call, env, depth),
        }
    }

    /// A string literal or an f-string whose interpolations are plain constant expressions.
    fn fstring(&self, node: Node<'_>, env: &Env<'_>, depth: usize) -> Option<Str> {
        if node.kind() != "string" {
            return None;
        }
        if let Some(value) = crate::python::string_literal(node, self.m.source) {
            return Some(Str {
                value,
                anchored: false,
            });
        }
        let mut acc = Str {
            value: String::new(),
            anchored: false,
        };
        for part in named_children(node) {
            match part.kind() {
                "interpolation" => {
                    if part.field("format_specifier").is_some()
                        || part.field("type_conversion").is_some()
                    {
                        return None;
                    }
                    let s = self.string(part.field("expression")?, env, depth)?;
                    acc.value.push_str(&s.value);
                    acc.anchored |= s.anchored;
                }
                "string_content" => acc.value.push_str(self.text(part)),
                _ => {}
            }
        }
        Some(acc)
    }
}

fn join(l: Str, r: Str) -> Str {
    if Path::new(&r.value).is_absolute() {
        return r;
    }
    Str {
        value: Path::new(&l.value)
            .join(&r.value)
            .to_string_lossy()
            .into_owned(),
        anchored: l.anchored || r.anchored,
    }
}

fn parent(s: Str) -> Str {
    Str {
        value: Path::new(&s.value)
            .parent()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default(),
        anchored: s.anchored,
    }
}

fn hidden(p: &Path) -> bool {
    p.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with('.'))
}

/// The entries of a folder (empty path: the working directory), noted as a dependency.
/// Directory entries listed at most before sorting (a larger directory is cut).
const MAX_LISTED: usize = 20_000;

fn list(dir: &Path) -> Vec<(PathBuf, bool)> {
    let d = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    gpulint_source::note_dependency(d);
    let Ok(entries) = std::fs::read_dir(d) else {
        return Vec::new();
    };
    // Sorted before the cut: the same entries whatever order the file system lists them in.
    let mut names: Vec<std::ffi::OsString> = entries
        .filter_map(|e| e.ok())
        .take(MAX_LISTED)
        .map(|e| e.file_name())
        .collect();
    names.sort();
    names.truncate(MAX_GLOB_MATCHES);
    names
        .into_iter()
        .map(|name| {
            let is_dir = std::fs::metadata(d.join(&name)).is_ok_and(|m| m.is_dir());
            (dir.join(name), is_dir)
        })
        .collect()
}

/// The absolute, lexically normalized form of a path (from the working directory).
pub(super) fn absolute(p: &Path) -> PathBuf {
    normalize(&std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()))
}

/// Does `later` run only under a condition that `earlier` does not share (another branch of
/// an `if`, a loop, a `try`)? Then it may or may not replace what `earlier` bound.
fn conditional(earlier: Node<'_>, later: Node<'_>) -> bool {
    let within = |outer: Node<'_>, n: Node<'_>| {
        outer.start_byte() <= n.start_byte() && n.end_byte() <= outer.end_byte()
    };
    let mut cur = later.parent();
    let mut guarded = false;
    for _ in 0..64 {
        let Some(p) = cur else {
            return guarded;
        };
        if within(p, earlier) {
            return guarded;
        }
        guarded |= matches!(
            p.kind(),
            "if_statement"
                | "elif_clause"
                | "else_clause"
                | "for_statement"
                | "while_statement"
                | "try_statement"
                | "except_clause"
                | "case_clause"
        );
        cur = p.parent();
    }
    guarded
}

/// `a/./b/../c` → `a/c`, lexically (no file system access).
pub fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                let last = out.components().next_back();
                if matches!(last, Some(Component::Normal(_))) {
                    out.pop();
                } else if !matches!(last, Some(Component::RootDir | Component::Prefix(_))) {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}
