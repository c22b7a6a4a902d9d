//! The C++/CUDA a Python file builds into an extension: the link to each build's sources, a
//! GL002 for each named source that is missing, and the CUDA rules' findings in inline sources.

use super::Engine;
use crate::checker;
use crate::rules::tool::GL002;
use crate::suppress;
use gpulint_diagnostics::Diagnostic;
use gpulint_source::SourceFile;
use gpulint_syntax::{self as lang, Lang};

impl Engine {
    /// What a Python file's extension builds add to its check: the link to each build's
    /// sources (checked by the run), a GL002 for each named source that does not exist, and
    /// the findings of the CUDA rules in sources passed inline, at their place in the file.
    pub(super) fn link_extensions(
        &self,
        file: &SourceFile,
        builds: &[gpulint_semantic::python::extensions::ExtensionBuild],
        notebook: Option<&gpulint_source::notebook::Notebook>,
        diagnostics: &mut Vec<Diagnostic>,
    ) -> Vec<crate::link::Link> {
        let mut links = Vec::new();
        // The findings in each inline string, by its span: several builds that pass one string
        // (`cpp_sources=CPP_DECL` in each `load_inline`) have it checked once.
        let mut inline_found: std::collections::HashMap<gpulint_source::Span, Vec<Diagnostic>> =
            std::collections::HashMap::new();
        for b in builds {
            // A subclass's method that gives the sources (in this file) is the entry.
            let at = b
                .via
                .as_ref()
                .filter(|v| v.file.is_none())
                .map_or(b.call.start, |v| v.at.start);
            let (mut line, _) = file.position(at);
            let cell = notebook.and_then(|nb| nb.cell_at(at)).map(|c| {
                line -= c.first_line;
                c.number
            });
            let what = b.describe();
            let mut entry = None;
            let mut cell = cell;
            if let Some((path, l)) = b.via.as_ref().and_then(|v| v.file.as_ref()) {
                // A subclass in a sibling module: its line there.
                let cwd = std::env::current_dir().unwrap_or_default();
                entry = Some(gpulint_source::display_path(path, &cwd));
                (line, cell) = (*l, None);
            }
            for s in b.sources.iter().filter(|s| !s.exists) {
                let cwd = std::env::current_dir().unwrap_or_default();
                let shown = gpulint_source::display_path(&s.path, &cwd);
                diagnostics.push(
                    Diagnostic::new(
                        &GL002,
                        s.span,
                        format!("extension source `{shown}` does not exist: it was not checked"),
                    )
                    .primary_label(format!("named by {what}"))
                    .help("fix the path; gpulint checks the C++/CUDA sources an extension build names"),
                );
            }
            for inline in &b.inline {
                let found = inline_found
                    .entry(inline.span)
                    .or_insert_with(|| self.check_inline(file, inline));
                diagnostics.extend(found.iter().cloned().map(|mut d| {
                    d.notes.push(format!(
                        "in the C++/CUDA source passed to {what} (line {line})"
                    ));
                    d
                }));
            }
            let sources: Vec<_> = b
                .sources
                .iter()
                .filter(|s| s.exists)
                .map(|s| s.path.clone())
                .collect();
            let unresolved = b
                .unresolved
                .iter()
                .map(|u| (file.position(u.span.start).0, u.reason.clone()))
                .collect();
            links.push(crate::link::Link {
                line,
                cell,
                what,
                sources,
                unresolved,
                inline: b.inline.len(),
                entry,
                module: b.name.clone(),
            });
        }
        links
    }

    /// Runs the CUDA rules over C++/CUDA source text held in a Python string (its text is laid
    /// out at the string's offsets in `file`), honouring `// NOLINT`-style suppressions in it.
    /// Only the string's range is parsed: the rest of the text is blank, and a file with many
    /// such strings would otherwise be parsed whole once per string.
    fn check_inline(
        &self,
        file: &SourceFile,
        source: &gpulint_semantic::python::extensions::Inline,
    ) -> Vec<Diagnostic> {
        let text = &source.text;
        if !self.cuda.may_match(text) {
            return Vec::new();
        }
        let mut path = file.path.clone().into_os_string();
        path.push(".inline.cu");
        let inline = SourceFile::new(path.into(), file.display_path.clone(), text.to_string());
        let range = (source.span.start, source.span.end.min(text.len()));
        let Some(tree) = lang::parse_range(Lang::Cuda, &inline.text, range.0, range.1) else {
            return Vec::new();
        };
        let trees = [lang::cuda_retry::reparse_in(
            &inline.text,
            Some(range),
            tree,
        )];
        let (mut found, info) = checker::check_tree(
            &inline,
            &trees,
            Lang::Cuda,
            &self.cuda,
            &self.settings,
            false,
        );
        let mut suppressions = suppress::collect(&trees, &inline, Lang::Cuda, &info.comments);
        suppress::apply(&mut found, &mut suppressions, &inline);
        found
    }
}
