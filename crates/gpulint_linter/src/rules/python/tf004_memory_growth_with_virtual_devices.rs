//! TF004: memory growth and a logical (virtual) device configuration on the same GPU.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::python::tf::{argument, ConfigFn};
use gpulint_semantic::python::PythonModel;
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;
use std::collections::{HashMap, HashSet};
use tree_sitter::Node;

declare_rule! {
    /// ## What it does
    /// Finds a GPU that gets both `tf.config.experimental.set_memory_growth(dev, True)` and a
    /// logical device configuration (`tf.config.set_logical_device_configuration(dev, ...)` or
    /// `tf.config.experimental.set_virtual_device_configuration(dev, ...)`). The device is
    /// compared as written in the same function: `gpus[0]` and `gpus[0]`, the same loop
    /// variable, or a loop over `gpus` and `gpus[0]`; `gpus[0]` and `gpus[1]` are different
    /// devices, and calls in different branches of one `if` never both run.
    ///
    /// Order matters, and it is the execution order of the module (module code,
    /// `if __name__ == "__main__":` and the local functions they call):
    /// - logical devices first, then memory growth: `set_memory_growth` raises `ValueError`
    ///   (error);
    /// - memory growth first, then logical devices: nothing raises, but TensorFlow drops the
    ///   growth setting (info).
    ///
    /// Both calls must run before the GPU-init boundary (the first tensor, variable, Keras layer
    /// or model, strategy or `list_logical_devices`), the same fact TF001, TF002 and TF013 use: a
    /// configuration call after it raises `RuntimeError` first, which is TF001's finding.
    ///
    /// ## Why is this risky?
    /// The two settings exclude each other. TensorFlow raises `ValueError: Cannot set memory
    /// growth on device when virtual devices configured` when growth is set on a device that
    /// already has logical devices, and the API documentation states that "memory growth
    /// cannot be configured on a PhysicalDevice with virtual devices configured". In the other
    /// order the runtime builds its GPU options without `allow_growth` as soon as any logical
    /// device exists, so the growth request is silently lost, and calling the same setup a
    /// second time raises. Use a `memory_limit` in the logical device configuration to bound
    /// memory instead.
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
        needles: &["tensorflow", "tf_keras"],
        also_needles: &["set_memory_growth"],
        options: &[],
    };
}

pub struct MemoryGrowthWithVirtualDevices;

/// The device a configuration call targets, as far as text can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Device {
    /// `gpus[0]` (constant index folded): the list's text and the index.
    Index(String, i128),
    /// The variable of `for <var> in <list>:`: every device of the list, one per iteration.
    Each {
        var: String,
        list: String,
        loop_id: usize,
    },
    /// Any other name.
    Name(String),
}

impl Device {
    fn same_gpu(&self, other: &Device) -> bool {
        use Device::*;
        match (self, other) {
            (Index(a, i), Index(b, j)) => a == b && i == j,
            // Within one loop, one iteration configures one device; two loops over the same
            // list meet on every device; a loop over a list covers each of its elements.
            (
                Each {
                    var: v,
                    list: a,
                    loop_id: l,
                },
                Each {
                    var: w,
                    list: b,
                    loop_id: k,
                },
            ) => {
                if l == k {
                    v == w
                } else {
                    a == b
                }
            }
            (Each { list, .. }, Index(l, _)) | (Index(l, _), Each { list, .. }) => list == l,
            (Name(a), Name(b)) => a == b,
            _ => false,
        }
    }

    /// The device in backticks, for messages.
    fn describe(&self) -> String {
        match self {
            Device::Index(l, i) => format!("`{l}[{i}]`"),
            Device::Each { var, list, .. } => format!("`{var}` (each device of `{list}`)"),
            Device::Name(var) => format!("`{var}`"),
        }
    }
}

/// The device a call configures.
fn device(m: &PythonModel<'_>, call: Node<'_>) -> Option<Device> {
    let dev = argument(call, 0, "device", m)?;
    match dev.kind_name() {
        "identifier" => {
            let name = m.text(dev);
            let mut cur = call;
            for _ in 0..64 {
                let Some(p) = m.parent(cur) else { break };
                match p.kind_name() {
                    "function_definition" | "class_definition" | "lambda" => break,
                    "for_statement" => {
                        let left = p.field("left");
                        let right = p.field("right");
                        if let (Some(l), Some(r)) = (left, right) {
                            if l.kind_name() == "identifier" && m.text(l) == name {
                                return Some(Device::Each {
                                    var: name.to_string(),
                                    list: m.text(r).to_string(),
                                    loop_id: p.id(),
                                });
                            }
                        }
                    }
                    _ => {}
                }
                cur = p;
            }
            Some(Device::Name(name.to_string()))
        }
        "subscript" => {
            let value = dev.field("value")?;
            let index = m.const_value(dev.field("subscript")?)?.as_int()?;
            Some(Device::Index(m.text(value).to_string(), index))
        }
        _ => None,
    }
}

/// Can the device texts of two calls be compared: written in the same function, or both naming
/// the same module-level variable (`gpus` defined at module level, used by two helpers)?
fn comparable(m: &PythonModel<'_>, a: &Config<'_>, b: &Config<'_>) -> bool {
    if a.scope == b.scope {
        return true;
    }
    let base = |c: &Config<'_>| -> Option<String> {
        let text = match &c.device {
            Device::Index(list, _) | Device::Each { list, .. } => list.clone(),
            Device::Name(name) => name.clone(),
        };
        let global = text.chars().all(|ch| ch == '_' || ch.is_alphanumeric())
            && c.scope.is_none_or(|f| !m.function_binds(f, &text));
        global.then_some(text)
    };
    matches!((base(a), base(b)), (Some(x), Some(y)) if x == y)
}

