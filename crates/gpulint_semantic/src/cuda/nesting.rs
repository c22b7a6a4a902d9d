//! The ranges that hold a byte range, among a set of nested ranges (syntax nodes: two of them
//! nest or are disjoint), found in the number of holders instead of a scan of the whole set.

/// Ranges sorted by start byte, with the innermost other range that holds each.
#[derive(Debug, Default)]
pub(crate) struct Nesting {
    ranges: Vec<(usize, usize)>,
    /// Indexes into `ranges` by start byte; on a tie, the longest first, then by index.
    order: Vec<usize>,
    /// Per range, the innermost other range that holds it (of equal ranges, the one with the
    /// lower index holds the other).
    parent: Vec<Option<usize>>,
}

impl Nesting {
    pub(crate) fn new(ranges: Vec<(usize, usize)>) -> Self {
        let mut order: Vec<usize> = (0..ranges.len()).collect();
        order.sort_by_key(|&i| (ranges[i].0, std::cmp::Reverse(ranges[i].1), i));
        let mut parent = vec![None; ranges.len()];
        let mut open: Vec<usize> = Vec::new();
        for &i in &order {
            let (s, e) = ranges[i];
            while let Some(&top) = open.last() {
                let (ts, te) = ranges[top];
                if ts <= s && e <= te {
                    break;
                }
                open.pop();
            }
            parent[i] = open.last().copied();
            open.push(i);
        }
        Nesting {
            ranges,
            order,
            parent,
        }
    }

    /// Indexes of the ranges that hold `start..end`, innermost first.
    pub(crate) fn holders(&self, start: usize, end: usize) -> impl Iterator<Item = usize> + '_ {
        let before = self.order.partition_point(|&i| self.ranges[i].0 <= start);
        // Every holder starts at or before `start`, so it holds the last range that does (or
        // is it): walk up from there.
        let mut cur = before.checked_sub(1).map(|k| self.order[k]);
        std::iter::from_fn(move || loop {
            let i = cur?;
            cur = self.parent[i];
            let (s, e) = self.ranges[i];
            if s <= start && end <= e {
                return Some(i);
            }
        })
    }

    /// The smallest range that holds `start..end`; of equal ones, the lowest index.
    pub(crate) fn innermost(&self, start: usize, end: usize) -> Option<usize> {
        self.holders(start, end)
            .min_by_key(|&i| (self.ranges[i].1 - self.ranges[i].0, i))
    }
}

#[cfg(test)]
mod tests {
    use super::Nesting;

    /// Every range that holds a query, and the smallest of them (lowest index on a tie),
    /// exactly as a scan of all the ranges finds them.
    #[test]
    fn holders_are_those_a_scan_finds() {
        let ranges = vec![
            (0, 100),
            (10, 50),
            (10, 50),
            (12, 20),
            (30, 40),
            (60, 90),
            (60, 70),
            (95, 100),
            (0, 100),
            (120, 130),
        ];
        let n = Nesting::new(ranges.clone());
        for start in 0..135 {
            for end in start..135 {
                let mut got: Vec<usize> = n.holders(start, end).collect();
                got.sort_unstable();
                let want: Vec<usize> = (0..ranges.len())
                    .filter(|&i| ranges[i].0 <= start && end <= ranges[i].1)
                    .collect();
                assert_eq!(got, want, "{start}..{end}");
                let smallest = want
                    .iter()
                    .copied()
                    .min_by_key(|&i| ranges[i].1 - ranges[i].0);
                assert_eq!(n.innermost(start, end), smallest, "{start}..{end}");
            }
        }
    }
}
