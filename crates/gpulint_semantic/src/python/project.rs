//! Facts from files next to the one being checked: launchers that set environment variables,
//! and local modules it imports.
//!
//! Both are looked up only when a rule is about to report (never in the hot path), and cached
//! for the whole run: launchers by directory, modules by path. Nothing is read outside the
//! checked tree: a launcher is looked for in the file's directory and its ancestors up to the
//! repository root (a directory holding `.git`) or the configured root, whichever comes
//! first; when neither is an ancestor, only the file's own directory is searched.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

mod modules;
pub use modules::{
    float16_policy_by_import, method_accumulated_params, method_returns_attached,
    self_calls_in_loops_of, tf_initialized_by_import, tf_memory_configured_by_import, ModuleFacts,
};

/// Launcher files larger than this are not read.
const MAX_LAUNCHER_SIZE: u64 = 256 << 10;
/// Directory entries looked at per directory.
const MAX_DIR_ENTRIES: usize = 512;

/// What a directory's launchers set: variable name → (file, value) for the variables asked about.
#[derive(Debug, Default, Clone)]
struct DirFacts {
    vars: HashMap<String, (PathBuf, String)>,
    /// The launcher files read.
    read: Vec<PathBuf>,
}

static DIRS: DirCache<DirFacts> = LazyLock::new(Default::default);

/// Environment variables launchers are scanned for.
const LAUNCHER_VARS: &[&str] = &[
    "TF_FORCE_GPU_ALLOW_GROWTH",
    "CUDA_VISIBLE_DEVICES",
    "XLA_PYTHON_CLIENT_PREALLOCATE",
    "XLA_PYTHON_CLIENT_MEM_FRACTION",
    "XLA_PYTHON_CLIENT_ALLOCATOR",
    "PYTORCH_CUDA_ALLOC_CONF",
    "PYTORCH_ALLOC_CONF",
];

/// Is `name` a launcher: a shell or batch script, a Dockerfile, a compose file, a `.env` file,
/// or a Slurm script?
fn is_launcher(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower == ".env"
        || lower.ends_with(".env")
        || lower.starts_with("dockerfile")
        || lower.ends_with(".dockerfile")
        || ((lower.starts_with("docker-compose") || lower.starts_with("compose"))
            && (lower.ends_with(".yml") || lower.ends_with(".yaml")))
        || [".sh", ".bash", ".bat", ".cmd", ".slurm", ".sbatch"]
            .iter()
            .any(|e| lower.ends_with(e))
}

/// `KEY=value`, `KEY: "value"`, `ENV KEY value`, `set KEY=value`, `export KEY="value"`: the
/// value after the first occurrence of `key` in `text` that is followed by one.
fn value_after(text: &str, key: &str) -> Option<String> {
    let mut from = 0;
    while let Some(at) = text[from..].find(key) {
        let start = from + at;
        from = start + key.len();
        // A whole word: not `MY_CUDA_VISIBLE_DEVICES`.
        let before_ok = text[..start]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_'));
        let rest = &text[from..];
        let after = rest.chars().next();
        if !before_ok || after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let rest = rest.trim_start_matches([' ', '\t', '"', '\'']);
        let rest = match rest.strip_prefix(['=', ':']) {
            Some(r) => r,
            // Dockerfile `ENV KEY value` needs the space.
            None if text[from..].starts_with([' ', '\t']) => rest,
            None => continue,
        };
        let rest = rest.trim_start_matches([' ', '\t', '"', '\'']);
        let value: String = rest
            .chars()
            .take_while(|c| !c.is_whitespace() && !matches!(c, '"' | '\'' | ';' | '&' | '}'))
            .collect();
        return Some(value);
    }
    None
}

