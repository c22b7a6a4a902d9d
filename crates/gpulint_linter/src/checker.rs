//! The single walk over a file's syntax tree, and the rule runs over its nodes and over
//! manifests.
//!
//! One iterative `TreeCursor` walk per file feeds the semantic model builder and records the
//! nodes that enabled rules asked for (by node-kind id). Rules then run over those nodes in
//! document order with the complete semantic model, so a rule can ask about a function defined
//! further down the file without walking the tree again.

pub use crate::context::Context;
use crate::manifest_context::ManifestContext;
use crate::registry::{RuleSet, RuleTable};
use crate::rule::Rule;
use crate::settings::Settings;
use gpulint_diagnostics::{Diagnostic, Span};
use gpulint_manifest::{env, Manifest};
use gpulint_semantic::Model;
use gpulint_source::budget;
use gpulint_source::SourceFile;
use gpulint_syntax::Lang;
use tree_sitter::{Node, Tree};

/// What the walk learned about the parse itself.
#[derive(Debug, Default)]
pub struct ParseInfo {
    /// Spans of ERROR and MISSING nodes, in document order.
    pub error_spans: Vec<Span>,
    /// Spans of comments, for suppressions.
    pub comments: Vec<Span>,
    /// What a `setup.py` declares (`install_requires`, …), for the manifest rules; read from
    /// the Python model when those rules are enabled.
    pub manifest: Option<gpulint_manifest::Manifest>,
    /// The native extensions a Python file builds (`CUDAExtension`, `load`, …), read from the
    /// Python model when the file mentions one of [`extensions::NEEDLES`](gpulint_semantic::python::extensions::NEEDLES).
    pub extensions: Vec<gpulint_semantic::python::extensions::ExtensionBuild>,
    /// The calls a Python file makes into extension modules, read when an op-glue rule is
    /// enabled and the file mentions torch.
    pub ext_calls: Vec<gpulint_semantic::python::ext_calls::ExtCall>,
}

/// The op-glue rules that weigh what Python callers pass (see `glue_python`).
const PYTHON_CALLER_RULES: &[&str] = &["OP001", "OP002", "OP003", "OP004"];

/// Are Python files read for their calls into extension modules?
pub fn reads_python_callers(settings: &Settings) -> bool {
    PYTHON_CALLER_RULES.iter().any(|c| settings.is_enabled(c))
}

/// Does the check of a Python file of text `text` collect its calls into extension modules
/// ([`ParseInfo::ext_calls`])? Only a file that mentions torch, under settings that read them.
pub fn collects_ext_calls(settings: &Settings, text: &[u8]) -> bool {
    reads_python_callers(settings) && memchr::memmem::find(text, b"torch").is_some()
}

/// Runs the enabled rules of `table` over one parsed file: one tree, or one per notebook cell
/// (sharing the file's text).
///
/// The work is metered (see [`gpulint_source::budget`]): when the file's budget runs out, the
/// findings of the rule run it ran out in are dropped, the rule runs not yet done are skipped,
/// and a GL003 finding says where the analysis stopped. Everything found before stays.
///
/// `first_clean`: the file is a CUDA/C++ file on disk and `trees` is its first parse, without
/// error; its glue facts are then shared with the files next to it (see
/// [`gpulint_semantic::cuda::glue_project::share`]), and its header facts with the files that
/// include it (see [`gpulint_semantic::cuda::headers::share`]).
pub fn check_tree(
    file: &SourceFile,
    trees: &[Tree],
    lang: Lang,
    table: &RuleTable,
    settings: &Settings,
    first_clean: bool,
) -> (Vec<Diagnostic>, ParseInfo) {
    let ((mut diagnostics, info, skipped), _, stop) =
        budget::metered(budget::for_file(file.text.len()), || {
            check_tree_metered(file, trees, lang, table, settings, first_clean)
        });
    if let Some(stop) = stop {
        diagnostics.push(stopped(file, stop, skipped));
    }
    (diagnostics, info)
}

