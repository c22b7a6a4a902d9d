//! `gpulint merge FILE...`: joins the JSON or SARIF reports of `gpulint check --shard I/N`
//! into the report one unsharded run would have written (the same bytes), applies a baseline
//! once, and exits as `check` would on the whole.
//!
//! Every file a run reports is checked by exactly one shard, so a report is a sequence of
//! per-file blocks sorted by path; the merge sorts the blocks of all the reports by path (a
//! stable sort, keeping each file's findings in their order), which is how `check` sorts.

use crate::check::FailOn;
use crate::output::{fail, print_out};
use crate::render::json::{self, JsonFinding};
use clap::{Args, ValueEnum};
use gpulint_diagnostics::Severity;
use gpulint_workspace::settings::{Overrides, Resolver, Source};
use serde_json::Value;
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The formats `merge` reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MergeFormat {
    Json,
    Sarif,
}

impl MergeFormat {
    fn as_str(self) -> &'static str {
        match self {
            MergeFormat::Json => "json",
            MergeFormat::Sarif => "sarif",
        }
    }
}

#[derive(Args, Debug)]
pub struct MergeArgs {
    /// The reports to join: all JSON or all SARIF, as `gpulint check --shard I/N` wrote them.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Output format; it must be the reports' own [default: the reports' format].
    #[arg(long, value_enum)]
    output_format: Option<MergeFormat>,
    /// Write the merged report to this file instead of standard output.
    #[arg(short = 'o', long, value_name = "FILE")]
    output_file: Option<PathBuf>,
    /// Leave out the findings recorded in this baseline FILE (see `check --write-baseline`).
    #[arg(long, value_name = "FILE")]
    baseline: Option<PathBuf>,
    /// Lowest severity that fails the merge (exit 1) [default: the configuration's, or warning].
    #[arg(long, value_enum)]
    fail_on: Option<FailOn>,
    /// Exit 0 even when there are findings.
    #[arg(long)]
    exit_zero: bool,
    /// Use this configuration file (for `fail-on`) instead of the nearest one of each
    /// reported file.
    #[arg(long, value_name = "FILE", conflicts_with = "isolated")]
    config: Option<PathBuf>,
    /// Ignore all configuration files.
    #[arg(long)]
    isolated: bool,
    /// Print the merged report only: no summary.
    #[arg(short, long)]
    quiet: bool,
}

