//! Facts recorded from one node whatever is open around it: constants, launches, divisibility
//! checks, allocations, host definitions, the nodes of the op glue, and inside device code its
//! arrays, subscripts, device calls and barriers.

use super::frames::FrameKind;
use super::{CudaBuilder, ASSERT_CALLS};
use crate::cuda::arrays::{self, DeviceCall};
use crate::cuda::consts::{self, ConstDef};
use crate::cuda::{last_name, Barrier, HostDef, Launch};
use gpulint_source::Span;
use gpulint_syntax::NodeExt;
use gpulint_syntax::{named_children, text};
use tree_sitter::Node;

/// A call that aborts when its condition is false: one of [`ASSERT_CALLS`], or a project's own
/// upper-case check macro (`CHECK_THROW`, `STD_TORCH_CHECK`, `MY_ASSERT`).
fn is_check_name(name: &str) -> bool {
    ASSERT_CALLS.contains(&name)
        || (name.len() > 2
            && name
                .bytes()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_')
            && ["CHECK", "ASSERT", "ENFORCE", "REQUIRE"]
                .iter()
                .any(|w| name.contains(w)))
}

impl<'t> CudaBuilder<'t> {
    /// Facts that do not depend on open nodes: constants, launches, checks, and inside a
    /// kernel its definitions and accesses.
    pub(super) fn record(&mut self, node: Node<'t>, call_arg: bool) {
        match node.kind_name() {
            "preproc_def" => {
                if let (Some(name), Some(value)) = (node.field("name"), node.field("value")) {
                    self.constants.insert(
                        text(name, self.source),
                        ConstDef::Macro(text(value, self.source).trim()),
                    );
                }
            }
            "declaration" => self.record_constant_declaration(node),
            "alias_declaration" => {
                if let (Some(name), Some(ty)) = (node.field("name"), node.field("type")) {
                    let (name, ty) = (text(name, self.source), text(ty, self.source));
                    // `using index_t = typename Traits::index_t;` re-exports a type declared
                    // elsewhere under the same name: that declaration says what it is.
                    if crate::cuda::last_name(ty) != name {
                        self.aliases.insert(name, ty);
                    }
                }
            }
            "type_definition" => {
                if let Some(ty) = node.field("type") {
                    for d in named_children(node).filter(|d| d.kind_name() == "type_identifier") {
                        self.aliases
                            .insert(text(d, self.source), text(ty, self.source));
                    }
                }
            }
            "field_declaration" => {
                if let Some(ty) = node.field("type") {
                    for d in named_children(node).filter_map(crate::cuda::narrow::member_declarator)
                    {
                        self.fields
                            .entry(text(d, self.source))
                            .or_default()
                            .push(text(ty, self.source));
                    }
                }
            }
            "enumerator_list" => consts::record_enumerators(node, self.source, &mut self.constants),
            "call_expression" => {
                self.glue.calls.push((self.current_host_function(), node));
                self.record_call(node)
            }
            "preproc_function_def" => self.glue.macros.push(node),
            _ => {}
        }
        if let Some(f) = self.current_host_function() {
            match node.kind_name() {
                "declaration" | "assignment_expression" => self.glue.defs.push((f, node)),
                "if_statement"
                | "switch_statement"
                | "while_statement"
                | "conditional_expression" => {
                    if let Some(c) = node.field("condition") {
                        self.glue.conds.push((f, c));
                    }
                }
                _ => {}
            }
        }
        if self.glue_only {
            return;
        }
        if let Some(f) = self.current_function {
            let space = self.functions[f].space;
            if space.global || space.device {
                match node.kind_name() {
                    "declaration" => arrays::record_arrays(f, node, self.source, &mut self.arrays),
                    "subscript_expression" => self.subscripts.push((f, node)),
                    "call_expression" => {
                        if let Some(callee) = arrays::device_callee(node, self.source) {
                            self.device_calls.push(DeviceCall {
                                caller: f,
                                callee,
                                node,
                                guard: self.guard_top,
                            });
                        }
                    }
                    _ => {}
                }
            }
        }
        if let Some(k) = self.current_kernel {
            if node.kind_name() == "call_expression"
                && !self.kernels[k].helper
                && is_barrier(node, self.source)
            {
                self.barriers.push(Barrier {
                    kernel: self.kernels[k].slot,
                    node,
                    guard: self.guard_top,
                });
            }
            let top = self.guard_top;
            self.kernels[k].record(node, top, call_arg);
        } else if let Some(f) = self.current_function {
            self.record_host_def(f, node);
        }
    }

