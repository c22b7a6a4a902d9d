//! The include context of a header: a header is compiled only as part of the files that
//! include it, and it sees what they included before it. A kernel helper in
//! `bwd_preprocess.h` that takes its parameter struct as a template parameter need not include
//! `params.h` itself when every file that includes it has included `params.h` first.
//!
//! The includers looked at are the C/C++/CUDA files of the header's own directory whose quoted
//! includes name it (`#include "name.h"`); the context is the union, in order, of the quoted
//! includes each of them lists before that line. The directory is scanned once per run.

use super::{is_header_name, quoted_includes, read_small};
use crate::hash::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

/// Files of one directory scanned for includes.
const MAX_FILES: usize = 256;
/// Includes borrowed from the includers of one header.
const MAX_CONTEXT: usize = 16;

/// The source extensions (besides headers) whose includes are read.
const SOURCE_EXTENSIONS: &[&str] = &["cu", "cc", "cpp", "cxx", "c"];

/// One file of a directory and its quoted includes, in order.
type Listing = Vec<(PathBuf, Vec<String>)>;

static DIRS: LazyLock<Mutex<HashMap<PathBuf, Arc<Listing>>>> = LazyLock::new(Default::default);

/// The quoted includes that the files including `header` list before it, in order, without
/// repeats and without `header` itself. Each includer used is noted as a dependency of the
/// result being computed.
pub(super) fn includer_context(header: &Path) -> Vec<String> {
    let (Some(dir), Some(name)) = (header.parent(), header.file_name().and_then(|n| n.to_str()))
    else {
        return Vec::new();
    };
    let listing = listing(dir);
    let mut out: Vec<String> = Vec::new();
    for (file, includes) in listing.iter() {
        if file == header {
            continue;
        }
        let Some(at) = includes.iter().position(|i| names_sibling(i, name)) else {
            continue;
        };
        gpulint_source::deps::note_dependency(file);
        for inc in &includes[..at] {
            if !names_sibling(inc, name) && !out.contains(inc) && out.len() < MAX_CONTEXT {
                out.push(inc.clone());
            }
        }
    }
    out
}

/// Does the include `inc`, written in a file of the header's directory, name the header
/// called `name` there (`"name.h"`, `"./name.h"`)?
fn names_sibling(inc: &str, name: &str) -> bool {
    inc.strip_prefix("./").unwrap_or(inc) == name
}

/// The C/C++/CUDA files of `dir` with their quoted includes, read once per run.
fn listing(dir: &Path) -> Arc<Listing> {
    if let Some(v) = DIRS.lock().ok().and_then(|m| m.get(dir).cloned()) {
        return v;
    }
    let files = gpulint_source::sorted_dir_files(dir, MAX_FILES, |p| {
        is_header_name(p) || is_source_name(p)
    });
    let out: Listing = files
        .into_iter()
        .filter_map(|p| {
            let includes = quoted_includes(&read_small(&p)?);
            (!includes.is_empty()).then_some((p, includes))
        })
        .collect();
    let out = Arc::new(out);
    if let Ok(mut m) = DIRS.lock() {
        m.insert(dir.to_path_buf(), out.clone());
    }
    out
}

fn is_source_name(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| SOURCE_EXTENSIONS.iter().any(|s| e.eq_ignore_ascii_case(s)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_is_what_includers_list_before_the_header() {
        let dir = std::env::temp_dir().join(format!("gpulint-includers-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, text: &str| std::fs::write(dir.join(name), text).unwrap();
        write("params.h", "struct P { int h; };\n");
        write("other.h", "#pragma once\n");
        write("helper.h", "#include \"util.h\"\n");
        write(
            "a.cu",
            "#include \"early.h\"\n#include \"params.h\"\n#include \"./helper.h\"\n#include \"late.h\"\n",
        );
        write("b.cc", "#include \"other.h\"\n#include \"helper.h\"\n");
        write("c.cu", "#include \"params.h\"\n");
        write(
            "notes.txt",
            "#include \"unrelated.h\"\n#include \"helper.h\"\n",
        );
        let ctx = includer_context(&dir.join("helper.h"));
        assert_eq!(ctx, vec!["early.h", "params.h", "other.h"]);
        assert!(includer_context(&dir.join("late.h")).contains(&"./helper.h".to_string()));
        assert!(includer_context(&dir.join("params.h")).contains(&"early.h".to_string()));
        assert!(includer_context(&dir.join("c.cu")).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
