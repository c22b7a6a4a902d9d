//! A second parse for a text that ends inside an open bracket or string.
//!
//! A file cut off, or still being written, often ends inside `foo([` or an unterminated
//! `"""` string. tree-sitter's error recovery cannot close what is open at the end of the
//! text, and for both grammars it then often gives up on the whole file: the root becomes one
//! ERROR node holding every statement, from the first line on, and nothing in the file is
//! understood. When (and only when) the first parse has errors and a scan of the text finds a
//! bracket or string still open at its end, the text is parsed again up to the start of the
//! statement that holds the first thing left open. That parse is of a prefix of the same
//! text, so its byte offsets and line numbers are the original ones. The tree whose error
//! bytes, counting the part left out, are fewer wins; the caller reports the part left out as
//! a region that did not parse.

use super::{parse, parse_range, Lang};
use crate::cuda_retry::error_score;
use tree_sitter::Tree;

/// The second parse of `text[start..end]` (a whole file, or one notebook cell) when `first`
/// (its parse, for a whole CUDA file after the retry of [`crate::cuda_retry`]) has errors and
/// something is open at `end`: the better tree, with the
/// byte offset where the second parse stopped (`None`: `first` is kept).
pub fn reparse(
    lang: Lang,
    text: &str,
    start: usize,
    end: usize,
    first: Tree,
) -> (Tree, Option<usize>) {
    if !first.root_node().has_error() {
        return (first, None);
    }
    let Some(cut) = cut_point(lang, &text[start..end]).map(|c| start + c) else {
        return (first, None);
    };
    let second = if lang == Lang::Cuda && start == 0 {
        // A prefix of the text, with the macro rewrites the first tree had.
        parse(lang, &text[..cut]).map(|t| crate::cuda_retry::reparse(&text[..cut], t))
    } else {
        parse_range(lang, text, start, cut)
    };
    let Some(second) = second else {
        return (first, None);
    };
    if error_score(&second) + (end - cut) < error_score(&first) {
        (second, Some(cut))
    } else {
        (first, None)
    }
}

/// Where a statement that holds the first bracket or string still open at the end of `text`
/// begins; `None` when nothing is open at the end.
///
/// Python: the start of the logical line (a line that begins outside any bracket and does not
/// continue the one before with `\`). C/C++/CUDA: just after the last `;`, `}` or
/// preprocessor line met outside any bracket before it (the start of the declaration or
/// statement), or the start of the text.
pub fn cut_point(lang: Lang, text: &str) -> Option<usize> {
    match lang {
        Lang::Python => python(text.as_bytes()),
        Lang::Cuda => c_family(text.as_bytes()).map(|c| {
            // From the first byte of that declaration, not the blank after the last one.
            c + text.as_bytes()[c..]
                .iter()
                .take_while(|b| b.is_ascii_whitespace())
                .count()
        }),
        Lang::Manifest => None,
    }
}

/// Brackets open so far, each with the statement start that was current when the outermost
/// was opened.
#[derive(Default)]
struct Open {
    depth: usize,
    /// The statement start recorded when the stack went from empty to one.
    outer_start: usize,
}

impl Open {
    fn push(&mut self, statement: usize) {
        if self.depth == 0 {
            self.outer_start = statement;
        }
        self.depth += 1;
    }

    fn pop(&mut self) {
        // A stray closer at depth 0 is an error the parser reports on its own.
        self.depth = self.depth.saturating_sub(1);
    }
}

fn python(b: &[u8]) -> Option<usize> {
    let mut open = Open::default();
    // The start of the current logical line.
    let mut statement = 0;
    let mut continued = false;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'#' => {
                i = memchr::memchr(b'\n', &b[i..]).map_or(b.len(), |p| i + p);
                continue;
            }
            b'\\' if b.get(i + 1) == Some(&b'\n') => {
                continued = true;
                i += 2;
                continue;
            }
            b'\\' if b.get(i + 1) == Some(&b'\r') => {
                continued = true;
                i += if b.get(i + 2) == Some(&b'\n') { 3 } else { 2 };
                continue;
            }
            b'\n' | b'\r' => {
                i += 1;
                if open.depth > 0 && starts_python_definition(&b[i..]) {
                    // A bracket left open further up (a syntax error the parser recovers
                    // from on its own): what is open at the end is counted from here.
                    open.depth = 0;
                }
                if open.depth == 0 && !continued {
                    statement = i;
                }
                continued = false;
                continue;
            }
            q @ (b'\'' | b'"') => {
                let triple = b.get(i + 1) == Some(&q) && b.get(i + 2) == Some(&q);
                match python_string_end(b, i, q, triple) {
                    Some(after) => {
                        i = after;
                        continue;
                    }
                    // A string open at the end of the text.
                    None => {
                        return Some(if open.depth > 0 {
                            open.outer_start
                        } else {
                            statement
                        })
                    }
                }
            }
            b'(' | b'[' | b'{' => open.push(statement),
            b')' | b']' | b'}' => open.pop(),
            _ => {}
        }
        continued = false;
        i += 1;
    }
    (open.depth > 0).then_some(open.outer_start)
}

