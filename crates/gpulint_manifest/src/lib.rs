//! Dependency manifests: `requirements*.txt`, `pyproject.toml`, conda `environment.yml`,
//! `Dockerfile`s and the `install_requires` of `setup.py`. Each format has its own tolerant
//! parser that fills one small model — the declared requirements with their exact spans and
//! markers, Python versions, package indexes, base images and platform evidence — and the MF
//! rules run over that model and the compatibility tables in `compat`. No tree-sitter here.
//!
//! Knows source files and spans; it must not know rules, diagnostics or configuration. The
//! `install_requires` of `setup.py` is read by `gpulint_semantic::setup_py` (it needs the
//! Python model) into this crate's [`Manifest`].

pub mod compat;
pub mod conda;
pub mod dockerfile;
pub mod env;
pub mod pep508;
pub mod pyproject;
pub mod requirements;
pub mod shell_script;
pub mod versions;

pub use gpulint_source::{SourceFile, Span};
pub use gpulint_syntax::kind::{is_setup_py, Format};
use pep508::{Marker, Spec};
use std::path::{Component, Path, PathBuf};

/// A platform an environment is installed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Platform {
    Linux,
    Windows,
    MacOs,
}

/// Who installs a requirement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Installer {
    /// pip (requirements files, `[project]`, Poetry, `setup.py`, `pip install`, conda's `pip:`).
    Pip,
    /// conda / mamba (`environment.yml`, `conda install`).
    Conda,
    /// Comes with a base image (`FROM nvidia/cuda:11.8.0-cudnn8-…` declares `cuda` and `cudnn`).
    Image,
}

/// Where a fact was declared when it is not in the checked file itself (an included file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The other file, as shown to the user.
    pub file: String,
    /// 1-based line there.
    pub line: usize,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// One declared package.
#[derive(Debug, Clone)]
pub struct Requirement {
    /// Normalised name (`tensorflow-gpu`); image-provided facts use `cuda`, `cudnn`, `python`,
    /// `tensorflow`, `torch`.
    pub name: String,
    pub extras: Vec<String>,
    pub spec: Spec,
    /// `+cu118` of a pip pin, `cuda11.cudnn82` of a jaxlib pin (lower case, no `+`).
    pub local: Option<String>,
    /// Conda build string (`py3.9_cuda11.7_cudnn8.5.0_0`).
    pub build: Option<String>,
    pub marker: Option<Marker>,
    pub installer: Installer,
    /// As written.
    pub text: String,
    /// In the checked file: the requirement itself, or the line that includes the file it is in.
    pub span: Span,
    pub origin: Option<Origin>,
    /// Index into [`Manifest::scopes`].
    pub scope: usize,
    /// Indexes into [`Manifest::indexes`] that pip consults for this requirement.
    pub indexes: Vec<usize>,
}

/// Lines joined at their continuations (a requirements line, a Dockerfile instruction): the
/// text, the file offset of each of its bytes, and the lines it spans.
struct Logical {
    text: String,
    offsets: Vec<usize>,
    first_line: usize,
    last_line: usize,
}

impl Logical {
    fn starting_at(line: usize) -> Logical {
        Logical {
            text: String::new(),
            offsets: Vec::new(),
            first_line: line,
            last_line: line,
        }
    }

    /// The file span of bytes `start..end` of the joined text.
    fn span(&self, start: usize, end: usize) -> Span {
        let at = |i: usize| {
            self.offsets
                .get(i)
                .copied()
                .unwrap_or_else(|| self.offsets.last().map_or(0, |o| o + 1))
        };
        let s = at(start);
        let e = if end > start { at(end - 1) + 1 } else { s };
        Span::new(s, e)
    }
}

impl Requirement {
    /// A pip requirement parsed from `written`, found at `span` in the checked file. `written`
    /// is the text the parse ran on; the span narrows to the requirement itself when `exact`
    /// (the file holds `written` verbatim at `span`).
    pub fn pip(
        r: pep508::Req,
        written: &str,
        span: Span,
        exact: bool,
        scope: usize,
    ) -> Requirement {
        let span = if exact {
            Span::new(span.start + r.range.start, span.start + r.range.end)
        } else {
            span
        };
        let text = written[r.range.clone()].trim().to_string();
        Requirement::pip_at(r, text, span, None, scope)
    }

