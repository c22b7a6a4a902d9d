//! Launchers in other files: a binding that hands a tensor to a function defined in a C/C++/CUDA
//! file of its directory, its parent or a subdirectory (an extension's `cuda/` folder), which
//! launches kernels with that tensor's memory.

use super::{dir_files, facts_of_text, known_facts, read_small, remember, spells, MAX_DIR_ENTRIES};
use crate::cuda::glue::FileFacts;
use crate::hash::{HashMap, HashSet};
use crate::Options;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

/// Subdirectories of a directory searched for the definitions of called functions.
const MAX_SUBDIRS: usize = 16;

static SUBDIRS: LazyLock<Mutex<HashMap<PathBuf, Arc<Vec<PathBuf>>>>> =
    LazyLock::new(Default::default);

/// The immediate subdirectories of `dir` (the first by name).
pub(super) fn sub_dirs(dir: &Path) -> Arc<Vec<PathBuf>> {
    if let Some(v) = SUBDIRS.lock().ok().and_then(|m| m.get(dir).cloned()) {
        return v;
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .take(MAX_DIR_ENTRIES)
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    dirs.sort();
    dirs.truncate(MAX_SUBDIRS);
    let dirs = Arc::new(dirs);
    if let Ok(mut m) = SUBDIRS.lock() {
        m.insert(dir.to_path_buf(), dirs.clone());
    }
    dirs
}

/// The words of the files looked at for launchers (maximal runs of `[A-Za-z0-9_]`), kept so
/// that a file is read once per run however many names are asked about, within
/// [`WORDS_BUDGET`] bytes for the whole run; past it, files are read again for each question.
/// Each word is kept as its 64-bit hash ([`word_hash`]): a file whose hashes include a name's
/// is then read and searched for the name itself, or parsed, so a collision costs work, never
/// an answer.
type Words = std::collections::HashSet<u64, foldhash::fast::FixedState>;

static WORDS: LazyLock<Mutex<HashMap<PathBuf, Option<Arc<Words>>>>> =
    LazyLock::new(Default::default);
/// Bytes of words kept for the whole run.
const WORDS_BUDGET: usize = 8 << 20;
static WORDS_USED: AtomicUsize = AtomicUsize::new(0);

/// Word characters (`[A-Za-z0-9_]`), by byte.
const WORD: [bool; 256] = {
    let mut table = [false; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        table[i] = b.is_ascii_alphanumeric() || b == b'_';
        i += 1;
    }
    table
};

fn is_word(b: u8) -> bool {
    WORD[b as usize]
}

/// The hash a word is kept as, the same in every thread and run.
fn word_hash(word: &[u8]) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::with_seed(0x9e37_79b9_7f4a_7c15).hash_one(word)
}

/// The distinct maximal runs of word characters of `text`, as hashes.
fn words_of(text: &str) -> Words {
    let mut words = Words::default();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if !is_word(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && is_word(bytes[i]) {
            i += 1;
        }
        words.insert(word_hash(&bytes[start..i]));
    }
    words
}

/// Keeps the words of the file at `path` if the budget allows (`None`: unreadable or too large).
fn keep_words(path: &Path, text: Option<&str>) {
    let words = text.map(words_of);
    let size: usize = words
        .as_ref()
        .map_or(0, |w| w.capacity() * (std::mem::size_of::<u64>() + 1));
    if WORDS_USED.fetch_add(size, Ordering::Relaxed) + size > WORDS_BUDGET {
        WORDS_USED.fetch_sub(size, Ordering::Relaxed);
        return;
    }
    if let Ok(mut m) = WORDS.lock() {
        m.insert(path.to_path_buf(), words.map(Arc::new));
    }
}

/// A file's entry in the run's word sets: its words, or `None` when it is unreadable or too
/// large.
#[derive(Clone)]
pub(super) struct FileWords(Option<Arc<Words>>);

/// Is `name` made of word characters only? Such a name is spelled as a whole word exactly
/// when it is one of the text's words.
fn plain(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(is_word)
}

impl FileWords {
    /// Does the file spell `name` as a whole word, where its word set can tell: for a name of
    /// word characters, or for a file unreadable or too large (it spells nothing); `None` where
    /// its text must be searched. A hash collision can answer yes for a file that does not:
    /// callers use the answer to skip files, and read those they keep.
    pub(super) fn spells(&self, name: &str) -> Option<bool> {
        match &self.0 {
            None => Some(false),
            Some(w) if plain(name) => Some(w.contains(&word_hash(name.as_bytes()))),
            Some(_) => None,
        }
    }

    /// Can the file spell `name` as a whole word? `false` only where its word set says not.
    pub(super) fn may_spell(&self, name: &str) -> bool {
        self.spells(name) != Some(false)
    }
}

/// The run's word set of the file at `path`, if it keeps one.
pub(super) fn kept_words(path: &Path) -> Option<FileWords> {
    WORDS
        .lock()
        .ok()
        .and_then(|m| m.get(path).cloned())
        .map(FileWords)
}

/// Files read as siblings whose text holds glue (see `Sibling::at`): their text is not read
/// again to learn it.
static GLUE: LazyLock<Mutex<HashSet<PathBuf>>> = LazyLock::new(Default::default);

/// Was the file at `path` found to hold glue text by this run?
pub(super) fn known_glue(path: &Path) -> bool {
    GLUE.lock().ok().is_some_and(|g| g.contains(path))
}

/// Records that the file at `path`, of text `text`, holds glue, and keeps its words (within
/// the budget) for the questions that will name them.
pub(super) fn note_glue(path: &Path, text: &str) {
    if WORDS.lock().ok().is_some_and(|m| !m.contains_key(path)) {
        keep_words(path, Some(text));
    }
    if let Ok(mut g) = GLUE.lock() {
        g.insert(path.to_path_buf());
    }
}

