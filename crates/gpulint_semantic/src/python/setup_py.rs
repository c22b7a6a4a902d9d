//! `setup.py`: the `install_requires`, `extras_require` and `python_requires` literals of a
//! `setuptools.setup(...)` call, read through the Python semantic model (imports resolve
//! `setup`, module-level names such as `REQUIRED = [...]` resolve through their one binding).
//! The result is the same [`Manifest`] the other formats produce, so the MF rules have one
//! source of truth.

use crate::python::{string_literal, PythonModel, Value};
use gpulint_manifest::pep508::{parse_requirement, parse_specifiers};
use gpulint_manifest::{Format, Manifest, PythonDecl, Requirement, Scope};
use gpulint_source::Span;
use gpulint_syntax::named_children;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

const SETUP_FUNCTIONS: &[&str] = &[
    "setuptools.setup",
    "distutils.core.setup",
    "skbuild.setup",
    "numpy.distutils.core.setup",
];

/// The manifest a `setup.py` declares; `None` when it has no `setup(...)` call.
pub fn extract(model: &PythonModel<'_>) -> Option<Manifest> {
    let mut m = Manifest::new(Format::SetupPy);
    let mut found = false;
    for (call, _) in &model.calls {
        let Some(name) = model.call_name(*call) else {
            continue;
        };
        if !SETUP_FUNCTIONS.contains(&name.as_str()) {
            continue;
        }
        found = true;
        let Some(args) = call.field("arguments") else {
            continue;
        };
        for kw in named_children(args).filter(|n| n.kind_name() == "keyword_argument") {
            let (Some(key), Some(value)) = (kw.field("name"), kw.field("value")) else {
                continue;
            };
            match model.text(key) {
                "install_requires" => requirements(&mut m, model, value, 0),
                "extras_require" => {
                    let Some(dict) = resolve(model, value, "dictionary") else {
                        continue;
                    };
                    for pair in named_children(dict).filter(|n| n.kind_name() == "pair") {
                        let (Some(k), Some(v)) = (pair.field("key"), pair.field("value")) else {
                            continue;
                        };
                        let name = string_literal(k, model.source).unwrap_or_default();
                        m.scopes.push(Scope {
                            name,
                            parent: Some(0),
                        });
                        let scope = m.scopes.len() - 1;
                        requirements(&mut m, model, v, scope);
                    }
                }
                "python_requires" => {
                    if let Some((s, span)) = string(model, value) {
                        m.pythons.push(PythonDecl {
                            spec: parse_specifiers(&s).0,
                            text: format!("python_requires=\"{s}\""),
                            span,
                            origin: None,
                            scope: 0,
                        });
                    }
                }
                _ => {}
            }
        }
    }
    if !found {
        return None;
    }
    gpulint_manifest::finish(&mut m, model.source);
    Some(m)
}

/// `value` itself when it is of `kind`, or the one module-level binding of a name.
fn resolve<'t>(model: &PythonModel<'t>, value: Node<'t>, kind: &str) -> Option<Node<'t>> {
    if value.kind_name() == kind {
        return Some(value);
    }
    if value.kind_name() == "identifier" {
        let bound = model.module_value(model.text(value))?;
        return (bound.kind_name() == kind).then_some(bound);
    }
    None
}

/// A string value and the span of its text (the string's content when it has no escapes).
fn string(model: &PythonModel<'_>, node: Node<'_>) -> Option<(String, Span)> {
    if let Some(s) = string_literal(node, model.source) {
        let content: Vec<Node<'_>> = named_children(node)
            .filter(|c| c.kind_name() == "string_content")
            .collect();
        let span = match content.as_slice() {
            [c] if model.text(*c) == s => Span::of(c),
            _ => Span::of(&node),
        };
        return Some((s, span));
    }
    match model.const_value(node)? {
        Value::Str(s) => Some((s, Span::of(&node))),
        _ => None,
    }
}

fn requirements<'t>(m: &mut Manifest, model: &PythonModel<'t>, value: Node<'t>, scope: usize) {
    let Some(list) = resolve(model, value, "list").or_else(|| resolve(model, value, "tuple"))
    else {
        return;
    };
    for item in named_children(list) {
        let Some((s, span)) = string(model, item) else {
            continue;
        };
        let Some(r) = parse_requirement(&s) else {
            continue;
        };
        let exact = model.source.get(span.start..span.end) == Some(s.as_str());
        m.requirements
            .push(Requirement::pip(r, &s, span, exact, scope));
    }
}
