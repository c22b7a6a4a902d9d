//! Dockerfiles: instructions with continuation lines (and the `# escape=` directive), `ARG`
//! and `ENV` values substituted where pip and conda commands and base images use them, base
//! images read for what they bring (`nvidia/cuda:11.8.0-cudnn8-…` → CUDA 11.8 and cuDNN 8,
//! `tensorflow/tensorflow:2.15.0-gpu`, `pytorch/pytorch:2.1.0-cuda11.8-cudnn8-runtime`,
//! `python:3.10`), and `pip install` / `conda install` inside `RUN` (with `-r` files read
//! through the [`Loader`]). Each build stage is a scope of its own.

mod run;
pub(super) mod shell;

use super::pep508::parse_specifiers;
use super::{Evidence, Format, Installer, Loader, Manifest, PythonDecl, Requirement, Scope};
use gpulint_source::SourceFile;
use gpulint_source::Span;
use shell::{expand, shell_commands, Word};
use std::collections::HashMap;

const INSTRUCTIONS: &[&str] = &[
    "FROM",
    "RUN",
    "CMD",
    "LABEL",
    "MAINTAINER",
    "EXPOSE",
    "ENV",
    "ADD",
    "COPY",
    "ENTRYPOINT",
    "VOLUME",
    "USER",
    "WORKDIR",
    "ARG",
    "ONBUILD",
    "STOPSIGNAL",
    "HEALTHCHECK",
    "SHELL",
];

/// One instruction: its text with continuation lines joined, and the file offset of each byte.
pub(super) type Instruction = super::Logical;

fn escape_char(file: &SourceFile) -> char {
    for line in file.text.lines() {
        let Some(rest) = line.trim().strip_prefix('#') else {
            break;
        };
        let Some((k, v)) = rest.split_once('=') else {
            break;
        };
        if k.trim().eq_ignore_ascii_case("escape") {
            return v.trim().chars().next().unwrap_or('\\');
        }
    }
    '\\'
}

fn instructions(file: &SourceFile, m: &mut Manifest) -> Vec<Instruction> {
    let escape = escape_char(file);
    let mut out = Vec::new();
    let mut line = 0;
    let count = file.line_count();
    while line < count {
        let (start, end) = file.line_range(line);
        let t = &file.text[start..end];
        let trimmed = t.trim_start();
        if trimmed.is_empty() {
            line += 1;
            continue;
        }
        if trimmed.starts_with('#') {
            m.comments
                .push(Span::new(start + (t.len() - trimmed.len()), end));
            line += 1;
            continue;
        }
        let mut ins = Instruction::starting_at(line);
        loop {
            let (s, e) = file.line_range(line);
            let t = &file.text[s..e];
            let tt = t.trim_end();
            ins.last_line = line;
            line += 1;
            if tt.ends_with(escape) {
                let body = &tt[..tt.len() - escape.len_utf8()];
                ins.text.push_str(body);
                ins.offsets.extend(s..s + body.len());
                ins.text.push(' ');
                ins.offsets.push(s + body.len());
                // Comment and empty lines inside a continued instruction are dropped.
                while line < count {
                    let (s2, e2) = file.line_range(line);
                    let t2 = file.text[s2..e2].trim_start();
                    if t2.starts_with('#') {
                        m.comments.push(Span::new(e2 - t2.len(), e2));
                    }
                    if t2.is_empty() || t2.starts_with('#') {
                        line += 1;
                    } else {
                        break;
                    }
                }
                if line < count {
                    continue;
                }
                break;
            }
            ins.text.push_str(t);
            ins.offsets.extend(s..s + t.len());
            break;
        }
        out.push(ins);
    }
    out
}

