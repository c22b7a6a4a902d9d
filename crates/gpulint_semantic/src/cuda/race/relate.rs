//! Ranges of an index under guards that relate a thread coordinate to another value: in
//! `if (y >= o && y < 2 * o) s[2 * (y - o)]` the index stays at or above 0, which the ranges
//! of `y` and `o` taken apart do not show.

use super::index::{Forms, Index, Threads};
use crate::cuda::interval::Poly;

/// The atom that stands for a guard's slack (`y - x - 1` for `x < y`, never negative).
const SLACK: &str = "\u{1}slack";
/// Past this magnitude a bound is taken as unknown.
const FAR: i128 = 1 << 40;

impl Forms<'_, '_> {
    /// The numeric range of an atom of [`Forms::form`]: thread coordinates within the block,
    /// block and grid dimensions; anything for the rest.
    fn atom_span(&self, atom: &str) -> (i128, i128) {
        if let Some(axis) = atom.strip_prefix("threadIdx.") {
            let (_, hi) = self.rc.atom_range(&format!("blockDim.{axis}"));
            return (0, hi.saturating_sub(1));
        }
        if atom == SLACK {
            return (0, FAR);
        }
        self.rc.atom_range(atom)
    }

    /// Tightens the range of a one-dimensional index with each guard bound `x < y` that
    /// relates a thread coordinate of the index to other values: the coordinate is written as
    /// the bound's slack (at least 0) and the rest, and the index evaluated over that. Marks
    /// the index `correlated` where such a bound also names a value of the index that is not a
    /// thread coordinate or block dimension (its ranges, taken apart, then overstate what the
    /// threads reach).
    pub fn relate(&self, ix: &mut Index, t: &Threads) {
        let Some(p) = ix.poly.clone() else {
            return;
        };
        let span = |a: &str| self.atom_span(a);
        for (x, y) in &t.bounds {
            let Some(slack) = y.sub(x).and_then(|d| d.add_const(-1)) else {
                continue;
            };
            let Some(v) = slack
                .atoms()
                .find(|a| a.starts_with("threadIdx.") && p.mentions(a))
                .map(str::to_string)
            else {
                continue;
            };
            if slack.atoms().any(|a| {
                !a.starts_with("threadIdx.") && !a.starts_with("blockDim.") && p.mentions(a)
            }) {
                ix.correlated = true;
            }
            let Some(q) = eliminate(&p, &slack, &v) else {
                continue;
            };
            let Some((lo, hi)) = ix.range.as_mut() else {
                continue;
            };
            let (qlo, qhi) = q.interval(&span);
            if qlo > -FAR && lo.as_ref().is_none_or(|l| l.interval(&span).1 <= qlo) {
                *lo = Some(Poly::constant(qlo));
            }
            if qhi < FAR && hi.as_ref().is_none_or(|h| h.interval(&span).0 >= qhi) {
                *hi = Some(Poly::constant(qhi));
            }
        }
    }
}

/// `p` with the thread coordinate `v` written through `slack` (linear in `v` with
/// coefficient ±1): `v = ±(SLACK - slack(v = 0))`.
fn eliminate(p: &Poly, slack: &Poly, v: &str) -> Option<Poly> {
    let at = |k: i128| {
        slack.substitute(&|a| {
            Some(if a == v {
                Poly::constant(k)
            } else {
                Poly::atom(a)
            })
        })
    };
    let (s0, s1, s2) = (at(0)?, at(1)?, at(2)?);
    let c = s1.sub(&s0)?.as_const()?;
    if !matches!(c, 1 | -1) || s2.sub(&s0)?.as_const()? != 2 * c {
        return None;
    }
    let value = Poly::atom(SLACK).sub(&s0)?.scale(c)?;
    p.substitute(&|a| Some(if a == v { value.clone() } else { Poly::atom(a) }))
}
