//! Checks files: read, prefilter, parse once, run the rules, apply suppressions, and turn every
//! failure (unreadable, binary, oversized, a rule that panics) into a finding of its own.

mod extensions;
mod finish;
mod outcome;
mod restore;

pub use finish::finalize;
pub use outcome::unreadable_directory;

use crate::checker;
use crate::registry::RuleTable;
use crate::rule::Rule;
use crate::settings::Settings;
use crate::suppress;
use gpulint_diagnostics::{Diagnostic, FileReport};
use gpulint_manifest::{self as manifest, Loader};
use gpulint_source::deps::tracked;
use gpulint_source::SourceFile;
use gpulint_source::Span;
use gpulint_source::{decode, read_bytes};
use gpulint_syntax::{self as lang, Lang};
use outcome::{checked, internal_error, skipped, unread_cells};
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
    /// The calls a Python file makes into extension modules, for the op-glue rules.
    pub calls: Vec<gpulint_semantic::python::ext_calls::ExtCall>,
}

/// What checking a parsed file gives: its findings, whether it parsed with errors, the
/// extensions it builds and its calls into extension modules.
type Checked = (
    Vec<Diagnostic>,
    bool,
    Vec<crate::link::Link>,
    Vec<gpulint_semantic::python::ext_calls::ExtCall>,
);

/// The enabled rules of each language and the settings: everything needed to check a file.
pub struct Engine {
    pub settings: Settings,
    python: RuleTable,
    cuda: RuleTable,
    /// The enabled manifest rules (they read no syntax tree).
    manifest: Vec<&'static dyn Rule>,
    /// Python files are read for the extensions they build (some CUDA rule is enabled).
    link: bool,
    /// A hash of the settings that affect findings (cache entries carry it).
    settings_hash: u64,
}

