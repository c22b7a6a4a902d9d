//! Launcher scripts (`.sh`, `.bash`, `.zsh`, Slurm batch files, Windows `.bat` / `.cmd`) and
//! `.env` files: only the environment variables they set are read (`export K=v`,
//! `K=v command`, `declare -x K=v`, `set K=v`, `set "K=v"`, `K=v` in a `.env` file), each with
//! the span of its `K=v` word. They declare no requirements, so the MF rules find nothing here;
//! the rules that check environment values (PT006) read `env_vars`.

use super::dockerfile::shell::shell_commands;
use super::{Format, Manifest};
use gpulint_source::SourceFile;
use gpulint_source::Span;

/// Words before the assignments that still make them environment settings.
const PREFIXES: &[&str] = &[
    "export", "declare", "typeset", "readonly", "local", "env", "set", "then", "do", "else",
];

pub fn parse(file: &SourceFile) -> Manifest {
    let mut m = Manifest::new(Format::Shell);
    let batch = {
        let p = file.path.to_string_lossy().to_ascii_lowercase();
        p.ends_with(".bat") || p.ends_with(".cmd")
    };
    for line in 0..file.line_count() {
        let (start, end) = file.line_range(line);
        let text = &file.text[start..end];
        m.statements.push((line, line));
        let trimmed = text.trim_start();
        if batch {
            let lower = trimmed.to_ascii_lowercase();
            if lower.starts_with("rem ") || lower.starts_with("::") || lower == "rem" {
                continue;
            }
        }
        if !text.contains('=') && !text.contains('#') {
            continue;
        }
        let (cmds, comment) = shell_commands(text);
        if let Some(c) = comment {
            m.comments.push(Span::new(start + c, end));
        }
        for cmd in cmds {
            let mut words = cmd.iter().peekable();
            // `export`, `declare -x`, `set`, `env -i` …
            while let Some(w) = words.peek() {
                let lower = w.text.to_ascii_lowercase();
                if PREFIXES.contains(&lower.as_str())
                    || (w.text.starts_with('-') && w.text.len() > 1)
                {
                    words.next();
                } else {
                    break;
                }
            }
            for w in words {
                let Some((name, value)) = w.text.split_once('=') else {
                    break;
                };
                let is_name = !name.is_empty()
                    && !name.starts_with(|c: char| c.is_ascii_digit())
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if !is_name {
                    break;
                }
                m.env_vars.push((
                    name.to_string(),
                    value.to_string(),
                    Span::new(start + w.start, start + w.end),
                ));
            }
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn vars(name: &str, text: &str) -> Vec<(String, String, String)> {
        let file = SourceFile::new(PathBuf::from(name), name.into(), text.into());
        parse(&file)
            .env_vars
            .into_iter()
            .map(|(k, v, s)| (k, v, text[s.start..s.end].to_string()))
            .collect()
    }

    #[test]
    fn assignments() {
        let v = vars(
            "run.sh",
            "#!/bin/bash\n# PYTORCH_CUDA_ALLOC_CONF=x\nexport A=\"1,2\" B=3\nC=4 python train.py --lr=0.1\necho D=5\nif [ \"$E\" = x ]; then F=6; fi\n",
        );
        let names: Vec<&str> = v.iter().map(|(k, _, _)| k.as_str()).collect();
        assert_eq!(names, ["A", "B", "C", "F"]);
        assert_eq!(v[0].1, "1,2");
        assert_eq!(v[0].2, "A=\"1,2\"");
        let v = vars("run.bat", "rem set X=1\nset \"Y=2\"\n");
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].0, "Y");
    }
}