    /// The host function being walked, if any.
    fn current_host_function(&self) -> Option<usize> {
        let f = self.current_function?;
        let space = self.functions[f].space;
        (space.host || !(space.global || space.device)).then_some(f)
    }

    /// Definitions in host code, for the launch configuration (`dim3 grid(…)`, `grid.x = …`).
    fn record_host_def(&mut self, f: usize, node: Node<'t>) {
        let field = |n: Node<'t>, name: &str| n.field(name);
        let scope = self
            .frames
            .iter()
            .rev()
            .find(|f| matches!(f.kind, FrameKind::Compound))
            .map(|f| f.span)
            .unwrap_or(Span::new(0, self.source.len()));
        let (name, value) = match node.kind_name() {
            "init_declarator" => (field(node, "declarator"), field(node, "value")),
            "declaration" => {
                for d in named_children(node).filter(|d| d.kind_name() == "identifier") {
                    self.host_defs
                        .entry((f, text(d, self.source)))
                        .or_default()
                        .push(HostDef { value: None, scope });
                }
                return;
            }
            "assignment_expression" => {
                let left = field(node, "left").map(|l| match l.kind_name() {
                    "field_expression" => field(l, "argument").unwrap_or(l),
                    _ => l,
                });
                (left, field(node, "right"))
            }
            _ => return,
        };
        if let (Some(name), Some(value)) = (name, value) {
            if name.kind_name() == "identifier" {
                self.host_defs
                    .entry((f, text(name, self.source)))
                    .or_default()
                    .push(HostDef {
                        value: Some(value),
                        scope,
                    });
            }
        }
    }

    fn record_constant_declaration(&mut self, node: Node<'t>) {
        let t = text(node, self.source);
        let is_const = named_children(node).any(|c| {
            c.kind_name() == "type_qualifier"
                && matches!(text(c, self.source), "const" | "constexpr")
        }) || t.starts_with("constexpr")
            || t.starts_with("static constexpr");
        if !is_const {
            return;
        }
        for d in named_children(node).filter(|c| c.kind_name() == "init_declarator") {
            if let (Some(name), Some(value)) = (d.field("declarator"), d.field("value")) {
                if name.kind_name() == "identifier" {
                    self.constants
                        .insert(text(name, self.source), ConstDef::Expr(value));
                }
            }
        }
    }

    fn record_call(&mut self, node: Node<'t>) {
        let Some(function) = node.field("function") else {
            return;
        };
        if let Some(config) = named_children(node).find(|c| c.kind_name() == "kernel_call_syntax") {
            let (name_node, template_args) = match function.kind_name() {
                "template_function" => (
                    function.field("name"),
                    function
                        .field("arguments")
                        .map(|a| named_children(a).collect())
                        .unwrap_or_default(),
                ),
                _ => (Some(function), Vec::new()),
            };
            let kernel = name_node
                .map(|n| last_name(text(n, self.source)))
                .unwrap_or("");
            self.launches.push(Launch {
                node,
                kernel,
                template_args,
                // Comments between arguments are named nodes too: not arguments.
                config: named_children(config)
                    .filter(|c| c.kind_name() != "comment")
                    .collect(),
                args: crate::cuda::call_arguments(node),
            });
            return;
        }
        let name = last_name(text(function, self.source));
        let args = node
            .field("arguments")
            .map(|a| text(a, self.source))
            .unwrap_or("");
        if is_check_name(name)
            && args.contains('%')
            && (args.contains("== 0") || args.contains("==0"))
        {
            self.divisibility_checks.push(node);
        }
        if matches!(
            name,
            "empty"
                | "zeros"
                | "ones"
                | "full"
                | "empty_like"
                | "new_empty"
                | "new_zeros"
                | "new_full"
                | "cudaMalloc"
                | "cudaMallocManaged"
                | "cudaMallocAsync"
                | "malloc"
                | "allocate_temp"
                | "allocate_output"
        ) {
            self.allocations.push(node);
        }
    }
}

/// Block-wide barriers: `__syncthreads()` and its reducing forms, `this_thread_block().sync()`.
fn is_barrier(call: Node<'_>, source: &str) -> bool {
    let Some(f) = call.field("function") else {
        return false;
    };
    let t = text(f, source);
    matches!(
        t,
        "__syncthreads" | "__syncthreads_count" | "__syncthreads_and" | "__syncthreads_or"
    ) || t.ends_with("this_thread_block().sync")
}
