//! The documents the editor has open: text documents (full sync) and notebook documents with
//! their cells, the findings last published for each, and positions in LSP terms (0-based
//! lines, UTF-16 columns).

use gpulint_syntax::Lang;
use lsp_types::{Position, Url};
use serde::Deserialize;
use std::collections::HashMap;
use std::path::PathBuf;

/// An open text document.
#[derive(Debug, Clone)]
pub struct TextDoc {
    pub version: i32,
    pub text: String,
    /// The file it is, or stands for (an unsaved document gets a name from its language).
    pub path: PathBuf,
    /// `None`: no kind gpulint reads.
    pub lang: Option<Lang>,
}

/// One cell of an open notebook document.
#[derive(Debug, Clone)]
pub struct Cell {
    pub uri: Url,
    /// A code cell in Python (other cells are carried along, unchecked, so that cell numbers hold).
    pub python: bool,
    pub markup: bool,
    pub text: String,
}

/// An open notebook document.
#[derive(Debug, Clone)]
pub struct NotebookDoc {
    pub version: i32,
    pub path: PathBuf,
    pub cells: Vec<Cell>,
}

/// What a worker checks: a copy of one target as it was when the check began.
#[derive(Debug, Clone)]
pub enum Snapshot {
    Text(TextDoc),
    Notebook(NotebookDoc),
}

impl Snapshot {
    pub fn version(&self) -> i32 {
        match self {
            Snapshot::Text(d) => d.version,
            Snapshot::Notebook(n) => n.version,
        }
    }

    pub fn path(&self) -> &std::path::Path {
        match self {
            Snapshot::Text(d) => &d.path,
            Snapshot::Notebook(n) => &n.path,
        }
    }
}

/// Everything open, and what was published.
#[derive(Debug, Default)]
pub struct Documents {
    pub text: HashMap<Url, TextDoc>,
    pub notebooks: HashMap<Url, NotebookDoc>,
    /// The findings last published, by the URI they were published for (a document or a cell).
    pub published: HashMap<Url, Vec<lsp_types::Diagnostic>>,
}

impl Documents {
    /// The target (a text document or a notebook) as it is now.
    pub fn snapshot(&self, uri: &Url) -> Option<Snapshot> {
        if let Some(d) = self.text.get(uri) {
            return Some(Snapshot::Text(d.clone()));
        }
        self.notebooks
            .get(uri)
            .map(|n| Snapshot::Notebook(n.clone()))
    }

    /// The current version of a target, if it is open.
    pub fn version(&self, uri: &Url) -> Option<i32> {
        self.text
            .get(uri)
            .map(|d| d.version)
            .or_else(|| self.notebooks.get(uri).map(|n| n.version))
    }

    /// Every open target.
    pub fn targets(&self) -> Vec<Url> {
        let mut all: Vec<Url> = self
            .text
            .keys()
            .chain(self.notebooks.keys())
            .cloned()
            .collect();
        all.sort();
        all
    }

    /// The text and file of a document or notebook cell, with its language, for quick fixes.
    pub fn text_of(&self, uri: &Url) -> Option<(String, PathBuf, Lang)> {
        if let Some(d) = self.text.get(uri) {
            return Some((d.text.clone(), d.path.clone(), d.lang?));
        }
        self.notebooks.values().find_map(|n| {
            n.cells
                .iter()
                .find(|c| &c.uri == uri && c.python)
                .map(|c| (c.text.clone(), n.path.with_extension("py"), Lang::Python))
        })
    }
}

/// The file a document stands for, and its kind: its path for `file:` URIs; for an unsaved
/// document, a name made from its language.
pub fn path_and_lang(uri: &Url, language_id: &str) -> (PathBuf, Option<Lang>) {
    if let Ok(path) = uri.to_file_path() {
        let lang = Lang::of_path(&path);
        return (path, lang);
    }
    let name = match language_id {
        "python" => "untitled.py",
        "cuda-cpp" | "cuda" => "untitled.cu",
        "cpp" | "c" => "untitled.cpp",
        "pip-requirements" => "requirements.txt",
        "dockerfile" => "Dockerfile",
        _ => "untitled",
    };
    let path = PathBuf::from(name);
    let lang = Lang::of_path(&path);
    (path, lang)
}

/// Byte offsets to LSP positions, and back, over one text (lines end at `\n`).
pub struct LineIndex<'a> {
    text: &'a str,
    starts: Vec<usize>,
    /// The text lost a byte-order mark that the editor's document has: one UTF-16 unit more on
    /// the first line.
    bom: bool,
}

