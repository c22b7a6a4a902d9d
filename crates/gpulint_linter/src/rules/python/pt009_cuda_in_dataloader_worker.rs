//! PT009: CUDA used inside DataLoader workers, or with the `fork` start method.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::python::tf::argument;
use gpulint_semantic::python::torch::Runtime;
use gpulint_semantic::python::training::{
    is_dataloader, is_dataset_class, loader_dataset_class, worker_count, worker_loaders,
};
use gpulint_semantic::python::{string_literal, PythonModel};
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

declare_rule! {
    /// ## What it does
    /// Finds CUDA work in code that DataLoader worker processes run, in a file that creates a
    /// DataLoader with `num_workers` not zero: `.cuda()`, `.to("cuda")`, `device="cuda"` or
    /// `torch.cuda.*` calls in a `torch.utils.data` dataset's `__getitem__`, `__getitems__` or
    /// `__iter__`, or in a function passed as `collate_fn` / `worker_init_fn`. Also finds
    /// `multiprocessing.set_start_method("fork")` / `get_context("fork")` (plain or
    /// `torch.multiprocessing`) in a file that uses CUDA.
    ///
    /// ## Why is this risky?
    /// "The CUDA runtime does not support the fork start method; either the spawn or forkserver
    /// start method are required to use CUDA in subprocesses." DataLoader workers are forked on
    /// Linux, so CUDA in a worker fails with `RuntimeError: Cannot re-initialize CUDA in forked
    /// subprocess`; under spawn every worker creates its own CUDA context and memory pool. The
    /// DataLoader docs: "It is generally not recommended to return CUDA tensors in multi-process
    /// loading because of many subtleties"; use `pin_memory=True` and move batches to the GPU
    /// in the main process.
    ///
    /// ## Example
    /// ```python
    /// import torch
    /// from torch.utils.data import DataLoader, Dataset
    ///
    /// class Images(Dataset):
    ///     def __len__(self):
    ///         return 100
    ///
    ///     def __getitem__(self, i):
    ///         return torch.randn(3, 32, 32).cuda()
    ///
    /// loader = DataLoader(Images(), batch_size=8, num_workers=2)
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// import torch
    /// from torch.utils.data import DataLoader, Dataset
    ///
    /// class Images(Dataset):
    ///     def __len__(self):
    ///         return 100
    ///
    ///     def __getitem__(self, i):
    ///         return torch.randn(3, 32, 32)
    ///
    /// loader = DataLoader(Images(), batch_size=8, num_workers=2, pin_memory=True)
    /// ```
    ///
    /// ## References
    /// - PyTorch multiprocessing notes, *CUDA in multiprocessing*:
    ///   <https://pytorch.org/docs/stable/notes/multiprocessing.html#cuda-in-multiprocessing>
    /// - `torch.utils.data`, *Multi-process data loading*:
    ///   <https://pytorch.org/docs/stable/data.html#multi-process-data-loading>
    pub static PT009 = {
        code: "PT009",
        name: "cuda-in-dataloader-worker",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Error,
        summary: "CUDA used inside DataLoader workers or with the `fork` start method",
        kinds: &[],
        needles: &["torch"],
        options: &[],
    };
}

pub struct CudaInDataloaderWorker;

const WORKER_METHODS: &[&str] = &["__getitem__", "__getitems__", "__iter__"];

impl Rule for CudaInDataloaderWorker {
    fn meta(&self) -> &'static RuleMeta {
        &PT009
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        let m = ctx.python();
        if !m.imports_torch() {
            return;
        }
        let facts = m.torch();
        let cuda: Vec<Node<'_>> = facts
            .init_calls
            .iter()
            .filter(|(_, k)| *k == Runtime::TorchCuda)
            .map(|c| c.0)
            .collect();
        if cuda.is_empty() {
            return;
        }
        // Functions that run in workers.
        let loaders = worker_loaders(m);
        let mut worker_fns: Vec<(usize, Node<'_>)> = Vec::new();
        // Datasets loaded by workers: the classes of the loaders' datasets; when one cannot be
        // resolved and every loader in the file uses workers, every dataset class.
        let all_loaders_use_workers = m
            .calls
            .iter()
            .filter(|(c, _)| is_dataloader(m, *c))
            .all(|(c, _)| worker_count(m, *c).is_some());
        for &(loader, workers) in &loaders {
            let class = loader_dataset_class(m, loader);
            let classes: Vec<usize> = match class {
                Some(c) => vec![c],
                None if all_loaders_use_workers => (0..m.classes.len()).collect(),
                None => Vec::new(),
            };
            for c in classes {
                if !is_dataset_class(m, c) {
                    continue;
                }
                for name in WORKER_METHODS {
                    if let Some(f) = m.method_of(c, name) {
                        worker_fns.push((f, workers));
                    }
                }
            }
        }
        for &(loader, workers) in &loaders {
            for key in ["collate_fn", "worker_init_fn"] {
                let Some(arg) = argument(loader, usize::MAX, key, m) else {
                    continue;
                };
                if arg.kind_name() != "identifier" {
                    continue;
                }
                if let Some(&f) = m.functions_named(m.text(arg)).first() {
                    worker_fns.push((f, workers));
                }
            }
        }
        let mut reported = std::collections::HashSet::new();
        for (f, workers) in worker_fns {
            let Some(&call) = cuda.iter().find(|c| m.enclosing_function(**c) == Some(f)) else {
                continue;
            };
            if !reported.insert(call.id()) {
                continue;
            }
            let fname = &m.functions[f].name;
            ctx.report(
                ctx.diagnostic(call, format!("CUDA is used in `{fname}`, which runs in DataLoader worker processes"))
                    .primary_label("CUDA in a forked worker raises RuntimeError: Cannot re-initialize CUDA in forked subprocess")
                    .with_label(Span::of(&workers), "worker processes are started here")
                    .help("return CPU tensors from the dataset and move each batch to the GPU in the training loop; use `pin_memory=True` for fast transfers"),
            );
        }
        for &(call, _) in &m.calls {
            if let Some(arg) = fork_start(m, call) {
                ctx.report(
                    ctx.diagnostic(arg, "the `fork` start method is selected in a program that uses CUDA")
                        .primary_label("the CUDA runtime does not support fork: a child that touches CUDA fails")
                        .with_label(Span::of(&cuda[0]), "CUDA is used here")
                        .help("use the `spawn` (or `forkserver`) start method: `torch.multiprocessing.set_start_method(\"spawn\")`"),
                );
            }
        }
    }
}

/// `multiprocessing.set_start_method("fork")` / `get_context("fork")`: the `"fork"` argument.
fn fork_start<'t>(m: &PythonModel<'_>, call: Node<'t>) -> Option<Node<'t>> {
    let q = m.qualified_name(call.field("function")?)?;
    let ok = matches!(
        q.as_str(),
        "multiprocessing.set_start_method"
            | "multiprocessing.get_context"
            | "torch.multiprocessing.set_start_method"
            | "torch.multiprocessing.get_context"
    );
    if !ok {
        return None;
    }
    let arg = argument(call, 0, "method", m)?;
    (string_literal(arg, m.source).as_deref() == Some("fork")).then_some(arg)
}
