//! Guards: the conditions that hold where a statement or expression runs.
//!
//! The builder keeps a stack of guards during the walk (an enclosing `if` and its `else`, an
//! early `if (c) return;`/`continue`/`break` before it in the same block, `for`/`while` loop
//! conditions, `c ? a : b`, `a && b`, `a || b`, an `assert`, a grid-stride loop macro), and
//! every access remembers the innermost one; `prev` links lead outwards. Here each guard's
//! condition is turned into the upper bounds it proves (`i < n` bounds `i` by `n`, under an
//! early return `i >= n` does the same) and the names it mentions in ways not understood.

use super::kernel::{intersects, Flags, Kernel, LocalSet};
use super::CudaModel;
use gpulint_source::Span;
use gpulint_syntax::text;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

/// Where a guard comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuardKind {
    /// The consequence of an `if`.
    If,
    /// The `else` branch of an `if` (the condition is false).
    Else,
    /// `if (c) return;` (or `continue`/`break`) earlier in the same block.
    EarlyExit,
    /// The body of a `for`/`while` loop (a grid-stride loop when it steps by the grid).
    Loop,
    /// The body of a range-based `for` (`for (int i : GridRange(n))`).
    RangeLoop,
    /// A branch of `c ? a : b`.
    Ternary,
    /// The right side of `&&` / `||`.
    ShortCircuit,
    /// The block of a grid-stride loop macro (`CUDA_1D_KERNEL_LOOP(i, n) { … }`).
    LoopMacro,
    /// The block of another macro with a block (`SOME_MACRO(i, n) { … }`), not understood.
    Macro,
    /// An `assert`-like call earlier in the same block.
    Assert,
    /// A comparison passed to the same call (`load(dst, p + i, i < n)`).
    Predicate,
}

/// `term < limit` (or `<=`) holds.
#[derive(Debug, Clone, Copy)]
pub struct Bound<'t> {
    pub term: Span,
    pub limit: Span,
    pub inclusive: bool,
    /// The term as a node, when it is one (not a macro argument).
    pub term_node: Option<Node<'t>>,
    pub limit_node: Option<Node<'t>>,
}

/// A condition that holds in a region of a kernel.
#[derive(Debug, Clone)]
pub struct Guard<'t> {
    pub kind: GuardKind,
    /// The condition (for macros, the macro's argument list; for range loops, the loop).
    pub cond: Node<'t>,
    /// The node that guards: the `if`, the loop, the `?:`, the `&&`, the macro, the call's
    /// argument list, or for an early exit or an assertion the statement itself.
    pub anchor: Node<'t>,
    /// The region runs when the condition is false.
    pub negated: bool,
    /// What to show as "the guard": `if (i < n)`, `CUDA_1D_KERNEL_LOOP(i, n)`, …
    pub label: Span,
    /// The next enclosing guard.
    pub prev: Option<u32>,
    /// Upper bounds that hold in the region.
    pub bounds: Vec<Bound<'t>>,
    /// Names used in parts of the condition that are not plain comparisons.
    pub mentions: Vec<Span>,
}

/// The span shown for a guard.
pub(super) fn label_span(kind: GuardKind, anchor: Node<'_>, cond: Node<'_>) -> Span {
    match kind {
        GuardKind::If | GuardKind::Else => Span::new(anchor.start_byte(), cond.end_byte()),
        GuardKind::EarlyExit | GuardKind::Assert => Span::of(&anchor),
        GuardKind::LoopMacro | GuardKind::Macro => Span::new(
            anchor.start_byte(),
            anchor
                .field("declarator")
                .map(|d| d.end_byte())
                .unwrap_or(anchor.end_byte()),
        ),
        GuardKind::RangeLoop => Span::new(
            anchor.start_byte(),
            anchor
                .field("right")
                .map(|r| r.end_byte())
                .unwrap_or(anchor.end_byte()),
        ),
        GuardKind::Loop | GuardKind::Ternary | GuardKind::ShortCircuit | GuardKind::Predicate => {
            Span::of(&cond)
        }
    }
}

