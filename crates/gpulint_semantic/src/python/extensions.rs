//! Native extensions a Python file builds, and the C++/CUDA sources each one compiles.
//!
//! A build call is found through imports and aliases: `torch.utils.cpp_extension.load`,
//! `load_inline`, `CUDAExtension` and `CppExtension` (in a `setup.py` or anywhere), and
//! TensorFlow's `load_op_library`. Its source list is folded without running anything: string
//! literals and f-strings, names bound to them (with `+=`, `.append` and `.extend` of the same
//! list in the same scope), `__file__`, `os.path.join/dirname/abspath/realpath`,
//! `Path(__file__).parent / "x.cu"`, list concatenation, a simple list comprehension, and
//! `glob.glob` / `Path.glob` patterns, which are expanded against the file system relative to the
//! file. Lists returned by functions of the file and by methods called on `self` fold too, and
//! a base class that builds `self.sources()` gives one build per subclass that overrides it
//! (see [`calls`]). A part that does not fold is recorded as unresolved, never guessed.
//!
//! Relative sources are taken relative to the file's folder. That is certain for a `setup.py`
//! (pip runs it from its folder) and for paths built from `__file__`; for `load()` elsewhere the
//! working directory at run time is unknown, so such a path is linked only when it exists next to
//! the file or in the nearest folder above it (at most 4 levels, not past the repository root). `tf.load_op_library("x.so")` is mapped to the `x.cc`, `x.cu.cc`, `x.cu` and `x.cpp`
//! next to the library, when they exist. `load_inline(cpp_sources=…, cuda_sources=…)` with
//! literal (or constant) strings yields the source text itself, laid out at the same byte offsets
//! as in the Python file so that findings in it point into the Python file.
//!
//! Every file or folder consulted is recorded with [`gpulint_source::note_dependency`], so a
//! cached result is dropped when a named source appears, disappears or a globbed folder changes.

mod calls;
mod fold;

use super::PythonModel;
use fold::absolute;
pub use fold::normalize;
use gpulint_source::Span;
use gpulint_syntax::{descendants, named_children, NodeExt};
use std::path::{Path, PathBuf};
use tree_sitter::Node;

/// Bytes a file must contain to possibly build an extension.
pub const NEEDLES: &[&str] = &["cpp_extension", "load_op_library"];

/// How deep folding may go (names bound to names bound to lists …).
const MAX_DEPTH: usize = 24;
/// Folding steps per file.
const MAX_STEPS: usize = 200_000;
/// Paths one glob may expand to.
const MAX_GLOB_MATCHES: usize = 2048;
/// Folders one recursive `**` may descend.
const MAX_GLOB_DEPTH: usize = 12;

/// The kind of build call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildKind {
    CudaExtension,
    CppExtension,
    Load,
    LoadInline,
    LoadOpLibrary,
}

impl BuildKind {
    /// As shown to users.
    pub fn label(self) -> &'static str {
        match self {
            BuildKind::CudaExtension => "CUDAExtension",
            BuildKind::CppExtension => "CppExtension",
            BuildKind::Load => "load",
            BuildKind::LoadInline => "load_inline",
            BuildKind::LoadOpLibrary => "tf.load_op_library",
        }
    }

    fn of(qualified: &str) -> Option<BuildKind> {
        let (module, name) = qualified.rsplit_once('.')?;
        if module == "torch.utils.cpp_extension" {
            return match name {
                "CUDAExtension" => Some(BuildKind::CudaExtension),
                "CppExtension" => Some(BuildKind::CppExtension),
                "load" => Some(BuildKind::Load),
                "load_inline" => Some(BuildKind::LoadInline),
                _ => None,
            };
        }
        (name == "load_op_library" && (module == "tensorflow" || module.starts_with("tensorflow.")))
            .then_some(BuildKind::LoadOpLibrary)
    }
}

/// A source file an extension compiles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// The path, as the file system sees it from the working directory (lexically normalized).
    pub path: PathBuf,
    /// The expression that names it.
    pub span: Span,
    /// The file exists.
    pub exists: bool,
}

/// A part of a source list that could not be folded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unresolved {
    pub span: Span,
    pub reason: String,
}

/// Source text passed inline (`load_inline`): `text` has the Python file's length, with the
/// string's content at its own offsets and everything else blanked (line breaks kept).
#[derive(Debug, Clone)]
pub struct Inline {
    /// The string expression.
    pub span: Span,
    pub text: String,
}

