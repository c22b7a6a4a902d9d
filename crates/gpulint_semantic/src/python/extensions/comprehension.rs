//! List comprehensions over a source list: one `for`, and at most one `if` that only drops
//! entries (`if len(x) > 0`, `if f.endswith(".cu")`), under which the loop may also run over
//! `os.listdir(d)`.

use super::{argument, is_var, unresolved, Env, Folder, Item, Str, Val, MAX_GLOB_MATCHES};
use crate::python::string_literal;
use gpulint_source::Span;
use gpulint_syntax::{named_children, NodeExt};
use tree_sitter::Node;

impl Folder<'_, '_> {
    /// `[os.path.join(d, f) for f in [...]]` with one `for` and at most one `if` that only
    /// drops entries (`if f.endswith(".cu")`, `if len(f) > 0`); under such a filter the loop
    /// may run over `os.listdir(d)`.
    pub(super) fn comprehension(
        &self,
        expr: Node<'_>,
        env: &Env<'_>,
        out: &mut Vec<Item>,
        depth: usize,
    ) -> bool {
        let clauses: Vec<Node<'_>> = named_children(expr)
            .skip(1)
            .filter(|c| c.kind_name() != "comment")
            .collect();
        let (Some(body), Some(clause)) = (expr.field("body"), clauses.first()) else {
            return false;
        };
        let filter = match clauses.as_slice() {
            [_] => None,
            [_, f] if f.kind_name() == "if_clause" => Some(*f),
            _ => return false,
        };
        if clause.kind_name() != "for_in_clause" {
            return false;
        }
        let (Some(var), Some(iter)) = (clause.field("left"), clause.field("right")) else {
            return false;
        };
        if var.kind_name() != "identifier" {
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

    /// A comprehension's `if` clause that only drops entries: `len(x) > 0`, `x`, `x != ""`
    /// (empty strings) or `x.endswith(".cu")` / `x.endswith((".cu", ".cpp"))`. Some(keep) for
    /// the value `v` of the variable `var`, None for any other condition.
    fn filter_keeps(&self, cond: Node<'_>, var: &str, v: &str) -> Option<bool> {
        let m = self.m;
        let cond = match cond.kind_name() {
            "if_clause" => cond.named_child(0)?,
            _ => cond,
        };
        match cond.kind_name() {
            "identifier" if is_var(m, cond, var) => Some(!v.is_empty()),
            "comparison_operator" => {
                let parts: Vec<Node<'_>> = named_children(cond).collect();
                let op = cond.child(1).map(|o| self.text(o))?;
                let [l, r] = parts.as_slice() else {
                    return None;
                };
                let len_of_var = l.kind_name() == "call"
                    && l.field("function").is_some_and(|f| is_var(m, f, "len"))
                    && argument(*l, 0, "", m.source).is_some_and(|a| is_var(m, a, var));
                if len_of_var && self.text(*r) == "0" && matches!(op, ">" | "!=") {
                    return Some(!v.is_empty());
                }
                let empty = string_literal(*r, m.source).is_some_and(|s| s.is_empty());
                (is_var(m, *l, var) && empty && op == "!=").then_some(!v.is_empty())
            }
            "call" => {
                let func = cond.field("function")?;
                let obj = func.field("object")?;
                if func.kind_name() != "attribute"
                    || !is_var(m, obj, var)
                    || self.text(func.field("attribute")?) != "endswith"
                {
                    return None;
                }
                let arg = argument(cond, 0, "", m.source)?;
                let suffixes: Vec<String> = match arg.kind_name() {
                    "tuple" => named_children(arg)
                        .map(|s| string_literal(s, m.source))
                        .collect::<Option<_>>()?,
                    _ => vec![string_literal(arg, m.source)?],
                };
                Some(suffixes.iter().any(|s| v.ends_with(s.as_str())))
            }
            _ => None,
        }
    }

    /// `os.listdir(d)`: the sorted names in folder `d` (bounded), as the loop of a filtered
    /// comprehension gives them. None when `iter` is not such a call or `d` does not fold.
    fn listdir(&self, iter: Node<'_>, env: &Env<'_>, depth: usize) -> Option<Vec<Item>> {
        if iter.kind_name() != "call" {
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
}
