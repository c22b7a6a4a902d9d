//! PT012: DataLoader host-memory blow-up from large Python objects copied into every worker,
//! or from too many prefetched batches in pinned memory.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{OptionKind, Rule, RuleLang, RuleMeta, RuleOption};
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::python::tf::argument;
use gpulint_semantic::python::training::{
    is_dataloader, is_dataset_class, loader_dataset_class, worker_count, worker_loaders,
};
use gpulint_semantic::python::PythonModel;
use gpulint_syntax::descendants;
use gpulint_syntax::named_children;
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

declare_rule! {
    /// ## What it does
    /// Finds a `torch.utils.data` dataset whose `__init__` stores a large Python list or dict
    /// on `self` (a `json.load` result, or a comprehension over `os.listdir`, `os.walk`,
    /// `glob.glob`, `Path.glob`/`rglob` that builds a record per file: a dict, tuple or list
    /// per item, or a dict keyed by file; a `pickle.load` result may hold NumPy arrays and is
    /// not counted), when a DataLoader with at least 4 workers (configurable with
    /// `min-workers`) loads that dataset (passed as `MyDataset(...)` or as a name assigned one
    /// in the file). Datasets backed by NumPy arrays, Arrow or pandas, which the docs
    /// recommend, are left alone, and so is a flat list of file paths (one string per file,
    /// about a hundred bytes: a hundred thousand files copy some 10 MB per worker). Applies to
    /// files that import `torch`.
    ///
    /// Also finds `pin_memory=True` on a DataLoader whose literal worker count, prefetch
    /// factor and batch size keep very many batches in flight: at least 64 batches (workers ×
    /// an explicit `prefetch_factor`, option `max-pinned-batches`) or at least 65,536 samples
    /// (times `batch_size`, option `max-pinned-samples`). Counts read from a config or the
    /// command line are not judged, and `num_workers=0` prefetches nothing.
    ///
    /// ## Why is this risky?
    /// The DataLoader docs: "loader worker processes will consume the same amount of CPU memory
    /// as the parent process for all Python objects in the parent process which are accessed
    /// from the worker processes ... (overall memory usage is number of workers * size of
    /// parent process)". Reference counting writes to every Python object a worker touches, so
    /// copy-on-write pages are copied: a list of millions of paths becomes one copy per
    /// worker, and the host runs out of memory, which kills the whole training process.
    ///
    /// With `pin_memory=True` every prefetched batch is copied into page-locked host memory,
    /// which the kernel cannot swap out or reclaim. The CUDA notes warn: "If you overuse
    /// pinned memory, it can cause serious problems when running low on RAM".
    ///
    /// ## Example
    /// ```python
    /// import glob
    /// from torch.utils.data import DataLoader, Dataset
    ///
    /// class Frames(Dataset):
    ///     def __init__(self, root):
    ///         self.samples = [
    ///             {"path": p, "label": p.split("/")[-2]}
    ///             for p in glob.glob(root + "/**/*.jpg", recursive=True)
    ///         ]
    ///
    ///     def __len__(self):
    ///         return len(self.samples)
    ///
    ///     def __getitem__(self, i):
    ///         return self.samples[i]["path"], self.samples[i]["label"]
    ///
    /// loader = DataLoader(Frames("/data"), batch_size=64, num_workers=8)
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// import glob
    /// import numpy as np
    /// from torch.utils.data import DataLoader, Dataset
    ///
    /// class Frames(Dataset):
    ///     def __init__(self, root):
    ///         paths = glob.glob(root + "/**/*.jpg", recursive=True)
    ///         self.paths = np.array(paths)
    ///         self.labels = np.array([p.split("/")[-2] for p in paths])
    ///
    ///     def __len__(self):
    ///         return len(self.paths)
    ///
    ///     def __getitem__(self, i):
    ///         return str(self.paths[i]), str(self.labels[i])
    ///
    /// loader = DataLoader(Frames("/data"), batch_size=64, num_workers=8)
    /// ```
    ///
    /// ## References
    /// - `torch.utils.data`, *Multi-process data loading* (the CPU-memory warning):
    ///   <https://pytorch.org/docs/stable/data.html#multi-process-data-loading>
    /// - pytorch/pytorch#13246: <https://github.com/pytorch/pytorch/issues/13246>
    /// - PyTorch "CUDA semantics", *Use pinned memory buffers*:
    ///   <https://pytorch.org/docs/stable/notes/cuda.html#use-pinned-memory-buffers>
    pub static PT012 = {
        code: "PT012",
        name: "dataloader-host-memory",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Info,
        summary: "Large Python lists or dicts in a Dataset copied into every DataLoader worker, or too many pinned batches in flight",
        kinds: &[],
        needles: &["torch"],
        options: &[
            RuleOption {
                key: "min-workers",
                kind: OptionKind::Int,
                default: "4",
                doc: "The fewest DataLoader workers for which per-worker copies are reported.",
            },
            RuleOption {
                key: "max-pinned-batches",
                kind: OptionKind::Int,
                default: "64",
                doc: "With `pin_memory=True` and an explicit `prefetch_factor`: the most batches in flight (workers × prefetch_factor) left unreported.",
            },
            RuleOption {
                key: "max-pinned-samples",
                kind: OptionKind::Int,
                default: "65536",
                doc: "With `pin_memory=True`: the most samples in flight (workers × prefetch_factor × batch_size) left unreported.",
            },
        ],
    };
}

