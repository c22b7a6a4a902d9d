//! `requirements*.txt`: pip's format, line by line. Continuation lines (`\`), comments
//! (`#` at the start or after whitespace), options (`-r`, `-c`, `-e`, `--index-url`,
//! `--extra-index-url`, `--find-links`, per-requirement `--hash`), PEP 508 requirements with
//! markers. `-r` includes are read through the [`Loader`]; a `.python-version` or `runtime.txt`
//! next to the file says which Python it is installed with.

use super::pep508::{parse_requirement, parse_specifiers};
use super::{
    Format, Index, IndexKind, Installer, Loader, Logical, Manifest, Origin, PythonDecl, Requirement,
};
use gpulint_source::SourceFile;
use gpulint_source::Span;
use std::path::Path;

/// Parses a requirements file, its includes, and the Python version files beside it.
pub fn parse(file: &SourceFile, loader: &mut Loader) -> Manifest {
    let mut m = Manifest::new(Format::Requirements);
    let ctx = FileCtx {
        path: &file.path,
        display: &file.display_path,
        include: None,
        depth: 0,
        scope: 0,
    };
    read_into(&mut m, file, &ctx, loader);
    let all: Vec<usize> = (0..m.indexes.len()).collect();
    for r in &mut m.requirements {
        if r.installer == Installer::Pip {
            r.indexes = all.clone();
        }
    }
    sibling_python(&mut m, file, loader);
    m
}

/// Where the lines being read come from.
pub struct FileCtx<'a> {
    pub path: &'a Path,
    pub display: &'a str,
    /// For an included file: the span, in the checked file, of the line that includes it.
    pub include: Option<Span>,
    pub depth: usize,
    pub scope: usize,
}

fn logical_lines(file: &SourceFile) -> Vec<Logical> {
    let mut out = Vec::new();
    let mut cur: Option<Logical> = None;
    for line in 0..file.line_count() {
        let (start, end) = file.line_range(line);
        let text = &file.text[start..end];
        let is_comment = text.trim_start().starts_with('#');
        let continues = !is_comment && text.ends_with('\\');
        let body = if continues {
            &text[..text.len() - 1]
        } else {
            text
        };
        let l = cur.get_or_insert_with(|| Logical::starting_at(line));
        l.text.push_str(body);
        l.offsets.extend(start..start + body.len());
        l.last_line = line;
        if !continues {
            out.extend(cur.take());
        }
    }
    out.extend(cur);
    out
}

/// Where a `#` comment starts in a pip line (at the start, or after whitespace).
fn comment_start(text: &str) -> Option<usize> {
    let b = text.as_bytes();
    (0..b.len()).find(|&i| b[i] == b'#' && (i == 0 || b[i - 1].is_ascii_whitespace()))
}

pub fn read_into(m: &mut Manifest, file: &SourceFile, ctx: &FileCtx<'_>, loader: &mut Loader) {
    for logical in logical_lines(file) {
        let mut text = logical.text.as_str();
        if let Some(c) = comment_start(text) {
            if ctx.include.is_none() {
                m.comments.push(logical.span(c, text.len()));
            }
            text = &text[..c];
        }
        if ctx.include.is_none() {
            m.statements.push((logical.first_line, logical.last_line));
        }
        let lead = text.len() - text.trim_start().len();
        let body = text.trim();
        if body.is_empty() {
            continue;
        }
        let line_no = logical.first_line + 1;
        pip_line(
            m,
            body,
            lead,
            &|s, e| logical.span(s, e),
            line_no,
            ctx,
            loader,
        );
    }
}

fn option_value<'a>(body: &'a str, names: &[&str]) -> Option<(&'a str, usize)> {
    for name in names {
        if let Some(rest) = body.strip_prefix(name) {
            let long = name.starts_with("--");
            let value = if let Some(v) = rest.strip_prefix('=') {
                v
            } else if rest.starts_with(char::is_whitespace) {
                rest.trim_start()
            } else if !long && !rest.is_empty() {
                rest
            } else {
                continue;
            };
            let offset = body.len() - value.len();
            let value = value.split_whitespace().next().unwrap_or("");
            return Some((value, offset));
        }
    }
    None
}

/// Does a line name something pip installs that is not a named requirement (a path, a URL,
/// an archive)?
fn is_unnamed(body: &str) -> bool {
    let lower = body.to_ascii_lowercase();
    body.starts_with(['.', '/', '~', '\\', '$'])
        || lower.contains("://")
        || lower.starts_with("file:")
        || ["git+", "hg+", "svn+", "bzr+"]
            .iter()
            .any(|p| lower.starts_with(p))
        || [".whl", ".tar.gz", ".zip", ".tar.bz2"]
            .iter()
            .any(|e| lower.ends_with(e))
        || (body.len() > 2 && body.as_bytes()[1] == b':')
}