/// Does a line starting with `rest` begin, at its first column, a definition or import, which
/// never sits inside brackets in a file that parses?
fn starts_python_definition(rest: &[u8]) -> bool {
    [
        &b"def "[..],
        b"class ",
        b"async def ",
        b"import ",
        b"from ",
        b"@",
    ]
    .iter()
    .any(|k| rest.starts_with(k))
}

/// The same for C/C++/CUDA: a kernel, device function, template or namespace at the first
/// column.
fn starts_c_definition(rest: &[u8]) -> bool {
    [
        &b"__global__ "[..],
        b"__device__ ",
        b"__host__ ",
        b"template",
        b"namespace ",
        b"extern ",
    ]
    .iter()
    .any(|k| rest.starts_with(k))
}

/// The byte after the string that starts with the quote at `i`; `None` when it is still open
/// at the end of the text. A one-quote string ends at the end of its line when unterminated
/// (the parser reports that line), so only triple-quoted strings stay open.
fn python_string_end(b: &[u8], i: usize, q: u8, triple: bool) -> Option<usize> {
    let mut j = i + if triple { 3 } else { 1 };
    while j < b.len() {
        match b[j] {
            b'\\' => j += 2,
            b'\n' | b'\r' if !triple => return Some(j),
            c if c == q => {
                if !triple {
                    return Some(j + 1);
                }
                if b.get(j + 1) == Some(&q) && b.get(j + 2) == Some(&q) {
                    return Some(j + 3);
                }
                j += 1;
            }
            _ => j += 1,
        }
    }
    (!triple).then_some(b.len())
}

fn c_family(b: &[u8]) -> Option<usize> {
    let mut open = Open::default();
    // Just after the last statement or declaration that ended outside any bracket.
    let mut statement = 0;
    let mut line_start = true;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if line_start && c == b'#' {
            // A preprocessor line (with its `\` continuations): its brackets do not count.
            i = c_line_end(b, i);
            if open.depth == 0 {
                statement = i;
            }
            continue;
        }
        if c == b'\n' {
            line_start = true;
            i += 1;
            if open.depth > 0 && starts_c_definition(&b[i..]) {
                // As for Python: a bracket left open further up does not hold what follows.
                open.depth = 0;
                statement = i;
            }
            continue;
        }
        if !c.is_ascii_whitespace() {
            line_start = false;
        }
        match c {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                i = c_line_end(b, i);
                continue;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                match memchr::memmem::find(&b[i + 2..], b"*/") {
                    Some(p) => i += 2 + p + 2,
                    // A comment open at the end of the text.
                    None => {
                        return Some(if open.depth > 0 {
                            open.outer_start
                        } else {
                            statement
                        })
                    }
                }
                continue;
            }
            q @ (b'\'' | b'"') => {
                // Strings and character literals end at their quote or, unterminated, at the
                // end of the line.
                let mut j = i + 1;
                while j < b.len() && b[j] != q && b[j] != b'\n' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                i = (j + 1).min(b.len());
                continue;
            }
            b'(' | b'[' | b'{' => open.push(statement),
            b')' | b']' => open.pop(),
            b'}' => {
                open.pop();
                if open.depth == 0 {
                    statement = i + 1;
                }
            }
            b';' if open.depth == 0 => statement = i + 1,
            _ => {}
        }
        i += 1;
    }
    (open.depth > 0).then_some(open.outer_start)
}

