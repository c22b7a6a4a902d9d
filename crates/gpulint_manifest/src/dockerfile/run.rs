//! `pip install` and `conda install` inside a Dockerfile's `RUN`: requirements, `-r` files
//! (read through the [`Loader`]), and package indexes given on the command line.

use super::shell::{expand, shell_commands, Word};
use super::Instruction;
use crate::conda::{conda_spec, push_conda_package};
use crate::pep508::parse_requirement;
use crate::requirements::{read_into, FileCtx};
use crate::{Index, IndexKind, Installer, Loader, Manifest, Requirement};
use gpulint_source::SourceFile;
use gpulint_source::Span;
use std::collections::HashMap;

const PIP_VALUE_OPTIONS: &[&str] = &[
    "-r",
    "--requirement",
    "-c",
    "--constraint",
    "-e",
    "--editable",
    "-i",
    "--index-url",
    "--extra-index-url",
    "-f",
    "--find-links",
    "-t",
    "--target",
    "--prefix",
    "--root",
    "--src",
    "--upgrade-strategy",
    "--global-option",
    "--install-option",
    "-C",
    "--config-settings",
    "--trusted-host",
    "--cache-dir",
    "--log",
    "--platform",
    "--python-version",
    "--implementation",
    "--abi",
    "--progress-bar",
    "--proxy",
    "--timeout",
    "--retries",
    "--exists-action",
    "--cert",
    "--client-cert",
    "--report",
    "--no-binary",
    "--only-binary",
    "--python",
];

const CONDA_VALUE_OPTIONS: &[&str] = &[
    "-c",
    "--channel",
    "-n",
    "--name",
    "-p",
    "--prefix",
    "--file",
    "--repodata-fn",
];

fn basename(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}

enum Tool {
    Pip,
    Conda,
}

