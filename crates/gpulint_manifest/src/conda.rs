//! Conda environment files (`environment.yml`, `conda.yaml`): `dependencies` as conda match
//! specs (`cudatoolkit=11.2`, `cudnn=8.1.0`, `pytorch=1.13.1=py3.9_cuda11.7_cudnn8.5.0_0`,
//! `conda-forge::tensorflow-gpu`), the `pip:` subsection as pip lines, `platforms:` and a
//! Windows `prefix:` as platform evidence, and `variables:`. Read with yaml-rust2's event
//! parser (iterative), keeping only the few levels the format uses.

use super::pep508::{normalize, parse_specifiers, Spec};
use super::requirements::{pip_line, FileCtx};
use super::{
    line_comments, Evidence, Format, Installer, Loader, Manifest, PythonDecl, Requirement,
};
use gpulint_source::SourceFile;
use gpulint_source::Span;
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// Deeper nodes than this are skipped: an environment file needs four levels.
const MAX_DEPTH: usize = 8;

/// A YAML node; a scalar keeps where it starts (1-based line, 0-based column in characters)
/// and whether it was quoted.
#[derive(Debug)]
enum Node {
    Scalar(String, (usize, usize), bool),
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
    Other,
}

impl Node {
    fn as_str(&self) -> Option<&str> {
        match self {
            Node::Scalar(s, _, _) => Some(s),
            _ => None,
        }
    }

    fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Map(entries) => entries
                .iter()
                .find(|(k, _)| k.as_str() == Some(key))
                .map(|(_, v)| v),
            _ => None,
        }
    }
}

enum Frame {
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>, Option<Node>),
}

#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    skipped: usize,
    root: Option<Node>,
}

impl Builder {
    fn push(&mut self, node: Node) {
        match self.stack.last_mut() {
            Some(Frame::Seq(items)) => items.push(node),
            Some(Frame::Map(entries, key)) => match key.take() {
                Some(k) => entries.push((k, node)),
                None => *key = Some(node),
            },
            None => {
                if self.root.is_none() {
                    self.root = Some(node);
                }
            }
        }
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        let opens = matches!(ev, Event::SequenceStart(..) | Event::MappingStart(..));
        let closes = matches!(ev, Event::SequenceEnd | Event::MappingEnd);
        if self.skipped > 0 {
            if opens {
                self.skipped += 1;
            } else if closes {
                self.skipped -= 1;
                if self.skipped == 0 {
                    self.push(Node::Other);
                }
            }
            return;
        }
        match ev {
            Event::SequenceStart(..) | Event::MappingStart(..) if self.stack.len() >= MAX_DEPTH => {
                self.skipped = 1;
            }
            Event::SequenceStart(..) => self.stack.push(Frame::Seq(Vec::new())),
            Event::MappingStart(..) => self.stack.push(Frame::Map(Vec::new(), None)),
            Event::SequenceEnd | Event::MappingEnd => {
                let node = match self.stack.pop() {
                    Some(Frame::Seq(items)) => Node::Seq(items),
                    Some(Frame::Map(entries, _)) => Node::Map(entries),
                    None => Node::Other,
                };
                self.push(node);
            }
            Event::Scalar(value, style, _, _) => {
                self.push(Node::Scalar(
                    value,
                    (mark.line(), mark.col()),
                    style != TScalarStyle::Plain,
                ));
            }
            Event::Alias(_) => self.push(Node::Other),
            _ => {}
        }
    }
}

/// Parses a conda environment file. Invalid YAML gets [`Manifest::fatal`].
pub fn parse(file: &SourceFile, loader: &mut Loader) -> Manifest {
    let mut m = Manifest::new(Format::Conda);
    line_comments(&mut m, file, true);
    let mut builder = Builder::default();
    let mut parser = Parser::new_from_str(&file.text);
    if let Err(e) = parser.load(&mut builder, false) {
        m.fatal = Some(format!(
            "invalid YAML at line {}: {}",
            e.marker().line(),
            e.info()
        ));
        return m;
    }
    // The tree is at most MAX_DEPTH deep, so dropping it cannot recurse far.
    let Some(root) = builder.root.take() else {
        return m;
    };
    read_root(&mut m, file, &root, loader);
    m
}

/// The byte offset of a YAML position (the parser counts characters).
fn offset(file: &SourceFile, (line, col): (usize, usize)) -> usize {
    if line == 0 || line > file.line_count() {
        return file.text.len();
    }
    let (start, end) = file.line_range(line - 1);
    let text = &file.text[start..end];
    start + text.char_indices().nth(col).map_or(text.len(), |(i, _)| i)
}

