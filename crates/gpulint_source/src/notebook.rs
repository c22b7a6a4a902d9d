//! Jupyter notebooks (nbformat 4): the code cells become one virtual Python source, each cell
//! parsed on its own (so one broken cell cannot spoil the next), with IPython magics and shell
//! lines blanked to spaces of the same length so that columns hold. Every position maps back to
//! `cell N, line L` and to the line of the `.ipynb` file that holds that source line.

use serde_json::Value;

mod raw;

/// One code cell in the virtual source.
#[derive(Debug, Clone)]
pub struct Cell {
    /// 1-based position of the cell among all cells of the notebook.
    pub number: usize,
    /// Byte range in the virtual source.
    pub start: usize,
    pub end: usize,
    /// 0-based line of the virtual source where the cell starts.
    pub first_line: usize,
    /// For each line of the cell, the 1-based line of the `.ipynb` file holding it (0 if unknown).
    pub file_lines: Vec<usize>,
    /// For each line of the cell, the index of the `source` list element that holds exactly
    /// that line (`None` when the source is one string, or an element spans several lines).
    pub elements: Vec<Option<usize>>,
    /// 0-based index of the cell in the notebook's `cells` list.
    pub index: usize,
    /// The cell magic on the cell's first line, without `%%` (`backend tensorflow`, `time`),
    /// if it has one; the line itself is blanked in the virtual source.
    pub magic: Option<String>,
}

/// The code cells of a notebook, joined.
#[derive(Debug, Clone, Default)]
pub struct Notebook {
    /// The code of all code cells, each ending with a newline, magics blanked.
    pub source: String,
    pub cells: Vec<Cell>,
    /// Code cells whose `source` could not be read (missing, or not text), by 1-based cell
    /// number, with why: they are not checked, and the check says so.
    pub unread: Vec<(usize, String)>,
}

impl Notebook {
    /// The cell holding a byte offset of the virtual source.
    pub fn cell_at(&self, byte: usize) -> Option<&Cell> {
        let i = self.cells.partition_point(|c| c.end <= byte);
        self.cells
            .get(i)
            .filter(|c| c.start <= byte)
            .or_else(|| self.cells.last().filter(|c| byte >= c.end))
    }

    /// The `.ipynb` line (1-based) of virtual line `line` (0-based).
    pub fn file_line(&self, cell: &Cell, line: usize) -> usize {
        cell.file_lines
            .get(line.saturating_sub(cell.first_line))
            .copied()
            .filter(|l| *l > 0)
            .unwrap_or(1)
    }
}

/// Cell magics whose body is not Python.
const FOREIGN_CELL_MAGICS: &[&str] = &[
    "bash",
    "sh",
    "script",
    "html",
    "HTML",
    "javascript",
    "js",
    "latex",
    "markdown",
    "perl",
    "ruby",
    "svg",
    "writefile",
    "cmd",
    "powershell",
    "python2",
    "sql",
    "file",
    "system",
    "capture_output_html",
];

/// Reads a notebook. Errors describe why it is not a notebook gpulint can read.
pub fn parse(text: &str) -> Result<Notebook, String> {
    let json: raw::Raw =
        serde_json::from_str(text).map_err(|e| format!("not valid notebook JSON ({e})"))?;
    let cells = json
        .cells
        .as_ref()
        .ok_or("not an nbformat 4 notebook (no `cells` list)")?;
    let language = json.language().unwrap_or("python");
    if !language.eq_ignore_ascii_case("python") {
        return Ok(Notebook::default());
    }
    let positions = source_line_positions(text);
    let mut nb = Notebook::default();
    let mut line = 0usize;
    for (i, cell) in cells.iter().enumerate() {
        if cell.cell_type.as_ref().and_then(Value::as_str) != Some("code") {
            continue;
        }
        type Lines = (String, Vec<usize>, Vec<Option<usize>>);
        let (code, element_lines, mut elements): Lines = match &cell.source {
            Some(Value::String(s)) => {
                let n = s.lines().count().max(1);
                (s.clone(), vec![positions.line_of(i, 0); n], vec![None; n])
            }
            Some(Value::Array(parts)) => {
                let mut code = String::new();
                let mut lines = Vec::new();
                let mut elements = Vec::new();
                let mut not_text = 0;
                for (j, p) in parts.iter().enumerate() {
                    let s = p.as_str().unwrap_or_else(|| {
                        not_text += 1;
                        ""
                    });
                    code.push_str(s);
                    let at = positions.line_of(i, j);
                    let n = s.matches('\n').count() + usize::from(!s.ends_with('\n'));
                    lines.extend(std::iter::repeat_n(at, n.max(1)));
                    let holder = if n <= 1 { Some(j) } else { None };
                    elements.extend(std::iter::repeat_n(holder, n.max(1)));
                }
                if not_text > 0 {
                    nb.unread.push((
                        i + 1,
                        format!("{not_text} element(s) of its `source` list are not text"),
                    ));
                }
                (code, lines, elements)
            }
            Some(other) => {
                let what = match other {
                    Value::Null => "null",
                    Value::Bool(_) => "a boolean",
                    Value::Number(_) => "a number",
                    _ => "an object",
                };
                nb.unread
                    .push((i + 1, format!("its `source` is {what}, not text")));
                continue;
            }
            None => {
                nb.unread.push((i + 1, "it has no `source`".into()));
                continue;
            }
        };
        let magic = code
            .lines()
            .next()
            .and_then(|l| l.trim_start().strip_prefix("%%"))
            .map(|m| m.trim().to_string())
            .filter(|m| !m.is_empty());
        let mut code = blank_magics(&code);
        if !code.ends_with('\n') {
            code.push('\n');
        }
        let start = nb.source.len();
        nb.source.push_str(&code);
        let n_lines = code.matches('\n').count();
        let mut file_lines = element_lines;
        file_lines.resize(n_lines, file_lines.last().copied().unwrap_or(0));
        elements.resize(n_lines, None);
        nb.cells.push(Cell {
            number: i + 1,
            start,
            end: nb.source.len(),
            first_line: line,
            file_lines,
            elements,
            index: i,
            magic,
        });
        line += n_lines;
    }
    Ok(nb)
}

