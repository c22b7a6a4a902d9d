//! Notebook cells that a per-backend cell magic keeps from running.
//!
//! Multi-backend Keras notebooks define a cell magic (`@register_cell_magic def backend(line,
//! cell)`) that runs its cell only when `KERAS_BACKEND` names the backend on the magic's line,
//! and mark each framework-specific cell with it (`%%backend tensorflow`, `%%backend jax`).
//! When the notebook itself selects the backend (`os.environ["KERAS_BACKEND"] = "jax"`), the
//! cells gated to any other backend never run: their code is not part of the program.

use super::{string_literal, PythonModel};
use gpulint_syntax::{descendants, named_children, NodeExt};

/// The backends Keras 3 accepts in `KERAS_BACKEND`.
pub const KERAS_BACKENDS: &[&str] = &["tensorflow", "jax", "torch", "numpy", "openvino"];

/// The backend a cell magic's line names (its last word), if it names one.
fn gated_backend(magic: &str) -> Option<(&str, &str)> {
    let mut words = magic.split_whitespace();
    let name = words.next()?;
    let last = words.last()?;
    KERAS_BACKENDS.contains(&last).then_some((name, last))
}

/// Can any of these cell magics gate a cell to a backend? (A cheap test before building a
/// model.)
pub fn may_gate(magics: &[Option<&str>]) -> bool {
    magics.iter().flatten().any(|m| gated_backend(m).is_some())
}

/// Is `name` a cell magic the notebook defines (a function decorated with
/// `register_cell_magic`) that reads `KERAS_BACKEND`?
fn backend_magic(m: &PythonModel<'_>, name: &str) -> bool {
    m.functions_named(name).iter().any(|&f| {
        let func = &m.functions[f];
        let registered = func.decorators.iter().any(|d| {
            named_children(*d).any(|e| {
                let callee = if e.kind_name() == "call" {
                    e.field("function")
                } else {
                    Some(e)
                };
                callee.is_some_and(|c| m.text(c).rsplit('.').next() == Some("register_cell_magic"))
            })
        });
        registered
            && descendants(func.node).any(|n| {
                n.kind_name() == "string"
                    && string_literal(n, m.source).as_deref() == Some("KERAS_BACKEND")
            })
    })
}

/// For each cell (aligned with `m.roots` and `magics`): does a backend cell magic keep it from
/// running, given the backend the notebook selects? All `false` when the notebook selects no
/// backend of its own.
pub fn gated_off(m: &PythonModel<'_>, magics: &[Option<&str>]) -> Vec<bool> {
    let selected = m.keras_backend();
    magics
        .iter()
        .map(|magic| {
            let (Some(selected), Some((name, backend))) =
                (selected.as_deref(), magic.and_then(gated_backend))
            else {
                return false;
            };
            backend != selected && backend_magic(m, name)
        })
        .collect()
}