/// The span of a scalar that starts at `pos`: its text up to the end of the value.
fn scalar_span(file: &SourceFile, pos: (usize, usize), value: &str, quoted: bool) -> Span {
    let text = file.text.as_str();
    let at = offset(file, pos);
    let rest = text.get(at..).unwrap_or("");
    if quoted {
        if let Some(q) = rest.chars().next().filter(|c| *c == '"' || *c == '\'') {
            let inner = &rest[1..];
            if inner.starts_with(value) && inner[value.len()..].starts_with(q) {
                return Span::new(at + 1, at + 1 + value.len());
            }
        }
    } else if rest.starts_with(value) {
        return Span::new(at, at + value.len());
    }
    let line_end = rest.find('\n').unwrap_or(rest.len());
    Span::new(at, at + rest[..line_end].trim_end().len())
}

fn read_root(m: &mut Manifest, file: &SourceFile, root: &Node, loader: &mut Loader) {
    let text = file.text.as_str();
    if let Some(Node::Scalar(prefix, at, quoted)) = root.get("prefix") {
        let b = prefix.as_bytes();
        if b.len() > 2
            && b[0].is_ascii_alphabetic()
            && b[1] == b':'
            && (b[2] == b'\\' || b[2] == b'/')
        {
            m.windows.push(Evidence {
                span: scalar_span(file, *at, prefix, *quoted),
                what: format!("the environment was exported from a Windows prefix `{prefix}`"),
            });
        }
    }
    if let Some(Node::Seq(platforms)) = root.get("platforms") {
        let all_windows = !platforms.is_empty()
            && platforms
                .iter()
                .all(|p| p.as_str().is_some_and(|s| s.starts_with("win-")));
        if all_windows {
            if let Some(Node::Scalar(s, at, q)) = platforms.first() {
                m.windows.push(Evidence {
                    span: scalar_span(file, *at, s, *q),
                    what: format!("the environment is solved for `{s}` only"),
                });
            }
        }
    }
    if let Some(Node::Map(vars)) = root.get("variables") {
        for (k, v) in vars {
            if let (Some(k), Node::Scalar(val, at, q)) = (k.as_str(), v) {
                m.env_vars
                    .push((k.to_string(), val.clone(), scalar_span(file, *at, val, *q)));
            }
        }
    }
    let Some(Node::Seq(deps)) = root.get("dependencies") else {
        return;
    };
    for dep in deps {
        match dep {
            Node::Scalar(s, at, q) => {
                let span = scalar_span(file, *at, s, *q);
                conda_dep(m, s, span);
            }
            Node::Map(_) => {
                let Some(Node::Seq(pips)) = dep.get("pip") else {
                    continue;
                };
                let ctx = FileCtx {
                    path: &file.path,
                    display: &file.display_path,
                    include: None,
                    depth: 0,
                    scope: 0,
                };
                let first_index = m.indexes.len();
                let first_req = m.requirements.len();
                for p in pips {
                    let Node::Scalar(s, at, q) = p else {
                        continue;
                    };
                    let span = scalar_span(file, *at, s, *q);
                    let exact = text.get(span.start..span.end) == Some(s.as_str());
                    let body = s.trim();
                    let line_no = file.position(span.start).0;
                    let map = |a: usize, b: usize| {
                        if exact {
                            Span::new(span.start + a, span.start + b)
                        } else {
                            span
                        }
                    };
                    let lead = s.len() - s.trim_start().len();
                    pip_line(m, body, lead, &map, line_no, &ctx, loader);
                }
                let idx: Vec<usize> = (first_index..m.indexes.len()).collect();
                for r in &mut m.requirements[first_req..] {
                    r.indexes = idx.clone();
                }
            }
            _ => {}
        }
    }
}

/// A conda match spec as (name, PEP 440 spec, build string).
pub fn conda_spec(s: &str) -> Option<(String, Spec, Option<String>, usize)> {
    let s = s.trim();
    let (s, skipped) = match s.rfind("::") {
        Some(i) => (&s[i + 2..], i + 2),
        None => (s, 0),
    };
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
        .unwrap_or(s.len());
    if end == 0 {
        return None;
    }
    let name = normalize(&s[..end]);
    let rest = s[end..].trim();
    let rest = rest
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .and_then(|r| r.trim().strip_prefix("version"))
        .map(|r| {
            r.trim_start()
                .trim_start_matches('=')
                .trim()
                .trim_matches(|c| c == '"' || c == '\'')
        })
        .unwrap_or(rest);
    if rest.is_empty() {
        return Some((name, Spec::Any, None, skipped));
    }
    if rest.contains('|') {
        return Some((name, Spec::Unknown, None, skipped));
    }
    // `=1.2=build`, `==1.2`, `>=1.2,<2`, `1.2 build`, `1.2.*`.
    let (version, build) = if let Some(v) = rest.strip_prefix("==") {
        split_build(v, '=')
    } else if let Some(v) = rest.strip_prefix('=') {
        split_build(v, '=')
    } else if rest.starts_with(['<', '>', '!', '~']) {
        (rest, None)
    } else {
        split_build(rest, ' ')
    };
    let fuzzy = !rest.starts_with("==") && !version.starts_with(['<', '>', '!', '~']);
    let version = version.trim();
    let pep = if fuzzy {
        if version.ends_with('*') {
            format!("=={version}")
        } else {
            format!("=={version}.*")
        }
    } else if version.starts_with(['<', '>', '!', '~']) {
        version.to_string()
    } else {
        format!("=={version}")
    };
    let (spec, _) = parse_specifiers(&pep);
    Some((name, spec, build.map(str::to_string), skipped))
}

