//! Torch op glue across files: the callers of a launcher in the files next to it.
//!
//! Extensions split their glue: a `.cpp` wrapper, bound to Python, checks its inputs and calls
//! `foo_cuda(…)`, which a `.cu` file defines and launches from. Whether `foo_cuda`'s tensors
//! are validated is decided by its callers: in this file, or in a C/C++ file of the same
//! directory or its parent. A function whose callers cannot be seen is never reported. Sibling
//! files are read only when a rule is about to report, and cached for the whole run.

use super::glue::{FileFacts, ALL};
use super::glue_python::{PythonCallers, Seen};
use super::CudaBuilder;
use super::GridKind;
use crate::hash::{HashMap, HashSet};
use crate::Options;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

mod foreign;
mod launch_errors;
pub(crate) mod member_stores;
pub mod pending;
pub use foreign::{foreign_launcher, ForeignLauncher};
pub use launch_errors::UncheckedPath;

/// Sibling files larger than this are not read.
const MAX_FILE_SIZE: u64 = 1 << 20;
/// C/C++/CUDA files looked at per directory (the first by name).
const MAX_DIR_ENTRIES: usize = 400;
/// Call-chain depth followed upwards.
const MAX_DEPTH: usize = 5;

const EXTENSIONS: &[&str] = &["cpp", "cc", "cxx", "cu", "cuh", "h", "hpp", "c"];

static FILES: LazyLock<Mutex<HashMap<PathBuf, Option<Arc<FileFacts>>>>> =
    LazyLock::new(Default::default);
static DIRS: LazyLock<Mutex<HashMap<PathBuf, Arc<Vec<PathBuf>>>>> = LazyLock::new(Default::default);

fn dir_files(dir: &Path) -> Arc<Vec<PathBuf>> {
    if let Some(v) = DIRS.lock().ok().and_then(|m| m.get(dir).cloned()) {
        return v;
    }
    let files = gpulint_source::sorted_dir_files(dir, MAX_DIR_ENTRIES, |p| {
        p.extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| EXTENSIONS.contains(&e))
    });
    let files = Arc::new(files);
    if let Ok(mut m) = DIRS.lock() {
        m.insert(dir.to_path_buf(), files.clone());
    }
    files
}

/// A sibling file's text, unless it is too large or unreadable.
fn read_small(path: &Path) -> Option<String> {
    if std::fs::metadata(path).ok()?.len() > MAX_FILE_SIZE {
        return None;
    }
    gpulint_source::decode(std::fs::read(path).ok()?).ok()
}

/// The glue facts of a sibling file already known to this run, if any (`Some(None)`: the file
/// is unreadable, too large or does not parse).
fn known_facts(path: &Path) -> Option<Option<Arc<FileFacts>>> {
    FILES.lock().ok().and_then(|m| m.get(path).cloned())
}

fn remember(path: &Path, facts: Option<Arc<FileFacts>>) {
    if let Ok(mut m) = FILES.lock() {
        m.insert(path.to_path_buf(), facts);
    }
}

/// Hands the glue facts of a checked file to the files next to it: a question of theirs about
/// it then reads these instead of parsing the file a second time. `facts` must come from the
/// file's first parse, without error (what [`facts_of_text`] would parse), of `text` read
/// from `path`. Does nothing when the facts are already known or the file is too large to be
/// read as a sibling.
pub fn share(path: &Path, text: &str, facts: &FileFacts) {
    let Ok(me) = std::path::absolute(path) else {
        return;
    };
    if text.len() as u64 > MAX_FILE_SIZE || known_facts(&me).is_some() {
        return;
    }
    if std::fs::metadata(&me).map_or(true, |m| m.len() > MAX_FILE_SIZE) {
        return;
    }
    // As [`Sibling::at`] reads a text that holds no glue.
    let facts = if super::glue::is_glue_text(text) {
        facts.clone()
    } else {
        FileFacts::default()
    };
    if let Ok(mut m) = FILES.lock() {
        m.entry(me).or_insert(Some(Arc::new(facts)));
    }
}

