//! The one orchestrator of `check`: the discovered files checked in parallel (through the
//! cache when asked), each with the engine of its own settings, then the C++/CUDA sources that
//! checked Python files build into extensions, then the notes that tie those sources to the
//! Python entries that build them.

use crate::cache::{self, Cache};
use crate::checker::collects_ext_calls;
use crate::engine::{Engine, FileResult, Status};
use crate::link::{identity, Link};
use gpulint_diagnostics::Related;
use gpulint_semantic::cuda::glue_project::pending;
use gpulint_semantic::cuda::glue_python::builds_module;
use gpulint_semantic::python::extensions::may_define_builds;
use gpulint_source::display_path;
use gpulint_syntax::Lang;
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

mod candidate;
mod spread;
pub use candidate::Candidate;
use spread::{same_folder, size_on_disk, spread};

/// Entries named in one note before the rest are counted.
const MAX_ENTRIES_IN_NOTE: usize = 3;

/// How a run reports its progress (a progress bar on a terminal); every method does nothing by
/// default.
pub trait Progress: Sync {
    /// One more file is done.
    fn inc(&self) {}
    /// `n` more files are to be checked.
    fn add(&self, _n: u64) {}
    /// The file shown as `display` was read but not parsed: no enabled rule could match it.
    /// Called from the workers, in no particular order.
    fn not_parsed(&self, _display: &str) {}
}

/// No progress shown.
pub struct Quiet;

impl Progress for Quiet {}

/// The engine that checks each file: the one of the settings that apply to it. Resolving is
/// expected to be cheap (memoised by folder); files of the same settings share one engine.
pub trait Engines: Sync {
    /// The engine for the file at `path`; `None` when its settings cannot be had (the caller
    /// reports why), and the file is left out.
    fn engine(&self, path: &Path) -> Option<Arc<Engine>>;
}

/// One engine for every file.
impl Engines for Arc<Engine> {
    fn engine(&self, _: &Path) -> Option<Arc<Engine>> {
        Some(self.clone())
    }
}

/// Where the cache is and the key of the run's command-line overrides (see `Cache::open`).
pub struct CacheAt {
    pub dir: PathBuf,
    pub key: String,
}

/// Checks `files` in parallel on `pool`, each with its engine, through the cache when `cache`
/// says where it is, then the extension sources the checked Python files build (unless
/// `excluded` says the user excluded them), and annotates findings in those sources. Returns
/// the results worth keeping, in the order of `files` (then of the extension sources), and
/// the count of the files that had nothing to show (their results are dropped as they come).
pub fn run_files(
    engines: &dyn Engines,
    files: &[Candidate],
    pool: &rayon::ThreadPool,
    cache: Option<&CacheAt>,
    cwd: &Path,
    progress: &dyn Progress,
    excluded: &(dyn Fn(&Path) -> bool + Sync),
) -> (Vec<FileResult>, Clean) {
    let run = run_files_with(
        engines,
        files,
        pool,
        cache,
        cwd,
        progress,
        excluded,
        &|r: FileResult| r,
    );
    (run.kept, run.clean)
}

/// What [`run_files_with`] returns.
pub struct Run<T> {
    /// What `finish` made of each result worth keeping, in the order of the files (then of
    /// the extension sources).
    pub kept: Vec<T>,
    /// The files that had nothing to show.
    pub clean: Clean,
    /// The extension builds of the checked files (as shown, and the builds), in the same order.
    pub links: Vec<(String, Vec<Link>)>,
}