/// The tool and the index of the first argument after `install` in a command.
fn install_command(words: &[Word]) -> Option<(Tool, usize)> {
    let mut i = 0;
    while let Some(w) = words.get(i) {
        let t = w.text.as_str();
        let assignment = t.split_once('=').is_some_and(|(k, _)| {
            !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        });
        if assignment || matches!(t, "sudo" | "env" | "time" | "nohup" | "exec" | "-H" | "-E") {
            i += 1;
        } else {
            break;
        }
    }
    let w0 = basename(&words.get(i)?.text).to_string();
    let is_pip = |s: &str| {
        s == "pip"
            || s.strip_prefix("pip")
                .is_some_and(|v| v.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
    };
    let is_python = |s: &str| {
        s.strip_prefix("python")
            .is_some_and(|v| v.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
    };
    let (tool, mut i) = if is_pip(&w0) {
        (Tool::Pip, i + 1)
    } else if is_python(&w0) {
        let m = words[i + 1..].iter().position(|w| w.text == "-m")? + i + 1;
        if !is_pip(&words.get(m + 1)?.text) {
            return None;
        }
        (Tool::Pip, m + 2)
    } else if w0 == "uv" && words.get(i + 1).is_some_and(|w| w.text == "pip") {
        (Tool::Pip, i + 2)
    } else if matches!(w0.as_str(), "conda" | "mamba" | "micromamba") {
        (Tool::Conda, i + 1)
    } else {
        return None;
    };
    while words.get(i).is_some_and(|w| w.text.starts_with('-')) {
        i += 1;
    }
    (words.get(i)?.text == "install").then_some((tool, i + 1))
}

pub(super) fn run(
    m: &mut Manifest,
    ins: &Instruction,
    args_at: usize,
    vars: &HashMap<String, String>,
    scope: usize,
    file: &SourceFile,
    loader: &mut Loader,
) {
    let args = &ins.text[args_at..];
    let (cmds, comment) = if args.trim_start().starts_with('[') {
        // Exec form: a JSON array of words.
        match serde_json::from_str::<Vec<String>>(args.trim()) {
            Ok(words) => {
                let w = words
                    .into_iter()
                    .map(|text| Word {
                        text,
                        start: 0,
                        end: args.len(),
                    })
                    .collect();
                (vec![w], None)
            }
            Err(_) => return,
        }
    } else {
        shell_commands(args)
    };
    if let Some(c) = comment {
        let span = ins.span(args_at + c, ins.text.len());
        let line_end = file.text[span.start..]
            .find('\n')
            .map_or(file.text.len(), |e| span.start + e);
        m.comments.push(Span::new(
            span.start,
            line_end.min(span.end.max(span.start)),
        ));
    }
    for words in cmds {
        let Some((tool, first)) = install_command(&words) else {
            continue;
        };
        let first_req = m.requirements.len();
        let first_index = m.indexes.len();
        let mut i = first;
        while i < words.len() {
            let w = &words[i];
            let span = ins.span(args_at + w.start, args_at + w.end);
            let text = expand(&w.text, vars);
            let options = match tool {
                Tool::Pip => PIP_VALUE_OPTIONS,
                Tool::Conda => CONDA_VALUE_OPTIONS,
            };
            if text.starts_with('-') {
                let (name, inline) = match text.split_once('=') {
                    Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
                    _ => (text.clone(), None),
                };
                let (name, inline) = match (&tool, name.as_str()) {
                    (Tool::Pip, n)
                        if n.len() > 2
                            && !n.starts_with("--")
                            && (n.starts_with("-r") || n.starts_with("-i")) =>
                    {
                        (n[..2].to_string(), Some(n[2..].to_string()))
                    }
                    _ => (name, inline),
                };
                if !options.contains(&name.as_str()) {
                    i += 1;
                    continue;
                }
                let (value, vspan) = match inline {
                    Some(v) => (v, span),
                    None => match words.get(i + 1) {
                        Some(n) => {
                            i += 1;
                            (
                                expand(&n.text, vars),
                                ins.span(args_at + n.start, args_at + n.end),
                            )
                        }
                        None => break,
                    },
                };
                if let Tool::Pip = tool {
                    pip_option(
                        m,
                        &name,
                        &value,
                        Span::new(span.start, vspan.end),
                        vspan,
                        scope,
                        file,
                        loader,
                    );
                }
                i += 1;
                continue;
            }
            match tool {
                Tool::Pip => {
                    if text.contains("://") || text.starts_with(['.', '/']) || text.contains('$') {
                        i += 1;
                        continue;
                    }
                    if let Some(r) = parse_requirement(&text) {
                        let raw = &ins.text[args_at + w.start..args_at + w.end];
                        let req_span = if raw == text {
                            ins.span(
                                args_at + w.start + r.range.start,
                                args_at + w.start + r.range.end,
                            )
                        } else {
                            span
                        };
                        let written = text[r.range.clone()].to_string();
                        m.requirements
                            .push(Requirement::pip_at(r, written, req_span, None, scope));
                    }
                }
                Tool::Conda => {
                    if let Some((name, spec, build, _)) =
                        conda_spec(&text).filter(|_| !text.contains('$'))
                    {
                        push_conda_package(m, name, spec, build, text.clone(), span, scope);
                    }
                }
            }
            i += 1;
        }
        let idx: Vec<usize> = (first_index..m.indexes.len()).collect();
        for r in &mut m.requirements[first_req..] {
            if r.installer == Installer::Pip {
                r.indexes = idx.clone();
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn pip_option(
    m: &mut Manifest,
    name: &str,
    value: &str,
    whole: Span,
    vspan: Span,
    scope: usize,
    file: &SourceFile,
    loader: &mut Loader,
) {
    let kind = match name {
        "-r" | "--requirement" => {
            let inc = loader
                .read(&file.path, &file.display_path, value, 1)
                .or_else(|| {
                    let base = basename(value);
                    (base != value)
                        .then(|| loader.read(&file.path, &file.display_path, base, 1))
                        .flatten()
                });
            if let Some(inc) = inc {
                let ctx = FileCtx {
                    path: &inc.path,
                    display: &inc.display,
                    include: Some(whole),
                    depth: 1,
                    scope,
                };
                read_into(m, &inc.file, &ctx, loader);
            }
            return;
        }
        "-i" | "--index-url" => IndexKind::Primary,
        "--extra-index-url" => IndexKind::Extra,
        "-f" | "--find-links" => IndexKind::FindLinks,
        _ => return,
    };
    m.indexes.push(Index {
        url: value.to_string(),
        kind,
        span: vspan,
        origin: None,
    });
}