    /// A pip requirement from the parse `r`, written as `text` at `span`.
    fn pip_at(
        r: pep508::Req,
        text: String,
        span: Span,
        origin: Option<Origin>,
        scope: usize,
    ) -> Requirement {
        Requirement {
            text,
            name: r.name,
            extras: r.extras,
            spec: r.spec,
            local: r.local,
            build: None,
            marker: r.marker,
            installer: Installer::Pip,
            span,
            origin,
            scope,
            indexes: Vec::new(),
        }
    }

    /// `` `tensorflow==2.15` `` or `` `tensorflow==2.15` (base.txt:3) ``.
    pub fn cite(&self) -> String {
        match &self.origin {
            Some(o) => format!("`{}` ({o})", self.text),
            None => format!("`{}`", self.text),
        }
    }
}

/// A declared Python version (`requires-python`, `python=3.10`, `FROM python:3.11`, …).
#[derive(Debug, Clone)]
pub struct PythonDecl {
    pub spec: Spec,
    pub text: String,
    pub span: Span,
    pub origin: Option<Origin>,
    pub scope: usize,
}

/// How pip uses a package index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexKind {
    /// `--index-url`, a uv index, a Poetry source: the packages come from there.
    Primary,
    /// `--extra-index-url`: pip takes the newest version from any index.
    Extra,
    /// `--find-links`.
    FindLinks,
}

#[derive(Debug, Clone)]
pub struct Index {
    pub url: String,
    pub kind: IndexKind,
    pub span: Span,
    pub origin: Option<Origin>,
}

impl Index {
    /// The PyTorch wheel variant an index serves (`cu118`, `rocm6.1`, `cpu`), for
    /// `download.pytorch.org/whl/<tag>`; `None` for nightly/test/LTS indexes and others.
    pub fn torch_tag(&self) -> Option<String> {
        let at = self.url.find("download.pytorch.org/whl/")?;
        let rest = &self.url[at + "download.pytorch.org/whl/".len()..];
        let tag = rest.split(['/', '?', '#']).next()?.to_ascii_lowercase();
        let ok = (tag.starts_with("cu")
            && tag[2..].bytes().all(|b| b.is_ascii_digit())
            && tag.len() > 2)
            || tag.starts_with("rocm")
            || tag == "cpu";
        ok.then_some(tag)
    }
}

/// A piece of evidence that the whole file targets one platform.
#[derive(Debug, Clone)]
pub struct Evidence {
    pub span: Span,
    pub what: String,
}

/// A group of requirements installed together: the base, a `[project.optional-dependencies]`
/// group, a Docker build stage.
#[derive(Debug, Clone)]
pub struct Scope {
    pub name: String,
    /// Requirements of the parent are installed too (the base for an extra; the stage a
    /// `FROM stage AS next` builds on).
    pub parent: Option<usize>,
}

/// What a manifest declares.
#[derive(Debug, Clone)]
pub struct Manifest {
    pub format: Format,
    pub requirements: Vec<Requirement>,
    pub pythons: Vec<PythonDecl>,
    pub indexes: Vec<Index>,
    pub scopes: Vec<Scope>,
    /// The file as a whole targets native Windows (a conda prefix `C:\…`, a Windows base
    /// image, Windows-only packages without markers).
    pub windows: Vec<Evidence>,
    /// The file mentions WSL: Windows evidence is not taken as native Windows.
    pub wsl: bool,
    /// `zlib-wapi` / `zlibwapi.dll` is provided somewhere in the file.
    pub zlib_provisioned: bool,
    /// `ENV` / `ARG` / conda `variables:` as (name, value, span).
    pub env_vars: Vec<(String, String, Span)>,
    /// `#` comments, for suppressions.
    pub comments: Vec<Span>,
    /// 0-based inclusive line ranges of logical lines / instructions.
    pub statements: Vec<(usize, usize)>,
    /// A comment line stands for the instruction below it (Dockerfiles, where a comment cannot
    /// follow an instruction on its line).
    pub comment_covers_next: bool,
    /// Regions not understood (reported as GL003 with `--verbose`).
    pub errors: Vec<Span>,
    /// The file is not readable as its format at all (reported as GL002).
    pub fatal: Option<String>,
}

