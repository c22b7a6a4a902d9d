//! Project headers: the `#include "…"` files of a C/C++/CUDA file, read once per run.
//!
//! A kernel's parameter struct, its index type (`using index_t = uint32_t;`) and the project's
//! error-checking helpers usually live in a header next to it. Each quoted include is looked up
//! relative to the including file, then in the include directories the project makes visible:
//! the directories above the file up to the project root (the first with `setup.py`,
//! `CMakeLists.txt`, `pyproject.toml` or `.git`), each with its `include/` and `csrc/`, and the
//! `-I`/`include_dirs` directories named in the root's `setup.py` or `CMakeLists.txt`. System
//! headers (`#include <…>`) are never read. Headers include further headers; those are followed
//! a few levels deep. Each header is parsed once and its facts are shared by every file that
//! includes it; each is noted as a dependency of the including file's cached result.
//!
//! A checked header also sees what the files of its directory include before it (see
//! [`includers`]): a helper header that takes its parameter struct as a template parameter is
//! compiled after the struct's header. Facts found only that way are marked borrowed, and rules
//! that rest on them ask for stronger evidence.

mod includers;
mod kernels;
mod model;

use super::CudaModel;
use crate::hash::HashMap;
use gpulint_syntax::{parse, text, Lang, NodeExt};
pub use kernels::{HeaderKernel, HeaderParam, SeenKernel};
use std::cell::OnceCell;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

/// Headers larger than this are not read.
const MAX_HEADER_SIZE: u64 = 1 << 20;
/// Headers read per file, transitively.
const MAX_HEADERS: usize = 32;
/// Include levels followed.
const MAX_DEPTH: usize = 3;
/// Directories walked up from the file to find the project root.
const MAX_UP: usize = 6;

/// Calls whose presence makes a macro or function an error-checking helper.
pub const ERROR_QUERIES: &[&str] = &[
    "cudaGetLastError",
    "cudaPeekAtLastError",
    "C10_CUDA_KERNEL_LAUNCH_CHECK",
    "C10_CUDA_CHECK",
    "AT_CUDA_CHECK",
    "hipGetLastError",
];

/// What one header declares.
#[derive(Debug, Default)]
pub struct HeaderFacts {
    /// `using index_t = uint32_t;`, `typedef int64_t idx_t;`: alias → type.
    pub aliases: HashMap<String, String>,
    /// Struct and class members: name → the types declared for it.
    pub fields: HashMap<String, Vec<String>>,
    /// Macros and functions whose body queries the CUDA error state.
    pub check_helpers: Vec<String>,
    /// The `__global__` kernels it defines.
    pub kernels: Vec<HeaderKernel>,
    /// Where it was read from (empty for text not read from a file).
    pub path: PathBuf,
    /// Its own quoted includes, as written.
    includes: Vec<String>,
}

/// The headers a file sees, nearest first.
#[derive(Debug, Default, Clone)]
pub struct Headers {
    pub files: Vec<Arc<HeaderFacts>>,
    /// The checked file, when it is a header: what the files including it include before it
    /// is read on demand, the first time a member or alias is not found in `files`.
    context_of: Option<PathBuf>,
    /// Headers borrowed from that include context (see [`includers`]), not already in `files`.
    borrowed: OnceCell<Vec<Arc<HeaderFacts>>>,
}

