//! `gpulint check`: configuration, discovery, the run, the baseline or `--add-noqa`, the
//! report and the exit code.

use crate::output::{fail, print_out};
use crate::render::{self, Format};
use clap::{Args, ValueEnum};
use gpulint_diagnostics::{FileReport, Severity};
use gpulint_linter::engine::{Engine, FileResult, Status};
use gpulint_linter::run;
use gpulint_linter::settings::parse_size;
use gpulint_workspace::discover::{self, Excludes, DEFAULT_EXCLUDE};
use gpulint_workspace::settings::{find_config, Overrides};
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

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
    /// Use this configuration file (gpulint.toml or pyproject.toml).
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
    /// Show parse-error notes (GL003), the files not parsed, and more detail in the summary.
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
    let loaded = match find_config(args.config.as_deref(), args.isolated, &cwd) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let settings =
        match gpulint_workspace::settings::settings(&args.overrides(), loaded.as_ref(), &cwd) {
            Ok(s) => s,
            Err(e) => return fail(e),
        };
    let file_cfg = loaded
        .as_ref()
        .map(|l| l.config.clone())
        .unwrap_or_default();
    let mut exclude: Vec<String> = match &file_cfg.exclude {
        Some(list) => list.clone(),
        None => DEFAULT_EXCLUDE.iter().map(|s| s.to_string()).collect(),
    };
    exclude.extend(file_cfg.extend_exclude.iter().flatten().cloned());
    let excludes = match Excludes::new(&exclude) {
        Ok(e) => e,
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
    let mut discovery = discover::discover(&paths, &excludes, &cwd);
    if args.force_exclude {
        // Exclusions are relative to the configuration file's folder, as for per-file-ignores.
        discovery
            .files
            .retain(|c| !excludes.excludes_file(&c.path, &settings.root, &cwd));
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
                .map(|c| parse_only(&c.path, c.lang, settings.max_file_size) as usize)
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

    let engine = Engine::new(settings);
    let mut results: Vec<FileResult> = match &args.stdin_filename {
        Some(path) => {
            let Some(lang) = gpulint_syntax::Lang::of_path(path) else {
                return fail(format!(
                    "--stdin-filename {}: not a Python, CUDA/C++ or dependency manifest file name",
                    path.display()
                ));
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
            vec![engine.check_bytes(path, discover::display_path(path, &cwd), bytes, lang)]
        }
        None => {
            let use_cache = !args.no_cache && args.add_noqa.is_none();
            // A shard checks its part of the files, and of the extension sources they build.
            let plan = args
                .shard
                .map(|s| crate::shard::plan(&engine, &discovery.files, s, &cwd, &pool));
            let files = plan.as_ref().map_or(&discovery.files, |p| &p.files);
            let bar = ProgressBar::new(!args.quiet, files.len());
            run::run_files(
                &engine,
                files,
                &pool,
                use_cache,
                &cwd,
                &bar,
                // Extension sources outside the checked paths are added, unless the
                // configuration excludes them (or another shard checks them).
                &|p: &Path| {
                    excludes.excludes_file(p, &engine.settings.root, &cwd)
                        || plan.as_ref().is_some_and(|plan| !plan.owns(p))
                },
            )
        }
    };
    // Folders the walk could not read: nothing under them was checked.
    results.extend(discovery.unreadable.iter().map(|u| {
        gpulint_linter::engine::unreadable_directory(&u.path, u.display.clone(), u.reason.clone())
    }));
    let settings = &engine.settings;

    if let Some(path) = &args.baseline {
        let known = match crate::baseline::read(path) {
            Ok(k) => k,
            Err(e) => return fail(e),
        };
        for r in &mut results {
            r.report
                .diagnostics
                .retain(|d| !known.contains(&d.fingerprint));
        }
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
    let color = args.output_file.is_none()
        && std::io::stdout().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let out = if args.statistics {
        statistics(&reports, args.output_format)
    } else {
        render::render(args.output_format, &reports, color)
    };
    match &args.output_file {
        Some(path) => {
            if let Err(e) = std::fs::write(path, &out) {
                return fail(format!("cannot write {}: {e}", path.display()));
            }
        }
        None => print_out(&out),
    }

    let mut counts: BTreeMap<Severity, usize> = BTreeMap::new();
    for r in &reports {
        for d in &r.diagnostics {
            *counts.entry(d.severity).or_default() += 1;
        }
    }
    let internal = results.iter().any(|r| r.status == Status::InternalError);
    if !args.quiet {
        summary(&results, &discovery, &counts, started, args.verbose);
    }
    if internal || !discovery.missing.is_empty() {
        return ExitCode::from(2);
    }
    let failing = counts.iter().any(|(s, n)| *s >= settings.fail_on && *n > 0);
    if failing && !args.exit_zero {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
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

/// The progress bar of a long check on a terminal (more than 200 files), cleared at the end.
struct ProgressBar(Option<indicatif::ProgressBar>);

impl ProgressBar {
    fn new(show: bool, files: usize) -> ProgressBar {
        ProgressBar(
            (show && files > 200 && std::io::stderr().is_terminal()).then(|| {
                let bar = indicatif::ProgressBar::new(files as u64);
                bar.set_style(
                    indicatif::ProgressStyle::with_template(
                        "{spinner} checking {pos}/{len} files {wide_bar} {elapsed}",
                    )
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
                );
                bar
            }),
        )
    }
}

impl run::Progress for ProgressBar {
    fn inc(&self) {
        if let Some(b) = &self.0 {
            b.inc(1);
        }
    }

    fn add(&self, n: u64) {
        if let Some(b) = &self.0 {
            b.inc_length(n);
        }
    }
}

impl Drop for ProgressBar {
    fn drop(&mut self) {
        if let Some(b) = &self.0 {
            b.finish_and_clear();
        }
    }
}

fn statistics(reports: &[&FileReport], format: Format) -> String {
    let mut by_code: BTreeMap<&str, (usize, &str, Severity)> = BTreeMap::new();
    for r in reports {
        for d in &r.diagnostics {
            let e = by_code.entry(d.code).or_insert((0, d.name, d.severity));
            e.0 += 1;
        }
    }
    let mut rows: Vec<_> = by_code.into_iter().collect();
    rows.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(a.0.cmp(b.0)));
    if format == Format::Json {
        let items: Vec<serde_json::Value> = rows
            .iter()
            .map(|(code, (n, name, sev))| {
                serde_json::json!({"code": code, "name": name, "severity": sev.as_str(), "count": n})
            })
            .collect();
        return serde_json::to_string_pretty(&items).unwrap_or_default() + "\n";
    }
    let mut s = String::new();
    for (code, (n, name, sev)) in rows {
        s.push_str(&format!("{n:>6}  {code:<6} [{sev}] {name}\n"));
    }
    s
}

fn summary(
    results: &[FileResult],
    discovery: &discover::Discovery,
    counts: &BTreeMap<Severity, usize>,
    started: Instant,
    verbose: bool,
) {
    let checked = results
        .iter()
        .filter(|r| matches!(r.status, Status::Checked | Status::Prefiltered))
        .count();
    let prefiltered = results
        .iter()
        .filter(|r| r.status == Status::Prefiltered)
        .count();
    let partial = results.iter().filter(|r| r.partial).count();
    let skipped: Vec<(&str, &str)> = results
        .iter()
        .filter(|r| matches!(r.status, Status::Skipped | Status::InternalError))
        .map(|r| {
            (
                r.report.display_path.as_str(),
                r.reason.as_deref().unwrap_or(""),
            )
        })
        .chain(
            discovery
                .skipped
                .iter()
                .map(|(p, w)| (p.as_str(), w.as_str())),
        )
        .collect();
    let mut err = std::io::stderr().lock();
    for (path, why) in skipped.iter().take(if verbose { usize::MAX } else { 10 }) {
        let _ = writeln!(err, "skipped {path}: {why}");
    }
    if skipped.len() > 10 && !verbose {
        let _ = writeln!(
            err,
            "… and {} more skipped (see --verbose)",
            skipped.len() - 10
        );
    }
    let n = |s| counts.get(&s).copied().unwrap_or(0);
    let plural = |n: usize, w: &str| format!("{n} {w}{}", if n == 1 { "" } else { "s" });
    let mut line = format!("Checked {}", plural(checked, "file"));
    let mut details = Vec::new();
    if !skipped.is_empty() {
        details.push(format!("{} skipped", skipped.len()));
    }
    if partial > 0 {
        details.push(format!("{partial} partly parsed"));
    }
    if verbose {
        details.push(format!(
            "{prefiltered} needed no parse: no enabled rule could match them"
        ));
    }
    if !details.is_empty() {
        line.push_str(&format!(" ({})", details.join(", ")));
    }
    let _ = writeln!(
        err,
        "{line} in {:.2}s: {}, {}, {} info.",
        started.elapsed().as_secs_f64(),
        plural(n(Severity::Error), "error"),
        plural(n(Severity::Warning), "warning"),
        n(Severity::Info)
    );
    if verbose {
        for line in run::describe_all(results) {
            let _ = writeln!(err, "{line}");
        }
        for r in results.iter().filter(|r| r.partial) {
            let _ = writeln!(err, "partly parsed: {}", r.report.display_path);
        }
    }
}
