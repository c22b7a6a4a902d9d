//! The only list of rules, and the per-language dispatch tables built from the enabled ones.

use crate::lang::{kind_ids, Lang};
use crate::rule::{Rule, RuleLang, RuleMeta};
use crate::rules;
use aho_corasick::AhoCorasick;
use std::collections::BTreeSet;

/// Every rule with a check, in code order.
pub static RULES: &[&dyn Rule] = &[
    &rules::cuda::cu001_unguarded_thread_index::UnguardedThreadIndex,
    &rules::cuda::cu002_guard_index_mismatch::GuardIndexMismatch,
    &rules::python::ds001_dataset_on_device::DatasetOnDevice,
    &rules::python::kr001_models_in_loop::ModelsInLoop,
    &rules::python::kr002_mixed_float16_without_loss_scale::MixedFloat16WithoutLossScale,
    &rules::python::kr003_float16_softmax_output::Float16SoftmaxOutput,
    &rules::python::kr004_legacy_mixed_precision_api::LegacyMixedPrecisionApi,
    &rules::python::kr005_predict_in_loop::PredictInLoop,
    &rules::python::py001_unbounded_recursion::UnboundedRecursion,
    &rules::python::py002_recursion_limit_without_stack::RecursionLimitWithoutStack,
    &rules::python::tf001_memory_config_after_init::MemoryConfigAfterInit,
    &rules::python::tf002_missing_memory_growth::MissingMemoryGrowth,
    &rules::python::tf003_memory_growth_not_uniform::MemoryGrowthNotUniform,
    &rules::python::tf004_memory_growth_with_virtual_devices::MemoryGrowthWithVirtualDevices,
    &rules::python::tf005_unknown_optimizer_option::UnknownOptimizerOption,
    &rules::python::tf006_numpy_in_tf_function::NumpyInTfFunction,
    &rules::python::tf007_huge_constant::HugeConstantFromNumpy,
    &rules::python::tf008_retracing_python_values::RetracingPythonValues,
    &rules::python::tf009_tf_function_in_loop::TfFunctionInLoop,
    &rules::python::tf010_tf_function_side_effect::TfFunctionSideEffect,
    &rules::python::tf011_recursive_tf_function::RecursiveTfFunction,
    &rules::python::tf012_tf1_api_in_tf2::Tf1ApiInTf2,
    &rules::python::tf013_gpu_env_after_init::GpuEnvAfterInit,
];

/// Findings the engine reports itself.
pub static TOOL_RULES: &[&RuleMeta] = &[
    &rules::tool::GL001,
    &rules::tool::GL002,
    &rules::tool::GL003,
];

/// Metadata of every rule, tool rules included, sorted by code.
pub fn all_metas() -> Vec<&'static RuleMeta> {
    let mut v: Vec<&'static RuleMeta> = RULES.iter().map(|r| r.meta()).collect();
    v.extend(TOOL_RULES.iter().copied());
    v.sort_by_key(|m| m.code);
    v
}

/// A rule by code (`cu001` works) or by name (`unguarded-thread-index`).
pub fn find(code_or_name: &str) -> Option<&'static RuleMeta> {
    all_metas()
        .into_iter()
        .find(|m| m.code.eq_ignore_ascii_case(code_or_name) || m.name == code_or_name)
}

/// The enabled rules of one language, dispatched by node-kind id.
pub struct RuleTable {
    pub lang: Lang,
    rules: Vec<&'static dyn Rule>,
    by_kind: Vec<Vec<&'static dyn Rule>>,
    /// A file can only matter if it contains one of these (none: no rule of this language is
    /// enabled that could fire without a needle, so every file is parsed).
    needles: Option<AhoCorasick>,
    parse_always: bool,
    comment_kinds: Vec<u16>,
}

impl RuleTable {
    /// The table for `lang` with the rules whose codes are in `enabled`. `extra_needles` are
    /// byte strings that make a file worth parsing in any case (suppressions to verify).
    pub fn new(lang: Lang, enabled: &BTreeSet<&'static str>, extra_needles: &[&str]) -> RuleTable {
        let rules: Vec<&'static dyn Rule> = RULES
            .iter()
            .copied()
            .filter(|r| r.meta().lang == RuleLang::Source(lang) && enabled.contains(r.meta().code))
            .collect();
        let count = lang.grammar().node_kind_count();
        let mut by_kind: Vec<Vec<&'static dyn Rule>> = vec![Vec::new(); count];
        for rule in &rules {
            for kind in rule.meta().kinds {
                for id in kind_ids(lang, kind) {
                    by_kind[id as usize].push(*rule);
                }
            }
        }
        let parse_always = rules.iter().any(|r| r.meta().needles.is_empty());
        let mut needles: Vec<&str> = rules
            .iter()
            .flat_map(|r| r.meta().needles.iter().copied())
            .collect();
        needles.extend_from_slice(extra_needles);
        needles.sort_unstable();
        needles.dedup();
        let needles = if parse_always || needles.is_empty() {
            None
        } else {
            AhoCorasick::new(&needles).ok()
        };
        RuleTable {
            lang,
            rules,
            by_kind,
            needles,
            parse_always,
            comment_kinds: kind_ids(lang, "comment"),
        }
    }

    #[inline]
    pub fn wants(&self, kind_id: u16) -> bool {
        self.by_kind
            .get(kind_id as usize)
            .is_some_and(|r| !r.is_empty())
    }

    #[inline]
    pub fn rules_for(&self, kind_id: u16) -> &[&'static dyn Rule] {
        self.by_kind
            .get(kind_id as usize)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    #[inline]
    pub fn is_comment(&self, kind_id: u16) -> bool {
        self.comment_kinds.contains(&kind_id)
    }

    pub fn rules(&self) -> &[&'static dyn Rule] {
        &self.rules
    }

    /// Could any enabled rule report something in a file with this text?
    pub fn may_match(&self, text: &str) -> bool {
        if self.parse_always {
            return true;
        }
        match &self.needles {
            Some(ac) => ac.is_match(text),
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn every_rule_kind_exists_in_its_grammar() {
        for rule in RULES {
            let m = rule.meta();
            let RuleLang::Source(lang) = m.lang else {
                panic!("{} has a check but no language", m.code);
            };
            for kind in m.kinds {
                assert!(
                    !kind_ids(lang, kind).is_empty(),
                    "{}: node kind `{kind}` does not exist in the {} grammar",
                    m.code,
                    lang.as_str()
                );
            }
        }
    }

    #[test]
    fn codes_and_names_are_unique_and_well_formed() {
        let mut codes = HashSet::new();
        let mut names = HashSet::new();
        for m in all_metas() {
            assert!(codes.insert(m.code), "duplicate code {}", m.code);
            assert!(names.insert(m.name), "duplicate name {}", m.name);
            assert!(
                m.code.len() >= 5
                    && m.code[..m.code.len() - 3]
                        .bytes()
                        .all(|b| b.is_ascii_uppercase())
                    && m.code[m.code.len() - 3..]
                        .bytes()
                        .all(|b| b.is_ascii_digit()),
                "bad code {}",
                m.code
            );
            assert!(
                m.name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b == b'-' || b.is_ascii_digit()),
                "name {} is not kebab-case",
                m.name
            );
            let doc = m.doc_markdown();
            for section in [
                "## What it does",
                "## Why is this risky?",
                "## Example",
                "## Use instead",
                "## References",
            ] {
                assert!(doc.contains(section), "{} doc lacks `{section}`", m.code);
            }
        }
    }
}