impl Headers {
    pub fn alias(&self, name: &str) -> Option<&str> {
        fn find<'a>(files: &'a [Arc<HeaderFacts>], name: &str) -> Option<&'a str> {
            files
                .iter()
                .find_map(|h| h.aliases.get(name).map(String::as_str))
        }
        find(&self.files, name).or_else(|| find(self.borrowed(), name))
    }

    /// Member types for `name`, from every header that declares one; from the borrowed
    /// include context when no header the file includes declares it.
    pub fn field_types(&self, name: &str) -> Vec<&str> {
        fn collect<'a>(files: &'a [Arc<HeaderFacts>], name: &str) -> Vec<&'a str> {
            files
                .iter()
                .filter_map(|h| h.fields.get(name))
                .flatten()
                .map(String::as_str)
                .collect()
        }
        let own = collect(&self.files, name);
        if own.is_empty() {
            collect(self.borrowed(), name)
        } else {
            own
        }
    }

    /// Is the member `name` declared only in headers borrowed from the include context of a
    /// header (see [`includers`]), not in the headers the file includes itself?
    pub fn borrowed_field(&self, name: &str) -> bool {
        !self.files.iter().any(|h| h.fields.contains_key(name))
            && self.borrowed().iter().any(|h| h.fields.contains_key(name))
    }

    fn borrowed(&self) -> &[Arc<HeaderFacts>] {
        self.borrowed.get_or_init(|| match &self.context_of {
            Some(path) => borrowed_headers(path, &self.files),
            None => Vec::new(),
        })
    }

    /// The kernel called `name` in the nearest header that defines one.
    pub fn kernel(&self, name: &str) -> Option<SeenKernel<'_>> {
        self.files.iter().find_map(|h| {
            h.kernels
                .iter()
                .find(|k| k.name == name)
                .map(|kernel| SeenKernel {
                    kernel,
                    path: h.path.as_path(),
                })
        })
    }

    pub fn check_helpers(&self) -> impl Iterator<Item = &str> {
        self.files
            .iter()
            .flat_map(|h| h.check_helpers.iter().map(String::as_str))
    }
}

static FACTS: LazyLock<Mutex<HashMap<PathBuf, Option<Arc<HeaderFacts>>>>> =
    LazyLock::new(Default::default);
static ROOTS: LazyLock<Mutex<HashMap<PathBuf, Arc<Vec<PathBuf>>>>> =
    LazyLock::new(Default::default);

/// The quoted includes of `source`, as written.
pub fn quoted_includes(source: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in source.lines() {
        let l = line.trim_start();
        let Some(rest) = l.strip_prefix('#') else {
            continue;
        };
        let Some(rest) = rest.trim_start().strip_prefix("include") else {
            continue;
        };
        let rest = rest.trim_start();
        let Some(rest) = rest.strip_prefix('"') else {
            continue;
        };
        if let Some(end) = rest.find('"') {
            let inc = &rest[..end];
            if !inc.is_empty() && !out.iter().any(|o| o == inc) {
                out.push(inc.to_string());
            }
        }
    }
    out
}

/// The headers `path` includes (transitively), read from disk once per run.
pub fn project_headers(path: &Path, source: &str) -> Headers {
    let mut headers = Headers {
        context_of: is_header_name(path).then(|| path.to_path_buf()),
        ..Headers::default()
    };
    let first = quoted_includes(source);
    let Some(dir) = path.parent().filter(|_| !first.is_empty()) else {
        return headers;
    };
    let queue = first
        .into_iter()
        .map(|i| (dir.to_path_buf(), i, 1))
        .collect();
    let mut seen: Vec<PathBuf> = vec![path.to_path_buf()];
    follow(
        queue,
        &include_dirs(dir),
        &mut seen,
        &mut headers.files,
        MAX_HEADERS,
    );
    headers
}

/// The headers that the files including the header `path` include before it (see
/// [`includers`]), transitively, less those already in `own`.
fn borrowed_headers(path: &Path, own: &[Arc<HeaderFacts>]) -> Vec<Arc<HeaderFacts>> {
    let mut out = Vec::new();
    let Some(dir) = path.parent() else {
        return out;
    };
    let queue: Vec<_> = includers::includer_context(path)
        .into_iter()
        .map(|i| (dir.to_path_buf(), i, 1))
        .collect();
    if queue.is_empty() {
        return out;
    }
    let mut seen: Vec<PathBuf> = std::iter::once(path.to_path_buf())
        .chain(own.iter().map(|h| h.path.clone()))
        .collect();
    let limit = MAX_HEADERS.saturating_sub(own.len());
    follow(queue, &include_dirs(dir), &mut seen, &mut out, limit);
    out
}

