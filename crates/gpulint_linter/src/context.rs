//! What a rule sees while it checks a source file: the file, its trees, the semantic model, the
//! settings, and where its findings go.

use crate::settings::Settings;
use gpulint_diagnostics::{Diagnostic, RuleMeta, Span};
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
    pub(crate) rule: &'static RuleMeta,
    /// Findings of this rule run, appended to the file's findings afterwards. Owned rather than
    /// borrowed: the semantic model holds lazily computed facts, which makes it invariant over
    /// its lifetime, so a `&mut` tied to that lifetime could not be taken once per rule.
    pub(crate) diagnostics: Vec<Diagnostic>,
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
        self.option_or_default(key, |v| v.as_integer())
    }

    /// A fraction option of the current rule (`[rules.CODE] key = 0.5`), else its default.
    pub fn option_fraction(&self, key: &str) -> Option<f64> {
        self.option_or_default(key, |v| v.as_float().or(v.as_integer().map(|i| i as f64)))
    }

    /// An option of the current rule as `read` takes it from the configuration, else the
    /// default the rule declares for it.
    fn option_or_default<T: std::str::FromStr>(
        &self,
        key: &str,
        read: impl FnOnce(&toml::Value) -> Option<T>,
    ) -> Option<T> {
        self.settings
            .rule_option(self.rule.code, key)
            .and_then(read)
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
