//! `--add-noqa[=REASON]`: writes a suppression comment for every current finding —
//! `# noqa: CODE` in Python files and notebook cells, `// NOLINT(CODE)` in C/C++ — merging into
//! an existing one and changing nothing else in the file. The file is rewritten in place (through
//! links, keeping its inode, mode and owner); a read-only file is refused. Running it twice
//! changes nothing the second time (the findings are then suppressed).

use gpulint_diagnostics::FileReport;
use gpulint_syntax::NodeExt;
use gpulint_syntax::{self as lang, Lang};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// What `--add-noqa` did.
#[derive(Debug, Default)]
pub struct Outcome {
    pub added: usize,
    pub files: usize,
    /// Lines where a comment cannot go without changing the code's meaning (inside a multi-line
    /// string, after a line continuation): `path:line`.
    pub refused: Vec<String>,
}

/// One edit: insert `text` at byte `at` of the file.
struct Insert {
    at: usize,
    text: String,
}

/// Adds suppressions for the findings of `report` (whose file is `path`).
pub fn add_noqa(
    path: &Path,
    report: &FileReport,
    lang: Lang,
    reason: Option<&str>,
    outcome: &mut Outcome,
) -> Result<(), String> {
    // Tool findings (unused suppressions, skipped files) are not suppressed this way.
    let findings: Vec<_> = report
        .diagnostics
        .iter()
        .filter(|d| !d.code.starts_with("GL"))
        .collect();
    if findings.is_empty() {
        return Ok(());
    }
    let source = &report.source;
    // Codes per 0-based line of `source`.
    let mut by_line: BTreeMap<usize, BTreeSet<&str>> = BTreeMap::new();
    for d in &findings {
        by_line
            .entry(source.line_index(d.span.start.min(source.text.len())))
            .or_default()
            .insert(d.code);
    }
    let trees: Vec<tree_sitter::Tree> = match &report.notebook {
        Some(nb) => nb
            .cells
            .iter()
            .filter_map(|c| lang::parse_range_recovering(lang, &source.text, c.start, c.end))
            .map(|(tree, _)| tree)
            .collect(),
        None => lang::parse_recovering(lang, &source.text)
            .map(|(tree, _)| tree)
            .into_iter()
            .collect(),
    };
    let raw = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let raw = String::from_utf8(raw)
        .map_err(|_| format!("{}: not valid UTF-8, left unchanged", path.display()))?;
    // The text the findings point into has no byte-order mark; the file may.
    let shift = if gpulint_source::has_bom(raw.as_bytes()) {
        gpulint_source::BOM_LEN
    } else {
        0
    };
    let positions = report
        .notebook
        .as_ref()
        .map(|_| gpulint_source::notebook::source_line_positions(&raw));

    let mut inserts = Vec::new();
    for (line, codes) in by_line {
        let (start, end) = source.line_range(line);
        if !is_dockerfile(path) && !comment_safe(&trees, &source.text, start, end, lang) {
            outcome
                .refused
                .push(format!("{}:{}", report.display_path, line + 1));
            continue;
        }
        let codes: Vec<&str> = codes.into_iter().collect();
        match (&report.notebook, &positions) {
            (Some(nb), Some(pos)) => {
                let Some(cell) = nb.cell_at(start) else {
                    continue;
                };
                let cell_line = line - cell.first_line;
                let Some(Some(element)) = cell.elements.get(cell_line) else {
                    outcome.refused.push(format!(
                        "{}:cell {}:{}",
                        report.display_path,
                        cell.number,
                        cell_line + 1
                    ));
                    continue;
                };
                let Some((_, (s, e))) = pos.span_of(cell.index, *element) else {
                    continue;
                };
                // Inside the JSON string, before its trailing `\n` escape.
                let token = &raw[s..e];
                let inner_end = if token.ends_with("\\n\"") {
                    e - 3
                } else {
                    e - 1
                };
                let content = &raw[s + 1..inner_end];
                if let Some(ins) = merge_or_append(content, s + 1, &codes, reason, lang, true) {
                    inserts.push(ins);
                }
            }
            _ if is_dockerfile(path) => {
                inserts.push(dockerfile_insert(&raw, start + shift, &codes, reason))
            }
            _ => {
                let (start, end) = (start + shift, end + shift);
                let Some(content) = raw.get(start..end) else {
                    continue;
                };
                if let Some(ins) = merge_or_append(content, start, &codes, reason, lang, false) {
                    inserts.push(ins);
                }
            }
        }
    }
    if inserts.is_empty() {
        return Ok(());
    }
    let n = inserts.len();
    inserts.sort_by_key(|i| i.at);
    let mut out = String::with_capacity(raw.len() + n * 24);
    let mut last = 0;
    for ins in &inserts {
        out.push_str(&raw[last..ins.at]);
        out.push_str(&ins.text);
        last = ins.at;
    }
    out.push_str(&raw[last..]);
    write_in_place(path, out.as_bytes())?;
    outcome.added += n;
    outcome.files += 1;
    Ok(())
}

/// The comment that suppresses `codes` on 0-based line `line` of `text` (the text of the file
/// at `path`, in `lang`; not a notebook), as an insertion: a byte offset of `text` and what to
/// insert there, merged into an existing `noqa:` / `NOLINT(` list when the line has one. `None`
/// where a comment cannot go without changing the code (the line ends inside a multi-line
/// string or continues with `\`). For editors' quick fixes.
pub fn suppression_insert(
    path: &Path,
    text: &str,
    lang: Lang,
    line: usize,
    codes: &[&str],
) -> Option<(usize, String)> {
    let source =
        gpulint_source::SourceFile::new(path.to_path_buf(), String::new(), text.to_string());
    if line >= source.line_count() {
        return None;
    }
    let (start, end) = source.line_range(line);
    if is_dockerfile(path) {
        let ins = dockerfile_insert(text, start, codes, None);
        return Some((ins.at, ins.text));
    }
    let trees: Vec<tree_sitter::Tree> = lang::parse_recovering(lang, text)
        .map(|(tree, _)| tree)
        .into_iter()
        .collect();
    if !comment_safe(&trees, text, start, end, lang) {
        return None;
    }
    merge_or_append(&text[start..end], start, codes, None, lang, false).map(|i| (i.at, i.text))
}

