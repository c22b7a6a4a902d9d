//! What `check` says besides the findings: the progress bar, the per-rule statistics and the
//! summary on standard error.

use crate::render::Format;
use gpulint_diagnostics::{FileReport, Severity};
use gpulint_linter::engine::{FileResult, Status};
use gpulint_linter::run;
use gpulint_workspace::discover;
use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

/// The progress bar of a long check on a terminal (more than 200 files), cleared at the end;
/// with `--verbose`, it also keeps the names of the files that were not parsed.
pub struct ProgressBar {
    bar: Option<indicatif::ProgressBar>,
    not_parsed: Option<Mutex<Vec<String>>>,
}

impl ProgressBar {
    pub fn new(show: bool, files: usize, verbose: bool) -> ProgressBar {
        let bar = (show && files > 200 && std::io::stderr().is_terminal()).then(|| {
            let bar = indicatif::ProgressBar::new(files as u64);
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{spinner} checking {pos}/{len} files {wide_bar} {elapsed}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            bar
        });
        ProgressBar {
            bar,
            not_parsed: verbose.then(Mutex::default),
        }
    }

    /// The files that were read but not parsed, as shown, in order (empty unless verbose).
    pub fn take_not_parsed(&self) -> Vec<String> {
        let mut names = self
            .not_parsed
            .as_ref()
            .map(|m| std::mem::take(&mut *m.lock().unwrap_or_else(|e| e.into_inner())))
            .unwrap_or_default();
        names.sort_unstable();
        names
    }
}

impl run::Progress for ProgressBar {
    fn inc(&self) {
        if let Some(b) = &self.bar {
            b.inc(1);
        }
    }

    fn add(&self, n: u64) {
        if let Some(b) = &self.bar {
            b.inc_length(n);
        }
    }

    fn not_parsed(&self, display: &str) {
        if let Some(names) = &self.not_parsed {
            names
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(display.to_owned());
        }
    }
}

impl Drop for ProgressBar {
    fn drop(&mut self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

pub fn statistics(reports: &[&FileReport], format: Format) -> String {
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

/// The files `--verbose` names besides the findings, each list in order.
#[derive(Default)]
pub struct Named {
    /// The extension sources checked though not under the paths given.
    pub added: Vec<String>,
    /// The files read but not parsed: no enabled rule could match them.
    pub not_parsed: Vec<String>,
}

/// The extension sources that a run with these `links` checked beyond `files` (those that
/// `excluded` leaves), as shown.
pub fn added_sources(
    links: &[(String, Vec<gpulint_linter::link::Link>)],
    files: &[run::Candidate],
    cwd: &Path,
    excluded: &dyn Fn(&Path) -> bool,
) -> Vec<String> {
    run::extra_sources(links.iter().flat_map(|(_, l)| l), files, cwd, excluded)
        .iter()
        .map(|c| c.display())
        .collect()
}

pub fn summary(
    results: &[FileResult],
    clean: run::Clean,
    discovery: &discover::Discovery,
    counts: &BTreeMap<Severity, usize>,
    named: &Named,
    started: Instant,
    verbose: bool,
) {
    let checked = clean.checked
        + clean.prefiltered
        + results
            .iter()
            .filter(|r| matches!(r.status, Status::Checked | Status::Prefiltered))
            .count();
    let prefiltered = clean.prefiltered
        + results
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
        for line in run::describe_all(
            results
                .iter()
                .map(|r| (r.report.display_path.as_str(), r.links.as_slice())),
        ) {
            let _ = writeln!(err, "{line}");
        }
        for r in results.iter().filter(|r| r.partial) {
            let _ = writeln!(err, "partly parsed: {}", r.report.display_path);
        }
        for path in &named.added {
            let _ = writeln!(
                err,
                "also checked: {path} (an extension source that a checked file builds)"
            );
        }
        for path in &named.not_parsed {
            let _ = writeln!(err, "not parsed: {path}");
        }
    }
}
