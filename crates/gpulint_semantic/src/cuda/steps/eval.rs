//! Ranges of expressions, and what conditions tell about the locals they compare.

use super::{integer_type, join_env, join_iv, unwrap_cond, Env, Iv, Val, Walk};
use gpulint_syntax::{named_children, NodeExt};
use tree_sitter::Node;

impl<'m, 't> Walk<'m, 't> {
    /// `env` where `cond` is `truth` (`None`: that cannot happen). Comparisons of a local
    /// with a known value narrow it; a local in any other condition becomes loose.
    pub(super) fn narrow(&self, cond: Node<'t>, env: Env<'t>, truth: bool) -> Option<Env<'t>> {
        let cond = unwrap_cond(cond);
        match cond.kind_name() {
            "unary_expression" if cond.field("operator").is_some_and(|o| self.text(o) == "!") => {
                return self.narrow(cond.field("argument")?, env, !truth);
            }
            "binary_expression" => {
                let op = self.text(cond.field("operator")?);
                let (l, r) = (cond.field("left")?, cond.field("right")?);
                match (op, truth) {
                    ("&&", true) | ("||", false) => {
                        let env = self.narrow(l, env, truth)?;
                        return self.narrow(r, env, truth);
                    }
                    ("&&", false) | ("||", true) => {
                        let a = self.narrow(l, env.clone(), truth);
                        let b = self
                            .narrow(l, env, !truth)
                            .and_then(|e| self.narrow(r, e, truth));
                        return join_env(a, b);
                    }
                    _ => {}
                }
                if let Some(env) = self.compare(op, l, r, &env, truth) {
                    return env;
                }
            }
            _ => {}
        }
        Some(self.loosen(cond, env))
    }

    /// Marks the locals `cond` mentions as loose.
    pub(super) fn loosen(&self, cond: Node<'t>, mut env: Env<'t>) -> Env<'t> {
        for x in gpulint_syntax::descendants(cond) {
            if x.kind_name() == "identifier" {
                if let Some(Some(v)) = env.vars.get_mut(self.text(x)) {
                    v.loose = true;
                }
            }
        }
        env
    }

    /// `a < b` and friends with a local on one side: `Some(narrowed)`, `None` if the form
    /// is not one it reads.
    pub(super) fn compare(
        &self,
        op: &str,
        l: Node<'t>,
        r: Node<'t>,
        env: &Env<'t>,
        truth: bool,
    ) -> Option<Option<Env<'t>>> {
        // Normalise to `x OP y` with the relation that holds.
        let op = if truth {
            op
        } else {
            match op {
                "<" => ">=",
                "<=" => ">",
                ">" => "<=",
                ">=" => "<",
                "==" => "!=",
                "!=" => "==",
                _ => return None,
            }
        };
        if !matches!(op, "<" | "<=" | ">" | ">=" | "==" | "!=") {
            return None;
        }
        let lv = self.eval(l, env, 0);
        let rv = self.eval(r, env, 0);
        let mut env = env.clone();
        let mut touched = false;
        for (side, other, op) in [
            (l, rv, op),
            (r, lv, crate::cuda::guards::flip_comparison(op)),
        ] {
            let side = unwrap_cond(side);
            if side.kind_name() != "identifier" {
                continue;
            }
            let key = self.text(side);
            let Some(Some(cur)) = env.vars.get(key).copied() else {
                continue;
            };
            touched = true;
            let Some(o) = other else {
                env.vars.insert(key, Some(Val { loose: true, ..cur }));
                continue;
            };
            let (mut lo, mut hi) = (cur.lo, cur.hi);
            match op {
                "<" => hi = hi.min(o.hi - 1),
                "<=" => hi = hi.min(o.hi),
                ">" => lo = lo.max(o.lo + 1),
                ">=" => lo = lo.max(o.lo),
                "==" => {
                    lo = lo.max(o.lo);
                    hi = hi.min(o.hi);
                }
                // `x != c` removes an end only.
                _ => {
                    if o.lo == o.hi && o.lo == lo {
                        lo += 1;
                    } else if o.lo == o.hi && o.lo == hi {
                        hi -= 1;
                    }
                }
            }
            if lo > hi {
                return Some(None);
            }
            env.vars.insert(
                key,
                Some(Val {
                    lo,
                    hi,
                    loose: cur.loose || o.loose,
                    grows: cur.grows || o.grows,
                }),
            );
        }
        // Neither side a known local: nothing to narrow (the other locals it mentions
        // become loose in the caller).
        touched.then_some(Some(env))
    }

    /// The range of an integer expression under `env`.
    pub(super) fn eval(&self, e: Node<'t>, env: &Env<'t>, depth: usize) -> Iv {
        if depth > 32 {
            return None;
        }
        let d = depth + 1;
        match e.kind_name() {
            "number_literal" => crate::cuda::parse_c_int(self.text(e)).map(Val::exact),
            "identifier" => match env.vars.get(self.text(e)) {
                Some(v) => *v,
                None => self.m.eval_in_function(self.func, e).map(Val::exact),
            },
            "parenthesized_expression" => self.eval(e.named_child(0)?, env, d),
            "cast_expression" => {
                let t = e.field("type")?;
                if !integer_type(self.text(t).trim()) {
                    return None;
                }
                self.eval(e.field("value")?, env, d)
            }
            "unary_expression" => {
                let v = self.eval(e.field("argument")?, env, d)?;
                match self.text(e.field("operator")?) {
                    "-" => Some(Val {
                        lo: -v.hi,
                        hi: -v.lo,
                        ..v
                    }),
                    "+" => Some(v),
                    _ => None,
                }
            }
            "update_expression" => {
                let v = self.eval(e.field("argument")?, env, d)?;
                let prefix = e.field("operator").is_some_and(|o| {
                    o.start_byte() < e.field("argument").map_or(0, |a| a.start_byte())
                });
                if !prefix {
                    return Some(v);
                }
                let k = if self.text(e.field("operator")?) == "++" {
                    1
                } else {
                    -1
                };
                Some(Val {
                    lo: v.lo + k,
                    hi: v.hi + k,
                    ..v
                })
            }
            "binary_expression" => {
                let op = self.text(e.field("operator")?);
                let l = self.eval(e.field("left")?, env, d);
                let r = self.eval(e.field("right")?, env, d);
                arith(op, l, r)
            }
            "conditional_expression" => {
                let a = self.eval(e.field("consequence")?, env, d)?;
                let b = self.eval(e.field("alternative")?, env, d)?;
                let cond = e.field("condition")?;
                let mentioned = gpulint_syntax::descendants(cond)
                    .any(|x| x.kind_name() == "identifier" && env.vars.contains_key(self.text(x)));
                let j = a.join(b);
                Some(Val {
                    loose: j.loose || mentioned,
                    ..j
                })
            }
            "call_expression" => self.call(e, env, d),
            _ => self.m.eval_in_function(self.func, e).map(Val::exact),
        }
    }

    /// `min`/`max` of known values, and the return values of the file's device functions.
    pub(super) fn call(&self, e: Node<'t>, env: &Env<'t>, depth: usize) -> Iv {
        let name = crate::cuda::arrays::device_callee(e, self.m.source)?;
        let args: Vec<Node<'t>> = named_children(e.field("arguments")?).collect();
        match name {
            "min" | "max" | "umin" | "umax" if args.len() == 2 => {
                let a = self.eval(args[0], env, depth)?;
                let b = self.eval(args[1], env, depth)?;
                let (loose, grows) = (a.loose || b.loose, a.grows || b.grows);
                Some(if name.ends_with("min") {
                    Val {
                        lo: a.lo.min(b.lo),
                        hi: a.hi.min(b.hi),
                        loose,
                        grows,
                    }
                } else {
                    Val {
                        lo: a.lo.max(b.lo),
                        hi: a.hi.max(b.hi),
                        loose,
                        grows,
                    }
                })
            }
            _ => {
                let mut out: Option<Iv> = None;
                for c in self.m.device_functions_named(name) {
                    let facts = self.m.step_facts(c);
                    let r = if facts.complete { facts.returns } else { None };
                    out = Some(match out {
                        None => r,
                        Some(o) => join_iv(o, r),
                    });
                }
                out.flatten()
            }
        }
    }
}

