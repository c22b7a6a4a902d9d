//! Folding an expression to one string or path: literals and f-strings, names, `__file__`,
//! `os.path.join/dirname/abspath/realpath`, `Path(...)`, `.parent`, `/`, `joinpath`, and
//! strings returned by functions of the file; and lexical path normalization.

use super::{Env, Folder, Str, Val, MAX_DEPTH};
use crate::python::string_literal;
use gpulint_syntax::{named_children, NodeExt};
use std::path::{Component, Path, PathBuf};
use tree_sitter::Node;

impl<'m> Folder<'_, 'm> {
    /// The constant string or path an expression stands for.
    pub(super) fn string(&self, expr: Node<'_>, env: &Env<'_>, depth: usize) -> Option<Str> {
        if depth > MAX_DEPTH || !self.step() {
            return None;
        }
        let d = depth + 1;
        let plain = |value: String| Str {
            value,
            anchored: false,
        };
        match expr.kind_name() {
            "string" => self.fstring(expr, env, d),
            "concatenated_string" => {
                let mut acc = plain(String::new());
                for part in named_children(expr) {
                    let s = self.fstring(part, env, d)?;
                    acc.value.push_str(&s.value);
                    acc.anchored |= s.anchored;
                }
                Some(acc)
            }
            "parenthesized_expression" => self.string(expr.named_child(0)?, env, d),
            "identifier" => {
                let name = self.text(expr);
                let value = match env.iter().rev().find(|(n, _)| *n == name) {
                    Some((_, v)) => Some(v.clone()),
                    None if name == "__file__" => {
                        return Some(Str {
                            value: self.absolute.to_string_lossy().into_owned(),
                            anchored: true,
                        })
                    }
                    None => self.name_value(expr, name, d),
                };
                match value? {
                    Val::Str(s) => Some(s),
                    Val::List(_) => None,
                }
            }
            "binary_operator" => {
                let op = self.text(expr.field("operator")?);
                let l = self.string(expr.field("left")?, env, d)?;
                let r = self.string(expr.field("right")?, env, d)?;
                match op {
                    "+" => Some(Str {
                        value: l.value + &r.value,
                        anchored: l.anchored || r.anchored,
                    }),
                    "/" => Some(join(l, r)),
                    _ => None,
                }
            }
            "attribute" => {
                if let Some("os.curdir" | "os.path.curdir") = self.m.qualified_name(expr).as_deref()
                {
                    return Some(plain(".".into()));
                }
                // `Path(__file__).parent`, `p.parent.parent`
                let attr = self.text(expr.field("attribute")?);
                if attr != "parent" {
                    return None;
                }
                Some(parent(self.string(expr.field("object")?, env, d)?))
            }
            "call" => self.call_string(expr, env, d),
            _ => None,
        }
    }

    fn call_string(&self, call: Node<'_>, env: &Env<'_>, depth: usize) -> Option<Str> {
        let func = call.field("function")?;
        let args: Vec<Node<'_>> = named_children(call.field("arguments")?)
            .filter(|a| a.kind_name() != "comment")
            .collect();
        let first = || args.first().copied();
        if let Some(q) = self.m.qualified_name(func) {
            match q.as_str() {
                "os.path.join" | "posixpath.join" => {
                    let mut acc: Option<Str> = None;
                    for a in &args {
                        if a.kind_name() == "keyword_argument" {
                            return None;
                        }
                        let s = self.string(*a, env, depth)?;
                        acc = Some(match acc {
                            None => s,
                            Some(l) => join(l, s),
                        });
                    }
                    return acc;
                }
                "os.path.dirname" => return Some(parent(self.string(first()?, env, depth)?)),
                "os.path.abspath" | "os.path.realpath" => {
                    let s = self.string(first()?, env, depth)?;
                    return Some(self.absolutize(s));
                }
                "os.path.normpath" | "os.fspath" | "pathlib.Path" | "pathlib.PurePath"
                | "pathlib.PosixPath" => {
                    if args.len() != 1 {
                        return None;
                    }
                    return self.string(first()?, env, depth);
                }
                q if q.ends_with("resource_loader.get_path_to_datafile") => {
                    // TensorFlow: relative to the calling file's folder.
                    let s = self.string(first()?, env, depth)?;
                    let dir = parent(Str {
                        value: self.absolute.to_string_lossy().into_owned(),
                        anchored: true,
                    });
                    return Some(join(dir, s));
                }
                _ => return None,
            }
        }
        match func.kind_name() {
            "identifier" if self.text(func) == "str" && args.len() == 1 => {
                self.string(first()?, env, depth)
            }
            "attribute" => {
                let attr = self.text(func.field("attribute")?);
                let obj = func.field("object")?;
                match attr {
                    "resolve" | "absolute" if args.is_empty() => {
                        Some(self.absolutize(self.string(obj, env, depth)?))
                    }
                    "joinpath" => {
                        let mut acc = self.string(obj, env, depth)?;
                        for a in &args {
                            acc = join(acc, self.string(*a, env, depth)?);
                        }
                        Some(acc)
                    }
                    _ => self.returned_string(call, env, depth),
                }
            }
            _ => self.returned_string(call, env, depth),
        }
    }

    /// A string literal or an f-string whose interpolations are plain constant expressions.
    fn fstring(&self, node: Node<'_>, env: &Env<'_>, depth: usize) -> Option<Str> {
        if node.kind_name() != "string" {
            return None;
        }
        if let Some(value) = string_literal(node, self.m.source) {
            return Some(Str {
                value,
                anchored: false,
            });
        }
        let mut acc = Str {
            value: String::new(),
            anchored: false,
        };
        for part in named_children(node) {
            match part.kind_name() {
                "interpolation" => {
                    if part.field("format_specifier").is_some()
                        || part.field("type_conversion").is_some()
                    {
                        return None;
                    }
                    let s = self.string(part.field("expression")?, env, depth)?;
                    acc.value.push_str(&s.value);
                    acc.anchored |= s.anchored;
                }
                "string_content" => acc.value.push_str(self.text(part)),
                _ => {}
            }
        }
        Some(acc)
    }
}

fn join(l: Str, r: Str) -> Str {
    if Path::new(&r.value).is_absolute() {
        return r;
    }
    Str {
        value: Path::new(&l.value)
            .join(&r.value)
            .to_string_lossy()
            .into_owned(),
        anchored: l.anchored || r.anchored,
    }
}

fn parent(s: Str) -> Str {
    Str {
        value: Path::new(&s.value)
            .parent()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default(),
        anchored: s.anchored,
    }
}

/// The absolute, lexically normalized form of a path (from the working directory).
pub(super) fn absolute(p: &Path) -> PathBuf {
    normalize(&std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()))
}

/// `a/./b/../c` → `a/c`, lexically (no file system access).
pub fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                let last = out.components().next_back();
                if matches!(last, Some(Component::Normal(_))) {
                    out.pop();
                } else if !matches!(last, Some(Component::RootDir | Component::Prefix(_))) {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_lexically() {
        assert_eq!(normalize(Path::new("a/./b/../c")), PathBuf::from("a/c"));
        assert_eq!(normalize(Path::new("../x")), PathBuf::from("../x"));
        assert_eq!(normalize(Path::new("/a/../../x")), PathBuf::from("/x"));
    }
}
