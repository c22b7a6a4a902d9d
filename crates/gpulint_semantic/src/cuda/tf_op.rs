//! TensorFlow op glue: the `Compute(OpKernelContext*)` methods of `OpKernel`s, the input
//! tensors they read, the validations they make (`OP_REQUIRES`, `OP_REQUIRES_OK`, an `if`
//! that returns) and the GPU work they start (a launch, a `Functor<GPUDevice, T>()(…)` call,
//! a `Launch…` helper).
//!
//! Computed on demand from the functions the builder recorded: only the bodies of `Compute`
//! methods are read, each once.

use super::{CudaModel, Function};
use gpulint_syntax::NodeExt;
use gpulint_syntax::{descendants, named_children, text};
use tree_sitter::Node;

/// Calls that validate and stop the op when their condition fails.
const VALIDATIONS: &[&str] = &[
    "OP_REQUIRES",
    "OP_REQUIRES_OK",
    "OP_REQUIRES_ASYNC",
    "OP_REQUIRES_OK_ASYNC",
    "TF_RETURN_IF_ERROR",
    "CHECK",
    "CHECK_EQ",
    "CHECK_GE",
    "CHECK_GT",
    "CHECK_LE",
    "CHECK_LT",
    "DCHECK_EQ",
    "TORCH_CHECK",
];

/// Statements of a `Compute` body read at most (larger bodies are not analysed).
const MAX_NODES: usize = 20_000;

/// One `Compute(OpKernelContext* ctx)` method.
#[derive(Debug, Clone)]
pub struct TfCompute<'t> {
    /// Index into [`CudaModel::functions`].
    pub function: usize,
    /// The context parameter's name.
    pub ctx: &'t str,
    /// Locals bound to an input tensor (`const Tensor& x = ctx->input(0)`, or the `&x` of
    /// `ctx->input("x", &x)`), with the node that reads it.
    pub inputs: Vec<(&'t str, Node<'t>)>,
    /// Locals bound to an input's shape (`TensorShape s = x.shape()`), with the input's name.
    pub shape_aliases: Vec<(&'t str, &'t str)>,
    /// Validating statements, in order: `OP_REQUIRES(…)`, `if (…) { …; return; }`, a call to a
    /// `Validate…`/`Check…` helper.
    pub validations: Vec<Node<'t>>,
    /// Every call in the body, in order.
    pub calls: Vec<Node<'t>>,
    /// The first launch or GPU functor call.
    pub gpu_work: Option<Node<'t>>,
}

impl<'t> TfCompute<'t> {
    /// The input an expression names directly or through a shape alias.
    pub fn input_of(&self, name: &str) -> Option<&'t str> {
        self.inputs
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(n, _)| *n)
            .or_else(|| {
                self.shape_aliases
                    .iter()
                    .find(|(a, _)| *a == name)
                    .map(|(_, i)| *i)
            })
    }

    /// Is there a validation before byte `at` whose text mentions `input` or one of its
    /// shape aliases?
    pub fn validated_before(&self, input: &str, at: usize, source: &str) -> bool {
        let names: Vec<&str> = std::iter::once(input)
            .chain(
                self.shape_aliases
                    .iter()
                    .filter(|(_, i)| *i == input)
                    .map(|(a, _)| *a),
            )
            .collect();
        self.validations
            .iter()
            .filter(|v| v.start_byte() < at)
            .any(|v| {
                let tokens = super::guards::name_tokens(text(*v, source));
                names.iter().any(|n| tokens.contains(n))
            })
    }

    /// The first validation before byte `at` whose text contains one of `needles`.
    pub fn validation_with(&self, needles: &[&str], at: usize, source: &str) -> Option<Node<'t>> {
        self.validations
            .iter()
            .filter(|v| v.start_byte() < at)
            .find(|v| {
                let t = text(**v, source);
                needles.iter().any(|n| t.contains(n))
            })
            .copied()
    }
}

/// Is `func` an op kernel's `Compute(OpKernelContext* ctx)`? Returns the context's name.
pub fn compute_context<'t>(func: &Function<'t>, source: &'t str) -> Option<&'t str> {
    if func.name != "Compute" || func.space.global || func.space.device {
        return None;
    }
    let decl = descendants(func.node.field("declarator")?)
        .take(64)
        .find(|n| n.kind_name() == "function_declarator")?;
    let params: Vec<Node<'t>> = named_children(decl.field("parameters")?).collect();
    let [p] = params.as_slice() else {
        return None;
    };
    if !text(p.field("type")?, source).ends_with("OpKernelContext") {
        return None;
    }
    let (name, pointer) = super::kernel::declarator_name(p.field("declarator")?);
    pointer.then_some(())?;
    Some(text(name?, source))
}

/// The name called by a call expression (`ns::f`, `obj.f`, `obj->f<T>` → `f`).
pub fn callee_name<'t>(call: Node<'t>, source: &'t str) -> Option<&'t str> {
    let mut f = call.field("function")?;
    for _ in 0..4 {
        f = match f.kind_name() {
            "field_expression" => f.field("field")?,
            "template_function" | "template_method" | "qualified_identifier" => f.field("name")?,
            _ => break,
        };
    }
    Some(super::last_name(text(f, source)))
}

/// `x.method(…)` / `x->method<T>(…)`: the object's name when it is a plain identifier.
pub fn method_object<'t>(call: Node<'t>, source: &'t str) -> Option<&'t str> {
    let f = call.field("function")?;
    if f.kind_name() != "field_expression" {
        return None;
    }
    let obj = super::kernel::peel(f.field("argument")?);
    match obj.kind_name() {
        "identifier" => Some(text(obj, source)),
        // `x.shape().dim_size(1)`
        "call_expression" if callee_name(obj, source) == Some("shape") => {
            method_object(obj, source)
        }
        _ => None,
    }
}

