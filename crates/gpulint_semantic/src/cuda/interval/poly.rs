//! Symbolic bounds: integer polynomials over *atoms*, values fixed for a whole launch (a kernel
//! parameter `n`, `blockDim.x`, `gridDim.y`, a member of a parameter `p.rows`).
//!
//! `n - 1`, `2 * n`, `rows * cols - 1` and `gridDim.x * blockDim.x - 1` are all polynomials, so
//! the bound a guard proves (`i < n` → `i <= n - 1`) and the extent of a buffer (`n` elements)
//! compare by subtraction: the access is out of range when `hi - extent` is never negative.

use std::fmt;

/// A monomial: the atoms multiplied, sorted; empty for the constant term.
type Mono = Vec<String>;

/// More terms than this, or atoms of a higher degree, are not tracked: the bound is unknown.
const MAX_TERMS: usize = 12;
const MAX_DEGREE: usize = 4;

/// A sum of `coefficient × monomial` terms, sorted by monomial, with no zero coefficient.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Poly {
    terms: Vec<(Mono, i128)>,
}

impl Poly {
    pub fn constant(c: i128) -> Poly {
        let mut p = Poly::default();
        if c != 0 {
            p.terms.push((Vec::new(), c));
        }
        p
    }

    pub fn atom(name: &str) -> Poly {
        Poly {
            terms: vec![(vec![name.to_string()], 1)],
        }
    }

    /// The value, when it has no atom.
    pub fn as_const(&self) -> Option<i128> {
        match self.terms.as_slice() {
            [] => Some(0),
            [(m, c)] if m.is_empty() => Some(*c),
            _ => None,
        }
    }

    /// The constant term.
    pub fn constant_term(&self) -> i128 {
        self.terms
            .iter()
            .find(|(m, _)| m.is_empty())
            .map(|(_, c)| *c)
            .unwrap_or(0)
    }

    /// The atoms it mentions.
    pub fn atoms(&self) -> impl Iterator<Item = &str> {
        self.terms
            .iter()
            .flat_map(|(m, _)| m.iter().map(|a| a.as_str()))
    }

    /// The greatest common divisor of the coefficients of the terms with an atom that `pred`
    /// accepts (0 when there is none).
    pub fn gcd_where(&self, pred: &dyn Fn(&str) -> bool) -> i128 {
        let mut g: i128 = 0;
        for (m, c) in &self.terms {
            if m.iter().any(|a| pred(a)) {
                let (mut x, mut y) = (g.abs(), c.abs());
                while y != 0 {
                    (x, y) = (y, x % y);
                }
                g = x;
            }
        }
        g
    }

    /// The number of terms (the constant term included).
    pub fn term_count(&self) -> usize {
        self.terms.len()
    }

    pub fn mentions(&self, atom: &str) -> bool {
        self.atoms().any(|a| a == atom)
    }

    /// The same without its constant term.
    pub fn without_constant(&self) -> Poly {
        Poly {
            terms: self
                .terms
                .iter()
                .filter(|(m, _)| !m.is_empty())
                .cloned()
                .collect(),
        }
    }

    fn add_term(&mut self, m: Mono, c: i128) -> Option<()> {
        match self.terms.binary_search_by(|(x, _)| x.cmp(&m)) {
            Ok(i) => {
                let v = self.terms[i].1.checked_add(c)?;
                if v == 0 {
                    self.terms.remove(i);
                } else {
                    self.terms[i].1 = v;
                }
            }
            Err(i) => {
                if c != 0 {
                    self.terms.insert(i, (m, c));
                }
            }
        }
        (self.terms.len() <= MAX_TERMS).then_some(())
    }

    pub fn add(&self, o: &Poly) -> Option<Poly> {
        let mut out = self.clone();
        for (m, c) in &o.terms {
            out.add_term(m.clone(), *c)?;
        }
        Some(out)
    }

    pub fn sub(&self, o: &Poly) -> Option<Poly> {
        self.add(&o.scale(-1)?)
    }

    pub fn add_const(&self, c: i128) -> Option<Poly> {
        self.add(&Poly::constant(c))
    }

    pub fn scale(&self, k: i128) -> Option<Poly> {
        if k == 0 {
            return Some(Poly::default());
        }
        let mut out = Poly::default();
        for (m, c) in &self.terms {
            out.terms.push((m.clone(), c.checked_mul(k)?));
        }
        Some(out)
    }

    pub fn mul(&self, o: &Poly) -> Option<Poly> {
        let mut out = Poly::default();
        for (m1, c1) in &self.terms {
            for (m2, c2) in &o.terms {
                let mut m = m1.clone();
                m.extend(m2.iter().cloned());
                if m.len() > MAX_DEGREE {
                    return None;
                }
                m.sort();
                out.add_term(m, c1.checked_mul(*c2)?)?;
            }
        }
        Some(out)
    }

