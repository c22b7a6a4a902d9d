//! Checks files: read, prefilter, parse once, run the rules, apply suppressions, and turn every
//! failure (unreadable, binary, oversized, a rule that panics) into a finding of its own.

use crate::checker;
use crate::registry::RuleTable;
use crate::rule::Rule;
use crate::rules::tool::{GL002, GL003};
use crate::settings::Settings;
use crate::suppress;
use gpulint_diagnostics::{Diagnostic, FileReport, Span};
use gpulint_manifest::{self as manifest, Loader};
use gpulint_source::deps::tracked;
use gpulint_source::SourceFile;
use gpulint_source::{decode, read_bytes};
use gpulint_syntax::NodeExt;
use gpulint_syntax::{self as lang, Lang};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// What happened to one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Parsed and checked.
    Checked,
    /// Read, but no enabled rule could match its content: not parsed.
    Prefiltered,
    /// Not checked (GL002 says why).
    Skipped,
    /// A rule or the engine failed on it (GL002 says so); the run exits 2.
    InternalError,
}

/// The result of checking one file.
#[derive(Debug)]
pub struct FileResult {
    pub report: FileReport,
    pub status: Status,
    /// For skipped files, why.
    pub reason: Option<String>,
    /// The file was parsed with errors.
    pub partial: bool,
    /// Other files and folders its findings depend on.
    pub dependencies: Vec<std::path::PathBuf>,
    /// The native extensions a Python file builds, with their sources.
    pub links: Vec<crate::link::Link>,
}

/// The enabled rules of each language and the settings: everything needed to check a file.
pub struct Engine {
    pub settings: Settings,
    python: RuleTable,
    cuda: RuleTable,
    /// The enabled manifest rules (they read no syntax tree).
    manifest: Vec<&'static dyn Rule>,
    /// Python files are read for the extensions they build (some CUDA rule is enabled).
    link: bool,
}

