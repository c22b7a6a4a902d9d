//! PT008: multi-process DataLoader created at import time, without a `__main__` guard.

use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::Diagnostic;
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::python::project::{self, WindowsTarget};
use gpulint_semantic::python::tf::argument;
use gpulint_semantic::python::training::{
    is_dataloader, loader_dataset_lambda, under_main_guard, worker_count,
};
use gpulint_semantic::python::PythonModel;
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

declare_rule! {
    /// ## What it does
    /// Finds a `torch.utils.data.DataLoader` with worker processes (`num_workers` not zero)
    /// that is created when the module is imported: at module level, or in a function that
    /// module-level code calls, with no `if __name__ == "__main__":` guard around it. Also finds
    /// such a DataLoader given a `collate_fn` or `worker_init_fn` that is a `lambda` or a
    /// function nested in another function, which worker processes cannot import, or whose
    /// dataset keeps a `lambda` (in the arguments of the constructor call that builds it, such
    /// as a transform in `transforms.Compose([...])`, followed through local names): the
    /// dataset is pickled for each worker. Notebooks are not checked (they are not re-imported
    /// by workers).
    ///
    /// The finding is an error when the project targets native Windows, and a warning
    /// otherwise. Windows is taken as a target when the file's directory or an ancestor up to
    /// the repository root holds a Windows launcher (a `.bat`, `.cmd` or `.ps1` script that
    /// runs Python; a build wrapper such as `gradlew.bat` does not count) or CI configuration
    /// with a Windows runner (`runs-on: windows-latest`, a matrix `os:` entry, Azure
    /// `vmImage: windows-…`, AppVeyor).
    ///
    /// ## Why is this risky?
    /// On Windows and macOS, worker processes are started with `spawn`: each worker re-imports
    /// the main script. Unguarded module-level code runs again in every worker, which creates
    /// workers of its own, and Python stops with `RuntimeError: An attempt has been made to
    /// start a new process before the current process has finished its bootstrapping phase`.
    /// The PyTorch docs: wrap the script's code in `if __name__ == '__main__':`, and make sure
    /// that custom `collate_fn`, `worker_init_fn` or dataset code "is declared as top level
    /// definitions, outside of the `__main__` check", so the workers can find them. Linux
    /// starts workers with `fork`, which does not re-import the script: there the same code
    /// runs, which is why only a Windows target makes this an error.
    ///
    /// ## Example
    /// ```python
    /// import torch
    /// from torch.utils.data import DataLoader, TensorDataset
    ///
    /// ds = TensorDataset(torch.randn(100, 3))
    /// loader = DataLoader(ds, batch_size=10, num_workers=4)
    /// for (batch,) in loader:
    ///     print(batch.shape)
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// import torch
    /// from torch.utils.data import DataLoader, TensorDataset
    ///
    /// def main():
    ///     ds = TensorDataset(torch.randn(100, 3))
    ///     loader = DataLoader(ds, batch_size=10, num_workers=4)
    ///     for (batch,) in loader:
    ///         print(batch.shape)
    ///
    /// if __name__ == "__main__":
    ///     main()
    /// ```
    ///
    /// ## References
    /// - `torch.utils.data`, *Platform-specific behaviors*:
    ///   <https://pytorch.org/docs/stable/data.html#platform-specific-behaviors>
    /// - PyTorch Windows FAQ, *Multiprocessing error without if-clause protection*:
    ///   <https://pytorch.org/docs/stable/notes/windows.html#multiprocessing-error-without-if-clause-protection>
    pub static PT008 = {
        code: "PT008",
        name: "dataloader-without-main-guard",
        lang: RuleLang::Source(Lang::Python),
        severity: Severity::Warning,
        summary: "Multi-process DataLoader without a `__main__` guard (spawn start method)",
        kinds: &[],
        needles: &["torch"],
        options: &[],
    };
}

pub struct DataloaderWithoutMainGuard;