/// One extension build call.
#[derive(Debug, Clone)]
pub struct ExtensionBuild {
    pub kind: BuildKind,
    /// The call.
    pub call: Span,
    /// The extension's name (or, for `load_op_library`, the library's file name) when constant.
    pub name: Option<String>,
    /// Sources found, in list order (glob matches sorted), without duplicates.
    pub sources: Vec<Source>,
    /// Sources given as text (`load_inline`).
    pub inline: Vec<Inline>,
    pub unresolved: Vec<Unresolved>,
    /// For a build whose sources a subclass gives (`self.sources()` in a base class): that
    /// subclass's method, which is the entry shown to users.
    pub via: Option<Via>,
}

/// The method that gives a build its sources, when it is not the build call itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Via {
    /// `FusedAdamBuilder.sources`.
    pub what: String,
    /// The sibling module that defines it, and the 1-based line of its `def` (None: this file).
    pub file: Option<(PathBuf, usize)>,
    /// In this file: the `def` (or, for a sibling module, the build call).
    pub at: Span,
}

impl ExtensionBuild {
    /// `CUDAExtension "fused_adam"`, `load_inline`, `FusedAdamBuilder.sources`, …
    pub fn describe(&self) -> String {
        if let Some(v) = &self.via {
            return v.what.clone();
        }
        match &self.name {
            Some(n) => format!("{} \"{n}\"", self.kind.label()),
            None => self.kind.label().to_string(),
        }
    }
}

/// The extension builds of the module `m`, which is the file at `file` (as the working directory
/// sees it). Reads the file system (globs, existence of sources), never runs anything.
pub fn collect(m: &PythonModel<'_>, file: &Path) -> Vec<ExtensionBuild> {
    let folder = Folder {
        m,
        file,
        absolute: absolute(file),
        budget: std::cell::Cell::new(MAX_STEPS),
        ctx: Default::default(),
    };
    let aliases = builder_aliases(m);
    let mut out = Vec::new();
    for &(call, scope) in &m.calls {
        let kind = match m.call_name(call) {
            Some(q) => BuildKind::of(&q),
            // `extension = CUDAExtension if with_cuda else CppExtension; extension(...)`
            None => call
                .field("function")
                .filter(|f| f.kind() == "identifier")
                .and_then(|f| {
                    let name = m.text(f);
                    let scope = scope.filter(|&s| m.function_binds(s, name));
                    aliases.get(&(name, scope)).copied().flatten()
                }),
        };
        if let Some(kind) = kind {
            out.extend(folder.builds_for(call, kind));
        }
    }
    merge_entries(out)
}

/// Builds of the same subclass entry (`FusedAdamBuilder.sources`, reached from two build
/// calls of its base class) become one, with the sources of both.
fn merge_entries(builds: Vec<ExtensionBuild>) -> Vec<ExtensionBuild> {
    let mut out: Vec<ExtensionBuild> = Vec::new();
    for b in builds {
        let same = |o: &ExtensionBuild| {
            o.via.as_ref().is_some_and(|v| {
                b.via
                    .as_ref()
                    .is_some_and(|w| v.what == w.what && v.file == w.file)
            })
        };
        match out.iter_mut().find(|o| same(o)) {
            Some(o) => {
                for s in b.sources {
                    push_source(&mut o.sources, s);
                }
                o.unresolved.extend(b.unresolved);
                o.unresolved.sort_by_key(|u| (u.span, u.reason.clone()));
                o.unresolved.dedup();
            }
            None => out.push(b),
        }
    }
    out
}

/// Names bound to extension classes (`ext = CUDAExtension if cuda else CppExtension`), by
/// scope: `Some(kind)` (CUDA when any of them is), `None` when something else is bound too.
fn builder_aliases<'t>(
    m: &PythonModel<'t>,
) -> std::collections::HashMap<(&'t str, Option<usize>), Option<BuildKind>> {
    let mut out = std::collections::HashMap::new();
    for &a in &m.assignments {
        let Some(left) = a.field("left").filter(|l| l.kind() == "identifier") else {
            continue;
        };
        let name = m.text(left);
        let key = (name, m.enclosing_function(a));
        let right = a.field("right").filter(|_| a.kind() == "assignment");
        let mut kinds = Vec::new();
        let mut ok = right.is_some();
        if let Some(r) = right {
            let values: Vec<Node<'_>> = if r.kind() == "conditional_expression" {
                named_children(r).step_by(2).collect()
            } else {
                vec![r]
            };
            for v in values {
                match m.qualified_name(v).as_deref().and_then(BuildKind::of) {
                    Some(k @ (BuildKind::CudaExtension | BuildKind::CppExtension)) => kinds.push(k),
                    _ => ok = false,
                }
            }
        }
        let entry = out.entry(key).or_insert(Some(BuildKind::CppExtension));
        *entry = match (*entry, ok) {
            (Some(_), false) | (None, _) => None,
            (Some(k), true) => Some(if kinds.contains(&BuildKind::CudaExtension) {
                BuildKind::CudaExtension
            } else {
                k
            }),
        };
    }
    out
}