/// Reads the headers of `queue` (directory of the including file, include, depth) and those
/// they include, breadth first, into `out`, up to `limit` headers.
fn follow(
    mut queue: Vec<(PathBuf, String, usize)>,
    dirs: &[PathBuf],
    seen: &mut Vec<PathBuf>,
    out: &mut Vec<Arc<HeaderFacts>>,
    limit: usize,
) {
    let mut qi = 0;
    while qi < queue.len() && out.len() < limit {
        let (from, inc, depth) = queue[qi].clone();
        qi += 1;
        let Some(found) = resolve(&from, &inc, dirs) else {
            continue;
        };
        if seen.contains(&found) {
            continue;
        }
        seen.push(found.clone());
        // A cached result of the including file is dropped when the header changes.
        gpulint_source::deps::note_dependency(&found);
        let Some(facts) = header_facts(&found) else {
            continue;
        };
        if depth < MAX_DEPTH {
            let parent = found.parent().map(Path::to_path_buf).unwrap_or_default();
            for i in &facts.includes {
                queue.push((parent.clone(), i.clone(), depth + 1));
            }
        }
        out.push(facts);
    }
}

fn resolve(from: &Path, inc: &str, dirs: &[PathBuf]) -> Option<PathBuf> {
    if Path::new(inc).is_absolute() || inc.contains('\0') {
        return None;
    }
    std::iter::once(from)
        .chain(dirs.iter().map(PathBuf::as_path))
        .map(|d| d.join(inc))
        .find(|p| p.is_file())
}

/// The include directories visible from `dir`: its ancestors up to the project root, each
/// with `include/` and `csrc/`, and those the root's build files name.
fn include_dirs(dir: &Path) -> Arc<Vec<PathBuf>> {
    if let Some(v) = ROOTS.lock().ok().and_then(|m| m.get(dir).cloned()) {
        return v;
    }
    let mut out = Vec::new();
    let mut cur = Some(dir);
    for _ in 0..MAX_UP {
        let Some(d) = cur else { break };
        for sub in ["", "include", "csrc"] {
            let p = if sub.is_empty() {
                d.to_path_buf()
            } else {
                d.join(sub)
            };
            if p.is_dir() && !out.contains(&p) {
                out.push(p);
            }
        }
        let markers = ["setup.py", "CMakeLists.txt", "pyproject.toml", ".git"];
        if markers.iter().any(|m| d.join(m).exists()) {
            for b in ["setup.py", "CMakeLists.txt"] {
                if let Some(t) = read_small(&d.join(b)) {
                    for rel in build_include_dirs(&t) {
                        let p = d.join(rel);
                        if p.is_dir() && !out.contains(&p) {
                            out.push(p);
                        }
                    }
                }
            }
            break;
        }
        cur = d.parent();
    }
    let out = Arc::new(out);
    if let Ok(mut m) = ROOTS.lock() {
        m.insert(dir.to_path_buf(), out.clone());
    }
    out
}

/// Relative include directories named in a build file: `-Ifoo`, `include_directories(foo)`,
/// `include_dirs=[…, "foo"]` (string literals only, no variables).
pub fn build_include_dirs(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |s: &str| {
        let s = s.trim().trim_matches(|c| c == '"' || c == '\'');
        let s = s.strip_prefix("${CMAKE_CURRENT_SOURCE_DIR}/").unwrap_or(s);
        let s = s.strip_prefix("./").unwrap_or(s);
        let ok = !s.is_empty()
            && !s.starts_with('/')
            && !s.contains("..")
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '/' | '.'));
        if ok && !out.iter().any(|o| o == s) {
            out.push(s.to_string());
        }
    };
    for (i, _) in text.match_indices("-I") {
        let rest = &text[i + 2..];
        let end = rest
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ',' | ')' | ']'))
            .unwrap_or(rest.len());
        push(&rest[..end]);
    }
    for key in ["include_directories(", "include_dirs"] {
        for (i, _) in text.match_indices(key) {
            let rest = &text[i + key.len()..];
            let mut end = rest.find([')', ']']).unwrap_or(rest.len()).min(400);
            while !rest.is_char_boundary(end) {
                end -= 1;
            }
            let body = &rest[..end];
            for part in body.split([',', ' ', '\n', '[', '(', '=']) {
                let p = part.trim();
                let quoted = (p.starts_with('"') || p.starts_with('\'')) && p.len() > 2;
                let bare = key == "include_directories("
                    && !p.is_empty()
                    && (!p.contains('$') || p.starts_with("${CMAKE_CURRENT_SOURCE_DIR}/"))
                    && !matches!(
                        p,
                        "PUBLIC" | "PRIVATE" | "INTERFACE" | "SYSTEM" | "BEFORE" | "AFTER"
                    );
                if quoted || bare {
                    push(p);
                }
            }
        }
    }
    out
}

