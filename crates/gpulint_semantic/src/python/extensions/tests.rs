//! Source lists folded end to end: [`collect`] on small files and folder trees.

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

pub(super) fn tree(files: &[&str]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for f in files {
        let p = tmp.path().join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, "").unwrap();
    }
    tmp
}

fn names(b: &ExtensionBuild) -> Vec<String> {
    b.sources
        .iter()
        .map(|s| s.path.file_name().unwrap().to_string_lossy().into_owned())
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
fn helper_functions_with_parameters_and_branches() {
    let tmp = tree(&["csrc/a.cu", "csrc/b.cu", "csrc/c.cpp"]);
    let src = r#"
import os
from torch.utils.cpp_extension import CUDAExtension
def under(d, names=["a.cu", "b.cu"]):
    return [os.path.join(d, f) for f in names]
def root(p):
    if os.path.isabs(p):
        return p
    return os.path.join(os.path.dirname(__file__), p)
def pick(cuda):
    if cuda:
        return ["csrc/a.cu"]
    return ["csrc/c.cpp"]
CUDAExtension("one", under("csrc") + [root("csrc/c.cpp")])
CUDAExtension("two", pick(True))
CUDAExtension("three", missing_helper())
"#;
    let b = builds(src, &tmp.path().join("setup.py"));
    assert_eq!(names(&b[0]), ["a.cu", "b.cu", "c.cpp"]);
    assert!(b[0].unresolved.is_empty(), "{:?}", b[0].unresolved);
    // Every return contributes, as a name bound in two branches does.
    assert_eq!(names(&b[1]), ["a.cu", "c.cpp"]);
    assert!(b[2].sources.is_empty() && b[2].unresolved.len() == 1);
}

#[test]
fn subclasses_in_the_same_file_are_entries() {
    let tmp = tree(&["csrc/x.cu", "csrc/y.cu", "ops/.keep"]);
    let src = r#"
from torch.utils.cpp_extension import load
class Base:
    def sources(self):
        raise NotImplementedError
    def name(self):
        return "base"
    def load(self):
        return load(name=self.name(), sources=[s for s in self.sources() if s])
class X(Base):
    def sources(self):
        return ["csrc/x.cu", ""]
class Y(X):
    def sources(self):
        return ["csrc/y.cu"]
class Z(X):
    pass
"#;
    let b = builds(src, &tmp.path().join("ops/build.py"));
    let what: Vec<String> = b.iter().map(|b| b.describe()).collect();
    assert_eq!(what, ["X.sources", "Y.sources"]);
    // Relative to the repository root above the file.
    assert_eq!(names(&b[0]), ["x.cu"]);
    assert_eq!(names(&b[1]), ["y.cu"]);
    assert!(b.iter().all(|b| b.unresolved.is_empty()), "{b:?}");
    assert_eq!(
        b[0].via.as_ref().unwrap().at.start,
        src.find("def sources(self):\n        return [\"csrc/x")
            .unwrap()
    );
}

#[test]
fn listdir_only_under_a_filter_that_drops_entries() {
    let tmp = tree(&["k/b.cu", "k/a.cu", "k/c.cpp", "k/notes.txt"]);
    let src = r#"
import os
from torch.utils.cpp_extension import CUDAExtension
K = os.path.join(os.path.dirname(__file__), "k")
CUDAExtension("cu", [os.path.join(K, f) for f in os.listdir(K) if f.endswith((".cu", ".cpp"))])
CUDAExtension("all", [os.path.join(K, f) for f in os.listdir(K)])
CUDAExtension("odd", [os.path.join(K, f) for f in os.listdir(K) if "a" in f])
"#;
    let b = builds(src, &tmp.path().join("setup.py"));
    assert_eq!(names(&b[0]), ["a.cu", "b.cu", "c.cpp"]);
    assert!(b[1].sources.is_empty() && !b[1].unresolved.is_empty());
    assert!(b[2].sources.is_empty() && !b[2].unresolved.is_empty());
}

#[test]
fn functions_of_a_sibling_module() {
    let tmp = tree(&["csrc/a.cu", "csrc/b.cu", "other.py"]);
    let d = tmp.path();
    std::fs::write(
            d.join("ext_utils.py"),
            "import os\nfrom other import more\ndef get_sources(root, names=['a.cu']):\n    return [os.path.join(root, n) for n in names] + ['csrc/b.cu']\ndef chained():\n    return more()\n",
        )
        .unwrap();
    let src = r#"
from torch.utils.cpp_extension import CUDAExtension
from .ext_utils import get_sources
import ext_utils as eu
CUDAExtension("one", get_sources("csrc"))
CUDAExtension("two", eu.get_sources("csrc", ["b.cu"]))
CUDAExtension("three", eu.chained())
CUDAExtension("four", eu.missing())
"#;
    let b = builds(src, &d.join("setup.py"));
    assert_eq!(names(&b[0]), ["a.cu", "b.cu"]);
    assert!(b[0].unresolved.is_empty(), "{:?}", b[0].unresolved);
    assert_eq!(names(&b[1]), ["b.cu"]);
    // Its own imports are not followed: unresolved, saying where.
    assert!(b[2].sources.is_empty());
    assert!(
        b[2].unresolved[0].reason.starts_with("ext_utils.py:6:"),
        "{:?}",
        b[2].unresolved
    );
    assert!(b[3].sources.is_empty() && b[3].unresolved.len() == 1);
}

#[test]
fn recursive_helpers_stay_bounded() {
    let src = "from torch.utils.cpp_extension import load\ndef a():\n    return b() + b()\ndef b():\n    return a() + a()\nclass C:\n    def sources(self):\n        return self.sources() + self.sources()\n    def go(self):\n        return load('c', self.sources())\nload('e', a())\n";
    let started = std::time::Instant::now();
    let b = builds(src, Path::new("/nonexistent/setup.py"));
    assert_eq!(b.len(), 2);
    assert!(started.elapsed().as_secs() < 20);
    assert!(b
        .iter()
        .all(|b| b.sources.is_empty() && !b.unresolved.is_empty()));
}
