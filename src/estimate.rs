//! `gpulint estimate FILE`: the per-layer table, the totals, the peak for the batch found and
//! the largest batch that fits, as text or JSON.

use crate::output::{fail, print_out};
use clap::{Args, ValueEnum};
use gpulint_linter::settings::{format_size, parse_size, BudgetOrigin};
use gpulint_memory::layer::fmt_shape;
use gpulint_memory::value::Fw;
use gpulint_memory::ModelReport;
use gpulint_workspace::config;
use gpulint_workspace::settings::find_config;
use serde_json::{json, Value};
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EstimateFormat {
    Text,
    Json,
}

#[derive(Args, Debug)]
pub struct EstimateArgs {
    /// The Python file that builds and trains the model.
    pub file: PathBuf,
    /// GPU-memory budget: 8GiB, 8GB, 8192MiB [default: 8GiB, or the configuration's].
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub gpu_memory: Option<u64>,
    /// GPU model whose memory is the budget: rtx3060, t4, a100-80gb, ...
    #[arg(long, value_name = "NAME", conflicts_with = "gpu_memory")]
    pub gpu: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = EstimateFormat::Text)]
    pub output_format: EstimateFormat,
    /// Use this configuration file (gpulint.toml or pyproject.toml) instead of the nearest one
    /// of FILE.
    #[arg(long, value_name = "FILE", conflicts_with = "isolated")]
    pub config: Option<PathBuf>,
    /// Ignore all configuration files.
    #[arg(long)]
    pub isolated: bool,
    /// Print the largest batch that fits the budget and a table of common GPUs.
    #[arg(long)]
    pub max_batch: bool,
}

pub fn run(args: EstimateArgs) -> ExitCode {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    // The configuration of the file's own project, wherever the command runs from.
    let file_dir = cwd
        .join(&args.file)
        .parent()
        .map_or_else(|| cwd.clone(), Path::to_path_buf);
    let loaded = match find_config(args.config.as_deref(), args.isolated, &file_dir) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let (budget, origin) =
        match config::resolve_budget(args.gpu_memory, args.gpu.as_deref(), loaded.as_ref()) {
            Ok(b) => b,
            Err(e) => return fail(e),
        };
    if gpulint_syntax::Lang::of_path(&args.file) != Some(gpulint_syntax::Lang::Python) {
        return fail(format!(
            "{}: not a Python file or notebook (`estimate` reads the `.py` or `.ipynb` code that builds and trains a model)",
            args.file.display()
        ));
    }
    let text = match gpulint_source::read_source(&args.file, gpulint_source::MAX_FILE_SIZE) {
        Ok(t) => t,
        Err(e) => return fail(format!("{}: {e}", args.file.display())),
    };
    let display = args.file.display().to_string();
    let notebook = gpulint_syntax::is_notebook(&args.file);
    if notebook {
        if let Err(e) = gpulint_source::notebook::parse(&text) {
            return fail(format!("{display}: {e}"));
        }
    }
    let reports = if notebook {
        gpulint_semantic::with_notebook_model(&text, gpulint_memory::analyze)
    } else {
        gpulint_semantic::with_python_model(&text, gpulint_memory::analyze)
    };
    // Line numbers of a notebook refer to its code cells joined in order.
    let text = if notebook {
        gpulint_source::notebook::parse(&text)
            .map(|nb| nb.source)
            .unwrap_or(text)
    } else {
        text
    };
    let Some(reports) = reports else {
        return fail(format!("{display}: the parser gave up on it"));
    };
    if reports.is_empty() {
        eprintln!("gpulint: no Keras or PyTorch model found in {display}");
        return ExitCode::from(1);
    }
    let out = match args.output_format {
        EstimateFormat::Json => {
            let mut v = to_json(&reports, &text, &display, budget, &origin);
            if args.max_batch {
                if let Value::Object(map) = &mut v {
                    map.insert(
                        "max_batch".into(),
                        max_batch_json(&reports[primary(&reports)], budget, &origin),
                    );
                }
            }
            serde_json::to_string_pretty(&v).unwrap_or_default() + "\n"
        }
        EstimateFormat::Text => {
            let mut t = render_text(&reports, &text, &display, budget, &origin);
            if args.max_batch {
                t.push('\n');
                t.push_str(&max_batch_text(
                    &reports[primary(&reports)],
                    budget,
                    &origin,
                ));
            }
            t
        }
    };
    print_out(&out);
    ExitCode::SUCCESS
}

fn line_of(src: &str, byte: usize) -> usize {
    src.get(..byte)
        .map(|s| s.matches('\n').count() + 1)
        .unwrap_or(1)
}

/// The model the report is about: the first trained one with an estimate, else the first
/// trained one, else the last one built.
pub fn primary(reports: &[ModelReport]) -> usize {
    reports
        .iter()
        .position(|r| r.setup.trained && r.estimate.is_some())
        .or_else(|| reports.iter().position(|r| r.setup.trained))
        .unwrap_or(reports.len().saturating_sub(1))
}

