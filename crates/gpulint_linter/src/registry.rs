//! The only list of rules, and the per-language dispatch tables built from the enabled ones.

use crate::rule::{Rule, RuleLang, RuleMeta};
use crate::rules;
use aho_corasick::automaton::Automaton;
use aho_corasick::AhoCorasick;
use gpulint_syntax::{kind_ids, Lang};
use std::collections::BTreeSet;

/// Every rule with a check, in code order.
pub static RULES: &[&dyn Rule] = &[
    &rules::cuda::cu001_unguarded_thread_index::UnguardedThreadIndex,
    &rules::cuda::cu002_guard_index_mismatch::GuardIndexMismatch,
    &rules::cuda::cu003_int32_index::Int32ThreadIndex,
    &rules::cuda::cu004_large_local_array::LargeLocalArray,
    &rules::cuda::cu005_device_recursion::DeviceRecursion,
    &rules::cuda::cu006_shared_memory_limit::SharedMemoryLimit,
    &rules::cuda::cu007_launch_config_limits::LaunchConfigLimits,
    &rules::cuda::cu008_divergent_barrier::DivergentBarrier,
    &rules::cuda::cu009_unchecked_launch::UncheckedKernelLaunch,
    &rules::cuda::cu010_unchecked_runtime_call::UncheckedRuntimeCall,
    &rules::cuda::cu011_default_stream_in_op::DefaultStreamInOp,
    &rules::cuda::cu012_array_index_out_of_extent::ArrayIndexOutOfExtent,
    &rules::cuda::op001_unvalidated_tensor_pointer::UnvalidatedTensorPointer,
    &rules::cuda::op002_non_contiguous_data_ptr::NonContiguousDataPtr,
    &rules::cuda::op003_unchecked_dtype_cast::UncheckedDtypeCast,
    &rules::cuda::op004_missing_device_guard::MissingDeviceGuard,
    &rules::cuda::op005_tf_op_missing_validation::TfOpMissingValidation,
    &rules::python::jx001_jax_preallocation_conflict::JaxPreallocationConflict,
    &rules::python::jx002_late_jax_allocator_env::LateJaxAllocatorEnv,
    &rules::python::jx003_jit_in_loop::JitInLoop,
    &rules::python::pt001_accumulated_loss_graph::AccumulatedLossGraph,
    &rules::python::pt002_stored_graph_tensor::StoredGraphTensor,
    &rules::python::pt003_eval_without_no_grad::EvalWithoutNoGrad,
    &rules::python::pt004_retain_graph_in_loop::RetainGraphInLoop,
    &rules::python::pt005_oom_retry_in_except::OomRetryInExcept,
    &rules::python::pt006_invalid_alloc_conf::InvalidAllocConf,
    &rules::python::pt007_empty_cache_in_loop::EmptyCacheInLoop,
    &rules::python::pt008_dataloader_without_main_guard::DataloaderWithoutMainGuard,
    &rules::python::pt009_cuda_in_dataloader_worker::CudaInDataloaderWorker,
    &rules::python::pt010_cudnn_benchmark_variable_shapes::CudnnBenchmarkVariableShapes,
    &rules::python::pt011_fp16_autocast_without_scaler::Fp16AutocastWithoutScaler,
    &rules::python::pt012_dataloader_host_memory::DataloaderHostMemory,
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
    &rules::python::mem001_training_step_over_budget::TrainingStepOverBudget,
    &rules::python::mem002_huge_tensor_allocation::HugeTensorAllocation,
    &rules::manifest::mf001_tensorflow_python_mismatch::TensorflowPythonMismatch,
    &rules::manifest::mf002_tensorflow_windows_gpu::TensorflowWindowsGpu,
    &rules::manifest::mf003_tensorflow_gpu_package::TensorflowGpuPackage,
    &rules::manifest::mf004_cuda_cudnn_mismatch::CudaCudnnMismatch,
    &rules::manifest::mf005_torch_wheel_missing::TorchWheelMissing,
    &rules::manifest::mf006_mixed_cuda_majors::MixedCudaMajors,
    &rules::manifest::mf007_cudnn_windows_zlib::CudnnWindowsZlib,
    &rules::manifest::mf008_jax_windows_gpu::JaxWindowsGpu,
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

/// The enabled manifest rules (MF), in code order.
pub fn manifest_rules(settings: &crate::settings::Settings) -> Vec<&'static dyn Rule> {
    RULES
        .iter()
        .copied()
        .filter(|r| r.reads_manifests() && settings.is_enabled(r.meta().code))
        .collect()
}

/// Metadata of every rule, tool rules included, sorted by code.
pub fn all_metas() -> Vec<&'static RuleMeta> {
    ALL_METAS.clone()
}

