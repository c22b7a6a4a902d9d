//! Missing barriers: shared memory written by some threads of a block and then read
//! (read-after-write) or overwritten (write-after-write) by others, or overwritten by the next
//! loop iteration or the next call of a helper while other threads may still read it
//! (write-after-read), with no `__syncthreads()` on some path between — the hazards
//! `compute-sanitizer --tool racecheck` reports.
//!
//! Each kernel and `__device__` helper is walked once (see [`walk`]); a helper's summary (the
//! accesses it leaves open at its start and end, per buffer parameter) stands for its calls.
//! Whether two accesses can touch one element from two threads is decided on their index
//! polynomials and ranges ([`index`]).

mod bind;
mod compile;
mod conflict;
mod expr;
mod index;
mod lanes;
mod reach;
mod relate;
mod walk;

use super::{CudaModel, Kernel};
use crate::cuda::interval::Poly;
use crate::hash::{HashMap, HashSet};
use conflict::{may_conflict, Side};
use gpulint_syntax::NodeExt;
use index::{AtomFacts, Forms, Index, Threads};
use tree_sitter::Node;
use walk::{Buf, Sum, Walker};

/// Findings kept per function.
const MAX_PER_FUNCTION: usize = 6;

/// The kind of hazard, in the order the accesses run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hazard {
    ReadAfterWrite,
    WriteAfterWrite,
    WriteAfterRead,
}

/// Between which two points the barrier is missing.
#[derive(Debug, Clone, Copy)]
pub enum Across<'t> {
    /// Between two statements (or parts of one) that run one after the other.
    Sequence,
    /// From the end of one iteration of `loop_node` to the start of the next.
    Iteration {
        loop_node: Node<'t>,
        body_end: Node<'t>,
    },
    /// From the end of one call of the helper to the start of the next.
    Calls { body: Node<'t> },
}

/// A pair of shared-memory accesses with no barrier between on some path.
#[derive(Debug, Clone)]
pub struct MissingBarrier<'t> {
    pub hazard: Hazard,
    /// The buffer as written (`tile`, `storage.idx`, `helper::buf` for a helper's own).
    pub buffer: String,
    /// The earlier and the later access (in a helper when a call makes them).
    pub first: Node<'t>,
    pub second: Node<'t>,
    /// Where they are made in the function reported on (the access, or the helper call).
    pub first_site: Node<'t>,
    pub second_site: Node<'t>,
    pub first_write: bool,
    pub second_write: bool,
    pub across: Across<'t>,
    /// Where to report: the later read (read-after-write), the earlier write
    /// (write-after-write), the write (write-after-read); across iterations or calls where the
    /// barrier goes.
    pub at: Node<'t>,
    /// Index into [`CudaModel::functions`] of the function reported on.
    pub function: usize,
    /// The buffer is global memory (a kernel's pointer parameter), not shared memory.
    pub global: bool,
}

/// One access to a shared buffer, as the walk carries it.
#[derive(Debug, Clone)]
pub(crate) struct Acc<'t> {
    pub buf: String,
    pub write: bool,
    pub node: Node<'t>,
    pub site: Node<'t>,
    pub index: Vec<Index>,
    pub threads: Threads,
    /// A warp-level synchronisation ran after it.
    pub synced: bool,
    /// A warp-level synchronisation ran before it (within the summary it is exposed in).
    pub after_wsync: bool,
    /// It reaches the end past a barrier that some paths take and others skip.
    pub skipped: bool,
    /// Made by a call of this helper (function index).
    pub via: Option<usize>,
    /// To a kernel's pointer parameter (global memory).
    pub global: bool,
}

/// What a call of a helper leaves open, per buffer parameter.
#[derive(Debug, Clone)]
pub(crate) struct HelperSummary<'t> {
    pub function: usize,
    /// The pointer parameters: position and name.
    pub params: Vec<(usize, String)>,
    pub sum: Sum<'t>,
}