/// Reads one pip line (a requirement or an option) into the manifest. `span_of` maps byte
/// ranges of `body` (shifted by `lead`) to spans of the file; `line_no` is 1-based.
#[allow(clippy::too_many_arguments)]
pub fn pip_line(
    m: &mut Manifest,
    body: &str,
    lead: usize,
    span_of: &dyn Fn(usize, usize) -> Span,
    line_no: usize,
    ctx: &FileCtx<'_>,
    loader: &mut Loader,
) {
    let origin = ctx.include.map(|_| Origin {
        file: ctx.display.to_string(),
        line: line_no,
    });
    let here = |s: usize, e: usize| ctx.include.unwrap_or_else(|| span_of(lead + s, lead + e));
    if body.starts_with('-') {
        if let Some((path, _)) = option_value(body, &["--requirement", "-r"]) {
            let include_span = here(0, body.len());
            if let Some(inc) = loader.read(ctx.path, ctx.display, path, ctx.depth + 1) {
                let sub = FileCtx {
                    path: &inc.path,
                    display: &inc.display,
                    include: Some(include_span),
                    depth: ctx.depth + 1,
                    scope: ctx.scope,
                };
                read_into(m, &inc.file, &sub, loader);
            }
            return;
        }
        let kinds: [(&[&str], IndexKind); 3] = [
            (&["--index-url", "-i"], IndexKind::Primary),
            (&["--extra-index-url"], IndexKind::Extra),
            (&["--find-links", "-f"], IndexKind::FindLinks),
        ];
        for (names, kind) in kinds {
            if let Some((url, offset)) = option_value(body, names) {
                m.indexes.push(Index {
                    url: url.to_string(),
                    kind,
                    span: here(offset, offset + url.len()),
                    origin: origin.clone(),
                });
                return;
            }
        }
        // -c, -e, --pre, --no-binary, …: nothing the rules read.
        return;
    }
    // Per-requirement options: `torch==2.1 --hash=sha256:…`.
    let req_text = match body.find(" -") {
        Some(i) => body[..i].trim_end(),
        None => body,
    };
    if is_unnamed(req_text) {
        return;
    }
    match parse_requirement(req_text) {
        Some(r) => {
            let span = here(r.range.start, r.range.end);
            let text = req_text[r.range.clone()].trim().to_string();
            m.requirements
                .push(Requirement::pip_at(r, text, span, origin, ctx.scope));
        }
        None if ctx.include.is_none() => m.errors.push(span_of(lead, lead + body.len())),
        None => {}
    }
}

/// A `.python-version` (pyenv) or `runtime.txt` (`python-3.10.4`) beside the file.
fn sibling_python(m: &mut Manifest, file: &SourceFile, loader: &mut Loader) {
    for name in [".python-version", "runtime.txt"] {
        let Some(inc) = loader.read(&file.path, &file.display_path, name, 1) else {
            continue;
        };
        for (i, line) in inc.file.text.lines().enumerate() {
            let t = line.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            let v = t.strip_prefix("python-").unwrap_or(t);
            if !v.starts_with(|c: char| c.is_ascii_digit()) {
                break;
            }
            let (spec, _) = parse_specifiers(&format!("=={}.*", v.trim_end_matches(".*")));
            m.pythons.push(PythonDecl {
                spec,
                text: format!("{name}: {t}"),
                span: Span::new(0, 0),
                origin: Some(Origin {
                    file: inc.display.clone(),
                    line: i + 1,
                }),
                scope: 0,
            });
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pep508::Spec;

    fn parse_text(text: &str) -> Manifest {
        crate::parse_named("requirements.txt", text, parse)
    }

    #[test]
    fn lines_options_and_spans() {
        let text = "# top\n--extra-index-url https://download.pytorch.org/whl/cu118\ntorch==2.0.1+cu118  # pinned\ntensorflow>=2.10,\\\n  <2.12 ; platform_system == \"Windows\"\n-e .\n./local\nnot a requirement\n";
        let m = parse_text(text);
        assert_eq!(m.indexes.len(), 1);
        assert_eq!(m.indexes[0].kind, IndexKind::Extra);
        assert_eq!(m.requirements.len(), 2);
        let torch = &m.requirements[0];
        assert_eq!(
            &text[torch.span.start..torch.span.end],
            "torch==2.0.1+cu118"
        );
        assert_eq!(torch.local.as_deref(), Some("cu118"));
        assert_eq!(torch.indexes, vec![0]);
        let tf = &m.requirements[1];
        assert!(matches!(tf.spec, Spec::Versions(_)));
        assert!(tf.marker.is_some());
        assert_eq!(m.comments.len(), 2);
        assert_eq!(m.errors.len(), 1);
        assert!(m.statements.contains(&(3, 4)));
    }

    #[test]
    fn never_panics_on_odd_input() {
        for text in [
            "\\",
            "-r",
            "--index-url",
            "torch[",
            "a==",
            "\u{feff}é==1\\\n\\\n",
            "#",
            "x ; ((((",
        ] {
            let _ = parse_text(text);
        }
    }
}
