//! The command line: `gpulint [check] [PATH...]`, `gpulint rules`, `gpulint explain CODE`,
//! `gpulint decode EXIT_CODE`.

use crate::decode;
use crate::render::{self, Format};
use clap::{Args, Parser, Subcommand, ValueEnum};
use gpulint_diagnostics::{FileReport, Severity};
use gpulint_linter::engine::{Engine, FileResult, Status};
use gpulint_linter::registry;
use gpulint_linter::settings::{parse_size, PerFileIgnore, Selector, Settings};
use gpulint_workspace::config::{self, LoadedConfig};
use gpulint_workspace::discover::{self, Excludes, DEFAULT_EXCLUDE};
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

#[derive(Parser, Debug)]
#[command(
    name = "gpulint",
    version,
    about = "Finds the causes of GPU training crashes in Python, CUDA and C++ op code, before anything runs.",
    after_help = "`gpulint PATH...` is short for `gpulint check PATH...`.\nExit codes: 0 nothing at or above --fail-on, 1 findings, 2 usage, configuration or internal error."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Check files and directories (the default command).
    Check(Box<CheckArgs>),
    /// List the rules: code, name, severity, language and summary.
    Rules {
        /// Output format.
        #[arg(long, value_enum, default_value_t = ListFormat::Text)]
        output_format: ListFormat,
    },
    /// Estimate the peak GPU memory of training the model(s) in a Python file.
    Estimate(crate::estimate::EstimateArgs),
    /// Print the documentation of a rule, by code or name.
    Explain {
        /// A rule code (`CU001`) or name (`unguarded-thread-index`).
        rule: String,
    },
    /// Explain a crashed process's exit code (`-1073740791`, `0xC0000409`, `139`, `-11`) and
    /// name the rules that look for its causes. Exits 2 for a code it does not know.
    Decode {
        /// The exit code: signed or unsigned decimal, or hexadecimal (`0xC0000409`).
        #[arg(allow_hyphen_values = true)]
        code: String,
        /// Output format.
        #[arg(long, value_enum, default_value_t = ListFormat::Text)]
        output_format: ListFormat,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ListFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum FailOn {
    Error,
    Warning,
    Info,
}

#[derive(Args, Debug)]
struct CheckArgs {
    /// Files or directories to check [default: .; none after `--` checks nothing]
    paths: Vec<PathBuf>,
    /// Set when the command line ends with `--` and names no path: check nothing.
    #[arg(skip)]
    no_paths: bool,
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
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    if std::env::var_os("GPULINT_BACKTRACE").is_none() {
        // Panics are caught per file and reported as findings; keep stderr clean.
        std::panic::set_hook(Box::new(|_| {}));
    }
    let args = normalize_args(std::env::args_os().collect());
    match std::panic::catch_unwind(|| run(args)) {
        Ok(code) => code,
        Err(payload) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            eprintln!("gpulint: internal error: {msg}; please report it");
            ExitCode::from(2)
        }
    }
}

/// Inserts the default `check` subcommand when none is given.
fn normalize_args(mut args: Vec<OsString>) -> Vec<OsString> {
    const KNOWN: &[&str] = &[
        "check",
        "rules",
        "explain",
        "estimate",
        "decode",
        "help",
        "-h",
        "--help",
        "-V",
        "--version",
    ];
    let first = args.get(1).and_then(|a| a.to_str());
    if !first.is_some_and(|a| KNOWN.contains(&a)) {
        args.insert(1.min(args.len()), OsString::from("check"));
    }
    args
}

/// Runs gpulint with these arguments (the program name first) and returns the exit code.
pub fn run(args: Vec<OsString>) -> ExitCode {
    let ends_with_separator = args.last().is_some_and(|a| a == "--");
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    match cli.command {
        Command::Check(mut args) => {
            args.no_paths = ends_with_separator && args.paths.is_empty();
            check(*args)
        }
        Command::Rules { output_format } => list_rules(output_format),
        Command::Explain { rule } => explain(&rule),
        Command::Estimate(args) => crate::estimate::run(args),
        Command::Decode {
            code,
            output_format,
        } => decode(&code, output_format),
    }
}

fn fail(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("gpulint: error: {message}");
    ExitCode::from(2)
}

fn list_rules(format: ListFormat) -> ExitCode {
    let metas = registry::all_metas();
    let out = match format {
        ListFormat::Json => {
            let items: Vec<serde_json::Value> = metas
                .iter()
                .map(|m| {
                    serde_json::json!({
                        "code": m.code,
                        "name": m.name,
                        "severity": m.severity.as_str(),
                        "language": m.lang.as_str(),
                        "summary": m.summary,
                        "options": m.options.iter().map(|o| serde_json::json!({
                            "key": o.key, "default": o.default, "doc": o.doc
                        })).collect::<Vec<_>>(),
                    })
                })
                .collect();
            serde_json::to_string_pretty(&items).unwrap_or_default() + "\n"
        }
        ListFormat::Text => {
            let w = metas.iter().map(|m| m.name.len()).max().unwrap_or(10);
            let mut s = String::new();
            for m in &metas {
                s.push_str(&format!(
                    "{:<6} {:<w$}  {:<7}  {:<6}  {}\n",
                    m.code,
                    m.name,
                    m.severity.as_str(),
                    m.lang.as_str(),
                    m.summary
                ));
            }
            s
        }
    };
    print_out(&out);
    ExitCode::SUCCESS
}