pub(crate) struct Ctx<'a, 't> {
    m: &'a CudaModel<'t>,
    helper_by_name: HashMap<&'a str, usize>,
    summaries: HashMap<usize, Option<HelperSummary<'t>>>,
    in_progress: Vec<usize>,
    found: Vec<MissingBarrier<'t>>,
    seen: HashSet<(usize, String)>,
    per_function: HashMap<usize, usize>,
    atoms: std::rc::Rc<AtomFacts>,
    /// The functions that synchronise the block, themselves or through helpers (computed on
    /// first use).
    syncing: Option<HashSet<usize>>,
    /// The names of the functions that return a `__shared__` array (computed on first use).
    shared_getters: Option<HashSet<String>>,
}

impl<'a, 't> Ctx<'a, 't> {
    /// Records the conflicting pairs of `earlier` × `later`.
    pub fn pairs(
        &mut self,
        f: &Forms<'_, 't>,
        earlier: &[Acc<'t>],
        later: &[Acc<'t>],
        across: Across<'t>,
    ) {
        let range = |atom: &str| f.rc.atom_range(atom);
        // The counter of the loop whose iterations are paired: an index that moves with it
        // names another element in the next iteration.
        let counter = match across {
            Across::Iteration { loop_node, .. } => lanes::loop_counter(f.m, loop_node)
                .map(|c| Poly::atom(&format!("f{}:{c}", f.k.function))),
            _ => None,
        };
        for a in earlier {
            for b in later {
                if a.buf != b.buf || !(a.write || b.write) {
                    continue;
                }
                if a.global || b.global {
                    if handoff(f, a, b, across) {
                        self.record(f.k.function, a, b, across);
                    }
                    continue;
                }
                if let Some(c) = counter.as_ref().and_then(|c| c.atoms().next()) {
                    let moves = a.index.len() == b.index.len()
                        && a.index
                            .iter()
                            .zip(&b.index)
                            .all(|(x, y)| x.poly.is_some() && x.poly == y.poly)
                        && a.index
                            .iter()
                            .any(|x| x.poly.as_ref().is_some_and(|p| p.mentions(c)));
                    if moves {
                        continue;
                    }
                }
                if matches!(across, Across::Sequence)
                    && a.site.id() == b.site.id()
                    && a.via.is_some()
                {
                    continue;
                }
                if a.threads.warp && b.threads.warp && (a.synced || b.after_wsync) {
                    continue;
                }
                let (sa, sb) = (
                    Side {
                        index: &a.index,
                        threads: &a.threads,
                    },
                    Side {
                        index: &b.index,
                        threads: &b.threads,
                    },
                );
                let (thread_atom, xor_base) = (|x: &str| f.thread_atom(x), |x: &str| f.xor_base(x));
                if !may_conflict(&sa, &sb, &range, &thread_atom, &xor_base) {
                    continue;
                }
                self.record(f.k.function, a, b, across);
            }
        }
    }

    fn record(&mut self, function: usize, a: &Acc<'t>, b: &Acc<'t>, across: Across<'t>) {
        let hazard = match (a.write, b.write) {
            (true, true) => Hazard::WriteAfterWrite,
            (true, false) => Hazard::ReadAfterWrite,
            _ => Hazard::WriteAfterRead,
        };
        let at = match (across, hazard) {
            (Across::Sequence, Hazard::WriteAfterWrite) => a.site,
            (
                Across::Iteration { body_end, .. },
                Hazard::WriteAfterWrite | Hazard::WriteAfterRead,
            ) => body_end,
            (Across::Calls { body }, _) => body,
            _ => b.site,
        };
        let count = self.per_function.entry(function).or_default();
        if *count >= MAX_PER_FUNCTION || !self.seen.insert((at.id(), a.buf.clone())) {
            return;
        }
        *count += 1;
        self.found.push(MissingBarrier {
            hazard,
            buffer: a.buf.clone(),
            first: a.node,
            second: b.node,
            first_site: a.site,
            second_site: b.site,
            first_write: a.write,
            second_write: b.write,
            across,
            at,
            function,
            global: a.global,
        });
    }

    /// Does the helper called `name`, which has no summary (its text damaged or too large),
    /// call a block barrier? Its calls are then taken as barriers.
    pub fn helper_synchronises(&self, name: &str) -> bool {
        let Some(&h) = self.helper_by_name.get(name) else {
            return false;
        };
        let f = &self.m.functions[self.m.helpers[h].function];
        f.node
            .field("body")
            .is_some_and(|b| reach::has_barrier_text(self.m.text(b)))
    }

    /// The summary of the helper called `name` (computed on first use).
    pub fn summary(&mut self, name: &str) -> Option<HelperSummary<'t>> {
        let &h = self.helper_by_name.get(name)?;
        if let Some(s) = self.summaries.get(&h) {
            return s.clone();
        }
        if self.in_progress.contains(&h) || self.in_progress.len() > 16 {
            return None;
        }
        self.in_progress.push(h);
        let m = self.m;
        let s = analyze(m, &m.helpers[h], true, self);
        self.in_progress.pop();
        self.summaries.insert(h, s.clone());
        s
    }
}

/// Global memory written by one thread of the block and read by the others at the same
/// element with no barrier between (`if (t == 0) out[m] = v;` then `… = out[m - 1]` in the
/// next iteration of a loop over `m`): a read-after-write hazard within the block. Only this
/// shape is taken on global memory, where other blocks and kernels also write.
fn handoff<'t>(f: &Forms<'_, 't>, a: &Acc<'t>, b: &Acc<'t>, across: Across<'t>) -> bool {
    if !(a.global && b.global && a.write && !b.write) || a.via.is_some() || b.via.is_some() {
        return false;
    }
    if a.threads.single.is_none() || b.threads.single.is_some() || b.threads.warp {
        return false;
    }
    if a.index.is_empty() || a.index.len() != b.index.len() {
        return false;
    }
    let uniform = |i: &Index| !i.own && i.poly.is_some();
    if !a.index.iter().chain(&b.index).all(uniform) {
        return false;
    }
    let shift = match across {
        Across::Sequence => None,
        Across::Iteration { loop_node, .. } => {
            let Some((c, step)) = lanes::loop_counter_step(f.m, loop_node) else {
                return false;
            };
            Some((format!("f{}:{c}", f.k.function), step))
        }
        Across::Calls { .. } => return false,
    };
    a.index.iter().zip(&b.index).all(|(x, y)| {
        let (Some(p), Some(q)) = (&x.poly, &y.poly) else {
            return false;
        };
        match &shift {
            None => p == q,
            // The next iteration reads at the counter one step on.
            Some((c, step)) => {
                let next = q.substitute(&|atom| {
                    if atom == c {
                        Poly::atom(atom).add_const(*step)
                    } else {
                        Some(Poly::atom(atom))
                    }
                });
                next.as_ref() == Some(p) && p.mentions(c)
            }
        }
    })
}

