//! Collects the CUDA model from the enter/leave events of the checker's one walk: functions,
//! constants, launches and host definitions everywhere; inside kernels the definitions,
//! accesses and the stack of guards that hold at each node.

mod frames;
mod record;

use super::arrays::{ArrayDecl, DeviceCall};
use super::consts::ConstDef;
use super::glue::{self, GlueNodes, DISPATCH_MACROS};
use super::guards::{self, Guard, GuardKind};
use super::kernel;
use super::LOOP_MACROS;
use super::{CudaModel, Function, HostDef, Launch};
use crate::hash::HashMap;
use crate::Options;
use frames::{Frame, FrameKind};
use gpulint_source::Span;
use gpulint_syntax::NodeExt;
use std::cell::RefCell;
use tree_sitter::{Node, Tree};

/// Calls that stop the kernel or the op when their condition is false.
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

/// Collects the model during the checker's walk.
pub struct CudaBuilder<'t> {
    source: &'t str,
    functions: Vec<Function<'t>>,
    constants: HashMap<&'t str, ConstDef<'t>>,
    aliases: HashMap<&'t str, &'t str>,
    fields: HashMap<&'t str, Vec<&'t str>>,
    loop_macros: Vec<String>,
    frames: Vec<Frame<'t>>,
    guards: Vec<Guard<'t>>,
    guard_top: Option<u32>,
    kernels: Vec<kernel::KernelBuild<'t>>,
    current_kernel: Option<usize>,
    /// The number of `__global__` kernels pushed so far (helpers not counted).
    launchable: usize,
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
    /// The nodes the walk is inside of, innermost last.
    open: Vec<Node<'t>>,
    /// The parent of every node walked, recorded as the walk enters it: the model's parent
    /// table comes with the walk instead of a walk of its own.
    parents: gpulint_syntax::Parents<'t>,
    /// Only the glue facts are wanted (see [`CudaBuilder::glue_facts_of`]): nothing is
    /// recorded inside device code, no host definitions, no kernel or guard is finished.
    glue_only: bool,
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
            constants: HashMap::default(),
            aliases: HashMap::default(),
            fields: HashMap::default(),
            loop_macros,
            frames: Vec::new(),
            guards: Vec::new(),
            guard_top: None,
            kernels: Vec::new(),
            current_kernel: None,
            launchable: 0,
            current_function: None,
            function_depth: 0,
            host_defs: HashMap::default(),
            launches: Vec::new(),
            divisibility_checks: Vec::new(),
            allocations: Vec::new(),
            arrays: Vec::new(),
            device_calls: Vec::new(),
            subscripts: Vec::new(),
            barriers: Vec::new(),
            glue: GlueNodes::default(),
            dispatch_macros,
            open: Vec::new(),
            parents: gpulint_syntax::Parents::default(),
            glue_only: false,
        }
    }

    fn push_guard(
        &mut self,
        kind: GuardKind,
        (cond, anchor): (Node<'t>, Node<'t>),
        negated: bool,
        label: Span,
    ) {
        let prev = self.guard_top;
        self.guards.push(Guard {
            kind,
            cond,
            anchor,
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
        match self.open.last() {
            Some(&p) => self.parents.record(node, p),
            None => self.parents.reserve(node.descendant_count()),
        }
        self.open.push(node);
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
                self.push_guard(kind, (cond, anchor), negated, label);
                pushed += 1;
            }
        }
        if pushed == 0 && !call_arg && gpulint_syntax::is_plain_token(node) {
            // Punctuation and keywords (about two fifths of the nodes) open no frame and are
            // recorded as nothing; a kernel only counts them among its nodes.
            if let (Some(k), false) = (self.current_kernel, self.glue_only) {
                self.kernels[k].count_token();
            }
            return;
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
        self.open.pop();
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
        if self.current_kernel.is_none() || self.glue_only {
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
                self.push_guard(kind, (cond, node), negated, label);
                if let Some(f) = self.frames.last_mut() {
                    f.pushed += 1;
                }
            }
        }
    }

    /// The model of a whole tree, from the same enter/leave walk as the checker's.
    pub fn model_of(source: &'t str, tree: &'t Tree, options: &Options) -> CudaModel<'t> {
        let mut b = CudaBuilder::new(source, options);
        gpulint_syntax::walk(tree, |node, entering| {
            if entering {
                b.enter(node)
            } else {
                b.leave(node)
            }
        });
        b.finish(tree)
    }

    /// The glue facts of a whole tree ([`super::glue::Glue::facts`] of [`Self::model_of`]),
    /// for the callers in other files: the glue reads the functions, launches and calls of
    /// the file, not what kernels do, so those are not collected.
    pub fn glue_facts_of(source: &'t str, tree: &'t Tree, options: &Options) -> glue::FileFacts {
        let mut b = CudaBuilder::new(source, options);
        b.glue_only = true;
        gpulint_syntax::walk(tree, |node, entering| {
            if entering {
                b.enter(node)
            } else {
                b.leave(node)
            }
        });
        b.finish(tree).glue.facts
    }

    pub fn finish(self, tree: &'t Tree) -> CudaModel<'t> {
        let function_nesting = super::nesting::Nesting::new(
            self.functions
                .iter()
                .map(|f| (f.node.start_byte(), f.node.end_byte()))
                .collect(),
        );
        let mut model = CudaModel {
            source: self.source,
            root: tree.root_node(),
            functions: self.functions,
            kernels: Vec::new(),
            helpers: Vec::new(),
            launches: self.launches,
            guards: self.guards,
            divisibility_checks: self.divisibility_checks,
            allocations: self.allocations,
            arrays: self.arrays,
            device_calls: self.device_calls,
            subscripts: self.subscripts,
            barriers: self.barriers,
            constants: self.constants,
            aliases: self.aliases,
            fields: self.fields,
            constant_cache: RefCell::new(HashMap::default()),
            loop_macros: self.loop_macros,
            host_defs: self.host_defs,
            glue: Default::default(),
            headers: Default::default(),
            header_path: None,
            function_nesting,
            launches_by_kernel: HashMap::default(),
            kernel_by_name: HashMap::default(),
            kernel_by_node: HashMap::default(),
            lookups: Default::default(),
            guard_order: Vec::new(),
            allocation_order: Vec::new(),
            evidence: Default::default(),
            parents: std::cell::OnceCell::from(self.parents),
            line_ends: Default::default(),
            launch_spans: Default::default(),
            error_macros: Default::default(),
            steps: Default::default(),
            statements: Default::default(),
        };
        model.index();
        if !self.glue_only {
            model.resolve_template_values();
            for g in model.guards.iter_mut() {
                g.analyze(self.source);
            }
            let (helpers, kernels): (Vec<_>, Vec<_>) =
                self.kernels.into_iter().partition(|k| k.helper);
            model.kernels = kernels.into_iter().map(|k| k.finish(&model)).collect();
            model.helpers = helpers.into_iter().map(|k| k.finish(&model)).collect();
            model.index();
        }
        model.glue = glue::build(&model, self.glue, &self.dispatch_macros);
        model
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpulint_syntax::{descendants, parse, Lang, Parents};

    /// The parent table the builder records during its walk is the one a walk of its own
    /// builds, on every CUDA fixture (broken ones included).
    #[test]
    fn recorded_parents_are_the_walked_ones() {
        let dir = format!("{}/../../fixtures/cuda", env!("CARGO_MANIFEST_DIR"));
        let mut texts: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap_or_default())
            .collect();
        texts.push("int f( { x = ; }\nvoid g() { h(1, ; }".into());
        let mut checked = 0;
        for text in texts {
            let Some(tree) = parse(Lang::Cuda, &text) else {
                continue;
            };
            let walked = Parents::of([tree.root_node()]);
            let m = CudaBuilder::model_of(&text, &tree, &Options::default());
            for n in descendants(tree.root_node()) {
                assert_eq!(
                    m.parent(n).map(|p| p.id()),
                    walked.parent(n).map(|p| p.id()),
                    "{} at {}",
                    n.kind_name(),
                    n.start_byte()
                );
                checked += 1;
            }
        }
        assert!(checked > 10_000);
    }

    /// The glue facts collected without the kernels are those of the whole model, on every
    /// CUDA fixture (broken ones included).
    #[test]
    fn glue_only_facts_are_the_models() {
        let dir = format!("{}/../../fixtures/cuda", env!("CARGO_MANIFEST_DIR"));
        let mut compared = 0;
        for e in std::fs::read_dir(dir).unwrap() {
            let text = std::fs::read_to_string(e.unwrap().path()).unwrap_or_default();
            let Some(tree) = parse(Lang::Cuda, &text) else {
                continue;
            };
            let options = Options::default();
            let full = CudaBuilder::model_of(&text, &tree, &options).glue.facts;
            let light = CudaBuilder::glue_facts_of(&text, &tree, &options);
            assert_eq!(format!("{:?}", full.fns), format!("{:?}", light.fns));
            assert_eq!(full.bound, light.bound);
            assert_eq!(full.bindings, light.bindings);
            assert_eq!(full.referenced, light.referenced);
            compared += full.fns.len();
        }
        assert!(compared > 50, "{compared}");
    }
}