fn explain(rule: &str) -> ExitCode {
    let Some(m) = registry::find(rule) else {
        return fail(format!("unknown rule `{rule}` (see `gpulint rules`)"));
    };
    let mut s = format!(
        "# {} ({})\n\nSeverity: {} · Language: {}\n\n{}\n\n{}",
        m.code,
        m.name,
        m.severity,
        m.lang.as_str(),
        m.summary,
        m.doc_markdown()
    );
    if !m.options.is_empty() {
        s.push_str("\n## Options\n");
        for o in m.options {
            s.push_str(&format!(
                "- `{}` (default `{}`): {}\n",
                o.key, o.default, o.doc
            ));
        }
    }
    print_out(&s);
    ExitCode::SUCCESS
}

fn decode(input: &str, format: ListFormat) -> ExitCode {
    let code = match decode::parse(input) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    match decode::lookup(code) {
        Some(entry) => {
            print_out(&match format {
                ListFormat::Text => decode::render_text(code, entry),
                ListFormat::Json => decode::render_json(code, entry),
            });
            ExitCode::SUCCESS
        }
        None => {
            eprint!("{}", decode::unknown_text(code));
            ExitCode::from(2)
        }
    }
}

pub(crate) fn print_out(s: &str) {
    let mut out = std::io::stdout().lock();
    // A closed pipe (`| head`) is not an error worth reporting.
    let _ = out.write_all(s.as_bytes());
    let _ = out.flush();
}

fn parse_selectors(list: &[String], what: &str) -> Result<Vec<Selector>, String> {
    list.iter()
        .map(|s| Selector::parse(s).map_err(|e| format!("{what}: {e}")))
        .collect()
}

/// Builds the settings from the configuration file and the command line (the command line wins).
fn settings_for(
    args: &CheckArgs,
    loaded: Option<&LoadedConfig>,
    cwd: &Path,
) -> Result<Settings, String> {
    let file = loaded.map(|l| l.config.clone()).unwrap_or_default();
    let select = if !args.select.is_empty() {
        parse_selectors(&args.select, "--select")?
    } else if let Some(s) = &file.select {
        parse_selectors(s, "select")?
    } else {
        vec![Selector::parse("ALL")?]
    };
    let mut extend = parse_selectors(
        file.extend_select.as_deref().unwrap_or(&[]),
        "extend-select",
    )?;
    extend.extend(parse_selectors(&args.extend_select, "--extend-select")?);
    // An explicit --select replaces the configured selection, ignores included.
    let mut ignore = if args.select.is_empty() {
        parse_selectors(file.ignore.as_deref().unwrap_or(&[]), "ignore")?
    } else {
        Vec::new()
    };
    ignore.extend(parse_selectors(&args.ignore, "--ignore")?);

    let mut settings = Settings::with_selection(&select, &extend, &ignore);
    settings.root = loaded.map(|l| l.dir()).unwrap_or_else(|| cwd.to_path_buf());
    if let Ok(root) = std::fs::canonicalize(&settings.root) {
        settings.root = root;
    }
    for (glob, codes) in file.per_file_ignores.iter().flatten() {
        settings.per_file_ignores.push(PerFileIgnore::new(
            glob,
            parse_selectors(codes, "per-file-ignores")?,
        )?);
    }
    settings.rule_options = file.rules.clone().unwrap_or_default().into_iter().collect();
    settings.fail_on = match args.fail_on {
        Some(FailOn::Error) => Severity::Error,
        Some(FailOn::Warning) => Severity::Warning,
        Some(FailOn::Info) => Severity::Info,
        None => file
            .fail_on
            .as_deref()
            .and_then(Severity::parse)
            .unwrap_or(Severity::Warning),
    };
    (settings.gpu_memory, settings.gpu_memory_origin) =
        config::resolve_budget(args.gpu_memory, args.gpu.as_deref(), loaded)?;
    settings.verbose = args.verbose;
    // Manifests read the files they include only below the checked paths.
    let paths = if args.paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        args.paths.clone()
    };
    settings.roots = paths
        .iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .map(|p| {
            if p.is_file() {
                p.parent().map(Path::to_path_buf).unwrap_or(p)
            } else {
                p
            }
        })
        .collect();
    Ok(settings)
}

