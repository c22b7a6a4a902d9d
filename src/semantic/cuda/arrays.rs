//! Arrays declared in device code (`__shared__ float tile[32][33]`, `float acc[8]`) with their
//! extents folded where they are constants, and the calls made from device code (the device
//! call graph).

use super::{last_name, CudaModel, Function};
use crate::semantic::{named_children, text};
use tree_sitter::Node;

/// Where an array declared in a device function lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArraySpace {
    /// An automatic array: registers, or per-thread local memory.
    Local,
    /// `__shared__`: one copy per block.
    Shared,
    /// `extern __shared__ T buf[]`: the dynamic shared memory of the launch.
    DynamicShared,
    /// `static`, `__constant__` or `__device__` storage: not per thread.
    Static,
}

/// An array declared inside a `__global__` or `__device__` function.
#[derive(Debug, Clone)]
pub struct ArrayDecl<'t> {
    /// Index into [`CudaModel::functions`].
    pub function: usize,
    /// The `declaration`.
    pub decl: Node<'t>,
    /// The `array_declarator` (its outermost one for several dimensions).
    pub declarator: Node<'t>,
    pub name: &'t str,
    /// The element type as written (`float`, `scalar_t`, `float4`).
    pub elem_type: &'t str,
    /// The extent expressions, outermost first; `None` for `[]`.
    pub extents: Vec<Option<Node<'t>>>,
    pub space: ArraySpace,
}

/// A call made from a device or kernel function: the device call graph.
#[derive(Debug, Clone, Copy)]
pub struct DeviceCall<'t> {
    /// The calling function, an index into [`CudaModel::functions`].
    pub caller: usize,
    /// The callee's name without namespace or template arguments.
    pub callee: &'t str,
    pub node: Node<'t>,
}

/// The array declarators of a `declaration`, and `declaration`s that are not arrays give none.
pub(super) fn record_arrays<'t>(
    function: usize,
    decl: Node<'t>,
    source: &'t str,
    out: &mut Vec<ArrayDecl<'t>>,
) {
    let Some(ty) = decl.child_by_field_name("type") else {
        return;
    };
    let mut shared = false;
    let mut is_static = false;
    let mut is_extern = false;
    for c in named_children(decl) {
        if c.id() == ty.id() {
            continue;
        }
        if matches!(
            c.kind(),
            "storage_class_specifier" | "type_qualifier" | "attribute_specifier" | "identifier"
        ) || c.kind().ends_with("qualifier")
            || c.kind().ends_with("specifier")
        {
            for word in text(c, source).split(|ch: char| !(ch.is_alphanumeric() || ch == '_')) {
                match word {
                    "__shared__" => shared = true,
                    "static" | "__constant__" | "__device__" | "__managed__" | "thread_local" => {
                        is_static = true
                    }
                    "extern" => is_extern = true,
                    _ => {}
                }
            }
        }
    }
    let space = match (shared, is_extern, is_static) {
        (true, true, _) => ArraySpace::DynamicShared,
        (true, false, _) => ArraySpace::Shared,
        (false, _, true) | (false, true, _) => ArraySpace::Static,
        _ => ArraySpace::Local,
    };
    for d in named_children(decl) {
        let d = if d.kind() == "init_declarator" {
            match d.child_by_field_name("declarator") {
                Some(inner) => inner,
                None => continue,
            }
        } else {
            d
        };
        if d.kind() != "array_declarator" {
            continue;
        }
        // `float a[2][3]` nests as array_declarator(array_declarator(a, 2), 3).
        let mut extents = Vec::new();
        let mut cur = d;
        let mut name = None;
        for _ in 0..8 {
            extents.push(cur.child_by_field_name("size"));
            match cur.child_by_field_name("declarator") {
                Some(inner) if inner.kind() == "array_declarator" => cur = inner,
                Some(inner) if inner.kind() == "identifier" => {
                    name = Some(text(inner, source));
                    break;
                }
                _ => break,
            }
        }
        let Some(name) = name else {
            continue;
        };
        extents.reverse();
        out.push(ArrayDecl {
            function,
            decl,
            declarator: d,
            name,
            elem_type: text(ty, source),
            extents,
            space,
        });
    }
}

/// The callee of a call from device code, unless it is a launch or a builtin-looking name.
pub(super) fn device_callee<'t>(call: Node<'t>, source: &'t str) -> Option<&'t str> {
    if named_children(call).any(|c| c.kind() == "kernel_call_syntax") {
        return None;
    }
    let f = call.child_by_field_name("function")?;
    let name = match f.kind() {
        "identifier" | "qualified_identifier" => text(f, source),
        "template_function" => text(f.child_by_field_name("name")?, source),
        _ => return None,
    };
    Some(last_name(name))
}

impl<'t> CudaModel<'t> {
    /// Folds an integer expression inside `func`: template parameters known from the launches
    /// in this file count as constants. `None` when any part is unknown.
    pub fn eval_in_function(&self, func: &Function<'t>, expr: Node<'_>) -> Option<i128> {
        self.eval_fn_depth(func, expr, 0)
    }

    fn eval_fn_depth(&self, func: &Function<'t>, expr: Node<'_>, depth: usize) -> Option<i128> {
        if depth > 32 {
            return None;
        }
        let field = |f: &str| expr.child_by_field_name(f);
        match expr.kind() {
            "identifier" => self.constant_in(func, self.text(expr)),
            "parenthesized_expression" => self.eval_fn_depth(func, expr.named_child(0)?, depth + 1),
            "binary_expression" => {
                let l = self.eval_fn_depth(func, field("left")?, depth + 1)?;
                let r = self.eval_fn_depth(func, field("right")?, depth + 1)?;
                super::consts::c_binary(self.text(field("operator")?), l, r)
            }
            _ => self.eval(expr),
        }
    }

    /// The number of elements of a declared array, when every extent folds.
    pub fn array_elements(&self, a: &ArrayDecl<'t>) -> Option<i128> {
        let func = &self.functions[a.function];
        let mut n: i128 = 1;
        for e in &a.extents {
            let v = self.eval_in_function(func, (*e)?)?;
            if v <= 0 {
                return None;
            }
            n = n.checked_mul(v)?;
        }
        Some(n)
    }

    /// The size in bytes of a declared array, when its extents fold and its element type is a
    /// known scalar or vector type.
    pub fn array_bytes(&self, a: &ArrayDecl<'t>) -> Option<i128> {
        let elem = super::sizeof_scalar(a.elem_type)?;
        self.array_elements(a)?.checked_mul(elem)
    }

    /// Functions called by `name`'s definitions in this file (device code only).
    pub fn calls_from(&self, caller: usize) -> impl Iterator<Item = &DeviceCall<'t>> {
        self.device_calls.iter().filter(move |c| c.caller == caller)
    }

    /// The device-side (`__device__` or `__global__`) functions called `name`.
    pub fn device_functions_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = usize> + 'a {
        self.functions
            .iter()
            .enumerate()
            .filter(move |(_, f)| f.name == name && (f.space.device || f.space.global))
            .map(|(i, _)| i)
    }
}
