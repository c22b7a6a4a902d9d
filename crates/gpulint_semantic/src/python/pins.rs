//! The TensorFlow release a Python file runs on, as far as the project's manifests say: the
//! nearest directory (the file's own, then its ancestors up to the repository root) holding a
//! `requirements*.txt`, `pyproject.toml`, `setup.py`, conda `environment*.yml` or `Dockerfile`
//! that declares TensorFlow. The manifests are read with the manifest parsers of
//! [`gpulint_manifest`] (one source of truth for requirement syntax), only when a rule is about
//! to report, and cached per directory for the whole run; every folder listed and file read is
//! noted as a dependency of the checked file's cached result.

use super::project;
use gpulint_manifest::compat::{self, Minor};
use gpulint_manifest::env::environments;
use gpulint_manifest::versions::ranges;
use gpulint_manifest::{self as manifest, Format, Loader, Manifest};
use gpulint_source::SourceFile;
use gpulint_syntax::{parse, Lang};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};

/// Manifests larger than this are not read.
const MAX_MANIFEST_SIZE: u64 = 1 << 20;
/// Directory entries looked at per directory.
const MAX_DIR_ENTRIES: usize = 512;

/// What the manifests of one directory say about TensorFlow.
#[derive(Debug, Clone)]
pub struct TfPins {
    /// The release lines the declarations stand for (a pin without a lower bound stands for
    /// the newest line it admits: what pip installs today), over all manifests of the folder.
    pub minors: Vec<Minor>,
    /// The first declaration, for messages: `` `tensorflow==2.3.1` in requirements.txt ``.
    pub cite: String,
}

impl TfPins {
    /// Do all declared release lines satisfy `f`?
    pub fn all(&self, f: impl Fn(Minor) -> bool) -> bool {
        !self.minors.is_empty() && self.minors.iter().all(|&m| f(m))
    }

    /// Does some declared release line satisfy `f`?
    pub fn any(&self, f: impl Fn(Minor) -> bool) -> bool {
        self.minors.iter().any(|&m| f(m))
    }

    /// `2.3`, `2.9–2.21`.
    pub fn describe(&self) -> String {
        ranges(&self.minors, &compat::tables().tf_minors())
    }
}

#[derive(Debug, Default)]
struct DirPins {
    pins: Option<Arc<TfPins>>,
    read: Vec<PathBuf>,
}

static DIRS: project::DirCache<DirPins> = LazyLock::new(Default::default);

/// The TensorFlow declared for `file` by the nearest folder that declares it.
pub fn tensorflow(file: &Path, root: &Path) -> Option<Arc<TfPins>> {
    project::nearest(
        file,
        root,
        |dir| project::per_dir(&DIRS, dir, read_pins),
        |facts| &facts.read,
        |facts| facts.pins.clone(),
    )
}

fn read_pins(dir: &Path) -> DirPins {
    let mut facts = DirPins::default();
    let mut minors = BTreeSet::new();
    let mut cite = None;
    {
        for path in gpulint_source::sorted_dir_files(dir, MAX_DIR_ENTRIES, |_| true) {
            let Some(m) = read_manifest(&path) else {
                continue;
            };
            facts.read.push(path.clone());
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            for env in environments(&m) {
                for pin in env.tensorflow() {
                    minors.extend(pin.minors.iter().copied());
                    cite.get_or_insert_with(|| format!("{} in {name}", pin.req.cite()));
                }
            }
        }
    }
    if let Some(cite) = cite {
        facts.pins = Some(Arc::new(TfPins {
            minors: minors.into_iter().collect(),
            cite,
        }));
    }
    facts
}

/// Reads `path` as a manifest if its name says it is one.
fn read_manifest(path: &Path) -> Option<Manifest> {
    let format = if manifest::is_setup_py(path) {
        Format::SetupPy
    } else {
        Format::of_path(path)?
    };
    let text = gpulint_source::read_source(path, MAX_MANIFEST_SIZE).ok()?;
    let display = path.display().to_string();
    if format == Format::SetupPy {
        let tree = parse(Lang::Python, &text)?;
        let model = super::build(&tree, &text);
        return crate::python::setup_py::extract(&model);
    }
    let file = SourceFile::new(path.to_path_buf(), display, text);
    let m = manifest::parse(format, &file, &mut Loader::new(path, &[]));
    m.fatal.is_none().then_some(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_folder_declaring_tensorflow() {
        let base = std::env::temp_dir().join(format!("gpulint-pins-{}", std::process::id()));
        let sub = base.join("src");
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(base.join(".git"), "").unwrap();
        std::fs::write(base.join("requirements.txt"), "numpy\ntensorflow==2.3.1\n").unwrap();
        std::fs::write(sub.join("train.py"), "import tensorflow\n").unwrap();
        let pins = tensorflow(&sub.join("train.py"), &base).unwrap();
        assert_eq!(pins.minors, vec![(2, 3)]);
        assert!(pins.cite.contains("requirements.txt"), "{}", pins.cite);
        std::fs::write(sub.join("setup.py"), "from setuptools import setup\nsetup(name='x', install_requires=['tensorflow>=2.10,<2.12'])\n").unwrap();
        // The cache is per folder: a fresh folder sees the new manifest.
        let other = base.join("other");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::copy(sub.join("setup.py"), other.join("setup.py")).unwrap();
        let pins = tensorflow(&other.join("train.py"), &base).unwrap();
        assert_eq!(pins.minors, vec![(2, 10), (2, 11)]);
        std::fs::remove_dir_all(&base).unwrap();
    }
}