/// The glue facts of the text of the file at `path` (parsed here).
fn facts_of_text(path: &Path, text: &str, options: &Options) -> Option<Arc<FileFacts>> {
    let tree = pending::parse_sibling(path, text)?;
    Some(Arc::new(CudaBuilder::glue_facts_of(text, &tree, options)))
}

/// Does `text` hold `name` as a whole word? A name in the facts is the text of a node, whose
/// ends are token boundaries: where it starts or ends with a word character, the text next to
/// it is not one.
fn spells(text: &str, name: &str) -> bool {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let (t, n) = (text.as_bytes(), name.as_bytes());
    let (Some(&first), Some(&last)) = (n.first(), n.last()) else {
        return true;
    };
    memchr::memmem::find_iter(t, n).any(|at| {
        let before = at.checked_sub(1).map(|i| t[i]);
        let after = t.get(at + n.len()).copied();
        let joined_before = word(first) && before.is_some_and(word);
        let joined_after = word(last) && after.is_some_and(word);
        !joined_before && !joined_after
    })
}

/// A file the resolver sees: its facts once known, or its path until a question needs them.
struct Sibling {
    /// Its path (`None` for the checked file).
    path: Option<PathBuf>,
    /// The facts, once read (`None`: the file holds no glue that callers could use).
    facts: std::cell::OnceCell<Option<Arc<FileFacts>>>,
    /// Neither facts nor text are held: the file is read through the run's word sets (see
    /// `foreign`) when a question names one of its words. Facts only ever name what the text
    /// spells, so a file whose text does not contain a name has no part in a question about
    /// it, and is parsed only when some question names a word of its text.
    on_disk: bool,
    /// The run's word set of the file (see `foreign`), looked up once per resolver: `None`
    /// where the run does not keep one.
    words: std::cell::OnceCell<Option<foreign::FileWords>>,
}

impl Sibling {
    fn known(path: Option<PathBuf>, facts: Option<Arc<FileFacts>>) -> Sibling {
        // A file without functions or bindings plays no part in any question.
        let facts = facts.filter(|f| !f.fns.is_empty() || !f.bound.is_empty());
        Sibling {
            path,
            facts: std::cell::OnceCell::from(facts),
            on_disk: false,
            words: Default::default(),
        }
    }

    /// A file read only when a question names one of its words.
    /// The first entries of a resolver: the checked file itself (its facts, no path), the
    /// list of paths read with its absolute path first, and that absolute path.
    fn start(here: &FileFacts, path: &Path) -> (Vec<Sibling>, Vec<PathBuf>, Option<PathBuf>) {
        let files = vec![Sibling {
            path: None,
            facts: std::cell::OnceCell::from(Some(Arc::new(here.clone()))),
            on_disk: false,
            words: Default::default(),
        }];
        let me = std::path::absolute(path).ok();
        let paths = vec![me.clone().unwrap_or_else(|| path.to_path_buf())];
        (files, paths, me)
    }

    fn on_disk(path: &Path) -> Sibling {
        Sibling {
            path: Some(path.to_path_buf()),
            facts: Default::default(),
            on_disk: true,
            words: Default::default(),
        }
    }

    /// A sibling file, by its facts known to the run or else its path. Its text is read once
    /// per run here: one that holds no glue is remembered as such, one that does is left to
    /// the questions that name its words (see [`Sibling::for_name`]).
    fn at(path: &Path) -> Sibling {
        if let Some(facts) = known_facts(path) {
            return Sibling::known(Some(path.to_path_buf()), facts);
        }
        if foreign::known_glue(path) {
            return Sibling::on_disk(path);
        }
        let Some(text) = read_small(path) else {
            remember(path, None);
            return Sibling::known(Some(path.to_path_buf()), None);
        };
        if !super::glue::is_glue_text(&text) {
            let facts = Some(Arc::new(FileFacts::default()));
            remember(path, facts.clone());
            return Sibling::known(Some(path.to_path_buf()), facts);
        }
        foreign::note_glue(path, &text);
        Sibling::on_disk(path)
    }