/// [`run_files`], with `finish` turning each result worth keeping into what the caller keeps
/// of it, on the worker that checked the file, as soon as it is complete (annotated): a caller
/// that renders the findings there need not keep any file's text until the run ends.
///
/// The Python files are checked first: the extension builds they hold say which sources are
/// checked too and which findings are annotated, so every other file's result is complete
/// when it is checked. What they pass to the functions the extensions bind is weighed by
/// the op-glue rules (see `glue_python`).
#[allow(clippy::too_many_arguments)]
pub fn run_files_with<T: Send>(
    engines: &dyn Engines,
    files: &[Candidate],
    pool: &rayon::ThreadPool,
    cache: Option<&CacheAt>,
    cwd: &Path,
    progress: &dyn Progress,
    excluded: &(dyn Fn(&Path) -> bool + Sync),
    finish: &(dyn Fn(FileResult) -> T + Sync),
) -> Run<T> {
    let cache = cache.map(|at| Cache::open(&at.dir, &at.key));
    let clean_checked = AtomicUsize::new(0);
    let clean_prefiltered = AtomicUsize::new(0);
    let key = |path: &Path| cwd.join(path).display().to_string();
    // `read`: the file's bytes when they were read already (by its engine's size limit).
    let check_file = |c: &Candidate, read: Option<Vec<u8>>| {
        let path = c.path();
        let Some(engine) = engines.engine(&path) else {
            progress.inc();
            return None;
        };
        let engine = engine.as_ref();
        let check_read = |read: Option<Vec<u8>>| match read {
            Some(bytes) => engine.check_bytes(&path, c.display(), bytes, c.lang),
            None => engine.check_path(&path, c.display(), c.lang),
        };
        // A manifest's findings depend on the files it includes: never cached (they are cheap
        // to check).
        let out = match &cache {
            None => (check_read(read), None),
            Some(_) if c.lang == Lang::Manifest => (check_read(read), None),
            Some(cache) => {
                let bytes = match read.map_or_else(
                    || gpulint_source::read_bytes(&path, engine.settings.max_file_size),
                    Ok,
                ) {
                    Ok(b) => b,
                    Err(_) => {
                        progress.inc();
                        return Some((engine.check_path(&path, c.display(), c.lang), None));
                    }
                };
                let mut hash = cache::result_hash(&bytes, engine.settings_hash());
                if c.lang == Lang::Cuda {
                    // Op-glue findings weigh the Python callers of the functions bound.
                    if let Some(p) = gpulint_semantic::cuda::glue_python::current() {
                        hash ^= p.hash().rotate_left(1);
                    }
                }
                let k = key(&path);
                let hit = cache
                    .get(&k, hash, bytes.len().max(1) * 2)
                    .and_then(|cached| engine.restore(&path, c.display(), bytes.clone(), cached));
                let result =
                    hit.unwrap_or_else(|| engine.check_bytes(&path, c.display(), bytes, c.lang));
                let entry =
                    matches!(result.status, Status::Checked | Status::Prefiltered).then(|| {
                        let entry = Cache::entry(
                            hash,
                            result.status == Status::Checked,
                            result.partial,
                            &result.report.diagnostics,
                            &result.dependencies,
                            &result.links,
                        );
                        (k, Cache::with_calls(entry, &result.calls))
                    });
                (result, entry)
            }
        };
        progress.inc();
        Some(out)
    };
    // A file with nothing to show is counted and dropped here, on its worker: the run's memory
    // does not grow with the number of files.
    // `built`: the modules the run's extension builds define, when known; a file's calls into
    // other modules are dropped at once.
    let check_one = |c: &Candidate,
                     read: Option<Vec<u8>>,
                     built_by: Option<&BuiltBy>,
                     built: Option<&[String]>| {
        let out = check_file(c, read);
        if c.lang == Lang::Cuda {
            pending::done(&c.path()); // Its turn is over: no tree of it is kept any longer.
        }
        let (mut result, entry) = out?;
        if result.status == Status::Prefiltered {
            progress.not_parsed(&result.report.display_path);
        }
        if let Some(built) = built {
            result
                .calls
                .retain(|call| builds_module(built, &call.module));
        }
        let calls = (!result.calls.is_empty()).then(|| {
            (
                result.report.display_path.clone(),
                std::mem::take(&mut result.calls),
            )
        });
        if is_clean(&result) {
            let count = if result.status == Status::Prefiltered {
                &clean_prefiltered
            } else {
                &clean_checked
            };
            count.fetch_add(1, Ordering::Relaxed);
            return Some(Slot {
                kept: None,
                linked: None,
                calls,
                entry,
            });
        }
        forget_text(&mut result);
        if let Some(built_by) = built_by {
            built_by.annotate(&mut result, cwd);
        }
        let linked = (!result.links.is_empty())
            .then(|| (result.report.display_path.clone(), result.links.clone()));
        Some(Slot {
            kept: Some(finish(result)),
            linked,
            calls,
            entry,
        })
    };
    // Python files first (only they build extensions), then the rest with the notes of the
    // extension builds at hand. Files are named by their index in `files` (a `u32`: a list of
    // more files than that would not fit in memory), so the lists of a phase take 4 bytes a
    // file.
    let builds =
        |c: &Candidate| c.lang == Lang::Python && Lang::of_path(&c.path()) != Some(Lang::Cuda);
    let (first, rest): (Vec<u32>, Vec<u32>) =
        (0..files.len() as u32).partition(|&i| builds(&files[i as usize]));
    // Only the files with something to keep take room until the end (by their index).
    let keep = |slot: Option<Slot<T>>| slot.filter(Slot::holds);
    let file = |i: u32| &files[i as usize];
    let size = |i: u32| size_on_disk(file(i));
    let same = |a: u32, b: u32| same_folder(file(a), file(b));
    gpulint_semantic::cuda::glue_python::install(None);
    // Of those, each is read once here. The files whose text can define an extension build,
    // and those whose check keeps no calls into native modules, are checked at once with
    // those bytes; the others wait until every build is known, so that the calls they make
    // are kept only for the modules built (the calls into every other library are not kept
    // until the end of the run). They are read again then.
    let now = |i: u32| {
        let c = file(i);
        let path = c.path();
        // Unreadable, or without settings: checked at once, where the check says why.
        let read = engines.engine(&path).and_then(|e| {
            let bytes = gpulint_source::read_bytes(&path, e.settings.max_file_size).ok()?;
            Some((e, bytes))
        });
        match read {
            Some((e, bytes))
                if !may_define_builds(&bytes) && collects_ext_calls(&e.settings, &bytes) =>
            {
                Some(First::Later)
            }
            read => keep(check_one(c, read.map(|(_, b)| b), None, None)).map(First::Done),
        }
    };
    let mut slots: Vec<(u32, Slot<T>)> = Vec::new();
    let mut calling: Vec<u32> = Vec::new();
    for (i, first) in spread(pool, &first, size, same, now) {
        match first {
            First::Done(slot) => slots.push((i, slot)),
            First::Later => calling.push(i),
        }
    }
    drop(first);
    let built: Vec<String> = slots
        .iter()
        .filter_map(|(_, s)| s.linked.as_ref())
        .flat_map(|(_, l)| l.iter().filter_map(|l| l.module.clone()))
        .collect();
    for (_, slot) in &mut slots {
        if let Some((_, calls)) = &mut slot.calls {
            calls.retain(|call| builds_module(&built, &call.module));
            if calls.is_empty() {
                slot.calls = None;
            }
        }
    }
    // Back in the order of the files (with several threads they come back as they finish),
    // so that the files of a folder stay together.
    calling.sort_unstable();
    slots.extend(spread(pool, &calling, size, same, |i| {
        keep(check_one(file(i), None, None, Some(&built)))
    }));
    drop(calling);
    slots.sort_unstable_by_key(|(i, _)| *i);
    let linked = || slots.iter().filter_map(|(_, s)| s.linked.as_ref());
    let built_by = BuiltBy::new(linked().map(|(p, l)| (p.as_str(), l.as_slice())), cwd);
    // What the Python files pass to the functions the extensions bind, for the op-glue rules.
    let builds: Vec<(String, Vec<PathBuf>)> = linked()
        .flat_map(|(_, l)| l)
        .filter_map(|l| {
            let sources = l.sources.iter().map(|s| cwd.join(s)).collect();
            Some((l.module.clone()?, sources))
        })
        .collect();
    // The C++/CUDA sources of the extensions that checked Python files build are checked too.
    let extra = extra_sources(linked().flat_map(|(_, l)| l), files, cwd, excluded);
    let calls = slots.iter_mut().filter_map(|(_, s)| s.calls.take());
    let callers = gpulint_semantic::cuda::glue_python::PythonCallers::new(builds, calls);
    gpulint_semantic::cuda::glue_python::install(Some(Arc::new(callers)));
    if !extra.is_empty() {
        progress.add(extra.len() as u64);
    }
    // A C/C++/CUDA file parsed by a question of another file before its turn keeps its tree.
    let later = rest.iter().map(|&i| file(i)).chain(&extra);
    pending::expect(later.filter(|c| c.lang == Lang::Cuda).map(|c| c.path()));
    // Headers before the files that include them: the facts the includers read from a header
    // come from its own check (see `headers::share`) instead of a second parse.
    let (headers, mut rest): (Vec<u32>, Vec<u32>) = rest.into_iter().partition(|&i| {
        file(i).lang == Lang::Cuda
            && gpulint_semantic::cuda::headers::is_header_name(&file(i).path())
    });
    // The extension sources after the files found, numbered on from them.
    let all = |i: u32| {
        let i = i as usize;
        files.get(i).unwrap_or_else(|| &extra[i - files.len()])
    };
    let checked = |list: &[u32]| {
        spread(
            pool,
            list,
            |i| size_on_disk(all(i)),
            |a, b| same_folder(all(a), all(b)),
            |i| keep(check_one(all(i), None, built_by.as_ref(), None)),
        )
    };
    slots.extend(checked(&headers));
    drop(headers);
    rest.extend((0..extra.len()).map(|j| (files.len() + j) as u32));
    slots.extend(checked(&rest));
    pending::expect(Vec::new());
    slots.sort_unstable_by_key(|(i, _)| *i);
    let mut kept = Vec::new();
    let mut links = Vec::new();
    let mut entries = Vec::new();
    for (_, slot) in slots {
        entries.extend(slot.entry);
        kept.extend(slot.kept);
        links.extend(slot.linked);
    }
    if let Some(cache) = cache {
        // A cache that cannot be written only makes the next run slower.
        let _ = cache.save(entries);
    }
    let clean = Clean {
        checked: clean_checked.into_inner(),
        prefiltered: clean_prefiltered.into_inner(),
    };
    Run { kept, clean, links }
}