/// Where a comment goes on a line of `content` (starting at byte `base` of the file): merged
/// into an existing `noqa:` / `NOLINT(` list, or appended at the end of the line.
fn merge_or_append(
    content: &str,
    base: usize,
    codes: &[&str],
    reason: Option<&str>,
    lang: Lang,
    json: bool,
) -> Option<Insert> {
    let list = codes.join(", ");
    let esc = |s: String| {
        if json {
            s.replace('\\', "\\\\").replace('"', "\\\"")
        } else {
            s
        }
    };
    match lang {
        Lang::Python | Lang::Manifest => {
            let lower = content.to_ascii_lowercase();
            let existing = lower
                .match_indices("noqa:")
                .map(|(i, _)| i)
                .find(|&i| content[..i].trim_end().ends_with('#'));
            if let Some(at) = existing {
                // After the last code of the list.
                let after = &content[at + "noqa:".len()..];
                let mut end = 0;
                for (i, ch) in after.char_indices() {
                    if ch.is_ascii_alphanumeric() || ch == ',' || ch == ' ' {
                        end = i + ch.len_utf8();
                    } else {
                        break;
                    }
                }
                let trimmed = after[..end].trim_end();
                return Some(Insert {
                    at: base + at + "noqa:".len() + trimmed.len(),
                    text: format!(", {list}"),
                });
            }
            let reason = reason.map(|r| format!(" -- {r}")).unwrap_or_default();
            let body = content.trim_end_matches([' ', '\t']);
            Some(Insert {
                at: base + body.len(),
                text: esc(format!("  # noqa: {list}{reason}")),
            })
        }
        Lang::Cuda => {
            if let Some(at) = content.find("NOLINT(") {
                let close = content[at..].find(')')? + at;
                return Some(Insert {
                    at: base + close,
                    text: format!(", {list}"),
                });
            }
            let reason = reason.map(|r| format!(" -- {r}")).unwrap_or_default();
            let body = content.trim_end_matches([' ', '\t']);
            Some(Insert {
                at: base + body.len(),
                text: format!("  // NOLINT({list}){reason}"),
            })
        }
    }
}

fn is_dockerfile(path: &Path) -> bool {
    gpulint_syntax::kind::Format::of_path(path) == Some(gpulint_syntax::kind::Format::Dockerfile)
}

/// In a Dockerfile a comment cannot follow an instruction on its line: the suppression goes on
/// a comment line of its own above the finding's line (it covers the instruction below it).
fn dockerfile_insert(raw: &str, start: usize, codes: &[&str], reason: Option<&str>) -> Insert {
    let line = &raw[start..];
    let line = &line[..line.find('\n').unwrap_or(line.len())];
    let indent = &line[..line.len() - line.trim_start().len()];
    let reason = reason.map(|r| format!(" -- {r}")).unwrap_or_default();
    Insert {
        at: start,
        text: format!("{indent}# noqa: {}{reason}\n", codes.join(", ")),
    }
}

/// Can a comment be appended at the end of this line without changing the code? Not inside a
/// string or block comment that goes on past the line, and not after a `\` continuation.
fn comment_safe(
    trees: &[tree_sitter::Tree],
    text: &str,
    start: usize,
    end: usize,
    lang: Lang,
) -> bool {
    let line = &text[start..end];
    if line.trim_end().ends_with('\\') {
        return false;
    }
    if lang == Lang::Cuda && line.trim_start().starts_with('#') && line.trim_end().ends_with('\\') {
        return false;
    }
    // The line's end, its `\r` of a CRLF included: a `//` comment node takes the `\r` in.
    let line_end = if text[end..].starts_with('\r') {
        end + 1
    } else {
        end
    };
    let probe = end.saturating_sub(1).max(start);
    for tree in trees {
        let root = tree.root_node();
        if probe < root.start_byte() || probe >= root.end_byte() {
            continue;
        }
        // The node at `probe`, then its ancestors innermost first (found once going down from
        // the root: `Node::parent` descends from the root on every call).
        let leaf = root.descendant_for_byte_range(probe, probe + 1);
        let up = leaf
            .map(|l| gpulint_syntax::ancestors_of(root, l))
            .unwrap_or_default();
        for n in leaf.into_iter().chain(up.into_iter().rev()) {
            let multi_line = n.end_byte() > line_end;
            let stringy = matches!(
                n.kind_name(),
                "string"
                    | "string_content"
                    | "concatenated_string"
                    | "raw_string_literal"
                    | "string_literal"
            ) || (n.kind_name() == "comment" && lang == Lang::Cuda);
            if stringy && multi_line && n.start_byte() < end {
                return false;
            }
        }
    }
    true
}

/// Writes `bytes` over the file at `path` in place: through a symbolic link to its target,
/// keeping the file's inode, so its hard links, mode, owner and extended attributes stay as
/// they were. A read-only file is refused, and every failure is an error.
fn write_in_place(path: &Path, bytes: &[u8]) -> Result<(), String> {
    use std::io::Write;
    let target =
        std::fs::canonicalize(path).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    let meta =
        std::fs::metadata(&target).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    if meta.permissions().readonly() {
        return Err(format!(
            "{} is read-only: no suppression added",
            path.display()
        ));
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&target)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}
