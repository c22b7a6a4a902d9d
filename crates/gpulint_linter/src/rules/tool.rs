//! Findings about gpulint's own work on a file: suppressions, skipped and partly parsed files.
//! The engine reports these itself; they are listed here so that they can be selected,
//! ignored and explained like any other rule.

use crate::declare_rule;
use gpulint_diagnostics::RuleLang;
use gpulint_diagnostics::Severity;

declare_rule! {
    /// ## What it does
    /// Reports a suppression comment (`# noqa: CODE`, `# gpulint: ignore[CODE]`,
    /// `// NOLINT(CODE)`, `// NOLINTNEXTLINE(CODE)`, `gpulint: ignore-file[CODE]`) that names a
    /// gpulint rule which reports nothing there, and a `gpulint: ignore[...]` that names a code
    /// gpulint does not know.
    ///
    /// ## Why is this risky?
    /// A stale suppression hides the next real finding on that line: after the code is fixed or
    /// moved, the comment stays and silently swallows whatever the rule would report later. A
    /// misspelt code suppresses nothing at all while looking as if it did.
    ///
    /// Codes of other tools (`# noqa: E501`, `// NOLINT(google-runtime-int)`) and blanket
    /// `# noqa` / `// NOLINT` comments are left alone: they may belong to another linter.
    ///
    /// ## Example
    /// ```python
    /// import torch
    ///
    /// BATCH = 32  # gpulint: ignore[PY001] -- left over from an old recursive helper
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// import torch
    ///
    /// BATCH = 32
    /// ```
    ///
    /// ## References
    /// - Ruff's `RUF100` unused-noqa, the model for this check:
    ///   <https://docs.astral.sh/ruff/rules/unused-noqa/>
    /// - clang-tidy suppression comments (`NOLINT`, `NOLINTNEXTLINE`):
    ///   <https://clang.llvm.org/extra/clang-tidy/#suppressing-undesired-diagnostics>
    pub static GL001 = {
        code: "GL001",
        name: "unused-suppression",
        lang: RuleLang::Any,
        severity: Severity::Info,
        summary: "Suppression comment that suppresses nothing",
        kinds: &[],
        needles: &[],
        options: &[],
    };
}

declare_rule! {
    /// ## What it does
    /// Reports a file that gpulint could not check: it could not be read (permissions, a
    /// broken link, a path that vanished), it is binary (contains NUL bytes), it is larger than
    /// the size limit (10 MiB), or its content is malformed for its kind. The rest of the run goes
    /// on. A file that is not valid UTF-8 is not skipped: it is decoded with replacement
    /// characters and linted. A directory that cannot be read is reported the same way (nothing
    /// under it was checked), and so is each code cell of a notebook whose `source` is missing
    /// or not text (at the cell: the other cells are checked).
    ///
    /// ## Why is this risky?
    /// A file that is silently skipped is a file whose crashes nobody looked for. Reporting it
    /// keeps "no findings" honest.
    ///
    /// ## Example
    /// A `model.py` that is really a pickled checkpoint, or a `kernel.cu` readable only by root:
    /// ```text
    /// model.py:1:1: GL002 [warning] file skipped: binary content (NUL byte at offset 12)
    /// ```
    ///
    /// ## Use instead
    /// Rename binary files so they do not carry a source extension, fix the permissions, or
    /// exclude the path with `extend-exclude` in `gpulint.toml`.
    ///
    /// ## References
    /// - Ruff's `E902` io-error, the model for this check:
    ///   <https://docs.astral.sh/ruff/rules/io-error/>
    pub static GL002 = {
        code: "GL002",
        name: "file-skipped",
        lang: RuleLang::Any,
        severity: Severity::Warning,
        summary: "File could not be read or is not source text, and was skipped",
        kinds: &[],
        needles: &[],
        options: &[],
    };
}

declare_rule! {
    /// ## What it does
    /// Says, once per file, that the parser could only partly understand it: some regions are
    /// syntax errors for the grammar (often macros in C++ or CUDA files, or Python 2 code).
    /// Findings whose evidence lies inside such a region are not reported. Shown only with
    /// `--verbose` or when selected explicitly (`--select GL003`).
    ///
    /// A file that ends inside an open bracket, string or comment (cut off, or still being
    /// written) is read up to the start of the statement left open; that statement is the
    /// region reported, and the rest of the file is checked as usual.
    ///
    /// Also says that the analysis of a file stopped before it was complete ("analysis stopped
    /// at line N, in RULE"): the work spent on each file is bounded, in proportion to its size
    /// and counted in units of work (syntax nodes visited, interpreter steps), not in time, so
    /// the same file stops at the same place on every machine. The findings of the rules that
    /// ran before are reported; those of the rule that ran out and of the rules after it are
    /// missing. This one is always shown (unless GL003 is ignored or not selected): without it
    /// an incomplete result would look clean. It should not happen on real code; it means an
    /// analysis was slower than linear on this file, which is worth reporting.
    ///
    /// ## Why is this risky?
    /// It is not a risk of the code itself, but a limit of the check: the regions named were not
    /// analysed, so a clean result says less about them.
    ///
    /// ## Example
    /// ```python
    /// import torch
    ///
    /// def train(model, loader:
    ///     for batch in loader:
    ///         model(batch)
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// import torch
    ///
    /// def train(model, loader):
    ///     for batch in loader:
    ///         model(batch)
    /// ```
    ///
    /// In C++ and CUDA files the usual cause is a macro the grammar cannot know, such as an
    /// instantiation macro called without a trailing `;`. Nothing needs to change in the code;
    /// where the macro allows it, ending the invocation with `;` helps the parser.
    ///
    /// ## References
    /// - tree-sitter error recovery:
    ///   <https://tree-sitter.github.io/tree-sitter/using-parsers/1-getting-started.html>
    pub static GL003 = {
        code: "GL003",
        name: "partially-parsed",
        lang: RuleLang::Any,
        severity: Severity::Info,
        summary: "File only partly understood by the parser; some regions were not analysed",
        kinds: &[],
        needles: &[],
        options: &[],
    };
}