static ALL_METAS: std::sync::LazyLock<Vec<&'static RuleMeta>> = std::sync::LazyLock::new(|| {
    let mut v: Vec<&'static RuleMeta> = RULES.iter().map(|r| r.meta()).collect();
    v.extend(TOOL_RULES.iter().copied());
    v.sort_by_key(|m| m.code);
    v
});

/// A rule by code (`cu001` works) or by name (`unguarded-thread-index`).
pub fn find(code_or_name: &str) -> Option<&'static RuleMeta> {
    ALL_METAS
        .iter()
        .copied()
        .find(|m| m.code.eq_ignore_ascii_case(code_or_name) || m.name == code_or_name)
}

/// A set of the rules of one [`RuleTable`], by their index in [`RuleTable::rules`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RuleSet(u128);

impl RuleSet {
    /// The most rules one language's table can hold.
    pub const CAPACITY: usize = 128;

    #[inline]
    pub fn contains(self, index: usize) -> bool {
        self.0 >> index & 1 == 1
    }

    #[inline]
    fn insert(&mut self, index: usize) {
        self.0 |= 1 << index;
    }

    #[inline]
    fn union(self, other: RuleSet) -> RuleSet {
        RuleSet(self.0 | other.0)
    }

    #[inline]
    fn intersection(self, other: RuleSet) -> RuleSet {
        RuleSet(self.0 & other.0)
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

/// The enabled rules of one language, dispatched by node-kind id.
pub struct RuleTable {
    pub lang: Lang,
    rules: Vec<&'static dyn Rule>,
    /// Per node-kind id: the rules that want it, with their index in `rules`.
    by_kind: Vec<Vec<(usize, &'static dyn Rule)>>,
    /// A file can only matter if it contains one of these (none: no needles at all).
    needles: Option<AhoCorasick>,
    /// The patterns of `needles` and of every rule's `also_needles`, in order of `needle_rules`.
    /// A DFA searched through the `Automaton` trait: `AhoCorasick` calls its automaton through
    /// a trait object once per byte, three times slower on the full scan this needs.
    all_needles: Option<aho_corasick::dfa::DFA>,
    /// Every rule of the table.
    all: RuleSet,
    /// Per pattern of `needles`: the rules whose `needles` hold it, and those whose
    /// `also_needles` hold it.
    needle_rules: Vec<(RuleSet, RuleSet)>,
    /// The rules without `needles`, and those without `also_needles`: for them that condition
    /// holds in every file.
    unconditional: (RuleSet, RuleSet),
    /// Rules are run only on the files that hold their needles (Python). CUDA rules run on
    /// every parsed file: their needles are not exact (a device function declared through a
    /// specifier macro such as `DS_D_INLINE` has none of `__device__` and `DEVICE`), so they
    /// only decide whether a file is parsed.
    gate_rules: bool,
    parse_always: bool,
    comment_kinds: Vec<u16>,
}

impl RuleTable {
    /// The table for `lang` with the rules whose codes are in `enabled`. `extra_needles` are
    /// byte strings that make a file worth parsing in any case (suppressions to verify), each
    /// with the code of the rule it also lets run (`None`: no rule of its own).
    pub fn new(
        lang: Lang,
        enabled: &BTreeSet<&'static str>,
        extra_needles: &[(&str, Option<&str>)],
    ) -> RuleTable {
        let rules: Vec<&'static dyn Rule> = RULES
            .iter()
            .copied()
            .filter(|r| r.meta().lang == RuleLang::Source(lang) && enabled.contains(r.meta().code))
            .collect();
        assert!(
            rules.len() <= RuleSet::CAPACITY,
            "more rules for {} than a RuleSet holds",
            lang.as_str()
        );
        let count = lang.grammar().map_or(0, |g| g.node_kind_count());
        let mut by_kind: Vec<Vec<(usize, &'static dyn Rule)>> = vec![Vec::new(); count];
        for (i, rule) in rules.iter().enumerate() {
            for kind in rule.meta().kinds {
                for id in kind_ids(lang, kind) {
                    by_kind[id as usize].push((i, *rule));
                }
            }
        }
        let parse_always = rules.iter().any(|r| r.meta().needles.is_empty());
        // Each needle once, with the rules it lets run. Only `needles` (and the extra needles)
        // make a file worth parsing.
        let mut by_needle: std::collections::BTreeMap<&str, (RuleSet, RuleSet, bool)> =
            Default::default();
        let mut unconditional = (RuleSet::default(), RuleSet::default());
        let mut all = RuleSet::default();
        for (i, rule) in rules.iter().enumerate() {
            let m = rule.meta();
            all.insert(i);
            if m.needles.is_empty() {
                unconditional.0.insert(i);
            }
            if m.also_needles.is_empty() {
                unconditional.1.insert(i);
            }
            for n in m.needles {
                let e = by_needle.entry(n).or_default();
                e.0.insert(i);
                e.2 = true;
            }
            for n in m.also_needles {
                by_needle.entry(n).or_default().1.insert(i);
            }
        }
        for (n, code) in extra_needles {
            let e = by_needle.entry(n).or_default();
            e.2 = true;
            if let Some(i) = code.and_then(|c| rules.iter().position(|r| r.meta().code == c)) {
                e.0.insert(i);
            }
        }
        by_needle.retain(|n, _| !n.is_empty());
        let patterns: Vec<&str> = by_needle.keys().copied().collect();
        let needle_rules: Vec<(RuleSet, RuleSet)> =
            by_needle.values().map(|(a, b, _)| (*a, *b)).collect();
        let prefilter: Vec<&str> = by_needle
            .iter()
            .filter(|(_, (_, _, parse))| *parse)
            .map(|(n, _)| *n)
            .collect();
        let build = |p: &[&str]| {
            (!p.is_empty()).then(|| AhoCorasick::new(p).expect("needles build an automaton"))
        };
        let needles = build(&prefilter);
        let all_needles = (!patterns.is_empty())
            .then(|| aho_corasick::dfa::DFA::new(&patterns).expect("needles build an automaton"));
        RuleTable {
            lang,
            rules,
            by_kind,
            needles,
            all_needles,
            needle_rules,
            unconditional,
            gate_rules: lang == Lang::Python,
            all,
            parse_always,
            comment_kinds: kind_ids(lang, "comment"),
        }
    }

    /// Parse every file of this language, whatever the needles say (GL003 selected by name:
    /// the user asks about parsing itself).
    pub fn parse_every_file(mut self) -> RuleTable {
        self.parse_always = true;
        self
    }

    /// The rules that want nodes of this kind, with their index in [`RuleTable::rules`].
    #[inline]
    pub fn rules_for(&self, kind_id: u16) -> &[(usize, &'static dyn Rule)] {
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

    /// The rules that can report something in a file with this text: those without needles
    /// and those with a needle the text contains (one pass over the text for all of them).
    /// A rule left out could not fire there, so it is not run.
    pub fn rules_for_text(&self, text: &str) -> RuleSet {
        if !self.gate_rules {
            return self.all;
        }
        let (mut first, mut second) = self.unconditional;
        if let Some(ac) = &self.all_needles {
            let mut seen = vec![false; self.needle_rules.len()];
            let mut left = seen.len();
            let matches = ac
                .try_find_overlapping_iter(aho_corasick::Input::new(text))
                .expect("an unanchored search of standard semantics");
            for m in matches {
                let p = m.pattern().as_usize();
                if !seen[p] {
                    seen[p] = true;
                    first = first.union(self.needle_rules[p].0);
                    second = second.union(self.needle_rules[p].1);
                    left -= 1;
                    if left == 0 || (first == self.all && second == self.all) {
                        break;
                    }
                }
            }
        }
        first.intersection(second)
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
                assert!(
                    m.lang == RuleLang::Manifest,
                    "{} has a check but no language",
                    m.code
                );
                assert!(
                    m.kinds.is_empty(),
                    "{}: manifest rules have no node kinds",
                    m.code
                );
                continue;
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
    fn rules_run_only_on_files_with_their_needles() {
        let enabled: BTreeSet<&'static str> = RULES.iter().map(|r| r.meta().code).collect();
        let python = RuleTable::new(Lang::Python, &enabled, &[]);
        let index = |code: &str| {
            python
                .rules()
                .iter()
                .position(|r| r.meta().code == code)
                .unwrap()
        };
        // A framework's name without a training call: no training step to estimate.
        let set = python.rules_for_text("import torch\nnet = torch.nn.Linear(4, 4)\n");
        assert!(set.contains(index("PT001")));
        assert!(!set.contains(index("MEM001")));
        assert!(!set.contains(index("TF002")));
        // Both conditions of MEM001.
        let set = python.rules_for_text("import torch\nloss.backward()\n");
        assert!(set.contains(index("MEM001")));
        let set = python.rules_for_text("loss.backward()\n");
        assert!(!set.contains(index("MEM001")));
        // A needle inside another word counts (`tf_keras` holds `keras`).
        let set = python.rules_for_text("import tf_keras\n");
        assert!(set.contains(index("KR001")) && set.contains(index("TF012")));
        // CUDA rules run on every parsed file.
        let cuda = RuleTable::new(Lang::Cuda, &enabled, &[]);
        let set = cuda.rules_for_text("int main() { return 0; }\n");
        assert!((0..cuda.rules().len()).all(|i| set.contains(i)));
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
