//! Ranges of the integer locals of a device function, followed statement by statement through
//! its body: declarations and assignments, `if`/`else` (narrowed by comparisons with a
//! local), `for` loops whose counter runs from a constant by a constant step (each iteration
//! in turn, so counters incremented inside them and values carried from one iteration to the
//! next keep exact ends), and the values the file's device functions return.
//!
//! What it gives: the range of the index of each subscript reached, joined over every way of
//! reaching it, where every value the index depends on is known. Loops it cannot count
//! (`while`, a bound it cannot fold, too many iterations) forget what their body assigns;
//! conditions on a local that it cannot read mark that local's range as loose, and a loose
//! range is never reported. The walk stops after a fixed number of steps per function.

mod eval;
mod loops;
mod stmt;

use super::{CudaModel, Function};
use crate::hash::HashMap;
use gpulint_syntax::NodeExt;
use std::rc::Rc;
use tree_sitter::Node;

/// The walks done so far in a file, and how deep the walk in progress is nested.
#[derive(Debug, Default)]
pub struct StepCache {
    facts: HashMap<usize, Rc<StepFacts>>,
    /// Per function: can a count carried from pass to pass bound a later pass?
    carries: HashMap<usize, bool>,
    depth: usize,
}

/// Statements and loop iterations followed per function (with the functions it calls).
const BUDGET: u32 = 60_000;
/// Iterations of one loop followed one by one.
const MAX_TRIPS: i128 = 4096;
/// Depth of nested walks (a function's walk asks for the return values of its callees).
const MAX_CALL_DEPTH: usize = 8;
/// Statements nested in statements followed; deeper, the walk gives up as when its budget runs
/// out (each level is a frame of the walk's recursion, and a worker thread's stack is 2 MB).
const MAX_NESTING: usize = 256;

/// `lo..=hi`; `loose` when a condition the walk could not read restricts it; `grows` when
/// it depends on a count carried from one pass of a loop to the next that bounds a loop of
/// the next pass (a list refilled from the previous pass's output: it can grow each pass).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Val {
    pub lo: i128,
    pub hi: i128,
    pub loose: bool,
    pub grows: bool,
}

impl Val {
    fn exact(v: i128) -> Val {
        Val {
            lo: v,
            hi: v,
            loose: false,
            grows: false,
        }
    }

    fn join(self, o: Val) -> Val {
        Val {
            lo: self.lo.min(o.lo),
            hi: self.hi.max(o.hi),
            loose: self.loose || o.loose,
            grows: self.grows || o.grows,
        }
    }
}

/// `None`: unknown.
type Iv = Option<Val>;

fn join_iv(a: Iv, b: Iv) -> Iv {
    Some(a?.join(b?))
}

/// The values of the tracked locals on one path (absent: not an integer local, unknown).
#[derive(Debug, Clone, Default, PartialEq)]
struct Env<'t> {
    vars: HashMap<&'t str, Iv>,
}

impl<'t> Env<'t> {
    /// At the end of a scope that declared `declared`: those names end with it, and an outer
    /// one of the same name (known in `entry`) is no longer known.
    fn end_scope(&mut self, entry: &Env<'t>, declared: &[&'t str]) {
        for d in declared {
            if entry.vars.contains_key(d) {
                self.vars.insert(d, None);
            } else {
                self.vars.remove(d);
            }
        }
    }

    fn join(mut self, o: &Env<'t>) -> Env<'t> {
        for (k, v) in self.vars.iter_mut() {
            *v = match o.vars.get(k) {
                Some(w) => join_iv(*v, *w),
                None => None,
            };
        }
        for k in o.vars.keys() {
            self.vars.entry(k).or_insert(None);
        }
        self
    }
}

fn join_env<'t>(a: Option<Env<'t>>, b: Option<Env<'t>>) -> Option<Env<'t>> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.join(&b)),
        (a, None) => a,
        (None, b) => b,
    }
}

/// Where control goes after a statement: on, out of the loop, to the next iteration.
#[derive(Default)]
struct Flow<'t> {
    next: Option<Env<'t>>,
    brk: Option<Env<'t>>,
    cont: Option<Env<'t>>,
}

/// What a function's walk found.
#[derive(Debug, Default)]
pub struct StepFacts {
    /// Subscript node id → the range of its index over every way the walk reached it.
    index: HashMap<usize, Iv>,
    /// The join of the values the function returns (`None`: some return is unknown, or the
    /// walk gave up).
    returns: Iv,
    complete: bool,
}

impl StepFacts {
    /// The range of the index of the subscript `sub`, when known, not loose, and carried
    /// from pass to pass of a loop (see [`Val::grows`]). Counts that do not grow from pass to
    /// pass usually reach their ends only when every data-dependent test passes, which the
    /// data rarely allows (the crossings of two convex polygons), so they are not reported.
    pub fn index_range(&self, sub: Node<'_>) -> Option<(i128, i128)> {
        if !self.complete {
            return None;
        }
        let v = (*self.index.get(&sub.id())?)?;
        (!v.loose && v.grows).then_some((v.lo, v.hi))
    }
}

struct Walk<'m, 't> {
    m: &'m CudaModel<'t>,
    func: &'m Function<'t>,
    steps: u32,
    /// Statements nested around the one being followed.
    nesting: usize,
    /// Per counted loop being followed (innermost last): the locals read by the bounds of the
    /// loops nested in its body.
    bound_uses: Vec<Vec<&'t str>>,
    facts: StepFacts,
    rets: Option<Iv>,
}

