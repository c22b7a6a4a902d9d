//! `gpulint check`: configuration, discovery, the run, the baseline or `--add-noqa`, the
//! report and the exit code.

use crate::output::{fail, print_out};
use crate::render::{self, Format};
use clap::{Args, ValueEnum};
use gpulint_diagnostics::{FileReport, Severity};
use gpulint_linter::engine::{FileResult, Status};
use gpulint_linter::run;
use gpulint_linter::settings::parse_size;
use gpulint_workspace::discover;
use gpulint_workspace::settings::{Overrides, Resolver, Source};
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

mod report;

use report::{statistics, summary, Named, ProgressBar};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FailOn {
    Error,
    Warning,
    Info,
}

impl FailOn {
    pub fn severity(self) -> Severity {
        match self {
            FailOn::Error => Severity::Error,
            FailOn::Warning => Severity::Warning,
            FailOn::Info => Severity::Info,
        }
    }
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// Files or directories to check [default: .; none after `--` checks nothing]
    pub paths: Vec<PathBuf>,
    /// Set when the command line ends with `--` and names no path: check nothing.
    #[arg(skip)]
    pub no_paths: bool,
    /// Rules to enable: codes, prefixes (`CU`), names, or `ALL`. Replaces the configured selection.
    #[arg(long, value_delimiter = ',', value_name = "RULES")]
    select: Vec<String>,
    /// Rules to disable.
    #[arg(long, value_delimiter = ',', value_name = "RULES")]
    ignore: Vec<String>,
    /// Rules to enable on top of the selection.
    #[arg(long, value_delimiter = ',', value_name = "RULES")]
    extend_select: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Full)]
    output_format: Format,
    /// Write the findings to this file instead of standard output.
    #[arg(short = 'o', long, value_name = "FILE")]
    output_file: Option<PathBuf>,
    /// Use this configuration file for every file (gpulint.toml or pyproject.toml) instead of
    /// the nearest one of each file.
    #[arg(long, value_name = "FILE", conflicts_with = "isolated")]
    config: Option<PathBuf>,
    /// Ignore all configuration files.
    #[arg(long)]
    isolated: bool,
    /// Number of threads [default: number of CPUs].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    threads: Option<u16>,
    /// Lowest severity that fails the run (exit 1) [default: warning].
    #[arg(long, value_enum)]
    fail_on: Option<FailOn>,
    /// Exit 0 even when there are findings.
    #[arg(long)]
    exit_zero: bool,
    /// GPU-memory budget for the memory rules: 8GiB, 8GB, 8192MiB [default: 8GiB].
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    gpu_memory: Option<u64>,
    /// GPU model whose memory is the budget: rtx3060, t4, a100-80gb, ... (see the README).
    #[arg(long, value_name = "NAME", conflicts_with = "gpu_memory")]
    gpu: Option<String>,
    /// Print the number of findings per rule instead of the findings.
    #[arg(long)]
    statistics: bool,
    /// Print findings only: no summary.
    #[arg(short, long, conflicts_with = "verbose")]
    quiet: bool,
    /// Show parse-error notes (GL003), the files not parsed, the extension sources checked
    /// beyond the paths given, and more detail in the summary.
    #[arg(short, long)]
    verbose: bool,
    /// Benchmark baseline: read and parse every file, run no rule, report nothing.
    #[arg(long)]
    parse_only: bool,
    /// Record today's findings in FILE (by fingerprint) and exit 0; see --baseline.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["baseline", "add_noqa"])]
    write_baseline: Option<PathBuf>,
    /// Report only findings that are not recorded in this baseline FILE.
    #[arg(long, value_name = "FILE")]
    baseline: Option<PathBuf>,
    /// Add a suppression comment for every finding (`# noqa: CODE`, `// NOLINT(CODE)`), with an
    /// optional reason: --add-noqa="legacy kernel".
    #[arg(long, value_name = "REASON", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    add_noqa: Option<String>,
    /// Do not read or write the cache (.gpulint_cache/).
    #[arg(long)]
    no_cache: bool,
    /// Check source read from standard input, as if it were the file PATH (for editors).
    #[arg(long, value_name = "PATH")]
    stdin_filename: Option<PathBuf>,
    /// Apply the exclusions to files named on the command line too (for pre-commit and editors).
    #[arg(long)]
    force_exclude: bool,
    /// Check only shard I of N (1-based) of the files, for parallel CI jobs; join the reports
    /// with `gpulint merge`.
    #[arg(long, value_name = "I/N", value_parser = crate::shard::parse_shard, conflicts_with = "stdin_filename")]
    shard: Option<crate::shard::Shard>,
}

