//! What Python code guarantees about a tensor expression where it is used: contiguity, dtype,
//! device (the `CONTIG`, `DTYPE`, `DEVICE` bits of the op glue).
//!
//! An expression guarantees what its last operation makes of it (`.contiguous()`, `.float()`,
//! `.cuda()`, `.to(…)`, a fresh `torch.empty(…)`; `empty_like(x)` and views keep what `x` had).
//! A local name guarantees what its last binding before the use gave it, plus the checks that
//! dominate the use in the same function: `assert x.is_contiguous()`, an `if` that raises
//! unless `x.dtype == …`, an `if x.dtype == …:` around the use. A binding under `if not
//! x.is_contiguous():` that makes `x` contiguous leaves it contiguous on both paths. Anything
//! rebound in a loop, a `with`, a `try` or an `if … else` is not followed: nothing is granted.

use super::super::PythonModel;
use super::conditions::checks;
use super::{CONTIG, DEVICE, DTYPE};
use gpulint_syntax::{named_children, NodeExt};
use tree_sitter::Node;

/// How many bindings and calls are followed for one expression.
const MAX_DEPTH: usize = 12;

/// How many statements of one block are looked through, back from a use, for the binding or
/// check of its name; past them nothing more is granted.
const MAX_BEFORE: usize = 256;

/// Methods that return the tensor itself or a view/copy that keeps its layout, dtype and device.
const KEEPS: &[&str] = &[
    "clone",
    "detach",
    "flatten",
    "requires_grad_",
    "reshape",
    "squeeze",
    "unsqueeze",
    "view",
    "view_as",
];

/// Methods that convert the dtype and keep the layout.
const CASTS: &[&str] = &[
    "bfloat16", "bool", "byte", "char", "double", "float", "half", "int", "long", "short",
];

/// `torch.*` functions that allocate a new contiguous tensor.
const ALLOCATORS: &[&str] = &[
    "arange", "empty", "eye", "full", "linspace", "ones", "rand", "randint", "randn", "tensor",
    "zeros",
];

/// `torch.*_like` allocators: the layout, dtype and device of their argument.
const LIKE: &[&str] = &[
    "empty_like",
    "full_like",
    "ones_like",
    "rand_like",
    "randn_like",
    "zeros_like",
];

/// What `e`, evaluated at `at`, guarantees.
pub(super) fn of_expr(m: &PythonModel<'_>, e: Node<'_>, at: Node<'_>, depth: usize) -> u8 {
    if depth > MAX_DEPTH {
        return 0;
    }
    match e.kind_name() {
        "parenthesized_expression" => e
            .named_child(0)
            .map_or(0, |inner| of_expr(m, inner, at, depth + 1)),
        "call" => of_call(m, e, at, depth),
        "identifier" => of_name(m, m.text(e), at, depth),
        _ => 0,
    }
}

fn keyword<'t>(m: &PythonModel<'_>, call: Node<'t>, name: &str) -> Option<Node<'t>> {
    named_children(call.field("arguments")?).find_map(|a| {
        (a.kind_name() == "keyword_argument" && a.field("name").is_some_and(|n| m.text(n) == name))
            .then(|| a.field("value"))
            .flatten()
    })
}