/// Replaces IPython-only lines with spaces of the same byte length: line magics (`%time`),
/// shell escapes (`!pip`), `x = !ls`, help (`obj?`), and whole bodies of non-Python cell magics.
pub fn blank_magics(code: &str) -> String {
    let first = code.lines().next().unwrap_or("").trim_start();
    if let Some(magic) = first.strip_prefix("%%") {
        let name = magic.split_whitespace().next().unwrap_or("");
        if FOREIGN_CELL_MAGICS.contains(&name) {
            return blank(code);
        }
    }
    let mut out = String::with_capacity(code.len());
    for line in code.split_inclusive('\n') {
        let body = line.trim_end_matches(['\n', '\r']);
        let t = body.trim_start();
        let assigned_magic = t.split_once('=').is_some_and(|(lhs, rhs)| {
            let lhs = lhs.trim();
            !lhs.is_empty()
                && lhs.chars().all(|c| c.is_alphanumeric() || c == '_')
                && (rhs.trim_start().starts_with('!') || rhs.trim_start().starts_with('%'))
                && !rhs.trim_start().starts_with("!=")
        });
        let ipython = t.starts_with('%')
            || t.starts_with('!')
            || assigned_magic
            || (t.ends_with('?') && !t.starts_with('#'));
        if ipython {
            out.push_str(&blank(body));
            out.push_str(&line[body.len()..]);
        } else {
            out.push_str(line);
        }
    }
    out
}

fn blank(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b == b'\n' || b == b'\r' {
                b as char
            } else {
                ' '
            }
        })
        .collect()
}

/// Where the `cells[i].source[j]` strings are in the raw JSON text.
pub struct Positions {
    /// (cell index, element index, 1-based line, byte range of the string token with quotes).
    pub entries: Vec<(usize, usize, usize, (usize, usize))>,
}

impl Positions {
    fn line_of(&self, cell: usize, element: usize) -> usize {
        self.span_of(cell, element).map(|(l, _)| l).unwrap_or(0)
    }

    /// The line and byte range (quotes included) of `cells[cell].source[element]`.
    pub fn span_of(&self, cell: usize, element: usize) -> Option<(usize, (usize, usize))> {
        let i = self
            .entries
            .partition_point(|(c, e, _, _)| (*c, *e) < (cell, element));
        self.entries
            .get(i)
            .filter(|(c, e, _, _)| *c == cell && *e == element)
            .map(|(_, _, l, s)| (*l, *s))
    }
}