impl Manifest {
    pub fn new(format: Format) -> Manifest {
        Manifest {
            format,
            requirements: Vec::new(),
            pythons: Vec::new(),
            indexes: Vec::new(),
            scopes: vec![Scope {
                name: String::new(),
                parent: None,
            }],
            windows: Vec::new(),
            wsl: false,
            zlib_provisioned: false,
            env_vars: Vec::new(),
            comments: Vec::new(),
            statements: Vec::new(),
            comment_covers_next: false,
            errors: Vec::new(),
            fatal: None,
        }
    }

    /// Lines a suppression comment on 0-based `line` covers.
    pub fn coverage(&self, file: &SourceFile, line: usize) -> (usize, usize) {
        let is_comment = |l: usize| {
            let t = file.line_text(l).trim();
            t.is_empty() || t.starts_with('#')
        };
        if self.comment_covers_next && file.line_text(line).trim_start().starts_with('#') {
            // A comment line inside a continued instruction stands for the line below it.
            if let Some(&(_, last)) = self.statements.iter().find(|s| s.0 < line && line <= s.1) {
                let mut next = line + 1;
                while next < last && is_comment(next) {
                    next += 1;
                }
                return (line, next.min(last));
            }
            if let Some(next) = self.statements.iter().find(|s| s.0 > line) {
                let between_blank = (line + 1..next.0).all(is_comment);
                if between_blank {
                    return (line, next.1);
                }
            }
            return (line, line);
        }
        match self.statements.iter().find(|s| s.0 <= line && line <= s.1) {
            Some(&(a, b)) if a == line => (a, b),
            _ => (line, line),
        }
    }

    /// Adds the base-image facts of a Windows evidence check: Windows-only packages that are
    /// declared without a marker.
    pub fn note_windows_only_packages(&mut self) {
        const WINDOWS_ONLY: &[&str] = &[
            "pywin32",
            "pypiwin32",
            "pywinpty",
            "winpty",
            "wincertstore",
            "win-inet-pton",
            "vc",
            "vs2015-runtime",
            "vc14-runtime",
            "ucrt",
        ];
        let found: Vec<Evidence> = self
            .requirements
            .iter()
            .filter(|r| r.origin.is_none() && r.marker.is_none() && r.installer != Installer::Image)
            .filter(|r| WINDOWS_ONLY.contains(&r.name.as_str()) || r.name.starts_with("m2w64-"))
            .map(|r| Evidence {
                span: r.span,
                what: format!("`{}` only exists for Windows", r.name),
            })
            .collect();
        self.windows.extend(found);
        if self.requirements.iter().any(|r| r.name == "zlib-wapi") {
            self.zlib_provisioned = true;
        }
    }
}

/// Parses a manifest file (not `setup.py`, which is read from its Python tree).
pub fn parse(format: Format, file: &SourceFile, loader: &mut Loader) -> Manifest {
    let mut m = match format {
        Format::Requirements => requirements::parse(file, loader),
        Format::Pyproject => pyproject::parse(file),
        Format::Conda => conda::parse(file, loader),
        Format::Dockerfile => dockerfile::parse(file, loader),
        Format::SetupPy => Manifest::new(Format::SetupPy),
        Format::Shell => shell_script::parse(file),
    };
    finish(&mut m, &file.text);
    m
}

/// For the parsers' tests: `text` read by one format's `parse` as the file `name`, with no
/// includes.
#[cfg(test)]
pub(crate) fn parse_named(
    name: &str,
    text: &str,
    parse: fn(&SourceFile, &mut Loader) -> Manifest,
) -> Manifest {
    let f = SourceFile::new(name.into(), name.into(), text.into());
    parse(&f, &mut Loader::none())
}

/// What every parser's result gets: file-wide evidence.
pub fn finish(m: &mut Manifest, text: &str) {
    m.note_windows_only_packages();
    let lower = text.to_ascii_lowercase();
    if lower.contains("zlibwapi") || lower.contains("zlib-wapi") {
        m.zlib_provisioned = true;
    }
    m.wsl = lower
        .match_indices("wsl")
        .any(|(i, _)| !lower[..i].ends_with(|c: char| c.is_ascii_alphanumeric()));
}

/// Reads the files a manifest includes (`-r other.txt`, `pip install -r …` in a Dockerfile),
/// lazily and with bounds: at most [`Loader::MAX_FILES`] files of at most 1 MiB, nested at most
/// [`Loader::MAX_DEPTH`] deep, never twice, and never outside the checked roots.
pub struct Loader {
    roots: Vec<PathBuf>,
    seen: Vec<PathBuf>,
}