fn read_launchers(dir: &Path) -> DirFacts {
    let mut facts = DirFacts::default();
    {
        let names = gpulint_source::sorted_dir_files(dir, MAX_DIR_ENTRIES, |p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(is_launcher)
        });
        for path in names {
            let Some(bytes) = read_small(&path, MAX_LAUNCHER_SIZE) else {
                continue;
            };
            facts.read.push(path.clone());
            let text = String::from_utf8_lossy(&bytes);
            for var in LAUNCHER_VARS {
                if facts.vars.contains_key(*var) {
                    continue;
                }
                if let Some(v) = value_after(&text, var) {
                    facts.vars.insert((*var).to_string(), (path.clone(), v));
                }
            }
        }
    }
    facts
}

/// The contents of `path` if it is a file of at most `max` bytes.
fn read_small(path: &Path, max: u64) -> Option<Vec<u8>> {
    if std::fs::metadata(path).map_or(true, |m| !m.is_file() || m.len() > max) {
        return None;
    }
    std::fs::read(path).ok()
}

/// What `read` finds in `dir`, read once per directory for the whole run and kept in `cache`.
pub(super) fn per_dir<T>(cache: &DirCache<T>, dir: &Path, read: impl FnOnce(&Path) -> T) -> Arc<T> {
    memo_by_dir(cache, dir, |d| Arc::new(read(d)))
}

/// What `read` answers for `dir`, worked out once per folder for the whole run and kept in
/// `memo` by the folder's [`gpulint_source::fs::path_key`].
fn memo_by_dir<V: Clone>(
    memo: &Mutex<HashMap<u128, V>>,
    dir: &Path,
    read: impl FnOnce(&Path) -> V,
) -> V {
    let key = gpulint_source::fs::path_key(dir);
    if let Some(known) = memo.lock().ok().and_then(|m| m.get(&key).cloned()) {
        return known;
    }
    let found = read(dir);
    if let Ok(mut m) = memo.lock() {
        m.insert(key, found.clone());
    }
    found
}

/// What [`per_dir`] keeps: each folder's facts, by the folder's
/// [`gpulint_source::fs::path_key`].
pub(super) type DirCache<T> = LazyLock<Mutex<HashMap<u128, Arc<T>>>>;

/// The first answer `found` gives for the [`search_dirs`] of `file`, nearest first. Each
/// folder looked at and the files `facts` read there are noted as dependencies of the checked
/// file's cached result.
pub(super) fn nearest<T, R>(
    file: &Path,
    root: &Path,
    facts: impl Fn(&Path) -> Arc<T>,
    files_read: impl Fn(&T) -> &[PathBuf],
    found: impl Fn(&T) -> Option<R>,
) -> Option<R> {
    for dir in search_dirs(file, root) {
        let facts = facts(&dir);
        gpulint_source::note_dependency(&dir);
        for f in files_read(&facts) {
            gpulint_source::note_dependency(f);
        }
        if let Some(r) = found(&facts) {
            return Some(r);
        }
    }
    None
}

/// Whether each folder looked at holds a `.git` (a repository's top), by
/// [`gpulint_source::fs::path_key`] of the folder.
static REPOS: LazyLock<Mutex<HashMap<u128, bool>>> = LazyLock::new(Default::default);

/// Does the folder `dir` hold a `.git`? Looked at once per folder in a run.
fn is_repository(dir: &Path) -> bool {
    memo_by_dir(&REPOS, dir, |d| d.join(".git").exists())
}

/// The directories to search for launchers (or manifests) of `file`, nearest first.
pub(super) fn search_dirs(file: &Path, root: &Path) -> Vec<PathBuf> {
    let Some(dir) = std::path::absolute(file)
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
    else {
        return Vec::new();
    };
    let root = std::path::absolute(root).ok();
    let mut chain = Vec::new();
    let mut bounded = false;
    for d in dir.ancestors() {
        chain.push(d.to_path_buf());
        if root.as_deref() == Some(d) || is_repository(d) {
            bounded = true;
            break;
        }
    }
    if !bounded {
        chain.truncate(1);
    }
    chain
}

