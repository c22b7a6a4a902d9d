//! The single walk over a file's syntax tree, and the rule runs over its nodes and over
//! manifests.
//!
//! One iterative `TreeCursor` walk per file feeds the semantic model builder and records the
//! nodes that enabled rules asked for (by node-kind id). Rules then run over those nodes in
//! document order with the complete semantic model, so a rule can ask about a function defined
//! further down the file without walking the tree again.

pub use crate::context::Context;
use crate::manifest_context::ManifestContext;
use crate::registry::RuleTable;
use crate::rule::Rule;
use crate::settings::Settings;
use gpulint_diagnostics::{Diagnostic, Span};
use gpulint_manifest::{env, Manifest};
use gpulint_semantic::Model;
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
}

/// Runs the enabled rules of `table` over one parsed file: one tree, or one per notebook cell
/// (sharing the file's text).
pub fn check_tree(
    file: &SourceFile,
    trees: &[Tree],
    lang: Lang,
    table: &RuleTable,
    settings: &Settings,
) -> (Vec<Diagnostic>, ParseInfo) {
    let mut builder =
        gpulint_semantic::Builder::new(lang, &file.text, &settings.semantic_options());
    let mut info = ParseInfo::default();
    let mut wanted: Vec<Node<'_>> = Vec::new();

    for tree in trees {
        walk_tree(tree, table, &mut builder, &mut info, &mut wanted);
    }

    let mut model = builder.finish(trees);
    if let Model::Cuda(cuda) = &mut model {
        cuda.read_headers(&file.path);
    }
    if let Model::Python(python) = &model {
        if gpulint_syntax::kind::is_setup_py(&file.path)
            && !crate::registry::manifest_rules(settings).is_empty()
        {
            info.manifest = gpulint_semantic::python::setup_py::extract(python);
        }
        let needles = gpulint_semantic::python::extensions::NEEDLES;
        if needles
            .iter()
            .any(|n| memchr::memmem::find(file.text.as_bytes(), n.as_bytes()).is_some())
        {
            info.extensions = gpulint_semantic::python::extensions::collect(python, &file.path);
        }
    }
    let tree = &trees[0];
    let mut diagnostics = Vec::new();
    // Each rule runs with a context of its own; its findings are appended.
    let mut run = |rule: &'static dyn Rule, check: &dyn Fn(&dyn Rule, &mut Context<'_>)| {
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
        diagnostics.append(&mut ctx.diagnostics);
    };
    for node in wanted {
        for rule in table.rules_for(node.kind_id()) {
            run(*rule, &|r, ctx| r.check(node, ctx));
        }
    }
    for rule in table.rules() {
        run(*rule, &|r, ctx| r.check_file(ctx));
    }

    // Nothing is reported from evidence inside a region the parser did not understand.
    if !info.error_spans.is_empty() {
        diagnostics.retain(|d| !info.error_spans.iter().any(|e| overlaps(*e, d.span)));
    }
    (diagnostics, info)
}

/// The single iterative walk over one tree.
fn walk_tree<'t>(
    tree: &'t Tree,
    table: &RuleTable,
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
        if node.is_error() || node.is_missing() {
            info.error_spans.push(Span::of(&node));
        }
        let kind = node.kind_id();
        if table.wants(kind) {
            wanted.push(node);
        }
        if table.is_comment(kind) {
            info.comments.push(Span::of(&node));
        }
    });
}

fn overlaps(a: Span, b: Span) -> bool {
    a.start < b.end.max(b.start + 1) && b.start < a.end.max(a.start + 1)
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
