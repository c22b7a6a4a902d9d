//! Plumbing shared by the op-glue rules (OP001–OP004): the caller resolver, built once per
//! file and only when a rule is about to report, and the callers it saw, for messages.

use crate::context::Context;
use gpulint_diagnostics::Diagnostic;
use gpulint_semantic::cuda::glue_project::{describe_callers, Resolver};
use std::path::PathBuf;

/// A caller as the resolver reports it: its name and, for another file, its path.
pub(crate) type Caller = (String, Option<PathBuf>);

/// The caller resolver of the file being checked, built on first use (it reads the files
/// next to it).
pub(crate) struct LazyResolver<'a> {
    resolver: Option<Resolver<'a>>,
    /// Functions bound to Python whose Python side is trusted (the rule's option).
    trusted: &'a [String],
}

impl<'a> LazyResolver<'a> {
    pub(crate) fn new(trusted: &'a [String]) -> Self {
        LazyResolver {
            resolver: None,
            trusted,
        }
    }

    /// The resolver for `ctx`'s file.
    pub(crate) fn get(&mut self, ctx: &Context<'_>) -> &Resolver<'a> {
        let trusted = self.trusted;
        self.resolver.get_or_insert_with(|| {
            Resolver::new(
                &ctx.cuda().glue.facts,
                &ctx.file.path,
                &ctx.settings.semantic_options(),
                trusted,
            )
        })
    }
}

/// Adds the callers not listed yet, in order.
pub(crate) fn merge_callers(callers: &mut Vec<Caller>, more: Vec<Caller>) {
    for c in more {
        if !callers.contains(&c) {
            callers.push(c);
        }
    }
}

/// Notes the Python calls that pass the tensor without property `prop` (`what`: "make it
/// contiguous"), when the run saw the Python callers.
pub(crate) fn python_note(
    d: Diagnostic,
    python: &[(String, u8)],
    prop: u8,
    what: &str,
) -> Diagnostic {
    let lacking: Vec<&str> = python
        .iter()
        .filter(|(_, p)| p & prop == 0)
        .map(|(s, _)| s.as_str())
        .collect();
    if lacking.is_empty() {
        return d;
    }
    d.note(format!(
        "its Python {} at {} {} not {what}",
        if lacking.len() == 1 { "call" } else { "calls" },
        lacking.join(", "),
        if lacking.len() == 1 { "does" } else { "do" },
    ))
}

/// Notes the callers that were followed, when there are any: "its callers `a` (a.cpp) {what}".
pub(crate) fn callers_note(d: Diagnostic, callers: &[Caller], what: &str) -> Diagnostic {
    if callers.is_empty() {
        return d;
    }
    d.note(format!("its callers {} {what}", describe_callers(callers)))
}