/// A launcher next to `file` (in its directory or an ancestor up to the repository root) that
/// sets environment variable `var`: the launcher's path and the value.
pub fn launcher_setting(file: &Path, root: &Path, var: &str) -> Option<(PathBuf, String)> {
    nearest(
        file,
        root,
        |dir| per_dir(&DIRS, dir, read_launchers),
        |facts| &facts.read,
        |facts| facts.vars.get(var).cloned(),
    )
}

/// Manifest files larger than this are not read for the project's torch pin.
const MAX_MANIFEST_SIZE: u64 = 1 << 20;

/// The PyTorch release lines a project pins, from a dependency manifest next to a file.
#[derive(Debug, Clone)]
pub struct TorchPin {
    /// Release lines the pin stands for (see `manifest::versions::pinned_minors`).
    pub minors: Vec<(u64, u64)>,
    /// The manifest that pins it, and the requirement as written.
    pub path: PathBuf,
    pub text: String,
}

/// A directory's manifests: the torch pin they declare (release lines merged over all of
/// them) and the files read.
#[derive(Debug, Default)]
struct DirTorch {
    pin: Option<TorchPin>,
    read: Vec<PathBuf>,
}

static TORCH_DIRS: DirCache<DirTorch> = LazyLock::new(Default::default);

fn read_torch_pin(dir: &Path) -> DirTorch {
    use gpulint_manifest::{self as manifest, Format};
    let mut facts = DirTorch::default();
    {
        let files = gpulint_source::sorted_dir_files(dir, MAX_DIR_ENTRIES, |p| {
            Format::of_path(p).is_some_and(|f| f != Format::Shell)
        });
        for path in files {
            let Some(format) = Format::of_path(&path) else {
                continue;
            };
            if std::fs::metadata(&path).map_or(true, |m| m.len() > MAX_MANIFEST_SIZE) {
                continue;
            }
            let Ok(text) = gpulint_source::read_source(&path, MAX_MANIFEST_SIZE) else {
                continue;
            };
            facts.read.push(path.clone());
            let display = path.display().to_string();
            let file = gpulint_source::SourceFile::new(path.clone(), display, text);
            let mut loader = manifest::Loader::new(&path, &[dir.to_path_buf()]);
            let m = manifest::parse(format, &file, &mut loader);
            for env in manifest::env::environments(&m) {
                for pin in env.torch() {
                    match &mut facts.pin {
                        Some(p) => {
                            for minor in pin.minors {
                                if !p.minors.contains(&minor) {
                                    p.minors.push(minor);
                                }
                            }
                        }
                        None => {
                            facts.pin = Some(TorchPin {
                                minors: pin.minors,
                                path: path.clone(),
                                text: pin.req.text.clone(),
                            })
                        }
                    }
                }
            }
        }
    }
    facts
}

/// The torch pin of the project `file` belongs to: the nearest directory, from the file's own
/// up to the repository root, whose dependency manifests (requirements files,
/// `pyproject.toml`, conda environment files, Dockerfiles) pin `torch`. `None` when no
/// manifest says which torch the project runs.
pub fn project_torch(file: &Path, root: &Path) -> Option<TorchPin> {
    nearest(
        file,
        root,
        |dir| per_dir(&TORCH_DIRS, dir, read_torch_pin),
        |facts| &facts.read,
        |facts| facts.pin.clone(),
    )
}

/// Why a project is taken to run on native Windows: the file that says so and what it says.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowsTarget {
    pub path: PathBuf,
    pub what: String,
}

/// Per directory: the Windows evidence found there and the files read for it.
type WindowsFacts = (Option<WindowsTarget>, Vec<PathBuf>);

static WINDOWS_DIRS: DirCache<WindowsFacts> = LazyLock::new(Default::default);

