//! The nodes the builder keeps open while it walks: nodes that guard some of their children
//! (`if`, loops, `?:`, `&&`/`||`, predicate arguments, loop macros), compound statements,
//! function definitions and the template parameter lists in front of them.

use super::CudaBuilder;
use crate::cuda::consts::ConstDef;
use crate::cuda::guards::{self, GuardKind};
use crate::cuda::kernel;
use crate::cuda::{exec_space, function_name, parse_c_int, Function};
use gpulint_source::Span;
use gpulint_syntax::NodeExt;
use gpulint_syntax::{named_children, text};
use tree_sitter::Node;

/// What the builder remembers about an open node.
pub(super) struct Frame<'t> {
    pub(super) id: usize,
    pub(super) span: Span,
    pub(super) kind: FrameKind<'t>,
    /// Guards pushed on entering this node (or attached to it), popped on leaving it.
    pub(super) pushed: u32,
}

pub(super) enum FrameKind<'t> {
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

impl<'t> CudaBuilder<'t> {
    /// What to remember about `node` while it is open, if anything.
    pub(super) fn frame_kind(&mut self, node: Node<'t>) -> Option<FrameKind<'t>> {
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
        // Kernels, and `__device__` helpers (functors, index helpers called from kernels),
        // whose facts serve the arithmetic checks only (`helper` set: not launched, no
        // barriers).
        let helper = !space.global && space.device && !space.host;
        let kernel = if (space.global || helper) && node.field("body").is_some() {
            let mut k = kernel::KernelBuild::new(self.functions.len() - 1, node, self.source);
            for p in &mut k.params {
                p.accessor = !p.pointer && self.is_accessor_param(p.node);
            }
            if helper {
                k.helper = true;
            } else {
                k.slot = self.launchable;
                self.launchable += 1;
            }
            self.kernels.push(k);
            self.current_kernel = Some(self.kernels.len() - 1);
            self.current_kernel
        } else {
            None
        };
        FrameKind::Function { kernel }
    }
}

impl<'t> CudaBuilder<'t> {
    /// Is this parameter's type a PyTorch tensor accessor, spelled directly
    /// (`torch::PackedTensorAccessor32<float, 4, torch::RestrictPtrTraits>`) or through a
    /// `#define` or type alias seen earlier in the file?
    fn is_accessor_param(&self, param: Node<'t>) -> bool {
        let Some(ty) = param.field("type") else {
            return false;
        };
        let mut name = text(ty, self.source);
        for _ in 0..4 {
            let head = name.split('<').next().unwrap_or(name);
            let head = crate::cuda::last_name(head);
            if matches!(
                head,
                "PackedTensorAccessor32"
                    | "PackedTensorAccessor64"
                    | "PackedTensorAccessor"
                    | "GenericPackedTensorAccessor"
                    | "TensorAccessor"
            ) {
                return true;
            }
            name = match (self.constants.get(head), self.aliases.get(head)) {
                (Some(ConstDef::Macro(body)), _) => body,
                (_, Some(ty)) => ty,
                _ => return false,
            };
        }
        false
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