pub struct DataloaderHostMemory;

const LISTING: &[&str] = &[
    "os.listdir",
    "os.walk",
    "os.scandir",
    "glob.glob",
    "glob.iglob",
];

impl Rule for DataloaderHostMemory {
    fn meta(&self) -> &'static RuleMeta {
        &PT012
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.python();
        if !m.imports_torch() {
            return;
        }
        let min = ctx.option_int("min-workers").unwrap_or(4) as i128;
        // The dataset classes that loaders with many workers load.
        let mut loaded: Vec<(usize, Node<'_>)> = Vec::new();
        for (call, w) in worker_loaders(m) {
            if m.const_value(w)
                .and_then(|v| v.as_int())
                .is_none_or(|n| n < min)
            {
                continue;
            }
            let class = loader_dataset_class(m, call);
            if let Some(c) = class.filter(|&c| is_dataset_class(m, c)) {
                if !loaded.iter().any(|l| l.0 == c) {
                    loaded.push((c, w));
                }
            }
        }
        self.check_pinned(ctx);
        for (c, workers) in loaded {
            let Some(init) = m.method_of(c, "__init__") else {
                continue;
            };
            let Some(assign) = m.attribute_assignments.iter().copied().find(|a| {
                m.enclosing_function(*a) == Some(init)
                    && a.field("left")
                        .is_some_and(|l| m.text(l).starts_with("self."))
                    && a.field("right").is_some_and(|r| large_python_object(m, r))
            }) else {
                continue;
            };
            let target = a_text(m, assign);
            ctx.report(
                ctx.diagnostic(assign, format!("`{target}` holds a large Python list or dict that every DataLoader worker copies"))
                    .primary_label("reference counting turns copy-on-write sharing into one copy per worker")
                    .with_label(Span::of(&workers), "worker processes are started here")
                    .note("host memory grows with the number of workers until the OOM killer ends the training process")
                    .help("store it as a NumPy array (`np.array(paths)`), an Arrow table or a pandas frame, not as a list or dict of Python objects"),
            );
        }
    }
}

