//! Byte scanning shared by the rewrites: identifiers and macro names, literals and comments
//! skipped, matching parentheses, blanking a range in place.

pub(super) fn is_macro_name(word: &str) -> bool {
    let b = word.as_bytes();
    !b.is_empty()
        && (b[0].is_ascii_uppercase() || b[0] == b'_')
        && b.iter()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == b'_')
        && b.iter().any(|c| c.is_ascii_uppercase())
}

pub(super) fn is_ident_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Replaces every byte of `bytes[from..to]` but newlines by a space.
pub(super) fn blank(bytes: &mut [u8], from: usize, to: usize) {
    let to = to.min(bytes.len());
    for b in &mut bytes[from.min(to)..to] {
        if *b != b'\n' && *b != b'\r' {
            *b = b' ';
        }
    }
}

pub(super) fn last_significant(line: &[u8]) -> Option<u8> {
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

pub(super) fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The index just past the string or character literal or the comment that starts at `i`, if
/// one does.
pub(super) fn skip_literal_or_comment(bytes: &[u8], i: usize) -> Option<usize> {
    match bytes[i] {
        b'"' | b'\'' => Some(skip_literal(bytes, i)),
        b'/' if bytes.get(i + 1).is_some_and(|&c| c == b'/' || c == b'*') => {
            Some(skip_comment(bytes, i))
        }
        _ => None,
    }
}

pub(super) fn skip_comment(bytes: &[u8], i: usize) -> usize {
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

pub(super) fn skip_literal(bytes: &[u8], i: usize) -> usize {
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
pub(super) fn matching_paren(bytes: &[u8], open: usize) -> Option<usize> {
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
pub(super) fn code_bytes(bytes: &[u8], open: usize) -> impl Iterator<Item = (usize, u8)> + '_ {
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