    /// Its facts, when they may have a part in a question about `name`.
    fn for_name(&self, name: &str, options: &Options) -> Option<&FileFacts> {
        if let Some(f) = self.facts.get() {
            return f.as_deref();
        }
        if !self.on_disk || !self.may_spell(name) {
            return None;
        }
        let facts = foreign::facts_naming(self.path.as_deref()?, name, options)
            .filter(|f| !f.fns.is_empty() || !f.bound.is_empty())?;
        self.facts.get_or_init(|| Some(facts)).as_deref()
    }

    /// The run's word set of a file read on disk, if the run keeps one.
    fn words(&self) -> Option<&foreign::FileWords> {
        self.words
            .get_or_init(|| self.path.as_deref().and_then(foreign::kept_words))
            .as_ref()
    }

    /// Can the text of a file read on disk spell `name` as a whole word? `false` only where
    /// the run's word set of the file says it does not.
    fn may_spell(&self, name: &str) -> bool {
        self.words().is_none_or(|w| w.may_spell(name))
    }

    /// Its facts, once read.
    fn read(&self) -> Option<&FileFacts> {
        self.facts.get().and_then(|f| f.as_deref())
    }
}

/// Per file: the worst grid of the launches of each kernel name in it.
type LaunchGrids = HashMap<String, GridKind>;

static LAUNCHES: LazyLock<Mutex<HashMap<PathBuf, Arc<LaunchGrids>>>> =
    LazyLock::new(Default::default);

fn launch_grids(path: &Path, options: &Options) -> Arc<LaunchGrids> {
    if let Some(g) = LAUNCHES.lock().ok().and_then(|m| m.get(path).cloned()) {
        return g;
    }
    let grids = (|| {
        let text = read_small(path)?;
        if !text.contains("<<<") {
            return None;
        }
        let tree = gpulint_syntax::cuda_retry::reparse(&text, pending::parse_sibling(path, &text)?);
        let model = CudaBuilder::model_of(&text, &tree, options);
        let mut grids = LaunchGrids::default();
        for l in &model.launches {
            let kind = model.grid_kind(l).unwrap_or(GridKind::Unknown);
            let e = grids.entry(l.kernel.to_string()).or_insert(kind);
            *e = (*e).max(kind);
        }
        Some(grids)
    })()
    .unwrap_or_default();
    let grids = Arc::new(grids);
    if let Ok(mut m) = LAUNCHES.lock() {
        m.insert(path.to_path_buf(), grids.clone());
    }
    grids
}

/// The worst grid over the launches of kernel `name` in the C/C++/CUDA files of the directory
/// of `path` and its parent (recorded as dependencies); `None` when none of them launches it.
pub fn sibling_launch_grid(path: &Path, options: &Options, name: &str) -> Option<GridKind> {
    let me = std::path::absolute(path).ok()?;
    let dir = me.parent()?;
    let mut worst: Option<GridKind> = None;
    for d in std::iter::once(dir).chain(dir.parent()) {
        if !d.is_dir() {
            continue;
        }
        gpulint_source::note_dependency(d);
        for f in dir_files(d).iter().filter(|f| **f != me) {
            gpulint_source::note_dependency(f);
            if let Some(kind) = launch_grids(f, options).get(name) {
                worst = Some(worst.map_or(*kind, |w| w.max(*kind)));
            }
        }
    }
    worst
}

/// Where a check or guard was looked for.
#[derive(Debug, Default, Clone)]
pub struct Reach {
    /// What is validated on every path from an entry point (`ALL` when a path is unknown).
    pub props: u8,
    /// Callers seen on the way (name and, for another file, its path).
    pub callers: Vec<(String, Option<PathBuf>)>,
    /// The Python calls of the bound functions on the way (`file:line`, and what each
    /// guarantees for the tensor), when the run saw them.
    pub python: Vec<(String, u8)>,
}

