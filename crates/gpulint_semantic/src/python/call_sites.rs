//! Call-site constant propagation into parameters: for a function of the file, the constants
//! each of its parameters receives at the calls visible in the same module.
//!
//! A call site binds an argument positionally or by keyword; a parameter it does not pass takes
//! its default. An argument is a constant when it folds ([`PythonModel::const_value`]: literals,
//! arithmetic, module-level names bound once), when it is a local name of the calling function
//! bound once to a constant, or when it is a parameter of the calling function that itself
//! receives only constants (followed a few calls up). Calls through `g = tf.function(f)` count
//! as calls of `f`. A call with `*args` / `**kwargs` binds nothing we can read.

use super::recursion::{argument_for, is_bound_call};
use super::tf::argument;
use super::tf_function::is_tf_function;
use super::{PythonModel, Value};
use crate::hash::HashMap;
use gpulint_syntax::{named_children, NodeExt};
use tree_sitter::Node;

/// How many calls up a parameter passed on as an argument is followed.
const MAX_DEPTH: usize = 3;

/// A parameter of a function, as call sites bind it.
#[derive(Debug, Clone)]
pub struct Parameter<'t> {
    pub name: &'t str,
    /// Its default value, if any.
    pub default: Option<Node<'t>>,
    /// Declared after `*` / `*args`: only a keyword binds it.
    pub keyword_only: bool,
}

/// One visible call of the function.
#[derive(Debug, Clone)]
pub struct CallSite<'t> {
    pub call: Node<'t>,
    /// Per parameter (in declaration order): the constants it may receive at this call (several
    /// when it is passed on from a caller whose own call sites disagree), `None` when the
    /// argument is not a constant.
    pub values: Vec<Option<Vec<Value>>>,
}

/// The constants the parameters of one function receive at its visible call sites.
#[derive(Debug, Clone)]
pub struct ParameterValues<'t> {
    pub params: Vec<Parameter<'t>>,
    pub sites: Vec<CallSite<'t>>,
}

impl<'t> ParameterValues<'t> {
    /// Index of the parameter called `name`.
    pub fn index(&self, name: &str) -> Option<usize> {
        self.params.iter().position(|p| p.name == name)
    }

    /// Every constant parameter `name` receives, deduplicated in call order; `None` when no call
    /// site is visible or any of them passes a non-constant.
    pub fn constants(&self, name: &str) -> Option<Vec<Value>> {
        let i = self.index(name)?;
        if self.sites.is_empty() {
            return None;
        }
        let mut out: Vec<Value> = Vec::new();
        for s in &self.sites {
            for v in s.values.get(i)?.as_ref()? {
                if !out.contains(v) {
                    out.push(v.clone());
                }
            }
        }
        Some(out)
    }

    /// The largest integer parameter `name` receives at the call sites (`None` as for
    /// [`ParameterValues::constants`], or when one of the values is not an integer).
    pub fn largest_int(&self, name: &str) -> Option<i128> {
        self.constants(name)?
            .iter()
            .map(Value::as_int)
            .try_fold(i128::MIN, |acc, v| v.map(|v| acc.max(v)))
    }
}

/// The parameters of function `f` in order, `self`/`cls` included; `*args`/`**kwargs` are left
/// out (what they collect is never a named parameter).
pub fn parameters<'t>(m: &PythonModel<'t>, f: usize) -> Vec<Parameter<'t>> {
    let Some(params) = m.functions[f].node.field("parameters") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut keyword_only = false;
    for p in named_children(params) {
        let (name, default) = match p.kind_name() {
            "identifier" => (Some(p), None),
            "typed_parameter" => (
                named_children(p).find(|c| c.kind_name() == "identifier"),
                None,
            ),
            "default_parameter" | "typed_default_parameter" => (p.field("name"), p.field("value")),
            "list_splat_pattern" | "keyword_separator" => {
                keyword_only = true;
                continue;
            }
            _ => continue,
        };
        // `*args: int` parses as a typed parameter around a list splat.
        if p.kind_name() == "typed_parameter"
            && named_children(p).any(|c| c.kind_name() == "list_splat_pattern")
        {
            keyword_only = true;
            continue;
        }
        if let Some(n) = name.filter(|n| n.kind_name() == "identifier") {
            out.push(Parameter {
                name: m.text(n),
                default,
                keyword_only,
            });
        }
    }
    out
}

/// The constants the parameters of function `f` receive at its calls in this file.
pub fn parameter_values<'t>(m: &PythonModel<'t>, f: usize) -> ParameterValues<'t> {
    values_at(m, f, 0)
}