/// Parses a Dockerfile.
pub fn parse(file: &SourceFile, loader: &mut Loader) -> Manifest {
    let mut m = Manifest::new(Format::Dockerfile);
    m.comment_covers_next = true;
    let mut global: HashMap<String, String> = HashMap::new();
    let mut arg_spans: HashMap<String, Span> = HashMap::new();
    let mut vars: HashMap<String, String> = HashMap::new();
    let mut stages: Vec<(String, usize)> = Vec::new();
    let mut scope = 0;
    let mut seen_from = false;
    for ins in instructions(file, &mut m) {
        m.statements.push((ins.first_line, ins.last_line));
        let kw_len = ins.text.find(char::is_whitespace).unwrap_or(ins.text.len());
        let keyword = ins.text[..kw_len].to_ascii_uppercase();
        let args_at = kw_len + (ins.text[kw_len..].len() - ins.text[kw_len..].trim_start().len());
        let args = &ins.text[args_at..];
        if !INSTRUCTIONS.contains(&keyword.as_str()) {
            m.errors.push(ins.span(0, ins.text.len()));
            continue;
        }
        match keyword.as_str() {
            "ARG" => {
                let (words, _) = shell_commands(args);
                for w in words.into_iter().flatten() {
                    let (name, value) = match w.text.split_once('=') {
                        Some((n, v)) => (n.to_string(), Some(v.to_string())),
                        None => (w.text.clone(), None),
                    };
                    let value = value.or_else(|| global.get(&name).cloned());
                    if let Some(v) = value {
                        let v = expand(&v, if seen_from { &vars } else { &global });
                        if let Some(eq) = ins.text[args_at + w.start..args_at + w.end].find('=') {
                            let s = args_at + w.start + eq + 1;
                            arg_spans.insert(name.clone(), ins.span(s, args_at + w.end));
                        }
                        if seen_from {
                            vars.insert(name, v);
                        } else {
                            global.insert(name, v);
                        }
                    }
                }
            }
            "ENV" => {
                let (words, _) = shell_commands(args);
                let words: Vec<Word> = words.into_iter().flatten().collect();
                let pairs: Vec<(String, String, Span)> =
                    if words.first().is_some_and(|w| w.text.contains('=')) {
                        words
                            .iter()
                            .filter_map(|w| {
                                let (k, v) = w.text.split_once('=')?;
                                Some((
                                    k.to_string(),
                                    expand(v, &vars),
                                    ins.span(args_at + w.start, args_at + w.end),
                                ))
                            })
                            .collect()
                    } else if let Some(first) = words.first() {
                        let value = args[first.end..].trim().to_string();
                        vec![(
                            first.text.clone(),
                            expand(&value, &vars),
                            ins.span(args_at, ins.text.len()),
                        )]
                    } else {
                        Vec::new()
                    };
                for (k, v, span) in pairs {
                    vars.insert(k.clone(), v.clone());
                    m.env_vars.push((k, v, span));
                }
            }
            "FROM" => {
                seen_from = true;
                vars = global.clone();
                let (words, _) = shell_commands(args);
                let words: Vec<Word> = words.into_iter().flatten().collect();
                let mut platform = None;
                let mut image: Option<&Word> = None;
                let mut alias = None;
                let mut i = 0;
                while i < words.len() {
                    let w = &words[i];
                    if let Some(p) = w.text.strip_prefix("--platform=") {
                        platform = Some((expand(p, &global), w));
                    } else if image.is_none() && !w.text.starts_with("--") {
                        image = Some(w);
                    } else if w.text.eq_ignore_ascii_case("as") {
                        alias = words.get(i + 1).map(|a| a.text.to_ascii_lowercase());
                        i += 1;
                    }
                    i += 1;
                }
                let Some(image) = image else {
                    m.errors.push(ins.span(0, ins.text.len()));
                    continue;
                };
                let name = expand(&image.text, &global);
                let parent = stages
                    .iter()
                    .find(|(a, _)| *a == name.to_ascii_lowercase())
                    .map(|s| s.1);
                m.scopes.push(Scope {
                    name: alias.clone().unwrap_or_else(|| name.clone()),
                    parent,
                });
                scope = m.scopes.len() - 1;
                if let Some(a) = alias {
                    stages.push((a, scope));
                }
                // Point at the ARG default when the image comes from one.
                let var = image
                    .text
                    .trim_start_matches('$')
                    .trim_start_matches('{')
                    .trim_end_matches('}');
                let span = match arg_spans.get(var) {
                    Some(s) if image.text.starts_with('$') => *s,
                    _ => ins.span(args_at + image.start, args_at + image.end),
                };
                if let Some((p, w)) = platform {
                    if p.starts_with("windows") {
                        m.windows.push(Evidence {
                            span: ins.span(args_at + w.start, args_at + w.end),
                            what: format!("the stage is built for `{p}`"),
                        });
                    }
                }
                if parent.is_none() {
                    image_facts(&mut m, &name, span, scope);
                }
            }
            "RUN" => {
                run::run(&mut m, &ins, args_at, &vars, scope, file, loader);
            }
            _ => {}
        }
    }
    m
}

