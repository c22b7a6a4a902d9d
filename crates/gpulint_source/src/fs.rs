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