/// A folded string: its value and whether it is anchored to the file (`__file__`).
#[derive(Debug, Clone)]
struct Str {
    value: String,
    anchored: bool,
}

/// A folded source item: a path string and the expression it came from.
type Item = Result<(Str, Span), Unresolved>;

/// The value of a name while folding: a string, or a list of items.
#[derive(Debug, Clone)]
enum Val {
    Str(Str),
    List(Vec<Item>),
}

/// Names with known values (comprehension variables, a list being rebuilt from itself).
type Env<'e> = [(&'e str, Val)];

struct Folder<'a, 'm> {
    m: &'a PythonModel<'m>,
    /// The file as given (for `is_setup_py`).
    file: &'a Path,
    /// The file's absolute path (what `__file__` is).
    absolute: PathBuf,
    /// Folding steps left for the whole file.
    budget: std::cell::Cell<usize>,
    /// What `self` is while folding a call inside a method.
    ctx: std::cell::RefCell<calls::SelfCtx>,
}

/// Positional or keyword argument of a call.
fn argument<'t>(call: Node<'t>, position: usize, keyword: &str, source: &str) -> Option<Node<'t>> {
    let args = call.field("arguments")?;
    let mut i = 0;
    for a in named_children(args) {
        match a.kind() {
            "keyword_argument" => {
                if a.field("name").and_then(|n| source.get(n.byte_range())) == Some(keyword) {
                    return a.field("value");
                }
            }
            "comment" => {}
            "list_splat" | "dictionary_splat" => i = usize::MAX / 2,
            _ => {
                if i == position {
                    return Some(a);
                }
                i += 1;
            }
        }
    }
    None
}

fn has_dict_splat(call: Node<'_>) -> bool {
    call.field("arguments")
        .is_some_and(|a| named_children(a).any(|c| c.kind() == "dictionary_splat"))
}

fn unresolved(node: Node<'_>, reason: impl Into<String>) -> Unresolved {
    Unresolved {
        span: Span::of(&node),
        reason: reason.into(),
    }
}