fn read_small(path: &Path) -> Option<String> {
    if std::fs::metadata(path).ok()?.len() > MAX_HEADER_SIZE {
        return None;
    }
    gpulint_source::decode(std::fs::read(path).ok()?).ok()
}

fn header_facts(path: &Path) -> Option<Arc<HeaderFacts>> {
    if let Some(f) = FACTS.lock().ok().and_then(|m| m.get(path).cloned()) {
        return f;
    }
    let facts = read_small(path).map(|t| {
        let mut f = facts_of(&t);
        f.path = path.to_path_buf();
        Arc::new(f)
    });
    if let Ok(mut m) = FACTS.lock() {
        m.insert(path.to_path_buf(), facts.clone());
    }
    facts
}

/// Records an alias; one name aliased to different types in different scopes (two structs
/// with their own `using index_t = …;`) is ambiguous, recorded as the empty type.
/// `using index_t = typename Base::index_t;` re-exports the alias of another scope under the
/// same name: not a declaration of its own.
fn add_alias(aliases: &mut HashMap<String, String>, name: &str, ty: &str) {
    if crate::cuda::last_name(ty) == name {
        return;
    }
    match aliases.get(name) {
        Some(prev) if prev != ty => {
            aliases.insert(name.to_string(), String::new());
        }
        Some(_) => {}
        None => {
            aliases.insert(name.to_string(), ty.to_string());
        }
    }
}

/// File extensions of the headers that checked files usually include.
const HEADER_EXTENSIONS: &[&str] = &["h", "cuh", "hpp", "hxx"];

/// Is `path` named like a header that other files include?
pub fn is_header_name(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| HEADER_EXTENSIONS.iter().any(|h| e.eq_ignore_ascii_case(h)))
}

/// Hands the first parse of a checked header (`tree`, of its `source` read from `path`, before
/// any retry) to the files that include it: its facts are what [`project_headers`] would read
/// from it, so they are kept for the run instead of parsing the header a second time. Does
/// nothing when the facts are already known or the header is too large to be read as one.
pub fn share(path: &Path, source: &str, tree: &tree_sitter::Tree) {
    gpulint_source::budget::unmetered(|| share_with(path, source, tree, None));
}

/// As [`share`], for a header whose first parse is the tree of `model`, built with the default
/// options: the kernels of the facts are read from that model instead of a model of their own.
/// Both are computed outside the file's work budget: the facts serve the files that include it.
pub fn share_model(path: &Path, source: &str, tree: &tree_sitter::Tree, model: &CudaModel<'_>) {
    // A model whose building ran out of budget may be missing kernels: built again instead.
    let model = (!gpulint_source::budget::exhausted()).then_some(model);
    gpulint_source::budget::unmetered(|| share_with(path, source, tree, model));
}