/// One input report, parsed.
enum Report {
    Json(Vec<JsonFinding<'static>>),
    Sarif(Value),
}

impl Report {
    fn format(&self) -> MergeFormat {
        match self {
            Report::Json(_) => MergeFormat::Json,
            Report::Sarif(_) => MergeFormat::Sarif,
        }
    }
}

/// Runs `gpulint merge`.
pub fn merge(args: MergeArgs) -> ExitCode {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let resolver = match resolver(&args, &cwd) {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    let mut reports = Vec::new();
    for path in &args.files {
        match read(path) {
            Ok(r) => reports.push(r),
            Err(e) => return fail(e),
        }
    }
    let format = reports[0].format();
    if let Some((path, r)) = args
        .files
        .iter()
        .zip(&reports)
        .find(|(_, r)| r.format() != format)
    {
        return fail(format!(
            "cannot merge {} ({}) with {} ({}): the reports must all be JSON or all SARIF",
            args.files[0].display(),
            format.as_str(),
            path.display(),
            r.format().as_str()
        ));
    }
    if let Some(wanted) = args.output_format.filter(|f| *f != format) {
        return fail(format!(
            "--output-format {}: the reports are {}, and merge writes the format it reads",
            wanted.as_str(),
            format.as_str()
        ));
    }
    let known = match &args.baseline {
        Some(p) => match crate::baseline::read(p) {
            Ok(k) => Some(k),
            Err(e) => return fail(e),
        },
        None => None,
    };
    let merged = match format {
        MergeFormat::Json => merge_json(&args.files, reports, known.as_ref()),
        MergeFormat::Sarif => merge_sarif(&args.files, reports, known.as_ref()),
    };
    let (out, severities) = match merged {
        Ok(m) => m,
        Err(e) => return fail(e),
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
    for (_, s) in &severities {
        *counts.entry(*s).or_default() += 1;
    }
    if !args.quiet {
        let n = |s| counts.get(&s).copied().unwrap_or(0);
        let plural = |n: usize, w: &str| format!("{n} {w}{}", if n == 1 { "" } else { "s" });
        eprintln!(
            "Merged {}: {}, {}, {} info.",
            plural(args.files.len(), "report"),
            plural(n(Severity::Error), "error"),
            plural(n(Severity::Warning), "warning"),
            n(Severity::Info)
        );
    }
    // Each finding fails the run by the `fail-on` of its own file's settings, as in `check`.
    let failing = severities.iter().any(|(path, s)| {
        let path = path.strip_prefix("file://").unwrap_or(path);
        let fail_on = resolver
            .for_path(Path::new(path))
            .map_or(Severity::Warning, |r| r.engine.settings.fail_on);
        *s >= fail_on
    });
    if failing && !args.exit_zero {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// The settings of the reports' files: `--fail-on`, else the `fail-on` of each file's
/// configuration, else warning, as `check` decides it.
fn resolver(args: &MergeArgs, cwd: &Path) -> Result<Resolver, String> {
    let source = Source::new(args.config.as_deref(), args.isolated).map_err(|e| e.to_string())?;
    let overrides = Overrides {
        fail_on: args.fail_on.map(FailOn::severity),
        ..Overrides::default()
    };
    Resolver::new(overrides, source, cwd)
}

fn read(path: &Path) -> Result<Report, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let not_a_report = |why: String| {
        format!(
            "{} is not a gpulint JSON or SARIF report ({why}); merge reads what `gpulint check --output-format json|sarif` writes",
            path.display()
        )
    };
    let value: Value = serde_json::from_str(&text).map_err(|e| not_a_report(e.to_string()))?;
    match value {
        Value::Array(_) => serde_json::from_value(value)
            .map(Report::Json)
            .map_err(|e| not_a_report(format!("a finding does not have the JSON schema: {e}"))),
        Value::Object(ref o) if o.contains_key("runs") => {
            let run = value.pointer("/runs/0");
            let name = value
                .pointer("/runs/0/tool/driver/name")
                .and_then(Value::as_str);
            let results = value.pointer("/runs/0/results").map(Value::is_array);
            match (run, name, results) {
                (Some(_), Some("gpulint"), Some(true))
                    if value["runs"].as_array().is_some_and(|r| r.len() == 1) =>
                {
                    Ok(Report::Sarif(value))
                }
                (_, Some(other), _) if other != "gpulint" => {
                    Err(not_a_report(format!("its tool is `{other}`")))
                }
                _ => Err(not_a_report("not one SARIF run with results".into())),
            }
        }
        _ => Err(not_a_report(
            "neither a JSON array of findings nor a SARIF log".into(),
        )),
    }
}

/// Sorts per-file blocks of findings (`(path, input, items)`) by path, refusing a file found in
/// two reports.
fn sort_blocks<T>(
    files: &[PathBuf],
    mut blocks: Vec<(String, usize, Vec<T>)>,
) -> Result<Vec<T>, String> {
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (path, input, _) in &blocks {
        if let Some(first) = seen.insert(path, *input) {
            if first != *input {
                return Err(format!(
                    "findings in `{path}` are in both {} and {}: each file must come from one shard (was a report merged twice?)",
                    files[first].display(),
                    files[*input].display()
                ));
            }
        }
    }
    blocks.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(blocks.into_iter().flat_map(|b| b.2).collect())
}

/// Splits one report's findings into per-file blocks, in order.
fn blocks_of<T>(
    input: usize,
    items: Vec<T>,
    path: impl Fn(&T) -> String,
) -> Vec<(String, usize, Vec<T>)> {
    let mut out: Vec<(String, usize, Vec<T>)> = Vec::new();
    for item in items {
        let p = path(&item);
        match out.last_mut() {
            Some(last) if last.0 == p => last.2.push(item),
            _ => out.push((p, input, vec![item])),
        }
    }
    out
}

/// The merged report, and the path and severity of each finding.
type Merged = Result<(String, Vec<(String, Severity)>), String>;

fn merge_json(files: &[PathBuf], reports: Vec<Report>, known: Option<&HashSet<String>>) -> Merged {
    let mut blocks = Vec::new();
    for (i, r) in reports.into_iter().enumerate() {
        let Report::Json(items) = r else { continue };
        let items = items
            .into_iter()
            .filter(|f| known.is_none_or(|k| !k.contains(f.fingerprint.as_ref())))
            .collect();
        blocks.extend(blocks_of(i, items, |f: &JsonFinding<'_>| {
            f.path.to_string()
        }));
    }
    let items = sort_blocks(files, blocks)?;
    let mut severities = Vec::new();
    for f in &items {
        let severity = Severity::parse(&f.severity).ok_or_else(|| {
            format!(
                "unknown severity `{}` in a finding of `{}`",
                f.severity, f.path
            )
        })?;
        severities.push((f.path.to_string(), severity));
    }
    Ok((json::write(&items), severities))
}

fn merge_sarif(files: &[PathBuf], reports: Vec<Report>, known: Option<&HashSet<String>>) -> Merged {
    let mut first: Option<Value> = None;
    let mut blocks = Vec::new();
    for (i, r) in reports.into_iter().enumerate() {
        let Report::Sarif(mut doc) = r else { continue };
        let results = match doc.pointer_mut("/runs/0/results") {
            Some(Value::Array(a)) => std::mem::take(a),
            _ => Vec::new(),
        };
        match &first {
            None => first = Some(doc),
            Some(f) => {
                if f.pointer("/runs/0/tool") != doc.pointer("/runs/0/tool") {
                    return Err(format!(
                        "{} and {} were written by different gpulint builds (their `tool` differs): merge reports of one version",
                        files[0].display(),
                        files[i].display()
                    ));
                }
            }
        }
        let results = results
            .into_iter()
            .filter(|r| {
                let fp = r
                    .pointer("/partialFingerprints/gpulint~1v1")
                    .and_then(Value::as_str);
                known.is_none_or(|k| !fp.is_some_and(|fp| k.contains(fp)))
            })
            .collect();
        blocks.extend(blocks_of(i, results, |r: &Value| {
            r.pointer("/locations/0/physicalLocation/artifactLocation/uri")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        }));
    }
    let results = sort_blocks(files, blocks)?;
    let severities = results
        .iter()
        .map(|r| {
            let path = r
                .pointer("/locations/0/physicalLocation/artifactLocation/uri")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let severity = match r.get("level").and_then(Value::as_str) {
                Some("error") => Severity::Error,
                Some("note") | Some("none") => Severity::Info,
                _ => Severity::Warning,
            };
            (path, severity)
        })
        .collect();
    let mut doc = first.unwrap_or(Value::Null);
    if let Some(slot) = doc.pointer_mut("/runs/0/results") {
        *slot = Value::Array(results);
    }
    let mut s = serde_json::to_string_pretty(&doc).unwrap_or_default();
    s.push('\n');
    Ok((s, severities))
}