/// What a base image brings.
fn image_facts(m: &mut Manifest, image: &str, span: Span, scope: usize) {
    if image.contains('$') {
        return;
    }
    let image = image.split('@').next().unwrap_or(image);
    let (repo, tag) = match image.rfind(':') {
        Some(c) if !image[c..].contains('/') => (&image[..c], &image[c + 1..]),
        _ => (image, "latest"),
    };
    let repo_l = repo.to_ascii_lowercase();
    let tag_l = tag.to_ascii_lowercase();
    let add = |m: &mut Manifest, name: &str, spec: &str, local: Option<&str>| {
        m.requirements.push(Requirement {
            name: name.to_string(),
            extras: Vec::new(),
            spec: parse_specifiers(spec).0,
            local: local.map(str::to_string),
            build: None,
            marker: None,
            installer: Installer::Image,
            text: image.to_string(),
            span,
            origin: None,
            scope,
            indexes: Vec::new(),
        });
    };
    if repo_l.contains("mcr.microsoft.com/windows")
        || repo_l.contains("windows/servercore")
        || repo_l.contains("windows/nanoserver")
        || tag_l.contains("windowsservercore")
        || tag_l.contains("nanoserver")
    {
        m.windows.push(Evidence {
            span,
            what: format!("the base image `{image}` is a Windows image"),
        });
        return;
    }
    let last = repo_l.rsplit('/').next().unwrap_or("");
    let parent = repo_l.rsplit('/').nth(1).unwrap_or("");
    let version: String = tag
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let version = version.trim_end_matches('.');
    match (parent, last) {
        ("nvidia", "cuda") if !version.is_empty() => {
            add(m, "cuda", &format!("=={version}.*"), None);
            if let Some(at) = tag_l.find("cudnn") {
                let n: String = tag_l[at + 5..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                if !n.is_empty() {
                    add(m, "cudnn", &format!("=={n}.*"), None);
                }
            }
        }
        // NVIDIA's NGC image (`nvcr.io/nvidia/tensorflow:20.07-tf2-py3`): the TensorFlow of
        // its release, from NVIDIA's release notes (`data/compat/ngc_tensorflow.tsv`).
        ("nvidia", "tensorflow") if repo_l.starts_with("nvcr.io/") => {
            if let Some(row) = crate::compat::ngc_tensorflow(&tag_l) {
                add(m, "tensorflow", &row.tensorflow, None);
            }
        }
        ("tensorflow", "tensorflow") if !version.is_empty() => {
            let name = if tag_l.contains("gpu") {
                "tensorflow"
            } else {
                "tensorflow-cpu"
            };
            add(m, name, &format!("=={version}"), None);
        }
        ("pytorch", "pytorch") if !version.is_empty() => {
            let cuda = tag_l
                .split('-')
                .find_map(|p| p.strip_prefix("cuda"))
                .map(|c| {
                    let mut it = c.split('.');
                    format!("cu{}{}", it.next().unwrap_or(""), it.next().unwrap_or("0"))
                });
            add(m, "torch", &format!("=={version}"), cuda.as_deref());
        }
        (_, "python") if (parent.is_empty() || parent == "library") && version.contains('.') => {
            m.pythons.push(PythonDecl {
                spec: parse_specifiers(&format!("=={version}.*")).0,
                text: image.to_string(),
                span,
                origin: None,
                scope,
            });
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pep508::Spec;

    fn parse_text(text: &str) -> Manifest {
        crate::parse_named("Dockerfile", text, parse)
    }

    #[test]
    fn ngc_tensorflow_image() {
        let tf = |text: &str| -> Vec<Spec> {
            parse_text(text)
                .requirements
                .iter()
                .filter(|r| r.name == "tensorflow")
                .map(|r| r.spec.clone())
                .collect()
        };
        let v = |s: &str| <pep440_rs::Version as std::str::FromStr>::from_str(s).unwrap();
        let pre24 = tf("ARG FROM_IMAGE_NAME=nvcr.io/nvidia/tensorflow:20.07-tf2-py3\nFROM ${FROM_IMAGE_NAME}\n");
        assert_eq!(pre24.len(), 1);
        assert_eq!(pre24[0].admits(&v("2.2.0")), Some(true));
        assert_eq!(pre24[0].admits(&v("2.4.0")), Some(false));
        assert_eq!(
            tf("FROM nvcr.io/nvidia/tensorflow:21.04-tf2-py3\n").len(),
            1
        );
        assert_eq!(
            tf("FROM nvcr.io/nvidia/tensorflow:20.07-tf1-py3\n").len(),
            1
        );
        // A release the table does not cover, another registry's image, a PyTorch container.
        assert!(tf("FROM nvcr.io/nvidia/tensorflow:22.03-tf2-py3\n").is_empty());
        assert!(tf("FROM example.com/nvidia/tensorflow:20.07-tf2-py3\n").is_empty());
        assert!(tf("FROM nvcr.io/nvidia/pytorch:20.07-py3\n").is_empty());
    }

    #[test]
    fn images_args_and_pip() {
        let text = "ARG CUDA=11.8.0\nARG BASE=nvidia/cuda:${CUDA}-cudnn8-devel-ubuntu22.04\nFROM ${BASE} AS build\n# comment\nENV TF=2.15.0\nRUN apt-get update && \\\n    pip install --no-cache-dir \"tensorflow==${TF}\" \\\n      --extra-index-url https://download.pytorch.org/whl/cu121 torch==2.1.0 && \\\n    conda install -y -c conda-forge cudnn=8.9\nFROM python:3.10-slim\nRUN python3 -m pip install -U 'jax[cuda12]'  # noqa: MF008\nBOGUS line\n";
        let m = parse_text(text);
        let names: Vec<_> = m
            .requirements
            .iter()
            .map(|r| (r.name.as_str(), r.scope))
            .collect();
        assert_eq!(
            names,
            [
                ("cuda", 1),
                ("cudnn", 1),
                ("tensorflow", 1),
                ("torch", 1),
                ("cudnn", 1),
                ("jax", 2)
            ]
        );
        let cuda = &m.requirements[0];
        assert_eq!(
            &text[cuda.span.start..cuda.span.end],
            "nvidia/cuda:${CUDA}-cudnn8-devel-ubuntu22.04"
        );
        let tf = &m.requirements[2];
        assert!(matches!(tf.spec, Spec::Versions(_)));
        assert_eq!(&text[tf.span.start..tf.span.end], "\"tensorflow==${TF}\"");
        let torch = &m.requirements[3];
        assert_eq!(&text[torch.span.start..torch.span.end], "torch==2.1.0");
        assert_eq!(torch.indexes, vec![0]);
        assert_eq!(m.pythons.len(), 1);
        assert_eq!(m.requirements[5].extras, ["cuda12"]);
        assert_eq!(m.comments.len(), 2);
        assert_eq!(m.errors.len(), 1);
        assert_eq!(m.statements[4], (5, 8));
    }

    #[test]
    fn never_panics() {
        for t in [
            "FROM",
            "RUN pip install",
            "RUN \"unterminated",
            "ARG =\nFROM $",
            "RUN [\"pip\", \"install\", \"torch\"]",
            "\\\n\\",
            "RUN pip install -r",
            "FROM x AS",
        ] {
            let _ = parse_text(t);
        }
        let m = parse_text("RUN [\"pip\", \"install\", \"tensorflow-gpu\"]");
        assert_eq!(m.requirements.len(), 1);
    }
}