impl CheckArgs {
    /// What the command line says about the settings.
    fn overrides(&self) -> Overrides {
        Overrides {
            select: self.select.clone(),
            extend_select: self.extend_select.clone(),
            ignore: self.ignore.clone(),
            fail_on: self.fail_on.map(FailOn::severity),
            gpu_memory: self.gpu_memory,
            gpu: self.gpu.clone(),
            verbose: self.verbose,
            paths: self.paths.clone(),
        }
    }

    /// The key of the cache file: the command line's settings (each file's configuration is
    /// in the key of its own entry).
    fn cache_key(&self) -> String {
        format!(
            "{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{}|{:?}|{}",
            self.select,
            self.extend_select,
            self.ignore,
            self.fail_on,
            self.gpu_memory,
            self.gpu,
            self.verbose,
            self.config,
            self.isolated
        )
    }
}

/// A suppression reason goes at the end of a comment: one line, no control characters, and
/// no trailing `\\` (which would continue a C++ `//` comment onto the next line).
fn check_reason(reason: &str) -> Result<(), String> {
    if reason.chars().any(char::is_control) {
        return Err(
            "--add-noqa: the reason must be one line of text without control characters".into(),
        );
    }
    if reason.trim_end().ends_with('\\') {
        return Err("--add-noqa: the reason must not end with `\\` (it would continue the comment onto the next line)".into());
    }
    Ok(())
}