impl DataloaderHostMemory {
    /// `pin_memory=True` with so many batches in flight (workers × `prefetch_factor`, times
    /// `batch_size` samples) that the page-locked host memory they take is itself a risk.
    fn check_pinned(&self, ctx: &mut Context<'_>) {
        let m = ctx.python();
        let max_batches = ctx.option_int("max-pinned-batches").unwrap_or(64) as i128;
        let max_samples = ctx.option_int("max-pinned-samples").unwrap_or(65536) as i128;
        for &(call, _) in &m.calls {
            if !is_dataloader(m, call) {
                continue;
            }
            let Some(pin) = argument(call, 7, "pin_memory", m) else {
                continue;
            };
            if m.const_value(pin).is_none_or(|v| !v.truthy()) {
                continue;
            }
            let int = |n: Node<'_>| m.const_value(n).and_then(|v| v.as_int());
            // Only literal (folded) counts are judged: a value read from a config is not known.
            let Some(workers_node) = worker_count(m, call) else {
                continue;
            };
            let Some(workers) = int(workers_node).filter(|&w| w > 0) else {
                continue;
            };
            let prefetch_node = argument(call, usize::MAX, "prefetch_factor", m);
            let prefetch = match prefetch_node {
                Some(p) => match int(p) {
                    Some(v) => v,
                    None => continue,
                },
                None => 2,
            };
            let batch = match argument(call, 1, "batch_size", m) {
                Some(b) => int(b),
                None => Some(1),
            };
            let batches = workers * prefetch;
            let samples = batch.map(|b| b * batches);
            let too_many_batches = prefetch_node.is_some() && batches >= max_batches;
            let too_many_samples = samples.is_some_and(|s| s >= max_samples);
            if !too_many_batches && !too_many_samples {
                continue;
            }
            let what = match (batch, samples) {
                (Some(b), Some(n)) => format!(
                    "{workers} workers × prefetch_factor {prefetch} = {batches} batches of {b} ({n} samples)"
                ),
                _ => format!("{workers} workers × prefetch_factor {prefetch} = {batches} batches"),
            };
            let mut d = ctx
                .diagnostic(
                    pin,
                    format!("`pin_memory=True` keeps up to {what} in page-locked host memory"),
                )
                .primary_label("every prefetched batch is copied into pinned (non-pageable) RAM")
                .with_label(Span::of(&workers_node), "worker count");
            if let Some(p) = prefetch_node {
                d = d.with_label(Span::of(&p), "batches prefetched per worker");
            }
            ctx.report(
                d.note("pinned memory cannot be swapped or reclaimed; overusing it starves the host, and a host OOM kills the whole training process")
                    .help("lower `prefetch_factor` or `num_workers` (a few batches in flight keep the GPU fed), or drop `pin_memory` when host RAM is tight"),
            );
        }
    }
}

fn a_text<'t>(m: &PythonModel<'t>, assign: Node<'t>) -> &'t str {
    assign.field("left").map(|l| m.text(l)).unwrap_or("")
}

/// Per-file records built from a directory listing, or loaded JSON. A flat list of paths (one
/// string per file) is small next to the files it names.
fn large_python_object(m: &PythonModel<'_>, expr: Node<'_>) -> bool {
    let lists = |e: Node<'_>| {
        descendants(e).any(|n| {
            n.kind_name() == "call"
                && n.field("function").is_some_and(|f| {
                    m.qualified_name(f)
                        .is_some_and(|q| LISTING.contains(&q.as_str()))
                        || (f.kind_name() == "attribute"
                            && f.field("attribute")
                                .is_some_and(|a| matches!(m.text(a), "glob" | "rglob" | "iterdir")))
                })
        })
    };
    // A comprehension whose items are containers (a record per file).
    let records = |c: Node<'_>| {
        c.kind_name() == "dictionary_comprehension"
            || c.field("body").is_some_and(|body| {
                matches!(
                    body.kind_name(),
                    "dictionary" | "tuple" | "list" | "set" | "dictionary_comprehension"
                )
            })
    };
    match expr.kind_name() {
        "list_comprehension" | "dictionary_comprehension" => records(expr) && lists(expr),
        "call" => {
            let q = expr
                .field("function")
                .and_then(|f| m.qualified_name(f))
                .unwrap_or_default();
            let name = expr.field("function").map(|f| m.text(f)).unwrap_or("");
            q == "json.load"
                || ((name == "list" || name == "sorted" || name == "dict")
                    && expr
                        .field("arguments")
                        .and_then(|a| named_children(a).next())
                        .is_some_and(|a| {
                            matches!(
                                a.kind_name(),
                                "list_comprehension"
                                    | "dictionary_comprehension"
                                    | "generator_expression"
                            ) && records(a)
                                && lists(a)
                        }))
        }
        _ => false,
    }
}
