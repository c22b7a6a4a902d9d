//! The per-file work budget: a safety net that bounds the work of the analyses on any one file,
//! whatever its content.
//!
//! The analyses are meant to be linear in the size of the file; the budget makes sure that a
//! file on which one is not (a pattern nobody foresaw) still ends in bounded time instead of
//! hanging the run. Work is counted in units (syntax nodes visited by the tree walks,
//! interpreter steps, fixpoint rounds), never in wall-clock time, so that where an analysis
//! stops, and so the output, is the same on every machine, under any load and for any number
//! of threads. The budget grows with the file's size ([`for_file`]): a file on which the
//! analyses are linear never reaches it.
//!
//! The engine runs each file's analyses inside [`metered`]; the analyses call [`spend`] in their
//! loops and stop (returning what they have) once it answers `false`. The engine then drops
//! what the interrupted analysis found, skips the analyses not yet run, keeps everything found
//! before, and reports where the work stopped (GL003).

use std::cell::Cell;

/// Units per byte of the file. A unit is a syntax node visited by a tree walk of a rule or an
/// analysis (a node per 3 to 10 bytes) or a step of the memory interpreter: all rules together
/// spend under 1 unit per byte on the fixtures, their mutants and the large generated files of
/// the scaling test (0.1 on 8 MB of Python), so a file reaches its budget only when some
/// analysis walks it hundreds of times over.
pub const UNITS_PER_BYTE: u64 = 100;

/// The budget of a small file, whatever its size.
pub const MIN_UNITS: u64 = 10_000_000;

/// Where the work on a file stopped: the analysis that ran out of budget, and the byte offset
/// of what it was working on ([`UNKNOWN`] when unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stop {
    pub analysis: &'static str,
    pub at: usize,
}

