//! Checking files on the threads of a pool without two large files at once on every thread.
//!
//! Most of the memory a check takes is the working memory of the files in flight (the tree,
//! the model), and it grows with the size of the file: a 200 KB source takes about 7 MB while
//! it is checked. When every thread reaches a large file at the same time (a tree with copies
//! of the same folders, a folder of generated code), the peak is that many large files at
//! once. Here the files of [`LARGE`] bytes or more go to at most half the threads (rounded up)
//! while smaller files remain; the other threads take the smaller files meanwhile, so no thread
//! waits. Once the smaller files are all taken, every thread takes large files.
//!
//! Each queue is taken largest first (the large files by size, the smaller files a folder at a
//! time by the bytes of the folder's run), so that the last work taken is small and no thread
//! waits long for another at the end; what the files of a folder share is then worked out by
//! one thread, not by all at once. Results come back with the index given with their file, in
//! no particular order: the caller sorts them.

use super::Candidate;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The size (bytes on disk) from which a file counts as large.
pub const LARGE: u64 = 64 * 1024;

/// Calls `check` on each item of `items` on the threads of `pool`, large items (by `size`) on
/// at most half of them at once while small items remain; returns what `check` gives back,
/// with the item it came from. Items are small handles (indices): the queues copy them.
pub fn spread<I, R, S, G, F>(
    pool: &rayon::ThreadPool,
    items: &[I],
    size: S,
    same_group: G,
    check: F,
) -> Vec<(I, R)>
where
    I: Copy + Send + Sync,
    R: Send,
    S: Fn(I) -> u64 + Sync,
    G: Fn(I, I) -> bool,
    F: Fn(I) -> Option<R> + Sync,
{
    let threads = pool.current_num_threads().max(1);
    if items.is_empty() {
        return Vec::new();
    }
    if threads == 1 {
        // One thread: nothing runs beside anything, so order alone decides.
        return pool.install(|| {
            items
                .iter()
                .filter_map(|&item| check(item).map(|r| (item, r)))
                .collect()
        });
    }
    // Each item with its size, looked at once.
    type WithSizes<T> = Vec<(T, u64)>;
    let (mut large, small): (WithSizes<I>, WithSizes<I>) = {
        use rayon::prelude::*;
        pool.install(|| {
            items
                .par_iter()
                .map(|&item| (item, size(item)))
                .partition(|&(_, bytes)| bytes >= LARGE)
        })
    };
    let lanes = threads.div_ceil(2);
    // The largest work first (large items and runs of small ones by their bytes, the order
    // given between equals): the run ends on small work, not with one thread still on a long
    // run while the others have nothing left to take.
    large.sort_by_key(|&(_, bytes)| std::cmp::Reverse(bytes));
    let next_large = AtomicUsize::new(0);
    // The small items in runs of the same group (files of one folder), each taken whole by
    // one thread: what the files of a folder share is then worked out once, not by every
    // thread at the same time.
    let mut runs: Vec<(usize, usize, u64)> = Vec::new();
    for (k, &(item, bytes)) in small.iter().enumerate() {
        match runs.last_mut() {
            Some(run) if same_group(small[k - 1].0, item) => {
                run.1 = k + 1;
                run.2 += bytes;
            }
            _ => runs.push((k, k + 1, bytes)),
        }
    }
    runs.sort_by_key(|&(_, _, bytes)| std::cmp::Reverse(bytes));
    let small: Vec<I> = small.into_iter().map(|(item, _)| item).collect();
    let large: Vec<I> = large.into_iter().map(|(item, _)| item).collect();
    let next_group = AtomicUsize::new(0);
    let take_group = || {
        let g = next_group.fetch_add(1, Ordering::Relaxed);
        runs.get(g).map(|&(start, end, _)| &small[start..end])
    };
    let large_in_flight = AtomicUsize::new(0);
    // One large item, as a run of one.
    let take_large = || {
        let at = next_large.fetch_add(1, Ordering::Relaxed);
        large.get(at..at + 1)
    };
    let per_thread: Vec<Vec<(I, R)>> = pool.broadcast(|_| {
        let mut out = Vec::new();
        loop {
            // A large file when fewer than `lanes` are in flight; else a small one; else (no
            // small one left) a large one anyway.
            let claimed = large_in_flight.fetch_add(1, Ordering::AcqRel) < lanes;
            let large_one = if claimed { take_large() } else { None };
            let (work, is_large) = match large_one {
                Some(item) => (item, true),
                None => {
                    large_in_flight.fetch_sub(1, Ordering::AcqRel);
                    match take_group() {
                        Some(group) => (group, false),
                        None => match take_large() {
                            Some(item) => {
                                large_in_flight.fetch_add(1, Ordering::AcqRel);
                                (item, true)
                            }
                            None => break,
                        },
                    }
                }
            };
            for &item in work {
                if let Some(r) = check(item) {
                    out.push((item, r));
                }
            }
            if is_large {
                large_in_flight.fetch_sub(1, Ordering::AcqRel);
            }
        }
        out
    });
    per_thread.into_iter().flatten().collect()
}