impl<'m> Folder<'_, 'm> {
    fn text(&self, n: Node<'_>) -> &'m str {
        self.m.text(n)
    }

    fn dir(&self) -> PathBuf {
        self.absolute
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default()
    }

    fn build(&self, call: Node<'_>, kind: BuildKind) -> ExtensionBuild {
        let src = self.m.source;
        let mut b = ExtensionBuild {
            kind,
            call: Span::of(&call),
            name: None,
            sources: Vec::new(),
            inline: Vec::new(),
            unresolved: Vec::new(),
            via: None,
        };
        let name_arg = match kind {
            BuildKind::LoadOpLibrary => argument(call, 0, "library_filename", src),
            _ => argument(call, 0, "name", src),
        };
        let name = name_arg.and_then(|n| self.string(n, &[], 0));
        b.name = name.map(|s| match kind {
            BuildKind::LoadOpLibrary => Path::new(&s.value)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or(s.value),
            _ => s.value,
        });
        match kind {
            BuildKind::LoadInline => {
                for (pos, kw) in [(1, "cpp_sources"), (2, "cuda_sources")] {
                    if let Some(arg) = argument(call, pos, kw, src) {
                        self.inline_sources(arg, &mut b);
                    }
                }
                if b.inline.is_empty() && b.unresolved.is_empty() && has_dict_splat(call) {
                    b.unresolved.push(unresolved(call, "built from `**kwargs`"));
                }
            }
            BuildKind::LoadOpLibrary => {
                let Some(arg) = name_arg else {
                    b.unresolved.push(unresolved(call, "no library path"));
                    return b;
                };
                match self.string(arg, &[], 0) {
                    Some(s) => self.op_library_sources(arg, &s, &mut b),
                    None => b
                        .unresolved
                        .push(unresolved(arg, "the library path is not a constant")),
                }
            }
            _ => {
                let Some(arg) = argument(call, 1, "sources", src) else {
                    let why = if has_dict_splat(call) {
                        "built from `**kwargs`"
                    } else {
                        "no `sources` argument"
                    };
                    b.unresolved.push(unresolved(call, why));
                    return b;
                };
                let mut items = Vec::new();
                self.items(arg, &[], &mut items, 0);
                // Relative paths are relative to the working directory of the build: certain
                // for a setup.py (run from its folder), unknown for a script.
                let setup = gpulint_syntax::kind::is_setup_py(self.file);
                for item in items {
                    match item {
                        Ok((s, span)) => {
                            let mut path = self.resolve(&s);
                            let mut exists = path.is_file();
                            if !exists
                                && !s.anchored
                                && !setup
                                && !Path::new(&s.value).is_absolute()
                            {
                                // Relative to the repository root, or to a source root above.
                                if let Some(p) = calls::in_ancestor(&self.dir(), &s.value) {
                                    (path, exists) = (p, true);
                                }
                            }
                            gpulint_source::note_dependency(&path);
                            if !exists
                                && !s.anchored
                                && !setup
                                && !Path::new(&s.value).is_absolute()
                            {
                                b.unresolved.push(Unresolved {
                                    span,
                                    reason: format!(
                                        "`{}` is relative to the working directory at run time and is not next to this file",
                                        s.value
                                    ),
                                });
                                continue;
                            }
                            if path.is_dir() {
                                // `""` joined to a root, say: not a source.
                                b.unresolved.push(Unresolved {
                                    span,
                                    reason: format!("`{}` names a folder", s.value),
                                });
                                continue;
                            }
                            if !exists && !folder_has_entries(&path) {
                                // A submodule not checked out, or sources generated by the
                                // build: not a wrong path.
                                b.unresolved.push(Unresolved {
                                    span,
                                    reason: format!(
                                        "the folder of `{}` is missing or empty (a submodule not checked out, or generated sources?)",
                                        s.value
                                    ),
                                });
                                continue;
                            }
                            push_source(&mut b.sources, Source { path, span, exists });
                        }
                        Err(u) => b.unresolved.push(u),
                    }
                }
            }
        }
        b.unresolved.sort_by_key(|u| (u.span, u.reason.clone()));
        b.unresolved.dedup();
        b
    }

    /// A path as the working directory sees it: anchored and absolute paths as they are,
    /// relative ones below the file's folder.
    fn resolve(&self, s: &Str) -> PathBuf {
        let p = Path::new(&s.value);
        if p.is_absolute() {
            normalize(p)
        } else {
            normalize(&self.dir().join(p))
        }
    }

    /// `os.path.abspath(p)`: a relative path is taken from the file's folder (the working
    /// directory of a setup.py).
    fn absolutize(&self, s: Str) -> Str {
        Str {
            value: self.resolve(&s).to_string_lossy().into_owned(),
            anchored: s.anchored,
        }
    }

    /// `x.so` → the C++/CUDA sources with the same stem next to it.
    fn op_library_sources(&self, arg: Node<'_>, lib: &Str, b: &mut ExtensionBuild) {
        let path = self.resolve(lib);
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            b.unresolved
                .push(unresolved(arg, "the library path has no file name"));
            return;
        };
        let stem = name.split('.').next().unwrap_or(name);
        let mut stems = vec![stem];
        for prefix in ["lib", "_"] {
            if let Some(s) = stem.strip_prefix(prefix).filter(|s| !s.is_empty()) {
                stems.push(s);
            }
        }
        let listed = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir.as_path()
        };
        gpulint_source::note_dependency(listed);
        let mut found = Vec::new();
        for s in stems {
            for ext in ["cc", "cu.cc", "cu", "cpp"] {
                let p = dir.join(format!("{s}.{ext}"));
                if p.is_file() && !found.contains(&p) {
                    found.push(p);
                }
            }
        }
        if found.is_empty() {
            found = calls::tf_op_sources(&dir, stem);
        }
        if found.is_empty() {
            b.unresolved.push(unresolved(
                arg,
                format!("no C++/CUDA source with the stem of `{name}` next to it"),
            ));
        }
        for path in found {
            push_source(
                &mut b.sources,
                Source {
                    path,
                    span: Span::of(&arg),
                    exists: true,
                },
            );
        }
    }

    /// `cuda_sources="..."`, `[SRC_A, SRC_B]`, or a name bound to either.
    fn inline_sources(&self, arg: Node<'_>, b: &mut ExtensionBuild) {
        let mut stack = vec![(arg, 0usize)];
        while let Some((n, depth)) = stack.pop() {
            if depth > MAX_DEPTH {
                b.unresolved.push(unresolved(n, "nested too deeply"));
                continue;
            }
            match n.kind() {
                "string" | "concatenated_string" => match inline_text(n, self.m.source) {
                    Some(text) => b.inline.push(Inline {
                        span: Span::of(&n),
                        text,
                    }),
                    None => b
                        .unresolved
                        .push(unresolved(n, "the source text is an f-string")),
                },
                "list" | "tuple" | "parenthesized_expression" => {
                    let children: Vec<_> = named_children(n)
                        .filter(|c| c.kind() != "comment")
                        .collect();
                    stack.extend(children.into_iter().rev().map(|c| (c, depth + 1)));
                }
                "identifier" => match self.m.value_of_name(n, self.text(n)) {
                    Some(v) if v.kind() != "assignment" => stack.push((v, depth + 1)),
                    _ => b.unresolved.push(unresolved(
                        n,
                        format!("`{}` is not a constant", self.text(n)),
                    )),
                },
                _ => b
                    .unresolved
                    .push(unresolved(n, "the source text is not a constant string")),
            }
        }
        b.inline.sort_by_key(|i| i.span.start);
        b.inline.dedup_by_key(|i| i.span);
    }
}

