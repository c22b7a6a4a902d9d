//! The files a check read besides the file itself (launchers, imported local modules, sibling
//! sources, folder listings), so that a cached result is dropped when one of them changes.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

thread_local! {
    /// Other files the check of the current file read (launchers, imported local modules).
    static DEPENDENCIES: std::cell::RefCell<Vec<std::path::PathBuf>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Records that the result of the file being checked depends on `path` (a file or a folder
/// whose listing was read), so that a cached result is dropped when `path` changes.
pub fn note_dependency(path: &Path) {
    DEPENDENCIES.with(|d| d.borrow_mut().push(path.to_path_buf()));
}

/// Runs `f` and returns with its result the dependencies it noted (they stay noted for the
/// file being checked), so that a cache of `f`'s result can note them again on a hit.
pub fn noting<T>(f: impl FnOnce() -> T) -> (T, Vec<std::path::PathBuf>) {
    let mark = DEPENDENCIES.with(|d| d.borrow().len());
    let out = f();
    let noted = DEPENDENCIES.with(|d| {
        d.borrow()
            .get(mark..)
            .map(<[_]>::to_vec)
            .unwrap_or_default()
    });
    (out, noted)
}

/// Runs `f` with panics caught, and returns with its outcome the files it noted as
/// dependencies through [`note_dependency`], sorted and without repeats.
pub fn tracked<T>(f: impl FnOnce() -> T) -> (std::thread::Result<T>, Vec<std::path::PathBuf>) {
    DEPENDENCIES.with(|d| d.borrow_mut().clear());
    let outcome = catch_unwind(AssertUnwindSafe(f));
    let mut dependencies = DEPENDENCIES.with(|d| std::mem::take(&mut *d.borrow_mut()));
    dependencies.sort();
    dependencies.dedup();
    (outcome, dependencies)
}