fn positional<'t>(call: Node<'t>) -> Vec<Node<'t>> {
    call.field("arguments")
        .map(|l| {
            named_children(l)
                .filter(|a| {
                    !matches!(
                        a.kind_name(),
                        "keyword_argument" | "list_splat" | "dictionary_splat" | "comment"
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `torch.contiguous_format` (or no memory format at all).
fn contiguous_format(m: &PythonModel<'_>, call: Node<'_>) -> Option<bool> {
    let f = keyword(m, call, "memory_format")?;
    Some(m.qualified_name(f).as_deref() == Some("torch.contiguous_format"))
}

/// A literal device string naming CUDA (`"cuda"`, `"cuda:1"`).
fn is_cuda_literal(m: &PythonModel<'_>, e: Node<'_>) -> bool {
    super::super::string_literal(e, m.source).is_some_and(|s| s.starts_with("cuda"))
}

/// A dtype: `torch.float32`, `torch.half`, or another tensor's `x.dtype`.
fn is_dtype(m: &PythonModel<'_>, e: Node<'_>) -> bool {
    if e.kind_name() != "attribute" {
        return false;
    }
    if e.field("attribute").is_some_and(|a| m.text(a) == "dtype") {
        return true;
    }
    m.qualified_name(e).is_some_and(|q| {
        q.strip_prefix("torch.").is_some_and(|t| {
            t.starts_with("float")
                || t.starts_with("int")
                || t.starts_with("uint")
                || t.starts_with("bfloat")
                || t.starts_with("complex")
                || matches!(t, "half" | "double" | "long" | "short" | "bool")
        })
    })
}

fn of_call(m: &PythonModel<'_>, call: Node<'_>, at: Node<'_>, depth: usize) -> u8 {
    let Some(func) = call.field("function") else {
        return 0;
    };
    if let Some(q) = m.qualified_name(func) {
        return match q.strip_prefix("torch.") {
            Some(name) => of_torch(m, name, call, at, depth),
            None => 0,
        };
    }
    if func.kind_name() != "attribute" {
        return 0;
    }
    let (Some(method), Some(object)) = (func.field("attribute"), func.field("object")) else {
        return 0;
    };
    let inner = || of_expr(m, object, at, depth + 1);
    let args = positional(call);
    match m.text(method) {
        "contiguous" => match contiguous_format(m, call) {
            Some(false) => inner() & (DTYPE | DEVICE),
            _ => CONTIG | (inner() & (DTYPE | DEVICE)),
        },
        "cuda" => DEVICE | (inner() & (CONTIG | DTYPE)),
        c if CASTS.contains(&c) && args.is_empty() => DTYPE | (inner() & (CONTIG | DEVICE)),
        "to" => {
            let mut p = inner();
            for a in &args {
                if is_dtype(m, *a) {
                    p |= DTYPE;
                }
                if is_cuda_literal(m, *a) {
                    p |= DEVICE;
                }
            }
            if keyword(m, call, "dtype").is_some() {
                p |= DTYPE;
            }
            if keyword(m, call, "device").is_some_and(|d| is_cuda_literal(m, d)) {
                p |= DEVICE;
            }
            match contiguous_format(m, call) {
                Some(true) => p | CONTIG,
                Some(false) => p & !CONTIG,
                None => p,
            }
        }
        k if KEEPS.contains(&k) => match contiguous_format(m, call) {
            Some(false) => inner() & !CONTIG,
            _ => inner(),
        },
        _ => 0,
    }
}

/// `torch.<name>(…)`.
fn of_torch(m: &PythonModel<'_>, name: &str, call: Node<'_>, at: Node<'_>, depth: usize) -> u8 {
    let mut p = if ALLOCATORS.contains(&name) {
        CONTIG
    } else if LIKE.contains(&name) {
        let base = positional(call)
            .first()
            .map_or(0, |a| of_expr(m, *a, at, depth + 1));
        let device_given = keyword(m, call, "device");
        if device_given.is_some_and(|d| !is_cuda_literal(m, d)) {
            base & !DEVICE
        } else {
            base
        }
    } else {
        return 0;
    };
    match contiguous_format(m, call) {
        Some(true) => p |= CONTIG,
        Some(false) => p &= !CONTIG,
        None => {}
    }
    if keyword(m, call, "dtype").is_some() {
        p |= DTYPE;
    }
    if keyword(m, call, "device").is_some_and(|d| is_cuda_literal(m, d)) {
        p |= DEVICE;
    }
    p
}

/// What the local `name` guarantees at `at`: its last binding before `at` in the same
/// function, and the checks on it that dominate `at`.
fn of_name(m: &PythonModel<'_>, name: &str, at: Node<'_>, depth: usize) -> u8 {
    let Some(f) = m.enclosing_function(at) else {
        return 0;
    };
    let def = m.functions[f].node;
    let mut facts = 0;
    let mut cur = at;
    loop {
        let Some(parent) = m.parent(cur) else {
            return facts;
        };
        if parent.id() == def.id() {
            return facts;
        }
        match parent.kind_name() {
            "block" => {}
            "if_statement" | "elif_clause"
                if parent
                    .field("consequence")
                    .is_some_and(|c| c.id() == cur.id()) =>
            {
                if let Some(c) = parent.field("condition") {
                    facts |= checks(m, c, name, true);
                }
                if parent.kind_name() == "elif_clause" {
                    if let Some(c) = m.parent(parent).and_then(|i| i.field("condition")) {
                        facts |= checks(m, c, name, false);
                    }
                }
            }
            "else_clause" => {
                if let Some(c) = m.parent(parent).and_then(|i| i.field("condition")) {
                    facts |= checks(m, c, name, false);
                }
            }
            "for_statement" | "while_statement" if binds_within(m, parent, name) => {
                return facts;
            }
            "function_definition" | "lambda" | "class_definition" => return facts,
            _ => {}
        }
        if parent.kind_name() == "block" {
            // The statements before `cur` in this block, nearest first, up to MAX_BEFORE of
            // them: the block's children are listed once per file (stepping back sibling by
            // sibling starts again from the block's first child at every step), and a name
            // used by every statement of a long block is not followed back to its start from
            // each of them (both grow with the square of the block's length).
            let statements = m.block_statements(parent);
            let at = gpulint_syntax::position(&statements, cur).unwrap_or(statements.len());
            for &s in statements[..at].iter().rev().take(MAX_BEFORE) {
                match statement(m, s, name, depth) {
                    Step::Checks(p) => facts |= p,
                    Step::Bound(p) => return facts | p,
                    Step::Conditional(p) => {
                        let before = of_name(m, name, s, depth + 1);
                        return facts | (p.0 & (before | p.1));
                    }
                    Step::Unknown => return facts,
                }
            }
        }
        cur = parent;
    }
}

/// What one statement before the use says about `name`.
enum Step {
    /// It checks it (or says nothing): these properties hold after it.
    Checks(u8),
    /// It binds it to a value with these properties.
    Bound(u8),
    /// It may bind it (under an `if` without `else`): the value's properties, and what holds
    /// when the branch is not taken (`if not x.is_contiguous(): x = x.contiguous()`).
    Conditional((u8, u8)),
    /// It rebinds it in a way not followed.
    Unknown,
}

fn statement(m: &PythonModel<'_>, s: Node<'_>, name: &str, depth: usize) -> Step {
    match s.kind_name() {
        "expression_statement" => {
            let Some(a) = s.named_child(0).filter(|a| a.kind_name() == "assignment") else {
                return if s.named_child(0).is_some_and(|c| relayouts(m, c, name)) {
                    Step::Unknown
                } else {
                    Step::Checks(0)
                };
            };
            match assigned(m, a, name, depth) {
                Some(Some(p)) => Step::Bound(p),
                Some(None) => Step::Unknown,
                None => Step::Checks(0),
            }
        }
        "assert_statement" => Step::Checks(
            s.named_child(0)
                .map_or(0, |test| checks(m, test, name, true)),
        ),
        "if_statement" => {
            let (Some(cond), Some(body)) = (s.field("condition"), s.field("consequence")) else {
                return Step::Unknown;
            };
            let has_alternative = s.field("alternative").is_some();
            if !binds_within(m, s, name) {
                // `if <bad>: raise …` checks what it tests.
                let raises = named_children(body)
                    .last()
                    .is_some_and(|l| l.kind_name() == "raise_statement");
                return Step::Checks(if raises && !has_alternative {
                    checks(m, cond, name, false)
                } else {
                    0
                });
            }
            if has_alternative {
                return Step::Unknown;
            }
            // The last top-level binding of the branch decides its value.
            let mut value = None;
            for st in named_children(body) {
                match statement(m, st, name, depth) {
                    Step::Bound(p) => value = Some(p),
                    Step::Checks(p) => value = value.map(|v| v | p),
                    Step::Conditional(_) | Step::Unknown => return Step::Unknown,
                }
            }
            match value {
                Some(p) => Step::Conditional((p, checks(m, cond, name, false))),
                None => Step::Unknown,
            }
        }
        "for_statement" | "while_statement" | "with_statement" | "try_statement"
        | "match_statement" => {
            if binds_within(m, s, name) {
                Step::Unknown
            } else {
                Step::Checks(0)
            }
        }
        "import_statement"
        | "import_from_statement"
        | "function_definition"
        | "class_definition"
        | "decorated_definition"
        | "delete_statement" => {
            if gpulint_syntax::text(s, m.source).contains(name) {
                Step::Unknown
            } else {
                Step::Checks(0)
            }
        }
        _ => Step::Checks(0),
    }
}

/// In-place methods that change a tensor's strides, shape or storage.
const RELAYOUTS: &[&str] = &[
    "as_strided_",
    "resize_",
    "resize_as_",
    "set_",
    "squeeze_",
    "swapaxes_",
    "swapdims_",
    "t_",
    "transpose_",
    "unsqueeze_",
];

/// Is `e` a call such as `name.transpose_(0, 1)`, which changes `name`'s layout in place?
fn relayouts(m: &PythonModel<'_>, e: Node<'_>, name: &str) -> bool {
    let Some(f) = e.field("function").filter(|_| e.kind_name() == "call") else {
        return false;
    };
    f.kind_name() == "attribute"
        && f.field("object").is_some_and(|o| m.text(o) == name)
        && f.field("attribute")
            .is_some_and(|a| RELAYOUTS.contains(&m.text(a)))
}

/// Does an assignment under `node` bind `name` (as a target, alone or in a tuple)?
fn binds_within(m: &PythonModel<'_>, node: Node<'_>, name: &str) -> bool {
    if m.assignments_within(node).any(|a| {
        a.field("left").is_some_and(|l| {
            targets(l)
                .iter()
                .any(|t| t.map(|t| m.text(t)) == Some(name))
        })
    }) {
        return true;
    }
    // Loop targets, `with … as x`, `except … as x`, walrus: read from the text.
    let text = gpulint_syntax::text(node, m.source);
    [
        format!("for {name} "),
        format!("as {name}"),
        format!("{name} :="),
        format!(", {name} in"),
        format!("for {name},"),
    ]
    .iter()
    .any(|p| text.contains(p.as_str()))
}

/// The targets of an assignment's left side, in order (`None` for a non-name target).
fn targets(left: Node<'_>) -> Vec<Option<Node<'_>>> {
    match left.kind_name() {
        "identifier" => vec![Some(left)],
        "pattern_list" | "tuple_pattern" | "list_pattern" => named_children(left)
            .map(|t| (t.kind_name() == "identifier").then_some(t))
            .collect(),
        _ => vec![None],
    }
}

/// For an assignment: `None` when it does not bind `name`; `Some(None)` when it does in a way
/// not followed; `Some(Some(p))` when it binds it to a value with properties `p`.
fn assigned(m: &PythonModel<'_>, a: Node<'_>, name: &str, depth: usize) -> Option<Option<u8>> {
    let left = a.field("left")?;
    let targets = targets(left);
    let index = targets
        .iter()
        .position(|t| t.is_some_and(|t| m.text(t) == name))?;
    let Some(right) = a.field("right") else {
        return Some(None);
    };
    if left.kind_name() == "identifier" {
        return Some(Some(value(m, right, None, a, depth)));
    }
    Some(Some(value(m, right, Some(index), a, depth)))
}

/// What element `index` of `right` (all of it when `None`) guarantees, as assigned at `at`.
fn value(
    m: &PythonModel<'_>,
    right: Node<'_>,
    index: Option<usize>,
    at: Node<'_>,
    depth: usize,
) -> u8 {
    match (right.kind_name(), index) {
        ("expression_list" | "tuple" | "list", Some(i)) => named_children(right)
            .nth(i)
            .map_or(0, |e| of_expr(m, e, at, depth + 1)),
        ("parenthesized_expression", _) => right
            .named_child(0)
            .map_or(0, |e| value(m, e, index, at, depth + 1)),
        ("attribute", _) => saved(m, right, index, depth).unwrap_or(0),
        ("subscript", None) => {
            let (Some(v), Some(i)) = (right.field("value"), right.field("subscript")) else {
                return 0;
            };
            match m.text(i).parse::<usize>() {
                Ok(i) if v.kind_name() == "attribute" => saved(m, v, Some(i), depth).unwrap_or(0),
                _ => 0,
            }
        }
        (_, None) => of_expr(m, right, at, depth + 1),
        _ => 0,
    }
}

/// The class of method `f` when it derives from `torch.autograd.Function`.
pub(super) fn autograd_class(m: &PythonModel<'_>, f: usize) -> Option<usize> {
    let def = m.functions[f].node;
    let mut up = m.parent(def)?;
    if up.kind_name() == "decorated_definition" {
        up = m.parent(up)?;
    }
    let class_node = m
        .parent(up)
        .filter(|c| c.kind_name() == "class_definition")?;
    let c = m
        .classes
        .iter()
        .position(|c| c.node.id() == class_node.id())?;
    let bases = class_node.field("superclasses")?;
    named_children(bases)
        .any(|b| {
            m.qualified_name(b).is_some_and(|q| {
                q == "torch.autograd.Function" || q == "torch.autograd.function.Function"
            })
        })
        .then_some(c)
}

/// `ctx.saved_tensors` / `ctx.attr` read in `backward`: what element `index` (all when `None`)
/// had where `forward` saved it. `None` when it is not read from `ctx` of an autograd function.
fn saved(m: &PythonModel<'_>, attr: Node<'_>, index: Option<usize>, depth: usize) -> Option<u8> {
    let object = attr.field("object")?;
    let field = m.text(attr.field("attribute")?);
    let f = m.enclosing_function(attr)?;
    if m.functions[f].name != "backward" || first_param(m, f)? != m.text(object) {
        return None;
    }
    let class = autograd_class(m, f)?;
    let forward = m.method_of(class, "forward")?;
    let ctx = first_param(m, forward)?;
    let body = m.functions[forward].node.field("body")?;
    let mut result: Option<u8> = None;
    let mut meet = |p: u8| result = Some(result.map_or(p, |r| r & p));
    if field == "saved_tensors" {
        for (call, _) in m.calls_in(forward) {
            let Some(func) = call.field("function") else {
                continue;
            };
            let is_save = func.kind_name() == "attribute"
                && func.field("object").is_some_and(|o| m.text(o) == ctx)
                && func
                    .field("attribute")
                    .is_some_and(|a| m.text(a) == "save_for_backward");
            if is_save {
                let args = positional(*call);
                meet(match index {
                    Some(i) => args.get(i).map_or(0, |a| of_expr(m, *a, *call, depth + 1)),
                    None => 0,
                });
            }
        }
        return result;
    }
    for a in m.assignments_within(body) {
        let Some(left) = a.field("left") else {
            continue;
        };
        let sets = left.kind_name() == "attribute"
            && left.field("object").is_some_and(|o| m.text(o) == ctx)
            && left.field("attribute").is_some_and(|x| m.text(x) == field);
        if sets && a.kind_name() == "assignment" {
            meet(
                a.field("right")
                    .map_or(0, |r| value(m, r, index, a, depth + 1)),
            );
        }
    }
    result
}

/// The name of the first parameter of function `f` (`ctx` of an autograd function).
fn first_param<'t>(m: &PythonModel<'t>, f: usize) -> Option<&'t str> {
    let params = m.functions[f].node.field("parameters")?;
    let p = named_children(params).next()?;
    let id = if p.kind_name() == "identifier" {
        p
    } else {
        named_children(p).find(|c| c.kind_name() == "identifier")?
    };
    Some(m.text(id))
}