impl Engine {
    pub fn new(settings: Settings) -> Engine {
        // A file whose only possible finding is an unused suppression of ours must still be
        // parsed to find its comments.
        let mut extra: Vec<&str> = Vec::new();
        if settings.is_enabled("GL001") {
            extra.push("gpulint:");
            extra.extend(settings.enabled.iter().copied());
        }
        // CU010's extra runtime calls make a file worth parsing like its built-in names.
        let runtime_calls: Vec<String> = if settings.is_enabled("CU010") {
            settings
                .rule_option("CU010", "runtime-calls")
                .and_then(|v| v.as_array())
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str())
                        .map(|c| c.trim_end_matches('*').to_string())
                        .filter(|c| !c.is_empty())
                        .collect()
                })
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        let mut cuda_extra = extra.clone();
        cuda_extra.extend(runtime_calls.iter().map(String::as_str));
        let mut cuda = RuleTable::new(Lang::Cuda, &settings.enabled, &cuda_extra);
        // A Python file that builds an extension is parsed to find the sources it names.
        let link = !cuda.rules().is_empty();
        if link {
            extra.extend_from_slice(gpulint_semantic::python::extensions::NEEDLES);
        }
        let mut python = RuleTable::new(Lang::Python, &settings.enabled, &extra);
        if settings.is_enabled("GL003") && settings.explicit.contains("GL003") {
            // `--select GL003` asks which files parse badly: every file is read, not only those
            // that could interest another rule.
            python = python.parse_every_file();
            cuda = cuda.parse_every_file();
        }
        Engine {
            python,
            cuda,
            manifest: crate::registry::manifest_rules(&settings),
            link,
            settings,
        }
    }

    fn table(&self, lang: Lang) -> Option<&RuleTable> {
        match lang {
            Lang::Python => Some(&self.python),
            Lang::Cuda => Some(&self.cuda),
            Lang::Manifest => None,
        }
    }

    /// Reads and checks one file. Never panics.
    pub fn check_path(&self, path: &Path, display: String, lang: Lang) -> FileResult {
        match read_bytes(path, self.settings.max_file_size) {
            Ok(bytes) => self.check_bytes(path, display, bytes, lang),
            Err(reason) => skipped(path, display, reason),
        }
    }

    /// Checks a file's bytes: binary content is skipped (GL002), invalid UTF-8 decoded lossily.
    pub fn check_bytes(
        &self,
        path: &Path,
        display: String,
        bytes: Vec<u8>,
        lang: Lang,
    ) -> FileResult {
        match decode(bytes) {
            Ok(text) => self.check_text(path, display, text, lang),
            Err(reason) => skipped(path, display, reason),
        }
    }

    /// Checks text as if it were the file at `path` (a notebook's JSON if `path` ends in
    /// `.ipynb`). Never panics.
    pub fn check_text(&self, path: &Path, display: String, text: String, lang: Lang) -> FileResult {
        let (text, notebook) = if lang::is_notebook(path) {
            match gpulint_source::notebook::parse(&text) {
                Ok(nb) => {
                    let mut nb = nb;
                    let source = std::mem::take(&mut nb.source);
                    (source, Some(Arc::new(nb)))
                }
                Err(reason) => return skipped(path, display, reason),
            }
        } else {
            (text, None)
        };
        let source = Arc::new(SourceFile::new(path.to_path_buf(), display.clone(), text));
        let Some(table) = self.table(lang) else {
            // Manifests are small: every one is parsed.
            let (outcome, dependencies) = tracked(|| self.check_manifest(&source));
            return match outcome {
                Ok(Ok((diagnostics, partial))) => {
                    let report = FileReport {
                        display_path: display,
                        source,
                        diagnostics,
                        notebook,
                    };
                    checked(report, partial, dependencies, Vec::new())
                }
                Ok(Err(reason)) => skipped(path, display, reason),
                Err(payload) => internal_error(path, display, payload),
            };
        };
        // A setup.py is read for its requirements whenever the manifest rules are on.
        let setup_py =
            lang == Lang::Python && !self.manifest.is_empty() && manifest::is_setup_py(path);
        if !setup_py && !table.may_match(&source.text) {
            return FileResult {
                report: FileReport {
                    display_path: display,
                    source,
                    diagnostics: Vec::new(),
                    notebook,
                },
                status: Status::Prefiltered,
                reason: None,
                partial: false,
                dependencies: Vec::new(),
                links: Vec::new(),
            };
        }
        let (outcome, dependencies) =
            tracked(|| self.check_source(&source, lang, table, notebook.as_deref()));
        match outcome {
            Ok(Some((diagnostics, partial, links))) => {
                let report = FileReport {
                    display_path: display,
                    source,
                    diagnostics,
                    notebook,
                };
                checked(report, partial, dependencies, links)
            }
            Ok(None) => skipped(path, display, "the parser gave up on it".into()),
            Err(payload) => internal_error(path, display, payload),
        }
    }

    fn check_source(
        &self,
        file: &SourceFile,
        lang: Lang,
        table: &RuleTable,
        notebook: Option<&gpulint_source::notebook::Notebook>,
    ) -> Option<(Vec<Diagnostic>, bool, Vec<crate::link::Link>)> {
        let trees: Vec<tree_sitter::Tree> = match notebook {
            Some(nb) => {
                let mut trees = Vec::with_capacity(nb.cells.len());
                for cell in &nb.cells {
                    trees.push(lang::parse_range(lang, &file.text, cell.start, cell.end)?);
                }
                if trees.is_empty() {
                    return Some((Vec::new(), false, Vec::new()));
                }
                trees
            }
            None => {
                let mut tree = lang::parse(lang, &file.text)?;
                if lang == Lang::Cuda {
                    // Macro-heavy C++ often needs a second, line-preserving parse (see `cuda_retry`).
                    tree = lang::cuda_retry::reparse(&file.text, tree);
                }
                vec![tree]
            }
        };
        let (mut diagnostics, info) =
            checker::check_tree(file, &trees, lang, table, &self.settings);
        if let Some(m) = &info.manifest {
            diagnostics.extend(crate::checker::check_manifest(
                &self.manifest,
                file,
                m,
                &self.settings,
            ));
        }
        let links = if self.link && !info.extensions.is_empty() {
            self.link_extensions(file, &info.extensions, notebook, &mut diagnostics)
        } else {
            Vec::new()
        };
        let suppressions = suppress::collect(&trees, file, lang, &info.comments);
        let diagnostics = self.finish_file(
            file,
            diagnostics,
            suppressions,
            &info.error_spans,
            &trees,
            lang,
            notebook,
        );
        Some((diagnostics, !info.error_spans.is_empty(), links))
    }

    /// What a Python file's extension builds add to its check: the link to each build's
    /// sources (checked by the run), a GL002 for each named source that does not exist, and
    /// the findings of the CUDA rules in sources passed inline, at their place in the file.
    fn link_extensions(
        &self,
        file: &SourceFile,
        builds: &[gpulint_semantic::python::extensions::ExtensionBuild],
        notebook: Option<&gpulint_source::notebook::Notebook>,
        diagnostics: &mut Vec<Diagnostic>,
    ) -> Vec<crate::link::Link> {
        let mut links = Vec::new();
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
                diagnostics.extend(self.check_inline(file, &inline.text, &what, line));
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
            });
        }
        links
    }

    /// Runs the CUDA rules over C++/CUDA source text held in a Python string (`text` is laid
    /// out at the string's offsets in `file`), honouring `// NOLINT`-style suppressions in it.
    fn check_inline(
        &self,
        file: &SourceFile,
        text: &str,
        what: &str,
        line: usize,
    ) -> Vec<Diagnostic> {
        if !self.cuda.may_match(text) {
            return Vec::new();
        }
        let mut path = file.path.clone().into_os_string();
        path.push(".inline.cu");
        let inline = SourceFile::new(path.into(), file.display_path.clone(), text.to_string());
        let Some(tree) = lang::parse(Lang::Cuda, &inline.text) else {
            return Vec::new();
        };
        let trees = [lang::cuda_retry::reparse(&inline.text, tree)];
        let (mut found, info) =
            checker::check_tree(&inline, &trees, Lang::Cuda, &self.cuda, &self.settings);
        let mut suppressions = suppress::collect(&trees, &inline, Lang::Cuda, &info.comments);
        suppress::apply(&mut found, &mut suppressions, &inline);
        for d in &mut found {
            d.notes.push(format!(
                "in the C++/CUDA source passed to {what} (line {line})"
            ));
        }
        found
    }

    /// Reads a manifest (and, lazily, the files it includes) and runs the manifest rules.
    /// `Err` when the file is not readable as its format at all (GL002).
    fn check_manifest(&self, file: &SourceFile) -> Result<(Vec<Diagnostic>, bool), String> {
        let Some(format) = manifest::Format::of_path(&file.path) else {
            return Ok((Vec::new(), false));
        };
        let mut loader = Loader::new(&file.path, &self.settings.roots);
        let m = manifest::parse(format, file, &mut loader);
        if let Some(reason) = m.fatal {
            return Err(format!("not a readable {}: {reason}", format.describe()));
        }
        let diagnostics = crate::checker::check_manifest(&self.manifest, file, &m, &self.settings);
        let suppressions = suppress::collect_with(file, Lang::Manifest, &m.comments, &|_, line| {
            m.coverage(file, line)
        });
        let diagnostics = self.finish_file(
            file,
            diagnostics,
            suppressions,
            &m.errors,
            &[],
            Lang::Manifest,
            None,
        );
        Ok((diagnostics, !m.errors.is_empty()))
    }

    /// What every checked file gets after its rules ran: selection and per-file ignores,
    /// suppressions and unused ones (GL001), the partial-parse note (GL003), positions.
    #[allow(clippy::too_many_arguments)]
    fn finish_file(
        &self,
        file: &SourceFile,
        mut diagnostics: Vec<Diagnostic>,
        mut suppressions: Vec<suppress::Suppression>,
        error_spans: &[Span],
        trees: &[tree_sitter::Tree],
        lang: Lang,
        notebook: Option<&gpulint_source::notebook::Notebook>,
    ) -> Vec<Diagnostic> {
        let settings = &self.settings;
        diagnostics
            .retain(|d| settings.is_enabled(d.code) && !settings.ignored_for(&file.path, d.code));
        suppress::apply(&mut diagnostics, &mut suppressions, file);
        if settings.is_enabled("GL001") && !settings.ignored_for(&file.path, "GL001") {
            let unused = suppress::unused(&suppressions, &|code| settings.is_enabled(code));
            // Only a file-level ignore of GL001 silences it (a line suppression cannot vouch
            // for itself).
            let mut file_level: Vec<_> = suppressions
                .into_iter()
                .filter(|s| s.scope == suppress::Scope::File)
                .collect();
            let mut unused = unused;
            suppress::apply(&mut unused, &mut file_level, file);
            diagnostics.extend(unused);
        }
        if !error_spans.is_empty()
            && settings.show_parse_errors()
            && !settings.ignored_for(&file.path, "GL003")
        {
            let first = error_spans[0];
            let (line, _) = file.position(first.start);
            let bytes: usize = error_spans.iter().map(|s| s.end - s.start).sum();
            diagnostics.push(
                Diagnostic::new(
                    &GL003,
                    Span::new(first.start, first.start),
                    format!(
                        "file only partly understood: {} region{} did not parse ({} bytes, first at line {line}); nothing is reported from inside them",
                        error_spans.len(),
                        if error_spans.len() == 1 { "" } else { "s" },
                        bytes
                    ),
                )
                .primary_label("the parser could not read from here"),
            );
        }
        finalize(file, &mut diagnostics, trees, lang, notebook);
        diagnostics
    }
}