/// The size of a file on disk, for [`spread`] (0 when it cannot be looked at: its check says
/// why).
pub(super) fn size_on_disk(c: &Candidate) -> u64 {
    std::fs::metadata(c.path()).map_or(0, |m| m.len())
}

/// Whether two files are in the same folder, for [`spread`].
pub(super) fn same_folder(a: &Candidate, b: &Candidate) -> bool {
    a.folder() == b.folder()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    #[test]
    fn every_item_once_and_large_ones_on_half_the_threads_while_small_ones_remain() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(4)
            .build()
            .unwrap();
        // Every fifth item is large; the small ones outnumber them.
        let items: Vec<(usize, u64)> = (0..400)
            .map(|i| (i, if i % 5 == 0 { LARGE } else { LARGE - 1 }))
            .collect();
        let small = items.iter().filter(|(_, s)| *s < LARGE).count();
        let started_small = AtomicUsize::new(0);
        let large_now = AtomicUsize::new(0);
        let too_many = AtomicBool::new(false);
        let out = spread(
            &pool,
            &items,
            |(_, s)| s,
            |_, _| false,
            |(_, s)| {
                if s >= LARGE {
                    let now = large_now.fetch_add(1, Ordering::SeqCst) + 1;
                    // Small ones not yet begun beyond those the other threads may hold: the queue
                    // of small ones was not empty, so this one had a lane.
                    if started_small.load(Ordering::SeqCst) + 4 < small && now > 2 {
                        too_many.store(true, Ordering::SeqCst);
                    }
                    std::thread::sleep(std::time::Duration::from_micros(200));
                    large_now.fetch_sub(1, Ordering::SeqCst);
                } else {
                    started_small.fetch_add(1, Ordering::SeqCst);
                    std::thread::sleep(std::time::Duration::from_micros(50));
                }
                Some(s)
            },
        );
        assert!(!too_many.load(Ordering::SeqCst));
        let mut seen: Vec<usize> = out.iter().map(|((i, _), _)| *i).collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..400).collect::<Vec<_>>());
        assert!(out.iter().all(|((i, _), s)| items[*i].1 == *s));
        // One thread: every item, in the order given.
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let order: Vec<usize> = spread(&one, &items, |(_, s)| s, |a, b| a == b, |(_, s)| Some(s))
            .into_iter()
            .map(|((i, _), _)| i)
            .collect();
        assert_eq!(order, (0..400).collect::<Vec<_>>());
    }

    #[test]
    fn a_group_of_small_items_goes_to_one_thread_in_order() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(4)
            .build()
            .unwrap();
        // (group, size): groups of 7 small items, and a large item in each group of the run.
        let items: Vec<(usize, (usize, u64))> = (0..350)
            .map(|i| (i, (i / 7, if i % 50 == 3 { LARGE } else { 10 })))
            .collect();
        let out = spread(
            &pool,
            &items,
            |(_, (_, size))| size,
            |(_, a), (_, b)| a.0 == b.0,
            |_| {
                std::thread::sleep(std::time::Duration::from_micros(20));
                Some(std::thread::current().id())
            },
        );
        assert_eq!(out.len(), 350);
        // Each group's small items: one thread, in the order given.
        for group in 0..50 {
            let small: Vec<_> = out
                .iter()
                .filter(|((_, (g, size)), _)| *g == group && *size < LARGE)
                .collect();
            assert!(small
                .windows(2)
                .all(|w| w[0].1 == w[1].1 && w[0].0 < w[1].0));
        }
    }

    #[test]
    fn the_largest_work_is_taken_first() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        // (group, size): three large items first, smallest first; then 40 runs of 3 small
        // items, the last run much larger than the others.
        let mut items: Vec<(usize, u64)> = vec![(100, LARGE), (101, 3 * LARGE), (102, 2 * LARGE)];
        for g in 0..40 {
            let size = if g == 39 { 5_000 } else { 10 };
            items.extend(std::iter::repeat_n((g, size), 3));
        }
        let started = AtomicUsize::new(0);
        let out = spread(
            &pool,
            &items,
            |(_, size)| size,
            |a, b| a.0 == b.0,
            |item| {
                let at = started.fetch_add(1, Ordering::SeqCst);
                let micros = if item.1 >= LARGE { 2_000 } else { 300 };
                std::thread::sleep(std::time::Duration::from_micros(micros));
                Some((item, at))
            },
        );
        assert_eq!(out.len(), items.len());
        let first_start = |group: usize| {
            out.iter()
                .filter(|(_, ((g, _), _))| *g == group)
                .map(|(_, (_, at))| *at)
                .min()
                .unwrap()
        };
        // The large items one at a time while small ones remain: largest first.
        assert!(first_start(101) < first_start(102) && first_start(102) < first_start(100));
        // The largest run of small items before the first run given.
        assert!(first_start(39) < first_start(0), "{out:?}");
    }
}