thread_local! {
    /// Units left to the file being checked on this thread (`u64::MAX` outside [`metered`]).
    static LEFT: Cell<u64> = const { Cell::new(u64::MAX) };
    /// The units the current file started with (0 outside [`metered`]).
    static TOTAL: Cell<u64> = const { Cell::new(0) };
    /// Where the budget ran out, the first time it did.
    static STOPPED: Cell<Option<Stop>> = const { Cell::new(None) };
    /// The analysis running now (named in [`Stop`] when a helper that does not know it, such
    /// as a tree walk, runs out).
    static CURRENT: Cell<(&'static str, usize)> = const { Cell::new(("analysis", 0)) };
}

/// The budget of a file of `len` bytes (or the one [`with_budget`] sets).
pub fn for_file(len: usize) -> u64 {
    OVERRIDE
        .get()
        .unwrap_or_else(|| MIN_UNITS.saturating_add(UNITS_PER_BYTE.saturating_mul(len as u64)))
}

thread_local! {
    static OVERRIDE: Cell<Option<u64>> = const { Cell::new(None) };
}

/// Runs `f` with every file checked on this thread getting `units` instead of its usual budget
/// (to see what a file whose budget runs out gives, without a file that large).
pub fn with_budget<T>(units: u64, f: impl FnOnce() -> T) -> T {
    struct Restore(Option<u64>);
    impl Drop for Restore {
        fn drop(&mut self) {
            OVERRIDE.set(self.0);
        }
    }
    let _restore = Restore(OVERRIDE.replace(Some(units)));
    f()
}

/// Runs `f` with a budget of `units` on this thread; returns its result, the units it spent
/// and, if the budget ran out, where. Nested calls run on the budget of the outer one's
/// file: the outer budget is restored (less what the inner call spent) afterwards.
pub fn metered<T>(units: u64, f: impl FnOnce() -> T) -> (T, u64, Option<Stop>) {
    let (outer_left, outer_total, outer_stopped, outer_current) =
        (LEFT.get(), TOTAL.get(), STOPPED.take(), CURRENT.get());
    LEFT.set(units);
    TOTAL.set(units);
    // Restored even when `f` panics (the engine catches panics and goes on with other files).
    struct Restore(u64, u64, Option<Stop>, (&'static str, usize), u64);
    impl Drop for Restore {
        fn drop(&mut self) {
            let spent = self.4.saturating_sub(LEFT.get());
            LEFT.set(self.0.saturating_sub(if self.1 == 0 { 0 } else { spent }));
            TOTAL.set(self.1);
            STOPPED.set(self.2);
            CURRENT.set(self.3);
        }
    }
    let restore = Restore(outer_left, outer_total, outer_stopped, outer_current, units);
    let out = f();
    let spent = units.saturating_sub(LEFT.get());
    let stop = STOPPED.get();
    drop(restore);
    (out, spent, stop)
}

/// Runs `f` outside the current file's budget: what it spends is not counted, and it never
/// runs out (work done on this thread for other files, such as facts kept for the run).
pub fn unmetered<T>(f: impl FnOnce() -> T) -> T {
    struct Restore(u64, u64, Option<Stop>, (&'static str, usize));
    impl Drop for Restore {
        fn drop(&mut self) {
            LEFT.set(self.0);
            TOTAL.set(self.1);
            STOPPED.set(self.2);
            CURRENT.set(self.3);
        }
    }
    let _restore = Restore(LEFT.get(), TOTAL.get(), STOPPED.take(), CURRENT.get());
    LEFT.set(u64::MAX);
    TOTAL.set(0);
    f()
}

/// Names the analysis about to run and the byte offset it works at, for the [`Stop`] of a
/// helper (a tree walk) that runs out of budget inside it.
pub fn enter(analysis: &'static str, at: usize) {
    CURRENT.set((analysis, at));
}

/// Spends `units` of the current file's budget. `false` once the budget is spent: the caller
/// stops its work and returns what it has. The first time, records the current analysis as
/// where the work stopped.
#[inline]
pub fn spend(units: u64) -> bool {
    let left = LEFT.get();
    if left >= units {
        LEFT.set(left - units);
        return true;
    }
    LEFT.set(0);
    if STOPPED.get().is_none() {
        let (analysis, at) = CURRENT.get();
        STOPPED.set(Some(Stop { analysis, at }));
    }
    false
}

/// Where the work stopped, when the analysis that ran out did not know (it was entered with
/// [`UNKNOWN`]): called by a helper that knows the offset it was at (a tree walk).
pub fn stopped_at(at: usize) {
    if let Some(stop) = STOPPED.get().filter(|s| s.at == UNKNOWN) {
        STOPPED.set(Some(Stop { at, ..stop }));
    }
}

/// The offset of an analysis of the whole file (see [`stopped_at`]).
pub const UNKNOWN: usize = usize::MAX;

/// Has the current file's budget run out?
pub fn exhausted() -> bool {
    STOPPED.get().is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spending_stops_at_the_budget_and_names_the_analysis() {
        let (count, spent, stop) = metered(10, || {
            enter("walk", 7);
            let mut n = 0;
            while spend(3) {
                n += 1;
            }
            assert!(exhausted());
            n
        });
        assert_eq!(count, 3);
        assert_eq!(spent, 10);
        assert_eq!(
            stop,
            Some(Stop {
                analysis: "walk",
                at: 7
            })
        );
        // Outside a metered run nothing runs out.
        assert!(!exhausted());
        assert!(spend(u64::MAX / 2));
    }

    #[test]
    fn a_nested_run_spends_from_the_outer_budget() {
        let (_, spent, stop) = metered(100, || {
            let (_, inner, inner_stop) = metered(30, || while spend(1) {});
            assert_eq!((inner, inner_stop.is_some()), (30, true));
            // The outer file goes on with what the inner one left.
            assert!(!exhausted());
            assert!(spend(70));
            assert!(!spend(1));
        });
        assert_eq!(spent, 100);
        assert!(stop.is_some());
    }

    #[test]
    fn the_budget_grows_with_the_file() {
        assert_eq!(for_file(0), MIN_UNITS);
        assert!(for_file(10 << 20) > for_file(1 << 20));
    }

    #[test]
    fn unmetered_work_spends_nothing_of_the_file() {
        let ((), spent, stop) = metered(10, || {
            assert!(spend(4));
            let inner = unmetered(|| (0..100).all(|_| spend(1)) && !exhausted());
            assert!(inner);
            assert!(spend(6));
            assert!(!spend(1));
        });
        assert_eq!(spent, 10);
        assert!(stop.is_some());
    }
}