fn internal_error(
    path: &Path,
    display: String,
    payload: Box<dyn std::any::Any + Send>,
) -> FileResult {
    let msg = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    let reason = format!("internal error while checking this file ({msg}); please report it");
    let mut r = skipped(path, display, reason);
    r.status = Status::InternalError;
    r
}

/// Resolves positions (cell-relative in notebooks) and fingerprints, and sorts.
pub fn finalize(
    file: &SourceFile,
    diagnostics: &mut [Diagnostic],
    trees: &[tree_sitter::Tree],
    lang: Lang,
    notebook: Option<&gpulint_source::notebook::Notebook>,
) {
    let mut seen: HashMap<String, usize> = HashMap::new();
    for d in diagnostics.iter_mut() {
        let (mut line, column) = file.position(d.span.start);
        let (mut end_line, end_column) = file.position(d.span.end);
        if let Some(cell) = notebook.and_then(|nb| nb.cell_at(d.span.start)) {
            line -= cell.first_line;
            end_line = end_line.saturating_sub(cell.first_line).max(line);
            d.cell = Some(cell.number);
        }
        d.location = gpulint_diagnostics::Location {
            line,
            column,
            end_line,
            end_column,
        };
    }
    diagnostics.sort_by(|a, b| {
        (a.cell, a.location, a.code, &a.message).cmp(&(b.cell, b.location, b.code, &b.message))
    });
    for d in diagnostics.iter_mut() {
        let tree = trees
            .iter()
            .find(|t| {
                t.root_node().start_byte() <= d.span.start
                    && d.span.start < t.root_node().end_byte().max(1)
            })
            .or(trees.first());
        let function = tree
            .and_then(|t| enclosing_function_name(t, file, d.span, lang))
            .unwrap_or_default();
        let snippet: String = if file.text.is_empty() {
            String::new()
        } else {
            file.line_text(file.line_index(d.span.start.min(file.text.len())))
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        };
        let mut h = Sha256::new();
        for part in [
            d.code,
            file.display_path.as_str(),
            function.as_str(),
            snippet.as_str(),
        ] {
            h.update(part.as_bytes());
            h.update([0u8]);
        }
        let base = format!("{:x}", h.finalize());
        let n = seen.entry(base.clone()).or_insert(0);
        *n += 1;
        d.fingerprint = format!("{}:{}", &base[..32], n);
    }
}