impl<'a> LineIndex<'a> {
    pub fn new(text: &'a str, bom: bool) -> LineIndex<'a> {
        let mut starts = vec![0];
        starts.extend(memchr::memchr_iter(b'\n', text.as_bytes()).map(|i| i + 1));
        LineIndex { text, starts, bom }
    }

    /// The LSP position of a byte offset (clamped to the text, and back to a character boundary).
    pub fn position(&self, byte: usize) -> Position {
        let mut byte = byte.min(self.text.len());
        while !self.text.is_char_boundary(byte) {
            byte -= 1;
        }
        let line = self.starts.partition_point(|&s| s <= byte) - 1;
        let start = self.starts[line];
        let mut character = self.text[start..byte].encode_utf16().count() as u32;
        if self.bom && line == 0 {
            character += 1;
        }
        Position::new(line as u32, character)
    }

    /// The byte range of 0-based line `line`, without its line end.
    pub fn line_range(&self, line: usize) -> Option<(usize, usize)> {
        let start = *self.starts.get(line)?;
        let end = self.starts.get(line + 1).map_or(self.text.len(), |e| e - 1);
        let end = if end > start && self.text.as_bytes()[end - 1] == b'\r' {
            end - 1
        } else {
            end
        };
        Some((start, end))
    }
}

/// The text as gpulint reads a file: a byte-order mark dropped, lone carriage returns read as
/// line feeds (byte offsets after the mark are unchanged). The flag says whether there was a mark.
pub fn as_read(text: &str) -> (String, bool) {
    let bom = text.starts_with('\u{feff}');
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if !text.contains('\r') {
        return (text.to_string(), bom);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\r' && chars.peek() != Some(&'\n') {
            out.push('\n');
        } else {
            out.push(c);
        }
    }
    (out, bom)
}

/// `notebookDocument/didOpen` parameters (LSP 3.17), as far as gpulint reads them.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DidOpenNotebook {
    pub notebook_document: NotebookDocument,
    pub cell_text_documents: Vec<lsp_types::TextDocumentItem>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NotebookDocument {
    pub uri: Url,
    pub version: i32,
    pub cells: Vec<NotebookCell>,
}

#[derive(Debug, Deserialize, Clone)]
#[serde(rename_all = "camelCase")]
pub struct NotebookCell {
    /// 1: markup, 2: code.
    pub kind: u8,
    pub document: Url,
}

/// `notebookDocument/didChange` parameters.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DidChangeNotebook {
    pub notebook_document: lsp_types::VersionedTextDocumentIdentifier,
    pub change: NotebookChange,
}

