//! A count of tree-sitter's allocations on each thread: the parse budget's second measure.
//!
//! The parser's progress callback counts parser operations, but on hostile input (error
//! recovery with thousands of stack versions) one operation can do a thousand times the usual
//! work, and that work is allocation: new stack nodes, subtrees and arrays. Counting the
//! allocations the parser asks for bounds it where the operation count does not. tree-sitter
//! takes its allocator as four C functions; these are libc's, each counting the call first.

use libc::{c_void, calloc, free, malloc, realloc};
use std::cell::Cell;
use std::sync::Once;

thread_local! {
    static COUNT: Cell<u64> = const { Cell::new(0) };
}

fn counted() {
    // `try_with`: a thread's last frees may run after its locals are gone.
    let _ = COUNT.try_with(|c| c.set(c.get() + 1));
}

/// tree-sitter's own allocator aborts when memory runs out; so do these.
fn checked(ptr: *mut c_void, size: usize) -> *mut c_void {
    if ptr.is_null() && size != 0 {
        eprintln!("gpulint: out of memory while parsing ({size} bytes asked)");
        std::process::abort();
    }
    ptr
}

unsafe extern "C" fn counted_malloc(size: usize) -> *mut c_void {
    counted();
    // SAFETY: libc's malloc, with tree-sitter's arguments.
    checked(unsafe { malloc(size) }, size)
}

unsafe extern "C" fn counted_calloc(count: usize, size: usize) -> *mut c_void {
    counted();
    // SAFETY: libc's calloc, with tree-sitter's arguments.
    checked(unsafe { calloc(count, size) }, count.saturating_mul(size))
}

unsafe extern "C" fn counted_realloc(ptr: *mut c_void, size: usize) -> *mut c_void {
    counted();
    // SAFETY: libc's realloc of a pointer tree-sitter got from this family.
    checked(unsafe { realloc(ptr, size) }, size)
}

unsafe extern "C" fn plain_free(ptr: *mut c_void) {
    // SAFETY: libc's free of a pointer tree-sitter got from this family.
    unsafe { free(ptr) }
}

/// Installs the counting allocator, once per process, before the first parser is made.
pub(crate) fn install() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        // SAFETY: the four functions are libc's own (the family tree-sitter uses without an
        // allocator of its own), so anything tree-sitter allocated before this call is freed
        // by the same `free`; like tree-sitter's own they abort rather than return null.
        unsafe {
            tree_sitter::set_allocator(Some(tree_sitter::Allocator {
                malloc: counted_malloc,
                calloc: counted_calloc,
                realloc: counted_realloc,
                free: plain_free,
            }))
        };
    });
}

/// How many allocations tree-sitter has asked for on this thread so far.
pub(crate) fn allocations() -> u64 {
    COUNT.with(Cell::get)
}

#[cfg(test)]
mod tests {
    use crate::{parse, Lang, PARSE_ALLOCATIONS_PER_BYTE, PARSE_MIN_ALLOCATIONS};

    fn fixture(name: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/python")
            .join(name);
        std::fs::read_to_string(path).unwrap()
    }

    /// A Python file read as C++ with a comment line turned into 8,000 `+`: error recovery
    /// keeps thousands of stack versions and asks for about 76 allocations per byte at about
    /// 55 µs per byte (the full fuzz mutant, 131 KB, took 7 s), while its operation count stays
    /// within the other bound.
    #[test]
    fn error_recovery_that_allocates_without_end_gives_up() {
        let text = fixture("TF006_parameter_size_near_miss.py").replacen(
            "    # A TensorFlow",
            &format!("    #{} A TensorFlow", "+".repeat(8_000)),
            1,
        );
        let allowed = PARSE_MIN_ALLOCATIONS + PARSE_ALLOCATIONS_PER_BYTE * text.len() as u64;
        let before = super::allocations();
        assert!(parse(Lang::Cuda, &text).is_none(), "the parse gives up");
        let used = super::allocations() - before;
        // The bound is read every 100 parser operations, so a parse stops a little past it.
        assert!(
            used > allowed && used < allowed + allowed / 4,
            "{used} allocations for a bound of {allowed}"
        );
    }

    /// The same file as it is, read as C++ and as Python: far inside the bound.
    #[test]
    fn ordinary_files_stay_far_inside_the_bound() {
        for (name, lang) in [
            ("TF006_parameter_size_near_miss.py", Lang::Cuda),
            ("TF006_parameter_size_near_miss.py", Lang::Python),
        ] {
            let text = fixture(name);
            let before = super::allocations();
            assert!(parse(lang, &text).is_some());
            let used = super::allocations() - before;
            assert!(used > 0, "tree-sitter's allocations are counted");
            assert!(
                used < (PARSE_MIN_ALLOCATIONS + 2 * text.len() as u64) / 4,
                "{name} as {lang:?}: {used} allocations"
            );
        }
    }
}