/// Walks one function; for a helper, returns its summary and reports what two calls in a row
/// would race on.
fn analyze<'a, 't>(
    m: &'a CudaModel<'t>,
    k: &'a Kernel<'t>,
    helper: bool,
    ctx: &mut Ctx<'a, 't>,
) -> Option<HelperSummary<'t>> {
    let func = &m.functions[k.function];
    let body = func.node.field("body")?;
    if k.too_large || k.parse_damaged() {
        return None;
    }
    let text = m.text(body);
    let cooperative = ["__syncthreads", ".sync(", "bar.sync", "sync(", "__shared__"]
        .iter()
        .any(|w| text.contains(w));
    // A kernel can race through the helpers it calls; a helper's pointer parameters are
    // scratch buffers only where it synchronises the block itself. One that synchronises only
    // through the helpers it calls (a kernel's body moved into a function) is walked for the
    // shared memory it obtains itself, its parameters left aside.
    let through_calls = helper && !cooperative;
    if through_calls && !ctx.synchronises_through_calls(k.function) {
        return None;
    }
    let mut bufs = HashMap::default();
    let mut params = Vec::new();
    if helper && !through_calls {
        for (pos, p) in k.params.iter().enumerate() {
            if p.pointer && !p.accessor {
                let ptext = m.text(p.node);
                bufs.insert(p.name, Buf::array(p.name, ptext.contains("volatile")));
                params.push((pos, p.name.to_string()));
            }
        }
    }
    if !helper {
        // A kernel's pointer parameters that it may write through: global memory.
        for p in &k.params {
            let ptext = m.text(p.node);
            let pointee_const = ptext.split('*').next().is_some_and(|t| t.contains("const"));
            if p.pointer && !p.accessor && !pointee_const && !ptext.contains("volatile") {
                bufs.insert(
                    p.name,
                    Buf {
                        global: true,
                        ..Buf::array(p.name, false)
                    },
                );
            }
        }
    }
    let mut guard_ids = HashMap::default();
    for g in m.guards_in(k) {
        let gd = &m.guards[g];
        let slot = match gd.kind {
            super::GuardKind::If => 0,
            super::GuardKind::Else => 1,
            super::GuardKind::Loop => 2,
            super::GuardKind::EarlyExit => 3,
            _ => continue,
        };
        guard_ids.entry((gd.anchor.id(), slot)).or_insert(g as u32);
    }
    let mut w = Walker {
        f: Forms::new(m, k, ctx.atoms.clone()),
        ctx,
        bufs,
        guards: Vec::new(),
        guard_ids,
        depth: 0,
        restricted: Default::default(),
    };
    let mut sum = w.stmt(body);
    if !helper {
        return None;
    }
    // Two calls in a row: what the end leaves open against what the start exposes, where the
    // open accesses skipped a barrier that other paths take (the helper synchronises at its
    // end only sometimes).
    let mut open: Vec<Acc<'t>> = sum
        .pending
        .iter()
        .chain(&sum.exit)
        .filter(|a| a.skipped)
        .cloned()
        .collect();
    open.retain(|a| a.via.is_none());
    if !open.is_empty() {
        let end = last_statement(body);
        let exposed = sum.exposed.clone();
        w.ctx
            .pairs(&w.f, &open, &exposed, Across::Calls { body: end });
    }
    sum.pending.append(&mut sum.exit);
    Some(HelperSummary {
        function: k.function,
        params,
        sum,
    })
}