/// A file read by the [`Loader`].
pub struct Included {
    pub path: PathBuf,
    /// As shown to the user.
    pub display: String,
    pub file: SourceFile,
}

impl Loader {
    pub const MAX_FILES: usize = 16;
    pub const MAX_DEPTH: usize = 4;
    const MAX_SIZE: u64 = 1 << 20;

    /// A loader for the file at `path`: includes must lie under one of `roots` (the paths the
    /// run was asked to check), or, when none are given, under the file's own directory.
    pub fn new(path: &Path, roots: &[PathBuf]) -> Loader {
        let mut roots: Vec<PathBuf> = roots
            .iter()
            .filter_map(|r| std::fs::canonicalize(r).ok())
            .collect();
        if roots.is_empty() {
            if let Some(dir) = path.parent().and_then(|d| {
                let d = if d.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    d
                };
                std::fs::canonicalize(d).ok()
            }) {
                roots.push(dir);
            }
        }
        let seen = std::fs::canonicalize(path).into_iter().collect();
        Loader { roots, seen }
    }

    /// A loader that reads nothing.
    pub fn none() -> Loader {
        Loader {
            roots: Vec::new(),
            seen: Vec::new(),
        }
    }

    /// Reads `rel` relative to the directory of `from` (`from_display` is how that file is
    /// shown). `None` when it is out of bounds, missing, already read or unreadable.
    pub fn read(
        &mut self,
        from: &Path,
        from_display: &str,
        rel: &str,
        depth: usize,
    ) -> Option<Included> {
        if depth >= Self::MAX_DEPTH || self.seen.len() >= Self::MAX_FILES || self.roots.is_empty() {
            return None;
        }
        let rel = rel.trim().trim_matches(|c| c == '"' || c == '\'');
        if rel.is_empty() || rel.contains("://") || rel.contains('$') {
            return None;
        }
        let dir = from.parent().unwrap_or(Path::new("."));
        let joined = dir.join(rel);
        let canonical = std::fs::canonicalize(&joined).ok()?;
        if !self.roots.iter().any(|r| canonical.starts_with(r)) || self.seen.contains(&canonical) {
            return None;
        }
        self.seen.push(canonical.clone());
        let text = gpulint_source::read_source(&canonical, Self::MAX_SIZE).ok()?;
        let display_dir = Path::new(from_display).parent().unwrap_or(Path::new(""));
        let display = normalize_display(&display_dir.join(rel));
        Some(Included {
            path: joined,
            display: display.clone(),
            file: SourceFile::new(canonical, display, text),
        })
    }
}

/// `a/b/../c.txt` → `a/c.txt`, lexically.
fn normalize_display(p: &Path) -> String {
    let mut out: Vec<String> = Vec::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir if out.last().is_some_and(|l| l != "..") => {
                out.pop();
            }
            other => out.push(other.as_os_str().to_string_lossy().into_owned()),
        }
    }
    out.join("/")
}

/// Finds `#` comments in a line of TOML or YAML (outside quotes; in YAML a `#` must follow
/// whitespace). Returns byte offsets of comment starts within `line`.
pub fn hash_comment(line: &str, need_space: bool) -> Option<usize> {
    let b = line.as_bytes();
    let mut quote: Option<u8> = None;
    for (i, &c) in b.iter().enumerate() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == b'"' || c == b'\'' => quote = Some(c),
            None if c == b'#' && (!need_space || i == 0 || b[i - 1].is_ascii_whitespace()) => {
                return Some(i)
            }
            None => {}
        }
    }
    None
}

