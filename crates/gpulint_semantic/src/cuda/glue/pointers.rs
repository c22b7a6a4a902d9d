//! Raw pointers and accessors taken from tensors: the call, the cast around it, the variable
//! it is stored in and the dispatch region it lies in.

use super::origin::Ctx;
use super::syntax::declarator_name;
use super::PtrUse;
use crate::cuda::nesting::Nesting;
use crate::cuda::{last_name, CudaModel};
use gpulint_syntax::{text, NodeExt};
use tree_sitter::Node;

/// Methods that take a raw pointer or an accessor from a tensor.
pub(super) const POINTER_METHODS: &[&str] = &[
    "data_ptr",
    "mutable_data_ptr",
    "const_data_ptr",
    "data",
    "packed_accessor32",
    "packed_accessor64",
    "packed_accessor",
    "generic_packed_accessor",
    "accessor",
];

pub(super) fn pointer_use<'t>(
    call: Node<'t>,
    recv: Node<'t>,
    method: &'t str,
    type_arg: Option<&'t str>,
    cx: &Ctx<'_, 't>,
    dispatches: &Nesting,
    model: &CudaModel<'t>,
) -> PtrUse<'t> {
    let source = cx.source;
    // A cast around it: `(float*)x.data_ptr()`, `reinterpret_cast<half*>(x.data_ptr())`.
    let mut up = call;
    let mut cast = None;
    let mut var = None;
    for _ in 0..6 {
        let Some(p) = model.parent(up) else { break };
        match p.kind_name() {
            "parenthesized_expression" => up = p,
            "cast_expression" => {
                let ty = p.field("type").map_or("", |t| text(t, source));
                cast = Some((p, ty));
                up = p;
            }
            "argument_list" => {
                let Some(c) = model.parent(p) else { break };
                let f = c.field("function");
                match f.filter(|f| f.kind_name() == "template_function") {
                    Some(tf)
                        if matches!(
                            last_name(tf.field("name").map_or("", |n| text(n, source))),
                            "reinterpret_cast" | "static_cast"
                        ) =>
                    {
                        let ty = tf.field("arguments").map_or("", |a| {
                            text(a, source)
                                .trim_start_matches('<')
                                .trim_end_matches('>')
                        });
                        cast = Some((c, ty));
                        up = c;
                    }
                    _ => break,
                }
            }
            "init_declarator" => {
                var = p
                    .field("declarator")
                    .and_then(|d| declarator_name(d, source));
                break;
            }
            "assignment_expression" => {
                var = p.field("left").map(|l| text(l, source));
                break;
            }
            _ => break,
        }
    }
    // The innermost dispatch region around the call (an index into the file's dispatches).
    let dispatch = dispatches.innermost(call.start_byte(), call.end_byte());
    PtrUse {
        node: call,
        receiver: recv,
        origin: cx.origin(recv, 0),
        method,
        type_arg,
        accessor: method.contains("accessor"),
        cast,
        dispatch,
        var,
    }
}
