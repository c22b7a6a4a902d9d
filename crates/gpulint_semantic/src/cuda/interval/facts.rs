//! What the conditions holding at a point say about expressions: `i < n` gives `i <= n - 1`
//! and `n >= i + 1`; `i + 1 < n` also gives `i <= n - 2`; `i != 0` lifts a lower bound of 0.
//! Facts come from the guard chain (an enclosing `if`, an earlier early exit, a loop condition,
//! a `?:` branch, a `&&` operand, a loop macro) and from extra conditions of the evaluation
//! (the branch of a `?:` inside a definition).

use crate::cuda::guards::{compact, macro_args, sum_terms, GuardKind};
use crate::cuda::kernel::peel;
use crate::cuda::CudaModel;
use gpulint_source::Span;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

/// The other side of a fact: an expression, or the text of a macro argument.
#[derive(Debug, Clone, Copy)]
pub(super) enum Side<'t> {
    Node(Node<'t>),
    Text(Span),
}

/// `term <= other + offset` (`upper`) or `term >= other + offset`, or `term != other`.
#[derive(Debug, Clone)]
pub(super) struct Fact<'t> {
    /// The bounded expression, without whitespace.
    pub term: String,
    pub other: Side<'t>,
    pub offset: i128,
    pub rel: Rel,
    /// The guard it comes from (`None`: an extra condition).
    pub guard: Option<u32>,
    /// It holds from this byte on.
    pub after: usize,
    /// A loop's own update clause, which runs after the body.
    pub skip: Option<Span>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Rel {
    Upper,
    Lower,
    NotEqual,
}

/// Conditions deeper than this in `&&`/`||` trees are not read.
const MAX_DEPTH: usize = 16;

impl<'t> CudaModel<'t> {
    /// The facts of guard `g` (an index into [`CudaModel::guards`]).
    pub(super) fn guard_facts(&self, g: u32, out: &mut Vec<Fact<'t>>) {
        let Some(guard) = self.guards.get(g as usize) else {
            return;
        };
        let after = match guard.kind {
            GuardKind::EarlyExit | GuardKind::Assert => guard.anchor.end_byte(),
            _ => guard.cond.end_byte(),
        };
        let skip = match guard.kind {
            GuardKind::Loop => guard.anchor.field("update").map(|u| Span::of(&u)),
            _ => None,
        };
        let start = out.len();
        match guard.kind {
            GuardKind::LoopMacro => {
                // `CUDA_1D_KERNEL_LOOP(i, n)`: `0 <= i < n`.
                let Some(p) = guard.cond.field("parameters") else {
                    return;
                };
                let args = macro_args(p, self.source);
                let pairs: &[(usize, usize)] = match args.len() {
                    2 | 3 => &[(0, 1)],
                    4 => &[(0, 1), (2, 3)],
                    _ => &[],
                };
                for &(t, l) in pairs {
                    let term = compact(self.source.get(args[t].start..args[t].end).unwrap_or(""));
                    out.push(Fact {
                        term,
                        other: Side::Text(args[l]),
                        offset: -1,
                        rel: Rel::Upper,
                        guard: Some(g),
                        after,
                        skip,
                    });
                }
            }
            GuardKind::Macro | GuardKind::RangeLoop => {}
            _ => self.cond_facts(guard.cond, !guard.negated, 0, out),
        }
        for f in &mut out[start..] {
            f.guard = Some(g);
            f.after = after;
            f.skip = skip;
        }
    }

    /// The facts `cond` gives when it is `positive` (true) or not (false).
    pub(super) fn cond_facts(
        &self,
        cond: Node<'t>,
        positive: bool,
        depth: usize,
        out: &mut Vec<Fact<'t>>,
    ) {
        if depth > MAX_DEPTH {
            return;
        }
        let d = depth + 1;
        match cond.kind_name() {
            "condition_clause" => {
                if let Some(v) = cond.field("value") {
                    self.cond_facts(v, positive, d, out);
                }
            }
            "parenthesized_expression" => {
                if let Some(v) = cond.named_child(0) {
                    self.cond_facts(v, positive, d, out);
                }
            }
            "unary_expression" if cond.field("operator").is_some_and(|o| o.kind_name() == "!") => {
                if let Some(a) = cond.field("argument") {
                    self.cond_facts(a, !positive, d, out);
                }
            }
            "binary_expression" => {
                let op = cond.field("operator").map(|o| o.kind_name()).unwrap_or("");
                let (Some(l), Some(r)) = (cond.field("left"), cond.field("right")) else {
                    return;
                };
                match (op, positive) {
                    ("&&" | "and", true) | ("||" | "or", false) => {
                        self.cond_facts(l, positive, d, out);
                        self.cond_facts(r, positive, d, out);
                    }
                    ("<", true) | (">=", false) => self.push_lt(l, r, -1, out),
                    ("<=", true) | (">", false) => self.push_lt(l, r, 0, out),
                    (">", true) | ("<=", false) => self.push_lt(r, l, -1, out),
                    (">=", true) | ("<", false) => self.push_lt(r, l, 0, out),
                    ("==", true) | ("!=", false) => {
                        self.push_lt(l, r, 0, out);
                        self.push_lt(r, l, 0, out);
                    }
                    ("!=", true) | ("==", false) => {
                        for (a, b) in [(l, r), (r, l)] {
                            out.push(Fact {
                                term: compact(self.text(peel(a))),
                                other: Side::Node(b),
                                offset: 0,
                                rel: Rel::NotEqual,
                                guard: None,
                                after: 0,
                                skip: None,
                            });
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }

    /// `a <= b + offset`: an upper bound of `a`, a lower bound of `b`, and the same for the
    /// one non-constant term of a sum (`i + 1 < n` bounds `i` by `n - 2`).
    fn push_lt(&self, a: Node<'t>, b: Node<'t>, offset: i128, out: &mut Vec<Fact<'t>>) {
        let mut push = |term: Node<'t>, other: Node<'t>, offset: i128, rel: Rel| {
            out.push(Fact {
                term: compact(self.text(peel(term))),
                other: Side::Node(other),
                offset,
                rel,
                guard: None,
                after: 0,
                skip: None,
            });
        };
        push(a, b, offset, Rel::Upper);
        push(b, a, -offset, Rel::Lower);
        // `v + c <= b + offset` → `v <= b + offset - c`.
        if let Some((v, c)) = self.var_plus_const(a) {
            push(v, b, offset - c, Rel::Upper);
        }
        if let Some((v, c)) = self.var_plus_const(b) {
            push(v, a, -offset - c, Rel::Lower);
        }
    }

    /// `v + c`, `c + v`, `v - c` with a constant `c`: the one other term and `c`.
    fn var_plus_const(&self, e: Node<'t>) -> Option<(Node<'t>, i128)> {
        let terms = sum_terms(e)?;
        if terms.len() < 2 {
            return None;
        }
        let mut var = None;
        let mut c = 0i128;
        for (t, positive) in terms {
            match self.eval(t) {
                Some(v) => c = if positive { c + v } else { c - v },
                None if positive && var.is_none() => var = Some(t),
                None => return None,
            }
        }
        Some((var?, c))
    }
}
