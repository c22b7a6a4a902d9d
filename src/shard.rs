//! `gpulint check --shard I/N`: a deterministic part of the discovered files, for splitting one
//! check over parallel CI jobs whose reports `gpulint merge` joins again.
//!
//! Which shard checks a file:
//!
//! - A file goes to shard `xxh3(path) % N + 1`, where `path` is the file's real path relative to
//!   the run's project folder (that of the first checked path's configuration file, else its
//!   repository's, else the path's own), with `/` separators.
//!   It depends on nothing but that path, so adding or removing other files moves no file.
//! - A Python file that builds a native extension and the C++/CUDA sources it names stay
//!   together: the builders and sources linked to one another (a source built by two Python
//!   files ties them both to it) form one group, which goes to the shard of its Python builder
//!   with the smallest path. A source in a group is checked there whether or not the walk found
//!   it, and every other shard leaves it alone, so it is reported once, with the `built by`
//!   notes of all its builders, exactly as in an unsharded run.
//!
//! - A Python file that calls into an extension module that a build of the run makes
//!   (`ext.fn(…)` where a build names `ext`) joins that build's group: OP001–OP004 weigh what
//!   every call of a bound function passes, so all of them are read with its sources.
//!
//! To know the groups before checking, every shard reads the discovered Python files for the
//! extension builds they contain (a cheap pre-pass: only files that mention
//! `cpp_extension` or `load_op_library` are parsed, and, when an op-glue rule is enabled, those
//! that mention `torch`; no Python rule runs on them). It is needed only when a CUDA rule is
//! enabled for the file and N > 1. Each file is read with the
//! engine of its own settings, as the check reads it.

use gpulint_diagnostics::RuleLang;
use gpulint_linter::engine::Engine;
use gpulint_linter::registry;
use gpulint_linter::run::{Candidate, Engines};
use gpulint_syntax::Lang;
use rayon::prelude::*;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// `--shard I/N`: the `index`-th (1-based) of `count` shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

/// Parses `I/N` (1 ≤ I ≤ N), for clap.
pub fn parse_shard(s: &str) -> Result<Shard, String> {
    let Some((i, n)) = s.split_once('/') else {
        return Err("expected I/N, e.g. `--shard 2/4` (the second of four shards)".into());
    };
    let number = |part: &str, what: &str| -> Result<u32, String> {
        part.trim().parse::<u32>().map_err(|_| {
            format!("{what} `{part}` is not a whole number (expected I/N, e.g. `--shard 2/4`)")
        })
    };
    let (index, count) = (number(i, "I")?, number(n, "N")?);
    if count == 0 {
        return Err("N must be at least 1".into());
    }
    if index == 0 || index > count {
        return Err(format!(
            "I must be between 1 and N ({count}), got {index} (shards are numbered from 1)"
        ));
    }
    Ok(Shard { index, count })
}

/// What one shard checks.
pub struct Plan {
    /// The discovered files of this shard.
    pub files: Vec<Candidate>,
    /// The shard (0-based) of each grouped file (Python builders and their sources), by real path.
    grouped: HashMap<PathBuf, u32>,
    root: PathBuf,
    cwd: PathBuf,
    shard: Shard,
}

impl Plan {
    /// Does this shard check the file at `path` (found by the walk or named by a build)?
    pub fn owns(&self, path: &Path) -> bool {
        let id = identity(path, &self.cwd);
        let shard = match self.grouped.get(&id) {
            Some(s) => *s,
            None => shard_of(&key(&id, &self.root), self.shard.count),
        };
        shard == self.shard.index - 1
    }
}

/// The 0-based shard of a path key.
fn shard_of(key: &str, count: u32) -> u32 {
    (xxhash_rust::xxh3::xxh3_64(key.as_bytes()) % u64::from(count)) as u32
}

/// The real path of a file, absolute (the path itself, made absolute, where it cannot be resolved).
fn identity(path: &Path, cwd: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        cwd.join(path)
    };
    std::fs::canonicalize(&absolute).unwrap_or(absolute)
}

