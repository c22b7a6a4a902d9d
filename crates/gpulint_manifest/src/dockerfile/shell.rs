//! Shell words as Dockerfiles' `RUN` and `ENV` use them: quotes removed, `\\` escapes
//! honoured, commands split at `&&`, `||`, `;`, `|`, and `$VAR` / `${VAR:-default}` expanded
//! with the `ARG` and `ENV` values known at that point.

use std::collections::HashMap;

/// A shell word: unquoted text and its byte range in the instruction.
#[derive(Debug, Clone)]
pub struct Word {
    pub text: String,
    pub start: usize,
    pub end: usize,
}

fn is_operator(c: u8) -> bool {
    matches!(c, b';' | b'&' | b'|' | b'(' | b')')
}

/// Splits shell text into commands of words (quotes removed, `\` escapes honoured), stopping
/// at a `#` comment. Returns the commands and where the comment starts.
pub fn shell_commands(s: &str) -> (Vec<Vec<Word>>, Option<usize>) {
    let b = s.as_bytes();
    let mut cmds: Vec<Vec<Word>> = vec![Vec::new()];
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            if c == b'\n' {
                cmds.push(Vec::new());
            }
            i += 1;
            continue;
        }
        if c == b'#' {
            return (cmds, Some(i));
        }
        if is_operator(c) {
            cmds.push(Vec::new());
            i += 1;
            continue;
        }
        let start = i;
        let mut text = String::new();
        while i < b.len() && !b[i].is_ascii_whitespace() && !is_operator(b[i]) {
            match b[i] {
                b'\'' => {
                    let end = s[i + 1..].find('\'').map_or(b.len(), |e| i + 1 + e);
                    text.push_str(&s[i + 1..end]);
                    i = (end + 1).min(b.len());
                }
                b'"' => {
                    i += 1;
                    while i < b.len() && b[i] != b'"' {
                        if b[i] == b'\\'
                            && i + 1 < b.len()
                            && matches!(b[i + 1], b'"' | b'\\' | b'$' | b'`')
                        {
                            i += 1;
                        }
                        let ch = s[i..].chars().next().unwrap_or(' ');
                        text.push(ch);
                        i += ch.len_utf8();
                    }
                    i = (i + 1).min(b.len());
                }
                b'\\' if i + 1 < b.len() => {
                    let ch = s[i + 1..].chars().next().unwrap_or(' ');
                    text.push(ch);
                    i += 1 + ch.len_utf8();
                }
                _ => {
                    let ch = s[i..].chars().next().unwrap_or(' ');
                    text.push(ch);
                    i += ch.len_utf8();
                }
            }
        }
        if let Some(cmd) = cmds.last_mut() {
            cmd.push(Word {
                text,
                start,
                end: i,
            });
        }
    }
    (cmds, None)
}

/// Expands `$NAME`, `${NAME}`, `${NAME:-default}` with known values; unknown names stay.
pub fn expand(s: &str, vars: &HashMap<String, String>) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(inner) = after.strip_prefix('{') {
            if let Some(close) = inner.find('}') {
                let body = &inner[..close];
                let (name, default) = match body.find(":-").or_else(|| body.find('-')) {
                    Some(d) => (
                        &body[..d],
                        Some(body[d..].trim_start_matches(':').trim_start_matches('-')),
                    ),
                    None => (body, None),
                };
                match vars
                    .get(name)
                    .filter(|v| !v.is_empty())
                    .map(String::as_str)
                    .or(default)
                {
                    Some(v) => out.push_str(v),
                    None => out.push_str(&rest[at..at + 2 + close + 1]),
                }
                rest = &inner[close + 1..];
                continue;
            }
        }
        let len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        match vars.get(&after[..len]) {
            Some(v) if len > 0 => out.push_str(v),
            _ => out.push_str(&rest[at..at + 1 + len]),
        }
        rest = &after[len..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_quotes_and_expansion() {
        let (cmds, comment) =
            shell_commands(r#"apt-get update && pip install "a==1" 'b c' d\ e ; echo $X # tail"#);
        let texts: Vec<Vec<&str>> = cmds
            .iter()
            .map(|c| c.iter().map(|w| w.text.as_str()).collect())
            .collect();
        assert_eq!(
            texts,
            vec![
                vec!["apt-get", "update"],
                vec![],
                vec!["pip", "install", "a==1", "b c", "d e"],
                vec!["echo", "$X"]
            ]
        );
        assert!(comment.is_some());
        let vars: HashMap<String, String> = [("TF".to_string(), "2.15.0".to_string())].into();
        assert_eq!(expand("tensorflow==${TF}", &vars), "tensorflow==2.15.0");
        assert_eq!(expand("x$TF-y", &vars), "x2.15.0-y");
        assert_eq!(expand("${NOPE:-1.0}", &vars), "1.0");
        assert_eq!(expand("$NOPE and ${NOPE}", &vars), "$NOPE and ${NOPE}");
        assert_eq!(expand("${unterminated", &vars), "${unterminated");
    }
}
