//! The decision whether two accesses to one buffer can touch the same element from two
//! different threads, on their index polynomials, ranges and guards.

use super::index::{Index, Threads};
use crate::cuda::interval::Poly;

/// Threads in a warp.
const WARP: i128 = 32;

/// One side of an access pair, as [`may_conflict`] sees it.
pub(crate) struct Side<'x> {
    pub index: &'x [Index],
    pub threads: &'x Threads,
}

/// Can two accesses to one buffer (at least one a write) touch the same element from two
/// different threads? `range` gives the numeric range of an atom for the proofs.
pub(crate) fn may_conflict(
    a: &Side<'_>,
    b: &Side<'_>,
    range: &dyn Fn(&str) -> (i128, i128),
    thread_atom: &dyn Fn(&str) -> bool,
    xor_base: &dyn Fn(&str) -> Option<Poly>,
) -> bool {
    if a.threads.warp && b.threads.warp {
        return false;
    }
    if let (Some((ka, _)), Some((kb, _))) = (&a.threads.single, &b.threads.single) {
        if ka == kb {
            return false;
        }
    }
    if a.index.len() != b.index.len() {
        return false;
    }
    let (own_a, own_b) = (a.index.iter().any(|i| i.own), b.index.iter().any(|i| i.own));
    let diffs: Option<Vec<Poly>> = a
        .index
        .iter()
        .zip(b.index)
        .map(|(x, y)| x.poly.as_ref()?.sub(y.poly.as_ref()?))
        .collect();
    let Some(diffs) = diffs else {
        // Not understood: whether they meet is not known.
        return false;
    };
    let equal = diffs.iter().all(|d| d.as_const() == Some(0));
    // The same per-thread part on both sides, apart by an offset that is the same for the
    // whole block (`s[t]` against `s[t + 8]`, `s[t + n / 2]`, `s[t + blockDim.x]`).
    let uniform = diffs.iter().all(|d| d.atoms().all(|x| !thread_atom(x)));
    match (own_a, own_b) {
        // One element for the whole block on both sides: a thread that the other side does
        // not also run writes what the other threads read (`if (tid == 0) s = v; … = s;`).
        (false, false) => equal && (a.threads.single.is_some() != b.threads.single.is_some()),
        (true, true) if equal => false,
        (true, true) if lane_partners(a.index, b.index) => false,
        (true, true) if xor_pair_owned(a, b, thread_atom, xor_base) => false,
        (true, true) if split_by_guard(a, b, thread_atom) => false,
        (true, true) if uniform => {
            // `s[t]` against `s[t + k]`: only where the ranges provably overlap. A reduction's
            // `if (t < s) s[t] += s[t + s]` keeps them apart, and a thread that owns two slots
            // (`s[t]`, `s[t + n / 2]` with `n` twice the block) touches only its own.
            // A guard on another thread value (`if (tile.thread_rank() < i)` around
            // `s[block_rank + i]`) selects threads the ranges do not see.
            // A guard relating the thread coordinate to another value of the index (`y <
            // 2 * o` around `s[(y - o) * w + x]` and `s[(y - o) * w + x + h]`) leaves the
            // ranges overstated: they prove no overlap.
            a.index.len() == 1
                && !a.index[0].correlated
                && !b.index[0].correlated
                && !strided_apart(&a.index[0], &diffs[0], thread_atom)
                && !bounded_by_symbol(a)
                && !bounded_by_symbol(b)
                && !guard_elsewhere(a, thread_atom)
                && !guard_elsewhere(b, thread_atom)
                && ranges_overlap(&a.index[0], &b.index[0], range)
        }
        // `s[t ^ j]` against `s[t]`: the partner thread's own slot.
        (true, true) if xor_partner(a.index, b.index, xor_base) => true,
        // `s[t]` against `s[n - 1 - t]`: each element of the common range is touched from
        // both sides, by two threads but for the middle one; two elements in common prove it.
        (true, true) if mirrored(a.index, b.index, thread_atom) => {
            ranges_overlap_by_two(&a.index[0], &b.index[0], range)
        }
        // Per-thread parts that differ (`s[2 * t]` against `s[n - 1 - t]`, a view chosen by
        // another thread coordinate, a stride that changes with the loop, places computed
        // from data): whether two threads meet is not known, so nothing is reported.
        (true, true) => false,
        _ => {
            let (shared, own) = if own_a { (b, a) } else { (a, b) };
            // `if (t > i) s[t] = …` against `… = s[i]`: the writers' slots lie above `i`.
            if let ([x], [y]) = (shared.index, own.index) {
                if let (Some(p), Some(q)) = (&x.poly, &y.poly) {
                    if own.threads.bounds.iter().any(|(lo, hi)| lo == p && hi == q) {
                        return false;
                    }
                }
            }
            // `if (tid == 0) … = s[0];` against `s[tid] = …`: element 0 is thread 0's own.
            if let (Some((_, Some((p, c)))), [idx]) = (&shared.threads.single, shared.index) {
                let at = idx.poly.as_ref().and_then(Poly::as_const);
                if let [o] = own.index {
                    // Also a block-stride loop from the thread's index (`for (j = t; …;
                    // j += blockDim.x)`): slot 0 is thread 0's.
                    if at == Some(*c)
                        && (o.poly.as_ref() == Some(p)
                            || *c == 0 && o.stride_base.as_ref() == Some(p))
                    {
                        return false;
                    }
                }
            }
            // The block's element lies within the range of the per-thread one in every
            // dimension: some thread touches it while others take it too. A bound that needs
            // the block size (`s[128]` against `s[t]`) holds only where the launch says so.
            // Both starting at the same element (`s[0]` or `s[w]` from 0 against `s[warp]`,
            // the warp index from 0) does too: the first thread of each side touches it.
            let same_start = |o: &Index, s: &Index| match (&o.range, &s.range) {
                (Some((Some(x), _)), Some((Some(y), _))) => x == y,
                _ => false,
            };
            own.index.len() == shared.index.len()
                && own
                    .index
                    .iter()
                    .zip(shared.index)
                    .all(|(o, s)| same_start(o, s) || ranges_overlap(o, s, range))
        }
    }
}