#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct NotebookChange {
    #[serde(default)]
    pub cells: Option<CellChanges>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct CellChanges {
    #[serde(default)]
    pub structure: Option<CellStructure>,
    #[serde(default)]
    pub text_content: Option<Vec<CellText>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CellStructure {
    pub array: CellArrayChange,
    #[serde(default)]
    pub did_open: Option<Vec<lsp_types::TextDocumentItem>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CellArrayChange {
    pub start: usize,
    pub delete_count: usize,
    #[serde(default)]
    pub cells: Option<Vec<NotebookCell>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CellText {
    pub document: lsp_types::VersionedTextDocumentIdentifier,
    pub changes: Vec<lsp_types::TextDocumentContentChangeEvent>,
}

/// `notebookDocument/didClose` parameters.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DidCloseNotebook {
    pub notebook_document: lsp_types::TextDocumentIdentifier,
    pub cell_text_documents: Vec<lsp_types::TextDocumentIdentifier>,
}

impl NotebookDoc {
    /// A notebook from its `didOpen`.
    pub fn open(p: DidOpenNotebook) -> (Url, NotebookDoc) {
        let texts: HashMap<Url, lsp_types::TextDocumentItem> = p
            .cell_text_documents
            .into_iter()
            .map(|d| (d.uri.clone(), d))
            .collect();
        let cells = p
            .notebook_document
            .cells
            .iter()
            .map(|c| cell(c, texts.get(&c.document)))
            .collect();
        let uri = p.notebook_document.uri;
        let path = uri
            .to_file_path()
            .unwrap_or_else(|_| PathBuf::from("untitled.ipynb"));
        (
            uri,
            NotebookDoc {
                version: p.notebook_document.version,
                path,
                cells,
            },
        )
    }

    /// Applies a `didChange`: cells added, removed or moved, and cell text edited (only full
    /// replacements and whole-text edits are kept exactly; a ranged edit is applied in place).
    pub fn change(&mut self, version: i32, change: NotebookChange) {
        self.version = version;
        let Some(cells) = change.cells else { return };
        if let Some(s) = cells.structure {
            let texts: HashMap<Url, lsp_types::TextDocumentItem> = s
                .did_open
                .unwrap_or_default()
                .into_iter()
                .map(|d| (d.uri.clone(), d))
                .collect();
            let old: HashMap<Url, Cell> = self
                .cells
                .iter()
                .map(|c| (c.uri.clone(), c.clone()))
                .collect();
            let start = s.array.start.min(self.cells.len());
            let end = (start + s.array.delete_count).min(self.cells.len());
            let new: Vec<Cell> = s
                .array
                .cells
                .unwrap_or_default()
                .iter()
                .map(|c| match (texts.get(&c.document), old.get(&c.document)) {
                    (None, Some(existing)) => Cell {
                        python: c.kind == 2 && existing.python,
                        markup: c.kind == 1,
                        ..existing.clone()
                    },
                    (t, _) => cell(c, t),
                })
                .collect();
            self.cells.splice(start..end, new);
        }
        for t in cells.text_content.unwrap_or_default() {
            if let Some(c) = self.cells.iter_mut().find(|c| c.uri == t.document.uri) {
                for change in t.changes {
                    apply_change(&mut c.text, change);
                }
            }
        }
    }

    /// The notebook as an `.ipynb` file (nbformat 4), for the engine: every cell, in order, so
    /// that cell numbers are the editor's.
    pub fn to_ipynb(&self) -> String {
        let cells: Vec<serde_json::Value> = self
            .cells
            .iter()
            .map(|c| {
                let kind = if c.python {
                    "code"
                } else if c.markup {
                    "markdown"
                } else {
                    "raw"
                };
                serde_json::json!({
                    "cell_type": kind,
                    "metadata": {},
                    "source": c.text,
                })
            })
            .collect();
        serde_json::json!({
            "cells": cells,
            "metadata": { "language_info": { "name": "python" } },
            "nbformat": 4,
            "nbformat_minor": 5,
        })
        .to_string()
    }
}

fn cell(c: &NotebookCell, text: Option<&lsp_types::TextDocumentItem>) -> Cell {
    Cell {
        uri: c.document.clone(),
        python: c.kind == 2 && text.is_none_or(|t| t.language_id == "python"),
        markup: c.kind == 1,
        text: text.map(|t| t.text.clone()).unwrap_or_default(),
    }
}

/// Applies one content change (a whole-text replacement, or a ranged edit in UTF-16 positions).
pub fn apply_change(text: &mut String, change: lsp_types::TextDocumentContentChangeEvent) {
    let Some(range) = change.range else {
        *text = change.text;
        return;
    };
    let offset = |p: Position| -> usize {
        let mut line_start = 0;
        for _ in 0..p.line {
            match text[line_start..].find('\n') {
                Some(i) => line_start += i + 1,
                None => return text.len(),
            }
        }
        let line_end = text[line_start..]
            .find('\n')
            .map_or(text.len(), |i| line_start + i);
        let mut units = 0;
        for (i, ch) in text[line_start..line_end].char_indices() {
            if units >= p.character as usize {
                return line_start + i;
            }
            units += ch.len_utf16();
        }
        line_end
    };
    let (start, end) = (offset(range.start), offset(range.end));
    if start <= end {
        text.replace_range(start..end, &change.text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_utf16_units() {
        let text = "a\n€𝄞x = 1\r\nlast";
        let idx = LineIndex::new(text, false);
        assert_eq!(idx.position(0), Position::new(0, 0));
        assert_eq!(idx.position(2), Position::new(1, 0));
        // `€` is one UTF-16 unit, `𝄞` two.
        let x = text.find('x').unwrap();
        assert_eq!(idx.position(x), Position::new(1, 3));
        assert_eq!(idx.position(text.len()), Position::new(2, 4));
        assert_eq!(idx.line_range(1), Some((2, x + 5)));
        // A byte inside a character is read as its start.
        assert_eq!(idx.position(3), Position::new(1, 0));
        assert_eq!(LineIndex::new("ab", true).position(1), Position::new(0, 2));
    }

    #[test]
    fn text_is_read_as_files_are() {
        assert_eq!(as_read("\u{feff}a\rb\r\nc"), ("a\nb\r\nc".into(), true));
        assert_eq!(as_read("x"), ("x".into(), false));
    }

    #[test]
    fn ranged_changes_use_utf16_positions() {
        let mut t = "a€b\nxyz".to_string();
        let change = |l1, c1, l2, c2, s: &str| lsp_types::TextDocumentContentChangeEvent {
            range: Some(lsp_types::Range::new(
                Position::new(l1, c1),
                Position::new(l2, c2),
            )),
            range_length: None,
            text: s.into(),
        };
        apply_change(&mut t, change(0, 2, 0, 3, "B"));
        assert_eq!(t, "a€B\nxyz");
        apply_change(&mut t, change(1, 1, 1, 1, "!"));
        assert_eq!(t, "a€B\nx!yz");
        apply_change(&mut t, change(0, 3, 1, 0, ""));
        assert_eq!(t, "a€Bx!yz");
    }
}