/// A Python file in the first turn: checked (what the run keeps of it, if anything), or left
/// for the turn after every extension build is known. Only files with something to keep and
/// the files left are listed, for the span of the first turn: not worth a box per file.
#[allow(clippy::large_enum_variant)]
enum First<T> {
    Done(Slot<T>),
    Later,
}

/// What the run keeps of one checked file until it ends.
struct Slot<T> {
    kept: Option<T>,
    /// The file as shown and the extensions it builds, when it builds any.
    linked: Option<(String, Vec<Link>)>,
    /// The file as shown and its calls into extension modules, when it makes any.
    calls: Option<(String, Vec<gpulint_semantic::python::ext_calls::ExtCall>)>,
    entry: Option<(String, cache::Entry)>,
}

impl<T> Slot<T> {
    fn holds(&self) -> bool {
        self.kept.is_some() || self.linked.is_some() || self.calls.is_some() || self.entry.is_some()
    }
}

/// The files of a run that had nothing to show (see [`is_clean`]): only counted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Clean {
    /// Parsed and checked.
    pub checked: usize,
    /// Read, but not parsed: no enabled rule could match them.
    pub prefiltered: usize,
}

/// Nothing after the check reads the result of a file that was checked (or prefiltered)
/// completely, without findings and without extension builds: the output, `--add-noqa`, the
/// notes of built sources and the summary only need it counted.
fn is_clean(result: &FileResult) -> bool {
    matches!(result.status, Status::Checked | Status::Prefiltered)
        && !result.partial
        && result.report.diagnostics.is_empty()
        && result.links.is_empty()
}