/// A small JSON scanner that records where each `cells[i].source[j]` string is. Iterative,
/// with an explicit stack of containers.
pub fn source_line_positions(text: &str) -> Positions {
    #[derive(Clone)]
    enum Frame {
        Object { key: Option<String> },
        Array { index: usize },
    }
    let bytes = text.as_bytes();
    let mut stack: Vec<Frame> = Vec::new();
    let mut entries = Vec::new();
    let mut line = 1usize;
    let mut i = 0usize;
    let mut expecting_key = false;
    // Path test: [Object{cells}] > Array(i) > Object{source} > (Array(j) > string | string).
    let path_match = |stack: &[Frame]| -> Option<(usize, usize)> {
        let n = stack.len();
        let check_source_obj = |k: usize| -> Option<usize> {
            // stack[k] is the cell object with key "source", stack[k-1] the cells array whose
            // parent object's key is "cells", at the root.
            if k < 2 {
                return None;
            }
            match (&stack[k - 2], &stack[k - 1], &stack[k]) {
                (
                    Frame::Object { key: Some(cells) },
                    Frame::Array { index },
                    Frame::Object { key: Some(src) },
                ) if cells == "cells" && src == "source" && k == 2 => Some(*index),
                _ => None,
            }
        };
        if n >= 4 {
            if let Frame::Array { index: j } = &stack[n - 1] {
                if let Some(cell) = check_source_obj(n - 2) {
                    return Some((cell, *j));
                }
            }
        }
        if n >= 3 {
            if let Some(cell) = check_source_obj(n - 1) {
                return Some((cell, 0));
            }
        }
        None
    };
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'\n' => {
                line += 1;
                i += 1;
            }
            b'{' => {
                stack.push(Frame::Object { key: None });
                expecting_key = true;
                i += 1;
            }
            b'[' => {
                stack.push(Frame::Array { index: 0 });
                i += 1;
            }
            b'}' | b']' => {
                stack.pop();
                i += 1;
            }
            b',' => {
                match stack.last_mut() {
                    Some(Frame::Array { index }) => *index += 1,
                    Some(Frame::Object { key }) => {
                        *key = None;
                        expecting_key = true;
                    }
                    None => {}
                }
                i += 1;
            }
            b':' => {
                expecting_key = false;
                i += 1;
            }
            b'"' => {
                let start_line = line;
                let mut j = i + 1;
                let mut s = String::new();
                if expecting_key {
                    while j < bytes.len() && bytes[j] != b'"' {
                        if bytes[j] == b'\\' {
                            j += 1;
                        }
                        if j < bytes.len() {
                            if bytes[j] == b'\n' {
                                line += 1;
                            }
                            s.push(bytes[j] as char);
                        }
                        j += 1;
                    }
                } else {
                    let (end, breaks) = value_string_end(bytes, j);
                    j = end;
                    line += breaks;
                }
                if expecting_key {
                    if let Some(Frame::Object { key }) = stack.last_mut() {
                        *key = Some(s);
                    }
                } else if let Some((cell, element)) = path_match(&stack) {
                    entries.push((cell, element, start_line, (i, (j + 1).min(bytes.len()))));
                }
                i = j + 1;
            }
            _ => i += 1,
        }
    }
    entries.sort_unstable_by_key(|(c, e, _, _)| (*c, *e));
    Positions { entries }
}

