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
//! (see [`calls`] and [`subclasses`]). A part that does not fold is recorded as unresolved, never guessed.
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
//!
//! Layout: `build` turns one call into an [`ExtensionBuild`]; `fold`, `path`, `glob` and
//! `comprehension` fold source-list expressions; `calls` follows functions and methods that
//! return lists, `subclasses` the op builders whose subclasses give them; `locate` finds sources
//! on disk that a call does not name exactly; `inline` reads `load_inline` source text.

mod build;
mod calls;
mod comprehension;
mod fold;
mod glob;
mod inline;
mod locate;
mod path;
mod subclasses;

use super::PythonModel;
use gpulint_source::Span;
use gpulint_syntax::{named_children, NodeExt};
pub use inline::inline_text;
use path::absolute;
pub use path::normalize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use tree_sitter::Node;

/// Bytes a file must contain to possibly build an extension.
pub const NEEDLES: &[&str] = &["cpp_extension", "load_op_library"];

/// Can a Python file whose text is `bytes` define an extension build (does it name one of
/// [`NEEDLES`])?
pub fn may_define_builds(bytes: &[u8]) -> bool {
    gpulint_source::contains_any(bytes, NEEDLES)
}

/// How deep folding may go (names bound to names bound to lists …).
const MAX_DEPTH: usize = 24;
/// Folding steps per file.
const MAX_STEPS: usize = 200_000;
/// Paths one glob may expand to.
const MAX_GLOB_MATCHES: usize = 2048;
/// Folders one recursive `**` may descend.
const MAX_GLOB_DEPTH: usize = 12;
/// Sibling modules larger than this are not read.
const MAX_SIBLING_SIZE: u64 = 1 << 20;

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
        siblings: Default::default(),
    };
    let aliases = builder_aliases(m);
    let mut out = Vec::new();
    for &(call, scope) in &m.calls {
        let kind = match m.call_name(call) {
            Some(q) => BuildKind::of(&q),
            // `extension = CUDAExtension if with_cuda else CppExtension; extension(...)`
            None => call
                .field("function")
                .filter(|f| f.kind_name() == "identifier")
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
        let Some(left) = a.field("left").filter(|l| l.kind_name() == "identifier") else {
            continue;
        };
        let name = m.text(left);
        let key = (name, m.enclosing_function(a));
        let right = a.field("right").filter(|_| a.kind_name() == "assignment");
        let mut kinds = Vec::new();
        let mut ok = right.is_some();
        if let Some(r) = right {
            let values: Vec<Node<'_>> = if r.kind_name() == "conditional_expression" {
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

/// What `self` is while folding a build call inside a method.
#[derive(Debug, Default)]
struct SelfCtx {
    /// Classes of this file to look methods up in, most derived first.
    chain: Vec<String>,
    /// Methods of a subclass in another file, already folded there.
    overrides: Vec<(String, Vec<Item>)>,
    /// Methods called on `self` while folding.
    consulted: Vec<String>,
    /// Folding in a module read for another file: its own imports are not followed.
    foreign: bool,
}

struct Folder<'a, 'm> {
    m: &'a PythonModel<'m>,
    /// The file as given (for `is_setup_py`).
    file: &'a Path,
    /// The file's absolute path (what `__file__` is).
    absolute: PathBuf,
    /// Folding steps left for the whole file.
    budget: std::cell::Cell<usize>,
    /// What `self` is while folding a call inside a method.
    ctx: std::cell::RefCell<SelfCtx>,
    /// The subclasses found in sibling modules, per (family, methods) asked for: the sibling
    /// files are read and parsed once per file checked, not once per build call.
    siblings: std::cell::RefCell<SiblingMemo>,
}

/// A subclass in a sibling module: (file, class, method, 1-based line of its `def`, the
/// zero-argument methods it defines, folded there).
type SiblingSubclass = (PathBuf, String, String, usize, Vec<(String, Vec<Item>)>);

/// Sibling subclasses per (family, methods): see [`Folder::siblings`].
type SiblingMemo = HashMap<(Vec<String>, Vec<String>), Vec<SiblingSubclass>>;

/// Positional or keyword argument of a call.
fn argument<'t>(call: Node<'t>, position: usize, keyword: &str, source: &str) -> Option<Node<'t>> {
    let args = call.field("arguments")?;
    let mut i = 0;
    for a in named_children(args) {
        match a.kind_name() {
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
        .is_some_and(|a| named_children(a).any(|c| c.kind_name() == "dictionary_splat"))
}

fn unresolved(node: Node<'_>, reason: impl Into<String>) -> Unresolved {
    Unresolved {
        span: Span::of(&node),
        reason: reason.into(),
    }
}

/// Is `n` the name `var` (an identifier)?
fn is_var(m: &PythonModel<'_>, n: Node<'_>, var: &str) -> bool {
    n.kind_name() == "identifier" && m.text(n) == var
}

fn push_source(sources: &mut Vec<Source>, s: Source) {
    if !sources.iter().any(|x| x.path == s.path) {
        sources.push(s);
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
}

#[cfg(test)]
mod tests;
