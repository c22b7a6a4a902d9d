//! The command line: `gpulint [check] [PATH...]`, `gpulint rules`, `gpulint explain CODE`,
//! `gpulint decode EXIT_CODE`, `gpulint merge FILE...`, `gpulint server`.

use crate::check::{check, CheckArgs};
use crate::decode;
use crate::output::{fail, print_out};
use clap::{Parser, Subcommand, ValueEnum};
use gpulint_linter::registry;
use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;

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
    /// Join the JSON or SARIF reports of `check --shard I/N` into the report of one run.
    Merge(crate::merge::MergeArgs),
    /// Run the language server (LSP, on standard input and output) for editors.
    Server,
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
        "merge",
        "server",
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

/// The subcommand a mistyped first argument most likely meant (`rule` → `rules`), when that
/// argument names no file or folder: `gpulint rule CU001` is a typo, not two missing paths.
fn misspelled_command(arg: &str) -> Option<&'static str> {
    const COMMANDS: &[&str] = &[
        "check", "rules", "explain", "estimate", "decode", "merge", "server", "help",
    ];
    if arg.starts_with('-') || arg.contains(['/', '\\', '.']) || Path::new(arg).exists() {
        return None;
    }
    let arg = arg.to_ascii_lowercase();
    COMMANDS
        .iter()
        .map(|c| (edit_distance(&arg, c), *c))
        .filter(|(d, c)| *d > 0 && *d <= 2 && *d < c.len() / 2 + 1)
        .min()
        .map(|(_, c)| c)
}

/// Levenshtein distance (for short words).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// Runs gpulint with these arguments (the program name first) and returns the exit code.
pub fn run(args: Vec<OsString>) -> ExitCode {
    // `check` is inserted when the first argument is not a command: look at what follows it.
    let first = match args.get(1).and_then(|a| a.to_str()) {
        Some("check") => args.get(2),
        _ => args.get(1),
    };
    if let Some(first) = first.and_then(|a| a.to_str()) {
        if let Some(meant) = misspelled_command(first) {
            return fail(format!(
                "unknown command `{first}`, and no file or folder of that name: did you mean `gpulint {meant}`? (see `gpulint --help`)"
            ));
        }
    }
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
        Command::Merge(args) => crate::merge::merge(args),
        Command::Server => crate::server::run(),
        Command::Decode {
            code,
            output_format,
        } => decode(&code, output_format),
    }
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
