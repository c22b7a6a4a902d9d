//! Statements: blocks, declarations, expression statements, `if`, `return`, `break`.

use super::eval::arith;
use super::{
    integer_type, join_env, join_iv, unwrap_cond, Env, Flow, Iv, Val, Walk, BUDGET, MAX_NESTING,
};
use gpulint_syntax::{named_children, NodeExt};
use tree_sitter::Node;

impl<'m, 't> Walk<'m, 't> {
    pub(super) fn text(&self, n: Node<'_>) -> &'t str {
        self.m.text(n)
    }

    pub(super) fn over(&mut self) -> bool {
        self.steps += 1;
        self.steps > BUDGET
    }

    pub(super) fn stmt(&mut self, s: Node<'t>, env: Env<'t>) -> Flow<'t> {
        if self.over() {
            return Flow::default();
        }
        if self.nesting >= MAX_NESTING {
            // Too deep to follow: the walk is incomplete, as when its budget runs out.
            self.steps = BUDGET + 1;
            return Flow::default();
        }
        self.nesting += 1;
        let flow = self.stmt_kind(s, env);
        self.nesting -= 1;
        flow
    }

    fn stmt_kind(&mut self, s: Node<'t>, env: Env<'t>) -> Flow<'t> {
        match s.kind_name() {
            "compound_statement" => self.block(s, env),
            "declaration" => Flow {
                next: Some(self.declaration(s, env)),
                ..Flow::default()
            },
            "expression_statement" => {
                let mut env = env;
                if let Some(e) = s.named_child(0) {
                    self.effects(e, &mut env);
                }
                Flow {
                    next: Some(env),
                    ..Flow::default()
                }
            }
            "if_statement" => self.if_stmt(s, env),
            "for_statement" => self.for_stmt(s, env),
            "return_statement" => {
                let v = match s.named_child(0) {
                    Some(e) => {
                        self.record(e, &env);
                        self.eval(e, &env, 0)
                    }
                    None => None,
                };
                self.rets = Some(match self.rets {
                    None => v,
                    Some(r) => join_iv(r, v),
                });
                Flow::default()
            }
            "break_statement" => Flow {
                brk: Some(env),
                ..Flow::default()
            },
            "continue_statement" => Flow {
                cont: Some(env),
                ..Flow::default()
            },
            "comment" | "empty_statement" | ";" => Flow {
                next: Some(env),
                ..Flow::default()
            },
            // `while`, `do`, `switch`, range `for`, preprocessor branches, …: what they assign
            // is forgotten; their subscripts are read with what is known before them.
            _ => {
                let mut env = env;
                self.forget_assigned(s, &mut env);
                self.scan(s, &env);
                Flow {
                    next: Some(env),
                    ..Flow::default()
                }
            }
        }
    }

    pub(super) fn block(&mut self, s: Node<'t>, env: Env<'t>) -> Flow<'t> {
        let entry = env.clone();
        let mut flow = Flow {
            next: Some(env),
            ..Flow::default()
        };
        let mut declared: Vec<&'t str> = Vec::new();
        for c in named_children(s) {
            let Some(env) = flow.next.take() else { break };
            if c.kind_name() == "declaration" {
                declared.extend(self.declared_names(c));
            }
            let f = self.stmt(c, env);
            flow.next = f.next;
            flow.brk = join_env(flow.brk.take(), f.brk);
            flow.cont = join_env(flow.cont.take(), f.cont);
        }
        // Names declared in the block end with it; an outer one of the same name is no
        // longer known.
        for env in [&mut flow.next, &mut flow.brk, &mut flow.cont]
            .into_iter()
            .flatten()
        {
            env.end_scope(&entry, &declared);
        }
        flow
    }

    pub(super) fn declared_names(&self, d: Node<'t>) -> Vec<&'t str> {
        let mut out = Vec::new();
        let mut cur = d.walk();
        for decl in d.children_by_field_name("declarator", &mut cur) {
            let name = match decl.kind_name() {
                "init_declarator" => decl.field("declarator"),
                "identifier" => Some(decl),
                _ => None,
            };
            if let Some(n) = name.filter(|n| n.kind_name() == "identifier") {
                out.push(self.text(n));
            }
        }
        out
    }

    pub(super) fn declaration(&mut self, d: Node<'t>, mut env: Env<'t>) -> Env<'t> {
        let tracked = d.field("type").is_some_and(|t| integer_type(self.text(t)));
        let mut cur = d.walk();
        let decls: Vec<Node<'t>> = d.children_by_field_name("declarator", &mut cur).collect();
        for decl in decls {
            match decl.kind_name() {
                "init_declarator" => {
                    let Some(name) = decl.field("declarator") else {
                        continue;
                    };
                    let value = decl.field("value");
                    // Read before the value's own effects (`int slot = n++;`).
                    let v = value.and_then(|v| match v.kind_name() {
                        "initializer_list" | "argument_list" if v.named_child_count() == 1 => {
                            self.eval(v.named_child(0)?, &env, 0)
                        }
                        _ => self.eval(v, &env, 0),
                    });
                    if let Some(v) = value {
                        self.effects(v, &mut env);
                    }
                    if name.kind_name() != "identifier" {
                        continue;
                    }
                    let key = self.text(name);
                    if !tracked {
                        env.vars.remove(key);
                        continue;
                    }
                    env.vars.insert(key, v);
                }
                "identifier" if tracked => {
                    env.vars.insert(self.text(decl), None);
                }
                "identifier" => {
                    env.vars.remove(self.text(decl));
                }
                _ => self.scan(decl, &env),
            }
        }
        env
    }

    /// Records the subscripts of `e` with what `env` knows, then applies its assignments and
    /// increments in source order.
    pub(super) fn effects(&mut self, e: Node<'t>, env: &mut Env<'t>) {
        self.record(e, env);
        let mut pending: Vec<Node<'t>> = Vec::new();
        let mut stack = vec![e];
        while let Some(n) = stack.pop() {
            if n.kind_name() == "lambda_expression" {
                continue;
            }
            match n.kind_name() {
                "assignment_expression" | "update_expression" => pending.push(n),
                // `&x` handed to anything may change it.
                "pointer_expression" if n.child(0).is_some_and(|o| o.kind_name() == "&") => {
                    pending.push(n)
                }
                _ => {}
            }
            let mut c = n.walk();
            let kids: Vec<Node<'t>> = n.named_children(&mut c).collect();
            stack.extend(kids.into_iter().rev());
        }
        // Values are read before any effect of the statement (`slot = n++` gives `slot` the
        // old `n`); then increments, then assignments, inner ones first.
        let before = env.clone();
        let values: Vec<Iv> = pending
            .iter()
            .map(|n| match n.kind_name() {
                "assignment_expression" => self.assigned_value(*n, &before),
                _ => None,
            })
            .collect();
        let mut order: Vec<usize> = (0..pending.len()).collect();
        order.sort_by_key(|&i| {
            let n = pending[i];
            (
                n.kind_name() == "assignment_expression",
                std::cmp::Reverse(n.start_byte()),
            )
        });
        for i in order {
            self.apply(pending[i], values[i], env);
        }
    }

    /// The value an assignment stores (`x op= y` from `x`), read from `env`.
    fn assigned_value(&self, n: Node<'t>, env: &Env<'t>) -> Iv {
        let left = n.field("left").filter(|t| t.kind_name() == "identifier")?;
        let key = self.text(left);
        let r = self.eval(n.field("right")?, env, 0);
        let op = n.field("operator").map(|o| self.text(o)).unwrap_or("=");
        match op {
            "=" => r,
            _ => {
                let l = env.vars.get(key).copied().flatten();
                arith(&op[..op.len() - 1], l, r)
            }
        }
    }

    pub(super) fn apply(&mut self, n: Node<'t>, value: Iv, env: &mut Env<'t>) {
        let target = |f: &str| n.field(f).filter(|t| t.kind_name() == "identifier");
        match n.kind_name() {
            "update_expression" => {
                let Some(arg) = target("argument") else {
                    return;
                };
                let key = self.text(arg);
                let Some(cur) = env.vars.get(key).copied() else {
                    return;
                };
                let op = n.field("operator").map(|o| self.text(o)).unwrap_or("");
                let d = if op == "++" { 1 } else { -1 };
                env.vars.insert(
                    key,
                    cur.map(|v| Val {
                        lo: v.lo + d,
                        hi: v.hi + d,
                        ..v
                    }),
                );
            }
            "assignment_expression" => {
                let Some(left) = target("left") else { return };
                let key = self.text(left);
                if !env.vars.contains_key(key) {
                    return;
                }
                env.vars.insert(key, value);
            }
            "pointer_expression" => {
                if let Some(a) = target("argument") {
                    let key = self.text(a);
                    if env.vars.contains_key(key) {
                        env.vars.insert(key, None);
                    }
                }
            }
            _ => {}
        }
    }

    /// Records every subscript in `n` (outside lambdas) with the ranges of `env`.
    pub(super) fn record(&mut self, n: Node<'t>, env: &Env<'t>) {
        let mut stack = vec![n];
        while let Some(x) = stack.pop() {
            match x.kind_name() {
                "lambda_expression" => continue,
                "subscript_expression" => {
                    let v = x
                        .field("indices")
                        .and_then(|i| i.named_child(0))
                        .and_then(|i| self.eval(i, env, 0));
                    let e = self.facts.index.entry(x.id()).or_insert(v);
                    *e = join_iv(*e, v);
                }
                _ => {}
            }
            let mut c = x.walk();
            let kids: Vec<Node<'t>> = x.named_children(&mut c).collect();
            stack.extend(kids);
        }
    }

    /// Records the subscripts of a statement the walk does not follow.
    pub(super) fn scan(&mut self, n: Node<'t>, env: &Env<'t>) {
        self.record(n, env);
    }

    /// Forgets every local that `n` assigns, increments or hands out by address.
    pub(super) fn forget_assigned(&self, n: Node<'t>, env: &mut Env<'t>) {
        for x in gpulint_syntax::descendants(n) {
            let t = match x.kind_name() {
                "assignment_expression" => x.field("left"),
                "update_expression" | "pointer_expression" => x.field("argument"),
                "init_declarator" => x.field("declarator"),
                _ => None,
            };
            if let Some(t) = t.filter(|t| t.kind_name() == "identifier") {
                let key = self.text(t);
                if env.vars.contains_key(key) {
                    env.vars.insert(key, None);
                }
            }
        }
    }

    pub(super) fn if_stmt(&mut self, s: Node<'t>, env: Env<'t>) -> Flow<'t> {
        let Some(cond) = s.field("condition") else {
            return Flow {
                next: Some(env),
                ..Flow::default()
            };
        };
        let cond = unwrap_cond(cond);
        let mut env = env;
        self.effects(cond, &mut env);
        let yes = self.narrow(cond, env.clone(), true);
        let no = self.narrow(cond, env, false);
        let mut flow = match (s.field("consequence"), yes) {
            (Some(c), Some(e)) => self.stmt(c, e),
            _ => Flow::default(),
        };
        let alt = s.field("alternative").map(|a| {
            if a.kind_name() == "else_clause" {
                a.named_child(0).unwrap_or(a)
            } else {
                a
            }
        });
        let other = match (alt, no) {
            (Some(a), Some(e)) => self.stmt(a, e),
            (None, e) => Flow {
                next: e,
                ..Flow::default()
            },
            (Some(_), None) => Flow::default(),
        };
        flow.next = join_env(flow.next, other.next);
        flow.brk = join_env(flow.brk, other.brk);
        flow.cont = join_env(flow.cont, other.cont);
        flow
    }
}
