//! Value ranges of integer expressions: bounds with the guards that gave them, and the
//! arithmetic the evaluator combines them with.

use super::poly::Poly;

/// One side of a range, and the guard whose condition gave it (if one did).
#[derive(Debug, Clone)]
pub struct Bound {
    pub poly: Poly,
    pub guard: Option<u32>,
}

/// `lo <= value <= hi` (both inclusive; `None`: unbounded or unknown).
#[derive(Debug, Clone, Default)]
pub struct Range {
    pub lo: Option<Bound>,
    pub hi: Option<Bound>,
    /// Another upper or lower bound, not comparable with the one kept, was dropped: the range
    /// may be narrower than it says, so it proves nothing about reaching its ends.
    pub loose: bool,
}

impl std::fmt::Display for Range {
    /// `0..=n - 1`, `?` for an unknown end.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let end = |b: &Option<Bound>| match b {
            Some(b) => b.poly.to_string(),
            None => "?".to_string(),
        };
        write!(f, "{}..={}", end(&self.lo), end(&self.hi))
    }
}

impl Range {
    pub(super) fn exact(p: Poly) -> Range {
        Range {
            lo: Some(Bound {
                poly: p.clone(),
                guard: None,
            }),
            hi: Some(Bound {
                poly: p,
                guard: None,
            }),
            loose: false,
        }
    }

    pub(super) fn constant(c: i128) -> Range {
        Range::exact(Poly::constant(c))
    }

    pub(super) fn between(lo: Option<Poly>, hi: Option<Poly>) -> Range {
        Range {
            lo: lo.map(|poly| Bound { poly, guard: None }),
            hi: hi.map(|poly| Bound { poly, guard: None }),
            loose: false,
        }
    }

    pub fn as_const(&self) -> Option<i128> {
        let lo = self.lo.as_ref()?.poly.as_const()?;
        let hi = self.hi.as_ref()?.poly.as_const()?;
        (lo == hi).then_some(lo)
    }

    /// The lower bound as a constant.
    pub fn lo_const(&self) -> Option<i128> {
        self.lo.as_ref()?.poly.as_const()
    }

    pub fn hi_const(&self) -> Option<i128> {
        self.hi.as_ref()?.poly.as_const()
    }
}

/// Keeps the tighter of `cur` and `cand` (the smaller for an upper bound). Incomparable: the
/// one from a guard is kept and the range marked loose; bounds from the grid size (`gridDim`)
/// give way to any other, since the grid is sized from the data.
pub(super) fn tighten(cur: &mut Option<Bound>, loose: &mut bool, cand: Bound, upper: bool) {
    let Some(c) = cur.as_ref() else {
        *cur = Some(cand);
        return;
    };
    let grid = |b: &Bound| b.poly.atoms().any(|a| a.starts_with("gridDim."));
    if grid(c) && !grid(&cand) {
        *cur = Some(cand);
        return;
    }
    if grid(&cand) {
        return;
    }
    match cand.poly.sub(&c.poly).and_then(|d| d.as_const()) {
        Some(d) => {
            let better = if upper { d < 0 } else { d > 0 };
            if better || (d == 0 && c.guard.is_none() && cand.guard.is_some()) {
                *cur = Some(cand);
            }
        }
        None => {
            *loose = true;
            if cand.guard.is_some() && c.guard.is_none() {
                *cur = Some(cand);
            }
        }
    }
}

/// The range of a value that is one of two.
pub(super) fn union(a: Range, b: Range) -> Range {
    let pick = |x: Option<Bound>, y: Option<Bound>, upper: bool| -> Option<Bound> {
        let (x, y) = (x?, y?);
        let d = x.poly.sub(&y.poly)?.as_const()?;
        let keep_x = if upper { d >= 0 } else { d <= 0 };
        Some(if keep_x { x } else { y })
    };
    Range {
        lo: pick(a.lo, b.lo, false),
        hi: pick(a.hi, b.hi, true),
        loose: a.loose || b.loose,
    }
}

/// The range of `-x`.
pub(super) fn negate_range(r: Range) -> Range {
    negate(r)
}

/// The range of `a + b`.
pub(super) fn add_ranges(a: Range, b: Range) -> Range {
    binary("+", a, b)
}

pub(super) fn negate(r: Range) -> Range {
    let neg = |b: Option<Bound>| {
        b.and_then(|b| {
            Some(Bound {
                poly: b.poly.scale(-1)?,
                guard: b.guard,
            })
        })
    };
    Range {
        lo: neg(r.hi),
        hi: neg(r.lo),
        loose: r.loose,
    }
}

