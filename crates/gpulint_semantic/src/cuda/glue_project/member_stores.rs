//! Stores of tensor strides in struct members, read from the files next to the header that
//! declares the struct: its directory, its parent and the sources of the parent's other
//! subdirectories (the host glue of an extension sits one level above its kernels). A file is
//! parsed only when its words hold `stride`, the header's name and one of the members asked
//! about, and it includes the header; its stores are kept for the whole run.

use super::foreign::{spelled_in, sub_dirs};
use super::{dir_files, read_small};
use crate::cuda::narrow::stores::{ranks, short_text, stride_store, unchecked, StrideStore};
use crate::hash::{HashMap, HashSet};
use gpulint_syntax::{parse, text, Lang, NodeExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

/// Header extensions: only a header's members are looked for in other files.
const HEADERS: &[&str] = &["h", "hpp", "cuh", "hh", "hxx"];
/// Files parsed per header (the first by directory and name that pass the word filter).
const MAX_FILES: usize = 8;

/// What one file stores in members.
#[derive(Debug, Default)]
struct FileStores {
    /// The file names of its quoted includes (`"src/params.h"` → `params.h`).
    includes: Vec<String>,
    /// The members it declares itself.
    declared: HashSet<String>,
    /// Unchecked stride stores in host functions: member, line, text.
    stores: Vec<(String, usize, String)>,
}

static STORES: LazyLock<Mutex<HashMap<PathBuf, Arc<FileStores>>>> = LazyLock::new(Default::default);

/// The unchecked stride stores into `members` (sorted) in the files next to the header at
/// `path` that include it, in order of directory, file and line.
pub(crate) fn sibling_stride_stores(path: &Path, members: &[&str]) -> Vec<StrideStore> {
    let mut out = Vec::new();
    let header = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| HEADERS.contains(&e));
    if !header {
        return out;
    }
    let Some(me) = std::path::absolute(path).ok() else {
        return out;
    };
    let (Some(dir), Some(name)) = (me.parent(), me.file_name().and_then(|n| n.to_str())) else {
        return out;
    };
    let stem = name.split('.').next().unwrap_or(name);
    let parent = dir.parent();
    let mut dirs: Vec<(PathBuf, bool)> = std::iter::once(dir)
        .chain(parent)
        .map(|d| (d.to_path_buf(), true))
        .collect();
    if let Some(parent) = parent {
        dirs.extend(
            sub_dirs(parent)
                .iter()
                .filter(|d| d.as_path() != dir)
                .map(|d| (d.clone(), false)),
        );
    }
    let mut parsed = 0;
    for (d, own) in &dirs {
        if !d.is_dir() {
            continue;
        }
        gpulint_source::note_dependency(d);
        for f in dir_files(d).iter().filter(|f| **f != me) {
            if parsed >= MAX_FILES {
                return out;
            }
            // In the other subdirectories, the sources only: their headers declare.
            let is_header = f
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| HEADERS.contains(&e));
            if !own && is_header {
                continue;
            }
            gpulint_source::note_dependency(f);
            if !(spelled_in(f, "stride")
                && spelled_in(f, stem)
                && members.iter().any(|m| spelled_in(f, m)))
            {
                continue;
            }
            parsed += 1;
            let facts = stores_of(f);
            if !facts.includes.iter().any(|i| i == name) {
                continue;
            }
            let shown = shown_path(f, dir, parent);
            for (field, line, t) in &facts.stores {
                if members.binary_search(&field.as_str()).is_ok() && !facts.declared.contains(field)
                {
                    out.push(StrideStore {
                        path: Some(shown.clone()),
                        field: field.clone(),
                        line: *line,
                        text: t.clone(),
                    });
                }
            }
        }
    }
    out
}

/// `f` as seen from the header's directory (`glue.cpp`, `../glue.cpp`, `../ops/glue.cpp`).
fn shown_path(f: &Path, dir: &Path, parent: Option<&Path>) -> PathBuf {
    if let Ok(rel) = f.strip_prefix(dir) {
        return rel.to_path_buf();
    }
    match parent.and_then(|p| f.strip_prefix(p).ok()) {
        Some(rel) => Path::new("..").join(rel),
        None => f.to_path_buf(),
    }
}

/// The stores of the file at `f`, parsed once per run.
fn stores_of(f: &Path) -> Arc<FileStores> {
    if let Some(s) = STORES.lock().ok().and_then(|m| m.get(f).cloned()) {
        return s;
    }
    let facts = Arc::new(read_stores(f).unwrap_or_default());
    if let Ok(mut m) = STORES.lock() {
        m.insert(f.to_path_buf(), facts.clone());
    }
    facts
}

fn read_stores(f: &Path) -> Option<FileStores> {
    let source = read_small(f)?;
    let mut out = FileStores::default();
    for line in source.lines() {
        let l = line.trim_start();
        if let Some(rest) = l.strip_prefix("#include") {
            let rest = rest.trim();
            if let Some(inner) = rest.strip_prefix('"').and_then(|r| r.split('"').next()) {
                let file = inner.rsplit('/').next().unwrap_or(inner);
                out.includes.push(file.to_string());
            }
        }
    }
    if out.includes.is_empty() {
        return Some(out);
    }
    let tree = parse(Lang::Cuda, &source)?;
    // The ranks of the tensors of the last function asked about.
    let mut known: Option<(usize, HashMap<&str, i64>)> = None;
    for n in gpulint_syntax::descendants(tree.root_node()) {
        match n.kind_name() {
            "field_declaration" => {
                for d in gpulint_syntax::named_children(n)
                    .filter_map(crate::cuda::narrow::member_declarator)
                {
                    out.declared.insert(text(d, &source).to_string());
                }
            }
            "assignment_expression" => {
                let Some(func) = host_function(tree.root_node(), n, &source) else {
                    continue;
                };
                let id = func.id();
                let mut ranks_here = || match &known {
                    Some((k, r)) if *k == id => r.clone(),
                    _ => {
                        let r = ranks(func, &source);
                        known = Some((id, r.clone()));
                        r
                    }
                };
                let Some(field) = stride_store(n, &source, &mut ranks_here) else {
                    continue;
                };
                if unchecked(func.start_byte(), n.start_byte(), &source) {
                    let line = source[..n.start_byte()].matches('\n').count() + 1;
                    out.stores
                        .push((field.to_string(), line, short_text(n, &source)));
                }
            }
            _ => {}
        }
    }
    Some(out)
}

/// The host function definition around `n` (not a `__global__` or `__device__`-only one).
fn host_function<'t>(
    root: tree_sitter::Node<'t>,
    n: tree_sitter::Node<'_>,
    source: &str,
) -> Option<tree_sitter::Node<'t>> {
    let ancestors = gpulint_syntax::ancestors_of(root, n);
    let cur = *ancestors
        .iter()
        .rev()
        .find(|a| a.kind_name() == "function_definition")?;
    let head_end = cur.field("body").map_or(cur.end_byte(), |b| b.start_byte());
    let head = &source[cur.start_byte()..head_end];
    let device =
        head.contains("__global__") || (head.contains("__device__") && !head.contains("__host__"));
    (!device).then_some(cur)
}