/// Does the text of the file at `path` spell `name` as a whole word (read once per run
/// within the word budget)? From the kept words, a hash collision can answer yes for a file
/// that does not: callers use the answer to skip files, and read those they keep.
pub(super) fn spelled_in(path: &Path, name: &str) -> bool {
    if let Some(answer) = kept_words(path).and_then(|w| w.spells(name)) {
        return answer;
    }
    read_and_keep_words(path, name).is_some_and(|t| spells(&t, name))
}

/// The text of the file at `path`, its words kept for the run when `name` is a question
/// they can answer next time.
fn read_and_keep_words(path: &Path, name: &str) -> Option<String> {
    let text = read_small(path);
    if plain(name) && WORDS.lock().ok().is_some_and(|m| !m.contains_key(path)) {
        keep_words(path, text.as_deref());
    }
    text
}

/// The glue facts of the file at `path` when its text spells `name` as a whole word (parsed
/// once per run and kept).
pub(super) fn facts_naming(path: &Path, name: &str, options: &Options) -> Option<Arc<FileFacts>> {
    if let Some(known) = known_facts(path) {
        return known;
    }
    if kept_words(path).is_some_and(|w| !w.may_spell(name)) {
        return None;
    }
    let text = read_and_keep_words(path, name)?;
    if !spells(&text, name) {
        return None;
    }
    // A text that holds no glue has none to parse for (as `Sibling::at` reads it).
    let facts = if crate::cuda::glue::is_glue_text(&text) {
        facts_of_text(path, &text, options)
    } else {
        Some(Arc::new(FileFacts::default()))
    };
    remember(path, facts.clone());
    facts
}

/// A function defined in another file that launches kernels with a tensor's memory.
#[derive(Debug, Clone)]
pub struct ForeignLauncher {
    pub path: PathBuf,
    /// The parameter whose memory reaches the kernel.
    pub param: usize,
}

/// Where function `name`, which the file at `path` calls but does not define, is defined in
/// the C/C++/CUDA files of the file's directory, its parent or its subdirectories (the
/// `cuda/` folder of an extension's bindings): when every definition found hands a tensor
/// parameter's memory to a kernel without a device guard of its own, the first of them.
pub fn foreign_launcher(path: &Path, options: &Options, name: &str) -> Option<ForeignLauncher> {
    let me = std::path::absolute(path).ok()?;
    let dir = me.parent()?;
    let mut dirs: Vec<PathBuf> = std::iter::once(dir)
        .chain(dir.parent())
        .map(Path::to_path_buf)
        .collect();
    dirs.extend(sub_dirs(dir).iter().cloned());
    let mut found: Option<ForeignLauncher> = None;
    for d in &dirs {
        if !d.is_dir() {
            continue;
        }
        gpulint_source::note_dependency(d);
        for f in dir_files(d).iter().filter(|f| **f != me) {
            gpulint_source::note_dependency(f);
            // Parsed only when its text names the function.
            let Some(facts) = facts_naming(f, name, options) else {
                continue;
            };
            for g in facts.fns.iter().filter(|g| g.name == name) {
                match g.launches {
                    Some(param) if !g.guarded => {
                        found.get_or_insert(ForeignLauncher {
                            path: f.clone(),
                            param,
                        });
                    }
                    _ => return None,
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_words_rule_out_only_names_not_spelled() {
        let words = FileWords(Some(Arc::new(words_of("void foo_cuda(at::Tensor x);"))));
        assert!(words.may_spell("foo_cuda"));
        assert!(!words.may_spell("foo"));
        assert_eq!(words.spells("foo_cuda"), Some(true));
        assert_eq!(words.spells("foo"), Some(false));
        // Not a single word: the word set cannot tell, the text is searched.
        assert_eq!(words.spells("at::Tensor"), None);
        assert!(words.may_spell("at::Tensor"));
        // An unreadable or too large file spells nothing.
        assert!(!FileWords(None).may_spell("foo_cuda"));
        assert!(!FileWords(None).may_spell("at::Tensor"));
        assert_eq!(FileWords(None).spells("at::Tensor"), Some(false));
    }

    /// `facts_naming` takes a text without glue for one whose parse has no facts, without
    /// parsing it: so it is on every C/C++/CUDA fixture without glue.
    #[test]
    fn a_text_without_glue_parses_to_no_facts() {
        let mut seen = 0;
        let exts = ["cu", "cuh", "cpp", "cc", "h", "hpp"];
        for (path, text) in crate::test_fixtures::texts(&["cuda", "link"], &exts) {
            if crate::cuda::glue::is_glue_text(&text) {
                continue;
            }
            let tree = gpulint_syntax::parse(gpulint_syntax::Lang::Cuda, &text).unwrap();
            let facts =
                crate::cuda::builder::CudaBuilder::glue_facts_of(&text, &tree, &Options::default());
            assert_eq!(
                format!("{facts:?}"),
                format!("{:?}", FileFacts::default()),
                "{}",
                path.display()
            );
            seen += 1;
        }
        assert!(seen > 20, "only {seen} files without glue");
    }

    #[test]
    fn words_answer_as_spells_does() {
        let text = "void foo_cuda(at::Tensor x) { foo(x); bar2 (x); }\n// é_baz qux_é 0x1f\n";
        let words = words_of(text);
        for name in [
            "foo_cuda", "foo", "cuda", "bar2", "bar", "Tensor", "at", "_baz", "qux_", "0x1f", "x1f",
        ] {
            assert_eq!(
                words.contains(&word_hash(name.as_bytes())),
                spells(text, name),
                "{name}"
            );
        }
    }
}