/// Runs `gpulint check`.
pub fn check(args: CheckArgs) -> ExitCode {
    let started = Instant::now();
    if args.stdin_filename.is_some() {
        if let Some(other) = args.paths.iter().find(|p| p.as_os_str() != "-") {
            return fail(format!(
                "--stdin-filename checks standard input only: remove the path `{}` (or use `-`)",
                other.display()
            ));
        }
    }
    if let Some(reason) = &args.add_noqa {
        if let Err(e) = check_reason(reason) {
            return fail(e);
        }
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let source = match Source::new(args.config.as_deref(), args.isolated) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    // Standard input is checked with the configuration of the file it stands for.
    let resolver = match Resolver::new(args.overrides(), source, &cwd) {
        Ok(r) => Arc::new(r),
        Err(e) => return fail(e),
    };
    let paths = if args.stdin_filename.is_some() {
        // Standard input is the only file.
        Vec::new()
    } else if args.paths.is_empty() && !args.no_paths {
        vec![PathBuf::from(".")]
    } else {
        args.paths.clone()
    };
    // The walk leaves out what the configuration of each folder excludes.
    let excluded: discover::Exclusion = {
        let resolver = resolver.clone();
        Arc::new(move |p: &Path| resolver.is_excluded(p))
    };
    let mut discovery = discover::discover(&paths, &excluded, &cwd);
    // Every file's settings, before anything is checked: a broken configuration file is a
    // usage error, whichever folder it is in.
    let mut errors: Vec<String> = discovery
        .files
        .iter()
        .filter_map(|c| resolver.for_path(&c.path()).err())
        .collect();
    if let Some(path) = &args.stdin_filename {
        errors.extend(resolver.for_path(path).err());
    }
    if let Some(code) = configuration_errors(errors) {
        return code;
    }
    if args.force_exclude {
        // Exclusions are relative to the configuration file that declares them.
        discovery
            .files
            .retain(|c| !resolver.excludes_file(&c.path()));
    }
    for missing in &discovery.missing {
        eprintln!("gpulint: error: {missing}: no such file or directory");
    }

    let mut pool = rayon::ThreadPoolBuilder::new();
    if let Some(n) = args.threads {
        pool = pool.num_threads(n as usize);
    }
    let pool = match pool.build() {
        Ok(p) => p,
        Err(e) => return fail(format!("cannot start threads: {e}")),
    };

    if args.parse_only {
        let parsed: usize = pool.install(|| {
            discovery
                .files
                .par_iter()
                .map(|c| {
                    parse_only(&c.path(), c.lang, gpulint_linter::settings::MAX_FILE_SIZE) as usize
                })
                .sum()
        });
        if !args.quiet {
            eprintln!(
                "Parsed {parsed} of {} files in {:.2}s (parse only, no rules run)",
                discovery.files.len(),
                started.elapsed().as_secs_f64()
            );
        }
        return ExitCode::SUCCESS;
    }

    // Findings recorded in the baseline are dropped as each file is done.
    let known = match &args.baseline {
        Some(path) => match crate::baseline::read(path) {
            Ok(k) => Some(k),
            Err(e) => return fail(e),
        },
        None => None,
    };
    let color = args.output_file.is_none()
        && std::io::stdout().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    // The output is rendered file by file, as each is done; only `--add-noqa`, `--statistics`
    // and `--write-baseline` keep the findings themselves until the end.
    let keep_reports = args.add_noqa.is_some() || args.statistics || args.write_baseline.is_some();
    let finish = |mut r: FileResult| -> Done {
        if let Some(known) = &known {
            r.report
                .diagnostics
                .retain(|d| !known.contains(&d.fingerprint));
        }
        let mut counts = [0; 3];
        for d in &r.report.diagnostics {
            counts[d.severity as usize] += 1;
        }
        // Each finding fails the run by the `fail-on` of its own file's settings.
        let failing = !r.report.diagnostics.is_empty() && {
            let fail_on = resolver
                .for_path(&r.report.source.path)
                .map_or(Severity::Warning, |s| s.engine.settings.fail_on);
            r.report.diagnostics.iter().any(|d| d.severity >= fail_on)
        };
        let chunk = (!keep_reports && !r.report.diagnostics.is_empty())
            .then(|| render::render_file(args.output_format, &r.report, color));
        if !keep_reports {
            forget_findings(&mut r);
        }
        Done {
            result: r,
            chunk,
            counts,
            failing,
        }
    };
    // Files without anything to show are only counted by the run.
    let mut clean = run::Clean::default();
    let mut named = Named::default();
    let mut done: Vec<Done> = match &args.stdin_filename {
        Some(path) => {
            let Some(lang) = gpulint_syntax::Lang::of_path(path) else {
                return fail(format!(
                    "--stdin-filename {}: not a Python, CUDA/C++ or dependency manifest file name",
                    path.display()
                ));
            };
            let engine = match resolver.for_path(path) {
                Ok(r) => r.engine.clone(),
                Err(e) => return fail(e),
            };
            // Bounded like a file on disk: one byte past the limit tells it is over.
            let limit = engine.settings.max_file_size;
            let mut bytes = Vec::new();
            if let Err(e) = std::io::Read::read_to_end(
                &mut std::io::Read::take(std::io::stdin(), limit + 1),
                &mut bytes,
            ) {
                return fail(format!("cannot read standard input: {e}"));
            }
            if bytes.len() as u64 > limit {
                return fail(format!(
                    "standard input is over the {} file size limit",
                    gpulint_source::format_size(limit)
                ));
            }
            let result = engine.check_bytes(path, discover::display_path(path, &cwd), bytes, lang);
            if args.verbose && result.status == Status::Prefiltered {
                named.not_parsed.push(result.report.display_path.clone());
            }
            vec![finish(result)]
        }
        None => {
            // The cache goes in the project's folder: that of the configuration file of the
            // first checked path, else its repository's, else the path's own.
            let cache = match (!args.no_cache && args.add_noqa.is_none())
                .then(|| resolver.project_root())
            {
                None => None,
                Some(Ok(root)) => Some(run::CacheAt {
                    dir: root.join(".gpulint_cache"),
                    key: args.cache_key(),
                }),
                Some(Err(e)) => return fail(e),
            };
            // A shard checks its part of the files, and of the extension sources they build.
            let plan = match args.shard {
                None => None,
                Some(s) => {
                    let root = match resolver.project_root() {
                        Ok(r) => r,
                        Err(e) => return fail(e),
                    };
                    Some(crate::shard::plan(
                        resolver.as_ref(),
                        &root,
                        &discovery.files,
                        s,
                        &cwd,
                        &pool,
                    ))
                }
            };
            let files = plan.as_ref().map_or(&discovery.files, |p| &p.files);
            let bar = ProgressBar::new(!args.quiet, files.len(), args.verbose);
            let excluded = |p: &Path| {
                resolver.excludes_file(p) || plan.as_ref().is_some_and(|plan| !plan.owns(p))
            };
            let run = run::run_files_with(
                resolver.as_ref(),
                files,
                &pool,
                cache.as_ref(),
                &cwd,
                &bar,
                // Extension sources outside the checked paths are added, unless the
                // configuration excludes them (or another shard checks them).
                &excluded,
                &finish,
            );
            // An extension source outside the checked paths may be under a broken
            // configuration file: a usage error too.
            let errors: Vec<String> = run::extra_sources(
                run.links.iter().flat_map(|(_, links)| links),
                files,
                &cwd,
                &|_| false,
            )
            .iter()
            .filter_map(|c| resolver.for_path(&c.path()).err())
            .collect();
            if let Some(code) = configuration_errors(errors) {
                return code;
            }
            clean = run.clean;
            named.not_parsed = bar.take_not_parsed();
            if args.verbose {
                named.added = report::added_sources(&run.links, files, &cwd, &excluded);
            }
            run.kept
        }
    };
    // Folders the walk could not read: nothing under them was checked.
    done.extend(discovery.unreadable.iter().map(|u| {
        finish(gpulint_linter::engine::unreadable_directory(
            &u.path,
            u.display.clone(),
            u.reason.clone(),
        ))
    }));
    let mut counts: BTreeMap<Severity, usize> = BTreeMap::new();
    let mut failing = false;
    let mut chunks = Vec::with_capacity(done.len());
    let mut results = Vec::with_capacity(done.len());
    for d in done {
        for (severity, n) in [Severity::Info, Severity::Warning, Severity::Error]
            .into_iter()
            .zip(d.counts)
        {
            if n > 0 {
                *counts.entry(severity).or_default() += n;
            }
        }
        failing |= d.failing;
        chunks.push(d.chunk);
        results.push(d.result);
    }

    // Output: sorted by path, then position, whatever the thread count.
    let mut reports: Vec<&FileReport> = results
        .iter()
        .map(|r| &r.report)
        .filter(|r| !r.diagnostics.is_empty())
        .collect();
    reports.sort_by(|a, b| a.display_path.cmp(&b.display_path));
    if let Some(path) = &args.write_baseline {
        return match crate::baseline::write(path, &reports) {
            Ok(n) => {
                if !args.quiet {
                    eprintln!("Wrote {n} finding(s) to the baseline {}", path.display());
                }
                ExitCode::SUCCESS
            }
            Err(e) => fail(e),
        };
    }
    if let Some(reason) = &args.add_noqa {
        let reason = Some(reason.as_str()).filter(|r| !r.is_empty());
        let mut outcome = gpulint_linter::noqa_writer::Outcome::default();
        let mut failed = 0;
        for r in &results {
            if r.report.diagnostics.is_empty() {
                continue;
            }
            let lang = gpulint_syntax::Lang::of_path(&r.report.source.path)
                .unwrap_or(gpulint_syntax::Lang::Python);
            if let Err(e) = gpulint_linter::noqa_writer::add_noqa(
                &r.report.source.path,
                &r.report,
                lang,
                reason,
                &mut outcome,
            ) {
                eprintln!("gpulint: error: {e}");
                failed += 1;
            }
        }
        for place in &outcome.refused {
            eprintln!("{place}: no suppression added (the line ends inside a string or continues on the next)");
        }
        if !args.quiet {
            eprintln!(
                "Added {} suppression(s) to {} file(s).",
                outcome.added, outcome.files
            );
        }
        return if failed > 0 {
            ExitCode::from(2)
        } else {
            ExitCode::SUCCESS
        };
    }
    let out = if args.statistics {
        statistics(&reports, args.output_format)
    } else {
        // The parts of the files, in the order of their paths (stable: as found otherwise).
        let mut order: Vec<usize> = (0..results.len()).collect();
        order.sort_by(|&a, &b| {
            results[a]
                .report
                .display_path
                .cmp(&results[b].report.display_path)
        });
        render::assemble(
            args.output_format,
            order.iter().filter_map(|&i| chunks[i].as_ref()),
        )
    };
    match &args.output_file {
        Some(path) => {
            if let Err(e) = std::fs::write(path, &out) {
                return fail(format!("cannot write {}: {e}", path.display()));
            }
        }
        None => print_out(&out),
    }

    let internal = results.iter().any(|r| r.status == Status::InternalError);
    if !args.quiet {
        summary(
            &results,
            clean,
            &discovery,
            &counts,
            &named,
            started,
            args.verbose,
        );
    }
    if internal || !discovery.missing.is_empty() {
        return ExitCode::from(2);
    }
    if failing && !args.exit_zero {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// What `check` keeps of a file with something to show until the run ends.
struct Done {
    /// The result; without its text and findings once they are rendered.
    result: FileResult,
    /// The file's part of the output, unless the findings themselves are kept.
    chunk: Option<render::Chunk>,
    /// Findings by severity (info, warning, error).
    counts: [usize; 3],
    /// A finding at or above the `fail-on` of the file's settings.
    failing: bool,
}

/// Drops what was rendered of a result: the summary only needs its status, path, reason
/// and extension builds.
fn forget_findings(r: &mut FileResult) {
    r.report.diagnostics = Vec::new();
    r.report.notebook = None;
    r.dependencies = Vec::new();
    if !r.report.source.text.is_empty() {
        r.report.source = Arc::new(gpulint_source::SourceFile::new(
            r.report.source.path.clone(),
            r.report.source.display_path.clone(),
            String::new(),
        ));
    }
}

/// Reports broken configuration files (each once) as usage errors: exit 2 when there is one.
fn configuration_errors(mut errors: Vec<String>) -> Option<ExitCode> {
    errors.sort();
    errors.dedup();
    for e in &errors {
        eprintln!("gpulint: error: {e}");
    }
    (!errors.is_empty()).then(|| ExitCode::from(2))
}

/// The benchmark baseline: read a file and parse it once (a notebook cell by cell), nothing else.
fn parse_only(path: &Path, lang: gpulint_syntax::Lang, max_size: u64) -> bool {
    let Ok(text) = gpulint_source::read_source(path, max_size) else {
        return false;
    };
    if lang == gpulint_syntax::Lang::Manifest {
        // Manifests are read, not parsed with a grammar.
        return true;
    }
    if gpulint_syntax::is_notebook(path) {
        let Ok(nb) = gpulint_source::notebook::parse(&text) else {
            return false;
        };
        return nb
            .cells
            .iter()
            .all(|c| gpulint_syntax::parse_range(lang, &nb.source, c.start, c.end).is_some());
    }
    gpulint_syntax::parse(lang, &text).is_some()
}