/// Where a barrier before the end of a function goes: its last `return`, else its closing
/// brace.
fn last_statement(body: Node<'_>) -> Node<'_> {
    let last = gpulint_syntax::named_children(body)
        .filter(|c| c.kind_name() != "comment")
        .last();
    match last {
        Some(l) if l.kind_name() == "return_statement" => l,
        _ => body
            .child(body.child_count().saturating_sub(1))
            .unwrap_or(body),
    }
}

impl<'t> CudaModel<'t> {
    /// The missing barriers of every kernel and helper of the file, in the order found.
    pub fn missing_barriers(&self) -> Vec<MissingBarrier<'t>> {
        let mut helper_by_name = HashMap::default();
        for (i, h) in self.helpers.iter().enumerate() {
            let name = super::last_name(&self.functions[h.function].name);
            helper_by_name.entry(name).or_insert(i);
        }
        let mut ctx = Ctx {
            m: self,
            helper_by_name,
            summaries: HashMap::default(),
            in_progress: Vec::new(),
            found: Vec::new(),
            seen: HashSet::default(),
            per_function: HashMap::default(),
            atoms: Default::default(),
            syncing: None,
            shared_getters: None,
        };
        for (i, h) in self.helpers.iter().enumerate() {
            let name = super::last_name(&self.functions[h.function].name);
            if ctx.helper_by_name.get(name) == Some(&i) {
                ctx.summary(name);
            } else {
                analyze(self, h, true, &mut ctx);
            }
        }
        for k in &self.kernels {
            if !self.single_thread_blocks(k) {
                analyze(self, k, false, &mut ctx);
            }
        }
        ctx.found
    }

    /// Is every visible launch of `k` made with blocks of one thread?
    fn single_thread_blocks(&self, k: &Kernel<'t>) -> bool {
        let name = super::last_name(&self.functions[k.function].name);
        let mut any = false;
        for l in self.launches_of(name) {
            any = true;
            if l.config.get(1).and_then(|b| self.eval(*b)) != Some(1) {
                return false;
            }
        }
        any
    }
}