/// `if (c) return;` → the rest of the block runs when `c` is false; `if (c) {…} else return;`
/// → when `c` is true.
pub(super) fn early_exit<'t>(
    if_stmt: Node<'t>,
    source: &str,
) -> Option<(GuardKind, Node<'t>, bool)> {
    let cond = if_stmt.field("condition")?;
    let consequence = if_stmt.field("consequence")?;
    match if_stmt.field("alternative") {
        None if ends_in_jump(consequence, source) => Some((GuardKind::EarlyExit, cond, true)),
        Some(alt) if ends_in_jump(alt, source) && !ends_in_jump(consequence, source) => {
            Some((GuardKind::EarlyExit, cond, false))
        }
        _ => None,
    }
}

/// `a < b`, `a >= b`, … (through parentheses).
/// The comparison with its sides swapped (`a < b` is `b > a`); others unchanged.
pub(crate) fn flip_comparison(op: &str) -> &str {
    match op {
        "<" => ">",
        "<=" => ">=",
        ">" => "<",
        ">=" => "<=",
        o => o,
    }
}

pub(super) fn is_comparison(e: Node<'_>) -> bool {
    let e = super::kernel::peel(e);
    e.kind_name() == "binary_expression"
        && e.field("operator")
            .is_some_and(|o| matches!(o.kind_name(), "<" | "<=" | ">" | ">=" | "&&"))
}

/// `assert(c);` and friends → the rest of the block runs when `c` holds.
pub(super) fn assertion<'t>(
    stmt: Node<'t>,
    source: &str,
    calls: &[&str],
) -> Option<(GuardKind, Node<'t>, bool)> {
    let call = stmt
        .named_child(0)
        .filter(|c| c.kind_name() == "call_expression")?;
    let name = text(call.field("function")?, source);
    if !calls.contains(&super::last_name(name)) {
        return None;
    }
    let arg = call.field("arguments")?.named_child(0)?;
    Some((GuardKind::Assert, arg, false))
}

/// Does control leave the enclosing block at the end of `stmt`?
fn ends_in_jump(stmt: Node<'_>, source: &str) -> bool {
    let mut s = stmt;
    for _ in 0..8 {
        match s.kind_name() {
            "return_statement" | "continue_statement" | "break_statement" | "goto_statement" => {
                return true
            }
            "else_clause" | "compound_statement" => {
                let last = (0..s.named_child_count() as u32)
                    .rev()
                    .filter_map(|i| s.named_child(i))
                    .find(|c| c.kind_name() != "comment");
                match last {
                    Some(l) => s = l,
                    None => return false,
                }
            }
            "expression_statement" => {
                let f = s
                    .named_child(0)
                    .filter(|c| c.kind_name() == "call_expression")
                    .and_then(|c| c.field("function"));
                return f.is_some_and(|f| {
                    matches!(text(f, source), "__trap" | "abort" | "exit" | "std::abort")
                });
            }
            _ => return false,
        }
    }
    false
}

impl<'t> Guard<'t> {
    /// Computes `bounds` and `mentions` from the condition.
    pub(super) fn analyze(&mut self, source: &'t str) {
        match self.kind {
            GuardKind::LoopMacro => {
                let args = self
                    .cond
                    .field("parameters")
                    .map(|p| macro_args(p, source))
                    .unwrap_or_default();
                let pairs: &[(usize, usize)] = match args.len() {
                    2 | 3 => &[(0, 1)],
                    4 => &[(0, 1), (2, 3)],
                    _ => &[],
                };
                for &(t, l) in pairs {
                    self.bounds.push(Bound {
                        term: args[t],
                        limit: args[l],
                        inclusive: false,
                        term_node: None,
                        limit_node: None,
                    });
                }
                if pairs.is_empty() {
                    self.mentions.extend(args);
                }
            }
            GuardKind::Macro => {
                if let Some(p) = self.cond.field("parameters") {
                    self.mentions.extend(macro_args(p, source));
                }
            }
            GuardKind::RangeLoop => {
                if let Some(d) = self.cond.field("declarator") {
                    self.mentions.push(Span::of(&d));
                }
            }
            _ => {
                let mut bounds = Vec::new();
                let mut mentions = Vec::new();
                collect(self.cond, !self.negated, 0, &mut bounds, &mut mentions);
                self.bounds = bounds;
                self.mentions = mentions;
            }
        }
    }
}