pub(super) fn bound2(
    a: &Option<Bound>,
    b: &Option<Bound>,
    f: impl Fn(&Poly, &Poly) -> Option<Poly>,
) -> Option<Bound> {
    let (a, b) = (a.as_ref()?, b.as_ref()?);
    Some(Bound {
        poly: f(&a.poly, &b.poly)?,
        guard: a.guard.or(b.guard),
    })
}

pub(super) fn nonneg(b: &Option<Bound>) -> bool {
    b.as_ref().is_some_and(|b| {
        b.poly.interval(&|_| (0, i64::MAX as i128)).0 >= 0 && b.poly.constant_term() >= 0
    })
}

/// The range of `l op r`.
pub(super) fn binary(op: &str, l: Range, r: Range) -> Range {
    let loose = l.loose || r.loose;
    let c = r.as_const();
    let out = match op {
        "+" => Range {
            lo: bound2(&l.lo, &r.lo, |a, b| a.add(b)),
            hi: bound2(&l.hi, &r.hi, |a, b| a.add(b)),
            loose,
        },
        "-" => Range {
            lo: bound2(&l.lo, &r.hi, |a, b| a.sub(b)),
            hi: bound2(&l.hi, &r.lo, |a, b| a.sub(b)),
            loose,
        },
        "*" => {
            let (x, y, k) = match (l.as_const(), c) {
                (_, Some(k)) => (l, r, k),
                (Some(k), _) => (r, l, k),
                _ => {
                    if nonneg(&l.lo) && nonneg(&r.lo) {
                        return Range {
                            lo: bound2(&l.lo, &r.lo, |a, b| a.mul(b)),
                            hi: bound2(&l.hi, &r.hi, |a, b| a.mul(b)),
                            loose,
                        };
                    }
                    return Range::default();
                }
            };
            let _ = y;
            let scale = |b: &Option<Bound>| {
                b.as_ref().and_then(|b| {
                    Some(Bound {
                        poly: b.poly.scale(k)?,
                        guard: b.guard,
                    })
                })
            };
            if k >= 0 {
                Range {
                    lo: scale(&x.lo),
                    hi: scale(&x.hi),
                    loose,
                }
            } else {
                Range {
                    lo: scale(&x.hi),
                    hi: scale(&x.lo),
                    loose,
                }
            }
        }
        "/" | ">>" => {
            let k = match (op, c) {
                ("/", Some(k)) if k > 0 => k,
                (">>", Some(s)) if (0..62).contains(&s) => 1i128 << s,
                _ => {
                    // A nonnegative value divided by a positive one stays nonnegative.
                    let pos = r.lo_const().is_some_and(|x| x > 0);
                    let lo = (nonneg(&l.lo) && pos).then(|| Poly::constant(0));
                    return Range {
                        lo: lo.map(|poly| Bound { poly, guard: None }),
                        hi: None,
                        loose,
                    };
                }
            };
            if !nonneg(&l.lo) {
                return Range::default();
            }
            let div = |b: &Option<Bound>, up: bool| {
                let b = b.as_ref()?;
                let poly = match b.poly.as_const() {
                    Some(v) => Poly::constant(v.div_euclid(k)),
                    None => b
                        .poly
                        .div_exact(k)
                        .or_else(|| (!up).then(|| Poly::constant(0)))?,
                };
                Some(Bound {
                    poly,
                    guard: b.guard,
                })
            };
            Range {
                lo: div(&l.lo, false),
                hi: div(&l.hi, true),
                loose,
            }
        }
        "<<" => match c {
            Some(s) if (0..62).contains(&s) => binary("*", l, Range::constant(1 << s)),
            _ => Range::default(),
        },
        "%" => {
            let pos = r.lo_const().is_some_and(|x| x > 0);
            if !pos {
                return Range::default();
            }
            let m1 = r.hi.as_ref().and_then(|h| {
                Some(Bound {
                    poly: h.poly.add_const(-1)?,
                    guard: h.guard,
                })
            });
            if nonneg(&l.lo) {
                let mut hi = m1;
                // `x % n` is at most `x` too.
                let mut lz = false;
                if let Some(h) = l.hi.clone() {
                    tighten(&mut hi, &mut lz, h, true);
                }
                Range {
                    lo: Some(Bound {
                        poly: Poly::constant(0),
                        guard: None,
                    }),
                    hi,
                    loose: loose || lz,
                }
            } else {
                Range::default()
            }
        }
        "&" => {
            let mask = c.or(l.as_const());
            match mask {
                Some(m) if m >= 0 => {
                    Range::between(Some(Poly::constant(0)), Some(Poly::constant(m)))
                }
                _ => Range::default(),
            }
        }
        _ => Range::default(),
    };
    out
}