/// Interval arithmetic on known ranges.
pub(super) fn arith(op: &str, l: Iv, r: Iv) -> Iv {
    let (l, r) = (l?, r?);
    let (loose, grows) = (l.loose || r.loose, l.grows || r.grows);
    let mk = |lo: i128, hi: i128| {
        Some(Val {
            lo,
            hi,
            loose,
            grows,
        })
    };
    match op {
        "+" => mk(l.lo.checked_add(r.lo)?, l.hi.checked_add(r.hi)?),
        "-" => mk(l.lo.checked_sub(r.hi)?, l.hi.checked_sub(r.lo)?),
        "*" => {
            let c = [
                l.lo.checked_mul(r.lo)?,
                l.lo.checked_mul(r.hi)?,
                l.hi.checked_mul(r.lo)?,
                l.hi.checked_mul(r.hi)?,
            ];
            mk(*c.iter().min()?, *c.iter().max()?)
        }
        "/" if l.lo >= 0 && r.lo > 0 => mk(l.lo / r.hi, l.hi / r.lo),
        "%" if l.lo >= 0 && r.lo > 0 => mk(0, l.hi.min(r.hi - 1)),
        ">>" if l.lo >= 0 && r.lo == r.hi && (0..64).contains(&r.lo) => {
            mk(l.lo >> r.lo, l.hi >> r.lo)
        }
        "<<" if l.lo >= 0 && r.lo == r.hi && (0..32).contains(&r.lo) => mk(
            l.lo.checked_shl(r.lo as u32)?,
            l.hi.checked_shl(r.lo as u32)?,
        ),
        "&" if l.lo >= 0 && r.lo == r.hi && r.lo >= 0 => mk(0, l.hi.min(r.lo)),
        _ => None,
    }
}