fn enclosing_function_name(
    tree: &tree_sitter::Tree,
    file: &SourceFile,
    span: Span,
    lang: Lang,
) -> Option<String> {
    let mut node = tree
        .root_node()
        .descendant_for_byte_range(span.start, span.end.max(span.start));
    let mut names = Vec::new();
    while let Some(n) = node {
        if n.kind() == "function_definition" {
            let name = match lang {
                Lang::Python => n
                    .field("name")
                    .and_then(|x| file.text.get(x.start_byte()..x.end_byte())),
                Lang::Cuda => gpulint_semantic::cuda::function_name(n, &file.text),
                Lang::Manifest => None,
            };
            names.push(name.unwrap_or("?").to_string());
        }
        node = n.parent();
    }
    names.reverse();
    (!names.is_empty()).then(|| names.join("."))
}

impl Engine {
    /// Rebuilds a file's result from cached findings: the text (and notebook map) is restored
    /// from the bytes, nothing is parsed. `None` if the bytes no longer decode as they did.
    pub fn restore(
        &self,
        path: &Path,
        display: String,
        bytes: Vec<u8>,
        cached: crate::cache::Cached,
    ) -> Option<FileResult> {
        let (diagnostics, parsed, partial, dependencies, links) = cached;
        let text = decode(bytes).ok()?;
        let (text, notebook) = if lang::is_notebook(path) {
            let mut nb = gpulint_source::notebook::parse(&text).ok()?;
            let source = std::mem::take(&mut nb.source);
            (source, Some(Arc::new(nb)))
        } else {
            (text, None)
        };
        if diagnostics.iter().any(|d| d.span.end > text.len()) {
            return None;
        }
        Some(FileResult {
            report: FileReport {
                display_path: display.clone(),
                source: Arc::new(SourceFile::new(path.to_path_buf(), display, text)),
                diagnostics,
                notebook,
            },
            status: if parsed {
                Status::Checked
            } else {
                Status::Prefiltered
            },
            reason: None,
            partial,
            dependencies,
            links,
        })
    }
}

