//! Accesses to global memory whose index can leave the buffer: past its end under a guard that
//! admits one value too many (`if (i <= n) y[i]`) or with an offset past the guard
//! (`if (i < n) x[i + 1]`), and below its start (`in[i - 1]` at the first thread).
//!
//! The buffer's extent comes from the launches in this file (`cudaMalloc(&x, n *
//! sizeof(float))`, `torch::empty({n})`, `x.data_ptr<float>()` with `x.numel()`) when they show
//! it. Otherwise the bound the kernel checks is taken for the extent (`if (i < n)`: `n`
//! elements), but only for an index that is the guarded one plus a constant (or plus the bound
//! itself): that assumption is stated with each finding.

use super::eval::{Point, RangeCx};
use super::facts::{Fact, Rel, Side};
use super::poly::Poly;
use super::range::{add_ranges, negate_range, Range};
use crate::cuda::guards::{compact, name_tokens, sum_terms};
use crate::cuda::kernel::{peel, peel_pointer, Kernel};
use crate::cuda::{CudaModel, Launch};
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

/// Where the extent of a buffer comes from.
#[derive(Debug, Clone)]
pub enum Extent<'t> {
    /// The launch shows it (in host values).
    Launch {
        launch: Node<'t>,
        extent: Poly,
        /// The end of the index's range at that launch.
        reached: Poly,
    },
    /// Taken to be the bound the guard checks.
    Assumed(Poly),
}

/// An index that can leave `[0, extent)`.
#[derive(Debug, Clone)]
pub struct OutOfRange<'t> {
    /// Index into the kernel's `accesses`.
    pub access: usize,
    /// Past the end (`true`) or below the start.
    pub upper: bool,
    /// The range of the index (kernel values).
    pub range: Range,
    /// The guard whose bound the index passes (for `upper`), or that fails to exclude the
    /// start (for a lower finding, the innermost guard if any).
    pub guard: Option<u32>,
    pub extent: Extent<'t>,
    /// The index is the guarded expression itself (`if (i <= n) y[i]`), not an offset from it.
    pub guarded_itself: bool,
    /// The guarded expression is a global thread index.
    pub global_index: bool,
    /// The guarded term of the index (`i` of `x[i + 1]`); for a lower finding, the term that
    /// reaches 0.
    pub term: Node<'t>,
}