impl Rule for DataloaderWithoutMainGuard {
    fn meta(&self) -> &'static RuleMeta {
        &PT008
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        if ctx
            .file
            .path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("ipynb"))
        {
            return;
        }
        let m = ctx.python();
        if !m.imports_torch() {
            return;
        }
        // The order of execution is built only for a file that makes a DataLoader with
        // workers: every event looked at below is one of its calls.
        let with_workers =
            |call: Node<'_>| is_dataloader(m, call) && worker_count(m, call).is_some();
        if !m.calls.iter().any(|&(call, _)| with_workers(call)) {
            return;
        }
        let order = m.order();
        let mut reported = std::collections::HashSet::new();
        // Looked up once, and only when there is something to report.
        let mut windows: Option<Option<WindowsTarget>> = None;
        let (path, root) = (ctx.file.path.clone(), ctx.settings.root.clone());
        let mut target = |d: Diagnostic| -> Diagnostic {
            let w = windows.get_or_insert_with(|| project::windows_target(&path, &root));
            match w {
                Some(w) => {
                    let shown = std::env::current_dir()
                        .ok()
                        .and_then(|cwd| w.path.strip_prefix(cwd).ok().map(|p| p.display().to_string()))
                        .unwrap_or_else(|| w.path.display().to_string());
                    d.severity(Severity::Error).note(format!(
                        "the project targets Windows ({}: {shown}), where DataLoader workers always start with spawn",
                        w.what
                    ))
                }
                None => d.note("a warning, not an error: no Windows launcher (.bat, .cmd, .ps1) or Windows CI runner was found, and Linux's default fork start method does not re-import the script"),
            }
        };
        for ev in order.module() {
            if ev.node.kind_name() != "call" || !is_dataloader(m, ev.node) {
                continue;
            }
            let Some(workers) = worker_count(m, ev.node) else {
                continue;
            };
            if !reported.insert(ev.node.id()) {
                continue;
            }
            let sites = order.call_sites(ev);
            let guarded =
                under_main_guard(m, ev.node) || sites.iter().any(|s| under_main_guard(m, *s));
            if !guarded {
                let mut d = ctx
                    .diagnostic(
                        ev.node,
                        "DataLoader with worker processes is created at import time, with no `if __name__ == \"__main__\":` guard",
                    )
                    .primary_label("under the spawn start method every worker re-imports the script and runs this again")
                    .with_label(Span::of(&workers), "worker processes are started here");
                if let Some(site) = sites.first() {
                    d = d.with_label(Span::of(site), "runs at import time from this call");
                }
                let d = d.note("on Windows and macOS this fails with RuntimeError: An attempt has been made to start a new process before the current process has finished its bootstrapping phase")
                    .help("move the script's code into `main()` and call it under `if __name__ == \"__main__\":`");
                ctx.report(target(d));
                continue;
            }
            if let Some(f) = loader_dataset_lambda(m, ev.node) {
                let d = ctx.diagnostic(f, "a lambda is kept in the dataset this DataLoader's worker processes receive; spawned workers cannot unpickle it")
                    .primary_label("pickling the dataset for the workers fails: `Can't pickle <function <lambda>>`")
                    .with_label(Span::of(&ev.node), "the DataLoader that loads this dataset")
                    .with_label(Span::of(&workers), "worker processes are started here")
                    .help("define the function at module level (`def shift(x): ...`, wrapped as `transforms.Lambda(shift)` where a transform object is needed)");
                ctx.report(target(d));
            }
            for key in ["collate_fn", "worker_init_fn"] {
                let Some(f) = argument(ev.node, usize::MAX, key, m) else {
                    continue;
                };
                if let Some(why) = unpicklable(m, f) {
                    let d = ctx.diagnostic(f, format!("`{key}` is {why}, which spawned DataLoader workers cannot import"))
                        .primary_label("not a top-level definition: pickling it for the workers fails")
                        .with_label(Span::of(&workers), "worker processes are started here")
                        .help(format!("define `{key}` as a module-level function (use `functools.partial` for extra arguments)"));
                    ctx.report(target(d));
                }
            }
        }
    }
}

/// Why a function argument cannot be pickled by reference, if it cannot.
fn unpicklable(m: &PythonModel<'_>, f: Node<'_>) -> Option<&'static str> {
    match f.kind_name() {
        "lambda" => Some("a lambda"),
        "identifier" => {
            let scope = m.enclosing_function(f)?;
            let name = m.text(f);
            m.functions_named(name)
                .iter()
                .any(|&g| m.functions[g].parent == Some(scope) && m.functions[g].class.is_none())
                .then_some("a function nested in another function")
        }
        _ => None,
    }
}
