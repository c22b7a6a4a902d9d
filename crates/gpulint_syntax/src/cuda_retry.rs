//! A line-preserving second parse for C/C++/CUDA files whose first parse has errors.
//!
//! tree-sitter-cuda cannot expand macros, and most of its errors on real code come from a few
//! macro shapes: specifier macros (`DS_D_INLINE void f()`, `C10_LAUNCH_BOUNDS_1(256)`,
//! `__align__(16)`), macro invocations with no trailing `;` (`INSTANTIATE(float)`), and `#if/#else`
//! branches that split one construct in two (CUDA vs HIP). When, and only when, the first parse
//! has errors, the text is rewritten so that the grammar can read it and parsed again; the tree
//! with fewer error bytes wins. Applied to every file the rewrite would break clean ones, so it
//! is a retry, not a pre-pass.
//!
//! Every rewrite keeps the byte length and every newline: bytes are replaced by spaces, a
//! specifier macro by `__device__`/`__global__` padded with spaces, and a `;` goes into a
//! whitespace byte that was already there. Byte offsets and line numbers of the second tree are
//! therefore those of the original text, which is what rules read node text from.

use super::{parse, Lang};
use tree_sitter::Tree;

/// Parses `text` again with macro-shaped constructs rewritten if `first` (its tree) has errors;
/// returns whichever tree has fewer error bytes.
pub fn reparse(text: &str, first: Tree) -> Tree {
    if !first.root_node().has_error() {
        return first;
    }
    let mut best_score = error_score(&first);
    let mut best = first;

    let mut bytes = text.as_bytes().to_vec();
    let mut changed = rewrite_specifiers(&mut bytes);
    changed |= statement_arguments(&mut bytes);
    changed |= blank_loop_pragma_macros(&mut bytes);
    changed |= terminate_macro_calls(&mut bytes);
    if changed {
        if let Some(tree) = parse_bytes(&bytes) {
            let score = error_score(&tree);
            if score < best_score {
                best_score = score;
                best = tree;
            }
        }
    }
    if best_score > 0 && keep_first_if_branch(&mut bytes) {
        if let Some(tree) = parse_bytes(&bytes) {
            if error_score(&tree) < best_score {
                best = tree;
            }
        }
    }
    best
}

fn parse_bytes(bytes: &[u8]) -> Option<Tree> {
    // Every rewrite writes ASCII over whole characters, so the text stays UTF-8.
    let text = std::str::from_utf8(bytes).ok()?;
    parse(Lang::Cuda, text)
}

/// Bytes inside ERROR nodes plus one per MISSING node: lower is better, 0 is a clean parse.
pub fn error_score(tree: &Tree) -> usize {
    let mut score = 0;
    let mut cursor = tree.walk();
    'walk: loop {
        let node = cursor.node();
        let descend = if node.is_error() {
            score += (node.end_byte() - node.start_byte()).max(1);
            false
        } else if node.is_missing() {
            score += 1;
            false
        } else {
            node.has_error()
        };
        if descend && cursor.goto_first_child() {
            continue;
        }
        loop {
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                break 'walk;
            }
        }
    }
    score
}

/// Execution space named by a specifier macro such as `CUTLASS_DEVICE`, `DS_D_INLINE`,
/// `C10_HOST_DEVICE` or `TCNN_HOST_DEVICE`: `(global, device, host)`. `None` if the word does
/// not look like one.
pub fn specifier_macro_space(word: &str) -> Option<(bool, bool, bool)> {
    if word.len() < 3 || !is_macro_name(word) {
        return None;
    }
    let mut space = (false, false, false);
    let mut specifier = false;
    for part in word.split('_') {
        match part {
            "GLOBAL" => space.0 = true,
            "DEVICE" | "D" | "DEV" => space.1 = true,
            "HD" | "HOSTDEV" | "IHD" => {
                space.1 = true;
                space.2 = true
            }
            "HOST" => space.2 = true,
            "INLINE" | "FORCEINLINE" | "NOINLINE" | "API" | "EXPORT" | "IMPORT" | "ATTR"
            | "CALL" | "APICALL" | "DECL" | "FUNCTION" | "FUNC" | "QUALIFIER" | "QUALIFIERS" => {
                specifier = true
            }
            _ => {}
        }
    }
    let named = space.0 || space.1 || space.2;
    (named || specifier).then_some(space)
}