impl<'t> CudaModel<'t> {
    /// The walk of the function `fi`, computed once per function. A function whose walk is
    /// under way (a recursive call), or asked for too deep in a chain of calls, has no facts.
    pub fn step_facts(&self, fi: usize) -> Rc<StepFacts> {
        let depth = {
            let mut cache = self.steps.borrow_mut();
            if let Some(f) = cache.facts.get(&fi) {
                return f.clone();
            }
            if cache.depth >= MAX_CALL_DEPTH {
                return Rc::new(StepFacts::default());
            }
            cache.facts.insert(fi, Rc::new(StepFacts::default()));
            cache.depth += 1;
            cache.depth
        };
        let facts = Rc::new(walk_function(self, fi));
        let mut cache = self.steps.borrow_mut();
        cache.depth = depth - 1;
        cache.facts.insert(fi, facts.clone());
        facts
    }

    /// The range of the index of the subscript `sub` in function `fi` from the walk of its
    /// body, when every value it depends on is known.
    pub fn stepped_index_range(&self, fi: usize, sub: Node<'t>) -> Option<(i128, i128)> {
        let carries = self.steps.borrow().carries.get(&fi).copied();
        let carries = match carries {
            Some(c) => c,
            None => {
                let c = self.functions[fi]
                    .node
                    .field("body")
                    .is_some_and(|b| carries_count(self, b));
                self.steps.borrow_mut().carries.insert(fi, c);
                c
            }
        };
        if !carries {
            return None;
        }
        self.step_facts(fi).index_range(sub)
    }
}

fn walk_function<'t>(m: &CudaModel<'t>, fi: usize) -> StepFacts {
    let func = &m.functions[fi];
    let Some(body) = func.node.field("body") else {
        return StepFacts::default();
    };
    if gpulint_syntax::descendants(body).any(|n| {
        matches!(
            n.kind_name(),
            "goto_statement" | "labeled_statement" | "asm_statement" | "gnu_asm_expression"
        )
    }) {
        return StepFacts::default();
    }
    let mut w = Walk {
        m,
        func,
        steps: 0,
        nesting: 0,
        bound_uses: Vec::new(),
        facts: StepFacts::default(),
        rets: None,
    };
    let flow = w.stmt(body, Env::default());
    let complete = w.steps <= BUDGET;
    let mut facts = w.facts;
    facts.complete = complete;
    facts.returns = if complete && flow.next.is_none() {
        w.rets.flatten()
    } else {
        None
    };
    facts
}

/// Does `body` hold a `for` loop whose body assigns a local that bounds a `for` loop nested
/// in it (not the outer loop's own counter)? Only then can a value grow from pass to pass
/// (see [`Val::grows`]), and only then is the function walked for [`StepFacts::index_range`].
fn carries_count<'t>(m: &CudaModel<'t>, body: Node<'t>) -> bool {
    let fors: Vec<Node<'t>> = gpulint_syntax::descendants(body)
        .filter(|n| n.kind_name() == "for_statement")
        .collect();
    if fors.len() < 2 {
        return false;
    }
    let counter = |f: Node<'t>| -> Option<&'t str> {
        let init = f.field("initializer")?;
        let d = gpulint_syntax::descendants(init)
            .find(|n| matches!(n.kind_name(), "init_declarator" | "assignment_expression"))?;
        let v = d.field("declarator").or_else(|| d.field("left"))?;
        Some(m.text(v))
    };
    for outer in &fors {
        let Some(ob) = outer.field("body") else {
            continue;
        };
        let own = counter(*outer);
        let assigned: Vec<&'t str> = gpulint_syntax::descendants(ob)
            .filter(|n| n.kind_name() == "assignment_expression")
            .filter_map(|n| n.field("left"))
            .filter(|l| l.kind_name() == "identifier")
            .map(|l| m.text(l))
            .filter(|l| Some(*l) != own)
            .collect();
        if assigned.is_empty() {
            continue;
        }
        let (s, e) = (ob.start_byte(), ob.end_byte());
        for inner in fors
            .iter()
            .filter(|f| s <= f.start_byte() && f.end_byte() <= e)
        {
            let Some(cond) = inner.field("condition") else {
                continue;
            };
            let inner_counter = counter(*inner);
            if gpulint_syntax::descendants(cond).any(|n| {
                n.kind_name() == "identifier"
                    && Some(m.text(n)) != inner_counter
                    && assigned.contains(&m.text(n))
            }) {
                return true;
            }
        }
    }
    false
}

/// Integer types whose locals are followed.
fn integer_type(t: &str) -> bool {
    matches!(
        t,
        "int"
            | "unsigned"
            | "signed"
            | "short"
            | "long"
            | "char"
            | "size_t"
            | "ptrdiff_t"
            | "int8_t"
            | "int16_t"
            | "int32_t"
            | "int64_t"
            | "uint8_t"
            | "uint16_t"
            | "uint32_t"
            | "uint64_t"
            | "index_t"
    ) || (t.split_whitespace().count() > 1
        && t.split_whitespace()
            .all(|w| matches!(w, "unsigned" | "signed" | "short" | "long" | "int" | "char")))
}

/// The wrapped expression of a `condition_clause` or parentheses.
fn unwrap_cond(n: Node<'_>) -> Node<'_> {
    let mut n = n;
    for _ in 0..16 {
        match n.kind_name() {
            "condition_clause" | "parenthesized_expression" => {
                match n.field("value").or_else(|| n.named_child(0)) {
                    Some(c) => n = c,
                    None => break,
                }
            }
            _ => break,
        }
    }
    n
}
