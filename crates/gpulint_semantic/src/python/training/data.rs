//! DataLoaders, datasets and their worker processes: `DataLoader(...)` calls, `num_workers=`,
//! `torch.utils.data` dataset classes, and the `if __name__ == "__main__":` guard workers need.

use crate::python::{PythonModel, Value};
use gpulint_syntax::named_children;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

/// `DataLoader(...)` from `torch.utils.data` (through imports and aliases).
pub fn is_dataloader(m: &PythonModel<'_>, call: Node<'_>) -> bool {
    call.field("function")
        .and_then(|f| m.qualified_name(f))
        .is_some_and(|q| {
            q == "torch.utils.data.DataLoader" || q == "torch.utils.data.dataloader.DataLoader"
        })
}

/// The `num_workers=` of a DataLoader call, when it may start worker processes: the value
/// node, unless it folds to zero. `None` when absent (the default is 0) or zero.
pub fn worker_count<'t>(m: &PythonModel<'_>, call: Node<'t>) -> Option<Node<'t>> {
    let v = crate::python::tf::argument(call, 5, "num_workers", m)?;
    match m.const_value(v) {
        Some(c) if c.as_int() == Some(0) => None,
        Some(Value::None) => None,
        _ => Some(v),
    }
}

/// Is `node` inside the body of an `if __name__ == "__main__":` block?
pub fn under_main_guard(m: &PythonModel<'_>, node: Node<'_>) -> bool {
    let mut child = node.id();
    for p in m.ancestors(node) {
        if p.kind_name() == "if_statement" {
            let in_body = p.field("consequence").is_some_and(|c| c.id() == child);
            if in_body
                && p.field("condition")
                    .is_some_and(|c| crate::python::order::is_main_guard(c, m))
            {
                return true;
            }
        }
        child = p.id();
    }
    false
}

/// Is class `c` a `torch.utils.data` dataset (`Dataset`, `IterableDataset`, through imports)?
pub fn is_dataset_class(m: &PythonModel<'_>, c: usize) -> bool {
    let Some(supers) = m.classes[c].node.field("superclasses") else {
        return false;
    };
    named_children(supers).any(|s| {
        m.qualified_name(s).is_some_and(|q| {
            q.starts_with("torch.utils.data")
                && (q.ends_with("Dataset") || q.ends_with("IterableDataset"))
        })
    })
}

/// The local class of a dataset expression: `Points()`, or a name assigned `Points(...)`.
pub fn dataset_class(m: &PythonModel<'_>, expr: Node<'_>) -> Option<usize> {
    let value = match expr.kind_name() {
        "call" => expr,
        "identifier" => m.last_assigned_before(m.text(expr), expr)?,
        _ => return None,
    };
    if value.kind_name() != "call" {
        return None;
    }
    let func = value.field("function")?;
    if func.kind_name() != "identifier" {
        return None;
    }
    m.local_class(func, m.text(func))
}

/// The DataLoader calls of the file that may start worker processes, in document order, with
/// their `num_workers=` value (see [`worker_count`]).
pub fn worker_loaders<'t>(m: &PythonModel<'t>) -> Vec<(Node<'t>, Node<'t>)> {
    m.calls
        .iter()
        .filter(|(c, _)| is_dataloader(m, *c))
        .filter_map(|&(c, _)| Some((c, worker_count(m, c)?)))
        .collect()
}

/// The local class of the dataset a DataLoader call loads (its first argument or `dataset=`),
/// see [`dataset_class`].
pub fn loader_dataset_class(m: &PythonModel<'_>, loader: Node<'_>) -> Option<usize> {
    crate::python::tf::argument(loader, 0, "dataset", m).and_then(|d| dataset_class(m, d))
}

/// How many names and constructor calls [`loader_dataset_lambda`] follows.
const MAX_DATASET_DEPTH: usize = 12;

/// A `lambda` kept in the dataset a DataLoader loads, which its worker processes receive
/// pickled under the spawn start method: in the arguments of the constructor call that builds
/// the dataset, directly or inside lists, tuples, dicts and further constructor calls
/// (`CIFAR10(root, transform=Compose([ToTensor(), lambda x: x - 0.5]))`), followed through
/// names bound once (in the function, else at module level). A lambda passed to a function
/// call (`sorted(files, key=lambda f: ...)`) is used there, not kept, and is not followed.
pub fn loader_dataset_lambda<'t>(m: &PythonModel<'t>, loader: Node<'t>) -> Option<Node<'t>> {
    let ds = crate::python::tf::argument(loader, 0, "dataset", m)?;
    stored_lambda(m, ds, 0)
}

/// Is `call` a class instantiation: a local class, or a callee whose last name is in CapWords
/// (`datasets.MNIST`, `transforms.Compose`, `Subset`), the way Python names classes.
fn constructs(m: &PythonModel<'_>, call: Node<'_>) -> bool {
    let Some(func) = call.field("function") else {
        return false;
    };
    let last = match func.kind_name() {
        "identifier" => {
            if m.local_class(func, m.text(func)).is_some() {
                return true;
            }
            m.text(func)
        }
        "attribute" => func.field("attribute").map(|a| m.text(a)).unwrap_or(""),
        _ => "",
    };
    last.chars().next().is_some_and(|c| c.is_ascii_uppercase())
}

fn stored_lambda<'t>(m: &PythonModel<'t>, expr: Node<'t>, d: usize) -> Option<Node<'t>> {
    if d > MAX_DATASET_DEPTH {
        return None;
    }
    match expr.kind_name() {
        "lambda" => Some(expr),
        "identifier" => {
            let value = m.value_of_name(expr, m.text(expr))?;
            (value.id() != expr.id())
                .then(|| stored_lambda(m, value, d + 1))
                .flatten()
        }
        "parenthesized_expression" | "list" | "tuple" | "set" | "dictionary" | "pair" => {
            named_children(expr).find_map(|c| stored_lambda(m, c, d + 1))
        }
        "keyword_argument" => stored_lambda(m, expr.field("value")?, d),
        "call" if constructs(m, expr) => {
            named_children(expr.field("arguments")?).find_map(|a| stored_lambda(m, a, d + 1))
        }
        _ => None,
    }
}