impl<'t> CudaModel<'t> {
    /// The accesses of kernel `k` to global memory whose index can leave its buffer.
    pub fn out_of_range(&self, k: &Kernel<'t>) -> Vec<OutOfRange<'t>> {
        let mut out = Vec::new();
        if k.too_large {
            return out;
        }
        let cx = RangeCx::new(self, k);
        let name = &self.functions[k.function].name;
        let launches: Vec<&Launch<'t>> = self.launches_of(name).collect();
        for (ai, a) in k.accesses.iter().enumerate() {
            if !a.global || !a.alias_offsets.is_empty() {
                continue;
            }
            let Some(index) = a.index else {
                continue;
            };
            if self.eval(index).is_some() {
                continue;
            }
            let Some(param) = k.params.iter().position(|p| p.pointer && p.name == a.base) else {
                continue;
            };
            let at = cx.point(a.guard, a.node.start_byte());
            let range = cx.range(index, &at);
            if range.loose {
                continue;
            }
            if let Some(v) = self.upper_violation(&cx, k, ai, index, &range, &at, &launches, param)
            {
                out.push(v);
                continue;
            }
            if let Some(v) = self.lower_violation(&cx, k, ai, index, &range, &at, &launches, param)
            {
                out.push(v);
            }
        }
        out
    }

    #[allow(clippy::too_many_arguments)]
    fn upper_violation(
        &self,
        cx: &RangeCx<'_, 't>,
        k: &Kernel<'t>,
        ai: usize,
        index: Node<'t>,
        range: &Range,
        at: &Point<'t>,
        launches: &[&Launch<'t>],
        param: usize,
    ) -> Option<OutOfRange<'t>> {
        let hi = range.hi.as_ref()?;
        let guard = hi.guard?;
        // The guard's fact on a term of the index, and what the index adds to that term. An
        // index with no guarded term (`i = l * n + j` from the bounds of two loops) is compared
        // with the extents the launches show, as a whole.
        let termed = self.guarded_term(cx, index, at, guard);
        let term_node = termed.as_ref().map_or(peel(index), |t| t.0 .1);
        let global_index = k.flags(self, term_node).is_global_index();
        let guarded_itself = termed.as_ref().is_some_and(|t| t.1.is_none());
        // The launches in this file that show the buffer's extent decide.
        let mut known = false;
        for l in launches {
            let (Some(ext), Some(reached)) = (
                self.launch_extent(l, k, param),
                self.to_host(l, k, &hi.poly),
            ) else {
                continue;
            };
            known = true;
            if host_nonneg(&reached.sub(&ext)?) {
                return Some(OutOfRange {
                    access: ai,
                    upper: true,
                    range: range.clone(),
                    guard: Some(guard),
                    extent: Extent::Launch {
                        launch: l.node,
                        extent: ext,
                        reached,
                    },
                    guarded_itself,
                    global_index,
                    term: term_node,
                });
            }
        }
        if known {
            return None;
        }
        let (fact, rest) = termed?;
        // Otherwise the guard's bound is the extent, for `t`, `t + c` with a constant `c`, and
        // `t + n` where `n` is the bound.
        let extent = assumed_extent(&fact.0)?;
        let plausible = match &rest {
            None => true,
            Some(r) => {
                r.as_const().is_some()
                    || (r.lo.as_ref().is_some_and(|l| l.poly == extent)
                        && r.hi.as_ref().is_some_and(|h| h.poly == extent))
            }
        };
        if plausible && nonneg(&hi.poly.sub(&extent)?) {
            return Some(OutOfRange {
                access: ai,
                upper: true,
                range: range.clone(),
                guard: Some(guard),
                extent: Extent::Assumed(extent),
                guarded_itself,
                global_index,
                term: term_node,
            });
        }
        None
    }

    /// For an index `t + rest` where guard `guard` bounds `t` from above: the bound as written
    /// (`n` of `t < n` or `t <= n`), the term's node, and the range of `rest` (`None` when the
    /// index is `t` itself).
    #[allow(clippy::type_complexity)]
    fn guarded_term(
        &self,
        cx: &RangeCx<'_, 't>,
        index: Node<'t>,
        at: &Point<'t>,
        guard: u32,
    ) -> Option<((Poly, Node<'t>), Option<Range>)> {
        let facts: Vec<&Fact<'t>> = at
            .facts()
            .iter()
            .filter(|f| f.guard == Some(guard) && f.rel == Rel::Upper)
            .collect();
        let limit_of = |f: &Fact<'t>| -> Option<Poly> {
            match f.other {
                Side::Node(n) => Some(cx.range(n, at).hi?.poly),
                Side::Text(_) => self.text_limit(f),
            }
        };
        let whole = compact(self.text(peel(index)));
        if let Some(f) = facts.iter().find(|f| f.term == whole) {
            return Some(((limit_of(f)?, peel(index)), None));
        }
        let terms = sum_terms(index)?;
        for (i, (t, positive)) in terms.iter().enumerate() {
            if !positive {
                continue;
            }
            let tt = compact(self.text(*t));
            let Some(f) = facts.iter().find(|f| f.term == tt) else {
                continue;
            };
            let lim = limit_of(f)?;
            // The rest of the sum.
            let mut rest: Option<Range> = None;
            for (j, (u, pos)) in terms.iter().enumerate() {
                if j == i {
                    continue;
                }
                let r = cx.range(*u, at);
                let r = if *pos { r } else { negate_range(r) };
                rest = Some(match rest {
                    None => r,
                    Some(acc) => add_ranges(acc, r),
                });
            }
            return Some(((lim, *t), Some(rest.unwrap_or_default())));
        }
        None
    }

    /// The limit of a loop macro's fact (`CUDA_1D_KERNEL_LOOP(i, n)`): a name.
    fn text_limit(&self, f: &Fact<'t>) -> Option<Poly> {
        match f.other {
            Side::Text(span) => {
                let t = self.source.get(span.start..span.end)?.trim();
                match crate::cuda::parse_c_int(t).or_else(|| self.constant(t)) {
                    Some(v) => Some(Poly::constant(v)),
                    None => t
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_')
                        .then(|| Poly::atom(t)),
                }
            }
            Side::Node(_) => None,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn lower_violation(
        &self,
        cx: &RangeCx<'_, 't>,
        k: &Kernel<'t>,
        ai: usize,
        index: Node<'t>,
        range: &Range,
        at: &Point<'t>,
        launches: &[&Launch<'t>],
        param: usize,
    ) -> Option<OutOfRange<'t>> {
        let lo = range.lo.as_ref()?.poly.as_const()?;
        if lo >= 0 {
            return None;
        }
        // `v - c`: one thread-dependent term whose least value is known and reached.
        let terms = sum_terms(index)?;
        let vars: Vec<Node<'t>> = terms
            .iter()
            .filter(|(t, _)| self.eval(*t).is_none())
            .map(|(t, _)| *t)
            .collect();
        let [v] = vars.as_slice() else {
            return None;
        };
        if !terms.iter().any(|(t, p)| t.id() == v.id() && *p) {
            return None;
        }
        let v = peel(*v);
        let vr = cx.range(v, at);
        if vr.lo_const() != Some(0) || !k.flags(self, v).thread_dependent() {
            return None;
        }
        // A local with one definition, and no condition that bounds what it is computed from
        // from below (`if (row > 0)` before `in[idx - width]`).
        if v.kind_name() == "identifier" {
            let i = k.local(self.text(v))?;
            if k.defs[i].len() != 1 || !k.updates[i].is_empty() {
                return None;
            }
            let closure = k.closure_of(v, self.source);
            let related = at.facts().iter().any(|f| {
                f.rel != Rel::Upper
                    && name_tokens(&f.term).iter().any(|n| {
                        *n == self.text(v)
                            || k.local(n)
                                .is_some_and(|j| closure[j / 64] & (1 << (j % 64)) != 0)
                    })
            });
            if related {
                return None;
            }
        }
        // A launch that passes a pointer into the middle of a buffer (`x + 1`) may mean it.
        for l in launches {
            let arg = peel_pointer(*l.args.get(param)?, self.source);
            if arg.kind_name() == "binary_expression" {
                return None;
            }
        }
        let _ = lo;
        Some(OutOfRange {
            access: ai,
            upper: false,
            range: range.clone(),
            guard: at.guard,
            extent: Extent::Assumed(Poly::constant(0)),
            guarded_itself: false,
            global_index: k.flags(self, v).is_global_index(),
            term: v,
        })
    }
}

impl<'t> CudaModel<'t> {
    /// Does every launch of `k` in this file (at least one) keep access `ai` inside its buffer:
    /// the largest index the launch's grid reaches (`gridDim.x * blockDim.x - 1` for an
    /// unguarded global index) is below the buffer's extent at that launch? Then the grid is
    /// exact for the data, whatever the guards.
    pub fn within_launch_extents(&self, k: &Kernel<'t>, ai: usize) -> bool {
        let a = &k.accesses[ai];
        let (Some(index), Some(param)) = (
            a.index,
            k.params.iter().position(|p| p.pointer && p.name == a.base),
        ) else {
            return false;
        };
        let launches: Vec<&Launch<'t>> =
            self.launches_of(&self.functions[k.function].name).collect();
        if launches.is_empty() || !a.alias_offsets.is_empty() {
            return false;
        }
        let cx = RangeCx::new(self, k);
        let range = cx.range(index, &cx.point(a.guard, a.node.start_byte()));
        let (Some(hi), Some(lo)) = (range.hi, range.lo) else {
            return false;
        };
        if range.loose || !nonneg(&lo.poly) {
            return false;
        }
        launches.iter().all(|l| {
            match (
                self.launch_extent(l, k, param),
                self.to_host(l, k, &hi.poly),
            ) {
                (Some(ext), Some(h)) => ext
                    .sub(&h)
                    .and_then(|d| d.add_const(-1))
                    .is_some_and(|d| nonneg(&d)),
                _ => false,
            }
        })
    }
}

/// The extent a written bound suggests: `n` for `i < n`, `i <= n` and `i < n - 1` (the
/// constant taken off leaves room for a neighbour), `HIDDEN` for `i < HIDDEN`.
fn assumed_extent(limit: &Poly) -> Option<Poly> {
    if limit.as_const().is_some() {
        return Some(limit.clone());
    }
    if limit.constant_term() < 0 {
        Some(limit.without_constant())
    } else {
        Some(limit.clone())
    }
}

/// Is `p`, over host values, never negative? Besides `nonneg`, a size of a tensor is at most
/// its number of elements (`x.size(d) <= x.numel()`, all sizes at least 1), which settles
/// `w * x.numel() + x.numel() - 1 - w * x.size(0)`.
fn host_nonneg(p: &Poly) -> bool {
    if nonneg(p) {
        return true;
    }
    let mut sizes: Vec<String> = p
        .atoms()
        .filter(|a| a.ends_with(')') && a.contains(".size("))
        .map(str::to_string)
        .collect();
    sizes.sort();
    sizes.dedup();
    if sizes.is_empty() {
        return false;
    }
    let mut q = p.clone();
    for s in &sizes {
        let Some(at) = s.rfind(".size(") else {
            return false;
        };
        let numel = Poly::atom(&format!("{}.numel()", &s[..at]));
        match q.lower_with_larger(s, &numel) {
            Some(r) => q = r,
            None => return false,
        }
    }
    nonneg(&q)
}

/// Is `p` never negative, for host or kernel sizes of at least 1?
fn nonneg(p: &Poly) -> bool {
    p.interval(&|_| (1, i64::MAX as i128)).0 >= 0
}

impl<'t> CudaModel<'t> {
    /// The range of `index` at the access `at` of the kernel defined by function `function`,
    /// from the interval facts of the guards that hold there, when both ends are constants in
    /// this file: `if (threadIdx.x < col_size)` with `col_size = min(n - s, 64)` bounds
    /// `threadIdx.x * 6 + 5` by `0..=383`. `None` when an end depends on a size the file does
    /// not give, or the bounds are not tight.
    pub fn guarded_constant_range(
        &self,
        function: usize,
        at: Node<'t>,
        index: Node<'t>,
    ) -> Option<(i128, i128)> {
        let k = self.kernel_of_function(function)?;
        let a = k.accesses.iter().find(|a| a.node.id() == at.id())?;
        // Equalities and congruences (`threadIdx.x % 4 == 0` under `threadIdx.x < 4`: thread
        // 0 only) narrow the values below what intervals describe.
        let threads = self.thread_names(&self.functions[function], index);
        let congruence = self.guard_chain(a.guard).take(256).any(|g| {
            std::iter::once(g.cond)
                .chain(gpulint_syntax::descendants(g.cond))
                .any(|n| {
                    n.kind_name() == "binary_expression"
                        && n.field("operator")
                            .is_some_and(|o| matches!(o.kind_name(), "==" | "%" | "&" | "!="))
                        && name_tokens(self.text(n))
                            .iter()
                            .any(|t| threads.contains(t))
                })
        });
        if congruence {
            return None;
        }
        let cx = RangeCx::new(self, k);
        let p = cx.point(a.guard, a.node.start_byte());
        let r = cx.range(index, &p);
        // Loose: incomparable bounds met; the kept upper bound must come from a guard
        // (`threadIdx.x < 64`: the threads the author expects).
        if r.loose && r.hi.as_ref().is_none_or(|h| h.guard.is_none()) {
            return None;
        }
        let (lo, hi) = (r.lo?.poly, r.hi?.poly);
        if !lo.atoms().chain(hi.atoms()).all(|x| cx.atom_known(x)) {
            return None;
        }
        let ranges = |x: &str| cx.atom_range(x);
        Some((lo.interval(&ranges).0, hi.interval(&ranges).1))
    }
}