fn values_at<'t>(m: &PythonModel<'t>, f: usize, depth: usize) -> ParameterValues<'t> {
    let params = parameters(m, f);
    let method = m.functions[f].class.is_some() && !is_staticmethod(m, f);
    let mut sites = Vec::new();
    let calls_to = m
        .calls_to
        .get_or_init(|| calls_by_callee(m))
        .get(&f)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for &i in calls_to {
        let (call, caller) = m.calls[i];
        let bound = method && is_bound_call(m, call);
        let splat = call.field("arguments").is_some_and(|a| {
            named_children(a).any(|c| matches!(c.kind_name(), "list_splat" | "dictionary_splat"))
        });
        let values = params
            .iter()
            .enumerate()
            .map(|(i, p)| {
                if splat {
                    return None;
                }
                if bound && i == 0 {
                    return None; // `self`
                }
                let index = if p.keyword_only { usize::MAX } else { i };
                match argument_for(m, call, index, p.name, bound) {
                    Some(arg) => argument_values(m, arg, caller, depth),
                    None => m.const_value(p.default?).map(|v| vec![v]),
                }
            })
            .collect();
        sites.push(CallSite { call, values });
    }
    ParameterValues { params, sites }
}

/// For each local function, the indices in `m.calls` of the calls that invoke it (each call
/// resolved once, so asking for many functions stays linear in the file).
impl<'t> PythonModel<'t> {
    /// The calls of this file that invoke local function `f` (directly, or through a name
    /// bound once to `tf.function(f)`), in document order, from an index built once per file.
    pub fn calls_invoking(
        &self,
        f: usize,
    ) -> impl Iterator<Item = &(Node<'t>, Option<usize>)> + '_ {
        self.calls_to
            .get_or_init(|| calls_by_callee(self))
            .get(&f)
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(|&i| &self.calls[i])
    }
}

fn calls_by_callee(m: &PythonModel<'_>) -> HashMap<usize, Vec<usize>> {
    let mut out: HashMap<usize, Vec<usize>> = HashMap::default();
    for (i, &(call, _)) in m.calls.iter().enumerate() {
        if let Some(f) = called_function(m, call) {
            out.entry(f).or_default().push(i);
        }
    }
    out
}

/// The local function `call` invokes: directly, or through a name bound once to
/// `tf.function(f)`.
fn called_function(m: &PythonModel<'_>, call: Node<'_>) -> Option<usize> {
    if let Some(f) = m.local_callee(call) {
        return Some(f);
    }
    let func = call
        .field("function")
        .filter(|n| n.kind_name() == "identifier")?;
    let v = m
        .value_of_name(func, m.text(func))
        .filter(|v| v.kind_name() == "call")?;
    if !v.field("function").is_some_and(|h| is_tf_function(m, h)) {
        return None;
    }
    let t = argument(v, 0, "func", m).filter(|t| t.kind_name() == "identifier")?;
    match m.functions_named(m.text(t)) {
        [f] => Some(*f),
        _ => None,
    }
}

fn is_staticmethod(m: &PythonModel<'_>, f: usize) -> bool {
    m.functions[f].decorators.iter().any(|d| {
        d.named_child(0)
            .is_some_and(|e| m.text(e) == "staticmethod")
    })
}

/// The constants an argument may be, seen from the function `caller` it is passed in.
fn argument_values(
    m: &PythonModel<'_>,
    arg: Node<'_>,
    caller: Option<usize>,
    depth: usize,
) -> Option<Vec<Value>> {
    if let Some(v) = m.const_value(arg) {
        return Some(vec![v]);
    }
    if arg.kind_name() != "identifier" {
        return None;
    }
    let c = caller?;
    let name = m.text(arg);
    if !m.function_binds(c, name) || rebinds(m, c, name) {
        return None;
    }
    let caller_params = parameters(m, c);
    if caller_params.iter().any(|p| p.name == name) {
        // Passed on from the caller's own parameter: what its call sites pass.
        if depth >= MAX_DEPTH || m.value_of_name(arg, name).is_some() {
            return None;
        }
        return values_at(m, c, depth + 1).constants(name);
    }
    // A local bound once: `n = 1000; build(n)`.
    let v = m.value_of_name(arg, name)?;
    m.const_value(v).map(|v| vec![v])
}

/// Does function `c` rebind `name` other than by one plain assignment (augmented assignment,
/// a second target such as a loop variable, `with ... as name`)?
fn rebinds(m: &PythonModel<'_>, c: usize, name: &str) -> bool {
    let Some(body) = m.functions[c].node.field("body") else {
        return true;
    };
    m.assignments_within(body).any(|a| {
        a.kind_name() == "augmented_assignment"
            && m.enclosing_function(a) == Some(c)
            && a.field("left").is_some_and(|l| m.text(l) == name)
    }) || {
        // Binding sites are in document order: only those inside `c`'s body are looked at.
        let (start, end) = (body.start_byte(), body.end_byte());
        let first = m
            .binding_sites
            .partition_point(|(_, n)| n.start_byte() < start);
        m.binding_sites[first..]
            .iter()
            .take_while(|(_, n)| n.start_byte() < end)
            .any(|&(f, n)| {
                let target = match n.kind_name() {
                    "for_statement" => n.field("left"),
                    "named_expression" | "function_definition" | "class_definition" => {
                        n.field("name")
                    }
                    "as_pattern_target" => Some(n),
                    _ => None,
                };
                f == c
                    && target.is_some_and(|t| {
                        t.kind_name() == "identifier" && m.text(t) == name
                            || gpulint_syntax::descendants(t)
                                .any(|d| d.kind_name() == "identifier" && m.text(d) == name)
                    })
            })
    }
}

#[cfg(test)]
mod tests {
    use super::super::build;
    use super::*;
    use gpulint_syntax::{parse, Lang};

