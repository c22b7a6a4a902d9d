//! Rule selection: which rules a [`Settings`] enables, from selectors (`ALL`, a prefix, a
//! code or a rule name) resolved against the registry of every rule.

use crate::registry;
use crate::settings::{BudgetOrigin, Selector, Settings, DEFAULT_GPU_MEMORY, MAX_FILE_SIZE};
use gpulint_diagnostics::Severity;
use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;

impl Selector {
    /// Parses a selector; errors name what was expected.
    pub fn parse(s: &str) -> Result<Selector, String> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("ALL") {
            return Ok(Selector("ALL".into()));
        }
        let upper = s.to_ascii_uppercase();
        if let Some(m) = registry::all_metas().into_iter().find(|m| m.name == s) {
            return Ok(Selector(m.code.to_string()));
        }
        if upper.is_empty()
            || !registry::all_metas()
                .iter()
                .any(|m| m.code.starts_with(&upper))
        {
            return Err(format!(
                "unknown rule selector `{s}`: expected `ALL`, a rule code (e.g. `TF002`), a code prefix (e.g. `CU`), or a rule name (see `gpulint rules`)"
            ));
        }
        Ok(Selector(upper))
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings::with_selection(&[Selector("ALL".into())], &[], &[])
    }
}

impl Settings {
    /// Settings that enable `select ∪ extend_select − ignore`.
    pub fn with_selection(
        select: &[Selector],
        extend_select: &[Selector],
        ignore: &[Selector],
    ) -> Settings {
        let mut enabled = BTreeSet::new();
        let mut explicit = BTreeSet::new();
        for m in registry::all_metas() {
            let on = select
                .iter()
                .chain(extend_select)
                .any(|s| s.matches(m.code));
            let off = ignore.iter().any(|s| s.matches(m.code));
            if on && !off {
                enabled.insert(m.code);
            }
            if select
                .iter()
                .chain(extend_select)
                .any(|s| s.is_exact(m.code))
            {
                explicit.insert(m.code);
            }
        }
        Settings {
            enabled,
            explicit,
            per_file_ignores: Vec::new(),
            root: PathBuf::from("."),
            rule_options: HashMap::new(),
            fail_on: Severity::Warning,
            gpu_memory: DEFAULT_GPU_MEMORY,
            gpu_memory_origin: BudgetOrigin::Default,
            verbose: false,
            max_file_size: MAX_FILE_SIZE,
            roots: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selection() {
        let all = Settings::default();
        assert!(all.is_enabled("GL001"));
        let gl = Settings::with_selection(
            &[Selector::parse("GL").unwrap()],
            &[],
            &[Selector::parse("GL001").unwrap()],
        );
        assert!(!gl.is_enabled("GL001"));
        assert!(gl.is_enabled("GL002"));
        assert!(Selector::parse("XX9").is_err());
        assert_eq!(
            Selector::parse("unused-suppression").unwrap().as_str(),
            "GL001"
        );
    }
}
