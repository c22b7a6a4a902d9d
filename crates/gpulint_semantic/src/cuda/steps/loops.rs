//! `for` loops: counted ones followed iteration by iteration, the others forgotten.

use super::{join_env, unwrap_cond, Env, Flow, Val, Walk, BUDGET, MAX_TRIPS};
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

impl<'m, 't> Walk<'m, 't> {
    pub(super) fn for_stmt(&mut self, s: Node<'t>, env: Env<'t>) -> Flow<'t> {
        let mut env = env;
        let entry = env.clone();
        let init = s.field("initializer");
        let mut declared: Vec<&'t str> = Vec::new();
        if let Some(i) = init {
            if i.kind_name() == "declaration" {
                declared = self.declared_names(i);
                env = self.declaration(i, env);
            } else {
                self.effects(i, &mut env);
            }
        }
        let body = s.field("body");
        let exit = match self.counted(s, &env) {
            Some((var, start, step)) => self.unroll(s, env.clone(), var, start, step),
            None => None,
        };
        let exit = match exit {
            Some(e) => e,
            None => {
                // Not counted: what the loop changes is forgotten, and its body read once
                // with what is left.
                self.forget_assigned(s, &mut env);
                let cond = s.field("condition");
                let mut e = env.clone();
                if let Some(c) = cond {
                    e = self.loosen(c, e);
                }
                if let Some(b) = body {
                    let f = self.stmt(b, e.clone());
                    let _ = f;
                }
                Some(env)
            }
        };
        let mut flow = Flow {
            next: exit,
            ..Flow::default()
        };
        if let Some(env) = flow.next.as_mut() {
            env.end_scope(&entry, &declared);
        }
        flow
    }

    /// `for (…; v < B; ++v)` (also `<=`, `v++`, `v += c`) whose counter `v` starts at a
    /// known constant, with `c > 0` constant: (v, start, step).
    pub(super) fn counted(&self, s: Node<'t>, env: &Env<'t>) -> Option<(&'t str, i128, i128)> {
        let cond = unwrap_cond(s.field("condition")?);
        if cond.kind_name() != "binary_expression" {
            return None;
        }
        let op = self.text(cond.field("operator")?);
        let var = match op {
            "<" | "<=" => cond.field("left")?,
            ">" | ">=" => cond.field("right")?,
            _ => return None,
        };
        if var.kind_name() != "identifier" {
            return None;
        }
        let name = self.text(var);
        let start = env.vars.get(name).copied().flatten()?;
        if start.lo != start.hi || start.loose {
            return None;
        }
        let update = s.field("update")?;
        let step = match update.kind_name() {
            "update_expression" => {
                let arg = update.field("argument")?;
                (self.text(arg) == name && self.text(update.field("operator")?) == "++")
                    .then_some(1)?
            }
            "assignment_expression" => {
                let left = update.field("left")?;
                if self.text(left) != name || self.text(update.field("operator")?) != "+=" {
                    return None;
                }
                let c = self.m.eval_in_function(self.func, update.field("right")?)?;
                (c > 0).then_some(c)?
            }
            _ => return None,
        };
        // The body must not change the counter itself.
        let body = s.field("body")?;
        let changed = gpulint_syntax::descendants(body).any(|x| {
            let t = match x.kind_name() {
                "assignment_expression" => x.field("left"),
                "update_expression" | "pointer_expression" => x.field("argument"),
                _ => None,
            };
            t.is_some_and(|t| self.text(t) == name)
        });
        (!changed).then_some((name, start.lo, step))
    }

    /// Follows a counted loop one iteration at a time. `None`: too many iterations or an
    /// unknown bound (the caller forgets what the loop changes).
    pub(super) fn unroll(
        &mut self,
        s: Node<'t>,
        env: Env<'t>,
        var: &'t str,
        start: i128,
        step: i128,
    ) -> Option<Option<Env<'t>>> {
        let cond = unwrap_cond(s.field("condition")?);
        let body = s.field("body")?;
        let update = s.field("update")?;
        let op = self.text(cond.field("operator")?);
        let bound_side = if matches!(op, "<" | "<=") {
            cond.field("right")?
        } else {
            cond.field("left")?
        };
        let strict = matches!(op, "<" | ">");
        // The locals the body changes: they depend on the number of iterations.
        let assigned = self.assigned_names(body);
        let bound_names: Vec<&'t str> = gpulint_syntax::descendants(bound_side)
            .filter(|n| n.kind_name() == "identifier")
            .map(|n| self.text(n))
            .filter(|n| env.vars.contains_key(n) && *n != var)
            .collect();
        for frame in self.bound_uses.iter_mut() {
            frame.extend(bound_names.iter().copied());
        }
        self.bound_uses.push(Vec::new());
        let exit = self.iterate(
            (body, update, bound_side),
            env,
            (var, start, step, strict),
            &assigned,
        );
        self.bound_uses.pop();
        exit
    }

    pub(super) fn iterate(
        &mut self,
        (body, update, bound_side): (Node<'t>, Node<'t>, Node<'t>),
        mut env: Env<'t>,
        (var, start, step, strict): (&'t str, i128, i128, bool),
        assigned: &[&'t str],
    ) -> Option<Option<Env<'t>>> {
        let mut exit: Option<Env<'t>> = None;
        let mut v = start;
        let mut trips = 0;
        let mut prev: Option<Env<'t>> = None;
        loop {
            if self.steps > BUDGET || trips > MAX_TRIPS {
                return None;
            }
            self.steps += 1;
            trips += 1;
            // A local that bounded a nested loop in the previous pass and has grown since
            // feeds each pass's count into the next.
            if let Some(p) = prev.take() {
                let uses = self
                    .bound_uses
                    .last_mut()
                    .map(std::mem::take)
                    .unwrap_or_default();
                for name in uses {
                    let (Some(Some(now)), Some(Some(was))) =
                        (env.vars.get(name).copied(), p.vars.get(name).copied())
                    else {
                        continue;
                    };
                    if now.hi > was.hi {
                        env.vars.insert(name, Some(Val { grows: true, ..now }));
                    }
                }
            }
            let b = self.eval(bound_side, &env, 0)?;
            if b.loose {
                return None;
            }
            env.vars.insert(
                var,
                Some(Val {
                    grows: b.grows,
                    ..Val::exact(v)
                }),
            );
            // The last value that passes the test is `b - 1` (`<`) or `b` (`<=`).
            let (can_stay, can_leave) = if strict {
                (v < b.hi, v >= b.lo)
            } else {
                (v <= b.hi, v > b.lo)
            };
            if can_leave {
                exit = join_env(exit, Some(env.clone()));
            }
            if !can_stay {
                break;
            }
            let mut inner = env.clone();
            // Within the body the bound is above the counter.
            if let Some(bn) =
                Some(unwrap_cond(bound_side)).filter(|n| n.kind_name() == "identifier")
            {
                let key = self.text(bn);
                if let Some(Some(bv)) = inner.vars.get(key).copied() {
                    let lo = if strict {
                        bv.lo.max(v + 1)
                    } else {
                        bv.lo.max(v)
                    };
                    inner.vars.insert(key, Some(Val { lo, ..bv }));
                }
            }
            prev = Some(env.clone());
            let f = self.stmt(body, inner);
            exit = join_env(exit, f.brk);
            let Some(mut next) = join_env(f.next, f.cont) else {
                break;
            };
            self.effects(update, &mut next);
            // Iterations counted by a growing bound make what the body changes grow too.
            if b.grows {
                for name in assigned {
                    if let Some(Some(x)) = next.vars.get_mut(name) {
                        x.grows = true;
                    }
                }
            }
            env = next;
            v += step;
        }
        Some(exit)
    }

    /// The locals a statement assigns, increments or hands out by address.
    pub(super) fn assigned_names(&self, n: Node<'t>) -> Vec<&'t str> {
        let mut out: Vec<&'t str> = Vec::new();
        for x in gpulint_syntax::descendants(n) {
            let t = match x.kind_name() {
                "assignment_expression" => x.field("left"),
                "update_expression" | "pointer_expression" => x.field("argument"),
                _ => None,
            };
            if let Some(t) = t.filter(|t| t.kind_name() == "identifier") {
                out.push(self.text(t));
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }
}
