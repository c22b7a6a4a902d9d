//! No new `.parent()` on syntax nodes.
//!
//! tree-sitter's `Node::parent` keeps no parent pointer: it descends from the root on every
//! call (the depth times the siblings), a climb with it is quadratic in the depth, and on a
//! zero-width node (a MISSING node of error recovery) the descent recurses once per level, a
//! stack overflow on a file nested a hundred thousand levels deep. Code asks the file's parent
//! table instead (`PythonModel::parent`, `CudaModel::parent`, `gpulint_syntax::Parents`), takes
//! the path of the walk that found the node, or the ancestors going down from the root
//! (`gpulint_syntax::ancestors_of`).
//!
//! The scan counts `.parent()` in every Rust source of the crates and of `src/`; the files
//! that may have some are listed with how many and why (`Path::parent`, which is cheap, or a
//! test that checks the replacements against `Node::parent`). A new call fails the test: use
//! one of the replacements above, or, for a `Path`, raise the count here.

use std::path::Path;

/// (file, number of `.parent()`, why they are allowed).
const ALLOWED: &[(&str, usize, &str)] = &[
    (
        "crates/gpulint_linter/src/cache.rs",
        1,
        "Path: the cache file's folder",
    ),
    (
        "crates/gpulint_linter/src/run/candidate.rs",
        2,
        "Path: a file's folder, shared by the files in it",
    ),
    (
        "crates/gpulint_manifest/src/lib.rs",
        3,
        "Path: folders of requirement includes",
    ),
    (
        "crates/gpulint_semantic/src/cuda/glue_project.rs",
        2,
        "Path: folders beside the file",
    ),
    (
        "crates/gpulint_semantic/src/cuda/glue_project/foreign.rs",
        2,
        "Path: folders beside the file",
    ),
    (
        "crates/gpulint_semantic/src/cuda/glue_project/member_stores.rs",
        2,
        "Path: folders beside the header",
    ),
    (
        "crates/gpulint_semantic/src/cuda/headers.rs",
        4,
        "Path: include folders",
    ),
    (
        "crates/gpulint_semantic/src/cuda/headers/includers.rs",
        1,
        "Path: the folder of a header",
    ),
    (
        "crates/gpulint_semantic/src/python/extensions.rs",
        1,
        "Path: the file's folder",
    ),
    (
        "crates/gpulint_semantic/src/python/extensions/locate.rs",
        4,
        "Path: library folders",
    ),
    (
        "crates/gpulint_semantic/src/python/extensions/path.rs",
        1,
        "Path: os.path.dirname folded",
    ),
    (
        "crates/gpulint_semantic/src/python/extensions/tests.rs",
        2,
        "Path: test folders",
    ),
    (
        "crates/gpulint_semantic/src/python/project.rs",
        1,
        "Path: the project folder",
    ),
    (
        "crates/gpulint_semantic/src/python/project/modules.rs",
        3,
        "Path: package folders",
    ),
    (
        "crates/gpulint_syntax/src/kind.rs",
        1,
        "Path: a `requirements/` folder",
    ),
    (
        "crates/gpulint_syntax/src/parents.rs",
        2,
        "tests: the parent table agrees with Node::parent on the fixtures, and when filled in any order",
    ),
    (
        "crates/gpulint_syntax/src/tree.rs",
        1,
        "test: ancestors_of agrees with Node::parent on the fixtures",
    ),
    (
        "crates/gpulint_workspace/src/config.rs",
        1,
        "Path: configuration folders",
    ),
    (
        "crates/gpulint_workspace/src/discover.rs",
        1,
        "Path: test folders",
    ),
    (
        "crates/gpulint_workspace/src/settings.rs",
        4,
        "Path: configuration folders",
    ),
    ("src/estimate.rs", 1, "Path: the estimated file's folder"),
    ("src/server/worker.rs", 1, "Path: the document's folder"),
];

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_new_parent_calls_on_syntax_nodes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("crates"), &mut files);
    rust_files(&root.join("src"), &mut files);
    assert!(files.len() > 100, "the sources were found");
    let mut problems = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let found = text.matches(".parent()").count();
        let rel = file
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let allowed = ALLOWED
            .iter()
            .find(|(f, _, _)| *f == rel)
            .map_or(0, |(_, n, _)| *n);
        if found > allowed {
            problems.push(format!(
                "{rel}: {found} `.parent()`, {allowed} allowed (on a syntax node use the model's \
                 parent table or gpulint_syntax::ancestors_of; for a Path raise the count in \
                 tests/parent_calls.rs)"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The allow-list names files that exist and no more calls than they have (a stale entry
/// would let a syntax-node call in unnoticed).
#[test]
fn the_allow_list_is_exact() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (file, n, why) in ALLOWED {
        assert!(!why.is_empty());
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        assert_eq!(
            text.matches(".parent()").count(),
            *n,
            "{file}: update the count in tests/parent_calls.rs"
        );
    }
}
