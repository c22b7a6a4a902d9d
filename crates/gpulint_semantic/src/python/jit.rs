//! JAX-jitted functions with static arguments: `f = jax.jit(g, static_argnums=(1,))`,
//! `@partial(jax.jit, static_argnames=("mode",))`, and which argument of a call of `f` is
//! static. JAX hashes static arguments into the compilation-cache key, so what is passed
//! there decides whether a call compiles again.

use super::tf::argument;
use super::{PythonModel, Value};
use gpulint_syntax::named_children;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

/// A name bound to a jitted function that has static arguments.
#[derive(Debug, Clone)]
pub struct StaticJit<'t> {
    /// The name calls use.
    pub name: String,
    /// The `jax.jit(...)` call or decorator that declares the static arguments.
    pub site: Node<'t>,
    /// The scope that binds the name (`None`: module level).
    pub scope: Option<usize>,
    /// Static positions and static parameter names (each completed from the other when the
    /// wrapped function's parameters are known).
    pub positions: Vec<usize>,
    pub names: Vec<String>,
}

impl<'t> StaticJit<'t> {
    /// The arguments of `call` that sit at a static position or keyword.
    pub fn static_args(&self, m: &PythonModel<'_>, call: Node<'t>) -> Vec<Node<'t>> {
        let Some(args) = call.field("arguments") else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut pos = 0;
        for a in named_children(args) {
            match a.kind_name() {
                "keyword_argument" => {
                    let name = a.field("name").map(|n| m.text(n));
                    if name.is_some_and(|n| self.names.iter().any(|s| s == n)) {
                        out.extend(a.field("value"));
                    }
                }
                // After a splat the positions are unknown.
                "list_splat" | "dictionary_splat" => break,
                "comment" => {}
                _ => {
                    if self.positions.contains(&pos) {
                        out.push(a);
                    }
                    pos += 1;
                }
            }
        }
        out
    }
}

/// `jax.jit` with static arguments, as `(positions, names)`; `None` without any.
fn static_spec(m: &PythonModel<'_>, jit_call: Node<'_>) -> Option<(Vec<usize>, Vec<String>)> {
    let ints = |n: Node<'_>| -> Vec<usize> {
        match m.const_value(n) {
            Some(Value::Int(i)) if i >= 0 => vec![i as usize],
            _ => named_children(n)
                .filter_map(|c| m.const_value(c)?.as_int())
                .filter_map(|i| usize::try_from(i).ok())
                .collect(),
        }
    };
    let strs = |n: Node<'_>| -> Vec<String> {
        match m.const_value(n) {
            Some(Value::Str(s)) => vec![s],
            _ => named_children(n)
                .filter_map(|c| m.const_value(c)?.as_str().map(str::to_string))
                .collect(),
        }
    };
    let positions = argument(jit_call, usize::MAX, "static_argnums", m)
        .map(ints)
        .unwrap_or_default();
    let names = argument(jit_call, usize::MAX, "static_argnames", m)
        .map(strs)
        .unwrap_or_default();
    (!positions.is_empty() || !names.is_empty()).then_some((positions, names))
}

/// The parameter names of a function definition, in order.
fn params(m: &PythonModel<'_>, def: Node<'_>) -> Vec<String> {
    let Some(ps) = def.field("parameters") else {
        return Vec::new();
    };
    named_children(ps)
        .filter_map(|p| match p.kind_name() {
            "identifier" => Some(m.text(p).to_string()),
            "typed_parameter" => named_children(p)
                .find(|c| c.kind_name() == "identifier")
                .map(|c| m.text(c).to_string()),
            "default_parameter" | "typed_default_parameter" => {
                p.field("name").map(|n| m.text(n).to_string())
            }
            _ => None,
        })
        .collect()
}

fn complete(m: &PythonModel<'_>, def: Option<Node<'_>>, spec: &mut (Vec<usize>, Vec<String>)) {
    let Some(def) = def else {
        return;
    };
    let ps = params(m, def);
    for &p in &spec.0 {
        if let Some(n) = ps.get(p) {
            if !spec.1.contains(n) {
                spec.1.push(n.clone());
            }
        }
    }
    for n in spec.1.clone() {
        if let Some(i) = ps.iter().position(|p| *p == n) {
            if !spec.0.contains(&i) {
                spec.0.push(i);
            }
        }
    }
}

fn is_jit(m: &PythonModel<'_>, f: Node<'_>) -> bool {
    m.qualified_name(f).as_deref() == Some("jax.jit")
}

/// The jitted functions of a module that have static arguments (methods excluded: their
/// calls go through `self`).
pub fn static_jits<'t>(m: &PythonModel<'t>) -> Vec<StaticJit<'t>> {
    let mut out = Vec::new();
    // Decorated definitions: `@partial(jax.jit, static_argnums=...)`, `@jax.jit(static_...)`.
    for f in &m.functions {
        if f.class.is_some() {
            continue;
        }
        for &d in &f.decorators {
            let Some(expr) = named_children(d).next() else {
                continue;
            };
            if expr.kind_name() != "call" {
                continue;
            }
            let Some(func) = expr.field("function") else {
                continue;
            };
            let declares = (m.qualified_name(func).as_deref() == Some("functools.partial")
                && argument(expr, 0, "func", m).is_some_and(|a| is_jit(m, a)))
                || is_jit(m, func);
            if !declares {
                continue;
            }
            if let Some(mut spec) = static_spec(m, expr) {
                complete(m, Some(f.node), &mut spec);
                out.push(StaticJit {
                    name: f.name.clone(),
                    site: expr,
                    scope: f.parent,
                    positions: spec.0,
                    names: spec.1,
                });
            }
        }
    }
    // `step = jax.jit(train_step, static_argnums=(2,))`.
    for &a in &m.assignments {
        let (Some(left), Some(right)) = (a.field("left"), a.field("right")) else {
            continue;
        };
        if left.kind_name() != "identifier" || right.kind_name() != "call" {
            continue;
        }
        if !right.field("function").is_some_and(|f| is_jit(m, f)) {
            continue;
        }
        let Some(mut spec) = static_spec(m, right) else {
            continue;
        };
        let def = argument(right, 0, "fun", m)
            .filter(|f| f.kind_name() == "identifier")
            .and_then(|f| m.functions_named(m.text(f)).first().copied())
            .map(|i| m.functions[i].node);
        complete(m, def, &mut spec);
        out.push(StaticJit {
            name: m.text(left).to_string(),
            site: right,
            scope: m.enclosing_function(a),
            positions: spec.0,
            names: spec.1,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::build;
    use super::*;
    use gpulint_syntax::{parse, Lang};

    #[test]
    fn static_arguments() {
        let src = "import jax\nfrom functools import partial\n@partial(jax.jit, static_argnames=('n',))\ndef step(x, n):\n    return x\ndef g(x, mode, k=1):\n    return x\nf = jax.jit(g, static_argnums=(1, 2))\nstep(a, 3)\nf(a, b, k=[1])\n";
        let tree = parse(Lang::Python, src).unwrap();
        let m = build(&tree, src);
        let j = static_jits(&m);
        assert_eq!(j.len(), 2);
        assert_eq!(
            (j[0].name.as_str(), j[0].positions.clone()),
            ("step", vec![1])
        );
        assert_eq!(j[1].names, ["mode", "k"]);
        let calls: Vec<_> = m.calls.iter().map(|c| c.0).collect();
        let c = *calls.last().unwrap();
        let args: Vec<&str> = j[1].static_args(&m, c).iter().map(|a| m.text(*a)).collect();
        assert_eq!(args, ["b", "[1]"]);
    }
}
