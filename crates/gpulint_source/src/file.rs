//! A file's text and its line index.

use std::path::PathBuf;

/// A file read into memory, with byte offsets of line starts for position look-ups.
#[derive(Debug)]
pub struct SourceFile {
    pub path: PathBuf,
    /// The path as it is shown to the user: as given on the command line, or relative to the
    /// current directory.
    pub display_path: String,
    pub text: String,
    line_starts: Vec<usize>,
}

impl SourceFile {
    pub fn new(path: PathBuf, display_path: String, text: String) -> SourceFile {
        let mut line_starts = vec![0];
        line_starts.extend(memchr::memchr_iter(b'\n', text.as_bytes()).map(|i| i + 1));
        SourceFile {
            path,
            display_path,
            text,
            line_starts,
        }
    }

    /// 0-based line index of a byte offset.
    pub fn line_index(&self, byte: usize) -> usize {
        match self.line_starts.binary_search(&byte) {
            Ok(i) => i,
            Err(i) => i - 1,
        }
    }

    pub fn line_count(&self) -> usize {
        self.line_starts.len()
    }

    /// Byte range of 0-based line `line` without its line terminator.
    pub fn line_range(&self, line: usize) -> (usize, usize) {
        let start = self.line_starts[line];
        let mut end = self
            .line_starts
            .get(line + 1)
            .map(|e| e - 1)
            .unwrap_or(self.text.len());
        if end > start && self.text.as_bytes()[end - 1] == b'\r' {
            end -= 1;
        }
        (start, end)
    }

    /// Text of 0-based line `line`.
    pub fn line_text(&self, line: usize) -> &str {
        let (s, e) = self.line_range(line);
        &self.text[s..e]
    }

    /// 1-based (line, column) of a byte offset; columns count Unicode scalar values.
    pub fn position(&self, byte: usize) -> (usize, usize) {
        let byte = self.floor_char_boundary(byte.min(self.text.len()));
        let line = self.line_index(byte);
        let start = self.line_starts[line];
        let column = self.text[start..byte].chars().count() + 1;
        (line + 1, column)
    }

    fn floor_char_boundary(&self, mut byte: usize) -> usize {
        while byte > 0 && !self.text.is_char_boundary(byte) {
            byte -= 1;
        }
        byte
    }
}