/// `s[t ^ 8]` against `s[t]`: partner lanes of one warp (warp-synchronous code).
fn lane_partners(a: &[Index], b: &[Index]) -> bool {
    let ([x], [y]) = (a, b) else {
        return false;
    };
    let partner_of = |p: &Index, q: &Index| {
        p.lane_partner.is_some() && (p.lane_partner == q.poly || p.lane_partner == q.lane_partner)
    };
    partner_of(x, y) || partner_of(y, x)
}

/// A compare-and-swap of the pair `x`, `x ^ k` made only by the thread with the lower one
/// (`if (x ^ k > x)`, the same offset added on both sides): every pair has one owner, so two
/// threads never touch one element.
fn xor_pair_owned(
    a: &Side<'_>,
    b: &Side<'_>,
    thread_atom: &dyn Fn(&str) -> bool,
    xor_base: &dyn Fn(&str) -> Option<Poly>,
) -> bool {
    let ([x], [y]) = (a.index, b.index) else {
        return false;
    };
    let (Some(p), Some(q)) = (&x.poly, &y.poly) else {
        return false;
    };
    let uniform = |r: &Poly| r.atoms().all(|t| !thread_atom(t));
    p.atoms().chain(q.atoms()).any(|atom| {
        let Some(base) = xor_base(atom) else {
            return false;
        };
        let partner = Poly::atom(atom);
        let guarded = |s: &Side<'_>| {
            s.threads
                .bounds
                .iter()
                .any(|(lo, hi)| *lo == base && *hi == partner)
        };
        // The offset of each side from the pair's lower or upper element.
        let offset = |r: &Poly| {
            [&base, &partner]
                .into_iter()
                .filter_map(|e| r.sub(e))
                .find(|o| uniform(o))
        };
        match (offset(p), offset(q)) {
            (Some(u), Some(v)) => u == v && guarded(a) && guarded(b),
            _ => false,
        }
    })
}