/// The argument spans of a misparsed macro header `NAME(a, b * c, d)`, split at top-level commas.
pub(super) fn macro_args(params: Node<'_>, source: &str) -> Vec<Span> {
    let (start, end) = (params.start_byte(), params.end_byte());
    let Some(t) = source.get(start..end) else {
        return Vec::new();
    };
    let inner_start = start + 1;
    let inner = t
        .strip_prefix('(')
        .and_then(|x| x.strip_suffix(')'))
        .unwrap_or("");
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut from = 0;
    let push = |a: usize, b: usize, out: &mut Vec<Span>| {
        let s = &inner[a..b];
        let lead = s.len() - s.trim_start().len();
        let trail = s.len() - s.trim_end().len();
        if b - a > lead + trail {
            out.push(Span::new(inner_start + a + lead, inner_start + b - trail));
        }
    };
    for (i, c) in inner.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                push(from, i, &mut out);
                from = i + 1;
            }
            _ => {}
        }
    }
    push(from, inner.len(), &mut out);
    out
}

/// Collects what `cond` proves when it is `positive` (true) or not (false).
fn collect<'t>(
    cond: Node<'t>,
    positive: bool,
    depth: usize,
    bounds: &mut Vec<Bound<'t>>,
    mentions: &mut Vec<Span>,
) {
    let opaque = |n: Node<'t>, mentions: &mut Vec<Span>| {
        for c in gpulint_syntax::descendants(n)
            .filter(|c| c.kind_name() == "identifier")
            .take(64)
        {
            mentions.push(Span::of(&c));
        }
    };
    if depth > 32 {
        return opaque(cond, mentions);
    }
    let d = depth + 1;
    match cond.kind_name() {
        "condition_clause" => match cond.field("value") {
            Some(v) => collect(v, positive, d, bounds, mentions),
            None => opaque(cond, mentions),
        },
        "parenthesized_expression" => {
            if let Some(v) = cond.named_child(0) {
                collect(v, positive, d, bounds, mentions);
            }
        }
        "unary_expression" if cond.field("operator").is_some_and(|o| o.kind_name() == "!") => {
            if let Some(a) = cond.field("argument") {
                collect(a, !positive, d, bounds, mentions);
            }
        }
        "binary_expression" => {
            let op = cond.field("operator").map(|o| o.kind_name()).unwrap_or("");
            let (Some(l), Some(r)) = (cond.field("left"), cond.field("right")) else {
                return opaque(cond, mentions);
            };
            let bound = |term: Node<'t>, limit: Node<'t>, inclusive: bool| Bound {
                term: Span::of(&term),
                limit: Span::of(&limit),
                inclusive,
                term_node: Some(term),
                limit_node: Some(limit),
            };
            match (op, positive) {
                ("&&" | "and", true) | ("||" | "or", false) => {
                    collect(l, positive, d, bounds, mentions);
                    collect(r, positive, d, bounds, mentions);
                }
                ("<", true) | (">=", false) => bounds.push(bound(l, r, false)),
                ("<=", true) | (">", false) => bounds.push(bound(l, r, true)),
                (">", true) | ("<=", false) => bounds.push(bound(r, l, false)),
                (">=", true) | ("<", false) => bounds.push(bound(r, l, true)),
                ("==", true) | ("!=", false) => {
                    bounds.push(bound(l, r, true));
                    bounds.push(bound(r, l, true));
                }
                ("!=", true) | ("==", false) => {}
                _ => opaque(cond, mentions),
            }
        }
        _ => opaque(cond, mentions),
    }
}