fn fw_name(fw: Fw) -> &'static str {
    match fw {
        Fw::Keras => "keras",
        Fw::Torch => "pytorch",
    }
}

fn model_json(r: &ModelReport, src: &str, budget: u64) -> Value {
    let m = &r.model;
    let act_bytes = r.setup.precision.activations;
    let layers: Vec<Value> = m
        .steps
        .iter()
        .map(|s| {
            let bytes = if s.view && !s.module {
                0
            } else {
                s.output.iter().product::<u64>() * if s.int { 8 } else { act_bytes }
            };
            json!({
                "name": s.name,
                "class": s.class,
                "output_shape": s.output,
                "params": s.params.total,
                "activation_bytes_per_sample": bytes,
                "module": s.module,
            })
        })
        .collect();
    let e = r.estimate.as_ref();
    json!({
        "model": m.var,
        "framework": fw_name(m.fw),
        "kind": m.kind,
        "line": line_of(src, m.span.0),
        "input_shape": m.input.as_ref().map(|(s, _)| s.clone()),
        "input_assumed": m.input_note,
        "params": m.params.map(|p| p.total),
        "trainable_params": m.params.map(|p| p.trainable),
        "param_bytes": e.map(|e| e.weight_bytes),
        "gradient_bytes": e.map(|e| e.gradient_bytes),
        "optimizer_bytes": e.map(|e| e.optimizer_bytes),
        "optimizer": r.setup.optimizer.as_ref().map(|o| json!({"name": o.name, "slots": o.slots})),
        "precision": r.setup.precision.label,
        "activation_bytes_per_sample": e.map(|e| e.activation_bytes_per_sample),
        "input_bytes_per_sample": e.map(|e| e.input_bytes_per_sample),
        "allowance_bytes": e.map(|e| e.allowance),
        "cuda_context_bytes": e.map(|e| e.allowance),
        "backward_bytes_per_sample": e.map(|e| e.backward_bytes_per_sample),
        "attention_bytes_per_sample": e.map(|e| e.attention_bytes_per_sample),
        "recurrent_bytes_per_sample": e.map(|e| e.recurrent_bytes_per_sample),
        "overhead_bytes_per_sample": e.map(|e| e.overhead_bytes_per_sample),
        "autocast_bytes": e.map(|e| e.autocast_bytes),
        "batch_size": r.setup.batch.as_ref().ok().map(|b| b.size),
        "batch_source": r.setup.batch.as_ref().map(|b| b.source.clone()).unwrap_or_else(|e| e.clone()),
        "peak_bytes": e.and_then(|e| e.peak()),
        "max_batch_size": e.and_then(|e| e.max_batch(budget)),
        "trained": r.setup.trained,
        "unknown": m.unknown.iter().cloned().chain(r.setup.blockers.iter().cloned()).collect::<Vec<_>>(),
        "layers": layers,
    })
}

fn to_json(
    reports: &[ModelReport],
    src: &str,
    display: &str,
    budget: u64,
    origin: &BudgetOrigin,
) -> Value {
    let models: Vec<Value> = reports.iter().map(|r| model_json(r, src, budget)).collect();
    let mut top = models[primary(reports)].clone();
    if let Value::Object(map) = &mut top {
        map.insert("file".into(), json!(display));
        map.insert("budget_bytes".into(), json!(budget));
        map.insert("budget_source".into(), json!(origin.describe()));
        map.insert("models".into(), Value::Array(models));
    }
    top
}