/// `x ^ j` against `x`: thread `x ^ j` owns the element thread `x` reaches.
fn xor_partner(a: &[Index], b: &[Index], xor_base: &dyn Fn(&str) -> Option<Poly>) -> bool {
    let ([x], [y]) = (a, b) else {
        return false;
    };
    let (Some(p), Some(q)) = (&x.poly, &y.poly) else {
        return false;
    };
    let partner = |r: &Poly, own: &Poly| {
        let mut atoms = r.atoms();
        match (atoms.next(), atoms.next()) {
            (Some(a), None) if *r == Poly::atom(a) => xor_base(a).as_ref() == Some(own),
            _ => false,
        }
    };
    partner(p, q) || partner(q, p)
}

/// `x + A` against `B - x` (`x` one thread value, `A`, `B` the same for the block).
fn mirrored(a: &[Index], b: &[Index], thread_atom: &dyn Fn(&str) -> bool) -> bool {
    let ([x], [y]) = (a, b) else {
        return false;
    };
    let (Some(p), Some(q)) = (&x.poly, &y.poly) else {
        return false;
    };
    let Some(sum) = p.add(q) else {
        return false;
    };
    let thread_part = |r: &Poly| {
        let atoms = thread_atom_in(r, thread_atom);
        atoms.len() == 1 && r.gcd_where(thread_atom) == 1
    };
    sum.atoms().all(|t| !thread_atom(t)) && thread_part(p) && thread_part(q)
}

/// Do the ranges of two indices provably share two elements (blocks of at least two warps)?
fn ranges_overlap_by_two(a: &Index, b: &Index, range: &dyn Fn(&str) -> (i128, i128)) -> bool {
    let (Some((Some(alo), Some(ahi))), Some((Some(blo), Some(bhi)))) = (&a.range, &b.range) else {
        return false;
    };
    let wide = wide(range);
    let apart = |x: &Poly, y: &Poly| x.sub(y).is_some_and(|d| d.interval(&wide).0 >= 1);
    apart(ahi, alo) && apart(ahi, blo) && apart(bhi, alo) && apart(bhi, blo)
}

/// Is the side under a bound on a thread value that its index does not use (`if
/// (tile.thread_rank() < i) s[block.thread_rank() + i]`)? Which threads pass it is not known.
fn guard_elsewhere(side: &Side<'_>, thread_atom: &dyn Fn(&str) -> bool) -> bool {
    let atoms: Vec<&str> = side
        .index
        .iter()
        .filter_map(|i| i.poly.as_ref())
        .flat_map(|p| thread_atom_in(p, thread_atom))
        .collect();
    side.threads.bounds.iter().any(|(v, _)| {
        let used = thread_atom_in(v, thread_atom);
        !used.is_empty() && used.iter().all(|u| !atoms.contains(u))
    })
}

/// `if (t < d) s[t] += s[t + d]`: the guard keeps the threads below `d` and the elements they
/// read at or above it. Also with a stride (`s[6 * t]` against `s[6 * (t + d)]`), an offset
/// the block shares (`s[base + t]`), and rows of the block (`s[y * blockDim.x + x]` against
/// `s[(y + d) * blockDim.x + x]` under `y < d`).
fn split_by_guard(a: &Side<'_>, b: &Side<'_>, thread_atom: &dyn Fn(&str) -> bool) -> bool {
    let ([x], [y]) = (a.index, b.index) else {
        return false;
    };
    let (Some(p), Some(q)) = (&x.poly, &y.poly) else {
        return false;
    };
    let uniform = |r: &Poly| r.atoms().all(|a| !thread_atom(a));
    // The side at the lower index must be the one bounded: its threads stay below `d`.
    let bounded = |lo: &Poly, hi: &Poly, lo_threads: &Threads| {
        let Some(d) = hi.sub(lo) else {
            return false;
        };
        let g = lo.gcd_where(thread_atom).max(1);
        lo_threads.bounds.iter().any(|(v, limit)| {
            let mut scales = vec![
                (Poly::constant(1), false),
                (Poly::constant(g), false),
                (Poly::atom("blockDim.x"), true),
            ];
            // Rows padded past the block's width (`s[y * (blockDim.x + 1) + x]`).
            scales.extend(padded_row(&d, limit).map(|r| (r, true)));
            for (scale, column) in scales {
                let (Some(step), Some(vs)) = (limit.mul(&scale), v.mul(&scale)) else {
                    continue;
                };
                if d != step {
                    continue;
                }
                let Some(mut rest) = lo.sub(&vs) else {
                    continue;
                };
                if column {
                    match rest.sub(&Poly::atom("threadIdx.x")) {
                        Some(r) => rest = r,
                        None => continue,
                    }
                }
                if uniform(&rest) && !thread_atom_in(v, thread_atom).is_empty() {
                    return true;
                }
            }
            false
        })
    };
    bounded(p, q, a.threads) || bounded(q, p, b.threads)
}