/// The GL003 finding of a file whose work budget ran out.
fn stopped(file: &SourceFile, stop: budget::Stop, skipped: usize) -> Diagnostic {
    // A whole-file analysis stopped outside any tree walk: its place is unknown.
    let at = if stop.at == budget::UNKNOWN {
        0
    } else {
        stop.at.min(file.text.len())
    };
    let (line, _) = file.position(at);
    Diagnostic::new(
        &crate::rules::tool::GL003,
        Span::new(at, at),
        format!(
            "analysis stopped at line {line}, in {}: the file's work budget ({} units for {} bytes) ran out; {} rule run{} not done, so findings may be missing",
            stop.analysis,
            budget::for_file(file.text.len()),
            file.text.len(),
            skipped,
            if skipped == 1 { " was" } else { "s were" },
        ),
    )
    .primary_label("the analysis stopped here")
    .help("split the file, or exclude it if it is generated; please report the file so that the analysis can be made linear")
}

/// [`check_tree`] on the current budget; also returns how many rule runs were skipped.
fn check_tree_metered(
    file: &SourceFile,
    trees: &[Tree],
    lang: Lang,
    table: &RuleTable,
    settings: &Settings,
    first_clean: bool,
) -> (Vec<Diagnostic>, ParseInfo, usize) {
    budget::enter("the semantic model", budget::UNKNOWN);
    let mut builder =
        gpulint_semantic::Builder::new(lang, &file.text, &settings.semantic_options());
    let mut info = ParseInfo::default();
    let mut wanted: Vec<Node<'_>> = Vec::new();

    // The rules that can fire in this text; the others are not run (their needles are absent).
    let active = table.rules_for_text(&file.text);
    for tree in trees {
        walk_tree(tree, table, active, &mut builder, &mut info, &mut wanted);
    }

    let mut model = builder.finish(trees);
    if let Model::Cuda(cuda) = &mut model {
        if first_clean {
            // The files next to it read its glue facts from here, not from a parse of their own;
            // the files that include a header, its header facts.
            gpulint_semantic::cuda::glue_project::share(&file.path, &file.text, &cuda.glue.facts);
            if settings.semantic_options() == gpulint_semantic::Options::default() {
                gpulint_semantic::cuda::headers::share_model(
                    &file.path, &file.text, &trees[0], cuda,
                );
            } else {
                gpulint_semantic::cuda::headers::share(&file.path, &file.text, &trees[0]);
            }
        }
        cuda.read_headers(&file.path);
    }
    if let Model::Python(python) = &model {
        if gpulint_syntax::kind::is_setup_py(&file.path)
            && !crate::registry::manifest_rules(settings).is_empty()
        {
            info.manifest = gpulint_semantic::python::setup_py::extract(python);
        }
        if gpulint_semantic::python::extensions::may_define_builds(file.text.as_bytes()) {
            info.extensions = gpulint_semantic::python::extensions::collect(python, &file.path);
        }
        if collects_ext_calls(settings, file.text.as_bytes()) {
            info.ext_calls = gpulint_semantic::python::ext_calls::collect(python);
        }
    }
    let tree = &trees[0];
    let mut diagnostics = Vec::new();
    let mut skipped = 0;
    // Each rule runs with a context of its own; its findings are appended, unless the work
    // budget ran out during the run (they may rest on a walk cut short); once it has, the
    // remaining runs are skipped.
    let mut run =
        |rule: &'static dyn Rule, at: usize, check: &dyn Fn(&dyn Rule, &mut Context<'_>)| {
            if budget::exhausted() {
                skipped += 1;
                return;
            }
            budget::enter(rule.meta().code, at);
            let mut ctx = Context {
                file,
                tree,
                trees,
                lang,
                model: &model,
                settings,
                rule: rule.meta(),
                diagnostics: Vec::new(),
            };
            check(rule, &mut ctx);
            if budget::exhausted() {
                skipped += 1;
            } else {
                diagnostics.append(&mut ctx.diagnostics);
            }
        };
    for node in wanted {
        for (i, rule) in table.rules_for(node.kind_id()) {
            if active.contains(*i) {
                run(*rule, node.start_byte(), &|r, ctx| r.check(node, ctx));
            }
        }
    }
    for (i, rule) in table.rules().iter().enumerate() {
        if active.contains(i) {
            run(*rule, budget::UNKNOWN, &|r, ctx| r.check_file(ctx));
        }
    }

    // Nothing is reported from evidence inside a region the parser did not understand.
    if !info.error_spans.is_empty() {
        let regions = merged(&info.error_spans);
        diagnostics.retain(|d| !overlaps_any(&regions, d.span));
    }
    (diagnostics, info, skipped)
}

