//! Source files as gpulint reads them: bytes read with size limits and decoded to text, the
//! line index (LF, CRLF, lone CR, BOM), notebooks turned into one virtual source, byte spans,
//! the files a check depended on, sorted directory listings, sizes and path display.
//!
//! The bottom of the workspace: it knows nothing of languages, rules or configuration.

pub mod budget;
pub mod deps;
mod file;
pub mod fs;
pub mod notebook;
mod read;
mod size;
mod span;

pub use deps::note_dependency;
pub use file::*;
pub use fs::{display_path, sorted_dir_files};
pub use read::{decode, has_bom, read_bytes, read_source, BOM_LEN};
pub use size::{format_size, parse_size};
pub use span::Span;

/// Does `text` hold any of `needles` (as bytes, anywhere)? The cheap test that decides whether
/// a file is worth a closer look.
pub fn contains_any(text: &[u8], needles: &[&str]) -> bool {
    needles
        .iter()
        .any(|n| memchr::memmem::find(text, n.as_bytes()).is_some())
}

/// Files larger than this are skipped with GL002.
pub const MAX_FILE_SIZE: u64 = 10 << 20;

#[cfg(test)]
mod tests {
    #[test]
    fn contains_any_finds_a_needle_anywhere() {
        assert!(super::contains_any(
            b"x <<<g, b>>>(p)",
            &["GPUDevice", "<<<"]
        ));
        assert!(super::contains_any("é Tensor".as_bytes(), &["Tensor"]));
        assert!(!super::contains_any(b"Tenso r", &["Tensor", ".def("]));
        assert!(!super::contains_any(b"anything", &[]));
    }
}
