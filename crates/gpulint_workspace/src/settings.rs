//! The one settings loader of every command: the configuration that applies to a file (the
//! nearest in its folder or above, or the one named with `--config`, or none with
//! `--isolated`), then the settings built from it and the command line's overrides.
//!
//! A [`Resolver`] gives each file its settings, engine and exclusions, memoised per folder,
//! so that a run over many projects (or a project with nested configuration files) checks
//! every file as `cd its-project && gpulint .` would.

use crate::config::{self, ConfigError, LoadedConfig};
use crate::discover::{Excludes, DEFAULT_EXCLUDE};
use gpulint_diagnostics::Severity;
use gpulint_linter::engine::Engine;
use gpulint_linter::settings::{PerFileIgnore, Selector, Settings};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

/// What the command line says about the settings; empty or `None`: the configuration's, or
/// the default.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--select`: replaces the configured selection (and its ignores).
    pub select: Vec<String>,
    pub extend_select: Vec<String>,
    pub ignore: Vec<String>,
    pub fail_on: Option<Severity>,
    pub gpu_memory: Option<u64>,
    pub gpu: Option<String>,
    pub verbose: bool,
    /// The paths the run checks (none: `.`).
    pub paths: Vec<PathBuf>,
}

/// The configuration a command runs with: none with `isolated`, the file `explicit` names, or
/// the one found from `cwd` upward.
pub fn find_config(
    explicit: Option<&Path>,
    isolated: bool,
    cwd: &Path,
) -> Result<Option<LoadedConfig>, ConfigError> {
    if isolated {
        Ok(None)
    } else if let Some(path) = explicit {
        config::load(path).map(Some)
    } else {
        config::discover(cwd)
    }
}

fn parse_selectors(list: &[String], what: &str) -> Result<Vec<Selector>, String> {
    list.iter()
        .map(|s| Selector::parse(s).map_err(|e| format!("{what}: {e}")))
        .collect()
}

/// The settings of a file: the configuration file's, with the command line's overrides (the
/// command line wins); `root` is the project's folder when there is no configuration file.
pub fn settings(
    args: &Overrides,
    loaded: Option<&LoadedConfig>,
    root: &Path,
) -> Result<Settings, String> {
    settings_with_roots(args, loaded, root, checked_roots(&args.paths))
}

/// [`settings`], with the checked paths' folders (see [`checked_roots`]) computed once by the
/// caller: a resolver makes one engine per configuration, and reading every checked path again
/// for each would grow with files × configurations.
fn settings_with_roots(
    args: &Overrides,
    loaded: Option<&LoadedConfig>,
    root: &Path,
    roots: Vec<PathBuf>,
) -> Result<Settings, String> {
    let file = loaded.map(|l| l.config.clone()).unwrap_or_default();
    let select = if !args.select.is_empty() {
        parse_selectors(&args.select, "--select")?
    } else if let Some(s) = &file.select {
        parse_selectors(s, "select")?
    } else {
        vec![Selector::parse("ALL")?]
    };
    let mut extend = parse_selectors(
        file.extend_select.as_deref().unwrap_or(&[]),
        "extend-select",
    )?;
    extend.extend(parse_selectors(&args.extend_select, "--extend-select")?);
    // An explicit --select replaces the configured selection, ignores included.
    let mut ignore = if args.select.is_empty() {
        parse_selectors(file.ignore.as_deref().unwrap_or(&[]), "ignore")?
    } else {
        Vec::new()
    };
    ignore.extend(parse_selectors(&args.ignore, "--ignore")?);

    let mut settings = Settings::with_selection(&select, &extend, &ignore);
    settings.root = loaded
        .map(|l| l.dir())
        .unwrap_or_else(|| root.to_path_buf());
    if let Ok(root) = std::fs::canonicalize(&settings.root) {
        settings.root = root;
    }
    for ignore in loaded.iter().flat_map(|l| &l.per_file_ignores) {
        let (glob, codes) = &ignore.value;
        settings.per_file_ignores.push(
            PerFileIgnore::new(glob, parse_selectors(codes, "per-file-ignores")?)?
                .relative_to(ignore.base.clone()),
        );
    }
    settings.rule_options = file.rules.clone().unwrap_or_default().into_iter().collect();
    settings.fail_on = match args.fail_on {
        Some(s) => s,
        None => file
            .fail_on
            .as_deref()
            .and_then(Severity::parse)
            .unwrap_or(Severity::Warning),
    };
    (settings.gpu_memory, settings.gpu_memory_origin) =
        config::resolve_budget(args.gpu_memory, args.gpu.as_deref(), loaded)?;
    settings.verbose = args.verbose;
    // Manifests read the files they include only below the checked paths.
    settings.roots = roots;
    Ok(settings)
}