/// The callee of the call passed as the second argument (`OP_REQUIRES_OK(ctx, f(…))` → `f`).
fn callee_name_of_arg<'t>(call: Node<'t>, source: &'t str) -> Option<&'t str> {
    let arg = call.field("arguments")?.named_child(1)?;
    (arg.kind_name() == "call_expression").then_some(())?;
    callee_name(arg, source)
}

impl<'t> CudaModel<'t> {
    /// The `Compute` methods of TensorFlow op kernels in this file that read an input and
    /// start GPU work.
    pub fn tf_computes(&self) -> Vec<TfCompute<'t>> {
        let gpu_file = gpulint_source::contains_any(
            self.source.as_bytes(),
            &["GPUDevice", "DEVICE_GPU", "GOOGLE_CUDA", "<<<"],
        );
        if !gpu_file {
            return Vec::new();
        }
        let mut out = Vec::new();
        for (fi, func) in self.functions.iter().enumerate() {
            let Some(ctx) = compute_context(func, self.source) else {
                continue;
            };
            let Some(body) = func.node.field("body") else {
                continue;
            };
            if body.has_error() {
                continue;
            }
            if let Some(c) = self.analyze_compute(fi, ctx, body) {
                out.push(c);
            }
        }
        out
    }

    fn analyze_compute(
        &self,
        function: usize,
        ctx: &'t str,
        body: Node<'t>,
    ) -> Option<TfCompute<'t>> {
        let src = self.source;
        let mut c = TfCompute {
            function,
            ctx,
            inputs: Vec::new(),
            shape_aliases: Vec::new(),
            validations: Vec::new(),
            calls: Vec::new(),
            gpu_work: None,
        };
        let reads_input = |call: Node<'t>| {
            callee_name(call, src) == Some("input")
                && call
                    .field("function")
                    .and_then(|f| f.field("argument"))
                    .is_some_and(|a| text(a, src) == ctx)
        };
        for n in descendants(body).take(MAX_NODES) {
            match n.kind_name() {
                "init_declarator" => {
                    let (Some(d), Some(v)) = (n.field("declarator"), n.field("value")) else {
                        continue;
                    };
                    let (Some(name), _) = super::kernel::declarator_name(d) else {
                        continue;
                    };
                    let name = text(name, src);
                    let v = super::kernel::peel(v);
                    if v.kind_name() != "call_expression" {
                        continue;
                    }
                    if reads_input(v) {
                        c.inputs.push((name, v));
                    } else if callee_name(v, src) == Some("shape") {
                        if let Some(i) = method_object(v, src).and_then(|o| c.input_of(o)) {
                            c.shape_aliases.push((name, i));
                        }
                    }
                }
                "call_expression" => {
                    c.calls.push(n);
                    let name = callee_name(n, src).unwrap_or("");
                    // `ctx->input("x", &x)`: the tensor comes back through the pointer.
                    if reads_input(n) {
                        let args = n.field("arguments");
                        if let Some(a) = args.and_then(|a| a.named_child(1)) {
                            if a.kind_name() == "pointer_expression" {
                                if let Some(x) = a
                                    .field("argument")
                                    .filter(|x| x.kind_name() == "identifier")
                                {
                                    c.inputs.push((text(x, src), n));
                                }
                            }
                        }
                    }
                    let lower = name.to_ascii_lowercase();
                    let allocates = name == "OP_REQUIRES_OK"
                        && callee_name_of_arg(n, src).is_some_and(|a| a.starts_with("allocate_"));
                    if !allocates
                        && (VALIDATIONS.contains(&name)
                            || lower.contains("valid")
                            || lower.starts_with("check")
                            || lower.contains("verify"))
                    {
                        c.validations.push(n);
                    }
                    if c.gpu_work.is_none() && self.is_gpu_work(n) {
                        c.gpu_work = Some(n);
                    }
                }
                "if_statement" => {
                    let returns = n.field("consequence").is_some_and(|b| {
                        descendants(b)
                            .take(256)
                            .any(|x| x.kind_name() == "return_statement")
                    });
                    if returns {
                        if let Some(cond) = n.field("condition") {
                            c.validations.push(cond);
                        }
                    }
                }
                _ => {}
            }
        }
        (!c.inputs.is_empty() && c.gpu_work.is_some()).then_some(c)
    }

    /// A launch, a functor call on a device (`F<GPUDevice, T>()(ctx->eigen_device<…>(), …)`),
    /// or a call to a `Launch…` helper.
    fn is_gpu_work(&self, call: Node<'t>) -> bool {
        let src = self.source;
        if named_children(call).any(|c| c.kind_name() == "kernel_call_syntax") {
            return true;
        }
        let Some(f) = call.field("function") else {
            return false;
        };
        let args = call.field("arguments").map(|a| text(a, src)).unwrap_or("");
        // `Functor<CPUDevice, T>()(…)`: host work.
        if text(f, src).contains("CPUDevice") || args.contains("CPUDevice") {
            return false;
        }
        let on_device = args.contains("eigen_device")
            || args.contains("eigen_gpu_device")
            || args.contains("stream")
            || text(f, src).contains("GPUDevice")
            || text(f, src).contains("Device");
        if f.kind_name() == "call_expression" {
            // `Functor<Device, T>()(d, …)`
            return on_device;
        }
        let name = callee_name(call, src).unwrap_or("");
        (name.starts_with("Launch") || name.starts_with("launch") || name.contains("Launcher"))
            && on_device
    }
}