fn group(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn render_text(
    reports: &[ModelReport],
    src: &str,
    display: &str,
    budget: u64,
    origin: &BudgetOrigin,
) -> String {
    let mut s = String::new();
    for (i, r) in reports.iter().enumerate() {
        if i > 0 {
            s.push('\n');
        }
        let m = &r.model;
        let _ = writeln!(
            s,
            "{} model {} ({}) at {display}:{}",
            match m.fw {
                Fw::Keras => "Keras",
                Fw::Torch => "PyTorch",
            },
            m.label(),
            m.kind,
            line_of(src, m.span.0)
        );
        if let Some((shape, int)) = &m.input {
            let _ = writeln!(
                s,
                "  input per sample: {}{}{}",
                fmt_shape(shape),
                if *int { " (integer ids)" } else { "" },
                m.input_note
                    .as_ref()
                    .map(|n| format!(" — assumed: the file shows none; {n}"))
                    .unwrap_or_default()
            );
        }
        let act = r.setup.precision.activations;
        let w = m
            .steps
            .iter()
            .map(|st| st.name.len() + st.class.len() + 3)
            .max()
            .unwrap_or(10)
            .max(12);
        if !m.steps.is_empty() {
            let _ = writeln!(
                s,
                "  {:<w$}  {:<18}  {:>12}  {:>12}",
                "layer", "output shape", "params", "act./sample"
            );
            for st in &m.steps {
                let bytes = if st.view && !st.module {
                    0
                } else {
                    st.output.iter().product::<u64>() * if st.int { 8 } else { act }
                };
                let _ = writeln!(
                    s,
                    "  {:<w$}  {:<18}  {:>12}  {:>12}",
                    format!("{} ({})", st.name, st.class),
                    fmt_shape(&st.output),
                    group(st.params.total),
                    if bytes == 0 {
                        "-".into()
                    } else {
                        format_size(bytes)
                    }
                );
            }
        }
        if let Some(why) = &m.unknown {
            let _ = writeln!(s, "  inference stopped: {why}");
            continue;
        }
        let Some(e) = &r.estimate else {
            continue;
        };
        let _ = writeln!(
            s,
            "  parameters: {} ({} trainable); activations {} per sample ({})",
            group(e.params.total),
            group(e.params.trainable),
            format_size(e.activation_bytes_per_sample),
            r.setup.precision.label
        );
        let opt = r
            .setup
            .optimizer
            .as_ref()
            .map(|o| o.name.clone())
            .unwrap_or_else(|| "no optimizer found".into());
        match &r.setup.batch {
            Ok(b) => {
                let _ = writeln!(
                    s,
                    "  batch size: {} from {} (line {})",
                    b.size,
                    b.source,
                    line_of(src, b.span.0)
                );
                let _ = writeln!(
                    s,
                    "  peak for batch {}: {} = {}",
                    b.size,
                    format_size(e.peak_for(b.size)),
                    e.breakdown(&opt)
                );
            }
            Err(why) => {
                let _ = writeln!(s, "  batch size: unknown ({why})");
            }
        }
        for b in &r.setup.blockers {
            let _ = writeln!(s, "  note: {b}");
        }
        let _ = write!(
            s,
            "  budget: {} ({}): ",
            format_size(budget),
            origin.describe()
        );
        let _ = match e.max_batch(budget) {
            Some(0) => writeln!(s, "even batch 1 does not fit"),
            Some(n) => writeln!(s, "the largest batch that fits is {n}"),
            None => writeln!(s, "no batch-dependent memory"),
        };
    }
    s
}

/// The budgets of `--max-batch`: the configured one, then the table of cards, each with the
/// memory the driver reports (bytes) and what the process is left after its CUDA context.
fn max_batch_rows(
    r: &ModelReport,
    budget: u64,
    origin: &BudgetOrigin,
) -> Vec<(String, u64, Option<u64>)> {
    let e = r.estimate.as_ref();
    let _ = origin;
    let mut rows = vec![(
        "the budget".to_string(),
        budget,
        e.and_then(|e| e.max_batch(budget)),
    )];
    for (name, mib) in gpulint_memory::budget::MAX_BATCH_CARDS {
        let bytes = mib << 20;
        rows.push((name.to_string(), bytes, e.and_then(|e| e.max_batch(bytes))));
    }
    rows
}

fn max_batch_text(r: &ModelReport, budget: u64, origin: &BudgetOrigin) -> String {
    let mut s = String::new();
    let m = &r.model;
    let Some(e) = &r.estimate else {
        let why = m
            .unknown
            .clone()
            .unwrap_or_else(|| "the model is not fully known".into());
        let _ = writeln!(s, "largest batch: not known ({why})");
        return s;
    };
    let opt = r
        .setup
        .optimizer
        .as_ref()
        .map(|o| o.name.clone())
        .unwrap_or_else(|| "no optimizer found".into());
    let _ = writeln!(
        s,
        "largest batch that fits, model {} ({}, optimizer {opt}); each card's memory as the driver reports it, less the CUDA context ({}):",
        m.label(),
        r.setup.precision.label,
        format_size(e.allowance)
    );
    let _ = writeln!(
        s,
        "  the budget: {} ({})",
        format_size(budget),
        origin.describe()
    );
    let rows = max_batch_rows(r, budget, origin);
    let w = rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(10);
    let _ = writeln!(
        s,
        "  {:<w$}  {:>10}  {:>12}  {:>13}",
        "budget", "memory", "for tensors", "largest batch"
    );
    for (name, bytes, n) in rows {
        let _ = writeln!(
            s,
            "  {:<w$}  {:>10}  {:>12}  {:>13}",
            name,
            format_size(bytes),
            format_size(bytes.saturating_sub(e.allowance)),
            match n {
                Some(0) => "none".to_string(),
                Some(n) => group(n),
                None => "-".to_string(),
            }
        );
    }
    s
}

fn max_batch_json(r: &ModelReport, budget: u64, origin: &BudgetOrigin) -> Value {
    let rows = max_batch_rows(r, budget, origin);
    let context = r.estimate.as_ref().map(|e| e.allowance);
    let gpus: Vec<Value> = rows
        .iter()
        .skip(1)
        .map(|(name, bytes, n)| {
            json!({
                "gpu": name,
                "memory_bytes": bytes,
                "usable_bytes": context.map(|c| bytes.saturating_sub(c)),
                "max_batch_size": n,
            })
        })
        .collect();
    json!({
        "model": r.model.var,
        "budget_bytes": budget,
        "budget_source": origin.describe(),
        "max_batch_size": rows[0].2,
        "cuda_context_bytes": context,
        "gpus": gpus,
    })
}
