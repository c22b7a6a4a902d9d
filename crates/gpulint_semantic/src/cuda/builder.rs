//! Collects the CUDA model from the enter/leave events of the checker's one walk: functions,
//! constants, launches and host definitions everywhere; inside kernels the definitions,
//! accesses and the stack of guards that hold at each node.

use super::arrays::{self, ArrayDecl, DeviceCall};
use super::consts::{self, ConstDef};
use super::glue::{self, GlueNodes, DISPATCH_MACROS};
use super::guards::{self, Guard, GuardKind};
use super::kernel;
use super::LOOP_MACROS;
use super::{
    exec_space, function_name, last_name, parse_c_int, CudaModel, Function, HostDef, Launch,
};
use crate::Options;
use gpulint_source::Span;
use gpulint_syntax::NodeExt;
use gpulint_syntax::{named_children, text};
use std::cell::RefCell;
use std::collections::HashMap;
use tree_sitter::{Node, Tree};

/// Calls that stop the kernel or the op when their condition is false.
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

const ASSERT_CALLS: &[&str] = &[
    "assert",
    "CUDA_KERNEL_ASSERT",
    "CUDA_KERNEL_ASSERT_MSG",
    "TORCH_CHECK",
    "TORCH_INTERNAL_ASSERT",
    "AT_ASSERT",
    "AT_ASSERTM",
    "CHECK",
    "DCHECK",
    "OP_REQUIRES",
    "PADDLE_ENFORCE",
    "__builtin_assume",
];

/// What the builder remembers about an open node.
struct Frame<'t> {
    id: usize,
    span: Span,
    kind: FrameKind<'t>,
    /// Guards pushed on entering this node (or attached to it), popped on leaving it.
    pushed: u32,
}