/// Drops the text of a file without findings once it is checked: nothing after the check reads
/// it (output, `--add-noqa` and the notes of built sources only look at files with findings),
/// so the run's memory does not hold the corpus.
fn forget_text(result: &mut FileResult) {
    let report = &mut result.report;
    if report.diagnostics.is_empty() && !report.source.text.is_empty() {
        report.source = Arc::new(gpulint_source::SourceFile::new(
            report.source.path.clone(),
            report.source.display_path.clone(),
            String::new(),
        ));
        report.notebook = None;
    }
}

/// The C++/CUDA sources named by `links` (in the order of the checked files) that are not among `files`,
/// sorted, without duplicates, leaving out those `excluded` says the user excluded.
pub fn extra_sources<'a>(
    links: impl IntoIterator<Item = &'a Link>,
    files: &[Candidate],
    cwd: &Path,
    excluded: &dyn Fn(&Path) -> bool,
) -> Vec<Candidate> {
    // The sources that could be checked, by identity, in order.
    let mut sources: Vec<(&'a PathBuf, PathBuf)> = Vec::new();
    for link in links {
        for source in &link.sources {
            if Lang::of_path(source) == Some(Lang::Cuda) && !excluded(source) {
                sources.push((source, identity(source, cwd)));
            }
        }
    }
    if sources.is_empty() {
        return Vec::new();
    }
    // Only the files found that can be one of them are resolved: a file that is not a link
    // has the name of its identity, so a file of another name (and no link) is none of them.
    let names: HashSet<&std::ffi::OsStr> = sources
        .iter()
        .filter_map(|(_, id)| id.file_name())
        .collect();
    let mut known: HashSet<PathBuf> = files
        .iter()
        .filter(|c| match c.path().components().next_back() {
            Some(std::path::Component::Normal(name)) => {
                names.contains(name)
                    || std::fs::symlink_metadata(cwd.join(c.path()))
                        .map_or(true, |m| m.file_type().is_symlink())
            }
            _ => true,
        })
        .map(|c| identity(&c.path(), cwd))
        .collect();
    let mut extra = Vec::new();
    for (source, id) in sources {
        if known.insert(id) {
            extra.push(Candidate::new(
                source.clone(),
                display_path(source, cwd),
                Lang::Cuda,
            ));
        }
    }
    extra.sort();
    extra
}

/// Adds to every finding in a source built by a Python entry a note naming the entries (and
/// the same as related locations).
pub fn annotate(results: &mut [FileResult], cwd: &Path) {
    let linked = results
        .iter()
        .map(|r| (r.report.display_path.as_str(), r.links.as_slice()));
    let Some(built_by) = BuiltBy::new(linked, cwd) else {
        return;
    };
    for r in results.iter_mut() {
        built_by.annotate(r, cwd);
    }
}

/// The Python entries that build each C++/CUDA source (by [`identity`]): what, where, and
/// how it is described.
pub struct BuiltBy(BTreeMap<PathBuf, Vec<(String, Option<usize>, String)>>);

impl BuiltBy {
    /// From the extension builds of the Python files (as shown, and their builds); `None`
    /// when there are none.
    pub fn new<'a>(
        linked: impl IntoIterator<Item = (&'a str, &'a [Link])>,
        cwd: &Path,
    ) -> Option<BuiltBy> {
        let mut built_by: BTreeMap<PathBuf, Vec<(String, Option<usize>, String)>> = BTreeMap::new();
        for (display, links) in linked {
            for link in links {
                for source in &link.sources {
                    built_by.entry(identity(source, cwd)).or_default().push((
                        link.entry.clone().unwrap_or_else(|| display.to_string()),
                        // A notebook's line is cell-relative: no place in the file to point at.
                        link.cell.is_none().then_some(link.line),
                        link.describe(display),
                    ));
                }
            }
        }
        if built_by.is_empty() {
            return None;
        }
        for entries in built_by.values_mut() {
            entries.sort();
            entries.dedup();
        }
        Some(BuiltBy(built_by))
    }

    /// Adds the note and related locations to the findings of `r` when it is a source that
    /// Python entries build.
    pub fn annotate(&self, r: &mut FileResult, cwd: &Path) {
        if r.report.diagnostics.is_empty()
            || Lang::of_path(&r.report.source.path) != Some(Lang::Cuda)
        {
            return;
        }
        let Some(entries) = self.0.get(&identity(&r.report.source.path, cwd)) else {
            return;
        };
        let mut names: Vec<&str> = entries
            .iter()
            .take(MAX_ENTRIES_IN_NOTE)
            .map(|e| e.2.as_str())
            .collect();
        let more = entries.len().saturating_sub(MAX_ENTRIES_IN_NOTE);
        let rest = format!("and {more} more");
        if more > 0 {
            names.push(&rest);
        }
        let note = format!("built by {}", names.join(", "));
        for d in &mut r.report.diagnostics {
            d.notes.push(note.clone());
            d.related
                .extend(entries.iter().filter_map(|(path, line, what)| {
                    Some(Related {
                        path: path.clone(),
                        line: (*line)?,
                        message: format!("built by {what}"),
                    })
                }));
        }
    }
}

