//! PT012: DataLoader host-memory blow-up from large Python objects copied into every worker.

use crate::checker::Context;
use crate::declare_rule;
use crate::diagnostic::{Severity, Span};
use crate::lang::Lang;
use crate::rule::{OptionKind, Rule, RuleLang, RuleMeta, RuleOption};
use crate::semantic::descendants;
use crate::semantic::python::tf::argument;
use crate::semantic::python::training::{
    dataset_class, is_dataloader, is_dataset_class, worker_count,
};
use crate::semantic::python::PythonModel;
use crate::semantic::NodeExt;
use tree_sitter::Node;

declare_rule! {
    /// ## What it does
    /// Finds a `torch.utils.data` dataset whose `__init__` stores a large Python list or dict
    /// on `self` (a list or dict comprehension over `os.listdir`, `os.walk`, `glob.glob`,
    /// `Path.glob`/`rglob`, or a `json.load` result; a `pickle.load` result may hold NumPy
    /// arrays and is not counted), when a DataLoader with at least 4 workers (configurable with
    /// `min-workers`) loads that dataset (passed as `MyDataset(...)` or as a name assigned one
    /// in the file). Datasets backed by NumPy arrays, Arrow or pandas, which the docs
    /// recommend, are left alone. Applies to files that import `torch`.
    ///
    /// ## Why is this risky?
    /// The DataLoader docs: "loader worker processes will consume the same amount of CPU memory
    /// as the parent process for all Python objects in the parent process which are accessed
    /// from the worker processes ... (overall memory usage is number of workers * size of
    /// parent process)". Reference counting writes to every Python object a worker touches, so
    /// copy-on-write pages are copied: a list of millions of paths becomes one copy per
    /// worker, and the host runs out of memory, which kills the whole training process.
    ///
    /// ## Example
    /// ```python
    /// import glob
    /// from torch.utils.data import DataLoader, Dataset
    ///
    /// class Frames(Dataset):
    ///     def __init__(self, root):
    ///         self.paths = [p for p in glob.glob(root + "/**/*.jpg", recursive=True)]
    ///
    ///     def __len__(self):
    ///         return len(self.paths)
    ///
    ///     def __getitem__(self, i):
    ///         return self.paths[i]
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
    ///         self.paths = np.array(glob.glob(root + "/**/*.jpg", recursive=True))
    ///
    ///     def __len__(self):
    ///         return len(self.paths)
    ///
    ///     def __getitem__(self, i):
    ///         return str(self.paths[i])
    ///
    /// loader = DataLoader(Frames("/data"), batch_size=64, num_workers=8)
    /// ```
    ///
    /// ## References
    /// - `torch.utils.data`, *Multi-process data loading* (the CPU-memory warning):
    ///   <https://pytorch.org/docs/stable/data.html#multi-process-data-loading>
    /// - pytorch/pytorch#13246: <https://github.com/pytorch/pytorch/issues/13246>
    pub static PT012 = {
        code: "PT012",
        name: "dataloader-host-memory",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Info,
        summary: "Large Python lists or dicts in a Dataset copied into every DataLoader worker",
        kinds: &[],
        needles: &["num_workers"],
        options: &[RuleOption {
            key: "min-workers",
            kind: OptionKind::Int,
            default: "4",
            doc: "The fewest DataLoader workers for which per-worker copies are reported.",
        }],
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
        for &(call, _) in &m.calls {
            if !is_dataloader(m, call) {
                continue;
            }
            let Some(w) = worker_count(m, call) else {
                continue;
            };
            if m.const_value(w)
                .and_then(|v| v.as_int())
                .is_none_or(|n| n < min)
            {
                continue;
            }
            let class = argument(call, 0, "dataset", m).and_then(|d| dataset_class(m, d));
            if let Some(c) = class.filter(|&c| is_dataset_class(m, c)) {
                if !loaded.iter().any(|l| l.0 == c) {
                    loaded.push((c, w));
                }
            }
        }
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

fn a_text<'t>(m: &PythonModel<'t>, assign: Node<'t>) -> &'t str {
    assign.field("left").map(|l| m.text(l)).unwrap_or("")
}

/// A list/dict built from a directory listing, or loaded JSON.
fn large_python_object(m: &PythonModel<'_>, expr: Node<'_>) -> bool {
    let lists = |e: Node<'_>| {
        descendants(e).any(|n| {
            n.kind() == "call"
                && n.field("function").is_some_and(|f| {
                    m.qualified_name(f)
                        .is_some_and(|q| LISTING.contains(&q.as_str()))
                        || (f.kind() == "attribute"
                            && f.field("attribute")
                                .is_some_and(|a| matches!(m.text(a), "glob" | "rglob" | "iterdir")))
                })
        })
    };
    match expr.kind() {
        "list_comprehension" | "dictionary_comprehension" => lists(expr),
        "call" => {
            let q = expr
                .field("function")
                .and_then(|f| m.qualified_name(f))
                .unwrap_or_default();
            let name = expr.field("function").map(|f| m.text(f)).unwrap_or("");
            q == "json.load"
                || ((name == "list" || name == "sorted" || name == "dict") && lists(expr))
        }
        _ => false,
    }
}