impl Engine {
    pub fn new(settings: Settings) -> Engine {
        // A file whose only possible finding is an unused suppression of ours must still be
        // parsed to find its comments.
        let mut extra: Vec<(&str, Option<&str>)> = Vec::new();
        if settings.is_enabled("GL001") {
            extra.push(("gpulint:", None));
            extra.extend(settings.enabled.iter().map(|c| (*c, None)));
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
        cuda_extra.extend(runtime_calls.iter().map(|c| (c.as_str(), Some("CU010"))));
        let mut cuda = RuleTable::new(Lang::Cuda, &settings.enabled, &cuda_extra);
        // A Python file that builds an extension is parsed to find the sources it names.
        let link = !cuda.rules().is_empty();
        if link {
            extra.extend(
                gpulint_semantic::python::extensions::NEEDLES
                    .iter()
                    .map(|n| (*n, None)),
            );
            // The op-glue rules read what Python callers pass to the functions an extension
            // binds (see `ext_calls`): a file that calls one mentions torch.
            if checker::reads_python_callers(&settings) {
                extra.push(("torch", None));
            }
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
            settings_hash: xxhash_rust::xxh3::xxh3_64(settings.cache_key().as_bytes()),
            settings,
        }
    }

    /// A hash of the settings that affect what this engine reports.
    pub fn settings_hash(&self) -> u64 {
        self.settings_hash
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
        let mut result = self.check_decoded(path, display, text, notebook.clone(), lang);
        // Code cells whose source could not be read are not lost in silence.
        if let Some(nb) = notebook.filter(|nb| !nb.unread.is_empty()) {
            if matches!(result.status, Status::Checked | Status::Prefiltered)
                && self.settings.is_enabled("GL002")
                && !self.settings.ignored_for(path, "GL002")
            {
                let d = &mut result.report.diagnostics;
                let fingerprint_path = self.fingerprint_path(path, &result.report.display_path);
                d.extend(unread_cells(&fingerprint_path, &nb));
                d.sort_by(|a, b| {
                    (a.cell, a.location, a.code, &a.message)
                        .cmp(&(b.cell, b.location, b.code, &b.message))
                });
            }
        }
        result
    }

    /// Checks a file's text (a notebook's code cells, joined).
    fn check_decoded(
        &self,
        path: &Path,
        display: String,
        text: String,
        notebook: Option<Arc<gpulint_source::notebook::Notebook>>,
        lang: Lang,
    ) -> FileResult {
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
                    checked(report, partial, dependencies, Vec::new(), Vec::new())
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
                calls: Vec::new(),
            };
        }
        let (outcome, dependencies) =
            tracked(|| self.check_source(&source, lang, table, notebook.as_deref()));
        match outcome {
            Ok(Some((diagnostics, partial, links, calls))) => {
                let report = FileReport {
                    display_path: display,
                    source,
                    diagnostics,
                    notebook,
                };
                checked(report, partial, dependencies, links, calls)
            }
            Ok(None) => skipped(
                path,
                display,
                "the parser gave up on it (its work budget for a file of this size ran out)".into(),
            ),
            Err(payload) => internal_error(path, display, payload),
        }
    }

    fn check_source(
        &self,
        file: &SourceFile,
        lang: Lang,
        table: &RuleTable,
        notebook: Option<&gpulint_source::notebook::Notebook>,
    ) -> Option<Checked> {
        // The parts of the text left out of a second parse (see `unclosed`).
        let mut cuts: Vec<Span> = Vec::new();
        // The CUDA file's first parse had no error: the model's tree is that parse.
        let mut first_clean = false;
        let trees: Vec<tree_sitter::Tree> = match notebook {
            Some(nb) => {
                let mut trees = Vec::with_capacity(nb.cells.len());
                let mut cell_cuts = Vec::with_capacity(nb.cells.len());
                for cell in &nb.cells {
                    let (tree, cut) =
                        lang::parse_range_recovering(lang, &file.text, cell.start, cell.end)?;
                    trees.push(tree);
                    cell_cuts.push(cut.map(|c| Span::new(c, cell.end)));
                }
                // Cells that a per-backend cell magic keeps from running are not checked.
                let magics: Vec<Option<&str>> =
                    nb.cells.iter().map(|c| c.magic.as_deref()).collect();
                let off = gpulint_semantic::gated_off_cells(&file.text, &trees, &magics);
                cuts.extend(
                    cell_cuts
                        .into_iter()
                        .zip(&off)
                        .filter_map(|(c, &o)| c.filter(|_| !o)),
                );
                if off.iter().any(|&o| o) {
                    trees = trees
                        .into_iter()
                        .zip(off)
                        .filter_map(|(t, o)| (!o).then_some(t))
                        .collect();
                }
                if trees.is_empty() {
                    return Some((Vec::new(), false, Vec::new(), Vec::new()));
                }
                trees
            }
            None => {
                // A C/C++/CUDA file may have been parsed already, by a question of a file next
                // to it (see `glue_project::pending`).
                let kept = (lang == Lang::Cuda)
                    .then(|| {
                        gpulint_semantic::cuda::glue_project::pending::take(&file.path, &file.text)
                    })
                    .flatten();
                let tree = match kept {
                    Some(tree) => tree,
                    None => lang::parse(lang, &file.text)?,
                };
                if lang == Lang::Cuda {
                    first_clean = !tree.root_node().has_error();
                    // A header's facts for the files that include it, from this parse (from
                    // the checker's model of it when it is clean).
                    if !first_clean {
                        gpulint_semantic::cuda::headers::share(&file.path, &file.text, &tree);
                    }
                }
                // Macro-heavy C++ often needs a second, line-preserving parse (see
                // `cuda_retry`); a text that ends inside an open bracket is parsed again
                // without the statement left open when the parser gave up on more (see
                // `unclosed`), and that statement is reported as not parsed.
                let (tree, cut) = lang::recover(lang, &file.text, tree);
                cuts.extend(cut.map(|c| Span::new(c, file.text.len())));
                vec![tree]
            }
        };
        let (mut diagnostics, mut info) =
            checker::check_tree(file, &trees, lang, table, &self.settings, first_clean);
        if !cuts.is_empty() {
            info.error_spans.extend(cuts);
            info.error_spans.sort_by_key(|s| (s.start, s.end));
        }
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
        let calls = std::mem::take(&mut info.ext_calls);
        Some((diagnostics, !info.error_spans.is_empty(), links, calls))
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
}