/// The folders of the checked paths (none: `.`) as real paths, a file's being its folder,
/// without those inside another: where manifests may read the files they include.
pub fn checked_roots(paths: &[PathBuf]) -> Vec<PathBuf> {
    let paths = if paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        paths.to_vec()
    };
    let mut real = RealPaths::default();
    let mut roots: Vec<PathBuf> = paths
        .iter()
        .filter_map(|p| real.of(p))
        .map(|(p, is_file)| {
            if is_file {
                p.parent().map(Path::to_path_buf).unwrap_or(p)
            } else {
                p
            }
        })
        .collect();
    // Sorted, a folder comes before everything inside it.
    roots.sort();
    let mut kept: Vec<PathBuf> = Vec::new();
    for r in roots {
        if !kept.last().is_some_and(|k| r.starts_with(k)) {
            kept.push(r);
        }
    }
    kept
}

/// Real paths of checked paths, with the real path of each folder computed once: a run given
/// thousands of files of a few folders resolves each file's folder once, not every component
/// of every file's path (`canonicalize` reads each component as a possible link).
#[derive(Default)]
struct RealPaths {
    folders: HashMap<PathBuf, Option<PathBuf>>,
}

impl RealPaths {
    /// The real path of `p` (as `std::fs::canonicalize`) and whether it is a regular file;
    /// `None` when it cannot be resolved.
    fn of(&mut self, p: &Path) -> Option<(PathBuf, bool)> {
        // A regular file named by its own name (not a link) is its real folder's entry.
        if let (Some(name), Ok(meta)) = (p.file_name(), std::fs::symlink_metadata(p)) {
            let last_is_name = matches!(
                p.components().next_back(),
                Some(std::path::Component::Normal(_))
            );
            if last_is_name && meta.file_type().is_file() {
                let parent = match p.parent() {
                    Some(d) if !d.as_os_str().is_empty() => d,
                    _ => Path::new("."),
                };
                let folder = self
                    .folders
                    .entry(parent.to_path_buf())
                    .or_insert_with(|| std::fs::canonicalize(parent).ok())
                    .as_ref()?;
                return Some((folder.join(name), true));
            }
        }
        let real = std::fs::canonicalize(p).ok()?;
        let is_file = real.is_file();
        Some((real, is_file))
    }
}

/// What `look` answers at the nearest folder at or above `real` where it answers (else
/// `otherwise`), through `memo` (by [`gpulint_source::fs::path_key`]): each folder is looked
/// at once in a run, and the folders of a tree share the answers of their parents.
fn nearest_up<V: Clone>(
    memo: &Mutex<HashMap<u128, V>>,
    real: &Path,
    otherwise: V,
    mut look: impl FnMut(&Path) -> Option<V>,
) -> V {
    let mut looked = Vec::new();
    let mut found = otherwise;
    for dir in real.ancestors() {
        let key = gpulint_source::fs::path_key(dir);
        if let Some(r) = lock(memo).get(&key) {
            found = r.clone();
            break;
        }
        looked.push(key);
        if let Some(r) = look(dir) {
            found = r;
            break;
        }
    }
    let mut memo = lock(memo);
    for dir in looked {
        memo.insert(dir, found.clone());
    }
    found
}

/// The exclusions of a configuration (the defaults without one), each glob relative to the
/// folder of the file that declares it; `root` stands for the folder of the defaults.
pub fn excludes(loaded: Option<&LoadedConfig>, root: &Path) -> Result<Excludes, String> {
    let mut groups: Vec<(PathBuf, Vec<String>)> = Vec::new();
    match loaded.and_then(|l| l.exclude.as_ref()) {
        Some(e) => groups.push((e.base.clone(), e.value.clone())),
        None => groups.push((
            root.to_path_buf(),
            DEFAULT_EXCLUDE.iter().map(|s| s.to_string()).collect(),
        )),
    }
    for e in loaded.iter().flat_map(|l| &l.extend_exclude) {
        match groups.iter_mut().find(|(base, _)| *base == e.base) {
            Some((_, globs)) => globs.push(e.value.clone()),
            None => groups.push((e.base.clone(), vec![e.value.clone()])),
        }
    }
    Excludes::new(&groups)
}

/// Where the configuration comes from.
#[derive(Debug, Clone)]
pub enum Source {
    /// `--isolated`: none.
    Isolated,
    /// `--config FILE`: that file, for every file.
    Named(Arc<LoadedConfig>),
    /// The nearest configuration file of each file's folder.
    Discover,
}