fn share_with(path: &Path, source: &str, tree: &tree_sitter::Tree, model: Option<&CudaModel<'_>>) {
    if !is_header_name(path) || FACTS.lock().is_ok_and(|m| m.contains_key(path)) {
        return;
    }
    if std::fs::metadata(path).map_or(true, |m| m.len() > MAX_HEADER_SIZE) {
        return;
    }
    let mut facts = facts_of_tree(source, tree, model);
    facts.path = path.to_path_buf();
    let facts = Arc::new(facts);
    if let Ok(mut m) = FACTS.lock() {
        m.entry(path.to_path_buf()).or_insert(Some(facts));
    }
}

/// Words without which a header declares no alias (`using`, `typedef`) and no member (a
/// `struct`, `class` or `union` body), kernels `__global__`; helpers need one of
/// [`ERROR_QUERIES`].
const DECLARATION_WORDS: &[&str] = &["using", "typedef", "struct", "class", "union", "__global__"];

/// The facts of one header's text. A header without any word that its facts need is not
/// parsed: only its includes are read.
pub fn facts_of(source: &str) -> HeaderFacts {
    let needed = gpulint_source::contains_any(source.as_bytes(), DECLARATION_WORDS)
        || gpulint_source::contains_any(source.as_bytes(), ERROR_QUERIES);
    let tree = if needed {
        parse(Lang::Cuda, source)
    } else {
        None
    };
    match tree {
        Some(tree) => facts_of_tree(source, &tree, None),
        None => HeaderFacts {
            includes: quoted_includes(source),
            ..Default::default()
        },
    }
}

/// The facts of one header's text and its tree (`model`: the tree's model with the default
/// options, when already built).
fn facts_of_tree(
    source: &str,
    tree: &tree_sitter::Tree,
    model: Option<&CudaModel<'_>>,
) -> HeaderFacts {
    let mut f = HeaderFacts {
        includes: quoted_includes(source),
        kernels: kernels::kernels_of(source, tree, model),
        ..Default::default()
    };
    gpulint_syntax::walk_pruned(tree, |node| {
        match node.kind_name() {
            "alias_declaration" => {
                if let (Some(n), Some(t)) = (node.field("name"), node.field("type")) {
                    add_alias(&mut f.aliases, text(n, source), text(t, source));
                }
            }
            "type_definition" => {
                if let Some(t) = node.field("type") {
                    for d in gpulint_syntax::named_children(node)
                        .filter(|d| d.kind_name() == "type_identifier")
                    {
                        add_alias(&mut f.aliases, text(d, source), text(t, source));
                    }
                }
            }
            "field_declaration" => {
                if let Some(t) = node.field("type") {
                    for d in gpulint_syntax::named_children(node)
                        .filter_map(crate::cuda::narrow::member_declarator)
                    {
                        f.fields
                            .entry(text(d, source).to_string())
                            .or_default()
                            .push(text(t, source).to_string());
                    }
                }
            }
            "preproc_function_def" | "preproc_def" => {
                let body = node.field("value").map(|v| text(v, source)).unwrap_or("");
                if let Some(n) = node.field("name") {
                    if ERROR_QUERIES.iter().any(|q| body.contains(q)) {
                        f.check_helpers.push(text(n, source).to_string());
                    }
                }
            }
            "function_definition" => {
                let body = node.field("body").map(|v| text(v, source)).unwrap_or("");
                if ERROR_QUERIES.iter().any(|q| body.contains(q)) {
                    if let Some(n) = crate::cuda::function_name(node, source) {
                        f.check_helpers.push(crate::cuda::last_name(n).to_string());
                    }
                }
            }
            kind => return !declares_nothing(kind, node, source),
        }
        true
    });
    f
}

/// Expressions, which declare nothing: no alias, member, macro or function can be inside one
/// that parsed without error and holds no brace (a lambda's body) and no `#`.
const EXPRESSION_KINDS: &[&str] = &[
    "argument_list",
    "assignment_expression",
    "binary_expression",
    "call_expression",
    "cast_expression",
    "conditional_expression",
    "field_expression",
    "parenthesized_expression",
    "pointer_expression",
    "subscript_expression",
    "unary_expression",
    "update_expression",
];