/// CI files whose text names a Windows runner (`runs-on: windows-latest`, a matrix `os:`
/// entry, Azure's `vmImage: windows-2022`), and AppVeyor, which builds on Windows.
fn ci_windows(dir: &Path, read: &mut Vec<PathBuf>) -> Option<WindowsTarget> {
    for name in ["appveyor.yml", ".appveyor.yml"] {
        let p = dir.join(name);
        if p.is_file() {
            read.push(p.clone());
            return Some(WindowsTarget {
                path: p,
                what: "AppVeyor CI builds on Windows".into(),
            });
        }
    }
    let mut files: Vec<PathBuf> = Vec::new();
    let workflows = dir.join(".github").join("workflows");
    if workflows.is_dir() {
        read.push(workflows.clone());
        files.extend(gpulint_source::sorted_dir_files(
            &workflows,
            MAX_DIR_ENTRIES,
            |p| p.extension().is_some_and(|e| e == "yml" || e == "yaml"),
        ));
    }
    files.push(dir.join("azure-pipelines.yml"));
    files.sort();
    for p in files {
        let Some(text) = read_small(&p, MAX_LAUNCHER_SIZE).and_then(|b| String::from_utf8(b).ok())
        else {
            continue;
        };
        read.push(p.clone());
        let lower = text.to_ascii_lowercase();
        let runner = lower.match_indices("windows-").map(|(i, _)| i).find(|&i| {
            let line_start = lower[..i].rfind('\n').map_or(0, |n| n + 1);
            let line = &lower[line_start..i];
            line.contains("runs-on")
                || line.contains("os:")
                || line.contains("vmimage")
                || line.trim_start().starts_with('-')
                || line.contains('[')
        });
        if let Some(i) = runner {
            let word: String = text[i..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.'))
                .collect();
            return Some(WindowsTarget {
                path: p,
                what: format!("CI runs on `{word}`"),
            });
        }
    }
    None
}

/// Windows launchers in a directory: `.bat`, `.cmd` or `.ps1` files that run Python.
fn windows_launcher(dir: &Path, read: &mut Vec<PathBuf>) -> Option<WindowsTarget> {
    let files = gpulint_source::sorted_dir_files(dir, MAX_DIR_ENTRIES, |p| {
        p.extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| matches!(e.to_ascii_lowercase().as_str(), "bat" | "cmd" | "ps1"))
    });
    for p in files {
        let Some(bytes) = read_small(&p, MAX_LAUNCHER_SIZE) else {
            continue;
        };
        read.push(p.clone());
        let lower = String::from_utf8_lossy(&bytes).to_ascii_lowercase();
        // A Python launcher, not a build wrapper such as `gradlew.bat`.
        if lower.contains("python") || lower.contains(".py") || lower.contains("torchrun") {
            return Some(WindowsTarget {
                what: "a Windows launcher runs Python".into(),
                path: p,
            });
        }
    }
    None
}