/// Resolves checks and guards through the callers of a function.
pub struct Resolver<'a> {
    /// The checked file first, then its siblings (see [`Sibling`]).
    files: Vec<Sibling>,
    options: Options,
    /// Functions whose Python callers validate their inputs (`*`: all).
    trusted: &'a [String],
    /// Functions visited in the current question; past `MAX_VISITS` the answer is "unknown".
    visits: std::cell::Cell<usize>,
    /// Per file (as `files`), built on first use: the names it defines, and for each callee
    /// name the functions that call it (in order). Scanning every function and call of a file
    /// for each question grows with the file's size per question.
    indexes: Vec<std::cell::OnceCell<FileIndex>>,
    /// The path of each file (as `files`; the first is the checked file).
    paths: Vec<PathBuf>,
    /// The Python calls of the run's extension modules (see `glue_python`).
    python: Option<Arc<PythonCallers>>,
    /// The Python calls met in the current question (see [`Reach::python`]).
    python_sites: std::cell::RefCell<Vec<(String, u8)>>,
}

/// See [`Resolver::indexes`].
#[derive(Default)]
struct FileIndex {
    defined: HashSet<String>,
    callers: HashMap<String, Vec<usize>>,
}

impl FileIndex {
    fn of(f: &FileFacts) -> FileIndex {
        let mut index = FileIndex::default();
        for (gi, g) in f.fns.iter().enumerate() {
            index.defined.insert(g.name.clone());
            for c in &g.calls {
                let list = index.callers.entry(c.callee.clone()).or_default();
                if list.last() != Some(&gi) {
                    list.push(gi);
                }
            }
        }
        index
    }
}

/// Caller visits per question (a call graph with much fan-in is not explored exhaustively).
const MAX_VISITS: usize = 2_000;

impl<'a> Resolver<'a> {
    /// The facts of this file and, when `path` is a real file, the C/C++ files of its directory
    /// and its parent (recorded as dependencies of this file's findings).
    pub fn new(here: &FileFacts, path: &Path, options: &Options, trusted: &'a [String]) -> Self {
        let (mut files, mut paths, me) = Sibling::start(here, path);
        let dir = me.as_deref().and_then(Path::parent);
        let dirs: Vec<&Path> = dir.into_iter().chain(dir.and_then(Path::parent)).collect();
        for d in dirs {
            if !d.is_dir() {
                continue;
            }
            gpulint_source::note_dependency(d);
            for f in dir_files(d).iter() {
                if Some(f) == me.as_ref() {
                    continue;
                }
                gpulint_source::note_dependency(f);
                let sibling = Sibling::at(f);
                if sibling.facts.get().is_some_and(Option::is_none) {
                    continue;
                }
                files.push(sibling);
                paths.push(f.clone());
            }
        }
        Resolver {
            indexes: files.iter().map(|_| std::cell::OnceCell::new()).collect(),
            files,
            options: options.clone(),
            trusted,
            visits: std::cell::Cell::new(0),
            paths,
            python: super::glue_python::current(),
            python_sites: Default::default(),
        }
    }

    /// What the visible Python calls of function `name`, bound in file `file`, give its
    /// parameter `param` (`None`: no call seen).
    fn python_seen(&self, file: usize, name: &str, param: usize) -> Option<Seen> {
        let python = self.python.as_ref()?;
        let (path, facts) = (self.paths.get(file)?, self.files.get(file)?.read()?);
        if let Some(p) = self.files[file].path.as_ref() {
            gpulint_source::note_dependency(p);
        }
        python.seen(path, &facts.bindings, name, param)
    }

    /// The bound function `name` (of file `home`): the file that binds it and what its Python
    /// callers give parameter `param`.
    fn python_callers(&self, home: usize, name: &str, param: usize) -> Option<Seen> {
        let file = self
            .sees(home, name)
            .find(|(_, f)| f.bindings.iter().any(|b| b.function == name))?
            .0;
        let seen = self.python_seen(file, name, param)?;
        let mut sites = self.python_sites.borrow_mut();
        for s in &seen.sites {
            if sites.len() < 8 && !sites.contains(s) {
                sites.push(s.clone());
            }
        }
        Some(seen)
    }

    fn trusted(&self, name: &str) -> bool {
        self.trusted.iter().any(|t| t == "*" || t == name)
    }