fn is_macro_name(word: &str) -> bool {
    let b = word.as_bytes();
    !b.is_empty()
        && (b[0].is_ascii_uppercase() || b[0] == b'_')
        && b.iter()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == b'_')
        && b.iter().any(|c| c.is_ascii_uppercase())
}

fn is_ident_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Function-like specifiers whose call is blanked, arguments included.
const FUNCTION_LIKE_SPECIFIERS: &[&str] = &[
    "__align__",
    "C10_LAUNCH_BOUNDS_0",
    "C10_LAUNCH_BOUNDS_1",
    "C10_LAUNCH_BOUNDS_2",
    "__declspec",
    "ALIGN",
    "DS_ALIGN",
];

/// Calling-convention and qualifier macros that may stand anywhere in a declaration.
const CALLING_CONVENTIONS: &[&str] = &[
    "WINAPI",
    "CALLBACK",
    "APIENTRY",
    "CUDART_CB",
    "CUDAAPI",
    "VKAPI_CALL",
    "VKAPI_ATTR",
    "RESTRICT",
    "__restrict",
];

/// Blanks `__align__(N)`, `C10_LAUNCH_BOUNDS_*(…)` and similar, and replaces specifier macros
/// that start a declaration (`DS_D_INLINE void f()`) by the CUDA keyword they stand for, or by
/// spaces. Returns whether anything changed.
fn rewrite_specifiers(bytes: &mut [u8]) -> bool {
    let mut changed = false;
    let mut i = 0;
    let n = bytes.len();
    // A declaration may start here: at a line start, after `>` `;` `{` `}`, or after a
    // specifier keyword.
    let mut decl_start = true;
    while i < n {
        let c = bytes[i];
        if c == b'/' && i + 1 < n && (bytes[i + 1] == b'/' || bytes[i + 1] == b'*') {
            i = skip_comment(bytes, i);
            continue;
        }
        if c == b'"' || c == b'\'' {
            i = skip_literal(bytes, i);
            decl_start = false;
            continue;
        }
        if !(c.is_ascii_alphabetic() || c == b'_') {
            if c == b'\n' || matches!(c, b'>' | b';' | b'{' | b'}') {
                decl_start = true;
            } else if !c.is_ascii_whitespace() {
                decl_start = false;
            }
            i += 1;
            continue;
        }
        if i > 0 && is_ident_byte(bytes[i - 1]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < n && is_ident_byte(bytes[i]) {
            i += 1;
        }
        let word = std::str::from_utf8(&bytes[start..i]).unwrap_or("");
        if FUNCTION_LIKE_SPECIFIERS.contains(&word) {
            let mut j = i;
            while j < n && (bytes[j] == b' ' || bytes[j] == b'\t') {
                j += 1;
            }
            let end = if j < n && bytes[j] == b'(' {
                match matching_paren(bytes, j) {
                    Some(close) => close + 1,
                    None => continue,
                }
            } else if word == "C10_LAUNCH_BOUNDS_0" {
                i
            } else {
                continue;
            };
            blank(bytes, start, end);
            changed = true;
            i = end;
            continue;
        }
        if CALLING_CONVENTIONS.contains(&word) {
            blank(bytes, start, i);
            changed = true;
            continue;
        }
        if matches!(
            word,
            "static"
                | "inline"
                | "extern"
                | "constexpr"
                | "__global__"
                | "__device__"
                | "__host__"
                | "__forceinline__"
                | "__noinline__"
                | "virtual"
                | "friend"
        ) {
            decl_start = true;
            continue;
        }
        if decl_start {
            if let Some((global, device, _host)) = specifier_macro_space(word) {
                // Followed by another word: a declaration goes on.
                let mut j = i;
                while j < n && (bytes[j] == b' ' || bytes[j] == b'\t') {
                    j += 1;
                }
                if j > i && j < n && (bytes[j].is_ascii_alphabetic() || bytes[j] == b'_') {
                    let replacement: &[u8] = if global {
                        b"__global__"
                    } else if device {
                        b"__device__"
                    } else {
                        b""
                    };
                    if replacement.len() <= i - start {
                        bytes[start..start + replacement.len()].copy_from_slice(replacement);
                        blank(bytes, start + replacement.len(), i);
                    } else {
                        blank(bytes, start, i);
                    }
                    changed = true;
                    continue;
                }
            }
        }
        decl_start = false;
    }
    changed
}

/// Adds the `;` that a bare statement-level macro invocation (`INSTANTIATE(float)`) lacks, in a
/// whitespace byte after it; a top-level invocation with no room for one is blanked.
fn terminate_macro_calls(bytes: &mut [u8]) -> bool {
    let mut changed = false;
    let n = bytes.len();
    let mut line = 0;
    let mut prev_end: Option<u8> = None; // last significant byte of the previous code line
    let mut in_block_comment = false;
    while line < n {
        let eol = memchr::memchr(b'\n', &bytes[line..])
            .map(|e| line + e)
            .unwrap_or(n);
        let mut s = line;
        while s < eol && (bytes[s] == b' ' || bytes[s] == b'\t') {
            s += 1;
        }
        if in_block_comment {
            if let Some(end) = find(&bytes[line..eol], b"*/") {
                in_block_comment = false;
                let _ = end;
            }
            line = eol + 1;
            continue;
        }
        if s >= eol || bytes[s] == b'\r' {
            line = eol + 1;
            continue;
        }
        if bytes[s] == b'#' {
            // A directive: a statement may start after it; skip its continuation lines.
            let mut e = eol;
            while e > line && e < n && last_significant(&bytes[line..e]) == Some(b'\\') {
                let next = memchr::memchr(b'\n', &bytes[e + 1..])
                    .map(|x| e + 1 + x)
                    .unwrap_or(n);
                e = next;
            }
            prev_end = Some(b';');
            line = e + 1;
            continue;
        }
        if bytes[s..eol].starts_with(b"//") {
            line = eol + 1;
            continue;
        }
        if bytes[s..eol].starts_with(b"/*") {
            if find(&bytes[s..eol], b"*/").is_none() {
                in_block_comment = true;
            }
            line = eol + 1;
            continue;
        }
        let mut next_line = eol + 1;
        if bytes[s].is_ascii_uppercase() || bytes[s] == b'_' {
            let mut w = s;
            while w < eol && is_ident_byte(bytes[w]) {
                w += 1;
            }
            let word = std::str::from_utf8(&bytes[s..w]).unwrap_or("");
            let at_statement_start =
                matches!(prev_end, None | Some(b';' | b'{' | b'}' | b')' | b':'));
            if is_macro_name(word)
                && word.len() >= 2
                && w < eol
                && bytes[w] == b'('
                && at_statement_start
            {
                if let Some(close) = matching_paren(bytes, w) {
                    let close_eol = memchr::memchr(b'\n', &bytes[close..])
                        .map(|e| close + e)
                        .unwrap_or(n);
                    let rest = &bytes[close + 1..close_eol];
                    let rest_is_blank = rest_is_blank(rest);
                    if rest_is_blank && !next_code_continues(bytes, close_eol + 1) {
                        if let Some(at) = room_for_semicolon(bytes, close + 1, close_eol) {
                            bytes[at] = b';';
                            changed = true;
                        } else if s == line {
                            blank(bytes, s, close + 1);
                            changed = true;
                        }
                    }
                    next_line = close_eol + 1;
                    prev_end = Some(b';');
                    line = next_line;
                    continue;
                }
            }
        }
        if let Some(last) = last_significant(&bytes[s..eol]) {
            prev_end = Some(last);
        }
        line = next_line;
    }
    changed
}

/// Does the code after `from` continue the expression or declaration before it (a block, an
/// operator, an initializer list)?
fn next_code_continues(bytes: &[u8], from: usize) -> bool {
    let mut i = from;
    while i < bytes.len() && bytes[i].is_ascii_whitespace() {
        i += 1;
    }
    if i >= bytes.len() {
        return false;
    }
    matches!(
        bytes[i],
        b'{' | b':'
            | b','
            | b'.'
            | b'?'
            | b'+'
            | b'*'
            | b'&'
            | b'|'
            | b'='
            | b'<'
            | b'>'
            | b'('
            | b'['
    ) || (bytes[i] == b'-' && bytes.get(i + 1) == Some(&b'>'))
}

/// A whitespace byte for a `;`: right after the invocation on its line, else the first byte of
/// the next code line's indentation (not before a directive).
fn room_for_semicolon(bytes: &[u8], after: usize, eol: usize) -> Option<usize> {
    if after < eol && (bytes[after] == b' ' || bytes[after] == b'\t') {
        return Some(after);
    }
    let mut line = eol + 1;
    while line < bytes.len() {
        let e = memchr::memchr(b'\n', &bytes[line..])
            .map(|x| line + x)
            .unwrap_or(bytes.len());
        let mut s = line;
        while s < e && (bytes[s] == b' ' || bytes[s] == b'\t' || bytes[s] == b'\r') {
            s += 1;
        }
        if s < e {
            if bytes[s] == b'#' || s == line {
                return None;
            }
            return Some(line);
        }
        // A whitespace-only line has room.
        if e > line {
            return Some(line);
        }
        line = e + 1;
    }
    None
}

fn rest_is_blank(rest: &[u8]) -> bool {
    let mut i = 0;
    while i < rest.len() && (rest[i] == b' ' || rest[i] == b'\t' || rest[i] == b'\r') {
        i += 1;
    }
    i == rest.len() || rest[i..].starts_with(b"//")
}

/// Blanks `#if`/`#ifdef`/`#ifndef` groups down to their first branch: the directives and every
/// `#elif`/`#else` branch become spaces, the first branch stays as plain code.
fn keep_first_if_branch(bytes: &mut [u8]) -> bool {
    let n = bytes.len();
    // One entry per open group: whether the current branch of it is dropped.
    let mut stack: Vec<bool> = Vec::new();
    let mut changed = false;
    let mut line = 0;
    while line < n {
        let mut eol = memchr::memchr(b'\n', &bytes[line..])
            .map(|e| line + e)
            .unwrap_or(n);
        let mut s = line;
        while s < eol && (bytes[s] == b' ' || bytes[s] == b'\t') {
            s += 1;
        }
        let dropped = stack.iter().any(|d| *d);
        if s < eol && bytes[s] == b'#' {
            while eol < n && last_significant(&bytes[line..eol]) == Some(b'\\') {
                eol = memchr::memchr(b'\n', &bytes[eol + 1..])
                    .map(|x| eol + 1 + x)
                    .unwrap_or(n);
            }
            let mut d = s + 1;
            while d < eol && (bytes[d] == b' ' || bytes[d] == b'\t') {
                d += 1;
            }
            let directive = &bytes[d..eol];
            let is = |kw: &[u8]| {
                directive.starts_with(kw)
                    && directive.get(kw.len()).is_none_or(|c| !is_ident_byte(*c))
            };
            if is(b"if") || is(b"ifdef") || is(b"ifndef") {
                stack.push(false);
                blank(bytes, line, eol);
                changed = true;
            } else if is(b"elif") || is(b"else") || is(b"elifdef") || is(b"elifndef") {
                if let Some(top) = stack.last_mut() {
                    *top = true;
                }
                blank(bytes, line, eol);
                changed = true;
            } else if is(b"endif") {
                stack.pop();
                blank(bytes, line, eol);
                changed = true;
            } else if dropped {
                blank(bytes, line, eol);
                changed = true;
            }
        } else if dropped && s < eol {
            blank(bytes, line, eol);
            changed = true;
        }
        line = eol + 1;
    }
    changed
}

/// Turns statements passed as a macro argument (`DISPATCH(t, "f", launch(x, y);)`,
/// `MACRO(a; b;)`) into an expression the grammar reads: each `;` directly inside the macro's
/// parentheses becomes `,` (a comma expression), and the last one, right before `)`, trades
/// places with it (`f(x);)` → `f(x));`). A `;` inside braces (a lambda body) or nested
/// parentheses stays.
fn statement_arguments(bytes: &mut [u8]) -> bool {
    let mut changed = false;
    let n = bytes.len();
    let mut i = 0;
    while i < n {
        if let Some(next) = skip_literal_or_comment(bytes, i) {
            i = next;
            continue;
        }
        let c = bytes[i];
        if !(c.is_ascii_uppercase() || c == b'_') || (i > 0 && is_ident_byte(bytes[i - 1])) {
            i += 1;
            continue;
        }
        let mut w = i;
        while w < n && is_ident_byte(bytes[w]) {
            w += 1;
        }
        let word = std::str::from_utf8(&bytes[i..w]).unwrap_or("");
        if w < n && bytes[w] == b'(' && word.len() >= 2 && is_macro_name(word) {
            if let Some((close, semis)) = statement_separators(bytes, w) {
                // A declaration among the statements (`using T = …; T* p = …;`) cannot become
                // part of a comma expression: leave the invocation as it is.
                let mut start = w + 1;
                let declares = semis.iter().any(|&at| {
                    let segment = &bytes[start..at];
                    start = at + 1;
                    looks_like_declaration(segment)
                });
                if declares {
                    i = close + 1;
                    continue;
                }
                for at in semis {
                    let between = &bytes[at + 1..close];
                    if between.iter().all(|b| *b == b' ' || *b == b'\t') {
                        // `x; )` → `x) ;`: the statement now ends after the invocation.
                        bytes[at] = b')';
                        bytes[at + 1..close].fill(b' ');
                        bytes[close] = b';';
                    } else if between.iter().all(|b| b.is_ascii_whitespace()) {
                        bytes[at] = b' ';
                    } else {
                        bytes[at] = b',';
                    }
                    changed = true;
                }
                i = close + 1;
                continue;
            }
        }
        i = w.max(i + 1);
    }
    changed
}

/// Blanks an object-like macro standing alone on its line before a loop
/// (`TCNN_PRAGMA_UNROLL` / `UNROLL` → `#pragma unroll`): a bare upper-case name after a `;`,
/// `{` or `}`, with `for`, `while` or `do` starting the next code line.
fn blank_loop_pragma_macros(bytes: &mut [u8]) -> bool {
    let mut changed = false;
    let n = bytes.len();
    let mut line = 0;
    let mut prev_end: Option<u8> = None;
    while line < n {
        let eol = memchr::memchr(b'\n', &bytes[line..]).map_or(n, |e| line + e);
        let code = &bytes[line..eol];
        let Some(s) = code.iter().position(|c| !c.is_ascii_whitespace()) else {
            line = eol + 1;
            continue;
        };
        let word_end = code[s..]
            .iter()
            .position(|c| !is_ident_byte(*c))
            .map_or(code.len(), |p| s + p);
        let word = std::str::from_utf8(&code[s..word_end]).unwrap_or("");
        let alone = code[word_end..].iter().all(|c| c.is_ascii_whitespace());
        if alone
            && word.len() >= 2
            && is_macro_name(word)
            && matches!(prev_end, Some(b';' | b'{' | b'}'))
        {
            let next = bytes[(eol + 1).min(n)..]
                .split(|c| *c == b'\n')
                .map(|l| l.trim_ascii_start())
                .find(|l| !l.is_empty());
            let loop_next = next.is_some_and(|l| {
                ["for", "while", "do"].iter().any(|k| {
                    l.starts_with(k.as_bytes()) && l.get(k.len()).is_none_or(|c| !is_ident_byte(*c))
                })
            });
            if loop_next {
                blank(bytes, line + s, line + word_end);
                changed = true;
                line = eol + 1;
                continue;
            }
        }
        if !code[s..].starts_with(b"//") && code[s] != b'#' {
            prev_end = last_significant(code).or(prev_end);
        }
        line = eol + 1;
    }
    changed
}

/// Does this statement start like a declaration: `using …`, `typedef …`, or a type (a name
/// with `::` and template arguments) followed by a declarator name and `=`, `[`, `{` or its end?
fn looks_like_declaration(segment: &[u8]) -> bool {
    let text = String::from_utf8_lossy(segment);
    let text = text.trim_start_matches(|c: char| c.is_whitespace() || c == ',');
    let first_word: String = text
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    if matches!(
        first_word.as_str(),
        "using" | "typedef" | "auto" | "const" | "constexpr" | "static" | "unsigned" | "signed"
    ) {
        return true;
    }
    if first_word.is_empty()
        || matches!(
            first_word.as_str(),
            "return" | "delete" | "throw" | "goto" | "case" | "else" | "new" | "co_return"
        )
    {
        return false;
    }
    // Skip the rest of the type: `::name`, `<…>` (balanced), `*`, `&`, spaces.
    let b = text.as_bytes();
    let mut i = first_word.len();
    let mut angle = 0usize;
    let mut gap = false;
    while i < b.len() {
        match b[i] {
            b'<' => angle += 1,
            b'>' if angle > 0 => angle -= 1,
            _ if angle > 0 => {}
            b':' if b.get(i + 1) == Some(&b':') => i += 1,
            c if c.is_ascii_alphanumeric() || c == b'_' => {
                if gap {
                    break;
                }
            }
            b'*' | b'&' | b' ' | b'\t' | b'\n' | b'\r' => gap = true,
            _ => return false,
        }
        i += 1;
    }
    if !gap || i >= b.len() {
        return false;
    }
    let name_end = b[i..]
        .iter()
        .position(|c| !(c.is_ascii_alphanumeric() || *c == b'_'))
        .map_or(b.len(), |p| i + p);
    let rest = text[name_end..].trim_start();
    rest.is_empty() || rest.starts_with(['=', '[', '{']) && !rest.starts_with("==")
}

/// For the `(` at `open`: its matching `)` and the `;` found directly inside (not in braces or
/// nested parentheses), when there is at least one. `None` past 64 KiB or when unbalanced.
fn statement_separators(bytes: &[u8], open: usize) -> Option<(usize, Vec<usize>)> {
    let mut parens = 0usize;
    let mut braces = 0usize;
    let mut semis = Vec::new();
    for (i, b) in code_bytes(bytes, open) {
        match b {
            b'(' => parens += 1,
            b')' => {
                parens = parens.checked_sub(1)?;
                if parens == 0 {
                    return (!semis.is_empty() && braces == 0).then_some((i, semis));
                }
            }
            b'{' => braces += 1,
            b'}' => braces = braces.checked_sub(1)?,
            b';' if parens == 1 && braces == 0 => semis.push(i),
            _ => {}
        }
    }
    None
}

/// Replaces every byte of `bytes[from..to]` but newlines by a space.
fn blank(bytes: &mut [u8], from: usize, to: usize) {
    let to = to.min(bytes.len());
    for b in &mut bytes[from.min(to)..to] {
        if *b != b'\n' && *b != b'\r' {
            *b = b' ';
        }
    }
}

fn last_significant(line: &[u8]) -> Option<u8> {
    // Ignore a trailing `//` comment (outside string literals, roughly).
    let mut end = line.len();
    let mut i = 0;
    let mut in_str = false;
    while i + 1 < line.len() {
        match line[i] {
            b'"' => in_str = !in_str,
            b'\\' if in_str => i += 1,
            b'/' if !in_str && line[i + 1] == b'/' => {
                end = i;
                break;
            }
            _ => {}
        }
        i += 1;
    }
    line[..end]
        .iter()
        .rev()
        .copied()
        .find(|c| !c.is_ascii_whitespace())
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The index just past the string or character literal or the comment that starts at `i`, if
/// one does.
fn skip_literal_or_comment(bytes: &[u8], i: usize) -> Option<usize> {
    match bytes[i] {
        b'"' | b'\'' => Some(skip_literal(bytes, i)),
        b'/' if bytes.get(i + 1).is_some_and(|&c| c == b'/' || c == b'*') => {
            Some(skip_comment(bytes, i))
        }
        _ => None,
    }
}

fn skip_comment(bytes: &[u8], i: usize) -> usize {
    if bytes[i + 1] == b'/' {
        memchr::memchr(b'\n', &bytes[i..])
            .map(|e| i + e)
            .unwrap_or(bytes.len())
    } else {
        find(&bytes[i + 2..], b"*/")
            .map(|e| i + 2 + e + 2)
            .unwrap_or(bytes.len())
    }
}

fn skip_literal(bytes: &[u8], i: usize) -> usize {
    let quote = bytes[i];
    let mut j = i + 1;
    while j < bytes.len() {
        match bytes[j] {
            b'\\' => j += 2,
            b'\n' => return j,
            c if c == quote => return j + 1,
            _ => j += 1,
        }
    }
    bytes.len()
}

/// The index of the `)` matching the `(` at `open`, skipping literals and comments; `None` past
/// 64 KiB or at an unbalanced end.
fn matching_paren(bytes: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, b) in code_bytes(bytes, open) {
        match b {
            b'(' => depth += 1,
            b')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            b';' | b'{' | b'}' => return None,
            _ => {}
        }
    }
    None
}

/// The bytes from `open` on, with their index, that are neither in a literal nor in a comment;
/// the scan stops 64 KiB after `open`.
fn code_bytes(bytes: &[u8], open: usize) -> impl Iterator<Item = (usize, u8)> + '_ {
    let limit = bytes.len().min(open + (64 << 10));
    let mut i = open;
    std::iter::from_fn(move || {
        while i < limit {
            if let Some(next) = skip_literal_or_comment(bytes, i) {
                i = next;
                continue;
            }
            i += 1;
            return Some((i - 1, bytes[i - 1]));
        }
        None
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewrite(text: &str, f: fn(&mut [u8]) -> bool) -> String {
        let mut b = text.as_bytes().to_vec();
        f(&mut b);
        let out = String::from_utf8(b).unwrap();
        assert_eq!(out.len(), text.len());
        assert_eq!(
            out.matches('\n').count(),
            text.matches('\n').count(),
            "newlines must stay where they are"
        );
        out
    }

    #[test]
    fn specifiers_are_rewritten_in_place() {
        let out = rewrite(
            "DS_D_INLINE void f() {}\nstruct __align__(16) S { float x; };\n__global__ void C10_LAUNCH_BOUNDS_1(256) k() {}\nint y = FOO(3);\n",
            rewrite_specifiers,
        );
        assert!(out.starts_with("__device__  void f()"), "{out}");
        assert!(out.contains(&format!("struct{}S", " ".repeat(15))), "{out}");
        assert!(
            out.contains("__global__ void                          k()"),
            "{out}"
        );
        assert!(out.contains("int y = FOO(3);"), "{out}");
    }

    #[test]
    fn statements_passed_to_macros_become_expressions() {
        let text = "void f() {\n  DISPATCH(t, \"f\",\n    launch<2>(a, b, Functor<s>(), x);)\n  TWO(g(1); h(\"a;b\"); )\n  AT_DISPATCH(t, \"k\", [&] { k<<<1, 2>>>(p); int y = 0; });\n}\n";
        let out = rewrite(text, statement_arguments);
        assert!(out.contains("Functor<s>(), x));"), "{out}");
        assert!(out.contains("TWO(g(1), h(\"a;b\")) ;"), "{out}");
        assert!(out.contains("k<<<1, 2>>>(p); int y = 0; });"), "{out}");
        let declares = "void f() {\n  D(t, using acc = float; acc* p = q; k<<<1, 2>>>(p););\n}\n";
        assert_eq!(rewrite(declares, statement_arguments), declares);
        for (segment, expected) in [
            ("using a = b", true),
            (" int* p = q", true),
            ("at::acc_type<float, true> x", true),
            ("launch<2>(a, b)", false),
            ("x = y", false),
            ("return x", false),
            ("a == b", false),
        ] {
            assert_eq!(
                looks_like_declaration(segment.as_bytes()),
                expected,
                "{segment}"
            );
        }
        let mut bytes = out.into_bytes();
        terminate_macro_calls(&mut bytes);
        let tree = parse_bytes(&bytes).unwrap();
        assert!(
            !tree.root_node().has_error(),
            "{}\n{}",
            String::from_utf8_lossy(&bytes),
            tree.root_node().to_sexp()
        );
    }

    #[test]
    fn pragma_macros_before_loops_are_blanked() {
        let text = "void f() {\n  int a = 0;\n  MY_UNROLL\n  for (int i = 0; i < 4; ++i) {}\n  x = Y\n  ;\n  {\n    PRAGMA\n    while (a) {}\n  }\n}\n";
        let out = rewrite(text, blank_loop_pragma_macros);
        assert!(out.contains("\n           \n  for"), "{out}");
        assert!(out.contains("x = Y\n"), "{out}");
        assert!(!out.contains("PRAGMA"), "{out}");
        let tree = parse_bytes(out.as_bytes()).unwrap();
        assert!(
            !tree.root_node().has_error(),
            "{}",
            tree.root_node().to_sexp()
        );
    }

    #[test]
    fn bare_macro_calls_get_a_semicolon() {
        let out = rewrite(
            "INSTANTIATE(float)\nINSTANTIATE(half)\nvoid f() {\n  CHECK_INPUT(x)\n  int y = 0;\n  LOOP(i, n) {\n  }\n}\n",
            terminate_macro_calls,
        );
        assert!(out.starts_with("                  \n"), "{out}");
        assert!(out.contains("  CHECK_INPUT(x)\n; int y"), "{out}");
        assert!(out.contains("LOOP(i, n) {"), "{out}");
    }

    #[test]
    fn first_if_branch_is_kept() {
        let out = rewrite(
            "#ifdef USE_HIP\n  foo(a,\n#else\n  foo(b,\n#endif\n  c);\n",
            keep_first_if_branch,
        );
        assert_eq!(
            out.trim_matches(|c: char| c.is_whitespace())
                .replace(' ', ""),
            "foo(a,\n\n\n\nc);"
        );
    }

    #[test]
    fn nested_groups_keep_their_first_branches() {
        let out = rewrite(
            "#if defined(A) && \\\n    defined(B)\nint a;\n#ifdef C\nint c;\n#else\nint d;\n#endif\n#elif E\nint e;\n#else\nint f;\n#endif\nint g;\n",
            keep_first_if_branch,
        );
        let kept: Vec<&str> = out
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        assert_eq!(kept, ["int a;", "int c;", "int g;"]);
    }

    #[test]
    fn the_retry_keeps_the_better_tree() {
        let text = "INSTANTIATE(float)\nINSTANTIATE(half)\nDS_D_INLINE void f(int a) { return; }\n";
        let first = parse(Lang::Cuda, text).unwrap();
        assert!(first.root_node().has_error());
        let second = reparse(text, first);
        assert!(!second.root_node().has_error());
        assert_eq!(second.root_node().end_byte(), text.len());
    }

    #[test]
    fn macro_specifier_spaces() {
        assert_eq!(
            specifier_macro_space("CUTLASS_DEVICE"),
            Some((false, true, false))
        );
        assert_eq!(
            specifier_macro_space("DS_D_INLINE"),
            Some((false, true, false))
        );
        assert_eq!(
            specifier_macro_space("C10_HOST_DEVICE"),
            Some((false, true, true))
        );
        assert_eq!(
            specifier_macro_space("SCATTER_API"),
            Some((false, false, false))
        );
        assert_eq!(specifier_macro_space("TORCH_CHECK"), None);
        assert_eq!(specifier_macro_space("float"), None);
    }
}