    /// Exact division of every coefficient by `k > 0`.
    pub fn div_exact(&self, k: i128) -> Option<Poly> {
        if k <= 0 || self.terms.iter().any(|(_, c)| c % k != 0) {
            return None;
        }
        Some(Poly {
            terms: self.terms.iter().map(|(m, c)| (m.clone(), c / k)).collect(),
        })
    }

    /// The polynomial with each atom replaced by `value(atom)`; `None` if one has none.
    pub fn substitute(&self, value: &dyn Fn(&str) -> Option<Poly>) -> Option<Poly> {
        let mut out = Poly::default();
        for (m, c) in &self.terms {
            let mut t = Poly::constant(*c);
            for a in m {
                t = t.mul(&value(a)?)?;
            }
            out = out.add(&t)?;
        }
        Some(out)
    }

    /// A lower bound of the polynomial when `atom` is at most `larger` (both nonnegative): `atom`
    /// replaced by `larger`, provided every term that mentions `atom` has a negative
    /// coefficient (so a larger value only lowers it). `None` when a term has a positive one.
    pub fn lower_with_larger(&self, atom: &str, larger: &Poly) -> Option<Poly> {
        if self
            .terms
            .iter()
            .any(|(m, c)| *c > 0 && m.iter().any(|a| a == atom))
        {
            return None;
        }
        self.substitute(&|a| {
            Some(if a == atom {
                larger.clone()
            } else {
                Poly::atom(a)
            })
        })
    }

    /// The interval of values over atom ranges given by `range` (saturating).
    pub fn interval(&self, range: &dyn Fn(&str) -> (i128, i128)) -> (i128, i128) {
        let (mut lo, mut hi) = (0i128, 0i128);
        for (m, c) in &self.terms {
            let (mut a, mut b) = (1i128, 1i128);
            for atom in m {
                let (x, y) = range(atom);
                let cands = [
                    a.saturating_mul(x),
                    a.saturating_mul(y),
                    b.saturating_mul(x),
                    b.saturating_mul(y),
                ];
                a = *cands.iter().min().unwrap_or(&0);
                b = *cands.iter().max().unwrap_or(&0);
            }
            let (x, y) = (a.saturating_mul(*c), b.saturating_mul(*c));
            lo = lo.saturating_add(x.min(y));
            hi = hi.saturating_add(x.max(y));
        }
        (lo, hi)
    }
}

impl fmt::Display for Poly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.terms.is_empty() {
            return write!(f, "0");
        }
        // Monomials first, the constant last: `2 * n - 1`.
        let mut first = true;
        let ordered = self
            .terms
            .iter()
            .filter(|(m, _)| !m.is_empty())
            .chain(self.terms.iter().filter(|(m, _)| m.is_empty()));
        for (m, c) in ordered {
            let (neg, abs) = (*c < 0, c.unsigned_abs());
            if first {
                if neg {
                    write!(f, "-")?;
                }
            } else {
                write!(f, " {} ", if neg { '-' } else { '+' })?;
            }
            first = false;
            if m.is_empty() {
                write!(f, "{abs}")?;
                continue;
            }
            if abs != 1 {
                write!(f, "{abs} * ")?;
            }
            write!(f, "{}", m.join(" * "))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_and_display() {
        let n = Poly::atom("n");
        let hi = n.add_const(-1).unwrap();
        assert_eq!(hi.to_string(), "n - 1");
        let two_n = n.scale(2).unwrap().add_const(-1).unwrap();
        assert_eq!(two_n.to_string(), "2 * n - 1");
        assert_eq!(two_n.sub(&n).unwrap().to_string(), "n - 1");
        let rc = Poly::atom("rows").mul(&Poly::atom("cols")).unwrap();
        assert_eq!(rc.to_string(), "cols * rows");
        assert_eq!(
            hi.add_const(1).unwrap().sub(&n).unwrap().as_const(),
            Some(0)
        );
        let (lo, hi) = rc.interval(&|_| (1, 100));
        assert_eq!((lo, hi), (1, 10000));
    }

    #[test]
    fn lower_with_larger() {
        // `w * n + n - 1 - w * s` with `s <= n` is at least `n - 1`.
        let (w, n, s) = (Poly::atom("w"), Poly::atom("n"), Poly::atom("s"));
        let p = w
            .mul(&n)
            .unwrap()
            .add(&n)
            .unwrap()
            .add_const(-1)
            .unwrap()
            .sub(&w.mul(&s).unwrap())
            .unwrap();
        assert_eq!(p.lower_with_larger("s", &n).unwrap().to_string(), "n - 1");
        // A positive term of `s` grows with it: no lower bound from `s <= n`.
        assert!(s
            .add_const(-1)
            .unwrap()
            .lower_with_larger("s", &n)
            .is_none());
    }
}