/// Does the folder of `path` exist and hold anything (noted as a dependency)?
fn folder_has_entries(path: &Path) -> bool {
    let Some(dir) = path.parent() else {
        return false;
    };
    gpulint_source::note_dependency(dir);
    std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_some())
}

fn push_source(sources: &mut Vec<Source>, s: Source) {
    if !sources.iter().any(|x| x.path == s.path) {
        sources.push(s);
    }
}

/// The Python file's text with only the content of string `node` kept, at its own offsets, and
/// everything else blanked to spaces (line breaks kept). Escapes become the character they stand
/// for, padded to the escape's length. `None` for an f-string with interpolations.
pub fn inline_text(node: Node<'_>, source: &str) -> Option<String> {
    let mut out: Vec<u8> = source
        .bytes()
        .map(|b| if b == b'\n' || b == b'\r' { b } else { b' ' })
        .collect();
    let parts: Vec<Node<'_>> = if node.kind() == "concatenated_string" {
        named_children(node).collect()
    } else {
        vec![node]
    };
    for s in parts {
        if s.kind() != "string" {
            return None;
        }
        let raw = s
            .named_child(0)
            .filter(|c| c.kind() == "string_start")
            .and_then(|c| source.get(c.byte_range()))
            .is_some_and(|t| t.contains(['r', 'R']));
        for n in descendants(s) {
            match n.kind() {
                "interpolation" => return None,
                "string_content" => {
                    let r = n.byte_range();
                    out[r.clone()].copy_from_slice(source.get(r)?.as_bytes());
                }
                _ => {}
            }
        }
        if raw {
            continue;
        }
        for n in descendants(s) {
            if n.kind() != "escape_sequence" {
                continue;
            }
            let r = n.byte_range();
            let esc = source.get(r.clone())?;
            let ch: &[u8] = match esc {
                "\\n" => b"\n",
                "\\t" => b"\t",
                "\\\\" => b"\\",
                "\\\"" => b"\"",
                "\\'" => b"'",
                "\\\n" => b"\n",
                _ => continue,
            };
            // Pad before the character so a line break stays the last byte of the escape.
            let pad = esc.len() - ch.len();
            out[r.start..r.start + pad].fill(b' ');
            out[r.start + pad..r.end].copy_from_slice(ch);
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpulint_syntax::{parse, Lang};

    fn builds(src: &str, file: &Path) -> Vec<ExtensionBuild> {
        let tree = parse(Lang::Python, src).unwrap();
        let m = super::super::build(&tree, src);
        collect(&m, file)
    }

    /// Creates the empty files `files` (paths relative to `d`) and their folders.
    fn touch(d: &Path, files: &[&str]) {
        for f in files {
            std::fs::create_dir_all(d.join(f).parent().unwrap()).unwrap();
            std::fs::write(d.join(f), "").unwrap();
        }
    }

    /// The sources of `b` as paths relative to `d`.
    fn relative_sources(b: &ExtensionBuild, d: &Path) -> Vec<String> {
        b.sources
            .iter()
            .map(|s| s.path.strip_prefix(d).unwrap().display().to_string())
            .collect()
    }

    #[test]
    fn folds_source_lists() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        touch(
            d,
            &[
                "csrc/a.cu",
                "csrc/b.cu",
                "csrc/.hidden.cu",
                "csrc/c.cpp",
                "ops/x.cc",
                "ops/x.cu.cc",
            ],
        );
        let setup = d.join("setup.py");
        let src = r#"
import os, glob
from pathlib import Path
from torch.utils.cpp_extension import CUDAExtension, load
import torch.utils.cpp_extension as ext
import tensorflow as tf
HERE = os.path.dirname(os.path.abspath(__file__))
COMMON = ["csrc/c.cpp"]
def exts():
    srcs = glob.glob("csrc/*.cu") + COMMON
    srcs += [os.path.join(HERE, "missing.cu")]
    return [CUDAExtension("fused", srcs)]
load(name="jit", sources=[str(Path(__file__).parent / "csrc" / "a.cu"), unknown_path])
ext.load("j2", [os.path.join(HERE, f) for f in ["csrc/a.cu", "csrc/b.cu"]])
tf.load_op_library(os.path.join(HERE, "ops", "_x.so"))
ext.load("rel", ["nowhere.cu", "third_party/empty_submodule/x.cu"])
ext.CUDAExtension(**kw)
"#;
        let b = builds(src, &setup);
        assert_eq!(b.len(), 6);
        let paths = |i: usize| relative_sources(&b[i], d);
        assert_eq!(b[0].describe(), "CUDAExtension \"fused\"");
        assert_eq!(
            paths(0),
            ["csrc/a.cu", "csrc/b.cu", "csrc/c.cpp", "missing.cu"]
        );
        assert!(!b[0].sources[3].exists && b[0].sources[0].exists);
        assert_eq!(paths(1), ["csrc/a.cu"]);
        assert_eq!(b[1].unresolved.len(), 1, "{:?}", b[1].unresolved);
        assert_eq!(paths(2), ["csrc/a.cu", "csrc/b.cu"]);
        assert_eq!(paths(3), ["ops/x.cc", "ops/x.cu.cc"]);
        assert_eq!(b[3].describe(), "tf.load_op_library \"_x.so\"");
        // setup.py: relative paths are relative to its folder, so a missing one is a source.
        assert_eq!(paths(4), ["nowhere.cu"]);
        assert!(b[4].unresolved[0].reason.contains("missing or empty"));
        assert!(b[5].sources.is_empty() && b[5].unresolved[0].reason.contains("kwargs"));
        // Elsewhere, a relative path that is not next to the file is not guessed at.
        let b = builds(src, &d.join("train.py"));
        assert!(b[4].sources.is_empty() && b[4].unresolved.len() == 2);
    }

    #[test]
    fn follows_rebinding_aliases_and_branches() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        touch(
            d,
            &[
                "pkg/csrc/main.cpp",
                "pkg/csrc/cpu/a.cpp",
                "pkg/csrc/cuda/k.cu",
                "extra.cu",
            ],
        );
        let src = r#"
import glob, os
from torch.utils.cpp_extension import CUDAExtension, CppExtension
def get_extensions(with_cuda):
    this_dir = os.path.dirname(os.path.abspath(__file__))
    this_dir = os.path.join(this_dir, "pkg")
    src_dir = os.path.join(this_dir, "csrc")
    main = glob.glob(os.path.join(src_dir, "*.cpp"))
    sources = main + glob.glob(os.path.join(src_dir, "cpu", "*.cpp"))
    extension = CUDAExtension if with_cuda else CppExtension
    if with_cuda:
        sources += glob.glob(os.path.join(src_dir, "cuda", "*.cu"))
    sources = [os.path.join(src_dir, s) for s in sources]
    if with_cuda:
        more = ["extra.cu"]
    else:
        more = []
    base = os.path.dirname(os.path.curdir)
    return [extension("pkg._C", sources + more + [os.path.join(base, "extra.cu")])]
"#;
        let b = builds(src, &d.join("setup.py"));
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].describe(), "CUDAExtension \"pkg._C\"");
        assert_eq!(
            relative_sources(&b[0], d),
            [
                "pkg/csrc/main.cpp",
                "pkg/csrc/cpu/a.cpp",
                "pkg/csrc/cuda/k.cu",
                "extra.cu"
            ]
        );
        assert!(b[0].unresolved.is_empty(), "{:?}", b[0].unresolved);
        // A name bound in two branches: both sources, but no single string to build on.
        let src = "from torch.utils.cpp_extension import load\nif X:\n    f = 'a.cu'\nelse:\n    f = 'b.cu'\nload('e', [f, 'c.cu' if Y else []])\nload('g', [f + '.cu'])\n";
        let b = builds(src, &d.join("setup.py"));
        let names = |i: usize| -> Vec<String> {
            b[i].sources
                .iter()
                .map(|s| s.path.file_name().unwrap().to_string_lossy().into_owned())
                .collect()
        };
        assert_eq!(names(0), ["a.cu", "b.cu", "c.cu"]);
        assert!(b[0].unresolved.is_empty(), "{:?}", b[0].unresolved);
        assert!(b[1].sources.is_empty() && b[1].unresolved.len() == 1);
    }

    #[cfg(unix)]
    #[test]
    fn recursive_globs_skip_links_and_hidden_folders() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        touch(
            d,
            &[
                "csrc/top.cu",
                "csrc/a/b/deep.cu",
                "csrc/.git/x.cu",
                "csrc/a/note.txt",
            ],
        );
        std::os::unix::fs::symlink(d.join("csrc"), d.join("csrc/a/loop")).unwrap();
        let src = "import glob\nfrom pathlib import Path\nfrom torch.utils.cpp_extension import CUDAExtension\nCUDAExtension('r', glob.glob('csrc/**/*.cu', recursive=True))\nCUDAExtension('p', list(Path(__file__).parent.joinpath('csrc').rglob('*.cu')))\n";
        let b = builds(src, &d.join("setup.py"));
        for e in &b {
            assert_eq!(
                relative_sources(e, d),
                ["csrc/a/b/deep.cu", "csrc/top.cu"],
                "{}",
                e.describe()
            );
        }
    }

    #[test]
    fn hostile_lists_stay_bounded() {
        let mut src = String::from("from torch.utils.cpp_extension import load\na0 = ['x.cu']\n");
        for i in 1..60 {
            src.push_str(&format!("a{i} = a{} + a{}\n", i - 1, i - 1));
        }
        src.push_str("load('e', a59)\n");
        let started = std::time::Instant::now();
        let b = builds(&src, Path::new("/nonexistent/setup.py"));
        assert_eq!(b.len(), 1);
        assert!(started.elapsed().as_secs() < 20);
        assert!(!b[0].unresolved.is_empty());
    }

    #[test]
    fn inline_sources_keep_offsets() {
        let src = "from torch.utils.cpp_extension import load_inline\nK = '''\n__global__ void k(float* x) { x[threadIdx.x] = 0; }\n'''\nload_inline('k', cpp_sources='int f();\\nint g();', cuda_sources=[K])\n";
        let b = builds(src, Path::new("t.py"));
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].inline.len(), 2);
        for i in &b[0].inline {
            assert_eq!(i.text.len(), src.len());
        }
        let k = &b[0].inline[0].text;
        let at = src.find("__global__").unwrap();
        assert_eq!(&k[at..at + 10], "__global__");
        assert!(k[..at].trim().is_empty());
        let cpp = &b[0].inline[1].text;
        assert!(cpp.contains("int f(); \nint g();"), "{cpp:?}");
        let b = builds(
            "from torch.utils.cpp_extension import load_inline\nload_inline('k', cuda_sources=f'{X}')\n",
            Path::new("t.py"),
        );
        assert!(b[0].inline.is_empty() && b[0].unresolved.len() == 1);
    }

    #[test]
    fn normalizes_lexically() {
        assert_eq!(normalize(Path::new("a/./b/../c")), PathBuf::from("a/c"));
        assert_eq!(normalize(Path::new("../x")), PathBuf::from("../x"));
        assert_eq!(normalize(Path::new("/a/../../x")), PathBuf::from("/x"));
    }
}
