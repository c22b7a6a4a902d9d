//! TF003: memory growth enabled on some GPUs only.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::python::tf::{argument, ConfigFn};
use gpulint_semantic::python::{project, PythonModel};
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

declare_rule! {
    /// ## What it does
    /// Finds `tf.config.experimental.set_memory_growth(gpus[0], True)`: memory growth enabled on
    /// one GPU picked by a constant index, or in a loop over a slice of the devices
    /// (`for gpu in gpus[1:]:`), when nothing else in the file enables it on every GPU.
    ///
    /// It stays silent when the script restricts the visible GPUs itself
    /// (`tf.config.set_visible_devices`, `CUDA_VISIBLE_DEVICES` written in the file), when a
    /// launcher next to it (`.sh`, `Dockerfile`, `.env`, ...) sets `CUDA_VISIBLE_DEVICES` to a
    /// single device, and for CPU-only and TPU scripts.
    ///
    /// ## Why is this risky?
    /// TensorFlow computes one memory-growth setting for the whole process. On a machine with
    /// more than one visible GPU, the first op raises `ValueError: Memory growth cannot differ
    /// between GPU devices` when growth is enabled on some GPUs and not on the others. The script
    /// works on a one-GPU workstation and crashes on a multi-GPU server. The guide's own code
    /// says: "Currently, memory growth needs to be the same across GPUs".
    ///
    /// ## Example
    /// ```python
    /// import tensorflow as tf
    ///
    /// gpus = tf.config.list_physical_devices("GPU")
    /// tf.config.experimental.set_memory_growth(gpus[0], True)
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// import tensorflow as tf
    ///
    /// for gpu in tf.config.list_physical_devices("GPU"):
    ///     tf.config.experimental.set_memory_growth(gpu, True)
    /// ```
    ///
    /// ## References
    /// - TensorFlow guide "Use a GPU", *Limiting GPU memory growth* ("Currently, memory growth
    ///   needs to be the same across GPUs"): <https://www.tensorflow.org/guide/gpu#limiting_gpu_memory_growth>
    /// - `Context._compute_gpu_options` in `tensorflow/python/eager/context.py` ("Memory growth
    ///   cannot differ between GPU devices"):
    ///   <https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/eager/context.py>
    pub static TF003 = {
        code: "TF003",
        name: "memory-growth-not-uniform",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Error,
        summary: "Memory growth enabled on some GPUs only",
        kinds: &[],
        needles: &["tensorflow", "tf_keras"],
        also_needles: &["set_memory_growth"],
        options: &[],
    };
}

pub struct MemoryGrowthNotUniform;

/// How a `set_memory_growth` call picks its device.
enum Pick<'t> {
    /// `gpus[0]`: the subscript and the index.
    One(Node<'t>, i128),
    /// `for gpu in gpus[1:]`: the sliced iterable.
    Slice(Node<'t>),
    /// Every device, or something we cannot tell.
    All,
}

fn pick<'t>(m: &PythonModel<'t>, call: Node<'t>) -> Pick<'t> {
    let Some(dev) = argument(call, 0, "device", m) else {
        return Pick::All;
    };
    if dev.kind_name() == "subscript" {
        let index = dev
            .field("subscript")
            .and_then(|i| m.const_value(i))
            .and_then(|v| v.as_int());
        return match index {
            Some(i) => Pick::One(dev, i),
            None => Pick::All,
        };
    }
    if dev.kind_name() != "identifier" {
        return Pick::All;
    }
    // `for gpu in gpus[1:]:` around the call.
    let mut cur = call;
    for _ in 0..24 {
        let Some(p) = m.parent(cur) else { break };
        match p.kind_name() {
            "function_definition" | "class_definition" | "module" => break,
            "for_statement" => {
                let var = p.field("left").map(|l| m.text(l));
                let iter = p.field("right");
                if var == Some(m.text(dev)) {
                    if let Some(it) = iter.filter(|it| {
                        it.kind_name() == "subscript"
                            && it
                                .field("subscript")
                                .is_some_and(|s| s.kind_name() == "slice")
                    }) {
                        return Pick::Slice(it);
                    }
                    return Pick::All;
                }
            }
            _ => {}
        }
        cur = p;
    }
    Pick::All
}

impl Rule for MemoryGrowthNotUniform {
    fn meta(&self) -> &'static RuleMeta {
        &TF003
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.python();
        if !m.imports_tensorflow() {
            return;
        }
        let tf = m.tf();
        if tf.uses_tpu || !tf.cpu_only.is_empty() {
            return;
        }
        // The script picks its GPUs itself: growth on the one it keeps is enough.
        if tf
            .config_calls
            .iter()
            .any(|(_, c)| *c == ConfigFn::VisibleDevices)
            || m.env_writes()
                .iter()
                .any(|w| w.key == "CUDA_VISIBLE_DEVICES")
        {
            return;
        }
        let growth: Vec<Node<'_>> = tf
            .config_calls
            .iter()
            .filter(|(c, k)| {
                *k == ConfigFn::MemoryGrowth
                    && argument(*c, 1, "enable", m)
                        .and_then(|v| m.const_value(v))
                        .is_some_and(|v| v.truthy())
            })
            .map(|(c, _)| *c)
            .collect();
        let picks: Vec<Pick<'_>> = growth.iter().map(|c| pick(m, *c)).collect();
        if picks.iter().any(|p| matches!(p, Pick::All)) {
            return;
        }
        let mut launcher_checked = false;
        for (call, p) in growth.iter().zip(&picks) {
            if !launcher_checked {
                launcher_checked = true;
                if project::launcher_setting(
                    &ctx.file.path,
                    &ctx.settings.root,
                    "CUDA_VISIBLE_DEVICES",
                )
                .is_some()
                {
                    return;
                }
            }
            let callee = call
                .field("function")
                .map(|f| ctx.text(f))
                .unwrap_or("set_memory_growth");
            let d = match p {
                Pick::One(dev, i) => ctx
                    .diagnostic(*call, format!("`{callee}` enables memory growth on `{}` only: on a machine with more than one GPU this raises ValueError", ctx.text(*dev)))
                    .primary_label(format!("memory growth on GPU {i} only; the other GPUs keep the default")),
                Pick::Slice(it) => ctx
                    .diagnostic(*call, format!("`{callee}` runs in a loop over `{}`, which skips some GPUs: on a machine with more than one GPU this raises ValueError", ctx.text(*it)))
                    .primary_label("memory growth on some GPUs only")
                    .with_label(Span::of(it), "this slice leaves GPUs out"),
                Pick::All => continue,
            };
            ctx.report(
                d.note("TensorFlow raises `ValueError: Memory growth cannot differ between GPU devices` when the runtime starts with growth enabled on some visible GPUs and not on others")
                    .help("enable it on every GPU: `for gpu in tf.config.list_physical_devices('GPU'): tf.config.experimental.set_memory_growth(gpu, True)`, or first restrict the process to that GPU with `tf.config.set_visible_devices(gpus[0], 'GPU')`"),
            );
        }
    }
}
