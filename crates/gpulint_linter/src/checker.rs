//! The single walk over a file's syntax tree, and the context rules see.
//!
//! One iterative `TreeCursor` walk per file feeds the semantic model builder and records the
//! nodes that enabled rules asked for (by node-kind id). Rules then run over those nodes in
//! document order with the complete semantic model, so a rule can ask about a function defined
//! further down the file without walking the tree again.

use crate::registry::RuleTable;
use crate::rule::{Rule, RuleMeta};
use crate::settings::Settings;
use gpulint_diagnostics::{Diagnostic, Span};
use gpulint_semantic::{cuda::CudaModel, python::PythonModel, Model};
use gpulint_source::SourceFile;
use gpulint_syntax::Lang;
use tree_sitter::{Node, Tree};

/// What a rule sees while it checks a file.
pub struct Context<'a> {
    pub file: &'a SourceFile,
    /// The file's tree; for a notebook, the tree of its first code cell (see `trees`).
    pub tree: &'a Tree,
    /// One tree per notebook code cell, in order; a single tree otherwise.
    pub trees: &'a [Tree],
    pub lang: Lang,
    pub model: &'a Model<'a>,
    pub settings: &'a Settings,
    rule: &'static RuleMeta,
    /// Findings of this rule run, appended to the file's findings afterwards. Owned rather than
    /// borrowed: the semantic model holds lazily computed facts, which makes it invariant over
    /// its lifetime, so a `&mut` tied to that lifetime could not be taken once per rule.
    diagnostics: Vec<Diagnostic>,
}

impl<'a> Context<'a> {
    /// Source text of a node.
    pub fn text(&self, node: Node<'_>) -> &'a str {
        // Node boundaries fall on token boundaries of valid UTF-8 text: a plain slice, no
        // second validation.
        self.file
            .text
            .get(node.start_byte()..node.end_byte())
            .unwrap_or("")
    }

    /// The file's text.
    pub fn source(&self) -> &'a str {
        &self.file.text
    }

    /// The metadata of the rule being run.
    pub fn rule(&self) -> &'static RuleMeta {
        self.rule
    }

    /// A new finding of the current rule at `node`.
    pub fn diagnostic(&self, node: Node<'_>, message: impl Into<String>) -> Diagnostic {
        Diagnostic::new(self.rule, Span::of(&node), message)
    }

    pub fn report(&mut self, diagnostic: Diagnostic) {
        self.diagnostics.push(diagnostic);
    }

    /// The Python semantic model. Panics if the file is not Python (a rule bug).
    pub fn python(&self) -> &'a PythonModel<'a> {
        match self.model {
            Model::Python(m) => m,
            Model::Cuda(_) => panic!("{} asked for a Python model in a C++ file", self.rule.code),
        }
    }

    /// The CUDA/C++ semantic model. Panics if the file is not C++ (a rule bug).
    pub fn cuda(&self) -> &'a CudaModel<'a> {
        match self.model {
            Model::Cuda(m) => m,
            Model::Python(_) => {
                panic!("{} asked for a CUDA model in a Python file", self.rule.code)
            }
        }
    }

    /// An integer option of the current rule (`[rules.CODE] key = N`), else its default.
    pub fn option_int(&self, key: &str) -> Option<i64> {
        self.settings
            .rule_option(self.rule.code, key)
            .and_then(|v| v.as_integer())
            .or_else(|| {
                self.rule
                    .options
                    .iter()
                    .find(|o| o.key == key)
                    .and_then(|o| o.default.parse().ok())
            })
    }

    /// A fraction option of the current rule (`[rules.CODE] key = 0.5`), else its default.
    pub fn option_fraction(&self, key: &str) -> Option<f64> {
        self.settings
            .rule_option(self.rule.code, key)
            .and_then(|v| v.as_float().or(v.as_integer().map(|i| i as f64)))
            .or_else(|| {
                self.rule
                    .options
                    .iter()
                    .find(|o| o.key == key)
                    .and_then(|o| o.default.parse().ok())
            })
    }

    /// A string-list option of the current rule; empty when unset.
    pub fn option_strings(&self, key: &str) -> Vec<String> {
        self.settings
            .rule_option(self.rule.code, key)
            .and_then(|v| v.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }
}

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

    let model = builder.finish(trees);
    if let Model::Python(python) = &model {
        if gpulint_syntax::kind::is_setup_py(&file.path)
            && !crate::registry::manifest_rules(settings).is_empty()
        {
            info.manifest = gpulint_semantic::setup_py::extract(python);
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
    for node in wanted {
        for rule in table.rules_for(node.kind_id()) {
            run_rule(
                *rule,
                file,
                tree,
                trees,
                lang,
                &model,
                settings,
                &mut diagnostics,
                |r, ctx| r.check(node, ctx),
            );
        }
    }
    for rule in table.rules() {
        run_rule(
            *rule,
            file,
            tree,
            trees,
            lang,
            &model,
            settings,
            &mut diagnostics,
            |r, ctx| r.check_file(ctx),
        );
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

#[allow(clippy::too_many_arguments)]
fn run_rule<'a>(
    rule: &'static dyn Rule,
    file: &'a SourceFile,
    tree: &'a Tree,
    trees: &'a [Tree],
    lang: Lang,
    model: &'a Model<'a>,
    settings: &'a Settings,
    diagnostics: &mut Vec<Diagnostic>,
    f: impl FnOnce(&dyn Rule, &mut Context<'_>),
) {
    let mut ctx = Context {
        file,
        tree,
        trees,
        lang,
        model,
        settings,
        rule: rule.meta(),
        diagnostics: Vec::new(),
    };
    f(rule, &mut ctx);
    diagnostics.append(&mut ctx.diagnostics);
}