/// One configuration call that takes part.
struct Config<'t> {
    call: Node<'t>,
    device: Device,
    scope: Option<usize>,
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
        let mut growth = Vec::new();
        let mut logical = Vec::new();
        for &(call, kind) in &tf.config_calls {
            let wanted = match kind {
                // `set_memory_growth(gpu, False)` is the default and conflicts with nothing.
                ConfigFn::MemoryGrowth => argument(call, 1, "enable", m)
                    .and_then(|v| m.const_value(v))
                    .is_some_and(|v| v.truthy()),
                // `set_logical_device_configuration(gpu, None)` clears the configuration.
                ConfigFn::LogicalDevices => argument(call, 1, "logical_devices", m)
                    .or_else(|| argument(call, 1, "virtual_devices", m))
                    .is_some_and(|c| c.kind_name() != "none"),
                ConfigFn::VisibleDevices => false,
            };
            let Some(device) = device(m, call).filter(|_| wanted) else {
                continue;
            };
            let c = Config {
                call,
                device,
                scope: m.enclosing_function(call),
            };
            match kind {
                ConfigFn::MemoryGrowth => growth.push(c),
                _ => logical.push(c),
            }
        }
        if growth.is_empty() || logical.is_empty() {
            return;
        }
        let order = m.order();
        let mut reported = HashSet::new();
        // Each configuration call, by node id: one map for the whole file (built per sequence
        // it cost the calls once per sequence, and a file has a sequence per uncalled function).
        let wanted: HashMap<usize, (bool, usize)> = growth
            .iter()
            .enumerate()
            .map(|(i, c)| (c.call.id(), (true, i)))
            .chain(
                logical
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (c.call.id(), (false, i))),
            )
            .collect();
        for seq in 0..order.sequences().len() {
            let events = order.events(seq);
            // Where each configuration call first occurs in this sequence, from one pass over
            // its events; the calls that occur in it, in the order of `growth`/`logical`.
            let mut first: HashMap<usize, usize> = HashMap::new();
            let mut here_growth = Vec::new();
            let mut here_logical = Vec::new();
            for (i, e) in events.iter().enumerate() {
                let Some(&(is_growth, k)) = wanted.get(&e.node.id()) else {
                    continue;
                };
                if first.insert(e.node.id(), i).is_none() {
                    if is_growth {
                        here_growth.push((k, i));
                    } else {
                        here_logical.push((k, i));
                    }
                }
            }
            if here_growth.is_empty() || here_logical.is_empty() {
                continue;
            }
            here_growth.sort_unstable();
            here_logical.sort_unstable();
            for &(k, gi) in &here_growth {
                let g = &growth[k];
                if reported.contains(&g.call.id()) {
                    continue;
                }
                // Configuration after the GPU-init boundary raises RuntimeError first: TF001's.
                if tf.first_init_before(order, seq, gi).is_some() {
                    continue;
                }
                let pair = here_logical.iter().find_map(|&(k, li)| {
                    let l = &logical[k];
                    if !comparable(m, l, g) || !l.device.same_gpu(&g.device) {
                        return None;
                    }
                    if order.exclusive(&events[li], &events[gi])
                        || tf.first_init_before(order, seq, li).is_some()
                    {
                        return None;
                    }
                    Some((l, li < gi))
                });
                let Some((l, logical_first)) = pair else {
                    continue;
                };
                reported.insert(g.call.id());
                ctx.report(diagnostic(ctx, g, l, logical_first));
            }
        }
    }
}

fn diagnostic<'c>(
    ctx: &Context<'c>,
    g: &Config<'_>,
    l: &Config<'_>,
    logical_first: bool,
) -> gpulint_diagnostics::Diagnostic {
    let callee = g
        .call
        .field("function")
        .map(|f| ctx.text(f))
        .unwrap_or("set_memory_growth");
    let key = g.device.describe();
    if logical_first {
        return ctx
            .diagnostic(g.call, format!("`{callee}` enables memory growth on {key}, which already has logical devices: TensorFlow raises ValueError"))
            .primary_label("raises ValueError: a GPU with logical devices cannot grow")
            .with_label(Span::of(&l.call), format!("logical devices are configured on {} first, here", l.device.describe()))
            .note("`Cannot set memory growth on device when virtual devices configured`: the two settings exclude each other")
            .help("keep only one: bound the memory with `memory_limit=` in the logical device configuration and drop `set_memory_growth` for that GPU");
    }
    ctx.diagnostic(g.call, format!("`{callee}` enables memory growth on {key}, but logical devices are configured on it afterwards: TensorFlow silently drops the growth setting"))
        .severity(Severity::Info)
        .primary_label("has no effect once logical devices exist")
        .with_label(Span::of(&l.call), format!("logical devices are configured on {} here", l.device.describe()))
        .note("with logical devices configured, TensorFlow builds its GPU options without `allow_growth`: each logical device reserves its `memory_limit`; running this configuration twice raises ValueError")
        .help("keep only one: bound the memory with `memory_limit=` in the logical device configuration and drop `set_memory_growth` for that GPU")
}
