//! Device and memory configuration calls: the TF001 configuration functions, memory growth
//! and limits, TF1 `GPUOptions`/`ConfigProto`, and hiding every GPU.

use super::{argument, ConfigFn, MemoryConfig, TfFacts};
use crate::python::{string_literal, PythonModel};
use gpulint_syntax::NodeExt;
use gpulint_syntax::{descendants, named_children};
use tree_sitter::Node;

impl<'t> TfFacts<'t> {
    pub(super) fn classify_config(&mut self, m: &PythonModel<'t>, call: Node<'t>, q: Option<&str>) {
        let config = match q {
            Some("tensorflow.config.experimental.set_memory_growth") => {
                Some(ConfigFn::MemoryGrowth)
            }
            Some(
                "tensorflow.config.set_visible_devices"
                | "tensorflow.config.experimental.set_visible_devices",
            ) => Some(ConfigFn::VisibleDevices),
            Some(
                "tensorflow.config.set_logical_device_configuration"
                | "tensorflow.config.experimental.set_logical_device_configuration"
                | "tensorflow.config.experimental.set_virtual_device_configuration",
            ) => Some(ConfigFn::LogicalDevices),
            _ => None,
        };
        if let Some(c) = config {
            self.configs.insert(call.id(), c);
            self.config_calls.push((call, c));
        }
        let last = call
            .field("function")
            .map(|f| match f.kind_name() {
                "attribute" => f.field("attribute").map(|a| m.text(a)).unwrap_or(""),
                _ => m.text(f),
            })
            .unwrap_or("");
        let growth_arg = match (config, last) {
            (Some(ConfigFn::MemoryGrowth), _) | (None, "set_memory_growth") => Some(1),
            // A project helper such as `enable_memory_growth()` or `set_gpu_memory_growth(True)`.
            (None, l) if l.contains("memory_growth") => Some(0),
            _ => None,
        };
        if let Some(i) = growth_arg {
            if !folds_false(m, argument(call, i, "enable", m)) {
                self.memory_config.push((call, MemoryConfig::Growth));
            }
        }
        if config == Some(ConfigFn::LogicalDevices) && has_keyword(m, call, &["memory_limit"]) {
            self.memory_config.push((call, MemoryConfig::Limit));
        }
        if config.is_none()
            && matches!(last, "GPUOptions" | "ConfigProto")
            && has_keyword(
                m,
                call,
                &["allow_growth", "per_process_gpu_memory_fraction"],
            )
        {
            self.memory_config.push((call, MemoryConfig::Tf1));
        }
        if config == Some(ConfigFn::VisibleDevices) {
            let devices = argument(call, 0, "devices", m);
            let kind =
                argument(call, 1, "device_type", m).and_then(|k| string_literal(k, m.source));
            let hides_gpus = devices.is_some_and(|d| {
                (matches!(d.kind_name(), "list" | "tuple")
                    && named_children(d).all(|c| c.kind_name() == "comment"))
                    || (d.kind_name() == "call"
                        && m.call_name(d)
                            .is_some_and(|n| n.ends_with("list_physical_devices"))
                        && argument(d, 0, "device_type", m)
                            .and_then(|a| string_literal(a, m.source))
                            .is_some_and(|s| s.eq_ignore_ascii_case("CPU")))
            });
            if hides_gpus && kind.is_none_or(|k| k.eq_ignore_ascii_case("GPU")) {
                self.cpu_only.push(call);
            }
        }
    }
}

/// Does the expression fold to a false value?
pub(super) fn folds_false(m: &PythonModel<'_>, expr: Option<Node<'_>>) -> bool {
    expr.and_then(|e| m.const_value(e))
        .is_some_and(|v| !v.truthy())
}

/// Is there a keyword argument `name` anywhere in the call's arguments (nested calls included)?
fn has_keyword(m: &PythonModel<'_>, call: Node<'_>, names: &[&str]) -> bool {
    let Some(args) = call.field("arguments") else {
        return false;
    };
    descendants(args).any(|n| {
        n.kind_name() == "keyword_argument"
            && n.field("name").is_some_and(|k| names.contains(&m.text(k)))
            && !folds_false(m, n.field("value"))
    })
}