/// Does the project `file` belongs to target native Windows? Evidence is looked for in the
/// file's directory and its ancestors up to the repository root: Windows launchers (`.bat`,
/// `.cmd`, `.ps1` scripts that run Python) and CI configuration with a Windows runner.
pub fn windows_target(file: &Path, root: &Path) -> Option<WindowsTarget> {
    nearest(
        file,
        root,
        |dir| {
            per_dir(&WINDOWS_DIRS, dir, |dir| {
                let mut read = Vec::new();
                let found = windows_launcher(dir, &mut read).or_else(|| ci_windows(dir, &mut read));
                (found, read)
            })
        },
        |facts| &facts.1,
        |facts| facts.0.clone(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpulint_syntax::{parse, Lang};

    #[test]
    fn launcher_values() {
        assert_eq!(
            value_after(
                "export TF_FORCE_GPU_ALLOW_GROWTH=true\n",
                "TF_FORCE_GPU_ALLOW_GROWTH"
            )
            .as_deref(),
            Some("true")
        );
        assert_eq!(
            value_after(
                "ENV TF_FORCE_GPU_ALLOW_GROWTH true\n",
                "TF_FORCE_GPU_ALLOW_GROWTH"
            )
            .as_deref(),
            Some("true")
        );
        assert_eq!(
            value_after(
                "  - TF_FORCE_GPU_ALLOW_GROWTH: \"true\"\n",
                "TF_FORCE_GPU_ALLOW_GROWTH"
            )
            .as_deref(),
            Some("true")
        );
        assert_eq!(
            value_after(
                "set TF_FORCE_GPU_ALLOW_GROWTH=true\r\n",
                "TF_FORCE_GPU_ALLOW_GROWTH"
            )
            .as_deref(),
            Some("true")
        );
        assert_eq!(
            value_after(
                "echo $MY_CUDA_VISIBLE_DEVICES\nCUDA_VISIBLE_DEVICES=0,1 python x.py",
                "CUDA_VISIBLE_DEVICES"
            )
            .as_deref(),
            Some("0,1")
        );
        assert_eq!(
            value_after(
                "echo $TF_FORCE_GPU_ALLOW_GROWTH\n",
                "TF_FORCE_GPU_ALLOW_GROWTH"
            ),
            None
        );
        assert!(
            is_launcher("run_train.sh")
                && is_launcher("Dockerfile.gpu")
                && is_launcher("docker-compose.override.yml")
        );
        assert!(is_launcher(".env") && !is_launcher("train.py") && !is_launcher("config.yml"));
    }

    #[test]
    fn launcher_and_module_lookup() {
        let root = tempfile::tempdir().unwrap();
        let repo = root.path().join("repo");
        let pkg = repo.join("train");
        std::fs::create_dir_all(&pkg).unwrap();
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::write(
            repo.join("run.sh"),
            "export TF_FORCE_GPU_ALLOW_GROWTH=true\npython train/main.py\n",
        )
        .unwrap();
        // Outside the repository: never read.
        std::fs::write(
            root.path().join("Dockerfile"),
            "ENV CUDA_VISIBLE_DEVICES -1\n",
        )
        .unwrap();
        std::fs::write(
            pkg.join("gpu_setup.py"),
            "import tensorflow as tf\nfor g in tf.config.list_physical_devices('GPU'):\n    tf.config.experimental.set_memory_growth(g, True)\n",
        )
        .unwrap();
        let main = pkg.join("main.py");
        let found = launcher_setting(
            &main,
            Path::new("/nonexistent-root"),
            "TF_FORCE_GPU_ALLOW_GROWTH",
        );
        assert_eq!(found, Some((repo.join("run.sh"), "true".into())));
        assert_eq!(
            launcher_setting(
                &main,
                Path::new("/nonexistent-root"),
                "CUDA_VISIBLE_DEVICES"
            ),
            None
        );

        std::fs::create_dir_all(repo.join(".github/workflows")).unwrap();
        std::fs::write(
            repo.join(".github/workflows/ci.yml"),
            "jobs:\n  test:\n    strategy:\n      matrix:\n        os: [ubuntu-latest, windows-latest]\n    runs-on: ${{ matrix.os }}\n",
        )
        .unwrap();
        std::fs::write(pkg.join("gradlew.bat"), "@rem gradle wrapper\n").unwrap();
        let w = windows_target(&pkg.join("other.py"), Path::new("/nonexistent-root")).unwrap();
        assert_eq!(w.what, "CI runs on `windows-latest`");

        let src = "import tensorflow as tf\nimport gpu_setup\nmodel.fit(x)\n";
        let tree = parse(Lang::Python, src).unwrap();
        let m = super::super::build(&tree, src);
        assert_eq!(
            tf_memory_configured_by_import(&m, &main, Path::new("/nonexistent-root")),
            Some(pkg.join("gpu_setup.py"))
        );
        let src = "import tensorflow as tf\nimport numpy\nmodel.fit(x)\n";
        let tree = parse(Lang::Python, src).unwrap();
        let m = super::super::build(&tree, src);
        assert_eq!(
            tf_memory_configured_by_import(&m, &main, Path::new("/nonexistent-root")),
            None
        );
    }
}