    /// The files whose mentions of `name` may refer to the definition in file `home`: that
    /// file, and the others that do not define a function of that name themselves.
    /// A sibling is read when a question first names a word of its text (see [`Sibling`]).
    fn sees<'s>(
        &'s self,
        home: usize,
        name: &'s str,
    ) -> impl Iterator<Item = (usize, &'s FileFacts)> + 's {
        self.files.iter().enumerate().filter_map(move |(i, f)| {
            let facts = if i == home {
                f.read()?
            } else {
                f.for_name(name, &self.options)?
            };
            (i == home || !self.index(i).defined.contains(name)).then_some((i, facts))
        })
    }

    /// The facts of a file that a question has read.
    fn facts(&self, file: usize) -> Option<&FileFacts> {
        self.files.get(file).and_then(Sibling::read)
    }

    fn index(&self, file: usize) -> &FileIndex {
        self.indexes[file].get_or_init(|| self.facts(file).map(FileIndex::of).unwrap_or_default())
    }

    fn bound(&self, home: usize, name: &str) -> bool {
        self.sees(home, name).any(|(_, f)| f.bound.contains(name))
    }

    /// Is it handed around as a pointer (a registration macro) where its callers cannot be seen?
    fn opaque(&self, home: usize, name: &str) -> bool {
        !self.bound(home, name)
            && self
                .sees(home, name)
                .any(|(_, f)| f.referenced.contains(name))
    }

    /// What is validated about parameter `param` of function `func` of this file, on every
    /// path from a binding: its own checks and those of its callers.
    pub fn coverage(&self, func: usize, param: usize) -> Reach {
        let mut reach = Reach::default();
        self.visits.set(0);
        self.python_sites.borrow_mut().clear();
        reach.props = self.cover(0, func, param, 0, &mut reach.callers);
        reach.python = std::mem::take(&mut *self.python_sites.borrow_mut());
        reach
    }

    fn cover(
        &self,
        file: usize,
        func: usize,
        param: usize,
        depth: usize,
        callers: &mut Vec<(String, Option<PathBuf>)>,
    ) -> u8 {
        let Some(f) = self.facts(file).and_then(|f| f.fns.get(func)) else {
            return ALL;
        };
        let own = f.covered.get(param).copied().unwrap_or(ALL);
        self.visits.set(self.visits.get() + 1);
        if own == ALL
            || self.visits.get() > MAX_VISITS
            || depth > MAX_DEPTH
            || self.opaque(file, &f.name)
        {
            return ALL;
        }
        let mut any = false;
        let mut result = ALL;
        if self.bound(file, &f.name) {
            any = true;
            if !self.trusted(&f.name) {
                let python = self.python_callers(file, &f.name, param);
                result &= own | python.map_or(0, |s| s.props);
            }
        }
        for (ci, gi) in self.callers_of(file, &f.name, callers) {
            any = true;
            let Some(g) = self.facts(ci).and_then(|c| c.fns.get(gi)) else {
                continue;
            };
            for call in g.calls.iter().filter(|c| c.callee == f.name) {
                if let Some(Some((j, granted))) = call.args.get(param) {
                    result &= own | granted | self.cover(ci, gi, *j, depth + 1, callers);
                }
            }
        }
        if any {
            result
        } else {
            ALL
        }
    }

    /// The functions that call `name` (defined in file `home`), as (file, function) indices;
    /// each is also noted in `callers` (up to 8, for messages).
    fn callers_of(
        &self,
        home: usize,
        name: &str,
        callers: &mut Vec<(String, Option<PathBuf>)>,
    ) -> Vec<(usize, usize)> {
        let mut found = Vec::new();
        for (ci, cf) in self.sees(home, name) {
            let Some(calling) = self.index(ci).callers.get(name) else {
                continue;
            };
            for &gi in calling {
                let g = &cf.fns[gi];
                if g.name == name {
                    continue;
                }
                if callers.len() < 8 && !callers.iter().any(|c| c.0 == g.name) {
                    callers.push((g.name.clone(), self.files[ci].path.clone()));
                }
                found.push((ci, gi));
            }
        }
        found
    }

    /// Does a device guard hold whenever function `func` of this file runs? `None`: yes (or
    /// unknown); `Some(callers)`: no guard on some path from a binding.
    pub fn unguarded(&self, func: usize) -> Option<Vec<(String, Option<PathBuf>)>> {
        let mut callers = Vec::new();
        self.visits.set(0);
        (!self.guarded(0, func, 0, &mut callers)).then_some(callers)
    }

    fn guarded(
        &self,
        file: usize,
        func: usize,
        depth: usize,
        callers: &mut Vec<(String, Option<PathBuf>)>,
    ) -> bool {
        let Some(f) = self.facts(file).and_then(|f| f.fns.get(func)) else {
            return true;
        };
        self.visits.set(self.visits.get() + 1);
        if f.guarded
            || self.visits.get() > MAX_VISITS
            || depth > MAX_DEPTH
            || self.opaque(file, &f.name)
        {
            return true;
        }
        let mut any = false;
        let mut all = true;
        if self.bound(file, &f.name) {
            any = true;
            // Autograd runs `backward` with the gradients' device current.
            all &= self.trusted(&f.name)
                || self
                    .python_callers(file, &f.name, 0)
                    .is_some_and(|s| s.backward_only);
        }
        for (ci, gi) in self.callers_of(file, &f.name, callers) {
            any = true;
            all &= self.guarded(ci, gi, depth + 1, callers);
        }
        !any || all
    }
}