fn split_build(v: &str, sep: char) -> (&str, Option<&str>) {
    match v.split_once(sep) {
        Some((a, b)) => (a, Some(b.trim())),
        None => (v, None),
    }
}

fn conda_dep(m: &mut Manifest, s: &str, span: Span) {
    let Some((name, spec, build, _)) = conda_spec(s) else {
        m.errors.push(span);
        return;
    };
    push_conda_package(m, name, spec, build, s.trim().to_string(), span, 0);
}

/// Records a conda package written as `text` at `span`: `python` as the Python declaration,
/// anything else as a conda requirement.
pub(super) fn push_conda_package(
    m: &mut Manifest,
    name: String,
    spec: Spec,
    build: Option<String>,
    text: String,
    span: Span,
    scope: usize,
) {
    if name == "python" {
        m.pythons.push(PythonDecl {
            spec,
            text,
            span,
            origin: None,
            scope,
        });
        return;
    }
    m.requirements.push(Requirement {
        name,
        extras: Vec::new(),
        spec,
        local: None,
        build,
        marker: None,
        installer: Installer::Conda,
        text,
        span,
        origin: None,
        scope,
        indexes: Vec::new(),
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use pep440_rs::Version;
    use std::str::FromStr;

    fn parse_text(text: &str) -> Manifest {
        crate::parse_named("environment.yml", text, parse)
    }

    #[test]
    fn specs() {
        let v = |s: &str| Version::from_str(s).unwrap();
        let (n, s, b, _) = conda_spec("conda-forge::cudatoolkit=11.2").unwrap();
        assert_eq!(n, "cudatoolkit");
        assert_eq!(s.admits(&v("11.2.2")), Some(true));
        assert_eq!(s.admits(&v("11.3")), Some(false));
        assert!(b.is_none());
        let (_, s, b, _) = conda_spec("pytorch=1.13.1=py3.9_cuda11.7_cudnn8.5.0_0").unwrap();
        assert_eq!(s.admits(&v("1.13.1")), Some(true));
        assert_eq!(b.as_deref(), Some("py3.9_cuda11.7_cudnn8.5.0_0"));
        let (_, s, _, _) = conda_spec("cudnn>=8.1,<8.3").unwrap();
        assert_eq!(s.admits(&v("8.2.1")), Some(true));
        let (_, s, _, _) = conda_spec("python 3.9").unwrap();
        assert_eq!(s.admits(&v("3.9.7")), Some(true));
        let (_, s, _, _) = conda_spec("cudnn==8.1.0.77").unwrap();
        assert_eq!(s.admits(&v("8.1.0.77")), Some(true));
        assert!(matches!(conda_spec("x 1.0|2.0").unwrap().1, Spec::Unknown));
    }

    #[test]
    fn environment() {
        let text = "name: tf\nprefix: C:\\Users\\me\\envs\\tf\ndependencies:\n  - python=3.9\n  - cudatoolkit=11.2  # toolkit\n  - \"cudnn=8.1.0\"\n  - pip:\n    - --extra-index-url https://download.pytorch.org/whl/cu118\n    - tensorflow<2.11\n";
        let m = parse_text(text);
        assert!(m.fatal.is_none());
        assert_eq!(m.windows.len(), 1);
        assert_eq!(m.pythons.len(), 1);
        let names: Vec<_> = m.requirements.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["cudatoolkit", "cudnn", "tensorflow"]);
        let tk = &m.requirements[0];
        assert_eq!(&text[tk.span.start..tk.span.end], "cudatoolkit=11.2");
        let cudnn = &m.requirements[1];
        assert_eq!(&text[cudnn.span.start..cudnn.span.end], "cudnn=8.1.0");
        let tf = &m.requirements[2];
        assert_eq!(&text[tf.span.start..tf.span.end], "tensorflow<2.11");
        assert_eq!(tf.installer, Installer::Pip);
        assert_eq!(tf.indexes, vec![0]);
        assert_eq!(m.comments.len(), 1);
    }

    #[test]
    fn bad_yaml_is_fatal_and_deep_yaml_is_fine() {
        assert!(parse_text("dependencies: [a, b\n  - c: :").fatal.is_some());
        let deep = format!("dependencies: {}{}", "[".repeat(50_000), "]".repeat(50_000));
        let _ = parse_text(&deep);
        let _ = parse_text("é: ü\ndependencies:\n  - ünïcode=1\n  - cudnn=8.1\n");
        let m = parse_text("é: ü\ndependencies:\n  - cudnn=8.1\n");
        let text = "é: ü\ndependencies:\n  - cudnn=8.1\n";
        let r = &m.requirements[0];
        assert_eq!(&text[r.span.start..r.span.end], "cudnn=8.1");
    }
}
