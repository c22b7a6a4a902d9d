//! Writes to the process environment: `os.environ["K"] = "v"`, `os.environ.setdefault("K", "v")`,
//! `os.environ.update({"K": "v"})` / `update(K="v")`, `os.putenv("K", "v")`.

use super::{string_literal, PythonModel};
use gpulint_syntax::named_children;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

/// One write of an environment variable.
#[derive(Debug, Clone)]
pub struct EnvWrite<'t> {
    /// The `assignment` or `call` that writes it (an event of the execution order).
    pub node: Node<'t>,
    /// The variable's name.
    pub key: String,
    /// The value written, when it folds to a string (numbers are written as their text).
    pub value: Option<String>,
    /// `setdefault`: only takes effect if the variable is not already set.
    pub default_only: bool,
}

impl EnvWrite<'_> {
    /// Does the value equal `v`, ignoring ASCII case and surrounding whitespace?
    pub fn value_is(&self, v: &str) -> bool {
        self.value
            .as_deref()
            .is_some_and(|x| x.trim().eq_ignore_ascii_case(v))
    }
}

pub(super) fn collect<'t>(m: &PythonModel<'t>) -> Vec<EnvWrite<'t>> {
    let mut out = Vec::new();
    for &node in &m.subscript_assignments {
        let (Some(left), Some(right)) = (node.field("left"), node.field("right")) else {
            continue;
        };
        let Some(target) = left.field("value") else {
            continue;
        };
        if !is_environ(m, target) {
            continue;
        }
        let Some(key) = left.field("subscript").and_then(|k| string_value(m, k)) else {
            continue;
        };
        out.push(EnvWrite {
            node,
            key,
            value: string_value(m, right),
            default_only: false,
        });
    }
    for &(call, _) in &m.calls {
        let Some(func) = call.field("function") else {
            continue;
        };
        if func.kind_name() != "attribute" {
            continue;
        }
        let (Some(object), Some(attr)) = (func.field("object"), func.field("attribute")) else {
            continue;
        };
        let Some(args) = call.field("arguments") else {
            continue;
        };
        let name = m.text(attr);
        if !matches!(name, "setdefault" | "__setitem__" | "putenv" | "update") {
            continue;
        }
        let positional: Vec<Node<'t>> = named_children(args)
            .filter(|a| !matches!(a.kind_name(), "keyword_argument" | "comment"))
            .collect();
        match name {
            "setdefault" | "__setitem__" if is_environ(m, object) => {
                let default_only = m.text(attr) == "setdefault";
                out.extend(key_value_write(m, call, &positional, default_only));
            }
            "putenv" if m.qualified_name(func).as_deref() == Some("os.putenv") => {
                out.extend(key_value_write(m, call, &positional, false));
            }
            "update" if is_environ(m, object) => {
                for a in named_children(args) {
                    match a.kind_name() {
                        "keyword_argument" => {
                            if let (Some(k), Some(v)) = (a.field("name"), a.field("value")) {
                                out.push(EnvWrite {
                                    node: call,
                                    key: m.text(k).to_string(),
                                    value: string_value(m, v),
                                    default_only: false,
                                });
                            }
                        }
                        "dictionary" => {
                            for pair in named_children(a).filter(|p| p.kind_name() == "pair") {
                                let (Some(k), Some(v)) = (pair.field("key"), pair.field("value"))
                                else {
                                    continue;
                                };
                                if let Some(key) = string_value(m, k) {
                                    out.push(EnvWrite {
                                        node: call,
                                        key,
                                        value: string_value(m, v),
                                        default_only: false,
                                    });
                                }
                            }
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    out.sort_by_key(|w| w.node.start_byte());
    out
}

/// The write of `call(key, value, ...)` (`os.environ.setdefault`, `os.putenv`) when the key
/// is a string.
fn key_value_write<'t>(
    m: &PythonModel<'t>,
    call: Node<'t>,
    positional: &[Node<'t>],
    default_only: bool,
) -> Option<EnvWrite<'t>> {
    let (k, v) = (positional.first()?, positional.get(1)?);
    Some(EnvWrite {
        node: call,
        key: string_value(m, *k)?,
        value: string_value(m, *v),
        default_only,
    })
}

/// `os.environ` (also through `from os import environ` or an alias).
fn is_environ(m: &PythonModel<'_>, expr: Node<'_>) -> bool {
    matches!(expr.kind_name(), "attribute" | "identifier")
        && m.qualified_name(expr).as_deref() == Some("os.environ")
}

/// A string (or number, as written) that an expression folds to.
fn string_value(m: &PythonModel<'_>, expr: Node<'_>) -> Option<String> {
    if let Some(s) = string_literal(expr, m.source) {
        return Some(s);
    }
    match m.const_value(expr)? {
        super::Value::Str(s) => Some(s),
        super::Value::Int(i) => Some(i.to_string()),
        super::Value::Bool(b) => Some(if b { "True" } else { "False" }.into()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::build;
    use gpulint_syntax::{parse, Lang};

    #[test]
    fn environment_writes() {
        let src = "import os\nfrom os import environ\nKEY = 'TF_FORCE_GPU_ALLOW_GROWTH'\nos.environ[KEY] = 'true'\nenviron['CUDA_VISIBLE_DEVICES'] = ''\nos.environ.setdefault('XLA_PYTHON_CLIENT_PREALLOCATE', 'false')\nos.putenv('A', '1')\nos.environ.update({'B': 'x'}, C='y')\nd = {}\nd['K'] = 'v'\n";
        let tree = parse(Lang::Python, src).unwrap();
        let m = build(&tree, src);
        let w: Vec<(String, Option<String>)> = m
            .env_writes()
            .iter()
            .map(|w| (w.key.clone(), w.value.clone()))
            .collect();
        let s = |k: &str, v: &str| (k.to_string(), Some(v.to_string()));
        assert_eq!(
            w,
            [
                s("TF_FORCE_GPU_ALLOW_GROWTH", "true"),
                s("CUDA_VISIBLE_DEVICES", ""),
                s("XLA_PYTHON_CLIENT_PREALLOCATE", "false"),
                s("A", "1"),
                s("B", "x"),
                s("C", "y"),
            ]
        );
        assert!(m.env_writes()[2].default_only);
    }
}