/// Collects the `#` comments of a TOML or YAML file and its line-by-line statements.
pub fn line_comments(m: &mut Manifest, file: &SourceFile, need_space: bool) {
    for line in 0..file.line_count() {
        let (start, end) = file.line_range(line);
        let text = &file.text[start..end];
        if let Some(at) = hash_comment(text, need_space) {
            m.comments.push(Span::new(start + at, end));
        }
        m.statements.push((line, line));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        let f = |p: &str| Format::of_path(Path::new(p));
        assert_eq!(f("requirements.txt"), Some(Format::Requirements));
        assert_eq!(f("a/requirements-dev.txt"), Some(Format::Requirements));
        assert_eq!(f("dev-requirements.txt"), Some(Format::Requirements));
        assert_eq!(f("requirements/base.txt"), Some(Format::Requirements));
        assert_eq!(
            f("MF002_windows.requirements.txt"),
            Some(Format::Requirements)
        );
        assert_eq!(f("notes.txt"), None);
        assert_eq!(f("pyproject.toml"), Some(Format::Pyproject));
        assert_eq!(f("Cargo.toml"), None);
        assert_eq!(f("environment.yml"), Some(Format::Conda));
        assert_eq!(f("environment-gpu.yaml"), Some(Format::Conda));
        assert_eq!(f("conda.yaml"), Some(Format::Conda));
        assert_eq!(f("config.yaml"), None);
        assert_eq!(f("Dockerfile"), Some(Format::Dockerfile));
        assert_eq!(f("Dockerfile.gpu"), Some(Format::Dockerfile));
        assert_eq!(f("train.Dockerfile"), Some(Format::Dockerfile));
        assert_eq!(f("Dockerfile-triton"), Some(Format::Dockerfile));
        assert_eq!(f("Dockerfile_spark"), Some(Format::Dockerfile));
        assert_eq!(f("dockerfiles"), None);
        assert_eq!(f("Dockerfiles"), None);
        assert_eq!(f("dockerfile_notes.md"), None);
        assert_eq!(f("setup.py"), None);
        assert_eq!(f("scripts/train.sh"), Some(Format::Shell));
        assert_eq!(f(".env"), Some(Format::Shell));
        assert_eq!(f("run.bat"), Some(Format::Shell));
        assert_eq!(f("env.yml"), None);
    }

    #[test]
    fn includes_stay_below_the_root_and_are_bounded() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("project");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(tmp.path().join("outside.txt"), "tensorflow-gpu\n").unwrap();
        std::fs::write(
            root.join("base.txt"),
            "-r sub/more.txt\ntensorflow==2.15.0\n",
        )
        .unwrap();
        std::fs::write(root.join("sub/more.txt"), "-r ../base.txt\ntorch==2.1.0\n").unwrap();
        let top = root.join("requirements.txt");
        std::fs::write(&top, "-r base.txt\n-r ../outside.txt\n-r /etc/hostname\n").unwrap();
        let file = SourceFile::new(
            top.clone(),
            "requirements.txt".into(),
            std::fs::read_to_string(&top).unwrap(),
        );
        let mut loader = Loader::new(&top, std::slice::from_ref(&root));
        let m = parse(Format::Requirements, &file, &mut loader);
        let names: Vec<_> = m.requirements.iter().map(|r| r.name.as_str()).collect();
        // base.txt and sub/more.txt once each (the cycle back to base.txt is cut); nothing
        // from outside the root.
        assert_eq!(names, ["torch", "tensorflow"]);
        let origin = m.requirements[0].origin.as_ref().unwrap();
        assert_eq!(origin.file, "sub/more.txt");
        assert_eq!(origin.line, 2);
        // The include line in the checked file is where findings about them point.
        assert_eq!(
            &file.text[m.requirements[0].span.start..m.requirements[0].span.end],
            "-r base.txt"
        );
    }

    #[test]
    fn torch_tags() {
        let i = |u: &str| Index {
            url: u.into(),
            kind: IndexKind::Extra,
            span: Span::new(0, 0),
            origin: None,
        };
        assert_eq!(
            i("https://download.pytorch.org/whl/cu118")
                .torch_tag()
                .as_deref(),
            Some("cu118")
        );
        assert_eq!(
            i("https://download.pytorch.org/whl/rocm6.1/")
                .torch_tag()
                .as_deref(),
            Some("rocm6.1")
        );
        assert_eq!(
            i("https://download.pytorch.org/whl/nightly/cu121").torch_tag(),
            None
        );
        assert_eq!(
            i("https://download.pytorch.org/whl/torch_stable.html").torch_tag(),
            None
        );
        assert_eq!(i("https://pypi.org/simple").torch_tag(), None);
    }

    #[test]
    fn comments_outside_quotes() {
        assert_eq!(
            hash_comment(r#"deps = ["a#b"]  # noqa: MF001"#, false),
            Some(16)
        );
        assert_eq!(hash_comment("  - cudnn=8.1 # note", true), Some(14));
        assert_eq!(hash_comment("  - url#frag", true), None);
    }
}