impl Source {
    /// The source a command's `--config` and `--isolated` ask for.
    pub fn new(explicit: Option<&Path>, isolated: bool) -> Result<Source, ConfigError> {
        Ok(if isolated {
            Source::Isolated
        } else if let Some(path) = explicit {
            Source::Named(Arc::new(config::load(path)?))
        } else {
            Source::Discover
        })
    }
}

/// What applies to the files of one folder.
pub struct Resolved {
    /// The configuration file (none: the defaults).
    pub config: Option<Arc<LoadedConfig>>,
    /// The project's folder: the configuration file's, else the repository's (a folder
    /// holding `.git`), else the checked path's.
    pub root: PathBuf,
    pub engine: Arc<Engine>,
    pub excludes: Excludes,
}

type Memo<K, V> = Mutex<HashMap<K, Result<V, String>>>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Gives each file the settings of the configuration that applies to it, memoised per
/// folder; files of the same configuration share one engine.
pub struct Resolver {
    overrides: Overrides,
    source: Source,
    cwd: PathBuf,
    /// The checked paths' folders (real paths): the project's folder of a file with neither a
    /// configuration file nor a repository above it is the deepest of them that holds it.
    roots: Vec<PathBuf>,
    /// The working directory as a real path.
    real_cwd: Option<PathBuf>,
    /// [`checked_roots`] of the run, computed once.
    manifest_roots: Vec<PathBuf>,
    /// Folder (real path, by [`gpulint_source::fs::path_key`]) → the nearest configuration file.
    nearest: Memo<u128, Option<Arc<LoadedConfig>>>,
    /// (configuration file, project folder) → what applies.
    built: Memo<(Option<PathBuf>, PathBuf), Arc<Resolved>>,
    /// Folder (as asked, by [`gpulint_source::fs::path_key`]) → what applies.
    by_dir: Memo<u128, Arc<Resolved>>,
    /// Folder (real path, by [`gpulint_source::fs::path_key`]) → the repository that holds
    /// it (the nearest folder at or above it with a `.git`).
    repos: Mutex<HashMap<u128, Option<Arc<Path>>>>,
}

impl Resolver {
    /// A resolver for the files under `overrides.paths` (none: `.`), as seen from `cwd`. The
    /// command line's settings are checked here, once.
    pub fn new(overrides: Overrides, source: Source, cwd: &Path) -> Result<Resolver, String> {
        let manifest_roots = checked_roots(&overrides.paths);
        settings_with_roots(&overrides, None, cwd, manifest_roots.clone())?;
        let paths = if overrides.paths.is_empty() {
            vec![PathBuf::from(".")]
        } else {
            overrides.paths.clone()
        };
        let mut real = RealPaths::default();
        let roots = paths
            .iter()
            .filter_map(|p| real.of(&cwd.join(p)))
            .map(|(p, is_file)| {
                // A regular file is not a folder; anything else is asked.
                if !is_file && p.is_dir() {
                    p
                } else {
                    p.parent().map(Path::to_path_buf).unwrap_or(p)
                }
            })
            .collect();
        Ok(Resolver {
            manifest_roots,
            real_cwd: std::fs::canonicalize(cwd).ok(),
            overrides,
            source,
            cwd: cwd.to_path_buf(),
            roots,
            nearest: Mutex::default(),
            built: Mutex::default(),
            by_dir: Mutex::default(),
            repos: Mutex::default(),
        })
    }

    /// What applies to the file (or folder entry) at `path`: that of its folder.
    pub fn for_path(&self, path: &Path) -> Result<Arc<Resolved>, String> {
        let absolute = self.cwd.join(path);
        match absolute.parent() {
            Some(dir) => self.for_dir(dir),
            None => self.for_dir(&absolute),
        }
    }

    /// What applies to the files of the folder `dir`.
    pub fn for_dir(&self, dir: &Path) -> Result<Arc<Resolved>, String> {
        let dir = self.cwd.join(dir);
        let key = gpulint_source::fs::path_key(&dir);
        if let Some(r) = lock(&self.by_dir).get(&key) {
            return r.clone();
        }
        let real = std::fs::canonicalize(&dir).unwrap_or_else(|_| dir.clone());
        let resolved = self.resolve(&real);
        lock(&self.by_dir).insert(key, resolved.clone());
        resolved
    }

    /// The project's folder of the run: that of the first checked path (where the cache goes).
    pub fn project_root(&self) -> Result<PathBuf, String> {
        let first = self
            .roots
            .first()
            .cloned()
            .unwrap_or_else(|| self.cwd.clone());
        Ok(self.for_dir(&first)?.root.clone())
    }

