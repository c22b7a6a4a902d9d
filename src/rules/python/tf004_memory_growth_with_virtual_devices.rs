//! TF004: memory growth and a logical (virtual) device configuration on the same GPU.

use crate::checker::Context;
use crate::declare_rule;
use crate::diagnostic::{Severity, Span};
use crate::lang::Lang;
use crate::rule::{Rule, RuleLang, RuleMeta};
use crate::semantic::python::tf::{argument, ConfigFn};
use crate::semantic::python::PythonModel;
use crate::semantic::NodeExt;
use tree_sitter::Node;

declare_rule! {
    /// ## What it does
    /// Finds a GPU that gets both `tf.config.experimental.set_memory_growth(dev, True)` and a
    /// logical device configuration (`tf.config.set_logical_device_configuration(dev, ...)` or
    /// `tf.config.experimental.set_virtual_device_configuration(dev, ...)`), in either order.
    /// The device is compared as written in the same function: `gpus[0]` and `gpus[0]`, or the
    /// same loop variable; `gpus[0]` and `gpus[1]` are different devices, and calls in
    /// different branches of one `if` never both run.
    ///
    /// ## Why is this risky?
    /// The two settings exclude each other. TensorFlow raises `ValueError: Cannot set memory
    /// growth on device when virtual devices configured` when growth is set on a device that
    /// already has logical devices, and the API documentation states that "memory growth
    /// cannot be configured on a PhysicalDevice with virtual devices configured". Use a
    /// `memory_limit` in the logical device configuration to bound memory instead.
    ///
    /// ## Example
    /// ```python
    /// import tensorflow as tf
    ///
    /// gpus = tf.config.list_physical_devices("GPU")
    /// tf.config.set_logical_device_configuration(
    ///     gpus[0], [tf.config.LogicalDeviceConfiguration(memory_limit=4096)]
    /// )
    /// tf.config.experimental.set_memory_growth(gpus[0], True)
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// import tensorflow as tf
    ///
    /// gpus = tf.config.list_physical_devices("GPU")
    /// tf.config.set_logical_device_configuration(
    ///     gpus[0], [tf.config.LogicalDeviceConfiguration(memory_limit=4096)]
    /// )
    /// ```
    ///
    /// ## References
    /// - `tf.config.experimental.set_memory_growth`:
    ///   <https://www.tensorflow.org/api_docs/python/tf/config/experimental/set_memory_growth>
    /// - `Context.set_memory_growth` and `Context.set_logical_device_configuration` in
    ///   `tensorflow/python/eager/context.py`:
    ///   <https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/eager/context.py>
    pub static TF004 = {
        code: "TF004",
        name: "memory-growth-with-virtual-devices",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Error,
        summary: "Memory growth and a logical device configuration on the same GPU",
        kinds: &[],
        needles: &["set_memory_growth"],
        options: &[],
    };
}

pub struct MemoryGrowthWithVirtualDevices;

/// The device a call configures, as comparable text: `gpus[0]` (constant index folded), `gpu`.
fn device_key(m: &PythonModel<'_>, call: Node<'_>) -> Option<String> {
    let dev = argument(call, 0, "device", m)?;
    match dev.kind() {
        "identifier" => Some(m.text(dev).to_string()),
        "subscript" => {
            let value = dev.field("value")?;
            let index = m.const_value(dev.field("subscript")?)?.as_int()?;
            Some(format!("{}[{index}]", m.text(value)))
        }
        _ => None,
    }
}

/// Do the two nodes sit in different arms of one `if` (or of a `try` and its handler)?
fn exclusive(a: Node<'_>, b: Node<'_>) -> bool {
    let arm_path = |n: Node<'_>| {
        let mut out = Vec::new();
        let mut cur = n;
        for _ in 0..64 {
            let Some(p) = cur.parent() else { break };
            if matches!(
                p.kind(),
                "if_statement" | "try_statement" | "match_statement"
            ) {
                out.push((p.id(), cur.id()));
            }
            if p.kind() == "function_definition" {
                break;
            }
            cur = p;
        }
        out
    };
    let pa = arm_path(a);
    let pb = arm_path(b);
    pa.iter()
        .any(|(s, arm)| pb.iter().any(|(t, brm)| s == t && arm != brm))
}

impl Rule for MemoryGrowthWithVirtualDevices {
    fn meta(&self) -> &'static RuleMeta {
        &TF004
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.python();
        if !m.imports_tensorflow() {
            return;
        }
        let tf = m.tf();
        let logical: Vec<(Node<'_>, String, Option<usize>)> = tf
            .config_calls
            .iter()
            .filter(|(_, k)| *k == ConfigFn::LogicalDevices)
            .filter_map(|(c, _)| {
                // `set_logical_device_configuration(gpu, None)` clears the configuration.
                let conf = argument(*c, 1, "logical_devices", m)
                    .or_else(|| argument(*c, 1, "virtual_devices", m))?;
                if conf.kind() == "none" {
                    return None;
                }
                Some((*c, device_key(m, *c)?, m.enclosing_function(*c)))
            })
            .collect();
        if logical.is_empty() {
            return;
        }
        for (call, kind) in &tf.config_calls {
            if *kind != ConfigFn::MemoryGrowth {
                continue;
            }
            let enabled = argument(*call, 1, "enable", m)
                .and_then(|v| m.const_value(v))
                .is_some_and(|v| v.truthy());
            if !enabled {
                continue;
            }
            let Some(key) = device_key(m, *call) else {
                continue;
            };
            let scope = m.enclosing_function(*call);
            let Some((other, _, _)) = logical
                .iter()
                .find(|(l, k, s)| *k == key && *s == scope && !exclusive(*l, *call))
            else {
                continue;
            };
            let callee = call
                .field("function")
                .map(|f| ctx.text(f))
                .unwrap_or("set_memory_growth");
            let d = ctx
                .diagnostic(*call, format!("`{callee}` enables memory growth on `{key}`, which also gets a logical device configuration: TensorFlow raises ValueError"))
                .primary_label("memory growth on a GPU with logical devices")
                .with_label(Span::of(other), format!("logical devices are configured on `{key}` here"))
                .note("`Cannot set memory growth on device when virtual devices configured`: the two settings exclude each other")
                .help("keep only one: bound the memory with `memory_limit=` in the logical device configuration and drop `set_memory_growth` for that GPU");
            ctx.report(d);
        }
    }
}