/// Is `node` an expression without anything [`facts_of_tree`] reads inside it?
fn declares_nothing(kind: &str, node: tree_sitter::Node<'_>, source: &str) -> bool {
    EXPRESSION_KINDS.contains(&kind)
        && !node.has_error()
        && memchr::memchr2(b'{', b'#', text(node, source).as_bytes()).is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_includes_only() {
        let s = "#include <cuda.h>\n# include \"common.cuh\"\n#include \"a/b.h\" // x\n";
        assert_eq!(quoted_includes(s), vec!["common.cuh", "a/b.h"]);
    }

    #[test]
    fn header_facts_fields_aliases_helpers() {
        let s = r#"
#define CHECK_LAUNCH() do { cudaError_t e = cudaGetLastError(); if (e) abort(); } while (0)
#define NOT_A_CHECK(x) (x + 1)
struct Params { using index_t = uint32_t; int batch, dim; index_t u_batch_stride; };
struct A { using idx = uint32_t; }; struct B { using idx = uint64_t; }; struct C { using idx = uint64_t; };
struct T { using off_t = int64_t; }; struct U : T { using off_t = typename T::off_t; };
inline void finish(const char* what) { cudaError_t e = cudaPeekAtLastError(); (void)e; }
inline void other() {}
"#;
        let f = facts_of(s);
        assert_eq!(
            f.aliases.get("index_t").map(String::as_str),
            Some("uint32_t")
        );
        assert_eq!(f.fields.get("dim").unwrap(), &vec!["int".to_string()]);
        assert_eq!(f.aliases.get("idx").map(String::as_str), Some(""));
        assert_eq!(f.aliases.get("off_t").map(String::as_str), Some("int64_t"));
        assert_eq!(
            f.fields.get("u_batch_stride").unwrap(),
            &vec!["index_t".to_string()]
        );
        assert_eq!(f.check_helpers, vec!["CHECK_LAUNCH", "finish"]);
    }

    #[test]
    fn header_facts_inside_expressions() {
        // A lambda's body inside a call's arguments may declare what callers read; a plain
        // expression is not walked into.
        let s = r##"
inline void run(int n) {
  launch(n * 2, [&] { using lam_t = int64_t; struct P { int rows; }; });
  call(other(n + 1), "#define");
}
"##;
        let f = facts_of(s);
        assert_eq!(f.aliases.get("lam_t").map(String::as_str), Some("int64_t"));
        assert_eq!(f.fields.get("rows").unwrap(), &vec!["int".to_string()]);
    }

    #[test]
    fn header_kernels_from_a_given_model_are_those_of_its_own() {
        let s = "struct P { int n; };\n__global__ void k(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] = 0; }\n__global__ void r(at::PackedTensorAccessor32<float, 2> a) { float* row = a[blockIdx.x].data(); row[threadIdx.x] = 1; }\n";
        let tree = parse(Lang::Cuda, s).unwrap();
        let model = crate::cuda::CudaBuilder::model_of(s, &tree, &crate::Options::default());
        let given = facts_of_tree(s, &tree, Some(&model));
        let own = facts_of_tree(s, &tree, None);
        assert_eq!(given.kernels.len(), 2);
        assert_eq!(format!("{:?}", given.kernels), format!("{:?}", own.kernels));
        assert_eq!(given.fields, own.fields);
    }

    #[test]
    fn include_dirs_from_build_files() {
        let setup = "ext = CUDAExtension('x', ['a.cu'], include_dirs=['csrc/common', \"third/inc\"], extra_compile_args={'nvcc': ['-Ikernels']})";
        let d = build_include_dirs(setup);
        assert!(d.contains(&"csrc/common".to_string()));
        assert!(d.contains(&"third/inc".to_string()));
        assert!(d.contains(&"kernels".to_string()));
        let cmake = "include_directories(${CMAKE_CURRENT_SOURCE_DIR}/src include)\n";
        let d = build_include_dirs(cmake);
        assert_eq!(d, vec!["src", "include"]);
        assert!(build_include_dirs("-I/usr/include").is_empty());
    }
}