    fn resolve(&self, real: &Path) -> Result<Arc<Resolved>, String> {
        let config = match &self.source {
            Source::Isolated => None,
            Source::Named(c) => Some(c.clone()),
            Source::Discover => self.nearest(real)?,
        };
        let root = match &config {
            Some(c) => {
                let dir = c.dir();
                std::fs::canonicalize(&dir).unwrap_or(dir)
            }
            None => self.root_without_config(real),
        };
        let key = (config.as_ref().map(|c| c.path.clone()), root.clone());
        if let Some(r) = lock(&self.built).get(&key) {
            return r.clone();
        }
        let built = (|| {
            let settings = settings_with_roots(
                &self.overrides,
                config.as_deref(),
                &root,
                self.manifest_roots.clone(),
            )?;
            let excludes = excludes(config.as_deref(), &root)?;
            Ok(Arc::new(Resolved {
                config: config.clone(),
                root: root.clone(),
                engine: Arc::new(Engine::new(settings)),
                excludes,
            }))
        })()
        .map_err(|e: String| match &config {
            Some(c) => format!("invalid configuration in {}: {e}", c.path.display()),
            None => e,
        });
        lock(&self.built)
            .entry(key)
            .or_insert_with(|| built)
            .clone()
    }

    /// The nearest configuration file of the folder `real` (a real path).
    fn nearest(&self, real: &Path) -> Result<Option<Arc<LoadedConfig>>, String> {
        nearest_up(&self.nearest, real, Ok(None), |dir| {
            match config::in_dir(dir) {
                Ok(None) => None,
                Ok(Some(c)) => Some(Ok(Some(Arc::new(c)))),
                Err(e) => Some(Err(e.to_string())),
            }
        })
    }

    /// The repository that holds the folder `real` (a real path): the nearest folder at or
    /// above it with a `.git`.
    fn repository(&self, real: &Path) -> Option<Arc<Path>> {
        nearest_up(&self.repos, real, None, |dir| {
            dir.join(".git").exists().then(|| Some(Arc::from(dir)))
        })
    }

    /// The project's folder of a file in `real` without a configuration file: the
    /// repository's, else the working directory when it holds the file, else the outermost
    /// checked path that holds it, else `real` itself. One folder for all the files of a file
    /// list (as pre-commit passes them), not one per folder.
    fn root_without_config(&self, real: &Path) -> PathBuf {
        if let Some(repo) = self.repository(real) {
            return repo.to_path_buf();
        }
        if let Some(cwd) = &self.real_cwd {
            if real.starts_with(cwd) {
                return cwd.clone();
            }
        }
        self.roots
            .iter()
            .filter(|r| real.starts_with(r))
            .min_by_key(|r| r.as_os_str().len())
            .cloned()
            .unwrap_or_else(|| real.to_path_buf())
    }

    /// Is the entry at `path` left out by the exclusions that apply to it (those of its
    /// folder)? Used by the walk; a folder whose settings cannot be had excludes nothing (its
    /// files report why).
    pub fn is_excluded(&self, path: &Path) -> bool {
        self.for_path(path)
            .is_ok_and(|r| r.excludes.is_excluded(&self.cwd.join(path)))
    }

    /// Is a file named on the command line excluded (`--force-exclude`, and the extension
    /// sources a Python file builds)?
    pub fn excludes_file(&self, path: &Path) -> bool {
        self.for_path(path)
            .is_ok_and(|r| r.excludes.excludes_file(path, &self.cwd))
    }

    /// The working directory paths are shown from.
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }
}

impl gpulint_linter::run::Engines for Resolver {
    fn engine(&self, path: &Path) -> Option<Arc<Engine>> {
        self.for_path(path).ok().map(|r| r.engine.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_folder_has_the_nearest_repository_above_it_whatever_the_order_asked() {
        let tmp = tempfile::tempdir().unwrap();
        let d = std::fs::canonicalize(tmp.path()).unwrap();
        for dir in [
            "repo/.git",
            "repo/a/b",
            "repo/sub/.git",
            "repo/sub/c",
            "plain/x",
        ] {
            std::fs::create_dir_all(d.join(dir)).unwrap();
        }
        let resolver = Resolver::new(Overrides::default(), Source::Isolated, &d).unwrap();
        let asked = [
            ("repo/sub/c", Some("repo/sub")),
            ("repo/a/b", Some("repo")),
            ("repo/sub", Some("repo/sub")),
            ("repo/a", Some("repo")),
            ("repo", Some("repo")),
            ("plain/x", None),
        ];
        // Twice: the second time from what the first one kept.
        for _ in 0..2 {
            for (dir, repo) in asked {
                let found = resolver.repository(&d.join(dir));
                let expected = repo.map(|r| d.join(r));
                // Above the temporary folder there may be a repository of its own: only what
                // is below it is asked about.
                let found = found.filter(|f| f.starts_with(&d));
                assert_eq!(found.as_deref(), expected.as_deref(), "{dir}");
            }
        }
    }
}