/// The byte after the line that holds `i`, following `\` continuations (its newline
/// included).
fn c_line_end(b: &[u8], mut i: usize) -> usize {
    while let Some(p) = memchr::memchr(b'\n', &b[i..]) {
        let nl = i + p;
        let before = &b[..nl];
        let before = before.strip_suffix(b"\r").unwrap_or(before);
        i = nl + 1;
        if !before.ends_with(b"\\") {
            return i;
        }
    }
    b.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn py(text: &str) -> Option<usize> {
        cut_point(Lang::Python, text)
    }

    fn cu(text: &str) -> Option<usize> {
        cut_point(Lang::Cuda, text)
    }

    #[test]
    fn python_cut_is_the_start_of_the_statement_left_open() {
        let head = "import torch\nx = torch.zeros(3)\n";
        assert_eq!(py(&format!("{head}foo([\n1,\n")), Some(head.len()));
        // Inside a function: the line of the open statement.
        let text = "def f():\n    y = g(1)\n    net = Seq([\n        a,\n";
        assert_eq!(py(text), text.find("    net"));
        // A statement continued with `\` or inside closed brackets starts earlier.
        let text = "a = 1\nb = (2,\n 3) + \\\n  f(\n";
        assert_eq!(py(text), text.find("b = "));
        // A bracket left open further up, before a definition: the cut is still the last
        // statement.
        let text = "def f(x:\n    return x\n\ndef g():\n    a = 1\n    b = h(\n";
        assert_eq!(py(text), text.find("    b = h"));
        // A triple-quoted string open at the end.
        let text = "a = 1\ns = \"\"\"doc\nmore\n";
        assert_eq!(py(text), text.find("s = "));
    }

    #[test]
    fn python_texts_with_nothing_open_have_no_cut() {
        for text in [
            "x = f(1)\n",
            "s = ')' + \"(\"  # ( [ {\n",
            "d = '''\n(\n'''\n",
            "r = r'\\'' + '['\n",
            "a = [1,\n 2]\n",
            "x = )\n",
            "s = 'unterminated (\nx = 1\n",
        ] {
            assert_eq!(py(text), None, "{text:?}");
        }
    }

    #[test]
    fn c_cut_is_after_the_last_complete_declaration() {
        let head = "__global__ void k(float* x) {\n  x[0] = 1;\n}\n";
        let text = format!("{head}__global__ void g(float* y)\n{{\n  if (y) {{\n    y[0] = 2;\n");
        assert_eq!(cu(&text), Some(head.len()));
        let text =
            format!("int f(int a {{\n}}\n{head}__global__ void g(float* y) {{\n  y[0] = 2;\n");
        assert_eq!(cu(&text), text.find("__global__ void g"));
        let text = "#define M(x) { x\nint a = 1;\nint b[] = {1,\n";
        assert_eq!(cu(text), text.find("int b"));
        let text = "int a = 1;\n/* open comment\n";
        assert_eq!(cu(text), text.find("/*"));
    }

    #[test]
    fn c_texts_with_nothing_open_have_no_cut() {
        for text in [
            "int f() { return '}'; }\n",
            "const char* s = \"{(\";  // {\n",
            "/* { */ int a;\n",
            "#define OPEN {\nint a;\n",
        ] {
            assert_eq!(cu(text), None, "{text:?}");
        }
    }

    #[test]
    fn the_second_parse_keeps_what_precedes_the_open_statement() {
        // The shape of a file cut off inside a call: the first parse makes the whole file one
        // ERROR node.
        let text = "import torch\nx = torch.zeros(3)\n\ndef g():\n    y = torch.zeros(3)\n\ndef f(n):\n    net = Seq([\n        Input(shape=(4, 4)),\n";
        let first = parse(Lang::Python, text).unwrap();
        assert_eq!(first.root_node().kind(), "ERROR");
        let (tree, cut) = reparse(Lang::Python, text, 0, text.len(), first);
        assert_eq!(cut, text.find("    net"));
        assert_eq!(tree.root_node().kind(), "module");
        assert!(tree.root_node().named_child_count() >= 3);
        // Clean texts keep their tree.
        let clean = "x = 1\n";
        let (tree, cut) = reparse(
            Lang::Python,
            clean,
            0,
            clean.len(),
            parse(Lang::Python, clean).unwrap(),
        );
        assert_eq!((cut, tree.root_node().has_error()), (None, false));
    }
}