/// `name` (`file.cpp`) for a message.
pub fn describe_callers(callers: &[(String, Option<PathBuf>)]) -> String {
    callers
        .iter()
        .map(|(n, p)| match p.as_ref().and_then(|p| p.file_name()) {
            Some(f) => format!("`{n}` ({})", f.to_string_lossy()),
            None => format!("`{n}`"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_facts_are_read_as_a_siblings() {
        let dir = tempfile::tempdir().unwrap();
        let glue = dir.path().join("op.cpp");
        let text = "#include <torch/extension.h>\nvoid launch(at::Tensor x);\nvoid op(at::Tensor x) { launch(x); }\n";
        std::fs::write(&glue, text).unwrap();
        let plain = dir.path().join("util.cu");
        std::fs::write(&plain, "int twice(int x) { return 2 * x; }\n").unwrap();
        let options = Options::default();
        // The facts a sibling would parse for itself.
        let parsed = facts_of_text(Path::new("a.cu"), text, &options).unwrap();
        let mut shared = (*parsed).clone();
        shared.referenced.insert("marker".into());
        share(&glue, text, &shared);
        let known = known_facts(&glue).unwrap().unwrap();
        assert!(known.referenced.contains("marker"));
        assert_eq!(format!("{:?}", known.fns), format!("{:?}", parsed.fns));
        // Not replaced by a second share.
        share(&glue, text, &FileFacts::default());
        assert!(known_facts(&glue)
            .unwrap()
            .unwrap()
            .referenced
            .contains("marker"));
        // A text without glue is shared as a sibling's would be read: without facts.
        share(&plain, "int twice(int x) { return 2 * x; }\n", &shared);
        let known = known_facts(&plain).unwrap().unwrap();
        assert!(known.fns.is_empty() && known.referenced.is_empty());
        // A file not on disk is not shared.
        let gone = dir.path().join("gone.cpp");
        share(&gone, text, &shared);
        assert!(known_facts(&std::path::absolute(&gone).unwrap()).is_none());
    }

    #[test]
    fn spells_whole_words_only() {
        let text = "at::Tensor foo_cuda(at::Tensor x);\nvoid bar() { ns::foo(x); }\n";
        assert!(spells(text, "foo_cuda"));
        assert!(spells(text, "foo"));
        assert!(spells(text, "bar"));
        assert!(!spells(text, "ba"));
        assert!(!spells(text, "oo_cuda"));
        assert!(!spells("void foo_cuda();", "foo"));
        assert!(spells("x = &foo;", "foo"));
        assert!(spells("struct A { A(); ~A(); };", "~A"));
    }
}