/// The key a file is hashed by: its real path relative to `root`, with `/` separators.
fn key(identity: &Path, root: &Path) -> String {
    let relative = identity.strip_prefix(root).unwrap_or(identity);
    relative
        .to_string_lossy()
        .replace(std::path::MAIN_SEPARATOR, "/")
}

/// Decides what `shard` checks of `files` (see the module documentation); `root` is the
/// project folder the keys are relative to.
pub fn plan(
    engines: &dyn Engines,
    root: &Path,
    files: &[Candidate],
    shard: Shard,
    cwd: &Path,
    pool: &rayon::ThreadPool,
) -> Plan {
    let root = root.to_path_buf();
    let ids: Vec<PathBuf> =
        pool.install(|| files.par_iter().map(|c| identity(&c.path(), cwd)).collect());
    let links = if shard.count > 1 {
        builds(engines, files, pool)
    } else {
        Vec::new()
    };
    // Union-find over the builders and their sources.
    let mut nodes: HashMap<PathBuf, usize> = HashMap::new();
    let mut parent: Vec<usize> = Vec::new();
    let mut node = |p: PathBuf, parent: &mut Vec<usize>| -> usize {
        *nodes.entry(p).or_insert_with(|| {
            parent.push(parent.len());
            parent.len() - 1
        })
    };
    fn find(parent: &mut [usize], mut x: usize) -> usize {
        while parent[x] != x {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        x
    }
    let mut builders: Vec<(usize, String)> = Vec::new();
    let mut modules: Vec<(&str, usize)> = Vec::new();
    for built in links.iter().filter(|b| !b.sources.is_empty()) {
        let i = built.index;
        let b = node(ids[i].clone(), &mut parent);
        builders.push((b, key(&ids[i], &root)));
        modules.extend(built.modules.iter().map(|m| (m.as_str(), b)));
        for s in &built.sources {
            let s = node(identity(s, cwd), &mut parent);
            let (rb, rs) = (find(&mut parent, b), find(&mut parent, s));
            parent[rs] = rb;
        }
    }
    // A Python file that calls into an extension module joins the group of its builder: the
    // op-glue rules weigh every call of a bound function, so all of them are checked with it.
    for built in &links {
        for called in &built.calls {
            for &(_, b) in modules
                .iter()
                .filter(|(m, _)| gpulint_semantic::cuda::glue_python::same_module(called, m))
            {
                let c = node(ids[built.index].clone(), &mut parent);
                let (rb, rc) = (find(&mut parent, b), find(&mut parent, c));
                parent[rc] = rb;
            }
        }
    }
    // Each group goes to the shard of its builder with the smallest key.
    let mut group_key: HashMap<usize, String> = HashMap::new();
    for (b, k) in builders {
        let r = find(&mut parent, b);
        let e = group_key.entry(r).or_insert_with(|| k.clone());
        if k < *e {
            *e = k;
        }
    }
    let grouped: HashMap<PathBuf, u32> = nodes
        .iter()
        .map(|(p, &n)| {
            let r = find(&mut parent, n);
            let shard = match group_key.get(&r) {
                Some(k) => shard_of(k, shard.count),
                None => shard_of(&key(p, &root), shard.count),
            };
            (p.clone(), shard)
        })
        .collect();
    let mine = shard.index - 1;
    let files = files
        .iter()
        .zip(&ids)
        .filter(|(_, id)| {
            grouped
                .get(*id)
                .copied()
                .unwrap_or_else(|| shard_of(&key(id, &root), shard.count))
                == mine
        })
        .map(|(c, _)| c.clone())
        .collect();
    Plan {
        files,
        grouped,
        root,
        cwd: cwd.to_path_buf(),
        shard,
    }
}

/// The engine that only reads the extensions Python files build: `engine`'s CUDA rules and
/// nothing else; `None` when it has no CUDA rule (nothing is linked).
fn linker(engine: &Engine) -> Option<Engine> {
    let settings = &engine.settings;
    let cuda: std::collections::BTreeSet<&'static str> = registry::all_metas()
        .iter()
        .filter(|m| m.lang == RuleLang::Source(Lang::Cuda) && settings.is_enabled(m.code))
        .map(|m| m.code)
        .collect();
    if cuda.is_empty() {
        return None;
    }
    let mut link_settings = settings.clone();
    link_settings.enabled = cuda;
    link_settings.explicit.clear();
    Some(Engine::new(link_settings))
}

/// What the pre-pass learns of one Python file (by index in `files`): the C++/CUDA sources it
/// builds into extensions, the names of the modules those builds make, and the modules it
/// calls into (for the op-glue rules, see `glue_python`).
struct Built {
    index: usize,
    sources: Vec<PathBuf>,
    modules: Vec<String>,
    calls: Vec<String>,
}

/// [`Built`] of each discovered Python file that builds an extension or calls into a module
/// that may be one, read as a check would read them (with the settings of each file), with
/// no Python rule run.
fn builds(engines: &dyn Engines, files: &[Candidate], pool: &rayon::ThreadPool) -> Vec<Built> {
    // One linker per engine (files of the same settings share one).
    let linkers: Mutex<HashMap<usize, Option<Arc<Engine>>>> = Mutex::default();
    let linker_for = |engine: &Arc<Engine>| -> Option<Arc<Engine>> {
        let id = Arc::as_ptr(engine) as usize;
        if let Some(l) = linkers.lock().unwrap_or_else(|e| e.into_inner()).get(&id) {
            return l.clone();
        }
        let l = linker(engine).map(Arc::new);
        linkers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(id)
            .or_insert(l)
            .clone()
    };
    let needles = gpulint_semantic::python::extensions::NEEDLES;
    pool.install(|| {
        files
            .par_iter()
            .enumerate()
            .filter(|(_, c)| c.lang == Lang::Python)
            .filter_map(|(i, c)| {
                let engine = engines.engine(&c.path())?;
                let bytes =
                    gpulint_source::read_bytes(&c.path(), engine.settings.max_file_size).ok()?;
                // A caller of an extension mentions torch (see `ext_calls`).
                let callers = gpulint_linter::checker::reads_python_callers(&engine.settings)
                    && memchr::memmem::find(&bytes, b"torch").is_some();
                if !callers
                    && !needles
                        .iter()
                        .any(|n| memchr::memmem::find(&bytes, n.as_bytes()).is_some())
                {
                    return None;
                }
                let linker = linker_for(&engine)?;
                let result = linker.check_bytes(&c.path(), c.display(), bytes, c.lang);
                let modules = result
                    .links
                    .iter()
                    .filter_map(|l| l.module.clone())
                    .collect();
                let sources: Vec<PathBuf> = result
                    .links
                    .into_iter()
                    .flat_map(|l| l.sources)
                    .filter(|s| Lang::of_path(s) == Some(Lang::Cuda))
                    .collect();
                let calls: Vec<String> = result.calls.into_iter().map(|c| c.module).collect();
                (!sources.is_empty() || !calls.is_empty()).then_some(Built {
                    index: i,
                    sources,
                    modules,
                    calls,
                })
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_syntax() {
        assert_eq!(parse_shard("2/4"), Ok(Shard { index: 2, count: 4 }));
        assert_eq!(parse_shard("1/1"), Ok(Shard { index: 1, count: 1 }));
        assert!(parse_shard("0/3").unwrap_err().contains("between 1 and N"));
        assert!(parse_shard("4/3")
            .unwrap_err()
            .contains("between 1 and N (3)"));
        assert!(parse_shard("1/0").unwrap_err().contains("at least 1"));
        assert!(parse_shard("2").unwrap_err().contains("expected I/N"));
        assert!(parse_shard("a/3")
            .unwrap_err()
            .contains("not a whole number"));
        assert!(parse_shard("-1/3").is_err());
    }

    #[test]
    fn keys_use_slashes_and_are_relative_to_the_root() {
        let root = Path::new("/repo");
        assert_eq!(key(Path::new("/repo/ops/a.cu"), root), "ops/a.cu");
        assert_eq!(key(Path::new("/elsewhere/b.py"), root), "/elsewhere/b.py");
        // Stable: the shard of a key never changes with other files.
        assert_eq!(shard_of("ops/a.cu", 7), shard_of("ops/a.cu", 7));
    }
}