    fn values(src: &str, func: &str, param: &str) -> Option<Vec<Value>> {
        let tree = parse(Lang::Python, src).unwrap();
        let m = build(&tree, src);
        let f = m.functions_named(func)[0];
        parameter_values(&m, f).constants(param)
    }

    #[test]
    fn positional_keyword_and_default_arguments() {
        let src =
            "def build(n, k=3, *, scale=2):\n    pass\nbuild(1000)\nbuild(10, k=4, scale=7)\n";
        assert_eq!(
            values(src, "build", "n"),
            Some(vec![Value::Int(1000), Value::Int(10)])
        );
        assert_eq!(
            values(src, "build", "k"),
            Some(vec![Value::Int(3), Value::Int(4)])
        );
        assert_eq!(
            values(src, "build", "scale"),
            Some(vec![Value::Int(2), Value::Int(7)])
        );
    }

    #[test]
    fn folds_names_bound_once_and_arithmetic() {
        let src = "SIZE = 10 * 100\ndef build(n):\n    pass\ndef main():\n    m = SIZE * 2\n    build(m)\nbuild(SIZE + 1)\n";
        assert_eq!(
            values(src, "build", "n"),
            Some(vec![Value::Int(2000), Value::Int(1001)])
        );
    }

    #[test]
    fn unknown_when_any_call_site_passes_a_non_constant() {
        let src = "def build(n):\n    pass\nbuild(1000)\nbuild(len(data))\n";
        assert_eq!(values(src, "build", "n"), None);
        // A local rebound by `+=` or a loop is not a constant.
        let src = "def build(n):\n    pass\ndef main():\n    m = 10\n    m += 1\n    build(m)\n";
        assert_eq!(values(src, "build", "n"), None);
        let src = "def build(n):\n    pass\ndef main():\n    m = 10\n    for m in sizes:\n        build(m)\n";
        assert_eq!(values(src, "build", "n"), None);
        // `*args` binds nothing we can read, and no call site at all is unknown too.
        let src = "def build(n=5):\n    pass\nbuild(*sizes)\n";
        assert_eq!(values(src, "build", "n"), None);
        let src = "def build(n=5):\n    pass\n";
        assert_eq!(values(src, "build", "n"), None);
    }

    #[test]
    fn follows_parameters_passed_on_and_tf_function_wrappers() {
        let src = "import tensorflow as tf\ndef build(n):\n    pass\ndef run(size):\n    return build(size)\nrun(64)\nrun(size=128)\nfast = tf.function(build)\nfast(7)\n";
        assert_eq!(
            values(src, "build", "n"),
            Some(vec![Value::Int(64), Value::Int(128), Value::Int(7)])
        );
        let tree = parse(Lang::Python, src).unwrap();
        let m = build(&tree, src);
        let pv = parameter_values(&m, m.functions_named("build")[0]);
        assert_eq!(pv.largest_int("n"), Some(128));
    }

    #[test]
    fn methods_bind_self_implicitly() {
        let src = "class Grid:\n    def make(self, n):\n        pass\n    def run(self):\n        self.make(500)\n";
        assert_eq!(values(src, "make", "n"), Some(vec![Value::Int(500)]));
    }
}