/// tree-sitter's kind id of ERROR nodes (`ts_builtin_sym_error`), in every grammar.
const ERROR_KIND: u16 = u16::MAX;

/// The single iterative walk over one tree.
fn walk_tree<'t>(
    tree: &'t Tree,
    table: &RuleTable,
    active: RuleSet,
    builder: &mut gpulint_semantic::Builder<'t>,
    info: &mut ParseInfo,
    wanted: &mut Vec<Node<'t>>,
) {
    gpulint_syntax::walk(tree, |node, entering| {
        if !entering {
            builder.leave(node);
            return;
        }
        builder.enter(node);
        let kind = node.kind_id();
        // `Node::is_error` compares the kind with tree-sitter's error symbol: the kind id is
        // read once here.
        if kind == ERROR_KIND || node.is_missing() {
            info.error_spans.push(Span::of(&node));
        }
        if table
            .rules_for(kind)
            .iter()
            .any(|(i, _)| active.contains(*i))
        {
            wanted.push(node);
        }
        if table.is_comment(kind) {
            info.comments.push(Span::of(&node));
        }
    });
}

/// A span as the half-open byte range it occupies (an empty span occupies its first byte).
fn extent(s: Span) -> (usize, usize) {
    (s.start, s.end.max(s.start + 1))
}

/// The byte ranges of `spans`, merged into disjoint ranges in order.
fn merged(spans: &[Span]) -> Vec<(usize, usize)> {
    let mut ranges: Vec<(usize, usize)> = spans.iter().map(|s| extent(*s)).collect();
    ranges.sort_unstable();
    let mut out: Vec<(usize, usize)> = Vec::with_capacity(ranges.len());
    for (start, end) in ranges {
        match out.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => out.push((start, end)),
        }
    }
    out
}

/// Does `span` overlap one of the disjoint, ordered `regions`? A binary search: asking each
/// region about each finding grows with their product.
fn overlaps_any(regions: &[(usize, usize)], span: Span) -> bool {
    let (start, end) = extent(span);
    // The first region that ends after `span` starts is the only one that can overlap it
    // first; it overlaps when it starts before `span` ends.
    let i = regions.partition_point(|r| r.1 <= start);
    regions.get(i).is_some_and(|r| r.0 < end)
}

/// Runs `rules` over a manifest and returns their findings, without duplicates (the same
/// finding from several environments of one file is reported once).
pub fn check_manifest(
    rules: &[&'static dyn Rule],
    file: &SourceFile,
    manifest: &Manifest,
    settings: &Settings,
) -> Vec<Diagnostic> {
    let envs = env::environments(manifest);
    let mut out = Vec::new();
    for rule in rules {
        let mut ctx = ManifestContext {
            file,
            manifest,
            envs: &envs,
            settings,
            rule: rule.meta(),
            diagnostics: &mut out,
        };
        rule.check_manifest(&mut ctx);
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|d| seen.insert((d.code, d.span, d.message.clone())));
    out
}
