//! Specifier macros: execution-space macros at the start of a declaration (`DS_D_INLINE`)
//! rewritten to the CUDA keyword they stand for, function-like specifiers (`__align__(16)`) and
//! calling conventions blanked.

use super::scan::{
    blank, is_ident_byte, is_macro_name, matching_paren, skip_comment, skip_literal,
};

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
pub(super) fn rewrite_specifiers(bytes: &mut [u8]) -> bool {
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

#[cfg(test)]
mod tests {
    use super::super::tests::rewrite;
    use super::*;

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