/// For `--verbose`: what each extension build links, and what of it could not be read (in
/// the order of the files, then of the calls), from the files as shown and their builds.
pub fn describe_all<'a>(linked: impl IntoIterator<Item = (&'a str, &'a [Link])>) -> Vec<String> {
    let mut out = Vec::new();
    for (display, links) in linked {
        for link in links {
            let n = link.sources.len();
            let mut line = format!(
                "linked {}: {n} source{}",
                link.describe(display),
                if n == 1 { "" } else { "s" }
            );
            if link.inline > 0 {
                line.push_str(&format!(", {} inline", link.inline));
            }
            for (l, why) in &link.unresolved {
                line.push_str(&format!("; line {l} not resolved: {why}"));
            }
            out.push(line);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Settings;

    #[test]
    fn files_without_anything_to_show_are_counted_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            Candidate::new(path, name.to_string(), Lang::Python)
        };
        let files = vec![
            // A finding: kept, with its text.
            write(
                "a_finding.py",
                "import torch\n\ndef train(model, loader, optimizer):\n    for x, y in loader:\n        loss = torch.nn.functional.mse_loss(model(x), y)\n        loss.backward()\n        optimizer.step()\n        torch.cuda.empty_cache()\n",
            ),
            // Parsed and checked, nothing found: counted.
            write("b_clean.py", "import torch\nx = torch.ones(3)\n"),
            // No rule can fire: not parsed, counted.
            write("c_plain.py", "print('hello')\n"),
            // Parsed with errors: kept for the summary's count of partly parsed files.
            write("d_partial.py", "import torch\ndef f(:\n"),
        ];
        let engine = Arc::new(Engine::new(Settings::default()));
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let (results, clean) =
            run_files(&engine, &files, &pool, None, dir.path(), &Quiet, &|_| false);
        let kept: Vec<&str> = results
            .iter()
            .map(|r| r.report.display_path.as_str())
            .collect();
        assert_eq!(kept, ["a_finding.py", "d_partial.py"]);
        assert!(!results[0].report.diagnostics.is_empty());
        assert!(!results[0].report.source.text.is_empty());
        assert!(results[1].partial);
        assert_eq!(
            clean,
            Clean {
                checked: 1,
                prefiltered: 1
            }
        );
    }
}