/// Where the JSON string value whose text starts at `from` (after its opening quote) ends: the
/// index of its closing quote (the text's length when none closes it), and the line breaks in
/// it. Only quotes, escapes and line breaks matter in a value (code, an output: often megabytes
/// of base64), found a block at a time.
fn value_string_end(bytes: &[u8], from: usize) -> (usize, usize) {
    let mut j = from;
    let mut breaks = 0;
    while let Some(k) = memchr::memchr3(b'"', b'\\', b'\n', &bytes[j..]) {
        j += k;
        match bytes[j] {
            b'"' => return (j, breaks),
            b'\n' => j += 1,
            // A backslash: the byte it escapes is no closing quote, but a line break all the same.
            _ => j = (j + 2).min(bytes.len()),
        }
        breaks += usize::from(bytes[j - 1] == b'\n');
    }
    (bytes.len(), breaks)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NB: &str = r##"{
 "cells": [
  {
   "cell_type": "markdown",
   "metadata": {},
   "source": ["# Title\n"]
  },
  {
   "cell_type": "code",
   "execution_count": 1,
   "metadata": {},
   "outputs": [],
   "source": [
    "%matplotlib inline\n",
    "import torch\n",
    "!pip install x\n",
    "files = !ls\n",
    "x = 1"
   ]
  },
  {
   "cell_type": "code",
   "metadata": {},
   "outputs": [{"name": "stdout", "text": ["source\n"]}],
   "source": "y = x + 1\nprint(y)"
  },
  {
   "cell_type": "code",
   "metadata": {},
   "outputs": [],
   "source": ["%%bash\n", "echo hi\n"]
  }
 ],
 "metadata": {"kernelspec": {"language": "python"}},
 "nbformat": 4,
 "nbformat_minor": 5
}"##;

    /// The byte-at-a-time scan that [`value_string_end`] replaces.
    fn value_string_end_bytewise(bytes: &[u8], from: usize) -> (usize, usize) {
        let (mut j, mut breaks) = (from, 0);
        while j < bytes.len() && bytes[j] != b'"' {
            if bytes[j] == b'\\' {
                j += 1;
            }
            if j < bytes.len() && bytes[j] == b'\n' {
                breaks += 1;
            }
            j += 1;
        }
        (j.min(bytes.len()), breaks)
    }

    #[test]
    fn value_strings_end_where_a_byte_at_a_time_scan_ends_them() {
        let texts = [
            r#"abc", "x""#,
            "a\\\"b\nc\\\n\nd\"e",
            "no end \\",
            "\\",
            "\\\n",
            "\"",
            "",
            "x\ny\n\\\"\\\\\"tail",
            NB,
        ];
        for t in texts {
            let bytes = t.as_bytes();
            for from in 0..=bytes.len() {
                assert_eq!(
                    value_string_end(bytes, from),
                    value_string_end_bytewise(bytes, from),
                    "{t:?} from {from}"
                );
            }
        }
    }

    #[test]
    fn cells_magics_and_lines() {
        let nb = parse(NB).unwrap();
        assert_eq!(nb.cells.len(), 3);
        assert_eq!(nb.cells[0].number, 2);
        let c0 = &nb.source[nb.cells[0].start..nb.cells[0].end];
        assert_eq!(
            c0,
            "                  \nimport torch\n              \n           \nx = 1\n"
        );
        assert_eq!(nb.cells[0].file_lines, vec![14, 15, 16, 17, 18]);
        assert_eq!(nb.cells[1].first_line, 5);
        assert_eq!(nb.cells[1].file_lines, vec![25, 25]);
        assert!(nb.source[nb.cells[2].start..nb.cells[2].end]
            .trim()
            .is_empty());
        let at = nb.source.find("print").unwrap();
        assert_eq!(nb.cell_at(at).unwrap().number, 3);
        // The cell magic of each cell, `%%` dropped; line magics are not cell magics.
        let magics: Vec<Option<&str>> = nb.cells.iter().map(|c| c.magic.as_deref()).collect();
        assert_eq!(magics, [None, None, Some("bash")]);
    }

    #[test]
    fn malformed_is_an_error() {
        assert!(parse("{not json").is_err());
        assert!(parse("{\"a\": 1}").is_err());
    }

    #[test]
    fn reads_only_what_the_cells_need() {
        // Outputs, attachments and unknown fields are skipped; cells that are not objects, or
        // not code, hold nothing; a repeated key keeps its last value.
        let text = r#"{"nbformat": 4, "cells": [
            7, null, [1, 2], {"cell_type": "markdown", "source": "x = 1"},
            {"cell_type": "code", "outputs": [{"data": {"image/png": "iVBORw0KGgo="}}],
             "source": ["import torch\n", "y = 2"], "attachments": {"a": [1.5e300, true]}},
            {"source": "dropped", "cell_type": "code", "source": "z = 3"}
        ], "metadata": {"kernelspec": {"language": "python"}}}"#;
        let nb = parse(text).unwrap();
        assert_eq!(nb.source, "import torch\ny = 2\nz = 3\n");
        assert_eq!(
            nb.cells.iter().map(|c| c.number).collect::<Vec<_>>(),
            [5, 6]
        );
        assert_eq!(nb.cells[0].file_lines, [4, 4]);
    }

    #[test]
    fn top_level_shapes() {
        for text in [
            "[]",
            "1",
            "null",
            "\"s\"",
            r#"{"cells": {"a": 1}}"#,
            r#"{"cells": 3}"#,
        ] {
            let err = parse(text).unwrap_err();
            assert!(err.contains("no `cells` list"), "{text}: {err}");
        }
        // The last `cells` wins.
        let nb = parse(r#"{"cells": 1, "cells": []}"#).unwrap();
        assert!(nb.cells.is_empty());
        // Another kernel language: nothing to check.
        let text = r#"{"cells": [{"cell_type": "code", "source": "x"}],
                       "metadata": {"language_info": {"name": "julia"}}}"#;
        assert!(parse(text).unwrap().source.is_empty());
        let err = parse(r#"{"cells": [], "x": [1, }"#).unwrap_err();
        assert!(err.starts_with("not valid notebook JSON"), "{err}");
        let err = parse(r#"{"cells": []} trailing"#).unwrap_err();
        assert!(err.starts_with("not valid notebook JSON"), "{err}");
    }
}
