//! `tf.function` facts: which local functions are traced by `tf.function` (decorated with
//! `@tf.function` / `@tf.function(...)`, or wrapped by `tf.function(f)`), their decorator
//! options, and where `tf.function` objects are created. Plus loop helpers shared by the rules
//! about code that runs per iteration.

use super::tf::{argument, normalize};
use super::PythonModel;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

/// How a local function becomes a `tf.function`.
#[derive(Debug, Clone, Copy)]
pub struct Traced<'t> {
    /// The decorator, or the `tf.function(f)` call.
    pub site: Node<'t>,
    /// `input_signature=` or `reduce_retracing=True` / `experimental_relax_shapes=True`.
    pub stable_signature: bool,
}

/// The `tf.function` facts of one file.
#[derive(Debug, Default)]
pub struct TfFunctions<'t> {
    /// Per local function: how it is traced, if it is.
    pub traced: Vec<Option<Traced<'t>>>,
    /// Every `tf.function(...)` call and every `@tf.function` decorator, in document order.
    pub creations: Vec<Node<'t>>,
}

pub(super) fn is_tf_function(m: &PythonModel<'_>, expr: Node<'_>) -> bool {
    m.qualified_name(expr).is_some_and(|q| {
        matches!(
            normalize(&q).as_str(),
            "tensorflow.function" | "tensorflow.python.eager.def_function.function"
        )
    })
}

/// Does the `tf.function(...)` call keep one trace for varying inputs?
fn stable(m: &PythonModel<'_>, call: Node<'_>) -> bool {
    argument(call, usize::MAX, "input_signature", m).is_some()
        || ["reduce_retracing", "experimental_relax_shapes"]
            .iter()
            .any(|k| {
                argument(call, usize::MAX, k, m)
                    .and_then(|v| m.const_value(v))
                    .is_some_and(|v| v.truthy())
            })
}

impl<'t> TfFunctions<'t> {
    pub(super) fn build(m: &PythonModel<'t>) -> TfFunctions<'t> {
        let mut out = TfFunctions {
            traced: vec![None; m.functions.len()],
            creations: Vec::new(),
        };
        if !m.imports_tensorflow() {
            return out;
        }
        for (i, f) in m.functions.iter().enumerate() {
            for d in &f.decorators {
                let Some(expr) = d.named_child(0) else {
                    continue;
                };
                let (head, call) = match expr.kind_name() {
                    "call" => match expr.field("function") {
                        Some(h) => (h, Some(expr)),
                        None => continue,
                    },
                    _ => (expr, None),
                };
                if is_tf_function(m, head) {
                    out.traced[i] = Some(Traced {
                        site: *d,
                        stable_signature: call.is_some_and(|c| stable(m, c)),
                    });
                    out.creations.push(*d);
                }
            }
        }
        for &(call, _) in &m.calls {
            let Some(func) = call.field("function") else {
                continue;
            };
            if !is_tf_function(m, func) {
                continue;
            }
            // `@tf.function(...)` decorators were recorded above.
            if m.parent(call).is_some_and(|p| p.kind_name() == "decorator") {
                continue;
            }
            out.creations.push(call);
            let Some(target) =
                argument(call, 0, "func", m).filter(|t| t.kind_name() == "identifier")
            else {
                continue;
            };
            if let [f] = m.functions_named(m.text(target)) {
                if out.traced[*f].is_none() {
                    out.traced[*f] = Some(Traced {
                        site: call,
                        stable_signature: stable(m, call),
                    });
                }
            }
        }
        out.creations.sort_by_key(|n| n.start_byte());
        out
    }

    /// The innermost enclosing function of `node` that is traced by `tf.function` (nested
    /// functions run while their parent traces).
    pub fn traced_function(&self, m: &PythonModel<'_>, node: Node<'_>) -> Option<usize> {
        let mut f = m.enclosing_function(node);
        for _ in 0..32 {
            let i = f?;
            if self.traced.get(i).is_some_and(|t| t.is_some()) {
                return Some(i);
            }
            f = m.functions[i].parent;
        }
        None
    }
}

/// The innermost `for`/`while` loop around `node` whose body contains it, within the same
/// function (a loop outside the enclosing `def` does not run the node per iteration).
pub fn enclosing_loop<'t>(m: &PythonModel<'t>, node: Node<'t>) -> Option<Node<'t>> {
    let mut cur = node;
    for _ in 0..256 {
        let p = m.parent(cur)?;
        match p.kind_name() {
            "function_definition" | "class_definition" | "lambda" | "module" => return None,
            "for_statement" | "while_statement"
                if p.field("body").map(|b| b.id()) == Some(cur.id()) =>
            {
                return Some(p);
            }
            _ => {}
        }
        cur = p;
    }
    None
}

/// Is the call `keras.backend.clear_session()` / `keras.utils.clear_session()` (any spelling)?
pub fn is_clear_session(m: &PythonModel<'_>, call: Node<'_>) -> bool {
    m.call_name(call).is_some_and(|q| {
        matches!(
            normalize(&q).as_str(),
            "keras.backend.clear_session" | "keras.utils.clear_session" | "keras.clear_session"
        )
    })
}

/// The calls in `scope` (a loop body) and, one level down, in the local functions called from
/// it, for which `pred` holds. Returns the first one found.
pub fn find_call_in<'t>(
    m: &PythonModel<'t>,
    scope: Node<'_>,
    pred: impl Fn(Node<'t>) -> bool,
) -> Option<Node<'t>> {
    let range = scope.byte_range();
    // The calls are in document order: only those starting inside `scope` are looked at (a
    // scan of every call of the file per loop grows with the loops times the calls).
    let lo = m
        .calls
        .partition_point(|(c, _)| c.start_byte() < range.start);
    let calls: Vec<Node<'t>> = m.calls[lo..]
        .iter()
        .map(|(c, _)| *c)
        .take_while(|c| c.start_byte() < range.end)
        .filter(|c| c.end_byte() <= range.end)
        .collect();
    if let Some(c) = calls.iter().copied().find(|c| pred(*c)) {
        return Some(c);
    }
    for c in calls {
        let Some(f) = m.local_callee(c) else {
            continue;
        };
        if let Some((hit, _)) = m.calls_in(f).find(|(d, _)| pred(*d)) {
            return Some(*hit);
        }
    }
    None
}

