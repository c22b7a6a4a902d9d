//! A count of tree-sitter's allocations on each thread: the parse budget's second measure.
//!
//! The parser's progress callback counts parser operations, but on hostile input (error
//! recovery with thousands of stack versions) one operation can do a thousand times the usual
//! work, and that work is allocation: new stack nodes, subtrees and arrays. Counting the
//! allocations the parser asks for bounds it where the operation count does not. tree-sitter
//! takes its allocator as four C functions; these count the call first.
//!
//! The memory itself comes from mimalloc, not from the C library's malloc. A parse makes a
//! few small blocks per byte of text (stack nodes, subtrees) and frees them all with the
//! tree; glibc's malloc, free and consolidation were about a tenth of the parse's
//! instructions, and `--parse-only` on the corpus's Python files is 8% faster with mimalloc.
//! The Rust side keeps the system allocator: what it holds lives longer and mixes with what
//! is kept until the end of a run, where mimalloc left peak memory higher.

use libmimalloc_sys::{
    mi_free, mi_malloc, mi_option_set_default, mi_option_t, mi_realloc, mi_zalloc,
};
use std::cell::Cell;
use std::ffi::c_void;
use std::sync::Once;

/// mimalloc's `mi_option_arena_eager_commit` and `mi_option_purge_delay` (`mimalloc.h`; the
/// numbering is kept across versions, retired options keep their places).
const ARENA_EAGER_COMMIT: mi_option_t = 4;
const PURGE_DELAY: mi_option_t = 15;

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
    // SAFETY: mimalloc's malloc, with tree-sitter's arguments.
    checked(unsafe { mi_malloc(size) }, size)
}

unsafe extern "C" fn counted_calloc(count: usize, size: usize) -> *mut c_void {
    counted();
    // An overflowing size is refused as calloc refuses it (then `checked` aborts).
    let Some(bytes) = count.checked_mul(size) else {
        return checked(std::ptr::null_mut(), usize::MAX);
    };
    // SAFETY: mimalloc's zeroing malloc, with tree-sitter's arguments.
    checked(unsafe { mi_zalloc(bytes) }, bytes)
}

unsafe extern "C" fn counted_realloc(ptr: *mut c_void, size: usize) -> *mut c_void {
    counted();
    // SAFETY: mimalloc's realloc of a pointer tree-sitter got from this family.
    checked(unsafe { mi_realloc(ptr, size) }, size)
}

unsafe extern "C" fn plain_free(ptr: *mut c_void) {
    // SAFETY: mimalloc's free of a pointer tree-sitter got from this family.
    unsafe { mi_free(ptr) }
}

/// Installs the counting allocator, once per process, before the first parser is made.
pub(crate) fn install() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        // Memory is committed as pages are used, and pages freed by a parse go back to the
        // system after 100 ms (mimalloc's defaults: the whole arena at once, and after one
        // second): same speed on the corpus's Python files, about 4 MB less peak memory
        // (10 ms: 3% slower). `MIMALLOC_*` variables in the environment still win.
        // SAFETY: plain option setters of mimalloc, callable at any time.
        unsafe {
            mi_option_set_default(ARENA_EAGER_COMMIT, 0);
            mi_option_set_default(PURGE_DELAY, 100);
        }
        // SAFETY: tree-sitter makes no allocation before its first parser, and this runs
        // before the first parser is made: every block it frees came from these functions,
        // which like tree-sitter's own abort rather than return null.
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
    use libmimalloc_sys::mi_option_get;

    /// The two options hold the values set (a default set after mimalloc has read the option
    /// would be lost), unless the environment sets them.
    #[test]
    fn mimalloc_options_are_set() {
        super::install();
        for (option, variable, value) in [
            (super::ARENA_EAGER_COMMIT, "MIMALLOC_ARENA_EAGER_COMMIT", 0),
            (super::PURGE_DELAY, "MIMALLOC_PURGE_DELAY", 100),
        ] {
            if std::env::var_os(variable).is_none() {
                // SAFETY: a plain option getter of mimalloc.
                assert_eq!(unsafe { mi_option_get(option) }, value, "{variable}");
            }
        }
    }

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