enum FrameKind<'t> {
    /// Guards only.
    Plain,
    Compound,
    /// A function definition; `kernel` is its index in `kernels` when it is one.
    Function {
        kernel: Option<usize>,
    },
    /// A template declaration's parameter list, for the function it declares.
    Template(Node<'t>),
    /// A node whose children are guarded: `(child id, guard kind, condition, negated)`.
    Guarding(Vec<(usize, GuardKind, Node<'t>, bool)>, Node<'t>),
    /// A call's argument list in a kernel: the argument ids, and guards from predicate
    /// arguments (`load(dst, p + i, i < n)`).
    Args(
        Vec<usize>,
        Vec<(usize, GuardKind, Node<'t>, bool)>,
        Node<'t>,
    ),
}

/// Collects the model during the checker's walk.
pub struct CudaBuilder<'t> {
    source: &'t str,
    functions: Vec<Function<'t>>,
    constants: HashMap<&'t str, ConstDef<'t>>,
    loop_macros: Vec<String>,
    frames: Vec<Frame<'t>>,
    guards: Vec<Guard<'t>>,
    guard_top: Option<u32>,
    kernels: Vec<kernel::KernelBuild<'t>>,
    current_kernel: Option<usize>,
    current_function: Option<usize>,
    function_depth: usize,
    host_defs: HashMap<(usize, &'t str), Vec<HostDef<'t>>>,
    launches: Vec<Launch<'t>>,
    divisibility_checks: Vec<Node<'t>>,
    allocations: Vec<Node<'t>>,
    arrays: Vec<ArrayDecl<'t>>,
    device_calls: Vec<DeviceCall<'t>>,
    subscripts: Vec<(usize, Node<'t>)>,
    barriers: Vec<super::Barrier<'t>>,
    glue: GlueNodes<'t>,
    dispatch_macros: Vec<String>,
}

impl<'t> CudaBuilder<'t> {
    pub fn new(source: &'t str, options: &Options) -> Self {
        let mut loop_macros: Vec<String> = LOOP_MACROS.iter().map(|s| s.to_string()).collect();
        loop_macros.extend(options.loop_macros.iter().cloned());
        let mut dispatch_macros: Vec<String> =
            DISPATCH_MACROS.iter().map(|s| s.to_string()).collect();
        dispatch_macros.extend(options.dispatch_macros.iter().cloned());
        CudaBuilder {
            source,
            functions: Vec::new(),
            constants: HashMap::new(),
            loop_macros,
            frames: Vec::new(),
            guards: Vec::new(),
            guard_top: None,
            kernels: Vec::new(),
            current_kernel: None,
            current_function: None,
            function_depth: 0,
            host_defs: HashMap::new(),
            launches: Vec::new(),
            divisibility_checks: Vec::new(),
            allocations: Vec::new(),
            arrays: Vec::new(),
            device_calls: Vec::new(),
            subscripts: Vec::new(),
            barriers: Vec::new(),
            glue: GlueNodes::default(),
            dispatch_macros,
        }
    }

    fn push_guard(&mut self, kind: GuardKind, cond: Node<'t>, negated: bool, label: Span) {
        let prev = self.guard_top;
        self.guards.push(Guard {
            kind,
            cond,
            negated,
            label,
            prev,
            bounds: Vec::new(),
            mentions: Vec::new(),
        });
        self.guard_top = Some(self.guards.len() as u32 - 1);
    }

    fn pop_guards(&mut self, n: u32) {
        for _ in 0..n {
            if let Some(top) = self.guard_top {
                self.guard_top = self.guards[top as usize].prev;
            }
        }
    }

    pub fn enter(&mut self, node: Node<'t>) {
        let id = node.id();
        // Guards that hold for this node as a child of the innermost guarding node.
        let mut pushed = 0;
        let mut call_arg = false;
        let (children, anchor) = match self.frames.last().map(|f| &f.kind) {
            Some(FrameKind::Guarding(children, anchor)) => (Some(children), Some(*anchor)),
            Some(FrameKind::Args(ids, children, anchor)) => {
                call_arg = ids.contains(&id);
                (Some(children), Some(*anchor))
            }
            _ => (None, None),
        };
        if let (Some(children), Some(anchor)) = (children, anchor) {
            let hits: Vec<_> = children
                .iter()
                .filter(|c| c.0 == id)
                .map(|c| (c.1, c.2, c.3))
                .collect();
            for (kind, cond, negated) in hits {
                let label = guards::label_span(kind, anchor, cond);
                self.push_guard(kind, cond, negated, label);
                pushed += 1;
            }
        }
        let kind = self.frame_kind(node);
        if pushed > 0 || kind.is_some() {
            self.frames.push(Frame {
                id,
                span: Span::of(&node),
                kind: kind.unwrap_or(FrameKind::Plain),
                pushed,
            });
        }
        self.record(node, call_arg);
    }

    pub fn leave(&mut self, node: Node<'t>) {
        if self.frames.last().is_some_and(|f| f.id == node.id()) {
            if let Some(frame) = self.frames.pop() {
                self.pop_guards(frame.pushed);
                if let FrameKind::Function { kernel } = frame.kind {
                    self.function_depth -= 1;
                    if self.function_depth == 0 {
                        self.current_function = None;
                    }
                    if kernel.is_some() {
                        self.current_kernel = None;
                    }
                }
            }
        }
        if self.current_kernel.is_none() {
            return;
        }
        // Guards that hold for the rest of the enclosing block.
        let exit = match node.kind_name() {
            "if_statement" => guards::early_exit(node, self.source),
            "expression_statement" => guards::assertion(node, self.source, ASSERT_CALLS),
            _ => None,
        };
        if let Some((kind, cond, negated)) = exit {
            if matches!(
                self.frames.last(),
                Some(Frame {
                    kind: FrameKind::Compound,
                    ..
                })
            ) {
                let label = guards::label_span(kind, node, cond);
                self.push_guard(kind, cond, negated, label);
                if let Some(f) = self.frames.last_mut() {
                    f.pushed += 1;
                }
            }
        }
    }

    /// What to remember about `node` while it is open, if anything.
    fn frame_kind(&mut self, node: Node<'t>) -> Option<FrameKind<'t>> {
        let field = |f: &str| node.field(f);
        match node.kind_name() {
            "compound_statement" => Some(FrameKind::Compound),
            "template_declaration" => field("parameters").map(FrameKind::Template),
            "function_definition" => Some(self.enter_function(node)),
            _ if self.current_kernel.is_none() => None,
            "if_statement" => {
                let cond = field("condition")?;
                let mut children = Vec::new();
                if let Some(c) = field("consequence") {
                    children.push((c.id(), GuardKind::If, cond, false));
                }
                if let Some(a) = field("alternative") {
                    children.push((a.id(), GuardKind::Else, cond, true));
                }
                Some(FrameKind::Guarding(children, node))
            }
            "for_statement" | "while_statement" => {
                let cond = field("condition")?;
                let body = field("body")?;
                Some(FrameKind::Guarding(
                    vec![(body.id(), GuardKind::Loop, cond, false)],
                    node,
                ))
            }
            "for_range_loop" => {
                let body = field("body")?;
                Some(FrameKind::Guarding(
                    vec![(body.id(), GuardKind::RangeLoop, node, false)],
                    node,
                ))
            }
            "conditional_expression" => {
                let cond = field("condition")?;
                let mut children = Vec::new();
                if let Some(c) = field("consequence") {
                    children.push((c.id(), GuardKind::Ternary, cond, false));
                }
                if let Some(a) = field("alternative") {
                    children.push((a.id(), GuardKind::Ternary, cond, true));
                }
                Some(FrameKind::Guarding(children, node))
            }
            "argument_list" => {
                // `load(dst, p + i, i < n)`: a predicate argument guards the others.
                let args: Vec<Node<'t>> = named_children(node).collect();
                let preds: Vec<Node<'t>> = args
                    .iter()
                    .copied()
                    .filter(|a| guards::is_comparison(*a))
                    .collect();
                let mut children = Vec::new();
                for a in args.iter().filter(|a| !preds.contains(a)) {
                    for p in &preds {
                        children.push((a.id(), GuardKind::Predicate, *p, false));
                    }
                }
                Some(FrameKind::Args(
                    args.iter().map(|a| a.id()).collect(),
                    children,
                    node,
                ))
            }
            "binary_expression" => {
                let op = field("operator")?.kind_name();
                let negated = match op {
                    "&&" | "and" => false,
                    "||" | "or" => true,
                    _ => return None,
                };
                let (left, right) = (field("left")?, field("right")?);
                Some(FrameKind::Guarding(
                    vec![(right.id(), GuardKind::ShortCircuit, left, negated)],
                    node,
                ))
            }
            _ => None,
        }
    }

    fn enter_function(&mut self, node: Node<'t>) -> FrameKind<'t> {
        self.function_depth += 1;
        if self.function_depth > 1 {
            // C++ has no nested functions: this is a macro with a block, `LOOP(i, n) { … }`.
            let Some(body) = node.field("body") else {
                return FrameKind::Function { kernel: None };
            };
            let header = node.field("declarator").unwrap_or(node);
            let name = function_name(node, self.source).unwrap_or("");
            let kind = if self.loop_macros.iter().any(|m| m == name) {
                GuardKind::LoopMacro
            } else {
                GuardKind::Macro
            };
            // Stays inside the enclosing kernel; its body is guarded by its header.
            self.function_depth -= 1;
            return FrameKind::Guarding(vec![(body.id(), kind, header, false)], node);
        }
        let space = exec_space(node, self.source);
        let name = function_name(node, self.source)
            .unwrap_or_default()
            .to_string();
        let template_params = match self.frames.last() {
            Some(Frame {
                kind: FrameKind::Template(params),
                ..
            }) => template_parameters(*params, self.source),
            _ => Vec::new(),
        };
        self.functions.push(Function {
            node,
            name,
            space,
            template_params,
        });
        self.current_function = Some(self.functions.len() - 1);
        let kernel = if space.global && node.field("body").is_some() {
            self.kernels.push(kernel::KernelBuild::new(
                self.functions.len() - 1,
                node,
                self.source,
            ));
            self.current_kernel = Some(self.kernels.len() - 1);
            self.current_kernel
        } else {
            None
        };
        FrameKind::Function { kernel }
    }

    /// Facts that do not depend on open nodes: constants, launches, checks, and inside a
    /// kernel its definitions and accesses.
    fn record(&mut self, node: Node<'t>, call_arg: bool) {
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
                            });
                        }
                    }
                    _ => {}
                }
            }
        }
        if let Some(k) = self.current_kernel {
            if node.kind_name() == "call_expression" && is_barrier(node, self.source) {
                self.barriers.push(super::Barrier {
                    kernel: k,
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
                config: named_children(config).collect(),
                // Comments between arguments are named nodes too: not arguments.
                args: node
                    .field("arguments")
                    .map(|a| {
                        named_children(a)
                            .filter(|c| c.kind_name() != "comment")
                            .collect()
                    })
                    .unwrap_or_default(),
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

    pub fn finish(self, tree: &'t Tree) -> CudaModel<'t> {
        let mut model = CudaModel {
            source: self.source,
            root: tree.root_node(),
            functions: self.functions,
            kernels: Vec::new(),
            launches: self.launches,
            guards: self.guards,
            divisibility_checks: self.divisibility_checks,
            allocations: self.allocations,
            arrays: self.arrays,
            device_calls: self.device_calls,
            subscripts: self.subscripts,
            barriers: self.barriers,
            constants: self.constants,
            constant_cache: RefCell::new(HashMap::new()),
            loop_macros: self.loop_macros,
            host_defs: self.host_defs,
            glue: Default::default(),
        };
        model.resolve_template_values();
        for g in model.guards.iter_mut() {
            g.analyze(self.source);
        }
        let kernels = self.kernels.into_iter().map(|k| k.finish(&model)).collect();
        model.kernels = kernels;
        model.glue = glue::build(&model, self.glue, &self.dispatch_macros);
        model
    }
}

/// The names and defaults of a template parameter list.
fn template_parameters<'t>(params: Node<'t>, source: &'t str) -> Vec<(&'t str, Option<i128>)> {
    named_children(params)
        .filter_map(|p| {
            let name = p.field("declarator").or_else(|| {
                named_children(p)
                    .find(|c| matches!(c.kind_name(), "identifier" | "type_identifier"))
            })?;
            let default = p
                .field("default_value")
                .and_then(|d| parse_c_int(text(d, source)));
            Some((text(name, source), default))
        })
        .collect()
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