fn skipped(path: &Path, display: String, reason: String) -> FileResult {
    let source = Arc::new(SourceFile::new(
        path.to_path_buf(),
        display.clone(),
        String::new(),
    ));
    let mut d = Diagnostic::new(&GL002, Span::new(0, 0), format!("file skipped: {reason}"))
        .primary_label("not checked")
        .help("fix the file or exclude it with `extend-exclude` in gpulint.toml");
    d.location = gpulint_diagnostics::Location {
        line: 1,
        column: 1,
        end_line: 1,
        end_column: 1,
    };
    let mut h = Sha256::new();
    h.update(format!("GL002\0{display}").as_bytes());
    d.fingerprint = format!("{:x}", h.finalize())[..32].to_string() + ":1";
    FileResult {
        report: FileReport {
            display_path: display,
            source,
            diagnostics: vec![d],
            notebook: None,
        },
        status: Status::Skipped,
        reason: Some(reason),
        partial: false,
        dependencies: Vec::new(),
        links: Vec::new(),
    }
}

/// The result of a file that was checked.
fn checked(
    report: FileReport,
    partial: bool,
    dependencies: Vec<std::path::PathBuf>,
    links: Vec<crate::link::Link>,
) -> FileResult {
    FileResult {
        report,
        status: Status::Checked,
        reason: None,
        partial,
        dependencies,
        links,
    }
}