/// A hyperparameter search that calls function `f` once per trial, the way a loop runs its
/// body: `study.optimize(f, n_trials=N)` (Optuna), `fmin(f, ...)` / `fmin(fn=f, ...)`
/// (hyperopt), with `f` the objective itself or the objective calling `f` unconditionally.
/// Returns the driver call and the objective. A search whose `n_trials` / `max_evals` folds to
/// at most `max` runs a few times only and is not returned.
pub fn trial_driver<'t>(m: &PythonModel<'t>, f: usize, max: i128) -> Option<(Node<'t>, usize)> {
    let callers = m
        .calls
        .iter()
        .filter(|(c, scope)| {
            scope.is_some_and(|s| s != f)
                && m.local_callee(*c) == Some(f)
                && unconditional_in_function(m, *c)
        })
        .filter_map(|(_, scope)| *scope);
    for obj in std::iter::once(f).chain(callers) {
        if m.functions[obj].class.is_some() {
            continue;
        }
        let name = m.functions[obj].name.as_str();
        if let Some(&(call, _)) = m
            .calls
            .iter()
            .find(|(c, _)| is_trial_driver(m, *c, name, max))
        {
            return Some((call, obj));
        }
    }
    None
}

fn is_trial_driver(m: &PythonModel<'_>, call: Node<'_>, objective: &str, max: i128) -> bool {
    let (Some(func), Some(args)) = (call.field("function"), call.field("arguments")) else {
        return false;
    };
    let mut positional = None;
    let mut keywords: Vec<(&str, Node<'_>)> = Vec::new();
    for a in gpulint_syntax::named_children(args) {
        match a.kind_name() {
            "keyword_argument" => {
                if let (Some(k), Some(v)) = (a.field("name"), a.field("value")) {
                    keywords.push((m.text(k), v));
                }
            }
            "comment" => {}
            _ if positional.is_none() => positional = Some(a),
            _ => {}
        }
    }
    let kw = |k: &str| keywords.iter().find(|(n, _)| *n == k).map(|(_, v)| *v);
    let optuna = func.kind_name() == "attribute"
        && func
            .field("attribute")
            .is_some_and(|a| m.text(a) == "optimize")
        && (kw("n_trials").is_some() || kw("timeout").is_some());
    let hyperopt = m
        .call_name(call)
        .is_some_and(|q| q.starts_with("hyperopt") && q.ends_with(".fmin"));
    let passed = if optuna {
        positional.or_else(|| kw("func"))
    } else if hyperopt {
        positional.or_else(|| kw("fn"))
    } else {
        return false;
    };
    if passed.is_none_or(|p| p.kind_name() != "identifier" || m.text(p) != objective) {
        return false;
    }
    kw("n_trials")
        .or_else(|| kw("max_evals"))
        .and_then(|t| m.const_value(t))
        .and_then(|v| v.as_int())
        .is_none_or(|n| n > max)
}

/// Does the loop run only a few times (`range(3)`, a literal list of up to `max` items)?
pub fn few_iterations(m: &PythonModel<'_>, lp: Node<'_>, max: i128) -> bool {
    if lp.kind_name() != "for_statement" {
        return false;
    }
    let Some(iter) = lp.field("right") else {
        return false;
    };
    match iter.kind_name() {
        "list" | "tuple" => (iter.named_child_count() as i128) <= max,
        "call" if m.text(iter.field("function").unwrap_or(iter)) == "range" => {
            let args = iter.field("arguments");
            let vals: Vec<Option<i128>> = args
                .map(|a| {
                    gpulint_syntax::named_children(a)
                        .map(|x| m.const_value(x).and_then(|v| v.as_int()))
                        .collect()
                })
                .unwrap_or_default();
            match vals.as_slice() {
                [Some(n)] => *n <= max,
                [Some(a), Some(b)] | [Some(a), Some(b), _] => b - a <= max,
                _ => false,
            }
        }
        _ => false,
    }
}

/// Does `node` run whenever its enclosing function runs (no `if`, `match`, loop or `except`
/// between it and the `def`)?
pub fn unconditional_in_function(m: &PythonModel<'_>, node: Node<'_>) -> bool {
    let mut cur = node;
    for _ in 0..256 {
        let Some(p) = m.parent(cur) else { return true };
        match p.kind_name() {
            "function_definition" | "module" => return true,
            "if_statement"
            | "elif_clause"
            | "else_clause"
            | "match_statement"
            | "conditional_expression"
            | "except_clause"
            | "for_statement"
            | "while_statement"
            | "boolean_operator" => return false,
            _ => {}
        }
        cur = p;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::super::build;
    use super::*;
    use gpulint_syntax::{parse, Lang};

    #[test]
    fn traced_functions_and_loops() {
        let src = "import tensorflow as tf\nfrom tensorflow import function as tfn\n\n@tf.function\ndef a(x):\n    for i in range(3):\n        y = x\n    return x\n\n@tf.function(input_signature=[tf.TensorSpec([])])\ndef b(x):\n    return x\n\ndef c(x):\n    def inner():\n        return x\n    return inner()\n\ng = tf.function(c)\n\n@tfn(reduce_retracing=True)\ndef d(x):\n    return x\n\ndef plain(x):\n    return x\n";
        let tree = parse(Lang::Python, src).unwrap();
        let m = build(&tree, src);
        let t = m.tf_functions();
        let by_name = |n: &str| m.functions.iter().position(|f| f.name == n).unwrap();
        assert!(t.traced[by_name("a")].is_some_and(|t| !t.stable_signature));
        assert!(t.traced[by_name("b")].is_some_and(|t| t.stable_signature));
        assert!(t.traced[by_name("c")].is_some());
        assert!(t.traced[by_name("d")].is_some_and(|t| t.stable_signature));
        assert!(t.traced[by_name("plain")].is_none());
        assert_eq!(t.creations.len(), 4);
        // `inner` runs while `c` traces.
        let inner = m.functions[by_name("inner")].node;
        assert_eq!(
            t.traced_function(&m, inner.field("body").unwrap()),
            Some(by_name("c"))
        );
        // The assignment in `a` sits in a loop body; `return x` does not.
        let a = m.functions[by_name("a")].node;
        let assign = descendants_of_kind(a, "assignment");
        assert!(enclosing_loop(&m, assign).is_some());
        assert!(few_iterations(&m, enclosing_loop(&m, assign).unwrap(), 3));
        let ret = descendants_of_kind(a, "return_statement");
        assert!(enclosing_loop(&m, ret).is_none());
    }

    fn descendants_of_kind<'t>(n: Node<'t>, kind: &str) -> Node<'t> {
        gpulint_syntax::descendants(n)
            .find(|d| d.kind_name() == kind)
            .unwrap()
    }
}