/// `d` as `limit` rows of a width wider than the block (`blockDim.x + 1`): the width, where
/// `limit` is one value.
fn padded_row(d: &Poly, limit: &Poly) -> Option<Poly> {
    let mut atoms = limit.atoms();
    let (Some(a), None) = (atoms.next(), atoms.next()) else {
        return None;
    };
    if *limit != Poly::atom(a) {
        return None;
    }
    let width = d.substitute(&|x| {
        Some(if x == a {
            Poly::constant(1)
        } else {
            Poly::atom(x)
        })
    })?;
    let pad = width.sub(&Poly::atom("blockDim.x"))?.as_const()?;
    (pad > 0 && limit.mul(&width)? == *d).then_some(width)
}

/// The atoms of `p` that differ between threads.
fn thread_atom_in<'p>(p: &'p Poly, thread_atom: &dyn Fn(&str) -> bool) -> Vec<&'p str> {
    p.atoms().filter(|a| thread_atom(a)).collect()
}

/// `s[5 * t + 0]` against `s[5 * t + 1]` (or `s[6 * t]` against `s[6 * (t + d) + 1]`): each
/// thread's slots are a stride apart, and an offset that is not a multiple of the stride never
/// reaches another thread's slot.
fn strided_apart(x: &Index, diff: &Poly, thread_atom: &dyn Fn(&str) -> bool) -> bool {
    let Some(p) = &x.poly else {
        return false;
    };
    let g = p.gcd_where(thread_atom);
    let rest = diff.gcd_where(&|_| true);
    g > 1 && rest % g == 0 && diff.constant_term() % g != 0
}

/// Is the side's own index kept below a bound that is not a constant (`if (t < lanes)`)?
/// Then whether it reaches the other side's elements is not known.
fn bounded_by_symbol(side: &Side<'_>) -> bool {
    let [x] = side.index else {
        return false;
    };
    let Some(p) = &x.poly else {
        return false;
    };
    let var = p.without_constant();
    side.threads
        .bounds
        .iter()
        .any(|(v, limit)| v.without_constant() == var && limit.as_const().is_none())
}

/// Do the ranges of two indices provably overlap (blocks of at least two warps)?
fn ranges_overlap(a: &Index, b: &Index, range: &dyn Fn(&str) -> (i128, i128)) -> bool {
    let (Some((Some(alo), ahi)), Some((Some(blo), bhi))) = (&a.range, &b.range) else {
        return false;
    };
    let (Some(ahi), Some(bhi)) = (ahi, bhi) else {
        return false;
    };
    let wide = wide(range);
    let at_least = |x: &Poly, y: &Poly| x.sub(y).is_some_and(|d| d.interval(&wide).0 >= 0);
    at_least(ahi, blo) && at_least(bhi, alo)
}

/// Atom ranges with blocks of at least two warps where the launch does not say otherwise.
fn wide<'r>(range: &'r dyn Fn(&str) -> (i128, i128)) -> impl Fn(&str) -> (i128, i128) + 'r {
    move |atom: &str| {
        let (lo, hi) = range(atom);
        if atom.starts_with("blockDim.x") {
            (lo.max(2 * WARP), hi.max(2 * WARP))
        } else {
            (lo, hi)
        }
    }
}