fn check(args: CheckArgs) -> ExitCode {
    let started = Instant::now();
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let loaded = if args.isolated {
        None
    } else if let Some(path) = &args.config {
        match config::load(path) {
            Ok(c) => Some(c),
            Err(e) => return fail(e),
        }
    } else {
        match config::discover(&cwd) {
            Ok(c) => c,
            Err(e) => return fail(e),
        }
    };
    let settings = match settings_for(&args, loaded.as_ref(), &cwd) {
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
    let paths = if args.paths.is_empty() && !args.no_paths {
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
            let mut bytes = Vec::new();
            if let Err(e) = std::io::Read::read_to_end(&mut std::io::stdin(), &mut bytes) {
                return fail(format!("cannot read standard input: {e}"));
            }
            vec![engine.check_bytes(path, discover::display_path(path, &cwd), bytes, lang)]
        }
        None => {
            let use_cache = !args.no_cache && args.add_noqa.is_none();
            run_files(
                &engine,
                &discovery.files,
                &pool,
                use_cache,
                &cwd,
                !args.quiet,
                // Extension sources outside the checked paths are added, unless the
                // configuration excludes them.
                &|p: &Path| excludes.excludes_file(p, &engine.settings.root, &cwd),
            )
        }
    };
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
                eprintln!("gpulint: {e}");
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
        return ExitCode::SUCCESS;
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

/// Checks the files in parallel, through the cache when asked, with a progress bar on a terminal.
fn run_files(
    engine: &Engine,
    files: &[discover::Candidate],
    pool: &rayon::ThreadPool,
    use_cache: bool,
    cwd: &Path,
    progress: bool,
    excluded: &(dyn Fn(&Path) -> bool + Sync),
) -> Vec<FileResult> {
    let cache = use_cache.then(|| {
        gpulint_linter::cache::Cache::open(
            &engine.settings.root.join(".gpulint_cache"),
            &engine.settings.cache_key(),
        )
    });
    let bar = (progress && files.len() > 200 && std::io::stderr().is_terminal()).then(|| {
        let bar = indicatif::ProgressBar::new(files.len() as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} checking {pos}/{len} files {wide_bar} {elapsed}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    });
    let key = |c: &discover::Candidate| cwd.join(&c.path).display().to_string();
    let check_one = |c: &discover::Candidate| {
        // A manifest's findings depend on the files it includes: never cached (they are cheap
        // to check).
        let out = match &cache {
            None => (engine.check_path(&c.path, c.display.clone(), c.lang), None),
            Some(_) if c.lang == gpulint_syntax::Lang::Manifest => {
                (engine.check_path(&c.path, c.display.clone(), c.lang), None)
            }
            Some(cache) => {
                let bytes = match gpulint_source::read_bytes(&c.path, engine.settings.max_file_size)
                {
                    Ok(b) => b,
                    Err(_) => return (engine.check_path(&c.path, c.display.clone(), c.lang), None),
                };
                let hash = gpulint_linter::cache::content_hash(&bytes);
                let k = key(c);
                let hit = cache
                    .get(&k, hash, bytes.len().max(1) * 2)
                    .and_then(|cached| {
                        engine.restore(&c.path, c.display.clone(), bytes.clone(), cached)
                    });
                let result = hit.unwrap_or_else(|| {
                    engine.check_bytes(&c.path, c.display.clone(), bytes, c.lang)
                });
                let entry =
                    matches!(result.status, Status::Checked | Status::Prefiltered).then(|| {
                        (
                            k,
                            gpulint_linter::cache::Cache::entry(
                                hash,
                                result.status == Status::Checked,
                                result.partial,
                                &result.report.diagnostics,
                                &result.dependencies,
                                &result.links,
                            ),
                        )
                    });
                (result, entry)
            }
        };
        if let Some(b) = &bar {
            b.inc(1);
        }
        out
    };
    let mut checked: Vec<(FileResult, Option<(String, gpulint_linter::cache::Entry)>)> =
        pool.install(|| files.par_iter().map(check_one).collect());
    // The C++/CUDA sources of the extensions that checked Python files build are checked too.
    let extra = gpulint_linter::link::extra_sources(
        checked.iter().flat_map(|(r, _)| &r.links),
        files,
        cwd,
        excluded,
    );
    if !extra.is_empty() {
        if let Some(b) = &bar {
            b.inc_length(extra.len() as u64);
        }
        checked.extend(pool.install(|| extra.par_iter().map(check_one).collect::<Vec<_>>()));
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let (mut results, entries): (Vec<FileResult>, Vec<_>) = checked.into_iter().unzip();
    gpulint_linter::link::annotate(&mut results, cwd);
    if let Some(cache) = cache {
        // A cache that cannot be written only makes the next run slower.
        let _ = cache.save(entries.into_iter().flatten().collect());
    }
    results
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
        for line in gpulint_linter::link::describe_all(results) {
            let _ = writeln!(err, "{line}");
        }
        for r in results.iter().filter(|r| r.partial) {
            let _ = writeln!(err, "partly parsed: {}", r.report.display_path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_subcommand() {
        let a = |v: &[&str]| normalize_args(v.iter().map(OsString::from).collect());
        assert_eq!(a(&["gpulint"]), a(&["gpulint", "check"]));
        assert_eq!(a(&["gpulint", "src"])[1], "check");
        assert_eq!(a(&["gpulint", "--select", "CU"])[1], "check");
        assert_eq!(a(&["gpulint", "rules"])[1], "rules");
        assert_eq!(a(&["gpulint", "--version"])[1], "--version");
    }
}
