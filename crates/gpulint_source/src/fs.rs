//! Directory listings that do not depend on the order the file system lists entries in, and
//! paths as they are shown.

use std::path::Path;

/// Directory entries listed at most by [`sorted_dir_files`] (a larger directory is cut).
const MAX_DIR_SCAN: usize = 20_000;

/// The files of `dir` whose path passes `keep`, sorted by path, at most `max`: the first by
/// name, whatever order the file system lists them in, so that a run reads the same files on
/// every machine. Empty when the directory cannot be read.
pub fn sorted_dir_files(
    dir: &std::path::Path,
    max: usize,
    keep: impl Fn(&std::path::Path) -> bool,
) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<std::path::PathBuf> = entries
        .take(MAX_DIR_SCAN)
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| keep(p) && p.is_file())
        .collect();
    files.sort();
    files.truncate(max);
    files
}

/// A path as the key of a memo that lives for the whole run (one entry per folder): a 128-bit
/// digest of its text, so that a run over thousands of folders keeps no copy of their paths
/// (two paths with one digest are as likely as a random 128-bit clash). Paths that differ in
/// text only (`a//b`, `a/b`) are two keys: a memo asked both way works each out once.
pub fn path_key(path: &Path) -> u128 {
    xxhash_rust::xxh3::xxh3_128(path.as_os_str().as_encoded_bytes())
}

/// The path as shown to the user: relative to the current directory when below it, else as
/// given.
pub fn display_path(path: &Path, cwd: &Path) -> String {
    let shown = path.strip_prefix(cwd).unwrap_or(path);
    let s = shown.display().to_string();
    let s = s.strip_prefix("./").map(str::to_owned).unwrap_or(s);
    if s.is_empty() {
        ".".into()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sorted_dir_files_are_the_first_by_name_whatever_the_listing_order() {
        let tmp = tempfile::tempdir().unwrap();
        for name in ["d.cu", "a.cu", "c.txt", "b.cu", "e.cu"] {
            std::fs::write(tmp.path().join(name), "").unwrap();
        }
        std::fs::create_dir(tmp.path().join("0.cu")).unwrap();
        let files =
            super::sorted_dir_files(tmp.path(), 3, |p| p.extension().is_some_and(|e| e == "cu"));
        let names: Vec<_> = files
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["a.cu", "b.cu", "d.cu"]);
        assert!(super::sorted_dir_files(&tmp.path().join("missing"), 3, |_| true).is_empty());
    }
}