/// The index an access is checked against, prepared once per access.
#[derive(Debug)]
pub struct IndexTarget {
    /// The global-index locals the index is computed from.
    pub globals: LocalSet,
    pub flags: Flags,
    /// The index text without whitespace.
    pub text: String,
}

/// Text without whitespace, for comparing expressions.
pub fn compact(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

/// Identifier tokens of a piece of source text (members after `.`/`->` skipped).
pub fn name_tokens(s: &str) -> Vec<&str> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_alphabetic() || b[i] == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            let member =
                start > 0 && (b[start - 1] == b'.' || (start > 1 && &b[start - 2..start] == b"->"));
            if !member {
                out.push(&s[start..i]);
            }
        } else {
            i += 1;
        }
    }
    out
}

impl<'t> CudaModel<'t> {
    /// The facts about `index` (an access's index or offsets) needed to match guards.
    pub fn index_target(&self, k: &Kernel<'t>, parts: &[Node<'t>]) -> IndexTarget {
        let mut set = vec![0u64; k.locals.len().div_ceil(64)];
        let mut flags = Flags::default();
        let mut text = String::new();
        for p in parts {
            for (s, c) in set.iter_mut().zip(k.closure_of(*p, self.source)) {
                *s |= c;
            }
            flags = flags | k.flags(self, *p);
            text.push_str(&compact(self.text(*p)));
        }
        IndexTarget {
            globals: k.global_locals(&set),
            flags,
            text,
        }
    }

    /// Does `guard` bound the index `target` from above, or mention what it is computed from?
    /// Lenient on purpose: any bound on a variable the index is computed from (or computed
    /// from the index) counts, so 2-D guards `row < M && col < N` cover `C[row * N + col]`.
    pub fn guard_covers(&self, k: &Kernel<'t>, guard: &Guard<'t>, target: &IndexTarget) -> bool {
        let inline = target.globals.iter().all(|w| *w == 0);
        for b in &guard.bounds {
            let term_text = self.source.get(b.term.start..b.term.end).unwrap_or("");
            let closure = match b.term_node {
                Some(n) => k.closure_of(n, self.source),
                None => k.closure_of_names(name_tokens(term_text)),
            };
            if intersects(&closure, &target.globals) {
                return true;
            }
            // `if (threadIdx.x < n - blockIdx.x * blockDim.x)`, `if (tid < col_size)` with
            // `col_size = min(n - col_start * 64, 64)`: the rest of the data from the block's
            // start, which bounds the global index just as well.
            if let (Some(t), Some(l)) = (b.term_node, b.limit_node) {
                if k.flags(self, t).has(Flags::TID) && k.block_dependent(l, self.source) {
                    return true;
                }
            }
            if inline {
                let flags = match b.term_node {
                    Some(n) => k.flags(self, n),
                    None => Flags::default(),
                };
                if flags.is_global_index() || compact(term_text) == target.text {
                    return true;
                }
            }
        }
        for m in &guard.mentions {
            let t = self.source.get(m.start..m.end).unwrap_or("");
            if intersects(&k.closure_of_names(name_tokens(t)), &target.globals) {
                return true;
            }
        }
        false
    }
}

/// The terms of a sum `a + b - c` (through parentheses and casts), with their signs; `None`
/// past 16 terms.
pub fn sum_terms(expr: Node<'_>) -> Option<Vec<(Node<'_>, bool)>> {
    let mut out = Vec::new();
    let mut stack = vec![(expr, true)];
    while let Some((e, positive)) = stack.pop() {
        let e = super::kernel::peel(e);
        let op = (e.kind_name() == "binary_expression")
            .then(|| e.field("operator").map(|o| o.kind_name()))
            .flatten();
        match op {
            Some(op @ ("+" | "-")) => {
                let (l, r) = (e.field("left")?, e.field("right")?);
                stack.push((r, if op == "-" { !positive } else { positive }));
                stack.push((l, positive));
            }
            _ => out.push((e, positive)),
        }
        if out.len() + stack.len() > 16 {
            return None;
        }
    }
    Some(out)
}
